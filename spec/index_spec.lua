-- Indexing and selection ops: gather, gather_nd, scatter_nd, pad, reverse,
-- cumsum, cumprod, one_hot, argmax/argmin, top_k, in_top_k, sequence_mask,
-- boolean_mask and embedding_lookup — hand-computed values for every dtype,
-- negative axes, shapes with unknown dims (static and at run time), and
-- errors at build and run time after which the session keeps working.
local tf = require("moonflow")
local H = require("spec.helpers")
local error_of = H.error_of

local numeric = {tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8}
local all_dtypes = {tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8, tf.bool}

local function run(t, feeds) return tf.Session():run(t, feeds) end
local function tbl(t, feeds) return run(t, feeds):totable() end
local function dims(t) return t:get_shape().dims end

-- A run-time error from fetching t in sess, then a check that sess still runs.
local function run_error(sess, t, feeds)
  local ok, err = pcall(sess.run, sess, t, feeds)
  assert.is_false(ok, "expected a run-time error")
  return tostring(err)
end

-- Values converted for a dtype: booleans for bool, else the numbers.
local function as(dtype, v)
  if type(v) == "table" then
    local out = {}
    for i, x in ipairs(v) do out[i] = as(dtype, x) end
    return out
  end
  if dtype == tf.bool then return v ~= 0 end
  return v
end

describe("tf.gather", function()
  before_each(function() tf.reset_default_graph() end)

  local m = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}

  for _, dtype in ipairs(all_dtypes) do
    it("picks rows and columns of " .. dtype.name, function()
      local p = tf.constant(as(dtype, m), dtype)
      local rows = tf.gather(p, {2, 0, 2})
      assert.equal(dtype, rows.dtype)
      assert.same({3, 3}, dims(rows))
      assert.same(as(dtype, {{7, 8, 9}, {1, 2, 3}, {7, 8, 9}}), tbl(rows))
      assert.same(as(dtype, {{3, 1}, {6, 4}, {9, 7}}), tbl(tf.gather(p, {2, 0}, {axis = 1})))
      assert.same(as(dtype, {{3, 1}, {6, 4}, {9, 7}}), tbl(tf.gather(p, {2, 0}, nil, nil, -1)))
      assert.same(as(dtype, {4, 5, 6}), tbl(tf.gather(p, 1)))
    end)
  end

  it("takes float constants of integers as int32 indices, as TensorFlow makes [2, 0] int32", function()
    local p = tf.constant(m)
    -- Lua numbers are float32 constants (Lua cannot tell 2 from 2.0): where
    -- an op wants indices, a constant of integers stands for Python's ints.
    local via_constant = tf.gather(p, tf.constant({2, 0}))
    assert.equal(tf.int32, via_constant.op.inputs[2].dtype)
    assert.same({{7, 8, 9}, {1, 2, 3}}, tbl(via_constant))
    assert.same({{4, 5, 6}}, tbl(tf.gather(p, tf.convert_to_tensor({1}))))
    assert.same({{3, 1}, {6, 4}, {9, 7}}, tbl(tf.gather(p, tf.array({2, 0}), {axis = 1})))
    assert.same({{0, 1, 0}, {1, 0, 0}}, tbl(tf.one_hot(tf.constant({1, 0}), 3)))
    assert.same({{1, 2, 3, 4, 5, 6, 7, 8, 9}}, tbl(tf.reshape(p, tf.constant({1, 9}))))
    assert.same({5, 11}, tbl(tf.unsorted_segment_sum({1, 4, 2, 9}, tf.constant({0, 0, 1, 1}), 2)))
    -- Fractions are no indices: the op's own error, which names tf.cast.
    local err = H.error_of(tf.gather, p, tf.constant({0.5, 2}))
    assert.matches("indices must be int32 or int64, got float32; use tf.cast", err, 1, true)
    -- Computed float tensors and float32 asked for are never converted.
    err = H.error_of(tf.gather, p, tf.constant({1, 0}) + 0)
    assert.matches("indices must be int32 or int64, got float32", err, 1, true)
    err = H.error_of(tf.gather, p, tf.constant({1, 0}, tf.float32))
    assert.matches("indices must be int32 or int64, got float32", err, 1, true)
    err = H.error_of(tf.gather, p, tf.array({1, 0}, tf.float32))
    assert.matches("indices must be int32 or int64, got float32", err, 1, true)
  end)

  it("takes int64 and n-d indices; the result is params[:axis] + indices + params[axis+1:]", function()
    local p = tf.reshape(tf.range(12), {2, 3, 2})
    local g = tf.gather(p, tf.constant({{2, 0}, {1, 1}}, tf.int64), {axis = 1})
    assert.same({2, 2, 2, 2}, dims(g))
    assert.same({{{{4, 5}, {0, 1}}, {{2, 3}, {2, 3}}}, {{{10, 11}, {6, 7}}, {{8, 9}, {8, 9}}}}, tbl(g))
    assert.same({{{1, 0}, {3, 2}, {5, 4}}, {{7, 6}, {9, 8}, {11, 10}}}, tbl(p:gather({1, 0}, {axis = -1})))
  end)

  it("batch_dims matches the leading dims of params and indices", function()
    local p = tf.constant({{1, 2, 3}, {4, 5, 6}})
    local idx = {{2, 0}, {1, 1}}
    assert.same({{3, 1}, {5, 5}}, tbl(tf.gather(p, idx, {axis = 1, batch_dims = 1})))
    assert.same({{3, 1}, {5, 5}}, tbl(tf.gather(p, idx, {axis = -1, batch_dims = -1})))
    local p3 = tf.reshape(tf.range(12), {2, 3, 2})
    -- batch 0 picks rows 2, 0 of its [3, 2] block; batch 1 row 1
    assert.same({{{4, 5}, {0, 1}}, {{8, 9}, {8, 9}}}, tbl(tf.gather(p3, {{2, 0}, {1, 1}}, {axis = 1, batch_dims = 1})))
  end)

  it("handles empty indices and empty params dims", function()
    local p = tf.constant(m)
    local e = tf.gather(p, tf.constant({}, tf.int32))
    assert.same({0, 3}, dims(e))
    assert.same({0, 3}, run(e):shape())
    local z = tf.zeros({3, 0})
    assert.same({2, 0}, run(tf.gather(z, {1, 2})):shape())
  end)

  it("infers shapes with unknown dims and checks them at run time", function()
    local p = tf.placeholder(tf.float32, {-1, 3})
    local i = tf.placeholder(tf.int32, {-1})
    local g = tf.gather(p, i)
    assert.same({-1, 3}, dims(g))
    local sess = tf.Session()
    assert.same({{7, 8, 9}, {1, 2, 3}}, sess:run(g, {[p] = m, [i] = {2, 0}}):totable())
    assert.same({{4, 5, 6}}, sess:run(g, {[p] = {{1, 2, 3}, {4, 5, 6}}, [i] = {1}}):totable())
    local g1 = tf.gather(p, i, {axis = 1})
    assert.same({-1, -1}, dims(g1))
    local u = tf.placeholder(tf.float32)
    assert.is_nil(dims(tf.gather(u, {0})))
    local gu = tf.gather(u, {1}, {axis = 1})
    assert.same({{2}, {5}}, sess:run(gu, {[u] = {{1, 2}, {4, 5}}}):totable())
    -- batch dims must agree where both are known
    local bp = tf.placeholder(tf.float32, {2, -1})
    assert.same({2, 1}, dims(tf.gather(bp, tf.placeholder(tf.int32, {-1, 1}), {axis = 1, batch_dims = 1})))
  end)

  it("reports out-of-range indices at run time, and the session goes on", function()
    local p = tf.constant(m)
    local i = tf.placeholder(tf.int32, {-1})
    local g = tf.gather(p, i)
    local sess = tf.Session()
    assert.matches("indices%[1%] = 3 is not in %[0, 3%)", run_error(sess, g, {[i] = {0, 3}}))
    assert.matches("indices%[0%] = %-1 is not in %[0, 3%)", run_error(sess, g, {[i] = {-1}}))
    local i2 = tf.placeholder(tf.int64, {2, 2})
    assert.matches("indices%[1,0%] = 7 is not in %[0, 3%)",
                   run_error(sess, tf.gather(p, i2, {axis = 1}), {[i2] = tf.array({{0, 1}, {7, 2}}, tf.int64)}))
    assert.same({{4, 5, 6}}, sess:run(g, {[i] = {1}}):totable())
  end)

  it("rejects bad indices, axes and batch_dims when built", function()
    local p = tf.constant(m)
    assert.matches("indices must be int32 or int64, got float32", error_of(tf.gather, p, tf.constant({1.5})))
    assert.matches("axis 2 is out of range for a tensor of rank 2", error_of(tf.gather, p, {0}, {axis = 2}))
    assert.matches("params must be at least 1%-dimensional", error_of(tf.gather, tf.constant(1), {0}))
    assert.matches("batch_dims %(1%) must be <= axis %(0%)", error_of(tf.gather, p, {{0}, {1}, {2}}, {batch_dims = 1}))
    assert.matches("batch_dims %(2%) must be <= rank%(indices%) %(1%)",
                   error_of(tf.gather, p, {0}, {axis = 1, batch_dims = 2}))
    assert.matches("params.shape%[0%] = 3 but indices.shape%[0%] = 2",
                   error_of(tf.gather, p, {{0}, {1}}, {axis = 1, batch_dims = 1}))
    assert.matches("unknown option 'axes'", error_of(tf.gather, p, {0}, {axes = 1}))
    assert.matches("axis must be an integer", error_of(tf.gather, p, {0}, {axis = 0.5}))
  end)
