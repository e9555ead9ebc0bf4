-- ops/linalg.lua — tf.linalg: the wrappers of src/ops/linalg.c (inverse,
-- solves, determinants, Cholesky, LU, QR, SVD, eigh, band part, diagonals) under
-- their tf.linalg names and TensorFlow 1.x aliases (tf.matrix_inverse,
-- tf.cholesky, tf.qr, tf.svd, tf.self_adjoint_eig, ...), and the composites
-- built from ops: einsum, tensordot, trace, logdet, matrix_transpose,
-- cholesky_solve, matvec, cross, norm, lstsq, lu_solve, lu_reconstruct,
-- lu_matrix_inverse, tf.diag and tf.diag_part.
-- Composites need no gradient of their own.
local core = require("moonflow.core")
local G = require("moonflow.graph")
local args = require("moonflow.args")

local fail, options, check_bool, name_of = core.fail, args.options, args.check_bool, args.name_of
local is_tensor, dtypes = G.is_tensor, core.dtypes

-- The static dims of t, or fail naming fname when its rank is unknown.
local function known_rank(fname, what, t)
  local dims = t:get_shape().dims
  if not dims then
    fail(string.format("%s: %s needs a known rank, got a tensor of unknown shape; set_shape it", fname, what))
  end
  return dims
end

