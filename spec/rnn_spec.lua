-- tf.nn.rnn_cell (BasicRNNCell, BasicLSTMCell, LSTMCell, GRUCell, MultiRNNCell,
-- DropoutWrapper, ResidualWrapper, DeviceWrapper), tf.nn.dynamic_rnn,
-- static_rnn, bidirectional_dynamic_rnn, static_bidirectional_rnn and
-- tf.reverse_sequence: outputs, final states, gradients and variable
-- names against TensorFlow 1.x (spec/fixtures/rnn_values.py, its output
-- committed as spec/fixtures/rnn_values.lua), finite differences, dropout's
-- statistics, errors naming the function and the Lua line, and a small
-- network trained to sum its inputs.
local tf = require("moonflow")
local H = require("spec.helpers")
local V = require("spec.fixtures.rnn_values")
local assert_near_all, this_line = H.assert_near_all, H.this_line
local rnn = tf.nn.rnn_cell
setup(H.growth_off)
teardown(H.growth_restore)

-- A state's tensors in TensorFlow's order (an LSTMStateTuple's c, then h).
local function flatten(state, out)
  out = out or {}
  if tf.is_tensor(state) then out[#out + 1] = state
  elseif getmetatable(state) == nil then for _, s in ipairs(state) do flatten(s, out) end
  else flatten(state.c, out); flatten(state.h, out) end
  return out
end

-- Builds case `name` of the fixture with build(x, sequence_length, initial
-- state tensors) -> outputs list, state; compares outputs, final state and
-- the gradients of sum(sin(outputs)) + sum(sin(state)) to TensorFlow's.
local function check_case(name, build, dtype)
  local c = V[name]
  tf.reset_default_graph()
  dtype = dtype or tf.float32
  local x = tf.constant(c.x, dtype)
  local init = {}
  for i, v in ipairs(c.init) do init[i] = tf.constant(v, dtype) end
  local seq = c.seq and tf.constant(c.seq, tf.int32)
  local outputs, state = build(x, seq, init)
  local flat_state = flatten(state)
  local terms = {}
  for _, t in ipairs(outputs) do terms[#terms + 1] = tf.reduce_sum(tf.sin(t)) end
  for _, t in ipairs(flat_state) do terms[#terms + 1] = tf.reduce_sum(tf.sin(t)) end
  local loss = tf.add_n(terms)
  local variables = tf.trainable_variables()
  table.sort(variables, function(a, b) return a.op.name < b.op.name end)
  local names, want_names = {}, {}
  for i, v in ipairs(variables) do names[i] = v.op.name end
  for i, v in ipairs(c.vars) do want_names[i] = v[1] end
  assert.same(want_names, names)
  local wrt = {x}
  for _, t in ipairs(init) do wrt[#wrt + 1] = t end
  for _, v in ipairs(variables) do wrt[#wrt + 1] = v end
  local grads = tf.gradients(loss, wrt)
  local sess = tf.Session()
  sess:run(tf.global_variables_initializer())
  for i, v in ipairs(variables) do
    sess:run(tf.assign(v, tf.constant(c.vars[i][2], v.dtype)))
  end
  local got = sess:run({outputs, flat_state, grads})
  local tol = dtype == tf.float64 and 1e-10 or 1e-5
  assert.equal(#c.outputs, #got[1])
  for i = 1, #c.outputs do assert_near_all(c.outputs[i], got[1][i], tol, name .. " output " .. i) end
  assert.equal(#c.state, #got[2])
  for i = 1, #c.state do assert_near_all(c.state[i], got[2][i], tol, name .. " state " .. i) end
  assert_near_all(c.grad_x, got[3][1], tol, name .. " d/dx")
  for i = 1, #init do assert_near_all(c.grad_init[i], got[3][1 + i], tol, name .. " d/dinitial_state " .. i) end
  for i, v in ipairs(c.vars) do assert_near_all(v[3], got[3][1 + #init + i], tol, name .. " d/d" .. v[1]) end
end

local function dynamic(make_cell, time_major)
  return function(x, seq, init)
    local cell = make_cell()
    local o = {sequence_length = seq, time_major = time_major}
    if #init > 0 then o.initial_state = init.pack(init) else o.dtype = x.dtype end
    local out, state = tf.nn.dynamic_rnn(cell, x, o)
    return {out}, state
  end
end

-- initial states packed as the cells' state structures
local function lstm_init(init) return rnn.LSTMStateTuple(init[1], init[2]) end
local function multi_init(init) return {rnn.LSTMStateTuple(init[1], init[2]), init[3]} end
local function with_init(pack, build)
  return function(x, seq, init) init.pack = pack; return build(x, seq, init) end
end

describe("tf.nn.dynamic_rnn against TensorFlow 1.x", function()
  it("BasicRNNCell (tanh; relu with sequence lengths 2, 0, 4; float64 time-major)", function()
    check_case("basic_rnn", dynamic(function() return rnn.BasicRNNCell(3) end))
    check_case("basic_rnn_seq", dynamic(function() return rnn.BasicRNNCell(3, {activation = tf.nn.relu}) end))
    check_case("basic_rnn_f64", dynamic(function() return rnn.BasicRNNCell(3) end, true), tf.float64)
  end)

  it("BasicLSTMCell (tuple state with sequence lengths; concatenated state, forget_bias 0.5, time-major)", function()
    check_case("basic_lstm", dynamic(function() return rnn.BasicLSTMCell(3) end))
    check_case("basic_lstm_concat", dynamic(function()
      return rnn.BasicLSTMCell(3, 0.5, false)  -- positional: forget_bias, state_is_tuple
    end, true))
  end)

  it("LSTMCell with peepholes, projection, cell_clip and proj_clip; with an initial state", function()
    check_case("lstm_peepholes", dynamic(function()
      return rnn.LSTMCell(3, {use_peepholes = true, num_proj = 2, cell_clip = 0.4, proj_clip = 0.3, forget_bias = 0})
    end))
    check_case("lstm_initial_state", with_init(lstm_init, dynamic(function()
      return rnn.LSTMCell(3, {num_proj = 2})
    end, true)))
  end)

  it("GRUCell (batch-major with sequence lengths, time-major)", function()
    check_case("gru", dynamic(function() return rnn.GRUCell(3) end))
    check_case("gru_time_major", dynamic(function() return rnn.GRUCell(3) end, true))
  end)

  it("MultiRNNCell of an LSTM and a GRU (zero state; given initial state)", function()
    check_case("multi", dynamic(function() return rnn.MultiRNNCell({rnn.BasicLSTMCell(3), rnn.GRUCell(2)}) end))
    check_case("multi_initial_state", with_init(multi_init, dynamic(function()
      return rnn.MultiRNNCell({rnn.LSTMCell(2), rnn.GRUCell(3)})
    end, true)))
  end)
end)

describe("tf.nn.bidirectional_dynamic_rnn, static_rnn, a cell's step, reverse_sequence", function()
  local function bidirectional(time_major)
    return function(x, seq)
      local outputs, states = tf.nn.bidirectional_dynamic_rnn(rnn.GRUCell(3), rnn.BasicLSTMCell(2), x,
                                                              {sequence_length = seq, dtype = x.dtype,
                                                               time_major = time_major})
      return outputs, states
    end
  end

  it("bidirectional_dynamic_rnn with sequence lengths, and time-major without", function()
    check_case("bidirectional", bidirectional(false))
    check_case("bidirectional_time_major", bidirectional(true))
  end)

  it("static_rnn over a list of steps with sequence lengths", function()
    check_case("static", function(x, seq)
      return tf.nn.static_rnn(rnn.BasicLSTMCell(2), tf.unstack(x, {axis = 1}), {sequence_length = seq, dtype = x.dtype})
    end)
  end)

  it("static_bidirectional_rnn with and without sequence lengths", function()
    for _, case in ipairs({"static_bidirectional", "static_bidirectional_full"}) do
      check_case(case, function(x, seq)
        local outputs, state_fw, state_bw = tf.nn.static_bidirectional_rnn(rnn.BasicRNNCell(2), rnn.GRUCell(3),
                                                                          tf.unstack(x, {axis = 1}),
                                                                          {sequence_length = seq, dtype = x.dtype})
        return outputs, {state_fw, state_bw}
      end)
    end
  end)

  it("a cell called on one step (LSTMCell with peepholes, scope lstm_cell)", function()
    check_case("lstm_step", function(x, _, init)
      local cell = rnn.LSTMCell(3, {use_peepholes = true})
      local out, state = cell(tf.unstack(x, {axis = 1})[1], rnn.LSTMStateTuple(init[1], init[2]))
      return {out}, state
    end)
  end)

  it("reverse_sequence reverses each sequence's first seq_lengths steps", function()
    check_case("reverse_sequence", function(x, seq)
      local r = tf.reverse_sequence(x, seq, {seq_axis = 1, batch_axis = 0})
      assert.same({3, 4, 2}, r:get_shape():as_list())
      return {r}, {}
    end)
  end)
end)

describe("tf.nn.rnn_cell variables", function()
  before_each(function() tf.reset_default_graph() end)

  local function var_shapes()
    local out = {}
    for _, v in ipairs(tf.global_variables()) do out[v.name] = v:get_shape():as_list() end
    return out
  end

  it("have TensorFlow's names, shapes and initial values", function()
    local x = tf.placeholder(tf.float32, {-1, 5, 4})
    local _, state = tf.nn.dynamic_rnn(rnn.BasicLSTMCell(3), x, {dtype = tf.float32})
    assert.same({-1, 3}, state.c:get_shape():as_list())
    tf.variable_scope("g", function() tf.nn.dynamic_rnn(rnn.GRUCell(2), x, {dtype = tf.float32}) end)
    tf.variable_scope("d", function()
      tf.nn.dynamic_rnn(rnn.DropoutWrapper(rnn.BasicRNNCell(2), {output_keep_prob = 0.5}), x, {dtype = tf.float32})
    end)
    assert.same({["rnn/basic_lstm_cell/kernel:0"] = {7, 12}, ["rnn/basic_lstm_cell/bias:0"] = {12},
                 ["g/rnn/gru_cell/gates/kernel:0"] = {6, 4}, ["g/rnn/gru_cell/gates/bias:0"] = {4},
                 ["g/rnn/gru_cell/candidate/kernel:0"] = {6, 2}, ["g/rnn/gru_cell/candidate/bias:0"] = {2},
                 ["d/rnn/basic_rnn_cell/kernel:0"] = {6, 2}, ["d/rnn/basic_rnn_cell/bias:0"] = {2}}, var_shapes())
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local g = tf.get_default_graph()
    local function value(name) return H.flat(sess:run(g:get_tensor_by_name(name))) end
    assert.same({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, value("rnn/basic_lstm_cell/bias:0"))
    assert.same({1, 1, 1, 1}, value("g/rnn/gru_cell/gates/bias:0"))
    assert.same({0, 0}, value("g/rnn/gru_cell/candidate/bias:0"))
    -- glorot_uniform: within sqrt(6 / (fan_in + fan_out)), not all equal
    local k, limit, spread = value("rnn/basic_lstm_cell/kernel:0"), math.sqrt(6 / (7 + 12)), 0
    for _, v in ipairs(k) do
      assert.is_true(math.abs(v) <= limit)
      spread = math.max(spread, math.abs(v - k[1]))
    end
    assert.is_true(spread > limit / 4)
  end)

  it("run over inputs of unknown batch and time, as static_rnn's steps", function()
    local x = tf.placeholder(tf.float32, {-1, -1, 2})
    local lengths = tf.placeholder(tf.int32, {-1})
    local cell = rnn.BasicLSTMCell(3)
    local outputs, state = tf.nn.dynamic_rnn(cell, x, {sequence_length = lengths, dtype = tf.float32})
    assert.same({-1, -1, 3}, outputs:get_shape():as_list())
    assert.same({-1, 3}, state.h:get_shape():as_list())
    local y = tf.placeholder(tf.float32, {-1, 5, 2})
    local steps, final = tf.nn.static_rnn(cell, tf.unstack(y, {axis = 1}), {sequence_length = lengths, dtype = tf.float32})
    assert.equal(2, #tf.global_variables())
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local xv = tf.array(H.values(3 * 5 * 2, 2), tf.float32):reshape({3, 5, 2})
    local r = sess:run({outputs, state, tf.stack(steps, {axis = 1}), final}, {[x] = xv, [y] = xv, [lengths] = {5, 3, 1}})
    assert_near_all(r[3], r[1], 1e-6)
    assert_near_all(r[4].c, r[2].c, 1e-6)
    assert_near_all(r[4].h, r[2].h, 1e-6)
    local short = sess:run(outputs, {[x] = tf.array(H.values(4), tf.float32):reshape({1, 2, 2}), [lengths] = {2}})
    assert.same({1, 2, 3}, short:shape())
  end)

  it("are shared by re-entering a scope with reuse, and a second cell in one scope is an error", function()
    local x = tf.placeholder(tf.float32, {2, 5, 4})
    local a = tf.variable_scope("model", function()
      return (tf.nn.dynamic_rnn(rnn.BasicLSTMCell(3), x, {dtype = tf.float32}))
    end)
    local b = tf.variable_scope("model", {reuse = true}, function()
      return (tf.nn.dynamic_rnn(rnn.BasicLSTMCell(3), x, {dtype = tf.float32}))
    end)
    assert.equal(2, #tf.global_variables())
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local xv = {}
    for i = 1, 2 do xv[i] = {} for t = 1, 5 do xv[i][t] = {i, t / 5, -t / 7, 0.5} end end
    local va, vb = unpack(sess:run({a, b}, {[x] = xv}))
    assert_near_all(va, vb, 0)
    local err = H.error_of(function()
      tf.variable_scope("model", function() return tf.nn.dynamic_rnn(rnn.BasicLSTMCell(3), x, {dtype = tf.float32}) end)
    end)
    assert.matches("model/rnn/basic_lstm_cell/kernel already exists", err, 1, true)
    -- static_rnn and a second call of the same cell use its variables
    local cell = rnn.GRUCell(3)
    tf.nn.static_rnn(cell, {x[0], x[1]}, {dtype = tf.float32, scope = "s"})
    tf.nn.dynamic_rnn(cell, x, {dtype = tf.float32, scope = "s2"})
    assert.equal(6, #tf.global_variables())
  end)
end)

describe("tf.nn.rnn_cell.DropoutWrapper", function()
  before_each(function() tf.reset_default_graph() end)

  it("zeroes outputs with probability 1 - keep_prob and scales the rest, new masks each step", function()
    local x = tf.constant(H.uniform(200 * 6 * 2, 3), tf.float32):reshape({200, 6, 2})
    local cell = rnn.BasicRNNCell(4)
    local plain = tf.nn.dynamic_rnn(cell, x, {dtype = tf.float32})
    local keep = tf.placeholder(tf.float32, {})
    local dropped = tf.nn.dynamic_rnn(rnn.DropoutWrapper(cell, {output_keep_prob = keep}), x, {dtype = tf.float32})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local p, d = unpack(sess:run({plain, dropped}, {[keep] = 0.5}))
    local pv, dv, zeros = H.flat(p), H.flat(d), 0
    for i = 1, #pv do
      if dv[i] == 0 then zeros = zeros + 1
      else assert(math.abs(dv[i] - 2 * pv[i]) <= 1e-6, "kept element " .. i .. " scaled by 1 / keep_prob") end
    end
    assert.is_true(zeros > 0.45 * #pv and zeros < 0.55 * #pv, "zeros " .. zeros .. " of " .. #pv)
    -- the masks of the time steps differ
    local d2 = d:totable()
    local same = 0
    for b = 1, 200 do
      for u = 1, 4 do if (d2[b][1][u] == 0) == (d2[b][2][u] == 0) then same = same + 1 end end
    end
    assert.is_true(same < 0.65 * 800, "steps 1 and 2 share " .. same .. " of 800 mask entries")
    assert_near_all(p, sess:run(dropped, {[keep] = 1}), 0)
  end)

  it("drops inputs and state too, keeping an LSTM's c", function()
    local x = tf.constant(H.uniform(50 * 3 * 2, 5), tf.float32):reshape({50, 3, 2})
    local cell = rnn.BasicLSTMCell(3)
    local _, plain = tf.nn.dynamic_rnn(cell, x, {dtype = tf.float32})
    local wrapped = rnn.DropoutWrapper(cell, {input_keep_prob = 0.999999, state_keep_prob = 0.5, seed = 3})
    -- one step from the zero state: c is not dropped, h is
    local out, state = wrapped(x[0], cell:zero_state(3, tf.float32))
    local out_plain, state_plain = cell(x[0], cell:zero_state(3, tf.float32))
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local r = sess:run({out, state, out_plain, state_plain, plain})
    assert_near_all(r[3], r[1], 1e-5)
    assert_near_all(r[4].c, r[2].c, 1e-5)
    local h, hp, zeros = H.flat(r[2].h), H.flat(r[4].h), 0
    for i = 1, #h do
      if h[i] == 0 then zeros = zeros + 1 else assert(math.abs(h[i] - 2 * hp[i]) <= 1e-5) end
    end
    assert.is_true(zeros > 0 and zeros < #h)
  end)
end)

describe("tf.nn.rnn_cell.ResidualWrapper and DeviceWrapper", function()
  before_each(function() tf.reset_default_graph() end)

  it("add the inputs to the output; place the cell's ops", function()
    local x = tf.constant(H.uniform(2 * 3 * 2, 7), tf.float32):reshape({2, 3, 2})
    local cell = rnn.GRUCell(2)
    local plain, plain_state = tf.nn.dynamic_rnn(cell, x, {dtype = tf.float32})
    local residual, residual_state = tf.nn.dynamic_rnn(rnn.ResidualWrapper(cell), x, {dtype = tf.float32})
    local scaled = tf.nn.dynamic_rnn(rnn.ResidualWrapper(cell, {residual_fn = function(i, o) return i - 2 * o end}), x,
                                     {dtype = tf.float32})
    local h0 = cell:zero_state(2, tf.float32)
    local x0 = tf.unstack(x, {axis = 1})[1]
    local placed = rnn.DeviceWrapper(cell, "/cpu:0")(x0, h0)
    assert.equal("/device:CPU:0", placed.device)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local r = sess:run({plain, residual, scaled, plain_state, residual_state, placed, (cell(x0, h0))})
    local p, xv = H.flat(r[1]), H.flat(sess:run(x))
    local sum, diff = {}, {}
    for i = 1, #p do sum[i], diff[i] = p[i] + xv[i], xv[i] - 2 * p[i] end
    assert_near_all(sum, r[2], 1e-6)
    assert_near_all(diff, r[3], 1e-6)
    assert_near_all(r[4], r[5], 0)
    assert_near_all(r[7], r[6], 0)
    local err = H.error_of(function() return rnn.DeviceWrapper(cell, 0) end)
    assert.matches("tf.nn.rnn_cell.DeviceWrapper: device must be a string, got 0", err, 1, true)
    err = H.error_of(function() return rnn.ResidualWrapper({}) end)
    assert.matches("tf.nn.rnn_cell.ResidualWrapper: cell must be an RNN cell", err, 1, true)
  end)
end)

describe("gradients through the RNN loops (finite differences)", function()
  before_each(function() tf.reset_default_graph() end)

  it("dynamic_rnn of an LSTM with sequence lengths: inputs and kernel", function()
    local function net(x)
      local outputs, state = tf.nn.dynamic_rnn(rnn.BasicLSTMCell(2), x, {sequence_length = {3, 2}, dtype = tf.float64})
      return tf.concat({tf.reshape(outputs, {2, 6}), state.c, state.h}, 1)
    end
    local x = tf.placeholder(tf.float64, {2, 3, 2})
    local y = net(x)
    local y2 = tf.variable_scope("constant_inputs", function() return net(tf.constant(H.values(12, 4), tf.float64):reshape({2, 3, 2})) end)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    H.check_grad(x, {2, 3, 2}, y, {2, 10}, {session = sess, x_init_value = H.values(12), delta = 1e-6}, 1e-7)
    local kernel = tf.global_variables()[3]
    assert.equal("constant_inputs/rnn/basic_lstm_cell/kernel:0", kernel.name)
    H.check_grad(kernel, {4, 8}, y2, {2, 10}, {session = sess, x_init_value = H.values(32, 9), delta = 1e-6}, 1e-7)
  end)

  it("bidirectional GRUs: inputs and initial state", function()
    local xv = tf.array(H.values(12, 8), tf.float64):reshape({2, 3, 2})
    local hv = tf.array(H.values(4, 6), tf.float64):reshape({2, 2})
    local cell_fw, cell_bw = rnn.GRUCell(2), rnn.GRUCell(2)
    local function net(x, h0)
      local outputs = tf.nn.bidirectional_dynamic_rnn(cell_fw, cell_bw, x, {sequence_length = {1, 3},
                                                      initial_state_fw = h0, initial_state_bw = h0})
      return tf.concat(outputs, 2)
    end
    local x = tf.placeholder(tf.float64, {2, 3, 2})
    local h0 = tf.placeholder(tf.float64, {2, 2})
    local y_x = net(x, tf.constant(hv))
    local y_h = net(tf.constant(xv), h0)
    assert.equal(8, #tf.global_variables())
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    H.check_grad(x, {2, 3, 2}, y_x, {2, 3, 4}, {session = sess, x_init_value = xv, delta = 1e-6}, 1e-7)
    H.check_grad(h0, {2, 2}, y_h, {2, 3, 4}, {session = sess, x_init_value = hv, delta = 1e-6}, 1e-7)
  end)
end)

describe("RNN errors", function()
  before_each(function() tf.reset_default_graph() end)

  it("name the function, the shapes and the Lua line; the graph stays usable", function()
    local x = tf.placeholder(tf.float32, {2, 5, 3})
    local cell = rnn.GRUCell(4)
    local line = this_line() + 1
    local err = H.error_of(function() local _ = tf.nn.dynamic_rnn(cell, tf.placeholder(tf.float32, {2, 3}), {dtype = tf.float32}) end)
    assert.matches("tf.nn.dynamic_rnn: inputs must have shape [batch_size, max_time, depth] with a known depth, got shape (2, 3)", err, 1, true)
    assert.matches("rnn_spec.lua:" .. line, err, 1, true)
    line = this_line() + 1
    err = H.error_of(function() local _ = tf.nn.dynamic_rnn(cell, x) end)
    assert.matches("tf.nn.dynamic_rnn: If there is no initial_state, you must give a dtype.", err, 1, true)
    assert.matches("rnn_spec.lua:" .. line, err, 1, true)
    line = this_line() + 1
    err = H.error_of(function() local _ = tf.nn.dynamic_rnn(cell, x, {sequence_length = {{1, 2}}, dtype = tf.float32}) end)
    assert.matches("tf.nn.dynamic_rnn: sequence_length must be a vector of length batch_size (2), but saw shape: (1, 2)", err, 1, true)
    assert.matches("rnn_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() return tf.nn.dynamic_rnn(cell, x, {sequence_length = {1, 2, 3}, dtype = tf.float32}) end)
    assert.matches("but saw shape: (3,)", err, 1, true)
    err = H.error_of(function() return tf.nn.dynamic_rnn(cell, x, {sequence_length = tf.constant({1.5, 2}), dtype = tf.float32}) end)
    assert.matches("sequence_length must be an int32 or int64 vector, got float32", err, 1, true)
    err = H.error_of(function() return tf.nn.dynamic_rnn(cell, x, {initial_state = {x}}) end)
    assert.matches("tf.nn.dynamic_rnn: initial_state must be a tensor [batch, 4]", err, 1, true)
    err = H.error_of(function() return tf.nn.dynamic_rnn(rnn.BasicLSTMCell(2), x, {initial_state = x}) end)
    assert.matches("initial_state must be an LSTMStateTuple(c, h)", err, 1, true)
    err = H.error_of(function() return tf.nn.dynamic_rnn("cell", x, {dtype = tf.float32}) end)
    assert.matches("tf.nn.dynamic_rnn: cell must be an RNN cell (tf.nn.rnn_cell.*), got", err, 1, true)
    err = H.error_of(function() return tf.nn.static_rnn(cell, x, {dtype = tf.float32}) end)
    assert.matches("tf.nn.static_rnn: inputs must be a non-empty list of [batch, depth] tensors", err, 1, true)
    err = H.error_of(function() return tf.nn.bidirectional_dynamic_rnn(cell, nil, x, {dtype = tf.float32}) end)
    assert.matches("tf.nn.bidirectional_dynamic_rnn: cell_bw must be an RNN cell", err, 1, true)
    line = this_line() + 1
    err = H.error_of(function() local _ = rnn.BasicLSTMCell(0) end)
    assert.matches("tf.nn.rnn_cell.BasicLSTMCell: num_units must be a positive integer, got 0", err, 1, true)
    assert.matches("rnn_spec.lua:" .. line, err, 1, true)
    err = H.error_of(function() return rnn.LSTMCell(2, {proj_clip = 1}) end)
    assert.matches("tf.nn.rnn_cell.LSTMCell: proj_clip needs num_proj", err, 1, true)
    err = H.error_of(function() return rnn.DropoutWrapper(cell, {output_keep_prob = 0}) end)
    assert.matches("tf.nn.rnn_cell.DropoutWrapper: output_keep_prob must be in (0, 1], got 0", err, 1, true)
    err = H.error_of(function() return cell(tf.placeholder(tf.float32, {2, 3, 1}), tf.zeros({2, 4})) end)
    assert.matches("tf.nn.rnn_cell.GRUCell: inputs must have shape [batch, depth] with a known depth, got shape (2, 3, 1)", err, 1, true)
    err = H.error_of(function() return cell(tf.zeros({3, 2}), tf.zeros({2, 4})) end)
    assert.matches("tf.nn.rnn_cell.GRUCell: the state's batch size 2 differs from the inputs' 3 (state shape (2, 4), inputs shape (3, 2))", err, 1, true)
    err = H.error_of(function() return cell(tf.zeros({2, 3}), {tf.zeros({2, 4})}) end)
    assert.matches("tf.nn.rnn_cell.GRUCell: the state must be a tensor [batch, 4]", err, 1, true)
    err = H.error_of(function() return tf.reverse_sequence(x, {1, 2, 3}, {seq_axis = 1, batch_axis = 0}) end)
    assert.matches("tf.reverse_sequence: seq_lengths must be a vector of length input.dims(batch_axis) = 2, got shape (3,)", err, 1, true)
    err = H.error_of(function() return tf.reverse_sequence(x, {1, 2}, {seq_axis = 1, batch_axis = 1}) end)
    assert.matches("tf.reverse_sequence: seq_axis and batch_axis must differ", err, 1, true)
    -- after all that, the graph and the cell still work
    local outputs = tf.nn.dynamic_rnn(cell, x, {dtype = tf.float32, sequence_length = {5, 0}})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local v = sess:run(outputs, {[x] = tf.array(H.values(30), tf.float32):reshape({2, 5, 3})}):totable()
    assert.same({0, 0, 0, 0}, v[2][3])
    assert.is_true(v[1][3][1] ~= 0)
  end)
end)

describe("training an RNN", function()
  before_each(function() tf.reset_default_graph() end)

  it("learns to sum a sequence (GRU + dense, Adam)", function()
    tf.set_random_seed(1)
    local n, steps = 64, 6
    local xs, ys, u = {}, {}, H.uniform(n * steps, 11)
    for i = 1, n do
      xs[i], ys[i] = {}, {0}
      for t = 1, steps do
        local v = (u[(i - 1) * steps + t] + 1) / 2
        xs[i][t] = {v}
        ys[i][1] = ys[i][1] + v
      end
    end
    local x = tf.constant(xs, tf.float32)
    local y = tf.constant(ys, tf.float32)
    local _, state = tf.nn.dynamic_rnn(rnn.GRUCell(8), x, {dtype = tf.float32})
    local prediction = tf.layers.dense(state, 1)
    local loss = tf.reduce_mean(tf.square(prediction - y))
    local train = tf.train.AdamOptimizer(0.05):minimize(loss)
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local first = sess:run(loss)
    for _ = 1, 300 do sess:run(train) end
    local last = sess:run(loss)
    assert.is_true(last < 0.01 * first and last < 0.02, ("loss %g -> %g"):format(first, last))
  end)
end)