end)

describe("tf.gather_nd and tf.scatter_nd", function()
  before_each(function() tf.reset_default_graph() end)

  for _, dtype in ipairs(all_dtypes) do
    it("gather_nd picks elements and slices of " .. dtype.name, function()
      local p = tf.constant(as(dtype, {{1, 2}, {3, 4}}), dtype)
      assert.same(as(dtype, {1, 4}), tbl(tf.gather_nd(p, {{0, 0}, {1, 1}})))
      assert.same(as(dtype, {{3, 4}, {1, 2}}), tbl(tf.gather_nd(p, {{1}, {0}})))
      local p3 = tf.cast(tf.reshape(tf.range(8), {2, 2, 2}), dtype)
      assert.same(as(dtype, {{2, 3}, {4, 5}}), tbl(tf.gather_nd(p3, {{0, 1}, {1, 0}})))
      local deep = tf.gather_nd(p3, {{{1, 1, 1}}})
      assert.same({1, 1}, dims(deep))
      assert.same(as(dtype, {{7}}), tbl(deep))
    end)
  end

  it("gather_nd with unknown dims, int64 indices and empty index vectors", function()
    local p = tf.placeholder(tf.float32, {-1, 3})
    local i = tf.placeholder(tf.int64, {-1, 2})
    local g = tf.gather_nd(p, i)
    assert.same({-1}, dims(g))
    local sess = tf.Session()
    local pv = {{1, 2, 3}, {4, 5, 6}}
    assert.same({6, 2, 4}, sess:run(g, {[p] = pv, [i] = tf.array({{1, 2}, {0, 1}, {1, 0}}, tf.int64)}):totable())
    assert.is_nil(dims(tf.gather_nd(p, tf.placeholder(tf.int32, {-1, -1}))))
    -- K = 0: each empty index vector picks all of params
    local whole = tf.gather_nd(tf.constant({1, 2}), tf.zeros({2, 0}, tf.int32))
    assert.same({2, 2}, dims(whole))
    assert.same({{1, 2}, {1, 2}}, tbl(whole))
  end)

  it("gather_nd errors: index vectors outside the shape at run time, bad ranks when built", function()
    local p = tf.constant({{1, 2}, {3, 4}})
    local i = tf.placeholder(tf.int32, {-1, 2})
    local g = tf.gather_nd(p, i)
    local sess = tf.Session()
    assert.matches("indices%[1%] = %[0, 2%] does not index into shape %[2,2%]",
                   run_error(sess, g, {[i] = {{0, 0}, {0, 2}}}))
    assert.matches("indices%[0%] = %[%-1, 0%]", run_error(sess, g, {[i] = {{-1, 0}}}))
    assert.same({2, 3}, sess:run(g, {[i] = {{0, 1}, {1, 0}}}):totable())
    assert.matches("index vectors have length 3 %(indices.shape%[%-1%]%), more than the rank 2",
                   error_of(tf.gather_nd, p, {{0, 0, 0}}))
    assert.matches("indices must be at least rank 1", error_of(tf.gather_nd, p, 0))
    assert.matches("indices must be int32 or int64", error_of(tf.gather_nd, p, tf.constant({{0.5}})))
  end)

  for _, dtype in ipairs(numeric) do
    it("scatter_nd adds updates into zeros, " .. dtype.name, function()
      local u = tf.constant({9, 10, 11, 12}, dtype)
      local s = tf.scatter_nd({{4}, {3}, {1}, {7}}, u, {8})
      assert.equal(dtype, s.dtype)
      assert.same({8}, dims(s))
      assert.same({0, 11, 0, 10, 9, 0, 0, 12}, tbl(s))
      -- duplicates add up
      assert.same({0, 3, 0}, tbl(tf.scatter_nd({{1}, {1}}, tf.constant({1, 2}, dtype), {3})))
      assert.same({{0, 5}, {6, 0}}, tbl(tf.scatter_nd({{0, 1}, {1, 0}}, tf.constant({5, 6}, dtype), {2, 2})))
      assert.same({{0, 0}, {1, 2}, {0, 0}}, tbl(tf.scatter_nd({{1}}, tf.constant({{1, 2}}, dtype), {3, 2})))
    end)
  end

  it("scatter_nd takes its shape from a tensor, known only at run time", function()
    local shape = tf.placeholder(tf.int32, {2})
    local s = tf.scatter_nd({{0}, {2}}, tf.constant({{1, 2}, {3, 4}}), shape)
    assert.same({-1, -1}, dims(s))
    local sess = tf.Session()
    assert.same({{1, 2}, {0, 0}, {3, 4}, {0, 0}}, sess:run(s, {[shape] = {4, 2}}):totable())
    -- wrong slice width for the fed shape
    assert.matches("updates has shape %[2,2%]", run_error(sess, s, {[shape] = {4, 3}}))
    assert.matches("indices%[1%] = %[2%] does not index into shape %[2,2%]", run_error(sess, s, {[shape] = {2, 2}}))
    assert.same({3, 2}, sess:run(s, {[shape] = {3, 2}}):shape())
    local dyn = tf.scatter_nd({{1}}, {5}, tf.shape(tf.zeros({3})))
    assert.same({3}, dims(dyn))
    assert.same({0, 5, 0}, tbl(dyn))
  end)

  it("scatter_nd errors: updates that do not fit, bool updates, bad shapes", function()
    assert.matches("updates has shape %[3%], but indices of shape %[2,1%] into shape %[4%] need updates of shape",
                   error_of(tf.scatter_nd, {{1}, {2}}, {1, 2, 3}, {4}))
    assert.matches("updates must be a number type, got bool", error_of(tf.scatter_nd, {{1}}, {true}, {2}))
    assert.matches("shape%[0%] = %-2 must be non%-negative", error_of(tf.scatter_nd, {{1}}, {1}, {-2}))
    assert.matches("a shape is required", error_of(tf.scatter_nd, {{1}}, {1}))
    local i = tf.placeholder(tf.int32, {1, 1})
    local sess = tf.Session()
    local s = tf.scatter_nd(i, {7}, {3})
    assert.matches("indices%[0%] = %[3%] does not index into shape %[3%]", run_error(sess, s, {[i] = {{3}}}))
    assert.same({0, 0, 7}, sess:run(s, {[i] = {{2}}}):totable())
  end)
end)

