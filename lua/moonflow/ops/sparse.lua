-- ops/sparse.lua — tf.sparse: the SparseTensor class (indices, values,
-- dense_shape: three tensors), tf.SparseTensorValue (its fetched or fed
-- value), tf.sparse_placeholder, and the wrappers of src/ops/sparse.c:
-- to_dense (SparseToDense), sparse_dense_matmul (SparseTensorDenseMatMul),
-- add of a sparse and a dense tensor (SparseTensorDenseAdd) or of two
-- sparse ones (SparseAdd, with SparseAddGrad for its gradient), reorder
-- (SparseReorder) and transpose (a reorder of permuted indices); reduce_sum is
-- a composite (the sum of the dense tensor the values add into), from_dense
-- one of where and gather_nd.
--
-- A SparseTensor is fetched as a SparseTensorValue of three tf.Arrays, and
-- fed from one (or a plain {indices =, values =, dense_shape =} table):
-- session.lua asks the key's metatable (__fetch, __feed) what it stands for.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local fail, options, check_bool, name_of = core.fail, args.options, args.check_bool, args.name_of
local is_tensor, dtypes = G.is_tensor, core.dtypes

local SparseTensor = {}
SparseTensor.__index = SparseTensor

-- tf.SparseTensorValue(indices, values, dense_shape): a plain record.
local SparseTensorValue = {}
SparseTensorValue.__index = SparseTensorValue
function SparseTensorValue:__tostring()
  return string.format("SparseTensorValue(indices=%s, values=%s, dense_shape=%s)", tostring(self.indices),
                       tostring(self.values), tostring(self.dense_shape))
end
local function sparse_value(indices, values, dense_shape)
  return setmetatable({indices = indices, values = values, dense_shape = dense_shape}, SparseTensorValue)
end

function SparseTensor:__tostring()
  return string.format("SparseTensor(indices=%s, values=%s, dense_shape=%s)", tostring(self.indices),
                       tostring(self.values), tostring(self.dense_shape))
end

-- The static shape: dense_shape's value when it is a constant, else its rank.
function SparseTensor:get_shape()
  local s = self.dense_shape
  if s.op.type == "Const" then return G.TensorShape.new(s.op:get_attr("value"):totable()) end
  local n = s:get_shape().dims and s:get_shape().dims[1]
  if not n or n < 0 then return G.TensorShape.new(nil) end
  local dims = {}
  for i = 1, n do dims[i] = -1 end
  return G.TensorShape.new(dims)
end

function SparseTensor.__fetch(sp)
  return {sp.indices, sp.values, sp.dense_shape}, function(v) return sparse_value(v[1], v[2], v[3]) end
end

-- Feeding a SparseTensor feeds its three parts from a SparseTensorValue or
-- a table with the same fields.
function SparseTensor.__feed(sp, v)
  if type(v) ~= "table" or v.indices == nil or v.values == nil or v.dense_shape == nil then
    fail("Session:run: the feed for a SparseTensor must be a tf.SparseTensorValue or a table {indices =, " ..
         "values =, dense_shape =}, got " .. args.describe(v))
  end
  return {{sp.indices, v.indices}, {sp.values, v.values}, {sp.dense_shape, v.dense_shape}}
end

local function is_sparse(x) return getmetatable(x) == SparseTensor end

-- A SparseTensor from its parts: indices and dense_shape become int64,
-- values keep a tensor's dtype (Lua numbers: float32, or `dtype`).
local function sparse_tensor(fname, indices, values, dense_shape, dtype)
  local graph = G.graph_of_args(indices, values, dense_shape)
  local v = G.convert(values, dtype, graph)
  local i = G.convert(indices, dtypes.int64, graph)
  local s = G.convert(dense_shape, dtypes.int64, graph)
  for _, part in ipairs({{"indices", i, 2}, {"values", v, 1}, {"dense_shape", s, 1}}) do
    local what, t, rank = part[1], part[2], part[3]
    local n = t:get_shape().ndims
    if n and n ~= rank then
      fail(string.format("%s: %s must have rank %d, got shape %s", fname, what, rank, tostring(t:get_shape())))
    end
  end
  if i.dtype ~= dtypes.int64 or s.dtype ~= dtypes.int64 then
    fail(string.format("%s: indices and dense_shape must be int64, got %s and %s", fname, i.dtype.name,
                       s.dtype.name))
  end
  return setmetatable({indices = i, values = v, dense_shape = s, dtype = v.dtype, graph = graph}, SparseTensor)
