-- tf.train: the optimizers against hand-computed trajectories (GradientDescent,
-- Momentum) and against a Lua transcription of TensorFlow's update formulas
-- (Adam, RMSProp, Adagrad), slot variables, the global step, learning rates
-- as tensors, var_list, the errors, and gradient clipping.
local tf = require("moonflow")
local H = require("spec.helpers")

local function values(v)
  if type(v) == "number" then return {v} end
  if getmetatable(v) == nil then return v end
  return v:totable()
end

local function assert_list(expected, got, tol, what)
  got = values(got)
  assert.equal(#expected, #got, what)
  for i = 1, #expected do
    local msg = string.format("%s: element %d: expected %.17g, got %.17g", what or "", i, expected[i], got[i])
    if tol then
      assert.is_true(math.abs(got[i] - expected[i]) <= tol * math.max(1, math.abs(expected[i])), msg)
    else
      assert.is_true(got[i] == expected[i], msg)
    end
  end
end

local function names(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v.name end
  table.sort(out)
  return out
end

-- TensorFlow's update formulas (training_ops.cc), element by element in Lua
-- doubles and in the kernels' order of operations. Each returns a function
-- step(w, g) updating the Lua list w in place, and its state (the slots).
local reference = {}
function reference.adam(o)
  local s = {m = {}, v = {}, beta1_power = o.beta1, beta2_power = o.beta2}
  return function(w, g)
    local alpha = o.lr * math.sqrt(1 - s.beta2_power) / (1 - s.beta1_power)
    for i = 1, #w do
      s.m[i] = (s.m[i] or 0) + (g[i] - (s.m[i] or 0)) * (1 - o.beta1)
      s.v[i] = (s.v[i] or 0) + (g[i] * g[i] - (s.v[i] or 0)) * (1 - o.beta2)
      w[i] = w[i] - (s.m[i] * alpha) / (math.sqrt(s.v[i]) + o.epsilon)
    end
    s.beta1_power, s.beta2_power = s.beta1_power * o.beta1, s.beta2_power * o.beta2
  end, s
end
function reference.rmsprop(o)
  local s = {ms = {}, mg = {}, mom = {}}
  return function(w, g)
    for i = 1, #w do
      s.ms[i] = (s.ms[i] or 1) + (g[i] * g[i] - (s.ms[i] or 1)) * (1 - o.decay)
      local denom = s.ms[i]
      if o.centered then
        s.mg[i] = (s.mg[i] or 0) + (g[i] - (s.mg[i] or 0)) * (1 - o.decay)
        denom = s.ms[i] - s.mg[i] * s.mg[i]
      end
      s.mom[i] = (s.mom[i] or 0) * o.momentum + (g[i] * o.lr) / math.sqrt(denom + o.epsilon)
      w[i] = w[i] - s.mom[i]
    end
  end, s
end
function reference.adagrad(o)
  local s = {accum = {}}
  return function(w, g)
    for i = 1, #w do
      s.accum[i] = (s.accum[i] or o.initial_accumulator_value) + g[i] * g[i]
      w[i] = w[i] - g[i] * o.lr * (1 / math.sqrt(s.accum[i]))
    end
  end, s
end

describe("tf.train optimizers", function()
  before_each(function() tf.reset_default_graph() end)

  -- minimize(l2_loss(w)) steps w by exactly its own value times the rate:
  -- the gradient of sum(w^2)/2 is w, with no rounding.
  local function trajectory(opt, dtype, steps, slot)
    local w = tf.Variable({1, -2}, {name = "w", dtype = dtype})
    local train = opt:minimize(tf.nn.l2_loss(w))
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local out, slots = {}, {}
    for i = 1, steps do
      sess:run(train)
      out[i] = sess:run(w):totable()
      if slot then slots[i] = sess:run(opt:get_slot(w, slot)):totable() end
    end
    return out, slots
  end

  it("GradientDescent follows the hand-computed trajectory exactly", function()
    for _, dtype in ipairs({tf.float64, tf.float32}) do
      tf.reset_default_graph()
      -- w <- w - 0.25 * w = 0.75 * w
      local got = trajectory(tf.train.GradientDescentOptimizer(0.25), dtype, 4)
      local want = {{0.75, -1.5}, {0.5625, -1.125}, {0.421875, -0.84375}, {0.31640625, -0.6328125}}
      for i = 1, 4 do assert_list(want[i], got[i], nil, dtype.name .. " step " .. i) end
    end
  end)

  it("Momentum follows the hand-computed trajectory exactly, accumulator included", function()
    for _, dtype in ipairs({tf.float64, tf.float32}) do
      tf.reset_default_graph()
      -- accum <- 0.5 * accum + w;  w <- w - 0.5 * accum
      local opt = tf.train.MomentumOptimizer(0.5, 0.5)
      local got, accum = trajectory(opt, dtype, 5, "momentum")
      local w1 = {0.5, 0, -0.25, -0.25, -0.125}
      local a1 = {1, 1, 0.5, 0, -0.25}
      for i = 1, 5 do
        assert_list({w1[i], -2 * w1[i]}, got[i], nil, dtype.name .. " w step " .. i)
        assert_list({a1[i], -2 * a1[i]}, accum[i], nil, dtype.name .. " accum step " .. i)
      end
    end
  end)

  it("Nesterov momentum follows the hand-computed trajectory exactly", function()
    for _, dtype in ipairs({tf.float64, tf.float32}) do
      tf.reset_default_graph()
      -- accum <- 0.5 * accum + g;  w <- w - (g * 0.5 + accum * 0.5 * 0.5)
      local got = trajectory(tf.train.MomentumOptimizer(0.5, 0.5, {use_nesterov = true}), dtype, 3)
      local w1 = {0.25, -0.0625, -0.109375}
      for i = 1, 3 do assert_list({w1[i], -2 * w1[i]}, got[i], nil, dtype.name .. " step " .. i) end
    end
  end)

  -- Drives an optimizer with a fed gradient sequence through apply_gradients
  -- and compares the variable and the slots with the reference each step.
  local function against_reference(opt, step, state, slot_map, dtype, tol)
    local w0 = {0.5, -1.25, 2}
    local w = tf.Variable(w0, {name = "w", dtype = dtype})
    local g = tf.placeholder(dtype, {3}, "g")
    local train = opt:apply_gradients({{g, w}})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local ref = {unpack(w0)}
    local grads = H.values(18, 11)
    for t = 1, 6 do
      local gt = {grads[3 * t - 2] * 3, grads[3 * t - 1], grads[3 * t] * 0.1}
      step(ref, gt)
      sess:run(train, {[g] = gt})
      assert_list(ref, sess:run(w), tol, "var at step " .. t)
      for slot, key in pairs(slot_map) do
        assert_list(state[key], sess:run(opt:get_slot(w, slot)), tol, slot .. " at step " .. t)
      end
    end
    return sess, ref
  end

  it("Adam is TensorFlow's bias-corrected update, beta powers included", function()
    local o = {lr = 0.1, beta1 = 0.8, beta2 = 0.95, epsilon = 1e-3}
    local step, state = reference.adam(o)
    local opt = tf.train.AdamOptimizer(o.lr, o.beta1, o.beta2, o.epsilon)
    local sess = against_reference(opt, step, state, {m = "m", v = "v"}, tf.float64, 1e-12)
    local b1, b2 = tf.get_default_graph():get_tensor_by_name("beta1_power:0"),
                   tf.get_default_graph():get_tensor_by_name("beta2_power:0")
    assert.near(state.beta1_power, sess:run(b1), 1e-15)
    assert.near(state.beta2_power, sess:run(b2), 1e-15)
  end)

  it("Adam in float32 stays within float32 rounding of the reference", function()
    local o = {lr = 0.001, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8}
    local step, state = reference.adam(o)
    against_reference(tf.train.AdamOptimizer(), step, state, {m = "m", v = "v"}, tf.float32, 1e-5)
  end)

  it("RMSProp, plain, with momentum and centered, is TensorFlow's update", function()
    for _, o in ipairs({
      {lr = 0.01, decay = 0.9, momentum = 0, epsilon = 1e-10},
      {lr = 0.05, decay = 0.8, momentum = 0.7, epsilon = 1e-6},
      {lr = 0.05, decay = 0.8, momentum = 0.7, epsilon = 1e-6, centered = true},
    }) do
      tf.reset_default_graph()
      local step, state = reference.rmsprop(o)
      local opt = tf.train.RMSPropOptimizer(o.lr, {decay = o.decay, momentum = o.momentum, epsilon = o.epsilon,
                                                   centered = o.centered})
      local slots = {rms = "ms", momentum = "mom"}
      if o.centered then slots.mg = "mg" end
      against_reference(opt, step, state, slots, tf.float64, 1e-12)
    end
  end)

  it("Adagrad is TensorFlow's update from the initial accumulator value", function()
    for _, init in ipairs({0.1, 2}) do
      tf.reset_default_graph()
      local o = {lr = 0.3, initial_accumulator_value = init}
      local step, state = reference.adagrad(o)
      local opt = tf.train.AdagradOptimizer(0.3, init)
      against_reference(opt, step, state, {accumulator = "accum"}, tf.float64, 1e-12)
    end
  end)

  it("minimize follows the reference with the graph's own gradients", function()
    -- l2_loss(w - target) has the exact gradient w - target.
    local target = {0.3, -0.7}
    local o = {lr = 0.2, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8}
    local step = reference.adam(o)
    local w = tf.Variable({1, 1}, {dtype = tf.float64})
    local train = tf.train.AdamOptimizer(o.lr):minimize(tf.nn.l2_loss(w - tf.constant(target, tf.float64)))
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local ref = {1, 1}
    for t = 1, 10 do
      step(ref, {ref[1] - target[1], ref[2] - target[2]})
      sess:run(train)
      assert_list(ref, sess:run(w), 1e-12, "step " .. t)
    end
  end)

  it("the learning rate may be a tensor: a fed placeholder, another dtype, a variable", function()
    local lr = tf.placeholder(tf.float64, {}, "lr")
    local w = tf.Variable({1, -2}, {dtype = tf.float64})
    local train = tf.train.GradientDescentOptimizer(lr):minimize(tf.nn.l2_loss(w))
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    sess:run(train, {[lr] = 0.5})
    assert_list({0.5, -1}, sess:run(w))
    sess:run(train, {[lr] = 0.25})
    assert_list({0.375, -0.75}, sess:run(w))
    -- a float32 rate is cast to the float64 variable's dtype
    tf.reset_default_graph()
    local rate = tf.Variable(0.5, {name = "rate"})
    local v = tf.Variable({4}, {dtype = tf.float64})
    local step = tf.train.MomentumOptimizer(rate, tf.constant(0, tf.float64)):minimize(tf.nn.l2_loss(v))
    sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    sess:run(step)
    assert_list({2}, sess:run(v))
    sess:run(rate:assign(0.25))
    sess:run(step)
    assert_list({1.5}, sess:run(v))
  end)

  it("var_list limits the update; the default is the trainable variables", function()
    local a = tf.Variable({1}, {name = "a", dtype = tf.float64})
    local b = tf.Variable({1}, {name = "b", dtype = tf.float64})
    local frozen = tf.Variable({1}, {name = "frozen", dtype = tf.float64, trainable = false})
    local loss = tf.nn.l2_loss(a) + tf.nn.l2_loss(b) + tf.nn.l2_loss(frozen)
    local opt = tf.train.GradientDescentOptimizer(0.5)
    local only_a = opt:minimize(loss, {var_list = {a}})
    local all = opt:minimize(loss)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    sess:run(only_a)
    assert.same({0.5, 1, 1}, {sess:run(a):get(0), sess:run(b):get(0), sess:run(frozen):get(0)})
    sess:run(all)
    assert.same({0.25, 0.5, 1}, {sess:run(a):get(0), sess:run(b):get(0), sess:run(frozen):get(0)})
    -- positionally, in TensorFlow's order: minimize(loss, global_step, var_list)
    local pairs_b = opt:compute_gradients(loss, {b})
    assert.equal(1, #pairs_b)
    assert.equal(b, pairs_b[1][2])
  end)

  it("compute_gradients returns {grad, var} pairs that apply_gradients takes, clipped or not", function()
    local w = tf.Variable({3, -4}, {name = "w", dtype = tf.float64})
    local u = tf.Variable({1}, {name = "u", dtype = tf.float64})
    local loss = tf.nn.l2_loss(w * 2)
    local opt = tf.train.GradientDescentOptimizer(0.1)
    local gv = opt:compute_gradients(loss)
    assert.equal(2, #gv)
    assert.equal(w, gv[1][2])
    assert.is_nil(gv[2][1])           -- u is not on the loss's path
    assert.equal(u, gv[2][2])
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert_list({12, -16}, sess:run(gv[1][1]))
    local clipped = {}
    for i, pair in ipairs(gv) do clipped[i] = {pair[1] and tf.clip_by_norm(pair[1], 2), pair[2]} end
    sess:run(opt:apply_gradients(clipped))
    assert_list({3 - 0.1 * 1.2, -4 + 0.1 * 1.6}, sess:run(w), 1e-15)
    assert_list({1}, sess:run(u))     -- skipped: no gradient, no slot
  end)

  it("the global step counts the applied updates", function()
    local gs = tf.train.get_or_create_global_step()
    assert.equal(gs, tf.train.get_or_create_global_step())
    assert.equal(gs, tf.train.get_global_step())
    assert.equal("global_step:0", gs.name)
    assert.equal(tf.int64, gs.dtype)
    assert.is_false(gs.trainable)
    assert.same({gs}, tf.get_collection(tf.GraphKeys.GLOBAL_STEP))
    assert.same({}, tf.trainable_variables())
    local w = tf.Variable({1}, {dtype = tf.float64})
    local train = tf.train.GradientDescentOptimizer(0.5):minimize(tf.nn.l2_loss(w), {global_step = gs})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    assert.equal(0, tf.train.global_step(sess, gs))
    assert.equal(1, tonumber(sess:run(train)))   -- with a global step, the op is the incremented step
    sess:run(train)
    assert.equal(2, tf.train.global_step(sess, gs))
    assert_list({0.25}, sess:run(w))
    local ok, err = pcall(tf.train.create_global_step)
    assert.is_false(ok)
    assert.matches("global_step already exists", err, 1, true)
    -- minimize records its op in the TRAIN_OP collection
    assert.same({train}, tf.get_collection(tf.GraphKeys.TRAIN_OP))
  end)

  it("names slots like TensorFlow: non-trainable, in the global variables, initialized with them", function()
    local w = tf.Variable({1, 2}, {name = "w"})
    local b = tf.variable_scope("layer", function() return tf.get_variable("b", {2}) end)
    local loss = tf.reduce_sum(w * b)
    local adam = tf.train.AdamOptimizer()
    local train = adam:minimize(loss)
    assert.same({"beta1_power:0", "beta2_power:0", "layer/b/Adam:0", "layer/b/Adam_1:0", "layer/b:0", "w/Adam:0",
                 "w/Adam_1:0", "w:0"}, names(tf.global_variables()))
    assert.same({"layer/b:0", "w:0"}, names(tf.trainable_variables()))
    assert.equal("w/Adam:0", adam:get_slot(w, "m").name)
    assert.equal("w/Adam_1:0", adam:get_slot(w, "v").name)
    assert.same({"m", "v"}, adam:get_slot_names())
    assert.equal(6, #adam:variables())
    for _, op in ipairs({"Momentum", "RMSProp", "Adagrad"}) do
      tf.reset_default_graph()
      local v = tf.Variable({1, 2}, {name = "w"})
      local opt = op == "Momentum" and tf.train.MomentumOptimizer(0.1, 0.9) or tf.train[op .. "Optimizer"](0.1)
      opt:minimize(tf.reduce_sum(v))
      local want = {Momentum = {"w/Momentum:0", "w:0"}, RMSProp = {"w/RMSProp:0", "w/RMSProp_1:0", "w:0"},
                    Adagrad = {"w/Adagrad:0", "w:0"}}
      assert.same(want[op], names(tf.global_variables()))
    end
    tf.reset_default_graph()
    local v = tf.Variable({1, 2}, {name = "w"})
    local centered = tf.train.RMSPropOptimizer(0.1, {centered = true})
    centered:minimize(tf.reduce_sum(v))
    assert.same({"w/RMSProp:0", "w/RMSProp_1:0", "w/RMSProp_2:0", "w:0"}, names(tf.global_variables()))
    assert.equal("w/RMSProp_1:0", centered:get_slot(v, "mg").name)
    -- a second optimizer makes its own slots
    local other = tf.train.AdamOptimizer({name = "Other"})
    local op = other:minimize(tf.reduce_sum(v))
    assert.equal("w/Other:0", other:get_slot(v, "m").name)
    assert.matches("^Other/", op.name)
    -- the initializer covers the slots: a step runs right after it
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    sess:run(op)
    assert.same({}, sess:run(tf.report_uninitialized_variables()))
    assert.equal("<tf.train.AdamOptimizer 'Other'>", tostring(other))
  end)

  it("updates with one fused op per variable", function()
    local a = tf.Variable({1, 2}, {name = "a"})
    local b = tf.Variable({{1}}, {name = "b"})
    tf.train.AdamOptimizer():minimize(tf.reduce_sum(a) + tf.reduce_sum(b))
    local count = 0
    for _, op in ipairs(tf.get_default_graph():get_operations()) do
      if op.type == "ApplyAdam" then
        count = count + 1
        assert.matches("^Adam/update_[ab]/ApplyAdam$", op.name)
      end
    end
    assert.equal(2, count)
  end)

  it("updates in place and allocates nothing after the first step; fetched values stay as they were", function()
    local w = tf.Variable({1, 2, 3, 4}, {dtype = tf.float64})
    local x = tf.placeholder(tf.float64, {4})
    local train = tf.train.MomentumOptimizer(0.5, 0.5):minimize(tf.nn.l2_loss(w * x))
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local feed = {[x] = tf.array({1, 1, 1, 1}, tf.float64)}
    sess:run(train, feed)
    sess:run(train, feed)
    local allocs = sess:num_allocations()
    for _ = 1, 20 do sess:run(train, feed) end
    assert.equal(allocs, sess:num_allocations())
    -- a fetch in the same run sees the value before the update
    local before = sess:run(w)
    local r = sess:run({w, train}, feed)
    assert_list(values(before), r[1])
    sess:run(train, feed)
    assert_list(values(before), r[1])
  end)

  it("explains what cannot be optimized, and the session stays usable", function()
    local w = tf.Variable({1, 2}, {name = "w"})
    local i = tf.Variable({1, 2}, {name = "i", dtype = tf.int32})
    local c = tf.constant({1, 2})
    local opt = tf.train.GradientDescentOptimizer(0.1)
    local sess = tf.Session()
    assert.matches("No variables to optimize", H.error_of(function() opt:minimize(c, {var_list = {}}) end), 1, true)
    tf.reset_default_graph()
    assert.matches("No variables to optimize", H.error_of(function() opt:minimize(tf.constant(1)) end), 1, true)
    tf.reset_default_graph()
    w = tf.Variable({1, 2}, {name = "w"})
    i = tf.Variable({1, 2}, {name = "i", dtype = tf.int32})
    c = tf.constant({1, 2})
    local err = H.error_of(function() opt:minimize(tf.reduce_sum(c), {var_list = {w}}) end)
    assert.matches("No gradients provided for any variable", err, 1, true)
    assert.matches("train_spec.lua", err, 1, true)
    err = H.error_of(function() opt:minimize(tf.stop_gradient(tf.reduce_sum(w)), {var_list = {w}}) end)
    assert.matches("No gradients provided for any variable", err, 1, true)
    assert.matches("Invalid type int32 for i:0", H.error_of(function()
      opt:minimize(tf.reduce_sum(w), {var_list = {w, i}}) end), 1, true)
    assert.matches("Invalid type int32", H.error_of(function() opt:minimize(tf.reduce_sum(i)) end), 1, true)
    assert.matches("not a variable", H.error_of(function() opt:minimize(tf.reduce_sum(w), {var_list = {c}}) end),
                   1, true)
    assert.matches("No gradients provided for any variable: %(w%)", H.error_of(function()
      opt:apply_gradients({{nil, w}}) end))
    assert.matches("global_step must be an integer variable", H.error_of(function()
      opt:minimize(tf.reduce_sum(w), {global_step = w, var_list = {w}}) end), 1, true)
    assert.matches("momentum is required", H.error_of(tf.train.MomentumOptimizer, 0.1), 1, true)
    assert.matches("unknown option 'lr'", H.error_of(tf.train.AdamOptimizer, {lr = 0.1}), 1, true)
    assert.matches("initial_accumulator_value must be a positive number",
                   H.error_of(tf.train.AdagradOptimizer, 0.1, 0), 1, true)
    -- the update ops check their inputs when built
    local v64 = tf.Variable({1, 2}, {name = "v64", dtype = tf.float64})
    assert.matches("'alpha' must be a scalar", H.error_of(function()
      tf.train.GradientDescentOptimizer(tf.constant({1, 2})):minimize(tf.reduce_sum(w), {var_list = {w}}) end), 1, true)
    assert.matches("'delta' must have the shape of 'var'", H.error_of(function()
      opt:apply_gradients({{tf.constant({1, 2, 3}), w}}) end), 1, true)
    assert.matches("use tf.cast", H.error_of(function() opt:apply_gradients({{tf.constant({1, 2}), v64}}) end),
                   1, true)
    assert.matches("requires l-value input", H.error_of(function()
      require("moonflow.graph").op{"ApplyGradientDescent", inputs = {c, tf.constant(1), c}} end), 1, true)
    -- and at run time: an uninitialized slot, a fed gradient of the wrong shape
    local g = tf.placeholder(tf.float32, nil, "g")
    local momentum = tf.train.MomentumOptimizer(0.1, 0.9)
    local step = momentum:apply_gradients({{g, w}})
    sess = tf.Session()
    sess:run(w.initializer)
    assert.matches("Attempting to use uninitialized value w/Momentum", H.error_of(function()
      sess:run(step, {[g] = {1, 1}}) end), 1, true)
    sess:run(momentum:get_slot(w, "momentum").initializer)
    assert.matches("'grad' must have the shape of 'var'", H.error_of(function()
      sess:run(step, {[g] = {1, 1, 1}}) end), 1, true)
    sess:run(step, {[g] = {1, 1}})
    assert_list({0.9, 1.9}, sess:run(w), 1e-6)
  end)

  it("gives a variable of unknown shape slots of its initial value's shape, and checks shapes when it runs", function()
    local w = tf.Variable({1, 2}, {name = "w", dtype = tf.float64, validate_shape = false})
    local g = tf.placeholder(tf.float64, nil, "g")
    local opt = tf.train.MomentumOptimizer(0.5, 0.5)
    local step = opt:apply_gradients({{g, w}})
    assert.is_nil(opt:get_slot(w, "momentum"):get_shape().dims)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    sess:run(step, {[g] = {1, 1}})
    assert_list({0.5, 1.5}, sess:run(w))
    assert_list({1, 1}, sess:run(opt:get_slot(w, "momentum")))
    sess:run(tf.assign(w, tf.constant({1, 2, 3}, tf.float64), {validate_shape = false}))
    assert.matches("'accum' must have the shape of 'var' (variable 'w'): [2] vs [3]", H.error_of(function()
      sess:run(step, {[g] = {1, 1, 1}}) end), 1, true)
    assert.matches("'grad' must have the shape of 'var' (variable 'w'): [2] vs [3]", H.error_of(function()
      sess:run(step, {[g] = {1, 1}}) end), 1, true)
  end)
end)

describe("gradient clipping", function()
  before_each(function() tf.reset_default_graph() end)

  it("clip_by_value clamps, and passes gradients only inside the bounds", function()
    local x = tf.constant({-2, -0.5, 0.5, 2}, tf.float64)
    local y = tf.clip_by_value(x, -1, 1)
    local sess = tf.Session()
    assert_list({-1, -0.5, 0.5, 1}, sess:run(y))
    assert_list({0, 1, 1, 0}, sess:run(tf.gradients(tf.reduce_sum(y), x)[1]))
    assert.equal("clip_by_value:0", y.name)
    -- bounds may be tensors that broadcast
    local lo = tf.constant({0, 0, 1, 1}, tf.float64)
    assert_list({0, 0, 1, 1}, sess:run(x:clip_by_value(lo, 1)))
  end)

  it("clip_by_norm rescales to the clip norm only when the norm exceeds it", function()
    local sess = tf.Session()
    assert_list({0.6, -0.8}, sess:run(tf.clip_by_norm(tf.constant({3, -4}, tf.float64), 1)), 1e-15)
    assert_list({3, -4}, sess:run(tf.clip_by_norm(tf.constant({3, -4}, tf.float64), 10)))
    -- per row with axes
    local m = tf.constant({{3, 4}, {0.3, 0.4}}, tf.float64)
    assert.same({{0.6, 0.8}, {0.3, 0.4}}, sess:run(tf.clip_by_norm(m, 1, {1})):totable())
    -- a zero tensor stays zero, with a finite gradient
    local z = tf.placeholder(tf.float64, {2})
    local clipped = tf.clip_by_norm(z, 1)
    local r = sess:run({clipped, tf.gradients(tf.reduce_sum(clipped), z)[1]}, {[z] = {0, 0}})
    assert_list({0, 0}, r[1])
    assert_list({1, 1}, r[2])
    H.check_grad(z, {2}, tf.clip_by_norm(z, 1), {2}, {x_init_value = {3, -4}})
  end)

  it("global_norm and clip_by_global_norm scale every tensor by one factor; nil entries stay nil", function()
    local a = tf.constant({3, 0}, tf.float64)
    local b = tf.constant({{4}}, tf.float64)
    local sess = tf.Session()
    assert.near(5, sess:run(tf.global_norm({a, b})), 1e-15)
    local clipped, norm = tf.clip_by_global_norm({a, nil, b}, 2.5)
    assert.is_nil(clipped[2])
    assert.near(5, sess:run(norm), 1e-15)
    assert_list({1.5, 0}, sess:run(clipped[1]), 1e-15)
    assert.same({{2}}, sess:run(clipped[3]):totable())
    local same = tf.clip_by_global_norm({a, b}, 10)
    assert_list({3, 0}, sess:run(same[1]))
    -- a norm given by the caller, and an infinite one (TensorFlow gives NaN)
    local given = tf.clip_by_global_norm({a}, 1, tf.constant(3, tf.float64))
    assert_list({1, 0}, sess:run(given[1]), 1e-15)
    local inf = tf.clip_by_global_norm({a}, 1, tf.constant(math.huge, tf.float64))
    local v = sess:run(inf[1]):totable()
    assert.is_true(v[1] ~= v[1] and v[2] ~= v[2])
    assert.matches("holds no tensors", H.error_of(tf.global_norm, {}), 1, true)
  end)
end)
