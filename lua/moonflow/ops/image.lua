-- ops/image.lua — tf.image: resizing (the ResizeBilinear and
-- ResizeNearestNeighbor ops of src/ops/image.c, TensorFlow 1.x's
-- resize_images around them) and the composites TensorFlow writes in Python:
-- flips, crops, pads, per_image_standardization, central_crop,
-- convert_image_dtype, rgb_to_grayscale, grayscale_to_rgb, adjust_brightness,
-- adjust_contrast; tf.saturate_cast. Images are [height, width, channels] or
-- batches [batch, height, width, channels]; the composites differentiate
-- through the ops they are made of.
--
-- Crop and pad bounds are Lua integers: moonflow's Slice and Pad take static
-- bounds, so a bound that is a tensor is refused with an error saying so.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local fail, options, check_bool, name_of = core.fail, args.options, args.check_bool, args.name_of
local is_tensor, dtypes = G.is_tensor, core.dtypes

-- The integer dtypes' max + 1 (a power of two, exact as a Lua number) and min.
local INT_RANGE = {uint8 = {256, 0}, int32 = {2 ^ 31, -2 ^ 31}, int64 = {2 ^ 63, -2 ^ 63}}

-- TensorFlow 1.x's tf.image.ResizeMethod (ResizeMethodV1).
local METHODS = {BILINEAR = 0, NEAREST_NEIGHBOR = 1, BICUBIC = 2, AREA = 3}

-- The static dims of an image or batch of them (rank 3 or 4), or a failure
-- naming fname; with `any_rank` a rank of at least 3 will do.
local function image_dims(fname, image, any_rank)
  local dims = image:get_shape().dims
  if not dims then
    fail(string.format("%s: 'image' needs a known rank (3 or 4), got a tensor of unknown shape; set_shape it",
                       fname))
  end
  if #dims < 3 or (#dims > 4 and not any_rank) then
    fail(string.format("%s: 'image' (shape %s) must have %s dimensions.", fname, tostring(image:get_shape()),
                       any_rank and "at least 3" or "either 3 or 4"))
  end
  return dims
end