end

-- The default value of to_dense: given, else zero (false for bool) in dtype.
local function default_of(value, dtype, graph)
  if value == nil and dtype == dtypes.bool then value = false end
  if value == nil then value = 0 end
  return G.convert(value, dtype, graph)
end

local function check_sparse(fname, what, x)
  if not is_sparse(x) then
    fail(string.format("%s: %s must be a tf.SparseTensor, got %s", fname, what, args.describe(x)))
  end
  return x
end

return function(tf, ops)
  tf.sparse = tf.sparse or {}
  local sparse = tf.sparse

  -- tf.SparseTensor(indices, values, dense_shape): indices [N, rank] int64
  -- (in row-major order for to_dense), values [N], dense_shape [rank] int64;
  -- Lua tables are converted (values to float32 unless {dtype = ...} follows).
  function tf.SparseTensor(indices, values, dense_shape, ...)
    local o = options("tf.SparseTensor", {"dtype"}, ...)
    return sparse_tensor("tf.SparseTensor", indices, values, dense_shape,
                         o.dtype and core.as_dtype(o.dtype, "tf.SparseTensor"))
  end
  sparse.SparseTensor = tf.SparseTensor
  tf.SparseTensorValue = sparse_value
  function tf.is_sparse(x) return is_sparse(x) end

  -- tf.sparse_placeholder(dtype, shape, name): a SparseTensor of
  -- placeholders name/indices [-1, rank], name/values [-1] and, unless the
  -- shape is fully known (then a constant), name/shape [rank].
  function tf.sparse_placeholder(dtype, ...)
    local fname = "tf.sparse_placeholder"
    local o = options(fname, {"shape", "name"}, ...)
    dtype = core.as_dtype(dtype, fname)
    local base = o.name or "Placeholder"
    local shape = o.shape and G.TensorShape.new(args.int_list(o.shape, fname, "shape")) or nil
    local rank = shape and shape.ndims or -1
    local dense_shape
    if shape and shape:is_fully_defined() then
      dense_shape = G.convert(shape.dims, dtypes.int64)
    else
      dense_shape = tf.placeholder(dtypes.int64, {rank}, base .. "/shape")
    end
    return sparse_tensor(fname, tf.placeholder(dtypes.int64, {-1, rank}, base .. "/indices"),
                         tf.placeholder(dtype, {-1}, base .. "/values"), dense_shape)
  end
  sparse.placeholder = tf.sparse_placeholder

  -- tf.sparse.from_dense(tensor, name): the SparseTensor of tensor's
  -- non-zero elements (true ones of a bool tensor), in row-major order.
  function sparse.from_dense(tensor, name)
    name = name_of(name, "tf.sparse.from_dense")
    local x = G.convert(tensor)
    local zero = false  -- (bool) or 0, in x's dtype
    if x.dtype ~= dtypes.bool then zero = 0 end
    zero = G.convert(zero, x.dtype, x.graph)
    local indices = tf.where(ops.not_equal(x, zero))
    return sparse_tensor("tf.sparse.from_dense", indices, ops.gather_nd(x, indices),
                         ops.shape(x, {out_type = dtypes.int64, name = name}))
  end

  -- tf.sparse.to_dense(sp_input, default_value, validate_indices, name)
  -- (tf.sparse_tensor_to_dense): default_value (0) where no index is; with
  -- validate_indices (true) repeated or unsorted indices are errors.
  function sparse.to_dense(sp_input, ...)
    local fname = "tf.sparse.to_dense"
    local o = options(fname, {"default_value", "validate_indices", "name"}, ...)
    local sp = check_sparse(fname, "sp_input", sp_input)
    local validate = check_bool(o.validate_indices, fname, "validate_indices")
    return G.op{"SparseToDense",
                inputs = {sp.indices, sp.dense_shape, sp.values, default_of(o.default_value, sp.dtype, sp.graph)},
                attrs = {validate_indices = validate ~= false}, name = o.name}
  end
  tf.sparse_tensor_to_dense = sparse.to_dense

  -- tf.sparse_to_dense(sparse_indices, output_shape, sparse_values,
  -- default_value, validate_indices, name): TensorFlow 1.x's form; indices
  -- [N, rank], or [N] / a scalar for a vector output.
  function tf.sparse_to_dense(sparse_indices, output_shape, sparse_values, ...)
    local fname = "tf.sparse_to_dense"
    local o = options(fname, {"default_value", "validate_indices", "name"}, ...)
    local graph = G.graph_of_args(sparse_indices, output_shape, sparse_values)
    local values = G.convert(sparse_values, nil, graph)
    local indices = G.convert(sparse_indices, not is_tensor(sparse_indices) and dtypes.int64 or nil, graph)
    local rank = indices:get_shape().ndims
    if not rank then fail(fname .. ": sparse_indices needs a known rank (0, 1 or 2); set_shape it") end
    if rank < 2 then indices = ops.reshape(indices, {-1, 1}) end
    local shape = G.convert(output_shape, indices.dtype, graph)
    if shape:get_shape().ndims == 0 then shape = ops.reshape(shape, {1}) end
    local validate = check_bool(o.validate_indices, fname, "validate_indices")
    return G.op{"SparseToDense",
                inputs = {indices, shape, values, default_of(o.default_value, values.dtype, graph)},
                attrs = {validate_indices = validate ~= false}, name = o.name}
  end

  -- tf.sparse.sparse_dense_matmul(sp_a, b, adjoint_a, adjoint_b, name)
  -- (tf.sparse_tensor_dense_matmul, tf.sparse.matmul): A B with A a sparse
  -- matrix; the adjoints transpose (the dtypes are real).
  function sparse.sparse_dense_matmul(sp_a, b, ...)
    local fname = "tf.sparse.sparse_dense_matmul"
    local o = options(fname, {"adjoint_a", "adjoint_b", "name"}, ...)
    local a = check_sparse(fname, "sp_a", sp_a)
    return G.op{"SparseTensorDenseMatMul",
                inputs = {a.indices, a.values, a.dense_shape, G.convert(b, a.dtype, a.graph)},
                attrs = {adjoint_a = check_bool(o.adjoint_a, fname, "adjoint_a") or false,
                         adjoint_b = check_bool(o.adjoint_b, fname, "adjoint_b") or false},
                name = o.name}
  end
  sparse.matmul = sparse.sparse_dense_matmul
  tf.sparse_tensor_dense_matmul = sparse.sparse_dense_matmul

  -- tf.sparse.add(a, b, threshold, thresh, name) (tf.sparse_add): of two
  -- SparseTensors (of one shape and dtype, their entries in row-major order:
  -- tf.sparse.reorder), the SparseTensor of their merged entries, where an
  -- index both have keeps its sum when |sum| >= threshold (0: always); of a
  -- SparseTensor and a dense tensor of its shape, either way round, the dense
  -- sum (repeated indices add up).
  function sparse.add(a, b, ...)
    local fname = "tf.sparse.add"
    local o = options(fname, {"threshold", "thresh", "name", positional = 2}, ...)
    if o.threshold ~= nil and o.thresh ~= nil then
      fail(fname .. ": give threshold or thresh (its TF1 name), not both")
    end
    local threshold = o.threshold
    if threshold == nil then threshold = o.thresh end
    if is_sparse(b) and not is_sparse(a) then a, b = b, a end
    check_sparse(fname, "a or b", a)
    if is_sparse(b) then
      check_sparse(fname, "b", b)
      local thresh = G.convert(threshold or 0, a.dtype, a.graph)
      local op = G.build{"SparseAdd", inputs = {a.indices, a.values, a.dense_shape, b.indices, b.values, b.dense_shape,
                                                thresh}, name = o.name}
      local shape = a.dense_shape.op.type == "Const" and a.dense_shape or op.outputs[3]
      return sparse_tensor(fname, op.outputs[1], op.outputs[2], shape)
    end
    if threshold ~= nil then fail(fname .. ": threshold applies to the sum of two SparseTensors only") end
    return G.op{"SparseTensorDenseAdd", inputs = {a.indices, a.values, a.dense_shape, G.convert(b, a.dtype, a.graph)},
                name = o.name}
  end
  tf.sparse_add = sparse.add

  -- tf.sparse.reorder(sp_input, name) (tf.sparse_reorder): the same
  -- SparseTensor with its entries in row-major order of their indices
  -- (repeated indices keep their order); gradients reach the values.
  function sparse.reorder(sp_input, name)
    local fname = "tf.sparse.reorder"
    local sp = check_sparse(fname, "sp_input", sp_input)
    local op = G.build{"SparseReorder", inputs = {sp.indices, sp.values, sp.dense_shape}, name = name_of(name, fname)}
    return sparse_tensor(fname, op.outputs[1], op.outputs[2], sp.dense_shape)
  end
  tf.sparse_reorder = sparse.reorder

  -- tf.sparse.transpose(sp_input, perm, name) (tf.sparse_transpose): the
  -- dimensions permuted by perm (reversed when nil), entries reordered.
  function sparse.transpose(sp_input, perm, name)
    local fname = "tf.sparse.transpose"
    local sp = check_sparse(fname, "sp_input", sp_input)
    if perm == nil then
      local rank = sp.dense_shape:get_shape().dims and sp.dense_shape:get_shape().dims[1]
      if not rank or rank < 0 then fail(fname .. ": perm is required when the rank is unknown") end
      perm = {}
      for i = 1, rank do perm[i] = rank - i end
    end
    local p = G.convert(perm, dtypes.int32, sp.graph)
    local moved = sparse_tensor(fname, ops.gather(sp.indices, p, {axis = 1}), sp.values, ops.gather(sp.dense_shape, p))
    return sparse.reorder(moved, name)
  end
  tf.sparse_transpose = sparse.transpose

  -- tf.sparse.reduce_sum(sp_input, axis, keepdims, name) (tf.sparse_reduce_sum;
  -- also reduction_axes and keep_dims, TF1's names): the sum of the dense
  -- tensor the values add into, over axis (all when nil). The dense tensor
  -- is built: its size, not the number of values, bounds the cost.
  function sparse.reduce_sum(sp_input, ...)
    local fname = "tf.sparse.reduce_sum"
    local o = options(fname, {"axis", "keepdims", "name", "reduction_axes", "keep_dims"}, ...)
    local sp = check_sparse(fname, "sp_input", sp_input)
    local function either(new, old)
      if o[new] ~= nil and o[old] ~= nil then fail(fname .. ": give " .. new .. " or " .. old .. ", not both") end
      if o[new] ~= nil then return o[new] end
      return o[old]
    end
    local dense = ops.fill(sp.dense_shape, G.convert(0, sp.dtype, sp.graph))
    local summed = G.op{"SparseTensorDenseAdd", inputs = {sp.indices, sp.values, sp.dense_shape, dense}}
    -- (positionally: an options table of nils would read as an empty axis list)
    return ops.reduce_sum(summed, either("axis", "reduction_axes"),
                          check_bool(either("keepdims", "keep_dims"), fname, "keepdims") or false, o.name)
  end
  tf.sparse_reduce_sum = sparse.reduce_sum
end
