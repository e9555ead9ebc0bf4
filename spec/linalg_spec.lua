-- linalg_spec.lua — tf.linalg (src/ops/linalg.c and lua/moonflow/ops/linalg.lua):
-- inverse, solves, determinants, Cholesky, QR, SVD, eigh, band part and
-- diagonals, and the composites einsum, tensordot, trace, logdet,
-- matrix_transpose, tf.diag. Values from NumPy (spec/fixtures/linalg_values.py,
-- its output committed as spec/fixtures/linalg_values.lua) in float32 and
-- float64, batches, empty matrices, unknown shapes, errors at build and run
-- time, and gradients checked against central differences.
local tf = require("moonflow")
local H = require("spec.helpers")
local V = require("spec.fixtures.linalg_values")
local error_of, assert_values, without_line = H.error_of, H.assert_values, H.without_line

local IN = V.inputs
local FLOATS = {{tf.float32, 2e-5}, {tf.float64, 1e-12}}

local function run(t) return H.run(t) end
local function c(v, dtype) return tf.constant(v, dtype or tf.float64) end
local function value(t) local r = run(t) return type(r) == "number" and r or r:totable() end

-- The columns of u flipped so that the entry of largest magnitude of each is
-- positive, the same flips applied to the matrices in others (as the fixture
-- script does); u and others are nested tables, [m][k] or [batch][m][k].
local function signed_columns(u, ...)
  local others = {...}
  if type(u[1][1]) == "table" then
    for b = 1, #u do
      local sub = {}
      for i, o in ipairs(others) do sub[i] = o[b] end
      signed_columns(u[b], unpack(sub))
    end
    return u, ...
  end
  for k = 1, #u[1] do
    local best = 1
    for i = 2, #u do if math.abs(u[i][k]) > math.abs(u[best][k]) then best = i end end
    if u[best][k] < 0 then
      for _, m in ipairs({u, ...}) do for i = 1, #m do m[i][k] = -m[i][k] end end
    end
  end
  return u, ...
end

-- The first k columns of each matrix of m.
local function first_columns(m, k)
  if type(m[1][1]) == "table" then
    local out = {}
    for b = 1, #m do out[b] = first_columns(m[b], k) end
    return out
  end
  local out = {}
  for i = 1, #m do out[i] = {unpack(m[i], 1, k)} end
  return out
end

