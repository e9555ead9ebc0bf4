-- nn_ops.lua — numerically stable functions, built from primitive ops (so
-- their gradients come from the primitives' rules): softmax, log_softmax,
-- reduce_logsumexp, the cross-entropy losses and l2_loss.
local G = require("moonflow.graph")

-- Reads (x, axis, name) or (x, {axis=, dim=, name=}) with a default axis.
local function axis_args(fname, default_axis, axis, name)
  if type(axis) == "table" and getmetatable(axis) == nil then
    local o = axis
    for k in pairs(o) do
      if k ~= "axis" and k ~= "dim" and k ~= "name" then error(fname .. ": unknown option '" .. tostring(k) .. "'", 3) end
    end
    axis, name = o.axis or o.dim, o.name
  end
  if axis == nil then axis = default_axis end
  if type(axis) ~= "number" or axis % 1 ~= 0 then
    error(fname .. ": axis must be an integer, got " .. tostring(axis), 3)
  end
  return axis, name
end

-- Keyword arguments {labels=, logits=, name=, axis=}; TensorFlow 1.x refuses
-- positional ones here, so does moonflow.
local function loss_args(fname, opts)
  if type(opts) ~= "table" or getmetatable(opts) ~= nil or opts.labels == nil or opts.logits == nil then
    error(fname .. ": call it as " .. fname .. "({labels = ..., logits = ...})", 3)
  end
  local logits = G.convert(opts.logits)
  return opts.labels, logits, opts.axis or opts.dim or -1, opts.name
end

return function(tf, ops)
  tf.nn = tf.nn or {}
  tf.math = tf.math or {}

  -- log(sum(exp(x))) over axis: the maximum is taken out first so that no exp
  -- overflows, and its gradient stopped (the result does not depend on it).
  function ops.reduce_logsumexp(x, axis, keepdims, name)
    x = G.convert(x)
    local o = type(axis) == "table" and getmetatable(axis) == nil and #axis == 0 and next(axis) ~= nil and axis or
              {axis = axis, keepdims = keepdims, name = name}
    local m = ops.stop_gradient(ops.reduce_max(x, {axis = o.axis, keepdims = true}))
    local s = ops.log(ops.reduce_sum(ops.exp(x - m), {axis = o.axis, keepdims = true})) + m
    if o.keepdims then return ops.identity(s, o.name) end
    if o.axis == nil then return ops.reshape(s, {}, o.name) end
    return ops.squeeze(s, o.axis, o.name)
  end
  tf.math.reduce_logsumexp = ops.reduce_logsumexp

  -- log_softmax(logits, axis=-1) = logits - logsumexp(logits).
  function tf.nn.log_softmax(logits, axis, name)
    axis, name = axis_args("tf.nn.log_softmax", -1, axis, name)
    logits = G.convert(logits)
    return ops.subtract(logits, ops.reduce_logsumexp(logits, {axis = axis, keepdims = true}), name)
  end

  -- softmax(logits, axis=-1) = exp(log_softmax): softmax of [1000, 0] is [1, 0].
  function tf.nn.softmax(logits, axis, name)
    axis, name = axis_args("tf.nn.softmax", -1, axis, name)
    return ops.exp(tf.nn.log_softmax(logits, axis), name)
  end

  -- -sum(labels * log_softmax(logits)) over axis. As in TensorFlow 1.x no
  -- gradient flows into labels.
  function tf.nn.softmax_cross_entropy_with_logits(opts)
    local labels, logits, axis, name = loss_args("tf.nn.softmax_cross_entropy_with_logits", opts)
    labels = ops.stop_gradient(G.convert(labels, logits.dtype, logits.graph))
    local xent = ops.reduce_sum(labels * tf.nn.log_softmax(logits, axis), {axis = axis})
    return ops.negative(xent, name)
  end

  -- labels are class indices (int32/int64) into the last axis of logits.
  function tf.nn.sparse_softmax_cross_entropy_with_logits(opts)
    local labels, logits, _, name = loss_args("tf.nn.sparse_softmax_cross_entropy_with_logits", opts)
    labels = G.convert(labels, tf.int32, logits.graph)
    if not labels.dtype.is_integer then
      error("tf.nn.sparse_softmax_cross_entropy_with_logits: labels must be int32 or int64 class indices, got " ..
            labels.dtype.name, 2)
    end
    local classes = ops.range(0, ops.cast(ops.shape(logits)[-1], labels.dtype), 1, {dtype = labels.dtype})
    local one_hot = ops.cast(ops.equal(ops.expand_dims(labels, -1), classes), logits.dtype)
    return ops.negative(ops.reduce_sum(one_hot * tf.nn.log_softmax(logits), {axis = -1}), name)
  end

  -- max(x, 0) - x * z + log(1 + exp(-|x|)): never overflows.
  function tf.nn.sigmoid_cross_entropy_with_logits(opts)
    local labels, logits, _, name = loss_args("tf.nn.sigmoid_cross_entropy_with_logits", opts)
    labels = G.convert(labels, logits.dtype, logits.graph)
    local relu = ops.maximum(logits, 0)
    return ops.add(relu - logits * labels, ops.log1p(ops.exp(ops.negative(ops.abs(logits)))), name)
  end

  -- sum(t^2) / 2.
  function tf.nn.l2_loss(t, name)
    t = G.convert(t)
    return ops.multiply(ops.reduce_sum(ops.square(t)), 0.5, type(name) == "table" and name.name or name)
  end
end
