-- tf.image's codecs: decode_png, decode_jpeg, decode_image, encode_png,
-- encode_jpeg. The files of spec/fixtures/images/ and what TensorFlow
-- decodes from them come from spec/fixtures/image_codec_values.py.
local tf = require("moonflow")
local H = require("spec.helpers")

local V = require("spec.fixtures.image_codec_values")

local function file(name) return H.read("spec/fixtures/images/" .. name) end

-- The largest difference between two nested lists of numbers of one shape.
local function max_difference(want, got)
  local a, b = H.flat(want), H.flat(got)
  assert.equal(#a, #b, "element counts")
  local worst = 0
  for i = 1, #a do worst = math.max(worst, math.abs(a[i] - b[i])) end
  return worst
end

-- Asserts that err names op (a node of it: "DecodePng" or "DecodePng_2") and
-- holds text.
local function names(err, op, text)
  assert.truthy(err:find("^" .. op .. "[_%d]*: ") or err:find("[ ]" .. op .. "[_%d]*: "), err)
  assert.truthy(err:find(text, 1, true), err)
end

-- The message of running t, which must fail.
local function run_error(t)
  local sess = tf.Session()
  local err = H.error_of(sess.run, sess, t)
  sess:close()
  return err
end

describe("tf.image.decode_png", function()
  before_each(function() tf.reset_default_graph() end)

  it("decodes 8-bit images of 1 to 4 channels to any channel count, as TensorFlow does", function()
    for c = 1, 4 do
      local case = V["c" .. c]
      local data = file("c" .. c .. ".png")
      H.assert_values(case.pixels, H.value(tf.image.decode_png(data)))
      for _, want in ipairs({1, 3, 4}) do
        local image = tf.image.decode_png(data, want)
        assert.same({-1, -1, want}, image:get_shape():as_list())
        H.assert_values(case["as" .. want], H.value(image))
      end
    end
  end)

  it("expands palettes with transparency, packed gray, 16-bit samples and interlacing", function()
    H.assert_values(V.palette.as0, H.value(tf.image.decode_png(file("palette.png"))))
    H.assert_values(V.palette.as3, H.value(tf.image.decode_png(file("palette.png"), {channels = 3})))
    H.assert_values(V.palette.as1, H.value(tf.image.decode_png(file("palette.png"), {channels = 1})))
    H.assert_values(V.gray1.as0, H.value(tf.image.decode_png(file("gray1.png"))))
    H.assert_values(V.gray1.as3, H.value(tf.image.decode_png(file("gray1.png"), 3)))
    H.assert_values(V.rgb16.as0, H.value(tf.io.decode_png(file("rgb16.png"))))
    H.assert_values(V.rgb16.as4, H.value(tf.io.decode_png(file("rgb16.png"), 4, tf.uint8)))
    H.assert_values(V.interlaced.pixels, H.value(tf.image.decode_png(file("interlaced.png"))))
  end)

  it("decodes contents fed at run time, with an unknown static shape", function()
    local contents = tf.placeholder(tf.string, {})
    local image = tf.image.decode_png(contents)
    assert.same({-1, -1, -1}, image:get_shape():as_list())
    local sess = tf.Session()
    H.assert_values(V.c3.pixels, sess:run(image, {[contents] = file("c3.png")}):totable())
    H.assert_values(V.c1.pixels, sess:run(image, {[contents] = file("c1.png")}):totable())
  end)

  it("names the op and what is wrong with corrupt data; the session goes on", function()
    local data = file("c3.png")
    local contents = tf.placeholder(tf.string, {})
    local image = tf.image.decode_png(contents)
    local sess = tf.Session()
    local function fails(bytes) return H.error_of(sess.run, sess, image, {[contents] = bytes}) end
    names(fails("not a png"), "DecodePng", "the contents (9 bytes) are not PNG data: no PNG signature")
    names(fails(data:sub(1, 40)), "DecodePng", "invalid PNG data (40 bytes): the data ends too early")
    -- A flipped byte of the IDAT chunk's CRC (the last chunk, IEND, is 12 bytes).
    local at = #data - 12
    local flipped = data:sub(1, at - 1) .. string.char((data:byte(at) + 1) % 256) .. data:sub(at + 1)
    names(fails(flipped), "DecodePng", "invalid PNG data (107 bytes): IDAT: CRC error")
    -- A flipped byte of the compressed pixels: zlib's error.
    at = data:find("IDAT", 1, true) + 6
    flipped = data:sub(1, at - 1) .. string.char((data:byte(at) + 1) % 256) .. data:sub(at + 1)
    names(fails(flipped), "DecodePng", "invalid PNG data (107 bytes): IDAT: invalid distance")
    names(fails(""), "DecodePng", "the contents (0 bytes) are not PNG data")
    names(fails(file("huge.png")), "DecodePng",
          "the PNG image is too large to decode: 30000 x 30000 x 4 bytes (at most 2^29)")
    H.assert_values(V.c3.pixels, sess:run(image, {[contents] = data}):totable())
  end)

  it("checks its arguments when the graph is built, naming the Lua line", function()
    local line = H.this_line() + 1
    local err = H.error_of(function() local _ = tf.image.decode_png("x", 2) end)
    names(err, "DecodePng", "channels must be 0, 1, 3 or 4, got 2")
    assert.truthy(err:find("image_codec_spec.lua:" .. line, 1, true), err)
    names(H.error_of(tf.image.decode_png, {"a", "b"}), "DecodePng",
          "contents must be a scalar (one encoded image), got shape [2]")
    assert.truthy(H.error_of(tf.image.decode_png, "x", 0, tf.int32):find(
                    "tf.image.decode_png: dtype must be uint8, got int32 (moonflow has no uint16)", 1, true))
    names(H.error_of(tf.image.decode_png, tf.constant(1)), "DecodePng", "contents has")
  end)
end)

describe("tf.image.encode_png", function()
  before_each(function() tf.reset_default_graph() end)

  it("round-trips images of 1 to 4 channels at every compression level", function()
    for c = 1, 4 do
      local pixels = V["c" .. c].pixels
      local image = tf.constant(pixels, tf.uint8)
      for _, level in ipairs({-1, 0, 9}) do
        local png = tf.image.encode_png(image, level)
        assert.same({}, png:get_shape():as_list())
        H.assert_values(pixels, H.value(tf.image.decode_png(png)))
      end
    end
  end)

  it("writes what TensorFlow writes: the fixtures came from tf.io.encode_png", function()
    for c = 1, 4 do
      assert.equal(file("c" .. c .. ".png"), H.run(tf.image.encode_png(tf.constant(V["c" .. c].pixels, tf.uint8))))
    end
  end)

  it("compresses less at level 0 than at level 9", function()
    local flat = tf.zeros({64, 64, 3}, tf.uint8)
    local stored, packed = H.run(tf.image.encode_png(flat, 0)), H.run(tf.image.encode_png(flat, {compression = 9}))
    assert.is_true(#stored > 64 * 64 * 3 and #packed < 200, #stored .. " vs " .. #packed)
  end)

  it("refuses other dtypes, ranks, channel counts, levels and empty images", function()
    names(H.error_of(tf.image.encode_png, tf.zeros({2, 2, 3})), "EncodePng", "image has")
    names(H.error_of(tf.image.encode_png, tf.zeros({2, 2}, tf.uint8)), "EncodePng",
          "image must be 3-dimensional [height, width, channels], got shape [2,2]")
    names(H.error_of(tf.image.encode_png, tf.zeros({2, 2, 5}, tf.uint8)), "EncodePng",
          "image must have 1 to 4 channels, got 5")
    names(H.error_of(tf.image.encode_png, tf.zeros({2, 2, 1}, tf.uint8), 10), "EncodePng",
          "compression must be -1 (the default) or 0 to 9, got 10")
    local p = tf.placeholder(tf.uint8, {-1, -1, -1})
    local png = tf.image.encode_png(p)
    local sess = tf.Session()
    local err = H.error_of(sess.run, sess, png, {[p] = sess:run(tf.zeros({0, 3, 3}, tf.uint8))})
    names(err, "EncodePng", "a PNG image has 1 to 2^31 - 1 rows and columns, got 0 x 3")
    err = H.error_of(sess.run, sess, png, {[p] = sess:run(tf.zeros({1, 1, 6}, tf.uint8))})
    names(err, "EncodePng", "image must have 1 to 4 channels, got 6")
  end)
end)

describe("tf.image.decode_jpeg", function()
  before_each(function() tf.reset_default_graph() end)

  -- TensorFlow's own JPEG tests allow decoders to differ by a few levels
  -- (libjpeg-turbo's versions round differently); Debian's and TensorFlow's
  -- builds agree exactly here.
  local TOLERANCE = 0

  it("decodes as TensorFlow's libjpeg-turbo does, with each option", function()
    local data = file("rgb.jpg")
    local case = V.jpeg_rgb
    assert.is_true(max_difference(case.default, H.value(tf.image.decode_jpeg(data))) <= TOLERANCE)
    assert.is_true(max_difference(case.accurate, H.value(tf.image.decode_jpeg(data,
                                  {dct_method = "INTEGER_ACCURATE"}))) <= TOLERANCE)
    assert.is_true(max_difference(case.gray, H.value(tf.image.decode_jpeg(data, 1))) <= TOLERANCE)
    local half = tf.image.decode_jpeg(data, {ratio = 2})
    assert.same({-1, -1, -1}, half:get_shape():as_list())
    local got = H.value(half)
    assert.same({8, 12, 3}, {#got, #got[1], #got[1][1]})
    assert.is_true(max_difference(case.ratio2, got) <= TOLERANCE)
    assert.is_true(max_difference(case.plain_upscaling, H.value(tf.image.decode_jpeg(data,
                                  {fancy_upscaling = false}))) <= TOLERANCE)
    -- And close to the pixels encoded (quality 90).
    assert.is_true(max_difference(case.pixels, H.value(tf.image.decode_jpeg(data))) <= 12)
    assert.is_true(max_difference(V.jpeg_gray.default, H.value(tf.io.decode_jpeg(file("gray.jpg")))) <= TOLERANCE)
    assert.is_true(max_difference(V.jpeg_gray.as3, H.value(tf.io.decode_jpeg(file("gray.jpg"), 3))) <= TOLERANCE)
  end)

  it("names the op for corrupt or truncated data; try_recover_truncated decodes what there is", function()
    local data = file("rgb.jpg")
    -- Cut in the scan (its header ends at byte 624).
    local err = run_error(tf.image.decode_jpeg(data:sub(1, 664)))
    names(err, "DecodeJpeg", "invalid JPEG data (664 bytes): the data ends too early (truncated")
    local rows = H.value(tf.image.decode_jpeg(data:sub(1, 664), {try_recover_truncated = true}))
    assert.same({16, 24}, {#rows, #rows[1]})
    err = run_error(tf.image.decode_jpeg(data:sub(1, 100)))
    names(err, "DecodeJpeg", "invalid JPEG data (100 bytes): ")
    names(run_error(tf.image.decode_jpeg("")), "DecodeJpeg", "invalid JPEG data (0 bytes): ")
    -- A progressive JPEG whose header claims 65000 x 65000 pixels: too large
    -- whole, and too large for libjpeg's buffers even scaled down by 8.
    local progressive = H.run(tf.image.encode_jpeg(tf.constant(V.jpeg_rgb.pixels, tf.uint8), {progressive = true}))
    local sof2 = progressive:find("\255\194", 1, true)  -- FF C2, length (2), precision (1), height, width
    local huge = progressive:sub(1, sof2 + 4) .. "\253\232\253\232" .. progressive:sub(sof2 + 9)
    names(run_error(tf.image.decode_jpeg(huge)), "DecodeJpeg",
          "the JPEG image is too large to decode: 65000 x 65000 x 3 bytes (at most 2^29)")
    names(run_error(tf.image.decode_jpeg(huge, {ratio = 8})), "DecodeJpeg",
          "the JPEG image is too large to decode: libjpeg would need more than 2^30 bytes")
    names(run_error(tf.image.decode_jpeg("\255\216\255\224 garbage")), "DecodeJpeg", "invalid JPEG data")
  end)

  it("checks channels, ratio, dct_method and acceptable_fraction when built", function()
    names(H.error_of(tf.image.decode_jpeg, "x", 4), "DecodeJpeg", "channels must be 0, 1, 3 (JPEG), got 4")
    names(H.error_of(tf.image.decode_jpeg, "x", {ratio = 3}), "DecodeJpeg", "ratio must be 1, 2, 4 or 8, got 3")
    names(H.error_of(tf.image.decode_jpeg, "x", {dct_method = "FLOAT"}), "DecodeJpeg",
          'dct_method must be "", "INTEGER_FAST" or "INTEGER_ACCURATE", got "FLOAT"')
    assert.truthy(H.error_of(tf.image.decode_jpeg, "x", {acceptable_fraction = 0.5}):find(
                    "tf.image.decode_jpeg: acceptable_fraction must be 1", 1, true))
  end)
end)

describe("tf.image.encode_jpeg", function()
  before_each(function() tf.reset_default_graph() end)

  it("round-trips within JPEG's loss, gray and RGB", function()
    local rgb = tf.constant(V.jpeg_rgb.pixels, tf.uint8)
    local best = tf.image.encode_jpeg(rgb, {quality = 100, chroma_downsampling = false})
    local accurate = {dct_method = "INTEGER_ACCURATE"}
    assert.is_true(max_difference(V.jpeg_rgb.pixels, H.value(tf.image.decode_jpeg(best, accurate))) <= 3)
    local gray = tf.constant(V.jpeg_gray.pixels, tf.uint8)
    local g = tf.image.encode_jpeg(gray, "grayscale", 100)
    assert.is_true(max_difference(V.jpeg_gray.pixels, H.value(tf.image.decode_jpeg(g, accurate))) <= 3)
    assert.same({}, g:get_shape():as_list())
    -- Lower quality, smaller file.
    local small = H.run(tf.image.encode_jpeg(rgb, {quality = 10}))
    assert.is_true(#small < #H.run(best))
  end)

  it("writes TensorFlow's bytes: the fixtures came from tf.io.encode_jpeg", function()
    assert.equal(file("rgb.jpg"), H.run(tf.image.encode_jpeg(tf.constant(V.jpeg_rgb.pixels, tf.uint8), {quality = 90})))
    assert.equal(file("gray.jpg"), H.run(tf.image.encode_jpeg(tf.constant(V.jpeg_gray.pixels, tf.uint8), "", 80)))
    local xmp = {quality = 90, xmp_metadata = "<x:xmpmeta>moonflow</x:xmpmeta>"}
    assert.equal(file("xmp.jpg"), H.run(tf.image.encode_jpeg(tf.constant(V.jpeg_rgb.pixels, tf.uint8), xmp)))
  end)

  it("writes the density, progressive scans and optimized tables asked for", function()
    local rgb = tf.constant(V.jpeg_rgb.pixels, tf.uint8)
    -- JFIF's APP0: units at byte 14, X and Y density at 15 and 17 (big-endian).
    local function density(bytes) return bytes:byte(14), bytes:byte(15) * 256 + bytes:byte(16),
                                         bytes:byte(17) * 256 + bytes:byte(18) end
    local plain = H.run(tf.image.encode_jpeg(rgb))
    assert.same({1, 300, 300}, {density(plain)})
    assert.same({2, 72, 96}, {density(H.run(tf.image.encode_jpeg(rgb, {density_unit = "cm", x_density = 72,
                                                                         y_density = 96})))})
    local progressive = H.run(tf.image.encode_jpeg(rgb, {progressive = true}))
    assert.truthy(progressive:find("\255\194", 1, true))  -- SOF2: progressive DCT
    assert.falsy(plain:find("\255\194", 1, true))
    assert.is_true(#H.run(tf.image.encode_jpeg(rgb, {optimize_size = true})) < #plain)
  end)

  it("refuses bad formats, channel counts, qualities and densities", function()
    local rgb = tf.zeros({2, 2, 3}, tf.uint8)
    names(H.error_of(tf.image.encode_jpeg, rgb, "grayscale"), "EncodeJpeg",
          'format "grayscale" takes images of 1 channel, got 3')
    names(H.error_of(tf.image.encode_jpeg, rgb, "cmyk"), "EncodeJpeg", 'format must be "", "grayscale" or "rgb"')
    names(H.error_of(tf.image.encode_jpeg, tf.zeros({2, 2, 4}, tf.uint8)), "EncodeJpeg",
          "image must have 1 or 3 channels, got 4")
    names(H.error_of(tf.image.encode_jpeg, rgb, {quality = 101}), "EncodeJpeg", "quality must be in [0,100], got 101")
    names(H.error_of(tf.image.encode_jpeg, rgb, {density_unit = "px"}), "EncodeJpeg",
          'density_unit must be "in" or "cm", got "px"')
    names(H.error_of(tf.image.encode_jpeg, rgb, {x_density = 70000}), "EncodeJpeg",
          "x_density must be 0 to 65535, got 70000")
    assert.truthy(H.error_of(tf.image.encode_jpeg, rgb, {xmp_metadata = "a\0b"}):find(
                    "tf.image.encode_jpeg: xmp_metadata must be text, without NUL bytes", 1, true))
    names(H.error_of(tf.image.encode_jpeg, rgb, {xmp_metadata = ("x"):rep(65505)}), "EncodeJpeg",
          "xmp_metadata holds 65505 bytes; a JPEG marker holds at most 65504")
    names(run_error(tf.image.encode_jpeg(tf.zeros({0, 2, 3}, tf.uint8))), "EncodeJpeg",
          "a JPEG image has 1 to 65500 rows and columns, got 0 x 2")
  end)
end)

describe("tf.image.decode_image", function()
  before_each(function() tf.reset_default_graph() end)

  it("tells PNG from JPEG by their first bytes", function()
    local contents = tf.placeholder(tf.string, {})
    local image = tf.image.decode_image(contents)
    local sess = tf.Session()
    H.assert_values(V.c4.pixels, sess:run(image, {[contents] = file("c4.png")}):totable())
    assert.is_true(max_difference(V.jpeg_rgb.default, sess:run(image, {[contents] = file("rgb.jpg")}):totable()) <= 0)
    H.assert_values(V.c4.as3, H.value(tf.io.decode_image(file("c4.png"), 3)))
  end)

  it("gives floats in [0, 1] when asked, as convert_image_dtype does", function()
    local got = H.value(tf.image.decode_image(file("c1.png"), {dtype = tf.float32}))
    local want = {}
    for r, row in ipairs(V.c1.pixels) do
      want[r] = {}
      for c, px in ipairs(row) do want[r][c] = {px[1] / 255} end
    end
    H.assert_values(want, got, 1e-6)
  end)

  it("names what it cannot decode", function()
    names(run_error(tf.image.decode_image("GIF89a....")), "DecodeImage",
          "GIF images are not supported; moonflow decodes PNG and JPEG")
    names(run_error(tf.image.decode_image("BM......")), "DecodeImage", "BMP images are not supported")
    names(run_error(tf.image.decode_image("text")), "DecodeImage",
          "Unknown image file format (4 bytes): PNG or JPEG required")
    names(run_error(tf.image.decode_image(file("rgb.jpg"), 4)), "DecodeImage",
          "channels 4 is for PNG; this is a JPEG image")
    assert.truthy(H.error_of(tf.image.decode_image, "x", {dtype = tf.int32}):find(
                    "tf.image.decode_image: dtype must be uint8 or a float dtype, got int32", 1, true))
  end)
end)
