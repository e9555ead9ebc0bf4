-- Fusion of elementwise chains (src/exec/fuse.c): a plan runs a chain of
-- elementwise ops as one step, with results bit for bit those of the ops
-- run one by one (tf.Session{elementwise_fusion = false}), and errors naming
-- the op and the line that built it exactly as the unfused run does.
local tf = require("moonflow")
local ffi = require("ffi")
local H = require("spec.helpers")

-- The bytes of a fetched value (an Array, or a Lua number or boolean).
local function bytes(v)
  if tf.Array.is(v) then return v.dtype.name .. ":" .. table.concat(v:shape(), ",") .. ":" ..
                                ffi.string(v:data(), v:size() * v.dtype.size) end
  return type(v) .. ":" .. (type(v) == "number" and string.format("%a", v) or tostring(v))
end

-- An Array of dtype and shape whose element i is fill(i).
local function array(dtype, shape, fill)
  local a = tf.Array.new(dtype, shape)
  local d = a:data()
  for i = 0, a:size() - 1 do d[i] = fill(i) end
  return a
end

-- The tensors a feeds table feeds.
local function fed(feeds)
  local list = {}
  for t in pairs(feeds or {}) do list[#list + 1] = t end
  return list
end

-- Runs fetches with feeds in a fused and in an unfused session of graph g;
-- asserts that every fetched value is the same bit for bit and returns the
-- fused results and the fused plan's stats (feed_list: the fed tensors).
local function both(g, fetches, feeds, opts)
  opts = opts or {}
  local fused = tf.Session({graph = g, intra_op_parallelism_threads = opts.threads})
  local plain = tf.Session({graph = g, elementwise_fusion = false})
  local a, b = fused:run(fetches, feeds), plain:run(fetches, feeds)
  local list_a, list_b = type(a) == "table" and a or {a}, type(b) == "table" and b or {b}
  assert.equal(#list_b, #list_a)
  for i = 1, #list_a do assert.equal(bytes(list_b[i]), bytes(list_a[i]), "fetch " .. i) end
  local stats = fused:plan_stats(fetches, fed(feeds))
  local plain_stats = plain:plan_stats(fetches, fed(feeds))
  assert.equal(0, plain_stats.num_fused_groups)
  assert.equal(stats.num_steps + stats.num_fused_ops - stats.num_fused_groups, plain_stats.num_steps)
  return a, stats
end

-- The error messages of a run in a fused and an unfused session; asserts they are the same.
local function both_fail(g, fetches, feeds)
  local fused = tf.Session({graph = g})
  local plain = tf.Session({graph = g, elementwise_fusion = false})
  local ea = H.error_of(function() fused:run(fetches, feeds) end)
  local eb = H.error_of(function() plain:run(fetches, feeds) end)
  assert.equal(eb, ea)
  return ea, fused:plan_stats(fetches, fed(feeds))
end

describe("elementwise fusion", function()
  setup(H.growth_off)
  teardown(H.growth_restore)

  it("runs y = x*2 + 1 over 10M float32 as one step, bit for bit the unfused values", function()
    local g = tf.Graph()
    local x, y = g:as_default(function()
      local x = tf.placeholder(tf.float32, {-1}, "x")
      return x, x * 2 + 1
    end)
    local n = 10000000
    local xv = array(tf.float32, {n}, function(i) return (i % 1000) * 0.37 - 100 end)
    local r, stats = both(g, y, {[x] = xv})
    assert.same({num_steps = 1, num_fused_groups = 1, num_fused_ops = 2}, stats)
    for _, i in ipairs({0, 1, 999, 5000001, n - 1}) do
      local xf = ffi.new("float[1]", xv:data()[i])[0]
      local want = ffi.new("float[1]", ffi.new("float[1]", xf * 2)[0] + 1)[0]
      assert.equal(want, r:get(i))
    end
    local plain = tf.Session({graph = g, elementwise_fusion = false})
    assert.same({num_steps = 2, num_fused_groups = 0, num_fused_ops = 0}, plain:plan_stats(y, {x}))
  end)

  it("fuses chains with broadcasting, split over threads, as the unfused ops compute them", function()
    local g = tf.Graph()
    local x, w, b, y, z = g:as_default(function()
      local x = tf.placeholder(tf.float32, {-1, 5}, "x")
      local w = tf.placeholder(tf.float32, {5}, "w")
      local b = tf.placeholder(tf.float32, {-1, 1}, "b")
      local y = tf.tanh(x * w + b) * 3 - tf.sigmoid(x)
      return x, w, b, y, tf.nn.relu(y / (b + 0.5))
    end)
    local rows = 40000  -- several tiles and threads' chunks
    local feeds = {[x] = array(tf.float32, {rows, 5}, function(i) return math.sin(i) * 4 end),
                   [w] = array(tf.float32, {5}, function(i) return i - 2.5 end),
                   [b] = array(tf.float32, {rows, 1}, function(i) return (i % 7) - 3 end)}
    local r, stats = both(g, {y, z}, feeds, {threads = 3})
    -- b + 0.5 has b's shape, not the group's: a step of its own.
    assert.same({num_steps = 2, num_fused_groups = 1, num_fused_ops = 8}, stats)
    assert.same({rows, 5}, r[2]:shape())
    -- Element (1, 2) by hand, in float32 as the kernels compute it.
    local f = function(v) return ffi.new("float[1]", v)[0] end
    local xv, wv, bv = feeds[x]:get(1, 2), feeds[w]:get(2), feeds[b]:get(1, 0)
    local t = f(f(math.tanh(f(f(xv * wv) + bv))) * 3)
    local s = f(1 / (1 + math.exp(-xv)))
    assert.near(f(t - s), r[1]:get(1, 2), 1e-6)
  end)

  it("repeats a broadcast column of 1, 4 and 8-byte elements along each row", function()
    local g = tf.Graph()
    local cols, fetches = {}, {}
    g:as_default(function()
      for _, dtype in ipairs({tf.float64, tf.int64, tf.int32, tf.uint8}) do
        local col, x = tf.placeholder(dtype, {-1, 1}), tf.placeholder(dtype, {-1, 7})
        cols[#cols + 1] = {col, x}
        fetches[#fetches + 1] = (x + col) * col - x
      end
      local on, m = tf.placeholder(tf.bool, {-1, 1}), tf.placeholder(tf.bool, {-1, 7})
      cols[#cols + 1] = {on, m}
      fetches[#fetches + 1] = tf.logical_xor(tf.logical_and(m, on), on)
    end)
    local rows, feeds = 3000, {}
    for _, pair in ipairs(cols) do
      local dtype = pair[1].dtype
      local of = dtype == tf.bool and function(k) return k % 3 == 0 end or function(k) return k % 5 + 1 end
      feeds[pair[1]] = array(dtype, {rows, 1}, of)
      feeds[pair[2]] = array(dtype, {rows, 7}, function(k) return of(k + 1) end)
    end
    local r, stats = both(g, fetches, feeds, {threads = 2})
    assert.equal(5, stats.num_fused_groups)
    -- Row 2, column 3: col = of(2) = 3, x = of(2 * 7 + 3 + 1) = 4.
    for k = 1, 4 do assert.equal((4 + 3) * 3 - 4, tonumber(r[k]:get(2, 3))) end
    assert.equal(false, r[5]:get(1, 3))  -- col false: (m and false) xor false
    assert.equal(false, r[5]:get(3, 2))  -- col true, m = of(24) true: true xor true
    assert.equal(true, r[5]:get(3, 0))   -- col true, m = of(22) false
  end)

  it("fuses casts, comparisons and mixed dtypes", function()
    local g = tf.Graph()
    local i, d, y, c, q = g:as_default(function()
      local i = tf.placeholder(tf.int32, {-1}, "i")
      local d = tf.placeholder(tf.float64, {-1}, "d")
      local y = tf.cast(i, tf.float32) * 0.5 + tf.cast(d * 3, tf.float32)
      local c = tf.logical_and(tf.less(y, 2), tf.greater(tf.cast(y, tf.float64), d))
      local q = tf.cast(tf.cast(y * 1000, tf.int64) * 3, tf.uint8)
      return i, d, y, c, q
    end)
    local n = 5000
    local r, stats = both(g, {y, c, q}, {[i] = array(tf.int32, {n}, function(k) return k - 2500 end),
                                         [d] = array(tf.float64, {n}, function(k) return math.cos(k) end)})
    assert.equal(1, stats.num_fused_groups)
    assert.equal(tf.bool, r[2].dtype)
    assert.equal(tf.uint8, r[3].dtype)
    assert.equal((math.floor(((0 - 2500) * 0.5 + 3 * 1) * 1000) * 3) % 256, r[3]:get(0))
  end)

  it("fuses integer chains that wrap, floor and take remainders as TensorFlow's", function()
    local g = tf.Graph()
    local a, b, r32, r64, t = g:as_default(function()
      local a = tf.placeholder(tf.int32, {-1}, "a")
      local b = tf.placeholder(tf.int32, {-1}, "b")
      local r32 = tf.floordiv(a * 2147483 + 7, b) % 13 - tf.abs(a)
      local r64 = tf.cast(a, tf.int64) * 3037000499 * 5
      return a, b, r32, r64, tf.truncatediv(-a, b)
    end)
    local n = 3000
    local divisors = function(k) return k % 11 - 5 + (k % 11 == 5 and 1 or 0) end  -- never 0
    local r, stats = both(g, {r32, r64, t}, {[a] = array(tf.int32, {n}, function(k) return k * 7919 - 10000000 end),
                                             [b] = array(tf.int32, {n}, divisors)})
    -- The three chains read a and b: one group, one pass over them.
    assert.same({num_steps = 1, num_fused_groups = 1, num_fused_ops = 11}, stats)
    -- a = -10000000 at 0: the int32 product wraps.
    local av, bv = -10000000, -5
    local prod = (av * 2147483 + 7) % 2^32
    if prod >= 2^31 then prod = prod - 2^32 end
    assert.equal((math.floor(prod / bv) % 13) - 10000000, r[1]:get(0))
  end)

  it("keeps the division-by-zero, NaN and infinity semantics", function()
    local g = tf.Graph()
    local x, y, outs = g:as_default(function()
      local x = tf.placeholder(tf.float32, {-1}, "x")
      local y = tf.placeholder(tf.float32, {-1}, "y")
      return x, y, {x / y * 2, tf.maximum(x * 1, y / x), tf.minimum(x - y, tf.sqrt(x)),
                    tf.nn.relu(x / y), tf.sign(x / y) + 0, tf.floordiv(x, y) * 1, tf.math.mod(x, y) + 0,
                    tf.equal(x / y, x / y), tf.pow(x, y) - 1, tf.math.log(x) * 1}
    end)
    local vals = {0, -0.0, 1, -1, 0 / 0, 1 / 0, -1 / 0, 2.5, -3}
    local xs, ys = {}, {}
    for _, p in ipairs(vals) do for _, q in ipairs(vals) do xs[#xs + 1], ys[#ys + 1] = p, q end end
    local n = #xs
    local r, stats = both(g, outs, {[x] = array(tf.float32, {n}, function(k) return xs[k + 1] end),
                                    [y] = array(tf.float32, {n}, function(k) return ys[k + 1] end)})
    -- 24 ops, in groups of at most 16 ops.
    assert.equal(2, stats.num_fused_groups)
    assert.is_true(stats.num_steps <= 3)
    assert.equal(1 / 0, r[1]:get(2 * #vals))    -- 1 / 0 * 2
    assert.is_true(r[1]:get(0) ~= r[1]:get(0))  -- 0 / 0 is NaN
    assert.is_false(r[8]:get(0))                -- NaN == NaN is false
  end)

  it("materialises fetched intermediates and values read outside, and fans out inside the group", function()
    local g = tf.Graph()
    local x, t, y, e, s = g:as_default(function()
      local x = tf.placeholder(tf.float64, {-1, 3}, "x")
      local t = x * 2
      local y = t * t + t
      local e = tf.exp(-t) - y
      return x, t, y, e, tf.reduce_sum(y, 1)
    end)
    local feeds = {[x] = array(tf.float64, {50, 3}, function(k) return k / 17 - 4 end)}
    local r, stats = both(g, {t, e, s}, feeds)
    -- t, y (read by the sum) and e are the group's outputs; the sum is a boundary.
    assert.same({num_steps = 2, num_fused_groups = 1, num_fused_ops = 6}, stats)
    local tv = feeds[x]:get(3, 1) * 2
    assert.equal(math.exp(-tv) - (tv * tv + tv), r[2]:get(3, 1))
    -- A value read by an op between the group's ops keeps them apart.
    local m, u = g:as_default(function()
      local m = x * 3
      local u = m + tf.reduce_max(m)
      return m, u
    end)
    r, stats = both(g, u, feeds)
    assert.same({num_steps = 3, num_fused_groups = 0, num_fused_ops = 0}, stats)
    assert.equal(feeds[x]:get(0, 0) * 3 + feeds[x]:get(49, 2) * 3, r:get(0, 0))
    r = both(g, {m, u}, feeds)
  end)

  it("fuses activations and their gradients, and leaves gradients as the unfused run has them", function()
    local g = tf.Graph()
    local x, outs = g:as_default(function()
      local x = tf.placeholder(tf.float32, {-1}, "x")
      local h = tf.nn.elu(x * 1.5) + tf.nn.leaky_relu(x, 0.1) * tf.nn.softplus(x) - tf.nn.relu6(x * 4)
      local loss = tf.reduce_sum(tf.tanh(h) * tf.nn.selu(x))
      return x, {h, tf.gradients(loss, x)[1]}
    end)
    local r, stats = both(g, outs, {[x] = array(tf.float32, {2000}, function(k) return (k - 1000) / 150 end)})
    assert.is_true(stats.num_fused_groups >= 2)
    assert.is_true(stats.num_fused_ops >= 10)
  end)

  it("gives the unfused bits on random graphs of elementwise ops, reductions between them, fetched anywhere", function()
    local seed = 12345
    local function rand(n)  -- 1..n, reproducible
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n + 1
    end
    local unary = {tf.tanh, tf.sigmoid, tf.negative, tf.square, tf.nn.relu, tf.abs,
                   function(v) return tf.cast(tf.cast(v, tf.float64) * 1.5, tf.float32) end}
    local binary = {tf.add, tf.subtract, tf.multiply, tf.maximum, tf.minimum, function(a, b) return a / (b * b + 1) end}
    local fused_some = 0
    for _ = 1, 25 do
      local g = tf.Graph()
      local x, y, fetches = g:as_default(function()
        local x = tf.placeholder(tf.float32, {-1, 6}, "x")
        local y = tf.placeholder(tf.float32, {6}, "y")
        local values = {x, y, x * 0.5}
        for _ = 1, 14 do
          local kind, a = rand(10), values[rand(#values)]
          local v
          if kind <= 4 then v = unary[rand(#unary)](a)
          elseif kind <= 9 then v = binary[rand(#binary)](a, values[rand(#values)])
          else v = a + tf.reduce_max(a) end  -- a reduction reading values between elementwise ops
          values[#values + 1] = v
        end
        local fetches = {values[#values]}
        for _ = 1, rand(3) do fetches[#fetches + 1] = values[rand(#values - 3) + 3] end
        return x, y, fetches
      end)
      local _, stats = both(g, fetches, {[x] = array(tf.float32, {300, 6}, function(k) return math.sin(k * 0.37) * 3 end),
                                         [y] = array(tf.float32, {6}, function(k) return k - 2.5 end)})
      fused_some = fused_some + stats.num_fused_groups
    end
    assert.is_true(fused_some >= 15)  -- 24 groups with this seed
  end)

  it("fuses bias_add and the activation after a matmul, which stays a step of its own", function()
    local g = tf.Graph()
    local x, b, y = g:as_default(function()
      local x = tf.placeholder(tf.float32, {-1, 4}, "x")
      local w = tf.constant({{1, -2, 0.5}, {0.25, 1, -1}, {2, 0, 1}, {-0.5, 0.5, 3}}, tf.float32)
      local b = tf.placeholder(tf.float32, {3}, "b")
      return x, b, tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w), b)) * 2
    end)
    local r, stats = both(g, y, {[x] = array(tf.float32, {700, 4}, function(k) return math.sin(k) end),
                                 [b] = {0.5, -0.25, 0}})
    assert.same({num_steps = 2, num_fused_groups = 1, num_fused_ops = 3}, stats)
    assert.same({700, 3}, r:shape())
  end)

  it("keeps ops of different device strings in different groups", function()
    local g = tf.Graph()
    local x, y = g:as_default(function()
      local x = tf.placeholder(tf.float32, {-1}, "x")
      local a = tf.device("/cpu:0", function() return tf.exp(x * 2) end)
      return x, tf.sqrt(a + 1) - 1
    end)
    local r, stats = both(g, y, {[x] = {0, 1, 2}})
    assert.same({num_steps = 2, num_fused_groups = 2, num_fused_ops = 5}, stats)
    assert.near(math.sqrt(math.exp(2) + 1) - 1, r:get(1), 1e-6)
  end)

  it("reports a broadcast that fails at run time inside a group as the unfused op, with its line", function()
    local g = tf.Graph()
    local x, y, z, line = g:as_default(function()
      local x = tf.placeholder(tf.float32, {-1}, "x")
      local y = tf.placeholder(tf.float32, {-1}, "y")
      local line = H.this_line() + 1
      local z = tf.add(x * 2, y, "sum") * 3
      return x, y, z, line
    end)
    local err = both_fail(g, z, {[x] = {1, 2, 3}, [y] = {1, 2, 3, 4}})
    assert.matches("Incompatible shapes", err, 1, true)
    assert.matches("[[node sum (defined at spec/fusion_spec.lua:" .. line .. ")]]", err, 1, true)
    -- The same plan runs fused once the shapes agree.
    local r, stats = both(g, z, {[x] = {1, 2, 3}, [y] = {1, 2, 4}})
    assert.equal(1, stats.num_fused_groups)
    assert.same({9, 18, 30}, r:totable())
  end)

  it("reports integer division by zero in a group as the unfused op, the first that fails", function()
    local g = tf.Graph()
    local a, b, z, line = g:as_default(function()
      local a = tf.placeholder(tf.int64, {-1}, "a")
      local b = tf.placeholder(tf.int64, {-1}, "b")
      local line = H.this_line() + 1
      local q = tf.floordiv(a + 1, b, "q")
      return a, b, tf.math.mod(q * 2, b, "r") + 5, line
    end)
    local bv = array(tf.int64, {100000}, function(k) return k % 9 + 1 end)
    bv:data()[77777] = 0
    local err, stats = both_fail(g, z, {[a] = array(tf.int64, {100000}, function(k) return k end), [b] = bv})
    assert.same({num_steps = 1, num_fused_groups = 1, num_fused_ops = 5}, stats)
    assert.matches("q: Integer division by zero [[node q (defined at spec/fusion_spec.lua:" .. line .. ")]]",
                   err, 1, true)
  end)

  it("runs shapes that broadcast inside the group at run time one op at a time, as unfused", function()
    local g = tf.Graph()
    local x, y, z = g:as_default(function()
      local x = tf.placeholder(tf.float32, {-1, -1}, "x")
      local y = tf.placeholder(tf.float32, {-1, -1}, "y")
      return x, y, (x * 2 + y) * 3
    end)
    local r = both(g, z, {[x] = {{1}, {2}}, [y] = {{1, 2, 3}}})
    assert.same({{9, 12, 15}, {15, 18, 21}}, r:totable())
    r = both(g, z, {[x] = {{1, 2}, {3, 4}}, [y] = {{1, 1}, {1, 1}}})
    assert.same({{9, 15}, {21, 27}}, r:totable())
  end)

  it("writes a callable's results into the caller's buffer and allocates nothing in the steady state", function()
    local g = tf.Graph()
    local x, y = g:as_default(function()
      local x = tf.placeholder(tf.float32, {1000}, "x")
      return x, tf.tanh(x * 0.01 + 0.5) * 2 - 1
    end)
    local sess = tf.Session({graph = g})
    local f = sess:make_callable(y, {x})
    local xv = array(tf.float32, {1000}, function(k) return k - 500 end)
    local out = tf.Array.new(tf.float32, {1000})
    assert.equal(out, f(xv, {out = out}))
    local before = sess:num_allocations()
    for _ = 1, 20 do f(xv, {out = out}) end
    assert.equal(before, sess:num_allocations())
    local plain = tf.Session({graph = g, elementwise_fusion = false})
    assert.equal(bytes(plain:run(y, {[x] = xv})), bytes(out))
  end)

  it("fuses the bodies of while loops", function()
    local g = tf.Graph()
    local x, r = g:as_default(function()
      local x = tf.placeholder(tf.float32, {-1}, "x")
      local _, v = tf.while_loop(function(i) return tf.less(i, 5) end,
                                 function(i, v) return i + 1, tf.tanh(v * 1.1 + 0.1) * 2 end, {tf.constant(0), x})
      return x, v
    end)
    local got = both(g, r, {[x] = array(tf.float32, {300}, function(k) return k / 100 - 1.5 end)})
    assert.equal(300, got:size())
  end)
end)
