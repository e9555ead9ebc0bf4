-- Shape and layout ops: shape, size, rank, reshape, fill, zeros/ones(_like), tile,
-- slice, strided_slice and x[i], stack/unstack, concat, squeeze, expand_dims,
-- transpose, range. Expected values are hand computed with NumPy's semantics.
local tf = require("moonflow")
local H = require("spec.helpers")

local ALL = {"float32", "float64", "int32", "int64", "uint8", "bool"}

-- Nested numbers as values of dtype: bool takes v ~= 0.
local function as(dtype, v)
  if type(v) == "table" then
    local out = {}
    for i, x in ipairs(v) do out[i] = as(dtype, x) end
    return out
  end
  if dtype == "bool" then return v ~= 0 end
  return v
end

local function const(v, dtype) return tf.constant(as(dtype, v), tf[dtype]) end

-- Arrays (at any depth of a fetched structure) as plain tables.
local function plain(v)
  if tf.Array.is(v) then return v:totable() end
  if type(v) == "table" then
    local out = {}
    for k, x in pairs(v) do out[k] = plain(x) end
    return out
  end
  return v
end

-- Runs fetches in a fresh session.
local function run(fetch, feeds) return plain(tf.Session():run(fetch, feeds)) end

local function shape_of(t) return tostring(t:get_shape()) end

-- pcall that must fail; returns the message.
local function fails(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok)
  return tostring(err)
end

-- 0 .. n-1 in a nested table of `dims`.
local function arange(dims)
  local k = -1
  local function build(d)
    local t = {}
    for i = 1, dims[d] do
      if d == #dims then k = k + 1; t[i] = k else t[i] = build(d + 1) end
    end
    return t
  end
  return build(1)
end

-- x = arange(12).reshape(3, 4)
local X = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}}

