-- Large kernels split over the session's threads (src/kernels/parallel.h)
-- give the same values, bit for bit, as one thread, and report failing
-- elements anywhere. Every threaded kernel and gradient runs here on inputs
-- large enough to be split into several chunks; the values of the new splits
-- (a fold cut into blocks, col2im in stripes) are checked on their own.
local tf = require("moonflow")
local ffi = require("ffi")

ffi.cdef("int memcmp(const void *a, const void *b, size_t n);")

local ELEMENT_BYTES = {float32 = 4, float64 = 8, int32 = 4, int64 = 8, uint8 = 1, bool = 1}

-- Whether two fetched values have the same bits.
local function same_bits(a, b)
  if type(a) ~= "table" and type(a) ~= "cdata" then return a == b or (a ~= a and b ~= b) end
  if a:size() ~= b:size() or a.dtype ~= b.dtype then return false end
  local bytes = ELEMENT_BYTES[a.dtype.name] or ELEMENT_BYTES[tostring(a.dtype)]
  assert(bytes, "element size of " .. tostring(a.dtype))
  return ffi.C.memcmp(a:data(), b:data(), a:size() * bytes) == 0
end

-- Builds the graph of build() (a table of name -> tensor), runs it on 1 and
-- on 4 threads and expects every fetch to agree bit for bit; returns the
-- values and their number. Both sessions are made before either runs: a
-- session sets OpenBLAS's thread count (process-wide) to its own, and gemm
-- sums in another order on another count, so both runs share the last one
-- and only moonflow's own split of the work differs between them.
local function expect_same_bits(build)
  local g = tf.Graph()
  return g:as_default(function()
    local fetches = build()
    local names, list = {}, {}
    for name, t in pairs(fetches) do
      names[#names + 1] = name
      list[#list + 1] = t
    end
    local one = tf.Session({graph = g, intra_op_parallelism_threads = 1})
    local four = tf.Session({graph = g, intra_op_parallelism_threads = 4})
    local a, b = one:run(list), four:run(list)
    one:close()
    four:close()
    for i, name in ipairs(names) do assert(same_bits(a[i], b[i]), name .. " differs between 1 and 4 threads") end
    return a, #names
  end)
end

-- Deterministic inputs with no two neighbours alike: sin of a scaled range.
local function wave(shape, scale, dtype)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local x = tf.sin(tf.range(0, n, 1, tf.float64) * (scale or 0.37)) * 10
  return tf.reshape(tf.cast(x, dtype or tf.float32), shape)
end

-- An int32 vector of n values in [0, limit), repeating out of order.
local function ids(n, limit)
  return tf.floormod(tf.range(0, n, 1, tf.int32) * 7919, limit)
end

local function grad(y, x) return tf.gradients(y, x)[1] end

-- Runs fn(sess) in a new graph with a session on 4 threads.
local function on_four_threads(fn)
  local g = tf.Graph()
  g:as_default(function() fn(tf.Session({graph = g, intra_op_parallelism_threads = 4})) end)
end

describe("intra-op threads", function()
  local n = 300000  -- several chunks of the elementwise grain
  local function run(threads)
    local g = tf.Graph()
    return g:as_default(function()
      local x = tf.range(0, n, 1, tf.float32)
      local y = tf.sigmoid(x * 0.001 - 3) + tf.sqrt(x) / 7
      local q = tf.floordiv(tf.range(0, n, 1, tf.int32), tf.range(n, 0, -1, tf.int32))
      local sess = tf.Session({graph = g, intra_op_parallelism_threads = threads})
      local r = sess:run({y, q})
      return r[1], r[2], sess, g
    end)
  end

  it("gives the single-thread values", function()
    local y1, q1 = run(1)
    local y4, q4 = run(4)
    for _, pair in ipairs({{y1, y4}, {q1, q4}}) do
      local a, b = pair[1], pair[2]
      assert.equal(a:size(), b:size())
      local same = true
      for i = 0, a:size() - 1 do same = same and a:data()[i] == b:data()[i] end
      assert.is_true(same)
    end
    assert.equal(n - 1, q4:get(n - 1))
  end)

  it("reports integer division by zero from any chunk", function()
    local g = tf.Graph()
    g:as_default(function()
      local d = tf.placeholder(tf.int32, {n})
      local q = tf.floordiv(tf.ones({n}, tf.int32), d)
      local sess = tf.Session({graph = g, intra_op_parallelism_threads = 3})
      local dv = tf.Array.from_pointer(require("ffi").new("int32_t[?]", n), {n}, tf.int32)
      for i = 0, n - 1 do dv:data()[i] = 1 end
      dv:data()[n - 5] = 0
      local err = select(2, pcall(sess.run, sess, q, {[d] = dv}))
      assert.truthy(tostring(err):find("division by zero", 1, true), err)
      dv:data()[n - 5] = 2
      assert.equal(0, sess:run(q, {[d] = dv}):get(n - 5))
    end)
  end)

  it("splits reductions and arg reductions the same on any thread count", function()
    local _, count = expect_same_bits(function()
      local x = wave({600, 1000})
      local tall = wave({150000, 4}, 0.11)
      local x64 = wave({600, 1000}, 0.23, tf.float64)
      local near1 = 1 + wave({600, 1000}, 0.05) / 20000
      local pos = tf.greater(x, -9.99)
      return {
        sum = tf.reduce_sum(x), mean = tf.reduce_mean(x), max = tf.reduce_max(x), min = tf.reduce_min(x),
        prod = tf.reduce_prod(near1), sum64 = tf.reduce_sum(x64), mean64 = tf.reduce_mean(x64, 1),
        rows = tf.reduce_sum(x, 1), cols = tf.reduce_sum(x, 0), tall = tf.reduce_sum(tall, 0),
        tall_max = tf.reduce_max(tall, 0), keep = tf.reduce_mean(tall, 0, true),
        int = tf.reduce_sum(tf.cast(x * 1000, tf.int32)), int_cols = tf.reduce_sum(tf.cast(tall, tf.int64), 0),
        all = tf.reduce_all(pos), any = tf.reduce_any(tf.logical_not(pos)), any_rows = tf.reduce_any(pos, 1),
        argmax0 = tf.argmax(x, 0), argmax1 = tf.argmax(x, 1), argmin0 = tf.argmin(tall, 0),
        argmin1 = tf.argmin(x64, {axis = 1, output_type = tf.int32}),
        grad = grad(tf.reduce_sum(tf.reduce_max(x, 1) * tf.reduce_mean(x, 1)), x),
      }
    end)
    assert.equal(22, count)
  end)

  it("folds a long reduction in blocks with the double-precision sum's value", function()
    on_four_threads(function(sess)
      local x = wave({150000, 4}, 0.11)
      local r = sess:run({x, tf.reduce_sum(x), tf.reduce_sum(x, 0), tf.reduce_max(x, 0)})
      local v, total, cols, maxes = r[1]:data(), 0, {0, 0, 0, 0}, {-math.huge, -math.huge, -math.huge, -math.huge}
      for i = 0, 150000 * 4 - 1 do
        total = total + v[i]
        cols[i % 4 + 1] = cols[i % 4 + 1] + v[i]
        maxes[i % 4 + 1] = math.max(maxes[i % 4 + 1], v[i])
      end
      assert.near(total, r[2], math.abs(total) * 1e-6 + 1e-3)
      for j = 1, 4 do
        assert.near(cols[j], r[3]:get(j - 1), math.abs(cols[j]) * 1e-6 + 1e-3)
        assert.equal(maxes[j], r[4]:get(j - 1))
      end
    end)
  end)

  it("splits softmax, the cross-entropies and their gradients by rows", function()
    local _, count = expect_same_bits(function()
      local logits = wave({2000, 300})
      local labels = tf.nn.softmax(wave({2000, 300}, 0.71))
      local classes = ids(2000, 300)
      local dense = tf.nn.softmax_cross_entropy_with_logits({labels = labels, logits = logits})
      local sparse = tf.nn.sparse_softmax_cross_entropy_with_logits({labels = classes, logits = logits})
      local sm, lsm = tf.nn.softmax(logits), tf.nn.log_softmax(logits)
      local w = wave({2000, 300}, 0.19)
      return {
        softmax = sm, log_softmax = lsm, dense = dense, sparse = sparse,
        softmax_grad = grad(tf.reduce_sum(sm * w), logits), log_softmax_grad = grad(tf.reduce_sum(lsm * w), logits),
        dense_grad = grad(tf.reduce_sum(dense), logits), sparse_grad = grad(tf.reduce_sum(sparse), logits),
      }
    end)
    assert.equal(8, count)
  end)

  it("splits convolutions, pooling, bias_add and their gradients", function()
    local _, count = expect_same_bits(function()
      -- 64 channels: an im2col block holds fewer rows than an image, so blocks cut images.
      local x = wave({4, 32, 32, 64})
      local f = wave({3, 3, 64, 16}, 0.53) / 10
      local conv = tf.nn.conv2d(x, f, {1, 1, 1, 1}, "SAME")
      local strided = tf.nn.conv2d(x, f, {1, 2, 2, 1}, "VALID")
      local wc, ws = wave({4, 32, 32, 16}, 0.3), wave({4, 15, 15, 16}, 0.3)
      local loss = tf.reduce_sum(conv * wc) + tf.reduce_sum(strided * ws)
      local p = wave({8, 32, 32, 16}, 0.61)
      local maxp = tf.nn.max_pool(p, {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME")
      local avgp = tf.nn.avg_pool(p, {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME")
      local wp = wave({8, 16, 16, 16}, 0.43)
      local dmax = grad(tf.reduce_sum(maxp * wp), p)
      local v = wave({8, 32, 32, 16}, 0.29)
      local b = wave({16}, 1.3)
      local rows = wave({20000, 16}, 0.17)
      local biased = tf.nn.bias_add(rows, b)
      return {
        conv = conv, strided = strided, conv_dx = grad(loss, x), conv_df = grad(loss, f),
        max_pool = maxp, avg_pool = avgp, max_pool_grad = dmax,
        avg_pool_grad = grad(tf.reduce_sum(avgp * wp), p), max_pool_grad_grad = grad(tf.reduce_sum(dmax * v), wp),
        bias_add = biased, bias_grad = grad(tf.reduce_sum(biased * rows), b),
      }
    end)
    assert.equal(11, count)
  end)

  it("splits gathers, scatters and segment reductions without reordering sums", function()
    local _, count = expect_same_bits(function()
      local params = wave({100000, 8})
      local idx = ids(60000, 100000)
      local picked = tf.gather(params, idx)
      local wide = wave({40, 5000})
      local nd_idx = tf.stack({ids(50000, 40), ids(50000, 5000)}, 1)
      local updates = wave({50000, 16}, 0.07)
      local data = wave({40000, 64}, 0.13)
      local seg = tf.floordiv(tf.range(0, 40000, 1, tf.int32), 7)
      return {
        gather = picked, gather_axis1 = tf.gather(wide, ids(3000, 5000), {axis = 1}),
        gather_grad = grad(tf.reduce_sum(picked * wave({60000, 8}, 0.9)), params),
        gather_nd = tf.gather_nd(wide, nd_idx),
        scatter_nd = tf.scatter_nd(tf.expand_dims(ids(50000, 900), 1), updates, {900, 16}),
        segment_sum = tf.segment_sum(data, seg), segment_max = tf.segment_max(data, seg),
        unsorted_sum = tf.unsorted_segment_sum(data, ids(40000, 333), 333),
        unsorted_min = tf.unsorted_segment_min(data, ids(40000, 333), 333),
      }
    end)
    assert.equal(9, count)
  end)

  it("splits scans, one_hot and copies of large tensors", function()
    local _, count = expect_same_bits(function()
      local x = wave({600, 1000})
      local col = wave({200000, 2}, 0.41)
      return {
        cumsum0 = tf.cumsum(x, 0), cumsum1 = tf.cumsum(x, {axis = 1, exclusive = true, reverse = true}),
        cumprod = tf.cumprod(1 + x / 1000, 0), cumsum_tall = tf.cumsum(col, 0),
        one_hot = tf.one_hot(ids(50000, 12), 10), one_hot_axis0 = tf.one_hot(ids(50000, 12), 10, {axis = 0}),
        transpose = tf.transpose(x), transpose3 = tf.transpose(tf.reshape(x, {60, 100, 100}), {2, 0, 1}),
        concat = tf.concat({x, x * 2}, 1), stack = tf.stack({x, -x}, 1), tile = tf.tile(x, {2, 3}),
        tile1 = tf.tile(tf.reshape(x, {600000}), {3}), pad = tf.pad(x, {{3, 4}, {5, 6}}, {constant_values = 7}),
        reflect = tf.pad(x, {{3, 4}, {5, 6}}, "REFLECT"), slice = tf.slice(x, {10, 20}, {500, 900}),
        strided = tf.strided_slice(x, {1, 998}, {599, 0}, {3, -2}),
      }
    end)
    assert.equal(16, count)
  end)

  it("adds every window row back in col2im's stripes", function()
    -- dx of a strided, dilated, padded convolution against the direct sum
    -- dx[n, iy, ix, c] = sum over windows covering it of dy * filter.
    on_four_threads(function(sess)
      local x = tf.placeholder(tf.float64, {2, 9, 8, 3})
      local f = wave({3, 2, 3, 4}, 0.7, tf.float64)
      local y = tf.nn.conv2d(x, f, {1, 2, 1, 1}, "SAME", {dilations = {1, 2, 1, 1}})
      local dy = wave({2, 5, 8, 4}, 0.31, tf.float64)
      local dx = grad(tf.reduce_sum(y * dy), x)
      local xv = tf.Array.from_pointer(ffi.new("double[?]", 2 * 9 * 8 * 3), {2, 9, 8, 3}, tf.float64)
      local r = sess:run({dx, f, dy}, {[x] = xv})
      local dxv, fv, dyv = r[1], r[2], r[3]
      -- SAME with stride 2 over 9 rows: 5 output rows, pad (5-1)*2 + 5 - 9 = 0 ... computed here.
      local eff_h, eff_w = (3 - 1) * 2 + 1, 2
      local pad_h = math.max(0, (5 - 1) * 2 + eff_h - 9)
      local pad_w = math.max(0, (8 - 1) * 1 + eff_w - 8)
      local pt, pl = math.floor(pad_h / 2), math.floor(pad_w / 2)
      for n0 = 0, 1 do
        for iy = 0, 8 do
          for ix = 0, 7 do
            for c = 0, 2 do
              local want = 0
              for oy = 0, 4 do
                for ox = 0, 7 do
                  for ky = 0, 2 do
                    for kx = 0, 1 do
                      if oy * 2 - pt + ky * 2 == iy and ox - pl + kx == ix then
                        for o = 0, 3 do want = want + dyv:get(n0, oy, ox, o) * fv:get(ky, kx, c, o) end
                      end
                    end
                  end
                end
              end
              assert.near(want, dxv:get(n0, iy, ix, c), 1e-12)
            end
          end
        end
      end
    end)
  end)
end)
