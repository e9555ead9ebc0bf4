-- ops/strings.lua — tf.strings (join, split, length, substr, to_number,
-- as_string, regex_replace) and the parsing ops tf.io.decode_raw and
-- tf.io.decode_csv, with TensorFlow 1.x's other names for them.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local fail = core.fail
local attr = G.attr
local name_of = args.name_of
local string_dtype = core.dtypes.string

-- x as a string tensor (a Lua string or list of them becomes a constant).
local function strings(x) return G.convert(x, string_dtype) end

-- An option that must be a Lua string.
local function check_string(v, fname, what)
  if type(v) ~= "string" then fail(fname .. ": " .. what .. " must be a string, got " .. args.describe(v)) end
  return v
end

return function(tf, ops)
  tf.strings = tf.strings or {}
  tf.io = tf.io or {}

  -- tf.strings.join(inputs, separator, name | {separator=, name=}): element
  -- by element; inputs are scalars or of one shape.
  local JOIN_OPTIONS = {"separator", "name"}
  function tf.strings.join(inputs, ...)
    local opts = args.options("tf.strings.join", JOIN_OPTIONS, ...)
    if not args.is_plain(inputs) or #inputs == 0 then
      fail("tf.strings.join: inputs must be a non-empty list of string tensors, got " .. args.describe(inputs))
    end
    local parts = {}
    for i, x in ipairs(inputs) do parts[i] = strings(x) end
    return G.op{"StringJoin", inputs = parts,
                attrs = {separator = check_string(opts.separator or "", "tf.strings.join", "separator")},
                name = opts.name}
  end

  -- tf.strings.split(source, sep, {maxsplit=, name=}): a vector of strings
  -- split at sep (nil or "": at runs of whitespace, as Python's str.split);
  -- returns the pieces as a tf.SparseTensor (indices, values, dense_shape).
  local SPLIT_OPTIONS = {"sep", "maxsplit", "name"}
  function tf.strings.split(source, ...)
    local opts = args.options("tf.strings.split", SPLIT_OPTIONS, ...)
    local maxsplit = opts.maxsplit or -1
    args.int_arg(maxsplit, "tf.strings.split", "maxsplit")
    local indices, values, shape = G.op{"StringSplitV2", inputs = {strings(source), strings(opts.sep or "")},
                                        attrs = {maxsplit = attr.int(maxsplit)}, name = opts.name}
    return tf.SparseTensor(indices, values, shape)
  end

  -- tf.strings.length(input, {unit = "BYTE" | "UTF8_CHAR", name=}): int32.
  local LENGTH_OPTIONS = {"name", "unit"}
  function tf.strings.length(input, ...)
    local opts = args.options("tf.strings.length", LENGTH_OPTIONS, ...)
    return G.op{"StringLength", inputs = {strings(input)},
                attrs = {unit = check_string(opts.unit or "BYTE", "tf.strings.length", "unit")}, name = opts.name}
  end

  -- tf.strings.substr(input, pos, len, name | {name=}): bytes [pos, pos + len)
  -- of each string; pos and len are int32 (Lua numbers) or int64 tensors.
  function tf.strings.substr(input, pos, len, name)
    local p = G.is_tensor(pos) and pos or G.convert(pos, core.dtypes.int32)
    local l = G.convert(len, p.dtype)
    return G.op{"Substr", inputs = {strings(input), p, l}, attrs = {unit = "BYTE"},
                name = name_of(name, "tf.strings.substr")}
  end

  -- tf.strings.to_number(input, out_type, name | {out_type=, name=}): float32 unless told.
  local TO_NUMBER_OPTIONS = {"out_type", "name"}
  function tf.strings.to_number(input, ...)
    local opts = args.options("tf.strings.to_number", TO_NUMBER_OPTIONS, ...)
    local out_type = core.as_dtype(opts.out_type or core.dtypes.float32, "tf.strings.to_number")
    return G.op{"StringToNumber", inputs = {strings(input)}, attrs = {out_type = out_type}, name = opts.name}
  end

  -- tf.as_string(input, {precision=, scientific=, shortest=, width=, fill=, name=}).
  local AS_STRING_OPTIONS = {"precision", "scientific", "shortest", "width", "fill", "name"}
  function tf.strings.as_string(input, ...)
    local opts = args.options("tf.strings.as_string", AS_STRING_OPTIONS, ...)
    for _, k in ipairs({"precision", "width"}) do
      if opts[k] ~= nil then args.int_arg(opts[k], "tf.strings.as_string", k) end
    end
    return G.op{"AsString", inputs = {G.convert(input)},
                attrs = {precision = attr.int(opts.precision or -1), width = attr.int(opts.width or -1),
                         scientific = args.check_bool(opts.scientific, "tf.strings.as_string", "scientific") or false,
                         shortest = args.check_bool(opts.shortest, "tf.strings.as_string", "shortest") or false,
                         fill = check_string(opts.fill or "", "tf.strings.as_string", "fill")},
                name = opts.name}
  end

  -- tf.strings.regex_replace(input, pattern, rewrite, {replace_global=, name=}):
  -- POSIX extended regular expressions; \1 ... \9 in rewrite insert groups.
  local REGEX_OPTIONS = {"replace_global", "name"}
  function tf.strings.regex_replace(input, pattern, rewrite, ...)
    local opts = args.options("tf.strings.regex_replace", REGEX_OPTIONS, ...)
    local global = opts.replace_global
    if global == nil then global = true end
    return G.op{"RegexReplace", inputs = {strings(input), strings(pattern), strings(rewrite)},
                attrs = {replace_global = args.check_bool(global, "tf.strings.regex_replace", "replace_global")},
                name = opts.name}
  end

  -- tf.io.decode_raw(bytes, out_type, {little_endian=, name=}): each string's
  -- bytes as numbers of out_type, along a new last dim.
  local DECODE_RAW_OPTIONS = {"little_endian", "name"}
  function tf.io.decode_raw(bytes, out_type, ...)
    local opts = args.options("tf.io.decode_raw", DECODE_RAW_OPTIONS, ...)
    local little = opts.little_endian
    if little == nil then little = true end
    return G.op{"DecodeRaw", inputs = {strings(bytes)},
                attrs = {out_type = core.as_dtype(out_type, "tf.io.decode_raw"),
                         little_endian = args.check_bool(little, "tf.io.decode_raw", "little_endian")},
                name = opts.name}
  end

  -- tf.io.decode_csv(records, record_defaults, {field_delim=, use_quote_delim=,
  -- na_value=, select_cols=, name=}): one tensor per column, returned as a
  -- list. A default is a list of one value ({0}, {"x"}: the column's dtype
  -- and its value where a field is empty) or an empty list of a dtype
  -- ({tf.int32}: the column is required), or a tensor.
  local CSV_OPTIONS = {"field_delim", "use_quote_delim", "na_value", "select_cols", "name"}
  function tf.io.decode_csv(records, record_defaults, ...)
    local opts = args.options("tf.io.decode_csv", CSV_OPTIONS, ...)
    if not args.is_plain(record_defaults) or #record_defaults == 0 then
      fail("tf.io.decode_csv: record_defaults must be a non-empty list, got " .. args.describe(record_defaults))
    end
    local inputs = {strings(records)}
    for i, d in ipairs(record_defaults) do
      if args.is_plain(d) and #d == 1 and getmetatable(d[1]) == core.DType then
        inputs[i + 1] = ops.zeros({0}, d[1])
      elseif args.is_plain(d) and #d == 1 and type(d[1]) == "number" then
        inputs[i + 1] = G.convert(d, core.dtypes.float32)
      else
        inputs[i + 1] = G.convert(d)
      end
    end
    local quote = opts.use_quote_delim
    if quote == nil then quote = true end
    local attrs = {field_delim = check_string(opts.field_delim or ",", "tf.io.decode_csv", "field_delim"),
                   use_quote_delim = args.check_bool(quote, "tf.io.decode_csv", "use_quote_delim"),
                   na_value = check_string(opts.na_value or "", "tf.io.decode_csv", "na_value")}
    if opts.select_cols then
      attrs.select_cols = attr.ints(args.int_list(opts.select_cols, "tf.io.decode_csv", "select_cols"))
    end
    return {G.op{"DecodeCSV", inputs = inputs, attrs = attrs, name = opts.name}}
  end

  -- TensorFlow 1.x's other names.
  tf.string_join, tf.substr, tf.string_to_number = tf.strings.join, tf.strings.substr, tf.strings.to_number
  tf.as_string, tf.regex_replace = tf.strings.as_string, tf.strings.regex_replace
  tf.decode_raw, tf.decode_csv = tf.io.decode_raw, tf.io.decode_csv
  ops.as_string = tf.strings.as_string
end