describe("tf.pad", function()
  before_each(function() tf.reset_default_graph() end)

  local t = {{1, 2, 3}, {4, 5, 6}}
  local pads = {{1, 1}, {2, 2}}

  for _, dtype in ipairs(all_dtypes) do
    it("CONSTANT, REFLECT and SYMMETRIC of " .. dtype.name .. " (TensorFlow's examples)", function()
      local x = tf.constant(as(dtype, t), dtype)
      local c = tf.pad(x, pads)
      assert.equal(dtype, c.dtype)
      assert.same({4, 7}, dims(c))
      assert.same(as(dtype, {{0, 0, 0, 0, 0, 0, 0}, {0, 0, 1, 2, 3, 0, 0}, {0, 0, 4, 5, 6, 0, 0},
                             {0, 0, 0, 0, 0, 0, 0}}), tbl(c))
      assert.same(as(dtype, {{6, 5, 4, 5, 6, 5, 4}, {3, 2, 1, 2, 3, 2, 1}, {6, 5, 4, 5, 6, 5, 4},
                             {3, 2, 1, 2, 3, 2, 1}}), tbl(tf.pad(x, pads, "REFLECT")))
      assert.same(as(dtype, {{2, 1, 1, 2, 3, 3, 2}, {2, 1, 1, 2, 3, 3, 2}, {5, 4, 4, 5, 6, 6, 5},
                             {5, 4, 4, 5, 6, 6, 5}}), tbl(tf.pad(x, pads, {mode = "SYMMETRIC"})))
    end)
  end

  it("fills with constant_values, converted to the dtype; mode is case-insensitive", function()
    local x = tf.constant({{1, 2}}, tf.int32)
    assert.same({{9, 9, 9}, {1, 2, 9}}, tbl(tf.pad(x, {{1, 0}, {0, 1}}, {constant_values = 9})))
    assert.same({{7, 1, 2}}, tbl(tf.pad(x, {{0, 0}, {1, 0}}, "CONSTANT", nil, 7)))
    assert.same({{-1.5, 1, 2}}, tbl(tf.pad(tf.constant({{1, 2}}), {{0, 0}, {1, 0}}, {constant_values = -1.5})))
    assert.same({true, false, true}, tbl(tf.pad(tf.constant({false}), {{1, 1}}, {constant_values = true})))
    assert.same({3, 2, 1, 2, 3, 2}, tbl(tf.pad(tf.constant({1, 2, 3}), {{2, 1}}, "reflect")))
    assert.same({1, 1, 2, 3, 3, 2}, tbl(tf.pad(tf.constant({1, 2, 3}), {{1, 2}}, "symmetric")))
  end)

  it("pads 1-d, 3-d, scalar and empty tensors; paddings may be an array or a constant", function()
    local x3 = tf.reshape(tf.range(4), {1, 2, 2})
    local p3 = tf.pad(x3, {{0, 1}, {1, 0}, {0, 1}})
    assert.same({2, 3, 3}, dims(p3))
    assert.same({{{0, 0, 0}, {0, 1, 0}, {2, 3, 0}}, {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}}, tbl(p3))
    assert.same({{{1, 0, 1}, {3, 2, 3}}}, tbl(tf.pad(x3, tf.array({{0, 0}, {0, 0}, {1, 0}}, tf.int32), "REFLECT")))
    assert.same({{{2, 3}, {0, 1}, {2, 3}}}, tbl(tf.pad(x3, tf.constant({{0, 0}, {1, 0}, {0, 0}}), "REFLECT")))
    assert.equal(5, run(tf.pad(tf.constant(5), {})))
    local e = tf.pad(tf.zeros({0, 2}), {{1, 1}, {0, 0}}, {constant_values = 4})
    assert.same({2, 2}, dims(e))
    assert.same({{4, 4}, {4, 4}}, tbl(e))
    assert.same({0, 4}, run(tf.pad(tf.zeros({0, 2}), {{0, 0}, {1, 1}})):shape())
  end)

  it("infers shapes with unknown dims and unknown rank", function()
    local x = tf.placeholder(tf.float32, {-1, 3})
    local p = tf.pad(x, {{1, 0}, {0, 2}})
    assert.same({-1, 5}, dims(p))
    local sess = tf.Session()
    assert.same({{0, 0, 0, 0, 0}, {1, 2, 3, 0, 0}}, sess:run(p, {[x] = {{1, 2, 3}}}):totable())
    local u = tf.placeholder(tf.float32)
    local pu = tf.pad(u, {{1, 1}})
    assert.same({-1}, dims(pu))
    assert.same({0, 1, 2, 0}, sess:run(pu, {[u] = {1, 2}}):totable())
    assert.matches("paddings has 1 %(before, after%) pairs, but the input has rank 2",
                   run_error(sess, pu, {[u] = {{1, 2}}}))
    local r = tf.pad(x, {{0, 0}, {2, 2}}, "REFLECT")
    assert.same({{3, 2, 1, 2, 3, 2, 1}}, sess:run(r, {[x] = {{1, 2, 3}}}):totable())
  end)

  it("rejects bad paddings and modes when built, too-wide mirrors at run time", function()
    local x = tf.constant(t)
    assert.matches("paddings has 1 %(before, after%) pairs, but the input has rank 2", error_of(tf.pad, x, {{1, 1}}))
    assert.matches("paddings must be non%-negative, got %-1 for dimension 1", error_of(tf.pad, x, {{0, 0}, {-1, 0}}))
    assert.matches("REFLECT padding of dimension 1 %(size 3%) takes at most 2 on each side, got %(3, 0%)",
                   error_of(tf.pad, x, {{0, 0}, {3, 0}}, "REFLECT"))
    assert.matches("SYMMETRIC padding of dimension 0 %(size 2%) takes at most 2",
                   error_of(tf.pad, x, {{0, 3}, {0, 0}}, "SYMMETRIC"))
    assert.matches("mode must be CONSTANT, REFLECT or SYMMETRIC, got 'WRAP'", error_of(tf.pad, x, pads, "wrap"))
    assert.matches("paddings must be known when the graph is built",
                   error_of(tf.pad, x, tf.placeholder(tf.int32, {2, 2})))
    assert.matches("paddings%[2%] must be a {before, after} pair", error_of(tf.pad, x, {{1, 1}, {1}}))
    assert.matches("constant_values 0.5 is not a whole number, but the tensor is int32",
                   error_of(tf.pad, tf.constant({1}, tf.int32), {{1, 1}}, {constant_values = 0.5}))
    local v = tf.placeholder(tf.float32, {-1})
    local r = tf.pad(v, {{2, 0}}, "REFLECT")
    local sess = tf.Session()
    assert.matches("REFLECT padding of dimension 0 %(size 2%) takes at most 1", run_error(sess, r, {[v] = {1, 2}}))
    assert.same({3, 2, 1, 2, 3}, sess:run(r, {[v] = {1, 2, 3}}):totable())
  end)
end)

