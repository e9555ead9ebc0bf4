-- example.lua — tf.train.Example, Features, Feature and the lists
-- (BytesList, FloatList, Int64List), and tf.train.SequenceExample,
-- FeatureLists, FeatureList: TensorFlow's messages as Lua tables, packed and
-- parsed in C with protobuf-c (src/io/example.c); tf.io.parse_single_example /
-- parse_example with FixedLenFeature and VarLenFeature (a tf.SparseTensor,
-- ops/sparse.lua), and tf.io.parse_single_sequence_example /
-- parse_sequence_example with FixedLenSequenceFeature too.
local ffi = require("ffi")
local core = require("moonflow.core")
local args = require("moonflow.args")
local G = require("moonflow.graph")
local C, fail = core.C, core.fail

local Example, Features, Feature = {}, {}, {}
Example.__index, Features.__index, Feature.__index = Example, Features, Feature
local SequenceExample, FeatureLists, FeatureList = {}, {}, {}
SequenceExample.__index = SequenceExample

local LISTS = {bytes_list = "BytesList", float_list = "FloatList", int64_list = "Int64List"}

-- A list message: {value = {...}} (the values checked for its kind).
local function list_of(kind, t, fname)
  if not args.is_plain(t) then fail(fname .. ": expected {value = {...}}, got " .. args.describe(t)) end
  for k in pairs(t) do
    if k ~= "value" then fail(fname .. ": unknown field '" .. tostring(k) .. "' (expected value)") end
  end
  local v = t.value or {}
  if not args.is_plain(v) then fail(fname .. ": value must be a list, got " .. args.describe(v)) end
  for i, x in ipairs(v) do
    local ok = kind == "bytes_list" and type(x) == "string" or kind ~= "bytes_list" and type(x) == "number"
    if kind == "int64_list" and ok then ok = x % 1 == 0 end
    if not ok then
      fail(string.format("%s: value[%d] must be %s, got %s", fname, i,
                         kind == "bytes_list" and "a string" or kind == "int64_list" and "an integer" or "a number",
                         args.describe(x)))
    end
  end
  return {value = v}
end

