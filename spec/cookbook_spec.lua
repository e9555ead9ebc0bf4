-- tf.cookbook: Effective TensorFlow's recipes — get_shape, reshape,
-- batch_gather, merge, softmax_entropy, gaussian_kl, leaky_relu,
-- batch_normalization — with hand-computed values, gradients by finite
-- differences and errors naming the function and the Lua line.
local tf = require("moonflow")
local H = require("spec.helpers")
local assert_near_all, this_line = H.assert_near_all, H.this_line
setup(H.growth_off)
teardown(H.growth_restore)

local cb = tf.cookbook
local log, exp = math.log, math.exp

local function run(t, feeds)
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  local r = sess:run(t, feeds)
  sess:close()
  return r
end

local function const(values, shape) return tf.constant(values, {dtype = tf.float64, shape = shape}) end

describe("tf.cookbook", function()
  before_each(function() tf.reset_default_graph() end)

  it("get_shape gives static sizes where known and dynamic ones elsewhere", function()
    local b = tf.placeholder(tf.float32, {-1, 10, 32})
    local shape = cb.get_shape(b)
    assert.equal(3, #shape)
    assert.is_true(tf.is_tensor(shape[1]))
    assert.equal(tf.int32, shape[1].dtype)
    assert.equal(10, shape[2])
    assert.equal(32, shape[3])
    local batch = tf.Array.new(tf.float32, {4, 10, 32})
    assert.equal(4, tf.Session():run(shape[1], {[b] = batch}))
    assert.same({2, 3}, cb.get_shape(tf.zeros({2, 3})))
    -- the article's use: collapse the last two dimensions, whatever is known
    local flat_b = tf.reshape(b, {shape[1], shape[2] * shape[3]})
    assert.same({4, 320}, tf.Session():run(flat_b, {[b] = batch}):shape())
  end)

  it("reshape collapses lists of dimensions", function()
    local b = tf.placeholder(tf.float32, {-1, 10, 32})
    local r = cb.reshape(b, {0, {1, 2}})
    assert.same({-1, 320}, r:get_shape():as_list())
    local c = tf.placeholder(tf.float32, {2, -1, 3})
    local r2 = cb.reshape(c, {{0, 1}, 2})
    local v = tf.Session():run(r2, {[c] = tf.Array.new(tf.float32, {2, 5, 3})})
    assert.same({10, 3}, v:shape())
    local e = tf.constant({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})
    assert.same({{1, 2, 3, 4}, {5, 6, 7, 8}}, tf.Session():run(cb.reshape(e, {0, {1, 2}})):totable())
  end)

  it("batch_gather gathers in each batch row", function()
    local t = tf.constant({{{1, 2}, {3, 4}, {5, 6}}, {{7, 8}, {9, 10}, {11, 12}}})
    assert.same({{5, 6}, {7, 8}}, tf.Session():run(cb.batch_gather(t, {2, 0})):totable())
    assert.same({{{5, 6}, {3, 4}}, {{7, 8}, {7, 8}}},
                tf.Session():run(cb.batch_gather(t, {{2, 1}, {0, 0}})):totable())
    -- an unknown batch size, int64 indices
    local p = tf.placeholder(tf.float64, {-1, 3})
    local idx = tf.placeholder(tf.int64, {-1})
    local g = cb.batch_gather(p, idx)
    local r = tf.Session():run(g, {[p] = {{10, 11, 12}, {20, 21, 22}, {30, 31, 32}}, [idx] = tf.array({1, 2, 0}, tf.int64)})
    assert.same({11, 22, 30}, r:totable())
  end)

  it("batch_gather refuses an index outside its row, naming batch_gather", function()
    local t = tf.constant({{1, 2, 3}, {4, 5, 6}})
    local sess = tf.Session()
    assert.same({3, 4}, sess:run(cb.batch_gather(t, {2, 0})):totable())
    local function refused(idx, shown, at)
      local err = H.error_of(sess.run, sess, cb.batch_gather(t, idx))
      assert.matches("[tf.cookbook.batch_gather: indices must be in [0, n) with n =] [3] " ..
                     "[(the size of tensor's dimension 1); indices =] [" .. shown .. "]", err, 1, true)
      assert.matches("the condition is false at 1 of 2 elements, the first at index [" .. at .. "]", err, 1, true)
      assert.matches("batch_gather_index_check", err, 1, true)
    end
    refused({3, 0}, "3 0", 0)    -- once read the next row's first element: [4, 4]
    refused({0, -1}, "0 -1", 1)
    -- fed int64 indices with an unknown batch size are checked the same way
    local p = tf.placeholder(tf.float64, {-1, 3})
    local idx = tf.placeholder(tf.int64, {-1})
    local g = cb.batch_gather(p, idx)
    local feed = {[p] = {{10, 11, 12}, {20, 21, 22}}}
    feed[idx] = tf.array({1, 2}, tf.int64)
    assert.same({11, 22}, sess:run(g, feed):totable())
    feed[idx] = tf.array({1, 3}, tf.int64)
    assert.matches("indices =] [1 3]", H.error_of(sess.run, sess, g, feed), 1, true)
  end)

  it("batch_gather differentiates its tensor (finite differences)", function()
    local x = tf.placeholder(tf.float64, {2, 3, 2})
    local y = cb.batch_gather(x, {{2, 2}, {0, 1}})
    H.check_grad(x, {2, 3, 2}, y, {2, 2, 2}, nil, 1e-9)
  end)

  it("merge projects each tensor and adds them with broadcasting", function()
    local a = const({1, 2, 3}, {3, 1, 1})          -- [m = 3, 1, d1 = 1]
    local b = const({1, 0, 0, 1}, {1, 2, 2})       -- [1, n = 2, d2 = 2]
    local c = cb.merge({a, b}, 2, {kernel_initializer = tf.ones_initializer(),
                                   bias_initializer = tf.constant_initializer(-3)})
    assert.equal("merge/Relu:0", c.name)
    assert.same({3, 2, 2}, c:get_shape():as_list())
    local names = {}
    for i, v in ipairs(tf.global_variables()) do names[i] = v.name end
    assert.same({"merge/proj_0/kernel:0", "merge/proj_0/bias:0", "merge/proj_1/kernel:0", "merge/proj_1/bias:0"}, names)
    -- proj_0(a) = a - 3 per unit, proj_1(b) = sum(b) - 3 = -2: relu(a - 5) with a = 1, 2, 3 is all zero
    assert_near_all({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, run(c), 0)
    local d = cb.merge({a, b}, 2, {activation = false, name = "mix", kernel_initializer = tf.ones_initializer()})
    assert.equal("mix/proj_1/kernel:0", tf.global_variables()[7].name)
    assert_near_all({2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4}, run(d), 1e-15)
    cb.merge({a, b}, 2)
    assert.equal("merge_1/proj_0/kernel:0", tf.global_variables()[9].name)
  end)

  it("merge differentiates its inputs (finite differences)", function()
    local x = tf.placeholder(tf.float64, {2, 1, 3})
    local y = cb.merge({x, const(H.values(4, 2), {1, 2, 2})}, 3, {activation = tf.tanh})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    H.check_grad(x, {2, 1, 3}, y, {2, 2, 3}, {session = sess, delta = 1e-5}, 1e-8)
  end)

  it("softmax_entropy is -sum(p log p), stable for large logits", function()
    local logits = const({0, 0, 0, 0, 1000, 0, 0, 0, log(1), log(3), 0, 0}, {3, 4})
    -- uniform over 4: log 4; one-hot: 0; probabilities {1, 3, 1, 1} / 6
    local q = {1 / 6, 3 / 6, 1 / 6, 1 / 6}
    local h = 0
    for _, p in ipairs(q) do h = h - p * log(p) end
    assert_near_all({log(4), 0, h}, run(cb.softmax_entropy(logits)), 1e-14)
    assert_near_all({log(3), log(3), log(3) - 0, log(3)}, run(cb.softmax_entropy(const({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 4}), 0)), 1e-14)
    local x = tf.placeholder(tf.float64, {2, 3})
    H.check_grad(x, {2, 3}, cb.softmax_entropy(x), {2}, {delta = 1e-5}, 1e-8)
  end)

  it("gaussian_kl is KL(q || p) for {mu, log_sigma_sq} pairs, summed over the last axis", function()
    -- q = N(1, 1) against the unit Gaussian: 1/2; q = N(0, 2): (1 - log 2) / 2
    local kl = cb.gaussian_kl({const({1, 0}, {1, 2}), const({0, log(2)}, {1, 2})})
    assert_near_all({0.5 + (1 - log(2)) / 2}, run(kl), 1e-14)
    -- closed form: log(s2 / s1) + (s1^2 + (m1 - m2)^2) / (2 s2^2) - 1/2
    local m1, s1, m2, s2 = 0.3, 0.5, -1.2, 2
    local want = log(s2 / s1) + (s1 ^ 2 + (m1 - m2) ^ 2) / (2 * s2 ^ 2) - 0.5
    local k2 = cb.gaussian_kl({const({m1}, {1}), const({log(s1 ^ 2)}, {1})}, {const({m2}, {1}), const({log(s2 ^ 2)}, {1})})
    assert_near_all({want}, run(k2), 1e-14)
    assert_near_all({0, 0}, run(cb.gaussian_kl({const({0.7, 0.7}, {2, 1}), const({-1, -1}, {2, 1})},
                                               {0.7, -1})), 1e-15)
    local mu = tf.placeholder(tf.float64, {2, 3})
    local lv = tf.placeholder(tf.float64, {2, 3})
    H.check_grad(mu, {2, 3}, cb.gaussian_kl({mu, const(H.values(6, 1), {2, 3})}), {2}, {delta = 1e-5}, 1e-8)
    H.check_grad(lv, {2, 3}, cb.gaussian_kl({const(H.values(6, 2), {2, 3}), lv}, {0.5, 0.2}), {2},
                 {delta = 1e-5}, 1e-8)
  end)

  it("leaky_relu is max(x, alpha x) with alpha 0.1", function()
    local x = const({-2, -0.5, 0, 3}, {4})
    assert_near_all({-0.2, -0.05, 0, 3}, run(cb.leaky_relu(x)), 1e-15)
    assert_near_all({-1, -0.25, 0, 3}, run(cb.leaky_relu(x, 0.5)), 1e-15)
    local p = tf.placeholder(tf.float64, {4})
    H.check_grad(p, {4}, cb.leaky_relu(p), {4}, {x_init_value = {-1.5, -0.3, 0.4, 2}}, 1e-9)
  end)

  it("batch_normalization: batch statistics and UPDATE_OPS in training, averages otherwise", function()
    local x = const({1, 2, 3, 6, 5, 10}, {3, 2})
    local y = cb.batch_normalization(x, true)
    local names = {}
    for i, v in ipairs(tf.global_variables()) do names[i] = v.name end
    assert.same({"batch_normalization/beta:0", "batch_normalization/gamma:0", "batch_normalization/avg_mean:0",
                 "batch_normalization/avg_variance:0"}, names)
    assert.equal(2, #tf.trainable_variables())
    local updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert.equal(2, #updates)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local a, b = 1 / math.sqrt(8 / 3 + 1e-3), 1 / math.sqrt(32 / 3 + 1e-3)
    assert_near_all({{-2 * a, -4 * b}, {0, 0}, {2 * a, 4 * b}}, sess:run(y), 1e-14)
    sess:run(updates)
    -- avg = avg * 0.9 + batch * 0.1, from 0 and 1
    assert_near_all({0.3, 0.6}, sess:run(tf.global_variables()[3]), 1e-15)
    assert_near_all({0.9 + 0.8 / 3, 0.9 + 3.2 / 3}, sess:run(tf.global_variables()[4]), 1e-15)
    -- inference in a reused scope reads the averages
    local z = tf.variable_scope(tf.get_variable_scope(), {reuse = true}, function()
      return cb.batch_normalization(x, {name = "batch_normalization"})
    end)
    local inv = {1 / math.sqrt(0.9 + 0.8 / 3 + 1e-3), 1 / math.sqrt(0.9 + 3.2 / 3 + 1e-3)}
    assert_near_all({{0.7 * inv[1], 1.4 * inv[2]}, {2.7 * inv[1], 5.4 * inv[2]}, {4.7 * inv[1], 9.4 * inv[2]}},
                    sess:run(z), 1e-14)
  end)

  it("batch_normalization's fused path gives the same output, with Bessel-corrected averages", function()
    local img = tf.reshape(tf.range(0, 16, 1, {dtype = tf.float64}), {2, 2, 2, 2})
    -- fused_batch_norm raises epsilon to 1.001e-5, as TensorFlow does
    local y = cb.batch_normalization(img, {training = true, fused_batch_norm = true, momentum = 0, epsilon = 1e-9,
                                           name = "bn"})
    local y2 = cb.batch_normalization(img, {training = true, momentum = 0, epsilon = 1.001e-5})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local r = sess:run({y, y2})
    assert_near_all(r[2], r[1], 1e-12)
    sess:run(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
    assert.equal("bn/avg_variance:0", tf.global_variables()[4].name)
    assert_near_all({24, 24}, sess:run(tf.global_variables()[4]), 1e-13)
    assert_near_all({21, 21}, sess:run(tf.global_variables()[8]), 1e-13)
  end)

  it("batch_normalization differentiates its input in training (finite differences)", function()
    local x = tf.placeholder(tf.float64, {4, 2})
    local y = cb.batch_normalization(x, true)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    H.check_grad(x, {4, 2}, y * const({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}), {4, 2}, {session = sess, delta = 1e-5}, 1e-8)
  end)

  it("reports bad arguments with the function and the Lua line", function()
    local line = this_line() + 1
    local err = H.error_of(function() local _ = cb.get_shape(tf.placeholder(tf.float32)) end)
    assert.matches("tf.cookbook.get_shape: the tensor must have a known rank", err, 1, true)
    assert.matches("cookbook_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() local _ = cb.batch_gather(tf.zeros({3}), {0}) end)
    assert.matches("tf.cookbook.batch_gather: tensor must have rank 2 or more", err, 1, true)
    err = H.error_of(function() local _ = cb.gaussian_kl(tf.zeros({3})) end)
    assert.matches("tf.cookbook.gaussian_kl: q must be a pair {mu, log_sigma_sq}", err, 1, true)
    err = H.error_of(function() local _ = cb.batch_normalization(tf.zeros({2, 2}), {training = tf.constant(true)}) end)
    assert.matches("tf.cookbook.batch_normalization: training must be a boolean", err, 1, true)
    err = H.error_of(function() local _ = cb.reshape(tf.zeros({2, 2}), {0, {1, 2}}) end)
    assert.matches("tf.cookbook.reshape: 2 is not a dimension of a rank-2 tensor", err, 1, true)
    err = H.error_of(function() local _ = cb.merge({}, 3) end)
    assert.matches("tf.cookbook.merge: tensors must be a non-empty list", err, 1, true)
  end)
end)