describe("tf.reverse", function()
  before_each(function() tf.reset_default_graph() end)

  for _, dtype in ipairs(all_dtypes) do
    it("reverses " .. dtype.name .. " along listed axes", function()
      local x = tf.constant(as(dtype, {{1, 2, 3}, {4, 5, 6}}), dtype)
      assert.same(as(dtype, {{3, 2, 1}, {6, 5, 4}}), tbl(tf.reverse(x, {1})))
      assert.same(as(dtype, {{4, 5, 6}, {1, 2, 3}}), tbl(tf.reverse(x, 0)))
      assert.same(as(dtype, {{3, 2, 1}, {6, 5, 4}}), tbl(tf.reverse(x, {-1})))
      assert.same(as(dtype, {{6, 5, 4}, {3, 2, 1}}), tbl(tf.reverse(x, {0, -1})))
      assert.same(as(dtype, {{1, 2, 3}, {4, 5, 6}}), tbl(tf.reverse(x, {})))
    end)
  end

  it("reverses inner and outer axes of a 3-d tensor, scalars and empty tensors", function()
    local x = tf.reshape(tf.range(12), {2, 3, 2})
    assert.same({{{4, 5}, {2, 3}, {0, 1}}, {{10, 11}, {8, 9}, {6, 7}}}, tbl(tf.reverse(x, {1})))
    assert.same({{{7, 6}, {9, 8}, {11, 10}}, {{1, 0}, {3, 2}, {5, 4}}}, tbl(x:reverse({0, 2})))
    assert.equal(tf.reverse, tf.reverse_v2)
    assert.equal(3, run(tf.reverse(tf.constant(3), {})))
    assert.same({0, 2}, run(tf.reverse(tf.zeros({0, 2}), {0})):shape())
  end)

  it("keeps unknown dims and checks axes against the fed rank", function()
    local x = tf.placeholder(tf.int32, {-1, 2})
    local r = tf.reverse(x, {0})
    assert.same({-1, 2}, dims(r))
    local sess = tf.Session()
    assert.same({{5, 6}, {3, 4}, {1, 2}}, sess:run(r, {[x] = {{1, 2}, {3, 4}, {5, 6}}}):totable())
    local u = tf.placeholder(tf.float32)
    local ru = tf.reverse(u, {2})
    assert.is_nil(dims(ru))
    assert.matches("axis 2 is out of range for a tensor of rank 2", run_error(sess, ru, {[u] = {{1, 2}}}))
    assert.same({{{2, 1}}}, sess:run(ru, {[u] = {{{1, 2}}}}):totable())
  end)

  it("rejects repeated and out-of-range axes when built", function()
    local x = tf.constant({{1, 2}})
    assert.matches("axis 0 specified more than once", error_of(tf.reverse, x, {0, -2}))
    assert.matches("axis 2 is out of range", error_of(tf.reverse, x, {2}))
    assert.matches("axis is required", error_of(tf.reverse, x))
  end)
end)

describe("tf.cumsum", function()
  before_each(function() tf.reset_default_graph() end)

  for _, dtype in ipairs(numeric) do
    it("running sums of " .. dtype.name .. ": inclusive, exclusive, reversed", function()
      local x = tf.constant({1, 2, 3, 4}, dtype)
      assert.equal(dtype, tf.cumsum(x).dtype)
      assert.same({1, 3, 6, 10}, tbl(tf.cumsum(x)))
      assert.same({0, 1, 3, 6}, tbl(tf.cumsum(x, {exclusive = true})))
      assert.same({10, 9, 7, 4}, tbl(tf.cumsum(x, {reverse = true})))
      assert.same({9, 7, 4, 0}, tbl(tf.cumsum(x, 0, true, true)))
      local m = tf.constant({{1, 2, 3}, {4, 5, 6}}, dtype)
      assert.same({{1, 2, 3}, {5, 7, 9}}, tbl(tf.cumsum(m)))
      assert.same({{1, 3, 6}, {4, 9, 15}}, tbl(tf.cumsum(m, 1)))
      assert.same({{1, 3, 6}, {4, 9, 15}}, tbl(tf.cumsum(m, {axis = -1})))
      assert.same({{5, 3, 0}, {11, 6, 0}}, tbl(tf.cumsum(m, {axis = 1, exclusive = true, reverse = true})))
      assert.same({{4, 5, 6}, {0, 0, 0}}, tbl(tf.cumsum(m, {axis = -2, exclusive = true, reverse = true})))
    end)
  end

  it("wraps integers around as TensorFlow does; 3-d middle axis; empty", function()
    assert.same({200, 44}, tbl(tf.cumsum(tf.constant({200, 100}, tf.uint8))))
    assert.same({2147483647, -2147483648}, tbl(tf.cumsum(tf.constant({2147483647, 1}, tf.int32))))
    local x = tf.reshape(tf.range(8), {2, 2, 2})
    assert.same({{{0, 1}, {2, 4}}, {{4, 5}, {10, 12}}}, tbl(tf.cumsum(x, 1)))
    assert.equal(tf.math.cumsum, tf.cumsum)
    assert.same({0, 3}, run(tf.cumsum(tf.zeros({0, 3}), 1)):shape())
  end)

  it("unknown dims and errors", function()
    local x = tf.placeholder(tf.float64, {-1, 2})
    local c = tf.cumsum(x, 0)
    assert.same({-1, 2}, dims(c))
    local sess = tf.Session()
    assert.same({{1, 2}, {4, 6}, {9, 12}}, sess:run(c, {[x] = {{1, 2}, {3, 4}, {5, 6}}}):totable())
    assert.matches("x must be a number type, got bool", error_of(tf.cumsum, tf.constant({true})))
    assert.matches("x must be at least rank 1", error_of(tf.cumsum, tf.constant(1)))
    assert.matches("axis 1 is out of range for a tensor of rank 1", error_of(tf.cumsum, tf.constant({1}), 1))
    assert.matches("exclusive must be a boolean", error_of(tf.cumsum, tf.constant({1}), {exclusive = 1}))
    local u = tf.placeholder(tf.float32)
    local cu = tf.cumsum(u, 1)
    assert.matches("axis 1 is out of range", run_error(sess, cu, {[u] = {1, 2}}))
    assert.same({{1, 3}}, sess:run(cu, {[u] = {{1, 2}}}):totable())
  end)
end)

