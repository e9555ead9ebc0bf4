-- image_spec.lua — tf.image (src/ops/image.c and lua/moonflow/ops/image.lua):
-- resize_images bilinear and nearest (align_corners, half_pixel_centers,
-- preserve_aspect_ratio) with their gradients, flips, crops, pads,
-- central_crop, per_image_standardization, rgb_to_grayscale,
-- adjust_brightness, adjust_contrast, convert_image_dtype and saturate_cast.
-- Values and gradients from TensorFlow itself (spec/fixtures/image_values.py,
-- its output committed as spec/fixtures/image_values.lua); gradients also
-- against central differences; shapes when built; errors.
local tf = require("moonflow")
local H = require("spec.helpers")
local V = require("spec.fixtures.image_values")
local error_of, assert_values, without_line = H.error_of, H.assert_values, H.without_line

local IN = V.inputs
local TOL = 2e-6

local value = H.value

-- sum(y * weights) with the fixture script's weights: (i * 7 % 11 - 5) / 4
-- for element i counting from 0.
local function weighted_sum(y)
  local n = H.numel(y:get_shape():as_list())
  local w = {}
  for i = 0, n - 1 do w[i + 1] = (i * 7 % 11 - 5) / 4 end
  return tf.reduce_sum(tf.cast(y, tf.float32) * tf.reshape(tf.constant(w), y:get_shape():as_list()))
end

local function value_and_grad(f, x)
  local y = f(x)
  return y, tf.gradients(weighted_sum(y), x)[1]
end

