-- cookbook.lua — tf.cookbook: the "TensorFlow cookbook" of Effective
-- TensorFlow (vahidk/EffectiveTensorflow), ported to moonflow: get_shape,
-- reshape (its companion from "static and dynamic shapes"), batch_gather,
-- merge, softmax_entropy, gaussian_kl, leaky_relu, batch_normalization.
-- Python tuples become Lua lists and keyword arguments an options table; each
-- function keeps the recipe's defaults and its names.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local dtypes = core.dtypes

local fail, options, tensor_arg = core.fail, args.options, G.tensor_arg

return function(tf, ops)
  local cookbook = {}
  tf.cookbook = cookbook

  -- get_shape(tensor): a Lua list with the static size of each dimension where
  -- it is known, and the dynamic size (a scalar int32 tensor) where not.
  function cookbook.get_shape(tensor)
    local fname = "tf.cookbook.get_shape"
    tensor = tensor_arg(fname, "tensor", tensor)
    local static = tensor:get_shape().dims
    if static == nil then fail(fname .. ": the tensor must have a known rank, got " .. tostring(tensor:get_shape())) end
    local dims, dynamic = {}, nil
    for i, s in ipairs(static) do
      if s >= 0 then dims[i] = s
      else
        dynamic = dynamic or ops.unstack(ops.shape(tensor), {num = #static})
        dims[i] = dynamic[i]
      end
    end
    return dims
  end

  -- The product of a list of sizes (numbers or scalar tensors).
  local function product(list)
    local p = 1
    for _, d in ipairs(list) do p = (type(p) == "number" and type(d) == "number") and p * d or ops.multiply(d, p) end
    return p
  end

  -- reshape(tensor, dims_list): collapses dimensions: each entry of dims_list
  -- is a dimension index (0-based) or a list of them merged into one;
  -- reshape(b, {0, {1, 2}}) turns [?, 10, 32] into [?, 320].
  function cookbook.reshape(tensor, dims_list)
    local fname = "tf.cookbook.reshape"
    tensor = tensor_arg(fname, "tensor", tensor)
    local shape = cookbook.get_shape(tensor)
    if type(dims_list) ~= "table" or getmetatable(dims_list) ~= nil then
      fail(fname .. ": dims_list must be a list of dimension indices or lists of them, got " .. tostring(dims_list))
    end
    local function dim(d)
      if type(d) ~= "number" or d % 1 ~= 0 or d < 0 or d >= #shape then
        fail(string.format("%s: %s is not a dimension of a rank-%d tensor", fname, tostring(d), #shape))
      end
      return shape[d + 1]
    end
    local prod = {}
    for i, dims in ipairs(dims_list) do
      if type(dims) == "table" then
        local sizes = {}
        for j, d in ipairs(dims) do sizes[j] = dim(d) end
        prod[i] = product(sizes)
      else
        prod[i] = dim(dims)
      end
    end
    return ops.reshape(tensor, prod)
  end

  -- batch_gather(tensor, indices): output[i] = tf.gather(tensor[i], indices[i])
  -- for a tensor [batch, n, ...] and indices [batch, ...].
  function cookbook.batch_gather(tensor, indices)
    local fname = "tf.cookbook.batch_gather"
    tensor = tensor_arg(fname, "tensor", tensor)
    local shape = cookbook.get_shape(tensor)
    if #shape < 2 then
      fail(fname .. ": tensor must have rank 2 or more ([batch, n, ...]), got shape " .. tostring(tensor:get_shape()))
    end
    local rest = {}
    for i = 3, #shape do rest[#rest + 1] = shape[i] end
    local flat_first = ops.reshape(tensor, {product({shape[1], shape[2]}), unpack(rest)})
    indices = G.int_convert(indices, tensor.graph)
    if not indices.dtype.is_integer then
      fail(fname .. ": indices must be int32 or int64, got " .. indices.dtype.name)
    end
    local nd = indices:get_shape().ndims
    if nd == nil or nd < 1 then
      fail(fname .. ": indices must have a known rank of 1 or more ([batch, ...]), got shape " ..
           tostring(indices:get_shape()))
    end
    local offset_shape = {shape[1]}
    for i = 2, nd do offset_shape[i] = 1 end
    local n = ops.cast(G.convert(shape[2], dtypes.int32, tensor.graph), indices.dtype)
    local offset = ops.reshape(ops.multiply(ops.range(shape[1], {dtype = indices.dtype}), n), offset_shape)
    -- The flattened gather cannot see an index past its row (it would read
    -- the next row), so each index is checked against n when the graph runs.
    local data = {fname .. ": indices must be in [0, n) with n =", n, "(the size of tensor's dimension 1); indices =",
                  indices}
    local checks = {tf.debugging.assert_non_negative(indices, {data = data, name = "batch_gather_index_check"}),
                    tf.debugging.assert_less(indices, n, {data = data, name = "batch_gather_index_check"})}
    return tf.control_dependencies(checks, function()
      return ops.gather(flat_first, ops.add(indices, offset))
    end)
  end

  -- merge(tensors, units, {activation = tf.nn.relu, name=, ...}): a dense
  -- projection of each tensor (same rank, broadcastable) to `units`, summed
  -- with broadcasting, then the activation (false for none): merge({a [m, 1,
  -- d1], b [1, n, d2]}, d3) is [m, n, d3]. Other options go to each
  -- tf.layers.dense; the layers are `merge/proj_0`, `merge/proj_1`, ....
  function cookbook.merge(tensors, units, ...)
    local fname = "tf.cookbook.merge"
    -- Options other than these go to each tf.layers.dense.
    local o, kwargs = options(fname, {"activation", "name", rest = true}, ...)
    if type(tensors) ~= "table" or getmetatable(tensors) ~= nil or #tensors == 0 then
      fail(fname .. ": tensors must be a non-empty list of tensors, got " .. tostring(tensors))
    end
    local activation = o.activation
    if activation == nil then activation = tf.nn.relu end
    local scope_args = o.name and {o.name, {}} or {nil, {default_name = "merge"}}
    return tf.variable_scope(scope_args[1], scope_args[2], function()
      local projs = {}
      for i, t in ipairs(tensors) do
        local args = {name = "proj_" .. (i - 1)}
        for k, v in pairs(kwargs) do args[k] = v end
        projs[i] = tf.layers.dense(t, units, args)
      end
      local result = table.remove(projs)
      for _, p in ipairs(projs) do result = result + p end
      if activation then result = activation(result) end
      return result
    end)
  end

  -- softmax_entropy(logits, dim = -1): the entropy -sum(p * log p) of
  -- softmax(logits) over dim, stable for any logits.
  function cookbook.softmax_entropy(logits, dim)
    local fname = "tf.cookbook.softmax_entropy"
    logits = tensor_arg(fname, "logits", logits)
    if dim == nil then dim = -1 end
    if type(dim) ~= "number" or dim % 1 ~= 0 then fail(fname .. ": dim must be an integer, got " .. tostring(dim)) end
    local plogp = tf.nn.softmax(logits, dim) * tf.nn.log_softmax(logits, dim)
    return ops.negative(ops.reduce_sum(plogp, dim))
  end

  -- gaussian_kl(q, p = {0, 0}): KL(q || p) between two isotropic Gaussians,
  -- each given as {mu, log_sigma_sq} (log variances, for stability), summed
  -- over the last axis.
  function cookbook.gaussian_kl(q, p)
    local fname = "tf.cookbook.gaussian_kl"
    p = p or {0, 0}
    for what, d in pairs({q = q, p = p}) do
      if type(d) ~= "table" or getmetatable(d) ~= nil or d[1] == nil or d[2] == nil then
        fail(fname .. ": " .. what .. " must be a pair {mu, log_sigma_sq}, got " .. tostring(d))
      end
    end
    local mu1 = tensor_arg(fname, "q[1]", q[1])
    local function like(v) return G.convert(v, mu1.dtype, mu1.graph) end
    local log_sigma1_sq, mu2, log_sigma2_sq = like(q[2]), like(p[1]), like(p[2])
    return ops.reduce_sum(
      0.5 * (log_sigma2_sq - log_sigma1_sq + ops.exp(log_sigma1_sq - log_sigma2_sq) +
             ops.square(mu1 - mu2) / ops.exp(log_sigma2_sq) - 1), {axis = -1})
  end

  -- leaky_relu(tensor, alpha = 0.1): max(tensor, alpha * tensor).
  function cookbook.leaky_relu(tensor, alpha)
    local fname = "tf.cookbook.leaky_relu"
    tensor = tensor_arg(fname, "tensor", tensor)
    if alpha == nil then alpha = 0.1 end
    if type(alpha) ~= "number" and not G.is_tensor(alpha) then
      fail(fname .. ": alpha must be a number or a tensor, got " .. tostring(alpha))
    end
    return ops.maximum(tensor, ops.multiply(alpha, tensor))
  end

  -- batch_normalization(tensor, training = false, epsilon = 0.001, momentum =
  -- 0.9, fused_batch_norm = false, name) or (tensor, {training=, ...}): the
  -- recipe's batch normalization over the last axis (NHWC features), with
  -- variables beta, gamma, avg_mean and avg_variance (the last two not
  -- trainable) in the variable scope `name` (default "batch_normalization").
  -- In training it adds the moving averages' assignments to
  -- tf.GraphKeys.UPDATE_OPS: run them with the training op.
  function cookbook.batch_normalization(tensor, ...)
    local fname = "tf.cookbook.batch_normalization"
    local o = options(fname, {"training", "epsilon", "momentum", "fused_batch_norm", "name"}, ...)
    tensor = tensor_arg(fname, "tensor", tensor)
    local training = o.training or false
    if type(training) ~= "boolean" then
      fail(fname .. ": training must be a boolean (the recipe builds a different graph for each), got " ..
           tostring(training))
    end
    local epsilon = o.epsilon == nil and 0.001 or o.epsilon
    local momentum = o.momentum == nil and 0.9 or o.momentum
    if type(momentum) ~= "number" or momentum < 0 or momentum > 1 then
      fail(fname .. ": momentum must be a number in [0, 1], got " .. tostring(momentum))
    end
    local dims = tensor:get_shape().dims
    if dims == nil or #dims < 1 or dims[#dims] < 0 then
      fail(fname .. ": the last dimension (channels) must be known, got shape " .. tostring(tensor:get_shape()))
    end
    local channels = dims[#dims]
    local axes = {}
    for i = 0, #dims - 2 do axes[#axes + 1] = i end
    local scope_args = o.name and {o.name, {}} or {nil, {default_name = "batch_normalization"}}
    return tf.variable_scope(scope_args[1], scope_args[2], function()
      local beta = tf.get_variable("beta", {channels}, {initializer = tf.zeros_initializer(), dtype = tensor.dtype})
      local gamma = tf.get_variable("gamma", {channels}, {initializer = tf.ones_initializer(), dtype = tensor.dtype})
      local avg_mean = tf.get_variable("avg_mean", {channels}, {initializer = tf.zeros_initializer(),
                                                                trainable = false, dtype = tensor.dtype})
      local avg_variance = tf.get_variable("avg_variance", {channels}, {initializer = tf.ones_initializer(),
                                                                        trainable = false, dtype = tensor.dtype})
      local mean, variance
      if training then
        if not o.fused_batch_norm then mean, variance = tf.nn.moments(tensor, axes) end
      else
        mean, variance = avg_mean, avg_variance
      end
      if o.fused_batch_norm then
        tensor, mean, variance = tf.nn.fused_batch_norm(tensor, gamma, beta, {mean = mean, variance = variance,
                                                                              epsilon = epsilon,
                                                                              is_training = training})
      else
        tensor = tf.nn.batch_normalization(tensor, mean, variance, beta, gamma, epsilon)
      end
      if training then
        local update_mean = tf.assign(avg_mean, avg_mean * momentum + mean * (1 - momentum))
        local update_variance = tf.assign(avg_variance, avg_variance * momentum + variance * (1 - momentum))
        tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, update_mean)
        tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, update_variance)
      end
      return tensor
    end)
  end
end
