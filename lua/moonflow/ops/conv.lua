-- ops/conv.lua — tf.nn activations (relu, relu6, leaky_relu, elu, selu,
-- softplus, softsign), bias_add, conv2d, conv2d_transpose, the convolution
-- backprops, max_pool and avg_pool, the depthwise and separable convolutions,
-- lrn, on the kernels of src/ops/nn.c. The NHWC layout (batch, height, width,
-- channels) everywhere; the depthwise ops take NCHW too, the C ops reject others.
--
-- Window arguments (strides, ksize, dilations) are a number s, a pair
-- {h, w}, or TensorFlow's 4-list {1, h, w, 1}; padding is "SAME" or "VALID".
local G = require("moonflow.graph")
local core = require("moonflow.core")
local args = require("moonflow.args")

local attr = G.attr

local fail, options = core.fail, args.options
local is_integer, show, name_of = args.is_integer, args.show, args.name_of

-- strides / ksize / dilations as TensorFlow's 4-list: {1, h, w, 1} (NHWC) or {1, 1, h, w} (NCHW).
local function window_list(fname, what, v, nchw)
  local list
  local function hw(h, w) return nchw and {1, 1, h, w} or {1, h, w, 1} end
  if is_integer(v) then list = hw(v, v)
  elseif type(v) == "table" and getmetatable(v) == nil then
    if #v == 1 then list = hw(v[1], v[1])
    elseif #v == 2 then list = hw(v[1], v[2])
    elseif #v == 4 then list = {v[1], v[2], v[3], v[4]} end
  end
  local ok = list ~= nil
  for i = 1, ok and 4 or 0 do ok = ok and is_integer(list[i]) end
  if not ok then
    fail(string.format("%s: %s must be an integer, a pair {height, width} or 4 integers %s, got %s",
                       fname, what, nchw and "{1, 1, height, width}" or "{1, height, width, 1}", show(v)))
  end
  return attr.ints(list)
end

local function padding_of(fname, p)
  if type(p) ~= "string" then
    fail(fname .. ': padding must be "SAME" or "VALID", got ' .. tostring(p))
  end
  return p:upper()
end

-- The attributes every window op shares.
local function window_attrs(fname, strides, padding, o)
  local data_format = o.data_format or "NHWC"
  if type(data_format) ~= "string" then
    fail(fname .. ': data_format must be a string ("NHWC"), got ' .. tostring(data_format))
  end
  local nchw = data_format == "NCHW"
  local attrs = {strides = window_list(fname, "strides", strides, nchw), padding = padding_of(fname, padding),
                 data_format = data_format}
  if o.ksize ~= nil then attrs.ksize = window_list(fname, "ksize", o.ksize, nchw) end
  if o.dilations ~= nil then attrs.dilations = window_list(fname, "dilations", o.dilations, nchw) end
  return attrs
end

-- A shape argument: a tensor, or a Lua list of dims lifted to an int32 constant.
local function shape_tensor(shape, graph)
  return G.is_tensor(shape) and shape or G.convert(shape, core.dtypes.int32, graph)
end

-- Two operands as tensors: a Lua value takes the other one's dtype and graph.
local function operands(a, b)
  if not G.is_tensor(a) and G.is_tensor(b) then return G.convert(a, b.dtype, b.graph), b end
  a = G.convert(a)
  return a, G.convert(b, a.dtype, a.graph)
end

-- Lua name -> op type; each is f(features, name).
local activations = {relu = "Relu", relu6 = "Relu6", elu = "Elu", selu = "Selu", softplus = "Softplus",
                     softsign = "Softsign"}

local conv_options = {"use_cudnn_on_gpu", "data_format", "dilations", "name"}

