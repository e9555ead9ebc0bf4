/* linalg.c — tf.linalg's matrix ops, batched over the leading dims as
 * TensorFlow's are, with their gradient rules:
 * - LAPACK through OpenBLAS: MatrixInverse, MatrixSolve, MatrixDeterminant,
 *   LogMatrixDeterminant, Lu (all LU), Cholesky, Qr, Svd, SelfAdjointEigV2,
 *   and MatrixTriangularSolve (BLAS trsm).
 * - Layout: MatrixBandPart, MatrixDiag, MatrixDiagPart, MatrixSetDiag (any dtype).
 * einsum, tensordot, trace, logdet, matrix_transpose, tf.diag and the like
 * are composites of these and other ops (lua/moonflow/ops/linalg.lua).
 *
 * The LAPACK ops take float32 and float64; both are factored in double
 * precision (each matrix is copied into a column-major double work buffer,
 * which is also the layout LAPACK wants), so float32 results are the float64
 * ones rounded: as accurate as float32 can hold, at most a few ulps from
 * TensorFlow's float32 LAPACK results. Like TensorFlow's kernels they read
 * only the lower triangle of the input where it must be symmetric
 * (Cholesky, SelfAdjointEigV2). */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "kernels/helpers.h"
#include "ops/matmul.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* LAPACK's Fortran interface as OpenBLAS exports it (Debian's libopenblas-dev
 * ships no LAPACKE): arguments by reference, matrices column-major, and after
 * the others a hidden length for each character argument (gfortran's ABI). */
void dgetrf_(const blasint *m, const blasint *n, double *a, const blasint *lda, blasint *ipiv, blasint *info);
void dgetrs_(const char *trans, const blasint *n, const blasint *nrhs, const double *a, const blasint *lda,
             const blasint *ipiv, double *b, const blasint *ldb, blasint *info, size_t trans_len);
void dpotrf_(const char *uplo, const blasint *n, double *a, const blasint *lda, blasint *info, size_t uplo_len);
void dgeqrf_(const blasint *m, const blasint *n, double *a, const blasint *lda, double *tau, double *work,
             const blasint *lwork, blasint *info);
void dorgqr_(const blasint *m, const blasint *n, const blasint *k, double *a, const blasint *lda, const double *tau,
             double *work, const blasint *lwork, blasint *info);
void dgesdd_(const char *jobz, const blasint *m, const blasint *n, double *a, const blasint *lda, double *s,
             double *u, const blasint *ldu, double *vt, const blasint *ldvt, double *work, const blasint *lwork,
             blasint *iwork, blasint *info, size_t jobz_len);
void dsyevd_(const char *jobz, const char *uplo, const blasint *n, double *a, const blasint *lda, double *w,
             double *work, const blasint *lwork, blasint *iwork, const blasint *liwork, blasint *info,
             size_t jobz_len, size_t uplo_len);

static const unsigned FLOAT_TYPES = MF_DTYPE_MASK(MF_FOR_FLOAT_TYPES);
static const unsigned INDEX_TYPES = (1u << MF_INT32) | (1u << MF_INT64);

/* ---------- shape inference ---------- */

/* Input i is a float32/float64 batch of matrices (rank >= 2), square when
 * `square`; `what` names it in errors. */
static mf_code check_matrices(mf_infer_ctx *ic, int i, const char *what, bool square) {
  char has[64], buf[160];
  snprintf(has, sizeof has, "%s has", what);
  if (mf_check_dtype(ic, i, has, FLOAT_TYPES)) return ic->status->code;
  const mf_shape *s = &ic->in_shapes[i];
  if (s->rank < 0) return MF_OK;
  if (s->rank < 2)
    return MF_INVALID(ic->status, "%s: %s must have rank >= 2 (a matrix or a batch of them), got shape %s",
                      ic->op_name, what, mf_shape_str(s, buf, sizeof buf));
  int64_t r = s->dims[s->rank - 2], c = s->dims[s->rank - 1];
  if (square && r >= 0 && c >= 0 && r != c)
    return MF_INVALID(ic->status, "%s: %s must be a square matrix or a batch of them, got shape %s", ic->op_name,
                      what, mf_shape_str(s, buf, sizeof buf));
  return MF_OK;
}

/* s with its last `drop` dims replaced by the n dims `tail` (-1 unknown);
 * unknown when s is. */
static mf_shape batch_with(const mf_shape *s, int drop, int n, const int64_t *tail) {
  if (s->rank < 0) return mf_shape_unknown();
  mf_shape out = mf_shape_make(s->rank - drop, s->dims);
  for (int k = 0; k < n; k++) out.dims[out.rank++] = tail[k];
  return out;
}

static int64_t dim_from_end(const mf_shape *s, int k) { return s->rank < 0 ? -1 : s->dims[s->rank - k]; }

/* MatrixInverse, Cholesky: one square matrix in, one of its shape out. */
static mf_code square_infer(mf_infer_ctx *ic) {
  if (check_matrices(ic, 0, "input", true)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

/* MatrixDeterminant: a scalar per matrix; LogMatrixDeterminant: two. */
static mf_code determinant_infer(mf_infer_ctx *ic) {
  if (check_matrices(ic, 0, "input", true)) return ic->status->code;
  for (int k = 0; k < ic->num_outputs; k++) {
    ic->out_dtypes[k] = ic->in_dtypes[0];
    ic->out_shapes[k] = batch_with(&ic->in_shapes[0], 2, 0, NULL);
  }
  return MF_OK;
}

/* MatrixSolve, MatrixTriangularSolve: matrix [..., M, M] and rhs [..., M, K]
 * with the same batch dims; the result has rhs's shape. */
static mf_code solve_infer(mf_infer_ctx *ic) {
  if (check_matrices(ic, 0, "matrix", true) || check_matrices(ic, 1, "rhs", false) ||
      mf_check_same_dtype(ic, 0, "matrix", 1, "rhs"))
    return ic->status->code;
  const mf_shape *a = &ic->in_shapes[0], *b = &ic->in_shapes[1];
  ic->out_dtypes[0] = ic->in_dtypes[1];
  ic->out_shapes[0] = *b;
  if (a->rank < 0 || b->rank < 0) return MF_OK;
  bool fits = a->rank == b->rank;
  for (int d = 0; fits && d < a->rank; d++)
    if (d != a->rank - 1 && a->dims[d] >= 0 && b->dims[d] >= 0) fits = a->dims[d] == b->dims[d];
  if (!fits) {
    char sa[160], sb[160];
    return MF_INVALID(ic->status,
                      "%s: matrix of shape %s and rhs of shape %s do not fit: rhs must have the matrix's batch "
                      "dims and as many rows as the matrix [..., M, M] (rhs [..., M, K])",
                      ic->op_name, mf_shape_str(a, sa, sizeof sa), mf_shape_str(b, sb, sizeof sb));
  }
  for (int d = 0; d < a->rank - 1; d++)  /* batch dims and rows known from the matrix */
    if (ic->out_shapes[0].dims[d] < 0) ic->out_shapes[0].dims[d] = a->dims[d];
  return MF_OK;
}

/* The rows of the reduced factors: min(M, N), unknown when either is. */
static int64_t min_dim(int64_t m, int64_t n) { return m < 0 || n < 0 ? (m == 0 || n == 0 ? 0 : -1) : m < n ? m : n; }

static const int64_t EMPTY_VECTOR[1] = {0};

/* Lu: lu [..., M, M] and the permutation p [..., M] (output_idx_type,
 * int32 or int64). */
static mf_code lu_infer(mf_infer_ctx *ic) {
  if (check_matrices(ic, 0, "input", true)) return ic->status->code;
  mf_dtype index = mf_attr_type(ic->attrs, "output_idx_type", MF_INT32);
  if (index != MF_INT32 && index != MF_INT64)
    return MF_INVALID(ic->status, "%s: output_idx_type must be int32 or int64, got %s", ic->op_name,
                      mf_dtype_name(index));
  const mf_shape *a = &ic->in_shapes[0];
  int64_t n = dim_from_end(a, 1);
  if (n < 0) n = dim_from_end(a, 2);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = index;
  ic->out_shapes[0] = batch_with(a, 2, 2, (int64_t[]){n, n});
  ic->out_shapes[1] = batch_with(a, 2, 1, &n);
  return MF_OK;
}

/* Qr: q [..., M, P], r [..., P, N], P = M with full_matrices, else min(M, N). */
static mf_code qr_infer(mf_infer_ctx *ic) {
  if (check_matrices(ic, 0, "input", false)) return ic->status->code;
  const mf_shape *a = &ic->in_shapes[0];
  int64_t m = dim_from_end(a, 2), n = dim_from_end(a, 1);
  int64_t p = mf_attr_bool(ic->attrs, "full_matrices", false) ? m : min_dim(m, n);
  ic->out_dtypes[0] = ic->out_dtypes[1] = ic->in_dtypes[0];
  ic->out_shapes[0] = batch_with(a, 2, 2, (int64_t[]){m, p});
  ic->out_shapes[1] = batch_with(a, 2, 2, (int64_t[]){p, n});
  return MF_OK;
}

/* Svd: s [..., P], u [..., M, M or P], v [..., N, N or P] (P = min(M, N));
 * without compute_uv, u and v are empty vectors, as TensorFlow's. */
static mf_code svd_infer(mf_infer_ctx *ic) {
  if (check_matrices(ic, 0, "input", false)) return ic->status->code;
  const mf_shape *a = &ic->in_shapes[0];
  int64_t m = dim_from_end(a, 2), n = dim_from_end(a, 1), p = min_dim(m, n);
  bool full = mf_attr_bool(ic->attrs, "full_matrices", false);
  for (int k = 0; k < 3; k++) ic->out_dtypes[k] = ic->in_dtypes[0];
  ic->out_shapes[0] = batch_with(a, 2, 1, &p);
  if (!mf_attr_bool(ic->attrs, "compute_uv", true)) {
    ic->out_shapes[1] = ic->out_shapes[2] = mf_shape_make(1, EMPTY_VECTOR);
    return MF_OK;
  }
  ic->out_shapes[1] = batch_with(a, 2, 2, (int64_t[]){m, full ? m : p});
  ic->out_shapes[2] = batch_with(a, 2, 2, (int64_t[]){n, full ? n : p});
  return MF_OK;
}

/* SelfAdjointEigV2: e [..., N], v [..., N, N] (an empty vector without compute_v). */
static mf_code eig_infer(mf_infer_ctx *ic) {
  if (check_matrices(ic, 0, "input", true)) return ic->status->code;
  const mf_shape *a = &ic->in_shapes[0];
  int64_t n = dim_from_end(a, 1);
  if (n < 0) n = dim_from_end(a, 2);
  ic->out_dtypes[0] = ic->out_dtypes[1] = ic->in_dtypes[0];
  ic->out_shapes[0] = batch_with(a, 2, 1, &n);
  ic->out_shapes[1] = mf_attr_bool(ic->attrs, "compute_v", true) ? batch_with(a, 2, 2, (int64_t[]){n, n})
                                                                  : mf_shape_make(1, EMPTY_VECTOR);
  return MF_OK;
}

/* Input i has rank >= `least` (any dtype); `what` names it. */
static mf_code check_rank_at_least(mf_infer_ctx *ic, int i, const char *what, int least) {
  const mf_shape *s = &ic->in_shapes[i];
  char buf[160];
  if (s->rank >= 0 && s->rank < least)
    return MF_INVALID(ic->status, "%s: %s must have rank >= %d, got shape %s", ic->op_name, what, least,
                      mf_shape_str(s, buf, sizeof buf));
  return MF_OK;
}

/* MatrixBandPart's num_lower / num_upper: integer scalars, negative (keep
 * everything) or at most the rows / columns, checked when their values are
 * known. */
static mf_code check_band(const char *op, const char *what, int64_t v, int64_t limit, const char *dims,
                          mf_status *s) {
  if (limit >= 0 && v > limit)
    return MF_INVALID(s, "%s: %s must be negative or less or equal to number of %s (%lld) got: %lld", op, what, dims,
                      (long long)limit, (long long)v);
  return MF_OK;
}

static mf_code band_part_infer(mf_infer_ctx *ic) {
  if (check_rank_at_least(ic, 0, "input", 2)) return ic->status->code;
  static const char *const names[] = {NULL, "num_lower", "num_upper"};
  for (int i = 1; i <= 2; i++) {
    char has[32], buf[160];
    snprintf(has, sizeof has, "%s has", names[i]);
    if (mf_check_dtype(ic, i, has, INDEX_TYPES)) return ic->status->code;
    if (ic->in_shapes[i].rank > 0)
      return MF_INVALID(ic->status, "%s: %s must be a scalar, got shape %s", ic->op_name, names[i],
                        mf_shape_str(&ic->in_shapes[i], buf, sizeof buf));
    const mf_tensor *v = ic->in_values[i];
    if (v && check_band(ic->op_name, names[i], mf_load_int64(v->data, v->dtype, 0),
                        dim_from_end(&ic->in_shapes[0], i == 1 ? 2 : 1), i == 1 ? "rows" : "columns", ic->status))
      return ic->status->code;
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

/* MatrixDiag: [..., N] -> [..., N, N]. */
static mf_code diag_infer(mf_infer_ctx *ic) {
  const mf_shape *s = &ic->in_shapes[0];
  if (check_rank_at_least(ic, 0, "diagonal", 1)) return ic->status->code;
  if (s->rank == MF_MAX_RANK)
    return MF_INVALID(ic->status, "%s: the diagonal already has the maximum rank %d", ic->op_name, MF_MAX_RANK);
  int64_t n = dim_from_end(s, 1);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = batch_with(s, 1, 2, (int64_t[]){n, n});
  return MF_OK;
}

/* MatrixDiagPart: [..., M, N] -> [..., min(M, N)]. */
static mf_code diag_part_infer(mf_infer_ctx *ic) {
  const mf_shape *s = &ic->in_shapes[0];
  if (check_rank_at_least(ic, 0, "input", 2)) return ic->status->code;
  int64_t p = min_dim(dim_from_end(s, 2), dim_from_end(s, 1));
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = batch_with(s, 2, 1, &p);
  return MF_OK;
}

/* MatrixSetDiag: input [..., M, N], diagonal [..., min(M, N)] -> input's shape. */
static mf_code set_diag_infer(mf_infer_ctx *ic) {
  if (check_rank_at_least(ic, 0, "input", 2) || check_rank_at_least(ic, 1, "diagonal", 1) ||
      mf_check_same_dtype(ic, 0, "input", 1, "diagonal"))
    return ic->status->code;
  const mf_shape *x = &ic->in_shapes[0], *d = &ic->in_shapes[1];
  if (x->rank >= 0) {
    int64_t p = min_dim(dim_from_end(x, 2), dim_from_end(x, 1));
    mf_shape want = batch_with(x, 2, 1, &p), merged;
    if (!mf_merge_shapes(&want, d, &merged)) {
      char sx[160], sd[160];
      return MF_INVALID(ic->status,
                        "%s: the diagonal of shape %s does not fit input of shape %s: it must be [..., min(M, N)] "
                        "for input [..., M, N]",
                        ic->op_name, mf_shape_str(d, sd, sizeof sd), mf_shape_str(x, sx, sizeof sx));
    }
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = *x;
  return MF_OK;
}

/* ---------- moving matrices between tensors and work buffers ---------- */

/* Element (i, j) of work buffer w sits at w[i * rs + j * cs]: rs 1, cs the
 * rows for column-major (LAPACK's layout); rs the columns, cs 1 for the
 * transpose. */
typedef struct strides { int64_t rs, cs; } strides;
static strides col_major(int64_t rows) { return (strides){1, rows}; }
static strides row_major(int64_t cols) { return (strides){cols, 1}; }

/* The rows x cols matrix starting at element `at` of t (row-major) into w. */
static void load_matrix(double *w, strides ws, const mf_tensor *t, int64_t at, int64_t rows, int64_t cols) {
  if (t->dtype == MF_FLOAT64) {
    const double *src = (const double *)t->data + at;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++) w[i * ws.rs + j * ws.cs] = src[i * cols + j];
  } else {
    const float *src = (const float *)t->data + at;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++) w[i * ws.rs + j * ws.cs] = src[i * cols + j];
  }
}

/* w's rows x cols matrix into t at element `at` (row-major), rounded to float32 where t is. */
static void store_matrix(mf_tensor *t, int64_t at, const double *w, strides ws, int64_t rows, int64_t cols) {
  if (t->dtype == MF_FLOAT64) {
    double *dst = (double *)t->data + at;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++) dst[i * cols + j] = w[i * ws.rs + j * ws.cs];
  } else {
    float *dst = (float *)t->data + at;
    for (int64_t i = 0; i < rows; i++)
      for (int64_t j = 0; j < cols; j++) dst[i * cols + j] = (float)w[i * ws.rs + j * ws.cs];
  }
}

static void store_scalar(mf_tensor *t, int64_t at, double v) {
  if (t->dtype == MF_FLOAT64) ((double *)t->data)[at] = v;
  else ((float *)t->data)[at] = (float)v;
}

/* w (rows x cols, column-major) set to the identity. */
static void set_identity(double *w, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; j++)
    for (int64_t i = 0; i < rows; i++) w[i + j * rows] = i == j;
}

/* The work buffers of one kernel, allocated together and freed by work_free. */
typedef struct work {
  double *d;
  blasint *ints;
} work;

static mf_code work_alloc(mf_kernel_ctx *ctx, work *w, int64_t doubles, int64_t ints) {
  w->d = mf_malloc((size_t)(doubles > 0 ? doubles : 1) * sizeof(double));
  w->ints = mf_malloc((size_t)(ints > 0 ? ints : 1) * sizeof(blasint));
  if (!w->d || !w->ints) {
    mf_free(w->d);
    mf_free(w->ints);
    return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory for the work buffers of %s",
                         ctx->op->name, ctx->op->def->name);
  }
  return MF_OK;
}

static void work_free(work *w) {
  mf_free(w->d);
  mf_free(w->ints);
}

/* LAPACK counts in blasint (32-bit): a matrix dim beyond it is an error. */
static mf_code check_lapack_size(mf_kernel_ctx *ctx, int64_t m, int64_t n) {
  if (m * n <= INT_MAX / 8) return MF_OK;
  return MF_INVALID(ctx->status, "%s: a %lld x %lld matrix is too large for LAPACK's 32-bit sizes", ctx->op->name,
                    (long long)m, (long long)n);
}

/* The rows and columns of t's matrices and how many there are. */
static int64_t matrix_count(const mf_tensor *t, int64_t *m, int64_t *n) {
  *m = t->dims[t->rank - 2];
  *n = t->dims[t->rank - 1];
  return mf_dims_product(t->dims, 0, t->rank - 2);
}

/* The error for matrix b of t's batch: "Input is not invertible." and so on,
 * naming the matrix when there is a batch. */
static mf_code matrix_error(mf_kernel_ctx *ctx, const mf_tensor *t, int64_t b, const char *what) {
  char pos[128];
  if (t->rank == 2) return MF_INVALID(ctx->status, "%s: %s", ctx->op->name, what);
  return MF_INVALID(ctx->status, "%s: %s (the matrix at batch index [%s])", ctx->op->name, what,
                    mf_position_str(pos, sizeof pos, t->rank - 2, t->dims, b));
}

/* ---------- LU: MatrixInverse, MatrixSolve, determinants ---------- */

/* The LU factors of the n x n matrix b of a (its transpose when `transpose`)
 * into lu (column-major) and ipiv; false when it is singular. */
static bool lu_factor(const mf_tensor *a, int64_t b, int64_t n, bool transpose, double *lu, blasint *ipiv) {
  load_matrix(lu, transpose ? row_major(n) : col_major(n), a, b * n * n, n, n);
  blasint bn = (blasint)n, info = 0;
  dgetrf_(&bn, &bn, lu, &bn, ipiv, &info);
  return info == 0;
}

/* Solves op(A) X = B over the batch: A the n x n matrices of a, B those of
 * rhs (the identity when rhs is NULL: the inverse), X into out. op(A) is A^T
 * when `adjoint`. */
static mf_code lu_solve(mf_kernel_ctx *ctx, const mf_tensor *a, const mf_tensor *rhs, mf_tensor *out, bool adjoint,
                        const char *singular) {
  int64_t n, k, cols;
  int64_t batch = matrix_count(a, &n, &cols);
  k = rhs ? rhs->dims[rhs->rank - 1] : n;
  if (n == 0 || k == 0 || batch == 0) return MF_OK;
  if (check_lapack_size(ctx, n, n > k ? n : k)) return ctx->status->code;
  work w;
  if (work_alloc(ctx, &w, n * n + n * k, n)) return ctx->status->code;
  double *lu = w.d, *x = w.d + n * n;
  mf_code code = MF_OK;
  for (int64_t b = 0; b < batch && !code; b++) {
    if (!lu_factor(a, b, n, false, lu, w.ints)) {
      code = matrix_error(ctx, a, b, singular);
      break;
    }
    if (rhs) load_matrix(x, col_major(n), rhs, b * n * k, n, k);
    else set_identity(x, n, n);
    blasint bn = (blasint)n, bk = (blasint)k, info = 0;
    dgetrs_(adjoint ? "T" : "N", &bn, &bk, lu, &bn, w.ints, x, &bn, &info, 1);
    store_matrix(out, b * n * k, x, col_major(n), n, k);
  }
  work_free(&w);
  return code;
}

static mf_code inverse_kernel(mf_kernel_ctx *ctx) {
  return lu_solve(ctx, ctx->inputs[0], NULL, ctx->outputs[0], mf_attr_bool(ctx->attrs, "adjoint", false),
                  "Input is not invertible.");
}

static mf_code solve_kernel(mf_kernel_ctx *ctx) {
  return lu_solve(ctx, ctx->inputs[0], ctx->inputs[1], ctx->outputs[0], mf_attr_bool(ctx->attrs, "adjoint", false),
                  "Input matrix is not invertible.");
}

/* The sign of det(A) and log|det(A)| from A's LU factors: the product of
 * U's diagonal, its sign flipped by each row swap. A singular matrix has sign
 * 0 and log|det| -inf. */
static void lu_log_det(const double *lu, const blasint *ipiv, int64_t n, double *sign, double *log_abs) {
  double s = 1, l = 0;
  for (int64_t i = 0; i < n; i++) {
    double u = lu[i + i * n];
    if ((ipiv[i] != i + 1) != (u < 0)) s = -s;
    l += log(fabs(u));
  }
  *sign = isnan(l) ? l : l == -INFINITY ? 0 : s;
  *log_abs = l;
}

/* MatrixDeterminant (one output) and LogMatrixDeterminant (sign, log|det|). */
static mf_code determinant_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *a = ctx->inputs[0];
  int64_t n, cols, batch = matrix_count(a, &n, &cols);
  bool log_form = ctx->num_outputs == 2;
  if (check_lapack_size(ctx, n, n)) return ctx->status->code;
  work w;
  if (work_alloc(ctx, &w, n * n, n)) return ctx->status->code;
  for (int64_t b = 0; b < batch; b++) {
    double sign, log_abs;
    if (n > 0) lu_factor(a, b, n, false, w.d, w.ints);  /* a singular one too: U has a zero */
    if (log_form) {
      lu_log_det(w.d, w.ints, n, &sign, &log_abs);
      store_scalar(ctx->outputs[0], b, sign);
      store_scalar(ctx->outputs[1], b, log_abs);
      continue;
    }
    /* The product itself, so that it overflows to inf and underflows to 0
     * as TensorFlow's does, rather than exp(log|det|)'s rounding. */
    double det = 1;
    for (int64_t i = 0; i < n; i++) det *= w.ints[i] != i + 1 ? -w.d[i + i * n] : w.d[i + i * n];
    store_scalar(ctx->outputs[0], b, det);
  }
  work_free(&w);
  return MF_OK;
}