return function(tf, ops)
  tf.linalg = tf.linalg or {}
  local linalg = tf.linalg

  -- Registers fn under ops[name] (so also tf.name and a Tensor method) and
  -- each tf.linalg name in `also`.
  local function define(name, fn, also)
    ops[name] = fn
    for _, n in ipairs(also or {}) do linalg[n] = fn end
  end

  -- One matrix input, an op with an `adjoint` flag (MatrixInverse) or none.
  local function unary(op_type, fname, flag)
    local names = flag and {flag, "name"} or {"name"}
    return function(input, ...)
      local o = options(fname, names, ...)
      local attrs = flag and {[flag] = check_bool(o[flag], fname, flag) or false} or nil
      return G.op{op_type, inputs = {G.convert(input)}, attrs = attrs, name = o.name}
    end
  end

  -- tf.matrix_inverse(input, adjoint, name) (tf.linalg.inv): the inverse of
  -- each matrix (of its transpose with adjoint); "Input is not invertible."
  -- when one is singular.
  define("matrix_inverse", unary("MatrixInverse", "tf.matrix_inverse", "adjoint"), {"inv"})
  -- tf.cholesky(input, name): the lower triangular L with L L^T = input, read
  -- from input's lower triangle.
  define("cholesky", unary("Cholesky", "tf.cholesky"), {"cholesky"})
  -- tf.matrix_determinant(input, name) (tf.linalg.det).
  define("matrix_determinant", unary("MatrixDeterminant", "tf.matrix_determinant"), {"det"})
  -- tf.linalg.slogdet(input, name): sign, log|det| (tf.log_matrix_determinant).
  define("log_matrix_determinant", unary("LogMatrixDeterminant", "tf.log_matrix_determinant"), {"slogdet"})

  -- Two operands, matrix and rhs, of one dtype (a Lua rhs takes the matrix's).
  local function operands(matrix, rhs)
    local a = G.convert(matrix, nil, G.graph_of_args(matrix, rhs))
    return a, G.convert(rhs, a.dtype, a.graph)
  end

  -- tf.matrix_solve(matrix, rhs, adjoint, name) (tf.linalg.solve): X with
  -- matrix X = rhs (matrix^T X = rhs with adjoint).
  define("matrix_solve", function(matrix, rhs, ...)
    local fname = "tf.matrix_solve"
    local o = options(fname, {"adjoint", "name"}, ...)
    local a, b = operands(matrix, rhs)
    return G.op{"MatrixSolve", inputs = {a, b}, attrs = {adjoint = check_bool(o.adjoint, fname, "adjoint") or false},
                name = o.name}
  end, {"solve"})

  -- tf.matrix_triangular_solve(matrix, rhs, lower, adjoint, name)
  -- (tf.linalg.triangular_solve): lower (default true) says which triangle
  -- of matrix is read.
  define("matrix_triangular_solve", function(matrix, rhs, ...)
    local fname = "tf.matrix_triangular_solve"
    local o = options(fname, {"lower", "adjoint", "name"}, ...)
    local a, b = operands(matrix, rhs)
    local lower = check_bool(o.lower, fname, "lower")
    return G.op{"MatrixTriangularSolve", inputs = {a, b},
                attrs = {lower = lower ~= false, adjoint = check_bool(o.adjoint, fname, "adjoint") or false},
                name = o.name}
  end, {"triangular_solve"})

  -- tf.linalg.cholesky_solve(chol, rhs, name): X with A X = rhs for
  -- A = chol chol^T (chol from tf.cholesky): two triangular solves.
  function linalg.cholesky_solve(chol, rhs, name)
    local fname = "tf.linalg.cholesky_solve"
    name = name_of(name, fname)
    local l, b = operands(chol, rhs)
    local y = ops.matrix_triangular_solve(l, b, {lower = true})
    return ops.matrix_triangular_solve(l, y, {lower = true, adjoint = true, name = name or "cholesky_solve"})
  end
  ops.cholesky_solve = linalg.cholesky_solve

  -- tf.qr(input, full_matrices, name) (tf.linalg.qr): q, r.
  define("qr", function(input, ...)
    local o = options("tf.qr", {"full_matrices", "name"}, ...)
    return G.op{"Qr", inputs = {G.convert(input)},
                attrs = {full_matrices = check_bool(o.full_matrices, "tf.qr", "full_matrices") or false},
                name = o.name}
  end, {"qr"})

  -- tf.svd(tensor, full_matrices, compute_uv, name) (tf.linalg.svd): s, u, v
  -- (tensor = u diag(s) v^T, s descending), or s alone without compute_uv.
  define("svd", function(tensor, ...)
    local fname = "tf.svd"
    local o = options(fname, {"full_matrices", "compute_uv", "name"}, ...)
    local uv = check_bool(o.compute_uv, fname, "compute_uv") ~= false
    local s, u, v = G.op{"Svd", inputs = {G.convert(tensor)},
                         attrs = {full_matrices = check_bool(o.full_matrices, fname, "full_matrices") or false,
                                  compute_uv = uv}, name = o.name}
    if not uv then return s end
    return s, u, v
  end, {"svd"})

  -- tf.self_adjoint_eig(tensor, name) (tf.linalg.eigh): e ascending and v
  -- with the eigenvectors in its columns, read from tensor's lower triangle;
  -- tf.self_adjoint_eigvals (tf.linalg.eigvalsh): e alone.
  define("self_adjoint_eig", function(tensor, name)
    return G.op{"SelfAdjointEigV2", inputs = {G.convert(tensor)}, attrs = {compute_v = true},
                name = name_of(name, "tf.self_adjoint_eig")}
  end, {"eigh"})
  define("self_adjoint_eigvals", function(tensor, name)
    local e = G.op{"SelfAdjointEigV2", inputs = {G.convert(tensor)}, attrs = {compute_v = false},
                   name = name_of(name, "tf.self_adjoint_eigvals")}
    return e
  end, {"eigvalsh"})

  -- tf.matrix_band_part(input, num_lower, num_upper, name)
  -- (tf.linalg.band_part): the band of each matrix, num_lower diagonals
  -- below the main one and num_upper above (negative: all); zeros elsewhere.
  define("matrix_band_part", function(input, num_lower, num_upper, name)
    local fname = "tf.matrix_band_part"
    local x = G.convert(input, nil, G.graph_of_args(input, num_lower, num_upper))
    local function bound(v, what)
      if v == nil then fail(fname .. ": " .. what .. " is required") end
      if not is_tensor(v) then v = G.convert(args.int_arg(v, fname, what), dtypes.int64, x.graph) end
      return v
    end
    return G.op{"MatrixBandPart", inputs = {x, bound(num_lower, "num_lower"), bound(num_upper, "num_upper")},
                name = name_of(name, fname)}
  end, {"band_part"})

  -- tf.matrix_diag(diagonal, name) (tf.linalg.diag): [..., N] -> [..., N, N];
  -- tf.matrix_diag_part(input, name) (tf.linalg.diag_part): [..., M, N] ->
  -- [..., min(M, N)]; tf.matrix_set_diag(input, diagonal, name)
  -- (tf.linalg.set_diag).
  define("matrix_diag", function(diagonal, name)
    return G.op{"MatrixDiag", inputs = {G.convert(diagonal)}, name = name_of(name, "tf.matrix_diag")}
  end, {"diag"})
  define("matrix_diag_part", function(input, name)
    return G.op{"MatrixDiagPart", inputs = {G.convert(input)}, name = name_of(name, "tf.matrix_diag_part")}
  end, {"diag_part"})
  define("matrix_set_diag", function(input, diagonal, name)
    local x = G.convert(input, nil, G.graph_of_args(input, diagonal))
    return G.op{"MatrixSetDiag", inputs = {x, G.convert(diagonal, x.dtype, x.graph)},
                name = name_of(name, "tf.matrix_set_diag")}
  end, {"set_diag"})

  -- tf.matrix_transpose(a, name) (tf.linalg.matrix_transpose,
  -- tf.linalg.transpose, tf.linalg.adjoint: the dtypes are real): the last
  -- two dims swapped; a needs a known rank >= 2.
  define("matrix_transpose", function(a, ...)
    local fname = "tf.matrix_transpose"
    local o = options(fname, {"name", "conjugate"}, ...)
    check_bool(o.conjugate, fname, "conjugate")
    local x = G.convert(a)
    local dims = known_rank(fname, "a", x)
    if #dims < 2 then
      fail(string.format("%s: a must have rank >= 2, got shape %s", fname, tostring(x:get_shape())))
    end
    local perm = {}
    for i = 1, #dims do perm[i] = i - 1 end
    perm[#dims - 1], perm[#dims] = #dims - 1, #dims - 2
    return ops.transpose(x, perm, o.name or "matrix_transpose")
  end, {"matrix_transpose", "transpose", "adjoint"})

  -- tf.trace(x, name) (tf.linalg.trace): the sum of each matrix's diagonal.
  define("trace", function(x, name)
    name = name_of(name, "tf.trace")
    return ops.reduce_sum(ops.matrix_diag_part(x), {axis = -1, name = name or "trace"})
  end, {"trace"})

  -- tf.linalg.logdet(matrix, name): log det of Hermitian positive definite
  -- matrices, 2 sum(log(diag(cholesky(matrix)))) as TensorFlow's.
  function linalg.logdet(matrix, name)
    name = name_of(name, "tf.linalg.logdet")
    local d = ops.matrix_diag_part(ops.cholesky(matrix))
    return ops.multiply(ops.reduce_sum(ops.log(d), -1), 2, name or "logdet")
  end
  ops.logdet = linalg.logdet

  -- The static dim `axis` of t, or a scalar tensor reading it when unknown.
  local function dim_of(t, axis)
    local d = t:get_shape().dims[axis + 1]
    if d >= 0 then return d end
    return ops.shape(t)[axis]
  end

  -- tf.diag(diagonal, name) (tf.linalg.tensor_diag): rank k -> rank 2k,
  -- out[i..., i...] = diagonal[i...], zeros elsewhere.
  local function tensor_diag(diagonal, name)
    local fname = "tf.diag"
    name = name_of(name, fname)
    local x = G.convert(diagonal)
    local dims = known_rank(fname, "diagonal", x)
    local shape = {}
    for i = 1, #dims do shape[i], shape[#dims + i] = dim_of(x, i - 1), dim_of(x, i - 1) end
    if #dims == 0 then return ops.identity(x, name or "diag") end
    return ops.reshape(ops.matrix_diag(ops.reshape(x, {-1})), shape, name or "diag")
  end
  -- tf.diag_part(input, name) (tf.linalg.tensor_diag_part): rank 2k with
  -- shape s ++ s -> shape s, the elements input[i..., i...].
  local function tensor_diag_part(input, name)
    local fname = "tf.diag_part"
    name = name_of(name, fname)
    local x = G.convert(input)
    local dims = known_rank(fname, "input", x)
    local k = #dims / 2
    if #dims == 0 or #dims % 2 ~= 0 then
      fail(string.format("%s: input must have an even, non-zero rank, got shape %s", fname, tostring(x:get_shape())))
    end
    local half, count = {}, 1
    for i = 1, k do
      local a, b = dims[i], dims[k + i]
      if a >= 0 and b >= 0 and a ~= b then
        fail(string.format("%s: dims %d and %d of input must be equal, got shape %s", fname, i - 1, k + i - 1,
                           tostring(x:get_shape())))
      end
      half[i] = dim_of(x, i - 1)
      count = (type(half[i]) == "number" and type(count) == "number") and count * half[i] or -1
    end
    local square = ops.reshape(x, {count, count == -1 and ops.reduce_prod(ops.stack(half)) or count})
    return ops.reshape(ops.matrix_diag_part(square), half, name or "diag_part")
  end
  ops.diag, ops.diag_part = tensor_diag, tensor_diag_part
  linalg.tensor_diag, linalg.tensor_diag_part = tensor_diag, tensor_diag_part
  linalg.eye = ops.eye
  linalg.matmul = ops.matmul

  -- tf.linalg.lu(input, output_idx_type, name): lu, p with P input = L U, L
  -- unit lower triangular below lu's diagonal, U upper on and above it, and
  -- (P input)[i] = input[p[i]] (p int32 unless output_idx_type is int64).
  function linalg.lu(input, ...)
    local fname = "tf.linalg.lu"
    local o = options(fname, {"output_idx_type", "name"}, ...)
    local index = o.output_idx_type and core.as_dtype(o.output_idx_type, fname) or dtypes.int32
    return G.op{"Lu", inputs = {G.convert(input)}, attrs = {output_idx_type = index}, name = o.name}
  end

  -- The factors in tf.linalg.lu's results: L (unit lower triangular), U, and
  -- P as one-hot rows of perm.
  local function lu_factors(fname, lower_upper, perm)
    local lu = G.convert(lower_upper)
    local dims = known_rank(fname, "lower_upper", lu)
    if #dims < 2 then
      fail(string.format("%s: lower_upper must have rank >= 2, got shape %s", fname, tostring(lu:get_shape())))
    end
    local ones = ops.ones_like(ops.matrix_diag_part(lu))
    local l = ops.matrix_set_diag(ops.matrix_band_part(lu, -1, 0), ones)
    local p = ops.one_hot(G.convert(perm, dtypes.int32, lu.graph), dim_of(lu, #dims - 1), {dtype = lu.dtype})
    return lu, l, ops.matrix_band_part(lu, 0, -1), p, ones
  end

  -- tf.linalg.lu_reconstruct(lower_upper, perm, validate_args, name):
  -- P^T L U, the matrix tf.linalg.lu factored.
  function linalg.lu_reconstruct(lower_upper, perm, validate_args, name)
    local fname = "tf.linalg.lu_reconstruct"
    check_bool(validate_args, fname, "validate_args")
    local _, l, u, p = lu_factors(fname, lower_upper, perm)
    return ops.matmul(p, ops.matmul(l, u), {transpose_a = true, name = name_of(name, fname) or "lu_reconstruct"})
  end

  -- X with L U X = P rhs: two triangular solves.
  local function lu_solved(l, u, p, rhs, name)
    local y = ops.matrix_triangular_solve(l, ops.matmul(p, rhs), {lower = true})
    return ops.matrix_triangular_solve(u, y, {lower = false, name = name})
  end

  -- tf.linalg.lu_solve(lower_upper, perm, rhs, validate_args, name): X with
  -- A X = rhs for the A = P^T L U that tf.linalg.lu factored.
  function linalg.lu_solve(lower_upper, perm, rhs, validate_args, name)
    local fname = "tf.linalg.lu_solve"
    check_bool(validate_args, fname, "validate_args")
    local lu, l, u, p = lu_factors(fname, lower_upper, perm)
    return lu_solved(l, u, p, G.convert(rhs, lu.dtype, lu.graph), name_of(name, fname) or "lu_solve")
  end

  -- tf.linalg.lu_matrix_inverse(lower_upper, perm, validate_args, name):
  -- the inverse of A = P^T L U.
  function linalg.lu_matrix_inverse(lower_upper, perm, validate_args, name)
    local fname = "tf.linalg.lu_matrix_inverse"
    check_bool(validate_args, fname, "validate_args")
    local _, l, u, p, ones = lu_factors(fname, lower_upper, perm)
    return lu_solved(l, u, p, ops.matrix_diag(ones), name_of(name, fname) or "lu_matrix_inverse")
  end

  -- tf.linalg.matvec(a, b, transpose_a, name): the product of each matrix of
  -- a [..., M, N] with the vector of b [..., N] (a^T's with transpose_a).
  function linalg.matvec(a, b, ...)
    local fname = "tf.linalg.matvec"
    local o = options(fname, {"transpose_a", "adjoint_a", "name"}, ...)
    local trans = check_bool(o.transpose_a, fname, "transpose_a") or check_bool(o.adjoint_a, fname, "adjoint_a")
    local x, v = operands(a, b)
    local product = ops.matmul(x, ops.expand_dims(v, -1), {transpose_a = trans or false})
    return ops.squeeze(product, {-1}, o.name or "matvec")
  end

  -- tf.linalg.cross(a, b, name) (tf.cross): the cross products of the 3-vectors along
  -- the last axis, a_yzx b_zxy - a_zxy b_yzx.
  function linalg.cross(a, b, name)
    local fname = "tf.linalg.cross"
    name = name_of(name, fname)
    local x, y = operands(a, b)
    for _, t in ipairs({x, y}) do
      local dims = known_rank(fname, "a and b", t)
      if #dims == 0 or (dims[#dims] ~= 3 and dims[#dims] ~= -1) then
        fail(string.format("%s: a and b must have a last dim of 3, got shape %s", fname, tostring(t:get_shape())))
      end
    end
    local function turn(t, order) return ops.gather(t, order, {axis = #t:get_shape().dims - 1}) end
    local yzx, zxy = {1, 2, 0}, {2, 0, 1}
    return ops.subtract(turn(x, yzx) * turn(y, zxy), turn(x, zxy) * turn(y, yzx), name or "cross")
  end
  ops.cross = linalg.cross

  -- tf.norm(tensor, ord, axis, keepdims, name) (tf.linalg.norm), options
  -- too: a vector norm over every element (axis nil) or along axis, or a
  -- matrix norm over a pair of axes. ord: "euclidean" (default; for
  -- matrices the Frobenius norm), "fro", 1, 2, math.huge, or for vectors
  -- any p > 0. The matrix 2-norm is the largest singular value.
  define("norm", function(tensor, ...)
    local fname = "tf.norm"
    local o = options(fname, {"ord", "axis", "keepdims", "name", "keep_dims"}, ...)
    local x = G.convert(tensor)
    local ord = o.ord == nil and "euclidean" or o.ord
    local keepdims = check_bool(o.keepdims, fname, "keepdims") or check_bool(o.keep_dims, fname, "keep_dims") or false
    local axis = o.axis
    local name = o.name or "norm"
    if axis == nil or args.is_integer(axis) or (args.is_plain(axis) and #axis == 1) then
      if not (ord == "euclidean" or ord == "fro" or (type(ord) == "number" and ord > 0)) then
        fail(string.format("%s: ord must be 'euclidean', 'fro' or a number > 0 for a vector norm, got %s", fname,
                           args.describe(ord)))
      end
      local reduce = {axis = axis, keepdims = keepdims}
      local mag = ops.abs(x)
      if ord == math.huge then return ops.identity(ops.reduce_max(mag, reduce), name) end
      if ord == 1 then return ops.identity(ops.reduce_sum(mag, reduce), name) end
      if ord == "euclidean" or ord == "fro" or ord == 2 then
        return ops.sqrt(ops.reduce_sum(ops.square(x), reduce), name)
      end
      return ops.pow(ops.reduce_sum(ops.pow(mag, ord), reduce), 1 / ord, name)
    end
    if not args.is_plain(axis) or #axis ~= 2 or not args.is_integer(axis[1]) or not args.is_integer(axis[2]) then
      fail(fname .. ": axis must be nil, an integer, or a pair of integers, got " .. args.describe(axis))
    end
    local rank = #known_rank(fname, "a matrix norm", x)
    local rows, cols = axis[1] % rank, axis[2] % rank
    if rows == cols then
      fail(string.format("%s: the two axes of a matrix norm must differ, got {%d, %d}", fname, axis[1], axis[2]))
    end
    local function keep(t)  -- the reduced axes back as size 1 when keepdims
      if not keepdims then return ops.identity(t, name) end
      local first, second = math.min(rows, cols), math.max(rows, cols)
      return ops.expand_dims(ops.expand_dims(t, first), second, name)
    end
    if ord == "euclidean" or ord == "fro" then
      return keep(ops.sqrt(ops.reduce_sum(ops.square(x), {rows, cols})))
    end
    local mag = ops.abs(x)
    if ord == 1 then  -- the largest column sum
      return keep(ops.reduce_max(ops.reduce_sum(mag, {axis = rows, keepdims = true}), {rows, cols}))
    end
    if ord == math.huge then  -- the largest row sum
      return keep(ops.reduce_max(ops.reduce_sum(mag, {axis = cols, keepdims = true}), {rows, cols}))
    end
    if ord == 2 then
      local perm = {}
      for d = 0, rank - 1 do if d ~= rows and d ~= cols then perm[#perm + 1] = d end end
      perm[#perm + 1], perm[#perm + 2] = rows, cols
      local s = ops.svd(ops.transpose(x, perm), {compute_uv = false})
      return keep(ops.reduce_max(s, -1))
    end
    fail(string.format("%s: ord must be 'euclidean', 'fro', 1, 2 or math.huge for a matrix norm, got %s", fname,
                       args.describe(ord)))
  end, {"norm"})

  -- tf.linalg.lstsq(matrix, rhs, l2_regularizer, fast, name)
  -- (tf.matrix_solve_ls): the least-squares X minimizing
  -- |matrix X - rhs|^2 + l2_regularizer |X|^2, by the normal equations and a
  -- Cholesky factorization as TensorFlow's fast path: for M >= N,
  -- (A^T A + l I) X = A^T B; for M < N, X = A^T (A A^T + l I)^-1 B (the
  -- minimum-norm solution). fast = false (TensorFlow's complete orthogonal
  -- decomposition) is not implemented.
  define("matrix_solve_ls", function(matrix, rhs, ...)
    local fname = "tf.matrix_solve_ls"
    local o = options(fname, {"l2_regularizer", "fast", "name"}, ...)
    if check_bool(o.fast, fname, "fast") == false then
      fail(fname .. ": fast = false (the complete orthogonal decomposition) is not implemented; use fast = true")
    end
    local a, b = operands(matrix, rhs)
    local dims = known_rank(fname, "matrix", a)
    if #dims < 2 then
      fail(string.format("%s: matrix must have rank >= 2, got shape %s", fname, tostring(a:get_shape())))
    end
    local m, n = dims[#dims - 1], dims[#dims]
    if m < 0 or n < 0 then
      fail(string.format("%s: matrix needs known matrix dims to pick the normal equations, got shape %s", fname,
                         tostring(a:get_shape())))
    end
    local l2 = G.convert(o.l2_regularizer or 0, a.dtype, a.graph)
    local function regularized(gram) return ops.matrix_set_diag(gram, ops.matrix_diag_part(gram) + l2) end
    local name = o.name or "matrix_solve_ls"
    if m >= n then
      local chol = ops.cholesky(regularized(ops.matmul(a, a, {transpose_a = true})))
      return linalg.cholesky_solve(chol, ops.matmul(a, b, {transpose_a = true}), name)
    end
    local chol = ops.cholesky(regularized(ops.matmul(a, a, {transpose_b = true})))
    return ops.matmul(a, linalg.cholesky_solve(chol, b), {transpose_a = true, name = name})
  end, {"lstsq"})

  -- tf.linalg.l2_normalize and tf.linalg.normalize's vector case are tf.nn's.
  linalg.l2_normalize = tf.nn.l2_normalize

  -- einsum ---------------------------------------------------------------------
  -- An operand is {t = tensor, labels = {label per axis}}; labels are
  -- letters, or "...1", "...2" ... for the axes an ellipsis stands for.

  -- The product of the dims of t at the given axes: a number, or a scalar
  -- tensor when one is unknown.
  local function dims_product(t, axes)
    local n, parts = 1, {}
    for _, a in ipairs(axes) do
      local d = dim_of(t, a)
      if type(d) == "number" then n = n * d else parts[#parts + 1] = d end
    end
    if #parts == 0 then return n end
    local p = #parts == 1 and parts[1] or ops.reduce_prod(ops.stack(parts))
    return n == 1 and p or ops.multiply(p, n)
  end

  local function index_of(list, v)
    for i, x in ipairs(list) do if x == v then return i end end
  end

  -- x's axes permuted so that its labels read `order`; no op when they do.
  local function arrange(x, labels, order)
    local perm, same = {}, true
    for i, l in ipairs(order) do
      perm[i] = index_of(labels, l) - 1
      same = same and perm[i] == i - 1
    end
    if same then return x end
    return ops.transpose(x, perm)
  end

  -- Sums x over the labels `keep` does not hold (nothing when none).
  local function sum_out(x, labels, keep)
    local axes, kept = {}, {}
    for i, l in ipairs(labels) do
      if keep[l] then kept[#kept + 1] = l else axes[#axes + 1] = i - 1 end
    end
    if #axes == 0 then return x, labels end
    return ops.reduce_sum(x, axes), kept
  end

  -- The first two positions holding one label, if any.
  local function repeated(labels)
    for i = 1, #labels do
      for j = i + 1, #labels do if labels[i] == labels[j] then return i, j end end
    end
  end

  -- A label repeated within one operand takes its diagonal: the two axes
  -- moved last and MatrixDiagPart'ed into one.
  local function take_diagonals(fname, x, labels)
    local i, j = repeated(labels)
    while i do
      local dims = x:get_shape().dims
      if dims[i] >= 0 and dims[j] >= 0 and dims[i] ~= dims[j] then
        fail(string.format("%s: label '%s' is repeated in an operand of shape %s over axes of sizes %d and %d", fname,
                           labels[i], tostring(x:get_shape()), dims[i], dims[j]))
      end
      local perm, rest = {}, {}
      for k, l in ipairs(labels) do
        if k ~= i and k ~= j then perm[#perm + 1], rest[#rest + 1] = k - 1, l end
      end
      perm[#perm + 1], perm[#perm + 2] = i - 1, j - 1
      rest[#rest + 1] = labels[i]
      x, labels = ops.matrix_diag_part(ops.transpose(x, perm)), rest
      i, j = repeated(labels)
    end
    return x, labels
  end

  -- The product of operands a and b summed over the labels in neither
  -- `keep` set, as a batched MatMul: [batch, a_free, summed] x
  -- [batch, summed, b_free]. Returns the result and its labels.
  local function contract(fname, a, la, b, lb, keep)
    local batch, summed, a_free, b_free = {}, {}, {}, {}
    for _, l in ipairs(la) do
      if index_of(lb, l) then
        if keep[l] then batch[#batch + 1] = l else summed[#summed + 1] = l end
      else
        a_free[#a_free + 1] = l
      end
    end
    for _, l in ipairs(lb) do if not index_of(la, l) then b_free[#b_free + 1] = l end end
    -- sizes of shared labels must agree (batch ones may broadcast from 1)
    local da, db = a:get_shape().dims, b:get_shape().dims
    for _, l in ipairs(la) do
      local j = index_of(lb, l)
      if j then
        local x, y = da[index_of(la, l)], db[j]
        if x >= 0 and y >= 0 and x ~= y and (not keep[l] or (x ~= 1 and y ~= 1)) then
          fail(string.format("%s: label '%s' has size %d in one operand and %d in another", fname,
                             (l:gsub("^%.%.%.%d+$", "...")), x, y))
        end
      end
    end
    local function cat(...)
      local out = {}
      for _, list in ipairs({...}) do for _, l in ipairs(list) do out[#out + 1] = l end end
      return out
    end
    local function axes(labels, of)
      local out = {}
      for i, l in ipairs(of) do out[i] = index_of(labels, l) - 1 end
      return out
    end
    local nb = #batch
    local function batch_dims(x, labels)
      local out = {}
      for i, l in ipairs(batch) do out[i] = dim_of(x, index_of(labels, l) - 1) end
      return out
    end
    local am = arrange(a, la, cat(batch, a_free, summed))
    local bm = arrange(b, lb, cat(batch, summed, b_free))
    local sa = batch_dims(a, la)
    sa[nb + 1], sa[nb + 2] = dims_product(a, axes(la, a_free)), dims_product(a, axes(la, summed))
    local sb = batch_dims(b, lb)
    sb[nb + 1], sb[nb + 2] = dims_product(b, axes(lb, summed)), dims_product(b, axes(lb, b_free))
    local c = ops.matmul(ops.reshape(am, sa), ops.reshape(bm, sb))
    -- [batch (broadcast), a_free dims, b_free dims]
    local shape = {}
    for i = 1, nb do shape[i] = dim_of(c, i - 1) end
    for _, ax in ipairs(axes(la, a_free)) do shape[#shape + 1] = dim_of(a, ax) end
    for _, ax in ipairs(axes(lb, b_free)) do shape[#shape + 1] = dim_of(b, ax) end
    return ops.reshape(c, shape), cat(batch, a_free, b_free)
  end

  -- The set of the labels of the lists given, and of `set` when given.
  local function label_set(set, ...)
    local out = {}
    for l in pairs(set or {}) do out[l] = true end
    for _, list in ipairs({...}) do for _, l in ipairs(list) do out[l] = true end end
    return out
  end

  -- The einsum of operands {t, labels} into the `out` labels: each operand
  -- summed over the labels used nowhere else, then folded into the product
  -- of those before it.
  local function einsum_of(fname, operands, out, name)
    local xs, ls = {}, {}
    for i, o in ipairs(operands) do xs[i], ls[i] = take_diagonals(fname, o.t, o.labels) end
    -- the labels still wanted once operands 1 .. i are combined
    local function wanted_after(i) return label_set(nil, out, unpack(ls, i + 1)) end
    local x, labels = sum_out(xs[1], ls[1], wanted_after(1))
    for i = 2, #xs do
      local keep = wanted_after(i)
      local y, ly = sum_out(xs[i], ls[i], label_set(keep, labels))
      x, labels = sum_out(x, labels, label_set(keep, ly))
      x, labels = contract(fname, x, labels, y, ly, keep)
    end
    return ops.identity(arrange(x, labels, out), name or "einsum")
  end

  -- The labels of one subscript string for an operand of `rank` dims
  -- (nil for the output): letters, "..." expanded to the axes it covers.
  local function parse_labels(fname, sub, rank, ellipsis_rank)
    local labels, before, after = {}, sub, nil
    local at = sub:find("...", 1, true)
    if at then before, after = sub:sub(1, at - 1), sub:sub(at + 3) end
    for c in before:gmatch(".") do labels[#labels + 1] = c end
    if at then
      local n = rank and rank - #before - #after or ellipsis_rank
      if n < 0 then
        fail(string.format("%s: subscripts '%s' name more axes than the operand's rank %d", fname, sub, rank))
      end
      for k = n, 1, -1 do labels[#labels + 1] = "..." .. k end
      for c in after:gmatch(".") do labels[#labels + 1] = c end
    end
    for _, l in ipairs(labels) do
      if not l:match("^%a$") and not l:match("^%.%.%.%d+$") then
        fail(string.format("%s: invalid subscript '%s' in '%s': subscripts are letters and '...'", fname, l, sub))
      end
    end
    return labels
  end

  -- tf.einsum(equation, ...) (tf.linalg.einsum): inputs as arguments or one
  -- list, then optionally {name=}. "ij,jk->ik", "bij,bjk->bik", "ii->i",
  -- "ij->" ...; without "->", the output is the labels used once, in
  -- alphabetical order (NumPy's rule); "..." stands for the same leading
  -- axes in each operand (broadcast where their sizes are 1). Built from
  -- transposes, reductions, diagonals and one batched MatMul per pair of
  -- operands (left to right).
  define("einsum", function(equation, ...)
    local fname = "tf.einsum"
    if type(equation) ~= "string" then fail(fname .. ": equation must be a string, got " .. args.describe(equation)) end
    local inputs, n = {...}, select("#", ...)
    local o = {}
    if n > 0 and args.is_options(inputs[n]) then
      o = options(fname, {"name"}, inputs[n])
      inputs[n], n = nil, n - 1
    end
    if n == 1 and args.is_plain(inputs[1]) and is_tensor(inputs[1][1]) then
      inputs = inputs[1]
      n = #inputs
    end
    local eq = equation:gsub("%s", "")
    local lhs, rhs = eq:match("^(.-)%->(.*)$")
    lhs = lhs or eq
    local subs = {}
    for s in (lhs .. ","):gmatch("([^,]*),") do subs[#subs + 1] = s end
    if #subs ~= n then
      fail(string.format("%s: equation '%s' has %d operand subscripts but %d inputs were given", fname, equation,
                         #subs, n))
    end
    local g = G.graph_of_args(unpack(inputs, 1, n))
    local operands, counts, ellipsis_rank, dtype = {}, {}, 0, nil
    for i = 1, n do
      local t = G.convert(inputs[i], dtype, g)
      if dtype and t.dtype ~= dtype then
        fail(string.format("%s: inputs must have one dtype, got %s and %s; use tf.cast", fname, dtype.name,
                           t.dtype.name))
      end
      dtype = t.dtype
      local dims = known_rank(fname, "input " .. i, t)
      local labels = parse_labels(fname, subs[i], #dims)
      if #labels ~= #dims then
        fail(string.format("%s: subscripts '%s' name %d axes but input %d has shape %s", fname, subs[i], #labels, i,
                           tostring(t:get_shape())))
      end
      for _, l in ipairs(labels) do
        counts[l] = (counts[l] or 0) + 1
        if l:match("^%.%.%.(%d+)$") then ellipsis_rank = math.max(ellipsis_rank, tonumber(l:match("%d+"))) end
      end
      operands[i] = {t = t, labels = labels}
    end
    local out
    if rhs then
      out = parse_labels(fname, rhs, nil, ellipsis_rank)
      local seen = {}
      for _, l in ipairs(out) do
        if seen[l] then
          fail(string.format("%s: output subscript '%s' appears more than once in '%s'", fname, l, rhs))
        end
        if not counts[l] then
          fail(string.format("%s: output subscript '%s' appears in no input's subscripts in '%s'", fname, l, equation))
        end
        seen[l] = true
      end
    else
      out = {}
      for k = ellipsis_rank, 1, -1 do out[#out + 1] = "..." .. k end
      local letters = {}
      for l, c in pairs(counts) do if c == 1 and l:match("^%a$") then letters[#letters + 1] = l end end
      table.sort(letters)
      for _, l in ipairs(letters) do out[#out + 1] = l end
    end
    return einsum_of(fname, operands, out, o.name)
  end, {"einsum"})

  -- tf.tensordot(a, b, axes, name) (tf.linalg.tensordot): the sum over axes
  -- of a and b; axes an integer N (the last N of a with the first N of b),
  -- or a pair of axis lists (or of single axes). The result has a's other
  -- axes then b's. An einsum.
  define("tensordot", function(a, b, axes, name)
    local fname = "tf.tensordot"
    name = name_of(name, fname)
    local g = G.graph_of_args(a, b)
    local x = G.convert(a, nil, g)
    local y = G.convert(b, x.dtype, g)
    local ra, rb = #known_rank(fname, "a", x), #known_rank(fname, "b", y)
    local a_axes, b_axes
    if args.is_integer(axes) then
      if axes < 0 or axes > ra or axes > rb then
        fail(string.format("%s: axes = %d must be between 0 and the ranks of a (%d) and b (%d)", fname, axes, ra, rb))
      end
      a_axes, b_axes = {}, {}
      for i = 1, axes do a_axes[i], b_axes[i] = ra - axes + i - 1, i - 1 end
    elseif args.is_plain(axes) and #axes == 2 then
      local function list(v, what)
        return args.int_list(type(v) == "number" and {v} or v, fname, what)
      end
      a_axes, b_axes = list(axes[1], "axes[1]"), list(axes[2], "axes[2]")
      if #a_axes ~= #b_axes then
        fail(string.format("%s: axes must name as many axes of a as of b, got %d and %d", fname, #a_axes, #b_axes))
      end
    else
      fail(fname .. ": axes must be an integer or a pair of axis lists, got " .. args.describe(axes))
    end
    local letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    local la, lb, out = {}, {}, {}
    for i = 1, ra do la[i] = letters:sub(i, i) end
    for i = 1, rb do lb[i] = letters:sub(ra + i, ra + i) end
    local function axis(v, rank, what)
      local k = v < 0 and v + rank or v
      if k < 0 or k >= rank then
        fail(string.format("%s: axis %d of %s is out of range for rank %d", fname, v, what, rank))
      end
      return k + 1
    end
    local used_a, used_b = {}, {}
    for i = 1, #a_axes do
      local ia, ib = axis(a_axes[i], ra, "a"), axis(b_axes[i], rb, "b")
      if used_a[ia] then fail(fname .. ": axis " .. a_axes[i] .. " of a is given twice") end
      if used_b[ib] then fail(fname .. ": axis " .. b_axes[i] .. " of b is given twice") end
      used_a[ia], used_b[ib], lb[ib] = true, true, la[ia]
    end
    for i = 1, ra do if not index_of(lb, la[i]) then out[#out + 1] = la[i] end end
    for i = 1, rb do if not used_b[i] then out[#out + 1] = lb[i] end end
    return einsum_of(fname, {{t = x, labels = la}, {t = y, labels = lb}}, out, name or "tensordot")
  end, {"tensordot"})
end
