-- ops/nn.lua — numerically stable functions, built from primitive ops (so
-- their gradients come from the primitives' rules): softmax, log_softmax,
-- reduce_logsumexp, the cross-entropy losses and l2_loss; and the
-- normalization and regularization composites: tf.nn.l2_normalize,
-- tf.nn.dropout, tf.nn.moments, tf.nn.batch_normalization, tf.nn.fused_batch_norm.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local fail, options, show, tensor_arg = core.fail, args.options, args.show, G.tensor_arg
local check_bool = args.check_bool

-- x as a float tensor (a Lua value becomes float32).
local function float_tensor(fname, what, x)
  local t = tensor_arg(fname, what, x)
  if not t.dtype.is_floating then
    fail(string.format("%s: %s must be a float32 or float64 tensor, got %s %s (use tf.cast)", fname, what,
                       t.dtype.name, t.name))
  end
  return t
end

-- A parameter (mean, variance, offset, scale) in x's dtype, checked to
-- broadcast against x without changing x's shape.
local function param(fname, what, v, x)
  if v == nil then return nil end
  local t = G.convert(v, x.dtype, x.graph)
  if t.dtype ~= x.dtype then
    fail(string.format("%s: %s has dtype %s but x has dtype %s (use tf.cast)", fname, what, t.dtype.name, x.dtype.name))
  end
  if not t:get_shape():broadcasts_to(x:get_shape()) then
    local xd = x:get_shape().dims
    fail(string.format("%s: %s of shape %s does not broadcast against x of shape %s (rank %d); give one value " ..
                       "per entry of the normalized axes, e.g. shape (%s,)", fname, what,
                       tostring(t:get_shape()), tostring(x:get_shape()), #xd,
                       xd[#xd] and xd[#xd] >= 0 and tostring(xd[#xd]) or "channels"))
  end
  return t
end

-- Reduction axes as a sorted-as-given Lua list, checked against x's rank.
local function axes_list(fname, axes, x)
  if type(axes) == "number" then axes = {axes} end
  if type(axes) ~= "table" or getmetatable(axes) ~= nil then
    fail(fname .. ": axes must be a list of integers, got " .. tostring(axes))
  end
  local dims = x:get_shape().dims
  local seen, out = {}, {}
  for i, a in ipairs(axes) do
    if type(a) ~= "number" or a % 1 ~= 0 then
      fail(fname .. ": axes must be a list of integers, got " .. show(axes))
    end
    if dims then
      if a < -#dims or a >= #dims then
        fail(string.format("%s: axis %d is out of range for x of shape %s (rank %d): axes are in [%d, %d)",
                           fname, a, tostring(x:get_shape()), #dims, -#dims, #dims))
      end
      local k = a % #dims
      if seen[k] then fail(string.format("%s: axis %d appears twice in axes %s", fname, k, show(axes))) end
      seen[k] = true
    end
    out[i] = a
  end
  return out
end

-- (x, axis, name) or (x, {axis=, dim=, name=}) with a default axis; dim is
-- TensorFlow's older name for axis.
local AXIS_OPTIONS = {"axis", "name", "dim", positional = 2, empty = true}
local function axis_options(fname, default_axis, ...)
  local o = options(fname, AXIS_OPTIONS, ...)
  local axis = o.axis
  if axis == nil then axis = o.dim end
  if axis == nil then axis = default_axis end
  if type(axis) ~= "number" or axis % 1 ~= 0 then
    fail(fname .. ": axis must be an integer, got " .. show(axis))
  end
  return axis, o.name
end

-- Keyword arguments {labels=, logits=, name=, axis= (or dim=)}; TensorFlow
-- 1.x refuses positional ones here, so does moonflow.
local LOSS_OPTIONS = {"labels", "logits", "name", "axis", "dim", positional = 0}
local function loss_args(fname, opts)
  if not args.is_plain(opts) or opts.labels == nil or opts.logits == nil then
    fail(fname .. ": call it as " .. fname .. "({labels = ..., logits = ...})")
  end
  local o = options(fname, LOSS_OPTIONS, opts)
  local axis = o.axis
  if axis == nil then axis = o.dim end
  return o.labels, G.tensor_arg(fname, "logits", o.logits), axis or -1, o.name
end

return function(tf, ops)
  tf.nn = tf.nn or {}
  tf.math = tf.math or {}

  -- The maximum of x over axis (kept), taken out before exp so that no exp
  -- overflows, its gradient stopped (results do not depend on it). As
  -- TensorFlow, a maximum that is not finite is replaced by 0: all -inf gives
  -- -inf (not -inf - -inf = NaN), a +inf gives +inf.
  local function exp_shift(x, axis)
    local raw = ops.reduce_max(x, {axis = axis, keepdims = true})
    return ops.stop_gradient(ops.where(ops.less(ops.abs(raw), math.huge), raw, 0))
  end

  -- log(sum(exp(x))) over axis, with exp_shift taken out.
  function ops.reduce_logsumexp(x, ...)
    x = G.convert(x)
    local o = options("tf.reduce_logsumexp", {"axis", "keepdims", "name"}, ...)
    if o.axis ~= nil then axes_list("tf.reduce_logsumexp", o.axis, x) end
    local m = exp_shift(x, o.axis)
    local s = ops.log(ops.reduce_sum(ops.exp(x - m), {axis = o.axis, keepdims = true})) + m
    if o.keepdims then return ops.identity(s, o.name) end
    if o.axis == nil then return ops.reshape(s, {}, o.name) end
    return ops.squeeze(s, o.axis, o.name)
  end
  tf.math.reduce_logsumexp = ops.reduce_logsumexp

  -- logits as a float tensor, with axis checked against its rank, for fname.
  local function logits_along(fname, logits, axis)
    logits = float_tensor(fname, "logits", logits)
    local rank = logits:get_shape().ndims
    if rank and (axis < -rank or axis >= rank) then
      fail(string.format("%s: axis %d is out of range for logits of shape %s (expected [%d, %d))", fname, axis,
                         tostring(logits:get_shape()), -rank, rank))
    end
    return logits
  end

  -- log_softmax(logits, axis) = logits - logsumexp(logits) for checked logits.
  local function log_softmax(logits, axis, name)
    return ops.subtract(logits, ops.reduce_logsumexp(logits, {axis = axis, keepdims = true}), name)
  end

  -- tf.nn.log_softmax(logits, axis=-1).
  function tf.nn.log_softmax(logits, ...)
    local fname = "tf.nn.log_softmax"
    local axis, name = axis_options(fname, -1, ...)
    return log_softmax(logits_along(fname, logits, axis), axis, name)
  end

  -- softmax(logits, axis=-1) = e / sum(e) with e = exp(logits - exp_shift):
  -- softmax of [1000, 0] is [1, 0]. One exp per element, as TensorFlow's
  -- kernel (exp(log_softmax) takes two, and a log). Along the last axis it is
  -- one op (Softmax, src/ops/nn.c: a pass per row), else composed of ops.
  function tf.nn.softmax(logits, ...)
    local fname = "tf.nn.softmax"
    local axis, name = axis_options(fname, -1, ...)
    logits = logits_along(fname, logits, axis)
    local rank = logits:get_shape().ndims
    if axis == -1 or axis == (rank and rank - 1) then
      return (G.op{"Softmax", inputs = {logits}, name = name})
    end
    local e = ops.exp(logits - exp_shift(logits, axis))
    return ops.divide(e, ops.reduce_sum(e, {axis = axis, keepdims = true}), name)
  end

  -- labels (converted to logits' dtype) of logits' shape, as the losses of fname need.
  local function labels_like(fname, labels, logits)
    labels = G.tensor_arg(fname, "labels", labels, logits.dtype, logits.graph)
    if not labels:get_shape():is_compatible_with(logits:get_shape()) then
      fail(string.format("%s: labels of shape %s and logits of shape %s must have the same shape", fname,
                         tostring(labels:get_shape()), tostring(logits:get_shape())))
    end
    return labels
  end

  -- sum(labels * (logsumexp(logits) - logits)) over axis, by one fused op
  -- (src/ops/nn.c) that computes it as TensorFlow's kernel does, the row's
  -- maximum taken out first, and keeps softmax - labels for the gradient.
  -- labels broadcast to the shape of logits; axis is moved last and the other
  -- axes are flattened into rows. As in TensorFlow 1.x no gradient flows into
  -- labels; tf.nn.softmax_cross_entropy_with_logits_v2 (TF1's name) lets it flow.
  local function softmax_xent(fname, opts, labels_differentiable)
    local labels, logits, axis, name = loss_args(fname, opts)
    labels = G.tensor_arg(fname, "labels", labels, logits.dtype, logits.graph)
    if not labels_differentiable then labels = ops.stop_gradient(labels) end
    local shape = logits:get_shape()
    if not (shape:is_fully_defined() and shape == labels:get_shape()) then
      labels = ops.broadcast_to(labels, ops.shape(logits))
    end
    local rank = shape.ndims
    if rank == 0 then fail(fname .. ": logits must have at least one dimension (the classes), got a scalar") end
    if rank and (axis < -rank or axis >= rank) then
      fail(string.format("%s: axis %d is out of range for logits of shape %s (rank %d)", fname, axis,
                         tostring(shape), rank))
    end
    if axis ~= -1 and axis ~= (rank and rank - 1) then
      if not rank then fail(fname .. ": axis " .. axis .. " needs logits of a known rank (or use axis -1)") end
      local perm = {}
      for d = 0, rank - 1 do if d ~= axis % rank then perm[#perm + 1] = d end end
      perm[rank] = axis % rank
      logits, labels = ops.transpose(logits, perm), ops.transpose(labels, perm)
    end
    if rank == 2 then return (G.op{"SoftmaxCrossEntropyWithLogits", inputs = {logits, labels}, name = name}) end
    local dims = ops.shape(logits)
    local rows = ops.stack({-1, dims[-1]})
    local loss = G.op{"SoftmaxCrossEntropyWithLogits", inputs = {ops.reshape(logits, rows), ops.reshape(labels, rows)}}
    -- The loss has the shape of logits without the last axis: dims the graph
    -- knows stay known (a list of the static ones and Shape's entries).
    local kept = ops.strided_slice(dims, {0}, {-1})
    if rank then
      local static = logits:get_shape().dims
      kept = {}
      for d = 1, rank - 1 do kept[d] = static[d] >= 0 and static[d] or dims[d - 1] end
    end
    return ops.reshape(loss, kept, name)
  end
  function tf.nn.softmax_cross_entropy_with_logits(opts)
    return softmax_xent("tf.nn.softmax_cross_entropy_with_logits", opts, false)
  end
  function tf.nn.softmax_cross_entropy_with_logits_v2(opts)
    return softmax_xent("tf.nn.softmax_cross_entropy_with_logits_v2", opts, true)
  end

  -- labels are class indices (int32/int64) into the last axis of logits, of
  -- the shape of logits without it. One fused op (src/ops/nn.c) per row picks the
  -- label's entry, logsumexp(row) - row[label], and keeps softmax - one_hot for
  -- the gradient; a label outside [0, classes) fails the run in TensorFlow's
  -- words. Logits of another rank than 2 are seen as [-1, classes] rows.
  function tf.nn.sparse_softmax_cross_entropy_with_logits(opts)
    local fname = "tf.nn.sparse_softmax_cross_entropy_with_logits"
    local labels, logits, _, name = loss_args(fname, opts)
    labels = G.int_convert(labels, logits.graph)
    if labels.dtype ~= tf.int32 and labels.dtype ~= tf.int64 then
      fail(fname .. ": labels must be int32 or int64 class indices, got " .. labels.dtype.name)
    end
    local lr, xr = labels:get_shape().ndims, logits:get_shape().ndims
    if xr == 0 then fail(fname .. ": logits must have at least one dimension (the classes), got a scalar") end
    if lr and xr and lr ~= xr - 1 then
      fail(string.format("%s: rank mismatch: rank of labels (received %d) should equal rank of logits minus 1 " ..
                         "(received %d)", fname, lr, xr))
    end
    if xr == 2 then
      return (G.op{"SparseSoftmaxCrossEntropyWithLogits", inputs = {logits, labels}, name = name})
    end
    local rows = ops.reshape(logits, ops.stack({-1, ops.shape(logits)[-1]}))
    local loss = G.op{"SparseSoftmaxCrossEntropyWithLogits", inputs = {rows, ops.reshape(labels, {-1})}}
    return ops.reshape(loss, ops.shape(labels), name)
  end

  -- max(x, 0) - x * z + log(1 + exp(-|x|)): never overflows.
  function tf.nn.sigmoid_cross_entropy_with_logits(opts)
    local fname = "tf.nn.sigmoid_cross_entropy_with_logits"
    local labels, logits, _, name = loss_args(fname, opts)
    logits = float_tensor(fname, "logits", logits)
    labels = labels_like(fname, labels, logits)
    local relu = ops.maximum(logits, 0)
    return ops.add(relu - logits * labels, ops.log1p(ops.exp(ops.negative(ops.abs(logits)))), name)
  end

  -- sum(t^2) / 2.
  function tf.nn.l2_loss(t, name)
    t = float_tensor("tf.nn.l2_loss", "t", t)
    return ops.multiply(ops.reduce_sum(ops.square(t)), 0.5, args.name_of(name, "tf.nn.l2_loss"))
  end

  -- tf.nn.weighted_cross_entropy_with_logits(labels, logits, pos_weight,
  -- name) or ({labels=, logits=, pos_weight=, name=}; TF1's targets= for
  -- labels): sigmoid cross-entropy with the positive term weighted, in
  -- TensorFlow's overflow-free form
  -- (1 - z) x + (1 + (q - 1) z) (log(1 + exp(-|x|)) + max(-x, 0)).
  function tf.nn.weighted_cross_entropy_with_logits(...)
    local fname = "tf.nn.weighted_cross_entropy_with_logits"
    local o = options(fname, {"labels", "logits", "pos_weight", "name", "targets"}, ...)
    if o.labels == nil then o.labels = o.targets end
    if o.labels == nil or o.logits == nil or o.pos_weight == nil then
      fail(fname .. ": labels, logits and pos_weight are required")
    end
    local logits = float_tensor(fname, "logits", o.logits)
    local labels = labels_like(fname, o.labels, logits)
    local q = G.convert(o.pos_weight, logits.dtype, logits.graph)
    local log_weight = ops.add(ops.multiply(ops.subtract(q, 1), labels), 1)
    local softplus_neg = ops.add(ops.log1p(ops.exp(ops.negative(ops.abs(logits)))),
                                 ops.maximum(ops.negative(logits), 0))
    return ops.add(ops.multiply(ops.subtract(1, labels), logits), ops.multiply(log_weight, softplus_neg), o.name)
  end

  -- tf.nn.log_poisson_loss(targets, log_input, compute_full_loss, name):
  -- exp(log_input) - log_input * targets, plus Stirling's approximation of
  -- log(targets!) where targets > 1 when compute_full_loss.
  function tf.nn.log_poisson_loss(targets, log_input, ...)
    local fname = "tf.nn.log_poisson_loss"
    local o = options(fname, {"compute_full_loss", "name"}, ...)
    local x = float_tensor(fname, "log_input", log_input)
    local z = labels_like(fname, targets, x)
    local loss = ops.subtract(ops.exp(x), ops.multiply(x, z))
    if not check_bool(o.compute_full_loss, fname, "compute_full_loss") then return ops.identity(loss, o.name) end
    local safe_z = tf.where(ops.greater(z, 1), z, ops.ones_like(z))
    local stirling = ops.add(ops.subtract(ops.multiply(safe_z, ops.log(safe_z)), safe_z),
                             ops.multiply(ops.log(ops.multiply(safe_z, 2 * math.pi)), 0.5))
    return ops.add(loss, tf.where(ops.greater(z, 1), stirling, ops.zeros_like(z)), o.name)
  end

  -- tf.nn.xw_plus_b(x, weights, biases, name): matmul(x, weights) + biases;
  -- tf.nn.relu_layer(x, weights, biases, name): its relu.
  function tf.nn.xw_plus_b(x, weights, biases, name)
    name = args.name_of(name, "tf.nn.xw_plus_b")
    return tf.nn.bias_add(ops.matmul(x, weights), biases, {name = name or "xw_plus_b"})
  end
  function tf.nn.relu_layer(x, weights, biases, name)
    name = args.name_of(name, "tf.nn.relu_layer")
    return tf.nn.relu(tf.nn.xw_plus_b(x, weights, biases), name)
  end

  -- tf.nn.swish(features, name) (also tf.nn.silu): x * sigmoid(x).
  function tf.nn.swish(features, name)
    local x = float_tensor("tf.nn.swish", "features", features)
    return ops.multiply(x, ops.sigmoid(x), args.name_of(name, "tf.nn.swish"))
  end
  tf.nn.silu = tf.nn.swish

  -- tf.nn.crelu(features, name, axis): relu(x) and relu(-x) concatenated along axis (-1).
  function tf.nn.crelu(features, ...)
    local o = options("tf.nn.crelu", {"name", "axis"}, ...)
    local x = float_tensor("tf.nn.crelu", "features", features)
    return tf.nn.relu(ops.concat({x, ops.negative(x)}, o.axis or -1), o.name)
  end

  -- tf.nn.sufficient_statistics(x, axes, shift, keep_dims, name): the count
  -- of elements reduced, sum(x - shift) and sum((x - shift)^2) over axes,
  -- and shift (nil without one). tf.nn.normalize_moments(counts, mean_ss,
  -- variance_ss, shift, name): the mean and the variance from them.
  function tf.nn.sufficient_statistics(x, axes, ...)
    local fname = "tf.nn.sufficient_statistics"
    local o = options(fname, {"shift", "keep_dims", "name", "keepdims"}, ...)
    x = float_tensor(fname, "x", x)
    local keep = check_bool(o.keepdims, fname, "keepdims") or check_bool(o.keep_dims, fname, "keep_dims") or false
    local shift = o.shift ~= nil and G.convert(o.shift, x.dtype, x.graph) or nil
    local shifted = shift and ops.subtract(x, shift) or x
    local count = ops.divide(ops.cast(ops.size(x), x.dtype), ops.cast(ops.size(ops.reduce_sum(x, axes, keep)),
                                                                       x.dtype))
    return count, ops.reduce_sum(shifted, axes, keep), ops.reduce_sum(ops.square(shifted), axes, keep), shift
  end
  function tf.nn.normalize_moments(counts, mean_ss, variance_ss, shift, name)
    name = args.name_of(name, "tf.nn.normalize_moments")
    local divisor = ops.reciprocal(counts)
    local shifted_mean = ops.multiply(mean_ss, divisor)
    local mean = shift ~= nil and ops.add(shifted_mean, shift) or shifted_mean
    local variance = ops.subtract(ops.multiply(variance_ss, divisor), ops.square(shifted_mean))
    return ops.identity(mean, name and name .. "_mean"), ops.identity(variance, name and name .. "_variance")
  end

  -- tf.nn.zero_fraction(value, name) (also tf.math.zero_fraction): the
  -- fraction of value's elements that are zero, as float32.
  function tf.nn.zero_fraction(value, name)
    local x = G.convert(value)
    local zeros = ops.cast(ops.equal(x, G.convert(0, x.dtype, x.graph)), tf.float32)
    return ops.reduce_mean(zeros, nil, false, args.name_of(name, "tf.nn.zero_fraction"))
  end
  tf.math.zero_fraction = tf.nn.zero_fraction

  -- tf.nn.l2_normalize(x, axis, epsilon, name, dim) or (x, {axis=, epsilon=,
  -- name=, dim=}): x / sqrt(max(sum(x^2, axis), epsilon)) over axis (a number
  -- or a list; every axis by default), epsilon 1e-12 keeping a zero vector at
  -- zero. Also tf.math.l2_normalize.
  function tf.nn.l2_normalize(x, ...)
    local fname = "tf.nn.l2_normalize"
    local o = options(fname, {"axis", "epsilon", "name", "dim"}, ...)
    if o.axis ~= nil and o.dim ~= nil then fail(fname .. ": Cannot specify both 'axis' and 'dim'.") end
    x = float_tensor(fname, "x", x)
    local axis = o.axis
    if axis == nil then axis = o.dim end
    local square_sum = ops.reduce_sum(ops.square(x), {axis = axis, keepdims = true})
    return ops.multiply(x, ops.rsqrt(ops.maximum(square_sum, o.epsilon or 1e-12)), o.name)
  end
  tf.math.l2_normalize = tf.nn.l2_normalize
  tf.math.softmax, tf.math.log_softmax = tf.nn.softmax, tf.nn.log_softmax

  -- tf.nn.dropout(x, keep_prob, noise_shape, seed, name) or (x, {rate=, keep_prob=,
  -- noise_shape=, seed=, name=}): each element (or each slice that
  -- noise_shape broadcasts over) kept with probability keep_prob = 1 - rate
  -- and scaled by 1 / keep_prob, else zeroed. The draw is a tf.random_uniform
  -- that follows the graph and op seeds; a new draw every run.
  function tf.nn.dropout(x, ...)
    local fname = "tf.nn.dropout"
    local o = options(fname, {"keep_prob", "noise_shape", "seed", "name", "rate"}, ...)
    x = float_tensor(fname, "x", x)
    if o.rate ~= nil and o.keep_prob ~= nil then fail(fname .. ": give rate or keep_prob, not both") end
    if o.rate == nil and o.keep_prob == nil then fail(fname .. ": rate (or keep_prob) is required") end
    local keep
    if o.rate ~= nil then
      if type(o.rate) == "number" then
        if not (o.rate >= 0 and o.rate < 1) then
          fail(fname .. ": rate must be a scalar tensor or a number in the range [0, 1), got " .. tostring(o.rate))
        end
        keep = 1 - o.rate
      end
    elseif type(o.keep_prob) == "number" then
      if not (o.keep_prob > 0 and o.keep_prob <= 1) then
        fail(fname .. ": keep_prob must be a scalar tensor or a number in the range (0, 1], got " ..
             tostring(o.keep_prob))
      end
      keep = o.keep_prob
    end
    local dims = x:get_shape().dims
    return tf.name_scope(o.name or "dropout", function()
      if keep == nil then  -- a tensor rate or keep_prob
        local given = o.rate ~= nil and o.rate or o.keep_prob
        local t = G.is_tensor(given) and given or G.convert(given, x.dtype, x.graph)
        local td = t:get_shape().dims
        if not t.dtype.is_floating or (td and #td ~= 0) then
          fail(string.format("%s: %s must be a scalar float tensor or a number, got %s (dtype %s, shape %s)", fname,
                             o.rate ~= nil and "rate" or "keep_prob", t.name, t.dtype.name, tostring(t:get_shape())))
        end
        t = ops.cast(t, x.dtype)
        keep = o.rate ~= nil and ops.subtract(1, t, "keep_prob") or t
      end
      local shape
      if o.noise_shape == nil then
        local known = dims ~= nil
        for _, d in ipairs(dims or {}) do known = known and d >= 0 end
        shape = known and dims or ops.shape(x)
      elseif G.is_tensor(o.noise_shape) then
        shape = o.noise_shape
      else
        local ns = o.noise_shape
        if getmetatable(ns) == G.TensorShape then ns = ns.dims end
        if type(ns) ~= "table" or getmetatable(ns) ~= nil then
          fail(fname .. ": noise_shape must be a list of integers or an int32 tensor, got " .. tostring(ns))
        end
        if dims and #ns ~= #dims then
          fail(string.format("%s: noise_shape %s must have the rank of x, whose shape is %s", fname, show(ns),
                             tostring(x:get_shape())))
        end
        shape = {}
        for i, d in ipairs(ns) do
          if type(d) ~= "number" or d % 1 ~= 0 or d < -1 then
            fail(fname .. ": noise_shape must be a list of integers (-1 for x's dimension), got " .. show(ns))
          end
          local xd = dims and dims[i] or -1
          if d >= 0 and xd >= 0 and d ~= 1 and d ~= xd then
            fail(string.format("%s: noise_shape %s does not broadcast to x's shape %s (dimension %d is %d; " ..
                               "it must be 1 or %d)", fname, show(ns), tostring(x:get_shape()), i - 1, d, xd))
          end
          if d == -1 then d = xd >= 0 and xd or ops.shape(x)[i - 1] end
          shape[i] = d
        end
      end
      local rnd = ops.random_uniform(shape, {seed = o.seed, dtype = x.dtype})
      local binary = ops.floor(ops.add(rnd, keep))
      local y = ops.multiply(ops.divide(x, keep), binary)
      if dims then y:set_shape(dims) end
      return y
    end)
  end

  -- tf.nn.moments(x, axes, shift, name, keep_dims) or (x, axes, {keepdims=,
  -- keep_dims=, name=, shift=}): the mean and the (biased) variance of x over
  -- axes, as two values. shift is accepted and unused, as in TensorFlow 1.x.
  function tf.nn.moments(x, axes, ...)
    local fname = "tf.nn.moments"
    local o = options(fname, {"shift", "name", "keep_dims", "keepdims"}, ...)
    x = float_tensor(fname, "x", x)
    if axes == nil then fail(fname .. ": axes is required (tf.nn.moments(x, axes))") end
    local list = axes_list(fname, axes, x)
    if o.keep_dims ~= nil and o.keepdims ~= nil then fail(fname .. ": give keepdims or keep_dims, not both") end
    local keepdims = o.keepdims
    if keepdims == nil then keepdims = o.keep_dims end
    if keepdims ~= nil and type(keepdims) ~= "boolean" then
      fail(fname .. ": keepdims must be a boolean, got " .. tostring(keepdims))
    end
    return tf.name_scope(o.name or "moments", function()
      local mean = ops.reduce_mean(x, {axis = list, keepdims = true, name = "mean"})
      -- The mean's gradient is stopped here: the variance does not depend on it
      -- to first order (the sum of x - mean is zero), so nothing is lost.
      local variance = ops.reduce_mean(ops.square(ops.subtract(x, ops.stop_gradient(mean))),
                                       {axis = list, keepdims = true, name = "variance"})
      if keepdims or #list == 0 then return mean, variance end
      return ops.squeeze(mean, list), ops.squeeze(variance, list)
    end)
  end

  -- tf.nn.batch_normalization(x, mean, variance, offset, scale, variance_epsilon,
  -- name): (x - mean) / sqrt(variance + variance_epsilon) * scale + offset,
  -- computed as x * inv + (offset - mean * inv); offset and scale may be nil.
  -- The parameters broadcast against x. Also (x, {mean=, variance=, offset=,
  -- scale=, variance_epsilon=, name=}).
  function tf.nn.batch_normalization(x, ...)
    local fname = "tf.nn.batch_normalization"
    local o = options(fname, {"mean", "variance", "offset", "scale", "variance_epsilon", "name"}, ...)
    local mean, variance, offset, scale, variance_epsilon, name =
      o.mean, o.variance, o.offset, o.scale, o.variance_epsilon, o.name
    x = float_tensor(fname, "x", x)
    if mean == nil or variance == nil then fail(fname .. ": mean and variance are required") end
    if variance_epsilon == nil then
      fail(fname .. ": variance_epsilon is required (a small number such as 1e-3)")
    end
    if type(variance_epsilon) == "number" and not (variance_epsilon >= 0) then
      fail(fname .. ": variance_epsilon must be a non-negative number, got " .. tostring(variance_epsilon))
    end
    mean, variance = param(fname, "mean", mean, x), param(fname, "variance", variance, x)
    offset, scale = param(fname, "offset", offset, x), param(fname, "scale", scale, x)
    return tf.name_scope(name or "batchnorm", function()
      local inv = ops.rsqrt(ops.add(variance, variance_epsilon))
      if scale then inv = ops.multiply(inv, scale) end
      local shift = offset and ops.subtract(offset, ops.multiply(mean, inv)) or ops.negative(ops.multiply(mean, inv))
      return ops.add(ops.multiply(x, inv), shift)
    end)
  end

  -- tf.nn.fused_batch_norm(x, scale, offset, mean, variance, epsilon = 0.001,
  -- data_format = "NHWC", is_training = true, name) or (x, scale, offset,
  -- {mean=, variance=, epsilon=, is_training=, data_format=, name=}): batch
  -- normalization of a 4-D NHWC x over its channels. Returns y, the mean and
  -- the variance used: in training the batch's (the variance returned with
  -- Bessel's correction n / (n - 1), n = batch * height * width, for moving
  -- averages, while y uses the biased one), otherwise the given mean and
  -- variance. As in TensorFlow, epsilon is raised to at least 1.001e-5.
  function tf.nn.fused_batch_norm(x, scale, offset, ...)
    local fname = "tf.nn.fused_batch_norm"
    local o = options(fname, {"mean", "variance", "epsilon", "data_format", "is_training", "name"}, ...)
    x = float_tensor(fname, "x", x)
    local dims = x:get_shape().dims
    if dims and #dims ~= 4 then
      fail(string.format("%s: x must be 4-D (NHWC: batch, height, width, channels), got shape %s (rank %d)",
                         fname, tostring(x:get_shape()), #dims))
    end
    if o.data_format ~= nil and o.data_format ~= "NHWC" then
      fail(fname .. ': only data_format = "NHWC" exists, got ' .. tostring(o.data_format))
    end
    if scale == nil or offset == nil then fail(fname .. ": scale and offset are required") end
    local training = o.is_training
    if training == nil then training = true end
    if type(training) ~= "boolean" then
      fail(fname .. ": is_training must be a boolean (use tf.cond to choose at run time), got " .. tostring(training))
    end
    local epsilon = o.epsilon == nil and 0.001 or o.epsilon
    if type(epsilon) ~= "number" or not (epsilon >= 0) then
      fail(fname .. ": epsilon must be a non-negative number, got " .. tostring(epsilon))
    end
    epsilon = math.max(epsilon, 1.001e-5)
    local function channels(what, v)
      local t = param(fname, what, v, x)
      local d = t:get_shape().dims
      if d and #d ~= 1 then
        fail(string.format("%s: %s must be 1-D (one value per channel), got shape %s", fname, what,
                           tostring(t:get_shape())))
      end
      return t
    end
    scale, offset = channels("scale", scale), channels("offset", offset)
    if not training then
      if o.mean == nil or o.variance == nil then
        fail(fname .. ": mean and variance must be given when is_training is false")
      end
      local mean, variance = channels("mean", o.mean), channels("variance", o.variance)
      return tf.name_scope(o.name or "FusedBatchNorm", function()
        return tf.nn.batch_normalization(x, mean, variance, offset, scale, epsilon), mean, variance
      end)
    end
    return tf.name_scope(o.name or "FusedBatchNorm", function()
      local mean, variance = tf.nn.moments(x, {0, 1, 2})
      local y = tf.nn.batch_normalization(x, mean, variance, offset, scale, epsilon)
      local n
      if dims and dims[1] >= 0 and dims[2] >= 0 and dims[3] >= 0 then
        n = dims[1] * dims[2] * dims[3]
        n = G.convert(n / math.max(n - 1, 1), x.dtype, x.graph)
      else
        local s = ops.cast(ops.shape(x), x.dtype)
        local count = s[0] * s[1] * s[2]
        n = ops.divide(count, ops.maximum(count - 1, 1))
      end
      return y, mean, ops.multiply(variance, n)
    end)
  end
end