local function install(tf)
  tf.train = tf.train or {}
  for kind, name in pairs(LISTS) do
    tf.train[name] = function(t) return list_of(kind, t, "tf.train." .. name) end
  end

  -- tf.train.Feature{float_list = tf.train.FloatList{value = {...}}} (one of the three lists).
  function tf.train.Feature(t)
    local fname = "tf.train.Feature"
    if not args.is_plain(t) then fail(fname .. ": expected a table with one list, got " .. args.describe(t)) end
    local kind
    for k in pairs(t) do
      if not LISTS[k] then
        fail(fname .. ": unknown field '" .. tostring(k) .. "' (expected bytes_list, float_list or int64_list)")
      end
      if kind then fail(fname .. ": a feature holds one list, got " .. kind .. " and " .. k) end
      kind = k
    end
    local f = setmetatable({}, Feature)
    if kind then f[kind] = list_of(kind, t[kind], fname) end
    return f
  end

  -- tf.train.Features{feature = {name = tf.train.Feature{...}}}.
  function tf.train.Features(t)
    local fname = "tf.train.Features"
    if not args.is_plain(t) or (t.feature ~= nil and not args.is_plain(t.feature)) then
      fail(fname .. ": expected {feature = {name = tf.train.Feature{...}}}, got " .. args.describe(t))
    end
    local feature = {}
    for k, v in pairs(t.feature or {}) do
      if type(k) ~= "string" then fail(fname .. ": feature names must be strings, got " .. args.describe(k)) end
      feature[k] = getmetatable(v) == Feature and v or tf.train.Feature(v)
    end
    return setmetatable({feature = feature}, Features)
  end

  -- tf.train.Example{features = tf.train.Features{...}}.
  tf.train.Example = setmetatable({}, {__call = function(_, t)
    t = t or {}
    if not args.is_plain(t) then fail("tf.train.Example: expected {features = ...}, got " .. args.describe(t)) end
    local features = t.features
    if getmetatable(features) ~= Features then features = tf.train.Features(features or {}) end
    return setmetatable({features = features}, Example)
  end})

  -- Sets feature key of mf_example e to Feature f's values.
  local function set_feature(e, key, f)
    local code = 0
    if f.float_list then
      local v = f.float_list.value
      code = C.mf_example_set_floats(e, key, ffi.new("float[?]", #v + 1, v), #v, core.status)
    elseif f.int64_list then
      local v = f.int64_list.value
      code = C.mf_example_set_int64s(e, key, ffi.new("int64_t[?]", #v + 1, v), #v, core.status)
    elseif f.bytes_list then
      local v = f.bytes_list.value
      local ptrs, lens = ffi.new("const char*[?]", #v + 1), ffi.new("size_t[?]", #v + 1)
      for i, x in ipairs(v) do ptrs[i - 1], lens[i - 1] = x, #x end
      code = C.mf_example_set_bytes(e, key, ptrs, lens, #v, core.status)
    else  -- a feature of no kind
      code = C.mf_example_set_empty(e, key, core.status)
    end
    if code ~= 0 then core.check_here() end
  end

  -- Sets the features of Features t on e, in sorted name order.
  local function set_features(e, t)
    local names = {}
    for name in pairs(t.feature) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do set_feature(e, name, t.feature[name]) end
  end

  -- Feature i of mf_example e as a tf.train.Feature.
  local len = ffi.new("size_t[1]")
  local function feature_of(e, i)
    local kind, n = tonumber(C.mf_example_kind(e, i)), tonumber(C.mf_example_count(e, i))
    local v, f = {}, setmetatable({}, Feature)
    if kind == C.MF_FEATURE_FLOATS then
      local p = C.mf_example_floats(e, i)
      for j = 1, n do v[j] = p[j - 1] end
      f.float_list = {value = v}
    elseif kind == C.MF_FEATURE_INT64S then
      local p = C.mf_example_int64s(e, i)
      for j = 1, n do v[j] = tonumber(p[j - 1]) end
      f.int64_list = {value = v}
    elseif kind == C.MF_FEATURE_BYTES then
      for j = 1, n do
        local p = C.mf_example_bytes(e, i, j - 1, len)
        v[j] = ffi.string(p, len[0])
      end
      f.bytes_list = {value = v}
    end
    return f
  end

  -- The features of mf_example e as tf.train.Features.
  local function features_of(e)
    local feature = {}
    for i = 0, C.mf_example_num_features(e) - 1 do feature[ffi.string(C.mf_example_key(e, i))] = feature_of(e, i) end
    return setmetatable({feature = feature}, Features)
  end

  -- The wire bytes an mf_*_serialize call (given out and n) writes.
  local function serialized(serialize, msg)
    local out, n = ffi.new("char*[1]"), ffi.new("size_t[1]")
    if serialize(msg, out, n, core.status) ~= 0 then core.check_here() end
    local bytes = ffi.string(out[0], n[0])
    C.mf_free_bytes(out[0])
    return bytes
  end

  -- ex:SerializeToString(): the wire bytes, features in sorted name order.
  function Example:SerializeToString()
    local e = ffi.gc(C.mf_example_new(), C.mf_example_free)
    if e == nil then fail("tf.train.Example:SerializeToString: out of memory") end
    set_features(e, self.features)
    return serialized(C.mf_example_serialize, e)
  end

  -- tf.train.Example.FromString(bytes): the message parsed.
  function tf.train.Example.FromString(bytes)
    if type(bytes) ~= "string" then
      fail("tf.train.Example.FromString: expected a string, got " .. args.describe(bytes))
    end
    local e = C.mf_example_parse(bytes, #bytes, core.status)
    if e == nil then core.check_here() end
    return setmetatable({features = features_of(ffi.gc(e, C.mf_example_free))}, Example)
  end

  -- tf.train.FeatureList{feature = {tf.train.Feature{...}, ...}}: one feature per step.
  function tf.train.FeatureList(t)
    local fname = "tf.train.FeatureList"
    if not args.is_plain(t) or (t.feature ~= nil and not args.is_plain(t.feature)) then
      fail(fname .. ": expected {feature = {tf.train.Feature{...}, ...}}, got " .. args.describe(t))
    end
    local feature = {}
    for k in pairs(t.feature or {}) do
      if type(k) ~= "number" or k % 1 ~= 0 or k < 1 or k > #t.feature then
        fail(fname .. ": feature must be a list of features, got key " .. args.describe(k))
      end
    end
    for i, v in ipairs(t.feature or {}) do feature[i] = getmetatable(v) == Feature and v or tf.train.Feature(v) end
    return setmetatable({feature = feature}, FeatureList)
  end

  -- tf.train.FeatureLists{feature_list = {name = tf.train.FeatureList{...}}}.
  function tf.train.FeatureLists(t)
    local fname = "tf.train.FeatureLists"
    if not args.is_plain(t) or (t.feature_list ~= nil and not args.is_plain(t.feature_list)) then
      fail(fname .. ": expected {feature_list = {name = tf.train.FeatureList{...}}}, got " .. args.describe(t))
    end
    local lists = {}
    for k, v in pairs(t.feature_list or {}) do
      if type(k) ~= "string" then fail(fname .. ": feature list names must be strings, got " .. args.describe(k)) end
      lists[k] = getmetatable(v) == FeatureList and v or tf.train.FeatureList(v)
    end
    return setmetatable({feature_list = lists}, FeatureLists)
  end

  -- tf.train.SequenceExample{context = tf.train.Features{...}, feature_lists = tf.train.FeatureLists{...}}.
  tf.train.SequenceExample = setmetatable({}, {__call = function(_, t)
    t = t or {}
    local fname = "tf.train.SequenceExample"
    if not args.is_plain(t) then fail(fname .. ": expected {context =, feature_lists =}, got " .. args.describe(t)) end
    for k in pairs(t) do
      if k ~= "context" and k ~= "feature_lists" then
        fail(fname .. ": unknown field '" .. tostring(k) .. "' (expected context or feature_lists)")
      end
    end
    local context, lists = t.context, t.feature_lists
    if getmetatable(context) ~= Features then context = tf.train.Features(context or {}) end
    if getmetatable(lists) ~= FeatureLists then lists = tf.train.FeatureLists(lists or {}) end
    return setmetatable({context = context, feature_lists = lists}, SequenceExample)
  end})

  -- se:SerializeToString(): the wire bytes, context features and feature lists in sorted name order.
  function SequenceExample:SerializeToString()
    local se = ffi.gc(C.mf_sequence_example_new(), C.mf_sequence_example_free)
    if se == nil then fail("tf.train.SequenceExample:SerializeToString: out of memory") end
    set_features(C.mf_sequence_example_context(se), self.context)
    local names = {}
    for name in pairs(self.feature_lists.feature_list) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
      local steps = C.mf_sequence_example_add_list(se, name, core.status)
      if steps == nil then core.check_here() end
      for j, f in ipairs(self.feature_lists.feature_list[name].feature) do set_feature(steps, tostring(j - 1), f) end
    end
    return serialized(C.mf_sequence_example_serialize, se)
  end

  -- tf.train.SequenceExample.FromString(bytes): the message parsed.
  function tf.train.SequenceExample.FromString(bytes)
    if type(bytes) ~= "string" then
      fail("tf.train.SequenceExample.FromString: expected a string, got " .. args.describe(bytes))
    end
    local se = C.mf_sequence_example_parse(bytes, #bytes, core.status)
    if se == nil then core.check_here() end
    se = ffi.gc(se, C.mf_sequence_example_free)
    local lists = {}
    for i = 0, C.mf_sequence_example_num_lists(se) - 1 do
      local steps, feature = C.mf_sequence_example_list(se, i), {}
      for j = 0, C.mf_example_num_features(steps) - 1 do feature[j + 1] = feature_of(steps, j) end
      lists[ffi.string(C.mf_sequence_example_list_key(se, i))] = setmetatable({feature = feature}, FeatureList)
    end
    return setmetatable({context = features_of(C.mf_sequence_example_context(se)),
                         feature_lists = setmetatable({feature_list = lists}, FeatureLists)}, SequenceExample)
  end

  -- Feature specs for parsing.
  local FixedLen, VarLen, FixedLenSequence = {}, {}, {}
  function tf.io.FixedLenFeature(shape, dtype, default_value)
    return setmetatable({shape = args.int_list(shape, "tf.io.FixedLenFeature", "shape"),
                         dtype = core.as_dtype(dtype, "tf.io.FixedLenFeature"), default_value = default_value},
                        FixedLen)
  end
  function tf.io.VarLenFeature(dtype)
    return setmetatable({dtype = core.as_dtype(dtype, "tf.io.VarLenFeature")}, VarLen)
  end
  -- tf.io.FixedLenSequenceFeature(shape, dtype, allow_missing, default_value):
  -- each step of a feature list has `shape`; allow_missing lets the list be absent (no steps).
  function tf.io.FixedLenSequenceFeature(shape, dtype, allow_missing, default_value)
    local fname = "tf.io.FixedLenSequenceFeature"
    if allow_missing ~= nil and type(allow_missing) ~= "boolean" then
      fail(fname .. ": allow_missing must be a boolean, got " .. args.describe(allow_missing))
    end
    return setmetatable({shape = args.int_list(shape, fname, "shape"), dtype = core.as_dtype(dtype, fname),
                         allow_missing = allow_missing == true, default_value = default_value}, FixedLenSequence)
  end

  local KINDS = {[FixedLen] = "tf.io.FixedLenFeature", [VarLen] = "tf.io.VarLenFeature",
                 [FixedLenSequence] = "tf.io.FixedLenSequenceFeature"}

  -- The specs of `features` (a table of name -> VarLenFeature or the
  -- `dense` kind) split by kind, names sorted: {sparse_keys, sparse_types,
  -- dense_keys, dense_specs, dense_shapes (each key's rank, then its dims)}.
  local function split(fname, features, what, dense)
    if features == nil then features = {} end
    if not args.is_plain(features) then
      fail(string.format("%s: %s must be a table of name = %s or tf.io.VarLenFeature", fname, what, KINDS[dense]))
    end
    local names = {}
    for k in pairs(features) do
      if type(k) ~= "string" then fail(fname .. ": feature names must be strings, got " .. args.describe(k)) end
      names[#names + 1] = k
    end
    table.sort(names)
    local r = {sparse_keys = {}, sparse_types = {}, dense_keys = {}, dense_specs = {}, dense_shapes = {}}
    for _, k in ipairs(names) do
      local f = features[k]
      local kind = getmetatable(f)
      if kind ~= VarLen and kind ~= dense then
        fail(string.format("%s: %s '%s' must be a %s or tf.io.VarLenFeature, got %s", fname, what, k, KINDS[dense],
                           KINDS[kind] or args.describe(f)))
      end
      local dtype = f.dtype
      if dtype ~= core.dtypes.float32 and dtype ~= core.dtypes.int64 and dtype ~= core.dtypes.string then
        fail(fname .. ": feature '" .. k .. "' has dtype " .. tostring(dtype and dtype.name) ..
             "; Example features are float32, int64 or string")
      end
      if kind == VarLen then
        r.sparse_keys[#r.sparse_keys + 1] = k
        r.sparse_types[#r.sparse_types + 1] = tonumber(dtype.enum)
      else
        r.dense_keys[#r.dense_keys + 1] = k
        r.dense_specs[#r.dense_specs + 1] = f
        r.dense_shapes[#r.dense_shapes + 1] = #f.shape
        for _, d in ipairs(f.shape) do r.dense_shapes[#r.dense_shapes + 1] = d end
      end
    end
    return r
  end

  -- The default tensor of FixedLenFeature f (no elements: the feature is required).
  local function default_of(f)
    if f.default_value == nil then return tf.constant({}, {dtype = f.dtype, shape = {0}}) end
    if G.is_tensor(f.default_value) then return tf.reshape(f.default_value, f.shape) end
    -- a Lua value: one value fills the shape, as TensorFlow broadcasts it
    return tf.constant(f.default_value, {dtype = f.dtype, shape = f.shape})
  end

  local function keys(list) return tf.constant(list, {dtype = core.dtypes.string, shape = {#list}}) end

  -- outs[first + i - 1 ...] as name -> tf.SparseTensor (split's sparse keys) into result;
  -- returns the next output's position.
  local function sparse_results(result, outs, first, spec)
    local n = #spec.sparse_keys
    for i, k in ipairs(spec.sparse_keys) do
      result[k] = tf.SparseTensor(outs[first + i - 1], outs[first + n + i - 1], outs[first + 2 * n + i - 1])
    end
    return first + 3 * n
  end
  local function dense_results(result, outs, first, spec)
    for i, k in ipairs(spec.dense_keys) do result[k] = outs[first + i - 1] end
    return first + #spec.dense_keys
  end

  -- Builds ParseExample over serialized (a string scalar or vector): a table
  -- of feature name -> dense tensor (FixedLenFeature) or tf.SparseTensor (VarLenFeature).
  local function parse(fname, serialized, features, name)
    local spec = split(fname, features, "feature", FixedLen)
    local inputs = {G.convert(serialized, core.dtypes.string), keys(spec.sparse_keys), keys(spec.dense_keys)}
    for i, f in ipairs(spec.dense_specs) do inputs[3 + i] = default_of(f) end
    local outs = {G.op{"ParseExample", inputs = inputs,
                       attrs = {sparse_types = G.attr.ints(spec.sparse_types),
                                dense_shapes = G.attr.ints(spec.dense_shapes)},
                       name = name}}
    local result = {}
    dense_results(result, outs, sparse_results(result, outs, 1, spec), spec)
    return result
  end

  -- tf.io.parse_single_example(serialized, features, name): one Example (a string scalar).
  function tf.io.parse_single_example(serialized, features, name)
    return parse("tf.io.parse_single_example", serialized, features, args.name_of(name, "tf.io.parse_single_example"))
  end
  -- tf.io.parse_example(serialized, features, name): a vector of Examples; dense values gain a batch dim.
  function tf.io.parse_example(serialized, features, name)
    return parse("tf.io.parse_example", serialized, features, args.name_of(name, "tf.io.parse_example"))
  end

  -- Builds ParseSequenceExample over serialized: the context's features, the
  -- feature lists' and the dense feature lists' lengths (name -> int64 tensor).
  local function parse_sequence(fname, serialized, context_features, sequence_features, name)
    local context = split(fname, context_features, "context feature", FixedLen)
    local lists = split(fname, sequence_features, "sequence feature", FixedLenSequence)
    local dense_types, allow_missing = {}, {}
    for i, f in ipairs(lists.dense_specs) do
      if f.default_value ~= nil then  -- TensorFlow's words: only parse_example pads with it
        fail(string.format("%s: Value feature_list.dense_defaults[%s] must be None", fname, lists.dense_keys[i]))
      end
      dense_types[i] = tonumber(f.dtype.enum)
      allow_missing[i] = f.allow_missing and 1 or 0
    end
    local inputs = {G.convert(serialized, core.dtypes.string), keys(context.sparse_keys), keys(context.dense_keys),
                    keys(lists.sparse_keys), keys(lists.dense_keys)}
    for i, f in ipairs(context.dense_specs) do inputs[5 + i] = default_of(f) end
    local outs = {G.op{"ParseSequenceExample", inputs = inputs, name = name, attrs = {
      context_sparse_types = G.attr.ints(context.sparse_types), context_dense_shapes = G.attr.ints(context.dense_shapes),
      feature_list_sparse_types = G.attr.ints(lists.sparse_types), feature_list_dense_types = G.attr.ints(dense_types),
      feature_list_dense_shapes = G.attr.ints(lists.dense_shapes),
      feature_list_dense_allow_missing = G.attr.ints(allow_missing)}}}
    local context_result, list_result, lengths = {}, {}, {}
    local at = dense_results(context_result, outs, sparse_results(context_result, outs, 1, context), context)
    at = dense_results(list_result, outs, sparse_results(list_result, outs, at, lists), lists)
    dense_results(lengths, outs, at, lists)
    return context_result, list_result, lengths
  end

  -- tf.io.parse_single_sequence_example(serialized, context_features,
  -- sequence_features, example_name, name): one SequenceExample (a string
  -- scalar); returns the context's features and the feature lists' (dense
  -- ones [steps, shape...], sparse ones indexed by step and value).
  function tf.io.parse_single_sequence_example(serialized, context_features, sequence_features, example_name, name)
    local fname = "tf.io.parse_single_sequence_example"
    if example_name ~= nil and type(example_name) ~= "string" then
      fail(fname .. ": example_name must be a string, got " .. args.describe(example_name))
    end
    local context, lists = parse_sequence(fname, serialized, context_features, sequence_features,
                                          args.name_of(name, fname))
    return context, lists
  end
  -- tf.io.parse_sequence_example(serialized, context_features,
  -- sequence_features, example_names, name): a vector of SequenceExamples;
  -- everything gains a batch dim, dense feature lists are padded to the
  -- longest with zeros ("" for strings), and a third table gives each dense
  -- feature list's lengths.
  function tf.io.parse_sequence_example(serialized, context_features, sequence_features, example_names, name)
    local fname = "tf.io.parse_sequence_example"
    if example_names ~= nil and not args.is_plain(example_names) then
      fail(fname .. ": example_names must be a list of strings, got " .. args.describe(example_names))
    end
    return parse_sequence(fname, serialized, context_features, sequence_features, args.name_of(name, fname))
  end
  tf.parse_single_example, tf.parse_example = tf.io.parse_single_example, tf.io.parse_example
  tf.FixedLenFeature, tf.VarLenFeature = tf.io.FixedLenFeature, tf.io.VarLenFeature
  tf.FixedLenSequenceFeature = tf.io.FixedLenSequenceFeature
  tf.parse_single_sequence_example = tf.io.parse_single_sequence_example
end

return install
