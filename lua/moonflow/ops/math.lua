-- ops/math.lua — elementwise math wrappers: arithmetic, comparisons, logic, casts.
-- Each wrapper is also registered in `ops` (a Tensor method; the operators
-- + - * / % ^ and unary - find add, subtract, ... there) and in tf.math.
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")

local args = require("moonflow.args")
local name_of = args.name_of
local fail = core.fail

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
  maximum = "Maximum", minimum = "Minimum", squared_difference = "SquaredDifference", atan2 = "Atan2",
  equal = "Equal", not_equal = "NotEqual", less = "Less", less_equal = "LessEqual",
  greater = "Greater", greater_equal = "GreaterEqual",
  logical_and = "LogicalAnd", logical_or = "LogicalOr", logical_xor = "LogicalXor",
}
local unary = {
  negative = "Neg", sign = "Sign", square = "Square", sqrt = "Sqrt", rsqrt = "Rsqrt",
  exp = "Exp", log = "Log", log1p = "Log1p", sin = "Sin", cos = "Cos", tanh = "Tanh",
  sigmoid = "Sigmoid", floor = "Floor", ceil = "Ceil", round = "Round", logical_not = "LogicalNot",
  tan = "Tan", asin = "Asin", acos = "Acos", atan = "Atan", sinh = "Sinh", cosh = "Cosh", asinh = "Asinh",
  acosh = "Acosh", atanh = "Atanh", erf = "Erf", erfc = "Erfc", expm1 = "Expm1", reciprocal = "Reciprocal",
}
-- TensorFlow's other names for the same functions.
local aliases = {sub = "subtract", mul = "multiply", truediv = "divide", floormod = "mod",
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
  -- tf.div(x, y, name): TensorFlow 1.x's Python 2 division, floordiv for
  -- integers (7 / -2 = -4, an integer) and divide for floats.
  function ops.div(x, y, name)
    local a, b = operands(x, y)
    return G.op{a.dtype.is_integer and "FloorDiv" or "Div", inputs = {a, b}, name = name_of(name, "tf.div")}
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

  -- tf.is_nan(x), tf.is_inf(x), tf.is_finite(x): bool tests of each element.
  local function float_arg(fname, x)
    x = G.convert(x)
    if not x.dtype.is_floating then
      fail(string.format("%s: x must be float32 or float64, got %s %s", fname, x.dtype.name, x.name))
    end
    return x
  end
  function ops.is_nan(x, name)
    x = float_arg("tf.is_nan", x)
    return ops.not_equal(x, x, name_of(name, "tf.is_nan"))
  end
  function ops.is_inf(x, name)
    x = float_arg("tf.is_inf", x)
    return ops.equal(ops.abs(x), math.huge, name_of(name, "tf.is_inf"))
  end
  function ops.is_finite(x, name)
    x = float_arg("tf.is_finite", x)
    return ops.less(ops.abs(x), math.huge, name_of(name, "tf.is_finite"))
  end

  -- x / y, x * y, x * log(y) as 0 where their guard is 0 (y for
  -- divide_no_nan and multiply_no_nan, x for xdivy and xlogy), whatever the
  -- other operand is: there x becomes 0 and y 1 before the op, so no inf or
  -- NaN reaches the result or a gradient.
  local function guarded(fname, guard_is_x, f)
    ops[fname] = function(x, y, name)
      local a, b = operands(x, y)
      local guard = guard_is_x and a or b
      local zero = ops.equal(guard, G.convert(0, guard.dtype, guard.graph))
      local safe_a = tf.where_v2(zero, G.convert(0, a.dtype, a.graph), a)
      local safe_b = tf.where_v2(zero, G.convert(1, b.dtype, b.graph), b)
      return f(safe_a, safe_b, name_of(name, "tf.math." .. fname))
    end
    tf.math[fname] = ops[fname]
  end

  -- tf.math.log_sigmoid(x): -softplus(-x), which neither overflows nor loses small values.
  function ops.log_sigmoid(x, name)
    x = float_arg("tf.math.log_sigmoid", x)
    return ops.negative(tf.nn.softplus(ops.negative(x)), name_of(name, "tf.math.log_sigmoid"))
  end

  -- tf.scalar_mul(scalar, x): scalar * x, the scalar in x's dtype.
  function ops.scalar_mul(scalar, x, name)
    local t = G.convert(x)
    local s = G.convert(scalar, t.dtype, t.graph)
    if s:get_shape().ndims ~= 0 then
      fail("tf.scalar_mul: scalar must be a 0-D tensor or a number, got shape " .. tostring(s:get_shape()))
    end
    return ops.multiply(s, t, name_of(name, "tf.scalar_mul"))
  end

  -- Complex numbers. tf.abs gives |x|, ComplexAbs for complex x. tf.complex(real, imag)
  -- pairs float parts of one dtype (broadcasting) into complex64 or complex128;
  -- real, imag, conj and angle take any number, as TensorFlow's: x itself, zeros,
  -- x itself and pi where x < 0 (else 0) for real x.
  function ops.abs(x, name)
    x = G.convert(x)
    return G.op{x.dtype.is_complex and "ComplexAbs" or "Abs", inputs = {x}, name = name_of(name, "tf.abs")}
  end
  function ops.complex(real, imag, name)
    local origin = core.user_location()
    local a, b = operands(real, imag, origin)
    if not a.dtype.complex_dtype or not b.dtype.complex_dtype or a.dtype ~= b.dtype then
      fail(string.format("tf.complex: real and imag must both be float32 or both float64, got %s %s and %s %s",
                         a.dtype.name, a.name, b.dtype.name, b.name))
    end
    return G.op{"Complex", inputs = {a, b}, name = name_of(name, "tf.complex"), origin = origin}
  end
  local function number_arg(fname, x)
    x = G.convert(x)
    if not (x.dtype.is_complex or x.dtype.is_floating or x.dtype.is_integer) then
      fail(string.format("%s: x must be a number tensor, got %s %s", fname, x.dtype.name, x.name))
    end
    return x
  end
  -- {op type, whether a real x gives zeros (else x itself)}
  for fname, spec in pairs({real = {"Real", false}, imag = {"Imag", true}, conj = {"Conj", false}}) do
    local who = "tf.math." .. fname
    ops[fname] = function(x, name)
      x = number_arg(who, x)
      if x.dtype.is_complex then return G.op{spec[1], inputs = {x}, name = name_of(name, who)} end
      if spec[2] then return tf.zeros_like(x, nil, name_of(name, who)) end
      return x
    end
  end
  function ops.angle(x, name)
    x = number_arg("tf.math.angle", x)
    if x.dtype.is_complex then return G.op{"Angle", inputs = {x}, name = name_of(name, "tf.math.angle")} end
    return tf.where_v2(ops.less(x, 0), G.convert(math.pi, x.dtype, x.graph), G.convert(0, x.dtype, x.graph),
                       name_of(name, "tf.math.angle"))
  end

  tf.math = tf.math or {}
  for _, f in ipairs({"is_nan", "is_inf", "is_finite", "log_sigmoid", "scalar_mul", "abs", "complex", "real",
                      "imag", "conj", "angle"}) do
    tf.math[f] = ops[f]
  end
  tf.conj, tf.real, tf.imag, tf.angle = ops.conj, ops.real, ops.imag, ops.angle
  guarded("divide_no_nan", false, ops.divide)
  guarded("multiply_no_nan", false, ops.multiply)
  guarded("xdivy", true, ops.divide)
  guarded("xlogy", true, function(a, b, name) return ops.multiply(a, ops.log(b), name) end)
  for _, names in ipairs({binary, unary, aliases}) do
    for fname in pairs(names) do tf.math[fname] = ops[fname] end
  end
  tf.math.div = ops.div
  tf.nn = tf.nn or {}
  tf.nn.sigmoid, tf.nn.tanh = ops.sigmoid, ops.tanh
end
