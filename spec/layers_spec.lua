-- tf.layers: dense, conv2d, max_pooling2d, average_pooling2d, flatten,
-- batch_normalization, dropout — values by hand, TensorFlow's variable names,
-- sharing through reuse and variable scopes, UPDATE_OPS, gradients by finite
-- differences, and errors that name the function and the Lua line.
local tf = require("moonflow")
local H = require("spec.helpers")

local growth_warnings = tf.hygiene.graph_growth
setup(function() tf.hygiene.graph_growth = false end)
teardown(function() tf.hygiene.graph_growth = growth_warnings end)

local function flat(v)
  if type(v) == "number" then return {v} end
  local out = {}
  local function walk(t) for _, e in ipairs(t) do if type(e) == "table" then walk(e) else out[#out + 1] = e end end end
  walk(tf.Array.is(v) and v:totable() or v)
  return out
end

local function assert_near_all(expected, actual, tol, what)
  local e, a = flat(expected), flat(actual)
  assert.equal(#e, #a, what)
  for i = 1, #e do
    assert(math.abs(e[i] - a[i]) <= tol * math.max(1, math.abs(e[i])),
           ("%s element %d: expected %.17g, got %.17g"):format(what or "", i, e[i], a[i]))
  end
end

local function var_names(list)
  local out = {}
  for i, v in ipairs(list or tf.global_variables()) do out[i] = v.name end
  return out
end

local function initialized_session()
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  return sess
end

-- The Lua line of this file that the next statement is on (for error messages).
local function this_line() return debug.getinfo(2, "l").currentline end

describe("tf.layers.dense", function()
  before_each(function() tf.reset_default_graph() end)

  it("computes activation(x @ kernel + bias) with TensorFlow's names", function()
    local x = tf.placeholder(tf.float64, {-1, 3}, "x")
    local y = tf.layers.dense(x, 2, {kernel_initializer = tf.constant_initializer({1, 2, 3, 4, 5, 6}),
                                    bias_initializer = tf.constant_initializer({0.5, -100})})
    assert.equal("dense/BiasAdd:0", y.name)
    assert.same({-1, 2}, y:get_shape():as_list())
    assert.same({"dense/kernel:0", "dense/bias:0"}, var_names())
    assert.same({"dense/kernel:0", "dense/bias:0"}, var_names(tf.trainable_variables()))
    assert.equal(tf.float64, tf.global_variables()[1].dtype)
    local sess = initialized_session()
    -- kernel [[1, 2], [3, 4], [5, 6]]: [1, 1, 1] -> [9, 12]; [1, 0, -1] -> [-4, -4]
    assert_near_all({{9.5, -88}, {-3.5, -104}}, sess:run(y, {[x] = {{1, 1, 1}, {1, 0, -1}}}), 1e-15)
    local r = tf.layers.dense(x, 2, {activation = tf.nn.relu, use_bias = false,
                                    kernel_initializer = tf.constant_initializer({1, 2, 3, 4, 5, 6})})
    assert.equal("dense_1/Relu:0", r.name)
    assert.same({"dense/kernel:0", "dense/bias:0", "dense_1/kernel:0"}, var_names())
    sess:run(tf.global_variables_initializer())
    assert_near_all({{9, 12}, {0, 0}}, sess:run(r, {[x] = {{1, 1, 1}, {1, 0, -1}}}), 1e-15)
  end)

  it("applies to the last axis of a rank-3 input, with unknown leading dims", function()
    local x = tf.placeholder(tf.float64, {-1, -1, 2})
    local y = tf.layers.dense(x, 3, {kernel_initializer = tf.constant_initializer({1, 0, 2, 0, 1, 3}),
                                    bias_initializer = tf.constant_initializer(1)})
    assert.same({-1, -1, 3}, y:get_shape():as_list())
    local sess = initialized_session()
    -- [a, b] -> [a + 1, b + 1, 2a + 3b + 1]
    local out = sess:run(y, {[x] = {{{1, 2}, {0, 0}}, {{-1, 1}, {2, 0}}}})
    assert.same({2, 2, 3}, out:shape())
    assert_near_all({{{2, 3, 9}, {1, 1, 1}}, {{0, 2, 2}, {3, 1, 5}}}, out, 1e-15)
  end)

  it("shares variables with reuse, variable scopes and templates", function()
    local x = tf.placeholder(tf.float32, {-1, 3})
    local a = tf.layers.dense(x, 4, {name = "fc"})
    local b = tf.layers.dense(x, 4, {name = "fc", reuse = true})
    assert.same({"fc/kernel:0", "fc/bias:0"}, var_names())
    assert.equal("fc_1/BiasAdd:0", b.name)
    local c = tf.layers.dense(x, 4, {name = "fc"})       -- no reuse: a new layer fc_1
    assert.equal("fc_1/kernel:0", tf.global_variables()[3].name)
    tf.variable_scope("model", function() tf.layers.dense(x, 2); tf.layers.dense(x, 5) end)
    tf.variable_scope("model", {reuse = true}, function() tf.layers.dense(x, 2); tf.layers.dense(x, 5) end)
    assert.same({"fc/kernel:0", "fc/bias:0", "fc_1/kernel:0", "fc_1/bias:0", "model/dense/kernel:0",
                 "model/dense/bias:0", "model/dense_1/kernel:0", "model/dense_1/bias:0"}, var_names())
    local mlp = tf.make_template("mlp", function(t) return tf.layers.dense(tf.layers.dense(t, 3), 1) end)
    mlp(x)
    mlp(x * 2)
    assert.equal(12, #tf.global_variables())
    assert.equal("mlp/dense_1/bias:0", tf.global_variables()[12].name)
    local sess = initialized_session()
    local r = sess:run({a, b}, {[x] = {{1, 2, 3}}})
    assert.same(r[1]:totable(), r[2]:totable())
    assert.is_not_nil(c)
  end)

  it("honours trainable, regularizers and dtype", function()
    local x = tf.constant({{1, 2}}, tf.float64)
    tf.layers.dense(x, 1, {trainable = false, kernel_initializer = tf.ones_initializer(),
                           kernel_regularizer = function(w) return tf.reduce_sum(w * w) * 0.5 end})
    assert.equal(0, #tf.trainable_variables())
    assert.equal(2, #tf.global_variables())
    local losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    assert.equal(1, #losses)
    assert.equal(1, initialized_session():run(losses[1]))
  end)

  it("differentiates with respect to inputs and kernel (finite differences)", function()
    local x = tf.placeholder(tf.float64, {2, 3})
    local y = tf.layers.dense(x, 2, {activation = tf.tanh, bias_initializer = tf.constant_initializer(0.3)})
    local sess = initialized_session()
    H.check_grad(x, {2, 3}, y, {2, 2}, {session = sess, delta = 1e-5}, 1e-8)
    local z = tf.layers.dense(tf.constant({{1, -2, 0.5}, {0.3, 0.2, -1}}, tf.float64), 2, {activation = tf.tanh})
    local kernel = tf.global_variables()[3]
    assert.equal("dense_1/kernel:0", kernel.name)
    sess:run(tf.global_variables_initializer())
    H.check_grad(kernel, {3, 2}, z, {2, 2}, {session = sess, x_init_value = H.values(6), delta = 1e-5}, 1e-8)
  end)

  it("reports bad arguments with the function and the Lua line", function()
    local x = tf.placeholder(tf.float32, {-1, 3})
    local line = this_line() + 1
    local err = H.error_of(function() local _ = tf.layers.dense(x, 0) end)  -- no tail call: keep this frame
    assert.matches("tf.layers.dense: units must be a positive integer, got 0", err, 1, true)
    assert.matches("layers_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() return tf.layers.dense(tf.placeholder(tf.float32, {3}), 2) end)
    assert.matches("tf.layers.dense: inputs must have rank at least 2, got shape (3,)", err, 1, true)
    err = H.error_of(function() return tf.layers.dense(tf.placeholder(tf.float32, {2, -1}), 2) end)
    assert.matches("the last dimension of the inputs must be known", err, 1, true)
    err = H.error_of(function() return tf.layers.dense(tf.placeholder(tf.int32, {2, 2}), 2) end)
    assert.matches("inputs must be float32 or float64, got int32", err, 1, true)
    err = H.error_of(function() return tf.layers.dense(x, 2, {activaton = tf.nn.relu}) end)
    assert.matches("tf.layers.dense: unknown option 'activaton'", err, 1, true)
    err = H.error_of(function() return tf.layers.dense(x, 2, {activation = "relu"}) end)
    assert.matches("activation must be a function", err, 1, true)
  end)
end)

describe("tf.layers.flatten", function()
  before_each(function() tf.reset_default_graph() end)

  it("keeps the batch axis and flattens the rest", function()
    local x = tf.placeholder(tf.float32, {-1, 2, 3})
    local y = tf.layers.flatten(x)
    assert.equal("flatten/Reshape:0", y.name)
    assert.same({-1, 6}, y:get_shape():as_list())
    local out = tf.Session():run(y, {[x] = {{{1, 2, 3}, {4, 5, 6}}, {{7, 8, 9}, {10, 11, 12}}}})
    assert.same({{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}}, out:totable())
    local u = tf.placeholder(tf.float32, {2, -1, 2})
    local z = tf.layers.flatten(u)
    assert.same({2, -1}, z:get_shape():as_list())
    assert.same({2, 4}, tf.Session():run(z, {[u] = tf.array({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})}):shape())
    local v = tf.layers.flatten(tf.placeholder(tf.float32, {-1, -1}))
    assert.same({-1, -1}, v:get_shape():as_list())
    assert.same({{1}, {2}}, tf.Session():run(tf.layers.flatten(tf.constant({1, 2}))):totable())
  end)

  it("rejects an unknown rank and other layouts", function()
    local err = H.error_of(function() return tf.layers.flatten(tf.placeholder(tf.float32)) end)
    assert.matches("tf.layers.flatten: inputs must have a known rank", err, 1, true)
    err = H.error_of(function() return tf.layers.flatten(tf.zeros({2, 2}), {data_format = "channels_first"}) end)
    assert.matches('only data_format = "channels_last"', err, 1, true)
  end)
end)