-- A crop or pad bound: a Lua integer (see the file's comment).
local function bound(fname, what, v)
  if is_tensor(v) then
    fail(string.format("%s: %s must be a Lua integer; moonflow's crops and pads take bounds known when the graph " ..
                       "is built, got tensor %s", fname, what, v.name))
  end
  return args.int_arg(v, fname, what)
end

return function(tf, ops)
  tf.image = tf.image or {}
  local image_ns = tf.image
  image_ns.ResizeMethod = METHODS

  -- f(batch) on a batch of images; a single image is made a batch of one and back.
  local function batched(image, f)
    if #image:get_shape().dims == 4 then return f(image) end
    return ops.squeeze(f(ops.expand_dims(image, 0)), 0)
  end

  -- tf.saturate_cast(value, dtype, name): value clamped to dtype's range, then cast.
  function ops.saturate_cast(value, dtype, name)
    local fname = "tf.saturate_cast"
    name = name_of(name, fname)
    dtype = core.as_dtype(dtype, fname)
    local x = G.convert(value)
    local from, to = INT_RANGE[x.dtype.name], INT_RANGE[dtype.name]
    if to and (not from or from[2] < to[2]) then x = ops.maximum(x, to[2]) end
    if to and (not from or from[1] > to[1]) then x = ops.minimum(x, to[1] - 1) end
    return ops.cast(x, dtype, name)
  end

  -- tf.image.convert_image_dtype(image, dtype, saturate, name): integers span
  -- [0, max] of their dtype and floats [0, 1); a conversion rescales, as
  -- TensorFlow's (float to integer multiplies by max + 0.5 and truncates).
  function image_ns.convert_image_dtype(image, dtype, ...)
    local fname = "tf.image.convert_image_dtype"
    local o = options(fname, {"saturate", "name", empty = true}, ...)
    local saturate = check_bool(o.saturate, fname, "saturate")
    dtype = core.as_dtype(dtype, fname)
    local x = G.convert(image)
    for _, t in ipairs({x.dtype, dtype}) do
      if not t.is_floating and not t.is_integer then
        fail(string.format("%s: dtypes must be floating point or integer, got %s", fname, t.name))
      end
    end
    if x.dtype == dtype then return ops.identity(x, o.name) end
    local cast = saturate and ops.saturate_cast or ops.cast
    local from, to = INT_RANGE[x.dtype.name], INT_RANGE[dtype.name]
    if from and to then
      if from[1] > to[1] then return cast(ops.floordiv(x, from[1] / to[1]), dtype, o.name) end
      return ops.multiply(cast(x, dtype), to[1] / from[1], o.name)
    elseif not from and not to then
      return ops.cast(x, dtype, o.name)
    elseif from then
      return ops.multiply(ops.cast(x, dtype), 1 / (from[1] - 1), o.name)
    end
    return cast(ops.multiply(x, to[1] - 1 + 0.5), dtype, o.name)
  end

  -- As TensorFlow's brightness and contrast adjustments: float32 images are
  -- adjusted as they are, others converted to float32 and back, saturating.
  local function adjusted(image, f)
    local x = G.convert(image)
    if x.dtype == dtypes.float32 then return f(x) end
    local flt = image_ns.convert_image_dtype(x, dtypes.float32)
    return image_ns.convert_image_dtype(f(flt), x.dtype, {saturate = true})
  end

  -- tf.image.adjust_brightness(image, delta): delta added to every element
  -- (of the image as float32 in [0, 1) when it is an integer image).
  function image_ns.adjust_brightness(image, delta)
    return adjusted(image, function(x) return ops.add(x, ops.cast(delta, x.dtype)) end)
  end

  -- tf.image.adjust_contrast(images, contrast_factor): each channel of each
  -- image moved away from its mean over the pixels by contrast_factor,
  -- (x - mean) * contrast_factor + mean (TensorFlow's AdjustContrastv2).
  function image_ns.adjust_contrast(images, contrast_factor)
    local fname = "tf.image.adjust_contrast"
    return adjusted(images, function(x)
      image_dims(fname, x, true)
      local mean = ops.reduce_mean(x, {axis = {-3, -2}, keepdims = true})
      local factor = ops.cast(contrast_factor, x.dtype)
      if factor:get_shape().ndims ~= 0 then
        fail(string.format("%s: contrast_factor must be a scalar, got shape %s", fname,
                           tostring(factor:get_shape())))
      end
      return ops.add(ops.multiply(ops.subtract(x, mean), factor), mean)
    end)
  end

  -- tf.image.per_image_standardization(image): each image (the last three
  -- dims) less its mean, divided by max(stddev, 1 / sqrt(its element count));
  -- float32 whatever the input (TensorFlow 2's rule, which TF1 code feeding
  -- float32 images sees too).
  function image_ns.per_image_standardization(image)
    local fname = "tf.image.per_image_standardization"
    local x = ops.cast(G.convert(image), dtypes.float32)
    image_dims(fname, x, true)
    local axes = {-1, -2, -3}
    local mean = ops.reduce_mean(x, {axis = axes, keepdims = true})
    local std = ops.sqrt(ops.reduce_mean(ops.square(ops.subtract(x, mean)), {axis = axes, keepdims = true}))
    local count = ops.reduce_prod(ops.strided_slice(ops.shape(x), {-3}, {0}, {end_mask = 1}))
    local adjusted_std = ops.maximum(std, ops.rsqrt(ops.cast(count, dtypes.float32)))
    return ops.divide(ops.subtract(x, mean), adjusted_std, "per_image_standardization")
  end

  -- tf.image.flip_left_right(image) / flip_up_down(image): the width / height
  -- reversed, of an image or a batch.
  local function flip(fname, axis)
    return function(image)
      local x = G.convert(image)
      local dims = image_dims(fname, x)
      return ops.reverse(x, {#dims - 4 + axis})
    end
  end
  image_ns.flip_left_right = flip("tf.image.flip_left_right", 2)
  image_ns.flip_up_down = flip("tf.image.flip_up_down", 1)

  -- The arguments of crop_to_bounding_box and pad_to_bounding_box: the image
  -- (rank 3 or 4) and a box {oh =, ow =, th =, tw =} of its bounds with the
  -- image's static height and width (h, w; -1 unknown); and a check that
  -- fails naming fname.
  local function bounding_box(fname, image, offset_height, offset_width, target_height, target_width)
    local x = G.convert(image)
    local dims = image_dims(fname, x)
    local box = {oh = bound(fname, "offset_height", offset_height), ow = bound(fname, "offset_width", offset_width),
                 th = bound(fname, "target_height", target_height), tw = bound(fname, "target_width", target_width),
                 h = dims[#dims - 2], w = dims[#dims - 1]}
    return x, box, function(ok, msg) if not ok then fail(fname .. ": " .. msg) end end
  end

  -- tf.image.crop_to_bounding_box(image, offset_height, offset_width,
  -- target_height, target_width): the target_height x target_width window
  -- whose top-left corner is at the offsets.
  function image_ns.crop_to_bounding_box(...)
    local x, b, check = bounding_box("tf.image.crop_to_bounding_box", ...)
    check(b.ow >= 0, "offset_width must be >= 0.")
    check(b.oh >= 0, "offset_height must be >= 0.")
    check(b.tw > 0, "target_width must be > 0.")
    check(b.th > 0, "target_height must be > 0.")
    check(b.w < 0 or b.w >= b.tw + b.ow, string.format("width must be >= target + offset (width %d, target %d, " ..
                                                       "offset %d).", b.w, b.tw, b.ow))
    check(b.h < 0 or b.h >= b.th + b.oh, string.format("height must be >= target + offset (height %d, target %d, " ..
                                                       "offset %d).", b.h, b.th, b.oh))
    return batched(x, function(t) return ops.slice(t, {0, b.oh, b.ow, 0}, {-1, b.th, b.tw, -1}) end)
  end

  -- tf.image.pad_to_bounding_box(image, offset_height, offset_width,
  -- target_height, target_width): zeros around the image, offset_height
  -- rows above and offset_width columns left of it, to the target size.
  function image_ns.pad_to_bounding_box(...)
    local x, b, check = bounding_box("tf.image.pad_to_bounding_box", ...)
    check(b.h >= 0 and b.w >= 0, "the image's height and width must be known when the graph is built, got shape " ..
                                 tostring(x:get_shape()))
    check(b.oh >= 0, "offset_height must be >= 0")
    check(b.ow >= 0, "offset_width must be >= 0")
    local right, below = b.tw - b.ow - b.w, b.th - b.oh - b.h
    check(right >= 0, string.format("width must be <= target - offset (width %d, target %d, offset %d)", b.w, b.tw,
                                    b.ow))
    check(below >= 0, string.format("height must be <= target - offset (height %d, target %d, offset %d)", b.h,
                                    b.th, b.oh))
    return batched(x, function(t) return ops.pad(t, {{0, 0}, {b.oh, below}, {b.ow, right}, {0, 0}}) end)
  end

  -- tf.image.central_crop(image, central_fraction): the central part,
  -- central_fraction (in (0, 1]) of the height and of the width, rounded as
  -- TensorFlow does: int((h - h * fraction) / 2) rows off each side.
  function image_ns.central_crop(image, central_fraction)
    local fname = "tf.image.central_crop"
    local x = G.convert(image)
    if type(central_fraction) ~= "number" then
      fail(string.format("%s: central_fraction must be a Lua number, got %s", fname, args.describe(central_fraction)))
    end
    if central_fraction <= 0 or central_fraction > 1 then
      fail(fname .. ": central_fraction must be within (0, 1]")
    end
    local dims = image_dims(fname, x)
    if central_fraction == 1 then return x end
    local h, w = dims[#dims - 2], dims[#dims - 1]
    if h < 0 or w < 0 then
      fail(string.format("%s: the image's height and width must be known when the graph is built, got shape %s",
                         fname, tostring(x:get_shape())))
    end
    local top = math.floor((h - h * central_fraction) / 2)
    local left = math.floor((w - w * central_fraction) / 2)
    return image_ns.crop_to_bounding_box(x, top, left, h - 2 * top, w - 2 * left)
  end

  -- images as a tensor with `channels` in its last dimension (when known),
  -- and its static dims.
  local function channel_images(fname, images, channels)
    local x = G.convert(images)
    local dims = x:get_shape().dims
    if dims and (#dims < 2 or (dims[#dims] >= 0 and dims[#dims] ~= channels)) then
      fail(string.format("%s: images must have rank >= 2 and a last dimension of %d, got shape %s", fname, channels,
                         tostring(x:get_shape())))
    end
    return x, dims
  end

  -- tf.image.rgb_to_grayscale(images, name): the weighted sum 0.2989 R +
  -- 0.5870 G + 0.1140 B as one channel, in the images' dtype.
  function image_ns.rgb_to_grayscale(images, name)
    local fname = "tf.image.rgb_to_grayscale"
    name = name_of(name, fname)
    local x = channel_images(fname, images, 3)
    local flt = image_ns.convert_image_dtype(x, dtypes.float32)
    local weights = G.convert({0.2989, 0.5870, 0.1140}, dtypes.float32, x.graph)
    local gray = ops.reduce_sum(ops.multiply(flt, weights), {axis = -1, keepdims = true})
    return image_ns.convert_image_dtype(gray, x.dtype, {name = name})
  end

  -- tf.image.grayscale_to_rgb(images, name): the one channel repeated three times.
  function image_ns.grayscale_to_rgb(images, name)
    local fname = "tf.image.grayscale_to_rgb"
    name = name_of(name, fname)
    local x, dims = channel_images(fname, images, 1)
    if not dims then fail(fname .. ": images need a known rank; set_shape them") end
    local multiples = {}
    for i = 1, #dims do multiples[i] = 1 end
    multiples[#dims] = 3
    return ops.tile(x, multiples, name)
  end

  -- x[first:last] along axis (last nil: to the end), any other axis whole.
  local function along(x, axis, first, last)
    local rank = #x:get_shape().dims
    local begin, finish, strides, begin_mask, end_mask = {}, {}, {}, 0, 0
    for d = 0, rank - 1 do
      begin[d + 1], finish[d + 1], strides[d + 1] = d == axis and first or 0, d == axis and last or 0, 1
      if d ~= axis then begin_mask = begin_mask + 2 ^ d end
      if d ~= axis or not last then end_mask = end_mask + 2 ^ d end
    end
    return ops.strided_slice(x, begin, finish, {strides = strides, begin_mask = begin_mask, end_mask = end_mask})
  end

  -- The differences of neighbouring pixels down (along height) and across
  -- (along width): x[1:] - x[:-1] on each axis.
  local function pixel_differences(x, height_axis)
    local down = ops.subtract(along(x, height_axis, 1), along(x, height_axis, 0, -1))
    local across = ops.subtract(along(x, height_axis + 1, 1), along(x, height_axis + 1, 0, -1))
    return down, across
  end

  -- tf.image.total_variation(images, name): the sum of the absolute
  -- differences of neighbouring pixels, per image of a batch.
  function image_ns.total_variation(images, name)
    local fname = "tf.image.total_variation"
    name = name_of(name, fname)
    local x = G.convert(images)
    local dims = image_dims(fname, x)
    local down, across = pixel_differences(x, #dims - 3)
    local axes = #dims == 4 and {1, 2, 3} or nil
    return ops.add(ops.reduce_sum(ops.abs(down), axes), ops.reduce_sum(ops.abs(across), axes), name)
  end

  -- tf.image.image_gradients(image): dy and dx, the differences to the next
  -- pixel down and across, of a batch; 0 in the last row (column).
  function image_ns.image_gradients(image)
    local fname = "tf.image.image_gradients"
    local x = G.convert(image)
    local dims = x:get_shape().dims
    if not dims or #dims ~= 4 then
      fail(string.format("%s: image_gradients expects a 4D tensor [batch_size, h, w, d], not %s", fname,
                         tostring(x:get_shape())))
    end
    local down, across = pixel_differences(x, 1)
    return ops.pad(down, {{0, 0}, {0, 1}, {0, 0}, {0, 0}}), ops.pad(across, {{0, 0}, {0, 0}, {0, 1}, {0, 0}})
  end

  -- tf.image.psnr(a, b, max_val, name): the peak signal-to-noise ratio per
  -- image, 20 log10(max_val) - 10 log10(mean squared error), in float32 (an
  -- integer image and max_val are rescaled to [0, 1] first, as TensorFlow's).
  function image_ns.psnr(a, b, max_val, name)
    local fname = "tf.image.psnr"
    name = name_of(name, fname)
    local x = G.convert(a)
    local y = G.convert(b, x.dtype, x.graph)
    image_dims(fname, x, true)
    local top = image_ns.convert_image_dtype(ops.cast(max_val, x.dtype), dtypes.float32)
    x, y = image_ns.convert_image_dtype(x, dtypes.float32), image_ns.convert_image_dtype(y, dtypes.float32)
    local mse = ops.reduce_mean(ops.squared_difference(x, y), {-3, -2, -1})
    return ops.subtract(ops.multiply(ops.log(top), 20 / math.log(10)), ops.multiply(ops.log(mse), 10 / math.log(10)),
                        name)
  end

  -- tf.image.adjust_gamma(image, gamma, gain): gain * image ^ gamma (of the
  -- image as float32 in [0, 1) when it is an integer image; gamma >= 0).
  function image_ns.adjust_gamma(image, gamma, gain)
    gamma, gain = gamma or 1, gain or 1
    if type(gamma) == "number" and gamma < 0 then
      fail("tf.image.adjust_gamma: Gamma should be a non-negative real number.")
    end
    return adjusted(image, function(x)
      return ops.multiply(ops.cast(gain, x.dtype), ops.pow(x, ops.cast(gamma, x.dtype)))
    end)
  end

  -- tf.image.transpose_image(image) (also tf.image.transpose): height and width swapped.
  function image_ns.transpose_image(image)
    local x = G.convert(image)
    local dims = image_dims("tf.image.transpose_image", x)
    return ops.transpose(x, #dims == 3 and {1, 0, 2} or {0, 2, 1, 3})
  end
  image_ns.transpose = image_ns.transpose_image

  -- tf.image.rot90(image, k, name): rotated by k quarter turns counterclockwise.
  function image_ns.rot90(image, k, name)
    local fname = "tf.image.rot90"
    name = name_of(name, fname)
    local x = G.convert(image)
    local dims = image_dims(fname, x)
    k = args.int_arg(k or 1, fname, "k") % 4
    local h = #dims - 3  -- the height axis
    local perm = #dims == 3 and {1, 0, 2} or {0, 2, 1, 3}
    if k == 1 then return ops.transpose(ops.reverse(x, {h + 1}), perm, name) end
    if k == 2 then return ops.reverse(x, {h, h + 1}, name) end
    if k == 3 then return ops.reverse(ops.transpose(x, perm), {h + 1}, name) end
    return ops.identity(x, name)
  end

  -- tf.image.resize_image_with_crop_or_pad(image, target_height,
  -- target_width) (also resize_with_crop_or_pad): centrally cropped or
  -- padded with zeros to the target size, as TensorFlow's.
  function image_ns.resize_image_with_crop_or_pad(image, target_height, target_width)
    local fname = "tf.image.resize_image_with_crop_or_pad"
    local x = G.convert(image)
    local dims = image_dims(fname, x)
    local th, tw = bound(fname, "target_height", target_height), bound(fname, "target_width", target_width)
    local h, w = dims[#dims - 2], dims[#dims - 1]
    if h < 0 or w < 0 then
      fail(string.format("%s: the image's height and width must be known when the graph is built, got shape %s",
                         fname, tostring(x:get_shape())))
    end
    if th <= 0 or tw <= 0 then fail(fname .. ": target_height and target_width must be > 0") end
    local dh, dw = th - h, tw - w
    local cropped = image_ns.crop_to_bounding_box(x, math.max(math.floor(-dh / 2), 0), math.max(math.floor(-dw / 2), 0),
                                                  math.min(th, h), math.min(tw, w))
    return image_ns.pad_to_bounding_box(cropped, math.max(math.floor(dh / 2), 0), math.max(math.floor(dw / 2), 0), th,
                                        tw)
  end
  image_ns.resize_with_crop_or_pad = image_ns.resize_image_with_crop_or_pad

  -- Random augmentations; seed as tf.random_uniform's (with the graph seed).
  -- tf.image.random_flip_left_right(image, seed) / random_flip_up_down:
  -- flipped with probability 1/2, each image of a batch on its own draw.
  local function random_flip(fname, axis)
    return function(image, seed)
      local x = G.convert(image)
      local dims = image_dims(fname, x)
      local flipped = ops.reverse(x, {#dims - 4 + axis})
      if #dims == 3 then
        local flip = ops.less(ops.random_uniform({}, 0, 1, {seed = seed}), 0.5)
        return tf.where_v2(flip, flipped, x)
      end
      local flips = ops.round(ops.reshape(ops.random_uniform(ops.shape(x)[0]:reshape{1}, 0, 1, {seed = seed}),
                                          {-1, 1, 1, 1}))
      flips = ops.cast(flips, x.dtype)
      return ops.add(ops.multiply(flips, flipped), ops.multiply(ops.subtract(1, flips), x))
    end
  end
  image_ns.random_flip_left_right = random_flip("tf.image.random_flip_left_right", 2)
  image_ns.random_flip_up_down = random_flip("tf.image.random_flip_up_down", 1)

  -- tf.image.random_crop(value, size, seed, name) (also tf.random_crop): a
  -- slice of shape size (a Lua list, one entry per dimension of value) at an
  -- offset drawn uniformly, TensorFlow's way: int32 draws from [0, 2^31 - 1)
  -- taken modulo shape - size + 1. The slice is a gather along each
  -- dimension (its bounds are tensors), so gradients reach the window.
  local INT32_MAX = 2 ^ 31 - 1
  function image_ns.random_crop(value, size, ...)
    local fname = "tf.image.random_crop"
    local o = options(fname, {"seed", "name"}, ...)
    local x = G.convert(value)
    if not args.is_plain(size) or #size == 0 then
      fail(fname .. ": size must be a non-empty list of integers, got " .. args.describe(size))
    end
    for i, n in ipairs(size) do
      if args.int_arg(n, fname, "size[" .. i .. "]") < 0 then
        fail(string.format("%s: size[%d] must be non-negative, got %d", fname, i, n))
      end
    end
    local dims = x:get_shape().dims
    local function show(list) return "[" .. table.concat(list, ", ") .. "]" end
    if dims and #dims ~= #size then
      fail(string.format("%s: size %s has %d entries but value (shape %s) has %d dimensions", fname, show(size),
                         #size, tostring(x:get_shape()), #dims))
    end
    for i = 1, dims and #dims or 0 do
      if dims[i] >= 0 and dims[i] < size[i] then
        fail(string.format("%s: Need value.shape >= size, got %s %s", fname, tostring(x:get_shape()), show(size)))
      end
    end
    return tf.name_scope(o.name or "random_crop", function()
      local want = G.convert(size, dtypes.int32)
      local shape = ops.shape(x)
      local check = tf.debugging.assert_greater_equal(shape, want, {
        data = {fname .. ": Need value.shape >= size, got", shape, want}, name = "size_check"})
      local limit = tf.control_dependencies({check}, function() return ops.add(ops.subtract(shape, want), 1) end)
      local draws = ops.random_uniform({#size}, {maxval = INT32_MAX, dtype = dtypes.int32, seed = o.seed})
      local offset = ops.mod(draws, limit)
      local crop = x
      for i, n in ipairs(size) do
        crop = ops.gather(crop, ops.add(ops.range(n), offset[i - 1]), {axis = i - 1})
      end
      return crop
    end)
  end
  tf.random_crop = image_ns.random_crop

  -- tf.image.random_brightness(image, max_delta, seed): adjust_brightness by
  -- a delta drawn from [-max_delta, max_delta).
  function image_ns.random_brightness(image, max_delta, seed)
    local fname = "tf.image.random_brightness"
    if type(max_delta) ~= "number" or max_delta < 0 then fail(fname .. ": max_delta must be non-negative.") end
    return image_ns.adjust_brightness(image, ops.random_uniform({}, -max_delta, max_delta, {seed = seed}))
  end

  -- tf.image.random_contrast(image, lower, upper, seed): adjust_contrast by
  -- a factor drawn from [lower, upper).
  function image_ns.random_contrast(image, lower, upper, seed)
    local fname = "tf.image.random_contrast"
    if type(lower) ~= "number" or type(upper) ~= "number" then
      fail(fname .. ": lower and upper must be Lua numbers")
    end
    if upper <= lower then fail(fname .. ": upper must be > lower.") end
    if lower < 0 then fail(fname .. ": lower must be non-negative.") end
    return image_ns.adjust_contrast(image, ops.random_uniform({}, lower, upper, {seed = seed}))
  end

  -- The resize ops: images [batch, height, width, channels], size an int32
  -- {new_height, new_width} (a Lua list or a tensor).
  local function resize_op(op_type, fname)
    return function(images, size, ...)
      local o = options(fname, {"align_corners", "name", "half_pixel_centers"}, ...)
      local x = G.convert(images)
      return G.op{op_type, inputs = {x, G.convert(size, dtypes.int32, x.graph)},
                  attrs = {align_corners = check_bool(o.align_corners, fname, "align_corners") or false,
                           half_pixel_centers = check_bool(o.half_pixel_centers, fname, "half_pixel_centers")
                             or false},
                  name = o.name}
    end
  end
  -- tf.image.resize_bilinear(images, size, align_corners, name,
  -- half_pixel_centers): float32 whatever the images' dtype.
  image_ns.resize_bilinear = resize_op("ResizeBilinear", "tf.image.resize_bilinear")
  -- tf.image.resize_nearest_neighbor(images, size, align_corners, name,
  -- half_pixel_centers): the images' dtype.
  image_ns.resize_nearest_neighbor = resize_op("ResizeNearestNeighbor", "tf.image.resize_nearest_neighbor")

  -- The method of resize_images: a ResizeMethod value or its name in any case.
  local function method_of(fname, method)
    if method == nil then return METHODS.BILINEAR end
    if type(method) == "string" and METHODS[method:upper()] then return METHODS[method:upper()] end
    for _, v in pairs(METHODS) do if v == method then return v end end
    fail(string.format("%s: Resize method is not implemented: %s", fname, args.show(method)))
  end

  -- tf.image.resize_images(images, size, method, align_corners,
  -- preserve_aspect_ratio, name) (also tf.image.resize, its TF1 name): an
  -- image or a batch resized to size {new_height, new_width}, bilinear
  -- (float32) or nearest neighbor (the images' dtype); images of that size
  -- already come back as they are. preserve_aspect_ratio scales both sides
  -- by one factor so that the result fits in size.
  function image_ns.resize_images(images, size, ...)
    local fname = "tf.image.resize_images"
    local o = options(fname, {"method", "align_corners", "preserve_aspect_ratio", "name"}, ...)
    local method = method_of(fname, o.method)
    if method == METHODS.BICUBIC or method == METHODS.AREA then
      fail(string.format("%s: the %s method is not implemented in moonflow; use BILINEAR or NEAREST_NEIGHBOR", fname,
                         method == METHODS.BICUBIC and "BICUBIC" or "AREA"))
    end
    local x = G.convert(images)
    if not x:get_shape().dims then fail(fname .. ": 'images' contains no shape.") end
    local dims = image_dims(fname, x)
    local sz = G.convert(size, dtypes.int32, x.graph)
    local sdims = sz:get_shape().dims
    if sz.dtype ~= dtypes.int32 or not sdims or #sdims ~= 1 or (sdims[1] >= 0 and sdims[1] ~= 2) then
      fail(string.format("%s: 'size' must be a 1-D int32 Tensor of 2 elements: new_height, new_width, got %s",
                         fname, tostring(sz)))
    end
    local h, w = dims[#dims - 2], dims[#dims - 1]
    if check_bool(o.preserve_aspect_ratio, fname, "preserve_aspect_ratio") then
      local shape = ops.cast(ops.strided_slice(ops.shape(x), {-3}, {-1}), dtypes.float32)
      local scale = ops.reduce_min(ops.divide(ops.cast(sz, dtypes.float32), shape))
      sz = ops.cast(ops.round(ops.multiply(scale, shape)), dtypes.int32)
    elseif args.is_plain(size) and size[1] == h and size[2] == w then
      return x
    end
    local align = check_bool(o.align_corners, fname, "align_corners") or false
    local resize = method == METHODS.BILINEAR and image_ns.resize_bilinear or image_ns.resize_nearest_neighbor
    return batched(x, function(b) return resize(b, sz, {align_corners = align, name = o.name}) end)
  end
  image_ns.resize = image_ns.resize_images
end
