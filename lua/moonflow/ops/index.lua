-- ops/index.lua — indexing and selection: tf.gather, gather_nd, scatter_nd,
-- pad, reverse, cumsum, cumprod, one_hot, argmax, argmin, sequence_mask, boolean_mask,
-- tf.nn.top_k, tf.nn.in_top_k and tf.nn.embedding_lookup (a composite over
-- gather).
--
-- Indices, depths and sizes given as Lua numbers or lists become int32
-- constants, as Python ints do in TensorFlow; axes, paddings and k of in_top_k
-- are Lua integers (attributes of the op).
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local attr = G.attr
local is_tensor = G.is_tensor
local dtypes = core.dtypes

local fail, options, graph_of = core.fail, args.options, G.graph_of_args
local is_integer, int_arg, int_list, check_bool = args.is_integer, args.int_arg, args.int_list, args.check_bool

-- Indices, sizes and depths: Lua values become int32 constants (G.int_convert).
local index_tensor = G.int_convert

-- A Lua number (or boolean) as one element of dtype.
local function scalar_of(v, dtype)
  if dtype == dtypes.bool and type(v) == "number" then return v ~= 0 end
  if dtype ~= dtypes.bool and type(v) == "boolean" then return v and 1 or 0 end
  return v
end

-- The value of a constant known when the graph is built: a Lua value, a
-- tf.Array, or a tf.constant's tensor; nil for any other tensor.
local function static_value(x)
  if is_tensor(x) then
    if x.op.type ~= "Const" then return nil end
    x = x.op:get_attr("value")
  end
  if Array.is(x) then return x:totable() end
  return x
end

