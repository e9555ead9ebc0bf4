-- tf.TensorArray: write/read/stack/unstack/gather/scatter/concat/split/size/close,
-- dynamic size, element shapes, use as a loop variable, errors.
local tf = require("moonflow")
local H = require("spec.helpers")
setup(H.growth_off)
teardown(H.growth_restore)

local function i32(v) return tf.constant(v, tf.int32) end

describe("tf.TensorArray", function()
  before_each(function() tf.reset_default_graph() end)

  it("collects fibonacci in a while loop (effective-tensorflow: [1, 1, 2, 3, 5])", function()
    local n = i32(5)
    local c = tf.TensorArray(tf.int32, n)
    c = c:write(0, 1)
    c = c:write(1, 1)
    local function cond(i, a, b, c) return tf.less(i, n) end
    local function body(i, a, b, c)
      c = c:write(i, a + b)
      return i + 1, b, a + b, c
    end
    local i, a, b
    i, a, b, c = tf.while_loop(cond, body, {i32(2), i32(1), i32(1), c})
    c = c:stack()
    assert.equal(tf.int32, c.dtype)
    assert.same({1, 1, 2, 3, 5}, tf.Session():run(c):totable())
  end)

  it("writes, reads and stacks elements of any dtype", function()
    local sess = tf.Session()
    for _, dt in ipairs({tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8, tf.bool}) do
      local v1 = dt == tf.bool and {true, false} or {1, 2}
      local v2 = dt == tf.bool and {false, false} or {3, 4}
      local ta = tf.TensorArray(dt, 2):write(1, v2):write(0, v1)
      assert.same({v1, v2}, sess:run(ta:stack()):totable())
      assert.same(v2, sess:run(ta:read(1)):totable())
      assert.equal(dt, ta:read(0).dtype)
    end
  end)

  it("infers the element shape from the first write, or takes it given", function()
    local ta = tf.TensorArray(tf.float32, 3)
    assert.is_nil(ta.element_shape.dims)
    ta = ta:write(0, tf.zeros({2, 4}))
    assert.same({2, 4}, ta.element_shape:as_list())
    assert.same({2, 4}, ta:read(2):get_shape():as_list())
    assert.same({3, 2, 4}, ta:stack():get_shape():as_list())
    local given = tf.TensorArray(tf.float32, 2, {element_shape = {3}})
    assert.same({3}, given.element_shape:as_list())
    assert.same({2, 3}, given:write(0, {1, 2, 3}):write(1, {4, 5, 6}):stack():get_shape():as_list())
    local err = H.error_of(given.write, given, 0, {1, 2})
    assert.matches("the value has shape %(2,%) but the TensorArray's elements have shape %(3,%)", err)
    -- an empty array stacks to [0, element...] when the element shape is known
    local sess = tf.Session()
    assert.same({0, 3}, sess:run(tf.TensorArray(tf.float32, 0, {element_shape = {3}}):stack()):shape())
    err = H.error_of(sess.run, sess, tf.TensorArray(tf.float32, 0):stack())
    assert.matches("TensorArray has size zero, but element shape <unknown> is not fully defined", err)
  end)

  it("reports reading an unwritten index, writing twice and going out of range", function()
    local sess = tf.Session()
    local ta = tf.TensorArray(tf.float32, 3):write(0, {1, 2})
    local err = H.error_of(sess.run, sess, ta:read(1))
    assert.matches("TensorArrayRead: Could not read from TensorArray index 1 because it has not yet been written to%.", err)
    assert.matches("%[%[node TensorArrayRead %(defined at spec/tensor_array_spec.lua:%d+%)%]%]", err)
    err = H.error_of(sess.run, sess, ta:write(0, {3, 4}):stack())
    assert.matches("Could not write to TensorArray index 0 because it has already been written to%.", err)
    err = H.error_of(sess.run, sess, ta:write(3, {3, 4}):stack())
    assert.matches("Tried to write to index 3 but array is not resizeable and size is: 3", err)
    err = H.error_of(sess.run, sess, ta:read(7))
    assert.matches("Tried to read from index 7 but array size is: 3", err)
    err = H.error_of(sess.run, sess, ta:stack())
    assert.matches("TensorArrayStack_%d+: Could not read from TensorArray index 1", err)
    err = H.error_of(ta.write, ta, 1, {1, 2, 3})
    assert.matches("the value has shape %(3,%) but the TensorArray's elements have shape %(2,%)", err)
    local v = tf.placeholder(tf.float32)
    err = H.error_of(sess.run, sess, ta:write(1, v):stack(), {[v] = {1, 2, 3}})
    assert.matches("the value shape is %[3%] which is incompatible with the TensorArray's inferred element shape: %[2%]", err)
    err = H.error_of(sess.run, sess, ta:write(-1, {1, 2}):stack())
    assert.matches("Tried to write to index %-1", err)
    err = H.error_of(ta.write, ta, 1, tf.constant({1, 2}, tf.int32))
    assert.matches("TensorArray dtype is float32 but Op is trying to write dtype int32", err)
    err = H.error_of(ta.read, ta, 0.5)
    assert.matches("the index must be an integer or an int32 tensor", err)
    -- Lua indices become int32: one past its range is an error, not a wrapped-around index.
    err = H.error_of(ta.write, ta, 100000000000, {1, 2})
    assert.truthy(err:find("TensorArray.write: the index 100000000000 does not fit an int32 index", 1, true), err)
    err = H.error_of(ta.gather, ta, {0, 2 ^ 31})
    assert.truthy(err:find("TensorArray.gather: indices[2] 2147483648 does not fit an int32 index", 1, true), err)
    assert.matches("Tried to read from index 2147483647 but array size is: 3",
                   H.error_of(sess.run, sess, ta:gather({0, 2 ^ 31 - 1})))
    assert.same({1, 2}, sess:run(ta:read(0)):totable())  -- the session still works
  end)

  it("grows when dynamic_size is set", function()
    local sess = tf.Session()
    local ta = tf.TensorArray(tf.float32, 0, {dynamic_size = true})
    for i = 0, 9 do ta = ta:write(i, i * i) end
    assert.equal(10, sess:run(ta:size()))
    assert.same({0, 1, 4, 9, 16, 25, 36, 49, 64, 81}, sess:run(ta:stack()):totable())
    local gap = tf.TensorArray(tf.float32, 1, {dynamic_size = true}):write(3, 1)
    assert.equal(4, sess:run(gap:size()))
    assert.matches("Could not read from TensorArray index 0", H.error_of(sess.run, sess, gap:stack()))
    -- filled in a loop whose length is known only when it runs
    local n = tf.placeholder(tf.int32, {})
    local _, out = tf.while_loop(function(i) return tf.less(i, n) end,
                                 function(i, t) return i + 1, t:write(i, tf.cast(i, tf.float32) * 2) end,
                                 {i32(0), tf.TensorArray(tf.float32, 0, {dynamic_size = true})})
    assert.same({0, 2, 4, 6, 8, 10, 12}, sess:run(out:stack(), {[n] = 7}):totable())
    assert.same({0}, sess:run(out:stack(), {[n] = 1}):totable())
  end)

  it("unstacks, gathers, scatters, concatenates and splits", function()
    local sess = tf.Session()
    local ta = tf.TensorArray(tf.float32, 3):unstack(tf.constant({{1, 2}, {3, 4}, {5, 6}}))
    assert.same({{5, 6}, {1, 2}}, sess:run(ta:gather({2, 0})):totable())
    assert.same({{3, 4}}, sess:run(ta:gather(tf.constant({1}, tf.int64))):totable())
    assert.same({1, 2, 3, 4, 5, 6}, sess:run(ta:concat()):totable())
    local sc = tf.TensorArray(tf.int32, 4):scatter({3, 1}, tf.constant({{7}, {8}}, tf.int32))
    sc = sc:scatter({0, 2}, tf.constant({{5}, {6}}, tf.int32))
    assert.same({{5}, {8}, {6}, {7}}, sess:run(sc:stack()):totable())
    local err = H.error_of(sess.run, sess, tf.TensorArray(tf.int32, 4):scatter({1, 1}, tf.constant({{7}, {8}}, tf.int32)):stack())
    assert.matches("Could not write to TensorArray index 1 because it has already been written to", err)
    local sp = tf.TensorArray(tf.float32, 3):split(tf.constant({{1}, {2}, {3}, {4}, {5}, {6}}), {2, 2, 2})
    assert.same({{3}, {4}}, sess:run(sp:read(1)):totable())
    assert.same({{1}, {2}, {3}, {4}, {5}, {6}}, sess:run(sp:concat()):totable())
    err = H.error_of(sess.run, sess, tf.TensorArray(tf.float32, 2):split(tf.constant({1, 2, 3}), {1, 1}):concat())
    assert.matches("Expected sum of lengths to be equal to values.shape%[0%], but sum of lengths is 2 and value's " ..
                   "shape is: %[3%]", err)
    assert.equal(3, sess:run(ta:size()))
    assert.equal("NoOp", ta:close().type)
    sess:run(ta:close())
  end)

  it("gathers no indices and stacks a loop that ran zero times as [0, element...] when the element shape is known",
     function()
    local sess = tf.Session()
    -- nothing written and no element shape: an error, not a value from unwritten memory
    local err = H.error_of(sess.run, sess, tf.TensorArray(tf.float32, 2):gather({}))
    assert.matches("TensorArrayGather: TensorArray has size zero, but element shape <unknown> is not fully defined", err)
    local given = sess:run(tf.TensorArray(tf.float32, 2, {element_shape = {3}}):gather({}))
    assert.same({0, 3}, given:shape())
    -- the writes the loop body traced fix the element shape (a scalar) though none ran
    local n = tf.placeholder(tf.int32, {})
    local _, t = tf.while_loop(function(i) return tf.less(i, n) end,
                               function(i, t) return i + 1, t:write(i, tf.cast(i, tf.float64)) end,
                               {i32(0), tf.TensorArray(tf.float64, 0, {dynamic_size = true})})
    local st = t:stack()
    assert.same({-1}, st:get_shape():as_list())
    assert.same({0}, sess:run(st, {[n] = 0}):shape())
    assert.same({0}, sess:run(t:gather({}), {[n] = 0}):shape())
    assert.same({0, 1, 2}, sess:run(st, {[n] = 3}):totable())
    -- and of vectors
    local _, v = tf.while_loop(function(i) return tf.less(i, n) end,
                               function(i, v) return i + 1, v:write(i, tf.fill({2}, tf.cast(i, tf.float32))) end,
                               {i32(0), tf.TensorArray(tf.float32, 0, {dynamic_size = true})})
    assert.same({0, 2}, sess:run(v:stack(), {[n] = 0}):shape())
    assert.same({{0, 0}, {1, 1}}, sess:run(v:stack(), {[n] = 2}):totable())
  end)

  it("clears what it reads unless clear_after_read = false, as TensorFlow does", function()
    local sess = tf.Session()
    local ta = tf.TensorArray(tf.float32, 2):write(0, 1):write(1, 2)
    local twice = "Could not read index %d twice because it was cleared after a previous read %%(perhaps try " ..
                  "setting clear_after_read = false%%?%%)%%."
    assert.matches(string.format(twice, 0), H.error_of(sess.run, sess, {ta:read(0), ta:read(0)}))
    assert.matches(string.format(twice, 1), H.error_of(sess.run, sess, ta:gather({1, 1})))
    assert.matches("TensorArrayStack: " .. string.format(twice, 1),
                   H.error_of(sess.run, sess, tf.stack({ta:read(1), tf.reduce_sum(ta:stack())})))
    -- each run reads its own array: 1 + 2, twice
    local sum = ta:read(0) + ta:read(1)
    assert.equal(3, sess:run(sum))
    assert.equal(3, sess:run(sum))
    local keep = tf.TensorArray(tf.float32, 2, {clear_after_read = false}):write(0, 1):write(1, 2)
    assert.equal(1 + 1 + 3, sess:run(keep:read(0) + keep:read(0) + tf.reduce_sum(keep:stack())))
    assert.same({2, 2}, sess:run(keep:gather({1, 1})):totable())
    -- a loop reading a captured array: index i once per iteration, and index 0 three times
    local x = tf.placeholder(tf.float64, {3})
    local xs = tf.TensorArray(tf.float64, 3):unstack(x)
    local _, prod = tf.while_loop(function(i) return tf.less(i, 3) end,
                                  function(i, a) return i + 1, a * xs:read(i) end, {i32(0), tf.constant(1, tf.float64)})
    local _, cube = tf.while_loop(function(i) return tf.less(i, 3) end,
                                  function(i, a) return i + 1, a * xs:read(0) end, {i32(0), tf.constant(1, tf.float64)})
    -- the gradient's recomputation reads again, and may: d(x0 x1 x2) = (x1 x2, x0 x2, x0 x1)
    local r = sess:run({prod, tf.gradients(prod, x)[1]}, {[x] = {2, 3, 5}})
    assert.equal(30, r[1])
    assert.same({15, 10, 6}, r[2]:totable())
    assert.matches(string.format(twice, 0), H.error_of(sess.run, sess, cube, {[x] = {2, 3, 5}}))
  end)

  it("concatenates elements of rank >= 1 only", function()
    local sess = tf.Session()
    local ta = tf.TensorArray(tf.float32, 2):write(0, 1):write(1, 2)
    assert.matches("TensorArray concat needs elements of rank >= 1, got scalars", H.error_of(ta.concat, ta))
    local p = tf.placeholder(tf.float32)  -- a shape known only when it runs
    local tu = tf.TensorArray(tf.float32, 1):write(0, p)
    local err = H.error_of(sess.run, sess, tu:concat(), {[p] = 3})
    assert.matches("TensorArrayConcat: TensorArray concat needs elements of rank >= 1, got scalars", err)
    assert.same({3, 4}, sess:run(tu:concat(), {[p] = {3, 4}}):totable())
  end)

  it("is a value: a write returns a new array and leaves the old one as it was", function()
    local sess = tf.Session()
    local a = tf.TensorArray(tf.float32, 2):write(0, 1)
    local b = a:write(1, 2)
    local c = a:write(1, 3)
    assert.same({{1, 2}, {1, 3}}, {sess:run(b:stack()):totable(), sess:run(c:stack()):totable()})
    assert.same({{1, 2}, {1, 3}}, sess:run({b:stack(), c:stack()}) and
      {sess:run({b:stack(), c:stack()})[1]:totable(), sess:run({b:stack(), c:stack()})[2]:totable()})
    assert.matches("Could not read from TensorArray index 1", H.error_of(sess.run, sess, a:read(1)))
  end)

  it("serves as a loop variable read by the body and as a captured input", function()
    local sess = tf.Session()
    local xs = tf.TensorArray(tf.float32, 4):unstack(tf.constant({1, 2, 3, 4}))
    -- running sums: out[i] = out[i-1] + xs[i], reading back what the loop wrote (and
    -- stacking it after: its elements are read twice, so clear_after_read = false)
    local _, out = tf.while_loop(function(i) return tf.less(i, 4) end, function(i, out)
      local prev = tf.cond(tf.greater(i, 0), function() return out:read(i - 1) end, function() return tf.constant(0) end)
      return i + 1, out:write(i, prev + xs:read(i))
    end, {i32(0), tf.TensorArray(tf.float32, 4, {clear_after_read = false})})
    assert.same({1, 3, 6, 10}, sess:run(out:stack()):totable())
  end)

  it("is returned from tf.cond branches", function()
    local p = tf.placeholder(tf.bool, {})
    local ta = tf.TensorArray(tf.float32, 2):write(0, 1)
    local r = tf.cond(p, function() return ta:write(1, 10) end, function() return ta:write(1, 20) end)
    local sess = tf.Session()
    assert.same({1, 10}, sess:run(r:stack(), {[p] = true}):totable())
    assert.same({1, 20}, sess:run(r:stack(), {[p] = false}):totable())
  end)

  it("checks its constructor's arguments", function()
    assert.matches("size must be an int32 tensor or an integer", H.error_of(tf.TensorArray, tf.float32, tf.constant(2.0)))
    assert.matches("give a size", H.error_of(tf.TensorArray, tf.float32))
    assert.matches("unknown option", H.error_of(tf.TensorArray, tf.float32, 2, {bogus = true}))
    local sess = tf.Session()
    local n = tf.placeholder(tf.int32, {})
    local err = H.error_of(sess.run, sess, tf.TensorArray(tf.float32, n):size(), {[n] = -2})
    assert.matches("the size must be non%-negative, got %-2", err)
    assert.equal(3, sess:run(tf.TensorArray(tf.float32, n, {clear_after_read = false, infer_shape = true}):size(), {[n] = 3}))
    assert.equal(0, sess:run(tf.TensorArray(tf.float32, nil, {dynamic_size = true}):size()))
  end)
  describe("with elements of unequal first dimension", function()
    local value = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}, {13, 14, 15}, {16, 17, 18}}

    it("splits into unequal lengths, reads each element with its own shape and concatenates back", function()
      local sess = tf.Session()
      local sp = tf.TensorArray(tf.float32, 3, {clear_after_read = false}):split(tf.constant(value), {2, 1, 3})
      assert.same({-1, 3}, sp.element_shape.dims)
      local r0, r1, r2 = sp:read(0), sp:read(1), sp:read(2)
      assert.same({-1, 3}, r0:get_shape().dims)
      local v = sess:run({r0, r1, r2, sp:concat(), sp:size()})
      assert.same({{1, 2, 3}, {4, 5, 6}}, v[1]:totable())
      assert.same({{7, 8, 9}}, v[2]:totable())
      assert.same({{10, 11, 12}, {13, 14, 15}, {16, 17, 18}}, v[3]:totable())
      assert.same(value, v[4]:totable())
      assert.equal(3, v[5])
      -- zero-length elements are elements too
      local z = tf.TensorArray(tf.float32, 3):split(tf.constant({{1}, {2}}), {0, 2, 0})
      assert.same({{1}, {2}}, sess:run(z:concat()):totable())
      assert.same({0, 1}, sess:run(tf.TensorArray(tf.float32, 3, {clear_after_read = false})
                                    :split(tf.constant({{1}, {2}}), {0, 2, 0}):read(2)):shape())
    end)

    it("takes lengths from a tensor known only when it runs", function()
      local sess = tf.Session()
      local lengths = tf.placeholder(tf.int32, {3})
      local sp = tf.TensorArray(tf.float32, 3, {clear_after_read = false}):split(tf.constant(value), lengths)
      assert.same({-1, 3}, sp.element_shape.dims)
      local r = sess:run({sp:read(1), sp:concat()}, {[lengths] = {1, 4, 1}})
      assert.same({{4, 5, 6}, {7, 8, 9}, {10, 11, 12}, {13, 14, 15}}, r[1]:totable())
      assert.same(value, r[2]:totable())
      -- equal lengths at run time: stack works
      assert.same({{{1, 2, 3}, {4, 5, 6}}, {{7, 8, 9}, {10, 11, 12}}, {{13, 14, 15}, {16, 17, 18}}},
                  sess:run(sp:stack(), {[lengths] = {2, 2, 2}}):totable())
      local err = H.error_of(sess.run, sess, sp:concat(), {[lengths] = {1, 1, 1}})
      assert.matches("but sum of lengths is 3 and value's shape is: %[6,3%]", err)
    end)

    it("refuses to stack or gather elements of unequal shapes, in TensorFlow's words", function()
      local sess = tf.Session()
      local sp = tf.TensorArray(tf.float32, 3, {clear_after_read = false}):split(tf.constant(value), {2, 1, 3})
      assert.matches("TensorArrayStack: TensorArray has inconsistent shapes.  Index 0 has shape: %[2,3%] but index 1 " ..
                     "has shape: %[1,3%]", H.error_of(sess.run, sess, sp:stack()))
      assert.matches("TensorArray has inconsistent shapes.  Index 2 has shape: %[3,3%] but index 0 has shape: %[2,3%]",
                     H.error_of(sess.run, sess, sp:gather({2, 0})))
      -- a gather of elements of one shape is fine
      local eq = tf.TensorArray(tf.float32, 3, {clear_after_read = false}):split(tf.constant(value), {2, 2, 2})
      local un = tf.TensorArray(tf.float32, 4, {clear_after_read = false}):split(tf.constant(value), {2, 1, 2, 1})
      assert.same({{{13, 14, 15}, {16, 17, 18}}, {{1, 2, 3}, {4, 5, 6}}}, sess:run(eq:gather({2, 0})):totable())
      assert.same({{{16, 17, 18}}, {{7, 8, 9}}}, sess:run(un:gather({3, 1})):totable())
      -- elements must agree after the first dimension
      local bad = tf.TensorArray(tf.float32, 2, {infer_shape = false}):write(0, tf.zeros({2, 3})):write(1, tf.zeros({2, 2}))
      assert.matches("Could not write to TensorArray index 1 because the value shape is %[2,2%] which is incompatible " ..
                     "with the TensorArray's element shape: %(%?, 3%)", H.error_of(sess.run, sess, bad:concat()))
    end)

    it("writes elements of unequal first dimension with infer_shape = false, and only then", function()
      local sess = tf.Session()
      local ta = tf.TensorArray(tf.float32, 3, {infer_shape = false, clear_after_read = false})
      ta = ta:write(1, tf.constant({{1, 2}})):write(0, tf.constant({{3, 4}, {5, 6}, {7, 8}}))
      ta = ta:write(2, tf.constant({{9, 10}, {11, 12}}))
      local r = sess:run({ta:concat(), ta:read(1), ta:read(2)})
      assert.same({{3, 4}, {5, 6}, {7, 8}, {1, 2}, {9, 10}, {11, 12}}, r[1]:totable())
      assert.same({{1, 2}}, r[2]:totable())
      assert.same({{9, 10}, {11, 12}}, r[3]:totable())
      -- a uniform array turns ragged at the first write that needs it, keeping what it holds
      local p = tf.placeholder(tf.float32, {-1, 2})
      local u = tf.TensorArray(tf.float32, 3, {infer_shape = false, dynamic_size = true})
      u = u:write(0, tf.constant({{1, 2}})):write(1, tf.constant({{3, 4}})):write(3, p)
      local c = u:write(2, tf.constant({{9, 9}})):concat()
      assert.same({{1, 2}, {3, 4}, {9, 9}, {5, 6}, {7, 8}}, sess:run(c, {[p] = {{5, 6}, {7, 8}}}):totable())
      assert.same({{1, 2}, {3, 4}, {9, 9}, {5, 6}}, sess:run(c, {[p] = {{5, 6}}}):totable())
      -- the default (infer_shape = true) keeps one element shape, as TensorFlow does
      local p2 = tf.placeholder(tf.float32, {-1, 2})
      local one = tf.TensorArray(tf.float32, 2):write(0, tf.constant({{1, 2}})):write(1, p2)
      assert.matches("Could not write to TensorArray index 1 because the value shape is %[2,2%] which is incompatible " ..
                     "with the TensorArray's inferred element shape: %[1,2%] %(consider setting infer_shape=False%)",
                     H.error_of(sess.run, sess, one:concat(), {[p2] = {{1, 2}, {3, 4}}}))
    end)

    it("splits and writes inside a loop, elements of a length per iteration", function()
      -- element i of the split has i + 1 rows; the loop writes 2 * element i + i
      local sess = tf.Session()
      local x = tf.constant({{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}}, tf.float32)
      local src = tf.TensorArray(tf.float32, 3):split(x, {1, 2, 3})
      local _, out = tf.while_loop(function(i) return tf.less(i, 3) end, function(i, out)
        local e = src:read(i)
        return i + 1, out:write(i, e * 2 + tf.cast(i, tf.float32))
      end, {i32(0), tf.TensorArray(tf.float32, 3, {infer_shape = false})})
      assert.same({{2, 4}, {7, 9}, {11, 13}, {16, 18}, {20, 22}, {24, 26}}, sess:run(out:concat()):totable())
    end)

    it("keeps clear_after_read and dynamic_size", function()
      local sess = tf.Session()
      local sp = tf.TensorArray(tf.float32, 1, {dynamic_size = true}):split(tf.constant(value), {1, 2, 3})
      assert.equal(3, sess:run(sp:size()))
      local r = sp:read(1)
      assert.matches("Could not read index 1 twice because it was cleared after a previous read",
                     H.error_of(sess.run, sess, {r, sp:concat()}))
      assert.same(value, sess:run(sp:concat()):totable())
    end)
  end)

  it("refuses a fed metadata tensor that does not fit its buffer, and stays usable", function()
    -- Any tensor can be fed; a forged size or offset must not reach past the buffer.
    local sess = tf.Session()
    local mismatch = "the TensorArray's buffer and metadata do not belong together"
    local ta = tf.TensorArray(tf.float32, 3):write(0, {1}):write(1, {2}):write(2, {3})
    local forged = tf.array({100, 1, 1, 1}, tf.int64)   -- size 100 in an array of capacity 3
    assert.matches(mismatch, H.error_of(sess.run, sess, ta:stack(), {[ta.meta] = forged}), 1, true)
    assert.matches(mismatch, H.error_of(sess.run, sess, ta:size(), {[ta.meta] = forged}), 1, true)
    local states = tf.array({3, 1, 7, 1}, tf.int64)     -- 7 is no element state
    assert.matches(mismatch, H.error_of(sess.run, sess, ta:read(0), {[ta.meta] = states}), 1, true)
    assert.same({{1}, {2}, {3}}, sess:run(ta:stack()):totable())

    local ragged = tf.TensorArray(tf.float32, 2, {clear_after_read = false})
      :split(tf.constant({{1}, {2}, {3}}), {2, 1})
    local meta = sess:run(ragged.meta)
    -- size 2 (ragged bit), states 1 1, offsets 0 2, lengths 2 1, rows in use 3
    assert.same({2 ^ 62, 1, 1, 0, 2, 2, 1, 3}, meta:totable())
    local past = meta:copy()
    past:set(4, 3)                                      -- element 1 at row 3 of 3 rows
    assert.matches(mismatch, H.error_of(sess.run, sess, ragged:read(1), {[ragged.meta] = past}), 1, true)
    assert.matches(mismatch, H.error_of(sess.run, sess, ragged:concat(), {[ragged.meta] = past}), 1, true)
    assert.same({{3}}, sess:run(ragged:read(1)):totable())
  end)
end)
