-- hparams.lua — tf.contrib.training.HParams: named, typed hyperparameters,
-- overridden from a "name=value,..." string (a command-line flag), a JSON
-- object or a table.
--
-- A hyperparameter's type is fixed when it is added, from its value as in
-- TensorFlow: a boolean is "bool", a string "str", a whole number "int" and
-- any other number "float" (Lua cannot tell 1 from 1.0: `types` names the
-- type where the value does not say it), a non-empty list of one of these a
-- list of that type ("float" when any number in it has a fraction). Values
-- set later are checked against it with TensorFlow's words: an int
-- hyperparameter refuses 0.5 ("Could not cast hparam ...") and "0.5" when
-- parsed ("Could not parse hparam ..."), a float one takes 3 as 3.0.
--
-- The values are the object's own fields (hp.learning_rate), as TensorFlow's
-- attributes; the types live beside the object, so the methods and the
-- values do not share a table (a name that would hide a method is refused:
-- "Hyperparameter name is reserved").
local core = require("moonflow.core")
local args = require("moonflow.args")
local json = require("moonflow.json")

local fail = core.fail

local HParams = {}
HParams.__index = HParams

-- hparams -> {name = {type = "int" | "float" | "bool" | "str", list = bool}}
local types_of = setmetatable({}, {__mode = "k"})

local TYPE_NAMES = {int = true, float = true, bool = true, str = true}

-- The type name of one scalar Lua value, or nil when it has none.
local function scalar_type(v)
  if type(v) == "boolean" then return "bool" end
  if type(v) == "string" then return "str" end
  if type(v) == "number" then return v % 1 == 0 and "int" or "float" end
end

-- The type of a value given when adding a hyperparameter: {type=, list=}.
local function infer(name, value, declared, fname)
  if declared ~= nil and not TYPE_NAMES[declared] then
    fail(string.format("%s: the type of '%s' must be \"int\", \"float\", \"bool\" or \"str\", got %s", fname, name,
                       args.describe(declared)))
  end
  if args.is_plain(value) then
    if value[1] == nil then fail(fname .. ": ValueError: Multi-valued hyperparameters cannot be empty: " .. name) end
    local t = scalar_type(value[1])
    for i, v in ipairs(value) do
      local ti = scalar_type(v)
      if ti == nil or (ti ~= t and not (ti == "float" and t == "int") and not (ti == "int" and t == "float")) then
        fail(string.format("%s: ValueError: hyperparameter '%s' mixes types: element %d is %s", fname, name, i,
                           args.describe(v)))
      end
      if ti == "float" then t = "float" end
    end
    return {type = declared or t, list = true}
  end
  local t = scalar_type(value)
  if not t then
    fail(string.format("%s: ValueError: Unsupported parameter type for '%s': %s (numbers, booleans, strings and " ..
                       "lists of them are)", fname, name, args.describe(value)))
  end
  return {type = declared or t, list = false}
end

-- One scalar value cast to type t, TensorFlow's _cast_to_type_if_compatible:
-- no number to string or back, no boolean to number or back, no fraction to int.
local function cast(name, t, v, fname)
  local vt = scalar_type(v)
  local ok = vt == t or (t == "float" and vt == "int")
  if not ok then
    fail(string.format("%s: ValueError: Could not cast hparam '%s' of type '%s' from value %s", fname, name, t,
                       args.describe(v)))
  end
  return v
end

-- hp:set_hparam(name, value): one hyperparameter's new value, checked.
function HParams:set_hparam(name, value)
  local t = types_of[self][name]
  if not t then fail("HParams:set_hparam: KeyError: no hyperparameter '" .. tostring(name) .. "'") end
  if args.is_plain(value) then
    if not t.list then fail("HParams:set_hparam: ValueError: Must not pass a list for single-valued parameter: " .. name) end
    local list = {}
    for i, v in ipairs(value) do list[i] = cast(name, t.type, v, "HParams:set_hparam") end
    rawset(self, name, list)
  else
    if t.list then fail("HParams:set_hparam: ValueError: Must pass a list for multi-valued parameter: " .. name .. ".") end
    rawset(self, name, cast(name, t.type, value, "HParams:set_hparam"))
  end
