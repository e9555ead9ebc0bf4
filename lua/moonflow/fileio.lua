-- fileio.lua — durable file writes for checkpoints and graph files.
--
-- write_atomic(path, chunks) writes under a temporary name in the same
-- directory, flushes and fsyncs, then renames over `path`: readers see the
-- old file or the new one, never a part, and a crash mid-write leaves the
-- old file as it was. Chunks are Lua strings or {pointer, nbytes} pairs
-- written straight from memory (no copies into Lua strings).
local ffi = require("ffi")

-- C stdio, for fsync. Declared one by one: another module may have declared some.
for _, decl in ipairs({
  "void *fopen(const char *path, const char *mode);",
  "size_t fwrite(const void *ptr, size_t size, size_t n, void *f);",
  "int fflush(void *f);",
  "int fclose(void *f);",
  "int fileno(void *f);",
  "int fsync(int fd);",
}) do pcall(ffi.cdef, decl) end
local libc = ffi.C

local M = {}

local function fail(msg) error(msg, 0) end

function M.dirname(path) return path:match("^(.*)/[^/]*$") or "." end
function M.basename(path) return path:match("([^/]*)$") end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

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
  local ok = true
  for _, c in ipairs(chunks) do
    local ptr, n
    if type(c) == "string" then ptr, n = c, #c else ptr, n = c[1], c[2] end
    if n > 0 and libc.fwrite(ptr, 1, n, f) ~= n then ok = false; break end
  end
  if ok and libc.fflush(f) ~= 0 then ok = false end
  if ok and libc.fsync(libc.fileno(f)) ~= 0 then ok = false end
  if libc.fclose(f) ~= 0 then ok = false end
  if not ok then
    os.remove(tmp)
    fail("ResourceExhausted: writing " .. path .. " failed (disk full?); the previous file is unchanged")
  end
  local renamed, err = os.rename(tmp, path)
  if not renamed then
    os.remove(tmp)
    fail("Unknown: cannot rename " .. tmp .. " to " .. path .. ": " .. tostring(err))
  end
end

return M