/* Lu: P A = L U with L unit lower triangular (its diagonal not stored) and
 * U upper in one matrix, and p with (P A)[i] = A[p[i]]: getrf's row swaps
 * applied in order to 0, 1, ..., M - 1. A singular matrix is an error, as
 * TensorFlow's. */
static mf_code lu_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *a = ctx->inputs[0];
  mf_tensor *lu = ctx->outputs[0], *perm = ctx->outputs[1];
  int64_t n, cols, batch = matrix_count(a, &n, &cols);
  if (n == 0 || batch == 0) return MF_OK;
  if (check_lapack_size(ctx, n, n)) return ctx->status->code;
  work w;
  if (work_alloc(ctx, &w, n * n, n)) return ctx->status->code;
  mf_code code = MF_OK;
  for (int64_t b = 0; b < batch && !code; b++) {
    if (!lu_factor(a, b, n, false, w.d, w.ints)) {
      code = matrix_error(ctx, a, b, "Input is not invertible.");
      break;
    }
    store_matrix(lu, b * n * n, w.d, col_major(n), n, n);
    int64_t *p64 = perm->dtype == MF_INT64 ? (int64_t *)perm->data + b * n : NULL;
    int32_t *p32 = perm->dtype == MF_INT32 ? (int32_t *)perm->data + b * n : NULL;
    for (int64_t i = 0; i < n; i++) {
      if (p64) p64[i] = i;
      else p32[i] = (int32_t)i;
    }
    for (int64_t i = 0; i < n; i++) {
      int64_t j = w.ints[i] - 1;
      if (p64) {
        int64_t t = p64[i];
        p64[i] = p64[j];
        p64[j] = t;
      } else {
        int32_t t = p32[i];
        p32[i] = p32[j];
        p32[j] = t;
      }
    }
  }
  work_free(&w);
  return code;
}

