-- Activations of src/ops/nn.c: relu, relu6, leaky_relu, elu, selu, softplus,
-- softsign — values, dtypes, stability, shapes, errors, and their gradient ops
-- (ReluGrad, ...) with first and second derivatives checked by finite differences.
local tf = require("moonflow")
local G = require("moonflow.graph")
local H = require("spec.helpers")
local flat, assert_near_all, run = H.flat, H.assert_near_all, H.run
setup(H.growth_off)
teardown(H.growth_restore)

local exp, log = math.exp, math.log
local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

local function map(list, f)
  local out = {}
  for i, v in ipairs(list) do out[i] = f(v) end
  return out
end

-- Each activation: its tf.nn function, its value and first and second derivatives.
local function expm1(x) return math.abs(x) < 1e-5 and x + x * x / 2 + x * x * x / 6 or exp(x) - 1 end
local function sigmoid(x) return 1 / (1 + exp(-x)) end
local cases = {
  relu = {f = function(x) return math.max(x, 0) end, d1 = function(x) return x > 0 and 1 or 0 end},
  relu6 = {f = function(x) return math.min(math.max(x, 0), 6) end,
           d1 = function(x) return (x > 0 and x < 6) and 1 or 0 end},
  leaky_relu = {f = function(x) return x > 0 and x or 0.2 * x end, d1 = function(x) return x > 0 and 1 or 0.2 end},
  elu = {f = function(x) return x < 0 and expm1(x) or x end, d1 = function(x) return x < 0 and exp(x) or 1 end,
         d2 = function(x) return x < 0 and exp(x) or 0 end},
  selu = {f = function(x) return SELU_SCALE * (x < 0 and SELU_ALPHA * expm1(x) or x) end,
          d1 = function(x) return SELU_SCALE * (x < 0 and SELU_ALPHA * exp(x) or 1) end,
          d2 = function(x) return x < 0 and SELU_SCALE * SELU_ALPHA * exp(x) or 0 end},
  softplus = {f = function(x) return math.max(x, 0) + log(1 + exp(-math.abs(x))) end, d1 = sigmoid,
              d2 = function(x) return sigmoid(x) * (1 - sigmoid(x)) end},
  softsign = {f = function(x) return x / (1 + math.abs(x)) end, d1 = function(x) return 1 / (1 + math.abs(x)) ^ 2 end,
              d2 = function(x) return -2 * (x > 0 and 1 or -1) / (1 + math.abs(x)) ^ 3 end},
}
local names = {"relu", "relu6", "leaky_relu", "elu", "selu", "softplus", "softsign"}
-- Points on both sides of every kink (0, and 6 for relu6), none on one.
local points = {-3, -1.5, -0.25, 0.3, 1, 2.5, 5.5, 6.5, 9}

