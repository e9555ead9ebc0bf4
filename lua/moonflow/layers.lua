-- layers.lua — tf.layers: dense, conv2d, separable_conv2d, max_pooling2d, average_pooling2d,
-- flatten, batch_normalization, dropout, built from tf.nn ops and
-- tf.get_variable, with TensorFlow 1.x's variable names.
--
-- Naming and sharing: see layer_scope.lua; a layer's ops are in its scope
-- (`dense/MatMul`, output `dense/BiasAdd:0` or `dense/Relu:0`).
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")
local layer_scope = require("moonflow.layer_scope")

local dtypes = core.dtypes

local fail, options, is_integer, show = core.fail, args.options, args.is_integer, args.show

-- A positive integer or a pair of them, as {h, w}.
local function pair(fname, what, v)
  local p
  if is_integer(v) then p = {v, v}
  elseif type(v) == "table" and getmetatable(v) == nil and #v == 2 then p = {v[1], v[2]}
  elseif type(v) == "table" and getmetatable(v) == nil and #v == 1 then p = {v[1], v[1]} end
  if not p or not is_integer(p[1]) or not is_integer(p[2]) or p[1] < 1 or p[2] < 1 then
    fail(string.format("%s: %s must be a positive integer or a pair {height, width}, got %s", fname, what, show(v)))
  end
  return p
end

local function padding_of(fname, p)
  if p == nil then return "VALID" end
  local u = type(p) == "string" and p:upper()
  if u ~= "SAME" and u ~= "VALID" then
    fail(fname .. ': padding must be "valid" or "same", got ' .. tostring(p))
  end
  return u
end

local function check_data_format(fname, df)
  if df ~= nil and df ~= "channels_last" then
    fail(fname .. ': only data_format = "channels_last" (NHWC) exists, got ' .. tostring(df))
  end
end

local function check_function(fname, what, f)
  if f ~= nil and f ~= false and type(f) ~= "function" and
     not (type(f) == "table" and getmetatable(f) and getmetatable(f).__call) then
    fail(fname .. ": " .. what .. " must be a function, got " .. tostring(f))
  end
end


