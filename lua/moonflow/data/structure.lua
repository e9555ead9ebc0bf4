-- data/structure.lua — element structures. An element is kept flat (a list
-- of components); its structure is a template: a number (the component's
-- index) or a table of templates with the keys of the structure given (a
-- list stays a list, a map a map).
local Array = require("moonflow.array")
local G = require("moonflow.graph")

local M = {}

-- The structure of template with the values of flat in its places.
local function pack(template, flat)
  if type(template) == "number" then return flat[template] end
  local out = {}
  for k, v in pairs(template) do out[k] = pack(v, flat) end
  return out
end
M.pack = pack

local function is_map(t)
  for k in pairs(t) do if type(k) ~= "number" then return true end end
  return false
end

-- Whether a plain Lua table is a value (nested numbers, booleans or
-- strings) rather than a structure of components.
local function is_value_table(t)
  local v = t
  while type(v) == "table" and getmetatable(v) == nil and not is_map(v) do v = v[1] end
  return type(v) == "number" or type(v) == "boolean" or type(v) == "string" or (v == nil and next(t) == nil)
end

local function is_leaf(x)
  return Array.is(x) or G.is_tensor(x) or type(x) ~= "table" or is_value_table(x)
end

-- The keys of a structure in a fixed order: list positions, then names
-- sorted (as TensorFlow orders a dict's components).
function M.ordered_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) == type(b) then return a < b end
    return type(a) == "number"
  end)
  return keys
end

-- Flattens `value` into `flat`; returns its template.
local function flatten(value, flat)
  if is_leaf(value) then
    flat[#flat + 1] = value
    return #flat
  end
  local template = {}
  for _, k in ipairs(M.ordered_keys(value)) do template[k] = flatten(value[k], flat) end
  return template
end
M.flatten = flatten

-- Calls fn with an element given as its structure: a list spreads into
-- arguments (as TensorFlow spreads tuples), a map or single value is one.
function M.call_structured(fn, template, values)
  local args = pack(template, values)
  if type(template) == "table" and not is_map(template) then return fn(unpack(args, 1, #template)) end
  return fn(args)
end

return M