/* ---------- Cholesky and triangular solves ---------- */

static mf_code cholesky_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *a = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  int64_t n, cols, batch = matrix_count(a, &n, &cols);
  if (n == 0 || batch == 0) return MF_OK;
  if (check_lapack_size(ctx, n, n)) return ctx->status->code;
  work w;
  if (work_alloc(ctx, &w, n * n, 0)) return ctx->status->code;
  mf_code code = MF_OK;
  for (int64_t b = 0; b < batch && !code; b++) {
    load_matrix(w.d, col_major(n), a, b * n * n, n, n);
    blasint bn = (blasint)n, info = 0;
    dpotrf_("L", &bn, w.d, &bn, &info, 1);
    if (info != 0) {
      char what[200];
      snprintf(what, sizeof what,
               "Cholesky decomposition was not successful. The input might not be valid. (its leading minor of "
               "order %d is not positive definite)",
               (int)info);
      code = matrix_error(ctx, a, b, what);
      break;
    }
    for (int64_t j = 1; j < n; j++)
      for (int64_t i = 0; i < j; i++) w.d[i + j * n] = 0;
    store_matrix(out, b * n * n, w.d, col_major(n), n, n);
  }
  work_free(&w);
  return code;
}

/* MatrixTriangularSolve: op(A) X = B with A triangular (lower or upper: the
 * other triangle is not read), op(A) = A^T when `adjoint`. Like TensorFlow's,
 * no check for a zero on the diagonal: the solution has inf or NaN there. */