describe("tf.linalg values", function()
  for _, case in ipairs(FLOATS) do
    local dtype, tol = case[1], case[2]
    describe(dtype.name, function()
      it("matrix_inverse (batched, adjoint) and tf.linalg.inv", function()
        assert_values(V.inverse, value(tf.matrix_inverse(c(IN.BATCH, dtype))), tol)
        assert_values(V.inverse_adjoint, value(tf.linalg.inv(c(IN.BATCH, dtype), true)), tol)
        assert_values(V.inverse_adjoint, value(tf.matrix_inverse(c(IN.BATCH, dtype), {adjoint = true})), tol)
      end)

      it("matrix_solve and matrix_triangular_solve", function()
        local a, b = c(IN.GENERAL, dtype), c(IN.RHS, dtype)
        assert_values(V.solve, value(tf.matrix_solve(a, b)), tol)
        assert_values(V.solve_adjoint, value(tf.linalg.solve(a, b, {adjoint = true})), tol)
        local rhs2 = {IN.RHS, {}}
        for i, row in ipairs(IN.RHS) do rhs2[2][i] = {-row[1], -row[2]} end
        assert_values(V.solve_batch, value(tf.matrix_solve(c(IN.BATCH, dtype), c(rhs2, dtype))), tol)
        -- the triangle not named is not read: the full GENERAL matrix plus a diagonal
        local shifted = {}
        for i, row in ipairs(IN.GENERAL) do
          shifted[i] = {unpack(row)}
          shifted[i][i] = shifted[i][i] + ({1, 0, 2})[i]
        end
        local t = c(shifted, dtype)
        assert_values(V.triangular_lower, value(tf.matrix_triangular_solve(t, b)), tol)
        assert_values(V.triangular_lower_adjoint, value(tf.linalg.triangular_solve(t, b, {adjoint = true})), tol)
        assert_values(V.triangular_upper, value(tf.matrix_triangular_solve(t, b, false)), tol)
      end)

      it("det, slogdet (negative and zero determinants), logdet and trace", function()
        assert_values(V.det, value(tf.matrix_determinant(c(IN.BATCH, dtype))), tol)
        assert_values(V.det, value(tf.linalg.det(c(IN.BATCH, dtype))), tol)
        local neg = {}
        for i, row in ipairs(IN.SPD) do neg[i] = {-row[1], -row[2], -row[3]} end
        local four = c({IN.SPD, IN.GENERAL, neg, {{1, 2, 3}, {2, 4, 6}, {0, 1, 1}}}, dtype)
        local sign, log_abs = tf.linalg.slogdet(four)
        assert_values(V.slogdet_sign, value(sign), 0)
        assert_values(V.slogdet_log, value(log_abs), tol)
        local s2, l2 = tf.log_matrix_determinant(four)
        assert_values(V.slogdet_log, value(l2), tol)
        assert.same(V.slogdet_sign, value(s2))
        assert_values({V.logdet}, {value(tf.linalg.logdet(c(IN.SPD, dtype)))}, tol)
        assert_values(V.trace, value(tf.trace(c(IN.BATCH, dtype))), tol)
        assert_values(V.trace, value(tf.linalg.trace(c(IN.BATCH, dtype))), tol)
      end)

      it("cholesky reads the lower triangle", function()
        assert_values(V.cholesky, value(tf.cholesky(c(IN.SPD, dtype))), tol)
        local upper_garbage = {{4, 99, -7}, {1, 5, 123}, {2, 3, 6}}
        assert_values(V.cholesky, value(tf.linalg.cholesky(c(upper_garbage, dtype))), tol)
        local l = tf.cholesky(c(IN.SPD, dtype))
        local x = tf.linalg.cholesky_solve(l, c(IN.RHS, dtype))
        assert_values(IN.RHS, value(tf.matmul(c(IN.SPD, dtype), x)), tol * 10)
      end)

      it("lu (int32 and int64 permutations), lu_reconstruct, lu_solve and lu_matrix_inverse", function()
        local a = c(V.lu_input, dtype)
        local lu, p = tf.linalg.lu(a)
        assert_values(V.lu[1], value(lu), tol)
        assert.same(V.lu[2], value(p))
        assert.equal(tf.int32, p.dtype)
        local _, p64 = tf.linalg.lu(a, {output_idx_type = tf.int64})
        assert.equal(tf.int64, p64.dtype)
        assert.same(V.lu[2], value(p64))
        assert_values(V.lu_input, value(tf.linalg.lu_reconstruct(lu, p)), tol * 10)
        assert_values(V.lu_input, value(tf.linalg.lu_reconstruct(lu, p64)), tol * 10)
        local rhs = c({{{1}, {2}, {3}, {4}}, {{-1}, {0}, {2}, {1}}}, dtype)
        assert_values(value(tf.matrix_solve(a, rhs)), value(tf.linalg.lu_solve(lu, p, rhs)), tol * 10)
        assert_values(value(tf.matrix_inverse(a)), value(tf.linalg.lu_matrix_inverse(lu, p)), tol * 10)
      end)

      it("qr: reduced and full, tall, wide and square", function()
        for _, name in ipairs({"tall", "wide", "general"}) do
          local input = name == "general" and IN.GENERAL or IN[name:upper()]
          for _, full in ipairs({false, true}) do
            local want = V["qr_" .. name .. (full and "_complete" or "_reduced")]
            local q, r = tf.qr(c(input, dtype), full)
            assert_values(want[1], value(q), tol)
            assert_values(want[2], value(r), tol)
          end
        end
        local q, r = tf.linalg.qr(c(IN.TALL, dtype), {full_matrices = true})
        assert.same({3, 3}, q:get_shape():as_list())
        assert.same({3, 2}, r:get_shape():as_list())
      end)

      it("svd: values, vectors up to sign, full and reduced, batched; compute_uv = false", function()
        for _, name in ipairs({"tall", "wide", "batch"}) do
          local input = IN[name:upper()]
          for _, full in ipairs({false, true}) do
            local want = V["svd_" .. name .. (full and "_full" or "_reduced")]
            local s, u, v = tf.svd(c(input, dtype), full)
            local got_s, got_u, got_v = value(s), value(u), value(v)
            assert_values(want[1], got_s, tol)
            local k = #want[1] == 2 and type(want[1][1]) == "number" and 2 or #want[1][1]
            local su, sv = signed_columns(first_columns(got_u, k), first_columns(got_v, k))
            assert_values(want[2], su, tol * 10)
            assert_values(want[3], sv, tol * 10)
            -- full U and V are orthogonal: U^T U = I
            local eye_u = value(tf.matmul(u, u, {transpose_a = true}))
            local n = u:get_shape():as_list()
            assert_values(value(tf.eye(n[#n], {batch_shape = #n == 3 and {n[1]} or nil, dtype = dtype})), eye_u,
                          tol * 10)
          end
        end
        assert_values(V.svd_batch_reduced[1], value(tf.svd(c(IN.BATCH, dtype), {compute_uv = false})), tol)
      end)

      it("self_adjoint_eig and eigvalsh (batched, vectors up to sign)", function()
        local e, v = tf.self_adjoint_eig(c(V.eigh_input, dtype))
        assert_values(V.eigh[1], value(e), tol)
        assert_values(V.eigh[2], (signed_columns(value(v))), tol * 10)
        local e2 = tf.linalg.eigh(c(V.eigh_input, dtype))
        assert_values(V.eigh[1], value(e2), tol)
        assert_values(V.eigh[1], value(tf.linalg.eigvalsh(c(V.eigh_input, dtype))), tol)
        assert_values(V.eigh[1], value(tf.self_adjoint_eigvals(c(V.eigh_input, dtype))), tol)
      end)
    end)
  end

  it("band_part, diag, diag_part, set_diag and matrix_transpose for every dtype", function()
    for _, dtype in ipairs({tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8}) do
      local m = c(V.M34, dtype)
      for _, b in ipairs(V.band_part) do
        assert_values(b[3], value(tf.matrix_band_part(m, b[1], b[2])), 0)
        assert_values(b[3], value(tf.linalg.band_part(m, tf.constant(b[1], tf.int32), b[2])), 0)
      end
      assert_values(V.diag_part, value(tf.matrix_diag_part(m)), 0)
      assert_values(V.diag_part, value(tf.linalg.diag_part(m)), 0)
      if dtype == tf.uint8 then break end
      assert_values(V.set_diag, value(tf.matrix_set_diag(m, c({-1, -2, -3}, dtype))), 0)
      assert_values(V.set_diag, value(tf.linalg.set_diag(m, {-1, -2, -3})), 0)
      assert_values({{{1, 0}, {0, 2}}, {{3, 0}, {0, 4}}}, value(tf.matrix_diag(c({{1, 2}, {3, 4}}, dtype))), 0)
      assert_values({{1, 0}, {0, 2}}, value(tf.linalg.diag(c({1, 2}, dtype))), 0)
      local t = {}
      for j = 1, 4 do t[j] = {} for i = 1, 3 do t[j][i] = V.M34[i][j] end end
      assert_values(t, value(tf.matrix_transpose(m)), 0)
      assert_values({t, t}, value(tf.linalg.transpose(c({V.M34, V.M34}, dtype))), 0)
      assert_values(t, value(tf.linalg.adjoint(m)), 0)
    end
    assert.same({{true, false}, {false, true}}, value(tf.matrix_band_part(tf.constant({{true, true}, {true, true}}),
                                                                             0, 0)))
  end)

  it("tf.diag and tf.diag_part of higher rank (tf.linalg.tensor_diag)", function()
    local t = c({{1, 2, 3}, {4, 5, 6}})
    local d = tf.diag(t)
    assert.same({2, 3, 2, 3}, d:get_shape():as_list())
    assert_values(V.tensor_diag, value(d), 0)
    assert_values({{1, 2, 3}, {4, 5, 6}}, value(tf.diag_part(d)), 0)
    assert_values({{1, 2, 3}, {4, 5, 6}}, value(tf.linalg.tensor_diag_part(tf.linalg.tensor_diag(t))), 0)
    assert_values({7, 8}, value(tf.diag_part(c({{7, 1}, {2, 8}}))), 0)
  end)

  it("einsum against NumPy: products, transposes, diagonals, sums, ellipses, three operands", function()
    for _, e in ipairs(V.einsum) do
      local eq, shapes, want = e[1], e[2], e[3]
      local operands = {}
      for k, s in ipairs(shapes) do
        local n = H.numel(s)
        local vals = {}
        for i = 1, n do vals[i] = 0.1 * i + 0.05 * (k - 1) end
        operands[k] = tf.constant(vals, {dtype = tf.float64, shape = s})
      end
      local got = value(tf.einsum(eq, unpack(operands)))
      assert_values(type(want) == "number" and {want} or want, type(got) == "number" and {got} or got, 1e-12)
      assert_values(H.flat(want), H.flat(run(tf.linalg.einsum(eq, operands))), 1e-12)
    end
    -- float32, a name, and a known result shape
    local y = tf.einsum("ij,jk->ik", tf.ones({2, 3}), tf.ones({3, 4}), {name = "prod"})
    assert.same({2, 4}, y:get_shape():as_list())
    assert.equal("prod:0", y.name)
    assert_values({{3, 3, 3, 3}, {3, 3, 3, 3}}, value(y), 0)
  end)

  it("tensordot against NumPy", function()
    for _, e in ipairs(V.tensordot) do
      local sa, sb, axes, want = e[1], e[2], e[3], e[4]
      local function operand(s, shift)
        local vals = {}
        for i = 1, H.numel(s) do vals[i] = 0.1 * i + shift end
        return tf.constant(vals, {dtype = tf.float64, shape = s})
      end
      local got = value(tf.tensordot(operand(sa, 0), operand(sb, 0.05), axes))
      assert_values(want, got, 1e-12)
    end
    assert_values({{22, 12}}, value(tf.linalg.tensordot(c({{1, 2, 3}}), c(IN.RHS), {{1}, {0}})), 0)
  end)
end)

describe("tf.linalg composites", function()
  it("matvec and cross", function()
    assert_values(V.matvec, value(tf.linalg.matvec(c(IN.TALL), {1, -2})), 1e-15)
    assert_values(V.matvec_t, value(tf.linalg.matvec(c(IN.TALL), {1, -2, 0.5}, true)), 1e-15)
    assert_values(V.matvec_t, value(tf.linalg.matvec(c(IN.TALL), {1, -2, 0.5}, {adjoint_a = true})), 1e-15)
    assert_values(V.cross, value(tf.linalg.cross(c({{1, 2, 3}, {-1, 0.5, 2}}), c({{0.5, -1, 2}, {3, 1, -2}}))), 1e-15)
    assert_values({0, 0, 1}, value(tf.cross({1, 0, 0}, {0, 1, 0})), 0)
  end)

  it("norm: vector norms over everything and along an axis, matrix norms over a pair of axes", function()
    for _, case in ipairs(V.norm) do
      local ord, axis, want = case[1], case[2], case[3]
      local got = value(tf.norm(c(IN.GENERAL), {ord = ord, axis = axis}))
      assert_values(type(want) == "number" and {want} or want, type(got) == "number" and {got} or got, 1e-12)
      assert_values(H.flat(want), H.flat(run(tf.linalg.norm(c(IN.GENERAL, tf.float32), ord, axis))), 1e-6)
    end
    assert.same({1, 1}, tf.norm(tf.ones({2, 3}), {keepdims = true}):get_shape():as_list())
    assert.same({2, 1}, tf.norm(tf.ones({2, 3}), {axis = 1, keepdims = true}):get_shape():as_list())
    assert.same({1, 1, 4}, tf.norm(tf.ones({2, 3, 4}), {axis = {0, 1}, keepdims = true}):get_shape():as_list())
    assert.same({4}, tf.norm(tf.ones({2, 3, 4}), 2, {0, 1}):get_shape():as_list())
    assert_values({2, 2, 2, 2}, value(tf.norm(tf.ones({2, 3, 4}, tf.float64) * math.sqrt(2 / 3), 2, {0, 1})), 1e-12)
  end)

  it("lstsq (tf.matrix_solve_ls): tall, wide (minimum norm) and regularized", function()
    local rhs_tall = {{1}, {1.5}, {10}}
    assert_values(V.lstsq_tall, value(tf.matrix_solve_ls(c(IN.TALL), c(rhs_tall))), 1e-10)
    assert_values(V.lstsq_wide, value(tf.linalg.lstsq(c(IN.WIDE), c({IN.RHS[1], IN.RHS[2]}))), 1e-10)
    assert_values(V.lstsq_tall_l2, value(tf.linalg.lstsq(c(IN.TALL), c(IN.RHS), 0.5)), 1e-12)
    assert_values(V.lstsq_tall_l2, value(tf.linalg.lstsq(c(IN.TALL), c(IN.RHS), {l2_regularizer = 0.5, fast = true})),
                  1e-12)
  end)

  it("composite errors", function()
    local function msg(...) return without_line(error_of(...)) end
    assert.equal("tf.linalg.cross: a and b must have a last dim of 3, got shape (2,)",
                 msg(tf.linalg.cross, {1, 2}, {3, 4}))
    assert.equal("tf.norm: ord must be 'euclidean', 'fro', 1, 2 or math.huge for a matrix norm, got 3",
                 msg(tf.norm, tf.ones({2, 2}), 3, {0, 1}))
    assert.equal("tf.norm: ord must be 'euclidean', 'fro' or a number > 0 for a vector norm, got the string \"nuc\"",
                 msg(tf.norm, tf.ones({2, 2}), "nuc"))
    assert.equal("tf.norm: the two axes of a matrix norm must differ, got {1, -1}",
                 msg(tf.norm, tf.ones({2, 2}), 1, {1, -1}))
    assert.truthy(msg(tf.linalg.lstsq, tf.ones({3, 2}), tf.ones({3, 1}), 0, false):find(
      "fast = false (the complete orthogonal decomposition) is not implemented", 1, true))
    assert.truthy(msg(tf.linalg.lstsq, tf.placeholder(tf.float32, {-1, 2}), tf.ones({3, 1})):find(
      "needs known matrix dims", 1, true))
  end)
end)

describe("tf.linalg shapes", function()
  it("infer static shapes with unknown dims, and run with them", function()
    local x = tf.placeholder(tf.float32, {-1, 4, 4})
    assert.same({-1, 4, 4}, tf.matrix_inverse(x):get_shape():as_list())
    assert.same({-1}, tf.matrix_determinant(x):get_shape():as_list())
    local sign, logdet = tf.log_matrix_determinant(x)
    assert.same({-1}, sign:get_shape():as_list())
    assert.same({-1}, logdet:get_shape():as_list())
    local e, v = tf.self_adjoint_eig(x)
    assert.same({-1, 4}, e:get_shape():as_list())
    assert.same({-1, 4, 4}, v:get_shape():as_list())
    local t = tf.placeholder(tf.float64, {5, -1})
    local q, r = tf.qr(t)
    assert.same({5, -1}, q:get_shape():as_list())
    assert.same({-1, -1}, r:get_shape():as_list())
    local s, u, w = tf.svd(tf.placeholder(tf.float32, {2, 5, 3}), true)
    assert.same({2, 3}, s:get_shape():as_list())
    assert.same({2, 5, 5}, u:get_shape():as_list())
    assert.same({2, 3, 3}, w:get_shape():as_list())
    local values_only = tf.linalg.svd(tf.ones({2, 3}), {compute_uv = false})
    assert.same({0}, values_only.op.outputs[2]:get_shape():as_list())
    assert.same({0}, values_only.op.outputs[3]:get_shape():as_list())
    assert.same({0}, tf.linalg.eigvalsh(tf.ones({3, 3})).op.outputs[2]:get_shape():as_list())
    local b = tf.placeholder(tf.float32, {-1, -1, 2})
    assert.same({-1, 4, 2}, tf.matrix_solve(x, b):get_shape():as_list())
    assert.same({-1, 3}, tf.matrix_diag_part(tf.placeholder(tf.float32, {-1, 3, 5})):get_shape():as_list())
    assert.same({7, 3, 3}, tf.matrix_diag(tf.placeholder(tf.int32, {7, 3})):get_shape():as_list())
    assert.is_nil(tf.matrix_inverse(tf.placeholder(tf.float32)):get_shape().dims)
    -- run with fed shapes
    local y = tf.matrix_inverse(x)
    local sess = tf.Session()
    local got = sess:run(y, {[x] = {{{2, 0, 0, 0}, {0, 4, 0, 0}, {0, 0, 5, 0}, {0, 0, 0, 8}}}})
    assert_values({{{0.5, 0, 0, 0}, {0, 0.25, 0, 0}, {0, 0, 0.2, 0}, {0, 0, 0, 0.125}}}, got:totable(), 1e-7)
  end)

  it("handle empty matrices and empty batches", function()
    local e = tf.zeros({0, 0}, tf.float64)
    assert.same({0, 0}, run(tf.matrix_inverse(e)):shape())
    assert.equal(1, run(tf.matrix_determinant(e)))
    local sign, logdet = tf.linalg.slogdet(e)
    assert.same({1, 0}, run({sign, logdet}))
    assert.same({0, 0}, run(tf.cholesky(e)):shape())
    assert.same({0, 3, 3}, run(tf.matrix_inverse(tf.zeros({0, 3, 3}))):shape())
    assert.same({0}, run(tf.matrix_determinant(tf.zeros({0, 3, 3}))):shape())
    local q, r = tf.qr(tf.zeros({3, 0}), true)
    assert_values({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, run(q):totable(), 0)
    assert.same({3, 0}, run(r):shape())
    local s, u, v = tf.svd(tf.zeros({2, 0}), true)
    assert.same({0}, run(s):shape())
    assert_values({{1, 0}, {0, 1}}, run(u):totable(), 0)
    assert.same({0, 0}, run(v):shape())
    assert.same({0, 2}, run(tf.matrix_solve(e, tf.zeros({0, 2}, tf.float64))):shape())
    assert.equal(0, run(tf.trace(tf.zeros({0, 0}))))
  end)

  it("tf.diag of a scalar is the scalar; size-1 matrices", function()
    assert.equal(3, run(tf.diag(3)))
    assert.equal(0.25, run(tf.matrix_inverse(c({{4}}))):get(0, 0))
    assert.equal(-2, run(tf.matrix_determinant(c({{-2}}))))
    assert.equal(3, run(tf.cholesky(c({{9}}))):get(0, 0))
  end)

  it("propagate NaN and inf", function()
    local nan = 0 / 0
    local d = run(tf.matrix_determinant(c({{nan, 1}, {1, 1}})))
    assert.is_true(d ~= d)
    local sign, logdet = tf.linalg.slogdet(c({{nan, 1}, {1, 1}}))
    local r = run({sign, logdet})
    assert.is_true(r[2] ~= r[2])
    assert.equal(math.huge, run(tf.matrix_determinant(c({{1e200, 0}, {0, 1e200}}))))
    -- a zero on a triangular solve's diagonal gives inf, as TensorFlow's (no error)
    local x = run(tf.matrix_triangular_solve(c({{0, 0}, {1, 1}}), c({{1}, {1}})))
    assert.equal(math.huge, x:get(0, 0))
  end)
end)

describe("tf.linalg errors", function()
  before_each(tf.reset_default_graph)

  it("a singular matrix: 'Input is not invertible.' naming the op and the caller's line", function()
    local sess = tf.Session()
    local line = H.this_line() + 1
    local y = tf.matrix_inverse(c({{1, 2}, {2, 4}}))
    local ok, err = pcall(sess.run, sess, y)
    assert.is_false(ok)
    err = tostring(err)
    assert.truthy(err:find("MatrixInverse: Input is not invertible.", 1, true), err)
    assert.truthy(err:find("linalg_spec.lua:" .. line, 1, true), err)
    local batch = tf.matrix_inverse(c({{{1, 0}, {0, 1}}, {{1, 2}, {2, 4}}}))
    ok, err = pcall(sess.run, sess, batch)
    assert.truthy(tostring(err):find("Input is not invertible. (the matrix at batch index [1])", 1, true), err)
    ok, err = pcall(sess.run, sess, tf.matrix_solve(c({{1, 2}, {2, 4}}), c({{1}, {1}})))
    assert.truthy(tostring(err):find("MatrixSolve: Input matrix is not invertible.", 1, true), err)
    -- the session keeps working
    assert_values({{0.5, 0}, {0, 0.5}}, sess:run(tf.matrix_inverse(c({{2, 0}, {0, 2}}))):totable(), 0)
    -- the determinant of a singular matrix is 0, no error
    assert.equal(0, sess:run(tf.matrix_determinant(c({{1, 2}, {2, 4}}))))
  end)

  it("lu of a singular matrix", function()
    local lu = tf.linalg.lu(c({{1, 2}, {2, 4}}))
    local ok, err = pcall(run, lu)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("Lu: Input is not invertible.", 1, true), err)
    assert.truthy(without_line(error_of(tf.linalg.lu, tf.ones({2, 2}), tf.float32)):find(
      "output_idx_type must be int32 or int64, got float32", 1, true))
  end)

  it("cholesky of a matrix that is not positive definite", function()
    local ok, err = pcall(run, tf.cholesky(c({{1, 2}, {2, 1}})))
    assert.is_false(ok)
    assert.truthy(tostring(err):find(
      "Cholesky: Cholesky decomposition was not successful. The input might not be valid. (its leading minor of " ..
      "order 2 is not positive definite)", 1, true), err)
    ok, err = pcall(run, tf.linalg.logdet(c({{-1, 0}, {0, 1}})))
    assert.truthy(tostring(err):find("leading minor of order 1", 1, true), err)
  end)

  it("check ranks, squareness, dtypes and fitting shapes when built", function()
    local function msg(...) return without_line(error_of(...)) end
    assert.equal("MatrixInverse: input must be a square matrix or a batch of them, got shape [2,3]",
                 msg(tf.matrix_inverse, tf.ones({2, 3})))
    assert.equal("Cholesky: input must have rank >= 2 (a matrix or a batch of them), got shape [3]",
                 msg(tf.cholesky, tf.ones({3})))
    assert.equal("MatrixDeterminant: input has dtype int32, but MatrixDeterminant takes only float32, float64; " ..
                 "use tf.cast to convert", msg(tf.matrix_determinant, tf.constant({{1, 2}, {3, 4}}, tf.int32)))
    assert.truthy(msg(tf.matrix_solve, tf.ones({3, 3}), tf.ones({2, 1})):find(
      "matrix of shape [3,3] and rhs of shape [2,1] do not fit", 1, true))
    assert.equal("MatrixSolve: matrix has dtype float32 but rhs has dtype float64; use tf.cast to convert one of them",
                 msg(tf.matrix_solve, tf.ones({3, 3}), tf.ones({3, 1}, tf.float64)))
    assert.truthy(msg(tf.svd, tf.ones({3})):find("Svd: input must have rank >= 2", 1, true))
    assert.truthy(msg(tf.qr, tf.constant({{1}}, tf.int64)):find("Qr: input has dtype int64", 1, true))
    assert.truthy(msg(tf.self_adjoint_eig, tf.ones({2, 3})):find("must be a square matrix", 1, true))
    assert.equal("MatrixBandPart: num_lower must be negative or less or equal to number of rows (3) got: 4",
                 msg(tf.matrix_band_part, tf.ones({3, 4}), 4, 0))
    assert.truthy(msg(tf.matrix_band_part, tf.ones({3, 4}), 0, 5):find("number of columns (4) got: 5", 1, true))
    assert.truthy(msg(tf.matrix_band_part, tf.ones({3}), 0, 0):find("input must have rank >= 2", 1, true))
    assert.truthy(msg(tf.matrix_set_diag, tf.ones({3, 4}), {1, 2}):find(
      "the diagonal of shape [2] does not fit input of shape [3,4]", 1, true))
    assert.truthy(msg(tf.matrix_diag, 3):find("MatrixDiag: diagonal must have rank >= 1", 1, true))
    assert.truthy(msg(tf.matrix_transpose, tf.ones({3})):find("tf.matrix_transpose: a must have rank >= 2", 1, true))
  end)

  it("band_part bounds fed at run time are checked", function()
    local lo = tf.placeholder(tf.int64, {})
    local y = tf.matrix_band_part(tf.ones({2, 2}), lo, -1)
    local sess = tf.Session()
    local ok, err = pcall(sess.run, sess, y, {[lo] = 5})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("num_lower must be negative or less or equal to number of rows (2) got: 5", 1,
                                     true), err)
    assert_values({{1, 1}, {0, 1}}, sess:run(y, {[lo] = 0}):totable(), 0)
  end)

  it("einsum and tensordot errors", function()
    local function msg(...) return without_line(error_of(...)) end
    local a, b = tf.ones({2, 3}), tf.ones({3, 4})
    assert.equal("tf.einsum: equation 'ij,jk->ik' has 2 operand subscripts but 1 inputs were given",
                 msg(tf.einsum, "ij,jk->ik", a))
    assert.equal("tf.einsum: subscripts 'ijk' name 3 axes but input 1 has shape (2, 3)", msg(tf.einsum, "ijk->i", a))
    assert.equal("tf.einsum: output subscript 'z' appears in no input's subscripts in 'ij->z'",
                 msg(tf.einsum, "ij->z", a))
    assert.equal("tf.einsum: label 'j' has size 3 in one operand and 2 in another",
                 msg(tf.einsum, "ij,jk->ik", a, tf.ones({2, 4})))
    assert.truthy(msg(tf.einsum, "i1->i", tf.ones({2, 2})):find("invalid subscript '1'", 1, true))
    assert.truthy(msg(tf.einsum, "ij,jk", a, tf.ones({3, 4}, tf.int32)):find("inputs must have one dtype", 1, true))
    assert.truthy(msg(tf.einsum, "ii->i", a):find("label 'i' is repeated in an operand of shape (2, 3)", 1, true))
    assert.truthy(msg(tf.einsum, "ij", tf.placeholder(tf.float32)):find("needs a known rank", 1, true))
    assert.truthy(msg(tf.tensordot, a, b, 3):find("axes = 3 must be between 0 and the ranks", 1, true))
    assert.truthy(msg(tf.tensordot, a, b, {{0, 1}, {0}}):find("as many axes of a as of b", 1, true))
    assert.truthy(msg(tf.tensordot, a, b, {{2}, {0}}):find("axis 2 of a is out of range for rank 2", 1, true))
    assert.truthy(msg(tf.tensordot, a, b, {{1, 1}, {0, 1}}):find("axis 1 of a is given twice", 1, true))
    assert.truthy(msg(tf.tensordot, a, b, "x"):find("axes must be an integer or a pair of axis lists", 1, true))
  end)
end)

describe("tf.linalg gradients (central differences)", function()
  local OPTS, TOL = {delta = 1e-6}, 1e-6
  local function check(x, shape, y, y_shape, init)
    H.check_grad(x, shape, y, y_shape, {delta = OPTS.delta, x_init_value = init}, TOL)
  end
  local function flat_of(m) return H.flat(m) end
  local function sym(x) return (x + tf.matrix_transpose(x)) * 0.5 end

  it("matrix_inverse (both adjoints), and its gradient's gradient", function()
    local x = tf.placeholder(tf.float64, {2, 3, 3})
    check(x, {2, 3, 3}, tf.matrix_inverse(x), {2, 3, 3}, flat_of(IN.BATCH))
    check(x, {2, 3, 3}, tf.matrix_inverse(x, true), {2, 3, 3}, flat_of(IN.BATCH))
    -- second order: the gradient of <inv(y), C> is differentiated again
    local y = tf.placeholder(tf.float64, {3, 3})
    local g = tf.gradients(tf.reduce_sum(tf.matrix_inverse(y) * c(IN.SPD)), y)[1]
    check(y, {3, 3}, g, {3, 3}, flat_of(IN.GENERAL))
  end)

  it("matrix_solve and matrix_triangular_solve, in the matrix and in rhs", function()
    for _, adjoint in ipairs({false, true}) do
      local a = tf.placeholder(tf.float64, {3, 3})
      check(a, {3, 3}, tf.matrix_solve(a, c(IN.RHS), adjoint), {3, 2}, flat_of(IN.GENERAL))
      local b = tf.placeholder(tf.float64, {3, 2})
      check(b, {3, 2}, tf.matrix_solve(c(IN.GENERAL), b, adjoint), {3, 2}, flat_of(IN.RHS))
      for _, lower in ipairs({true, false}) do
        local t = tf.placeholder(tf.float64, {3, 3})
        local shifted = {}
        for i, row in ipairs(IN.GENERAL) do
          shifted[i] = {unpack(row)}
          shifted[i][i] = shifted[i][i] + 2
        end
        check(t, {3, 3}, tf.matrix_triangular_solve(t, c(IN.RHS), lower, adjoint), {3, 2}, flat_of(shifted))
        local r = tf.placeholder(tf.float64, {3, 2})
        check(r, {3, 2}, tf.matrix_triangular_solve(c(shifted), r, lower, adjoint), {3, 2}, flat_of(IN.RHS))
      end
    end
  end)

  it("det, slogdet and logdet", function()
    local x = tf.placeholder(tf.float64, {2, 3, 3})
    check(x, {2, 3, 3}, tf.matrix_determinant(x), {2}, flat_of(IN.BATCH))
    local _, log_abs = tf.linalg.slogdet(x)
    check(x, {2, 3, 3}, log_abs, {2}, flat_of(IN.BATCH))
    local s = tf.placeholder(tf.float64, {3, 3})
    check(s, {3, 3}, tf.linalg.logdet(sym(s)), {}, flat_of(IN.SPD))
    -- only the sign fetched: no gradient flows
    local sign = tf.linalg.slogdet(s)
    assert.is_nil(tf.gradients(sign, s)[1])
  end)

  it("cholesky, through a symmetrized input as TensorFlow's test", function()
    local x = tf.placeholder(tf.float64, {2, 3, 3})
    local spd2 = {IN.SPD, {{5, 1, 2}, {1, 3, 3}, {2, 3, 6.5}}}
    check(x, {2, 3, 3}, tf.cholesky(sym(x)), {2, 3, 3}, flat_of(spd2))
  end)

  it("lu, and solves through its factors", function()
    local x = tf.placeholder(tf.float64, {2, 4, 4})
    local lu, p = tf.linalg.lu(x)
    check(x, {2, 4, 4}, lu, {2, 4, 4}, flat_of(V.lu_input))
    check(x, {2, 4, 4}, tf.linalg.lu_solve(lu, p, c({{{1}, {2}, {3}, {4}}, {{-1}, {0}, {2}, {1}}})), {2, 4, 1},
          flat_of(V.lu_input))
    check(x, {2, 4, 4}, tf.linalg.lu_reconstruct(lu, p), {2, 4, 4}, flat_of(V.lu_input))
  end)

  it("qr of tall and square matrices; wide ones are refused as TensorFlow's", function()
    for _, case in ipairs({{IN.TALL, {3, 2}}, {IN.GENERAL, {3, 3}}}) do
      local x = tf.placeholder(tf.float64, case[2])
      local q, r = tf.qr(x)
      check(x, case[2], q, case[2], flat_of(case[1]))
      check(x, case[2], r, {case[2][2], case[2][2]}, flat_of(case[1]))
      check(x, case[2], tf.reduce_sum(q * 2) + tf.reduce_sum(tf.square(r)), {}, flat_of(case[1]))
    end
    local q = tf.qr(tf.placeholder(tf.float64, {2, 3}))
    local err = error_of(tf.gradients, q, q.op.inputs[1])
    assert.truthy(err:find("the gradient of Qr is defined only for matrices with at least as many rows as columns",
                           1, true), err)
  end)

  it("svd: values alone, and values and vectors of tall, wide and square matrices", function()
    for _, case in ipairs({{IN.TALL, {3, 2}}, {IN.WIDE, {2, 3}}, {IN.GENERAL, {3, 3}}}) do
      local shape, k = case[2], math.min(case[2][1], case[2][2])
      local x = tf.placeholder(tf.float64, shape)
      check(x, shape, tf.svd(x, {compute_uv = false}), {k}, flat_of(case[1]))
      local s, u, v = tf.svd(x)
      check(x, shape, s, {k}, flat_of(case[1]))
      check(x, shape, u, {shape[1], k}, flat_of(case[1]))
      check(x, shape, v, {shape[2], k}, flat_of(case[1]))
    end
    local x = tf.placeholder(tf.float64, {3, 3})
    local _, u = tf.svd(x, true)
    check(x, {3, 3}, u, {3, 3}, flat_of(IN.GENERAL))
    local _, u2 = tf.svd(tf.placeholder(tf.float64, {3, 2}), true)
    assert.truthy(error_of(tf.gradients, u2, u2.op.inputs[1]):find(
      "the gradient of Svd with full_matrices = true is implemented only for square matrices", 1, true))
  end)

  it("self_adjoint_eig: values and vectors (only the lower triangle is read)", function()
    local x = tf.placeholder(tf.float64, {2, 3, 3})
    local e, v = tf.self_adjoint_eig(x)
    check(x, {2, 3, 3}, e, {2, 3}, flat_of(V.eigh_input))
    check(x, {2, 3, 3}, v, {2, 3, 3}, flat_of(V.eigh_input))
    check(x, {2, 3, 3}, tf.linalg.eigvalsh(x), {2, 3}, flat_of(V.eigh_input))
    local s = tf.placeholder(tf.float64, {3, 3})
    local _, vs = tf.self_adjoint_eig(sym(s))
    check(s, {3, 3}, vs, {3, 3}, flat_of(IN.SPD))
  end)

  it("band_part, diag, diag_part, set_diag, trace, matrix_transpose, einsum and tensordot", function()
    local x = tf.placeholder(tf.float64, {2, 3, 4})
    check(x, {2, 3, 4}, tf.matrix_band_part(x, 1, 0), {2, 3, 4})
    check(x, {2, 3, 4}, tf.matrix_diag_part(x), {2, 3})
    check(x, {2, 3, 4}, tf.matrix_set_diag(x, c({{1, 2, 3}, {4, 5, 6}})), {2, 3, 4})
    check(x, {2, 3, 4}, tf.matrix_transpose(x), {2, 4, 3})
    check(x, {2, 3, 4}, tf.trace(x), {2})
    local d = tf.placeholder(tf.float64, {2, 3})
    check(d, {2, 3}, tf.matrix_diag(d), {2, 3, 3})
    check(d, {2, 3}, tf.matrix_set_diag(c(V.M34), d[0]), {3, 4})
    check(d, {2, 3}, tf.diag(d), {2, 3, 2, 3})
    check(x, {2, 3, 4}, tf.einsum("bij,jk->bik", x, c({{1, 2}, {3, 4}, {5, 6}, {7, 8}})), {2, 3, 2})
    check(x, {2, 3, 4}, tf.einsum("bij,bij->b", x, x), {2})
    local sq = tf.placeholder(tf.float64, {3, 3})
    check(sq, {3, 3}, tf.einsum("ii->", sq), {})
    check(x, {2, 3, 4}, tf.tensordot(x, c({{1, 2, 3, 4}, {5, 6, 7, 8}, {1, 0, 1, 0}}), {{1, 2}, {0, 1}}), {2})
  end)

  it("matvec, cross, norm and lstsq", function()
    local m = tf.placeholder(tf.float64, {3, 2})
    check(m, {3, 2}, tf.linalg.matvec(m, c({1, -2})), {3}, flat_of(IN.TALL))
    check(m, {3, 2}, tf.linalg.lstsq(m, c(IN.RHS)), {2, 2}, flat_of(IN.TALL))
    check(m, {3, 2}, tf.linalg.lstsq(tf.matrix_transpose(m), c({{1}, {2}}), 0.1), {3, 1}, flat_of(IN.TALL))
    check(m, {3, 2}, tf.norm(m), {}, flat_of(IN.TALL))
    check(m, {3, 2}, tf.norm(m, 3, 1), {3}, flat_of(IN.TALL))
    check(m, {3, 2}, tf.norm(m, 2, {0, 1}), {}, flat_of(IN.TALL))
    local v = tf.placeholder(tf.float64, {2, 3})
    check(v, {2, 3}, tf.linalg.cross(v, c({{0.5, -1, 2}, {3, 1, -2}})), {2, 3})
  end)
end)
