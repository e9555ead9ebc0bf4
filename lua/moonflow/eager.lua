-- eager.lua — tf.Array values as operands, computed at once as NumPy arrays
-- are: `tf.array({1, 2}) + 1`, `a:matmul(b)`, `a:reduce_sum(0)`, `a:less(b)`,
-- `a[0]` run the op on the arrays and give an array (a scalar result is a Lua
-- number or boolean, as Session:run gives it). The ops are the graph's own
-- (same kernels, broadcasting, dtype rules and errors): each call builds
-- them in a scratch graph, on placeholders of the arrays' dtypes and shapes,
-- and runs them through a callable of a scratch session. A call repeating an
-- op with arrays of the same dtypes and shapes and the same other arguments
-- reuses what it built, so a loop builds nothing after its first step; the
-- scratch graph starts over past MAX_OPS ops.
-- An operand that is a Tensor makes it an ordinary graph op instead (the
-- array becomes a constant in the tensor's graph).
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local S = require("moonflow.session")
local args = require("moonflow.args")

local M = {}

M.MAX_OPS = 20000

local scratch  -- {graph =, session =, calls = {key -> callable}}

local function scratch_space()
  if not scratch or scratch.graph:num_ops() > M.MAX_OPS then
    local g = G.Graph.new()
    scratch = {graph = g, session = S.new(g), calls = {}}
  end
  return scratch
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    if type(a) ~= type(b) then return type(a) < type(b) end
    return a < b
  end)
  return keys
end

-- The part of a call's key for argument v, appending the arrays it holds to
-- `arrays` in the order substitute meets them; nil when v cannot be part of
-- a key (a Tensor: then the call is a graph op; a function).
local function key_of(v, arrays)
  local kind = type(v)
  if Array.is(v) then
    arrays[#arrays + 1] = v
    return "A" .. v.dtype.name .. "[" .. table.concat(v._dims, ",") .. "]"
  end
  if kind == "number" then return string.format("%.17g", v) end
  if kind == "boolean" or kind == "nil" then return tostring(v) end
  if kind == "string" then return string.format("%q", v) end
  if getmetatable(v) == core.DType then return "dtype " .. v.name end
  if not args.is_plain(v) then return nil end
  local parts = {}
  for _, k in ipairs(sorted_keys(v)) do
    if type(k) ~= "number" and type(k) ~= "string" then return nil end
    local part = key_of(v[k], arrays)
    if part == nil then return nil end
    parts[#parts + 1] = tostring(k) .. "=" .. part
  end
  return "{" .. table.concat(parts, ";") .. "}"
end

-- v with each array replaced by the next of `inputs` (in key_of's order).
local function substitute(v, inputs, at)
  if Array.is(v) then
    at.n = at.n + 1
    return inputs[at.n]
  end
  if not args.is_plain(v) then return v end
  local out = {}
  for _, k in ipairs(sorted_keys(v)) do out[k] = substitute(v[k], inputs, at) end
  return out
end

-- The number of ops in the scratch graph (0 before the first call).
function M.scratch_ops() return scratch and scratch.graph:num_ops() or 0 end

-- fn(...) computed at once when its arguments hold arrays and no tensor;
-- fname keys the cache (one per op wrapper).
function M.call(fname, fn, ...)
  local n = select("#", ...)
  local argv = {...}
  local arrays, parts = {}, {fname}
  for i = 1, n do
    local part = key_of(argv[i], arrays)
    if part == nil then return fn(...) end
    parts[#parts + 1] = part
  end
  if #arrays == 0 then return fn(...) end
  local space = scratch_space()
  local key = table.concat(parts, "|")
  local entry = space.calls[key]
  if not entry then
    entry = space.graph:as_default(function()
      local inputs = {}
      for i, a in ipairs(arrays) do inputs[i] = G.placeholder(a.dtype, a:shape()) end
      local at = {n = 0}
      local built = {}
      for i = 1, n do built[i] = substitute(argv[i], inputs, at) end
      local results = {fn(unpack(built, 1, n))}
      return {callable = space.session:make_callable(results, inputs), count = #results}
    end)
    space.calls[key] = entry
  end
  local values = entry.callable(unpack(arrays))
  return unpack(values, 1, entry.count)
end

-- The op wrapper `name` applied eagerly, for Array methods (a:reduce_sum(0)).
-- (No closure is made in M.method itself: returning from a function that
-- made one closes upvalues, which LuaJIT cannot compile, and data pipelines
-- probe Arrays for absent fields on every batch.)
local methods = {}
local function new_method(name, fn)
  return function(...) return M.call(name, fn, ...) end
end
function M.method(name)
  local m = methods[name]
  if m == nil then
    local fn = G.ops[name]
    if fn == nil then return nil end
    m = new_method(name, fn)
    methods[name] = m
  end
  return m
end

-- Arrays take the operators of tensors, and every op wrapper as a method;
-- a[i] is row i of the first axis, 0-based (Array's own fields and methods
-- come first: a:shape() is still its Lua list).
for metamethod, name in pairs(G.binary_operators) do
  Array[metamethod] = function(a, b) return M.call(name, G.ops[name], a, b) end
end
Array.__unm = function(a) return M.call("negative", G.ops.negative, a) end
function Array.__index(a, k)
  local m = Array[k]
  if m ~= nil then return m end
  if type(k) == "number" then return M.call("index_first_axis", G.ops.index_first_axis, a, k) end
  if type(k) == "string" then return M.method(k) end
end

return M