end

-- hp:add_hparam(name, value, type): a new hyperparameter; `type` ("int",
-- "float", "bool", "str") where the value alone does not say it.
function HParams:add_hparam(name, value, declared)
  if type(name) ~= "string" or not name:match("^[%a][%w_]*$") then
    fail("HParams:add_hparam: ValueError: a hyperparameter name is a letter followed by letters, digits and _, got " ..
         args.describe(name))
  end
  if HParams[name] ~= nil or rawget(self, name) ~= nil then
    fail("HParams:add_hparam: ValueError: Hyperparameter name is reserved: " .. name)
  end
  local t = infer(name, value, declared, "HParams:add_hparam")
  types_of[self][name] = t
  local ok, err = pcall(self.set_hparam, self, name, value)
  if not ok then
    types_of[self][name] = nil
    error(err, 0)
  end
end

-- hp:del_hparam(name)
function HParams:del_hparam(name)
  if types_of[self][name] then
    types_of[self][name] = nil
    rawset(self, name, nil)
  end
end

-- The hyperparameters' names, sorted.
local function names(self)
  local out = {}
  for name in pairs(types_of[self]) do out[#out + 1] = name end
  table.sort(out)
  return out
end

-- hp:values(): {name = value} (lists copied).
function HParams:values()
  local out = {}
  for name in pairs(types_of[self]) do
    local v = self[name]
    if type(v) == "table" then v = {unpack(v)} end
    out[name] = v
  end
  return out
end

-- hp:get(name, default): the value, or default when there is no such hyperparameter.
function HParams:get(name, default)
  if types_of[self][name] then return self[name] end
  return default
end

-- The parse syntax, TensorFlow's parse_values: name=value pairs separated
-- by commas; a list value in brackets, its elements separated by commas or
-- spaces; bool values true, false or an integer.
local function parse_scalar(t, s)
  if t == "str" then return s end
  if t == "bool" then
    if s == "true" then return true elseif s == "false" then return false end
    local n = s:match("^%s*[+-]?%d+%s*$") and tonumber(s)
    if n then return n ~= 0 end
    return nil
  end
  local n = tonumber(s)
  if not n or s:match("^%s*0[xX]") or n ~= n then return nil end
  if t == "int" then
    if not s:match("^%s*[+-]?%d+%s*$") then return nil end
    return n
  end
  return n
end

local function parse_values(self, values)
  local out, order = {}, {}
  local pos, n = 1, #values
  while pos <= n do
    local name, after = values:match("^([%a][%w_]*)%s*=%s*()", pos)
    if not name then fail("HParams:parse: ValueError: Malformed hyperparameter value: " .. values:sub(pos)) end
    local t = types_of[self][name]
    if not t then fail("HParams:parse: ValueError: Unknown hyperparameter type for " .. name) end
    local function parse_fail(value)
      fail(string.format("HParams:parse: ValueError: Could not parse hparam '%s' of type '%s' with value '%s' in %s",
                         name, t.type, value, values))
    end
    local value, next_pos
    local inner, close = values:match("^%[([^%]]*)%]()", after)
    if inner then
      value = {}
      for e in inner:gmatch("[^ ,]+") do
        local v = parse_scalar(t.type, e)
        if v == nil then parse_fail(inner) end
        value[#value + 1] = v
      end
      next_pos = close
    else
      local raw, stop = values:match("^([^,%[]*)()", after)
      if raw == "" and values:sub(stop, stop) == "[" then
        fail("HParams:parse: ValueError: Malformed hyperparameter value: " .. values:sub(pos))
      end
      value = parse_scalar(t.type, raw)
      if value == nil then parse_fail(raw) end
      next_pos = stop
    end
    if next_pos <= n then
      if values:sub(next_pos, next_pos) ~= "," then
        fail("HParams:parse: ValueError: Malformed hyperparameter value: " .. values:sub(pos))
      end
      next_pos = next_pos + 1
    end
    if out[name] == nil then order[#order + 1] = name end
    out[name] = value
    pos = next_pos
  end
  return out, order
end

-- Sets every value of map (checked first, all of them, so a bad one changes nothing).
local function set_from_map(self, map, order, fname)
  for _, name in ipairs(order) do
    local t, value = types_of[self][name], map[name]
    if not t then fail(fname .. ": KeyError: no hyperparameter '" .. tostring(name) .. "'") end
    if args.is_plain(value) and not t.list then
      fail(fname .. ": ValueError: Must not pass a list for single-valued parameter: " .. name)
    elseif not args.is_plain(value) and t.list then
      fail(fname .. ": ValueError: Must pass a list for multi-valued parameter: " .. name .. ".")
    end
    for _, v in ipairs(t.list and value or {value}) do cast(name, t.type, v, fname) end
  end
  for _, name in ipairs(order) do self:set_hparam(name, map[name]) end
  return self
end

-- hp:parse("lr=0.1,layers=3"): overrides from a string; returns hp.
function HParams:parse(values)
  if type(values) ~= "string" then fail("HParams:parse: values must be a string, got " .. args.describe(values)) end
  local map, order = parse_values(self, values)
  return set_from_map(self, map, order, "HParams:parse")
end

local function sorted_keys(map, fname)
  local order = {}
  for k in pairs(map) do
    if type(k) ~= "string" then fail(fname .. ": hyperparameter names are strings, got " .. args.describe(k)) end
    order[#order + 1] = k
  end
  table.sort(order)
  return order
end

-- hp:override_from_dict({name = value}): returns hp.
function HParams:override_from_dict(map)
  if not args.is_plain(map) then fail("HParams:override_from_dict: a table {name = value} is required") end
  return set_from_map(self, map, sorted_keys(map, "HParams:override_from_dict"), "HParams:override_from_dict")
end

-- hp:to_json() and hp:parse_json(text).
function HParams:to_json() return json.encode(self:values()) end

function HParams:parse_json(text)
  if type(text) ~= "string" then fail("HParams:parse_json: a JSON string is required") end
  local ok, map = pcall(json.decode, text)
  if not ok or type(map) ~= "table" or json.is_array(map) then
    fail("HParams:parse_json: ValueError: not a JSON object: " .. (ok and text or tostring(map)))
  end
  for k, v in pairs(map) do
    if json.is_array(v) then map[k] = setmetatable(v, nil) end
  end
  return set_from_map(self, map, sorted_keys(map, "HParams:parse_json"), "HParams:parse_json")
end

local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = show(x) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end

function HParams:__tostring()
  local parts = {}
  for _, name in ipairs(names(self)) do parts[#parts + 1] = name .. " = " .. show(self[name]) end
  return "HParams{" .. table.concat(parts, ", ") .. "}"
end

-- tf.contrib.training.HParams({name = value}, {name = type}).
local function new(values, types)
  if values ~= nil and not args.is_plain(values) then
    fail("tf.contrib.training.HParams: values must be a table {name = value}, got " .. args.describe(values))
  end
  if types ~= nil and not args.is_plain(types) then
    fail("tf.contrib.training.HParams: types must be a table {name = \"int\" | \"float\" | \"bool\" | \"str\"}")
  end
  local self = setmetatable({}, HParams)
  types_of[self] = {}
  types = types or {}
  for name in pairs(types) do
    if values == nil or values[name] == nil then
      fail("tf.contrib.training.HParams: a type is given for '" .. tostring(name) .. "', which has no value")
    end
  end
  for _, name in ipairs(sorted_keys(values or {}, "tf.contrib.training.HParams")) do
    self:add_hparam(name, values[name], types[name])
  end
  return self
end

return function(tf)
  tf.contrib = tf.contrib or {}
  tf.contrib.training = tf.contrib.training or {}
  tf.contrib.training.HParams = new
end
