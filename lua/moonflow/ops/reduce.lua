-- ops/reduce.lua — reductions (reduce_sum, reduce_mean, …) and matmul.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local fail, options, check_bool = core.fail, args.options, args.check_bool

-- TF 1.x spellings: reduction_indices for axis, keep_dims for keepdims.
local function alias(fname, opts, name, old)
  if opts[old] == nil then return opts[name] end
  if opts[name] ~= nil then fail(fname .. ": Can not specify both '" .. name .. "' and '" .. old .. "'.") end
  return opts[old]
end

-- An axis attribute from a number or a list of numbers; nil stays nil (all axes).
local function axis_list(fname, axis)
  if axis == nil then return nil end
  local list = type(axis) == "table" and getmetatable(axis) == nil and axis or {axis}
  local out = {}
  for i, a in ipairs(list) do
    a = tonumber(a)
    if not a or a % 1 ~= 0 then
      fail(fname .. ": axis must be an integer or a list of integers, got " .. tostring(list[i]))
    end
    out[i] = a
  end
  return out
end

local reduce_options = {"axis", "keepdims", "name", "reduction_indices", "keep_dims"}

local function reduction(op_type, fname)
  return function(x, ...)
    local opts = options(fname, reduce_options, ...)
    local axis = axis_list(fname, alias(fname, opts, "axis", "reduction_indices"))
    local keepdims = check_bool(alias(fname, opts, "keepdims", "keep_dims"), fname, "keepdims")
    local attrs = {keepdims = keepdims or false}
    if axis then attrs.axis = G.attr.ints(axis) end
    return G.op{op_type, inputs = {G.convert(x)}, attrs = attrs, name = opts.name}
  end
end

local reductions = {
  reduce_sum = "Sum", reduce_mean = "Mean", reduce_max = "Max", reduce_min = "Min",
  reduce_prod = "Prod", reduce_any = "Any", reduce_all = "All",
}

-- Two operands in one dtype: a Lua value takes the dtype of the tensor beside it.
local function operands(a, b)
  if G.is_tensor(a) then return a, G.convert(b, a.dtype, a.graph) end
  if G.is_tensor(b) then return G.convert(a, b.dtype, b.graph), b end
  a = G.convert(a)
  return a, G.convert(b, a.dtype, a.graph)
end

-- name comes only as an option.
local matmul_options = {"transpose_a", "transpose_b", "adjoint_a", "adjoint_b", "name", positional = 4}

-- tf.matmul(a, b, transpose_a, transpose_b) or (a, b, {transpose_a=, transpose_b=, name=}).
-- The dtypes are real, so adjoint_a/adjoint_b are transposes too.
local function matmul(a, b, ...)
  local opts = options("tf.matmul", matmul_options, ...)
  local trans = {}
  for _, side in ipairs({"a", "b"}) do
    local t = check_bool(opts["transpose_" .. side], "tf.matmul", "transpose_" .. side)
    local adj = check_bool(opts["adjoint_" .. side], "tf.matmul", "adjoint_" .. side)
    if t and adj then
      fail("tf.matmul: Only one of transpose_" .. side .. " and adjoint_" .. side .. " can be True.")
    end
    trans[side] = (t or adj) and true or false
  end
  a, b = operands(a, b)
  return G.op{"MatMul", inputs = {a, b}, attrs = {transpose_a = trans.a, transpose_b = trans.b},
              name = opts.name}
end

return function(tf, ops)
  tf.math = tf.math or {}
  for fname, op_type in pairs(reductions) do
    ops[fname] = reduction(op_type, "tf." .. fname)
    tf.math[fname] = ops[fname]
  end
  ops.matmul = matmul
  tf.linalg = tf.linalg or {}
  tf.linalg.matmul = matmul
end
