-- core.lua — loads the C library, dtypes, status checking and source locations.
local ffi = require("ffi")

ffi.cdef(require("moonflow.cdef"))

local M = {}

-- The directory holding this file, to find the library next to the module
-- (installed) or in the checkout's build/ directory.
local here = debug.getinfo(1, "S").source:match("^@(.*)[/\\]") or "."
M.module_dir = here

-- moonflow's own code runs in an environment of its own, which reads the
-- globals through (a user's later print = ... is seen): user_location tells
-- its frames from the user's with getfenv(level), which costs a fifth of
-- debug.getinfo and makes no table. core takes it here, init.lua when it has
-- loaded core, and every other moonflow.* module of this directory through
-- a loader put in front of package.loaders' file searcher (once, however
-- often core is loaded).
local own_env = setmetatable({}, {__index = _G})
M.own_env = own_env
setfenv(1, own_env)

local function own_loader(name)
  local rest = name:match("^moonflow%.(.+)$")
  if not rest then return nil end
  local base = here .. "/" .. rest:gsub("%.", "/")
  for _, path in ipairs({base .. ".lua", base .. "/init.lua"}) do
    local f = io.open(path, "rb")
    if f then
      f:close()
      local chunk, err = loadfile(path)
      if not chunk then error(err, 0) end
      return setfenv(chunk, M.own_env)
    end
  end
  return "\n\tno file '" .. base .. ".lua' (moonflow's loader)"
end
local installed = false
for _, loader in ipairs(package.loaders) do
  if debug.getinfo(loader, "S").source == debug.getinfo(1, "S").source then installed = true end
end
if not installed then table.insert(package.loaders, 2, own_loader) end