return function(tf, ops)
  tf.nn = tf.nn or {}
  tf.math = tf.math or {}

  -- tf.gather(params, indices, validate_indices, name, axis, batch_dims) or
  -- {axis=, batch_dims=, name=}: params[..., indices, ...] along axis (0);
  -- with batch_dims = b the first b dims of params and indices are matched.
  -- An index outside the axis is an error at run time.
  function ops.gather(params, indices, ...)
    local o = options("tf.gather", {"validate_indices", "name", "axis", "batch_dims"}, ...)
    local g = graph_of(params, indices)
    return G.op{"Gather", inputs = {G.convert(params, nil, g), index_tensor(indices, g)},
                attrs = {axis = attr.int(int_arg(o.axis or 0, "tf.gather", "axis")),
                         batch_dims = attr.int(int_arg(o.batch_dims or 0, "tf.gather", "batch_dims"))},
                name = o.name}
  end

  -- tf.gather_nd(params, indices, name): indices [..., K] address the first K
  -- dims of params; the result is indices.shape[:-1] + params.shape[K:].
  function ops.gather_nd(params, indices, ...)
    local o = options("tf.gather_nd", {"name"}, ...)
    local g = graph_of(params, indices)
    return G.op{"GatherNd", inputs = {G.convert(params, nil, g), index_tensor(indices, g)}, name = o.name}
  end

  -- tf.scatter_nd(indices, updates, shape, name): zeros of shape with updates
  -- added at the index vectors (duplicates add up).
  function ops.scatter_nd(indices, updates, shape, ...)
    local o = options("tf.scatter_nd", {"name"}, ...)
    if shape == nil then fail("tf.scatter_nd: a shape is required (tf.scatter_nd(indices, updates, shape))") end
    local g = graph_of(indices, updates, shape)
    return G.op{"ScatterNd", inputs = {index_tensor(indices, g), G.convert(updates, nil, g), index_tensor(shape, g)},
                name = o.name}
  end

  -- The paddings as a flat Lua list {before0, after0, before1, ...}.
  local function flat_paddings(paddings)
    local value = static_value(paddings)
    if type(value) ~= "table" then
      fail("tf.pad: paddings must be known when the graph is built: a Lua list of {before, after} pairs, " ..
           "a tf.Array or a tf.constant, got " .. tostring(paddings))
    end
    local flat = {}
    for i, pair in ipairs(value) do
      if type(pair) ~= "table" or #pair ~= 2 or not is_integer(pair[1]) or not is_integer(pair[2]) then
        fail(string.format("tf.pad: paddings[%d] must be a {before, after} pair of integers, got %s", i,
                           tostring(pair)))
      end
      flat[#flat + 1], flat[#flat + 2] = pair[1], pair[2]
    end
    return flat
  end

  -- tf.pad(tensor, paddings, mode, name, constant_values) or {mode=,
  -- constant_values=, name=}: paddings holds a {before, after} pair per
  -- dimension; mode "CONSTANT" (default, filled with constant_values = 0),
  -- "REFLECT" (mirrored without the edge) or "SYMMETRIC" (with it).
  function ops.pad(tensor, paddings, ...)
    local o = options("tf.pad", {"mode", "name", "constant_values"}, ...)
    tensor = G.convert(tensor)
    local mode = o.mode or "CONSTANT"
    if type(mode) ~= "string" then fail("tf.pad: mode must be a string, got " .. tostring(mode)) end
    local cv = o.constant_values
    if cv ~= nil then
      local v = static_value(cv)
      if type(v) ~= "number" and type(v) ~= "boolean" then
        fail("tf.pad: constant_values must be a number known when the graph is built, got " .. tostring(cv))
      end
      cv = scalar_of(v, dtypes.float64)
      if tensor.dtype.is_integer and cv % 1 ~= 0 then
        fail(string.format("tf.pad: constant_values %s is not a whole number, but the tensor is %s", tostring(cv),
                           tensor.dtype.name))
      end
    end
    return G.op{"Pad", inputs = {tensor},
                attrs = {paddings = attr.ints(flat_paddings(paddings)), mode = mode:upper(),
                         constant_values = cv ~= nil and attr.float(cv) or nil},
                name = o.name}
  end

  -- tf.reverse(tensor, axis, name): reversed along each listed axis (a number
  -- or a list; each at most once). Also tf.reverse_v2.
  function ops.reverse(tensor, axis, ...)
    local o = options("tf.reverse", {"name"}, ...)
    if axis == nil then fail("tf.reverse: axis is required (tf.reverse(tensor, axis))") end
    return G.op{"ReverseV2", inputs = {G.convert(tensor)},
                attrs = {axis = attr.ints(int_list(axis, "tf.reverse", "axis", true))}, name = o.name}
  end
  ops.reverse_v2 = ops.reverse

  -- tf.cumsum / tf.cumprod(x, axis, exclusive, reverse, name) or {axis=,
  -- exclusive=, reverse=, name=}: running sums / products along axis (0);
  -- exclusive leaves each element out of its own, reverse runs from the end.
  for fname, op_type in pairs({cumsum = "Cumsum", cumprod = "Cumprod"}) do
    local where = "tf." .. fname
    ops[fname] = function(x, ...)
      local o = options(where, {"axis", "exclusive", "reverse", "name"}, ...)
      return G.op{op_type, inputs = {G.convert(x)},
                  attrs = {axis = attr.int(int_arg(o.axis or 0, where, "axis")),
                           exclusive = check_bool(o.exclusive, where, "exclusive") or false,
                           reverse = check_bool(o.reverse, where, "reverse") or false},
                  name = o.name}
    end
    tf.math[fname] = ops[fname]
  end

  -- tf.one_hot(indices, depth, on_value, off_value, axis, dtype, name) or
  -- {on_value=, off_value=, axis=, dtype=, name=}: on_value (1) where the
  -- new axis (-1: last) equals the index, off_value (0) elsewhere; indices
  -- outside [0, depth) give a line of off_value. The dtype is `dtype`, else
  -- that of a tensor on_value/off_value, else float32.
  function ops.one_hot(indices, depth, ...)
    local o = options("tf.one_hot", {"on_value", "off_value", "axis", "dtype", "name"}, ...)
    local g = graph_of(indices, depth, o.on_value, o.off_value)
    local dtype = o.dtype and core.as_dtype(o.dtype, "tf.one_hot")
    for _, what in ipairs({"on_value", "off_value"}) do
      local v = o[what]
      local t = is_tensor(v) and v.dtype or type(v) == "boolean" and dtypes.bool
      if t then
        if dtype and t ~= dtype then
          fail(string.format("tf.one_hot: %s is %s but dtype is %s; use tf.cast", what, t.name, dtype.name))
        end
        dtype = t
      end
    end
    dtype = dtype or dtypes.float32
    local function value(v, default)
      if v == nil then v = default end
      return G.convert(scalar_of(v, dtype), dtype, g)
    end
    return G.op{"OneHot",
                inputs = {index_tensor(indices, g), index_tensor(depth, g), value(o.on_value, 1), value(o.off_value, 0)},
                attrs = {axis = attr.int(int_arg(o.axis or -1, "tf.one_hot", "axis"))}, name = o.name}
  end

  -- tf.argmax(input, axis, name, dimension, output_type) or {axis=,
  -- output_type=, name=}: the index of the largest entry along axis (0), the
  -- first one on ties; NaN counts as the largest. output_type int64 (default)
  -- or int32. tf.argmin likewise.
  local function arg(fname, op_type)
    return function(input, ...)
      local o = options(fname, {"axis", "name", "dimension", "output_type"}, ...)
      if o.axis ~= nil and o.dimension ~= nil then
        fail(fname .. ": Cannot specify both 'axis' and 'dimension'")
      end
      local axis = o.axis
      if axis == nil then axis = o.dimension end
      return G.op{op_type, inputs = {G.convert(input)},
                  attrs = {axis = attr.int(int_arg(axis or 0, fname, "axis")),
                           output_type = o.output_type and core.as_dtype(o.output_type, fname) or dtypes.int64},
                  name = o.name}
    end
  end
  ops.argmax = arg("tf.argmax", "ArgMax")
  ops.argmin = arg("tf.argmin", "ArgMin")
  tf.math.argmax, tf.math.argmin = ops.argmax, ops.argmin

  -- tf.nn.top_k(input, k, sorted, name) or {k=, sorted=, name=} -> values,
  -- indices (int32): the k (1) largest entries of each last-axis row, largest
  -- first, ties by lower index.
  function ops.top_k(input, ...)
    local o = options("tf.nn.top_k", {"k", "sorted", "name"}, ...)
    local g = graph_of(input, o.k)
    local k = o.k
    if k == nil then k = 1 end
    if not is_tensor(k) then int_arg(k, "tf.nn.top_k", "k") end
    return G.op{"TopKV2", inputs = {G.convert(input, nil, g), index_tensor(k, g)},
                attrs = {sorted = check_bool(o.sorted, "tf.nn.top_k", "sorted") ~= false}, name = o.name}
  end
  tf.nn.top_k, tf.math.top_k = ops.top_k, ops.top_k

  -- tf.nn.in_top_k(predictions, targets, k, name): bool per row, whether the
  -- target class is among the k largest predictions (ties at the boundary
  -- count); false for a target out of range or a row with inf or nan.
  function ops.in_top_k(predictions, targets, k, ...)
    local o = options("tf.nn.in_top_k", {"name"}, ...)
    local g = graph_of(predictions, targets)
    return G.op{"InTopK", inputs = {G.convert(predictions, nil, g), index_tensor(targets, g)},
                attrs = {k = attr.int(int_arg(k, "tf.nn.in_top_k", "k"))}, name = o.name}
  end
  tf.nn.in_top_k, tf.math.in_top_k = ops.in_top_k, ops.in_top_k

  -- tf.sequence_mask(lengths, maxlen, dtype, name) or {maxlen=, dtype=,
  -- name=}: out[..., j] = j < lengths[...], of dtype (bool); maxlen defaults
  -- to the largest length.
  function ops.sequence_mask(lengths, ...)
    local o = options("tf.sequence_mask", {"maxlen", "dtype", "name"}, ...)
    local g = graph_of(lengths, o.maxlen)
    lengths = index_tensor(lengths, g)
    local maxlen = o.maxlen
    if maxlen == nil then maxlen = ops.maximum(ops.reduce_max(lengths), 0)
    else maxlen = index_tensor(maxlen, g) end
    return G.op{"SequenceMask", inputs = {lengths, maxlen},
                attrs = {dtype = o.dtype and core.as_dtype(o.dtype, "tf.sequence_mask") or dtypes.bool},
                name = o.name}
  end

  -- tf.boolean_mask(tensor, mask, name, axis) or {axis=, name=}: the entries
  -- of tensor where the bool mask is true; the mask covers the dims [axis,
  -- axis + rank(mask)) (axis 0), which become one dim of unknown size.
  function ops.boolean_mask(tensor, mask, ...)
    local o = options("tf.boolean_mask", {"name", "axis"}, ...)
    local g = graph_of(tensor, mask)
    return G.op{"BooleanMask", inputs = {G.convert(tensor, nil, g), G.convert(mask, dtypes.bool, g)},
                attrs = {axis = attr.int(int_arg(o.axis or 0, "tf.boolean_mask", "axis"))},
                name = o.name or "boolean_mask"}
  end

  -- tf.nn.embedding_lookup(params, ids, partition_strategy, name,
  -- validate_indices, max_norm) or {partition_strategy=, max_norm=, name=}:
  -- rows of params (a tensor, or a Lua list of shards split by
  -- partition_strategy "mod" (default) or "div") picked by ids; with
  -- max_norm, rows whose L2 norm exceeds it are scaled down to it.
  function tf.nn.embedding_lookup(params, ids, ...)
    local o = options("tf.nn.embedding_lookup",
                      {"partition_strategy", "name", "validate_indices", "max_norm"}, ...)
    local strategy = o.partition_strategy or "mod"
    if strategy ~= "mod" and strategy ~= "div" then
      fail("tf.nn.embedding_lookup: partition_strategy must be 'mod' or 'div', got " .. tostring(strategy))
    end
    local list = (is_tensor(params) or Array.is(params)) and {params} or params
    if type(list) ~= "table" or #list == 0 then
      fail("tf.nn.embedding_lookup: params must be a tensor or a non-empty Lua list of tensors")
    end
    local g = graph_of(list, ids)
    local shards = {}
    for i, s in ipairs(list) do shards[i] = G.convert(s, nil, g) end
    ids = index_tensor(ids, g)
    local table_, rows = shards[1], ids
    if #shards > 1 then
      local p, n, starts = #shards, 0, {}
      for i, s in ipairs(shards) do
        local dims = s:get_shape().dims
        if not dims or #dims == 0 or dims[1] < 0 then
          fail(string.format("tf.nn.embedding_lookup: shard %d needs a known first dimension, got shape %s", i,
                             tostring(s:get_shape())))
        end
        starts[i] = n
        n = n + dims[1]
      end
      -- TensorFlow's layouts: "mod" puts id i in shard i % p at row i // p,
      -- "div" gives each shard a contiguous range of ids. Either way shard s
      -- (0-based) holds floor(N / p) ids, one more when s < N % p.
      for i, s in ipairs(shards) do
        local want, got = math.floor(n / p) + ((i - 1) < n % p and 1 or 0), s:get_shape().dims[1]
        if got ~= want then
          fail(string.format("tf.nn.embedding_lookup: with %d ids in %d shards, shard %d should hold %d rows " ..
                             "but has %d", n, p, i - 1, want, got))
        end
      end
      table_ = ops.concat(shards, 0)
      if strategy == "mod" then
        local offsets = G.constant(starts, {dtype = ids.dtype, graph = g})
        rows = ops.gather(offsets, ops.mod(ids, p)) + ops.floordiv(ids, p)
      end
    end
    local out = ops.gather(table_, rows, {name = o.max_norm == nil and (o.name or "embedding_lookup") or nil})
    if o.max_norm == nil then return out end
    local ids_rank, out_rank = ids:get_shape().ndims, out:get_shape().ndims
    if not ids_rank or not out_rank then
      fail("tf.nn.embedding_lookup: max_norm needs ids and params of known rank")
    end
    local axes = {}
    for a = ids_rank, out_rank - 1 do axes[#axes + 1] = a end
    -- The norm's floor (a tiny normal number) keeps sqrt's gradient finite for zero rows.
    local tiny = out.dtype == dtypes.float64 and 2.2250738585072014e-308 or 1.1754943508222875e-38
    local norm = ops.sqrt(ops.maximum(ops.reduce_sum(ops.square(out), {axis = axes, keepdims = true}), tiny))
    return ops.multiply(out, ops.divide(o.max_norm, ops.maximum(norm, o.max_norm)), o.name or "embedding_lookup")
  end
end
