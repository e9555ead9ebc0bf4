-- ops/image_codec.lua — tf.image's codecs (src/ops/image_codec.c: libpng and
-- libjpeg-turbo): decode_png, decode_jpeg, decode_image, encode_png,
-- encode_jpeg, also under tf.io. Encoded images are scalar strings; decoded
-- ones uint8 [height, width, channels] (moonflow has no uint16: a 16-bit PNG
-- decodes to its high bytes, as TensorFlow's does with dtype uint8).
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local fail, attr = core.fail, G.attr

local function contents_of(x) return G.convert(x, core.dtypes.string) end

-- An integer option, or its default.
local function int_opt(v, dflt, fname, what)
  if v == nil then return attr.int(dflt) end
  return attr.int(args.int_arg(v, fname, what))
end

-- A boolean option, or its default.
local function bool_opt(v, dflt, fname, what)
  if v == nil then return dflt end
  return args.check_bool(v, fname, what)
end

-- A string option, or its default.
local function string_opt(v, dflt, fname, what)
  if v == nil then return dflt end
  if type(v) ~= "string" then fail(string.format("%s: %s must be a string, got %s", fname, what, args.describe(v))) end
  return v
end

-- The dtype a decoder gives: uint8 only (see the file's comment).
local function decoded_dtype(dtype, fname)
  dtype = core.as_dtype(dtype or core.dtypes.uint8, fname)
  if dtype ~= core.dtypes.uint8 then
    fail(string.format("%s: dtype must be uint8, got %s (moonflow has no uint16)", fname, dtype.name))
  end
  return dtype
end

return function(tf, ops)
  tf.image = tf.image or {}
  tf.io = tf.io or {}

  -- tf.image.decode_png(contents, channels, dtype, name | {channels=, dtype=, name=}):
  -- channels 0 (as in the file), 1, 3 or 4; palettes and transparency
  -- become RGB(A), gray becomes RGB and colour gray as asked.
  local DECODE_PNG_OPTIONS = {"channels", "dtype", "name"}
  function tf.image.decode_png(contents, ...)
    local fname = "tf.image.decode_png"
    local o = args.options(fname, DECODE_PNG_OPTIONS, ...)
    return G.op{"DecodePng", inputs = {contents_of(contents)},
                attrs = {channels = int_opt(o.channels, 0, fname, "channels"), dtype = decoded_dtype(o.dtype, fname)},
                name = o.name}
  end

  -- tf.image.decode_jpeg(contents, channels, ratio, fancy_upscaling,
  -- try_recover_truncated, acceptable_fraction, dct_method, name | {...}):
  -- channels 0, 1 or 3; ratio 1, 2, 4 or 8 (downscaling while decoding);
  -- dct_method "" (libjpeg's fast integer DCT, TensorFlow's default),
  -- "INTEGER_FAST" or "INTEGER_ACCURATE". Truncated data is an error unless
  -- try_recover_truncated; acceptable_fraction may only be 1 (all rows).
  local DECODE_JPEG_OPTIONS = {"channels", "ratio", "fancy_upscaling", "try_recover_truncated", "acceptable_fraction",
                               "dct_method", "name"}
  function tf.image.decode_jpeg(contents, ...)
    local fname = "tf.image.decode_jpeg"
    local o = args.options(fname, DECODE_JPEG_OPTIONS, ...)
    if o.acceptable_fraction ~= nil and o.acceptable_fraction ~= 1 then
      fail(fname .. ": acceptable_fraction must be 1 in moonflow (an image is decoded whole), got " ..
           args.describe(o.acceptable_fraction))
    end
    return G.op{"DecodeJpeg", inputs = {contents_of(contents)},
                attrs = {channels = int_opt(o.channels, 0, fname, "channels"),
                         ratio = int_opt(o.ratio, 1, fname, "ratio"),
                         fancy_upscaling = bool_opt(o.fancy_upscaling, true, fname, "fancy_upscaling"),
                         try_recover_truncated = bool_opt(o.try_recover_truncated, false, fname,
                                                          "try_recover_truncated"),
                         dct_method = string_opt(o.dct_method, "", fname, "dct_method")},
                name = o.name}
  end

  -- tf.image.decode_image(contents, channels, dtype, name, expand_animations
  -- | {...}): PNG or JPEG, told apart by their first bytes; a float dtype
  -- gives [0, 1] through convert_image_dtype, as TensorFlow's does. GIF and
  -- BMP are refused by name.
  local DECODE_IMAGE_OPTIONS = {"channels", "dtype", "name", "expand_animations"}
  function tf.image.decode_image(contents, ...)
    local fname = "tf.image.decode_image"
    local o = args.options(fname, DECODE_IMAGE_OPTIONS, ...)
    bool_opt(o.expand_animations, true, fname, "expand_animations")
    local dtype = core.as_dtype(o.dtype or core.dtypes.uint8, fname)
    if dtype ~= core.dtypes.uint8 and not dtype.is_floating then
      fail(string.format("%s: dtype must be uint8 or a float dtype, got %s", fname, dtype.name))
    end
    local image = G.op{"DecodeImage", inputs = {contents_of(contents)},
                       attrs = {channels = int_opt(o.channels, 0, fname, "channels"), dtype = core.dtypes.uint8},
                       name = dtype == core.dtypes.uint8 and o.name or nil}
    if dtype == core.dtypes.uint8 then return image end
    return tf.image.convert_image_dtype(image, dtype, {name = o.name})
  end

  -- tf.image.encode_png(image, compression, name | {compression=, name=}):
  -- uint8 [height, width, channels (1 to 4)]; compression -1 (libpng's
  -- default) or zlib's levels 0 to 9.
  local ENCODE_PNG_OPTIONS = {"compression", "name"}
  function tf.image.encode_png(image, ...)
    local fname = "tf.image.encode_png"
    local o = args.options(fname, ENCODE_PNG_OPTIONS, ...)
    return G.op{"EncodePng", inputs = {G.convert(image)},
                attrs = {compression = int_opt(o.compression, -1, fname, "compression")}, name = o.name}
  end

  -- tf.image.encode_jpeg(image, format, quality, progressive, optimize_size,
  -- chroma_downsampling, density_unit, x_density, y_density, xmp_metadata,
  -- name | {...}): uint8 [height, width, 1 or 3]; TensorFlow's defaults
  -- (quality 95, 300 dots per inch); xmp_metadata (text) goes in an APP1 marker.
  local ENCODE_JPEG_OPTIONS = {"format", "quality", "progressive", "optimize_size", "chroma_downsampling",
                               "density_unit", "x_density", "y_density", "xmp_metadata", "name"}
  function tf.image.encode_jpeg(image, ...)
    local fname = "tf.image.encode_jpeg"
    local o = args.options(fname, ENCODE_JPEG_OPTIONS, ...)
    local xmp = string_opt(o.xmp_metadata, "", fname, "xmp_metadata")
    if xmp:find("\0", 1, true) then fail(fname .. ": xmp_metadata must be text, without NUL bytes") end
    return G.op{"EncodeJpeg", inputs = {G.convert(image)},
                attrs = {format = string_opt(o.format, "", fname, "format"),
                         quality = int_opt(o.quality, 95, fname, "quality"),
                         progressive = bool_opt(o.progressive, false, fname, "progressive"),
                         optimize_size = bool_opt(o.optimize_size, false, fname, "optimize_size"),
                         chroma_downsampling = bool_opt(o.chroma_downsampling, true, fname, "chroma_downsampling"),
                         density_unit = string_opt(o.density_unit, "in", fname, "density_unit"),
                         x_density = int_opt(o.x_density, 300, fname, "x_density"),
                         y_density = int_opt(o.y_density, 300, fname, "y_density"), xmp_metadata = xmp},
                name = o.name}
  end

  for _, k in ipairs({"decode_png", "decode_jpeg", "decode_image", "encode_png", "encode_jpeg"}) do
    tf.io[k] = tf.image[k]
  end
end
