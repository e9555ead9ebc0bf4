-- ops/reduce.lua — reductions (reduce_sum, reduce_mean, …), segment
-- reductions (segment_sum, unsorted_segment_max, …) and matmul.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local fail, options, check_bool, name_of = core.fail, args.options, args.check_bool, args.name_of

-- TF 1.x spellings: reduction_indices for axis, keep_dims for keepdims.
local function alias(fname, opts, name, old)
  if opts[old] == nil then return opts[name] end
  if opts[name] ~= nil then fail(fname .. ": Can not specify both '" .. name .. "' and '" .. old .. "'.") end
  return opts[old]
end

-- An axis attribute from a number or a list of numbers; nil stays nil (all axes).
local function axis_list(fname, axis)
  if axis == nil then return nil end
  local list = type(axis) == "table" and getmetatable(axis) == nil and axis or {axis}
  local out = {}
  for i, a in ipairs(list) do
    a = tonumber(a)
    if not a or a % 1 ~= 0 then
      fail(fname .. ": axis must be an integer or a list of integers, got " .. tostring(list[i]))
    end
    out[i] = a
  end
  return out
end

local reduce_options = {"axis", "keepdims", "name", "reduction_indices", "keep_dims"}

local function reduction(op_type, fname)
  return function(x, ...)
    local opts = options(fname, reduce_options, ...)
    local axis = axis_list(fname, alias(fname, opts, "axis", "reduction_indices"))
    local keepdims = check_bool(alias(fname, opts, "keepdims", "keep_dims"), fname, "keepdims")
    local attrs = {keepdims = keepdims or false}
    if axis then attrs.axis = G.attr.ints(axis) end
    return G.op{op_type, inputs = {G.convert(x)}, attrs = attrs, name = opts.name}
  end
end

local reductions = {
  reduce_sum = "Sum", reduce_mean = "Mean", reduce_max = "Max", reduce_min = "Min",
  reduce_prod = "Prod", reduce_any = "Any", reduce_all = "All",
}

-- Two operands in one dtype: a Lua value takes the dtype of the tensor beside it.
local function operands(a, b)
  if G.is_tensor(a) then return a, G.convert(b, a.dtype, a.graph) end
  if G.is_tensor(b) then return G.convert(a, b.dtype, b.graph), b end
  a = G.convert(a)
  return a, G.convert(b, a.dtype, a.graph)
end

-- name comes only as an option.
local matmul_options = {"transpose_a", "transpose_b", "adjoint_a", "adjoint_b", "name", positional = 4}

-- tf.matmul(a, b, transpose_a, transpose_b) or (a, b, {transpose_a=, transpose_b=, name=}).
-- The dtypes are real, so adjoint_a/adjoint_b are transposes too.
local function matmul(a, b, ...)
  local opts = options("tf.matmul", matmul_options, ...)
  local trans = {}
  for _, side in ipairs({"a", "b"}) do
    local t = check_bool(opts["transpose_" .. side], "tf.matmul", "transpose_" .. side)
    local adj = check_bool(opts["adjoint_" .. side], "tf.matmul", "adjoint_" .. side)
    if t and adj then
      fail("tf.matmul: Only one of transpose_" .. side .. " and adjoint_" .. side .. " can be True.")
    end
    trans[side] = (t or adj) and true or false
  end
  a, b = operands(a, b)
  return G.op{"MatMul", inputs = {a, b}, attrs = {transpose_a = trans.a, transpose_b = trans.b},
              name = opts.name}
end

-- Segment reductions (src/ops/segment.c): the kinds with an op of their own.
local segment_kinds = {sum = "Sum", prod = "Prod", max = "Max", min = "Min"}

