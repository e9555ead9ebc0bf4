-- random_spec.lua — RandomUniform / RandomNormal / TruncatedNormal, Philox, seeds.
local tf = require("moonflow")
local G = require("moonflow.graph")
local ffi = require("ffi")
local bit = require("bit")

-- A reference Philox4x32-10 in Lua (checked against Random123's known answers
-- below), to pin the exact numbers the ops produce.
local u64 = ffi.typeof("uint64_t")
local TWO32 = 2 ^ 32
local function mulhilo(a, b)
  local p = u64(a) * b
  return tonumber(bit.rshift(p, 32)), tonumber(bit.band(p, 0xffffffffULL))
end
local function xor(a, b, c) return bit.bxor(a, b, c) % TWO32 end
local function philox(c0, c1, c2, c3, k0, k1)
  for r = 1, 10 do
    local hi0, lo0 = mulhilo(0xD2511F53, c0)
    local hi1, lo1 = mulhilo(0xCD9E8D57, c2)
    c0, c1, c2, c3 = xor(hi1, c1, k0), lo1, xor(hi0, c3, k1), lo0
    if r < 10 then k0, k1 = (k0 + 0x9E3779B9) % TWO32, (k1 + 0xBB67AE85) % TWO32 end
  end
  return {c0, c1, c2, c3}
end

-- The block an op with seeds (seed, seed2 < 2^32) uses for block b of run `run`.
local function block(seed, seed2, run, b) return philox(b, 0, run, 0, seed, seed2) end
local function u24(w) return math.floor(w / 256) * 2 ^ -24 end
local function u53(a, b) return (a * 2 ^ 21 + math.floor(b / 2 ^ 11)) * 2 ^ -53 end
-- Expected element i of each (op, dtype).
local expected = {
  RandomUniform = {
    float32 = function(s, s2, run, i) return u24(block(s, s2, run, math.floor(i / 4))[i % 4 + 1]) end,
    float64 = function(s, s2, run, i)
      local w = block(s, s2, run, math.floor(i / 2))
      local j = i % 2
      return u53(w[2 * j + 1], w[2 * j + 2])
    end,
  },
  RandomNormal = {
    float32 = function(s, s2, run, i)
      local w = block(s, s2, run, math.floor(i / 4))
      local j = i % 4 - i % 2
      local r = math.sqrt(-2 * math.log((math.floor(w[j + 1] / 256) + 1) * 2 ^ -24))
      local theta = 2 * math.pi * u24(w[j + 2])
      return i % 2 == 0 and r * math.cos(theta) or r * math.sin(theta)
    end,
    float64 = function(s, s2, run, i)
      local w = block(s, s2, run, math.floor(i / 2))
      local r = math.sqrt(-2 * math.log((w[1] * 2 ^ 21 + math.floor(w[2] / 2 ^ 11) + 1) * 2 ^ -53))
      local theta = 2 * math.pi * u53(w[3], w[4])
      return i % 2 == 0 and r * math.cos(theta) or r * math.sin(theta)
    end,
  },
}

-- A random op with explicit attrs, bypassing the Lua seed policy.
local function raw(op_type, shape, dtype, seed, seed2)
  return G.op{op_type, inputs = {tf.constant(shape, tf.int32)},
              attrs = {dtype = dtype, seed = G.attr.int(seed), seed2 = G.attr.int(seed2)}}
end

local function values(a)
  local out = {}
  for i = 0, a:size() - 1 do out[i + 1] = tonumber(a:data()[i]) end
  return out
end

local function moments(a)
  local n, sum, sq, lo, hi = a:size(), 0, 0, math.huge, -math.huge
  local d = a:data()
  for i = 0, n - 1 do
    local v = tonumber(d[i])
    sum, sq = sum + v, sq + v * v
    if v < lo then lo = v end
    if v > hi then hi = v end
  end
  local mean = sum / n
  return mean, math.sqrt(sq / n - mean * mean), lo, hi
end

local function run_twice(t)
  local sess = tf.Session()
  return values(sess:run(t)), values(sess:run(t))
end

describe("Philox4x32-10", function()
  it("the reference matches Random123's known-answer vectors", function()
    assert.same({0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}, philox(0, 0, 0, 0, 0, 0))
    local f = 0xffffffff
    assert.same({0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}, philox(f, f, f, f, f, f))
    assert.same({0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
                philox(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0))
  end)

  it("the ops reproduce the zero-key known answer directly", function()
    tf.reset_default_graph()
    local sess = tf.Session()
    local f = sess:run(raw("RandomUniform", {4}, tf.float32, 0, 0))
    local words = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}
    for i = 1, 4 do assert.equal(math.floor(words[i] / 256) * 2 ^ -24, f:data()[i - 1]) end
    local d = sess:run(raw("RandomUniform", {2}, tf.float64, 0, 0))
    assert.equal(u53(words[1], words[2]), d:data()[0])
    assert.equal(u53(words[3], words[4]), d:data()[1])
  end)

  for _, op_type in ipairs({"RandomUniform", "RandomNormal"}) do
    for _, dtype in ipairs({tf.float32, tf.float64}) do
      it(op_type .. " " .. dtype.name .. " follows (seed, seed2, run, index) exactly", function()
        tf.reset_default_graph()
        local want = expected[op_type][dtype.name]
        local tol = dtype == tf.float32 and 2e-6 or 1e-12
        local cases = {{7, 3, {11}}, {0xffffffff, 123456, {2, 5}}, {87654321, 0, {3}}}
        for _, c in ipairs(cases) do
          local seed, seed2, shape = c[1], c[2], c[3]
          local t = raw(op_type, shape, dtype, seed, seed2)
          local sess = tf.Session()
          for run = 0, 2 do
            local got = values(sess:run(t))
            for i = 0, #got - 1 do
              local w = want(seed, seed2, run, i)
              assert.is_true(math.abs(got[i + 1] - w) <= tol * math.max(1, math.abs(w)),
                             string.format("seed %d/%d run %d element %d: %g vs %g", seed, seed2, run, i, got[i + 1], w))
            end
          end
        end
      end)
    end
  end
end)

