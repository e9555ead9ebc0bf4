-- tf.layers: dense, conv2d, separable_conv2d, max_pooling2d, average_pooling2d, flatten,
-- batch_normalization, dropout — values by hand, TensorFlow's variable names,
-- sharing through reuse and variable scopes, UPDATE_OPS, gradients by finite
-- differences, and errors that name the function and the Lua line.
local tf = require("moonflow")
local H = require("spec.helpers")
local flat, assert_near_all, this_line = H.flat, H.assert_near_all, H.this_line
setup(H.growth_off)
teardown(H.growth_restore)

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

  it("takes an empty options table as no options", function()
    local x = tf.placeholder(tf.float32, {-1, 3})
    local y = tf.layers.dense(x, 10, {})
    assert.equal("dense/BiasAdd:0", y.name)
    assert.same({-1, 10}, y:get_shape():as_list())
    assert.equal("conv2d/BiasAdd:0", tf.layers.conv2d(tf.zeros({1, 4, 4, 1}), 2, 3, {}).name)
    assert.equal("max_pooling2d/MaxPool:0", tf.layers.max_pooling2d(tf.zeros({1, 4, 4, 1}), 2, 2, {}).name)
    assert.equal("flatten/Reshape:0", tf.layers.flatten(tf.zeros({2, 3, 4}), {}).name)
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

describe("tf.layers.conv2d and pooling", function()
  before_each(function() tf.reset_default_graph() end)

  -- The 3x3 one-channel image 1..9.
  local function image() return tf.constant({1, 2, 3, 4, 5, 6, 7, 8, 9}, {dtype = tf.float64, shape = {1, 3, 3, 1}}) end

  it("convolves with kernel [kh, kw, in, filters] and TensorFlow's names", function()
    local y = tf.layers.conv2d(image(), 2, 2, {kernel_initializer = tf.constant_initializer({1, 0, 0, 1, 0, 0, 1, -1}),
                                             bias_initializer = tf.constant_initializer({0, 100})})
    assert.equal("conv2d/BiasAdd:0", y.name)
    assert.same({1, 2, 2, 2}, y:get_shape():as_list())
    assert.same({"conv2d/kernel:0", "conv2d/bias:0"}, var_names())
    assert.same({2, 2, 1, 2}, tf.global_variables()[1]:get_shape():as_list())
    -- filter 0 = [[1, 0], [0, 1]] (x[i][j] + x[i+1][j+1]); filter 1 = [[0, 1], [0, -1]] (x[i][j+1] - x[i+1][j+1])
    local out = initialized_session():run(y):totable()[1]
    assert_near_all({{{6, 97}, {8, 97}}, {{12, 97}, {14, 97}}}, out, 1e-15)
    local same = tf.layers.conv2d(image(), 1, {3, 3}, {padding = "same", strides = 2, use_bias = false,
                                                       kernel_initializer = tf.ones_initializer(),
                                                       activation = tf.nn.relu})
    assert.equal("conv2d_1/Relu:0", same.name)
    assert.same({1, 2, 2, 1}, same:get_shape():as_list())
    -- 3x3 sums around (0, 0), (0, 2), (2, 0), (2, 2) with zero padding
    assert_near_all({12, 16, 24, 28}, initialized_session():run(same), 1e-15)
  end)

  it("separable_conv2d: depthwise then pointwise kernels, TensorFlow's variable names", function()
    -- two channels: 1..9 and 10 * (1..9)
    local x = tf.concat({image(), image() * 10}, 3)
    local y = tf.layers.separable_conv2d(x, 3, 2, {depth_multiplier = 2,
                                                 depthwise_initializer = tf.ones_initializer(),
                                                 pointwise_initializer = tf.constant_initializer(
                                                   {1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1}),
                                                 bias_initializer = tf.constant_initializer({0, 0, 0.5}),
                                                 activation = tf.nn.relu})
    assert.equal("separable_conv2d/Relu:0", y.name)
    assert.same({1, 2, 2, 3}, y:get_shape():as_list())
    assert.same({"separable_conv2d/depthwise_kernel:0", "separable_conv2d/pointwise_kernel:0",
                 "separable_conv2d/bias:0"}, var_names())
    assert.same({2, 2, 2, 2}, tf.global_variables()[1]:get_shape():as_list())
    assert.same({1, 1, 4, 3}, tf.global_variables()[2]:get_shape():as_list())
    -- 2x2 window sums of channel 0 (12, 16, 24, 28) go to outputs 0 and 1, of channel 1 (times 10) to output 2
    local out = initialized_session():run(y):totable()[1]
    assert_near_all({{{12, 12, 120.5}, {16, 16, 160.5}}, {{24, 24, 240.5}, {28, 28, 280.5}}}, out, 1e-12)
    assert.matches("depth_multiplier must be a positive integer, got 0",
                   H.error_of(tf.layers.separable_conv2d, x, 3, 2, {depth_multiplier = 0}), 1, true)
  end)

  it("shares its kernel through variable_scope reuse, as in the article", function()
    local image1 = tf.placeholder(tf.float32, {-1, 5, 5, 3})
    local image2 = tf.placeholder(tf.float32, {-1, 5, 5, 3})
    local f1 = tf.variable_scope("scope", function() return tf.layers.conv2d(image1, 32, 3) end)
    local f2 = tf.variable_scope("scope", {reuse = true}, function() return tf.layers.conv2d(image2, 32, 3) end)
    assert.same({"scope/conv2d/kernel:0", "scope/conv2d/bias:0"}, var_names())
    assert.same({-1, 3, 3, 32}, f2:get_shape():as_list())
    for _, image in ipairs({image1, image2}) do
      tf.variable_scope("auto", {reuse = tf.AUTO_REUSE}, function() return tf.layers.conv2d(image, 32, 3) end)
    end
    assert.same({"scope/conv2d/kernel:0", "scope/conv2d/bias:0", "auto/conv2d/kernel:0", "auto/conv2d/bias:0"},
                var_names())
    local conv3x32 = tf.make_template("conv3x32", function(x) return tf.layers.conv2d(x, 32, 3) end)
    conv3x32(image1)
    conv3x32(image2)
    assert.equal(6, #tf.global_variables())
    assert.equal("conv3x32/conv2d/kernel:0", tf.global_variables()[5].name)
    assert.is_not_nil(f1)
  end)

  it("differentiates inputs and kernel (finite differences)", function()
    local x = tf.placeholder(tf.float64, {1, 3, 3, 2})
    local y = tf.layers.conv2d(x, 2, 2, {padding = "same", activation = tf.tanh})
    local sess = initialized_session()
    H.check_grad(x, {1, 3, 3, 2}, y, {1, 3, 3, 2}, {session = sess, delta = 1e-5}, 1e-8)
  end)

  it("pools with max_pooling2d and average_pooling2d", function()
    local m = tf.layers.max_pooling2d(image(), 2, 1)
    local a = tf.layers.average_pooling2d(image(), {2, 2}, 2, {padding = "same"})
    assert.equal("max_pooling2d/MaxPool:0", m.name)
    assert.equal("average_pooling2d/AvgPool:0", a.name)
    local r = tf.Session():run({m, a})
    assert.same({5, 6, 8, 9}, flat(r[1]))
    -- windows {1, 2, 4, 5}, {3, 6}, {7, 8}, {9}; padding not counted
    assert_near_all({3, 4.5, 7.5, 9}, r[2], 1e-15)
  end)

  it("reports bad arguments with the function and the Lua line", function()
    local x = tf.placeholder(tf.float32, {-1, 4, 4, 3})
    local line = this_line() + 1
    local err = H.error_of(function() local _ = tf.layers.conv2d(x, 4, 0) end)
    assert.matches("tf.layers.conv2d: kernel_size must be a positive integer or a pair {height, width}, got 0",
                   err, 1, true)
    assert.matches("layers_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() local _ = tf.layers.conv2d(tf.placeholder(tf.float32, {4, 4, 3}), 4, 2) end)
    assert.matches("tf.layers.conv2d: inputs must have rank 4, got shape (4, 4, 3) (rank 3)", err, 1, true)
    err = H.error_of(function() local _ = tf.layers.conv2d(x, 4, 2, {padding = "full"}) end)
    assert.matches('tf.layers.conv2d: padding must be "valid" or "same", got full', err, 1, true)
    err = H.error_of(function() local _ = tf.layers.max_pooling2d(x, 2) end)
    assert.matches("tf.layers.max_pooling2d: strides is required", err, 1, true)
    err = H.error_of(function() local _ = tf.layers.conv2d(x, 4, 2, {data_format = "channels_first"}) end)
    assert.matches('tf.layers.conv2d: only data_format = "channels_last" (NHWC) exists', err, 1, true)
  end)
end)

describe("tf.layers.batch_normalization", function()
  before_each(function() tf.reset_default_graph() end)

  -- Columns with means 3 and 6 and biased variances 8/3 and 32/3.
  local function data() return tf.constant({{1, 2}, {3, 6}, {5, 10}}, tf.float64) end
  local function normalized(eps)
    local a, b = 1 / math.sqrt(8 / 3 + eps), 1 / math.sqrt(32 / 3 + eps)
    return {{-2 * a, -4 * b}, {0, 0}, {2 * a, 4 * b}}
  end

  it("normalizes with batch statistics in training and queues the moving averages in UPDATE_OPS", function()
    local y = tf.layers.batch_normalization(data(), {training = true, momentum = 0.5})
    assert.same({"batch_normalization/gamma:0", "batch_normalization/beta:0", "batch_normalization/moving_mean:0",
                 "batch_normalization/moving_variance:0"}, var_names())
    assert.same({"batch_normalization/gamma:0", "batch_normalization/beta:0"}, var_names(tf.trainable_variables()))
    local updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert.equal(2, #updates)
    local sess = initialized_session()
    assert_near_all(normalized(1e-3), sess:run(y), 1e-14)
    sess:run(updates)
    local mm, mv = tf.global_variables()[3], tf.global_variables()[4]
    -- moving = moving - (moving - batch) * (1 - momentum), from 0 and 1
    assert_near_all({1.5, 3}, sess:run(mm), 1e-15)
    assert_near_all({(1 + 8 / 3) / 2, (1 + 32 / 3) / 2}, sess:run(mv), 1e-15)
    sess:run(updates)
    assert_near_all({2.25, 4.5}, sess:run(mm), 1e-15)
  end)

  it("uses the moving statistics in inference and adds no updates", function()
    local x = data()
    local y = tf.layers.batch_normalization(x, {moving_mean_initializer = tf.constant_initializer({1, 2}),
                                               moving_variance_initializer = tf.constant_initializer({4, 16}),
                                               gamma_initializer = tf.constant_initializer(2), epsilon = 1e-12})
    assert.equal(0, #tf.get_collection(tf.GraphKeys.UPDATE_OPS))
    assert_near_all({{0, 0}, {2, 2}, {4, 4}}, initialized_session():run(y), 1e-10)
  end)

  it("trains the moving averages through control dependencies, as the cookbook does", function()
    local x = tf.placeholder(tf.float64, {-1, 2})
    local y = tf.layers.batch_normalization(x, {training = true, momentum = 0.9})
    local loss = tf.reduce_sum(tf.square(tf.layers.dense(y, 1) - 1))
    local train = tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS), function()
      return tf.train.GradientDescentOptimizer(0.01):minimize(loss)
    end)
    local sess = initialized_session()
    local batch = {{1, 2}, {3, 6}, {5, 10}}
    for _ = 1, 10 do sess:run(train, {[x] = batch}) end
    -- after 10 updates from 0: 3 * (1 - 0.9^10)
    local mm = tf.get_default_graph():get_tensor_by_name("batch_normalization/moving_mean:0")
    assert_near_all({3 * (1 - 0.9 ^ 10), 6 * (1 - 0.9 ^ 10)}, sess:run(mm), 1e-12)
  end)

  it("takes a bool tensor for training (tf.cond)", function()
    local training = tf.placeholder(tf.bool, {})
    local y = tf.layers.batch_normalization(data(), {training = training, momentum = 0.5})
    local updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert.equal(2, #updates)
    local sess = initialized_session()
    assert_near_all(normalized(1e-3), sess:run(y, {[training] = true}), 1e-14)
    -- moving statistics 0 and 1: y = x / sqrt(1 + eps)
    local d = 1 / math.sqrt(1 + 1e-3)
    assert_near_all({{d, 2 * d}, {3 * d, 6 * d}, {5 * d, 10 * d}}, sess:run(y, {[training] = false}), 1e-14)
    sess:run(updates, {[training] = false})
    local mm = tf.global_variables()[3]
    assert_near_all({0, 0}, sess:run(mm), 0)
    sess:run(updates, {[training] = true})
    assert_near_all({1.5, 3}, sess:run(mm), 1e-15)
  end)

  it("normalizes 4-D inputs per channel (fused: Bessel-corrected moving variance) and other axes", function()
    local img = tf.reshape(tf.range(0, 16, 1, {dtype = tf.float64}), {2, 2, 2, 2})
    local y = tf.layers.batch_normalization(img, {training = true, momentum = 0})
    local sess = initialized_session()
    local out = flat(sess:run(y))
    for i = 0, 15 do
      local want = (i - (i % 2 == 0 and 7 or 8)) / math.sqrt(21 + 1e-3)
      assert(math.abs(out[i + 1] - want) < 1e-12, "element " .. i)
    end
    sess:run(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
    assert_near_all({7, 8}, sess:run(tf.global_variables()[3]), 1e-14)
    assert_near_all({24, 24}, sess:run(tf.global_variables()[4]), 1e-13)
    -- fused = false keeps the biased variance, as TensorFlow's non-fused path
    tf.layers.batch_normalization(img, {training = true, momentum = 0, fused = false})
    local updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    sess:run(tf.global_variables_initializer())
    sess:run({updates[3], updates[4]})
    assert.equal("batch_normalization_1/moving_variance:0", tf.global_variables()[8].name)
    assert_near_all({21, 21}, sess:run(tf.global_variables()[8]), 1e-13)
    -- axis = 1: statistics per row of a [2, 3] input
    local z = tf.layers.batch_normalization(tf.constant({{1, 2, 3}, {10, 20, 60}}, tf.float64),
                                            {axis = 1, training = true, epsilon = 1e-9})
    sess:run(tf.global_variables_initializer())
    local r = sess:run(z):totable()
    assert_near_all({{-1, 1}, {-1, 1}, {-1, 1}}, {{r[1][1], r[2][1]}, {r[1][2], r[2][2]}, {r[1][3], r[2][3]}}, 1e-8)
  end)

  it("differentiates inputs, gamma and beta (finite differences)", function()
    local x = tf.placeholder(tf.float64, {4, 3})
    local y = tf.layers.batch_normalization(x, {training = true, gamma_initializer = tf.constant_initializer({1, 2, 3}),
                                               beta_initializer = tf.constant_initializer(0.5)})
    local sess = initialized_session()
    H.check_grad(x, {4, 3}, y, {4, 3}, {session = sess, delta = 1e-5}, 1e-8)
    local c = tf.constant(H.values(12, 4), {dtype = tf.float64, shape = {4, 3}})
    local z = tf.layers.batch_normalization(c, {training = true})
    sess:run(tf.global_variables_initializer())
    local gamma, beta = tf.global_variables()[5], tf.global_variables()[6]
    assert.equal("batch_normalization_1/gamma:0", gamma.name)
    H.check_grad(gamma, {3}, z, {4, 3}, {session = sess, delta = 1e-5}, 1e-8)
    H.check_grad(beta, {3}, z, {4, 3}, {session = sess, delta = 1e-5}, 1e-8)
  end)

  it("reports bad arguments with the function and the Lua line", function()
    local x = tf.zeros({2, 3})
    local line = this_line() + 1
    local err = H.error_of(function() local _ = tf.layers.batch_normalization(x, {axis = 2}) end)
    assert.matches("tf.layers.batch_normalization: axis must be an integer in [-2, 2) for inputs of shape (2, 3), " ..
                   "got 2", err, 1, true)
    assert.matches("layers_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() local _ = tf.layers.batch_normalization(x, {training = 1}) end)
    assert.matches("training must be a boolean or a scalar bool tensor, got 1", err, 1, true)
    err = H.error_of(function() local _ = tf.layers.batch_normalization(x, {momentum = 1.5}) end)
    assert.matches("momentum must be a number in [0, 1], got 1.5", err, 1, true)
    err = H.error_of(function() local _ = tf.layers.batch_normalization(x, {fused = true}) end)
    assert.matches("fused = true needs 4-D inputs normalized over their last axis", err, 1, true)
    err = H.error_of(function() local _ = tf.layers.batch_normalization(tf.placeholder(tf.float32, {2, -1})) end)
    assert.matches("the dimension of axis 1 must be known", err, 1, true)
  end)
end)

describe("tf.layers.dropout", function()
  before_each(function() tf.reset_default_graph() end)

  it("drops only in training; training may be a bool tensor", function()
    local x = tf.ones({50, 40}, tf.float64)
    local off = tf.layers.dropout(x)
    assert.equal("dropout/Identity:0", off.name)
    assert.same(flat(tf.Session():run(x)), flat(tf.Session():run(off)))
    local on = tf.layers.dropout(x, {rate = 0.5, training = true, seed = 3})
    assert.equal("dropout_1/dropout/Mul:0", on.name)
    local zeros = 0
    for _, v in ipairs(flat(tf.Session():run(on))) do
      if v == 0 then zeros = zeros + 1 else assert.equal(2, v) end
    end
    assert(zeros > 850 and zeros < 1150, "dropped " .. zeros .. " of 2000")
    local training = tf.placeholder(tf.bool, {})
    local t = tf.layers.dropout(x, 0.9, nil, 1, training)
    local sess = tf.Session()
    assert.same(flat(sess:run(x)), flat(sess:run(t, {[training] = false})))
    local kept = 0
    for _, v in ipairs(flat(sess:run(t, {[training] = true}))) do
      if v ~= 0 then kept = kept + 1; assert(math.abs(v - 10) < 1e-12) end
    end
    assert(kept > 120 and kept < 290, "kept " .. kept .. " of 2000")
  end)

  it("reports bad rates and training values with the function and the Lua line", function()
    local x = tf.ones({2, 2})
    local line = this_line() + 1
    local err = H.error_of(function() local _ = tf.layers.dropout(x, {rate = 1, training = true}) end)
    assert.matches("tf.layers.dropout: rate must be a number in the range [0, 1), got 1", err, 1, true)
    assert.matches("layers_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() local _ = tf.layers.dropout(x, {training = "yes"}) end)
    assert.matches("tf.layers.dropout: training must be a boolean or a scalar bool tensor, got yes", err, 1, true)
  end)
end)