-- data and its segment ids (and the unsorted ops' num_segments) as tensors;
-- Lua ids and counts become int32.
local function segment_args(data, segment_ids, num_segments, fname)
  data = G.convert(data)
  local ids = G.int_convert(segment_ids, data.graph)
  if fname and num_segments == nil then fail(fname .. ": num_segments is required") end
  return data, ids, num_segments ~= nil and G.convert(num_segments, core.dtypes.int32, data.graph) or nil
end

return function(tf, ops)
  tf.math = tf.math or {}
  for fname, op_type in pairs(reductions) do
    ops[fname] = reduction(op_type, "tf." .. fname)
    tf.math[fname] = ops[fname]
  end

  -- tf.math.reduce_variance(x, axis, keepdims, name) and reduce_std: the
  -- mean of squared deviations from the mean (and its root) over axis, as
  -- TensorFlow's (float dtypes); reduce_euclidean_norm: sqrt(sum(x^2)).
  local function float_reduction(fname, x, ...)
    local opts = options(fname, reduce_options, ...)
    local axis = axis_list(fname, alias(fname, opts, "axis", "reduction_indices"))
    local keepdims = check_bool(alias(fname, opts, "keepdims", "keep_dims"), fname, "keepdims") or false
    x = G.convert(x)
    if not x.dtype.is_floating then
      fail(string.format("%s: input must be float32 or float64, got %s %s (use tf.cast)", fname, x.dtype.name, x.name))
    end
    return x, axis, keepdims, opts.name
  end
  function ops.reduce_variance(input, ...)
    local x, axis, keepdims, name = float_reduction("tf.math.reduce_variance", input, ...)
    local deviations = ops.subtract(x, ops.reduce_mean(x, axis, true))
    return ops.reduce_mean(ops.square(deviations), axis, keepdims, name)
  end
  function ops.reduce_std(input, ...)
    local x, axis, keepdims, name = float_reduction("tf.math.reduce_std", input, ...)
    return ops.sqrt(ops.reduce_variance(x, axis, keepdims), name)
  end
  function ops.reduce_euclidean_norm(input, ...)
    local x, axis, keepdims, name = float_reduction("tf.math.reduce_euclidean_norm", input, ...)
    return ops.sqrt(ops.reduce_sum(ops.square(x), axis, keepdims), name)
  end

  -- tf.count_nonzero(input, axis, keepdims, dtype, name): the number of
  -- non-zero (true) elements over axis, as dtype (int64).
  function ops.count_nonzero(input, ...)
    local fname = "tf.count_nonzero"
    local o = options(fname, {"axis", "keepdims", "dtype", "name", "reduction_indices", "keep_dims"}, ...)
    local x = G.convert(input)
    local zero = false  -- (bool) or 0, in x's dtype
    if x.dtype ~= core.dtypes.bool then zero = 0 end
    zero = G.convert(zero, x.dtype, x.graph)
    local dtype = o.dtype and core.as_dtype(o.dtype, fname) or core.dtypes.int64
    return ops.reduce_sum(ops.cast(ops.not_equal(x, zero), dtype), axis_list(fname, alias(fname, o, "axis",
                          "reduction_indices")), check_bool(alias(fname, o, "keepdims", "keep_dims"), fname,
                          "keepdims") or false, o.name)
  end
  for _, f in ipairs({"reduce_variance", "reduce_std", "reduce_euclidean_norm", "count_nonzero"}) do
    tf.math[f] = ops[f]
  end

  -- tf.segment_sum(data, segment_ids, name): segment_ids a vector of sorted
  -- row ids; tf.unsorted_segment_sum(data, segment_ids, num_segments, name):
  -- ids in any order, negative ones dropped. Likewise _prod, _max, _min.
  for kind, op_kind in pairs(segment_kinds) do
    local sorted, unsorted = "segment_" .. kind, "unsorted_segment_" .. kind
    ops[sorted] = function(data, segment_ids, name)
      local d, ids = segment_args(data, segment_ids)
      return G.op{"Segment" .. op_kind, inputs = {d, ids}, name = name_of(name, "tf." .. sorted)}
    end
    ops[unsorted] = function(data, segment_ids, num_segments, name)
      local d, ids, n = segment_args(data, segment_ids, num_segments, "tf." .. unsorted)
      return G.op{"UnsortedSegment" .. op_kind, inputs = {d, ids, n}, name = name_of(name, "tf." .. unsorted)}
    end
    tf.math[sorted], tf.math[unsorted] = ops[sorted], ops[unsorted]
  end

  -- The rows of each segment, at least 1, as [segments, 1, ..., 1] to
  -- divide a segment sum of data (TensorFlow's _unsorted_segment_N).
  local function segment_counts(fname, sum, data, ids, n)
    local rank, id_rank = data:get_shape().ndims, ids:get_shape().ndims
    if not rank or not id_rank then
      fail(string.format("%s: data and segment_ids need a known rank, got shapes %s and %s", fname,
                         tostring(data:get_shape()), tostring(ids:get_shape())))
    end
    local shape = {-1}
    for i = 2, rank - id_rank + 1 do shape[i] = 1 end
    local counts = sum(ops.ones(ops.shape(ids), data.dtype), ids, n)
    return ops.maximum(ops.reshape(counts, shape), 1)
  end

  local function float_data(fname, data)
    if not data.dtype.is_floating then
      fail(string.format("%s: data must be float32 or float64, got %s %s (use tf.cast)", fname, data.dtype.name,
                         data.name))
    end
  end

  -- tf.segment_mean(data, segment_ids, name): each segment's sum over its
  -- rows, an empty one 0; integers divide rounding toward zero, as
  -- TensorFlow's kernel.
  function ops.segment_mean(data, segment_ids, name)
    local fname = "tf.segment_mean"
    local d, ids = segment_args(data, segment_ids)
    local sum, count = ops.segment_sum(d, ids), segment_counts(fname, ops.segment_sum, d, ids)
    local divide = d.dtype.is_floating and ops.divide or ops.truncatediv
    return divide(sum, count, name_of(name, fname))
  end

  -- tf.unsorted_segment_mean / tf.unsorted_segment_sqrt_n(data, segment_ids,
  -- num_segments, name): the sum over the count of rows, or its square root
  -- (floats; an empty segment 0).
  for fname, root in pairs({unsorted_segment_mean = false, unsorted_segment_sqrt_n = true}) do
    ops[fname] = function(data, segment_ids, num_segments, name)
      local where = "tf." .. fname
      local d, ids, n = segment_args(data, segment_ids, num_segments, where)
      float_data(where, d)
      local count = segment_counts(where, ops.unsorted_segment_sum, d, ids, n)
      if root then count = ops.sqrt(count) end
      return ops.divide(ops.unsorted_segment_sum(d, ids, n), count, name_of(name, where))
    end
  end
  for _, fname in ipairs({"segment_mean", "unsorted_segment_mean", "unsorted_segment_sqrt_n"}) do
    tf.math[fname] = ops[fname]
  end
  ops.matmul = matmul
  tf.linalg = tf.linalg or {}
  tf.linalg.matmul = matmul
end
