-- ops/strings.lua — tf.strings (join, reduce_join, split, TF1's string_split,
-- length, substr, lower, upper, strip, to_number, as_string, regex_replace,
-- regex_full_match, the hash buckets) and the parsing ops tf.io.decode_raw and
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

  -- tf.strings.reduce_join(inputs, axis, keepdims, separator, name | {...}):
  -- joins along the axes listed (nil: all), the first listed varying fastest.
  -- TF1's tf.reduce_join spells keepdims keep_dims and axis reduction_indices.
  local REDUCE_JOIN_OPTIONS = {"axis", "keepdims", "separator", "name", "keep_dims", "reduction_indices"}
  function tf.strings.reduce_join(inputs, ...)
    local fname = "tf.strings.reduce_join"
    local opts = args.options(fname, REDUCE_JOIN_OPTIONS, ...)
    local axis = opts.axis
    if axis == nil then axis = opts.reduction_indices end
    local keepdims = opts.keepdims
    if keepdims == nil then keepdims = opts.keep_dims end
    local attrs = {keep_dims = args.check_bool(keepdims, fname, "keepdims") or false,
                   separator = check_string(opts.separator or "", fname, "separator")}
    if axis ~= nil then attrs.reduction_indices = attr.ints(args.int_list(axis, fname, "axis", true)) end
    return G.op{"ReduceJoin", inputs = {strings(inputs)}, attrs = attrs, name = opts.name}
  end

  -- Splits return a tf.SparseTensor (indices, values, dense_shape); moonflow
  -- has no RaggedTensor.
  local function check_sparse_result(result_type, fname)
    if result_type ~= nil and result_type ~= "SparseTensor" then
      fail(fname .. ': result_type must be "SparseTensor" (moonflow has no RaggedTensor), got ' ..
           args.describe(result_type))
    end
  end

  -- tf.strings.split(source, sep, {maxsplit=, result_type=, name=}): a vector
  -- of strings split at sep (nil or "": at runs of whitespace, as Python's
  -- str.split); returns the pieces as a tf.SparseTensor.
  local SPLIT_OPTIONS = {"sep", "maxsplit", "result_type", "name"}
  function tf.strings.split(source, ...)
    local opts = args.options("tf.strings.split", SPLIT_OPTIONS, ...)
    check_sparse_result(opts.result_type, "tf.strings.split")
    local maxsplit = opts.maxsplit or -1
    args.int_arg(maxsplit, "tf.strings.split", "maxsplit")
    local indices, values, shape = G.op{"StringSplitV2", inputs = {strings(source), strings(opts.sep or "")},
                                        attrs = {maxsplit = attr.int(maxsplit)}, name = opts.name}
    return tf.SparseTensor(indices, values, shape)
  end

  -- tf.string_split(source, sep, {skip_empty=, delimiter=, result_type=, name=}),
  -- TensorFlow 1's: each byte of sep (alias delimiter, " " unless told) ends
  -- a piece; empty pieces go unless skip_empty is false; "" splits into
  -- bytes. Returns a tf.SparseTensor.
  local STRING_SPLIT_OPTIONS = {"sep", "skip_empty", "delimiter", "result_type", "name"}
  function tf.string_split(source, ...)
    local fname = "tf.string_split"
    local opts = args.options(fname, STRING_SPLIT_OPTIONS, ...)
    check_sparse_result(opts.result_type, fname)
    if opts.sep ~= nil and opts.delimiter ~= nil then fail(fname .. ": give sep or delimiter, not both") end
    local sep = check_string(opts.sep or opts.delimiter or " ", fname, "sep")
    local skip_empty = args.check_bool(opts.skip_empty, fname, "skip_empty")
    if skip_empty == nil then skip_empty = true end
    local indices, values, shape = G.op{"StringSplit", inputs = {strings(source), strings(sep)},
                                        attrs = {skip_empty = skip_empty}, name = opts.name}
    return tf.SparseTensor(indices, values, shape)
  end

  -- tf.strings.lower(input, encoding, name | {encoding=, name=}) and upper:
  -- ASCII letters (encoding ""; "utf-8" is refused). strip: ASCII whitespace
  -- off both ends.
  local CASE_OPTIONS = {"encoding", "name"}
  for fname, op in pairs({lower = "StringLower", upper = "StringUpper"}) do
    tf.strings[fname] = function(input, ...)
      local opts = args.options("tf.strings." .. fname, CASE_OPTIONS, ...)
      return G.op{op, inputs = {strings(input)},
                  attrs = {encoding = check_string(opts.encoding or "", "tf.strings." .. fname, "encoding")},
                  name = opts.name}
    end
  end
  function tf.strings.strip(input, name)
    return G.op{"StringStrip", inputs = {strings(input)}, name = name_of(name, "tf.strings.strip")}
  end

  -- tf.strings.to_hash_bucket_fast(input, num_buckets, name): int64 buckets
  -- from FarmHash's Fingerprint64, TensorFlow's numbers. to_hash_bucket_strong
  -- (input, num_buckets, key, name): SipHash-2-4 under key, two integers.
  function tf.strings.to_hash_bucket_fast(input, num_buckets, name)
    return G.op{"StringToHashBucketFast", inputs = {strings(input)},
                attrs = {num_buckets = attr.int(args.int_arg(num_buckets, "tf.strings.to_hash_bucket_fast",
                                                             "num_buckets"))},
                name = name_of(name, "tf.strings.to_hash_bucket_fast")}
  end
  function tf.strings.to_hash_bucket_strong(input, num_buckets, key, name)
    local fname = "tf.strings.to_hash_bucket_strong"
    local k = args.int_list(key, fname, "key")
    if #k ~= 2 then fail(fname .. ": key must be a list of 2 integers, got " .. #k) end
    return G.op{"StringToHashBucketStrong", inputs = {strings(input)},
                attrs = {num_buckets = attr.int(args.int_arg(num_buckets, fname, "num_buckets")), key = attr.ints(k)},
                name = name_of(name, fname)}
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

  -- tf.strings.regex_full_match(input, pattern, name): bool, whether each
  -- whole string matches (POSIX extended expressions, '.' not matching a newline).
  function tf.strings.regex_full_match(input, pattern, name)
    return G.op{"RegexFullMatch", inputs = {strings(input), strings(pattern)},
                name = name_of(name, "tf.strings.regex_full_match")}
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
  tf.reduce_join = tf.strings.reduce_join
  tf.string_to_hash_bucket_fast = tf.strings.to_hash_bucket_fast
  tf.string_to_hash_bucket_strong = tf.strings.to_hash_bucket_strong
  ops.as_string = tf.strings.as_string
end
