-- train.lua — tf.train: the optimizers (GradientDescentOptimizer,
-- MomentumOptimizer, AdamOptimizer, RMSPropOptimizer, AdagradOptimizer), the
-- global step, and gradient clipping (tf.clip_by_value, tf.clip_by_norm,
-- tf.clip_by_global_norm, tf.global_norm).
--
-- An optimizer is bookkeeping in Lua around one fused C update op per
-- variable (src/ops/train.c), as in TensorFlow 1.x: compute_gradients asks
-- tf.gradients for d(loss)/d(var); apply_gradients creates the slot variables
-- (`w/Adam`, `w/Adam_1`, ...: non-trainable, in GLOBAL_VARIABLES, so the
-- initializer and a checkpoint cover them) and builds, in the name scope of the
-- optimizer, one update op per variable, the optimizer's own bookkeeping
-- (Adam's beta powers), and the increment of the global step after them.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local dtypes = core.dtypes

local fail, options, name_of = core.fail, args.options, args.name_of

-- The option sets; a trailing empty table is an empty options table.
local COMPUTE_GRADIENTS_OPTIONS = {"var_list", "gate_gradients", "aggregation_method", "colocate_gradients_with_ops",
                                   "grad_loss", empty = true}
local APPLY_GRADIENTS_OPTIONS = {"global_step", "name", empty = true}
local MINIMIZE_OPTIONS = {"global_step", "var_list", "gate_gradients", "aggregation_method",
                          "colocate_gradients_with_ops", "name", "grad_loss", empty = true}
local CLIP_BY_NORM_OPTIONS = {"axes", "name", empty = true}
local CLIP_BY_GLOBAL_NORM_OPTIONS = {"use_norm", "name", empty = true}

local is_variable = G.is_variable

-- The dtypes the update ops take (TensorFlow's list, less the half types).
local function check_float(t, what, fname)
  if not t.dtype.is_floating then
    fail(string.format("%s: Invalid type %s for %s, expected: [float32, float64].", fname, t.dtype.name, what))
  end
end

-- The optimizers ------------------------------------------------------------------
-- Each kind, by TensorFlow's class name: its default name, its constructor
-- arguments in order (the first `required` must be given) with defaults, the
-- hyperparameters that become tensors, further checks of the arguments, its
-- slots ({slot, initial value}) in creation order, and `update`, which returns
-- the op type, inputs and attrs for one variable (h: the hyperparameter
-- tensors of the variable's dtype).
local kinds = {
  GradientDescentOptimizer = {
    name = "GradientDescent",
    args = {"learning_rate", "use_locking", "name"}, required = 1,
    hyper = {"learning_rate"},
    slots = function() return {} end,
    update = function(_, var, grad, _, h)
      return "ApplyGradientDescent", {var, h.learning_rate, grad}
    end,
  },
  MomentumOptimizer = {
    name = "Momentum",
    args = {"learning_rate", "momentum", "use_locking", "name", "use_nesterov"}, required = 2,
    hyper = {"learning_rate", "momentum"},
    slots = function() return {{"momentum", 0}} end,
    update = function(o, var, grad, s, h)
      return "ApplyMomentum", {var, s.momentum, h.learning_rate, grad, h.momentum},
             {use_nesterov = o.use_nesterov == true}
    end,
  },
  AdamOptimizer = {
    name = "Adam",
    args = {"learning_rate", "beta1", "beta2", "epsilon", "use_locking", "name"}, required = 0,
    defaults = {learning_rate = 0.001, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8},
    hyper = {"learning_rate", "beta1", "beta2", "epsilon"},
    slots = function() return {{"m", 0}, {"v", 0}} end,
    -- beta1^t and beta2^t: one pair per optimizer and graph, starting at beta1
    -- and beta2, multiplied by them after each step's updates.
    non_slots = {{"beta1_power", "beta1"}, {"beta2_power", "beta2"}},
    update = function(_, var, grad, s, h)
      return "ApplyAdam", {var, s.m, s.v, h.beta1_power, h.beta2_power, h.learning_rate, h.beta1, h.beta2,
                           h.epsilon, grad}
    end,
  },
  RMSPropOptimizer = {
    name = "RMSProp",
    args = {"learning_rate", "decay", "momentum", "epsilon", "use_locking", "centered", "name"}, required = 1,
    defaults = {decay = 0.9, momentum = 0, epsilon = 1e-10},
    hyper = {"learning_rate", "decay", "momentum", "epsilon"},
    -- TensorFlow starts the mean square at one.
    slots = function(o)
      if o.centered then return {{"rms", 1}, {"mg", 0}, {"momentum", 0}} end
      return {{"rms", 1}, {"momentum", 0}}
    end,
    update = function(o, var, grad, s, h)
      if o.centered then
        return "ApplyCenteredRMSProp", {var, s.mg, s.rms, s.momentum, h.learning_rate, h.decay, h.momentum,
                                        h.epsilon, grad}
      end
      return "ApplyRMSProp", {var, s.rms, s.momentum, h.learning_rate, h.decay, h.momentum, h.epsilon, grad}
    end,
  },
  AdagradOptimizer = {
    name = "Adagrad",
    args = {"learning_rate", "initial_accumulator_value", "use_locking", "name"}, required = 1,
    defaults = {initial_accumulator_value = 0.1},
    hyper = {"learning_rate"},
    check = function(o, fname)
      local v = o.initial_accumulator_value
      if type(v) ~= "number" or v <= 0 then
        fail(fname .. ": initial_accumulator_value must be a positive number: " .. tostring(v))
      end
    end,
    slots = function(o) return {{"accumulator", o.initial_accumulator_value}} end,
    update = function(_, var, grad, s, h)
      return "ApplyAdagrad", {var, s.accumulator, h.learning_rate, grad}
    end,
  },
}

local Optimizer = {}
Optimizer.__index = Optimizer
function Optimizer:__tostring() return "<tf.train." .. self._class .. " '" .. self._name .. "'>" end

-- The optimizer's name (its `name` argument or the default, "Adam", ...): it
-- names the scope of its ops and its slot variables.
function Optimizer:get_name() return self._name end

-- get_slot(var, slot_name): the slot variable ("m", "v", "momentum", "rms",
-- "mg", "accumulator") of var, or nil before apply_gradients made it.
function Optimizer:get_slot(var, slot_name)
  local by_var = self._slots[slot_name]
  return by_var and by_var[var]
end

-- The names of the slots this optimizer makes, sorted.
function Optimizer:get_slot_names()
  local out = {}
  for _, s in ipairs(self._kind.slots(self._o)) do out[#out + 1] = s[1] end
  table.sort(out)
  return out
end

-- Every variable the optimizer created (slots and Adam's beta powers), by name.
function Optimizer:variables()
  local out = {}
  for _, by_var in pairs(self._slots) do
    for _, slot in pairs(by_var) do out[#out + 1] = slot end
  end
  for _, by_name in pairs(self._non_slots) do
    for _, v in pairs(by_name) do out[#out + 1] = v end
  end
  table.sort(out, function(a, b) return a.name < b.name end)
  return out
end

-- compute_gradients(loss, {var_list=, grad_loss=}) (or those positionally, in
-- TensorFlow's order): a list of {grad, var} pairs, one per variable (grad nil
-- when the loss does not depend on the variable). var_list defaults to the
-- trainable variables of the loss's graph.
function Optimizer:compute_gradients(loss, ...)
  local fname = "Optimizer:compute_gradients"
  local o = options(fname, COMPUTE_GRADIENTS_OPTIONS, ...)
  if not G.is_tensor(loss) then fail(fname .. ": loss must be a Tensor, got " .. tostring(loss)) end
  check_float(loss, loss.name, fname)
  local var_list = o.var_list or loss.graph:get_collection("trainable_variables")
  if #var_list == 0 then fail(fname .. ": No variables to optimize.") end
  for i, v in ipairs(var_list) do
    if not is_variable(v) then
      fail(fname .. ": var_list[" .. i .. "] is not a variable (tf.Variable or tf.get_variable): " ..
           tostring(v))
    end
    check_float(v, v.name, fname)
  end
  local grads = self._tf.gradients(loss, var_list, o.grad_loss and {o.grad_loss} or nil)
  local pairs_out = {}
  for i, v in ipairs(var_list) do pairs_out[i] = {grads[i], v} end
  return pairs_out
end

-- One slot variable of var, named like TensorFlow's: "<var>/<optimizer name>",
-- made unique ("w/Adam", then "w/Adam_1"). It starts at `value` everywhere.
function Optimizer:_make_slot(var, slot_name, value)
  local tf = self._tf
  local by_var = self._slots[slot_name] or {}
  self._slots[slot_name] = by_var
  if by_var[var] then return by_var[var] end
  local dims = var:get_shape().dims
  local known = var:get_shape():is_fully_defined()
  local slot = tf.name_scope(var.op.name .. "/", function()
    return tf.Variable(function()
      if known then return tf.constant_initializer(value)(dims, var.dtype) end
      -- A variable of unknown shape (validate_shape = false): the slot takes
      -- the shape of its initial value, as TensorFlow's initialized_value().
      return tf.fill(tf.shape(var.initial_value), G.constant(value, {dtype = var.dtype, graph = var.graph}))
    end, {name = self._name, dtype = var.dtype, trainable = false, validate_shape = known})
  end)
  by_var[var] = slot
  return slot
end

-- Adam's beta powers: created once per graph, in the dtype of the first
-- variable by name, at the name scope in force.
function Optimizer:_make_non_slots(var_list)
  local specs = self._kind.non_slots
  if not specs then return nil end
  local g = var_list[1].graph
  local made = self._non_slots[g]
  if made then return made end
  local first = var_list[1]
  for _, v in ipairs(var_list) do if v.name < first.name then first = v end end
  made = {}
  for _, spec in ipairs(specs) do
    local initial = self._o[spec[2]]
    made[spec[1]] = self._tf.Variable(function()
      return G.is_tensor(initial) and self._tf.cast(initial, first.dtype) or initial
    end, {name = spec[1], dtype = first.dtype, trainable = false})
  end
  self._non_slots[g] = made
  return made
end

-- The hyperparameters as tensors of one dtype: a Lua number becomes a
-- constant of that dtype (exact in float64), a tensor is cast when needed.
function Optimizer:_hyper_tensors(dtype, g, non_slots)
  local h = {}
  for _, key in ipairs(self._kind.hyper) do
    local v = self._o[key]
    if G.is_tensor(v) then
      h[key] = v.dtype == dtype and v or self._tf.cast(v, dtype, key)
    else
      h[key] = G.constant(v, {dtype = dtype, name = key, graph = g})
    end
  end
  for name, v in pairs(non_slots or {}) do
    h[name] = v.dtype == dtype and v or self._tf.cast(v, dtype)
  end
  return h
end

-- apply_gradients(grads_and_vars, {global_step=, name=}): the training op. It
-- updates every variable that has a gradient (pairs with a nil gradient are
-- skipped), then increments global_step when given; with global_step the
-- result is the incremented step's tensor, as in TensorFlow, else an op.
function Optimizer:apply_gradients(grads_and_vars, ...)
  local fname = "Optimizer:apply_gradients"
  local tf = self._tf
  local o = options(fname, APPLY_GRADIENTS_OPTIONS, ...)
  if type(grads_and_vars) ~= "table" or getmetatable(grads_and_vars) ~= nil or #grads_and_vars == 0 then
    fail(fname .. ": No variables provided: apply_gradients takes a non-empty list of {grad, var} pairs")
  end
  local updates, names = {}, {}
  for i, gv in ipairs(grads_and_vars) do
    if type(gv) ~= "table" or getmetatable(gv) ~= nil then
      fail(fname .. ": grads_and_vars[" .. i .. "] must be a {grad, var} pair, got " .. tostring(gv))
    end
    local grad, var = gv[1], gv[2]
    if not is_variable(var) then
      fail(fname .. ": grads_and_vars[" .. i .. "][2] is not a variable: " .. tostring(var))
    end
    names[#names + 1] = var.op.name
    if grad ~= nil then updates[#updates + 1] = {G.convert(grad, var.dtype, var.graph), var} end
  end
  if #updates == 0 then
    fail(fname .. ": No gradients provided for any variable: (" .. table.concat(names, ", ") .. ").")
  end
  local step = o.global_step
  if step ~= nil and not (is_variable(step) and step.dtype.is_integer) then
    fail(fname .. ": global_step must be an integer variable (tf.train.get_or_create_global_step()), got " ..
         tostring(step))
  end
  local var_list = {}
  for i, u in ipairs(updates) do var_list[i] = u[2] end
  local g = var_list[1].graph
  local slot_specs = self._kind.slots(self._o)
  local non_slots = self:_make_non_slots(var_list)
  local slots = {}
  for i, var in ipairs(var_list) do
    slots[i] = {}
    for _, spec in ipairs(slot_specs) do slots[i][spec[1]] = self:_make_slot(var, spec[1], spec[2]) end
  end
  local result = tf.name_scope(o.name or self._name, function()
    -- The hyperparameters of each dtype, built here once for all updates.
    local by_dtype, update_ops = {}, {}
    local function hyper(dtype)
      by_dtype[dtype] = by_dtype[dtype] or self:_hyper_tensors(dtype, g, non_slots)
      return by_dtype[dtype]
    end
    for _, var in ipairs(var_list) do hyper(var.dtype) end
    for i, u in ipairs(updates) do
      local grad, var = u[1], u[2]
      update_ops[i] = tf.name_scope("update_" .. var.op.name, function()
        local op_type, inputs, attrs = self._kind.update(self._o, var, grad, slots[i], hyper(var.dtype))
        return G.build{op_type, inputs = inputs, attrs = attrs}
      end)
    end
    local finish = update_ops
    if non_slots then
      -- beta powers advance once the updates that read them have run.
      finish = tf.control_dependencies(update_ops, function()
        local list = {unpack(update_ops)}
        for _, spec in ipairs(self._kind.non_slots) do
          local v = non_slots[spec[1]]
          list[#list + 1] = tf.assign(v, v * hyper(v.dtype)[spec[2]])
        end
        return list
      end)
    end
    local group = tf.group(finish, {name = "update"})
    if step == nil then return group end
    return tf.control_dependencies({group}, function()
      return tf.assign_add(step, 1, {name = "increment_global_step"})
    end)
  end)
  local train_ops = g:get_collection_ref("train_op")
  local listed = false
  for _, t in ipairs(train_ops) do listed = listed or t == result end
  if not listed then train_ops[#train_ops + 1] = result end
  return result
end

-- minimize(loss, {global_step=, var_list=, name=, grad_loss=}) (or those
-- positionally, in TensorFlow's order): compute_gradients, then
-- apply_gradients of the variables that have a gradient.
function Optimizer:minimize(loss, ...)
  local fname = "Optimizer:minimize"
  local o = options(fname, MINIMIZE_OPTIONS, ...)
  local grads_and_vars = self:compute_gradients(loss, {var_list = o.var_list, grad_loss = o.grad_loss})
  local names, any = {}, false
  for i, gv in ipairs(grads_and_vars) do
    names[i] = gv[2].op.name
    any = any or gv[1] ~= nil
  end
  if not any then
    fail(fname .. ": No gradients provided for any variable, check your graph for ops that do not support " ..
         "gradients, between variables [" .. table.concat(names, ", ") .. "] and loss " .. tostring(loss) .. ".")
  end
  return self:apply_gradients(grads_and_vars, {global_step = o.global_step, name = o.name})
end

return function(tf, ops)
  tf.train = tf.train or {}
  local GLOBAL_STEP = tf.GraphKeys.GLOBAL_STEP

  for class, kind in pairs(kinds) do
    local fname = "tf.train." .. class
    kind.args.empty = true
    tf.train[class] = function(...)
      local o = options(fname, kind.args, ...)
      for i = 1, kind.required do
        if o[kind.args[i]] == nil then fail(fname .. ": " .. kind.args[i] .. " is required") end
      end
      for k, v in pairs(kind.defaults or {}) do if o[k] == nil then o[k] = v end end
      for _, key in ipairs(kind.hyper) do
        local v = o[key]
        if type(v) ~= "number" and not G.is_tensor(v) then
          fail(fname .. ": " .. key .. " must be a number or a Tensor, got " .. tostring(v))
        end
      end
      if kind.check then kind.check(o, fname) end
      if o.name ~= nil and (type(o.name) ~= "string" or o.name == "") then
        fail(fname .. ": name must be a non-empty string")
      end
      return setmetatable({_tf = tf, _class = class, _kind = kind, _o = o, _name = o.name or kind.name,
                           _slots = {}, _non_slots = {}}, Optimizer)
    end
  end

  -- The global step ---------------------------------------------------------------
  -- tf.train.get_global_step(graph): the variable of the GLOBAL_STEP collection, or nil.
  function tf.train.get_global_step(graph)
    if graph ~= nil and getmetatable(graph) ~= G.Graph then
      fail("tf.train.get_global_step: graph must be a tf.Graph, got " .. args.describe(graph))
    end
    local list = (graph or G.get_default_graph()):get_collection(GLOBAL_STEP)
    if #list > 1 then fail("tf.train.get_global_step: Multiple tensors in global_step collection.") end
    return list[1]
  end

  -- tf.train.create_global_step(graph): an int64 scalar variable "global_step"
  -- at the root name scope, starting at 0, non-trainable, in GLOBAL_VARIABLES
  -- and GLOBAL_STEP.
  function tf.train.create_global_step(graph)
    graph = graph or G.get_default_graph()
    if tf.train.get_global_step(graph) then fail("tf.train.create_global_step: global_step already exists.") end
    return graph:as_default(function()
      return tf.name_scope("", function()
        return tf.Variable(0, {name = "global_step", dtype = dtypes.int64, trainable = false,
                               collections = {tf.GraphKeys.GLOBAL_VARIABLES, GLOBAL_STEP}})
      end)
    end)
  end

  function tf.train.get_or_create_global_step(graph)
    return tf.train.get_global_step(graph) or tf.train.create_global_step(graph)
  end

  -- tf.train.global_step(sess, global_step_tensor): its value as a Lua number.
  function tf.train.global_step(sess, global_step_tensor)
    return tonumber(sess:run(global_step_tensor))
  end

  -- Clipping ------------------------------------------------------------------------
  -- tf.clip_by_value(t, clip_value_min, clip_value_max, name): each element
  -- clamped to [min, max]; the bounds broadcast and numbers take t's dtype.
  function ops.clip_by_value(t, clip_value_min, clip_value_max, name)
    t = G.convert(t)
    local lo = G.convert(clip_value_min, t.dtype, t.graph)
    local hi = G.convert(clip_value_max, t.dtype, t.graph)
    return ops.maximum(ops.minimum(t, hi), lo, name_of(name, "tf.clip_by_value") or "clip_by_value")
  end

  -- tf.clip_by_norm(t, clip_norm, axes, name): t * clip_norm / max(||t||, clip_norm),
  -- the L2 norm taken over axes (all by default). A zero norm leaves t as it
  -- is, with finite gradients: the square root never sees the zero.
  function ops.clip_by_norm(t, clip_norm, ...)
    local o = options("tf.clip_by_norm", CLIP_BY_NORM_OPTIONS, ...)
    t = G.convert(t)
    check_float(t, t.name, "tf.clip_by_norm")
    local cn = G.convert(clip_norm, t.dtype, t.graph)
    local l2sum = ops.reduce_sum(t * t, {axis = o.axes, keepdims = true})
    local positive = ops.cast(ops.greater(l2sum, 0), t.dtype)
    local l2norm = ops.sqrt(l2sum * positive + (1 - positive)) * positive
    return ops.divide(t * cn, ops.maximum(l2norm, cn), o.name or "clip_by_norm")
  end

  -- tf.global_norm(t_list, name): sqrt(sum of the squares of every element of
  -- every tensor); nil entries are skipped.
  function tf.global_norm(t_list, name)
    if type(t_list) ~= "table" or getmetatable(t_list) ~= nil then
      fail("tf.global_norm: t_list must be a list of tensors, got " .. tostring(t_list))
    end
    local halves = {}
    for i = 1, table.maxn(t_list) do  -- a list with holes: nil gradients
      if t_list[i] ~= nil then halves[#halves + 1] = tf.nn.l2_loss(G.convert(t_list[i])) end
    end
    if #halves == 0 then fail("tf.global_norm: t_list holds no tensors") end
    local half = #halves == 1 and halves[1] or ops.add_n(halves)
    return ops.sqrt(half * 2, name_of(name, "tf.global_norm") or "global_norm")
  end
  tf.linalg = tf.linalg or {}
  tf.linalg.global_norm = tf.global_norm

  -- tf.clip_by_global_norm(t_list, clip_norm, use_norm, name): returns
  -- list_clipped, global_norm. Every tensor is scaled by
  -- clip_norm / max(global_norm, clip_norm); nil entries stay nil. A global
  -- norm that is inf or NaN makes every value NaN, as in TensorFlow.
  function tf.clip_by_global_norm(t_list, clip_norm, ...)
    local o = options("tf.clip_by_global_norm", CLIP_BY_GLOBAL_NORM_OPTIONS, ...)
    local norm = o.use_norm or tf.global_norm(t_list)
    local cn = G.convert(clip_norm, norm.dtype, norm.graph)
    -- 1 / norm is inf for a zero norm; the minimum then takes 1 / clip_norm.
    local scale = cn * ops.minimum(1 / norm, 1 / cn) + (norm - norm)
    local clipped = {}
    for i = 1, table.maxn(t_list) do
      local t = t_list[i]
      if t ~= nil then
        t = G.convert(t)
        clipped[i] = ops.multiply(t, ops.cast(scale, t.dtype), o.name or "clip_by_global_norm")
      end
    end
    return clipped, norm
  end
end
