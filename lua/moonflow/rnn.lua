-- rnn.lua — TensorFlow 1.x's recurrent networks: the cells of
-- tf.nn.rnn_cell (BasicRNNCell, BasicLSTMCell, LSTMCell, GRUCell,
-- MultiRNNCell, DropoutWrapper, ResidualWrapper, DeviceWrapper),
-- tf.nn.dynamic_rnn, static_rnn, bidirectional_dynamic_rnn and
-- tf.reverse_sequence, built from ops that already differentiate
-- (tf.while_loop, TensorArray, matmul, where, gather_nd), so they need no
-- gradient of their own.
--
-- A cell is called as cell(inputs, state) -> output, new_state, inputs
-- [batch, depth]. Its first call builds its variables in the variable scope
-- of its kind (layer_scope.lua: `basic_lstm_cell`, `basic_lstm_cell_1`, ...,
-- inside the current one), with TensorFlow's names, shapes and initializers,
-- so a TensorFlow checkpoint loads: tf.nn.dynamic_rnn(BasicLSTMCell(n), x)
-- makes `rnn/basic_lstm_cell/kernel` [depth + n, 4n] and `.../bias` [4n].
-- Later calls use the same variables.
--
-- A state is a tensor, an LSTMStateTuple(c, h) or a list of states
-- (MultiRNNCell); the loops carry it flattened (c before h).
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local layer_scope = require("moonflow.layer_scope")

local dtypes = core.dtypes
local fail, options, is_integer, show = core.fail, args.options, args.is_integer, args.show

-- LSTMStateTuple(c, h): an LSTM's state, fields c (memory) and h (output),
-- also [1] and [2] as TensorFlow's namedtuple. Fetched it comes back as
-- {c =, h =}; fed, it takes {c =, h =} (or {c, h}).
local LSTMStateTuple = {}
LSTMStateTuple.__index = LSTMStateTuple
local function state_tuple(c, h) return setmetatable({c = c, h = h, c, h}, LSTMStateTuple) end
function LSTMStateTuple.__tostring(s) return "LSTMStateTuple(c=" .. tostring(s.c) .. ", h=" .. tostring(s.h) .. ")" end
function LSTMStateTuple.__fetch(s) return {c = s.c, h = s.h}, function(v) return v end end
function LSTMStateTuple.__feed(s, v)
  if type(v) ~= "table" then fail("LSTMStateTuple: feed a table {c =, h =}, got " .. show(v)) end
  return {{s.c, v.c or v[1]}, {s.h, v.h or v[2]}}
end

