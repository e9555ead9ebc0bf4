-- A session's memory: results the caller drops come back for later runs, and
-- the statistics say what is in use, kept and taken from the system.
local tf = require("moonflow")
local H = require("spec.helpers")

describe("session memory", function()
  it("gives the buffers of dropped results to later runs", function()
    local n = 4000000
    local x = tf.placeholder(tf.float32, {n})
    local y = x * 2 + 1
    local sess = tf.Session()
    local f = sess:make_callable(y, {x})
    local feed = tf.Array.from_pointer(require("ffi").new("float[?]", n), {n}, tf.float32)
    -- A run collects dropped results once those handed out since the last
    -- collection outgrow 32 MB and twice the Lua heap: warm up for three such cycles.
    collectgarbage()
    local cycle = math.max(32 * 2 ^ 20, 2 * collectgarbage("count") * 1024)
    local warm_runs = 3 * (math.ceil(cycle / (4 * n)) + 2)
    local out
    for _ = 1, warm_runs do out = f(feed) end
    local warm = sess:num_allocations()
    for _ = 1, 2 * warm_runs do out = f(feed) end
    assert.equal(warm, sess:num_allocations())
    assert.is_true(warm < warm_runs, "allocations: " .. warm .. " in " .. warm_runs .. " runs")
    assert.equal(1, out:get(0))
    local m = sess:memory_stats()
    assert.is_true(m.bytes_in_use >= 4 * n, "in use: " .. m.bytes_in_use)
    assert.is_true(m.peak_bytes_in_use >= m.bytes_in_use)
    assert.is_true(m.bytes_kept <= m.peak_bytes_in_use)
    assert.equal(warm, m.num_allocations)
    sess:close()
    assert.equal(0, sess:memory_stats().bytes_kept)
  end)
end)