static mf_code triangular_solve_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *a = ctx->inputs[0], *rhs = ctx->inputs[1];
  mf_tensor *out = ctx->outputs[0];
  bool lower = mf_attr_bool(ctx->attrs, "lower", true), adjoint = mf_attr_bool(ctx->attrs, "adjoint", false);
  int64_t n, cols, batch = matrix_count(a, &n, &cols), k = rhs->dims[rhs->rank - 1];
  if (n == 0 || k == 0 || batch == 0) return MF_OK;
  if (check_lapack_size(ctx, n, n > k ? n : k)) return ctx->status->code;
  work w;
  if (work_alloc(ctx, &w, n * n + n * k, 0)) return ctx->status->code;
  double *t = w.d, *x = w.d + n * n;
  for (int64_t b = 0; b < batch; b++) {
    load_matrix(t, col_major(n), a, b * n * n, n, n);
    load_matrix(x, col_major(n), rhs, b * n * k, n, k);
    cblas_dtrsm(CblasColMajor, CblasLeft, lower ? CblasLower : CblasUpper, adjoint ? CblasTrans : CblasNoTrans,
                CblasNonUnit, (blasint)n, (blasint)k, 1, t, (blasint)n, x, (blasint)n);
    store_matrix(out, b * n * k, x, col_major(n), n, k);
  }
  work_free(&w);
  return MF_OK;
}

/* ---------- Qr ---------- */

/* Householder QR (geqrf, then orgqr to form Q), as NumPy's and TensorFlow's:
 * R's diagonal may be negative. */
static mf_code qr_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *a = ctx->inputs[0];
  mf_tensor *q = ctx->outputs[0], *r = ctx->outputs[1];
  int64_t m, n, batch = matrix_count(a, &m, &n), k = m < n ? m : n;
  int64_t p = mf_attr_bool(ctx->attrs, "full_matrices", false) ? m : k;
  if (batch == 0 || m == 0) return MF_OK;
  if (check_lapack_size(ctx, m, m > n ? m : n)) return ctx->status->code;
  blasint bm = (blasint)m, bn = (blasint)n, bp = (blasint)p, bk = (blasint)k, info = 0, query = -1;
  double size_qr = 0, size_q = 0;
  /* The work buffer holds A (then Q, m x max(n, p)), tau, and LAPACK's work. */
  int64_t wide = n > p ? n : p;
  if (k > 0) {
    dgeqrf_(&bm, &bn, NULL, &bm, NULL, &size_qr, &query, &info);
    dorgqr_(&bm, &bp, &bk, NULL, &bm, NULL, &size_q, &query, &info);
  }
  blasint lwork = (blasint)(size_qr > size_q ? size_qr : size_q);
  if (lwork < 1) lwork = 1;
  work w;
  if (work_alloc(ctx, &w, m * wide + k + lwork, 0)) return ctx->status->code;
  double *qa = w.d, *tau = w.d + m * wide, *scratch = tau + k;
  for (int64_t b = 0; b < batch; b++) {
    load_matrix(qa, col_major(m), a, b * m * n, m, n);
    if (k > 0) dgeqrf_(&bm, &bn, qa, &bm, tau, scratch, &lwork, &info);
    /* R: the upper triangle of the factored A, its first p rows. */
    double *dst64 = r->dtype == MF_FLOAT64 ? (double *)r->data + b * p * n : NULL;
    float *dst32 = r->dtype == MF_FLOAT32 ? (float *)r->data + b * p * n : NULL;
    for (int64_t i = 0; i < p; i++)
      for (int64_t j = 0; j < n; j++) {
        double v = i <= j ? qa[i + j * m] : 0;
        if (dst64) dst64[i * n + j] = v;
        else dst32[i * n + j] = (float)v;
      }
    if (k > 0) dorgqr_(&bm, &bp, &bk, qa, &bm, tau, scratch, &lwork, &info);
    else set_identity(qa, m, p);
    store_matrix(q, b * m * p, qa, col_major(m), m, p);
  }
  work_free(&w);
  return MF_OK;
}

/* ---------- Svd ---------- */

/* Divide and conquer SVD (gesdd, as NumPy's): A = U diag(s) V^T with s
 * descending; the signs of the singular vectors are LAPACK's. */
