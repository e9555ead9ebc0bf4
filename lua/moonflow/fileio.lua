-- fileio.lua — durable file writes for checkpoints and graph files.
--
-- write_atomic(path, chunks) writes under a temporary name in the same
-- directory, flushes and fsyncs, then renames over `path`: readers see the
-- old file or the new one, never a part, and a crash mid-write leaves the
-- old file as it was. Chunks are Lua strings or {pointer, nbytes} pairs
-- written straight from memory (no copies into Lua strings).
local ffi = require("ffi")
local fail = require("moonflow.core").fail

-- C stdio, for fsync. Declared one by one: another module may have declared some.
for _, decl in ipairs({
  "void *fopen(const char *path, const char *mode);",
  "size_t fwrite(const void *ptr, size_t size, size_t n, void *f);",
  "int fflush(void *f);",
  "int fclose(void *f);",
  "int fileno(void *f);",
  "int fsync(int fd);",
  "char *strerror(int errnum);",
}) do pcall(ffi.cdef, decl) end
local libc = ffi.C

local M = {}

function M.dirname(path) return path:match("^(.*)/[^/]*$") or "." end
function M.basename(path) return path:match("([^/]*)$") end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

-- The writer of write_atomic's chunks: C's fwrite (a field, so that specs can
-- make a write fail partway through a file).
M._fwrite = libc.fwrite

local tmp_counter = 0
-- A temporary name next to `path` (the same directory, so rename is atomic).
local function temp_name(path)
  tmp_counter = tmp_counter + 1
  return string.format("%s.tmp%d-%d-%d", path, os.time(), tmp_counter, math.random(0, 2 ^ 30))
end

-- Writes the chunks to `path` atomically; errors leave `path` untouched.
function M.write_atomic(path, chunks)
  local tmp = temp_name(path)
  local f = libc.fopen(tmp, "wb")
  if f == nil then
    fail(string.format("NotFound: cannot write %s: the directory %s does not exist or is not writable",
                       path, M.dirname(path)))
  end
  local errno  -- of the first failing call, kept before anything else can change it
  for _, c in ipairs(chunks) do
    local ptr, n
    if type(c) == "string" then ptr, n = c, #c else ptr, n = c[1], c[2] end
    if n > 0 and M._fwrite(ptr, 1, n, f) ~= n then errno = ffi.errno(); break end
  end
  if not errno and libc.fflush(f) ~= 0 then errno = ffi.errno() end
  if not errno and libc.fsync(libc.fileno(f)) ~= 0 then errno = ffi.errno() end
  if libc.fclose(f) ~= 0 and not errno then errno = ffi.errno() end
  if errno then
    os.remove(tmp)
    local why = errno ~= 0 and ffi.string(libc.strerror(errno)) or "an I/O error"
    -- ENOSPC, EFBIG, EDQUOT: out of room; anything else is an I/O failure.
    local code = (errno == 28 or errno == 27 or errno == 122) and "ResourceExhausted" or "Unknown"
    fail(code .. ": writing " .. path .. " failed (" .. why .. "); the previous file is unchanged")
  end
  local renamed, err = os.rename(tmp, path)
  if not renamed then
    os.remove(tmp)
    fail("Unknown: cannot rename " .. tmp .. " to " .. path .. ": " .. tostring(err))
  end
end

return M