describe("random ops", function()
  before_each(function() tf.reset_default_graph() end)

  it("builds ops with static shapes, dtypes and TF names", function()
    local u = tf.random_uniform({2, 3}, {seed = 1})
    assert.equal("random_uniform:0", u.name)
    assert.equal("RandomUniform", u.op.type)
    assert.same({2, 3}, u:get_shape():as_list())
    assert.equal(tf.float32, u.dtype)
    local n = tf.random_normal({4}, {dtype = tf.float64, name = "noise"})
    assert.equal("noise:0", n.name)
    assert.equal("RandomNormal", n.op.type)
    assert.equal(tf.float64, n.dtype)
    assert.equal(tf.random.uniform, tf.random_uniform)
    assert.equal(tf.random.normal, tf.random_normal)
    assert.equal(tf.float64, tf.random.normal({1}, 0, 1, tf.float64).dtype)
  end)

  it("gives the same numbers for the same seeds in two sessions", function()
    local u = tf.random_uniform({5}, {seed = 42})
    local n = tf.random_normal({5}, {seed = 42})
    local s1, s2 = tf.Session(), tf.Session()
    local a, b = s1:run({u, n}), s2:run({u, n})
    assert.same(values(a[1]), values(b[1]))
    assert.same(values(a[2]), values(b[2]))
    -- a new graph built the same way gives the same numbers too
    tf.reset_default_graph()
    local u2 = tf.random_uniform({5}, {seed = 42})
    assert.same(values(a[1]), values(tf.Session():run(u2)))
  end)

  it("draws new numbers on every run, and a new session restarts the sequence", function()
    local u = tf.random_uniform({6}, {seed = 3})
    local first, second = run_twice(u)
    assert.are_not.same(first, second)
    local again1, again2 = run_twice(u)
    assert.same(first, again1)
    assert.same(second, again2)
    -- the counter belongs to the op: running it in another plan continues it
    local sess = tf.Session()
    sess:run(u)
    local via_other_plan = sess:run({u, tf.constant(1)})
    assert.same(second, values(via_other_plan[1]))
  end)

  it("op seeds without a graph seed pair with the default graph seed 87654321", function()
    local s, s2 = tf.get_seed(5)
    assert.equal(87654321, s)
    assert.equal(5, s2)
    local u = tf.random_uniform({3}, {seed = 5})
    assert.equal(87654321, u.op:get_attr("seed"))
    assert.equal(5, u.op:get_attr("seed2"))
    assert.same({nil, nil}, {tf.get_seed(nil)})
  end)

  it("a graph seed alone derives distinct, reproducible op seeds", function()
    tf.set_random_seed(1234)
    local a = tf.random_uniform({4})
    local b = tf.random_uniform({4})
    assert.equal(1234, a.op:get_attr("seed"))
    assert.are_not.equal(a.op:get_attr("seed2"), b.op:get_attr("seed2"))
    local sess = tf.Session()
    local va, vb = values(sess:run(a)), values(sess:run(b))
    assert.are_not.same(va, vb)
    tf.reset_default_graph()
    tf.set_random_seed(1234)
    local a2, b2 = tf.random_uniform({4}), tf.random_uniform({4})
    local sess2 = tf.Session()
    assert.same(va, values(sess2:run(a2)))
    assert.same(vb, values(sess2:run(b2)))
    -- another graph seed changes everything
    tf.reset_default_graph()
    tf.set_random_seed(4321)
    assert.are_not.same(va, values(tf.Session():run(tf.random_uniform({4}))))
  end)

  it("graph seed and op seed together fix the numbers; either changes them", function()
    tf.set_random_seed(7)
    local base = values(tf.Session():run(tf.random_normal({4}, {seed = 1})))
    tf.reset_default_graph()
    tf.set_random_seed(7)
    tf.constant(0)  -- other ops before it do not matter once the op seed is given
    assert.same(base, values(tf.Session():run(tf.random_normal({4}, {seed = 1}))))
    assert.are_not.same(base, values(tf.Session():run(tf.random_normal({4}, {seed = 2}))))
    tf.reset_default_graph()
    tf.set_random_seed(8)
    assert.are_not.same(base, values(tf.Session():run(tf.random_normal({4}, {seed = 1}))))
  end)

  it("seeds follow TensorFlow's truncation and avoid (0, 0)", function()
    tf.set_random_seed(0)
    local s, s2 = tf.get_seed(0)
    assert.equal(0, s)
    assert.equal(2 ^ 31 - 1, s2)
    tf.set_random_seed(2 ^ 31 + 5)
    assert.equal(6, (tf.get_seed(1)))
    tf.set_random_seed(nil)
    assert.same({nil, nil}, {tf.get_seed(nil)})
    assert.has_error(function() tf.set_random_seed(1.5) end)
  end)

  it("without any seed each op draws its own seeds and stays fixed within a session", function()
    local a = tf.random_uniform({8})
    local b = tf.random_uniform({8})
    assert.are_not.equal(a.op:get_attr("seed2"), b.op:get_attr("seed2"))
    local sess = tf.Session()
    local va = values(sess:run(a))
    assert.are_not.same(va, values(sess:run(b)))
    assert.same(va, values(tf.Session():run(a)))
  end)

  it("uniform: 100k draws in [0, 1) with mean 1/2 and std 1/sqrt(12)", function()
    for _, dtype in ipairs({tf.float32, tf.float64}) do
      local a = tf.Session():run(tf.random_uniform({100000}, {seed = 11, dtype = dtype}))
      assert.equal(dtype, a.dtype)
      local mean, std, lo, hi = moments(a)
      assert.is_true(math.abs(mean - 0.5) < 0.005, "mean " .. mean)
      assert.is_true(math.abs(std - 1 / math.sqrt(12)) < 0.005, "std " .. std)
      assert.is_true(lo >= 0 and lo < 1e-3, "min " .. lo)
      assert.is_true(hi < 1 and hi > 1 - 1e-3, "max " .. hi)
    end
  end)

  it("normal: 100k draws with mean 0 and std 1", function()
    for _, dtype in ipairs({tf.float32, tf.float64}) do
      local a = tf.Session():run(tf.random_normal({100, 1000}, {seed = 12, dtype = dtype}))
      assert.same({100, 1000}, a:shape())
      local mean, std, lo, hi = moments(a)
      assert.is_true(math.abs(mean) < 0.015, "mean " .. mean)
      assert.is_true(math.abs(std - 1) < 0.015, "std " .. std)
      assert.is_true(lo < -3.5 and hi > 3.5, "range " .. lo .. " " .. hi)
      assert.is_true(lo > -7 and hi < 7, "range " .. lo .. " " .. hi)
    end
  end)

  it("scales to [minval, maxval) and to mean/stddev", function()
    local u = tf.random_uniform({100000}, -2, 6, tf.float32, 5)
    local mean, std, lo, hi = moments(tf.Session():run(u))
    assert.is_true(math.abs(mean - 2) < 0.05, "mean " .. mean)
    assert.is_true(math.abs(std - 8 / math.sqrt(12)) < 0.05, "std " .. std)
    assert.is_true(lo >= -2 and hi < 6)
    local n = tf.random_normal({100000}, {mean = 10, stddev = 3, seed = 5, dtype = tf.float64})
    assert.equal(tf.float64, n.dtype)
    mean, std = moments(tf.Session():run(n))
    assert.is_true(math.abs(mean - 10) < 0.05, "mean " .. mean)
    assert.is_true(math.abs(std - 3) < 0.05, "std " .. std)
    -- the scaled uniform is the unit one stretched
    local unit = tf.random_uniform({5}, {seed = 9})
    local scaled = tf.random_uniform({5}, {minval = 1, maxval = 3, seed = 9})
    local sess = tf.Session()
    local a, b = values(sess:run(unit)), values(sess:run(scaled))
    for i = 1, 5 do assert.is_true(math.abs(b[i] - (1 + 2 * a[i])) < 1e-6) end
    -- tensor bounds
    local lo_t, hi_t = tf.constant(10), tf.constant(11)
    local t = values(tf.Session():run(tf.random_uniform({5}, {minval = lo_t, maxval = hi_t, seed = 9})))
    for i = 1, 5 do assert.is_true(math.abs(t[i] - (10 + a[i])) < 1e-5) end
  end)

  it("takes the shape from a tensor fed at run time", function()
    local shape = tf.placeholder(tf.int32, {2})
    local u = tf.random_uniform(shape, {seed = 1})
    assert.same({-1, -1}, u:get_shape():as_list())
    local sess = tf.Session()
    assert.same({3, 4}, sess:run(u, {[shape] = {3, 4}}):shape())
    assert.same({0, 7}, sess:run(u, {[shape] = {0, 7}}):shape())
    local s64 = tf.placeholder(tf.int64)
    local n = tf.random_normal(s64, {seed = 1, dtype = tf.float64})
    assert.is_nil(n:get_shape().dims)
    local a = sess:run(n, {[s64] = tf.array({2, 2, 2}, tf.int64)})
    assert.same({2, 2, 2}, a:shape())
    -- a fed shape gives the same numbers as the same constant shape
    local c = tf.random_uniform({3, 4}, {seed = 1})
    assert.same(values(tf.Session():run(c)), values(tf.Session():run(u, {[shape] = {3, 4}})))
  end)

  it("handles scalars, empty tensors and odd sizes", function()
    local sess = tf.Session()
    local s = sess:run(tf.random_uniform({}, {seed = 1}))
    assert.equal("number", type(s))
    assert.is_true(s >= 0 and s < 1)
    assert.same({0, 3}, sess:run(tf.random_normal({0, 3}, {seed = 1})):shape())
    -- odd sizes: the tail of a block equals the head of a longer draw
    local long = values(sess:run(raw("RandomNormal", {8}, tf.float32, 4, 4)))
    local short = values(sess:run(raw("RandomNormal", {7}, tf.float32, 4, 4)))
    for i = 1, 7 do assert.equal(long[i], short[i]) end
  end)

  it("a loop drawing large tensors recycles the dropped results' buffers", function()
    local n = 4 * 2 ^ 20
    local u = tf.random_uniform({n}, {seed = 1})
    local sess = tf.Session()
    -- once the caller's array is collected, the plan takes its buffer back
    for _ = 1, 8 do
      assert.equal(n, sess:run(u):size())
      collectgarbage()
    end
    assert.is_true(sess:num_allocations() <= 2, sess:num_allocations() .. " allocations")
    -- without explicit collections, session.lua collects dropped results once
    -- their bytes outgrow the Lua heap, so buffers stay few (a heuristic: the
    -- bound is loose on purpose)
    collectgarbage()
    local big = math.max(n, math.ceil(collectgarbage("count") * 1024 * 3 / 4))
    local v = tf.random_uniform({big}, {seed = 2})
    local before = sess:num_allocations()
    for _ = 1, 20 do assert.equal(big, sess:run(v):size()) end
    assert.is_true(sess:num_allocations() - before <= 10, sess:num_allocations() - before .. " allocations")
  end)

  it("rejects bad dtypes, shapes and seeds with clear errors", function()
    local ok, err = pcall(tf.random_uniform, {2}, {dtype = tf.uint8})
    assert.is_false(ok)
    assert.matches("random_uniform: dtype must be float32 or float64, got uint8", err)
    ok, err = pcall(tf.random_normal, {2, -1})
    assert.is_false(ok)
    assert.matches("random_normal: shape must be non%-negative, got %-1 for dimension 1", err)
    ok, err = pcall(tf.random_uniform, tf.constant({2.0}, tf.float32))
    assert.is_false(ok)
    assert.matches("shape must be an int32 or int64 tensor, got float32", err)
    ok, err = pcall(tf.random_uniform, tf.constant({{2}}, tf.int32))
    assert.is_false(ok)
    assert.matches("shape must be a vector", err)
    ok, err = pcall(tf.random_uniform, {2}, {seed = 0.5})
    assert.is_false(ok)
    assert.matches("seed must be an integer", err)
    -- a negative dimension fed at run time
    local shape = tf.placeholder(tf.int32, {1})
    local u = tf.random_uniform(shape, {seed = 1})
    local sess = tf.Session()
    ok, err = pcall(sess.run, sess, u, {[shape] = {-3}})
    assert.is_false(ok)
    assert.matches("non%-negative", err)
    -- the graph and the session still work
    assert.same({3}, sess:run(u, {[shape] = {3}}):shape())
  end)
end)

