-- sparse_spec.lua — tf.sparse (src/ops/sparse.c and lua/moonflow/ops/sparse.lua):
-- SparseTensor, to_dense, sparse_dense_matmul (both adjoints), add of a
-- sparse and a dense tensor or of two sparse ones (threshold), reduce_sum, sparse_placeholder feeds and
-- SparseTensorValue fetches. Values and gradients from TensorFlow itself
-- (spec/fixtures/sparse_values.py, its output committed as
-- spec/fixtures/sparse_values.lua); gradients also against central
-- differences; errors for bad indices as TensorFlow gives them.
local tf = require("moonflow")
local H = require("spec.helpers")
local V = require("spec.fixtures.sparse_values")
local error_of, assert_values, without_line = H.error_of, H.assert_values, H.without_line

local IN = V.inputs
local TOL = 1e-12

local value = H.value

-- The fixture's sparse matrix with values v (a tensor or a Lua list).
local function sp(v) return tf.SparseTensor(IN.INDICES, v, IN.SHAPE, {dtype = tf.float64}) end

-- sum(y * weights), the fixture script's weights: (i * 7 % 11 - 5) / 4.
local function weighted_sum(y)
  local n = H.numel(y:get_shape():as_list())
  local w = {}
  for i = 0, n - 1 do w[i + 1] = (i * 7 % 11 - 5) / 4 end
  return tf.reduce_sum(y * tf.reshape(tf.constant(w, tf.float64), y:get_shape():as_list()))
end

