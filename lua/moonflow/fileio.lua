-- fileio.lua — durable file writes for checkpoints and graph files, and their errors.
--
-- write_atomic(path, chunks) writes through the engine's crash-safe writer
-- (src/io/file.c): readers see the old file or the new one, never a part, a
-- crash mid-write leaves the old file as it was, and the next write to path
-- removes the temporary file such a crash left. Chunks are Lua strings or
-- {pointer, nbytes} pairs written straight from memory (no copies into Lua
-- strings).
local ffi = require("ffi")
local core = require("moonflow.core")
local C, fail = core.C, core.fail

local M = {}

function M.dirname(path) return path:match("^(.*)/[^/]*$") or "." end
function M.basename(path) return path:match("([^/]*)$") end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

-- TensorFlow's names of the codes that reading and writing files report.
local code_names = {[C.MF_NOT_FOUND] = "NotFound", [C.MF_RESOURCE_EXHAUSTED] = "ResourceExhausted",
                    [C.MF_INVALID_ARGUMENT] = "InvalidArgument", [C.MF_UNKNOWN] = "Unknown",
                    [C.MF_PERMISSION_DENIED] = "PermissionDenied", [C.MF_FAILED_PRECONDITION] = "FailedPrecondition",
                    [C.MF_DATA_LOSS] = "DataLoss", [C.MF_UNIMPLEMENTED] = "Unimplemented"}

-- Raises the error of core.status as "fname: Code: message" (fname: the
-- function reading or writing).
function M.fail_status(fname)
  local code = tonumber(C.mf_status_code(core.status))
  fail(fname .. ": " .. (code_names[code] or "Unknown") .. ": " .. ffi.string(C.mf_status_message(core.status)))
end

-- Writes the chunks to `path` atomically; errors, which name fname (the
-- function writing), leave `path` untouched.
function M.write_atomic(path, chunks, fname)
  local n = #chunks
  local data, sizes = ffi.new("const void *[?]", n), ffi.new("size_t[?]", n)
  for i, c in ipairs(chunks) do
    if type(c) == "string" then data[i - 1], sizes[i - 1] = c, #c
    else data[i - 1], sizes[i - 1] = c[1], c[2] end
  end
  if C.mf_file_write_atomic(path, data, sizes, n, core.status) ~= 0 then M.fail_status(fname) end
end

return M