describe("fetching into the caller's arrays", function()
  local function mlp()
    local x = tf.placeholder(tf.float32, {32, 8}, "x")
    local labels = tf.placeholder(tf.int32, {32}, "labels")
    local w1 = tf.Variable(tf.random_normal({8, 16}, 0, 0.3, tf.float32, 1))
    local w2 = tf.Variable(tf.random_normal({16, 4}, 0, 0.3, tf.float32, 2))
    local logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)
    local loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits({labels = labels, logits = logits}))
    local train = tf.train.GradientDescentOptimizer(0.1):minimize(loss)
    return x, labels, loss, train
  end

  it("writes the results there and returns them", function()
    local x = tf.placeholder(tf.float32, {2, 3})
    local y = x * 2 + 1
    local sess = tf.Session()
    local f = sess:make_callable(y, {x})
    local out = tf.array({{0, 0, 0}, {0, 0, 0}}, tf.float32)
    local xv = tf.array({{1, 2, 3}, {4, 5, 6}}, tf.float32)
    assert.equal(out, f(xv, {out = out}))
    assert.same({{3, 5, 7}, {9, 11, 13}}, out:totable())
    local g = sess:make_callable({y, tf.reduce_sum(y)}, {x})
    local total = tf.array(0, tf.float32)
    local r = g(xv, {out = {out, total}})
    assert.equal(out, r[1])
    assert.equal(48, total:get())
    -- Into the fed array itself: the result is computed, then copied there.
    f(xv, {out = xv})
    assert.same({{3, 5, 7}, {9, 11, 13}}, xv:totable())
  end)

  it("rejects arrays of another shape or dtype, and other extra arguments", function()
    local x = tf.placeholder(tf.float32, {2, 3})
    local sess = tf.Session()
    local f = sess:make_callable(x + 1, {x})
    local xv = tf.array({{1, 2, 3}, {4, 5, 6}}, tf.float32)
    local line = debug.getinfo(1, "l").currentline
    local err = select(2, pcall(f, xv, {out = tf.array({1, 2}, tf.float32)}))
    assert.truthy(err:find("^Session callable: the buffer given for Add[_%d]*:0 is a float32 %(2,%) value, but " ..
                           "the result is a float32 %(2, 3%) value"), err)
    assert.truthy(err:find("memory_spec.lua:" .. line + 1 .. ")", 1, true), err)
    err = select(2, pcall(f, xv, {out = tf.array({{1, 2, 3}, {4, 5, 6}}, tf.int32)}))
    assert.truthy(err:find("is a int32 (2, 3) value, but the result is a float32 (2, 3) value", 1, true), err)
    err = select(2, pcall(f, xv, {out = {5}}))
    assert.truthy(err:find("Session callable: out[1] is not an Array", 1, true), err)
    err = select(2, pcall(f, xv, 7))
    assert.truthy(err:find("takes 1 feed values and optionally {out = arrays}", 1, true), err)
    -- The session still works.
    assert.same({{2, 3, 4}, {5, 6, 7}}, f(xv):totable())
  end)

  it("runs an 8-64-64-4 policy net per frame into caller buffers with no allocation and no Lua garbage", function()
    local x = tf.placeholder(tf.float32, {1, 8})
    local h = tf.layers.dense(x, 64, {activation = tf.nn.relu})
    h = tf.layers.dense(h, 64, {activation = tf.nn.relu})
    local policy = tf.layers.dense(h, 4, {activation = tf.tanh})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local f = sess:make_callable(policy, {x})
    local observation = tf.array({{0, 0, 0, 0, 0, 0, 0, 0}}, tf.float32)
    local action = tf.array({{0, 0, 0, 0}}, tf.float32)
    local options, obs = {out = action}, observation:data()
    local function frames(n)
      for i = 1, n do
        for k = 0, 7 do obs[k] = math.sin(0.01 * i + k) end
        f(observation, options)
      end
    end
    frames(5000)  -- warm-up: plans, buffers, and LuaJIT's traces of this very loop
    local allocations = sess:num_allocations()
    -- A trace LuaJIT compiles late (a side exit taken for the first time)
    -- counts a few hundred bytes of its own into a window; garbage made per
    -- frame would count at least 10,000. So: the least of a few windows.
    local least = math.huge
    for _ = 1, 5 do
      collectgarbage()
      collectgarbage("stop")
      local before = collectgarbage("count")
      frames(10000)
      least = math.min(least, (collectgarbage("count") - before) * 1024)
      collectgarbage("restart")
      if least == 0 then break end
    end
    assert.equal(allocations, sess:num_allocations())
    assert.equal(0, least)
    -- And the frames computed what a plain run computes.
    local want = sess:run(policy, {[x] = observation})
    H.assert_near_all(H.flat(want), H.flat(action), 1e-6)
  end)

  it("makes a steady-state run allocate nothing: a 1-op callable and a training step", function()
    local x = tf.placeholder(tf.float32, {1000})
    local sess = tf.Session()
    local f = sess:make_callable(x * 3, {x})
    local xv = tf.Array.from_pointer(require("ffi").new("float[1000]"), {1000}, tf.float32)
    local out = tf.Array.from_pointer(require("ffi").new("float[1000]"), {1000}, tf.float32)
    for _ = 1, 3 do f(xv, {out = out}) end
    local warm = sess:num_allocations()
    for _ = 1, 200 do f(xv, {out = out}) end
    assert.equal(warm, sess:num_allocations())

    local xs, labels, loss, train = mlp()
    local tsess = tf.Session()
    tsess:run(tf.global_variables_initializer())
    local step = tsess:make_callable({loss, train}, {xs, labels})
    local xb = tf.Array.from_pointer(require("ffi").new("float[256]"), {32, 8}, tf.float32)
    for i = 0, 255 do xb:data()[i] = math.sin(i) end
    local lb = tf.Array.from_pointer(require("ffi").new("int32_t[32]"), {32}, tf.int32)
    for i = 0, 31 do lb:data()[i] = i % 4 end
    local l = tf.array(0, tf.float32)
    local first
    for i = 1, 5 do
      step(xb, lb, {out = {l}})
      first = first or l:get()
    end
    warm = tsess:num_allocations()
    for _ = 1, 50 do step(xb, lb, {out = {l}}) end
    assert.equal(warm, tsess:num_allocations())
    assert.is_true(l:get() < first, "loss " .. l:get() .. " after, " .. first .. " before")
  end)
end)