describe("tf.sparse", function()
  before_each(tf.reset_default_graph)

  it("SparseTensor: parts, dtype, static shape, printing, fetched as a SparseTensorValue", function()
    local s = sp(IN.VALUES)
    assert.equal(tf.int64, s.indices.dtype)
    assert.equal(tf.int64, s.dense_shape.dtype)
    assert.equal(tf.float64, s.dtype)
    assert.same({3, 4}, s:get_shape():as_list())
    assert.truthy(tostring(s):find("^SparseTensor%(indices=Tensor"))
    local v = H.run(s)
    assert.same(IN.INDICES, v.indices:totable())
    assert.same(IN.VALUES, v.values:totable())
    assert.same(IN.SHAPE, v.dense_shape:totable())
    assert.truthy(tostring(v):find("SparseTensorValue(indices=[[0, 1],\n [0, 3]", 1, true))
    assert.same({-1, -1}, tf.SparseTensor(tf.placeholder(tf.int64, {-1, 2}), tf.placeholder(tf.float32, {-1}),
                                          tf.placeholder(tf.int64, {2})):get_shape():as_list())
  end)

  it("to_dense, with a default value; tf.sparse_to_dense's vector form", function()
    assert_values(V.to_dense, value(tf.sparse.to_dense(sp(IN.VALUES))), 0)
    assert_values(V.to_dense_default, value(tf.sparse_tensor_to_dense(sp(IN.VALUES), 7)), 0)
    assert_values({0, 5, 0, 5}, value(tf.sparse_to_dense(tf.constant({1, 3}, tf.int32), {4}, 5)), 0)
    assert_values({{0, 2}, {0, 0}}, value(tf.sparse_to_dense({{0, 1}}, {2, 2}, tf.constant({2}, tf.int32))), 0)
    local fd = H.run(tf.sparse.from_dense(tf.constant(V.to_dense, tf.float64)))
    assert.same(IN.INDICES, fd.indices:totable())
    assert.same(IN.VALUES, fd.values:totable())
    assert.same(IN.SHAPE, fd.dense_shape:totable())
    -- an empty SparseTensor is all default
    local empty = tf.SparseTensor(tf.zeros({0, 2}, tf.int64), tf.zeros({0}), {2, 1})
    assert_values({{0}, {0}}, value(tf.sparse.to_dense(empty)), 0)
  end)

  it("sparse_dense_matmul, every adjoint: values and gradients", function()
    for _, case in ipairs(V.matmul) do
      local adj_a, adj_b, b_value, want, want_dv, want_db = unpack(case)
      local v, b = tf.constant(IN.VALUES, tf.float64), tf.constant(b_value, tf.float64)
      local y = tf.sparse.sparse_dense_matmul(sp(v), b, adj_a, adj_b)
      assert.same({#want, #want[1]}, y:get_shape():as_list())
      local g = tf.gradients(weighted_sum(y), {v, b})
      local r = H.run({y, g[1], g[2]})
      assert_values(want, r[1]:totable(), TOL)
      assert_values(want_dv, r[2]:totable(), TOL)
      assert_values(want_db, r[3]:totable(), TOL)
    end
    -- float32 and the integer dtypes multiply too
    local s32 = tf.SparseTensor({{0, 0}, {1, 1}}, tf.constant({2, 3}, tf.int32), {2, 2})
    assert_values({{2, 4}, {9, 12}}, value(tf.sparse_tensor_dense_matmul(s32, tf.constant({{1, 2}, {3, 4}},
                                                                                            tf.int32))), 0)
  end)

  it("add of a sparse and a dense tensor (either order), and reduce_sum: values and gradients", function()
    local v, d = tf.constant(IN.VALUES, tf.float64), tf.constant(IN.DENSE, tf.float64)
    local y = tf.sparse.add(sp(v), d)
    local g = tf.gradients(weighted_sum(y), {v, d})
    local r = H.run({y, g[1], g[2], tf.sparse_add(d, sp(v))})
    assert_values(V.add, r[1]:totable(), TOL)
    assert_values(V.add_grad_values, r[2]:totable(), TOL)
    assert_values(V.add_grad_dense, r[3]:totable(), TOL)
    assert_values(V.add, r[4]:totable(), TOL)
    for _, case in ipairs(V.reduce_sum) do
      local axis, keepdims, want, want_dv = unpack(case)
      local s = tf.sparse.reduce_sum(sp(v), {axis = axis, keepdims = keepdims})
      local out = H.run({s, tf.gradients(weighted_sum(s), v)[1]})
      local got = type(out[1]) == "number" and out[1] or out[1]:totable()
      assert_values(want, got, TOL)
      assert_values(want_dv, out[2]:totable(), TOL)
    end
    assert.equal(H.run(tf.sparse_reduce_sum(sp(v), {reduction_axes = 1, keep_dims = true})):shape()[2], 1)
    -- repeated indices add up
    local rep = tf.SparseTensor({{0, 0}, {0, 0}}, {1, 2}, {1, 2})
    assert_values({{3, 0}}, value(tf.sparse.add(rep, tf.zeros({1, 2}))), 0)
  end)

  it("add of two SparseTensors: merged entries, threshold, TensorFlow's gradients (SparseAddGrad)", function()
    local v, w = tf.constant(IN.VALUES, tf.float64), tf.constant(IN.OTHER_VALUES, tf.float64)
    local other = tf.SparseTensor(IN.OTHER, w, IN.SHAPE)
    for _, case in ipairs(V.sparse_add) do
      local threshold, indices, values, dv, dw = unpack(case)
      local sum = tf.sparse.add(sp(v), other, threshold)
      assert.same({3, 4}, sum:get_shape():as_list())
      -- sum.values has no static length: the weights are set to the entries expected.
      local weighted = weighted_sum(tf.reshape(sum.values, {#values}))
      local g = tf.gradients(weighted, {v, w})
      local r = H.run({sum, g[1], g[2]})
      assert_values(indices, r[1].indices:totable(), 0)
      assert_values(values, r[1].values:totable(), TOL)
      assert_values({3, 4}, r[1].dense_shape:totable(), 0)
      assert_values(dv, r[2]:totable(), TOL)
      assert_values(dw, r[3]:totable(), TOL)
    end
    -- TF1's name for the threshold, and integer values (|sum| >= 3 kept where both have an entry).
    local a = tf.SparseTensor({{0}, {2}, {3}}, tf.constant({1, 2, -5}, tf.int32), {4})
    local b = tf.SparseTensor({{1}, {2}, {3}}, tf.constant({7, 0, 1}, tf.int32), {4})
    local r = H.run(tf.sparse_add(a, b, {thresh = 3}))
    assert_values({{0}, {1}, {3}}, r.indices:totable(), 0)
    assert_values({1, 7, -4}, r.values:totable(), 0)
    -- Repeated indices in one operand stay repeated, as TensorFlow's merge leaves them.
    local rep = tf.SparseTensor({{0, 0}, {0, 0}}, {1, 2}, {1, 2})
    r = H.run(tf.sparse.add(rep, tf.SparseTensor({{0, 1}}, {5}, {1, 2})))
    assert_values({{0, 0}, {0, 0}, {0, 1}}, r.indices:totable(), 0)
    assert_values({1, 2, 5}, r.values:totable(), 0)
  end)

  it("reorder (stable for repeated indices) and transpose: TensorFlow's entries and gradient", function()
    local v = tf.constant(IN.VALUES, tf.float64)
    local r = tf.sparse.reorder(tf.SparseTensor(IN.SHUFFLED, v, IN.SHAPE))
    local g = tf.gradients(weighted_sum(r.values), v)[1]
    local out = H.run({r, g})
    assert.same(V.reorder.indices, out[1].indices:totable())
    assert_values(V.reorder.values, out[1].values:totable(), 0)
    assert_values(V.reorder.grad, out[2]:totable(), TOL)
    local t = H.run(tf.sparse_transpose(sp(IN.VALUES)))
    assert.same(V.transpose.indices, t.indices:totable())
    assert_values(V.transpose.values, t.values:totable(), 0)
    assert.same(V.transpose.dense_shape, t.dense_shape:totable())
    -- what to_dense refused unsorted it takes reordered
    local unsorted = tf.SparseTensor({{1, 1}, {0, 1}}, {3, 4}, {2, 3})
    assert_values({{0, 4, 0}, {0, 3, 0}}, value(tf.sparse.to_dense(tf.sparse_reorder(unsorted))), 0)
    local p = tf.placeholder(tf.float64, {5})
    H.check_grad(p, {5}, tf.sparse.reorder(tf.SparseTensor(IN.SHUFFLED, p, IN.SHAPE)).values, {5},
                 {x_init_value = IN.VALUES}, 1e-8)
  end)

  it("gradients against central differences", function()
    local v = tf.placeholder(tf.float64, {5})
    local b = tf.placeholder(tf.float64, {4, 2})
    local init_b = H.values(8)
    local y = tf.sparse.sparse_dense_matmul(sp(v), tf.reshape(tf.constant(init_b, tf.float64), {4, 2}))
    H.check_grad(v, {5}, y, {3, 2}, {x_init_value = IN.VALUES}, 1e-8)
    local y2 = tf.sparse.sparse_dense_matmul(sp(tf.constant(IN.VALUES, tf.float64)), b, {adjoint_b = false})
    H.check_grad(b, {4, 2}, y2, {3, 2}, {x_init_value = init_b}, 1e-8)
    H.check_grad(v, {5}, tf.sparse.to_dense(sp(v), 2), {3, 4}, {x_init_value = IN.VALUES}, 1e-8)
    H.check_grad(v, {5}, tf.sparse.reduce_sum(sp(v), 0), {4}, {x_init_value = IN.VALUES}, 1e-8)
    -- sparse + sparse: the 7 entries of the sum (threshold 0), with respect to both operands' values.
    local other = tf.SparseTensor(IN.OTHER, v, IN.SHAPE)
    local sum = tf.reshape(tf.sparse.add(sp(tf.constant(IN.VALUES, tf.float64)), other).values, {7})
    H.check_grad(v, {5}, sum, {7}, {x_init_value = IN.OTHER_VALUES}, 1e-8)
    H.check_grad(v, {5}, tf.reshape(tf.sparse.add(sp(v), tf.SparseTensor(IN.OTHER, tf.constant(IN.OTHER_VALUES,
                 tf.float64), IN.SHAPE)).values, {7}), {7}, {x_init_value = IN.VALUES}, 1e-8)
    local y3 = tf.sparse.sparse_dense_matmul(sp(tf.constant(IN.VALUES, tf.float64)), b, {adjoint_a = false})
    local gg = tf.gradients(weighted_sum(y3), b)[1]
    assert.same({4, 2}, gg:get_shape():as_list())
  end)

  it("sparse_placeholder: fed from a SparseTensorValue or a table, with or without a static shape", function()
    local p = tf.sparse_placeholder(tf.float32, nil, "sp")
    assert.equal("sp/indices:0", p.indices.name)
    local dense = tf.sparse.to_dense(p)
    local sess = tf.Session()
    assert_values({{0, 5}, {6, 0}}, sess:run(dense, {[p] = tf.SparseTensorValue({{0, 1}, {1, 0}}, {5, 6}, {2, 2})})
                                        :totable(), 0)
    assert_values({{0, 0, 1}}, sess:run(dense, {[p] = {indices = {{0, 2}}, values = {1}, dense_shape = {1, 3}}})
                                    :totable(), 0)
    local q = tf.sparse_placeholder(tf.float64, {2, 3})
    assert.equal("Const", q.dense_shape.op.type)
    assert.same({2, 3}, q:get_shape():as_list())
    local m = tf.sparse.sparse_dense_matmul(q, tf.ones({3, 1}, tf.float64))
    assert.same({2, 1}, m:get_shape():as_list())
    assert_values({{7}, {0}}, sess:run(m, {[q] = {indices = {{0, 0}, {0, 2}}, values = {3, 4}, dense_shape = {2, 3}}})
                                  :totable(), 0)
    local err = error_of(sess.run, sess, dense, {[p] = {1, 2}})
    assert.truthy(err:find("the feed for a SparseTensor must be a tf.SparseTensorValue", 1, true), err)
  end)

  it("bad indices at run time, in TensorFlow's words, naming the caller's line; the session goes on", function()
    local sess = tf.Session()
    local function run_error(t)
      local ok, err = pcall(sess.run, sess, t)
      assert.is_false(ok)
      return tostring(err)
    end
    local line = H.this_line() + 1
    local unsorted = tf.sparse.to_dense(tf.SparseTensor({{1, 1}, {0, 1}}, {3, 4}, {2, 3}))
    local err = run_error(unsorted)
    assert.truthy(err:find("indices[1] = [0,1] is out of order. Many sparse ops require sorted indices", 1, true),
                  err)
    assert.truthy(err:find("sparse_spec.lua:" .. line, 1, true), err)
    -- SparseAdd merges operands in row-major order, and checks both, as to_dense does.
    local sorted = tf.SparseTensor({{0, 1}, {1, 1}}, {3, 4}, {2, 3})
    err = run_error(tf.sparse.add(sorted, tf.SparseTensor({{1, 1}, {0, 1}}, {3, 4}, {2, 3})).values)
    assert.truthy(err:find("^SparseAdd[_%d]*: indices%[1%] = %[0,1%] is out of order"), err)
    err = run_error(tf.sparse.add(sorted, tf.SparseTensor({{0, 3}}, {3}, {2, 3})).values)
    assert.truthy(err:find("^SparseAdd[_%d]*: indices%[0%] = %[0,3%] is out of bounds: need 0 <= index < %[2,3%]"), err)
    assert.truthy(run_error(tf.sparse.to_dense(tf.SparseTensor({{0, 1}, {0, 1}}, {3, 4}, {2, 3}))):find(
      "indices[1] = [0,1] is repeated", 1, true))
    assert.truthy(run_error(tf.sparse.to_dense(tf.SparseTensor({{0, 1}, {2, 0}}, {3, 4}, {2, 3}))):find(
      "indices[1] = [2,0] is out of bounds: need 0 <= index < [2,3]", 1, true))
    assert.truthy(run_error(tf.sparse.to_dense(tf.SparseTensor({{0, -1}}, {3}, {2, 3}))):find(
      "indices[0] = [0,-1] is out of bounds", 1, true))
    -- validate_indices = false lets unsorted indices through, not out-of-bounds ones
    assert_values({{0, 4, 0}, {0, 3, 0}}, sess:run(tf.sparse.to_dense(tf.SparseTensor({{1, 1}, {0, 1}}, {3, 4},
                                                                                       {2, 3}), 0, false)):totable(), 0)
    assert.truthy(run_error(tf.sparse.sparse_dense_matmul(tf.SparseTensor({{0, 4}}, {1}, {2, 3}), tf.ones({3, 1})))
                  :find("indices[0] = [0,4] is out of bounds: need 0 <= index < [2,3]", 1, true))
    assert.truthy(run_error(tf.sparse.add(tf.SparseTensor({{3, 0}}, {1}, {2, 3}), tf.ones({2, 3}))):find(
      "indices[0] = [3,0] is out of bounds", 1, true))
    -- a dense shape fed at run time that does not fit the dense operand
    local shape = tf.placeholder(tf.int64, {2})
    local s = tf.SparseTensor({{0, 0}}, {1}, shape)
    local ok, e = pcall(sess.run, sess, tf.sparse.add(s, tf.ones({2, 3})), {[shape] = {3, 3}})
    assert.is_false(ok)
    assert.truthy(tostring(e):find("the dense shape [3,3] does not fit the shape [2,3] of the other operand", 1,
                                   true), e)
    assert_values({{2, 1, 1}, {1, 1, 1}}, sess:run(tf.sparse.add(s, tf.ones({2, 3})), {[shape] = {2, 3}}):totable(),
                  0)
  end)

  it("errors when built: ranks, dtypes, shapes that do not fit", function()
    local function msg(...) return without_line(error_of(...)) end
    local s = tf.SparseTensor({{0, 1}}, {1}, {2, 3})
    assert.truthy(msg(tf.SparseTensor, {0, 1}, {1}, {2, 3}):find("tf.SparseTensor: indices must have rank 2", 1,
                                                                 true))
    assert.truthy(msg(tf.sparse.sparse_dense_matmul, s, tf.ones({4, 2})):find(
      "Cannot multiply A and B because inner dimension does not match: 3 vs. 4.", 1, true))
    assert.truthy(msg(tf.sparse.sparse_dense_matmul, s, tf.ones({3, 2}, tf.float64)):find(
      "a_values has dtype float32 but b has dtype float64", 1, true))
    assert.truthy(msg(tf.sparse.sparse_dense_matmul, tf.SparseTensor({{0, 1, 1}}, {1}, {2, 3, 4}), tf.ones({3, 2}))
                  :find("a_shape must have 2 elements (A is a matrix), got 3", 1, true))
    assert.truthy(msg(tf.sparse.add, s, tf.ones({2, 4})):find(
      "the sparse side's shape [2,3] does not equal the dense side's [2,4]", 1, true))
    assert.truthy(msg(tf.sparse.add, s, tf.SparseTensor({{0, 1}}, {1}, {2, 4})):find(
      "Operands' shapes do not match: got 3 and 4 for dimension 1", 1, true))
    assert.truthy(msg(tf.sparse.add, s, tf.SparseTensor({{0}}, {1}, {2})):find(
      "Operands do not have the same ranks; got shapes: [2,3] and [2]", 1, true))
    assert.truthy(msg(tf.sparse.add, s, tf.SparseTensor({{0, 1}}, tf.constant({1}, tf.float64), {2, 3})):find(
      "a_values has dtype float32 but b_values has dtype float64", 1, true))
    assert.truthy(msg(tf.sparse.add, s, s, tf.constant({1, 2})):find("thresh must be a scalar, got shape [2]", 1, true))
    assert.truthy(msg(tf.sparse.add, s, s, {threshold = 1, thresh = 1}):find("give threshold or thresh", 1, true))
    assert.truthy(msg(tf.sparse.add, s, tf.ones({2, 3}), 1):find(
      "threshold applies to the sum of two SparseTensors only", 1, true))
    assert.truthy(msg(tf.sparse.to_dense, tf.ones({2})):find("sp_input must be a tf.SparseTensor", 1, true))
    assert.truthy(msg(tf.sparse.to_dense, tf.SparseTensor({{0, 1}, {1, 1}}, {1, 2, 3}, {2, 3})):find(
      "sparse_values has shape [3], should be [] or [2]", 1, true))
    assert.truthy(msg(tf.sparse.to_dense, tf.SparseTensor({{0, 1}}, {1}, {2, 3, 4})):find(
      "sparse_indices has 2 columns but output_shape has 3 elements", 1, true))
  end)
end)
