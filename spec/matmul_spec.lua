-- MatMul: plain, transposed, batched with broadcasting, every dtype, errors.
local tf = require("moonflow")
local H = require("spec.helpers")

-- The sweeps below build and run ops in loops on purpose: no growth warnings.
setup(H.growth_off)
teardown(H.growth_restore)

-- A small LCG so the random inputs are the same on every run.
local function rng(seed)
  return function(lo, hi)
    seed = (seed * 1103515245 + 12345) % 2147483648
    return lo + seed % (hi - lo + 1)
  end
end

-- A tf.Array of dtype and shape filled by fill(i) for flat index i (0-based).
local function array(dtype, dims, fill)
  local a = tf.Array.new(dtype, dims)
  local d, n = a:data(), a:size()
  for i = 0, n - 1 do d[i] = fill(i) end
  return a
end

-- Naive batched matmul with broadcasting on flat row-major data, for reference.
local function naive(a, adims, b, bdims, ta, tb)
  local ra, rb = #adims, #bdims
  local m, k = adims[ra - 1], adims[ra]
  if ta then m, k = k, m end
  local n = tb and bdims[rb - 1] or bdims[rb]
  local batch_rank = math.max(ra, rb) - 2
  local out_dims = {}
  for d = 1, batch_rank do
    local ia, ib = d - (batch_rank - (ra - 2)), d - (batch_rank - (rb - 2))
    out_dims[d] = math.max(ia >= 1 and adims[ia] or 1, ib >= 1 and bdims[ib] or 1)
  end
  local batch = 1
  for _, d in ipairs(out_dims) do batch = batch * d end
  out_dims[#out_dims + 1], out_dims[#out_dims + 2] = m, n
  local da_, db_ = adims[ra - 1] * adims[ra], bdims[rb - 1] * bdims[rb]
  local out = {}
  for bi = 0, batch - 1 do
    -- batch offsets of a and b, broadcasting their size-1 batch dims
    local rem, oa, ob, sa, sb = bi, 0, 0, da_, db_
    for d = batch_rank, 1, -1 do
      local idx = rem % out_dims[d]
      rem = (rem - idx) / out_dims[d]
      local ia, ib = d - (batch_rank - (ra - 2)), d - (batch_rank - (rb - 2))
      if ia >= 1 then
        if adims[ia] ~= 1 then oa = oa + idx * sa end
        sa = sa * adims[ia]
      end
      if ib >= 1 then
        if bdims[ib] ~= 1 then ob = ob + idx * sb end
        sb = sb * bdims[ib]
      end
    end
    for i = 0, m - 1 do
      for j = 0, n - 1 do
        local s = 0
        for p = 0, k - 1 do
          local av = ta and a[oa + p * m + i + 1] or a[oa + i * k + p + 1]
          local bv = tb and b[ob + j * k + p + 1] or b[ob + p * n + j + 1]
          s = s + av * bv
        end
        out[#out + 1] = s
      end
    end
  end
  return out, out_dims
end

local function flat_array(arr)
  local out, d = {}, arr:data()
  for i = 0, arr:size() - 1 do out[i + 1] = tonumber(d[i]) end
  return out
end

local function fails(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok)
  assert.matches(pattern, err, 1, true)
  return err
end

describe("matmul", function()
  before_each(function() tf.reset_default_graph() end)

  local A = {{1, 2, 3}, {4, 5, 6}}         -- [2,3]
  local B = {{7, 8}, {9, 10}, {11, 12}}    -- [3,2]
  local AB = {{58, 64}, {139, 154}}
  local BA = {{39, 54, 69}, {49, 68, 87}, {59, 82, 105}}

  it("multiplies matrices of every dtype", function()
    local sess = tf.Session()
    for _, dt in ipairs({tf.float32, tf.float64, tf.int32, tf.int64}) do
      local a, b = tf.constant(A, dt), tf.constant(B, dt)
      local c = tf.matmul(a, b)
      assert.equal(dt, c.dtype)
      assert.equal("MatMul", c.op.type)
      assert.same({2, 2}, c:get_shape():as_list())
      assert.same(AB, sess:run(c):totable())
      assert.same(BA, sess:run(tf.matmul(b, a)):totable())
    end
  end)

  it("transposes either or both operands", function()
    local sess = tf.Session()
    local At = {{1, 4}, {2, 5}, {3, 6}}      -- A transposed, [3,2]
    local Bt = {{7, 9, 11}, {8, 10, 12}}     -- B transposed, [2,3]
    for _, dt in ipairs({tf.float32, tf.float64, tf.int32, tf.int64}) do
      local a, b, at, bt = tf.constant(A, dt), tf.constant(B, dt), tf.constant(At, dt), tf.constant(Bt, dt)
      assert.same(AB, sess:run(tf.matmul(at, b, {transpose_a = true})):totable())
      assert.same(AB, sess:run(tf.matmul(a, bt, {transpose_b = true})):totable())
      assert.same(AB, sess:run(tf.matmul(at, bt, true, true)):totable())
      assert.same(AB, sess:run(tf.matmul(at, bt, {adjoint_a = true, adjoint_b = true})):totable())
      -- A A^T and A^T A
      assert.same({{14, 32}, {32, 77}}, sess:run(tf.matmul(a, a, false, true)):totable())
      assert.same({{17, 22, 27}, {22, 29, 36}, {27, 36, 45}}, sess:run(tf.matmul(a, a, true)):totable())
      assert.same({3, 3}, tf.matmul(a, a, {transpose_a = true}):get_shape():as_list())
    end
  end)

  it("is exact in float64 where float32 would round", function()
    -- (2^29 + 1) * 2^20 + 0.5 * 3.25 = 2^49 + 2^20 + 1.625 needs 53 bits.
    local a = tf.constant({{2 ^ 29 + 1, 0.5}}, tf.float64)
    local b = tf.constant({{2 ^ 20}, {3.25}}, tf.float64)
    local sess = tf.Session()
    assert.equal(2 ^ 49 + 2 ^ 20 + 1.625, sess:run(tf.matmul(a, b)):get(0, 0))
    local a32, b32 = tf.constant({{2 ^ 29 + 1, 0.5}}), tf.constant({{2 ^ 20}, {3.25}})
    assert.are_not.equal(2 ^ 49 + 2 ^ 20 + 1.625, sess:run(tf.matmul(a32, b32)):get(0, 0))
  end)

  it("multiplies integers without BLAS, wrapping around on overflow", function()
    local sess = tf.Session()
    local r = rng(7)
    local m, k, n = 17, 19, 23
    for _, dt in ipairs({tf.int32, tf.int64}) do
      for _, tr in ipairs({{false, false}, {true, false}, {false, true}, {true, true}}) do
        local ad = tr[1] and {k, m} or {m, k}
        local bd = tr[2] and {n, k} or {k, n}
        local av = array(dt, ad, function() return r(-100, 100) end)
        local bv = array(dt, bd, function() return r(-100, 100) end)
        local expected = naive(flat_array(av), ad, flat_array(bv), bd, tr[1], tr[2])
        local got = sess:run(tf.matmul(tf.constant(av), tf.constant(bv), tr[1], tr[2]))
        assert.same(expected, flat_array(got))
      end
    end
    assert.same({{0}}, sess:run(tf.matmul(tf.constant({{65536}}, tf.int32), tf.constant({{65536}}, tf.int32))):totable())
    assert.same({{2 ^ 32}}, sess:run(tf.matmul(tf.constant({{65536}}, tf.int64), tf.constant({{65536}}, tf.int64))):totable())
  end)

  describe("batched", function()
    local cases = {
      {{2, 3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {4, 5}},            -- one b for every batch: folds into one product
      {{3, 4}, {2, 4, 5}},            -- one a for every batch
      {{2, 1, 3, 4}, {5, 4, 6}},      -- [2,1] and [5] broadcast to [2,5]
      {{1, 3, 4}, {3, 1, 4, 2}},
      {{2, 2, 3, 4}, {2, 2, 4, 3}},
    }
    for _, dt in ipairs({tf.float32, tf.float64, tf.int32, tf.int64}) do
      it("broadcasts batch dims like NumPy (" .. dt.name .. ")", function()
        local r = rng(99)
        local sess = tf.Session()
        for _, c in ipairs(cases) do
          for _, tr in ipairs({{false, false}, {true, false}, {false, true}, {true, true}}) do
            local ad, bd = {unpack(c[1])}, {unpack(c[2])}
            if tr[1] then ad[#ad - 1], ad[#ad] = ad[#ad], ad[#ad - 1] end
            if tr[2] then bd[#bd - 1], bd[#bd] = bd[#bd], bd[#bd - 1] end
            local av = array(dt, ad, function() return r(-9, 9) end)
            local bv = array(dt, bd, function() return r(-9, 9) end)
            local expected, out_dims = naive(flat_array(av), ad, flat_array(bv), bd, tr[1], tr[2])
            local pa, pb = tf.placeholder(dt, ad), tf.placeholder(dt, bd)
            local t = tf.matmul(pa, pb, {transpose_a = tr[1], transpose_b = tr[2]})
            assert.same(out_dims, t:get_shape():as_list())
            local got = sess:run(t, {[pa] = av, [pb] = bv})
            assert.same(out_dims, got:shape())
            assert.same(expected, flat_array(got))   -- small integers: exact in every dtype
          end
        end
      end)
    end

    it("agrees with a naive loop on random floats", function()
      local r = rng(2024)
      local sess = tf.Session()
      local ad, bd = {3, 7, 33}, {3, 33, 9}
      local av = array(tf.float64, ad, function() return r(-1000, 1000) / 997 end)
      local bv = array(tf.float64, bd, function() return r(-1000, 1000) / 991 end)
      local expected = naive(flat_array(av), ad, flat_array(bv), bd, false, false)
      local got = flat_array(sess:run(tf.matmul(tf.constant(av), tf.constant(bv))))
      for i = 1, #expected do assert.is_true(math.abs(got[i] - expected[i]) < 1e-12) end
    end)
  end)

  it("matches a naive computation on sampled entries of a 1024x1024 float32 product", function()
    local n = 1024
    local r = rng(5)
    local av = array(tf.float32, {n, n}, function() return r(-500, 500) / 500 end)
    local bv = array(tf.float32, {n, n}, function() return r(-500, 500) / 500 end)
    local a, b = tf.placeholder(tf.float32, {n, n}), tf.placeholder(tf.float32, {n, n})
    local sess = tf.Session()
    local c = sess:run(tf.matmul(a, b), {[a] = av, [b] = bv})
    local ct = sess:run(tf.matmul(a, b, {transpose_b = true}), {[a] = av, [b] = bv})
    local ad, bd = av:data(), bv:data()
    for _ = 1, 25 do
      local i, j = r(0, n - 1), r(0, n - 1)
      local s, st = 0, 0
      for p = 0, n - 1 do
        s = s + ad[i * n + p] * bd[p * n + j]
        st = st + ad[i * n + p] * bd[j * n + p]
      end
      assert.is_true(math.abs(c:get(i, j) - s) < 1e-3, string.format("c[%d,%d] = %g, expected %g", i, j, c:get(i, j), s))
      assert.is_true(math.abs(ct:get(i, j) - st) < 1e-3)
    end
  end)

  describe("shapes", function()
    it("infers unknown dims at build time and computes them at run time", function()
      local a = tf.placeholder(tf.float32, {-1, 3})
      local b = tf.placeholder(tf.float32, {3, -1})
      local c = tf.matmul(a, b)
      assert.same({-1, -1}, c:get_shape():as_list())
      local sess = tf.Session()
      local got = sess:run(c, {[a] = A, [b] = B})
      assert.same(AB, got:totable())
      assert.same({{50, 68}}, sess:run(c, {[a] = {{1, 2, 3}}, [b] = {{1, 2}, {5, 6}, {13, 18}}}):totable())
      local batched = tf.matmul(tf.placeholder(tf.float32, {-1, 2, 3}), tf.constant(B))
      assert.same({-1, 2, 2}, batched:get_shape():as_list())
    end)

    it("infers an unknown rank as unknown and runs it", function()
      local a = tf.placeholder(tf.float32)
      local c = tf.matmul(a, tf.constant(B))
      assert.is_nil(c:get_shape().dims)
      assert.same(AB, tf.Session():run(c, {[a] = A}):totable())
    end)

    it("handles empty matrices", function()
      local sess = tf.Session()
      for _, dt in ipairs({tf.float32, tf.float64, tf.int32, tf.int64}) do
        local a = tf.placeholder(dt, {2, 0})
        local b = tf.placeholder(dt, {0, 3})
        local feed = {[a] = tf.Array.new(dt, {2, 0}), [b] = tf.Array.new(dt, {0, 3})}
        assert.same({{0, 0, 0}, {0, 0, 0}}, sess:run(tf.matmul(a, b), feed):totable())
        assert.same({{0, 0}, {0, 0}, {0, 0}}, sess:run(tf.matmul(b, a, true, true), feed):totable())
        local e = tf.placeholder(dt, {0, 2})
        assert.same({0, 0}, sess:run(tf.matmul(e, a), {[e] = tf.Array.new(dt, {0, 2}), [a] = tf.Array.new(dt, {2, 0})}):shape())
      end
    end)
  end)

  describe("the Lua API", function()
    it("is a Tensor method and lives in tf.linalg", function()
      local sess = tf.Session()
      local a, b = tf.constant(A), tf.constant(B)
      assert.same(AB, sess:run(a:matmul(b)):totable())
      assert.same(AB, sess:run(tf.linalg.matmul(a, b)):totable())
      assert.same({{14, 32}, {32, 77}}, sess:run(a:matmul(a, {transpose_b = true})):totable())
      assert.equal("prod", tf.matmul(a, b, {name = "prod"}).op.name)
      assert.is_true(tf.matmul(a, a, {transpose_b = true}).op:get_attr("transpose_b"))
      assert.is_false(tf.matmul(a, a, {transpose_b = true}).op:get_attr("transpose_a"))
    end)

    it("lifts Lua tables to the other operand's dtype", function()
      local sess = tf.Session()
      local c = tf.matmul(A, tf.constant(B, tf.float64))
      assert.equal(tf.float64, c.dtype)
      assert.same(AB, sess:run(c):totable())
      local d = tf.matmul(tf.constant(A, tf.int32), B)
      assert.equal(tf.int32, d.dtype)
      assert.same(AB, sess:run(d):totable())
      assert.same(AB, sess:run(tf.matmul(A, B)):totable())
    end)
  end)

  describe("errors", function()
    it("reports mismatched inner dimensions in TensorFlow's words", function()
      local a = tf.constant({{1, 2, 3}, {4, 5, 6}})                              -- [2,3]
      local b = tf.constant({{1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}})  -- [4,5]
      local err = fails("Dimensions must be equal, but are 3 and 4 for 'MatMul' (op: 'MatMul') " ..
                        "with input shapes: [2,3], [4,5].", tf.matmul, a, b)
      assert.matches("transpose_a or transpose_b", err, 1, true)
      assert.matches("matmul_spec.lua:%d+", err)
      fails("Dimensions must be equal, but are 2 and 3 for 'mm' (op: 'MatMul') with input shapes: [2,3], [2,3].",
            tf.matmul, a, a, {transpose_a = true, transpose_b = true, name = "mm"})
      -- The graph still works.
      assert.same({{14, 32}, {32, 77}}, tf.Session():run(tf.matmul(a, a, false, true)):totable())
    end)

    it("rejects rank < 2", function()
      local v = tf.constant({1, 2, 3})
      local m = tf.constant({{1}, {2}, {3}})
      fails("MatMul: MatMul needs inputs of rank >= 2, but a has shape [3] (rank 1)", tf.matmul, v, m)
      fails("but b has shape [] (rank 0)", tf.matmul, m, tf.constant(2))
    end)

    it("rejects mixed and unsupported dtypes", function()
      fails("a is float32 and b is float64; tf.cast one of them", tf.matmul,
            tf.constant({{1}}), tf.constant({{1}}, tf.float64))
      fails("MatMul takes float32, float64, int32, int64, complex64 or complex128 tensors, got bool", tf.matmul,
            tf.constant({{true}}), tf.constant({{true}}))
      fails("got uint8", tf.matmul, tf.constant({{1}}, tf.uint8), tf.constant({{1}}, tf.uint8))
    end)

    it("rejects batch dims that do not broadcast", function()
      local a = tf.placeholder(tf.float32, {2, 3, 4})
      local b = tf.placeholder(tf.float32, {3, 4, 5})
      fails("the batch dimensions of MatMul inputs of shapes [2,3,4] and [3,4,5] do not broadcast", tf.matmul, a, b)
    end)

    it("rejects bad options", function()
      local a = tf.constant({{1}})
      fails("Only one of transpose_a and adjoint_a can be True.", tf.matmul, a, a, {transpose_a = true, adjoint_a = true})
      fails("tf.matmul: transpose_b must be a boolean, got 1", tf.matmul, a, a, false, 1)
      fails("tf.matmul: unknown option 'a_is_sparse'", tf.matmul, a, a, {a_is_sparse = true})
    end)

    it("reports a mismatch found at run time and keeps the session usable", function()
      local a = tf.placeholder(tf.float32, {-1, -1})
      local b = tf.placeholder(tf.float32, {-1, -1})
      local c = tf.matmul(a, b)
      local sess = tf.Session()
      local err = fails("Dimensions must be equal, but are 3 and 2 for 'MatMul' (op: 'MatMul') with input " ..
                        "shapes: [2,3], [2,2].", sess.run, sess, c, {[a] = A, [b] = {{1, 2}, {3, 4}}})
      assert.matches("[[node MatMul", err, 1, true)
      assert.same(AB, sess:run(c, {[a] = A, [b] = B}):totable())
    end)
  end)
end)
