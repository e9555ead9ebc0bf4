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

-- A module's chunk from a file, or in LÖVE from the game's file system (a
-- .love archive or a fused game, where the modules are not files); nil when
-- there is no such file.
local function load_chunk(path)
  local f = io.open(path, "rb")
  if f then
    f:close()
    local chunk, err = loadfile(path)
    if not chunk then error(err, 0) end
    return chunk
  end
  local fs = rawget(_G, "love") and love.filesystem
  if fs and fs.getInfo and fs.getInfo(path, "file") then
    local chunk, err = fs.load(path)
    if not chunk then error(err, 0) end
    return chunk
  end
end

local function own_loader(name)
  local rest = name:match("^moonflow%.(.+)$")
  if not rest then return nil end
  local base = here .. "/" .. rest:gsub("%.", "/")
  for _, path in ipairs({base .. ".lua", base .. "/init.lua"}) do
    local chunk = load_chunk(path)
    if chunk then return setfenv(chunk, M.own_env) end
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
-- in the main thread of the luajit command (and busted) the stack ends in the
-- C frame of the host that ran the script. In a coroutine, and once the walk
-- has passed a C frame, it asks getinfo alone. A C host that runs Lua with
-- lua_pcall (LÖVE, a game engine) may call a moonflow function with no frame
-- below it: the stack that loads moonflow tells which kind of host this is
-- (a Lua chunk or `require` itself at the bottom), and in such a host the
-- walk asks getinfo alone. A pcall around the walk would guard every host
-- but costs a third more per op.
local running = coroutine.running

local function host_ends_stacks_in_c()
  local bottom = 1
  while getinfo(bottom + 1, "") do bottom = bottom + 1 end
  local info = getinfo(bottom, "Sf")
  return info.what == "C" and info.func ~= require
end
local fenv_safe_in_main_thread = host_ends_stacks_in_c()

local function walk(first, fenv_safe)
  for level = first, first + 47 do
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

-- Levels: walk's own frame is 1, user_location's 2, its caller's 3: the
-- caller of that is the first frame that may be the user's. (No tail call:
-- it would drop user_location's frame.)
function M.user_location()
  local where = walk(4, fenv_safe_in_main_thread and running() == nil)
  return where
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

-- Finding the library ----------------------------------------------------------
-- The engine's file name on this system (Windows DLLs from MinGW keep "lib").
local lib_ext = ffi.os == "Windows" and "dll" or ffi.os == "OSX" and "dylib" or "so"
local lib_name = "libmoonflow." .. lib_ext

-- The library is, in order: the file MOONFLOW_LIB names, when set (and
-- only there); the host program itself, when it has moonflow linked in
-- (host_has_engine); else the first of these files that loads: next to these
-- modules (`make install`); in package.cpath's directories, as
-- moonflow/libmoonflow then libmoonflow (a LuaRocks tree has the first); in
-- LÖVE, on the C require path (love.filesystem.getCRequirePath) under the
-- game's save directory, the directory holding the game or fused
-- executable, and the game's own directory, where games ship native
-- libraries (the modules may be inside a .love archive, which no library
-- can be loaded from); the checkout's build/.
local function library_candidates()
  local out = {here .. "/" .. lib_name}
  for template in package.cpath:gmatch("[^;]+") do
    if template:find("?", 1, true) then
      out[#out + 1] = template:gsub("%?", "moonflow/libmoonflow")
      out[#out + 1] = template:gsub("%?", "libmoonflow")
    end
  end
  local fs = rawget(_G, "love") and love.filesystem
  if fs and fs.getCRequirePath then
    local bases = {fs.getSaveDirectory(), fs.getSourceBaseDirectory()}
    if not fs.isFused() then bases[#bases + 1] = fs.getSource() end  -- a game run from its directory
    for _, base in ipairs(bases) do
      for template in fs.getCRequirePath():gmatch("[^;]+") do
        for _, name in ipairs({"moonflow/libmoonflow", "libmoonflow"}) do
          out[#out + 1] = base .. "/" .. template:gsub("%?%?", name .. "." .. lib_ext):gsub("%?", name)
        end
      end
    end
  end
  out[#out + 1] = here .. "/../../build/" .. lib_name
  return out
end

-- The engine linked into the host program itself (a game or app built with
-- libmoonflow.a, exporting its symbols: -rdynamic): ffi.C has its functions.
local function host_has_engine()
  return pcall(function() return ffi.C.mf_version end)
end

local function try_load(path, errors)
  local f = io.open(path, "rb")
  if not f then
    errors[#errors + 1] = path .. ": not found"
    return nil
  end
  f:close()
  local ok, lib = pcall(ffi.load, path)
  if ok then return lib end
  errors[#errors + 1] = tostring(lib)
end

local function load_library()
  local errors = {}
  local env = os.getenv("MOONFLOW_LIB")
  if env then
    local lib = try_load(env, errors)
    if lib then return lib, env end
    M.fail("moonflow: cannot load the library MOONFLOW_LIB names: " .. errors[1])
  end
  if host_has_engine() then return ffi.C, "(the host program)" end
  for _, path in ipairs(library_candidates()) do
    local lib = try_load(path, errors)
    if lib then return lib, path end
  end
  M.fail("moonflow: cannot load " .. lib_name .. " (run `make` first, or set MOONFLOW_LIB to its path); tried:\n  " ..
         table.concat(errors, "\n  "))
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
-- Complex numbers: elements are LuaJIT's complex cdata ("complex float" and
-- "complex double", fields re and im); a Lua number is a complex number with
-- imaginary part 0 (array.lua). real_dtype is the dtype of the parts.
for _, c in ipairs({{"complex64", C.MF_COMPLEX64, "complex float", "float32"},
                    {"complex128", C.MF_COMPLEX128, "complex double", "float64"}}) do
  local d = dtype(c[1], c[2], c[3], false, false)
  d.is_complex, d.real_dtype = true, M.dtypes[c[4]]
  M.dtypes[c[4]].complex_dtype = d
end
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

-- Whether Saver:save writes its files in this process: moonflow.mpi leaves
-- the writing to rank 0 (the other ranks' save returns the path it writes).
M.writes_checkpoints = true

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