static mf_code svd_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *a = ctx->inputs[0];
  mf_tensor *s = ctx->outputs[0], *u = ctx->outputs[1], *v = ctx->outputs[2];
  bool uv = mf_attr_bool(ctx->attrs, "compute_uv", true), full = mf_attr_bool(ctx->attrs, "full_matrices", false);
  int64_t m, n, batch = matrix_count(a, &m, &n), k = m < n ? m : n;
  int64_t ucols = full ? m : k, vrows = full ? n : k;  /* U is m x ucols, V^T vrows x n */
  if (batch == 0) return MF_OK;
  if (check_lapack_size(ctx, m > n ? m : n, m > n ? m : n)) return ctx->status->code;
  const char *jobz = !uv ? "N" : full ? "A" : "S";
  blasint bm = (blasint)m, bn = (blasint)n, info = 0, query = -1;
  blasint ldu = (blasint)(m > 0 ? m : 1), ldvt = (blasint)(vrows > 0 ? vrows : 1), lda = ldu;
  double size = 0;
  if (k > 0) dgesdd_(jobz, &bm, &bn, NULL, &lda, NULL, NULL, &ldu, NULL, &ldvt, &size, &query, NULL, &info, 1);
  blasint lwork = size < 1 ? 1 : (blasint)size;
  int64_t uv_size = uv ? m * ucols + vrows * n : 0;
  work w;
  if (work_alloc(ctx, &w, m * n + k + uv_size + lwork, 8 * k)) return ctx->status->code;
  double *wa = w.d, *sv = wa + m * n, *wu = sv + k, *wvt = wu + (uv ? m * ucols : 0);
  double *scratch = wvt + (uv ? vrows * n : 0);
  mf_code code = MF_OK;
  for (int64_t b = 0; b < batch && !code; b++) {
    if (k > 0) {
      load_matrix(wa, col_major(m), a, b * m * n, m, n);
      dgesdd_(jobz, &bm, &bn, wa, &lda, sv, wu, &ldu, wvt, &ldvt, scratch, &lwork, w.ints, &info, 1);
      if (info != 0) {
        code = matrix_error(ctx, a, b, info > 0 ? "SVD did not converge" : "SVD failed: the input has NaN or inf");
        break;
      }
    } else if (uv) {  /* an empty matrix: no singular values; full U and V are identities */
      set_identity(wu, m, ucols);
      set_identity(wvt, vrows, n);
    }
    store_matrix(s, b * k, sv, col_major(k), k, 1);
    if (!uv) continue;
    store_matrix(u, b * m * ucols, wu, col_major(m), m, ucols);
    /* V = (V^T)^T: element (i, j) of V is element (j, i) of the column-major V^T. */
    store_matrix(v, b * n * vrows, wvt, row_major(ldvt), n, vrows);
  }
  work_free(&w);
  return code;
}

/* ---------- SelfAdjointEigV2 ---------- */

/* Eigenvalues ascending and orthonormal eigenvectors in the columns of v
 * (syevd; signs LAPACK's). */
static mf_code eig_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *a = ctx->inputs[0];
  mf_tensor *e = ctx->outputs[0], *v = ctx->outputs[1];
  bool compute_v = mf_attr_bool(ctx->attrs, "compute_v", true);
  int64_t n, cols, batch = matrix_count(a, &n, &cols);
  if (n == 0 || batch == 0) return MF_OK;
  if (check_lapack_size(ctx, n, n)) return ctx->status->code;
  const char *jobz = compute_v ? "V" : "N";
  blasint bn = (blasint)n, info = 0, query = -1, liwork = 0;
  double size = 0;
  dsyevd_(jobz, "L", &bn, NULL, &bn, NULL, &size, &query, &liwork, &query, &info, 1, 1);
  blasint lwork = size < 1 ? 1 : (blasint)size;
  if (liwork < 1) liwork = 1;
  work w;
  if (work_alloc(ctx, &w, n * n + n + lwork, liwork)) return ctx->status->code;
  double *wa = w.d, *ev = wa + n * n, *scratch = ev + n;
  mf_code code = MF_OK;
  for (int64_t b = 0; b < batch && !code; b++) {
    load_matrix(wa, col_major(n), a, b * n * n, n, n);
    dsyevd_(jobz, "L", &bn, wa, &bn, ev, scratch, &lwork, w.ints, &liwork, &info, 1, 1);
    if (info != 0) {
      code = matrix_error(ctx, a, b,
                          "Self-adjoint eigen decomposition was not successful. The input might not be valid.");
      break;
    }
    store_matrix(e, b * n, ev, col_major(n), n, 1);
    if (compute_v) store_matrix(v, b * n * n, wa, col_major(n), n, n);
  }
  work_free(&w);
  return code;
}

/* ---------- layout: band part and diagonals (any dtype, copied as bytes) ---------- */

static mf_code band_part_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  int64_t m, n, batch = matrix_count(x, &m, &n);
  int64_t lower = mf_load_int64(ctx->inputs[1]->data, ctx->inputs[1]->dtype, 0);
  int64_t upper = mf_load_int64(ctx->inputs[2]->data, ctx->inputs[2]->dtype, 0);
  if (check_band(ctx->op->name, "num_lower", lower, m, "rows", ctx->status) ||
      check_band(ctx->op->name, "num_upper", upper, n, "columns", ctx->status))
    return ctx->status->code;
  size_t es = mf_dtype_size(x->dtype);
  const char *src = x->data;
  char *dst = out->data;
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        size_t at = (size_t)((b * m + i) * n + j) * es;
        bool keep = (lower < 0 || i - j <= lower) && (upper < 0 || j - i <= upper);
        if (keep) memcpy(dst + at, src + at, es);
        else memset(dst + at, 0, es);
      }
  return MF_OK;
}

static mf_code diag_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *d = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  int64_t n = d->dims[d->rank - 1], batch = mf_dims_product(d->dims, 0, d->rank - 1);
  size_t es = mf_dtype_size(d->dtype);
  if (out->size) memset(out->data, 0, (size_t)out->size * es);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < n; i++)
      memcpy((char *)out->data + (size_t)((b * n + i) * n + i) * es, (const char *)d->data + (size_t)(b * n + i) * es,
             es);
  return MF_OK;
}

static mf_code diag_part_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0];
  int64_t m, n, batch = matrix_count(x, &m, &n), p = m < n ? m : n;
  size_t es = mf_dtype_size(x->dtype);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < p; i++)
      memcpy((char *)ctx->outputs[0]->data + (size_t)(b * p + i) * es,
             (const char *)x->data + (size_t)((b * m + i) * n + i) * es, es);
  return MF_OK;
}

static mf_code set_diag_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *d = ctx->inputs[1];
  mf_tensor *out = ctx->outputs[0];
  int64_t m, n, batch = matrix_count(x, &m, &n), p = m < n ? m : n;
  size_t es = mf_dtype_size(x->dtype);
  if (d->size != batch * p) {  /* a shape promised by set_shape may disagree with the values */
    char sx[160], sd[160];
    mf_shape xs = mf_shape_of(x), ds = mf_shape_of(d);
    return MF_INVALID(ctx->status, "%s: the diagonal of shape %s does not fit input of shape %s", ctx->op->name,
                      mf_shape_str(&ds, sd, sizeof sd), mf_shape_str(&xs, sx, sizeof sx));
  }
  if (out->data != x->data && x->size) memcpy(out->data, x->data, (size_t)x->size * es);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < p; i++)
      memcpy((char *)out->data + (size_t)((b * m + i) * n + i) * es, (const char *)d->data + (size_t)(b * p + i) * es,
             es);
  return MF_OK;
}

/* ---------- gradient builders ---------- */

/* An op on inputs a (and b, unless MF_NO_PORT) with the bool attribute
 * `attr` (and `attr2`, unless NULL). */
