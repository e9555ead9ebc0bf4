-- args.lua — argument handling for every module (DESIGN §3): required
-- arguments are positional; optional ones either follow positionally in
-- TensorFlow's order or come as one trailing table of named options. A table
-- with an array part is a list; a table with only string keys is an options
-- table. Errors are raised with core.fail (the function's name, what is
-- wrong, the user's line).
local core = require("moonflow.core")

local fail = core.fail

local M = {}

-- A plain Lua table: no metatable (not a tensor, array, dtype, ...).
function M.is_plain(x) return type(x) == "table" and getmetatable(x) == nil end

-- A plain table with string keys only is an options table; an empty table is
-- an empty list, or with `empty_too` an empty options table.
function M.is_options(x, empty_too)
  return M.is_plain(x) and x[1] == nil and (empty_too or next(x) ~= nil)
end

-- A value for an error message: lists as {1, 2}.
function M.show(v)
  if not M.is_plain(v) then return tostring(v) end
  local parts = {}
  for i, x in ipairs(v) do parts[i] = M.show(x) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- A value of the wrong kind, for an error message.
function M.describe(v)
  local kind = type(v)
  if kind == "string" then return string.format("the string %q", v) end
  if kind == "nil" or kind == "number" or kind == "boolean" then return tostring(v) end
  if kind == "table" and getmetatable(v) and getmetatable(v).__tostring then return tostring(v) end
  return "a " .. kind
end

-- The parser ---------------------------------------------------------------------
-- options(fname, names, ...): the optional arguments of `fname` (the varargs
-- after its required ones), given positionally in TensorFlow's order
-- (`names`) and/or as one trailing options table, returned by name. Every
-- function parses its options with it; what differs between functions is
-- their option set, `names`, a list of names with these fields:
--   positional  how many of the names may come positionally (default: all)
--   empty       an empty trailing table is an (empty) options table; without
--               it, {} is a positional value (an empty list: an axis list, a
--               perm, a shape)
--   rest        keys not in names are returned in a second table (to pass
--               on) instead of refused
-- Trailing nils are not arguments. An unknown key, an option given both
-- positionally and by name, and more positional arguments than allowed are
-- errors naming fname.
local function listed(names, k)
  for _, name in ipairs(names) do if name == k then return true end end
  return false
end

function M.options(fname, names, ...)
  local n = select("#", ...)
  while n > 0 and select(n, ...) == nil do n = n - 1 end
  local opts, rest = {}, names.rest and {} or nil
  local last = n > 0 and select(n, ...) or nil
  if M.is_options(last, names.empty) then
    for k, v in pairs(last) do
      if listed(names, k) then opts[k] = v
      elseif rest then rest[k] = v
      else
        fail(string.format("%s: unknown option '%s' (expected one of: %s)", fname, tostring(k),
                           table.concat(names, ", ")))
      end
    end
    n = n - 1
  end
  local positional = names.positional or #names
  if n > positional then
    fail(string.format("%s: too many arguments (%d optional ones given, at most %d); pass the rest in an " ..
                       "options table", fname, n, positional))
  end
  for i = 1, n do
    local v = select(i, ...)
    if v ~= nil then
      if opts[names[i]] ~= nil then
        fail(fname .. ": '" .. names[i] .. "' is given both positionally and as an option")
      end
      opts[names[i]] = v
    end
  end
  return opts, rest
end

-- The option set of most op wrappers' last argument: an op name, given as a
-- string or as {name=}. name_of(opt, fname) is options(fname, {"name"}, opt).name
-- without the tables, for the wrappers that build one op per call.
function M.name_of(opt, fname)
  if type(opt) ~= "table" then return opt end
  for k in pairs(opt) do
    if k ~= "name" then
      fail(string.format("%s: unknown option '%s' (expected one of: name)", fname or "op", tostring(k)))
    end
  end
  return opt.name
end

-- The argument a bad value came in ------------------------------------------------
-- An error found deep inside a call (converting a value to a tensor, say) names
-- the API function the user called and its parameter holding the value. Both
-- are read off the call stack: the nearest frame running a function of the tf
-- table (init.lua registers it) and the parameter whose value it is, so no
-- wrapper needs to pass its name down.
local api, api_names

function M.register_api(tf) api, api_names = tf, nil end

-- Other names of functions that have a TensorFlow 1.x name too (tf.mul,
-- tf.sub: op modules add them); errors name the function by its 1.x name.
M.secondary_names = {}

local function before(a, b)
  local sa, sb = M.secondary_names[a] or false, M.secondary_names[b] or false
  if sa ~= sb then return sb end
  return a < b
end

-- Function -> "tf.name", breadth first (tf.add wins over tf.math.add); the
-- op wrappers are found through tf's __index table.
local function names_of_api()
  local names, seen = {}, {}
  local level = {{api, "tf"}, {getmetatable(api).__index, "tf"}}
  while #level > 0 do
    local next_level = {}
    for _, entry in ipairs(level) do
      local t, prefix = entry[1], entry[2]
      local keys = {}
      for k in pairs(t) do if type(k) == "string" then keys[#keys + 1] = k end end
      table.sort(keys, before)  -- the same name whatever the hash order
      for _, k in ipairs(keys) do
        local v = t[k]
        if type(v) == "function" and not names[v] then names[v] = prefix .. "." .. k
        elseif M.is_plain(v) and not seen[v] then
          seen[v] = true
          next_level[#next_level + 1] = {v, prefix .. "." .. k}
        end
      end
    end
    level = next_level
  end
  return names
end

-- The name under which the API knows function fn ("tf.matmul"), or nil.
function M.api_name(fn)
  if not api then return nil end
  api_names = api_names or names_of_api()
  return api_names[fn]
end

-- The API function the user called that called `callee` (which may call API
-- functions itself), the nearest one on the stack above callee's frame:
-- its name ("tf.matmul") and stack level; nil when there is none.
local function api_caller(callee)
  if not api then return nil end
  api_names = api_names or names_of_api()
  local above = false
  for level = 3, 60 do
    local info = debug.getinfo(level, "f")
    if not info then break end
    local fname = above and api_names[info.func]
    if fname then return fname, level - 1 end  -- (level - 1: as seen from the caller)
    above = above or info.func == callee
  end
end
function M.api_caller(callee) return (api_caller(callee)) end

-- The API function a value was handed to (through `callee`, as api_caller)
-- and the name of its parameter holding it ("tf.matmul", "a"); the name
-- alone when no parameter holds it (an element of a list); `fallback` when
-- no API function is there.
function M.argument_of(value, callee, fallback)
  local fname, level = api_caller(callee)
  if not fname then return fallback end
  for i = 1, debug.getinfo(level, "u").nparams do
    local pname, v = debug.getlocal(level, i)
    if rawequal(v, value) or (v ~= v and value ~= value) then return fname, pname end  -- NaN: itself
  end
  return fname
end

-- Checks ----------------------------------------------------------------------------
function M.is_integer(v) return type(v) == "number" and v % 1 == 0 end

function M.int_arg(v, fname, what)
  if not M.is_integer(v) then
    fail(string.format("%s: %s must be an integer, got %s", fname, what, M.show(v)))
  end
  return v
end

-- A Lua list of integers, checked, for an ints attribute; with `scalar_ok` a
-- single number counts as a one-element list.
function M.int_list(v, fname, what, scalar_ok)
  if scalar_ok and type(v) == "number" then v = {v} end
  if not M.is_plain(v) then
    fail(string.format("%s: %s must be %s, got %s", fname, what,
                       scalar_ok and "an integer or a Lua list of integers" or "a Lua list of integers",
                       tostring(v)))
  end
  for i, x in ipairs(v) do
    if not M.is_integer(x) then
      fail(string.format("%s: %s[%d] must be an integer, got %s", fname, what, i, tostring(x)))
    end
  end
  return v
end

-- nil or a boolean.
function M.check_bool(v, fname, what)
  if v ~= nil and type(v) ~= "boolean" then
    fail(string.format("%s: %s must be a boolean, got %s", fname, what, M.show(v)))
  end
  return v
end

return M