describe("tf.cumprod", function()
  before_each(function() tf.reset_default_graph() end)

  -- From spec/fixtures/op_coverage_values.py: {axis, exclusive, reverse, cumprod of m}.
  local m = {{1, 2, 3}, {4, 0, 5}}
  local cases = {
    {0, false, false, {{1, 2, 3}, {4, 0, 15}}},
    {0, false, true, {{4, 0, 15}, {4, 0, 5}}},
    {0, true, false, {{1, 1, 1}, {1, 2, 3}}},
    {0, true, true, {{4, 0, 5}, {1, 1, 1}}},
    {1, false, false, {{1, 2, 6}, {4, 0, 0}}},
    {1, false, true, {{6, 6, 3}, {0, 0, 5}}},
    {1, true, false, {{1, 1, 2}, {1, 4, 0}}},
    {1, true, true, {{6, 3, 1}, {0, 5, 1}}},
    {-1, false, false, {{1, 2, 6}, {4, 0, 0}}},
    {-1, false, true, {{6, 6, 3}, {0, 0, 5}}},
    {-1, true, false, {{1, 1, 2}, {1, 4, 0}}},
    {-1, true, true, {{6, 3, 1}, {0, 5, 1}}},
    {-2, false, false, {{1, 2, 3}, {4, 0, 15}}},
    {-2, false, true, {{4, 0, 15}, {4, 0, 5}}},
    {-2, true, false, {{1, 1, 1}, {1, 2, 3}}},
    {-2, true, true, {{4, 0, 5}, {1, 1, 1}}},
  }
  for _, dtype in ipairs(numeric) do
    it("running products of " .. dtype.name .. ": every axis, exclusive, reversed", function()
      local x = tf.constant(m, dtype)
      assert.equal(dtype, tf.cumprod(x).dtype)
      assert.equal("Cumprod", tf.cumprod(x).op.type)
      for _, c in ipairs(cases) do
        assert.same(c[4], tbl(tf.cumprod(x, {axis = c[1], exclusive = c[2], reverse = c[3]})))
        assert.same(c[4], tbl(tf.cumprod(x, c[1], c[2], c[3])))
      end
    end)
  end

  it("wraps integers around as TensorFlow does, propagates NaN; size-1 and empty axes", function()
    assert.same({200, 144, 176}, tbl(tf.cumprod(tf.constant({200, 2, 3}, tf.uint8))))
    assert.same({65536, 0, 0}, tbl(tf.cumprod(tf.constant({65536, 65536, 3}, tf.int32))))
    local v = tbl(tf.cumprod(tf.constant({2, 0 / 0, 0, math.huge}, tf.float64)))
    assert.equal(2, v[1])
    for i = 2, 4 do assert.is_true(v[i] ~= v[i], "NaN at " .. i) end
    assert.same({{7}}, tbl(tf.cumprod(tf.constant({{7}}), {axis = 1, exclusive = false})))
    assert.same({{1}}, tbl(tf.cumprod(tf.constant({{7}}), {axis = 1, exclusive = true})))
    assert.same({0, 3}, run(tf.cumprod(tf.zeros({0, 3}), 1)):shape())
    assert.same({3, 0}, run(tf.cumprod(tf.zeros({3, 0}), 0, true, true)):shape())
    assert.equal(tf.math.cumprod, tf.cumprod)
  end)

  it("unknown dims and errors naming the op and the caller's line", function()
    local x = tf.placeholder(tf.float32, {-1, 2})
    local c = x:cumprod(0, {reverse = true})
    assert.same({-1, 2}, dims(c))
    local sess = tf.Session()
    assert.same({{15, 48}, {15, 24}, {5, 6}}, sess:run(c, {[x] = {{1, 2}, {3, 4}, {5, 6}}}):totable())
    local line = H.this_line() + 1
    local err = error_of(function() return (tf.cumprod(tf.constant({true}))) end)
    assert.matches("^Cumprod[_%d]*: x must be a number type, got bool", err)
    assert.matches("spec/index_spec.lua:" .. line, err, 1, true)
    assert.matches("x must be at least rank 1", error_of(tf.cumprod, tf.constant(1)))
    assert.matches("axis -3 is out of range for a tensor of rank 2", error_of(tf.cumprod, x, -3), 1, true)
    assert.matches("reverse must be a boolean", error_of(tf.cumprod, x, {reverse = "yes"}))
    local u = tf.placeholder(tf.int64)
    local cu = tf.cumprod(u, 1)
    assert.matches("axis 1 is out of range", run_error(sess, cu, {[u] = {1, 2}}))
    assert.same({{1, 2}}, sess:run(cu, {[u] = tf.array({{1, 2}}, tf.int64)}):totable())
  end)
end)

describe("tf.one_hot", function()
  before_each(function() tf.reset_default_graph() end)

  for _, dtype in ipairs(all_dtypes) do
    it("encodes indices as " .. dtype.name .. "; out-of-range indices give a line of off_value", function()
      local o = tf.one_hot({0, 2, -1, 1, 3}, 3, {dtype = dtype})
      assert.equal(dtype, o.dtype)
      assert.same({5, 3}, dims(o))
      assert.same(as(dtype, {{1, 0, 0}, {0, 0, 1}, {0, 0, 0}, {0, 1, 0}, {0, 0, 0}}), tbl(o))
    end)
  end

  it("on_value and off_value, TensorFlow's example", function()
    local o = tf.one_hot({0, 2, -1, 1}, 3, 5.0, 0.0)
    assert.equal(tf.float32, o.dtype)
    assert.same({{5, 0, 0}, {0, 0, 5}, {0, 0, 0}, {0, 5, 0}}, tbl(o))
    local d = tf.one_hot({1}, 2, {on_value = tf.constant(2, tf.float64), off_value = -1})
    assert.equal(tf.float64, d.dtype)
    assert.same({{-1, 2}}, tbl(d))
    assert.same({{false, true}}, tbl(tf.one_hot({1}, 2, true, false)))
    assert.same({{7, 3}}, tbl(tf.one_hot(tf.constant({0}, tf.int64), 2, 7, 3, nil, tf.int32)))
    assert.same({{0, 1}}, tbl(tf.one_hot(tf.constant({1}, tf.uint8), 2)))
  end)

  it("puts the new axis anywhere", function()
    assert.same({{1, 0}, {0, 0}, {0, 1}}, tbl(tf.one_hot({0, 2}, 3, {axis = 0})))
    local idx = {{0, 2}, {1, -1}}
    local last = tf.one_hot(idx, 3)
    assert.same({2, 2, 3}, dims(last))
    assert.same({{{1, 0, 0}, {0, 0, 1}}, {{0, 1, 0}, {0, 0, 0}}}, tbl(last))
    local mid = tf.one_hot(idx, 3, {axis = 1})
    assert.same({2, 3, 2}, dims(mid))
    assert.same({{{1, 0}, {0, 0}, {0, 1}}, {{0, 0}, {1, 0}, {0, 0}}}, tbl(mid))
    assert.same({{1}, {0}, {0}}, tbl(tf.one_hot({0}, 3, {axis = -2})))
    assert.same({0, 1, 0}, tbl(tf.one_hot(1, 3)))
  end)

  it("depth and indices known only at run time", function()
    local depth = tf.placeholder(tf.int32, {})
    local i = tf.placeholder(tf.int32, {-1})
    local o = tf.one_hot(i, depth)
    assert.same({-1, -1}, dims(o))
    local sess = tf.Session()
    assert.same({{0, 0, 0, 1}, {1, 0, 0, 0}}, sess:run(o, {[i] = {3, 0}, [depth] = 4}):totable())
    assert.same({2, 0}, sess:run(o, {[i] = {3, 0}, [depth] = 0}):shape())
    assert.matches("depth must be non%-negative, got %-1", run_error(sess, o, {[i] = {0}, [depth] = -1}))
    assert.same({{1}}, sess:run(o, {[i] = {0}, [depth] = 1}):totable())
    assert.is_nil(dims(tf.one_hot(tf.placeholder(tf.int32), 3)))
  end)

  it("rejects float indices, mixed value dtypes, bad depths and axes", function()
    assert.matches("indices must be uint8, int32 or int64, got float32",
                   error_of(tf.one_hot, tf.constant({1.5}), 3))
    assert.matches("on_value is float64 but dtype is float32",
                   error_of(tf.one_hot, {1}, 3, {on_value = tf.constant(1, tf.float64), dtype = tf.float32}))
    assert.matches("off_value is float32 but dtype is float64",
                   error_of(tf.one_hot, {1}, 3, tf.constant(1, tf.float64), tf.constant(0, tf.float32)))
    assert.matches("on_value is float64 but off_value is float32", error_of(function()
      local G = require("moonflow.graph")
      return G.op{"OneHot", inputs = {tf.constant({1}, tf.int32), tf.constant(3, tf.int32),
                                      tf.constant(1, tf.float64), tf.constant(0, tf.float32)}}
    end))
    assert.matches("depth must be non%-negative, got %-2", error_of(tf.one_hot, {1}, -2))
    assert.matches("depth must be a scalar", error_of(tf.one_hot, {1}, {3}))
    assert.matches("axis 2 is out of range for indices of rank 1", error_of(tf.one_hot, {1}, 3, {axis = 2}))
  end)
end)

