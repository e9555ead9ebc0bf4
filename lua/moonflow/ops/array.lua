-- ops/array.lua — shape and layout wrappers: shape, reshape, fill, zeros, tile,
-- slicing, stack/unstack, concat, squeeze, expand_dims, transpose, range, eye,
-- linspace, and
-- the x[i] indexing that graph.lua's Tensor delegates here.
--
-- Axes, begins, sizes, perms and multiples are Lua lists of integers (0-based,
-- negative counts from the end); shapes (reshape, fill, zeros) may also be
-- tensors, or lists mixing numbers and scalar tensors, which are stacked as
-- TensorFlow does.
local core = require("moonflow.core")
local Array = require("moonflow.array")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local attr = G.attr
local is_tensor = G.is_tensor
local dtypes = core.dtypes

local fail, options, graph_of = core.fail, args.options, G.graph_of_args
local is_integer, int_list, int_arg = args.is_integer, args.int_list, args.int_arg

-- The value of one element of `dtype` for a Lua number (bool takes v ~= 0).
local function scalar(v, dtype)
  if dtype == dtypes.bool then return v ~= 0 end
  return v
end

return function(tf, ops)
  -- tf.shape(x, name, out_type) or {name=, out_type=}; out_type int32 (default) or int64.
  function ops.shape(x, ...)
    local o = options("tf.shape", {"name", "out_type"}, ...)
    if getmetatable(o.name) == core.DType then o.name, o.out_type = nil, o.name end
    return G.op{"Shape", inputs = {G.convert(x)},
                attrs = {out_type = o.out_type and core.as_dtype(o.out_type, "tf.shape")}, name = o.name}
  end

  -- tf.size(x, name, out_type): the number of elements.
  function ops.size(x, ...)
    local o = options("tf.size", {"name", "out_type"}, ...)
    if getmetatable(o.name) == core.DType then o.name, o.out_type = nil, o.name end
    return G.op{"Size", inputs = {G.convert(x)},
                attrs = {out_type = o.out_type and core.as_dtype(o.out_type, "tf.size")}, name = o.name}
  end

  -- tf.rank(x, name): the number of dimensions, int32.
  function ops.rank(x, ...)
    local o = options("tf.rank", {"name"}, ...)
    return G.op{"Rank", inputs = {G.convert(x)}, name = o.name}
  end

  -- tf.reshape(x, shape, name): shape a list (one -1 allowed) or an int tensor.
  function ops.reshape(x, shape, ...)
    local o = options("tf.reshape", {"name"}, ...)
    local g = graph_of(x, shape)
    x = G.convert(x, nil, g)
    local s = G.shape_tensor(shape, "tf.reshape", g)
    return G.op{"Reshape", inputs = {x, s}, name = o.name}
  end

  -- tf.fill(dims, value, name): value's dtype (a Lua number is float32).
  function ops.fill(dims, value, ...)
    local o = options("tf.fill", {"name"}, ...)
    local g = graph_of(dims, value)
    local v = G.convert(value, nil, g)
    local d = G.shape_tensor(dims, "tf.fill", g)
    return G.op{"Fill", inputs = {d, v}, name = o.name}
  end

  -- tf.zeros(shape, dtype, name) / tf.ones: Fill with a constant (float32 by default).
  local function filled(fname, number, default_name)
    return function(shape, ...)
      local o = options(fname, {"dtype", "name"}, ...)
      local dtype = o.dtype and core.as_dtype(o.dtype, fname) or dtypes.float32
      local g = graph_of(shape)
      return ops.fill(shape, G.constant(scalar(number, dtype), {dtype = dtype, graph = g}),
                      {name = o.name or default_name})
    end
  end
  ops.zeros = filled("tf.zeros", 0, "zeros")
  ops.ones = filled("tf.ones", 1, "ones")

  -- tf.zeros_like(x, dtype, name) / tf.ones_like: x's shape, x's dtype unless given.
  local function like(fname, op_type, number, default_name)
    return function(x, ...)
      local o = options(fname, {"dtype", "name"}, ...)
      x = G.convert(x)
      local dtype = o.dtype and core.as_dtype(o.dtype, fname) or x.dtype
      local name = o.name or default_name
      if dtype == x.dtype then return G.op{op_type, inputs = {x}, name = name} end
      return ops.fill(ops.shape(x), G.constant(scalar(number, dtype), {dtype = dtype, graph = x.graph}),
                      {name = name})
    end
  end
  ops.zeros_like = like("tf.zeros_like", "ZerosLike", 0, "zeros_like")
  ops.ones_like = like("tf.ones_like", "OnesLike", 1, "ones_like")

  -- tf.tile(x, multiples, name): one non-negative multiple per dimension.
  function ops.tile(x, multiples, ...)
    local o = options("tf.tile", {"name"}, ...)
    return G.op{"Tile", inputs = {G.convert(x)},
                attrs = {multiples = attr.ints(int_list(multiples, "tf.tile", "multiples"))}, name = o.name}
  end

  -- tf.slice(x, begin, size, name): size -1 takes the rest of that dimension.
  function ops.slice(x, begin, size, ...)
    local o = options("tf.slice", {"name"}, ...)
    return G.op{"Slice", inputs = {G.convert(x)},
                attrs = {begin = attr.ints(int_list(begin, "tf.slice", "begin")),
                         size = attr.ints(int_list(size, "tf.slice", "size"))}, name = o.name}
  end

  -- tf.strided_slice(x, begin, end, strides, {begin_mask=, end_mask=,
  -- ellipsis_mask=, new_axis_mask=, shrink_axis_mask=, name=}), as x[b:e:s, ...] in Python.
  local mask_names = {"begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"}
  function ops.strided_slice(x, begin, end_, ...)
    local o = options("tf.strided_slice", {"strides", "begin_mask", "end_mask", "ellipsis_mask",
                                           "new_axis_mask", "shrink_axis_mask", "name"}, ...)
    local attrs = {begin = attr.ints(int_list(begin, "tf.strided_slice", "begin")),
                   ["end"] = attr.ints(int_list(end_, "tf.strided_slice", "end"))}
    if o.strides ~= nil then attrs.strides = attr.ints(int_list(o.strides, "tf.strided_slice", "strides")) end
    for _, m in ipairs(mask_names) do
      if o[m] ~= nil then attrs[m] = attr.int(int_arg(o[m], "tf.strided_slice", m)) end
    end
    return G.op{"StridedSlice", inputs = {G.convert(x)}, attrs = attrs, name = o.name or "strided_slice"}
  end

  -- x[i] (graph.lua's Tensor __index for integer keys): row i of the first
  -- axis, 0-based, negative from the end; the axis is dropped (x[0] of a
  -- [3, 4] tensor has shape [4]).
  function ops.index_first_axis(t, i)
    int_arg(i, "Tensor index", "the index")
    return G.op{"StridedSlice", inputs = {t},
                attrs = {begin = attr.ints{i}, ["end"] = attr.ints{i + 1}, strides = attr.ints{1},
                         shrink_axis_mask = attr.int(1)},
                name = "strided_slice"}
  end

  -- Tensors from a Lua list; Lua values take the dtype of the first tensor.
  local function tensor_list(values, fname)
    if type(values) ~= "table" or getmetatable(values) ~= nil or #values == 0 then
      fail(fname .. ": expected a non-empty Lua list of tensors, got " .. args.show(values))
    end
    local dtype
    for _, v in ipairs(values) do
      if is_tensor(v) then dtype = v.dtype; break end
    end
    local g = graph_of(values)
    local out = {}
    for i, v in ipairs(values) do out[i] = G.convert(v, dtype, g) end
    return out
  end

  -- tf.stack(values, axis, name): a new dimension at axis (in [-rank-1, rank]).
  function ops.stack(values, ...)
    local o = options("tf.stack", {"axis", "name"}, ...)
    return G.op{"Pack", inputs = tensor_list(values, "tf.stack"),
                attrs = {axis = attr.int(int_arg(o.axis or 0, "tf.stack", "axis"))}, name = o.name or "stack"}
  end

  -- tf.unstack(x, num, axis, name) or {num=, axis=, name=}: a Lua list of
  -- tensors; num is needed only when the dimension is unknown statically.
  function ops.unstack(x, ...)
    local o = options("tf.unstack", {"num", "axis", "name"}, ...)
    local op = G.build{"Unpack", inputs = {G.convert(x)},
                       attrs = {axis = attr.int(int_arg(o.axis or 0, "tf.unstack", "axis")),
                                num = o.num ~= nil and attr.int(int_arg(o.num, "tf.unstack", "num")) or nil},
                       name = o.name or "unstack"}
    return op.outputs
  end

  -- tf.split(value, num_or_size_splits, axis=0, num, name) or {axis=, num=, name=}:
  -- a Lua list of pieces along axis. A number n cuts n equal pieces (the
  -- dimension must divide, checked at run time when it is unknown); a list or
  -- tensor gives the sizes, one of which may be -1 (the rest).
  function ops.split(value, num_or_size_splits, ...)
    local o = options("tf.split", {"axis", "num", "name"}, ...)
    local g = graph_of(value, num_or_size_splits)
    value = G.convert(value, nil, g)
    local axis = int_arg(o.axis or 0, "tf.split", "axis")
    local sizes, count
    if type(num_or_size_splits) == "number" then
      count = int_arg(num_or_size_splits, "tf.split", "num_or_size_splits")
      if count < 1 then fail("tf.split: the number of splits must be positive, got " .. count) end
      local dims = value:get_shape().dims
      local dim = dims and dims[(axis < 0 and axis + #dims or axis) + 1]
      if dim and dim >= 0 then
        if dim % count ~= 0 then
          fail(string.format("tf.split: dimension %d has size %d, which %d pieces cannot share equally",
                             axis, dim, count))
        end
        local list = {}
        for i = 1, count do list[i] = dim / count end
        sizes = G.constant(list, {dtype = dtypes.int32, graph = g})
      else
        sizes = ops.fill({count}, ops.floordiv(ops.shape(value)[axis], count))
      end
    else
      sizes = G.shape_tensor(num_or_size_splits, "tf.split", g)
      count = o.num or sizes:get_shape():num_elements()
      if not count then fail("tf.split: pass {num = n} when the number of sizes is not known statically") end
    end
    local op = G.build{"SplitV", inputs = {value, sizes},
                       attrs = {axis = attr.int(axis), num_split = attr.int(count)}, name = o.name or "split"}
    return op.outputs
  end

  -- tf.concat(values, axis, name): joins along an existing axis.
  function ops.concat(values, ...)
    local o = options("tf.concat", {"axis", "name"}, ...)
    if o.axis == nil then fail("tf.concat: axis is required (tf.concat(values, axis))") end
    return G.op{"Concat", inputs = tensor_list(values, "tf.concat"),
                attrs = {axis = attr.int(int_arg(o.axis, "tf.concat", "axis"))}, name = o.name or "concat"}
  end

  -- tf.squeeze(x, axis, name): axis a number or list; all size-1 dims when absent.
  function ops.squeeze(x, ...)
    local o = options("tf.squeeze", {"axis", "name"}, ...)
    local attrs = {}
    if o.axis ~= nil then attrs.axis = attr.ints(int_list(o.axis, "tf.squeeze", "axis", true)) end
    return G.op{"Squeeze", inputs = {G.convert(x)}, attrs = attrs, name = o.name}
  end

  -- tf.expand_dims(x, axis, name): a size-1 dimension at axis; -1 appends.
  function ops.expand_dims(x, ...)
    local o = options("tf.expand_dims", {"axis", "name"}, ...)
    if o.axis == nil then fail("tf.expand_dims: axis is required (tf.expand_dims(x, axis))") end
    return G.op{"ExpandDims", inputs = {G.convert(x)},
                attrs = {axis = attr.int(int_arg(o.axis, "tf.expand_dims", "axis"))}, name = o.name}
  end

  -- tf.transpose(x, perm, name): perm defaults to reversing the dimensions.
  function ops.transpose(x, ...)
    local o = options("tf.transpose", {"perm", "name"}, ...)
    local attrs = {}
    if o.perm ~= nil then attrs.perm = attr.ints(int_list(o.perm, "tf.transpose", "perm")) end
    return G.op{"Transpose", inputs = {G.convert(x)}, attrs = attrs, name = o.name or "transpose"}
  end

  -- tf.range(limit) or tf.range(start, limit, delta, {dtype=, name=}): start,
  -- start + delta, ... up to but excluding limit. The dtype is the option's,
  -- else that of a tensor argument, else — as TensorFlow does with Python ints —
  -- int32 when every argument is an integer (int64 beyond int32's range) and
  -- float32 otherwise (integers beyond int64's too): tf.range(5) is int32 {0, 1, 2, 3, 4}, tf.range(0, 1, 0.25)
  -- float32. Tensor arguments are cast to that dtype.
  local range_rank = {uint8 = 1, int32 = 2, int64 = 3, float32 = 4, float64 = 5}
  function ops.range(start, ...)
    local o = options("tf.range", {"limit", "delta", "dtype", "name"}, ...)
    local limit, delta = o.limit, o.delta or 1
    if limit == nil then start, limit = 0, start end
    local args = {start, limit, delta}
    local dtype = o.dtype and core.as_dtype(o.dtype, "tf.range")
    if not dtype then  -- the widest tensor dtype, as TensorFlow's dtype hierarchy picks
      for _, v in ipairs(args) do
        if is_tensor(v) and (not dtype or (range_rank[v.dtype.name] or 0) > (range_rank[dtype.name] or 0)) then
          dtype = v.dtype
        end
      end
    end
    if not dtype then
      dtype = dtypes.int32
      for _, v in ipairs(args) do
        if type(v) ~= "number" then
          fail("tf.range: start, limit and delta must be numbers or scalar tensors, got " .. tostring(v))
        end
        if not is_integer(v) or math.abs(v) >= 2 ^ 63 then dtype = dtypes.float32; break end
        if math.abs(v) >= 2 ^ 31 then dtype = dtypes.int64 end
      end
    end
    local g = graph_of(start, limit, delta)
    for i, v in ipairs(args) do
      args[i] = is_tensor(v) and ops.cast(v, dtype) or G.convert(v, dtype, g)
    end
    return G.op{"Range", inputs = args, name = o.name or "range"}
  end

  local function count_arg(fname, what, v, least)
    if not is_integer(v) or v < least then
      fail(string.format("%s: %s must be an integer >= %d, got %s", fname, what, least, args.show(v)))
    end
    return v
  end

  -- tf.eye(num_rows, num_columns, {batch_shape=, dtype=, name=}) (or
  -- positionally in that order): ones on the main diagonal, zeros elsewhere,
  -- shape batch_shape .. {num_rows, num_columns}; num_columns nil is
  -- num_rows; dtype float32 by default. Built as a compare of two ranges,
  -- tiled over the batch shape.
  function ops.eye(num_rows, ...)
    local fname = "tf.eye"
    local o = options(fname, {"num_columns", "batch_shape", "dtype", "name"}, ...)
    local rows = count_arg(fname, "num_rows", num_rows, 0)
    local cols = o.num_columns == nil and rows or count_arg(fname, "num_columns", o.num_columns, 0)
    local dtype = dtypes.float32
    if o.dtype ~= nil then
      local ok, d = pcall(core.as_dtype, o.dtype, fname)
      if not ok then fail(fname .. ": dtype must be a tf dtype, got " .. args.show(o.dtype)) end
      dtype = d
    end
    local batch = {}
    if o.batch_shape ~= nil then
      if not args.is_plain(o.batch_shape) then
        fail(fname .. ": batch_shape must be a Lua list of integers, got " .. args.show(o.batch_shape))
      end
      for i, d in ipairs(o.batch_shape) do batch[i] = count_arg(fname, "batch_shape[" .. i .. "]", d, 0) end
    end
    local name = o.name or "eye"
    local r = ops.reshape(ops.range(rows), {rows, 1})
    local c = ops.reshape(ops.range(cols), {1, cols})
    local same = ops.equal(r, c)
    if #batch == 0 then return ops.cast(same, dtype, name) end
    local shape, multiples = {}, {}
    for i, d in ipairs(batch) do shape[i], multiples[i] = 1, d end
    shape[#batch + 1], shape[#batch + 2] = rows, cols
    multiples[#batch + 1], multiples[#batch + 2] = 1, 1
    return ops.tile(ops.reshape(ops.cast(same, dtype), shape), multiples, {name = name})
  end

  -- tf.linspace(start, stop, num, {name=}) (also tf.lin_space): num evenly
  -- spaced values from start to stop, both included; num == 1 gives {start}.
  -- start and stop are numbers or float32/float64 scalar tensors (dtype that
  -- of a tensor argument, else float32); num an integer >= 1. Built as
  -- start + range(num) * (stop - start) / (num - 1), so it is differentiable
  -- in start and stop.
  function ops.linspace(start, stop, num, ...)
    local fname = "tf.linspace"
    local o = options(fname, {"name"}, ...)
    local dtype
    for _, v in ipairs({{"start", start}, {"stop", stop}}) do
      local what, x = v[1], v[2]
      if is_tensor(x) then
        if x.dtype ~= dtypes.float32 and x.dtype ~= dtypes.float64 then
          fail(string.format("%s: %s must be float32 or float64, got %s; use tf.cast", fname, what, x.dtype.name))
        end
        local dims = x:get_shape().dims
        if dims and #dims ~= 0 then
          fail(string.format("%s: %s must be a scalar, got shape %s", fname, what, tostring(x:get_shape())))
        end
        if dtype and dtype ~= x.dtype then
          fail(string.format("%s: start is %s but stop is %s; use tf.cast", fname, dtype.name, x.dtype.name))
        end
        dtype = x.dtype
      elseif type(x) ~= "number" then
        fail(string.format("%s: %s must be a number or a scalar float tensor, got %s", fname, what, args.show(x)))
      end
    end
    num = count_arg(fname, "num", num, 1)
    dtype = dtype or dtypes.float32
    local g = graph_of(start, stop)
    local a, b = G.convert(start, dtype, g), G.convert(stop, dtype, g)
    local step = ops.divide(ops.subtract(b, a), G.convert(math.max(num - 1, 1), dtype, g))
    local index = ops.cast(G.op{"Range", inputs = {G.convert(0, dtypes.int32, g), G.convert(num, dtypes.int32, g),
                                                    G.convert(1, dtypes.int32, g)}, name = "range"}, dtype)
    return ops.add(ops.multiply(index, step), a, o.name or "linspace")
  end
  ops.lin_space = ops.linspace
end