static mf_output flagged(mf_grad_ctx *gc, const char *type, mf_output a, mf_output b, const char *attr, bool v,
                         const char *attr2, bool v2) {
  mf_op_desc *d = mf_grad_begin(gc, type);
  if (d) {
    mf_op_desc_add_input(d, a);
    if (b.op) mf_op_desc_add_input(d, b);
    mf_op_desc_set_attr_bool(d, attr, v);
    if (attr2) mf_op_desc_set_attr_bool(d, attr2, v2);
  }
  return mf_grad_finish(gc, d);
}

static mf_output with_flag(mf_grad_ctx *gc, const char *type, mf_output a, mf_output b, const char *attr, bool v) {
  return flagged(gc, type, a, b, attr, v, NULL, false);
}

static mf_output triangular_solve(mf_grad_ctx *gc, mf_output a, mf_output b, bool lower, bool adjoint) {
  return flagged(gc, "MatrixTriangularSolve", a, b, "lower", lower, "adjoint", adjoint);
}

/* MatrixBandPart(x, lower, upper): -1 keeps a whole triangle. */
static mf_output band(mf_grad_ctx *gc, mf_output x, int lower, int upper) {
  return mf_grad_op3(gc, "MatrixBandPart", x, mf_grad_scalar(gc, MF_INT64, lower), mf_grad_scalar(gc, MF_INT64, upper));
}

/* x with an axis of size 1 inserted at `axis` (negative from the end). */
static mf_output expand(mf_grad_ctx *gc, mf_output x, int axis) {
  mf_op_desc *d = mf_grad_begin(gc, "ExpandDims");
  if (d) {
    mf_op_desc_add_input(d, x);
    mf_op_desc_set_attr_int(d, "axis", axis);
  }
  return mf_grad_finish(gc, d);
}

/* The matrices of x transposed (TensorFlow's adjoint for real dtypes): a
 * Transpose, whose permutation needs x's rank. */
static mf_output adjoint(mf_grad_ctx *gc, mf_output x) {
  if (!x.op) return x;
  int rank = mf_port_shape(x)->rank;
  if (rank < 2) {
    if (!gc->status->code)
      mf_status_set(gc->status, MF_INVALID_ARGUMENT, "%s: the gradient of %s needs inputs of known rank",
                    gc->op->name, gc->op->def->name);
    return MF_NO_PORT;
  }
  int64_t perm[MF_MAX_RANK];
  for (int d = 0; d < rank; d++) perm[d] = d;
  perm[rank - 2] = rank - 1;
  perm[rank - 1] = rank - 2;
  mf_op_desc *d = mf_grad_begin(gc, "Transpose");
  if (d) {
    mf_op_desc_add_input(d, x);
    mf_op_desc_set_attr_ints(d, "perm", perm, rank);
  }
  return mf_grad_finish(gc, d);
}

static mf_output scaled(mf_grad_ctx *gc, mf_output x, double c) {
  return mf_grad_op2(gc, "Mul", x, mf_grad_scalar(gc, mf_port_dtype(x), c));
}

/* ---------- gradient rules (TensorFlow's, linalg_grad.py) ---------- */

/* C = inv(A): dA = -C^T g C^T; with adjoint, C = inv(A^T) and dA = -C g^T C. */
static mf_code inverse_grad(mf_grad_ctx *gc) {
  mf_output c = mf_op_out(gc->op, 0), g = gc->grads[0];
  mf_output prod = mf_attr_bool(&gc->op->attrs, "adjoint", false)
                       ? mf_grad_matmul(gc, c, mf_grad_matmul(gc, g, c, true, false), false, false)
                       : mf_grad_matmul(gc, c, mf_grad_matmul(gc, g, c, false, true), true, false);
  gc->input_grads[0] = mf_grad_op1(gc, "Neg", prod);
  return gc->status->code;
}

/* x (one value per matrix) times inv(A)^T, the gradient of log|det A|. */
static mf_output times_inverse_t(mf_grad_ctx *gc, mf_output per_matrix) {
  mf_output a_inv_t = with_flag(gc, "MatrixInverse", mf_op_in(gc->op, 0), MF_NO_PORT, "adjoint", true);
  return mf_grad_op2(gc, "Mul", expand(gc, expand(gc, per_matrix, -1), -1), a_inv_t);
}

/* d det(A) = det(A) inv(A)^T. */
static mf_code determinant_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = times_inverse_t(gc, mf_grad_op2(gc, "Mul", gc->grads[0], mf_op_out(gc->op, 0)));
  return gc->status->code;
}

/* d log|det(A)| = inv(A)^T; the sign has no gradient. */
static mf_code log_determinant_grad(mf_grad_ctx *gc) {
  if (gc->grads[1].op) gc->input_grads[0] = times_inverse_t(gc, gc->grads[1]);
  return gc->status->code;
}

/* X = op(A)^-1 B: dB = op(A)^-T g, dA = -dB X^T (-X dB^T with adjoint).
 * The triangular solve's dA keeps A's triangle. */
static mf_code solve_grad(mf_grad_ctx *gc) {
  bool triangular = strcmp(gc->op->def->name, "MatrixTriangularSolve") == 0;
  bool adj = mf_attr_bool(&gc->op->attrs, "adjoint", false), lower = mf_attr_bool(&gc->op->attrs, "lower", true);
  mf_output a = mf_op_in(gc->op, 0), x = mf_op_out(gc->op, 0);
  mf_output db = triangular ? triangular_solve(gc, a, gc->grads[0], lower, !adj)
                            : with_flag(gc, "MatrixSolve", a, gc->grads[0], "adjoint", !adj);
  mf_output da = adj ? mf_grad_matmul(gc, x, db, false, true) : mf_grad_matmul(gc, db, x, false, true);
  da = mf_grad_op1(gc, "Neg", da);
  if (triangular) da = lower ? band(gc, da, -1, 0) : band(gc, da, 0, -1);
  gc->input_grads[0] = da;
  gc->input_grads[1] = db;
  return gc->status->code;
}

/* A = L L^T (Iain Murray's rule, as TensorFlow's): with P = L^T g, phi(P) its
 * lower triangle with the diagonal halved,
 *   dA = sym(L^-T phi(P) L^-1), sym(S) = (S + S^T) / 2,
 * symmetric, though the kernel reads only A's lower triangle. */
static mf_code cholesky_grad(mf_grad_ctx *gc) {
  mf_output l = mf_op_out(gc->op, 0);
  mf_output eye = mf_grad_op1(gc, "MatrixDiag", mf_grad_op1(gc, "OnesLike", mf_grad_op1(gc, "MatrixDiagPart", l)));
  mf_output l_inv = triangular_solve(gc, l, eye, true, false);
  mf_output p = mf_grad_matmul(gc, l, gc->grads[0], true, false);
  mf_output phi = mf_grad_op2(gc, "Sub", band(gc, p, -1, 0), scaled(gc, band(gc, p, 0, 0), 0.5));
  mf_output s = mf_grad_matmul(gc, mf_grad_matmul(gc, l_inv, phi, true, false), l_inv, false, false);
  gc->input_grads[0] = scaled(gc, mf_grad_op2(gc, "Add", s, adjoint(gc, s)), 0.5);
  return gc->status->code;
}

/* Whether the last two dims of port x are known; sets an error naming the op otherwise. */
static bool known_matrix_dims(mf_grad_ctx *gc, mf_output x, int64_t *m, int64_t *n) {
  const mf_shape *s = mf_port_shape(x);
  *m = dim_from_end(s, 2);
  *n = dim_from_end(s, 1);
  if (*m >= 0 && *n >= 0) return true;
  if (!gc->status->code)
    mf_status_set(gc->status, MF_INVALID_ARGUMENT,
                  "%s: the gradient of %s needs the input's matrix dims known when the graph is built; "
                  "set_shape them",
                  gc->op->name, gc->op->def->name);
  return false;
}

/* x R^-T for an upper triangular R (TensorFlow's _TriangularSolve). */
static mf_output solve_right_upper_t(mf_grad_ctx *gc, mf_output x, mf_output r) {
  return adjoint(gc, triangular_solve(gc, r, adjoint(gc, x), false, false));
}