describe("activations", function()
  before_each(function() tf.reset_default_graph() end)

  it("compute hand-checkable values", function()
    local x = tf.constant({-2, -0.5, 0, 0.5, 2, 8}, tf.float64)
    local r = run({tf.nn.relu(x), tf.nn.relu6(x), tf.nn.leaky_relu(x), tf.nn.leaky_relu(x, 0.1),
                   tf.nn.leaky_relu(x, {alpha = 0.5}), tf.nn.softsign(x)})
    assert.same({0, 0, 0, 0.5, 2, 8}, r[1]:totable())
    assert.same({0, 0, 0, 0.5, 2, 6}, r[2]:totable())
    assert_near_all({-0.4, -0.1, 0, 0.5, 2, 8}, r[3], 1e-15)
    assert_near_all({-0.2, -0.05, 0, 0.5, 2, 8}, r[4], 1e-15)
    assert_near_all({-1, -0.25, 0, 0.5, 2, 8}, r[5], 1e-15)
    assert_near_all({-2 / 3, -1 / 3, 0, 1 / 3, 2 / 3, 8 / 9}, r[6], 1e-15)
    local e = run({tf.nn.elu(x), tf.nn.selu(x), tf.nn.softplus(x)})
    assert_near_all({exp(-2) - 1, exp(-0.5) - 1, 0, 0.5, 2, 8}, e[1], 1e-15)
    assert_near_all(map({-2, -0.5, 0, 0.5, 2, 8}, cases.selu.f), e[2], 1e-15)
    assert_near_all({log(1 + exp(-2)), log(1 + exp(-0.5)), log(2), log(1 + exp(0.5)), log(1 + exp(2)),
                     log(1 + exp(8))}, e[3], 1e-15)
  end)

  it("agree with their definitions in float32 and float64", function()
    local xs = H.uniform(40, 3)
    for i = 1, #xs do xs[i] = xs[i] * 10 end
    for _, dtype in ipairs({tf.float32, tf.float64}) do
      local x = tf.constant(xs, dtype)
      for _, name in ipairs(names) do
        local y = tf.nn[name](x)
        assert.equal(dtype, y.dtype)
        local got = run(y)
        local input = dtype == tf.float32 and flat(run(x)) or xs  -- float32-rounded inputs
        assert_near_all(map(input, cases[name].f), got, dtype == tf.float32 and 2e-7 or 1e-15, name)
      end
    end
  end)

  it("softplus stays finite and exact for large magnitudes", function()
    for _, dtype in ipairs({tf.float32, tf.float64}) do
      local x = tf.placeholder(dtype, {5})
      local y = tf.nn.softplus(x)
      local dx = tf.gradients(y, x)[1]
      local r = run({y, dx}, {[x] = {-1000, -50, 0, 50, 1000}})
      local v, g = flat(r[1]), flat(r[2])
      assert.equal(0, v[1])
      assert.is_true(math.abs(v[2] - exp(-50)) <= 1e-6 * exp(-50))
      assert.is_true(math.abs(v[3] - log(2)) < 1e-7)
      assert.equal(50, v[4])
      assert.equal(1000, v[5])
      assert_near_all({0, exp(-50), 0.5, 1, 1}, g, 1e-7)
    end
  end)

  it("compute in place over inputs that die at them", function()
    local x = tf.placeholder(tf.float64, {4})
    local y = tf.nn.elu(tf.nn.relu6(x * 4) - 3)
    local dx = tf.gradients(y, x)[1]
    local r = run({y, dx}, {[x] = {-1, 0.5, 1, 2}})
    assert_near_all({exp(-3) - 1, exp(-1) - 1, 1, 3}, r[1], 1e-15)
    assert_near_all({0, 4 * exp(-1), 4, 0}, r[2], 1e-15)
  end)

  it("pass NaN through", function()
    local x = tf.constant({0 / 0, -1}, tf.float64)
    for _, name in ipairs(names) do
      local v = flat(run(tf.nn[name](x)))
      assert.is_true(v[1] ~= v[1], name .. " of nan")
    end
  end)

  it("take integers for relu and relu6, as TensorFlow", function()
    for _, dtype in ipairs({tf.int32, tf.int64}) do
      local x = tf.constant({-3, 0, 4, 7}, dtype)
      local r = run({tf.nn.relu(x), tf.nn.relu6(x)})
      assert.same({0, 0, 4, 7}, r[1]:totable())
      assert.same({0, 0, 4, 6}, r[2]:totable())
      assert.equal(dtype, tf.nn.relu(x).dtype)
    end
  end)

  it("keep static shapes with unknown dimensions and run on any batch", function()
    local x = tf.placeholder(tf.float32, {-1, 3})
    local u = tf.placeholder(tf.float32)
    for _, name in ipairs(names) do
      assert.same({-1, 3}, tf.nn[name](x):get_shape():as_list())
      assert.is_nil(tf.nn[name](u):get_shape().dims)
    end
    local r = run(tf.nn.relu(x), {[x] = {{-1, 2, -3}, {4, -5, 6}}})
    assert.same({{0, 2, 0}, {4, 0, 6}}, r:totable())
    assert.same({0, 3}, run(tf.nn.elu(x), {[x] = tf.Array.new(tf.float32, {0, 3})}):shape())
  end)

  it("report dtype errors and bad arguments clearly", function()
    local i = tf.constant({1, 2}, tf.int32)
    for _, name in ipairs({"elu", "selu", "softplus", "softsign", "leaky_relu"}) do
      local err = H.error_of(tf.nn[name], i)
      assert.matches("int32", err)
      assert.matches("tf%.cast", err)
    end
    assert.matches("bool", H.error_of(tf.nn.relu, tf.constant({true})))
    assert.matches("alpha must be a number", H.error_of(tf.nn.leaky_relu, tf.constant({1}), "x"))
    assert.matches("unknown option 'alpah'", H.error_of(tf.nn.leaky_relu, tf.constant({1}), {alpah = 1}))
    local g, f = tf.constant({1, 2}, tf.float64), tf.constant({1, 2, 3}, tf.float64)
    assert.matches("ReluGrad needs one shape", H.error_of(G.op, {"ReluGrad", inputs = {g, f}}))
    assert.matches("use tf.cast", H.error_of(G.op, {"ReluGrad", inputs = {tf.constant({1, 2}), g}}))
    assert.same({0, 2}, run(tf.nn.relu(tf.constant({-1, 2}))):totable())  -- still usable
  end)
end)

