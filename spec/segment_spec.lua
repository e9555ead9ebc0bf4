-- segment_spec.lua — the segment reductions (src/ops/segment.c) and their
-- composites: tf.segment_sum/prod/max/min/mean and
-- tf.unsorted_segment_sum/prod/max/min/mean/sqrt_n. Values from NumPy
-- (spec/fixtures/op_coverage_values.py, ufunc.at) for every dtype, with empty
-- segments, dropped negative ids and NaN; empty tensors, ids of rank 0 and 2,
-- unknown shapes, errors at build and run time, and gradients checked against
-- central differences, first and second order.
local tf = require("moonflow")
local H = require("spec.helpers")
local error_of, assert_values = H.error_of, H.assert_values

local nan = 0 / 0
-- An empty unsorted segment of Max / Min: numeric_limits<T>::lowest() / max(), as TensorFlow's.
local BIG32, BIG64 = 3.4028234663852886e+38, 1.7976931348623157e+308
local LOW32, HIGH32, LOW64, HIGH64 = {-BIG32, -BIG32, -BIG32}, {BIG32, BIG32, BIG32}, {-BIG64, -BIG64, -BIG64},
                                     {BIG64, BIG64, BIG64}
local INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX = -2 ^ 31, 2 ^ 31 - 1, -2 ^ 63, 2 ^ 63

local DATA = {{1.5, -2, 3}, {0.5, 4, -1}, {-3, 0, nan}, {2, -0.5, 6}, {1, 3, -2}}
local SORTED, UNSORTED = {0, 0, 1, 3, 3}, {2, -1, 0, 2, 0}