describe("tf.truncated_normal", function()
  before_each(function() tf.reset_default_graph() end)

  -- The reference: the normals of block b (as RandomNormal makes them) fill
  -- the group of elements b*PER .. b*PER + PER - 1 in order, skipping those of
  -- magnitude 2 or more; retry k of group b is block b + k * 2^40.
  local function normals(seed, seed2, run, b, retry, dtype)
    local w = philox(b, retry * 256, run, 0, seed, seed2)
    local out = {}
    if dtype == tf.float32 then
      for j = 1, 3, 2 do
        local r = math.sqrt(-2 * math.log((math.floor(w[j] / 256) + 1) * 2 ^ -24))
        local theta = 2 * math.pi * u24(w[j + 1])
        out[#out + 1], out[#out + 2] = r * math.cos(theta), r * math.sin(theta)
      end
    else
      local r = math.sqrt(-2 * math.log((w[1] * 2 ^ 21 + math.floor(w[2] / 2 ^ 11) + 1) * 2 ^ -53))
      local theta = 2 * math.pi * u53(w[3], w[4])
      out[1], out[2] = r * math.cos(theta), r * math.sin(theta)
    end
    return out
  end
  local function reference(seed, seed2, run, n, dtype)
    local per = dtype == tf.float32 and 4 or 2
    local out = {}
    for b = 0, math.ceil(n / per) - 1 do
      local want, got, retry = math.min(per, n - b * per), 0, 0
      while got < want do
        for _, z in ipairs(normals(seed, seed2, run, b, retry, dtype)) do
          if got < want and math.abs(z) < 2 then got = got + 1; out[#out + 1] = z end
        end
        retry = retry + 1
      end
    end
    return out
  end

  for _, dtype in ipairs({tf.float32, tf.float64}) do
    it(dtype.name .. " follows (seed, seed2, run, index) exactly, retries included", function()
      local tol = dtype == tf.float32 and 2e-6 or 1e-12
      local n = 2001  -- long enough for groups that need a second block
      local t = raw("TruncatedNormal", {n}, dtype, 5, 9)
      local sess = tf.Session()
      for run = 0, 1 do
        local got, want = values(sess:run(t)), reference(5, 9, run, n, dtype)
        for i = 1, n do
          assert.is_true(math.abs(got[i] - want[i]) <= tol * math.max(1, math.abs(want[i])),
                         string.format("run %d element %d: %g vs %g", run, i - 1, got[i], want[i]))
        end
      end
    end)
  end

  it("100k draws lie within two stddevs, with mean 0 and std 0.8796", function()
    local a = tf.Session():run(tf.truncated_normal({100000}, {seed = 11}))
    local mean, std, lo, hi = moments(a)
    assert.near(0, mean, 0.01)
    assert.near(0.87962566, std, 0.005)
    assert.is_true(lo > -2 and hi < 2)
  end)

  it("scales by stddev and shifts by mean; seeds reproduce it; also tf.random.truncated_normal", function()
    local t = tf.truncated_normal({2, 50000}, 10, 2, tf.float64, 3)
    assert.equal(tf.float64, t.dtype)
    assert.same({2, 50000}, t:get_shape():as_list())
    local a = tf.Session():run(t)
    local mean, std, lo, hi = moments(a)
    assert.near(10, mean, 0.02)
    assert.near(2 * 0.87962566, std, 0.01)
    assert.is_true(lo > 6 and hi < 14)
    local first = values(tf.Session():run(tf.random.truncated_normal({5}, {seed = 4})))
    assert.same(first, values(tf.Session():run(tf.random.truncated_normal({5}, {seed = 4}))))
    tf.reset_default_graph()
    assert.equal("truncated_normal:0", tf.truncated_normal({2}).name)
    assert.equal("TruncatedNormal", tf.truncated_normal({2}).op.type)
  end)
end)

local H_error = require("spec.helpers").error_of

describe("tf.random_shuffle", function()
  before_each(function() tf.reset_default_graph() end)

  -- The reference: Fisher-Yates from the last row down; step i swaps rows i
  -- and r mod (i + 1), r the 64-bit word i % 2 of block i / 2.
  local function reference(seed, seed2, run, n)
    local perm, w = {}, nil
    for i = 0, n - 1 do perm[i] = i end
    for i = n - 1, 1, -1 do
      if i == n - 1 or i % 2 == 1 then w = block(seed, seed2, run, math.floor(i / 2)) end
      local j = (i % 2) * 2
      local r = u64(w[j + 1]) * TWO32 + w[j + 2]
      local k = tonumber(r % (i + 1))
      perm[i], perm[k] = perm[k], perm[i]
    end
    local out = {}
    for i = 0, n - 1 do out[i + 1] = perm[i] end
    return out
  end
  local function shuffle(value, seed, seed2)
    return G.op{"RandomShuffle", inputs = {value}, attrs = {seed = G.attr.int(seed), seed2 = G.attr.int(seed2)}}
  end

  it("follows (seed, seed2, run) exactly", function()
    for _, c in ipairs({{7, 3, 10}, {0xffffffff, 123456, 37}, {87654321, 5, 2}}) do
      local t = shuffle(tf.range(c[3]), c[1], c[2])
      local sess = tf.Session()
      for run = 0, 2 do assert.same(reference(c[1], c[2], run, c[3]), sess:run(t):totable()) end
    end
  end)

  it("permutes the rows of any dtype and row size, keeping each row intact", function()
    for _, dtype in ipairs({tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8}) do
      for _, width in ipairs({1, 3}) do
        local rows = {}
        for r = 1, 40 do
          rows[r] = {}
          for c = 1, width do rows[r][c] = (r * 3 + c) % 256 end
        end
        local t = tf.random_shuffle(tf.constant(rows, dtype), 11)
        assert.equal(dtype, t.dtype)
        local got = tf.Session():run(t):totable()
        assert.are_not.same(rows, got)
        table.sort(got, function(a, b) return a[1] < b[1] end)
        local want = {}
        for r = 1, 40 do want[r] = rows[r] end
        table.sort(want, function(a, b) return a[1] < b[1] end)
        assert.same(want, got)
      end
    end
    local b = tf.Session():run(tf.random_shuffle(tf.constant({true, false, false, false}), 1)):totable()
    local trues = 0
    for _, v in ipairs(b) do trues = trues + (v and 1 or 0) end
    assert.equal(1, trues)
  end)

  it("differs across runs, reproduces with seeds in a new session, and is uniform", function()
    local t = tf.random_shuffle(tf.range(20), 5)
    local sess = tf.Session()
    local first, second = sess:run(t):totable(), sess:run(t):totable()
    assert.are_not.same(first, second)
    local again = tf.Session()
    assert.same(first, again:run(t):totable())
    assert.same(second, again:run(t):totable())
    assert.are_not.same(first, tf.Session():run(tf.random_shuffle(tf.range(20), 6)):totable())
    tf.reset_default_graph()
    tf.set_random_seed(3)
    local a = tf.random_shuffle(tf.range(20))
    local first_graph = tf.Session(a.graph):run(a):totable()
    tf.reset_default_graph()
    tf.set_random_seed(3)
    assert.same(first_graph, tf.Session():run(tf.random_shuffle(tf.range(20))):totable())
    -- where element 0 lands over 8000 runs: each of 4 places about 2000 times
    local s4 = tf.random_shuffle(tf.range(4), 9)
    local s = tf.Session()
    local counts = {0, 0, 0, 0}
    local step = s:make_callable(s4)
    for _ = 1, 8000 do
      local v = step():totable()
      for p = 1, 4 do if v[p] == 0 then counts[p] = counts[p] + 1 end end
    end
    for p = 1, 4 do assert.is_true(math.abs(counts[p] - 2000) < 200, "position " .. p .. ": " .. counts[p]) end
  end)

  it("passes scalars and empty tensors, keeps unknown dims, has no gradient", function()
    local sess = tf.Session()
    assert.equal(4, sess:run(tf.random_shuffle(tf.constant(4), 1)))
    assert.same({0, 3}, sess:run(tf.random_shuffle(tf.zeros({0, 3}), 1)):shape())
    local x = tf.placeholder(tf.float64, {-1, 2})
    local t = tf.random_shuffle(x, {seed = 2, name = "mix"})
    assert.equal("mix:0", t.name)
    assert.same({-1, 2}, t:get_shape():as_list())
    local got = sess:run(t, {[x] = {{1, 1}, {2, 2}, {3, 3}}}):totable()
    table.sort(got, function(a, b) return a[1] < b[1] end)
    assert.same({{1, 1}, {2, 2}, {3, 3}}, got)
    assert.is_nil(tf.gradients(t, x)[1])
    assert.equal(tf.random.shuffle, tf.random_shuffle)
    assert.matches("unknown option 'sed'", H_error(tf.random_shuffle, x, {sed = 1}))
  end)
end)

describe("tf.multinomial", function()
  before_each(function() tf.reset_default_graph() end)

  -- The reference: sample e of the op (row-major) draws the float64 uniform u
  -- of element e and takes the first class whose running sum of
  -- exp(logit - max) exceeds u times the total.
  local function reference(seed, seed2, run, logits, n)
    local out = {}
    for b, row in ipairs(logits) do
      local max = -math.huge
      for _, l in ipairs(row) do max = math.max(max, l) end
      local cdf, acc = {}, 0
      for c, l in ipairs(row) do acc = acc + math.exp(l - max); cdf[c] = acc end
      out[b] = {}
      for s = 0, n - 1 do
        local e = (b - 1) * n + s
        local w = block(seed, seed2, run, math.floor(e / 2))
        local j = (e % 2) * 2
        local target = u53(w[j + 1], w[j + 2]) * acc
        local c = 1
        while cdf[c] <= target do c = c + 1 end
        out[b][s + 1] = c - 1
      end
    end
    return out
  end
  local function multinomial(logits, n, seed, seed2)
    return G.op{"Multinomial", inputs = {logits, tf.constant(n, tf.int32)},
                attrs = {seed = G.attr.int(seed), seed2 = G.attr.int(seed2)}}
  end

  it("follows (seed, seed2, run, index) exactly", function()
    local logits = {{0, 1, 2, -1}, {3, 3, -100, 0.5}, {-2, 0, 0, 1}}
    local t = multinomial(tf.constant(logits, tf.float64), 7, 21, 4)
    assert.equal(tf.int64, t.dtype)
    assert.same({3, 7}, t:get_shape():as_list())
    local sess = tf.Session()
    for run = 0, 2 do assert.same(reference(21, 4, run, logits, 7), sess:run(t):totable()) end
  end)

  it("frequencies match the softmax probabilities; impossible classes never come", function()
    local p = {0.1, 0.2, 0.7}
    local logits = tf.constant({{math.log(p[1]), math.log(p[2]), math.log(p[3])}, {0, -1 / 0, 2}})
    local n = 20000
    local draws = tf.Session():run(tf.multinomial(logits, n, 17)):totable()
    local counts = {0, 0, 0}
    for _, c in ipairs(draws[1]) do counts[c + 1] = counts[c + 1] + 1 end
    for c = 1, 3 do assert.near(p[c], counts[c] / n, 0.015) end
    local second = {0, 0, 0}
    for _, c in ipairs(draws[2]) do second[c + 1] = second[c + 1] + 1 end
    assert.equal(0, second[2])
    assert.near(1 / (1 + math.exp(2)), second[1] / n, 0.015)
    -- float64 logits, shifted: the same distribution
    local d64 = tf.Session():run(tf.multinomial(tf.constant({{1000 + math.log(0.25), 1000 + math.log(0.75)}}, tf.float64),
                                                n, 3)):totable()[1]
    local ones = 0
    for _, c in ipairs(d64) do ones = ones + c end
    assert.near(0.75, ones / n, 0.015)
  end)

  it("seeds reproduce it, runs differ; int32 output; categorical; unknown sizes", function()
    local logits = tf.constant({{0, 0, 0, 0, 0}})
    local t = tf.multinomial(logits, 30, {seed = 8})
    local sess = tf.Session()
    local a, b = sess:run(t):totable(), sess:run(t):totable()
    assert.are_not.same(a, b)
    assert.same(a, tf.Session():run(t):totable())
    local i32 = tf.multinomial(logits, 4, 8, "draw", tf.int32)
    assert.equal("draw:0", i32.name)
    assert.equal(tf.int32, i32.dtype)
    local c = tf.random.categorical(logits, 4, tf.int32, 8)
    assert.equal(tf.int32, c.dtype)
    assert.same({1, 4}, c:get_shape():as_list())
    local l = tf.placeholder(tf.float32, {-1, 3})
    local k = tf.placeholder(tf.int32, {})
    local u = tf.multinomial(l, k, {seed = 1})
    assert.same({-1, -1}, u:get_shape():as_list())
    assert.same({2, 5}, sess:run(u, {[l] = {{0, 0, 0}, {1, 2, 3}}, [k] = 5}):shape())
    assert.same({2, 0}, sess:run(u, {[l] = {{0, 0, 0}, {1, 2, 3}}, [k] = 0}):shape())
    assert.is_nil(tf.gradients(tf.cast(u, tf.float32), l)[1])
  end)

  it("errors at build and run time; the session goes on", function()
    assert.matches("logits must be a matrix", H_error(tf.multinomial, tf.constant({1, 2}), 1))
    assert.matches("logits must be float32 or float64, got int32", H_error(tf.multinomial, tf.constant({{1}}, tf.int32), 1))
    assert.matches("num_samples must be non%-negative, got %-2", H_error(tf.multinomial, tf.constant({{1, 2}}), -2))
    assert.matches("logits has no classes", H_error(tf.multinomial, tf.zeros({2, 0}), 3))
    assert.matches("unknown option 'dtype'", H_error(tf.multinomial, tf.zeros({2, 2}), 3, {dtype = tf.int32}))
    local l = tf.placeholder(tf.float32, {-1, 2})
    local t = tf.multinomial(l, 3, 1)
    local sess = tf.Session()
    local ok, err = pcall(sess.run, sess, t, {[l] = {{0, 0}, {-1 / 0, -1 / 0}}})
    assert.is_false(ok)
    assert.matches("row 1 of logits has only %-inf", err)
    ok, err = pcall(sess.run, sess, t, {[l] = {{0 / 0, 0}}})
    assert.is_false(ok)
    assert.matches("row 0 of logits has a nan", err)
    assert.same({{1, 1, 1}}, sess:run(t, {[l] = {{-1 / 0, 0}}}):totable())
  end)
end)

describe("initializers and threads", function()
  -- A child process builds variables with each random initializer, runs the
  -- initializer and prints, per variable, its element count, sum, sum of
  -- squares and a position-weighted sum (to 17 digits), then its first values.
  local child = [[
local tf = require("moonflow")
tf.set_random_seed(42)
local vars = {
  tf.get_variable("glorot_u", {512, 256}, tf.float32, tf.glorot_uniform_initializer()),
  tf.get_variable("glorot_n", {300, 200}, tf.float64, tf.glorot_normal_initializer()),
  tf.get_variable("trunc", {1000, 257}, tf.float32, tf.truncated_normal_initializer(0, 0.5)),
  tf.get_variable("normal", {4096, 33}, tf.float64, tf.random_normal_initializer(1, 2)),
  tf.get_variable("uniform", {70001}, tf.float32, tf.random_uniform_initializer(-3, 3)),
  tf.get_variable("scaling", {64, 64, 3, 3}, tf.float32,
                  tf.variance_scaling_initializer(2, "fan_in", "truncated_normal")),
}
local h = tf.layers.dense(tf.placeholder(tf.float32, {8, 640}), 384, {name = "dense"})
assert(h)
local sess = tf.Session()
sess:run(tf.global_variables_initializer())
for _, v in ipairs(tf.global_variables()) do
  local a = sess:run(v)
  local d = a:data()
  local n, sum, sq, weighted = a:size(), 0, 0, 0
  for i = 0, n - 1 do
    local x = tonumber(d[i])
    sum, sq, weighted = sum + x, sq + x * x, weighted + x * (i % 97 + 1)
  end
  io.write(string.format("%s %d %.17g %.17g %.17g %.17g %.17g\n", v.op.name, n, sum, sq, weighted,
                         tonumber(d[0]), tonumber(d[n - 1])))
end
]]

  local function run_with_threads(threads)
    local lib = require("moonflow.core").library_path
    if lib:sub(1, 1) ~= "/" then lib = (os.getenv("PWD") or ".") .. "/" .. lib end
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(child)
    f:close()
    local p = assert(io.popen(string.format(
      "OPENBLAS_NUM_THREADS=%d OMP_NUM_THREADS=%d LUA_PATH='lua/?.lua;lua/?/init.lua;;' MOONFLOW_LIB='%s' luajit '%s' 2>&1",
      threads, threads, lib, path)))
    local out = p:read("*a")
    p:close()
    os.remove(path)
    return out
  end

  it("give identical values with OPENBLAS_NUM_THREADS=1 and 4", function()
    local one, four = run_with_threads(1), run_with_threads(4)
    local rows = {}
    for line in one:gmatch("[^\n]+") do
      local name, n, sum, sq = line:match("^(%S+) (%d+) (%S+) (%S+)")
      assert(name, "unexpected child output: " .. one)
      rows[name] = {n = tonumber(n), mean = tonumber(sum) / tonumber(n), ms = tonumber(sq) / tonumber(n)}
    end
    local _, lines = one:gsub("\n", "")
    assert.equal(8, lines)
    assert.equal(one, four)
    -- The values are the initializers' own, not zeros: moments near the distributions'.
    assert.equal(512 * 256, rows.glorot_u.n)
    assert.near(0, rows.glorot_u.mean, 0.002)
    assert.near(2 / (512 + 256), rows.glorot_u.ms, 0.05 * 2 / (512 + 256))        -- limit^2 / 3
    assert.near(2 / (300 + 200), rows.glorot_n.ms, 0.1 * 2 / (300 + 200))
    assert.near(1, rows.normal.mean, 0.05)
    assert.near(1 + 4, rows.normal.ms, 0.15)
    assert.near(3, rows.uniform.ms, 0.05)                                          -- 3^2 / 3
    assert.near(0.25 * 0.7737, rows.trunc.ms, 0.01)    -- a normal cut at 2 sd keeps 77.4% of its variance
    assert.near(2 / (64 * 64 * 3), rows.scaling.ms, 0.1 * 2 / (64 * 64 * 3))
    assert.equal(640 * 384, rows["dense/kernel"].n)
    assert.equal(0, rows["dense/bias"].ms)
  end)
end)

describe("tf.random_uniform with an integer dtype (RandomUniformInt)", function()
  before_each(function() tf.reset_default_graph() end)

  -- Element i of run `run`: minval + r mod (maxval - minval), r the 64-bit word
  -- i % 2 of block i / 2 (rejection never triggers for these small ranges).
  local function want_int(seed, seed2, run, i, lo, hi)
    local w = block(seed, seed2, run, math.floor(i / 2))
    local j = i % 2
    local r = u64(w[2 * j + 1]) * 2 ^ 32 + w[2 * j + 2]
    return lo + tonumber(r % u64(hi - lo))
  end

  it("draws the exact Philox integers in [minval, maxval), int32 and int64", function()
    for _, dtype in ipairs({tf.int32, tf.int64}) do
      local t = tf.random_uniform({3, 3}, -4, 7, dtype, 9)
      assert.equal(dtype, t.dtype)
      assert.same({3, 3}, t:get_shape():as_list())
      local seed, seed2 = t.op:get_attr("seed"), t.op:get_attr("seed2")
      local sess = tf.Session()
      for run = 0, 1 do
        local got = sess:run(t):totable()
        for i = 0, 8 do
          local v = tonumber(got[math.floor(i / 3) + 1][i % 3 + 1])
          assert.equal(want_int(seed, seed2, run, i, -4, 7), v)
          assert.is_true(v >= -4 and v < 7)
        end
      end
    end
  end)

  it("is reproducible with seeds, new each run, and starts again in a new session", function()
    tf.set_random_seed(42)
    local a = tf.random_uniform({50}, {minval = 0, maxval = 1000, dtype = tf.int32, seed = 3})
    local g2 = tf.Graph()
    local b = g2:as_default(function()
      tf.set_random_seed(42)
      return tf.random_uniform({50}, {minval = 0, maxval = 1000, dtype = tf.int32, seed = 3})
    end)
    local s1, s2 = tf.Session(), tf.Session(g2)
    local a1, a2 = s1:run(a):totable(), s1:run(a):totable()
    assert.same(a1, s2:run(b):totable())
    assert.are_not.same(a1, a2)
    assert.same(a1, tf.Session():run(a):totable())
    local c = tf.random_uniform({50}, {maxval = 1000, dtype = tf.int32, seed = 4})
    assert.are_not.same(a1, s1:run(c):totable())
  end)

  it("is uniform: 40000 draws of [0, 10) have mean 4.5 and even counts", function()
    local t = tf.random_uniform({40000}, 0, 10, tf.int32, 1)
    local v = tf.Session():run(t):totable()
    local sum, counts = 0, {}
    for _, x in ipairs(v) do
      sum = sum + x
      counts[x] = (counts[x] or 0) + 1
    end
    -- the mean's standard deviation is sqrt(99/12)/200 = 0.0144; a count's sqrt(40000 * 0.09) = 60
    assert.near(4.5, sum / 40000, 0.06)
    for k = 0, 9 do assert.near(4000, counts[k], 300) end
    -- wide int64 bounds: every draw inside, the mean near the middle
    local w = tf.Session():run(tf.random_uniform({40000}, -2 ^ 50, 2 ^ 50, tf.int64, 2)):totable()
    local wsum = 0
    for _, x in ipairs(w) do
      x = tonumber(x)
      assert.is_true(x >= -2 ^ 50 and x < 2 ^ 50)
      wsum = wsum + x
    end
    assert.near(0, wsum / 40000 / 2 ^ 50, 0.02)
  end)

  it("takes tensor bounds, checked when the op runs", function()
    local lo = tf.placeholder(tf.int64, {}, "lo")
    local t = tf.random_uniform({4}, {minval = lo, maxval = 3, dtype = tf.int64, seed = 1})
    local sess = tf.Session()
    for _, x in ipairs(sess:run(t, {[lo] = 1}):totable()) do
      assert.is_true(tonumber(x) == 1 or tonumber(x) == 2)
    end
    local ok, err = pcall(sess.run, sess, t, {[lo] = 3})
    assert.is_false(ok)
    assert.matches("need minval < maxval, got minval 3, maxval 3", tostring(err), 1, true)
  end)

  it("refuses missing or invalid bounds, and has no gradient", function()
    local function err_of(...)
      local ok, err = pcall(tf.random_uniform, ...)
      assert.is_false(ok)
      return tostring(err)
    end
    assert.matches("maxval must be given for integer dtype int32", err_of({2}, 0, nil, tf.int32), 1, true)
    assert.matches("maxval must be given for integer dtype int64", err_of({2}, {dtype = tf.int64}), 1, true)
    assert.matches("need minval < maxval, got minval 5, maxval 5", err_of({2}, 5, 5, tf.int32), 1, true)
    assert.matches("need minval < maxval, got minval 5, maxval 1", err_of({2}, 5, 1, tf.int64), 1, true)
    assert.matches("maxval must be an integer or an integer scalar tensor for dtype int32, got 2.5",
                   err_of({2}, 0, 2.5, tf.int32), 1, true)
    assert.matches("minval must be a scalar",
                   err_of({2}, {minval = tf.constant({1, 2}, tf.int32), maxval = 5, dtype = tf.int32}), 1, true)
    local p = tf.placeholder(tf.int32, {}, "p")
    local t = tf.random_uniform({2}, p, 9, tf.int32)
    assert.is_nil(tf.gradients(tf.cast(t, tf.float32), p)[1])
    assert.equal(tf.float32, tf.random_uniform({2}, 0, 1).dtype)
  end)
end)