describe("array ops", function()
  before_each(function() tf.reset_default_graph() end)

  describe("shape, size, rank", function()
    it("give the dynamic shape, element count and rank for every dtype", function()
      for _, dt in ipairs(ALL) do
        local x = const({{1, 0, 1}, {0, 1, 1}}, dt)
        local s = tf.shape(x)
        assert.equal("int32", s.dtype.name)
        assert.equal("(2,)", shape_of(s))
        assert.same({2, 3}, run(s))
        assert.equal(6, run(tf.size(x)))
        assert.equal(2, run(tf.rank(x)))
        assert.equal("()", shape_of(tf.size(x)))
      end
    end)

    it("take out_type int64 positionally or as an option", function()
      local x = tf.constant({{1, 2, 3}})
      local s = tf.shape(x, {out_type = tf.int64})
      assert.equal("int64", s.dtype.name)
      assert.same({1, 3}, run(s))
      assert.equal("int64", tf.shape(x, nil, tf.int64).dtype.name)
      assert.equal("int64", tf.size(x, {out_type = tf.int64}).dtype.name)
      assert.equal(3, run(tf.size(x, {out_type = tf.int64})))
      assert.equal("my_shape", tf.shape(x, "my_shape").op.name)
    end)

    it("handle scalars and empty tensors", function()
      local s = tf.constant(5)
      assert.equal("(0,)", shape_of(tf.shape(s)))
      assert.same({}, run(tf.shape(s)))
      assert.equal(1, run(tf.size(s)))
      assert.equal(0, run(tf.rank(s)))
      local e = tf.zeros({0, 4})
      assert.same({0, 4}, run(tf.shape(e)))
      assert.equal(0, run(tf.size(e)))
    end)

    it("are known at run time for unknown dimensions and ranks", function()
      local p = tf.placeholder(tf.float32, {-1, 3})
      assert.equal("(2,)", shape_of(tf.shape(p)))
      local feed = {[p] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {1, 1, 1}}}
      assert.same({4, 3}, run(tf.shape(p), feed))
      assert.equal(12, run(tf.size(p), feed))
      local u = tf.placeholder(tf.int32)
      assert.equal("(?,)", shape_of(tf.shape(u)))
      assert.equal("()", shape_of(tf.rank(u)))
      local feed3 = {[u] = {{{1}, {2}}}}
      assert.same({1, 2, 1}, run(tf.shape(u), feed3))
      assert.equal(3, run(tf.rank(u), feed3))
    end)

    it("are methods too, and reject a bad out_type", function()
      local x = tf.constant({1, 2, 3})
      assert.equal(3, run(x:size()))
      assert.equal(1, run(x:rank()))
      local err = fails(tf.shape, x, {out_type = tf.float32})
      assert.matches("Shape: out_type must be int32 or int64, got float32", err, 1, true)
    end)
  end)

  describe("reshape", function()
    it("reorders nothing and keeps every dtype", function()
      for _, dt in ipairs(ALL) do
        local x = const({{1, 0, 1}, {1, 1, 0}}, dt)
        local r = tf.reshape(x, {3, 2})
        assert.equal("(3, 2)", shape_of(r))
        assert.equal(dt, r.dtype.name)
        assert.same(as(dt, {{1, 0}, {1, 1}, {1, 0}}), run(r))
      end
    end)

    it("infers one -1 statically from a constant shape", function()
      local x = tf.constant(arange({2, 3, 2}))
      local r = tf.reshape(x, {2, -1})
      assert.equal("(2, 6)", shape_of(r))
      assert.same({{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}, run(r))
      assert.same(arange({12}), run(tf.reshape(x, {-1})))
      assert.same({{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}}, run(x:reshape{-1, 3}))
      assert.equal(7, run(tf.reshape(tf.constant({7}), {})))
      assert.equal("()", shape_of(tf.reshape(tf.constant({7}), {})))
    end)

    it("takes the shape as an int32 or int64 tensor", function()
      local x = tf.constant(arange({6}))
      assert.same({{0, 1}, {2, 3}, {4, 5}}, run(tf.reshape(x, tf.constant({3, 2}, tf.int64))))
      local s = tf.placeholder(tf.int32, {2})
      local r = tf.reshape(x, s)
      assert.equal("(?, ?)", shape_of(r))
      assert.same({{0, 1, 2}, {3, 4, 5}}, run(r, {[s] = {2, -1}}))
      assert.same({{0, 1, 2, 3, 4, 5}}, run(r, {[s] = {1, 6}}))
      local any = tf.placeholder(tf.int32)
      assert.equal("<unknown>", shape_of(tf.reshape(x, any)))
    end)

    it("keeps what is known of partly known inputs", function()
      local p = tf.placeholder(tf.float32, {-1, 10, 32})
      local r = tf.reshape(p, {-1, 320})
      assert.equal("(?, 320)", shape_of(r))
      local q = tf.placeholder(tf.float32, {-1, 3})
      local flat = tf.reshape(q, {-1})
      assert.equal("(?,)", shape_of(flat))
      assert.same({1, 2, 3, 4, 5, 6}, run(flat, {[q] = {{1, 2, 3}, {4, 5, 6}}}))
    end)

    it("handles empty tensors", function()
      local e = tf.zeros({0, 3})
      assert.equal("(0, 3)", shape_of(tf.reshape(e, {-1, 3})))
      assert.same({0, 3}, run(tf.shape(tf.reshape(e, {-1, 3}))))
      assert.same({3, 0}, run(tf.shape(tf.reshape(e, {3, 0}))))
      local err = fails(tf.reshape, e, {0, -1})
      assert.matches("Reshape cannot infer the missing input size for an empty tensor", err, 1, true)
    end)

    it("reports impossible shapes when the op is built", function()
      local x = tf.constant({1, 2, 3, 4, 5, 6})
      local err = fails(tf.reshape, x, {4})
      assert.matches("Reshape: Cannot reshape a tensor with 6 elements to shape [4] (4 elements)", err, 1, true)
      assert.matches("array_spec.lua:%d+", err)
      err = fails(tf.reshape, x, {4, -1})
      assert.matches("Input to reshape is a tensor with 6 values, but the requested shape [4,-1] requires a multiple of 4",
                     err, 1, true)
      err = fails(tf.reshape, x, {-1, -1})
      assert.matches("only one input size may be -1, not both 0 and 1", err, 1, true)
      err = fails(tf.reshape, x, {2, -3})
      assert.matches("size 1 must be non-negative, not -3", err, 1, true)
      err = fails(tf.reshape, tf.placeholder(tf.float32, {-1, 3}), {4})
      assert.matches("Cannot reshape a tensor of shape [-1,3] (a multiple of 3 elements) to shape [4]", err, 1, true)
      err = fails(tf.reshape, x, tf.constant({2, 3}, tf.float32))
      assert.matches("Reshape[_%d]*: shape must be int32 or int64, got float32; use tf.cast", err)
      -- A constant that is float32 only because Lua numbers are is taken for ints, as TensorFlow's [2, 3].
      assert.same({2, 3}, tf.reshape(x, tf.constant({2, 3})):get_shape():as_list())
      err = fails(tf.reshape, x, {2.5, 2})
      assert.matches("tf.reshape: shape[1] must be an integer", err, 1, true)
    end)

    it("reports a mismatch at run time and the session keeps working", function()
      local p = tf.placeholder(tf.float32)
      local r = tf.reshape(p, {4})
      assert.equal("(4,)", shape_of(r))
      local sess = tf.Session()
      local err = fails(sess.run, sess, r, {[p] = {{1, 2, 3}, {4, 5, 6}}})
      assert.matches("Cannot reshape a tensor with 6 elements to shape [4] (4 elements)", err, 1, true)
      assert.matches("[[node Reshape", err, 1, true)
      assert.same({1, 2, 3, 4}, sess:run(r, {[p] = {{1, 2}, {3, 4}}}):totable())
    end)

    it("reads static dims through tf.shape, tf.unstack, x[i] and tf.stack", function()
      local p = tf.placeholder(tf.float32, {-1, 2, 3})
      local y = tf.zeros({3, 2})
      local x = tf.constant(arange({6}))
      assert.equal("(3, 2)", shape_of(tf.reshape(x, tf.shape(y))))
      local parts = tf.unstack(tf.shape(p))
      assert.equal("(?, 6)", shape_of(tf.reshape(p, tf.stack({parts[1], 6}))))
      assert.equal("(3, 2)", shape_of(tf.reshape(x, tf.stack({tf.shape(p)[-1], tf.shape(p)[1]}))))
      assert.equal("(?, 2)", shape_of(tf.fill(tf.stack({tf.shape(p)[0], 2}), 1)))
      assert.equal("(?, 2, 3)", shape_of(tf.zeros(tf.shape(p))))
      local d = tf.placeholder(tf.int32, {2})
      assert.equal("(?, ?)", shape_of(tf.reshape(x, tf.stack({d[0], d[1]}))))
      assert.same({{0, 1, 2}, {3, 4, 5}}, run(tf.reshape(x, tf.stack({d[0], d[1]})), {[d] = {2, 3}}))
      -- one unknown dimension follows from the element count
      local r = tf.reshape(x, tf.stack({tf.shape(y)[1], d[0]}))
      assert.equal("(2, 3)", shape_of(r))
      assert.same({{0, 1, 2}, {3, 4, 5}}, run(r, {[d] = {3, 0}}))
      local err = fails(tf.reshape, x, tf.stack({tf.shape(y)[0], 3}))
      assert.matches("Cannot reshape a tensor with 6 elements to shape [3,3] (9 elements)", err, 1, true)
      err = fails(tf.reshape, x, tf.stack({tf.shape(p)[2], 4, d[0]}))
      assert.matches("Input to reshape is a tensor with 6 values, but the requested shape [3,4,-1] requires a multiple of 12",
                     err, 1, true)
    end)

    it("computes at run time the shape the value has, whatever set_shape promised", function()
      local x = tf.constant(arange({6}))
      local d = tf.placeholder(tf.int32, {2})
      local r = tf.reshape(x, d)
      r:set_shape({5, 3})
      assert.same({5, 3}, r:get_shape():as_list())
      local sess = tf.Session()
      assert.same({2, 3}, sess:run(r, {[d] = {2, 3}}):shape())
      assert.same({3, 2}, sess:run(r, {[d] = {3, 2}}):shape())
    end)

    it("is a view: a steady run allocates nothing, reshape or not", function()
      local p = tf.placeholder(tf.float32, {4, 6})
      local y = tf.reduce_sum(tf.squeeze(tf.expand_dims(tf.reshape(p * 2, {6, 4}), 0)) + 1)
      local sess = tf.Session()
      local feed = {[p] = tf.Array.new(tf.float32, {4, 6})}
      assert.equal(24, sess:run(y, feed))
      local warm = sess:num_allocations()
      for _ = 1, 3 do assert.equal(24, sess:run(y, feed)) end
      assert.equal(warm, sess:num_allocations())
    end)

    it("packs lists that mix numbers and scalar tensors", function()
      local p = tf.placeholder(tf.float32, {-1, 2, 3})
      local r = tf.reshape(p, {tf.shape(p)[0], 6})
      assert.equal("(?, 6)", shape_of(r))
      local v = run(r, {[p] = {arange({2, 3}), arange({2, 3})}})
      assert.same({{0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5}}, v)
    end)
  end)

  describe("fill, zeros, ones", function()
    it("fill a shape with a scalar of any dtype", function()
      local vals = {float32 = 2.5, float64 = -1.25, int32 = -7, int64 = 2 ^ 40, uint8 = 200, bool = true}
      for _, dt in ipairs(ALL) do
        local f = tf.fill({2, 3}, tf.constant(vals[dt], tf[dt]))
        assert.equal(dt, f.dtype.name)
        assert.equal("(2, 3)", shape_of(f))
        local v = vals[dt]
        assert.same({{v, v, v}, {v, v, v}}, run(f))
      end
      assert.same({9, 9}, run(tf.fill({2}, 9)))
      assert.equal("float32", tf.fill({2}, 9).dtype.name)
      assert.equal(4, run(tf.fill({}, 4)))
    end)

    it("takes dims from a tensor", function()
      local d = tf.placeholder(tf.int32, {2})
      local f = tf.fill(d, 1)
      assert.equal("(?, ?)", shape_of(f))
      assert.same({{1, 1, 1}, {1, 1, 1}}, run(f, {[d] = {2, 3}}))
      assert.same({}, run(f, {[d] = {0, 3}}))
      local x = tf.placeholder(tf.float32, {-1, 2})
      local z = tf.fill(tf.shape(x), 0.5)
      assert.same({{0.5, 0.5}}, run(z, {[x] = {{1, 2}}}))
    end)

    it("rejects negative dims and non-scalar values", function()
      local err = fails(tf.fill, {2, -2}, 1)
      assert.matches("Fill: dims[1] = -2 must be nonnegative", err, 1, true)
      err = fails(tf.fill, {2}, tf.constant({1, 2}))
      assert.matches("value must be a scalar, got shape [2]", err, 1, true)
      local d = tf.placeholder(tf.int32, {1})
      local f = tf.fill(d, 3)
      local sess = tf.Session()
      err = fails(sess.run, sess, f, {[d] = {-1}})
      assert.matches("dims[0] = -1 must be nonnegative", err, 1, true)
      assert.same({3, 3}, sess:run(f, {[d] = {2}}):totable())
    end)

    it("zeros and ones default to float32 and take any dtype", function()
      local z = tf.zeros({2, 2})
      assert.equal("float32", z.dtype.name)
      assert.equal("zeros", z.op.name)
      assert.equal("Fill", z.op.type)
      assert.same({{0, 0}, {0, 0}}, run(z))
      assert.same({1, 1, 1}, run(tf.ones(3)))
      assert.equal("ones", tf.ones(3).op.name:sub(1, 4))
      assert.equal(0, run(tf.zeros({})))
      for _, dt in ipairs(ALL) do
        assert.same(as(dt, {{0, 0, 0}}), run(tf.zeros({1, 3}, tf[dt])))
        assert.same(as(dt, {{1}, {1}}), run(tf.ones({2, 1}, {dtype = tf[dt]})))
      end
      assert.equal("(0, 2)", shape_of(tf.zeros({0, 2})))
      local p = tf.placeholder(tf.float32, {-1, 2})
      assert.same({{1, 1}, {1, 1}, {1, 1}}, run(tf.ones(tf.shape(p), tf.int64), {[p] = arange({3, 2})}))
    end)

    it("zeros_like and ones_like keep shape and dtype, or take a dtype", function()
      for _, dt in ipairs(ALL) do
        local x = const({{1, 0, 1}, {1, 1, 1}}, dt)
        local z, o = tf.zeros_like(x), tf.ones_like(x)
        assert.equal(dt, z.dtype.name)
        assert.equal("(2, 3)", shape_of(o))
        assert.same(as(dt, {{0, 0, 0}, {0, 0, 0}}), run(z))
        assert.same(as(dt, {{1, 1, 1}, {1, 1, 1}}), run(o))
      end
      local i = tf.constant({1, 2, 3}, tf.int32)
      local f = tf.ones_like(i, tf.float64)
      assert.equal("float64", f.dtype.name)
      assert.equal("(3,)", shape_of(f))
      assert.same({1, 1, 1}, run(f))
      assert.same({false, false, false}, run(tf.zeros_like(i, {dtype = tf.bool})))
      local p = tf.placeholder(tf.float32, {-1, 2})
      local pz = tf.zeros_like(p, tf.int32)
      assert.equal("(?, 2)", shape_of(pz))
      assert.same({{0, 0}}, run(pz, {[p] = {{5, 6}}}))
      assert.same({{1, 1}}, run(p:ones_like(), {[p] = {{5, 6}}}))
    end)
  end)

  describe("tile", function()
    it("repeats along each dimension for every dtype", function()
      for _, dt in ipairs(ALL) do
        local x = const({{1, 0}, {0, 1}}, dt)
        assert.same(as(dt, {{1, 0, 1, 0, 1, 0}, {0, 1, 0, 1, 0, 1}, {1, 0, 1, 0, 1, 0}, {0, 1, 0, 1, 0, 1}}),
                    run(tf.tile(x, {2, 3})))
      end
      local x = tf.constant({{1, 2}, {3, 4}})
      assert.same({{1, 2}, {3, 4}, {1, 2}, {3, 4}}, run(tf.tile(x, {2, 1})))
      assert.same({{1, 2, 1, 2, 1, 2}, {3, 4, 3, 4, 3, 4}}, run(x:tile{1, 3}))
      assert.same({7, 8, 7, 8, 7, 8}, run(tf.tile(tf.constant({7, 8}), {3})))
      assert.same({{{1, 2}, {1, 2}}}, run(tf.tile(tf.constant({{{1, 2}}}), {1, 2, 1})))
      assert.equal(5, run(tf.tile(tf.constant(5), {})))
    end)

    it("handles zero multiples and unknown dimensions", function()
      local x = tf.constant({{1, 2}, {3, 4}})
      local e = tf.tile(x, {0, 2})
      assert.equal("(0, 4)", shape_of(e))
      assert.same({0, 4}, run(tf.shape(e)))
      local p = tf.placeholder(tf.int32, {-1, 2})
      local t = tf.tile(p, {2, 2})
      assert.equal("(?, 4)", shape_of(t))
      assert.same({{1, 2, 1, 2}, {1, 2, 1, 2}}, run(t, {[p] = {{1, 2}}}))
      assert.equal("(?, ?)", shape_of(tf.tile(tf.placeholder(tf.float32), {2, 2})))
    end)

    it("needs one non-negative multiple per dimension", function()
      local x = tf.constant({{1, 2}})
      local err = fails(tf.tile, x, {2})
      assert.matches("Tile: multiples has 1 entries but the input has rank 2", err, 1, true)
      err = fails(tf.tile, x, {1, -1})
      assert.matches("multiples[1] = -1 must be non-negative", err, 1, true)
      err = fails(tf.tile, x, {1, 1.5})
      assert.matches("tf.tile: multiples[2] must be an integer", err, 1, true)
    end)
  end)

  describe("slice", function()
    it("takes begin and size, size -1 meaning to the end, for every dtype", function()
      local x = tf.constant(X)
      assert.same({{5, 6}, {9, 10}}, run(tf.slice(x, {1, 1}, {2, 2})))
      assert.same({{6, 7}, {10, 11}}, run(tf.slice(x, {1, 2}, {-1, -1})))
      assert.same({{0, 1, 2, 3}}, run(x:slice({0, 0}, {1, -1})))
      assert.equal("(2, 2)", shape_of(tf.slice(x, {1, 2}, {-1, -1})))
      for _, dt in ipairs(ALL) do
        local y = const({{1, 0, 1}, {0, 0, 1}}, dt)
        assert.same(as(dt, {{0, 1}, {0, 1}}), run(tf.slice(y, {0, 1}, {2, 2})))
      end
      local y = tf.constant(arange({2, 3, 4}), tf.int64)
      assert.same({{{13, 14}, {17, 18}}}, run(tf.slice(y, {1, 0, 1}, {1, 2, 2})))
      local e = tf.slice(x, {3, 0}, {0, 2})
      assert.equal("(0, 2)", shape_of(e))
      assert.same({0, 2}, run(tf.shape(e)))
    end)

    it("works on unknown dimensions and checks them at run time", function()
      local p = tf.placeholder(tf.float32, {-1, 4})
      local s = tf.slice(p, {1, 0}, {-1, 2})
      assert.equal("(?, 2)", shape_of(s))
      assert.same({{4, 5}, {8, 9}}, run(s, {[p] = X}))
      local fixed = tf.slice(p, {0, 0}, {2, 4})
      assert.equal("(2, 4)", shape_of(fixed))
      local sess = tf.Session()
      local err = fails(sess.run, sess, fixed, {[p] = {{1, 2, 3, 4}}})
      assert.matches("Expected size[0] in [0, 1], but got 2", err, 1, true)
      assert.same({{0, 1, 2, 3}, {4, 5, 6, 7}}, sess:run(fixed, {[p] = X}):totable())
      assert.equal("(1, 2)", shape_of(tf.slice(tf.placeholder(tf.float32), {0, 0}, {1, 2})))
    end)

    it("rejects bounds outside the input", function()
      local x = tf.constant(X)
      local err = fails(tf.slice, x, {0, 5}, {1, 1})
      assert.matches("Slice: Expected begin[1] in [0, 4], but got 5", err, 1, true)
      err = fails(tf.slice, x, {2, 0}, {2, 1})
      assert.matches("Expected size[0] in [0, 1], but got 2", err, 1, true)
      err = fails(tf.slice, x, {0}, {1})
      assert.matches("one entry per dimension of the input (rank 2), but they have 1 and 1", err, 1, true)
      err = fails(tf.slice, x, {-1, 0}, {1, 1})
      assert.matches("begin[0] = -1 must be non-negative", err, 1, true)
    end)
  end)

  describe("strided_slice and x[i]", function()
    local x
    before_each(function() x = tf.constant(X, tf.int32) end)

    it("x[i] takes row i of the first axis, negative from the end", function()
      assert.equal("(4,)", shape_of(x[0]))
      assert.same({0, 1, 2, 3}, run(x[0]))
      assert.same({8, 9, 10, 11}, run(x[-1]))
      assert.same({4, 5, 6, 7}, run(x[1]))
      assert.equal(6, run(x[1][2]))
      assert.equal(9, run(x[-1][-3]))
      assert.equal("()", shape_of(x[1][2]))
      local err = fails(function() return x[3] end)
      assert.matches("slice index 3 of dimension 0 out of bounds", err, 1, true)
      err = fails(function() return x[-4] end)
      assert.matches("slice index -4 of dimension 0 out of bounds", err, 1, true)
      err = fails(function() return tf.constant(1)[0] end)
      assert.matches("Index out of range using input dim 0; input has only 0 dims", err, 1, true)
      err = fails(function() return x[0.5] end)
      assert.matches("must be an integer", err, 1, true)
    end)

    it("matches NumPy for steps, reversal and clamping", function()
      -- x[::-1]
      assert.same({{8, 9, 10, 11}, {4, 5, 6, 7}, {0, 1, 2, 3}},
                  run(tf.strided_slice(x, {0}, {0}, {-1}, {begin_mask = 1, end_mask = 1})))
      -- x[:, ::2]
      assert.same({{0, 2}, {4, 6}, {8, 10}},
                  run(tf.strided_slice(x, {0, 0}, {0, 0}, {1, 2}, {begin_mask = 3, end_mask = 3})))
      -- x[1:, -1]
      local s = tf.strided_slice(x, {1, -1}, {0, 0}, {1, 1}, {end_mask = 1, shrink_axis_mask = 2})
      assert.equal("(2,)", shape_of(s))
      assert.same({7, 11}, run(s))
      -- x[2:0:-1, 3:0:-2]
      assert.same({{11, 9}, {7, 5}}, run(tf.strided_slice(x, {2, 3}, {0, 0}, {-1, -2})))
      -- x[-1:-4:-1, 0]
      assert.same({8, 4, 0}, run(tf.strided_slice(x, {-1, 0}, {-4, 1}, {-1, 1}, {shrink_axis_mask = 2})))
      -- x[1:100], x[-100:2], x[5:1]
      assert.same({{4, 5, 6, 7}, {8, 9, 10, 11}}, run(tf.strided_slice(x, {1}, {100})))
      assert.same({{0, 1, 2, 3}, {4, 5, 6, 7}}, run(tf.strided_slice(x, {-100}, {2}, {1})))
      local e = tf.strided_slice(x, {5}, {1})
      assert.equal("(0, 4)", shape_of(e))
      assert.same({0, 4}, run(tf.shape(e)))
      -- 1-D: a[1:10:3], a[::-3], a[8:2:-2], a[-2:], a[:-7:-1]
      local a = tf.range(10)
      assert.same({1, 4, 7}, run(tf.strided_slice(a, {1}, {10}, {3})))
      assert.same({9, 6, 3, 0}, run(tf.strided_slice(a, {0}, {0}, {-3}, {begin_mask = 1, end_mask = 1})))
      assert.same({8, 6, 4}, run(tf.strided_slice(a, {8}, {2}, {-2})))
      assert.same({8, 9}, run(tf.strided_slice(a, {-2}, {0}, {1}, {end_mask = 1})))
      assert.same({9, 8, 7, 6, 5, 4}, run(tf.strided_slice(a, {0}, {-7}, {-1}, {begin_mask = 1})))
      assert.same({}, run(tf.strided_slice(a, {3}, {8}, {-1})))
    end)

    it("handles ellipsis and new axes", function()
      -- x[..., 1]
      local s = tf.strided_slice(x, {0, 1}, {0, 2}, {1, 1}, {ellipsis_mask = 1, shrink_axis_mask = 2})
      assert.equal("(3,)", shape_of(s))
      assert.same({1, 5, 9}, run(s))
      -- x[tf.newaxis, 1]
      s = tf.strided_slice(x, {0, 1}, {0, 2}, {1, 1}, {new_axis_mask = 1, shrink_axis_mask = 2})
      assert.equal("(1, 4)", shape_of(s))
      assert.same({{4, 5, 6, 7}}, run(s))
      -- x[:, tf.newaxis]
      s = tf.strided_slice(x, {0, 0}, {0, 0}, {1, 1}, {begin_mask = 1, end_mask = 1, new_axis_mask = 2})
      assert.equal("(3, 1, 4)", shape_of(s))
      assert.same({{{0, 1, 2, 3}}, {{4, 5, 6, 7}}, {{8, 9, 10, 11}}}, run(s))
      local y = tf.constant(arange({2, 3, 4}), tf.float64)
      -- y[0, ..., 1]
      s = tf.strided_slice(y, {0, 0, 1}, {1, 0, 2}, {1, 1, 1}, {ellipsis_mask = 2, shrink_axis_mask = 5})
      assert.equal("(3,)", shape_of(s))
      assert.same({1, 5, 9}, run(s))
      -- y[..., tf.newaxis]
      s = tf.strided_slice(y, {0, 0}, {0, 0}, {1, 1}, {ellipsis_mask = 1, new_axis_mask = 2})
      assert.equal("(2, 3, 4, 1)", shape_of(s))
      assert.same({{{{20}, {21}, {22}, {23}}}}, run(tf.slice(s, {1, 2, 0, 0}, {1, 1, 4, 1})))
      -- y[1, ::-1, 2:]
      s = tf.strided_slice(y, {1, 0, 2}, {2, 0, 4}, {1, -1, 1}, {begin_mask = 2, end_mask = 2, shrink_axis_mask = 1})
      assert.same({{22, 23}, {18, 19}, {14, 15}}, run(s))
    end)

    it("works for every dtype", function()
      for _, dt in ipairs(ALL) do
        local v = const({1, 1, 0, 0, 1}, dt)
        assert.same(as(dt, {1, 0, 0, 1}),
                    run(tf.strided_slice(v, {0}, {0}, {-1}, {begin_mask = 1, end_mask = 1}):strided_slice({0}, {4})))
        assert.same(as(dt, 0), run(v[2]))
      end
    end)

    it("infers unknown dimensions and checks indices at run time", function()
      local p = tf.placeholder(tf.float32, {-1, 4})
      local s = tf.strided_slice(p, {0, 1}, {0, 3}, {1, 1}, {begin_mask = 1, end_mask = 1})
      assert.equal("(?, 2)", shape_of(s))
      assert.same({{1, 2}, {5, 6}, {9, 10}}, run(s, {[p] = X}))
      local row = p[0]
      assert.equal("(4,)", shape_of(row))
      local sess = tf.Session()
      assert.same({0, 1, 2, 3}, sess:run(row, {[p] = X}):totable())
      local err = fails(sess.run, sess, p[5], {[p] = X})
      assert.matches("slice index 5 of dimension 0 out of bounds", err, 1, true)
      assert.same({8, 9, 10, 11}, sess:run(p[-1], {[p] = X}):totable())
      local u = tf.placeholder(tf.float32)
      assert.equal("<unknown>", shape_of(u[0]))
      assert.same({4, 5, 6, 7}, run(u[1], {[u] = X}))
    end)

    it("reports bad specs", function()
      local err = fails(tf.strided_slice, x, {0}, {1}, {0})
      assert.matches("strided_slice[_%d]*: strides%[0%] must be non%-zero", err)
      err = fails(tf.strided_slice, x, {0, 0, 0}, {1, 1, 1})
      assert.matches("Index out of range using input dim 2; input has only 2 dims", err, 1, true)
      err = fails(tf.strided_slice, x, {0, 0}, {1, 1}, {1, 1}, {ellipsis_mask = 3})
      assert.matches("Multiple ellipses in slice spec not allowed", err, 1, true)
      err = fails(tf.strided_slice, x, {0, 0}, {1}, {1, 1})
      assert.matches("begin, end and strides must have the same length, got 2, 1 and 2", err, 1, true)
      err = fails(tf.strided_slice, x, {0}, {1}, {-1}, {shrink_axis_mask = 1})
      assert.matches("only stride 1 allowed on non-range indexing", err, 1, true)
      err = fails(tf.strided_slice, x, {0}, {1}, {1}, {bogus = 1})
      assert.matches("tf.strided_slice: unknown option 'bogus'", err, 1, true)
    end)
  end)

  describe("stack and unstack", function()
    it("packs a Lua list holding Tensors, as TensorFlow's auto-packing does", function()
      local x = tf.constant({1, 2, 3})
      local p = tf.placeholder(tf.float32)  -- unknown rank: once this looped forever
      local s = tf.reduce_sum({p, 2})
      assert.equal("Pack", s.op.inputs[1].op.type)
      assert.equal(7, tf.Session():run(s, {[p] = 5}))
      assert.equal(21, run(tf.reduce_sum({x, {4, 5, 6}})))
      local nested = tf.convert_to_tensor({{x[0], 7}, {1, x[2]}})
      assert.equal("(2, 2)", shape_of(nested))
      assert.same({{1, 7}, {1, 3}}, run(nested))
      local ints = tf.convert_to_tensor({tf.constant(1, tf.int32), 2})
      assert.equal(tf.int32, ints.dtype)
      assert.matches("Cannot convert 1.5 to a Tensor of dtype int32",
                     H.error_of(tf.convert_to_tensor, {tf.constant(1, tf.int32), 1.5}), 1, true)
      assert.matches('tf.array: expected numbers, got Tensor("Const', H.error_of(tf.array, {x}), 1, true)
    end)

    it("tf.convert_to_tensor refuses a Tensor of another dtype than the one asked for", function()
      local x = tf.constant({1, 2}, {name = "x"})
      assert.matches('Tensor conversion requested dtype float64 for Tensor with dtype float32: ' ..
                     'Tensor("x:0", shape=(2,), dtype=float32)',
                     H.error_of(tf.convert_to_tensor, x, tf.float64), 1, true)
      assert.matches("Tensor conversion requested dtype int32 for Tensor with dtype float32",
                     H.error_of(tf.convert_to_tensor, x, "int32"), 1, true)
      assert.equal(x, tf.convert_to_tensor(x, tf.float32))
      assert.equal(x, tf.convert_to_tensor(x))
      -- numbers and lists still take the dtype; ops still lift numbers to a tensor's dtype
      local d = tf.convert_to_tensor({1, 2}, tf.float64)
      assert.equal(tf.float64, d.dtype)
      assert.same({2, 4}, run(d * 2))
      local i = tf.constant({1, 2}, tf.int32)
      assert.equal(tf.int32, (i + 1).dtype)
      assert.same({2, 3}, run(i + 1))
    end)

    it("stack along a new axis, negative axes too, for every dtype", function()
      for _, dt in ipairs(ALL) do
        local a, b = const({1, 0, 1}, dt), const({0, 0, 1}, dt)
        local s0 = tf.stack({a, b})
        assert.equal("(2, 3)", shape_of(s0))
        assert.matches("^stack", s0.op.name)
        assert.equal("Pack", s0.op.type)
        assert.same(as(dt, {{1, 0, 1}, {0, 0, 1}}), run(s0))
        assert.same(as(dt, {{1, 0}, {0, 0}, {1, 1}}), run(tf.stack({a, b}, 1)))
        assert.same(as(dt, {{1, 0}, {0, 0}, {1, 1}}), run(tf.stack({a, b}, {axis = -1})))
      end
      local m = tf.constant({{1, 2}, {3, 4}})
      local n = tf.constant({{5, 6}, {7, 8}})
      assert.same({{{1, 5}, {2, 6}}, {{3, 7}, {4, 8}}}, run(tf.stack({m, n}, 2)))
      assert.same({{{1, 2}, {5, 6}}, {{3, 4}, {7, 8}}}, run(tf.stack({m, n}, -2)))
      assert.same({{1, 2}, {3, 4}, {5, 6}}, run(tf.stack({tf.constant({1, 2}), {3, 4}, {5, 6}})))
      local i = tf.stack({tf.constant(1, tf.int32), 2, 3})
      assert.equal("int32", i.dtype.name)
      assert.same({1, 2, 3}, run(i))
      assert.same({{1, 2}}, run(tf.stack({{1, 2}})))
    end)

    it("stack merges unknown dimensions and checks them at run time", function()
      local p = tf.placeholder(tf.float32, {-1, 2})
      local c = tf.constant({{1, 2}, {3, 4}, {5, 6}})
      local s = tf.stack({p, c})
      assert.equal("(2, 3, 2)", shape_of(s))
      local sess = tf.Session()
      local err = fails(sess.run, sess, s, {[p] = {{1, 2}}})
      assert.matches("Shapes of all inputs must match", err, 1, true)
      local v = sess:run(s, {[p] = {{0, 0}, {0, 0}, {0, 0}}}):totable()
      assert.same({{{0, 0}, {0, 0}, {0, 0}}, {{1, 2}, {3, 4}, {5, 6}}}, v)
      assert.equal("<unknown>", shape_of(tf.stack({tf.placeholder(tf.float32), tf.placeholder(tf.float32)})))
      assert.equal("(2, ?)", shape_of(tf.stack({tf.placeholder(tf.float32), tf.placeholder(tf.float32, {-1})})))
    end)

    it("stack takes many inputs", function()
      local p = tf.placeholder(tf.int32, {-1})
      local items, want = {p}, {{0, 0}}
      for i = 1, 19 do items[i + 1], want[i + 1] = tf.constant({i, -i}, tf.int32), {i, -i} end
      local s = tf.stack(items)
      assert.equal("(20, 2)", shape_of(s))
      local sess = tf.Session()
      assert.same(want, sess:run(s, {[p] = {0, 0}}):totable())
      local err = fails(sess.run, sess, s, {[p] = {0, 0, 0}})
      assert.matches("values[0].shape = [3] != values[1].shape = [2]", err, 1, true)
      local c = tf.concat(items, 0)
      assert.equal("(?,)", shape_of(c))
      assert.same({0, 0, 1, -1, 2, -2}, sess:run(tf.strided_slice(c, {0}, {6}), {[p] = {0, 0}}):totable())
    end)

    it("stack reports mismatched shapes, dtypes and axes", function()
      local err = fails(tf.stack, {tf.constant({1, 2}), tf.constant({1, 2, 3})})
      assert.matches("stack: Shapes of all inputs must match: values[0].shape = [2] != values[1].shape = [3]",
                     err, 1, true)
      err = fails(tf.stack, {tf.constant({1, 2}), tf.constant({1, 2}, tf.int32)})
      assert.matches("values[1] is int32 and values[0] is float32; use tf.cast", err, 1, true)
      err = fails(tf.stack, {tf.constant({1, 2}), tf.constant({1, 2})}, 2)
      assert.matches("axis 2 is out of range for inserting a dimension into a tensor of rank 1 (expected [-2, 1])",
                     err, 1, true)
      err = fails(tf.stack, {})
      assert.matches("tf.stack: expected a non-empty Lua list of tensors", err, 1, true)
    end)

    it("unstack returns a Lua list along any axis, for every dtype", function()
      for _, dt in ipairs(ALL) do
        local x = const({{1, 0, 1}, {0, 1, 1}}, dt)
        local rows = tf.unstack(x)
        assert.equal(2, #rows)
        assert.equal("(3,)", shape_of(rows[1]))
        assert.same(as(dt, {{1, 0, 1}, {0, 1, 1}}), run(rows))
        local cols = tf.unstack(x, {axis = 1})
        assert.equal(3, #cols)
        assert.same(as(dt, {{1, 0}, {0, 1}, {1, 1}}), run(cols))
        assert.same(as(dt, {{1, 0}, {0, 1}, {1, 1}}), run(tf.unstack(x, nil, -1)))
      end
      local y = tf.constant(arange({2, 3, 2}))
      local mid = tf.unstack(y, 3, 1)
      assert.same({{0, 1}, {6, 7}}, run(mid[1]))
      assert.same({{4, 5}, {10, 11}}, run(mid[3]))
      assert.same({}, tf.unstack(tf.zeros({0, 2})))
    end)

    it("unstack of many outputs and of unknown dimensions", function()
      local parts = tf.unstack(tf.range(10))
      assert.equal(10, #parts)
      assert.same({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, run(parts))
      local w = tf.placeholder(tf.int32, {10, -1})
      local cols = tf.unstack(w)
      assert.equal(10, #cols)
      assert.equal("(?,)", shape_of(cols[10]))
      local feed = {}
      for i = 1, 10 do feed[i] = {i, -i} end
      local v = run(cols, {[w] = feed})
      assert.same({10, -10}, v[10])
      assert.same({3, -3}, v[3])

      local p = tf.placeholder(tf.float32, {-1, 3})
      local err = fails(tf.unstack, p)
      assert.matches("Cannot infer argument `num` from shape [-1,3]; pass num", err, 1, true)
      local two = tf.unstack(p, {num = 2})
      assert.equal(2, #two)
      assert.equal("(3,)", shape_of(two[2]))
      local sess = tf.Session()
      assert.same({4, 5, 6}, sess:run(two[2], {[p] = {{1, 2, 3}, {4, 5, 6}}}):totable())
      err = fails(sess.run, sess, two[2], {[p] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}})
      assert.matches("num = 2 does not match the dimension of size 3", err, 1, true)
      assert.same({1, 2, 3}, sess:run(two[1], {[p] = {{1, 2, 3}, {4, 5, 6}}}):totable())
      err = fails(tf.unstack, tf.constant({1, 2, 3}), {num = 2})
      assert.matches("num = 2 does not match the dimension of size 3", err, 1, true)
      err = fails(tf.unstack, tf.constant(1))
      assert.matches("cannot unstack a scalar", err, 1, true)
    end)
  end)

  describe("concat", function()
    it("joins along an axis, negative too, for every dtype", function()
      for _, dt in ipairs(ALL) do
        local a, b = const({{1, 0}, {0, 1}}, dt), const({{1, 1}}, dt)
        local c = tf.concat({a, b}, 0)
        assert.equal("(3, 2)", shape_of(c))
        assert.matches("^concat", c.op.name)
        assert.same(as(dt, {{1, 0}, {0, 1}, {1, 1}}), run(c))
        local d = const({{0}, {1}}, dt)
        assert.same(as(dt, {{1, 0, 0}, {0, 1, 1}}), run(tf.concat({a, d}, -1)))
      end
      local a = tf.constant({1, 2})
      assert.same({1, 2, 3, 4, 5, 6}, run(tf.concat({a, {3}, tf.constant({4, 5, 6})}, 0)))
      local y = tf.constant(arange({2, 1, 2}), tf.int64)
      local z = tf.constant({{{8, 9}}, {{10, 11}}}, tf.int64)
      assert.same({{{0, 1}, {8, 9}}, {{2, 3}, {10, 11}}}, run(tf.concat({y, z}, 1)))
      assert.same({{{0, 1, 8, 9}}, {{2, 3, 10, 11}}}, run(tf.concat({y, z}, {axis = 2})))
      assert.same({1, 2}, run(tf.concat({tf.zeros({0}), a}, 0)))
      assert.same({1, 2}, run(tf.concat({a}, 0)))
    end)

    it("infers unknown dimensions and checks them at run time", function()
      local p = tf.placeholder(tf.float32, {-1, 2})
      local c = tf.constant({{1, 2}})
      local j = tf.concat({p, c}, 0)
      assert.equal("(?, 2)", shape_of(j))
      assert.same({{5, 6}, {7, 8}, {1, 2}}, run(j, {[p] = {{5, 6}, {7, 8}}}))
      local q = tf.placeholder(tf.float32, {1, -1})
      local k = tf.concat({q, c}, 0)
      assert.equal("(2, 2)", shape_of(k))
      local sess = tf.Session()
      local err = fails(sess.run, sess, k, {[q] = {{1, 2, 3}}})
      assert.matches("Dimensions of inputs should match: shape[0] = [1,3] vs. shape[1] = [1,2]", err, 1, true)
      assert.same({{9, 9}, {1, 2}}, sess:run(k, {[q] = {{9, 9}}}):totable())
      assert.equal("(?, 2)", shape_of(tf.concat({tf.placeholder(tf.float32), c}, 0)))
      assert.equal("<unknown>", shape_of(tf.concat({tf.placeholder(tf.float32)}, 0)))
    end)

    it("reports mismatched inputs", function()
      local a = tf.constant({{1, 2}})
      local err = fails(tf.concat, {a, tf.constant({{1, 2, 3}})}, 0)
      assert.matches("concat: Dimensions of inputs should match: shape[0] = [1,2] vs. shape[1] = [1,3]", err, 1, true)
      err = fails(tf.concat, {a, tf.constant({1, 2})}, 0)
      assert.matches("Ranks of all input tensors should match: shape[0] = [1,2] vs. shape[1] = [2]", err, 1, true)
      err = fails(tf.concat, {tf.constant(1), tf.constant(2)}, 0)
      assert.matches("Can't concatenate scalars (use tf.stack instead)", err, 1, true)
      err = fails(tf.concat, {a, tf.constant({{1, 2}}, tf.int32)}, 0)
      assert.matches("use tf.cast", err, 1, true)
      err = fails(tf.concat, {a, a}, 2)
      assert.matches("axis 2 is out of range for a tensor of rank 2", err, 1, true)
      err = fails(tf.concat, {a, a})
      assert.matches("tf.concat: axis is required", err, 1, true)
    end)
  end)

  describe("squeeze and expand_dims", function()
    it("squeeze drops size-1 dimensions, all or the listed ones", function()
      for _, dt in ipairs(ALL) do
        local x = const({{{1}, {0}, {1}}}, dt)
        local s = tf.squeeze(x)
        assert.equal("(3,)", shape_of(s))
        assert.same(as(dt, {1, 0, 1}), run(s))
      end
      local x = tf.constant({{{{1, 2, 3}}, {{4, 5, 6}}}})  -- shape {1, 2, 1, 3}
      assert.equal("(2, 3)", shape_of(tf.squeeze(x)))
      assert.equal("(1, 2, 3)", shape_of(tf.squeeze(x, {2})))
      assert.equal("(1, 2, 3)", shape_of(tf.squeeze(x, -2)))
      assert.equal("(2, 1, 3)", shape_of(x:squeeze{0}))
      assert.same({{1, 2, 3}, {4, 5, 6}}, run(tf.squeeze(x, {0, 2})))
      assert.equal("(2, 3)", shape_of(tf.squeeze(x, {})))
      local err = fails(tf.squeeze, x, {1})
      assert.matches("Squeeze[_%d]*: Can not squeeze dim%[1%], expected a dimension of 1, got 2", err)
      err = fails(tf.squeeze, x, 4)
      assert.matches("axis 4 is out of range for a tensor of rank 4", err, 1, true)
    end)

    it("squeeze with unknown dimensions", function()
      local p = tf.placeholder(tf.float32, {-1, 1, 3})
      assert.equal("<unknown>", shape_of(tf.squeeze(p)))
      assert.same({{1, 2, 3}, {4, 5, 6}}, run(tf.squeeze(p), {[p] = {{{1, 2, 3}}, {{4, 5, 6}}}}))
      assert.same({1, 2, 3}, run(tf.squeeze(p), {[p] = {{{1, 2, 3}}}}))
      assert.equal("(?, 3)", shape_of(tf.squeeze(p, 1)))
      local q = tf.placeholder(tf.float32, {1, -1})
      local s = tf.squeeze(q, {1})
      assert.equal("(1,)", shape_of(s))
      local sess = tf.Session()
      local err = fails(sess.run, sess, s, {[q] = {{1, 2}}})
      assert.matches("Can not squeeze dim[1], expected a dimension of 1, got 2", err, 1, true)
      assert.same({7}, sess:run(s, {[q] = {{7}}}):totable())
      assert.equal("<unknown>", shape_of(tf.squeeze(tf.placeholder(tf.float32), {0})))
    end)

    it("expand_dims inserts a size-1 dimension; -1 appends", function()
      for _, dt in ipairs(ALL) do
        local x = const({1, 0}, dt)
        assert.equal("(1, 2)", shape_of(tf.expand_dims(x, 0)))
        assert.same(as(dt, {{1}, {0}}), run(tf.expand_dims(x, 1)))
        assert.same(as(dt, {{1}, {0}}), run(tf.expand_dims(x, -1)))
        assert.same(as(dt, {{1, 0}}), run(tf.expand_dims(x, -2)))
      end
      assert.same({5}, run(tf.expand_dims(tf.constant(5), 0)))
      local y = tf.constant(arange({2, 3}))
      assert.equal("(2, 1, 3)", shape_of(y:expand_dims(1)))
      assert.equal("(2, 3, 1)", shape_of(tf.expand_dims(y, {axis = 2})))
      local p = tf.placeholder(tf.float32, {-1, 3})
      local e = tf.expand_dims(p, -1)
      assert.equal("(?, 3, 1)", shape_of(e))
      assert.same({{{1}, {2}, {3}}}, run(e, {[p] = {{1, 2, 3}}}))
      assert.equal("<unknown>", shape_of(tf.expand_dims(tf.placeholder(tf.float32), 0)))
      local err = fails(tf.expand_dims, tf.constant({1, 2}), 2)
      assert.matches("ExpandDims[_%d]*: axis 2 is out of range for inserting a dimension into a tensor of rank 1 " ..
                     "%(expected %[%-2, 1%]%)", err)
      err = fails(tf.expand_dims, tf.constant({1, 2}), -3)
      assert.matches("axis -3 is out of range", err, 1, true)
      err = fails(tf.expand_dims, tf.constant({1, 2}))
      assert.matches("tf.expand_dims: axis is required", err, 1, true)
    end)

    it("squeeze and expand_dims values survive later ops", function()
      local x = tf.constant({{1, 2, 3}})
      local y = tf.squeeze(x) * 2
      assert.same({2, 4, 6}, run(y))
      assert.same({{{1}, {2}, {3}}}, run(tf.expand_dims(tf.squeeze(x), -1):expand_dims(0)))
    end)
  end)

  describe("transpose", function()
    it("reverses the dimensions by default, or follows perm, for every dtype", function()
      for _, dt in ipairs(ALL) do
        local x = const({{1, 0, 0}, {1, 1, 0}}, dt)
        local t = tf.transpose(x)
        assert.equal("(3, 2)", shape_of(t))
        assert.matches("^transpose", t.op.name)
        assert.same(as(dt, {{1, 1}, {0, 1}, {0, 0}}), run(t))
        assert.same(as(dt, {{1, 1}, {0, 1}, {0, 0}}), run(tf.transpose(x, {1, 0})))
        assert.same(as(dt, {{1, 0, 0}, {1, 1, 0}}), run(tf.transpose(x, {0, 1})))
      end
      local y = tf.constant(arange({2, 3, 4}))
      local t = tf.transpose(y, {2, 0, 1})
      assert.equal("(4, 2, 3)", shape_of(t))
      local v = run(t)
      for k = 0, 3 do
        for i = 0, 1 do
          for j = 0, 2 do assert.equal(12 * i + 4 * j + k, v[k + 1][i + 1][j + 1]) end
        end
      end
      assert.same({{{0, 1, 2, 3}, {12, 13, 14, 15}}, {{4, 5, 6, 7}, {16, 17, 18, 19}},
                   {{8, 9, 10, 11}, {20, 21, 22, 23}}}, run(y:transpose{1, 0, 2}))
      assert.equal("(4, 3, 2)", shape_of(tf.transpose(y)))
      assert.equal(5, run(tf.transpose(tf.constant(5))))
    end)

    it("is exact on a larger tensor", function()
      local dims = {5, 7, 6, 3}
      local src = arange(dims)
      local perm = {3, 1, 0, 2}
      local v = run(tf.transpose(tf.constant(src, tf.int32), perm))
      local idx = {}
      for a = 0, 4 do for b = 0, 6 do for c = 0, 5 do for d = 0, 2 do
        idx[1], idx[2], idx[3], idx[4] = a, b, c, d
        local o = v[idx[perm[1] + 1] + 1][idx[perm[2] + 1] + 1][idx[perm[3] + 1] + 1][idx[perm[4] + 1] + 1]
        assert(o == src[a + 1][b + 1][c + 1][d + 1])
      end end end end
    end)

    it("handles unknown dimensions and reports bad perms", function()
      local p = tf.placeholder(tf.float32, {-1, 3})
      local t = tf.transpose(p)
      assert.equal("(3, ?)", shape_of(t))
      assert.same({{1, 4}, {2, 5}, {3, 6}}, run(t, {[p] = {{1, 2, 3}, {4, 5, 6}}}))
      assert.equal("(?, ?, ?)", shape_of(tf.transpose(tf.placeholder(tf.float32), {2, 0, 1})))
      assert.equal("<unknown>", shape_of(tf.transpose(tf.placeholder(tf.float32))))
      local x = tf.constant({{1, 2}})
      local err = fails(tf.transpose, x, {0})
      assert.matches("transpose[_%d]*: perm has 1 entries but the input has rank 2", err)
      err = fails(tf.transpose, x, {1, 1})
      assert.matches("1 appears twice in perm", err, 1, true)
      err = fails(tf.transpose, x, {0, 2})
      assert.matches("perm[1] = 2 is out of range [0, 2)", err, 1, true)
    end)
  end)

  describe("range", function()
    it("counts like TensorFlow: int32 for integer Lua numbers", function()
      local r = tf.range(5)
      assert.equal("int32", r.dtype.name)
      assert.equal("range", r.op.name)
      assert.equal("(5,)", shape_of(r))
      assert.same({0, 1, 2, 3, 4}, run(r))
      assert.same({2, 4, 6}, run(tf.range(2, 8, 2)))
      assert.same({2, 4, 6, 8}, run(tf.range(2, 9, 2)))
      assert.same({5, 3, 1}, run(tf.range(5, 0, -2)))
      assert.same({-1, 0, 1}, run(tf.range(-1, 2)))
      assert.same({}, run(tf.range(3, 3)))
      assert.equal("(0,)", shape_of(tf.range(3, 3)))
      local big = tf.range(2 ^ 32, 2 ^ 32 + 2)
      assert.equal("int64", big.dtype.name)
      assert.same({2 ^ 32, 2 ^ 32 + 1}, run(big))
    end)

    it("gives float32 for fractional numbers and takes a dtype", function()
      local f = tf.range(0, 1, 0.25)
      assert.equal("float32", f.dtype.name)
      assert.same({0, 0.25, 0.5, 0.75}, run(f))
      assert.same({0, 1}, run(tf.range(1.5)))
      assert.same({1.5, 1, 0.5}, run(tf.range(1.5, 0, -0.5)))
      assert.same({0, 0.5, 1}, run(tf.range(0, 1.1, 0.5)))
      for _, dt in ipairs({"float32", "float64", "int32", "int64", "uint8"}) do
        local r = tf.range(1, 7, 2, {dtype = tf[dt]})
        assert.equal(dt, r.dtype.name)
        assert.same({1, 3, 5}, run(r))
      end
      assert.same({0, 1, 2}, run(tf.range(3, {dtype = tf.float64})))
    end)

    it("takes tensor bounds and sizes its result at run time", function()
      local n = tf.placeholder(tf.int32, {})
      local r = tf.range(n)
      assert.equal("(?,)", shape_of(r))
      assert.same({0, 1, 2, 3}, run(r, {[n] = 4}))
      assert.same({}, run(r, {[n] = 0}))
      local l = tf.placeholder(tf.int64, {})
      local r64 = tf.range(1, l, 3)
      assert.equal("int64", r64.dtype.name)
      assert.same({1, 4, 7}, run(r64, {[l] = 10}))
      local d = tf.placeholder(tf.float32, {})
      local rd = tf.range(0, 1, d)
      local sess = tf.Session()
      local err = fails(sess.run, sess, rd, {[d] = 0})
      assert.matches("Requires delta != 0", err, 1, true)
      assert.same({0, 0.5}, sess:run(rd, {[d] = 0.5}):totable())
      assert.same({0, 1, 2}, run(tf.range(tf.constant(3, tf.int64), {dtype = tf.int32})))
      local mixed = tf.range(tf.constant(1, tf.int32), tf.constant(4, tf.int64))
      assert.equal("int64", mixed.dtype.name)
      assert.same({1, 2, 3}, run(mixed))
    end)

    it("reports zero steps, wrong directions and bad dtypes", function()
      local err = fails(tf.range, 0, 5, 0)
      assert.matches("range: Requires delta != 0", err, 1, true)
      err = fails(tf.range, 5, 0, 1)
      assert.matches("Requires start <= limit when delta > 0: 5/0", err, 1, true)
      err = fails(tf.range, 0, 5, -1)
      assert.matches("Requires start >= limit when delta < 0: 0/5", err, 1, true)
      err = fails(tf.range, tf.constant(true), tf.constant(false), tf.constant(true))
      assert.matches("Range needs numbers, got bool", err, 1, true)
      local G = require("moonflow.graph")
      err = fails(G.op, {"Range", inputs = {tf.constant(1, tf.int32), tf.constant(4, tf.int64), tf.constant(1, tf.int32)}})
      assert.matches("inputs (start, limit, delta)[1] is int64 and inputs (start, limit, delta)[0] is int32; use tf.cast",
                     err, 1, true)
      err = fails(tf.range, tf.constant({1, 2}, tf.int32))
      assert.matches("limit must be a scalar, got shape [2]", err, 1, true)
    end)
  end)

  -- effective-tensorflow: "Understanding static and dynamic shapes", ported.
  describe("effective-tensorflow: static and dynamic shapes", function()
    -- Returns static shape if available and dynamic shape otherwise.
    local function get_shape(tensor)
      local static_shape = tensor:get_shape():as_list()
      local dynamic_shape = tf.unstack(tf.shape(tensor))
      local dims = {}
      for i, s in ipairs(static_shape) do dims[i] = s == -1 and dynamic_shape[i] or s end
      return dims
    end

    -- Collapses groups of dimensions: dims_list entries are an axis or a list of axes.
    local function reshape(tensor, dims_list)
      local shape = get_shape(tensor)
      local dims_prod = {}
      for i, dims in ipairs(dims_list) do
        if type(dims) == "number" then
          dims_prod[i] = shape[dims + 1]
        else
          local all_ints = true
          for _, d in ipairs(dims) do if type(shape[d + 1]) ~= "number" then all_ints = false end end
          if all_ints then
            local p = 1
            for _, d in ipairs(dims) do p = p * shape[d + 1] end
            dims_prod[i] = p
          else
            local parts = {}
            for k, d in ipairs(dims) do parts[k] = shape[d + 1] end
            dims_prod[i] = tf.reduce_prod(tf.stack(parts))
          end
        end
      end
      return tf.reshape(tensor, dims_prod)
    end

    it("a placeholder of shape (None, 128) has a static and a dynamic shape", function()
      local a = tf.placeholder(tf.float32, {-1, 128})
      assert.same({-1, 128}, a:get_shape():as_list())
      local dynamic_shape = tf.shape(a)
      local feed = tf.Array.new(tf.float32, {5, 128})
      assert.same({5, 128}, run(dynamic_shape, {[a] = feed}))
      a:set_shape({32, 128})
      assert.same({32, 128}, a:get_shape():as_list())
      local b = tf.placeholder(tf.float32, {-1, 128})
      b:set_shape({-1, 128})
      assert.same({-1, 128}, b:get_shape():as_list())
      local r = tf.reshape(b, {32, 128})
      assert.same({32, 128}, r:get_shape():as_list())
    end)

    it("get_shape mixes static and dynamic dimensions to collapse a tensor", function()
      local b = tf.placeholder(tf.float32, {-1, 10, 32})
      local shape = get_shape(b)
      assert.is_true(tf.is_tensor(shape[1]))
      assert.equal(10, shape[2])
      assert.equal(32, shape[3])
      local flat = tf.reshape(b, {shape[1], shape[2] * shape[3]})
      assert.same({-1, 320}, flat:get_shape():as_list())
      local feed = tf.Array.new(tf.float32, {2, 10, 32})
      feed:set(1, 9, 31, 7)
      local v = tf.Session():run(flat, {[b] = feed})
      assert.same({2, 320}, v:shape())
      assert.equal(7, v:get(1, 319))
    end)

    it("the general purpose reshape collapses any list of dimensions", function()
      local b = tf.placeholder(tf.float32, {-1, 10, 32})
      local r = reshape(b, {0, {1, 2}})
      assert.same({-1, 320}, r:get_shape():as_list())
      local feed = tf.Array.new(tf.float32, {3, 10, 32})
      assert.same({3, 320}, tf.Session():run(r, {[b] = feed}):shape())
      local c = reshape(b, {{0, 1}, 2})
      assert.same(2, #c:get_shape():as_list())
      assert.equal(32, c:get_shape():as_list()[2])
      assert.same({30, 32}, tf.Session():run(c, {[b] = feed}):shape())
    end)
  end)

  -- effective-tensorflow: "Take advantage of the overloaded operators" — slicing
  -- row by row, unstacking once and reduce_sum give the same sum of rows.
  describe("effective-tensorflow: slicing, unstack and reduce_sum", function()
    it("sum the rows of a 500x10 matrix the same three ways", function()
      local rows = {}
      for i = 1, 500 do
        rows[i] = {}
        for j = 1, 10 do rows[i][j] = (i * 7 + j * 3) % 11 end
      end
      local x = tf.constant(rows)
      local z1 = tf.zeros(10)
      for i = 0, 499 do z1 = z1 + x[i] end
      local z2 = tf.zeros(10)
      for _, x_i in ipairs(tf.unstack(x)) do z2 = z2 + x_i end
      local z3 = tf.reduce_sum(x, {axis = 0})
      local sess = tf.Session()
      local v1, v2, v3 = sess:run(z1):totable(), sess:run(z2):totable(), sess:run(z3):totable()
      local expect = {}
      for j = 1, 10 do
        local s = 0
        for i = 1, 500 do s = s + rows[i][j] end
        expect[j] = s
      end
      assert.same(expect, v1)
      assert.same(expect, v2)
      assert.same(expect, v3)
    end)

    it("works the same on random input", function()
      local x = tf.random_uniform({50, 10}, {seed = 1})
      local z1 = tf.zeros(10)
      for i = 0, 49 do z1 = z1 + x[i] end
      local z2 = tf.zeros(10)
      for _, x_i in ipairs(tf.unstack(x)) do z2 = z2 + x_i end
      local z3 = tf.reduce_sum(x, {axis = 0})
      local v = tf.Session():run({z1, z2, z3})
      for j = 0, 9 do
        assert.equal(v[1]:get(j), v[2]:get(j))
        assert.is_true(math.abs(v[1]:get(j) - v[3]:get(j)) < 1e-4)
      end
    end)
  end)
end)

describe("tf.split", function()
  before_each(function() tf.reset_default_graph() end)

  it("cuts equal pieces or given sizes, -1 taking the rest, along any axis", function()
    local x = tf.constant({{1, 2, 3, 4}, {5, 6, 7, 8}}, tf.int32)
    local sess = tf.Session()
    local halves = tf.split(x, 2, 1)
    assert.equal(2, #halves)
    assert.same({2, 2}, halves[1]:get_shape():as_list())
    assert.same({{1, 2}, {5, 6}}, sess:run(halves[1]):totable())
    assert.same({{3, 4}, {7, 8}}, sess:run(halves[2]):totable())
    local rows = tf.split(x, 2)
    assert.same({{5, 6, 7, 8}}, sess:run(rows[2]):totable())
    local parts = tf.split(x, {1, -1}, {axis = -1})
    assert.same({2, 3}, parts[2]:get_shape():as_list())
    assert.same({{2, 3, 4}, {6, 7, 8}}, sess:run(parts[2]):totable())
  end)

  it("splits an unknown dimension at run time and checks that it divides", function()
    local p = tf.placeholder(tf.float32, {2, -1}, "p")
    local pieces = tf.split(p, 2, 1)
    assert.same({2, -1}, pieces[1]:get_shape():as_list())
    local sess = tf.Session()
    assert.same({{3, 4}, {7, 8}}, sess:run(pieces[2], {[p] = {{1, 2, 3, 4}, {5, 6, 7, 8}}}):totable())
    local ok, err = pcall(sess.run, sess, pieces[2], {[p] = {{1, 2, 3}, {4, 5, 6}}})
    assert.is_false(ok)
    assert.matches("being split has size 3", err, 1, true)
    assert.same({{2}, {4}}, sess:run(pieces[2], {[p] = {{1, 2}, {3, 4}}}):totable())
  end)

  it("refuses pieces that cannot be equal, and passes a gradient check", function()
    local x = tf.constant({{1, 2, 3, 4}}, tf.float64)
    local ok, err = pcall(tf.split, x, 3, 1)
    assert.is_false(ok)
    assert.matches("3 pieces cannot share equally", err, 1, true)
    local p = tf.placeholder(tf.float64, {2, 4}, "p")
    local piece = tf.split(p, {3, 1}, 1)[1]
    assert.is_true(tf.test.compute_gradient_error(p, {2, 4}, piece, {2, 3}) < 1e-8)
  end)
end)

describe("tf.eye and tf.linspace", function()
  local sess
  before_each(function() tf.reset_default_graph(); sess = tf.Session() end)

  it("eye: square, rectangular, batched, dtypes", function()
    local e = tf.eye(3)
    assert.equal(tf.float32, e.dtype)
    assert.same({3, 3}, e:get_shape():as_list())
    assert.same({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, sess:run(e):totable())
    assert.same({{1, 0, 0}, {0, 1, 0}}, sess:run(tf.eye(2, 3)):totable())
    assert.same({{1, 0}, {0, 1}, {0, 0}}, sess:run(tf.eye(3, 2, {dtype = tf.float64})):totable())
    local b = tf.eye(2, nil, {batch_shape = {2, 1}, dtype = tf.int32, name = "I"})
    assert.equal("I:0", b.name)
    assert.equal(tf.int32, b.dtype)
    assert.same({2, 1, 2, 2}, b:get_shape():as_list())
    assert.same({{{{1, 0}, {0, 1}}}, {{{1, 0}, {0, 1}}}}, sess:run(b):totable())
    assert.same({{true, false}, {false, true}}, sess:run(tf.eye(2, 2, {}, tf.bool)):totable())
    assert.same({0, 4}, tf.eye(0, 4):get_shape():as_list())
  end)

  it("eye: errors name tf.eye and the caller's line", function()
    local ok, err = pcall(function() return tf.eye(2.5) end); local line = debug.getinfo(1, "l").currentline
    assert.is_false(ok)
    assert.matches("tf.eye: num_rows must be an integer >= 0, got 2.5", err, 1, true)
    assert.matches("array_spec.lua:" .. line, err, 1, true)
    assert.matches("tf.eye: num_columns must be an integer >= 0, got -1", H.error_of(tf.eye, 2, -1), 1, true)
    assert.matches("tf.eye: batch_shape[2] must be an integer >= 0, got x",
                   H.error_of(tf.eye, 2, {batch_shape = {1, "x"}}), 1, true)
    assert.matches("tf.eye: batch_shape must be a Lua list of integers",
                   H.error_of(tf.eye, 2, {batch_shape = 3}), 1, true)
    assert.matches("tf.eye: unknown option 'rows'", H.error_of(tf.eye, 2, {rows = 3}), 1, true)
  end)

  it("linspace: evenly spaced, both ends included; num 1 gives start", function()
    local l = tf.linspace(1, 2, 5)
    assert.equal(tf.float32, l.dtype)
    assert.same({5}, l:get_shape():as_list())
    assert.same({1, 1.25, 1.5, 1.75, 2}, sess:run(l):totable())
    assert.same({10, 6, 2, -2}, sess:run(tf.linspace(10, -2, 4)):totable())
    assert.same({3}, sess:run(tf.linspace(3, 7, 1)):totable())
    local d = tf.lin_space(tf.constant(0, tf.float64), 1, 3, {name = "ls"})
    assert.equal(tf.float64, d.dtype)
    assert.equal("ls:0", d.name)
    assert.same({0, 0.5, 1}, sess:run(d):totable())
    local p = tf.placeholder(tf.float64, {}, "p")
    assert.same({-1, 0.5, 2}, sess:run(tf.linspace(p, 2, 3), {[p] = -1}):totable())
  end)

  it("linspace: gradients wrt start and stop, hand computed and by finite differences", function()
    local a = tf.placeholder(tf.float64, {}, "a")
    local b = tf.placeholder(tf.float64, {}, "b")
    local y = tf.reduce_sum(tf.linspace(a, b, 5) * tf.constant({1, 2, 3, 4, 5}, tf.float64))
    local ga, gb = unpack(tf.gradients(y, {a, b}))
    -- d y/d start = sum w_i (1 - i/4) = 1 + 1.5 + 1.5 + 1 + 0 = 5; d y/d stop = sum w_i i/4 = 10
    local va, vb = unpack(sess:run({ga, gb}, {[a] = 0.3, [b] = 2}))
    assert.near(5, tonumber(va), 1e-12)
    assert.near(10, tonumber(vb), 1e-12)
    local x = tf.placeholder(tf.float64, {}, "x")
    H.check_grad(x, {}, tf.linspace(x, 4, 4), {4})
    H.check_grad(x, {}, tf.linspace(-1, x, 3), {3})
    H.check_grad(x, {}, tf.linspace(x, x * 2, 6), {6})
  end)

  it("linspace: errors name tf.linspace and the caller's line", function()
    local ok, err = pcall(function() return tf.linspace(0, 1, 0) end); local line = debug.getinfo(1, "l").currentline
    assert.is_false(ok)
    assert.matches("tf.linspace: num must be an integer >= 1, got 0", err, 1, true)
    assert.matches("array_spec.lua:" .. line, err, 1, true)
    assert.matches("tf.linspace: num must be an integer >= 1, got 2.5", H.error_of(tf.linspace, 0, 1, 2.5), 1, true)
    assert.matches("tf.linspace: start must be float32 or float64, got int32",
                   H.error_of(tf.linspace, tf.constant(1, tf.int32), 2, 3), 1, true)
    assert.matches("tf.linspace: stop must be a number or a scalar float tensor, got x",
                   H.error_of(tf.linspace, 1, "x", 3), 1, true)
    assert.matches("tf.linspace: stop must be a scalar, got shape",
                   H.error_of(tf.linspace, 1, tf.constant({1, 2}), 3), 1, true)
    assert.matches("tf.linspace: start is float64 but stop is float32",
                   H.error_of(tf.linspace, tf.constant(1, tf.float64), tf.constant(2, tf.float32), 3), 1, true)
  end)
end)

describe("sizes past int64", function()
  before_each(function() tf.reset_default_graph() end)
  -- Each fault is an error naming the line of the one-line function fn (whose
  -- call is no tail call, so its frame stays) that says the count overflows,
  -- never a count that wrapped around; the graph stays usable.
  local function refused(expected, fn)
    local ok, err = pcall(fn)
    assert.is_false(ok)
    assert.equal(expected .. " (at spec/array_spec.lua:" .. debug.getinfo(fn, "S").linedefined .. ")", err)
  end
  local huge = 2 ^ 40

  it("are errors in reshape, fill and placeholder shapes", function()
    local x = tf.constant({1, 2, 3, 4})
    refused("Reshape: shape [1099511627776,1099511627776] would have more than 2^63 - 1 elements",
            function() tf.reshape(x, {huge, huge}) end)
    refused("Reshape: shape [-1,1099511627776,1099511627776] would have more than 2^63 - 1 elements",
            function() tf.reshape(x, {-1, huge, huge}) end)
    refused("Reshape: Input to reshape is a tensor with 4 values, but the requested shape " ..
            "[-1,4611686018427387904] requires a multiple of 4611686018427387904",
            function() tf.reshape(x, {-1, 2 ^ 62}) end)
    refused("zeros: shape [1099511627776,1099511627776] would have more than 2^63 - 1 elements",
            function() tf.zeros({huge, huge}) end)
    refused("Placeholder: shape [1099511627776,-1,1099511627776] would have more than 2^63 - 1 elements",
            function() tf.placeholder(tf.float32, {huge, -1, huge}) end)
    local p = tf.placeholder(tf.float32, {-1, huge})
    refused("Tensor:set_shape: Placeholder: shape [1099511627776,1099511627776] would have more than 2^63 - 1 " ..
            "elements",
            function() p:set_shape({huge, huge}) end)
    refused("tf.reshape: shape[2] must be an integer (of int64's range) or a scalar tensor, got 1e+30",
            function() tf.reshape(x, {1, 1e30}) end)
    -- a shape's known nonzero dims multiply within int64, a zero dim among them or not
    refused("zeros: shape [0,1099511627776,1099511627776] would have more than 2^63 - 1 elements",
            function() tf.zeros({0, huge, huge}) end)
    assert.same({0, huge, 2 ^ 22}, tf.zeros({0, huge, 2 ^ 22}):get_shape():as_list())
    assert.same({{1, 2}, {3, 4}}, run(tf.reshape(x, {2, 2})))
  end)

  it("are errors in tile, concat and pad", function()
    local v = tf.placeholder(tf.float32, {2 ^ 62})
    refused("Tile: dimension 0 tiled, 4611686018427387904 * 4, overflows int64", function() tf.tile(v, {4}) end)
    refused("concat: the sizes of dimension 0, the concat axis, add up to more than int64 holds",
            function() tf.concat({v, v}, 0) end)
    refused("Pad: dimension 0 padded, 4611686018427387904 + 4611686018427387904 + 0, overflows int64",
            function() tf.pad(v, {{2 ^ 62, 0}}) end)
    assert.same({1, 2, 1, 2, 1, 2}, run(tf.tile(tf.constant({1, 2}), {3})))
  end)

  it("are errors in range, whose elements near int64's ends are exact", function()
    refused("range: the range from 0 to 1e+30 by 1 would have 1e+30 elements, more than 2^63 - 1",
            function() tf.range(0, 1e30) end)
    local i64 = function(v) return tf.constant(v, tf.int64) end
    refused("range: the range from -9.22337e+18 to 9.22337e+18 by 1 would have 1.84467e+19 elements, " ..
            "more than 2^63 - 1", function() tf.range(i64(-2 ^ 63), i64(2 ^ 63 - 1024), i64(1)) end)
    assert.same({-2 ^ 63, -2 ^ 62, 0}, run(tf.range(i64(-2 ^ 63), i64(2 ^ 62), i64(2 ^ 62))))
    local i32 = function(v) return tf.constant(v, tf.int32) end
    assert.same({-2 ^ 31, -2 ^ 30, 0, 2 ^ 30}, run(tf.range(i32(-2 ^ 31), i32(2 ^ 31 - 1), i32(2 ^ 30))))
    assert.same({0, 1, 2}, run(tf.range(3)))
  end)
end)