return function(tf, ops)
  tf.nn = tf.nn or {}
  tf.math = tf.math or {}

  for fname, op_type in pairs(activations) do
    tf.nn[fname] = function(features, name)
      return G.op{op_type, inputs = {G.convert(features)}, name = name_of(name, "tf.nn." .. fname)}
    end
  end
  tf.math.softplus, tf.math.softsign = tf.nn.softplus, tf.nn.softsign

  -- tf.nn.leaky_relu(features, alpha = 0.2, name): x where x > 0, alpha * x elsewhere.
  function tf.nn.leaky_relu(features, ...)
    local o = options("tf.nn.leaky_relu", {"alpha", "name"}, ...)
    local alpha = o.alpha == nil and 0.2 or o.alpha
    if type(alpha) ~= "number" then fail("tf.nn.leaky_relu: alpha must be a number, got " .. tostring(alpha)) end
    return G.op{"LeakyRelu", inputs = {G.convert(features)}, attrs = {alpha = attr.float(alpha)}, name = o.name}
  end

  -- tf.nn.bias_add(value, bias, data_format, name): bias [c] added along value's last axis.
  function tf.nn.bias_add(value, bias, ...)
    local o = options("tf.nn.bias_add", {"data_format", "name"}, ...)
    value, bias = operands(value, bias)
    return G.op{"BiasAdd", inputs = {value, bias}, attrs = {data_format = o.data_format or "NHWC"}, name = o.name}
  end

  -- tf.nn.conv2d(input, filter, strides, padding, {use_cudnn_on_gpu=, data_format=, dilations=, name=}):
  -- input [batch, height, width, in_channels], filter [h, w, in_channels, out_channels].
  function tf.nn.conv2d(input, filter, strides, padding, ...)
    local o = options("tf.nn.conv2d", conv_options, ...)
    input, filter = operands(input, filter)
    return G.op{"Conv2D", inputs = {input, filter},
                attrs = window_attrs("tf.nn.conv2d", strides, padding, o), name = o.name}
  end

  -- tf.nn.conv2d_backprop_input(input_sizes, filter, out_backprop, strides, padding, ...):
  -- the gradient of conv2d with respect to an input of shape input_sizes.
  function tf.nn.conv2d_backprop_input(input_sizes, filter, out_backprop, strides, padding, ...)
    local o = options("tf.nn.conv2d_backprop_input", conv_options, ...)
    filter, out_backprop = operands(filter, out_backprop)
    local inputs = {shape_tensor(input_sizes, filter.graph), filter, out_backprop}
    return G.op{"Conv2DBackpropInput", inputs = inputs,
                attrs = window_attrs("tf.nn.conv2d_backprop_input", strides, padding, o), name = o.name}
  end

  -- tf.nn.conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding, ...):
  -- the gradient of conv2d with respect to a filter of shape filter_sizes.
  function tf.nn.conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding, ...)
    local o = options("tf.nn.conv2d_backprop_filter", conv_options, ...)
    input, out_backprop = operands(input, out_backprop)
    local inputs = {input, shape_tensor(filter_sizes, input.graph), out_backprop}
    return G.op{"Conv2DBackpropFilter", inputs = inputs,
                attrs = window_attrs("tf.nn.conv2d_backprop_filter", strides, padding, o), name = o.name}
  end

  -- tf.nn.conv2d_transpose(value, filter, output_shape, strides, padding = "SAME",
  -- data_format, name, dilations): the transpose (gradient) of conv2d, with
  -- filter [h, w, output_channels, in_channels] and an output of output_shape.
  function tf.nn.conv2d_transpose(value, filter, output_shape, strides, ...)
    local o = options("tf.nn.conv2d_transpose", {"padding", "data_format", "name", "dilations"}, ...)
    value, filter = operands(value, filter)
    local inputs = {shape_tensor(output_shape, value.graph), filter, value}
    return G.op{"Conv2DBackpropInput", inputs = inputs,
                attrs = window_attrs("tf.nn.conv2d_transpose", strides, o.padding or "SAME", o), name = o.name}
  end

  -- tf.nn.max_pool / avg_pool(value, ksize, strides, padding, data_format, name).
  -- avg_pool divides by the number of input values in each window (padding not counted).
  for fname, op_type in pairs({max_pool = "MaxPool", avg_pool = "AvgPool"}) do
    local full = "tf.nn." .. fname
    local function pool(value, ksize, strides, padding, ...)
      local o = options(full, {"data_format", "name"}, ...)
      o.ksize = ksize
      if ksize == nil then fail(full .. ": ksize is required") end
      return G.op{op_type, inputs = {G.convert(value)}, attrs = window_attrs(full, strides, padding, o), name = o.name}
    end
    tf.nn[fname], tf.nn[fname .. "2d"] = pool, pool
  end

  -- tf.nn.depthwise_conv2d_native(input, filter, strides, padding, {data_format=, dilations=, name=}):
  -- input [batch, height, width, in_channels] (or NCHW), filter [h, w, in_channels, channel_multiplier];
  -- output channel i * channel_multiplier + q is input channel i convolved with filter[:, :, i, q].
  local depthwise_options = {"data_format", "dilations", "name"}
  function tf.nn.depthwise_conv2d_native(input, filter, strides, padding, ...)
    local fname = "tf.nn.depthwise_conv2d_native"
    local o = options(fname, depthwise_options, ...)
    input, filter = operands(input, filter)
    return G.op{"DepthwiseConv2dNative", inputs = {input, filter},
                attrs = window_attrs(fname, strides, padding, o), name = o.name}
  end

  -- tf.nn.depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop, strides, padding, ...)
  -- and _backprop_filter(input, filter_sizes, out_backprop, strides, padding, ...): its gradients (also
  -- named tf.nn.depthwise_conv2d_backprop_input / _filter); sizes are a tensor or a Lua list.
  for part, op_type in pairs({input = "DepthwiseConv2dNativeBackpropInput",
                              filter = "DepthwiseConv2dNativeBackpropFilter"}) do
    local fname = "tf.nn.depthwise_conv2d_native_backprop_" .. part
    local function backprop(a, b, out_backprop, strides, padding, ...)
      local o = options(fname, depthwise_options, ...)
      local inputs
      if part == "input" then
        local filter, dy = operands(b, out_backprop)
        inputs = {shape_tensor(a, filter.graph), filter, dy}
      else
        local input, dy = operands(a, out_backprop)
        inputs = {input, shape_tensor(b, input.graph), dy}
      end
      return G.op{op_type, inputs = inputs, attrs = window_attrs(fname, strides, padding, o), name = o.name}
    end
    tf.nn["depthwise_conv2d_native_backprop_" .. part], tf.nn["depthwise_conv2d_backprop_" .. part] = backprop, backprop
  end

  -- tf.nn.depthwise_conv2d's rate (TensorFlow's dilation_rate): dilations, which TensorFlow
  -- refuses with strides above 1.
  local function rate_dilations(fname, strides, o)
    local rate = o.rate or o.dilations
    if rate == nil then return nil end
    local nchw = o.data_format == "NCHW"
    local r, s = window_list(fname, "rate", rate, nchw).v, window_list(fname, "strides", strides, nchw).v
    local h, w = nchw and 3 or 2, nchw and 4 or 3
    if (r[h] > 1 or r[w] > 1) and (s[h] > 1 or s[w] > 1) then
      fail(string.format("%s: strides > 1 not supported in conjunction with rate > 1 (strides %s, rate %s)",
                         fname, show(strides), show(rate)))
    end
    return {r[h], r[w]}
  end

  -- tf.nn.depthwise_conv2d(input, filter, strides, padding, rate, name, data_format, dilations).
  function tf.nn.depthwise_conv2d(input, filter, strides, padding, ...)
    local fname = "tf.nn.depthwise_conv2d"
    local o = options(fname, {"rate", "name", "data_format", "dilations"}, ...)
    return tf.nn.depthwise_conv2d_native(input, filter, strides, padding, o.data_format,
                                         rate_dilations(fname, strides, o), o.name)
  end

  -- tf.nn.separable_conv2d(input, depthwise_filter [h, w, in, m], pointwise_filter [1, 1, in * m, out],
  -- strides, padding, rate, name, data_format, dilations): the depthwise convolution, then a 1x1 one.
  function tf.nn.separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding, ...)
    local fname = "tf.nn.separable_conv2d"
    local o = options(fname, {"rate", "name", "data_format", "dilations"}, ...)
    local x, dw = operands(input, depthwise_filter)
    local pw = G.convert(pointwise_filter, x.dtype, x.graph)
    local pd = pw:get_shape().dims
    if pd and (#pd ~= 4 or pd[1] > 1 or pd[2] > 1) then
      fail(string.format("%s: pointwise_filter must be [1, 1, in_channels * channel_multiplier, out_channels], " ..
                         "got shape %s", fname, tostring(pw:get_shape())))
    end
    local nchw = o.data_format == "NCHW"
    local depthwise = tf.nn.depthwise_conv2d_native(x, dw, strides, padding, o.data_format,
                                                    rate_dilations(fname, strides, o))
    -- Conv2D is NHWC only: an NCHW result is transposed around the 1x1 convolution.
    if nchw then depthwise = ops.transpose(depthwise, {0, 2, 3, 1}) end
    local y = tf.nn.conv2d(depthwise, pw, 1, "VALID", nil, nil, nil, not nchw and o.name or nil)
    if nchw then y = ops.transpose(y, {0, 3, 1, 2}, o.name) end
    return y
  end

  -- tf.nn.lrn(input, depth_radius = 5, bias = 1, alpha = 1, beta = 0.5, name): local response
  -- normalization over the channels of an NHWC input; also tf.nn.local_response_normalization.
  function tf.nn.lrn(input, ...)
    local fname = "tf.nn.lrn"
    local o = options(fname, {"depth_radius", "bias", "alpha", "beta", "name"}, ...)
    local attrs = {}
    if o.depth_radius ~= nil then
      if not is_integer(o.depth_radius) then
        fail(string.format("%s: depth_radius must be an integer, got %s", fname, show(o.depth_radius)))
      end
      attrs.depth_radius = attr.int(o.depth_radius)
    end
    for _, k in ipairs({"bias", "alpha", "beta"}) do
      if o[k] ~= nil then
        if type(o[k]) ~= "number" then fail(string.format("%s: %s must be a number, got %s", fname, k, show(o[k]))) end
        attrs[k] = attr.float(o[k])
      end
    end
    return G.op{"LRN", inputs = {G.convert(input)}, attrs = attrs, name = o.name}
  end
  tf.nn.local_response_normalization = tf.nn.lrn

  -- tf.nn.conv1d(value, filters, stride, padding, {data_format=, dilations=,
  -- name=}): value [batch, width, in_channels], filters [w, in_channels,
  -- out_channels]; a conv2d over a height of 1, as TensorFlow computes it.
  function tf.nn.conv1d(value, filters, stride, padding, ...)
    local fname = "tf.nn.conv1d"
    local o = options(fname, {"use_cudnn_on_gpu", "data_format", "name", "dilations"}, ...)
    if o.data_format ~= nil and o.data_format ~= "NWC" then
      fail(string.format('%s: data_format %s is not supported: moonflow implements only "NWC" (batch, width, ' ..
                         'channels)', fname, show(o.data_format)))
    end
    local function one(v, what)
      if type(v) == "table" and getmetatable(v) == nil and #v == 1 then v = v[1] end
      if type(v) == "table" and getmetatable(v) == nil and #v == 3 then v = v[2] end
      if not is_integer(v) then fail(string.format("%s: %s must be an integer, got %s", fname, what, show(v))) end
      return v
    end
    local x, w = operands(value, filters)
    local conv = tf.nn.conv2d(ops.expand_dims(x, 1), ops.expand_dims(w, 0), {1, one(stride, "stride")}, padding,
                              {dilations = {1, one(o.dilations or 1, "dilations")}})
    return ops.squeeze(conv, 1, o.name)
  end

  -- tf.nn.space_to_depth(input, block_size, data_format, name): each
  -- block_size x block_size block of pixels becomes one pixel with its
  -- values in the channels (row by row, then the input channels);
  -- tf.nn.depth_to_space the inverse. NHWC, height, width and channels known.
  local function block_shapes(fname, input, block_size, data_format)
    local x = G.convert(input)
    if data_format ~= nil and data_format ~= "NHWC" then
      fail(string.format('%s: data_format %s is not supported: moonflow implements only "NHWC"', fname,
                         show(data_format)))
    end
    if not is_integer(block_size) or block_size < 2 then
      fail(string.format("%s: block_size should be > 1, got %s", fname, show(block_size)))
    end
    local dims = x:get_shape().dims
    if not dims or #dims ~= 4 or dims[2] < 0 or dims[3] < 0 or dims[4] < 0 then
      fail(string.format("%s: input must be 4-dimensional [batch, height, width, depth] with height, width and " ..
                         "depth known, got shape %s", fname, tostring(x:get_shape())))
    end
    return x, dims[2], dims[3], dims[4]
  end
  function tf.nn.space_to_depth(input, block_size, data_format, name)
    local fname = "tf.nn.space_to_depth"
    local x, h, w, c = block_shapes(fname, input, block_size, data_format)
    local b = block_size
    if h % b ~= 0 or w % b ~= 0 then
      fail(string.format("%s: Image height %d and width %d should be divisible by block_size: %d", fname, h, w, b))
    end
    local blocks = ops.reshape(x, {-1, h / b, b, w / b, b, c})
    return ops.reshape(ops.transpose(blocks, {0, 1, 3, 2, 4, 5}), {-1, h / b, w / b, b * b * c},
                       name_of(name, fname))
  end
  function tf.nn.depth_to_space(input, block_size, data_format, name)
    local fname = "tf.nn.depth_to_space"
    local x, h, w, c = block_shapes(fname, input, block_size, data_format)
    local b = block_size
    if c % (b * b) ~= 0 then
      fail(string.format("%s: Input depth dimension %d should be divisible by: %d", fname, c, b * b))
    end
    local blocks = ops.reshape(x, {-1, h, w, b, b, c / (b * b)})
    return ops.reshape(ops.transpose(blocks, {0, 1, 3, 2, 4, 5}), {-1, h * b, w * b, c / (b * b)},
                       name_of(name, fname))
  end
end