return function(tf, ops)
  tf.layers = tf.layers or {}
  local layers = tf.layers

  -- Runs fn(scope) in the layer's variable scope (layer_scope.lua).
  local function in_layer_scope(base, o, fn)
    return layer_scope(tf, "tf.layers." .. base, base, o.name, o.reuse, fn)
  end

  -- A variable of the layer: float dtype of the inputs, trainable unless told.
  local function variable(name, shape, dtype, init, trainable, regularizer)
    local v = tf.get_variable(name, shape, {dtype = dtype, initializer = init, trainable = trainable})
    if regularizer then
      local loss = tf.name_scope(name .. "/Regularizer", function() return regularizer(v) end)
      if loss ~= nil then tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES, loss) end
    end
    return v
  end

  local function float_input(fname, x)
    x = G.tensor_arg(fname, "inputs", x)
    if not x.dtype.is_floating then
      fail(fname .. ": inputs must be float32 or float64, got " .. x.dtype.name .. " (use tf.cast)")
    end
    return x
  end

  -- The static dims of x, which must have rank `want` (a number) or at least `min`.
  local function dims_of(fname, x, want, min)
    local dims = x:get_shape().dims
    if dims == nil then fail(fname .. ": inputs must have a known rank, got " .. tostring(x:get_shape())) end
    if want and #dims ~= want then
      fail(string.format("%s: inputs must have rank %d, got shape %s (rank %d)", fname, want,
                         tostring(x:get_shape()), #dims))
    end
    if min and #dims < min then
      fail(string.format("%s: inputs must have rank at least %d, got shape %s (rank %d)", fname, min,
                         tostring(x:get_shape()), #dims))
    end
    return dims
  end

  local dense_names = {"activation", "use_bias", "kernel_initializer", "bias_initializer", "kernel_regularizer",
                       "bias_regularizer", "activity_regularizer", "kernel_constraint", "bias_constraint",
                       "trainable", "name", "reuse", empty = true}

  -- A layer's output: its activation, and its activity regularizer's loss
  -- added to REGULARIZATION_LOSSES.
  local function activate(y, o)
    if o.activation then y = o.activation(y) end
    if o.activity_regularizer then
      local loss = tf.name_scope("ActivityRegularizer", function() return o.activity_regularizer(y) end)
      if loss ~= nil then tf.add_to_collection(tf.GraphKeys.REGULARIZATION_LOSSES, loss) end
    end
    return y
  end

  -- tf.layers.dense(inputs, units, {activation=, use_bias=, kernel_initializer=,
  -- bias_initializer=, kernel_regularizer=, bias_regularizer=,
  -- activity_regularizer=, trainable=, name=, reuse=}): activation(inputs @
  -- kernel + bias) over the last axis of inputs (rank 2 or more).
  function layers.dense(inputs, units, ...)
    local fname = "tf.layers.dense"
    local o = options(fname, dense_names, ...)
    local x = float_input(fname, inputs)
    if not is_integer(units) or units < 1 then
      fail(fname .. ": units must be a positive integer, got " .. tostring(units))
    end
    check_function(fname, "activation", o.activation)
    if o.kernel_constraint or o.bias_constraint then fail(fname .. ": constraints are not supported") end
    local dims = dims_of(fname, x, nil, 2)
    local n_in = dims[#dims]
    if n_in < 0 then
      fail(fname .. ": the last dimension of the inputs must be known, got shape " .. tostring(x:get_shape()))
    end
    return in_layer_scope("dense", o, function()
      local kernel = variable("kernel", {n_in, units}, x.dtype, o.kernel_initializer, o.trainable ~= false,
                              o.kernel_regularizer)
      local bias
      if o.use_bias ~= false then
        bias = variable("bias", {units}, x.dtype, o.bias_initializer or tf.zeros_initializer(),
                        o.trainable ~= false, o.bias_regularizer)
      end
      local y
      if #dims == 2 then
        y = ops.matmul(x, kernel)
      else
        -- [..., n_in] -> [rows, n_in] @ kernel -> [..., units]
        local flat = ops.reshape(x, {-1, n_in})
        local out_dims, known = {}, true
        for i = 1, #dims - 1 do out_dims[i] = dims[i]; known = known and dims[i] >= 0 end
        out_dims[#dims] = units
        local shape
        if known then shape = out_dims
        else shape = ops.concat({ops.slice(ops.shape(x), {0}, {#dims - 1}),
                                 G.constant({units}, {dtype = dtypes.int32})}, 0) end
        y = ops.reshape(ops.matmul(flat, kernel), shape, {name = "Tensordot"})
        y:set_shape(out_dims)
      end
      if bias then y = tf.nn.bias_add(y, bias) end
      return activate(y, o)
    end)
  end

  -- tf.layers.flatten(inputs, {name=, data_format=}): [batch, everything else].
  function layers.flatten(inputs, ...)
    local fname = "tf.layers.flatten"
    local o = options(fname, {"name", "data_format", empty = true}, ...)
    check_data_format(fname, o.data_format)
    local x = G.tensor_arg(fname, "inputs", inputs)
    local dims = dims_of(fname, x, nil, 1)
    return in_layer_scope("flatten", o, function()
      local rest, known = 1, true
      for i = 2, #dims do
        if dims[i] < 0 then known = false else rest = rest * dims[i] end
      end
      if #dims == 1 then return ops.expand_dims(x, 1) end
      local y
      if known and rest > 0 then y = ops.reshape(x, {-1, rest})
      elseif dims[1] >= 0 then y = ops.reshape(x, {dims[1], -1})
      else y = ops.reshape(x, {ops.shape(x)[0], -1}) end
      y:set_shape({dims[1], known and rest or -1})
      return y
    end)
  end

  local conv_names = {"strides", "padding", "data_format", "dilation_rate", "activation", "use_bias",
                      "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",
                      "activity_regularizer", "kernel_constraint", "bias_constraint", "trainable", "name",
                      "reuse", empty = true}

  -- What conv2d and separable_conv2d check alike: float NHWC inputs with known
  -- channels, filters, the window's sizes, padding, data_format, activation,
  -- no constraints. Returns the inputs, kernel size, strides, dilation,
  -- padding and the number of input channels.
  local function conv_args(fname, inputs, filters, kernel_size, o)
    local x = float_input(fname, inputs)
    if not is_integer(filters) or filters < 1 then
      fail(fname .. ": filters must be a positive integer, got " .. tostring(filters))
    end
    local k = pair(fname, "kernel_size", kernel_size)
    local strides = pair(fname, "strides", o.strides or 1)
    local dilation = pair(fname, "dilation_rate", o.dilation_rate or 1)
    local padding = padding_of(fname, o.padding)
    check_data_format(fname, o.data_format)
    check_function(fname, "activation", o.activation)
    for name, v in pairs(o) do
      if v and name:find("_constraint$") then fail(fname .. ": constraints are not supported") end
    end
    local dims = dims_of(fname, x, 4)
    if dims[4] < 0 then
      fail(fname .. ": the channel dimension of the inputs must be known, got shape " .. tostring(x:get_shape()))
    end
    return x, k, strides, dilation, padding, dims[4]
  end

  -- tf.layers.conv2d(inputs, filters, kernel_size, {strides = 1, padding = "valid",
  -- dilation_rate = 1, activation=, use_bias = true, kernel_initializer=,
  -- bias_initializer=, kernel_regularizer=, bias_regularizer=, trainable=, name=,
  -- reuse=}): inputs NHWC, kernel [kh, kw, in_channels, filters].
  function layers.conv2d(inputs, filters, kernel_size, ...)
    local fname = "tf.layers.conv2d"
    local o = options(fname, conv_names, ...)
    local x, k, strides, dilation, padding, channels = conv_args(fname, inputs, filters, kernel_size, o)
    return in_layer_scope("conv2d", o, function()
      local kernel = variable("kernel", {k[1], k[2], channels, filters}, x.dtype, o.kernel_initializer,
                              o.trainable ~= false, o.kernel_regularizer)
      local y = tf.nn.conv2d(x, kernel, strides, padding, {dilations = dilation, name = "Conv2D"})
      if o.use_bias ~= false then
        local bias = variable("bias", {filters}, x.dtype, o.bias_initializer or tf.zeros_initializer(),
                              o.trainable ~= false, o.bias_regularizer)
        y = tf.nn.bias_add(y, bias)
      end
      return activate(y, o)
    end)
  end

  -- tf.layers.separable_conv2d(inputs, filters, kernel_size, {strides = 1, padding = "valid",
  -- dilation_rate = 1, depth_multiplier = 1, activation=, use_bias = true, depthwise_initializer=,
  -- pointwise_initializer=, bias_initializer=, depthwise_regularizer=, pointwise_regularizer=,
  -- bias_regularizer=, trainable=, name=, reuse=}): tf.nn.separable_conv2d with the variables
  -- depthwise_kernel [kh, kw, in_channels, depth_multiplier] and pointwise_kernel
  -- [1, 1, in_channels * depth_multiplier, filters].
  local separable_names = {"strides", "padding", "data_format", "dilation_rate", "depth_multiplier", "activation",
                           "use_bias", "depthwise_initializer", "pointwise_initializer", "bias_initializer",
                           "depthwise_regularizer", "pointwise_regularizer", "bias_regularizer",
                           "activity_regularizer", "depthwise_constraint", "pointwise_constraint", "bias_constraint",
                           "trainable", "name", "reuse", empty = true}
  function layers.separable_conv2d(inputs, filters, kernel_size, ...)
    local fname = "tf.layers.separable_conv2d"
    local o = options(fname, separable_names, ...)
    local x, k, strides, dilation, padding, channels = conv_args(fname, inputs, filters, kernel_size, o)
    local multiplier = o.depth_multiplier or 1
    if not is_integer(multiplier) or multiplier < 1 then
      fail(fname .. ": depth_multiplier must be a positive integer, got " .. show(multiplier))
    end
    return in_layer_scope("separable_conv2d", o, function()
      local trainable = o.trainable ~= false
      local depthwise = variable("depthwise_kernel", {k[1], k[2], channels, multiplier}, x.dtype,
                                 o.depthwise_initializer, trainable, o.depthwise_regularizer)
      local pointwise = variable("pointwise_kernel", {1, 1, channels * multiplier, filters}, x.dtype,
                                 o.pointwise_initializer, trainable, o.pointwise_regularizer)
      local y = tf.nn.separable_conv2d(x, depthwise, pointwise, strides, padding,
                                       {rate = dilation, name = "separable_conv2d"})
      if o.use_bias ~= false then
        local bias = variable("bias", {filters}, x.dtype, o.bias_initializer or tf.zeros_initializer(), trainable,
                              o.bias_regularizer)
        y = tf.nn.bias_add(y, bias)
      end
      return activate(y, o)
    end)
  end

  -- tf.layers.max_pooling2d / average_pooling2d(inputs, pool_size, strides,
  -- {padding = "valid", data_format=, name=}).
  for lname, nn_name in pairs({max_pooling2d = "max_pool", average_pooling2d = "avg_pool"}) do
    local fname = "tf.layers." .. lname
    layers[lname] = function(inputs, pool_size, strides, ...)
      local o = options(fname, {"padding", "data_format", "name", empty = true}, ...)
      local x = G.tensor_arg(fname, "inputs", inputs)
      local p = pair(fname, "pool_size", pool_size)
      if strides == nil then fail(fname .. ": strides is required (tf.layers." .. lname .. "(inputs, pool_size, strides))") end
      local s = pair(fname, "strides", strides)
      local padding = padding_of(fname, o.padding)
      check_data_format(fname, o.data_format)
      dims_of(fname, x, 4)
      return in_layer_scope(lname, o, function()
        return tf.nn[nn_name](x, p, s, padding)
      end)
    end
  end

  -- training: a Lua boolean, or a scalar bool tensor chosen at run time.
  local function training_arg(fname, training)
    if training == nil then return false end
    if type(training) == "boolean" then return training end
    if G.is_tensor(training) then
      local d = training:get_shape().dims
      if training.dtype == dtypes.bool and (d == nil or #d == 0) then return training end
    end
    fail(fname .. ": training must be a boolean or a scalar bool tensor, got " .. tostring(training))
  end

  -- tf.layers.dropout(inputs, rate = 0.5, noise_shape, seed, training = false,
  -- name) or (inputs, {rate=, noise_shape=, seed=, training=, name=}): in
  -- training tf.nn.dropout(inputs, {rate=}), otherwise the inputs unchanged;
  -- training may be a bool tensor (then tf.cond chooses at run time).
  function layers.dropout(inputs, ...)
    local fname = "tf.layers.dropout"
    local o = options(fname, {"rate", "noise_shape", "seed", "training", "name", empty = true}, ...)
    local x = float_input(fname, inputs)
    local rate = o.rate == nil and 0.5 or o.rate
    if type(rate) == "number" and not (rate >= 0 and rate < 1) then
      fail(fname .. ": rate must be a number in the range [0, 1), got " .. tostring(rate))
    end
    local training = training_arg(fname, o.training)
    return in_layer_scope("dropout", o, function()
      local function drop() return tf.nn.dropout(x, {rate = rate, noise_shape = o.noise_shape, seed = o.seed}) end
      local function keep() return ops.identity(x) end
      if training == true then return drop() end
      if training == false then return keep() end
      return tf.cond(training, drop, keep)
    end)
  end

  local bn_names = {"axis", "momentum", "epsilon", "center", "scale", "beta_initializer", "gamma_initializer",
                    "moving_mean_initializer", "moving_variance_initializer", "beta_regularizer",
                    "gamma_regularizer", "training", "trainable", "name", "reuse", "fused",
                    empty = true}

  -- tf.layers.batch_normalization(inputs, {axis = -1, momentum = 0.99, epsilon =
  -- 1e-3, center = true, scale = true, beta_initializer=, gamma_initializer=,
  -- moving_mean_initializer=, moving_variance_initializer=, beta_regularizer=,
  -- gamma_regularizer=, training = false, trainable=, name=, reuse=, fused=}):
  -- normalizes over every axis but `axis` with the batch's statistics in
  -- training, with moving_mean / moving_variance otherwise. In training the
  -- moving averages' updates (moving -= (moving - batch) * (1 - momentum)) go
  -- to tf.GraphKeys.UPDATE_OPS: run them, e.g. by building the training op in
  -- tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS), fn).
  -- training may be a bool tensor (tf.cond picks; the updates then move the
  -- averages only when it is true). As in TensorFlow, a 4-D input normalized
  -- over its last axis takes the fused path unless fused = false: the moving
  -- variance then follows the batch variance with Bessel's correction.
  function layers.batch_normalization(inputs, ...)
    local fname = "tf.layers.batch_normalization"
    local o = options(fname, bn_names, ...)
    local x = float_input(fname, inputs)
    local dims = dims_of(fname, x, nil, 1)
    local rank = #dims
    local axis = o.axis == nil and -1 or o.axis
    if type(axis) == "table" and getmetatable(axis) == nil and #axis == 1 then axis = axis[1] end
    if not is_integer(axis) or axis < -rank or axis >= rank then
      fail(string.format("%s: axis must be an integer in [%d, %d) for inputs of shape %s, got %s", fname,
                         -rank, rank, tostring(x:get_shape()), show(axis)))
    end
    axis = axis % rank
    local channels = dims[axis + 1]
    if channels < 0 then
      fail(string.format("%s: the dimension of axis %d must be known, got shape %s", fname, axis,
                         tostring(x:get_shape())))
    end
    local momentum = o.momentum == nil and 0.99 or o.momentum
    if type(momentum) ~= "number" or not (momentum >= 0 and momentum <= 1) then
      fail(fname .. ": momentum must be a number in [0, 1], got " .. tostring(momentum))
    end
    local epsilon = o.epsilon == nil and 1e-3 or o.epsilon
    if type(epsilon) ~= "number" or not (epsilon > 0) then
      fail(fname .. ": epsilon must be a positive number, got " .. tostring(epsilon))
    end
    local can_fuse = rank == 4 and axis == 3
    local fused = o.fused
    if fused == nil then fused = can_fuse end
    if fused and not can_fuse then
      fail(fname .. ": fused = true needs 4-D inputs normalized over their last axis, got shape " ..
           tostring(x:get_shape()) .. " and axis " .. axis)
    end
    local training = training_arg(fname, o.training)
    local reduction, bshape = {}, {}
    for i = 0, rank - 1 do
      if i ~= axis then reduction[#reduction + 1] = i end
      bshape[i + 1] = i == axis and channels or 1
    end
    return in_layer_scope("batch_normalization", o, function()
      local trainable = o.trainable ~= false
      local gamma, beta
      if o.scale ~= false then
        gamma = variable("gamma", {channels}, x.dtype, o.gamma_initializer or tf.ones_initializer(), trainable,
                         o.gamma_regularizer)
      end
      if o.center ~= false then
        beta = variable("beta", {channels}, x.dtype, o.beta_initializer or tf.zeros_initializer(), trainable,
                        o.beta_regularizer)
      end
      local moving_mean = variable("moving_mean", {channels}, x.dtype,
                                   o.moving_mean_initializer or tf.zeros_initializer(), false)
      local moving_variance = variable("moving_variance", {channels}, x.dtype,
                                       o.moving_variance_initializer or tf.ones_initializer(), false)
      -- Parameters of shape [channels] broadcast along `axis`.
      local function b(t)
        if t == nil or axis == rank - 1 then return t end
        return ops.reshape(t, bshape)
      end
      local function normalize(mean, variance)
        return tf.nn.batch_normalization(x, b(mean), b(variance), b(beta), b(gamma), epsilon)
      end
      local function train()
        if fused then
          return tf.nn.fused_batch_norm(x, gamma or ops.ones({channels}, x.dtype),
                                        beta or ops.zeros({channels}, x.dtype), {epsilon = epsilon})
        end
        local mean, variance = tf.nn.moments(x, reduction)
        return normalize(mean, variance), mean, variance
      end
      local function infer()
        if fused then
          local y = tf.nn.fused_batch_norm(x, gamma or ops.ones({channels}, x.dtype),
                                           beta or ops.zeros({channels}, x.dtype),
                                           {mean = moving_mean, variance = moving_variance, epsilon = epsilon,
                                            is_training = false})
          return y, ops.identity(moving_mean), ops.identity(moving_variance)
        end
        return normalize(moving_mean, moving_variance), ops.identity(moving_mean), ops.identity(moving_variance)
      end
      if training == false then return (infer()) end
      local y, mean, variance
      if training == true then y, mean, variance = train()
      else y, mean, variance = tf.cond(training, train, infer) end
      tf.name_scope("AssignMovingAvg", function()
        local decay = 1 - momentum
        for _, pair_ in ipairs({{moving_mean, mean}, {moving_variance, variance}}) do
          local var, value = pair_[1], pair_[2]
          local update = tf.assign_sub(var, ops.multiply(ops.subtract(var, value), decay))
          tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, update)
        end
      end)
      return y
    end)
  end
end