-- Source locations -----------------------------------------------------------
-- The first stack frame outside moonflow's own modules: the user's line that
-- built an op, quoted in every error about that op. Code from a file shows
-- its path; code from a string (luajit -e, stdin, a REPL, load()) its short
-- source, such as `[string "..."]:1` or `stdin:3`. C frames and the frames
-- that LuaJIT's tail calls drop (`(tail call)`) have no line and are skipped.
--
-- It runs for every op built, so it asks each frame only for its function and
-- line (debug.getinfo's cheapest question) and keeps per function whether it
-- is moonflow's and the "file:line" strings of its lines: a loop building ops
-- makes no new strings.
local own_prefix = here .. "/"
local getinfo = debug.getinfo
-- function -> false (moonflow's own) or a table line -> "file:line" with
-- [0] = the short source. Weak keys: functions can go.
local lines_of = setmetatable({}, {__mode = "k"})

local function lines_for(fn)
  local info = getinfo(fn, "S")
  local lines = info.source:sub(2, #own_prefix + 1) ~= own_prefix and {[0] = info.short_src}
  lines_of[fn] = lines
  return lines
end

-- getfenv raises past the last frame, where getinfo returns nil, so the
-- walk asks getfenv only while a frame of another kind is sure to lie below:
-- in the main thread the stack of a script ends in the C frame of the host
-- that ran it. In a coroutine, and once the walk has passed a C frame, it
-- asks getinfo alone. (Not covered: a C host that lua_pcalls a moonflow
-- function itself on the main thread, outside any C function: the walk
-- would pass the last frame. Hosts run Lua code that calls moonflow.) (A pcall per frame would guard every case but doubles
-- the cost of the walk: it keeps LuaJIT from compiling the loops that build.)
local running = coroutine.running

function M.user_location()
  local fenv_safe = running() == nil
  for level = 3, 50 do
    if not (fenv_safe and getfenv(level) == own_env) then
      local info = getinfo(level, "fl")
      if not info then break end
      local line = info.currentline
      if line <= 0 then
        fenv_safe = false  -- a C frame: it may be the last
      else
        local fn = info.func
        local lines = lines_of[fn]
        if lines == nil then lines = lines_for(fn) end
        if lines then
          local where = lines[line]
          if not where then
            where = lines[0] .. ":" .. line
            lines[line] = where
          end
          return where
        end
      end
    end
  end
  return "?"
end

-- Errors ---------------------------------------------------------------------
-- The one way moonflow's Lua code raises an error: fail(msg) raises
-- "msg (at file:line)", the user's line (user_location) after the message,
-- as the engine's own messages give it (src/graph.c: "Reshape: ... (at
-- file:line)"), whatever depth of moonflow's calls found the fault. msg
-- names the function or op first and then what is wrong, with the values,
-- dtypes and shapes involved: "tf.reshape: shape[2] must be an integer, got
-- x". A message that ends naming a line so already (a fault found deeper,
-- passed on with more words in front) is raised as it is: one line per
-- message, the innermost. Errors caught only to clean up are raised again
-- unchanged with error(err, 0).
function M.fail(msg)
  msg = tostring(msg)
  local where = M.user_location()
  if where == "?" or msg:find(" %(at [^()]*%)$") then error(msg, 0) end
  error(msg .. " (at " .. where .. ")", 0)
end

local function load_library()
  local candidates = {}
  if os.getenv("MOONFLOW_LIB") then candidates[#candidates + 1] = os.getenv("MOONFLOW_LIB") end
  candidates[#candidates + 1] = here .. "/libmoonflow.so"
  candidates[#candidates + 1] = here .. "/../../build/libmoonflow.so"
  local errors = {}
  for _, path in ipairs(candidates) do
    local f = io.open(path, "rb")
    if f then
      f:close()
      local ok, lib = pcall(ffi.load, path)
      if ok then return lib, path end
      errors[#errors + 1] = tostring(lib)
    else
      errors[#errors + 1] = path .. ": not found"
    end
  end
  M.fail("moonflow: cannot load libmoonflow.so (run `make` first):\n  " .. table.concat(errors, "\n  "))
end

M.C, M.library_path = load_library()
local C = M.C

-- dtypes ---------------------------------------------------------------------
local DType = {}
DType.__index = DType
DType.__tostring = function(d) return "<dtype: '" .. d.name .. "'>" end

M.dtypes = {}      -- by name
M.by_enum = {}     -- by C enum value
local function dtype(name, enum, ctype, is_float, is_int)
  local d = setmetatable({name = name, enum = enum, ctype = ctype, size = tonumber(C.mf_dtype_size(enum)),
                          is_floating = is_float, is_integer = is_int,
                          ptr_ctype = ffi.typeof(ctype .. "*")}, DType)
  M.dtypes[name] = d
  M.by_enum[enum] = d
  return d
end
dtype("float32", C.MF_FLOAT32, "float", true, false)
dtype("float64", C.MF_FLOAT64, "double", true, false)
dtype("int32", C.MF_INT32, "int32_t", false, true)
dtype("int64", C.MF_INT64, "int64_t", false, true)
dtype("bool", C.MF_BOOL, "bool", false, false)
dtype("uint8", C.MF_UINT8, "uint8_t", false, true)
-- Strings (byte strings, Lua strings in and out): elements are mf_tstring,
-- read through C.mf_tensor_string (array.lua).
dtype("string", C.MF_STRING, "mf_tstring", false, false)
M.DType = DType

-- Accepts a DType or its name ("float32"); errors on anything else.
function M.as_dtype(d, what)
  if getmetatable(d) == DType then return d end
  if type(d) == "string" and M.dtypes[d] then return M.dtypes[d] end
  M.fail((what or "dtype") .. ": expected a dtype such as tf.float32, got " .. tostring(d))
end

-- status ---------------------------------------------------------------------
-- One status object per library load: every call finishes with it before the
-- next starts (the engine is single-threaded from Lua's side).
M.status = ffi.gc(C.mf_status_new(), C.mf_status_free)

-- Raises the status message as a Lua error when a call failed. Errors of
-- ops name the line that built the op already; check_here adds the user's
-- line (fail) for the failures no op explains (a value too large to allocate,
-- a bad scope name).
function M.check(status)
  local s = status or M.status
  if C.mf_status_code(s) ~= 0 then error(ffi.string(C.mf_status_message(s)), 0) end
end
function M.check_here(status)
  local s = status or M.status
  if C.mf_status_code(s) ~= 0 then M.fail(ffi.string(C.mf_status_message(s))) end
end

-- Buffers for passing lists of ports/ops/values to C.
M.ports = ffi.typeof("mf_output[?]")
M.op_ptrs = ffi.typeof("mf_op*[?]")
M.value_ptrs = ffi.typeof("mf_tensor*[?]")
M.dims_buffer = ffi.typeof("int64_t[?]")

return M