describe("tf.argmax and tf.argmin", function()
  before_each(function() tf.reset_default_graph() end)

  for _, dtype in ipairs(numeric) do
    it("indices of extremes in " .. dtype.name .. ", first on ties", function()
      local x = tf.constant({{1, 5, 3}, {7, 2, 7}}, dtype)
      local a0 = tf.argmax(x, 0)
      assert.equal(tf.int64, a0.dtype)
      assert.same({3}, dims(a0))
      assert.same({1, 0, 1}, tbl(a0))
      assert.same({1, 0}, tbl(tf.argmax(x, 1)))
      assert.same({1, 0}, tbl(tf.argmax(x, -1)))
      assert.same({1, 0, 1}, tbl(tf.argmax(x)))
      assert.same({0, 1, 0}, tbl(tf.argmin(x, 0)))
      assert.same({0, 1}, tbl(tf.argmin(x, {axis = 1})))
    end)
  end

  it("3-d inputs, int32 output_type, dimension, NaN counting as the largest", function()
    local x = tf.constant({{{1, 8}, {3, 2}}, {{5, 6}, {7, 0}}})
    for axis = 0, 2 do assert.same({{1, 0}, {1, 0}}, tbl(tf.argmax(x, axis))) end
    assert.same({{0, 1}, {0, 1}}, tbl(tf.argmin(x, 2)))
    local a32 = tf.argmax(x, {axis = 2, output_type = tf.int32})
    assert.equal(tf.int32, a32.dtype)
    assert.same({{1, 0}, {1, 0}}, tbl(a32))
    assert.same({1, 0}, tbl(tf.argmin(tf.constant({{4, 1}, {2, 3}}), nil, nil, 1)))
    local nan = tf.constant({1, 0 / 0, 3, 0 / 0})
    assert.equal(1, run(tf.argmax(nan)))
    assert.equal(1, run(tf.argmin(nan)))
    assert.equal(tf.math.argmax, tf.argmax)
  end)

  it("unknown dims and errors", function()
    local x = tf.placeholder(tf.float32, {-1, 3})
    local a = tf.argmax(x, 1)
    assert.same({-1}, dims(a))
    local sess = tf.Session()
    assert.same({2, 0}, sess:run(a, {[x] = {{1, 2, 3}, {3, 2, 1}}}):totable())
    local empty = tf.Array.new(tf.float32, {0, 3})
    assert.same({0}, sess:run(a, {[x] = empty}):shape())
    local e = tf.argmax(x, 0)
    assert.matches("reduction axis 0 is empty in shape %[0,3%]", run_error(sess, e, {[x] = empty}))
    assert.same({1, 1, 1}, sess:run(e, {[x] = {{0, 0, 0}, {1, 1, 1}}}):totable())
    assert.matches("reduction axis 1 is empty", error_of(tf.argmin, tf.zeros({2, 0}), 1))
    assert.matches("input must be a number type, got bool", error_of(tf.argmax, tf.constant({true})))
    assert.matches("output_type must be int32 or int64, got float32",
                   error_of(tf.argmax, tf.constant({1}), {output_type = tf.float32}))
    assert.matches("Cannot specify both 'axis' and 'dimension'", error_of(tf.argmax, tf.constant({1}), 0, nil, 0))
    assert.matches("input must be at least rank 1", error_of(tf.argmax, tf.constant(1)))
  end)
end)