/* A = QR with M >= N and reduced factors (TensorFlow's rule and its limits):
 *   dA = Q (dR + tril(Q^T dQ - dQ^T Q + R dR^T - dR R^T) R^-T) + (dQ - Q Q^T dQ) R^-T. */
static mf_code qr_grad(mf_grad_ctx *gc) {
  mf_output a = mf_op_in(gc->op, 0), q = mf_op_out(gc->op, 0), r = mf_op_out(gc->op, 1);
  int64_t m, n;
  if (!known_matrix_dims(gc, a, &m, &n)) return gc->status->code;
  if (n > m || (mf_attr_bool(&gc->op->attrs, "full_matrices", false) && m != n))
    return mf_status_set(gc->status, MF_UNIMPLEMENTED,
                         "%s: the gradient of Qr is defined only for matrices with at least as many rows as columns "
                         "(got %lld x %lld) and, unless square, full_matrices = false (as TensorFlow's)",
                         gc->op->name, (long long)m, (long long)n);
  mf_output dq = mf_grad_output_or_zeros(gc, 0), dr = mf_grad_output_or_zeros(gc, 1);
  mf_output qdq = mf_grad_matmul(gc, q, dq, true, false), rdr = mf_grad_matmul(gc, r, dr, false, true);
  mf_output qdq_ = mf_grad_op2(gc, "Sub", qdq, adjoint(gc, qdq)), rdr_ = mf_grad_op2(gc, "Sub", rdr, adjoint(gc, rdr));
  mf_output tril = band(gc, mf_grad_op2(gc, "Add", qdq_, rdr_), -1, 0);
  mf_output grad_a = mf_grad_matmul(gc, q, mf_grad_op2(gc, "Add", dr, solve_right_upper_t(gc, tril, r)), false, false);
  mf_output grad_b = solve_right_upper_t(gc, mf_grad_op2(gc, "Sub", dq, mf_grad_matmul(gc, q, qdq, false, false)), r);
  gc->input_grads[0] = mf_grad_op2(gc, "Add", grad_a, grad_b);
  return gc->status->code;
}

/* F with F[i][j] = 1 / (x_j - x_i) off the diagonal and 0 on it (x a batch
 * of vectors): the factor that makes the gradients of eigen and singular
 * vectors infinite when two values coincide, as they are. */
static mf_output gap_reciprocals(mf_grad_ctx *gc, mf_output x) {
  mf_output diff = mf_grad_op2(gc, "Sub", expand(gc, x, -2), expand(gc, x, -1));
  mf_output f = mf_grad_op2(gc, "Div", mf_grad_scalar(gc, mf_port_dtype(x), 1), diff);
  return mf_grad_op2(gc, "MatrixSetDiag", f, mf_grad_op1(gc, "ZerosLike", x));
}

/* A = V diag(e) V^T: dA = V (diag(de) + F * (V^T dV)) V^T, then as TensorFlow
 * the lower triangle of dA + dA^T with the diagonal halved, since the kernel
 * reads only A's lower triangle. Without compute_v, V comes from an op that
 * computes it. */
static mf_code eig_grad(mf_grad_ctx *gc) {
  mf_output e = mf_op_out(gc->op, 0), v = mf_op_out(gc->op, 1);
  mf_output de = mf_grad_output_or_zeros(gc, 0);
  mf_output inner = mf_grad_op1(gc, "MatrixDiag", de);
  if (mf_attr_bool(&gc->op->attrs, "compute_v", true)) {
    mf_output f = gap_reciprocals(gc, e);
    mf_output dv = mf_grad_output_or_zeros(gc, 1);
    inner = mf_grad_op2(gc, "Add", inner, mf_grad_op2(gc, "Mul", f, mf_grad_matmul(gc, v, dv, true, false)));
  } else {
    v = with_flag(gc, "SelfAdjointEigV2", mf_op_in(gc->op, 0), MF_NO_PORT, "compute_v", true);
    v.index = 1;
  }
  mf_output da = mf_grad_matmul(gc, v, mf_grad_matmul(gc, inner, v, false, true), false, false);
  da = band(gc, mf_grad_op2(gc, "Add", da, adjoint(gc, da)), -1, 0);
  gc->input_grads[0] = mf_grad_op2(gc, "MatrixSetDiag", da, scaled(gc, mf_grad_op1(gc, "MatrixDiagPart", da), 0.5));
  return gc->status->code;
}

/* A = U diag(s) V^T (TensorFlow's _SvdGrad): for M > N it differentiates
 * A^T = V diag(s) U^T and transposes. With m <= n, V1 the first m columns of V,
 * F the gap reciprocals of s^2:
 *   dA = U (diag(ds) + (F * U^T dU + its transpose) S + S (F * V1^T dV1 + its transpose)) V1^T
 *        + [m < n] U S^-1 (dV1^T - dV1^T V1 V1^T).
 * Full matrices only when square (as TensorFlow's, which allows |M - N| <= 1
 * by slicing V). Without compute_uv, U and V come from an op that computes them. */
static mf_code svd_grad(mf_grad_ctx *gc) {
  mf_output a = mf_op_in(gc->op, 0);
  int64_t m, n;
  if (!known_matrix_dims(gc, a, &m, &n)) return gc->status->code;
  mf_output ds = mf_grad_output_or_zeros(gc, 0);
  mf_output s = mf_op_out(gc->op, 0), u = mf_op_out(gc->op, 1), v = mf_op_out(gc->op, 2);
  if (!mf_attr_bool(&gc->op->attrs, "compute_uv", true)) {
    mf_op_desc *d = mf_grad_begin(gc, "Svd");
    if (d) {
      mf_op_desc_add_input(d, a);
      mf_op_desc_set_attr_bool(d, "compute_uv", true);
      mf_op_desc_set_attr_bool(d, "full_matrices", false);
    }
    u = v = mf_grad_finish(gc, d);
    u.index = 1;
    v.index = 2;
    mf_output ds_vt = mf_grad_matmul(gc, mf_grad_op1(gc, "MatrixDiag", ds), v, false, true);
    gc->input_grads[0] = mf_grad_matmul(gc, u, ds_vt, false, false);
    return gc->status->code;
  }
  if (mf_attr_bool(&gc->op->attrs, "full_matrices", false) && m != n)
    return mf_status_set(gc->status, MF_UNIMPLEMENTED,
                         "%s: the gradient of Svd with full_matrices = true is implemented only for square "
                         "matrices (got %lld x %lld); use full_matrices = false",
                         gc->op->name, (long long)m, (long long)n);
  mf_output du = mf_grad_output_or_zeros(gc, 1), dv = mf_grad_output_or_zeros(gc, 2);
  bool flip = m > n;
  if (flip) {
    mf_output t = u;
    u = v;
    v = t;
    t = du;
    du = dv;
    dv = t;
  }
  mf_output s_mat = mf_grad_op1(gc, "MatrixDiag", s);
  mf_output f = gap_reciprocals(gc, mf_grad_op1(gc, "Square", s));
  mf_output f_u = mf_grad_op2(gc, "Mul", f, mf_grad_matmul(gc, u, du, true, false));
  mf_output f_v = mf_grad_op2(gc, "Mul", f, mf_grad_matmul(gc, v, dv, true, false));
  mf_output nouv = mf_grad_op2(
      gc, "Add", mf_grad_op1(gc, "MatrixDiag", ds),
      mf_grad_op2(gc, "Add", mf_grad_matmul(gc, mf_grad_op2(gc, "Add", f_u, adjoint(gc, f_u)), s_mat, false, false),
                  mf_grad_matmul(gc, s_mat, mf_grad_op2(gc, "Add", f_v, adjoint(gc, f_v)), false, false)));
  mf_output da = mf_grad_matmul(gc, u, mf_grad_matmul(gc, nouv, v, false, true), false, false);
  if (m != n) {
    /* S^-1 as TensorFlow's _SafeReciprocal: s / (s^2 + 1e-20), finite at 0. */
    mf_output eps = mf_grad_scalar(gc, mf_port_dtype(s), 1e-20);
    mf_output s2_eps = mf_grad_op2(gc, "Add", mf_grad_op1(gc, "Square", s), eps);
    mf_output safe_inv = mf_grad_op2(gc, "Div", s, s2_eps);
    mf_output dvt = adjoint(gc, dv);
    mf_output dvt_v_vt = mf_grad_matmul(gc, mf_grad_matmul(gc, dvt, v, false, false), v, false, true);
    mf_output term2 = mf_grad_op2(gc, "Sub", dvt, dvt_v_vt);
    mf_output u_s_inv = mf_grad_matmul(gc, u, mf_grad_op1(gc, "MatrixDiag", safe_inv), false, false);
    da = mf_grad_op2(gc, "Add", da, mf_grad_matmul(gc, u_s_inv, term2, false, false));
  }
  gc->input_grads[0] = flip ? adjoint(gc, da) : da;
  return gc->status->code;
}

