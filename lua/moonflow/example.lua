-- example.lua — tf.train.Example, Features, Feature and the lists
-- (BytesList, FloatList, Int64List): TensorFlow's messages as Lua tables,
-- packed and parsed in C with protobuf-c (src/io/example.c); and
-- tf.io.parse_single_example / parse_example with FixedLenFeature and
-- VarLenFeature (a tf.SparseTensor, ops/sparse.lua).
local ffi = require("ffi")
local core = require("moonflow.core")
local args = require("moonflow.args")
local G = require("moonflow.graph")
local C, fail = core.C, core.fail

local Example, Features, Feature = {}, {}, {}
Example.__index, Features.__index, Feature.__index = Example, Features, Feature

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

  -- ex:SerializeToString(): the wire bytes, features in sorted name order.
  function Example:SerializeToString()
    local e = ffi.gc(C.mf_example_new(), C.mf_example_free)
    if e == nil then fail("tf.train.Example:SerializeToString: out of memory") end
    local names = {}
    for name in pairs(self.features.feature) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
      local f = self.features.feature[name]
      local code = 0
      if f.float_list then
        local v = f.float_list.value
        code = C.mf_example_set_floats(e, name, ffi.new("float[?]", #v + 1, v), #v, core.status)
      elseif f.int64_list then
        local v = f.int64_list.value
        code = C.mf_example_set_int64s(e, name, ffi.new("int64_t[?]", #v + 1, v), #v, core.status)
      elseif f.bytes_list then
        local v = f.bytes_list.value
        local ptrs, lens = ffi.new("const char*[?]", #v + 1), ffi.new("size_t[?]", #v + 1)
        for i, s in ipairs(v) do ptrs[i - 1], lens[i - 1] = s, #s end
        code = C.mf_example_set_bytes(e, name, ptrs, lens, #v, core.status)
      end
      if code ~= 0 then core.check_here() end
    end
    local out, n = ffi.new("char*[1]"), ffi.new("size_t[1]")
    if C.mf_example_serialize(e, out, n, core.status) ~= 0 then core.check_here() end
    local bytes = ffi.string(out[0], n[0])
    C.mf_free_bytes(out[0])
    return bytes
  end

  -- tf.train.Example.FromString(bytes): the message parsed.
  function tf.train.Example.FromString(bytes)
    if type(bytes) ~= "string" then
      fail("tf.train.Example.FromString: expected a string, got " .. args.describe(bytes))
    end
    local e = C.mf_example_parse(bytes, #bytes, core.status)
    if e == nil then core.check_here() end
    e = ffi.gc(e, C.mf_example_free)
    local feature = {}
    local len = ffi.new("size_t[1]")
    for i = 0, C.mf_example_num_features(e) - 1 do
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
      feature[ffi.string(C.mf_example_key(e, i))] = f
    end
    return setmetatable({features = setmetatable({feature = feature}, Features)}, Example)
  end

  -- Feature specs for parsing.
  local FixedLen, VarLen = {}, {}
  function tf.io.FixedLenFeature(shape, dtype, default_value)
    return setmetatable({shape = args.int_list(shape, "tf.io.FixedLenFeature", "shape"),
                         dtype = core.as_dtype(dtype, "tf.io.FixedLenFeature"), default_value = default_value},
                        FixedLen)
  end
  function tf.io.VarLenFeature(dtype)
    return setmetatable({dtype = core.as_dtype(dtype, "tf.io.VarLenFeature")}, VarLen)
  end

  -- Builds ParseExample over serialized (a string scalar or vector): a table
  -- of feature name -> dense tensor (FixedLenFeature) or tf.SparseTensor (VarLenFeature).
  local function parse(fname, serialized, features, name)
    if not args.is_plain(features) then
      fail(fname .. ": features must be a table of name = tf.io.FixedLenFeature or tf.io.VarLenFeature")
    end
    local names = {}
    for k in pairs(features) do
      if type(k) ~= "string" then fail(fname .. ": feature names must be strings, got " .. args.describe(k)) end
      names[#names + 1] = k
    end
    table.sort(names)
    local sparse_keys, sparse_types, dense_keys, dense_shapes, defaults = {}, {}, {}, {}, {}
    for _, k in ipairs(names) do
      local f = features[k]
      local dtype = f.dtype
      if dtype ~= core.dtypes.float32 and dtype ~= core.dtypes.int64 and dtype ~= core.dtypes.string then
        fail(fname .. ": feature '" .. k .. "' has dtype " .. tostring(dtype and dtype.name) ..
             "; Example features are float32, int64 or string")
      end
      if getmetatable(f) == VarLen then
        sparse_keys[#sparse_keys + 1] = k
        sparse_types[#sparse_types + 1] = tonumber(dtype.enum)
      elseif getmetatable(f) == FixedLen then
        dense_keys[#dense_keys + 1] = k
        dense_shapes[#dense_shapes + 1] = #f.shape
        for _, d in ipairs(f.shape) do dense_shapes[#dense_shapes + 1] = d end
        if f.default_value == nil then  -- no elements: the feature is required
          defaults[#defaults + 1] = tf.constant({}, {dtype = dtype, shape = {0}})
        elseif G.is_tensor(f.default_value) then
          defaults[#defaults + 1] = tf.reshape(f.default_value, f.shape)
        else  -- a Lua value: one value fills the shape, as TensorFlow broadcasts it
          defaults[#defaults + 1] = tf.constant(f.default_value, {dtype = dtype, shape = f.shape})
        end
      else
        fail(fname .. ": feature '" .. k .. "' must be a tf.io.FixedLenFeature or tf.io.VarLenFeature")
      end
    end
    local strings = core.dtypes.string
    local inputs = {G.convert(serialized, strings), tf.constant(sparse_keys, {dtype = strings, shape = {#sparse_keys}}),
                    tf.constant(dense_keys, {dtype = strings, shape = {#dense_keys}})}
    for i, d in ipairs(defaults) do inputs[3 + i] = d end
    local outs = {G.op{"ParseExample", inputs = inputs,
                       attrs = {sparse_types = G.attr.ints(sparse_types), dense_shapes = G.attr.ints(dense_shapes)},
                       name = name}}
    local result, ns = {}, #sparse_keys
    for i, k in ipairs(sparse_keys) do result[k] = tf.SparseTensor(outs[i], outs[ns + i], outs[2 * ns + i]) end
    for i, k in ipairs(dense_keys) do result[k] = outs[3 * ns + i] end
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
  tf.parse_single_example, tf.parse_example = tf.io.parse_single_example, tf.io.parse_example
  tf.FixedLenFeature, tf.VarLenFeature = tf.io.FixedLenFeature, tf.io.VarLenFeature
end

return install