describe("tf.image resizing", function()
  before_each(tf.reset_default_graph)

  it("resize_images bilinear and nearest, align_corners, half_pixel_centers: values and gradients", function()
    for _, case in ipairs(V.resize) do
      local method, size, align, half, want, want_grad = unpack(case)
      for _, dtype in ipairs({tf.float32, tf.float64}) do
        local x = tf.constant(IN.BATCH, dtype)
        local y, g = value_and_grad(function(im)
          if half then
            local f = method == "bilinear" and tf.image.resize_bilinear or tf.image.resize_nearest_neighbor
            return f(im, size, {half_pixel_centers = true})
          end
          return tf.image.resize_images(im, size, {method = method == "bilinear" and 0 or 1, align_corners = align})
        end, x)
        assert.equal(method == "bilinear" and tf.float32 or dtype, y.dtype)
        assert.same({2, size[1], size[2], 2}, y:get_shape():as_list())
        local r = H.run({y, g})
        assert_values(want, r[1]:totable(), TOL)
        assert_values(want_grad, r[2]:totable(), TOL)
      end
    end
  end)

  it("uint8 images: bilinear gives float32, nearest keeps uint8; a single image stays 3-D", function()
    local x = tf.constant(IN.RGB8, tf.uint8)
    local b = tf.image.resize_images(x, {3, 5})
    assert.equal(tf.float32, b.dtype)
    assert.same({3, 5, 3}, b:get_shape():as_list())
    assert_values(V.resize_uint8_bilinear, value(b), TOL)
    local n = tf.image.resize_images(x, {3, 5}, tf.image.ResizeMethod.NEAREST_NEIGHBOR)
    assert.equal(tf.uint8, n.dtype)
    assert_values(V.resize_uint8_nearest, value(n), 0)
    -- integer images get no gradient (TensorFlow's rule), and no error
    assert.is_nil(tf.gradients(tf.reduce_sum(b), x)[1])
  end)

  it("preserve_aspect_ratio, and images already of the size come back as they are", function()
    local x = tf.constant(IN.BATCH)
    assert_values(V.resize_aspect, value(tf.image.resize_images(x, {6, 6}, {preserve_aspect_ratio = true})), TOL)
    assert.equal(x, tf.image.resize_images(x, {3, 4}))
    assert.equal(x, tf.image.resize(x, {3, 4}, "nearest_neighbor"))
  end)

  it("shapes when built: unknown batch, size fed, unknown rank", function()
    local x = tf.placeholder(tf.float32, {-1, -1, -1, 3})
    assert.same({-1, 5, 7, 3}, tf.image.resize_images(x, {5, 7}):get_shape():as_list())
    local size = tf.placeholder(tf.int32, {2})
    local y = tf.image.resize_bilinear(x, size)
    assert.same({-1, -1, -1, 3}, y:get_shape():as_list())
    local r = value(y, {[x] = {{{{1, 2, 3}}}}, [size] = {2, 1}})
    assert_values({{{{1, 2, 3}}, {{1, 2, 3}}}}, r, 0)
    assert.same({4, 2, 3}, tf.image.resize_images(tf.placeholder(tf.float32, {-1, -1, 3}), {4, 2}):get_shape()
                                                  :as_list())
  end)

  it("an empty batch resizes to an empty batch; its gradient is empty", function()
    local x = tf.zeros({0, 3, 4, 2})
    local y, g = value_and_grad(function(im) return tf.image.resize_images(im, {5, 2}) end, x)
    local r = H.run({y, g})
    assert.same({0, 5, 2, 2}, r[1]:shape())
    assert.same({0, 3, 4, 2}, r[2]:shape())
  end)

  it("gradients against central differences (float64 images)", function()
    local x = tf.placeholder(tf.float64, {1, 3, 4, 1})
    local init = H.values(12)
    for _, f in ipairs({
      function(im) return tf.image.resize_bilinear(im, {5, 7}) end,
      function(im) return tf.image.resize_bilinear(im, {2, 3}, {align_corners = true}) end,
      function(im) return tf.image.resize_bilinear(im, {5, 3}, {half_pixel_centers = true}) end,
      function(im) return tf.image.resize_nearest_neighbor(im, {5, 7}) end,
      function(im) return tf.image.resize_nearest_neighbor(im, {2, 3}, {align_corners = true}) end,
    }) do
      local y = tf.cast(f(x), tf.float64)
      -- the result is linear in the pixels, but bilinear interpolates in float32 as TensorFlow does:
      -- a large step keeps float32's rounding small beside it
      H.check_grad(x, {1, 3, 4, 1}, y, y:get_shape():as_list(), {x_init_value = init, delta = 0.1}, 1e-5)
    end
  end)

  it("errors: rank, size, non-positive sizes, methods, empty images, flags", function()
    local function msg(...) return without_line(error_of(...)) end
    local img = tf.zeros({2, 3, 4, 1})
    assert.truthy(msg(tf.image.resize_bilinear, tf.zeros({3, 4}), {2, 2}):find(
      "ResizeBilinear: images must be 4-dimensional [batch, height, width, channels], got shape [3,4]", 1, true))
    assert.truthy(msg(tf.image.resize_images, tf.zeros({3, 4}), {2, 2}):find(
      "tf.image.resize_images: 'image' (shape (3, 4)) must have either 3 or 4 dimensions.", 1, true))
    assert.truthy(msg(tf.image.resize_images, tf.placeholder(tf.float32), {2, 2}):find(
      "'images' contains no shape.", 1, true))
    assert.truthy(msg(tf.image.resize_images, img, {2, 2, 2}):find(
      "'size' must be a 1-D int32 Tensor of 2 elements", 1, true))
    assert.truthy(msg(tf.image.resize_bilinear, img, {0, 2}):find(
      "output dimensions must be positive, got size [0, 2]", 1, true))
    assert.truthy(msg(tf.image.resize_images, img, {2, 2}, tf.image.ResizeMethod.BICUBIC):find(
      "the BICUBIC method is not implemented in moonflow", 1, true))
    assert.truthy(msg(tf.image.resize_images, img, {2, 2}, 7):find("Resize method is not implemented: 7", 1, true))
    assert.truthy(msg(tf.image.resize_bilinear, img, {2, 2}, {align_corners = true, half_pixel_centers = true}):find(
      "if half_pixel_centers is True, align_corners must be False.", 1, true))
    assert.truthy(msg(tf.image.resize_nearest_neighbor, tf.zeros({1, 0, 4, 1}), {2, 2}):find(
      "input image must be of non-zero size, got shape [1,0,4,1]", 1, true))
    assert.truthy(msg(tf.image.resize_bilinear, img, tf.constant({2, 2}, tf.int64)):find(
      "ResizeBilinear: size has dtype int64, but ResizeBilinear takes only int32", 1, true))
  end)

  it("a size fed at run time is checked there, naming the caller's line; the session goes on", function()
    local size = tf.placeholder(tf.int32, {2})
    local line = H.this_line() + 1
    local y = tf.image.resize_nearest_neighbor(tf.ones({1, 2, 2, 1}), size)
    local sess = tf.Session()
    local ok, err = pcall(sess.run, sess, y, {[size] = {-1, 3}})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("output dimensions must be positive, got size [-1, 3]", 1, true), err)
    assert.truthy(tostring(err):find("image_spec.lua:" .. line, 1, true), err)
    assert_values({{{{1}, {1}, {1}}}}, sess:run(y, {[size] = {1, 3}}):totable(), 0)
  end)
end)