describe("gradients of activations", function()
  before_each(function() tf.reset_default_graph() end)

  it("are their TensorFlow gradient ops with hand-checkable values", function()
    local x = tf.constant({-2, 3, 7}, tf.float64)
    local dy = tf.constant({10, 20, 30}, tf.float64)
    local types = {relu = "ReluGrad", relu6 = "Relu6Grad", leaky_relu = "LeakyReluGrad", elu = "EluGrad",
                   selu = "SeluGrad", softplus = "SoftplusGrad", softsign = "SoftsignGrad"}
    for _, name in ipairs(names) do
      local dx = tf.gradients(tf.nn[name](x), x, dy)[1]
      assert.equal(types[name], dx.op.type)
      assert_near_all({10 * cases[name].d1(-2), 20 * cases[name].d1(3), 30 * cases[name].d1(7)}, run(dx), 1e-14, name)
    end
    local dx = tf.gradients(tf.nn.leaky_relu(x, 0.3), x, dy)[1]
    assert_near_all({3, 20, 30}, run(dx), 1e-15)
  end)

  it("pass finite-difference checks in float64", function()
    for _, name in ipairs(names) do
      local x = tf.placeholder(tf.float64, {3, 3})
      H.check_grad(x, {3, 3}, tf.nn[name](x), {3, 3}, {x_init_value = points, delta = 1e-6}, 1e-7)
    end
    local x = tf.placeholder(tf.float64, {9})
    H.check_grad(x, {9}, tf.nn.leaky_relu(x, 0.05), {9}, {x_init_value = points, delta = 1e-6}, 1e-7)
  end)

  it("work in float32", function()
    local x = tf.placeholder(tf.float32, {4})
    local dx = tf.gradients(tf.nn.elu(x), x)[1]
    assert.equal(tf.float32, dx.dtype)
    assert_near_all({exp(-1), exp(-0.5), 1, 1}, run(dx, {[x] = {-1, -0.5, 0.5, 1}}), 1e-6)
  end)

  -- The gradient ops are linear in the incoming gradient; their derivative in
  -- the other input is the activation's second derivative.
  it("have second derivatives", function()
    for _, name in ipairs(names) do
      local x = tf.placeholder(tf.float64, {9})
      local dy = tf.placeholder(tf.float64, {9})
      -- d/d(dy) of dy * f'(x) at fixed x: the gradient op's own rule for its first input.
      local fixed = tf.constant(points, tf.float64)
      H.check_grad(dy, {9}, tf.gradients(tf.nn[name](fixed), fixed, dy)[1], {9}, nil, 1e-8)
      -- d/dx of f'(x): the second derivative, where one flows.
      local d1 = tf.gradients(tf.nn[name](x), x)[1]
      local d2 = tf.gradients(d1, x)[1]
      if cases[name].d2 then
        H.check_grad(x, {9}, d1, {9}, {x_init_value = points, delta = 1e-6}, 1e-7)
        assert_near_all(map(points, cases[name].d2), run(d2, {[x] = points}), 1e-12, name)
      else
        -- piecewise linear: zero almost everywhere, and no gradient flows back
        assert.is_nil(d2)
      end
    end
  end)

  it("keep working through third derivatives of smooth activations", function()
    local x = tf.placeholder(tf.float64, {9})
    local d2 = tf.gradients(tf.gradients(tf.nn.softplus(x), x)[1], x)[1]
    H.check_grad(x, {9}, d2, {9}, {x_init_value = points, delta = 1e-6}, 1e-7)
    local s2 = tf.gradients(tf.gradients(tf.nn.softsign(x), x)[1], x)[1]
    H.check_grad(x, {9}, s2, {9}, {x_init_value = points, delta = 1e-6}, 1e-6)
  end)
end)
