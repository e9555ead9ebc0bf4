-- ops/math.lua — elementwise math wrappers: arithmetic, comparisons, logic, casts.
-- Each wrapper is also registered in `ops` (a Tensor method; the operators
-- + - * / % ^ and unary - find add, subtract, ... there) and in tf.math.
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")

local args = require("moonflow.args")
local name_of = args.name_of

-- Lifts Lua values to constants of the other operand's dtype, in its graph;
-- without a tensor or array to follow, numbers become float32 and booleans bool.
-- `origin`: the user's line, for the constants made here.
local function operands(x, y, origin)
  local ref = G.is_tensor(x) and x or G.is_tensor(y) and y
  if ref then return G.convert(x, ref.dtype, ref.graph, origin), G.convert(y, ref.dtype, ref.graph, origin) end
  local arr = Array.is(x) and x or Array.is(y) and y
  local dtype = arr and arr.dtype
  return G.convert(x, dtype, nil, origin), G.convert(y, dtype, nil, origin)
end

-- Lua name -> op type.
local binary = {
  add = "Add", subtract = "Sub", multiply = "Mul", divide = "Div", floordiv = "FloorDiv",
  mod = "Mod", truncatediv = "TruncateDiv", truncatemod = "TruncateMod", pow = "Pow",
  maximum = "Maximum", minimum = "Minimum",
  equal = "Equal", not_equal = "NotEqual", less = "Less", less_equal = "LessEqual",
  greater = "Greater", greater_equal = "GreaterEqual",
  logical_and = "LogicalAnd", logical_or = "LogicalOr", logical_xor = "LogicalXor",
}
local unary = {
  negative = "Neg", abs = "Abs", sign = "Sign", square = "Square", sqrt = "Sqrt", rsqrt = "Rsqrt",
  exp = "Exp", log = "Log", log1p = "Log1p", sin = "Sin", cos = "Cos", tanh = "Tanh",
  sigmoid = "Sigmoid", floor = "Floor", ceil = "Ceil", round = "Round", logical_not = "LogicalNot",
}
-- TensorFlow's other names for the same functions.
local aliases = {sub = "subtract", mul = "multiply", truediv = "divide", div = "divide", floormod = "mod",
                 neg = "negative"}

return function(tf, ops)
  for fname, op_type in pairs(binary) do
    local who = "tf." .. fname
    ops[fname] = function(x, y, name)
      -- y + 1 builds a constant and the op from one user line: looked up once.
      local origin = core.user_location()
      local a, b = operands(x, y, origin)
      return G.op{op_type, inputs = {a, b}, name = name_of(name, who), origin = origin}
    end
  end
  for fname, op_type in pairs(unary) do
    local who = "tf." .. fname
    ops[fname] = function(x, name)
      return G.op{op_type, inputs = {G.convert(x)}, name = name_of(name, who)}
    end
  end
  for alias, fname in pairs(aliases) do
    ops[alias] = ops[fname]
    args.secondary_names[alias] = true
  end

  -- tf.cast(x, dtype, name | {name=}): x itself when it already has that dtype.
  function ops.cast(x, dtype, name)
    dtype = core.as_dtype(dtype, "tf.cast")
    x = G.convert(x)
    if x.dtype == dtype then return x end
    return G.op{"Cast", inputs = {x}, attrs = {DstT = dtype}, name = name_of(name, "tf.cast")}
  end
  for fname, dtype in pairs({to_float = "float32", to_double = "float64", to_int32 = "int32",
                             to_int64 = "int64"}) do
    ops[fname] = function(x, name) return ops.cast(x, dtype, name) end
  end

  tf.math = tf.math or {}
  for _, names in ipairs({binary, unary, aliases}) do
    for fname in pairs(names) do tf.math[fname] = ops[fname] end
  end
  tf.nn = tf.nn or {}
  tf.nn.sigmoid, tf.nn.tanh = ops.sigmoid, ops.tanh
end