describe("tf.image composites", function()
  before_each(tf.reset_default_graph)

  it("flip_left_right, flip_up_down, crop_to_bounding_box, pad_to_bounding_box, central_crop", function()
    local batch = tf.constant(IN.BATCH)
    assert_values(V.flip_left_right, value(tf.image.flip_left_right(tf.constant(IN.BATCH[1]))), 0)
    assert_values(V.flip_up_down, value(tf.image.flip_up_down(batch)), 0)
    assert_values(V.crop, value(tf.image.crop_to_bounding_box(batch, 1, 1, 2, 2)), 0)
    local padded = tf.image.pad_to_bounding_box(tf.constant(IN.BATCH[1]), 1, 2, 5, 7)
    assert.same({5, 7, 2}, padded:get_shape():as_list())
    assert_values(V.pad, value(padded), 0)
    for _, case in ipairs(V.central_crop) do
      assert_values(case[2], value(tf.image.central_crop(tf.constant(IN.BIG), case[1])), 0)
    end
    assert.equal(batch, tf.image.central_crop(batch, 1))
  end)

  it("per_image_standardization: values, gradient, uint8 input, a constant image", function()
    local x = tf.constant(IN.BATCH)
    local y, g = value_and_grad(tf.image.per_image_standardization, x)
    local r = H.run({y, g})
    assert_values(V.standardize, r[1]:totable(), 1e-5)
    assert_values(V.standardize_grad, r[2]:totable(), 1e-5)
    local u = tf.image.per_image_standardization(tf.constant(IN.RGB8, tf.uint8))
    assert.equal(tf.float32, u.dtype)
    assert_values(V.standardize_uint8, value(u), 1e-5)
    assert_values(V.standardize_constant, value(tf.image.per_image_standardization(tf.fill({2, 2, 1}, 3))), 0)
    local p = tf.placeholder(tf.float64, {2, 2, 2})
    H.check_grad(p, {2, 2, 2}, tf.cast(tf.image.per_image_standardization(p), tf.float64), {2, 2, 2},
                 {x_init_value = H.values(8), delta = 1e-3}, 1e-2)
  end)

  it("rgb_to_grayscale and grayscale_to_rgb", function()
    local rgb = tf.constant(IN.BATCH):slice({0, 0, 0, 0}, {-1, -1, -1, 1})
    rgb = tf.concat({rgb, rgb, rgb}, -1)
    local y, g = value_and_grad(tf.image.rgb_to_grayscale, rgb)
    local r = H.run({y, g})
    assert_values(V.gray, r[1]:totable(), TOL)
    assert_values(V.gray_grad, r[2]:totable(), TOL)
    local u = tf.image.rgb_to_grayscale(tf.constant(IN.RGB8, tf.uint8))
    assert.equal(tf.uint8, u.dtype)
    assert_values(V.gray_uint8, value(u), 0)
    assert_values({{{1, 1, 1}, {2, 2, 2}}}, value(tf.image.grayscale_to_rgb(tf.constant({{{1}, {2}}}))), 0)
  end)

  it("adjust_brightness and adjust_contrast (float32 and saturating uint8), contrast's gradient", function()
    local x = tf.constant(IN.BATCH)
    assert_values(V.brightness, value(tf.image.adjust_brightness(x, 0.25)), TOL)
    assert_values(V.brightness_uint8, value(tf.image.adjust_brightness(tf.constant(IN.RGB8, tf.uint8), 0.3)), 0)
    assert_values(V.contrast, value(tf.image.adjust_contrast(x, 1.7)), TOL)
    assert_values(V.contrast_uint8, value(tf.image.adjust_contrast(tf.constant(IN.RGB8, tf.uint8), 2)), 0)
    -- TensorFlow has no gradient here; the composite's is f dy + (1 - f) mean(dy) over each image's pixels
    local p = tf.placeholder(tf.float64, {1, 2, 2, 1})
    H.check_grad(p, {1, 2, 2, 1}, tf.cast(tf.image.adjust_contrast(p, 1.7), tf.float64), {1, 2, 2, 1},
                 {x_init_value = {0.1, 0.4, 0.2, 0.7}, delta = 1e-3}, 1e-4)
  end)

  it("convert_image_dtype and saturate_cast", function()
    local C = V.convert
    local rgb8, floats, ints = tf.constant(IN.RGB8, tf.uint8), tf.constant(IN.FLOATS), tf.constant(IN.INTS, tf.int32)
    local conv = tf.image.convert_image_dtype
    assert_values(C.uint8_float32, value(conv(rgb8, tf.float32)), 0)
    assert_values(C.float32_uint8, value(conv(floats:slice({0}, {5}), tf.uint8)), 0)
    assert_values(C.float32_uint8_saturate, value(conv(floats, tf.uint8, true)), 0)
    assert_values(C.float32_int32, value(conv(floats:slice({0}, {5}) / 2, tf.int32)), 0)
    assert_values(C.int32_uint8, value(conv(tf.gather(ints, {0, 3, 5}), tf.uint8)), 0)
    assert_values(C.uint8_int32, value(conv(rgb8, tf.int32)), 0)
    assert_values(C.int32_float64, value(conv(ints, tf.float64)), 1e-15)
    assert.equal(rgb8, conv(rgb8, tf.uint8).op.inputs[1])
    assert_values(V.saturate_cast, value(tf.saturate_cast(tf.constant({-3.5, 0, 254.7, 300}), tf.uint8)), 0)
    assert.truthy(without_line(error_of(conv, rgb8, tf.bool)):find("dtypes must be floating point or integer", 1,
                                                                    true))
  end)

  it("errors name the function and what is wrong", function()
    local function msg(...) return without_line(error_of(...)) end
    local img = tf.zeros({3, 4, 1})
    assert.truthy(msg(tf.image.crop_to_bounding_box, img, 2, 0, 2, 4):find(
      "tf.image.crop_to_bounding_box: height must be >= target + offset (height 3, target 2, offset 2).", 1, true))
    assert.truthy(msg(tf.image.crop_to_bounding_box, img, 0, -1, 1, 1):find("offset_width must be >= 0.", 1, true))
    assert.truthy(msg(tf.image.crop_to_bounding_box, img, 0, 0, 0, 1):find("target_height must be > 0.", 1, true))
    assert.truthy(msg(tf.image.crop_to_bounding_box, img, tf.constant(0, tf.int32), 0, 1, 1):find(
      "offset_height must be a Lua integer", 1, true))
    assert.truthy(msg(tf.image.pad_to_bounding_box, img, 0, 1, 3, 4):find(
      "tf.image.pad_to_bounding_box: width must be <= target - offset (width 4, target 4, offset 1)", 1, true))
    assert.truthy(msg(tf.image.central_crop, img, 0):find("central_fraction must be within (0, 1]", 1, true))
    assert.truthy(msg(tf.image.flip_left_right, tf.zeros({3, 4})):find(
      "tf.image.flip_left_right: 'image' (shape (3, 4)) must have either 3 or 4 dimensions.", 1, true))
    assert.truthy(msg(tf.image.flip_up_down, tf.placeholder(tf.float32)):find("needs a known rank", 1, true))
    assert.truthy(msg(tf.image.rgb_to_grayscale, tf.zeros({2, 2, 4})):find(
      "images must have rank >= 2 and a last dimension of 3, got shape (2, 2, 4)", 1, true))
    assert.truthy(msg(tf.image.per_image_standardization, tf.zeros({2, 2})):find("must have at least 3 dimensions",
                                                                                 1, true))
  end)
end)

