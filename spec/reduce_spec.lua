-- Reductions: reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod,
-- reduce_any, reduce_all with axis lists, negative axes, keepdims and empty tensors.
local tf = require("moonflow")
local H = require("spec.helpers")

-- The sweeps below build and run ops in loops on purpose: no growth warnings.
setup(H.growth_off)
teardown(H.growth_restore)

local nan, inf = 0 / 0, math.huge

-- Flattens a fetched value (number, boolean or tf.Array) into a Lua list.
local function flat(v)
  if type(v) ~= "table" then return {v} end
  local out = {}
  local function walk(t)
    if type(t) == "table" then for _, x in ipairs(t) do walk(x) end else out[#out + 1] = t end
  end
  walk(v:totable())
  return out
end

local function shape_of(v)
  if type(v) ~= "table" then return {} end
  return v:shape()
end

-- Compares two flat lists; nan matches nan, numbers match within a relative tolerance.
local function assert_values(expected, actual, tol, what)
  assert.equal(#expected, #actual, (what or "") .. ": element count")
  for i = 1, #expected do
    local e, a = expected[i], actual[i]
    local where = string.format("%s: element %d: expected %s, got %s", what or "", i - 1, tostring(e), tostring(a))
    if type(e) == "number" and e ~= e then
      assert.is_true(a ~= a, where)
    elseif type(e) == "number" and tol and e ~= inf and e ~= -inf then
      assert.is_true(math.abs(a - e) <= tol * math.max(1, math.abs(e)), where)
    else
      assert.is_true(e == a, where)
    end
  end
end

-- A tf.Array of dtype and shape filled from a flat list.
local function array(dtype, dims, values)
  local a = tf.Array.new(dtype, dims)
  local d = a:data()
  for i, v in ipairs(values) do d[i - 1] = v end
  return a
end

-- Reference: reduces a flat row-major list the slow, obvious way.
local function reference(op, values, dims, axes, keepdims, dtype)
  local rank = #dims
  local reduced = {}
  if axes == nil then
    for d = 1, rank do reduced[d] = true end
  else
    for _, a in ipairs(axes) do reduced[a % rank + 1] = true end
  end
  local out_dims, kept = {}, {}
  for d = 1, rank do
    if not reduced[d] then out_dims[#out_dims + 1] = dims[d]; kept[#kept + 1] = d
    elseif keepdims then out_dims[#out_dims + 1] = 1 end
  end
  local n_out = 1
  for _, d in ipairs(kept) do n_out = n_out * dims[d] end
  local groups = {}
  for o = 1, n_out do groups[o] = {} end
  local idx = {}
  for d = 1, rank do idx[d] = 0 end
  for i = 1, #values do
    local o = 0
    for _, d in ipairs(kept) do o = o * dims[d] + idx[d] end
    local g = groups[o + 1]
    g[#g + 1] = values[i]
    for d = rank, 1, -1 do
      idx[d] = idx[d] + 1
      if idx[d] < dims[d] then break end
      idx[d] = 0
    end
  end
  local out = {}
  for o, g in ipairs(groups) do
    local r
    if op == "sum" or op == "mean" then
      r = 0; for _, v in ipairs(g) do r = r + v end
      if op == "mean" then
        if dtype.is_integer then
          r = #g == 0 and 0 or r / #g
          r = r >= 0 and math.floor(r) or math.ceil(r)
        else
          r = r / #g
        end
      end
    elseif op == "prod" then r = 1; for _, v in ipairs(g) do r = r * v end
    elseif op == "max" then r = -inf; for _, v in ipairs(g) do if v > r then r = v end end
    elseif op == "min" then r = inf; for _, v in ipairs(g) do if v < r then r = v end end
    elseif op == "any" then r = false; for _, v in ipairs(g) do r = r or v end
    elseif op == "all" then r = true; for _, v in ipairs(g) do r = r and v end
    end
    if dtype == tf.uint8 and (op == "sum" or op == "prod") then r = r % 256 end  -- wraps around
    out[o] = r
  end
  return out, out_dims
end

local numeric = {tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8}
local axis_cases = {
  false, {}, {0}, {1}, {2}, {-1}, {-3}, {0, 1}, {0, 2}, {1, 2}, {2, 0}, {-1, 0}, {0, 1, 2}, {-3, -2, -1},
}

describe("reductions", function()
  before_each(function() tf.reset_default_graph() end)

  describe("hand-computed values", function()
    it("reduce_sum of a matrix over all, each and both axes", function()
      local x = tf.constant({{1, 2, 3}, {4, 5, 6}})
      local sess = tf.Session()
      assert.equal(21, sess:run(tf.reduce_sum(x)))
      assert.same({5, 7, 9}, sess:run(tf.reduce_sum(x, 0)):totable())
      assert.same({6, 15}, sess:run(tf.reduce_sum(x, 1)):totable())
      assert.same({6, 15}, sess:run(tf.reduce_sum(x, -1)):totable())
      assert.same({5, 7, 9}, sess:run(tf.reduce_sum(x, -2)):totable())
      assert.equal(21, sess:run(tf.reduce_sum(x, {0, 1})))
      assert.equal(21, sess:run(tf.reduce_sum(x, {1, 0})))
      assert.same({{21}}, sess:run(tf.reduce_sum(x, nil, true)):totable())
      assert.same({{5, 7, 9}}, sess:run(tf.reduce_sum(x, 0, true)):totable())
      assert.same({{6}, {15}}, sess:run(tf.reduce_sum(x, {axis = 1, keepdims = true})):totable())
      -- An empty axis list reduces nothing, as in TensorFlow.
      assert.same({{1, 2, 3}, {4, 5, 6}}, sess:run(tf.reduce_sum(x, {})):totable())
    end)

    it("every reduction of a float32 matrix", function()
      local x = tf.constant({{1, -2, 3}, {4, 5, -6}})
      local sess = tf.Session()
      assert.same({5, 3, -3}, sess:run(tf.reduce_sum(x, 0)):totable())
      assert.same({2.5, 1.5, -1.5}, sess:run(tf.reduce_mean(x, 0)):totable())
      assert.same({4, 5, 3}, sess:run(tf.reduce_max(x, 0)):totable())
      assert.same({1, -2, -6}, sess:run(tf.reduce_min(x, 0)):totable())
      assert.same({4, -10, -18}, sess:run(tf.reduce_prod(x, 0)):totable())
      assert.equal(-6, sess:run(tf.reduce_min(x)))
      assert.equal(5, sess:run(tf.reduce_max(x)))
      assert.equal(5, sess:run(tf.reduce_sum(x)))
      assert.is_true(math.abs(sess:run(tf.reduce_mean(x)) - 5 / 6) < 1e-7)
      assert.equal(720, sess:run(tf.reduce_prod(x)))
      assert.same({{-6}, {-120}}, sess:run(tf.reduce_prod(x, 1, true)):totable())
    end)

    it("non-contiguous axes {0, 2} of a rank-3 tensor", function()
      local values = {}
      for i = 1, 24 do values[i] = i end
      local x = tf.constant(array(tf.float32, {2, 3, 4}, values))
      local sess = tf.Session()
      -- j = 0 sums 1..4 and 13..16 = 68; each j adds 4 to 8 elements.
      assert.same({68, 100, 132}, sess:run(tf.reduce_sum(x, {0, 2})):totable())
      assert.same({{{68}, {100}, {132}}}, sess:run(tf.reduce_sum(x, {0, 2}, true)):totable())
      assert.same({16, 20, 24}, sess:run(tf.reduce_max(x, {2, 0})):totable())
      assert.same({1, 5, 9}, sess:run(tf.reduce_min(x, {-1, -3})):totable())
      assert.same({8.5, 12.5, 16.5}, sess:run(tf.reduce_mean(x, {0, 2})):totable())
      -- Axis 1 alone: outer 2 x reduced 3 x inner 4.
      assert.same({{15, 18, 21, 24}, {51, 54, 57, 60}}, sess:run(tf.reduce_sum(x, 1)):totable())
    end)

    it("integer mean is an integer mean, truncated toward zero as in TensorFlow", function()
      local sess = tf.Session()
      for _, dt in ipairs({tf.int32, tf.int64}) do
        assert.equal(1, sess:run(tf.reduce_mean(tf.constant({1, 2}, dt))))
        assert.equal(-1, sess:run(tf.reduce_mean(tf.constant({-1, -2}, dt))))
        assert.same({2, 3}, sess:run(tf.reduce_mean(tf.constant({{1, 2}, {3, 5}}, dt), 0)):totable())
        assert.same({1, 4}, sess:run(tf.reduce_mean(tf.constant({{1, 2}, {3, 5}}, dt), 1)):totable())
      end
      assert.equal(127, sess:run(tf.reduce_mean(tf.constant({200, 55}, tf.uint8))))
      assert.equal(1.5, sess:run(tf.reduce_mean(tf.constant({1, 2}, tf.float64))))
    end)

    it("integer sums and products wrap around like TensorFlow's", function()
      local sess = tf.Session()
      assert.equal(44, sess:run(tf.reduce_sum(tf.constant({200, 100}, tf.uint8))))
      assert.equal(-2147483648, sess:run(tf.reduce_sum(tf.constant({2147483647, 1}, tf.int32))))
      assert.equal(0, sess:run(tf.reduce_prod(tf.constant({65536, 65536}, tf.int32))))
      assert.equal(2 ^ 53, sess:run(tf.reduce_sum(tf.constant({2 ^ 52, 2 ^ 52}, tf.int64))))
      assert.equal(-(2 ^ 62), sess:run(tf.reduce_prod(tf.constant({-(2 ^ 31), 2 ^ 31}, tf.int64))))
    end)

    it("reduce_max and reduce_min propagate nan and handle infinities", function()
      local sess = tf.Session()
      for _, dt in ipairs({tf.float32, tf.float64}) do
        local x = tf.constant({{1, nan, 3}, {-inf, 2, inf}}, dt)
        local mx = sess:run(tf.reduce_max(x))
        assert.is_true(mx ~= mx)
        assert_values({nan, inf}, flat(sess:run(tf.reduce_max(x, 1))))
        assert_values({nan, -inf}, flat(sess:run(tf.reduce_min(x, 1))))
        assert_values({1, nan, inf}, flat(sess:run(tf.reduce_max(x, 0))))
        -- nan in the middle of a long run stays nan whatever lane it lands in.
        local long = {}
        for i = 1, 100 do long[i] = i end
        long[42] = nan
        local lmax, lmin = sess:run(tf.reduce_max(tf.constant(long, dt))), sess:run(tf.reduce_min(tf.constant(long, dt)))
        assert.is_true(lmax ~= lmax and lmin ~= lmin)
      end
    end)

    it("reduce_any and reduce_all over bools", function()
      local x = tf.constant({{true, false, false}, {true, true, false}})
      local sess = tf.Session()
      assert.is_true(sess:run(tf.reduce_any(x)))
      assert.is_false(sess:run(tf.reduce_all(x)))
      assert.same({true, true, false}, sess:run(tf.reduce_any(x, 0)):totable())
      assert.same({true, false, false}, sess:run(tf.reduce_all(x, 0)):totable())
      assert.same({true, true}, sess:run(tf.reduce_any(x, 1)):totable())
      assert.same({false, false}, sess:run(tf.reduce_all(x, -1)):totable())
      assert.same({{false}, {false}}, sess:run(tf.reduce_all(x, 1, true)):totable())
      assert.is_true(sess:run(tf.reduce_all(tf.constant({true, true, true}))))
      assert.is_false(sess:run(tf.reduce_any(tf.constant({false, false}))))
    end)

    it("a scalar reduces to itself", function()
      local sess = tf.Session()
      local x = tf.constant(5, tf.int32)
      assert.equal(5, sess:run(tf.reduce_sum(x)))
      assert.equal(5, sess:run(tf.reduce_mean(x, {})))
      assert.equal(5, sess:run(tf.reduce_prod(x, nil, true)))
      assert.same({}, tf.reduce_max(x):get_shape():as_list())
      assert.is_true(sess:run(tf.reduce_all(tf.constant(true))))
    end)

    it("dimensions of size 1 are handled wherever they are", function()
      local values = {}
      for i = 1, 6 do values[i] = i end
      local x = tf.constant(array(tf.int32, {2, 1, 3, 1}, values))
      local sess = tf.Session()
      assert.same({{5, 7, 9}}, sess:run(tf.reduce_sum(x, {0, 3})):totable())
      assert.same({{{{1}, {2}, {3}}}, {{{4}, {5}, {6}}}}, sess:run(tf.reduce_sum(x, {1, 3}, true)):totable())
      assert.same({6, 15}, sess:run(tf.reduce_sum(x, {1, 2, 3})):totable())
      assert.same({{{{1}, {2}, {3}}}, {{{4}, {5}, {6}}}}, sess:run(tf.reduce_max(x, 1, true)):totable())
    end)
  end)

  describe("every op, dtype and axis list against a reference", function()
    local dims = {2, 3, 4}
    local perm = {}
    for i = 1, 24 do perm[i] = (i * 7) % 24 + 1 end           -- a permutation of 1..24
    local small = {}
    for i = 1, 24 do small[i] = (i % 5 == 0) and 2 or 1 end   -- products fit in a uint8
    local bools = {}
    for i = 1, 24 do bools[i] = (i % 3 == 0) or (i > 20) end

    for _, op in ipairs({"sum", "mean", "max", "min", "prod"}) do
      for _, dt in ipairs(numeric) do
        it(op .. " over " .. dt.name, function()
          local values = op == "prod" and small or perm
          local x = tf.constant(array(dt, dims, values))
          local sess = tf.Session()
          for _, axes in ipairs(axis_cases) do
            for _, keep in ipairs({false, true}) do
              local axis = axes or nil
              local t = tf["reduce_" .. op](x, axis, keep)
              local expected, out_dims = reference(op, values, dims, axis, keep, dt)
              local what = string.format("%s %s axis=%s keepdims=%s", op, dt.name,
                                         axes and "{" .. table.concat(axes, ",") .. "}" or "nil", tostring(keep))
              assert.same(out_dims, t:get_shape():as_list(), what)
              assert.equal(dt, t.dtype)
              local got = sess:run(t)
              assert.same(out_dims, shape_of(got), what)
              assert_values(expected, flat(got), dt == tf.float32 and 1e-6 or nil, what)
            end
          end
        end)
      end
    end

    for _, op in ipairs({"any", "all"}) do
      it(op .. " over bool", function()
        local x = tf.constant(array(tf.bool, dims, bools))
        local sess = tf.Session()
        for _, axes in ipairs(axis_cases) do
          for _, keep in ipairs({false, true}) do
            local axis = axes or nil
            local t = tf["reduce_" .. op](x, axis, keep)
            local expected, out_dims = reference(op, bools, dims, axis, keep, tf.bool)
            assert.same(out_dims, t:get_shape():as_list())
            local got = sess:run(t)
            assert_values(expected, flat(got), nil, op)
          end
        end
      end)
    end

    it("large shapes cross the vector lanes, chunks and tails", function()
      local cases = {
        {{3, 1100}, {0}}, {{3, 1100}, {1}}, {{1100, 3}, {0}}, {{1100, 3}, {1}},
        {{5, 37}, {1}}, {{2, 40, 3}, {0, 2}}, {{2, 40, 3}, {1}}, {{4, 3, 2, 50}, {1, 3}},
        {{4, 3, 2, 50}, {0, 2}}, {{7, 2100}, false}, {{3, 5, 7, 11}, {0, 2}}, {{3, 5, 7, 11}, {1, 3}},
      }
      local seed = 12345
      local function rand()  -- a small LCG so runs are reproducible
        seed = (seed * 1103515245 + 12345) % 2147483648
        return seed % 101 - 50
      end
      local sess = tf.Session()
      for _, c in ipairs(cases) do
        local dims_, axes = c[1], c[2] or nil
        local n = 1
        for _, d in ipairs(dims_) do n = n * d end
        local values = {}
        for i = 1, n do values[i] = rand() end
        for _, dt in ipairs({tf.float64, tf.int32, tf.float32}) do
          local x = tf.placeholder(dt, dims_)
          local feed = array(dt, dims_, values)
          for _, op in ipairs({"sum", "max", "min", "mean"}) do
            local expected = reference(op, values, dims_, axes, false, dt)
            local got = sess:run(tf["reduce_" .. op](x, axes), {[x] = feed})
            assert_values(expected, flat(got), dt == tf.float32 and 1e-6 or 1e-12,
                          op .. " " .. dt.name .. " " .. table.concat(dims_, "x"))
          end
        end
      end
    end)
  end)

  describe("empty reductions", function()
    it("give the identity of each op", function()
      local sess = tf.Session()
      for _, dt in ipairs({tf.float32, tf.float64}) do
        local x = tf.placeholder(dt, {0})
        local feed = {[x] = tf.Array.new(dt, {0})}
        assert.equal(0, sess:run(tf.reduce_sum(x), feed))
        assert.equal(1, sess:run(tf.reduce_prod(x), feed))
        assert.equal(-inf, sess:run(tf.reduce_max(x), feed))
        assert.equal(inf, sess:run(tf.reduce_min(x), feed))
        local m = sess:run(tf.reduce_mean(x), feed)
        assert.is_true(m ~= m)
      end
      local i = tf.placeholder(tf.int32, {0})
      local ifeed = {[i] = tf.Array.new(tf.int32, {0})}
      assert.equal(-2147483648, sess:run(tf.reduce_max(i), ifeed))
      assert.equal(2147483647, sess:run(tf.reduce_min(i), ifeed))
      assert.equal(0, sess:run(tf.reduce_mean(i), ifeed))
      assert.equal(0, sess:run(tf.reduce_max(tf.constant({}, {dtype = tf.uint8, shape = {0}}))))
      assert.equal(255, sess:run(tf.reduce_min(tf.constant({}, {dtype = tf.uint8, shape = {0}}))))
      local b = tf.constant({}, {dtype = tf.bool, shape = {0}})
      assert.is_false(sess:run(tf.reduce_any(b)))
      assert.is_true(sess:run(tf.reduce_all(b)))
    end)

    it("reduce an empty axis into a full output, and an empty kept axis into an empty output", function()
      local sess = tf.Session()
      local x = tf.placeholder(tf.float32, {2, 0, 3})
      local feed = {[x] = tf.Array.new(tf.float32, {2, 0, 3})}
      local s = sess:run(tf.reduce_sum(x, 1), feed)
      assert.same({2, 3}, s:shape())
      assert.same({{0, 0, 0}, {0, 0, 0}}, s:totable())
      assert.same({{1, 1, 1}, {1, 1, 1}}, sess:run(tf.reduce_prod(x, 1), feed):totable())
      assert.same({{{-inf, -inf, -inf}}, {{-inf, -inf, -inf}}}, sess:run(tf.reduce_max(x, 1, true), feed):totable())
      local e = sess:run(tf.reduce_sum(x, 0), feed)
      assert.same({0, 3}, e:shape())
      assert.same({2, 0}, sess:run(tf.reduce_max(x, 2), feed):shape())
      assert.same({1, 1, 1}, sess:run(tf.reduce_min(x, nil, true), feed):shape())
      assert.equal(0, sess:run(tf.reduce_sum(x), feed))
    end)
  end)

  describe("shapes", function()
    it("infers static shapes with unknown dimensions and computes them at run time", function()
      local x = tf.placeholder(tf.float32, {-1, 3})
      local s0, s1 = tf.reduce_sum(x, 0), tf.reduce_sum(x, 1)
      assert.same({3}, s0:get_shape():as_list())
      assert.same({-1}, s1:get_shape():as_list())
      assert.same({-1, 1}, tf.reduce_max(x, 1, true):get_shape():as_list())
      assert.same({}, tf.reduce_mean(x):get_shape():as_list())
      local sess = tf.Session()
      assert.same({6, 15}, sess:run(s1, {[x] = {{1, 2, 3}, {4, 5, 6}}}):totable())
      assert.same({6, 15, 24}, sess:run(s1, {[x] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}}):totable())
      assert.same({12, 15, 18}, sess:run(s0, {[x] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}}):totable())
    end)

    it("handles an unknown rank", function()
      local x = tf.placeholder(tf.float32)
      assert.same({}, tf.reduce_sum(x):get_shape():as_list())
      assert.is_nil(tf.reduce_sum(x, 1):get_shape().dims)
      assert.is_nil(tf.reduce_sum(x, nil, true):get_shape().dims)
      local sess = tf.Session()
      assert.same({6, 15}, sess:run(tf.reduce_sum(x, 1), {[x] = {{1, 2, 3}, {4, 5, 6}}}):totable())
      assert.same({{21}}, sess:run(tf.reduce_sum(x, nil, true), {[x] = {{1, 2, 3}, {4, 5, 6}}}):totable())
      assert.equal(6, sess:run(tf.reduce_sum(x), {[x] = {1, 2, 3}}))
    end)
  end)

  describe("accuracy", function()
    it("a float32 sum accumulates in double: 2e7 ones sum to 2e7", function()
      local n = 20000000
      local a = tf.Array.new(tf.float32, {n})
      local d = a:data()
      for i = 0, n - 1 do d[i] = 1 end
      local x = tf.placeholder(tf.float32, {n})
      local sess = tf.Session()
      assert.equal(n, sess:run(tf.reduce_sum(x), {[x] = a}))
      assert.equal(1, sess:run(tf.reduce_mean(x), {[x] = a}))
    end)

    it("a float32 sum of 0.1 a million times stays within float32 precision", function()
      local n = 1000000
      local a = tf.Array.new(tf.float32, {n})
      local d = a:data()
      for i = 0, n - 1 do d[i] = 0.1 end
      local x = tf.placeholder(tf.float32, {n})
      local got = tf.Session():run(tf.reduce_sum(x), {[x] = a})
      assert.is_true(math.abs(got - 100000.0015) < 0.01, "got " .. got)
    end)
  end)

  describe("the Lua API", function()
    it("accepts positional arguments or an options table", function()
      local x = tf.constant({{1, 2}, {3, 4}})
      local sess = tf.Session()
      assert.same({{3}, {7}}, sess:run(tf.reduce_sum(x, 1, true)):totable())
      assert.same({{3}, {7}}, sess:run(tf.reduce_sum(x, {axis = 1, keepdims = true})):totable())
      assert.same({{3}, {7}}, sess:run(tf.reduce_sum(x, 1, {keepdims = true})):totable())
      assert.same({4, 6}, sess:run(tf.reduce_sum(x, {axis = {0}})):totable())
      assert.equal(10, sess:run(tf.reduce_sum(x, {keepdims = false})))
      assert.same({{10}}, sess:run(tf.reduce_sum(x, nil, true)):totable())
    end)

    it("accepts the TF1 names reduction_indices and keep_dims", function()
      local x = tf.constant({{1, 2}, {3, 4}})
      local sess = tf.Session()
      assert.same({{4, 6}}, sess:run(tf.reduce_sum(x, {reduction_indices = 0, keep_dims = true})):totable())
      assert.same({1.5, 3.5}, sess:run(tf.reduce_mean(x, {reduction_indices = {1}})):totable())
      local ok, err = pcall(tf.reduce_sum, x, {axis = 0, reduction_indices = 1})
      assert.is_false(ok)
      assert.matches("Can not specify both 'axis' and 'reduction_indices'", err, 1, true)
      ok, err = pcall(tf.reduce_sum, x, {keepdims = true, keep_dims = true})
      assert.is_false(ok)
      assert.matches("Can not specify both 'keepdims' and 'keep_dims'", err, 1, true)
    end)

    it("names ops after TensorFlow's and takes a name", function()
      local x = tf.constant({1, 2})
      local b = tf.constant({true})
      local types = {reduce_sum = "Sum", reduce_mean = "Mean", reduce_max = "Max", reduce_min = "Min",
                     reduce_prod = "Prod"}
      for fname, ty in pairs(types) do
        assert.equal(ty, tf[fname](x).op.type)
        assert.equal(tf[fname], tf.math[fname])
      end
      assert.equal("Any", tf.reduce_any(b).op.type)
      assert.equal("All", tf.reduce_all(b).op.type)
      assert.equal("total", tf.reduce_sum(x, {name = "total"}).op.name)
      assert.equal("total2", tf.reduce_sum(x, 0, false, "total2").op.name)
      local t = tf.reduce_sum(x, {-1}, true)
      assert.same({-1}, t.op:get_attr("axis"))
      assert.is_true(t.op:get_attr("keepdims"))
    end)

    it("takes a single int axis attribute from C callers too", function()
      local G = require("moonflow.graph")
      local x = tf.constant({{1, 2}, {3, 4}})
      local t = G.op{"Sum", inputs = {x}, attrs = {axis = G.attr.int(-1), keepdims = true}}
      assert.same({2, 1}, t:get_shape():as_list())
      assert.same({{3}, {7}}, tf.Session():run(t):totable())
    end)

    it("works as a Tensor method and lifts Lua values", function()
      local x = tf.constant({{1, 2}, {3, 4}})
      local sess = tf.Session()
      assert.same({4, 6}, sess:run(x:reduce_sum(0)):totable())
      assert.equal(4, sess:run(x:reduce_max()))
      assert.equal(6, sess:run(tf.reduce_sum({1, 2, 3})))
      assert.equal(tf.float32, tf.reduce_sum({1, 2, 3}).dtype)
      assert.is_true(sess:run(tf.reduce_any({false, true})))
    end)
  end)

  describe("errors", function()
    local function fails(pattern, fn, ...)
      local ok, err = pcall(fn, ...)
      assert.is_false(ok)
      assert.matches(pattern, err, 1, true)
      return err
    end

    it("rejects axes out of range, naming the op and the rank", function()
      local x = tf.constant({{1, 2}, {3, 4}})
      local err = fails("axis 2 is out of range for a tensor of rank 2", tf.reduce_sum, x, 2)
      assert.matches("^Sum", err)
      fails("axis -3 is out of range for a tensor of rank 2", tf.reduce_max, x, {0, -3})
      fails("Mean: axis 0 is out of range for a tensor of rank 0", tf.reduce_mean, tf.constant(1), 0)
      -- The graph is unchanged and still usable.
      assert.equal(10, tf.Session():run(tf.reduce_sum(x)))
    end)

    it("rejects duplicate axes", function()
      local x = tf.constant({{1, 2}, {3, 4}})
      fails("Sum: axis -1 names dimension 1 a second time for a tensor of rank 2", tf.reduce_sum, x, {1, -1})
      fails("names dimension 0 a second time", tf.reduce_prod, x, {0, 0})
    end)

    it("rejects wrong dtypes", function()
      fails("Sum takes a numeric tensor, got bool", tf.reduce_sum, tf.constant({true, false}))
      fails("Max takes a numeric tensor, got bool", tf.reduce_max, tf.constant({true}))
      fails("Any takes a bool tensor, got float32", tf.reduce_any, tf.constant({1, 2}))
      fails("All takes a bool tensor, got int32", tf.reduce_all, tf.constant({1}, tf.int32))
    end)

    it("rejects malformed arguments", function()
      local x = tf.constant({1, 2})
      fails("tf.reduce_sum: axis must be an integer or a list of integers, got 0.5", tf.reduce_sum, x, 0.5)
      fails("tf.reduce_sum: axis must be an integer or a list of integers", tf.reduce_sum, x, {"a"})
      fails("tf.reduce_mean: unknown option 'axes'", tf.reduce_mean, x, {axes = 0})
      fails("tf.reduce_max: keepdims must be a boolean, got 1", tf.reduce_max, x, 0, 1)
      fails("tf.reduce_sum: too many arguments", tf.reduce_sum, x, 0, true, "n", nil, nil, 7)
      fails("'axis' is given both positionally and as an option", tf.reduce_sum, x, 0, {axis = 0})
    end)

    it("reports a bad axis of an unknown-rank input at run time and keeps the session usable", function()
      local x = tf.placeholder(tf.float32)
      local bad = tf.reduce_sum(x, 2)
      local good = tf.reduce_sum(x, 1)
      local sess = tf.Session()
      local err = fails("axis 2 is out of range for a tensor of rank 2", sess.run, sess, bad,
                        {[x] = {{1, 2}, {3, 4}}})
      assert.matches("Sum", err, 1, true)
      assert.same({3, 7}, sess:run(good, {[x] = {{1, 2}, {3, 4}}}):totable())
      assert.same({{6}}, sess:run(bad, {[x] = {{{1, 2, 3}}}}):totable())
    end)
  end)
end)
