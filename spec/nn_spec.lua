-- tf.nn composites: l2_normalize, dropout, moments, batch_normalization, fused_batch_norm —
-- values by hand, seeds, shapes, every gradient by finite differences
-- (float64), and errors that name the function and the Lua line.
local tf = require("moonflow")
local H = require("spec.helpers")
local flat, assert_near_all, run, this_line = H.flat, H.assert_near_all, H.run, H.this_line
setup(H.growth_off)
teardown(H.growth_restore)

local function const(values, shape)
  return tf.constant(values, {dtype = tf.float64, shape = shape})
end

-- A float64 tf.Array of shape from a flat list.
local function array(values, shape)
  local a = tf.Array.new(tf.float64, shape)
  for i, v in ipairs(values) do a:data()[i - 1] = v end
  return a
end

-- Finite-difference check of dy/dx with extra tensors fed at fixed values
-- (the random draw of dropout), so that both Jacobians see the same mask.
local function check_grad_with_feeds(x, x_shape, y, y_shape, extra, tol)
  local nx, ny = H.numel(x_shape), H.numel(y_shape)
  local dy = tf.placeholder(y.dtype, y_shape)
  local dx = tf.gradients(y, x, dy)[1]
  local sess = tf.Session()
  local x0 = H.values(nx, 11)
  local function feeds(values, seed_values)
    local f = {[x] = array(values, x_shape)}
    for k, v in pairs(extra) do f[k] = v end
    if seed_values then f[dy] = array(seed_values, y_shape) end
    return f
  end
  local worst, delta = 0, 1e-5
  for j = 1, ny do
    local seed = {}
    for k = 1, ny do seed[k] = k == j and 1 or 0 end
    local g = flat(sess:run(dx, feeds(x0, seed)))
    for i = 1, nx do
      local plus, minus = {unpack(x0)}, {unpack(x0)}
      plus[i], minus[i] = x0[i] + delta, x0[i] - delta
      local yp, ym = flat(sess:run(y, feeds(plus))), flat(sess:run(y, feeds(minus)))
      worst = math.max(worst, math.abs((yp[j] - ym[j]) / (2 * delta) - g[i]))
    end
  end
  sess:close()
  assert.is_true(worst < (tol or 1e-8), "gradient error " .. worst)
end

describe("tf.nn.l2_normalize", function()
  before_each(function() tf.reset_default_graph() end)

  -- From spec/fixtures/op_coverage_values.py: {axis, l2_normalize(X, axis)}.
  local X = {{3, -4, 0}, {1, 2, 2}}
  local cases = {
    {nil, {{0.5144957554275265, -0.6859943405700353, 0},
           {0.17149858514250882, 0.34299717028501764, 0.34299717028501764}}},
    {0, {{0.9486832980505138, -0.8944271909999159, 0}, {0.31622776601683794, 0.4472135954999579, 1}}},
    {1, {{0.6, -0.8, 0}, {0.3333333333333333, 0.6666666666666666, 0.6666666666666666}}},
    {-1, {{0.6, -0.8, 0}, {0.3333333333333333, 0.6666666666666666, 0.6666666666666666}}},
    {{0, 1}, {{0.5144957554275265, -0.6859943405700353, 0},
              {0.17149858514250882, 0.34299717028501764, 0.34299717028501764}}},
  }

  it("divides by the L2 norm over axis (all by default), in float32 and float64", function()
    for _, dtype in ipairs({tf.float32, tf.float64}) do
      local x = tf.constant(X, dtype)
      for _, c in ipairs(cases) do
        local y = tf.nn.l2_normalize(x, c[1])
        assert.equal(dtype, y.dtype)
        assert_near_all(c[2], run(y), dtype == tf.float32 and 1e-6 or 1e-15)
      end
    end
    assert_near_all(cases[3][2], run(tf.math.l2_normalize(const(X, {2, 3}), {dim = 1})), 1e-15)
    assert.equal("n:0", tf.nn.l2_normalize(const(X, {2, 3}), 1, 1e-12, "n").name)
  end)

  it("keeps zeros at zero, scales norms below sqrt(epsilon) by 1 / sqrt(epsilon), propagates NaN", function()
    assert_near_all({0.1, 0}, run(tf.nn.l2_normalize(const({1e-7, 0}, {2}))), 1e-15)
    assert.same({0, 0}, run(tf.nn.l2_normalize(tf.zeros({2}, tf.float64), 0)):totable())
    assert.same({0.5, 0}, run(tf.nn.l2_normalize(const({1, 0}, {2}), 0, 4)):totable())
    local v = run(tf.nn.l2_normalize(const({0 / 0, 1}, {2}))):totable()
    assert.is_true(v[1] ~= v[1] and v[2] ~= v[2])
    assert.same({0, 3}, run(tf.nn.l2_normalize(tf.zeros({0, 3}), 1)):shape())
    assert.equal(1, run(tf.nn.l2_normalize(tf.constant(-3, tf.float64))) * -1)
  end)

  it("differentiates x (finite differences), also at unknown dims", function()
    local x = tf.placeholder(tf.float64, {-1, 3}, "x")
    local y = tf.nn.l2_normalize(x, -1)
    assert.same({-1, 3}, y:get_shape():as_list())
    -- a small step: the third derivatives are large where the norm is small
    local opts = {delta = 1e-5}
    H.check_grad(x, {2, 3}, y, {2, 3}, opts)
    H.check_grad(x, {2, 3}, tf.nn.l2_normalize(x), {2, 3}, opts)
    local k = const(X, {2, 3})
    H.check_grad_of_grad(k, {2, 3}, tf.nn.l2_normalize(k, 0), {2, 3})
  end)

  it("reports integer input and bad axes with the function and the Lua line", function()
    local line = this_line() + 1
    local err = H.error_of(function() return (tf.nn.l2_normalize(tf.constant({3, 4}, tf.int32))) end)
    assert.truthy(err:find("tf.nn.l2_normalize: x must be a float32 or float64 tensor, got int32", 1, true), err)
    assert.truthy(err:find("nn_spec.lua:" .. line, 1, true), err)
    assert.truthy(H.error_of(tf.nn.l2_normalize, tf.ones({2}), 1):find("axis 1 is out of range", 1, true))
    assert.truthy(H.error_of(tf.nn.l2_normalize, tf.ones({2}), {axis = 0, dim = 0}):find(
      "Cannot specify both 'axis' and 'dim'", 1, true))
  end)
end)