-- A state's tensors in order, appended to `out`.
local function flatten(state, out)
  out = out or {}
  if G.is_tensor(state) then out[#out + 1] = state
  elseif getmetatable(state) == LSTMStateTuple then flatten(state.c, out); flatten(state.h, out)
  elseif args.is_plain(state) then for _, s in ipairs(state) do flatten(s, out) end
  else fail("rnn: a state must be a tensor, an LSTMStateTuple or a list of them, got " .. show(state)) end
  return out
end

-- `template`'s structure around the tensors of `flat` (from position pos + 1).
local function pack(template, flat, pos)
  pos = pos or 0
  if getmetatable(template) == LSTMStateTuple then
    local c, h
    c, pos = pack(template.c, flat, pos)
    h, pos = pack(template.h, flat, pos)
    return state_tuple(c, h), pos
  elseif args.is_plain(template) then
    local out = {}
    for i, s in ipairs(template) do out[i], pos = pack(s, flat, pos) end
    return out, pos
  end
  return flat[pos + 1], pos + 1
end

-- The structure of `sizes` (numbers, LSTMStateTuples, lists) with fn(size) for each number.
local function map_sizes(sizes, fn)
  if type(sizes) == "number" then return fn(sizes) end
  if getmetatable(sizes) == LSTMStateTuple then return state_tuple(fn(sizes.c), fn(sizes.h)) end
  local out = {}
  for i, s in ipairs(sizes) do out[i] = map_sizes(s, fn) end
  return out
end

-- Whether `state` has the structure of `sizes`.
local function same_structure(state, sizes)
  if type(sizes) == "number" then return G.is_tensor(state) end
  if getmetatable(sizes) == LSTMStateTuple then return getmetatable(state) == LSTMStateTuple end
  if not args.is_plain(state) or #state ~= #sizes then return false end
  for i, s in ipairs(sizes) do if not same_structure(state[i], s) then return false end end
  return true
end

local function describe_sizes(sizes)
  if type(sizes) == "number" then return "a tensor [batch, " .. sizes .. "]" end
  if getmetatable(sizes) == LSTMStateTuple then return "an LSTMStateTuple(c, h)" end
  local parts = {}
  for i, s in ipairs(sizes) do parts[i] = describe_sizes(s) end
  return "a list {" .. table.concat(parts, ", ") .. "}"
end

local function positive_int(fname, what, v)
  if not is_integer(v) or v < 1 then fail(string.format("%s: %s must be a positive integer, got %s", fname, what, show(v))) end
  return v
end

local function check_function(fname, what, f)
  if f ~= nil and type(f) ~= "function" and not (type(f) == "table" and getmetatable(f) and getmetatable(f).__call) then
    fail(fname .. ": " .. what .. " must be a function, got " .. show(f))
  end
end

return function(tf, ops)
  local nn = tf.nn
  local rnn_cell = {LSTMStateTuple = state_tuple}
  nn.rnn_cell = rnn_cell

  -- Cells ------------------------------------------------------------------------------
  -- A cell class has fname, kind (its scope's default name), state_size,
  -- output_size, build(self, depth, dtype) making its variables and
  -- step(self, inputs, state, building) -> output, new_state (building: the
  -- first call, in the cell's scope).
  local Cell = {}
  Cell.__index = Cell

  local function is_cell(c) return type(c) == "table" and type(c.state_size) ~= "nil" and type(c.zero_state) == "function" end

  -- The inputs of one step: float [batch, depth], depth known.
  local function step_inputs(fname, x)
    x = G.tensor_arg(fname, "inputs", x)
    if not x.dtype.is_floating then
      fail(fname .. ": inputs must be float32 or float64, got " .. x.dtype.name .. " (use tf.cast)")
    end
    local dims = x:get_shape().dims
    if dims == nil or #dims ~= 2 or dims[2] < 0 then
      fail(fname .. ": inputs must have shape [batch, depth] with a known depth, got shape " .. tostring(x:get_shape()))
    end
    return x, dims[2]
  end

  -- The state must have the cell's structure, and the inputs' batch size where both are known.
  local function check_state(fname, cell, state, x)
    if not same_structure(state, cell.state_size) then
      fail(string.format("%s: the state must be %s, got %s", fname, describe_sizes(cell.state_size), show(state)))
    end
    local batch = x:get_shape().dims[1]
    for _, s in ipairs(flatten(state)) do
      local dims = s:get_shape().dims
      if batch >= 0 and dims and #dims >= 1 and dims[1] >= 0 and dims[1] ~= batch then
        fail(string.format("%s: the state's batch size %d differs from the inputs' %d (state shape %s, inputs shape %s)",
                           fname, dims[1], batch, tostring(s:get_shape()), tostring(x:get_shape())))
      end
    end
  end

  -- cell(inputs, state): the first call builds the cell's variables in its scope.
  function Cell.__call(self, inputs, state)
    local fname = self.fname
    local x, depth = step_inputs(fname, inputs)
    check_state(fname, self, state, x)
    if self._built then
      return tf.name_scope(self._scope_name, function() return self:step(x, state) end)
    end
    return layer_scope(tf, fname, self.kind, self.name, self.reuse, function(vs)
      self._scope_name = vs.name:match("[^/]*$")
      self:build(depth, x.dtype)
      local output, new_state = self:step(x, state, true)
      self._built = true
      return output, new_state
    end)
  end

  -- cell:zero_state(batch_size, dtype): zeros of the state's structure, [batch_size, size] each.
  function Cell:zero_state(batch_size, dtype)
    local fname = self.fname .. ":zero_state"
    if not G.is_tensor(batch_size) then positive_int(fname, "batch_size", batch_size) end
    dtype = core.as_dtype(dtype, fname)
    return tf.name_scope(self.kind .. "ZeroState", function()
      return map_sizes(self.state_size, function(n) return ops.zeros({batch_size, n}, dtype) end)
    end)
  end

  -- A new cell of class `cls` with num_units and its options, `names` in
  -- TensorFlow's order (positional arguments follow it); every cell takes
  -- activation, reuse, name and dtype. Returns the cell and the options.
  local function new_cell(cls, num_units, names, ...)
    local fname = cls.fname
    local o = options(fname, names, ...)
    if o.name ~= nil and (type(o.name) ~= "string" or o.name == "") then
      fail(fname .. ": name must be a non-empty string, got " .. show(o.name))
    end
    check_function(fname, "activation", o.activation)
    local cell = setmetatable({name = o.name, reuse = o.reuse, activation = o.activation or ops.tanh,
                               num_units = positive_int(fname, "num_units", num_units)}, cls)
    return cell, o
  end

  local function class(fname, kind)
    local cls = setmetatable({fname = fname, kind = kind}, {__index = Cell})
    cls.__index = cls
    cls.__call = Cell.__call
    cls.__tostring = function(c) return fname .. "(" .. tostring(c.num_units) .. ")" end
    return cls
  end

  -- A variable of the cell in its scope (the default initializer is glorot_uniform).
  local function variable(name, shape, dtype, init)
    return tf.get_variable(name, shape, {dtype = dtype, initializer = init})
  end

  -- [inputs, h] @ kernel + bias
  local function linear(inputs, h, kernel, bias)
    return nn.bias_add(ops.matmul(ops.concat({inputs, h}, 1), kernel), bias)
  end

  -- tf.nn.rnn_cell.BasicRNNCell(num_units, {activation = tf.tanh, name=, reuse=}):
  -- output = new_state = activation([inputs, state] @ kernel + bias).
  local BasicRNNCell = class("tf.nn.rnn_cell.BasicRNNCell", "basic_rnn_cell")
  function rnn_cell.BasicRNNCell(num_units, ...)
    local cell = new_cell(BasicRNNCell, num_units, {"activation", "reuse", "name", "dtype"}, ...)
    cell.state_size, cell.output_size = num_units, num_units
    return cell
  end
  function BasicRNNCell:build(depth, dtype)
    self.kernel = variable("kernel", {depth + self.num_units, self.num_units}, dtype)
    self.bias = variable("bias", {self.num_units}, dtype, tf.zeros_initializer())
  end
  function BasicRNNCell:step(x, state)
    local h = self.activation(linear(x, state, self.kernel, self.bias))
    return h, h
  end

  -- The LSTM cells' state: an LSTMStateTuple, or [c, h] concatenated when
  -- state_is_tuple is false.
  local function lstm_state_size(cell, fname, o, c_size, h_size)
    if o.state_is_tuple == false then
      cell.state_size = c_size + h_size
    elseif o.state_is_tuple == nil or o.state_is_tuple == true then
      cell.state_size = state_tuple(c_size, h_size)
    else
      fail(fname .. ": state_is_tuple must be a boolean, got " .. show(o.state_is_tuple))
    end
    cell.output_size = h_size
  end
  local function lstm_split_state(cell, state)
    if getmetatable(state) == LSTMStateTuple then return state.c, state.h end
    local c_size = cell.num_units
    return ops.slice(state, {0, 0}, {-1, c_size}), ops.slice(state, {0, c_size}, {-1, -1})
  end
  local function lstm_join_state(cell, c, h)
    if getmetatable(cell.state_size) == LSTMStateTuple then return state_tuple(c, h) end
    return ops.concat({c, h}, 1)
  end
  local function forget_bias_of(fname, o)
    local b = o.forget_bias == nil and 1 or o.forget_bias
    if type(b) ~= "number" then fail(fname .. ": forget_bias must be a number, got " .. show(b)) end
    return b
  end

  -- tf.nn.rnn_cell.BasicLSTMCell(num_units, {forget_bias = 1, state_is_tuple = true,
  -- activation = tf.tanh, name=, reuse=}): gates i, j, f, o = split([inputs, h] @
  -- kernel + bias, 4); c' = c * sigmoid(f + forget_bias) + sigmoid(i) *
  -- activation(j); h' = activation(c') * sigmoid(o); output h'.
  local BasicLSTMCell = class("tf.nn.rnn_cell.BasicLSTMCell", "basic_lstm_cell")
  function rnn_cell.BasicLSTMCell(num_units, ...)
    local fname = BasicLSTMCell.fname
    local cell, o = new_cell(BasicLSTMCell, num_units, {"forget_bias", "state_is_tuple", "activation", "reuse",
                                                             "name", "dtype"}, ...)
    cell.forget_bias = forget_bias_of(fname, o)
    lstm_state_size(cell, fname, o, num_units, num_units)
    return cell
  end
  function BasicLSTMCell:build(depth, dtype)
    self.kernel = variable("kernel", {depth + self.num_units, 4 * self.num_units}, dtype)
    self.bias = variable("bias", {4 * self.num_units}, dtype, tf.zeros_initializer())
  end
  function BasicLSTMCell:step(x, state)
    local c, h = lstm_split_state(self, state)
    local gates = ops.split(linear(x, h, self.kernel, self.bias), 4, 1)
    local i, j, f, o = gates[1], gates[2], gates[3], gates[4]
    local new_c = ops.add(ops.multiply(c, ops.sigmoid(ops.add(f, self.forget_bias))),
                          ops.multiply(ops.sigmoid(i), self.activation(j)))
    local new_h = ops.multiply(self.activation(new_c), ops.sigmoid(o))
    return new_h, lstm_join_state(self, new_c, new_h)
  end

  -- tf.nn.rnn_cell.LSTMCell(num_units, {use_peepholes = false, cell_clip=,
  -- initializer=, num_proj=, proj_clip=, forget_bias = 1, state_is_tuple = true,
  -- activation = tf.tanh, name=, reuse=}): BasicLSTMCell's gates, with
  -- peepholes (w_f_diag, w_i_diag on c, w_o_diag on c'), c' clipped to
  -- [-cell_clip, cell_clip], and h' projected to num_proj (projection/kernel,
  -- then clipped to proj_clip). The state is (c [num_units], h [num_proj or num_units]).
  local LSTMCell = class("tf.nn.rnn_cell.LSTMCell", "lstm_cell")
  function rnn_cell.LSTMCell(num_units, ...)
    local fname = LSTMCell.fname
    local cell, o = new_cell(LSTMCell, num_units, {"use_peepholes", "cell_clip", "initializer", "num_proj",
                                                   "proj_clip", "num_unit_shards", "num_proj_shards", "forget_bias",
                                                   "state_is_tuple", "activation", "reuse", "name", "dtype"}, ...)
    cell.use_peepholes = args.check_bool(o.use_peepholes or false, fname, "use_peepholes")
    for _, k in ipairs({"cell_clip", "proj_clip"}) do
      if o[k] ~= nil and not (type(o[k]) == "number" and o[k] > 0) then
        fail(fname .. ": " .. k .. " must be a positive number, got " .. show(o[k]))
      end
      cell[k] = o[k]
    end
    if o.num_proj ~= nil then cell.num_proj = positive_int(fname, "num_proj", o.num_proj) end
    if o.proj_clip and not cell.num_proj then fail(fname .. ": proj_clip needs num_proj") end
    if (o.num_unit_shards or 1) ~= 1 or (o.num_proj_shards or 1) ~= 1 then
      fail(fname .. ": num_unit_shards and num_proj_shards are deprecated in TensorFlow and not supported")
    end
    cell.initializer = o.initializer
    cell.forget_bias = forget_bias_of(fname, o)
    lstm_state_size(cell, fname, o, num_units, cell.num_proj or num_units)
    return cell
  end
  function LSTMCell:build(depth, dtype)
    local n, h_size = self.num_units, self.num_proj or self.num_units
    self.kernel = variable("kernel", {depth + h_size, 4 * n}, dtype, self.initializer)
    self.bias = variable("bias", {4 * n}, dtype, tf.zeros_initializer())
    if self.use_peepholes then
      self.w_f_diag = variable("w_f_diag", {n}, dtype, self.initializer)
      self.w_i_diag = variable("w_i_diag", {n}, dtype, self.initializer)
      self.w_o_diag = variable("w_o_diag", {n}, dtype, self.initializer)
    end
    if self.num_proj then
      self.proj_kernel = tf.variable_scope("projection", function()
        return variable("kernel", {n, self.num_proj}, dtype, self.initializer)
      end)
    end
  end
  function LSTMCell:step(x, state)
    local c, h = lstm_split_state(self, state)
    local gates = ops.split(linear(x, h, self.kernel, self.bias), 4, 1)
    local i, j, f, o = gates[1], gates[2], gates[3], gates[4]
    local sigmoid, mul, add = ops.sigmoid, ops.multiply, ops.add
    local new_c
    if self.use_peepholes then
      new_c = add(mul(sigmoid(add(add(f, self.forget_bias), mul(self.w_f_diag, c))), c),
                  mul(sigmoid(add(i, mul(self.w_i_diag, c))), self.activation(j)))
    else
      new_c = add(mul(sigmoid(add(f, self.forget_bias)), c), mul(sigmoid(i), self.activation(j)))
    end
    if self.cell_clip then new_c = ops.clip_by_value(new_c, -self.cell_clip, self.cell_clip) end
    local new_h
    if self.use_peepholes then new_h = mul(sigmoid(add(o, mul(self.w_o_diag, new_c))), self.activation(new_c))
    else new_h = mul(sigmoid(o), self.activation(new_c)) end
    if self.num_proj then
      new_h = ops.matmul(new_h, self.proj_kernel)
      if self.proj_clip then new_h = ops.clip_by_value(new_h, -self.proj_clip, self.proj_clip) end
    end
    return new_h, lstm_join_state(self, new_c, new_h)
  end

  -- tf.nn.rnn_cell.GRUCell(num_units, {activation = tf.tanh, kernel_initializer=,
  -- bias_initializer=, name=, reuse=}): r, u = split(sigmoid([inputs, h] @
  -- gates/kernel + gates/bias), 2) (gates/bias starts at 1); c =
  -- activation([inputs, r * h] @ candidate/kernel + candidate/bias);
  -- h' = u * h + (1 - u) * c.
  local GRUCell = class("tf.nn.rnn_cell.GRUCell", "gru_cell")
  function rnn_cell.GRUCell(num_units, ...)
    local cell, o = new_cell(GRUCell, num_units, {"activation", "reuse", "kernel_initializer", "bias_initializer",
                                                 "name", "dtype"}, ...)
    cell.kernel_initializer, cell.bias_initializer = o.kernel_initializer, o.bias_initializer
    cell.state_size, cell.output_size = num_units, num_units
    return cell
  end
  function GRUCell:build(depth, dtype)
    local n = self.num_units
    tf.variable_scope("gates", function()
      self.gate_kernel = variable("kernel", {depth + n, 2 * n}, dtype, self.kernel_initializer)
      self.gate_bias = variable("bias", {2 * n}, dtype, self.bias_initializer or tf.constant_initializer(1))
    end)
    tf.variable_scope("candidate", function()
      self.candidate_kernel = variable("kernel", {depth + n, n}, dtype, self.kernel_initializer)
      self.candidate_bias = variable("bias", {n}, dtype, self.bias_initializer or tf.zeros_initializer())
    end)
  end
  function GRUCell:step(x, h)
    local ru = ops.split(ops.sigmoid(linear(x, h, self.gate_kernel, self.gate_bias)), 2, 1)
    local r, u = ru[1], ru[2]
    local c = self.activation(linear(x, ops.multiply(r, h), self.candidate_kernel, self.candidate_bias))
    local new_h = ops.add(ops.multiply(u, h), ops.multiply(ops.subtract(1, u), c))
    return new_h, new_h
  end

  -- tf.nn.rnn_cell.MultiRNNCell(cells, {state_is_tuple = true}): the cells
  -- stacked, each one's output the next one's input (variables under
  -- multi_rnn_cell/cell_0, cell_1, ...); the state is the list of theirs.
  local MultiRNNCell = class("tf.nn.rnn_cell.MultiRNNCell", "multi_rnn_cell")
  MultiRNNCell.__tostring = function(c) return "tf.nn.rnn_cell.MultiRNNCell(" .. #c.cells .. " cells)" end
  function rnn_cell.MultiRNNCell(cells, ...)
    local fname = MultiRNNCell.fname
    local o = options(fname, {"state_is_tuple"}, ...)
    if o.state_is_tuple == false then
      fail(fname .. ": state_is_tuple = false is deprecated in TensorFlow and not supported")
    end
    if not args.is_plain(cells) or #cells == 0 then fail(fname .. ": cells must be a non-empty list of cells, got " .. show(cells)) end
    local sizes = {}
    for i, c in ipairs(cells) do
      if not is_cell(c) then fail(string.format("%s: cells[%d] is not an RNN cell, got %s", fname, i, show(c))) end
      sizes[i] = c.state_size
    end
    local cell = setmetatable({}, MultiRNNCell)
    cell.cells, cell.state_size, cell.output_size = cells, sizes, cells[#cells].output_size
    return cell
  end
  function MultiRNNCell.build() end
  function MultiRNNCell:step(x, state, building)
    local new_state = {}
    for i, c in ipairs(self.cells) do
      local function run() x, new_state[i] = c(x, state[i]) end
      if building then tf.variable_scope("cell_" .. (i - 1), run) else run() end
    end
    return x, new_state
  end

  -- tf.nn.rnn_cell.DropoutWrapper(cell, {input_keep_prob = 1, output_keep_prob = 1,
  -- state_keep_prob = 1, seed=}): tf.nn.dropout on the cell's inputs, output
  -- and new state (every state tensor but an LSTMStateTuple's c, as
  -- TensorFlow's default filter); a keep_prob is a number in (0, 1] or a
  -- float scalar tensor (fed 1 at evaluation). The cell's variables are its
  -- own (no scope of the wrapper's).
  -- Wrappers hold a cell; their state and output are the cell's.
  local function wrapper_class(fname)
    local cls = {fname = fname}
    cls.__index = cls
    cls.zero_state = function(self, ...) return self.cell:zero_state(...) end
    cls.__tostring = function(c) return fname .. "(" .. tostring(c.cell) .. ")" end
    return cls
  end
  local function wrap(cls, cell)
    if not is_cell(cell) then fail(cls.fname .. ": cell must be an RNN cell, got " .. show(cell)) end
    return setmetatable({cell = cell, state_size = cell.state_size, output_size = cell.output_size}, cls)
  end

  local DropoutWrapper = wrapper_class("tf.nn.rnn_cell.DropoutWrapper")
  function rnn_cell.DropoutWrapper(cell, ...)
    local fname = DropoutWrapper.fname
    local o = options(fname, {"input_keep_prob", "output_keep_prob", "state_keep_prob", "variational_recurrent",
                              "input_size", "dtype", "seed", "dropout_state_filter_visitor"}, ...)
    local w = wrap(DropoutWrapper, cell)
    if o.variational_recurrent then fail(fname .. ": variational_recurrent is not supported") end
    if o.dropout_state_filter_visitor ~= nil then fail(fname .. ": dropout_state_filter_visitor is not supported") end
    w.seed = o.seed
    for _, k in ipairs({"input_keep_prob", "output_keep_prob", "state_keep_prob"}) do
      local p = o[k]
      if p == nil then p = 1 end
      if type(p) == "number" then
        if not (p > 0 and p <= 1) then fail(string.format("%s: %s must be in (0, 1], got %s", fname, k, show(p))) end
        if p == 1 then p = nil end
      elseif not G.is_tensor(p) or not p.dtype.is_floating then
        fail(string.format("%s: %s must be a number or a float scalar tensor, got %s", fname, k, show(p)))
      end
      w[k] = p
    end
    return w
  end
  local function drop(x, keep, seed)
    if keep == nil then return x end
    return nn.dropout(x, {keep_prob = keep, seed = seed})
  end
  function DropoutWrapper.__call(self, inputs, state)
    local x = step_inputs(self.fname, inputs)
    check_state(self.fname, self, state, x)
    local out, new_state = self.cell(drop(x, self.input_keep_prob, self.seed), state)
    if self.state_keep_prob then
      local function filter(s)
        if getmetatable(s) == LSTMStateTuple then return state_tuple(s.c, drop(s.h, self.state_keep_prob, self.seed)) end
        if args.is_plain(s) then
          local t = {}
          for i, v in ipairs(s) do t[i] = filter(v) end
          return t
        end
        return drop(s, self.state_keep_prob, self.seed)
      end
      new_state = filter(new_state)
    end
    return drop(out, self.output_keep_prob, self.seed), new_state
  end

  -- tf.nn.rnn_cell.ResidualWrapper(cell, {residual_fn=}): the cell's output
  -- plus its inputs (or residual_fn(inputs, output)); the state is the cell's.
  local ResidualWrapper = wrapper_class("tf.nn.rnn_cell.ResidualWrapper")
  function rnn_cell.ResidualWrapper(cell, ...)
    local o = options(ResidualWrapper.fname, {"residual_fn"}, ...)
    local w = wrap(ResidualWrapper, cell)
    check_function(ResidualWrapper.fname, "residual_fn", o.residual_fn)
    w.residual_fn = o.residual_fn or ops.add
    return w
  end
  function ResidualWrapper.__call(self, inputs, state)
    local x = step_inputs(self.fname, inputs)
    check_state(self.fname, self, state, x)
    local out, new_state = self.cell(x, state)
    return self.residual_fn(x, out), new_state
  end

  -- tf.nn.rnn_cell.DeviceWrapper(cell, device): the cell's ops placed on device (tf.device).
  local DeviceWrapper = wrapper_class("tf.nn.rnn_cell.DeviceWrapper")
  function rnn_cell.DeviceWrapper(cell, device)
    local w = wrap(DeviceWrapper, cell)
    if type(device) ~= "string" then fail(DeviceWrapper.fname .. ": device must be a string, got " .. show(device)) end
    w.device = device
    return w
  end
  function DeviceWrapper.__call(self, inputs, state)
    return tf.device(self.device, function() return self.cell(inputs, state) end)
  end

  -- The loops ---------------------------------------------------------------------------
  local function check_cell(fname, what, cell)
    if not is_cell(cell) then fail(string.format("%s: %s must be an RNN cell (tf.nn.rnn_cell.*), got %s", fname, what, show(cell))) end
  end

  -- The initial state: initial_state (checked) or the cell's zero state of dtype.
  local function initial_state_of(fname, cell, initial_state, dtype, batch_size)
    if initial_state ~= nil then
      if not same_structure(initial_state, cell.state_size) then
        fail(string.format("%s: initial_state must be %s, got %s", fname, describe_sizes(cell.state_size),
                           show(initial_state)))
      end
      return initial_state
    end
    if dtype == nil then fail(fname .. ": If there is no initial_state, you must give a dtype.") end
    return cell:zero_state(batch_size, core.as_dtype(dtype, fname))
  end

  -- sequence_length as an int32 vector [batch] (checked against batch when known).
  local function sequence_length_of(fname, seq, batch)
    if seq == nil then return nil end
    seq = G.tensor_arg(fname, "sequence_length", seq, not G.is_tensor(seq) and dtypes.int32 or nil)
    if not seq.dtype.is_integer then
      fail(fname .. ": sequence_length must be an int32 or int64 vector, got " .. seq.dtype.name)
    end
    local dims = seq:get_shape().dims
    if dims and (#dims ~= 1 or (dims[1] >= 0 and batch >= 0 and dims[1] ~= batch)) then
      fail(string.format("%s: sequence_length must be a vector of length batch_size (%s), but saw shape: %s", fname,
                         batch >= 0 and tostring(batch) or "?", tostring(seq:get_shape())))
    end
    if seq.dtype ~= dtypes.int32 then seq = ops.cast(seq, dtypes.int32) end
    return ops.identity(seq, {name = "sequence_length"})
  end

  -- One step's result with sequence_length: past a sequence's end (time >=
  -- its length) the output is zero and the state the previous one.
  local function mask_step(time, seq, output, state, new_state)
    local done = ops.greater_equal(time, seq)
    output = ops.where(done, ops.zeros_like(output), output)
    local old, new = flatten(state), flatten(new_state)
    for i = 1, #new do new[i] = ops.where(done, old[i], new[i]) end
    return output, pack(new_state, new)
  end

  -- The time-major inputs [time, batch, depth...] of float dtype.
  local function sequence_inputs(fname, inputs, time_major)
    local x = G.tensor_arg(fname, "inputs", inputs)
    if not x.dtype.is_floating then fail(fname .. ": inputs must be float32 or float64, got " .. x.dtype.name) end
    local dims = x:get_shape().dims
    if dims == nil or #dims ~= 3 or dims[3] < 0 then
      fail(string.format("%s: inputs must have shape %s with a known depth, got shape %s", fname,
                         time_major and "[max_time, batch_size, depth]" or "[batch_size, max_time, depth]",
                         tostring(x:get_shape())))
    end
    if not time_major then x = ops.transpose(x, {1, 0, 2}) end
    return x
  end

  local rnn_names = {"sequence_length", "initial_state", "dtype", "parallel_iterations", "swap_memory", "time_major",
                     "scope"}

  -- The loop of dynamic_rnn over time-major x, in the current variable scope.
  local function dynamic_loop(fname, cell, x, o)
    local dims = x:get_shape().dims
    local batch = dims[2]
    local batch_size = batch >= 0 and batch or ops.shape(x)[1]
    local seq = sequence_length_of(fname, o.sequence_length, batch)
    local state = initial_state_of(fname, cell, o.initial_state, o.dtype, batch_size)
    local flat = flatten(state)
    local steps = dims[1] >= 0 and dims[1] or ops.shape(x)[0]
    local input_ta = tf.TensorArray(x.dtype, steps, {element_shape = {batch, dims[3]}, tensor_array_name = "input"})
    input_ta = input_ta:unstack(x)
    local output_ta = tf.TensorArray(x.dtype, steps, {element_shape = {batch, cell.output_size},
                                                      tensor_array_name = "output"})
    local time = G.constant(0, {dtype = dtypes.int32, name = "time"})
    local results = {tf.while_loop(
      function(t) return ops.less(t, steps) end,
      function(t, ta, ...)
        local s = pack(state, {...})
        local out, new_state = cell(input_ta:read(t), s)
        if seq then out, new_state = mask_step(t, seq, out, s, new_state) end
        local new_flat = flatten(new_state)
        return ops.add(t, 1), ta:write(t, out), unpack(new_flat, 1, #flat)
      end,
      {time, output_ta, unpack(flat)},
      {parallel_iterations = o.parallel_iterations, swap_memory = o.swap_memory, maximum_iterations = steps})}
    local outputs = results[2]:stack()
    outputs:set_shape({dims[1], batch, cell.output_size})
    local final = {}
    for i = 1, #flat do final[i] = results[i + 2] end
    return outputs, pack(state, final)
  end

  local function scope_arg(fname, scope, default)
    if scope == nil then return default end
    if (type(scope) == "string" and scope ~= "") or getmetatable(scope) == getmetatable(tf.get_variable_scope()) then
      return scope
    end
    fail(fname .. ": scope must be a non-empty string or a VariableScope, got " .. show(scope))
  end

  -- tf.nn.dynamic_rnn(cell, inputs, {sequence_length=, initial_state=, dtype=,
  -- parallel_iterations=, swap_memory=, time_major = false, scope = "rnn"}):
  -- runs the cell over the time axis of inputs ([batch, time, depth], or
  -- [time, batch, depth] with time_major) in a tf.while_loop; returns
  -- outputs (same layout, depth the cell's output size) and the final state.
  -- With sequence_length ([batch]), outputs past each sequence's end are
  -- zero and its final state is the one at its end. Give initial_state or
  -- dtype. parallel_iterations and swap_memory are accepted (iterations run
  -- in turn; values stay in memory).
  function nn.dynamic_rnn(cell, inputs, ...)
    local fname = "tf.nn.dynamic_rnn"
    local o = options(fname, rnn_names, ...)
    check_cell(fname, "cell", cell)
    local time_major = args.check_bool(o.time_major or false, fname, "time_major")
    local x = sequence_inputs(fname, inputs, time_major)
    return tf.variable_scope(scope_arg(fname, o.scope, "rnn"), function()
      local outputs, state = dynamic_loop(fname, cell, x, o)
      if not time_major then outputs = ops.transpose(outputs, {1, 0, 2}) end
      return outputs, state
    end)
  end

  -- The list of [batch, depth] step inputs of a static RNN.
  local function step_list(fname, inputs)
    if not args.is_plain(inputs) or #inputs == 0 then
      fail(fname .. ": inputs must be a non-empty list of [batch, depth] tensors, got " .. show(inputs))
    end
    local xs = {}
    for i, v in ipairs(inputs) do xs[i] = step_inputs(fname, v) end
    return xs
  end

  -- The steps of static_rnn over the list xs, in the current variable scope.
  local function static_loop(fname, cell, xs, initial_state, dtype, sequence_length)
    local batch = xs[1]:get_shape().dims[1]
    local seq = sequence_length_of(fname, sequence_length, batch)
    local state = initial_state_of(fname, cell, initial_state, dtype, batch >= 0 and batch or ops.shape(xs[1])[0])
    local outputs = {}
    for t, x in ipairs(xs) do
      local out, new_state = cell(x, state)
      if seq then out, new_state = mask_step(G.constant(t - 1, {dtype = dtypes.int32}), seq, out, state, new_state) end
      outputs[t], state = out, new_state
    end
    return outputs, state
  end

  -- tf.nn.static_rnn(cell, inputs, {initial_state=, dtype=, sequence_length=,
  -- scope = "rnn"}): inputs a list of [batch, depth] tensors, one per time
  -- step; the cell is applied to each in turn (no loop op). Returns the list
  -- of outputs and the final state, masked by sequence_length as dynamic_rnn.
  function nn.static_rnn(cell, inputs, ...)
    local fname = "tf.nn.static_rnn"
    local o = options(fname, {"initial_state", "dtype", "sequence_length", "scope"}, ...)
    check_cell(fname, "cell", cell)
    local xs = step_list(fname, inputs)
    return tf.variable_scope(scope_arg(fname, o.scope, "rnn"), function()
      return static_loop(fname, cell, xs, o.initial_state, o.dtype, o.sequence_length)
    end)
  end

  -- tf.nn.static_bidirectional_rnn(cell_fw, cell_bw, inputs, {initial_state_fw=,
  -- initial_state_bw=, dtype=, sequence_length=, scope = "bidirectional_rnn"}):
  -- static_rnn forward (scope fw) and over the steps reversed (scope bw; each
  -- sequence's first sequence_length steps reversed), whose outputs are
  -- reversed back. Returns the list of outputs, each [output_fw, output_bw]
  -- concatenated along axis 1, then state_fw and state_bw.
  function nn.static_bidirectional_rnn(cell_fw, cell_bw, inputs, ...)
    local fname = "tf.nn.static_bidirectional_rnn"
    local o = options(fname, {"initial_state_fw", "initial_state_bw", "dtype", "sequence_length", "scope"}, ...)
    check_cell(fname, "cell_fw", cell_fw)
    check_cell(fname, "cell_bw", cell_bw)
    local xs = step_list(fname, inputs)
    return tf.variable_scope(scope_arg(fname, o.scope, "bidirectional_rnn"), function()
      local out_fw, state_fw = tf.variable_scope("fw", function()
        return static_loop(fname, cell_fw, xs, o.initial_state_fw, o.dtype, o.sequence_length)
      end)
      local function reverse(list)
        if o.sequence_length == nil then
          local r = {}
          for i = 1, #list do r[i] = list[#list + 1 - i] end
          return r
        end
        return ops.unstack(ops.reverse_sequence(ops.stack(list), o.sequence_length, {seq_axis = 0, batch_axis = 1}),
                           {num = #list})
      end
      local out_bw, state_bw = tf.variable_scope("bw", function()
        return static_loop(fname, cell_bw, reverse(xs), o.initial_state_bw, o.dtype, o.sequence_length)
      end)
      out_bw = reverse(out_bw)
      local outputs = {}
      for t = 1, #xs do outputs[t] = ops.concat({out_fw[t], out_bw[t]}, 1) end
      return outputs, state_fw, state_bw
    end)
  end

  -- tf.reverse_sequence(input, seq_lengths, {seq_axis = 1, batch_axis = 0, name=}):
  -- reverses the first seq_lengths[b] entries along seq_axis of each slice b
  -- along batch_axis; the rest stay. A gather_nd with computed indices.
  function ops.reverse_sequence(input, seq_lengths, ...)
    local fname = "tf.reverse_sequence"
    local o = options(fname, {"seq_axis", "batch_axis", "name", "seq_dim", "batch_dim"}, ...)
    local x = G.tensor_arg(fname, "input", input)
    local lengths = G.tensor_arg(fname, "seq_lengths", seq_lengths, not G.is_tensor(seq_lengths) and dtypes.int32 or nil)
    local dims = x:get_shape().dims
    if dims == nil or #dims < 2 then
      fail(fname .. ": input must have rank at least 2, got shape " .. tostring(x:get_shape()))
    end
    local rank = #dims
    local seq_axis = o.seq_axis or o.seq_dim or 1
    local batch_axis = o.batch_axis or o.batch_dim or 0
    for what, a in pairs({seq_axis = seq_axis, batch_axis = batch_axis}) do
      if not is_integer(a) or a < -rank or a >= rank then
        fail(string.format("%s: %s must be an integer in [%d, %d), got %s", fname, what, -rank, rank, show(a)))
      end
    end
    seq_axis, batch_axis = seq_axis % rank, batch_axis % rank
    if seq_axis == batch_axis then fail(fname .. ": seq_axis and batch_axis must differ, both are " .. seq_axis) end
    if not lengths.dtype.is_integer then fail(fname .. ": seq_lengths must be int32 or int64, got " .. lengths.dtype.name) end
    local ldims = lengths:get_shape().dims
    if ldims and (#ldims ~= 1 or (ldims[1] >= 0 and dims[batch_axis + 1] >= 0 and ldims[1] ~= dims[batch_axis + 1])) then
      fail(string.format("%s: seq_lengths must be a vector of length input.dims(batch_axis) = %d, got shape %s", fname,
                         dims[batch_axis + 1], tostring(lengths:get_shape())))
    end
    return tf.name_scope(o.name or "ReverseSequence", function()
      -- [seq, batch, rest...] then indices [seq, batch, 2] of (source step, b).
      local perm = {seq_axis, batch_axis}
      for a = 0, rank - 1 do if a ~= seq_axis and a ~= batch_axis then perm[#perm + 1] = a end end
      local inverse = {}
      for i, a in ipairs(perm) do inverse[a + 1] = i - 1 end
      local xt = ops.transpose(x, perm)
      local shape = ops.shape(xt)
      local steps, batch = shape[0], shape[1]
      local len = ops.cast(lengths, dtypes.int32)
      local t = ops.expand_dims(ops.range(0, steps), 1)                 -- [seq, 1]
      local l = ops.expand_dims(len, 0)                                 -- [1, batch]
      local src = ops.where_v2(ops.less(t, l), ops.subtract(ops.subtract(l, 1), t), ops.add(t, ops.zeros_like(l)))
      local b = ops.add(ops.zeros_like(t), ops.expand_dims(ops.range(0, batch), 0))
      local y = ops.transpose(ops.gather_nd(xt, ops.stack({src, b}, {axis = 2})), inverse)
      y:set_shape(dims)
      return y
    end)
  end
  tf.reverse_sequence = ops.reverse_sequence

  -- tf.nn.bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, {sequence_length=,
  -- initial_state_fw=, initial_state_bw=, dtype=, parallel_iterations=,
  -- swap_memory=, time_major = false, scope = "bidirectional_rnn"}): dynamic_rnn
  -- forward (scope fw) and over the inputs reversed in time (scope bw; each
  -- sequence's first sequence_length steps reversed) whose outputs are
  -- reversed back. Returns {output_fw, output_bw}, {state_fw, state_bw}.
  function nn.bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, ...)
    local fname = "tf.nn.bidirectional_dynamic_rnn"
    local o = options(fname, {"sequence_length", "initial_state_fw", "initial_state_bw", "dtype", "parallel_iterations",
                              "swap_memory", "time_major", "scope"}, ...)
    check_cell(fname, "cell_fw", cell_fw)
    check_cell(fname, "cell_bw", cell_bw)
    local time_major = args.check_bool(o.time_major or false, fname, "time_major")
    local x = sequence_inputs(fname, inputs, time_major)
    return tf.variable_scope(scope_arg(fname, o.scope, "bidirectional_rnn"), function()
      local function run(cell, xs, initial_state)
        return dynamic_loop(fname, cell, xs, {sequence_length = o.sequence_length, initial_state = initial_state,
                                              dtype = o.dtype, parallel_iterations = o.parallel_iterations,
                                              swap_memory = o.swap_memory})
      end
      local out_fw, state_fw = tf.variable_scope("fw", function() return run(cell_fw, x, o.initial_state_fw) end)
      local out_bw, state_bw = tf.variable_scope("bw", function()
        local function reverse(t)
          if o.sequence_length == nil then return ops.reverse(t, {0}) end
          return ops.reverse_sequence(t, o.sequence_length, {seq_axis = 0, batch_axis = 1})
        end
        local out, state = run(cell_bw, reverse(x), o.initial_state_bw)
        return reverse(out), state
      end)
      if not time_major then
        out_fw, out_bw = ops.transpose(out_fw, {1, 0, 2}), ops.transpose(out_bw, {1, 0, 2})
      end
      return {out_fw, out_bw}, {state_fw, state_bw}
    end)
  end
end
