-- vecmath_spec.lua — accuracy of the vectorized float32 exp, log, log1p,
-- expm1 and tanh (src/kernels/vecmath.h) through the ops that use them,
-- measured in ulp against libm's double-precision results over floats
-- spread across their whole range by bit pattern; special values; and the
-- same bits whatever the thread count or fusion.
local tf = require("moonflow")
local ffi = require("ffi")

ffi.cdef [[
double log1p(double x);
double expm1(double x);
int memcmp(const void *a, const void *b, size_t n);
]]

local bits = ffi.new("union { uint32_t u; float f; }")
local function float_of_bits(u)
  bits.u = u
  return bits.f
end
local function to_float(x) return tonumber(ffi.new("float", x)) end

-- Every `stride`th float32 by bit pattern, both signs, from 0 to infinity.
-- NaNs are left out: LuaJIT takes a NaN number with a payload for a tagged
-- value (NaN is checked on its own below).
local function sample(stride)
  local values = {}
  for u = 0, 0xffffffff, stride do
    if u % 0x80000000 <= 0x7f800000 then values[#values + 1] = float_of_bits(u) end
  end
  return values
end

-- The error of float result `got` in units in the last place of the float
-- nearest to the double `ref`: 0 when both are the same infinity or NaN.
local function ulps(got, ref)
  if ref ~= ref then return got ~= got and 0 or math.huge end
  local rf = to_float(ref)
  if rf == math.huge or rf == -math.huge then return got == rf and 0 or math.huge end
  if got ~= got then return math.huge end
  local _, e = math.frexp(ref)
  return math.abs(got - ref) / 2 ^ math.max(e - 24, -149)
end

-- fn applied by the op to xs (float32): the largest error and where.
local function worst(op, ref, xs)
  local x = tf.placeholder(tf.float32, {#xs})
  local a = tf.Array.new(tf.float32, {#xs})
  for i = 1, #xs do a:data()[i - 1] = xs[i] end
  local y = tf.Session():run(op(x), {[x] = a})
  local max, at = 0, nil
  for i = 1, #xs do
    local u = ulps(y:data()[i - 1], ref(xs[i]))
    if u > max then max, at = u, xs[i] end
  end
  return max, at
end

local function sigmoid(x)
  if x >= 0 then return 1 / (1 + math.exp(-x)) end
  local e = math.exp(x)
  return e / (1 + e)
end

describe("vectorized float32 math", function()
  local xs = sample(16411)
  -- Bounds: what the functions reach (vecmath.h) with a little room; all
  -- within TensorFlow's float32 tolerance for these ops (rtol 1e-6 = 8 ulp).
  local cases = {
    {"exp", tf.exp, math.exp, 1},
    {"log", tf.math.log, math.log, 1},
    {"log1p", tf.math.log1p, ffi.C.log1p, 3},
    {"tanh", tf.tanh, math.tanh, 2},
    {"sigmoid", tf.sigmoid, sigmoid, 3},
    {"expm1", tf.math.expm1, ffi.C.expm1, 3},
    {"elu (expm1 below 0)", tf.nn.elu, function(v) return v < 0 and ffi.C.expm1(v) or v end, 3},
    {"softplus", tf.nn.softplus, function(v) return math.max(v, 0) + ffi.C.log1p(math.exp(-math.abs(v))) end, 3},
  }
  for _, case in ipairs(cases) do
    local name, op, ref, bound = case[1], case[2], case[3], case[4]
    it(string.format("%s is within %d ulp of libm's double result", name, bound), function()
      local max, at = worst(op, ref, xs)
      assert(max <= bound, string.format("%s: %.3f ulp at %a", name, max, at or 0))
    end)
  end

  it("gives libm's special values", function()
    local inf, nan = math.huge, 0 / 0
    local function run(op, values)
      return tf.Session():run(op(tf.constant(values, tf.float32))):totable()
    end
    assert.same({inf, 0, 1, 0}, run(tf.exp, {inf, -inf, 0, -200}))
    assert.is_true(run(tf.exp, {nan})[1] ~= run(tf.exp, {nan})[1])
    local logs = run(tf.math.log, {0, -0.0, inf, 1, -1, nan})
    assert.same({-inf, -inf, inf, 0}, {logs[1], logs[2], logs[3], logs[4]})
    assert.is_true(logs[5] ~= logs[5] and logs[6] ~= logs[6])
    assert.same({-inf, inf, 0}, {unpack(run(tf.math.log1p, {-1, inf, 0}), 1, 3)})
    assert.is_true(run(tf.math.log1p, {-2})[1] ~= run(tf.math.log1p, {-2})[1])
    assert.same({1, -1, 1, -1, 0}, run(tf.tanh, {inf, -inf, 100, -100, 0}))
    assert.same({-1, -1}, run(tf.nn.elu, {-inf, -200}))
    -- exp's subnormal results, rounded once: exp(-100) = 3.7200760e-44 is 26.55 * 2^-149.
    assert.equal(27 * 2 ^ -149, run(tf.exp, {-100})[1])
    assert.equal(to_float(math.exp(to_float(88.7))), run(tf.exp, {88.7})[1])
    assert.same({inf}, run(tf.exp, {88.8}))
  end)

  it("gives the same bits on any thread count, fused or not", function()
    local n = 300001  -- chunks and tiles start at odd places; a scalar tail
    local function run(config)
      local g = tf.Graph()
      return g:as_default(function()
        local x = tf.range(0, n, 1, tf.float32) * 0.0007 - 100
        local ys = {tf.exp(x * 0.9), tf.math.log(x + 101), tf.math.log1p(x * 0.01 + 0.9), tf.nn.elu(x * 0.1),
                    tf.tanh(x * 0.5 + 0.25) * 3, tf.sigmoid(x), tf.nn.softplus(x * 0.2)}
        config.graph = g
        return tf.Session(config):run(ys)
      end)
    end
    local one = run({intra_op_parallelism_threads = 1, elementwise_fusion = false})
    for _, config in ipairs({{intra_op_parallelism_threads = 3}, {intra_op_parallelism_threads = 2,
                                                                  elementwise_fusion = false}}) do
      local other = run(config)
      for k = 1, #one do
        assert.equal(0, ffi.C.memcmp(one[k]:data(), other[k]:data(), n * 4))
      end
    end
  end)
end)