describe("tf.nn.top_k and tf.nn.in_top_k", function()
  before_each(function() tf.reset_default_graph() end)

  for _, dtype in ipairs(numeric) do
    it("top_k of " .. dtype.name .. ": largest first, ties by index, int32 indices", function()
      local x = tf.constant({{1, 5, 3, 5}, {4, 2, 8, 1}}, dtype)
      local v, i = tf.nn.top_k(x, 2)
      assert.equal(dtype, v.dtype)
      assert.equal(tf.int32, i.dtype)
      assert.same({2, 2}, dims(v))
      assert.same({{5, 5}, {8, 4}}, tbl(v))
      assert.same({{1, 3}, {2, 0}}, tbl(i))
      local v4, i4 = tf.nn.top_k(x, {k = 4})
      assert.same({{5, 5, 3, 1}, {8, 4, 2, 1}}, tbl(v4))
      assert.same({{1, 3, 2, 0}, {2, 0, 1, 3}}, tbl(i4))
      local v1 = tf.nn.top_k(x)
      assert.same({{5}, {8}}, tbl(v1))
    end)
  end

  it("top_k of vectors, k = 0, NaN as the largest, unsorted request, method form", function()
    local v, i = tf.nn.top_k(tf.constant({3, 1, 4, 1, 5, 9, 2, 6}), 3)
    assert.same({9, 6, 5}, tbl(v))
    assert.same({5, 7, 4}, tbl(i))
    local v0 = tf.nn.top_k(tf.constant({{1, 2}}), 0)
    assert.same({1, 0}, run(v0):shape())
    local vn, inan = tf.nn.top_k(tf.constant({1, 0 / 0, 3}), 2)
    local got = tbl(vn)
    assert.is_true(got[1] ~= got[1])
    assert.equal(3, got[2])
    assert.same({1, 2}, tbl(inan))
    local _, iu = tf.nn.top_k(tf.constant({2, 7, 5}), 2, false)
    assert.same({1, 2}, tbl(iu))
    local vm = tf.constant({2, 7, 5}):top_k(1)
    assert.same({7}, tbl(vm))
    assert.equal(tf.math.top_k, tf.nn.top_k)
  end)

  it("top_k with unknown dims and a k fed at run time", function()
    local x = tf.placeholder(tf.float32, {-1, 5})
    local v, i = tf.nn.top_k(x, 2)
    assert.same({-1, 2}, dims(v))
    assert.same({-1, 2}, dims(i))
    local sess = tf.Session()
    local r = sess:run({v, i}, {[x] = {{1, 9, 3, 7, 5}}})
    assert.same({{9, 7}}, r[1]:totable())
    assert.same({{1, 3}}, r[2]:totable())
    local k = tf.placeholder(tf.int32, {})
    local vk = tf.nn.top_k(x, k)
    assert.same({-1, -1}, dims(vk))
    assert.same({{9, 7, 5}}, sess:run(vk, {[x] = {{1, 9, 3, 7, 5}}, [k] = 3}):totable())
    assert.matches("input must have at least k = 6 columns", run_error(sess, vk, {[x] = {{1, 2, 3, 4, 5}}, [k] = 6}))
    assert.same({{9}}, sess:run(vk, {[x] = {{1, 9, 3, 7, 5}}, [k] = 1}):totable())
  end)

  it("top_k errors", function()
    assert.matches("input must have at least k = 5 columns, got shape %[2,4%]",
                   error_of(tf.nn.top_k, tf.zeros({2, 4}), 5))
    assert.matches("k must be non%-negative, got %-1", error_of(tf.nn.top_k, tf.zeros({4}), -1))
    assert.matches("input must be at least rank 1", error_of(tf.nn.top_k, tf.constant(1), 1))
    assert.matches("input must be a number type, got bool", error_of(tf.nn.top_k, tf.constant({true}), 1))
    assert.matches("k must be an integer", error_of(tf.nn.top_k, tf.zeros({4}), 1.5))
  end)

  it("in_top_k: ties at the boundary count, bad targets and non-finite rows give false", function()
    local p = tf.constant({{0.1, 0.8, 0.1}, {0.3, 0.3, 0.4}, {0.5, 0.2, 0.3}, {0.5, 0.5, 0.1}})
    local t = {1, 0, 2, 1}
    local k1 = tf.nn.in_top_k(p, t, 1)
    assert.equal(tf.bool, k1.dtype)
    assert.same({4}, dims(k1))
    assert.same({true, false, false, true}, tbl(k1))
    assert.same({true, true, true, true}, tbl(tf.nn.in_top_k(p, t, 2)))
    assert.same({false, false, false, false}, tbl(tf.nn.in_top_k(p, t, 0)))
    local odd = tf.constant({{1, 2, 3}, {1, 1 / 0, 2}, {0 / 0, 1, 2}, {1, 2, 3}}, tf.float64)
    assert.same({false, false, false, false},
                tbl(tf.nn.in_top_k(odd, tf.constant({3, 0, 2, -1}, tf.int64), 3)))
    assert.same({true}, tbl(tf.math.in_top_k(tf.constant({{1, 2}}, tf.int32), {1}, 1)))
  end)

  it("in_top_k with unknown dims and errors", function()
    local p = tf.placeholder(tf.float32, {-1, 3})
    local t = tf.placeholder(tf.int32, {-1})
    local r = tf.nn.in_top_k(p, t, 1)
    assert.same({-1}, dims(r))
    local sess = tf.Session()
    assert.same({true, false}, sess:run(r, {[p] = {{1, 2, 3}, {3, 2, 1}}, [t] = {2, 2}}):totable())
    assert.matches("predictions has shape %[1,3%] but targets %[2%]",
                   run_error(sess, r, {[p] = {{1, 2, 3}}, [t] = {2, 2}}))
    assert.same({true}, sess:run(r, {[p] = {{1, 2, 3}}, [t] = {2}}):totable())
    assert.matches("predictions must be a matrix", error_of(tf.nn.in_top_k, tf.constant({1, 2}), {0}, 1))
    assert.matches("targets must be a vector", error_of(tf.nn.in_top_k, tf.constant({{1, 2}}), {{0}}, 1))
    assert.matches("targets must be int32 or int64", error_of(tf.nn.in_top_k, tf.constant({{1, 2}}), tf.constant({0.5}), 1))
    assert.matches("k must be an integer", error_of(tf.nn.in_top_k, tf.constant({{1, 2}}), {0}))
  end)
end)

describe("tf.sequence_mask", function()
  before_each(function() tf.reset_default_graph() end)

  it("masks up to each length (TensorFlow's example), maxlen defaulting to the largest", function()
    local m = tf.sequence_mask({1, 3, 2}, 5)
    assert.equal(tf.bool, m.dtype)
    assert.same({3, 5}, dims(m))
    assert.same({{true, false, false, false, false}, {true, true, true, false, false},
                 {true, true, false, false, false}}, tbl(m))
    local d = tf.sequence_mask({1, 3, 2})
    assert.same({3, -1}, dims(d))
    assert.same({{true, false, false}, {true, true, true}, {true, true, false}}, tbl(d))
    local two = tf.sequence_mask({{1, 3}, {2, 0}}, 3)
    assert.same({2, 2, 3}, dims(two))
    assert.same({{{true, false, false}, {true, true, true}}, {{true, true, false}, {false, false, false}}}, tbl(two))
  end)

  for _, dtype in ipairs(all_dtypes) do
    it("gives " .. dtype.name .. " values", function()
      local m = tf.sequence_mask(tf.constant({2, 0}, tf.int64), {maxlen = 3, dtype = dtype})
      assert.equal(dtype, m.dtype)
      assert.same(as(dtype, {{1, 1, 0}, {0, 0, 0}}), tbl(m))
    end)
  end

  it("lengths and maxlen at run time; empty lengths; errors", function()
    local l = tf.placeholder(tf.int32, {-1})
    local n = tf.placeholder(tf.int32, {})
    local m = tf.sequence_mask(l, n, tf.float32)
    assert.same({-1, -1}, dims(m))
    local sess = tf.Session()
    assert.same({{1, 1, 0, 0}, {0, 0, 0, 0}}, sess:run(m, {[l] = {2, -1}, [n] = 4}):totable())
    assert.matches("maxlen must be non%-negative, got %-4", run_error(sess, m, {[l] = {2}, [n] = -4}))
    assert.same({{1}}, sess:run(m, {[l] = {2}, [n] = 1}):totable())
    assert.same({0, 0}, run(tf.sequence_mask(tf.constant({}, tf.int32))):shape())
    assert.matches("lengths must be int32 or int64, got float32", error_of(tf.sequence_mask, tf.constant({1.5}), 2))
    assert.matches("maxlen must be a scalar", error_of(tf.sequence_mask, {1}, {2}))
  end)
end)