-- Results by dtype and function (the script's output, the limits named): sorted ones of (data, SORTED),
-- 4 rows; unsorted ones of (data, UNSORTED, 4).
local FLOATS = {
  float32 = {
    segment_sum = {{2, 2, 2}, {-3, 0, nan}, {0, 0, 0}, {3, 2.5, 4}},
    unsorted_segment_sum = {{-2, 3, nan}, {0, 0, 0}, {3.5, -2.5, 9}, {0, 0, 0}},
    segment_prod = {{0.75, -8, -3}, {-3, 0, nan}, {1, 1, 1}, {2, -1.5, -12}},
    unsorted_segment_prod = {{-3, 0, nan}, {1, 1, 1}, {3, 1, 18}, {1, 1, 1}},
    segment_max = {{1.5, 4, 3}, {-3, 0, nan}, {0, 0, 0}, {2, 3, 6}},
    unsorted_segment_max = {{1, 3, nan}, LOW32, {2, -0.5, 6}, LOW32},
    segment_min = {{0.5, -2, -1}, {-3, 0, nan}, {0, 0, 0}, {1, -0.5, -2}},
    unsorted_segment_min = {{-3, 0, nan}, HIGH32, {1.5, -2, 3}, HIGH32},
    segment_mean = {{1, 1, 1}, {-3, 0, nan}, {0, 0, 0}, {1.5, 1.25, 2}},
    unsorted_segment_mean = {{-1, 1.5, nan}, {0, 0, 0}, {1.75, -1.25, 4.5}, {0, 0, 0}},
    unsorted_segment_sqrt_n = {{-1.4142135381698608, 2.1213202476501465, nan}, {0, 0, 0},
                               {2.4748737812042236, -1.7677669525146484, 6.363961219787598}, {0, 0, 0}},
  },
  float64 = {
    segment_sum = {{2, 2, 2}, {-3, 0, nan}, {0, 0, 0}, {3, 2.5, 4}},
    unsorted_segment_sum = {{-2, 3, nan}, {0, 0, 0}, {3.5, -2.5, 9}, {0, 0, 0}},
    segment_prod = {{0.75, -8, -3}, {-3, 0, nan}, {1, 1, 1}, {2, -1.5, -12}},
    unsorted_segment_prod = {{-3, 0, nan}, {1, 1, 1}, {3, 1, 18}, {1, 1, 1}},
    segment_max = {{1.5, 4, 3}, {-3, 0, nan}, {0, 0, 0}, {2, 3, 6}},
    unsorted_segment_max = {{1, 3, nan}, LOW64, {2, -0.5, 6}, LOW64},
    segment_min = {{0.5, -2, -1}, {-3, 0, nan}, {0, 0, 0}, {1, -0.5, -2}},
    unsorted_segment_min = {{-3, 0, nan}, HIGH64, {1.5, -2, 3}, HIGH64},
    segment_mean = {{1, 1, 1}, {-3, 0, nan}, {0, 0, 0}, {1.5, 1.25, 2}},
    unsorted_segment_mean = {{-1, 1.5, nan}, {0, 0, 0}, {1.75, -1.25, 4.5}, {0, 0, 0}},
    unsorted_segment_sqrt_n = {{-1.414213562373095, 2.1213203435596424, nan}, {0, 0, 0},
                               {2.4748737341529163, -1.7677669529663687, 6.363961030678928}, {0, 0, 0}},
  },
}
local INTS = {{7, -3}, {-8, 5}, {100, 2}, {3, -9}, {-1, 4}}
local INTEGERS = {
  int32 = {data = INTS,
    segment_sum = {{-1, 2}, {100, 2}, {0, 0}, {2, -5}},
    unsorted_segment_sum = {{99, 6}, {0, 0}, {10, -12}, {0, 0}},
    segment_prod = {{-56, -15}, {100, 2}, {1, 1}, {-3, -36}},
    unsorted_segment_prod = {{-100, 8}, {1, 1}, {21, 27}, {1, 1}},
    segment_max = {{7, 5}, {100, 2}, {0, 0}, {3, 4}},
    unsorted_segment_max = {{100, 4}, {INT32_MIN, INT32_MIN}, {7, -3}, {INT32_MIN, INT32_MIN}},
    segment_min = {{-8, -3}, {100, 2}, {0, 0}, {-1, -9}},
    unsorted_segment_min = {{-1, 2}, {INT32_MAX, INT32_MAX}, {3, -9}, {INT32_MAX, INT32_MAX}},
    segment_mean = {{0, 1}, {100, 2}, {0, 0}, {1, -2}},
  },
  int64 = {data = INTS,
    segment_sum = {{-1, 2}, {100, 2}, {0, 0}, {2, -5}},
    unsorted_segment_sum = {{99, 6}, {0, 0}, {10, -12}, {0, 0}},
    segment_prod = {{-56, -15}, {100, 2}, {1, 1}, {-3, -36}},
    unsorted_segment_prod = {{-100, 8}, {1, 1}, {21, 27}, {1, 1}},
    segment_max = {{7, 5}, {100, 2}, {0, 0}, {3, 4}},
    unsorted_segment_max = {{100, 4}, {INT64_MIN, INT64_MIN}, {7, -3}, {INT64_MIN, INT64_MIN}},
    segment_min = {{-8, -3}, {100, 2}, {0, 0}, {-1, -9}},
    unsorted_segment_min = {{-1, 2}, {INT64_MAX, INT64_MAX}, {3, -9}, {INT64_MAX, INT64_MAX}},
    segment_mean = {{0, 1}, {100, 2}, {0, 0}, {1, -2}},
  },
  uint8 = {data = {{21, 9}, {24, 15}, {44, 6}, {9, 27}, {3, 12}},
    segment_sum = {{45, 24}, {44, 6}, {0, 0}, {12, 39}},
    unsorted_segment_sum = {{47, 18}, {0, 0}, {30, 36}, {0, 0}},
    segment_prod = {{248, 135}, {44, 6}, {1, 1}, {27, 68}},
    unsorted_segment_prod = {{132, 72}, {1, 1}, {189, 243}, {1, 1}},
    segment_max = {{24, 15}, {44, 6}, {0, 0}, {9, 27}},
    unsorted_segment_max = {{44, 12}, {0, 0}, {21, 27}, {0, 0}},
    segment_min = {{21, 9}, {44, 6}, {0, 0}, {3, 12}},
    unsorted_segment_min = {{3, 6}, {255, 255}, {9, 9}, {255, 255}},
    segment_mean = {{22, 12}, {44, 6}, {0, 0}, {6, 19}},
  },
}

local function run(t, feeds) return tf.Session():run(t, feeds) end

-- tf[fname](data, SORTED) or tf[fname](data, UNSORTED, 4).
local function reduce(fname, data)
  if fname:find("^unsorted") then return tf[fname](data, UNSORTED, 4) end
  return tf[fname](data, SORTED)
end

describe("segment reductions", function()
  before_each(function() tf.reset_default_graph() end)

  for dname, results in pairs(FLOATS) do
    it("of " .. dname .. " match NumPy: empty segments, dropped ids, NaN", function()
      local x = tf.constant(DATA, tf[dname])
      for fname, want in pairs(results) do
        local y = reduce(fname, x)
        assert.equal(tf[dname], y.dtype, fname)
        assert.same({4, 3}, y:get_shape():as_list(), fname)
        assert_values(want, run(y):totable(), dname == "float32" and 1e-6 or 1e-15)
      end
    end)
  end

  for dname, results in pairs(INTEGERS) do
    it("of " .. dname .. " match NumPy: wrapping sums and products, means rounded toward zero", function()
      local x = tf.constant(results.data, tf[dname])
      for fname, want in pairs(results) do
        if fname ~= "data" then
          local y = reduce(fname, x)
          assert.equal(tf[dname], y.dtype, fname)
          assert_values(want, run(y):totable())
        end
      end
    end)
  end

  it("are ops of TensorFlow's names, also under tf.math and as methods; ids may be int64", function()
    local x = tf.constant(DATA)
    for _, kind in ipairs({"Sum", "Prod", "Max", "Min"}) do
      local fname = kind:lower()
      assert.equal("Segment" .. kind, tf["segment_" .. fname](x, SORTED).op.type)
      assert.equal("UnsortedSegment" .. kind, tf["unsorted_segment_" .. fname](x, UNSORTED, 4).op.type)
      assert.equal(tf["segment_" .. fname], tf.math["segment_" .. fname])
      assert.equal(tf["unsorted_segment_" .. fname], tf.math["unsorted_segment_" .. fname])
    end
    for _, fname in ipairs({"segment_mean", "unsorted_segment_mean", "unsorted_segment_sqrt_n"}) do
      assert.equal(tf[fname], tf.math[fname])
    end
    assert.equal("s:0", tf.segment_sum(x, SORTED, "s").name)
    assert.equal("m:0", tf.unsorted_segment_mean(x, UNSORTED, 4, {name = "m"}).name)
    local ids = tf.constant(UNSORTED, tf.int64)
    local y = x:unsorted_segment_max(ids, tf.constant(4, tf.int64))
    assert_values(FLOATS.float32.unsorted_segment_max, run(y):totable())
  end)

  it("take ids of any rank that prefixes data's shape (unsorted): rank 2 and rank 0", function()
    local data = tf.reshape(tf.range(12, {dtype = tf.float64}) - 5, {2, 2, 3})
    local ids = {{1, -1}, {1, 0}}
    -- From spec/fixtures/op_coverage_values.py.
    assert_values({{4, 5, 6}, {-4, -2, 0}, {0, 0, 0}}, run(tf.unsorted_segment_sum(data, ids, 3)):totable())
    assert_values({{4, 5, 6}, {1, 2, 3}, LOW64}, run(tf.unsorted_segment_max(data, ids, 3)):totable())
    local one = tf.unsorted_segment_sum(data, 1, 2)
    assert.same({2, 2, 2, 3}, one:get_shape():as_list())
    local v = run(one):totable()
    assert_values({{{0, 0, 0}, {0, 0, 0}}, {{0, 0, 0}, {0, 0, 0}}}, v[1])
    assert_values(run(data):totable(), v[2])
  end)

  it("handle empty tensors, empty rows and zero segments", function()
    local empty = tf.zeros({0, 3})
    local none = tf.constant({}, tf.int32)
    assert.same({0, 3}, run(tf.segment_sum(empty, none)):shape())
    assert.same({0, 3}, run(tf.segment_mean(empty, none)):shape())
    assert_values({{0, 0, 0}, {0, 0, 0}}, run(tf.unsorted_segment_sum(empty, none, 2)):totable())
    assert_values({LOW32, LOW32}, run(tf.unsorted_segment_max(empty, none, 2)):totable(), 1e-7)
    assert.same({0, 3}, run(tf.unsorted_segment_prod(tf.ones({2, 3}), {-1, -1}, 0)):shape())
    assert.same({3, 0}, run(tf.segment_min(tf.zeros({2, 0}), {0, 2})):shape())
    assert.same({{1}, {1}}, run(tf.unsorted_segment_prod(tf.ones({2, 1}), {-1, -1}, 2)):totable())
  end)

  it("read the ids when they are known: the sorted ops' row count at build time, else at run time", function()
    local ids = tf.placeholder(tf.int32, {-1})
    local data = tf.placeholder(tf.float32, {-1, 2})
    local y = tf.segment_sum(data, ids)
    assert.same({-1, 2}, y:get_shape():as_list())
    local sess = tf.Session()
    local feed = {[data] = {{1, 2}, {3, 4}, {5, 6}}}
    feed[ids] = {0, 2, 2}
    assert.same({{1, 2}, {0, 0}, {8, 10}}, sess:run(y, feed):totable())
    feed[ids] = {1, 1, 1}
    assert.same({{0, 0}, {9, 12}}, sess:run(y, feed):totable())
    local n = tf.placeholder(tf.int32, {})
    local u = tf.unsorted_segment_min(data, ids, n)
    assert.same({-1, 2}, u:get_shape():as_list())
    feed[n], feed[ids] = 1, {0, -1, 0}
    assert.same({{1, 2}}, sess:run(u, feed):totable())
    assert.is_nil(tf.unsorted_segment_sum(tf.placeholder(tf.float32), ids, 3):get_shape().dims)
  end)

  it("fail on unsorted or negative sorted ids, naming the op, the position and the caller's line", function()
    local x = tf.constant(DATA)
    local line = H.this_line() + 1
    local err = error_of(function() return (tf.segment_sum(x, {0, 1, 0, 2, 2})) end)
    local want = "segment ids are not increasing: segment_ids[2] = 0 follows segment_ids[1] = 1"
    assert.truthy(err:find(want, 1, true), err)
    assert.truthy(err:find("SegmentSum", 1, true) == 1, err)
    assert.truthy(err:find("segment_spec.lua:" .. line, 1, true), err)
    assert.truthy(error_of(tf.segment_max, x, {-1, 0, 0, 0, 0}):find(
      "segment_ids[0] = -1 is negative; segment ids must be >= 0", 1, true))
    -- at run time, when the ids are fed; the session keeps working
    local ids = tf.placeholder(tf.int64, {5})
    local y = tf.segment_prod(x, ids)
    local sess = tf.Session()
    local ok, msg = pcall(sess.run, sess, y, {[ids] = tf.array({0, 0, 3, 2, 2}, tf.int64)})
    assert.is_false(ok)
    assert.truthy(tostring(msg):find("segment_ids[3] = 2 follows segment_ids[2] = 3", 1, true), msg)
    assert.same({5, 3}, sess:run(y, {[ids] = tf.array({0, 1, 2, 3, 4}, tf.int64)}):shape())
  end)

  it("fail on unsorted ids out of range at run time, naming their position", function()
    local x = tf.zeros({2, 2, 3})
    local y = tf.unsorted_segment_sum(x, {{0, 1}, {3, 0}}, 3)
    local sess = tf.Session()
    local ok, msg = pcall(sess.run, sess, y)
    assert.is_false(ok)
    assert.truthy(tostring(msg):find("UnsortedSegmentSum: segment_ids[1,0] = 3 is out of range [0, 3)", 1, true), msg)
    assert.same({3, 3}, sess:run(tf.unsorted_segment_sum(tf.ones({2, 3}), {0, 2}, 3)):shape())
  end)

  it("check dtypes and shapes when built", function()
    local x = tf.constant(DATA)
    local function msg(...) return H.without_line(error_of(...)) end
    assert.truthy(msg(tf.segment_sum, x, tf.constant(SORTED, tf.float32)):find(
      "segment_ids has dtype float32, but SegmentSum takes only int32, int64; use tf.cast", 1, true))
    assert.truthy(msg(tf.unsorted_segment_max, tf.constant({true, false}), {0, 1}, 2):find(
      "data has dtype bool, but UnsortedSegmentMax takes only float32, float64, int32, int64, uint8", 1, true))
    assert.truthy(msg(tf.unsorted_segment_sum, x, UNSORTED, tf.constant(4.0)):find(
      "num_segments has dtype float32, but UnsortedSegmentSum takes only int32, int64", 1, true))
    assert.truthy(msg(tf.unsorted_segment_sum, x, UNSORTED, {4}):find(
      "num_segments must be a scalar, got shape [1]", 1, true))
    assert.truthy(msg(tf.unsorted_segment_sum, x, UNSORTED, -1):find(
      "num_segments = -1 must be non-negative", 1, true))
    assert.truthy(msg(tf.segment_sum, x, {{0, 0, 1, 3, 3}}):find(
      "segment_ids must be a vector, got shape [1,5]", 1, true))
    assert.truthy(msg(tf.segment_sum, x, {0, 0, 1}):find(
      "data.shape = [5,3] does not start with segment_ids.shape = [3]", 1, true))
    assert.truthy(msg(tf.unsorted_segment_sum, x, {{0, 1, 2}}, 3):find(
      "data.shape = [5,3] does not start with segment_ids.shape = [1,3]", 1, true))
    assert.truthy(msg(tf.segment_sum, tf.constant(1), {0}):find("does not start with", 1, true))
    assert.truthy(msg(tf.unsorted_segment_sum, x, UNSORTED):find(
      "tf.unsorted_segment_sum: num_segments is required", 1, true))
    assert.truthy(msg(tf.unsorted_segment_mean, tf.constant(INTS, tf.int32), UNSORTED, 4):find(
      "tf.unsorted_segment_mean: data must be float32 or float64, got int32", 1, true))
    assert.truthy(msg(tf.unsorted_segment_sqrt_n, tf.placeholder(tf.float32), UNSORTED, 4):find(
      "tf.unsorted_segment_sqrt_n: data and segment_ids need a known rank", 1, true))
  end)
end)

describe("gradients of the segment reductions", function()
  before_each(function() tf.reset_default_graph() end)

  -- Away from ties (max, min) and from zeros unless asked for (prod).
  local X = {{0.5, -1.3, 2.1}, {0.9, 0.7, -2.2}, {1.4, -0.4, 0.3}, {-0.8, 1.2, 2.6}, {1.9, -1.7, 0.6}}
  local ZEROS = {{0, -1.3, 0}, {0.9, 0, -2.2}, {1.4, -0.4, 0.3}, {0, 1.2, 0}, {1.9, 0, 0}}
  local ALL = {"segment_sum", "segment_prod", "segment_max", "segment_min", "segment_mean",
               "unsorted_segment_sum", "unsorted_segment_prod", "unsorted_segment_max", "unsorted_segment_min",
               "unsorted_segment_mean", "unsorted_segment_sqrt_n"}

  for _, fname in ipairs(ALL) do
    it(fname .. " matches finite differences; its gradient too", function()
      local x = tf.placeholder(tf.float64, {5, 3}, "x")
      local y = reduce(fname, x)
      H.check_grad(x, {5, 3}, y, {4, 3}, {x_init_value = tf.array(X, tf.float64)})
      if fname:find("prod") then
        H.check_grad(x, {5, 3}, y, {4, 3}, {x_init_value = tf.array(ZEROS, tf.float64)})
      end
      local k = tf.constant(X, tf.float64)
      H.check_grad_of_grad(k, {5, 3}, reduce(fname, k), {4, 3})
    end)
  end

  it("Sum gathers dy, zeros for dropped ids; Max splits it among ties", function()
    local x = tf.placeholder(tf.float64, {4, 2}, "x")
    local sess = tf.Session()
    local dy = tf.constant({{1, 2}, {3, 4}, {5, 6}}, tf.float64)
    local feed = {[x] = {{1, 1}, {1, 2}, {3, 3}, {0, 5}}}
    local g = tf.gradients(tf.unsorted_segment_sum(x, {2, -1, 0, 2}, 3), x, dy)[1]
    assert.same({{5, 6}, {0, 0}, {1, 2}, {5, 6}}, sess:run(g, feed):totable())
    g = tf.gradients(tf.segment_max(x, {0, 0, 2, 2}), x, dy)[1]
    assert.same({{0.5, 0}, {0.5, 2}, {5, 0}, {0, 6}}, sess:run(g, feed):totable())
    -- Prod: in a column with one zero, only the zero gets a gradient, the product of the others
    g = tf.gradients(tf.segment_prod(x, {0, 0, 0, 0}), x)[1]
    assert.same({{0, 30}, {0, 15}, {0, 10}, {3, 6}}, sess:run(g, feed):totable())
  end)

  it("work with unknown dims and rank-2 ids", function()
    local x = tf.placeholder(tf.float64, {-1, 2, 3}, "x")
    local y = tf.unsorted_segment_max(x, {{1, -1}, {1, 0}}, 2)
    local init = tf.array({{{0.5, -1.3, 2.1}, {0.9, 0.7, -2.2}}, {{1.4, -0.4, 0.3}, {-0.8, 1.2, 2.6}}}, tf.float64)
    H.check_grad(x, {2, 2, 3}, y, {2, 3}, {x_init_value = init})
    H.check_grad(x, {2, 2, 3}, tf.unsorted_segment_prod(x, {{1, -1}, {1, 0}}, 2), {2, 3}, {x_init_value = init})
  end)
end)