describe("tf.image augmentations and measures", function()
  before_each(tf.reset_default_graph)

  -- Values of rot90, transpose_image, resize_image_with_crop_or_pad,
  -- total_variation, image_gradients, psnr and adjust_gamma are in
  -- conformance_spec.lua (TensorFlow's); here randomness, gradients, errors.

  it("random flips: each image is the original or its flip; both happen; a seed repeats the draws", function()
    local x = tf.constant(IN.BATCH)
    local lr = tf.image.random_flip_left_right(x, 7)
    local sess = tf.Session()
    local original, flipped = sess:run(x):totable(), sess:run(tf.image.flip_left_right(x)):totable()
    local seen = {}
    for _ = 1, 20 do
      local r = sess:run(lr):totable()
      for b = 1, 2 do
        local same, flip = H.same(original[b], r[b], 0), H.same(flipped[b], r[b], 0)
        assert.is_true(same or flip)
        seen[same and "same" or "flip"] = true
      end
    end
    assert.is_true(seen.same and seen.flip)
    local single = tf.image.random_flip_up_down(tf.constant(IN.BATCH[1]), 3)
    local r = sess:run(single):totable()
    assert.is_true(H.same(IN.BATCH[1], r, 0) or H.same(value(tf.image.flip_up_down(tf.constant(IN.BATCH[1]))), r, 0))
    tf.set_random_seed(1)
    local a = tf.image.random_flip_left_right(x, 5)
    local first = {}
    for i = 1, 5 do first[i] = tf.Session():run(a):totable() end
    tf.reset_default_graph()
    tf.set_random_seed(1)
    local b = tf.image.random_flip_left_right(tf.constant(IN.BATCH), 5)
    for i = 1, 5 do assert_values(first[i], tf.Session():run(b):totable(), 0) end
  end)

  it("random_crop: a window of value at every offset, repeatable with seeds, with gradients", function()
    -- value[i][j][c] = 100 i + 10 j + c (0-based), so a crop says where it starts.
    local rows = {}
    for i = 0, 4 do
      rows[i + 1] = {}
      for j = 0, 3 do rows[i + 1][j + 1] = {100 * i + 10 * j, 100 * i + 10 * j + 1} end
    end
    local x = tf.constant(rows, tf.float32)
    local crop = tf.image.random_crop(x, {3, 2, 2}, {seed = 4})
    assert.same({3, 2, 2}, crop:get_shape():as_list())
    local weights = tf.constant(H.values(12, 1), tf.float32):reshape{3, 2, 2}
    local grad = tf.gradients(tf.reduce_sum(tf.multiply(crop, weights)), {x})[1]
    local sess = tf.Session()
    local w = sess:run(weights):totable()
    local seen, count = {}, 0
    for _ = 1, 60 do
      local r = sess:run({crop, grad})
      local c, g = r[1]:totable(), r[2]:totable()
      local top, left = math.floor(c[1][1][1] / 100), math.floor(c[1][1][1] % 100 / 10)
      assert.is_true(top >= 0 and top <= 2 and left >= 0 and left <= 2)
      for i = 1, 3 do
        for j = 1, 2 do
          for k = 1, 2 do assert.equal(100 * (top + i - 1) + 10 * (left + j - 1) + k - 1, c[i][j][k]) end
        end
      end
      -- The gradient is the weights in the window, zero elsewhere.
      for i = 1, 5 do
        for j = 1, 4 do
          for k = 1, 2 do
            local inside = i > top and i <= top + 3 and j > left and j <= left + 2
            assert.near(inside and w[i - top][j - left][k] or 0, g[i][j][k], 1e-6)
          end
        end
      end
      if not seen[top * 3 + left] then seen[top * 3 + left], count = true, count + 1 end
    end
    assert.equal(9, count)  -- every one of the 3 x 3 offsets
    -- The same graph seed and op seed draw the same crops in a new graph.
    local function crops()
      tf.reset_default_graph()
      tf.set_random_seed(2)
      local c = tf.random_crop(tf.constant(rows, tf.float32), {2, 2, 1}, 9)
      local s, out = tf.Session(), {}
      for i = 1, 4 do out[i] = s:run(c):totable() end
      return out
    end
    assert_values(crops(), crops(), 0)
  end)

  it("random_crop checks size against value, when built and when run", function()
    local x = tf.zeros({4, 3})
    local function msg(...) return without_line(error_of(...)) end
    assert.equal("tf.image.random_crop: Need value.shape >= size, got (4, 3) [2, 4]",
                 msg(tf.image.random_crop, x, {2, 4}))
    assert.equal("tf.image.random_crop: size [2] has 1 entries but value (shape (4, 3)) has 2 dimensions",
                 msg(tf.image.random_crop, x, {2}))
    assert.truthy(msg(tf.image.random_crop, x, {2, -1}):find("size[2] must be non-negative, got -1", 1, true))
    assert.truthy(msg(tf.image.random_crop, x, {2, 1.5}):find("size[2] must be an integer", 1, true))
    assert.truthy(msg(tf.image.random_crop, x, 2):find("size must be a non-empty list of integers", 1, true))
    local p = tf.placeholder(tf.float32, {-1, -1})
    local crop = tf.image.random_crop(p, {2, 2})
    local sess = tf.Session()
    local err = error_of(sess.run, sess, crop, {[p] = {{1, 2, 3}}})
    assert.truthy(err:find("tf.image.random_crop: Need value.shape >= size, got] [1 3] [2 2]", 1, true))
    assert.same({{1, 2}, {4, 5}}, sess:run(crop, {[p] = {{1, 2}, {4, 5}}}):totable())
  end)

  it("random_brightness and random_contrast stay within their ranges", function()
    local x = tf.constant({{{0.2}, {0.6}}})
    local bright, contrast = tf.image.random_brightness(x, 0.1), tf.image.random_contrast(x, 0.5, 1.5)
    local sess = tf.Session()
    for _ = 1, 10 do
      local r = sess:run(bright):totable()
      local delta = r[1][1][1] - 0.2
      assert.is_true(delta >= -0.1 and delta <= 0.1)
      assert.near(0.6 + delta, r[1][2][1], 1e-6)
      local c = sess:run(contrast):totable()
      local factor = (c[1][2][1] - 0.4) / 0.2
      assert.is_true(factor >= 0.5 - 1e-5 and factor <= 1.5 + 1e-5)
    end
    local function msg(...) return without_line(error_of(...)) end
    assert.truthy(msg(tf.image.random_brightness, x, -1):find("max_delta must be non-negative.", 1, true))
    assert.truthy(msg(tf.image.random_contrast, x, 1, 0.5):find("upper must be > lower.", 1, true))
    assert.truthy(msg(tf.image.random_contrast, x, -1, 0.5):find("lower must be non-negative.", 1, true))
  end)

  it("gradients of total_variation, psnr, adjust_gamma, rot90 and resize_image_with_crop_or_pad", function()
    local p = tf.placeholder(tf.float64, {1, 2, 3, 1})
    local init = {0.1, 0.7, 0.3, 0.9, 0.2, 0.5}
    local function check(y, shape, delta, tol)
      H.check_grad(p, {1, 2, 3, 1}, y, shape, {x_init_value = init, delta = delta or 1e-5}, tol or 1e-8)
    end
    check(tf.image.total_variation(p), {1})
    -- psnr and adjust_gamma compute in float32, as TensorFlow's: float32 steps and tolerances
    check(tf.cast(tf.image.psnr(p, tf.constant({{{{0.2}, {0.5}, {0.1}}, {{0.4}, {0.3}, {0.6}}}}, tf.float64), 1),
                  tf.float64), {1}, 1e-4, 1e-3)
    check(tf.cast(tf.image.adjust_gamma(p, 2.2, 0.5), tf.float64), {1, 2, 3, 1}, 1e-3, 1e-4)
    check(tf.image.rot90(p, 1), {1, 3, 2, 1})
    check(tf.image.resize_image_with_crop_or_pad(p, 3, 2), {1, 3, 2, 1})
  end)

  it("errors", function()
    local function msg(...) return without_line(error_of(...)) end
    assert.truthy(msg(tf.image.adjust_gamma, tf.zeros({2, 2, 1}), -1):find("Gamma should be a non-negative", 1, true))
    assert.truthy(msg(tf.image.image_gradients, tf.zeros({2, 2, 1})):find("expects a 4D tensor", 1, true))
    assert.truthy(msg(tf.image.total_variation, tf.zeros({2, 2})):find("must have either 3 or 4 dimensions", 1, true))
    assert.truthy(msg(tf.image.rot90, tf.zeros({2, 2, 1}), 1.5):find("k must be an integer", 1, true))
    assert.truthy(msg(tf.image.resize_image_with_crop_or_pad, tf.placeholder(tf.float32, {-1, 2, 1}), 1, 1):find(
      "height and width must be known", 1, true))
  end)
end)
