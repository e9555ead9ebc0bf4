-- Numerically stable functions: effective-tensorflow's "numerical stability"
-- section and cookbook "entropy", with the texts' results.
local ffi = require("ffi")
local tf = require("moonflow")
local H = require("spec.helpers")

local function near_list(want, got, tol)
  assert.equal(#want, #got)
  for i = 1, #want do assert.near(want[i], got[i], tol) end
end

describe("effective-tensorflow: numerical stability", function()
  before_each(function() tf.reset_default_graph() end)

  it("the naive softmax of [1000, 0] is [nan, 0]; the stable one is [1, 0]", function()
    local function unstable_softmax(logits)
      local exp = tf.exp(logits)
      return exp / tf.reduce_sum(exp)
    end
    local function softmax(logits)
      local exp = tf.exp(logits - tf.reduce_max(logits))
      return exp / tf.reduce_sum(exp)
    end
    local sess = tf.Session()
    local naive = sess:run(unstable_softmax(tf.constant({1000, 0}))):totable()
    assert.is_true(naive[1] ~= naive[1])
    assert.equal(0, naive[2])
    assert.same({1, 0}, sess:run(softmax(tf.constant({1000, 0}))):totable())
    assert.same({1, 0}, sess:run(tf.nn.softmax(tf.constant({1000, 0}))):totable())
  end)

  it("tf.nn.softmax: exp(x - max) / sum over an axis, infinite rows as TensorFlow, finite-difference gradient", function()
    local sess = tf.Session()
    local rows = {{1, 2, 3}, {-1, 0.5, 4}}
    local got = sess:run(tf.nn.softmax(tf.constant(rows, tf.float64))):totable()
    for r = 1, 2 do
      local sum = 0
      for j = 1, 3 do sum = sum + math.exp(rows[r][j]) end
      near_list({math.exp(rows[r][1]) / sum, math.exp(rows[r][2]) / sum, math.exp(rows[r][3]) / sum}, got[r], 1e-15)
    end
    -- Along axis 0: columns sum to 1.
    local cols = sess:run(tf.nn.softmax(tf.constant(rows, tf.float64), 0)):totable()
    for j = 1, 3 do assert.near(1, cols[1][j] + cols[2][j], 1e-15) end
    assert.near(1 / (1 + math.exp(-2)), cols[1][1], 1e-15)
    -- A -inf logit gets 0; a row of -inf and one with +inf are NaN where TensorFlow's are.
    local inf = math.huge
    local special = sess:run(tf.nn.softmax(tf.constant({{0, -inf}, {-inf, -inf}, {inf, 0}}, tf.float32))):totable()
    assert.same({1, 0}, special[1])
    assert.is_true(special[2][1] ~= special[2][1] and special[2][2] ~= special[2][2])
    assert.is_true(special[3][1] ~= special[3][1])
    assert.equal(0, special[3][2])
    local x = tf.placeholder(tf.float64, {2, 3})
    -- Central differences with step 1e-5 err by about 1e-10 here (grad_math_spec.lua).
    H.check_grad(x, {2, 3}, tf.nn.softmax(x) * tf.constant({{1, -2, 3}, {0.5, 1, -1}}, tf.float64), {2, 3},
                 {x_init_value = rows, delta = 1e-5}, 1e-6)
  end)

  it("tf.nn.softmax along the last axis is one Softmax op: float32 rows near float64's, any rank, second derivatives",
     function()
    local sess = tf.Session()
    local n = 1000
    local row = {}
    for j = 1, n do row[j] = tonumber(ffi.cast("float", 30 * math.sin(j * 0.37))) end
    local y32 = tf.nn.softmax(tf.constant({row}, tf.float32))
    assert.equal("Softmax", y32.op.type)
    local got = sess:run(y32):totable()[1]
    local want = sess:run(tf.nn.softmax(tf.constant({row}, tf.float64))):totable()[1]
    -- float32 rounds x - max (up to 60 here) to 4e-6, and exp passes that on.
    for j = 1, n do assert.near(want[j], got[j], want[j] * 1e-5 + 1e-30) end
    -- Rank 3: rows along the last axis, as along axis 2 composed of ops.
    local cube = tf.constant({{{1, 2}, {3, 5}}, {{-1, 0}, {0.5, 0.25}}}, tf.float64)
    local both = sess:run({tf.nn.softmax(cube), tf.nn.softmax(cube, 2)})
    assert.equal(2, both[1]:shape()[2])
    H.assert_near_all(H.flat(both[2]), H.flat(both[1]), 1e-15)
    -- The gradient of the gradient, by central differences.
    local x = tf.placeholder(tf.float64, {2, 3})
    local w = tf.constant({{1, -2, 3}, {0.5, 1, -1}}, tf.float64)
    local dx = tf.gradients(tf.reduce_sum(tf.nn.softmax(x) * w), {x})[1]
    H.check_grad(x, {2, 3}, dx * w, {2, 3}, {x_init_value = {{1, 2, 3}, {-1, 0.5, 4}}, delta = 1e-5}, 1e-6)
    -- A scalar fed where the rank was unknown: the op says so.
    local p = tf.placeholder(tf.float32)
    local err = H.error_of(sess.run, sess, tf.nn.softmax(p), {[p] = 1})
    assert.matches("Softmax_%d+: logits must have at least one dimension %(the classes%), got a scalar " ..
                   "%[%[node Softmax_%d+ %(defined at spec/nn_stable_spec.lua:%d+%)%]%]", err)
  end)

  it("the naive cross entropy is inf; the stable one is 500 with gradient [0.5, -0.5]", function()
    local function unstable_softmax_cross_entropy(labels, logits)
      local exp = tf.exp(logits)
      local log = tf.log(exp / tf.reduce_sum(exp))
      return -tf.reduce_sum(labels * log)
    end
    local function softmax_cross_entropy(labels, logits)
      local scaled_logits = logits - tf.reduce_max(logits)
      local normalized_logits = scaled_logits - tf.reduce_logsumexp(scaled_logits)
      return -tf.reduce_sum(labels * normalized_logits)
    end
    local labels = tf.constant({0.5, 0.5})
    local logits = tf.constant({1000, 0})
    local sess = tf.Session()
    local naive = sess:run(unstable_softmax_cross_entropy(labels, logits))
    assert.is_true(naive == math.huge or naive ~= naive)
    local xe = softmax_cross_entropy(labels, logits)
    assert.equal(500, sess:run(xe))
    assert.same({0.5, -0.5}, sess:run(tf.gradients(xe, logits)[1]):totable())
    local builtin = tf.nn.softmax_cross_entropy_with_logits({labels = labels, logits = logits})
    assert.equal(500, sess:run(builtin))
    assert.same({0.5, -0.5}, sess:run(tf.gradients(builtin, logits)[1]):totable())
  end)
end)

describe("tf.nn stable functions", function()
  before_each(function() tf.reset_default_graph() end)

  local x_values = {{0.2, -1.3, 2.5}, {3.1, 0.4, -0.7}}

  it("softmax and log_softmax along any axis", function()
    local x = tf.constant(x_values, tf.float64)
    local sess = tf.Session()
    local sm = sess:run(tf.nn.softmax(x)):totable()
    for r = 1, 2 do
      local z = 0
      for c = 1, 3 do z = z + math.exp(x_values[r][c]) end
      for c = 1, 3 do assert.near(math.exp(x_values[r][c]) / z, sm[r][c], 1e-12) end
    end
    local ls0 = sess:run(tf.nn.log_softmax(x, 0)):totable()
    for c = 1, 3 do
      local z = math.log(math.exp(x_values[1][c]) + math.exp(x_values[2][c]))
      for r = 1, 2 do assert.near(x_values[r][c] - z, ls0[r][c], 1e-12) end
    end
    local by_option = sess:run(tf.nn.softmax(x, {axis = 0})):totable()
    assert.near(math.exp(ls0[1][1]), by_option[1][1], 1e-12)
  end)

  it("reduce_logsumexp with axis and keepdims, stable at 1000", function()
    local x = tf.constant({{1, 2}, {3, 1000}}, tf.float64)
    local sess = tf.Session()
    near_list({math.log(math.exp(1) + math.exp(2)), 1000}, sess:run(tf.reduce_logsumexp(x, 1)):totable(), 1e-12)
    assert.same({2, 1}, sess:run(tf.reduce_logsumexp(x, 1, true)):shape())
    assert.near(1000, sess:run(tf.reduce_logsumexp(x)), 1e-9)
    assert.same({}, tf.reduce_logsumexp(x):get_shape():as_list())
  end)

  it("reduce_logsumexp of all -inf is -inf, as TensorFlow's (not NaN)", function()
    local sess = tf.Session()
    local inf = math.huge
    assert.equal(-inf, sess:run(tf.reduce_logsumexp(tf.constant({-inf, -inf}, tf.float64))))
    assert.same({-inf, math.log(1 + math.exp(1))},
                sess:run(tf.reduce_logsumexp(tf.constant({{-inf, -inf}, {0, 1}}, tf.float64), 1)):totable())
    assert.equal(inf, sess:run(tf.reduce_logsumexp(tf.constant({1, inf}))))
    assert.same({{-inf}}, sess:run(tf.reduce_logsumexp(tf.constant({{-inf, -inf}}), {axis = 1, keepdims = true}))
                          :totable())
    -- log_softmax is built on it: a row with one finite entry is [0, -inf].
    assert.same({0, -inf}, sess:run(tf.nn.log_softmax(tf.constant({3, -inf}, tf.float64))):totable())
  end)

  it("sparse softmax cross entropy picks the label's entry: a -inf elsewhere costs nothing", function()
    local sess = tf.Session()
    local inf = math.huge
    local function xent(labels, logits)
      local l = tf.nn.sparse_softmax_cross_entropy_with_logits({labels = labels, logits = logits})
      return l
    end
    assert.same({0}, sess:run(xent({0}, tf.constant({{0, -inf}}, tf.float64))):totable())
    -- log(e^1 + e^3) - 1 with the -inf class ignored.
    local logits = tf.constant({{1, -inf, 3}, {0, 0, -inf}}, tf.float64)
    local loss = xent(tf.constant({0, 1}, tf.int64), logits)
    near_list({math.log(math.exp(1) + math.exp(3)) - 1, math.log(2)}, sess:run(loss):totable(), 1e-12)
    local s1 = math.exp(1) / (math.exp(1) + math.exp(3))
    local g = sess:run(tf.gradients(loss, logits)[1]):totable()
    near_list({s1 - 1, 0, 1 - s1}, g[1], 1e-12)
    near_list({0.5, -0.5, 0}, g[2], 1e-12)
    -- Logits of rank 3: rows of the last axis, the loss shaped like the labels.
    local x3 = tf.constant({{{1, 2, 3}, {3, 2, 1}}}, tf.float64)
    local l3 = sess:run(xent(tf.constant({{2, 1}}, tf.int32), x3)):totable()
    local lse = math.log(math.exp(1) + math.exp(2) + math.exp(3))
    near_list({lse - 3, lse - 2}, l3[1], 1e-12)
    -- A 1-D row and a scalar label.
    assert.near(lse - 1, sess:run(xent(0, tf.constant({1, 2, 3}, tf.float64))), 1e-12)
  end)

  it("sparse softmax cross entropy refuses labels outside [0, classes) when run", function()
    local sess = tf.Session()
    local labels = tf.placeholder(tf.int32, {-1}, "labels")
    local line = debug.getinfo(1, "l").currentline + 1
    local loss = tf.nn.sparse_softmax_cross_entropy_with_logits({labels = labels, logits = tf.ones({2, 3})})
    local function err_of(values)
      local ok, err = pcall(sess.run, sess, loss, {[labels] = values})
      assert.is_false(ok)
      return err
    end
    assert.equal("Received a label value of 7 which is outside the valid range of [0, 3).  Label values: 0 7 " ..
                 "[[node SparseSoftmaxCrossEntropyWithLogits (defined at spec/nn_stable_spec.lua:" .. line .. ")]]",
                 err_of({0, 7}))
    assert.truthy(err_of({-1, 2}):find("Received a label value of -1 which is outside the valid range of [0, 3).  " ..
                                       "Label values: -1 2", 1, true))
    assert.truthy(err_of({3, 3}):find("label value of 3 ", 1, true))
    -- The session stays usable.
    near_list({math.log(3), math.log(3)}, sess:run(loss, {[labels] = {0, 2}}):totable(), 1e-6)
    -- Float labels asked for are refused (a constant float32 only because Lua numbers
    -- are is taken for ints); statically known ranks must agree.
    assert.is_false(pcall(tf.nn.sparse_softmax_cross_entropy_with_logits,
                          {labels = tf.constant({0, 1}, tf.float32), logits = tf.ones({2, 3})}))
    local ok, err = pcall(tf.nn.sparse_softmax_cross_entropy_with_logits, {labels = {{0}}, logits = tf.ones({2, 3})})
    assert.is_false(ok)
    assert.truthy(err:find("rank of labels (received 2) should equal rank of logits minus 1 (received 2)", 1, true))
  end)

  it("sparse softmax cross entropy: first and second derivatives pass finite differences", function()
    local x = tf.placeholder(tf.float64, {3, 4}, "x")
    local init = {{0.5, -1, 2, 0.25}, {1, 1, -2, 3}, {-0.5, 0, 0.75, -1.5}}
    local labels = tf.constant({3, 0, 2}, tf.int32)
    local loss = tf.nn.sparse_softmax_cross_entropy_with_logits({labels = labels, logits = x})
    local err = tf.test.compute_gradient_error(x, {3, 4}, loss, {3}, {x_init_value = init})
    assert(err < 1e-7, "gradient error " .. err)
    -- The gradient's own gradient (a Hessian-vector product) goes through the backprop output.
    local w = tf.constant({{1, 2, 3, 4}, {-1, 0, 1, 0}, {0.5, 0.5, -2, 1}}, tf.float64)
    local gx = tf.gradients(tf.reduce_sum(loss * tf.constant({1, 2, 3}, tf.float64)), x)[1]
    err = tf.test.compute_gradient_error(x, {3, 4}, tf.reduce_sum(gx * w, 1), {3}, {x_init_value = init, delta = 1e-4})
    assert(err < 1e-7, "second derivative error " .. err)
    -- and equals the dense loss's with one-hot labels.
    local dense = tf.nn.softmax_cross_entropy_with_logits({labels = tf.one_hot(labels, 4, 1, 0, {dtype = tf.float64}),
                                                          logits = x})
    local gd = tf.gradients(tf.reduce_sum(dense * tf.constant({1, 2, 3}, tf.float64)), x)[1]
    local sess = tf.Session()
    local hs = sess:run(tf.gradients(tf.reduce_sum(gx * w), x)[1], {[x] = init}):totable()
    local hd = sess:run(tf.gradients(tf.reduce_sum(gd * w), x)[1], {[x] = init}):totable()
    for r = 1, 3 do near_list(hd[r], hs[r], 1e-12) end
    -- Rank-3 logits too.
    local x3 = tf.placeholder(tf.float64, {1, 3, 4}, "x3")
    local l3 = tf.nn.sparse_softmax_cross_entropy_with_logits({labels = {{3, 0, 2}}, logits = x3})
    err = tf.test.compute_gradient_error(x3, {1, 3, 4}, l3, {1, 3}, {x_init_value = {init}})
    assert(err < 1e-7, "rank-3 gradient error " .. err)
  end)

  it("sparse softmax cross entropy equals the dense one with one-hot labels", function()
    local logits = tf.constant(x_values, tf.float64)
    local dense = tf.nn.softmax_cross_entropy_with_logits({
      labels = tf.constant({{0, 0, 1}, {1, 0, 0}}, tf.float64), logits = logits})
    local sparse = tf.nn.sparse_softmax_cross_entropy_with_logits({
      labels = tf.constant({2, 0}, tf.int32), logits = logits})
    local sess = tf.Session()
    near_list(sess:run(dense):totable(), sess:run(sparse):totable(), 1e-12)
    local gd = sess:run(tf.gradients(dense, logits)[1]):totable()
    local gs = sess:run(tf.gradients(sparse, logits)[1]):totable()
    for r = 1, 2 do near_list(gd[r], gs[r], 1e-12) end
  end)

  it("sigmoid cross entropy matches its definition and never overflows", function()
    local z = {1, 0, 1, 0}
    local xs = {-2, 0.5, 100, -100}
    local sess = tf.Session()
    local got = sess:run(tf.nn.sigmoid_cross_entropy_with_logits({
      labels = tf.constant(z, tf.float64), logits = tf.constant(xs, tf.float64)})):totable()
    for i = 1, 2 do
      local s = 1 / (1 + math.exp(-xs[i]))
      assert.near(-(z[i] * math.log(s) + (1 - z[i]) * math.log(1 - s)), got[i], 1e-12)
    end
    assert.near(0, got[3], 1e-12)
    assert.near(0, got[4], 1e-12)
  end)

  it("l2_loss is half the sum of squares", function()
    assert.equal(7, tf.Session():run(tf.nn.l2_loss(tf.constant({1, 2, 3}))))
  end)

  it("every function passes a gradient check", function()
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local labels = tf.constant({{0.1, 0.2, 0.7}, {0.5, 0.25, 0.25}}, tf.float64)
    local cases = {
      {tf.nn.softmax(x), {2, 3}},
      {tf.nn.log_softmax(x, 0), {2, 3}},
      {tf.reduce_logsumexp(x, 1), {2}},
      {tf.nn.softmax_cross_entropy_with_logits({labels = labels, logits = x}), {2}},
      {tf.nn.sparse_softmax_cross_entropy_with_logits({labels = tf.constant({1, 2}, tf.int64), logits = x}), {2}},
      {tf.nn.sigmoid_cross_entropy_with_logits({labels = labels, logits = x}), {2, 3}},
      {tf.nn.l2_loss(x), {}},
    }
    for i, case in ipairs(cases) do
      local err = tf.test.compute_gradient_error(x, {2, 3}, case[1], case[2], {x_init_value = x_values})
      assert(err < 1e-7, "case " .. i .. ": gradient error " .. err)
    end
  end)

  -- From spec/fixtures/op_coverage_values.py.
  it("softmax cross entropy is TensorFlow's fused kernel: float32 keeps its precision at large logits", function()
    local sess = tf.Session()
    local logits = tf.constant({-1000, 1000, 999})
    local xe = tf.nn.softmax_cross_entropy_with_logits({labels = {0, 0.5, 0.5}, logits = logits})
    assert.equal("SoftmaxCrossEntropyWithLogits", xe.op.inputs[1].op.type)
    assert.equal(tf.float32, xe.dtype)
    assert.equal(0.8132616877555847, sess:run(xe))  -- 0.8132617 as float32, the exact value rounded
    near_list({0, 0.23105858266353607, -0.23105858266353607}, sess:run(tf.gradients(xe, logits)[1]):totable(), 1e-7)
    local rows = tf.constant({{-1000, 1000, 999}, {1, 2, 3}})
    local two = tf.nn.softmax_cross_entropy_with_logits({labels = {{0, 0.5, 0.5}, {1, 0, 0}}, logits = rows})
    assert.equal("SoftmaxCrossEntropyWithLogits", two.op.type)
    near_list({0.8132616877555847, 2.4076058864593506}, sess:run(two):totable(), 1e-7)
  end)

  it("softmax cross entropy along any axis of any rank, labels broadcast to the logits", function()
    local x = tf.constant({{{0.2, -1.3}, {2.5, 3.1}}, {{0.4, -0.7}, {1.5, -2}}}, tf.float64)
    local z = tf.constant({{{0.1, 0.9}, {0.5, 0.5}}, {{1, 0}, {0.3, 0.7}}}, tf.float64)
    local cases = {
      {-1, {{1.5514132779827523, 0.7374879504858858}, {0.28733532511543075, 2.4797504182726207}}},
      {0, {{0.6779527563197509, 0.9337391554372972}, {0.5506093500145782, 3.577293883922135}}},
      {1, {{0.28732727875877784, 3.9770836184507745}, {1.47353592265006, 1.0787059176830944}}},
      {2, {{1.5514132779827523, 0.7374879504858858}, {0.28733532511543075, 2.4797504182726207}}},
      {-2, {{0.28732727875877784, 3.9770836184507745}, {1.47353592265006, 1.0787059176830944}}},
      {-3, {{0.6779527563197509, 0.9337391554372972}, {0.5506093500145782, 3.577293883922135}}},
    }
    local sess = tf.Session()
    for _, c in ipairs(cases) do
      local xe = tf.nn.softmax_cross_entropy_with_logits({labels = z, logits = x, axis = c[1]})
      assert.same({2, 2}, xe:get_shape():as_list())
      local got = sess:run(xe):totable()
      for r = 1, 2 do near_list(c[2][r], got[r], 1e-14) end
    end
    local dim = tf.nn.softmax_cross_entropy_with_logits({labels = z, logits = x, dim = 0})
    near_list(cases[2][2][1], sess:run(dim):totable()[1], 1e-14)
    -- labels of one row for every row; logits of unknown shape; empty batches
    local p = tf.placeholder(tf.float64)
    local one = tf.nn.softmax_cross_entropy_with_logits({labels = {0.25, 0.75}, logits = p})
    local v = sess:run(one, {[p] = {{0.2, -1.3}, {2.5, 3.1}}}):totable()
    near_list({1.3264132779827527, 0.5874879504858856}, v, 1e-14)
    assert.same({0}, sess:run(one, {[p] = tf.Array.new(tf.float64, {0, 2})}):shape())
  end)

  it("softmax cross entropy: zero labels at -inf logits give NaN, as TensorFlow's kernel", function()
    local inf = math.huge
    local xe = tf.nn.softmax_cross_entropy_with_logits({labels = {0, 1}, logits = tf.constant({-inf, 0})})
    local v = tf.Session():run(xe)
    assert.is_true(v ~= v)
    local nan = tf.Session():run(tf.nn.softmax_cross_entropy_with_logits({labels = {1, 0}, logits = {0 / 0, 1}}))
    assert.is_true(nan ~= nan)
  end)

  it("softmax cross entropy's op differentiates logits and labels, to the second order", function()
    local G = require("moonflow.graph")
    local x = tf.placeholder(tf.float64, {2, 3}, "x")
    local init = {{0.5, -1, 2}, {1, 1, -2}}
    local labels = tf.constant({{0.1, 0.2, 0.7}, {0.5, 0.25, 0.25}}, tf.float64)
    local loss = G.op{"SoftmaxCrossEntropyWithLogits", inputs = {x, labels}}
    H.check_grad(x, {2, 3}, loss, {2}, {x_init_value = init, delta = 1e-5})
    local w = tf.constant({{1, 2, 3}, {-1, 0, 1}}, tf.float64)
    local gx = tf.gradients(tf.reduce_sum(loss * tf.constant({1, 2}, tf.float64)), x)[1]
    H.check_grad(x, {2, 3}, tf.reduce_sum(gx * w, 1), {2}, {x_init_value = init, delta = 1e-5})
    local l = tf.placeholder(tf.float64, {2, 3}, "l")
    local logits = tf.constant(init, tf.float64)
    local by_labels = G.op{"SoftmaxCrossEntropyWithLogits", inputs = {logits, l}}
    H.check_grad(l, {2, 3}, by_labels, {2}, {x_init_value = {{0.1, 0.2, 0.7}, {0.5, 0.25, 0.25}}})
    local _, backprop = G.op{"SoftmaxCrossEntropyWithLogits", inputs = {logits, l}}
    H.check_grad(l, {2, 3}, backprop, {2, 3})
  end)

  it("softmax cross entropy reports bad logits and labels with the op or function and the Lua line", function()
    local xent = tf.nn.softmax_cross_entropy_with_logits
    local line = H.this_line() + 1
    local err = H.error_of(function() return (xent({labels = {1, 0}, logits = tf.constant({1, 2}, tf.int32)})) end)
    assert.truthy(err:find("features has dtype int32, but SoftmaxCrossEntropyWithLogits takes only float32, float64",
                           1, true), err)
    assert.truthy(err:find("nn_stable_spec.lua:" .. line, 1, true), err)
    err = H.error_of(xent, {labels = tf.constant({{1, 0}}, tf.float64), logits = tf.ones({1, 2})})
    assert.truthy(err:find("logits has dtype float32 but labels has dtype float64; use tf.cast", 1, true), err)
    err = H.error_of(xent, {labels = {1, 0, 0}, logits = tf.ones({2, 2})})
    assert.truthy(err:find("cannot broadcast a tensor of shape [3] to shape [2,2]", 1, true), err)
    err = H.error_of(xent, {labels = 1, logits = tf.constant(1)})
    assert.truthy(err:find("logits must have at least one dimension (the classes), got a scalar", 1, true), err)
    err = H.error_of(xent, {labels = {{1, 0}}, logits = tf.ones({1, 2}), axis = 2})
    assert.truthy(err:find("axis 2 is out of range for logits of shape (1, 2) (rank 2)", 1, true), err)
    err = H.error_of(xent, {labels = {{1, 0}}, logits = tf.placeholder(tf.float32), axis = 0})
    assert.truthy(err:find("axis 0 needs logits of a known rank", 1, true), err)
  end)

  it("no gradient flows into softmax cross entropy labels", function()
    local labels = tf.placeholder(tf.float64, {3}, "labels")
    local logits = tf.constant({1, 2, 3}, tf.float64)
    local xe = tf.nn.softmax_cross_entropy_with_logits({labels = labels, logits = logits})
    assert.is_nil(tf.gradients(xe, labels)[1])
  end)

  it("asks for labels and logits by name", function()
    local ok, err = pcall(tf.nn.softmax_cross_entropy_with_logits, tf.constant({1}), tf.constant({1}))
    assert.is_false(ok)
    assert.matches("labels = ..., logits = ...", err, 1, true)
  end)
end)

describe("effective-tensorflow cookbook: entropy", function()
  before_each(function() tf.reset_default_graph() end)

  -- The cookbook's stable entropy: -sum(softmax * log_softmax).
  local function softmax_entropy(logits, dim)
    local plogp = tf.nn.softmax(logits, dim) * tf.nn.log_softmax(logits, dim)
    return -tf.reduce_sum(plogp, dim)
  end

  it("the stable entropy passes a gradient check; cross entropy against its own softmax does not", function()
    local logits = tf.placeholder(tf.float64, {5}, "logits")
    local stable = softmax_entropy(logits, -1)
    local init = {0.1, -0.4, 0.9, 0.3, -1.2}
    assert.is_true(tf.test.compute_gradient_error(logits, {5}, stable, {}, {x_init_value = init}) < 1e-7)
    -- no gradient flows into labels, so this version's symbolic gradient is wrong
    local non_differentiable = tf.nn.softmax_cross_entropy_with_logits({
      labels = tf.nn.softmax(logits), logits = logits})
    assert.is_true(tf.test.compute_gradient_error(logits, {5}, non_differentiable, {}, {x_init_value = init}) > 1e-2)
  end)
end)