/* P A = L U (the rule of TensorFlow 2's _LuGrad, square matrices): with
 * dL the strictly lower part of g and dU its upper part,
 *   d(PA) = L^-T (tril(L^T dL, -1) + triu(dU U^T)) U^-T,  dA = P^T d(PA),
 * P as the one-hot rows of p. Needs the matrix dims known. */
static mf_code lu_grad(mf_grad_ctx *gc) {
  mf_output lu = mf_op_out(gc->op, 0), perm = mf_op_out(gc->op, 1), g = mf_grad_output_or_zeros(gc, 0);
  int64_t m, n;
  if (!known_matrix_dims(gc, lu, &m, &n)) return gc->status->code;
  mf_dtype t = mf_port_dtype(lu);
  mf_output diag = mf_grad_op1(gc, "MatrixDiagPart", lu);
  mf_output strict = mf_grad_op2(gc, "MatrixSetDiag", band(gc, lu, -1, 0), mf_grad_op1(gc, "ZerosLike", diag));
  mf_output l = mf_grad_op2(gc, "MatrixSetDiag", strict, mf_grad_op1(gc, "OnesLike", diag));
  mf_output u = band(gc, lu, 0, -1);
  mf_output dl = mf_grad_op2(gc, "MatrixSetDiag", band(gc, g, -1, 0), mf_grad_op1(gc, "ZerosLike", diag));
  mf_output du = band(gc, g, 0, -1);
  mf_output lower = mf_grad_matmul(gc, l, dl, true, false);
  lower = mf_grad_op2(gc, "MatrixSetDiag", band(gc, lower, -1, 0), mf_grad_op1(gc, "ZerosLike", diag));
  mf_output middle = mf_grad_op2(gc, "Add", lower, band(gc, mf_grad_matmul(gc, du, u, false, true), 0, -1));
  /* L^-T middle U^-T: solve L^T Y = middle, then U Z^T = Y^T. */
  mf_output y = triangular_solve(gc, l, middle, true, true);
  mf_output grad_pa = adjoint(gc, triangular_solve(gc, u, adjoint(gc, y), false, false));
  mf_op_desc *d = mf_grad_begin(gc, "OneHot");
  if (d) {
    mf_op_desc_add_input(d, perm);
    mf_op_desc_add_input(d, mf_grad_scalar(gc, MF_INT32, (double)n));
    mf_op_desc_add_input(d, mf_grad_scalar(gc, t, 1));
    mf_op_desc_add_input(d, mf_grad_scalar(gc, t, 0));
  }
  mf_output p = mf_grad_finish(gc, d);
  gc->input_grads[0] = mf_grad_matmul(gc, p, grad_pa, true, false);
  return gc->status->code;
}

/* The band's gradient is the same band of g. */
static mf_code band_part_grad(mf_grad_ctx *gc) {
  const mf_output in[3] = {gc->grads[0], mf_op_in(gc->op, 1), mf_op_in(gc->op, 2)};
  gc->input_grads[0] = mf_grad_rebuild(gc, "MatrixBandPart", in, 3);
  return gc->status->code;
}

static mf_code diag_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_op1(gc, "MatrixDiagPart", gc->grads[0]);
  return gc->status->code;
}

/* g on the diagonal of zeros: MatrixSetDiag also serves non-square inputs. */
static mf_code diag_part_grad(mf_grad_ctx *gc) {
  mf_output zeros = mf_grad_op1(gc, "ZerosLike", mf_op_in(gc->op, 0));
  gc->input_grads[0] = mf_grad_op2(gc, "MatrixSetDiag", zeros, gc->grads[0]);
  return gc->status->code;
}

/* The input gets g off the diagonal, the diagonal g's diagonal. */
static mf_code set_diag_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] =
      mf_grad_op2(gc, "MatrixSetDiag", gc->grads[0], mf_grad_op1(gc, "ZerosLike", mf_op_in(gc->op, 1)));
  gc->input_grads[1] = mf_grad_op1(gc, "MatrixDiagPart", gc->grads[0]);
  return gc->status->code;
}

/* ---------- registrations ---------- */

static const mf_op_def defs[] = {
    {.name = "MatrixInverse", .num_inputs = 1, .num_outputs = 1, .infer = square_infer,
     .kernel = {[MF_CPU] = inverse_kernel}, .grad = inverse_grad},
    {.name = "MatrixSolve", .num_inputs = 2, .num_outputs = 1, .infer = solve_infer,
     .kernel = {[MF_CPU] = solve_kernel}, .grad = solve_grad},
    {.name = "MatrixTriangularSolve", .num_inputs = 2, .num_outputs = 1, .infer = solve_infer,
     .kernel = {[MF_CPU] = triangular_solve_kernel}, .grad = solve_grad},
    {.name = "MatrixDeterminant", .num_inputs = 1, .num_outputs = 1, .infer = determinant_infer,
     .kernel = {[MF_CPU] = determinant_kernel}, .grad = determinant_grad},
    {.name = "LogMatrixDeterminant", .num_inputs = 1, .num_outputs = 2, .infer = determinant_infer,
     .kernel = {[MF_CPU] = determinant_kernel}, .grad = log_determinant_grad},
    {.name = "Lu", .num_inputs = 1, .num_outputs = 2, .infer = lu_infer, .kernel = {[MF_CPU] = lu_kernel},
     .grad = lu_grad},
    {.name = "Cholesky", .num_inputs = 1, .num_outputs = 1, .infer = square_infer,
     .kernel = {[MF_CPU] = cholesky_kernel}, .grad = cholesky_grad},
    {.name = "Qr", .num_inputs = 1, .num_outputs = 2, .infer = qr_infer, .kernel = {[MF_CPU] = qr_kernel},
     .grad = qr_grad},
    {.name = "Svd", .num_inputs = 1, .num_outputs = 3, .infer = svd_infer, .kernel = {[MF_CPU] = svd_kernel},
     .grad = svd_grad},
    {.name = "SelfAdjointEigV2", .num_inputs = 1, .num_outputs = 2, .infer = eig_infer,
     .kernel = {[MF_CPU] = eig_kernel}, .grad = eig_grad},
    {.name = "MatrixBandPart", .num_inputs = 3, .num_outputs = 1, .value_inputs = 0x6u, .infer = band_part_infer,
     .kernel = {[MF_CPU] = band_part_kernel}, .grad = band_part_grad},
    {.name = "MatrixDiag", .num_inputs = 1, .num_outputs = 1, .infer = diag_infer,
     .kernel = {[MF_CPU] = diag_kernel}, .grad = diag_grad},
    {.name = "MatrixDiagPart", .num_inputs = 1, .num_outputs = 1, .infer = diag_part_infer,
     .kernel = {[MF_CPU] = diag_part_kernel}, .grad = diag_part_grad},
    {.name = "MatrixSetDiag", .num_inputs = 2, .num_outputs = 1, .infer = set_diag_infer,
     .kernel = {[MF_CPU] = set_diag_kernel}, .grad = set_diag_grad},
};
MF_OP_TABLE(mf_ops_linalg, defs);