describe("tf.nn.moments", function()
  before_each(function() tf.reset_default_graph() end)

  it("returns the mean and the biased variance over axes", function()
    local x = const({1, 2, 3, 4, 5, 9}, {2, 3})
    local mean, var = tf.nn.moments(x, {0})
    assert.same({3}, mean:get_shape():as_list())
    assert.equal("moments/Squeeze:0", mean.name)
    local r = run({mean, var})
    assert_near_all({2.5, 3.5, 6}, r[1], 1e-15)
    assert_near_all({2.25, 2.25, 9}, r[2], 1e-15)
    -- rows: mean 2 and 6; variances (1 + 0 + 1) / 3 and (4 + 1 + 9) / 3
    local m1, v1 = tf.nn.moments(x, {-1}, {keepdims = true})
    assert.same({2, 1}, m1:get_shape():as_list())
    r = run({m1, v1})
    assert_near_all({{2}, {6}}, r[1], 1e-15)
    assert_near_all({{2 / 3}, {14 / 3}}, r[2], 1e-15)
    local m2, v2 = tf.nn.moments(x, {0, 1}, nil, "stats")
    assert.equal("stats/Squeeze:0", m2.name)
    r = run({m2, v2})
    assert_near_all({4}, r[1], 1e-15)
    assert_near_all({(9 + 4 + 1 + 0 + 1 + 25) / 6}, r[2], 1e-15)
    local m3 = tf.nn.moments(x, {1}, {keep_dims = true})
    assert.same({2, 1}, m3:get_shape():as_list())
  end)

  it("works on unknown dimensions and float32", function()
    local x = tf.placeholder(tf.float32, {-1, 2})
    local mean, var = tf.nn.moments(x, {0})
    assert.same({2}, mean:get_shape():as_list())
    local r = run({mean, var}, {[x] = {{1, 10}, {3, 10}, {5, 40}, {7, 20}}})
    assert_near_all({4, 20}, r[1], 1e-6)
    assert_near_all({5, 150}, r[2], 1e-6)
  end)

  it("differentiates the mean and the variance (finite differences)", function()
    local x = tf.placeholder(tf.float64, {3, 4})
    local mean, var = tf.nn.moments(x, {1})
    H.check_grad(x, {3, 4}, mean, {3}, {delta = 1e-5}, 1e-9)
    H.check_grad(x, {3, 4}, var, {3}, {delta = 1e-5}, 1e-8)
    local m0, v0 = tf.nn.moments(x, {0, 1}, {keepdims = true})
    H.check_grad(x, {3, 4}, v0 * m0, {1, 1}, {delta = 1e-5}, 1e-8)
  end)

  it("reports bad axes and inputs with the function and the Lua line", function()
    local x = tf.zeros({2, 3}, tf.float64)
    local line = this_line() + 1
    local err = H.error_of(function() local _ = tf.nn.moments(x, {2}) end)
    assert.matches("tf.nn.moments: axis 2 is out of range for x of shape (2, 3) (rank 2): axes are in [-2, 2)",
                   err, 1, true)
    assert.matches("nn_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() local _ = tf.nn.moments(x, {0, -2}) end)
    assert.matches("tf.nn.moments: axis 0 appears twice in axes {0, -2}", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.moments(x, {0.5}) end)
    assert.matches("tf.nn.moments: axes must be a list of integers, got {0.5}", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.moments(x) end)
    assert.matches("tf.nn.moments: axes is required", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.moments(tf.zeros({2}, tf.int32), {0}) end)
    assert.matches("tf.nn.moments: x must be a float32 or float64 tensor, got int32", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.moments(x, {0}, {keepdim = true}) end)
    assert.matches("tf.nn.moments: unknown option 'keepdim'", err, 1, true)
  end)
end)

describe("tf.nn.batch_normalization", function()
  before_each(function() tf.reset_default_graph() end)

  it("computes (x - mean) / sqrt(variance + eps) * scale + offset", function()
    local x = const({1, 2, 3, 4, 5, 6}, {3, 2})
    local y = tf.nn.batch_normalization(x, {3, 4}, {4, 16}, {10, 20}, {2, 0.5}, 0)
    assert.equal("batchnorm/Add_1:0", y.name)
    -- column 0: (x - 3) / 2 * 2 + 10; column 1: (x - 4) / 4 * 0.5 + 20
    assert_near_all({{8, 19.75}, {10, 20}, {12, 20.25}}, run(y), 1e-15)
    local plain = tf.nn.batch_normalization(x, {3, 4}, {3, 15}, nil, nil, 1)
    assert_near_all({{-1, -0.5}, {0, 0}, {1, 0.5}}, run(plain), 1e-15)
    local opts = tf.nn.batch_normalization(x, {mean = 1, variance = 0.25, variance_epsilon = 0, name = "bn"})
    assert.equal("bn/Add_1:0", opts.name)
    assert_near_all({{0, 2}, {4, 6}, {8, 10}}, run(opts), 1e-15)
  end)

  it("normalizes with moments to zero mean and unit variance", function()
    local x = const({1, 7, 2, -3, 5, 4, 0, 8}, {4, 2})
    local mean, var = tf.nn.moments(x, {0})
    local y = tf.nn.batch_normalization(x, mean, var, nil, nil, 0)
    local m2, v2 = tf.nn.moments(y, {0})
    local r = run({m2, v2})
    assert_near_all({0, 0}, r[1], 1e-14)
    assert_near_all({1, 1}, r[2], 1e-14)
  end)

  it("differentiates every input (finite differences)", function()
    local xv = H.values(6, 3)
    local x = tf.placeholder(tf.float64, {3, 2})
    local xc = const(xv, {3, 2})
    local function bn(a, m, v, o, s) return tf.nn.batch_normalization(a, m, v, o, s, 0.01) end
    local mean, var, off, scale = const({0.1, -0.2}, {2}), const({0.5, 2}, {2}), const({1, 2}, {2}),
                                  const({1.5, -0.7}, {2})
    H.check_grad(x, {3, 2}, bn(x, mean, var, off, scale), {3, 2}, {delta = 1e-5}, 1e-8)
    local p = tf.placeholder(tf.float64, {2})
    H.check_grad(p, {2}, bn(xc, p, var, off, scale), {3, 2}, {delta = 1e-5}, 1e-8)
    H.check_grad(p, {2}, bn(xc, mean, p, off, scale), {3, 2}, {delta = 1e-5, x_init_value = {0.7, 1.3}}, 1e-7)
    H.check_grad(p, {2}, bn(xc, mean, var, p, scale), {3, 2}, {delta = 1e-5}, 1e-8)
    H.check_grad(p, {2}, bn(xc, mean, var, off, p), {3, 2}, {delta = 1e-5}, 1e-8)
    -- through the batch statistics
    local m, v = tf.nn.moments(x, {0})
    H.check_grad(x, {3, 2}, bn(x, m, v, off, scale), {3, 2}, {delta = 1e-5}, 1e-7)
  end)

  it("reports rank mismatches and missing arguments with the function and the Lua line", function()
    local x = tf.zeros({2, 3}, tf.float64)
    local line = this_line() + 1
    local err = H.error_of(function() local _ = tf.nn.batch_normalization(x, {0, 0, 0, 0}, {1, 1, 1}, nil, nil, 1e-3) end)
    assert.matches("tf.nn.batch_normalization: mean of shape (4,) does not broadcast against x of shape (2, 3) " ..
                   "(rank 2); give one value per entry of the normalized axes, e.g. shape (3,)", err, 1, true)
    assert.matches("nn_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() local _ = tf.nn.batch_normalization(x, 0, tf.zeros({1, 2, 3}, tf.float64), nil, nil, 1) end)
    assert.matches("variance of shape (1, 2, 3) does not broadcast against x of shape (2, 3) (rank 2)", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.batch_normalization(x, 0, 1, nil, {1, 2}, 1e-3) end)
    assert.matches("tf.nn.batch_normalization: scale of shape (2,) does not broadcast", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.batch_normalization(x, 0, 1) end)
    assert.matches("tf.nn.batch_normalization: variance_epsilon is required", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.batch_normalization(x, 0, tf.ones({3}), nil, nil, 1e-3) end)
    assert.matches("tf.nn.batch_normalization: variance has dtype float32 but x has dtype float64", err, 1, true)
  end)
end)

describe("tf.nn.fused_batch_norm", function()
  before_each(function() tf.reset_default_graph() end)

  -- x [2, 2, 2, 2] = 0 .. 15: channel 0 holds the even numbers, channel 1 the odd.
  local function ramp() return const({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {2, 2, 2, 2}) end

  it("normalizes with the batch statistics in training", function()
    local y, mean, var = tf.nn.fused_batch_norm(ramp(), {1, 2}, {0, 10}, {epsilon = 0})
    assert.same({2, 2, 2, 2}, y:get_shape():as_list())
    local r = run({y, mean, var})
    assert_near_all({7, 8}, r[2], 1e-15)
    -- biased variance 21 normalizes; Bessel's 21 * 8 / 7 = 24 is returned
    assert_near_all({24, 24}, r[3], 1e-14)
    local expect = {}
    for i = 0, 15 do
      local c = i % 2
      local z = (i - (c == 0 and 7 or 8)) / math.sqrt(21 + 1.001e-5)
      expect[i + 1] = c == 0 and z or 2 * z + 10
    end
    assert_near_all(expect, r[1], 1e-12)
  end)

  it("uses the given mean and variance in inference", function()
    local y, mean, var = tf.nn.fused_batch_norm(ramp(), {1, 1}, {0, 0}, {mean = {1, 2}, variance = {4, 9},
                                                                       epsilon = 0.001, is_training = false})
    local r = run({y, mean, var})
    assert_near_all({1, 2}, r[2], 0)
    assert_near_all({4, 9}, r[3], 0)
    local out = flat(r[1])
    for i = 0, 15 do
      local c = i % 2
      local want = c == 0 and (i - 1) / math.sqrt(4.001) or (i - 2) / math.sqrt(9.001)
      assert(math.abs(out[i + 1] - want) < 1e-12, "element " .. i)
    end
  end)

  it("differentiates x, scale and offset (finite differences)", function()
    local x = tf.placeholder(tf.float64, {2, 2, 1, 2})
    local y = tf.nn.fused_batch_norm(x, {1.5, 0.5}, {0.2, -0.3})
    H.check_grad(x, {2, 2, 1, 2}, y, {2, 2, 1, 2}, {delta = 1e-5}, 1e-8)
    local _, _, var = tf.nn.fused_batch_norm(x, {1, 1}, {0, 0})
    H.check_grad(x, {2, 2, 1, 2}, var, {2}, {delta = 1e-5}, 1e-8)
    local s = tf.placeholder(tf.float64, {2})
    local xc = const(H.values(8, 9), {2, 2, 1, 2})
    H.check_grad(s, {2}, tf.nn.fused_batch_norm(xc, s, {0, 1}), {2, 2, 1, 2}, {delta = 1e-5}, 1e-8)
    H.check_grad(s, {2}, tf.nn.fused_batch_norm(xc, {1, 2}, s), {2, 2, 1, 2}, {delta = 1e-5}, 1e-8)
  end)

  it("reports wrong ranks and missing statistics with the function and the Lua line", function()
    local line = this_line() + 1
    local err = H.error_of(function() local _ = tf.nn.fused_batch_norm(tf.zeros({2, 3}), {1, 1, 1}, {0, 0, 0}) end)
    assert.matches("tf.nn.fused_batch_norm: x must be 4-D (NHWC: batch, height, width, channels), got shape (2, 3)",
                   err, 1, true)
    assert.matches("nn_spec.lua:" .. line, err, 1, true)
    local x = tf.zeros({1, 2, 2, 3})
    err = H.error_of(function() local _ = tf.nn.fused_batch_norm(x, {1, 1, 1}, {0, 0, 0}, {is_training = false}) end)
    assert.matches("mean and variance must be given when is_training is false", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.fused_batch_norm(x, {{1, 1, 1}}, {0, 0, 0}) end)
    assert.matches("tf.nn.fused_batch_norm: scale must be 1-D (one value per channel), got shape (1, 3)", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.fused_batch_norm(x, {1, 1}, {0, 0}) end)
    assert.matches("tf.nn.fused_batch_norm: scale of shape (2,) does not broadcast against x of shape (1, 2, 2, 3)",
                   err, 1, true)
    err = H.error_of(function() local _ = tf.nn.fused_batch_norm(x, {1, 1, 1}, {0, 0, 0}, {data_format = "NCHW"}) end)
    assert.matches('only data_format = "NHWC" exists, got NCHW', err, 1, true)
    err = H.error_of(function() local _ = tf.nn.fused_batch_norm(x, {1, 1, 1}, {0, 0, 0}, {is_training = "yes"}) end)
    assert.matches("is_training must be a boolean", err, 1, true)
  end)
end)

describe("tf.nn.dropout", function()
  before_each(function() tf.reset_default_graph() end)

  it("keeps each element with probability 1 - rate, scaled by 1 / (1 - rate)", function()
    local n = 20000
    local x = tf.ones({n}, tf.float64)
    local y = tf.nn.dropout(x, {rate = 0.25, seed = 7})
    assert.same({n}, y:get_shape():as_list())
    local kept = 0
    for _, v in ipairs(flat(run(y))) do
      if v ~= 0 then
        kept = kept + 1
        assert(math.abs(v - 4 / 3) < 1e-15, "a kept value is scaled by 1 / keep_prob: " .. v)
      end
    end
    -- 15000 expected; the standard deviation is sqrt(n * 0.75 * 0.25) ~ 61
    assert(math.abs(kept - 15000) < 400, "kept " .. kept)
    local sum = run(tf.reduce_sum(tf.nn.dropout(tf.fill({n}, tf.constant(2, tf.float64)), 0.5, nil, 3)))
    assert(math.abs(sum / n - 2) < 0.05, "expectation preserved: " .. sum / n)
  end)

  it("follows op and graph seeds: reproducible across sessions, a new draw each run", function()
    local x = tf.ones({4, 8})
    local a = tf.nn.dropout(x, {rate = 0.5, seed = 42})
    local s1, s2 = tf.Session(), tf.Session()
    local first = flat(s1:run(a))
    assert.same(first, flat(s2:run(a)))
    assert.are_not.same(first, flat(s1:run(a)))
    local b = tf.nn.dropout(x, {rate = 0.5, seed = 43})
    assert.are_not.same(first, flat(tf.Session():run(b)))
    tf.reset_default_graph()
    tf.set_random_seed(5)
    local c = tf.nn.dropout(tf.ones({4, 8}), {rate = 0.5})
    local v1 = flat(tf.Session():run(c))
    tf.reset_default_graph()
    tf.set_random_seed(5)
    local d = tf.nn.dropout(tf.ones({4, 8}), {rate = 0.5})
    assert.same(v1, flat(tf.Session():run(d)))
  end)

  it("takes keep_prob positionally, rate as a tensor, and noise_shape", function()
    local x = tf.ones({6, 5}, tf.float64)
    local y = tf.nn.dropout(x, 0.5, {6, 1}, 9)
    local r = run(y):totable()
    for _, row in ipairs(r) do
      for j = 2, 5 do assert.equal(row[1], row[j]) end
      assert.is_true(row[1] == 0 or row[1] == 2)
    end
    local z = tf.nn.dropout(x, {rate = 0.5, noise_shape = {-1, 1}, seed = 9})
    assert.same(r, run(z):totable())
    local rate = tf.placeholder(tf.float32, {})
    local t = tf.nn.dropout(x, {rate = rate, seed = 1})
    for _, v in ipairs(flat(run(t, {[rate] = 0}))) do assert.equal(1, v) end
    for _, v in ipairs(flat(run(t, {[rate] = 0.8}))) do assert.is_true(v == 0 or math.abs(v - 5) < 1e-6) end
    assert.same(flat(run(x)), flat(run(tf.nn.dropout(x, {rate = 0}))))
    local u = tf.placeholder(tf.float32, {-1, 3})
    local du = tf.nn.dropout(u, {keep_prob = 1})
    assert.same({-1, 3}, du:get_shape():as_list())
    assert.same({{1, 2, 3}}, run(du, {[u] = {{1, 2, 3}}}):totable())
  end)

  it("differentiates x through the kept elements (finite differences, mask held fixed)", function()
    local x = tf.placeholder(tf.float64, {3, 4})
    local y = tf.nn.dropout(x, {rate = 0.4, seed = 2})
    local rnd = tf.get_default_graph():get_tensor_by_name("dropout/random_uniform:0")
    local u = H.uniform(12, 3)
    for i = 1, 12 do u[i] = (u[i] + 1) / 2 end
    local mask = array(u, {3, 4})
    check_grad_with_feeds(x, {3, 4}, y, {3, 4}, {[rnd] = mask}, 1e-9)
    -- and the gradient is the mask itself, 0 or 1 / keep_prob
    local g = tf.gradients(y, x)[1]
    local gv = flat(tf.Session():run(g, {[x] = array(H.values(12), {3, 4}), [rnd] = mask}))
    for i, v in ipairs(gv) do
      local keep = mask:data()[i - 1] >= 0.4
      assert(math.abs(v - (keep and 1 / 0.6 or 0)) < 1e-12, "gradient " .. i .. ": " .. v)
    end
  end)

  it("reports bad rates and shapes with the function and the Lua line", function()
    local x = tf.ones({2, 3})
    local line = this_line() + 1
    local err = H.error_of(function() local _ = tf.nn.dropout(x, {rate = 1}) end)
    assert.matches("tf.nn.dropout: rate must be a scalar tensor or a number in the range [0, 1), got 1", err, 1, true)
    assert.matches("nn_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() local _ = tf.nn.dropout(x, {rate = -0.1}) end)
    assert.matches("rate must be a scalar tensor or a number in the range [0, 1), got -0.1", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.dropout(x, 0) end)
    assert.matches("tf.nn.dropout: keep_prob must be a scalar tensor or a number in the range (0, 1], got 0",
                   err, 1, true)
    err = H.error_of(function() local _ = tf.nn.dropout(x, {rate = 0.1, keep_prob = 0.9}) end)
    assert.matches("tf.nn.dropout: give rate or keep_prob, not both", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.dropout(x) end)
    assert.matches("tf.nn.dropout: rate (or keep_prob) is required", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.dropout(tf.ones({2}, tf.int32), {rate = 0.5}) end)
    assert.matches("tf.nn.dropout: x must be a float32 or float64 tensor, got int32", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.dropout(x, {rate = 0.5, noise_shape = {2}}) end)
    assert.matches("tf.nn.dropout: noise_shape {2} must have the rank of x, whose shape is (2, 3)", err, 1, true)
    err = H.error_of(function() local _ = tf.nn.dropout(x, {rate = 0.5, noise_shape = {2, 2}}) end)
    assert.matches("noise_shape {2, 2} does not broadcast to x's shape (2, 3) (dimension 1 is 2; it must be 1 or 3)",
                   err, 1, true)
    err = H.error_of(function() local _ = tf.nn.dropout(x, {rate = tf.ones({2})}) end)
    assert.matches("tf.nn.dropout: rate must be a scalar float tensor or a number", err, 1, true)
  end)
end)

-- Values of these are in conformance_spec.lua (TensorFlow's); here their gradients.
describe("tf.nn losses and layers written as composites: gradients by finite differences", function()
  before_each(tf.reset_default_graph)
  local X = {-1.3, 0.4, 2.1, -0.7, 0.9, -2.2}

  it("weighted_cross_entropy_with_logits, log_poisson_loss, swish, crelu, xw_plus_b, relu_layer", function()
    local x = tf.placeholder(tf.float64, {2, 3})
    local z = const({1, 0, 0.5, 1, 0.25, 0}, {2, 3})
    local function check(y, shape)
      H.check_grad(x, {2, 3}, y, shape or {2, 3}, {x_init_value = X, delta = 1e-5}, 1e-6)
    end
    check(tf.nn.weighted_cross_entropy_with_logits({labels = z, logits = x, pos_weight = 3}))
    check(tf.nn.log_poisson_loss(const({0, 1, 3, 10, 0.5, 2}, {2, 3}), x, true))
    check(tf.nn.swish(x))
    check(tf.nn.crelu(x), {2, 6})
    check(tf.nn.xw_plus_b(x, const({1, -2, 0.5, 3, -1, 2}, {3, 2}), const({0.1, -0.2}, {2})), {2, 2})
    check(tf.nn.relu_layer(x, const({1, -2, 0.5, 3, -1, 2}, {3, 2}), const({0.1, -0.2}, {2})), {2, 2})
  end)

  it("conv1d, space_to_depth and depth_to_space", function()
    local x = tf.placeholder(tf.float64, {1, 4, 2})
    local init = {0.1, -0.4, 0.7, 0.2, -0.9, 0.5, 0.3, -0.6}
    local k = const({1, -2, 0.5, 3, -1, 2, 0.25, -0.75}, {2, 2, 2})
    H.check_grad(x, {1, 4, 2}, tf.nn.conv1d(x, k, 1, "SAME"), {1, 4, 2}, {x_init_value = init}, 1e-8)
    H.check_grad(x, {1, 4, 2}, tf.nn.conv1d(x, k, 2, "VALID"), {1, 2, 2}, {x_init_value = init}, 1e-8)
    local img = tf.placeholder(tf.float64, {1, 2, 2, 2})
    local s2d = tf.nn.space_to_depth(img, 2)
    assert.same({1, 1, 1, 8}, s2d:get_shape():as_list())
    H.check_grad(img, {1, 2, 2, 2}, s2d, {1, 1, 1, 8}, {x_init_value = init}, 1e-8)
    local back = tf.nn.depth_to_space(s2d, 2)
    assert_near_all(init, run(back, {[img] = {{{{0.1, -0.4}, {0.7, 0.2}}, {{-0.9, 0.5}, {0.3, -0.6}}}}}), 0)
    assert.matches("block_size should be > 1", H.error_of(tf.nn.space_to_depth, img, 1), 1, true)
    assert.matches("Image height 2 and width 2 should be divisible by block_size: 3",
                   H.error_of(tf.nn.space_to_depth, img, 3), 1, true)
    assert.matches("only \"NWC\"", H.error_of(tf.nn.conv1d, x, k, 1, "SAME", {data_format = "NCW"}), 1, true)
  end)

  it("softmax_cross_entropy_with_logits_v2 lets the gradient reach the labels; the first form does not", function()
    local labels = tf.placeholder(tf.float64, {1, 3})
    local logits = const({1, 2, 3}, {1, 3})
    local v2 = tf.nn.softmax_cross_entropy_with_logits_v2({labels = labels, logits = logits})
    H.check_grad(labels, {1, 3}, v2, {1}, {x_init_value = {0.2, 0.3, 0.5}}, 1e-6)
    local v1 = tf.nn.softmax_cross_entropy_with_logits({labels = labels, logits = logits})
    assert.is_nil(tf.gradients(v1, labels)[1])
  end)

  it("sufficient_statistics and normalize_moments give moments' mean and variance", function()
    local x = const({1, 2, 4, 7, 3, 5}, {2, 3})
    local count, m, v, shift = tf.nn.sufficient_statistics(x, {1}, {shift = 2})
    local mean, variance = tf.nn.normalize_moments(count, m, v, shift)
    local want_mean, want_var = tf.nn.moments(x, {1})
    local r = run({mean, variance, want_mean, want_var})
    assert_near_all(r[3], r[1], 1e-12)
    assert_near_all(r[4], r[2], 1e-12)
  end)
end)