describe("a plan's arena", function()
  local ffi = require("ffi")
  local function ones(shape)
    local n = 1
    for _, d in ipairs(shape) do n = n * d end
    local a = tf.Array.from_pointer(ffi.new("float[?]", n), shape, tf.float32)
    for i = 0, n - 1 do a:data()[i] = 1 end
    return a
  end

  it("puts values that are never alive at once in the same bytes", function()
    -- Eight 1 MiB matrices, each read only by the next matmul: two live at a
    -- time, so the arena holds two of them, not eight.
    local n = 512
    local x = tf.placeholder(tf.float32, {n, n})
    local w = tf.placeholder(tf.float32, {n, n})
    local h = x
    for _ = 1, 8 do h = tf.matmul(h, w) * 0.5 end
    local y = tf.reduce_sum(h)
    local sess = tf.Session()
    local f = sess:make_callable(y, {x, w})
    local xv, wv = ones({n, n}), tf.Array.from_pointer(ffi.new("float[?]", n * n), {n, n}, tf.float32)
    for i = 0, n - 1 do wv:data()[i * n + i] = 1 end  -- the identity: h stays x * 0.5^k
    assert.equal(n * n * 0.5 ^ 8, f(xv, wv))
    local matrix = 4 * n * n
    local m = sess:memory_stats()
    assert.is_true(m.peak_bytes_in_use <= 2 * matrix + 4096, "peak " .. m.peak_bytes_in_use)
    local warm = sess:num_allocations()
    for _ = 1, 5 do assert.equal(n * n * 0.5 ^ 8, f(xv, wv)) end
    assert.equal(warm, sess:num_allocations())
  end)

  it("writes an elementwise op's output over the input that dies there", function()
    local n = 262144
    local x = tf.placeholder(tf.float32, {n})
    local y = tf.reduce_sum(tf.tanh(tf.exp(x * 2 + 1) - 3) * 4)
    local sess = tf.Session()
    local f = sess:make_callable(y, {x})
    local v = f(ones({n}))
    assert.near(n * 4 * math.tanh(math.exp(3) - 3), v, n * 1e-5)
    -- x * 2, + 1, exp, - 3, tanh and * 4 all share one buffer.
    assert.is_true(sess:memory_stats().peak_bytes_in_use <= 4 * n + 4096, "peak " .. sess:memory_stats().peak_bytes_in_use)
  end)

  it("keeps values that an op holds on to past their planned life", function()
    -- The TensorArray keeps each written value, the Identity and the Reshape
    -- hand theirs to the caller: none of them may be overwritten, in this run
    -- or the next ones, and results held from earlier runs stay as they were.
    local x = tf.placeholder(tf.float32, {4})
    local ta = tf.TensorArray(tf.float32, 3)
    ta = ta:write(0, x * 2):write(1, x * 3):write(2, x * 4)
    local stacked = ta:stack() + 0
    local kept = tf.identity(x + 1)
    local viewed = tf.reshape(x * 5, {2, 2})
    local sess = tf.Session()
    local f = sess:make_callable({stacked, kept, viewed}, {x})
    local runs = {}
    for i = 1, 6 do runs[i] = f(tf.array({i, i, i, i}, tf.float32)) end
    for i = 1, 6 do
      assert.same({{2 * i, 2 * i, 2 * i, 2 * i}, {3 * i, 3 * i, 3 * i, 3 * i}, {4 * i, 4 * i, 4 * i, 4 * i}},
                  runs[i][1]:totable())
      assert.same({i + 1, i + 1, i + 1, i + 1}, runs[i][2]:totable())
      assert.same({{5 * i, 5 * i}, {5 * i, 5 * i}}, runs[i][3]:totable())
    end
  end)
end)

describe("number feeds", function()
  -- A number fed to a run goes through a value kept for the next runs, unless
  -- the run kept a reference to it: then a value still in use is never overwritten.
  it("never overwrite a value that a result or a variable still holds", function()
    local x = tf.placeholder(tf.float32, {}, "x")
    local v = tf.Variable(0, {name = "v"})
    local sess = tf.Session()
    sess:run(tf.global_variables_initializer())
    local view = sess:make_callable(tf.reshape(x, {1}), {x})  -- a result that may share the fed bytes
    local a, b = view(1), view(2)
    assert.same({{1}, {2}}, {a:totable(), b:totable()})
    local same = sess:make_callable(x, {x})
    assert.same({1.5, 2.5, -3}, {same(1.5), same(2.5), same(-3)})
    local set = sess:make_callable(tf.assign(v, x), {x})
    set(5)
    assert.equal(5, sess:run(v))
    sess:run(tf.assign(v, x), {[x] = 7})
    assert.equal(12, sess:run(x + 1, {[x] = 11}))
    assert.equal(7, sess:run(v))
    assert.equal(4, sess:run(x + 1, {[x] = 3}))
  end)
end)