describe("tf.boolean_mask", function()
  before_each(function() tf.reset_default_graph() end)

  for _, dtype in ipairs(all_dtypes) do
    it("keeps the entries of " .. dtype.name .. " where the mask is true", function()
      local x = tf.constant(as(dtype, {{1, 2}, {3, 4}, {5, 6}}), dtype)
      local r = tf.boolean_mask(x, {true, false, true})
      assert.equal(dtype, r.dtype)
      assert.same({2, 2}, dims(r))
      assert.same(as(dtype, {{1, 2}, {5, 6}}), tbl(r))
      local m2 = tf.boolean_mask(x, {{true, false}, {false, true}, {true, true}})
      assert.same({4}, dims(m2))
      assert.same(as(dtype, {1, 4, 5, 6}), tbl(m2))
    end)
  end

  it("masks from an axis; an all-false mask gives an empty result", function()
    local x = tf.constant({{1, 2, 3}, {4, 5, 6}})
    assert.same({{1, 3}, {4, 6}}, tbl(tf.boolean_mask(x, {true, false, true}, {axis = 1})))
    assert.same({{1, 3}, {4, 6}}, tbl(tf.boolean_mask(x, {true, false, true}, nil, -1)))
    local x3 = tf.reshape(tf.range(12), {2, 3, 2})
    assert.same({{{2, 3}}, {{8, 9}}}, tbl(tf.boolean_mask(x3, {false, true, false}, {axis = 1})))
    assert.same({{0, 1}, {8, 9}}, tbl(tf.boolean_mask(x3, {{true, false, false}, {false, true, false}})))
    local none = tf.boolean_mask(x, {false, false})
    assert.same({0, 3}, dims(none))
    assert.same({0, 3}, run(none):shape())
    assert.matches("^boolean_mask_?%d*:0$", tf.boolean_mask(x, {true, true}).name)
  end)

  it("a mask known only at run time: an unknown dim, a size per run", function()
    local x = tf.placeholder(tf.float32, {-1, 2})
    local m = tf.placeholder(tf.bool, {-1})
    local r = tf.boolean_mask(x, m)
    assert.same({-1, 2}, dims(r))
    local sess = tf.Session()
    local xv = {{1, 2}, {3, 4}, {5, 6}}
    assert.same({{3, 4}}, sess:run(r, {[x] = xv, [m] = {false, true, false}}):totable())
    assert.same({{1, 2}, {3, 4}, {5, 6}}, sess:run(r, {[x] = xv, [m] = {true, true, true}}):totable())
    assert.same({0, 2}, sess:run(r, {[x] = xv, [m] = {false, false, false}}):shape())
    -- a mask computed in the graph
    local pos = tf.boolean_mask(x, tf.greater(tf.reduce_sum(x, 1), 4))
    assert.same({{3, 4}, {5, 6}}, sess:run(pos, {[x] = xv}):totable())
    assert.is_nil(dims(tf.boolean_mask(tf.placeholder(tf.float32), m)))
    -- a constant mask fixes the static shape, but feeding it another value still works
    local c = tf.constant({true, false, true})
    local rc = tf.boolean_mask(x, c)
    assert.same({2, 2}, dims(rc))
    assert.same({{1, 2}, {3, 4}, {5, 6}}, sess:run(rc, {[x] = xv, [c] = {true, true, true}}):totable())
    assert.same({{1, 2}, {5, 6}}, sess:run(rc, {[x] = xv}):totable())
  end)

  it("errors: non-bool and scalar masks, shape mismatches when built and run", function()
    local x = tf.constant({{1, 2}, {3, 4}, {5, 6}})
    assert.matches("mask must be bool, got float32", error_of(tf.boolean_mask, x, tf.constant({1, 0, 1})))
    assert.matches("mask cannot be a scalar", error_of(tf.boolean_mask, x, true))
    assert.matches("mask of shape %[2%] does not match the dims %[0, 1%) of the tensor's shape %[3,2%]",
                   error_of(tf.boolean_mask, x, {true, false}))
    assert.matches("a mask of rank 2 at axis 1 does not fit a tensor of rank 2",
                   error_of(tf.boolean_mask, x, {{true}}, {axis = 1}))
    local m = tf.placeholder(tf.bool, {-1})
    local r = tf.boolean_mask(x, m)
    local sess = tf.Session()
    assert.matches("mask of shape %[2%] does not match", run_error(sess, r, {[m] = {true, true}}))
    assert.same({{5, 6}}, sess:run(r, {[m] = {false, false, true}}):totable())
  end)
end)

describe("tf.nn.embedding_lookup", function()
  before_each(function() tf.reset_default_graph() end)

  it("gathers rows of one table by ids of any shape", function()
    local params = tf.constant({{1, 2}, {3, 4}, {5, 6}})
    local e = tf.nn.embedding_lookup(params, {2, 0, 2})
    assert.equal("embedding_lookup:0", e.name)
    assert.same({{5, 6}, {1, 2}, {5, 6}}, tbl(e))
    local e2 = tf.nn.embedding_lookup(params, {{1}, {0}})
    assert.same({2, 1, 2}, dims(e2))
    assert.same({{{3, 4}}, {{1, 2}}}, tbl(e2))
    assert.same({{3, 4}}, tbl(tf.nn.embedding_lookup({params}, tf.constant({1}, tf.int64))))
  end)

  it("sharded tables follow the mod and div strategies", function()
    -- 5 ids in 3 shards by "mod": shard s holds ids s, s + 3, ...
    local mod = {tf.constant({{0, 0}, {3, 3}}), tf.constant({{1, 1}, {4, 4}}), tf.constant({{2, 2}})}
    assert.same({{4, 4}, {0, 0}, {2, 2}, {3, 3}, {1, 1}}, tbl(tf.nn.embedding_lookup(mod, {4, 0, 2, 3, 1})))
    -- 5 ids in 2 shards by "div": ids 0-2, then 3-4
    local div = {tf.constant({{0}, {1}, {2}}), tf.constant({{3}, {4}})}
    assert.same({{4}, {1}, {3}}, tbl(tf.nn.embedding_lookup(div, {4, 1, 3}, "div")))
    local uneven = {tf.constant({{0}, {1}, {2}}), tf.constant({{3}})}
    assert.matches("with 4 ids in 2 shards, shard 0 should hold 2 rows but has 3",
                   error_of(tf.nn.embedding_lookup, uneven, {0}))
    assert.matches("partition_strategy must be 'mod' or 'div'",
                   error_of(tf.nn.embedding_lookup, div, {0}, {partition_strategy = "hash"}))
    assert.matches("shard 1 needs a known first dimension",
                   error_of(tf.nn.embedding_lookup, {tf.placeholder(tf.float32, {-1, 2}), tf.zeros({1, 2})}, {0}))
  end)

  it("max_norm scales rows down to it", function()
    local params = tf.constant({{3, 4}, {0.3, 0.4}, {0, 0}}, tf.float64)
    local got = tbl(tf.nn.embedding_lookup(params, {0, 1, 2}, {max_norm = 1}))
    local want = {{0.6, 0.8}, {0.3, 0.4}, {0, 0}}
    for r = 1, 3 do
      for c = 1, 2 do assert.is_true(math.abs(got[r][c] - want[r][c]) < 1e-12) end
    end
  end)

  it("an id out of range is a run-time error", function()
    local params = tf.constant({{1, 2}, {3, 4}})
    local ids = tf.placeholder(tf.int32, {-1})
    local e = tf.nn.embedding_lookup(params, ids)
    local sess = tf.Session()
    assert.matches("indices%[0%] = 2 is not in %[0, 2%)", run_error(sess, e, {[ids] = {2}}))
    assert.same({{3, 4}}, sess:run(e, {[ids] = {1}}):totable())
  end)
end)
