/* matmul.c — MatMul: (batched) matrix products with transpose_a / transpose_b.
 *
 * Inputs have rank >= 2: the last two axes are the matrices, the axes before
 * them are batch axes that broadcast as in NumPy ([2,1,3,4] x [5,4,6] gives
 * [2,5,3,6]). float32, float64, complex64 and complex128 go to OpenBLAS
 * (sgemm/dgemm/cgemm/zgemm); int32 and
 * int64 use a plain loop with wrap-around arithmetic. The gradient is two
 * more MatMuls. */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"
#include "ops/matmul.h"
#include "ops/gpu/gpu.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>

/* The matrix dims of one operand: rows and columns of op(x) (after the transpose). */
static void mat_dims(int rank, const int64_t *dims, bool transpose, int64_t *rows, int64_t *cols) {
  int64_t r = dims[rank - 2], c = dims[rank - 1];
  *rows = transpose ? c : r;
  *cols = transpose ? r : c;
}

static mf_code matmul_infer(mf_infer_ctx *ic) {
  mf_dtype ta = ic->in_dtypes[0], tb = ic->in_dtypes[1];
  const mf_shape *a = &ic->in_shapes[0], *b = &ic->in_shapes[1];
  if (ta != tb)
    return MF_INVALID(ic->status,
                      "%s: MatMul inputs must have the same dtype, but a is %s and b is %s; "
                      "tf.cast one of them",
                      ic->op_name, mf_dtype_name(ta), mf_dtype_name(tb));
  if (ta != MF_FLOAT32 && ta != MF_FLOAT64 && ta != MF_INT32 && ta != MF_INT64 && !mf_dtype_is_complex(ta))
    return MF_INVALID(ic->status,
                      "%s: MatMul takes float32, float64, int32, int64, complex64 or complex128 tensors, got %s; "
                      "tf.cast the inputs first",
                      ic->op_name, mf_dtype_name(ta));
  ic->out_dtypes[0] = ta;
  for (int i = 0; i < 2; i++) {
    const mf_shape *s = &ic->in_shapes[i];
    if (s->rank >= 0 && s->rank < 2) {
      char buf[160];
      return MF_INVALID(ic->status,
                        "%s: MatMul needs inputs of rank >= 2, but %s has shape %s (rank %d); "
                        "tf.reshape or tf.expand_dims it into a matrix",
                        ic->op_name, i ? "b" : "a", mf_shape_str(s, buf, sizeof buf), s->rank);
    }
  }
  if (a->rank < 0 || b->rank < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  bool trans_a = mf_attr_bool(ic->attrs, "transpose_a", false);
  bool trans_b = mf_attr_bool(ic->attrs, "transpose_b", false);
  int64_t m, ka, kb, n;
  mat_dims(a->rank, a->dims, trans_a, &m, &ka);
  mat_dims(b->rank, b->dims, trans_b, &kb, &n);
  if (ka >= 0 && kb >= 0 && ka != kb) {
    char sa[160], sb[160];
    return MF_INVALID(ic->status,
                      "Dimensions must be equal, but are %lld and %lld for '%s' (op: 'MatMul') "
                      "with input shapes: %s, %s. The inner dimensions of op(a) and op(b) must "
                      "match (transpose_a=%s, transpose_b=%s); if you meant a transposed "
                      "operand, pass transpose_a or transpose_b",
                      (long long)ka, (long long)kb, ic->op_name, mf_shape_str(a, sa, sizeof sa),
                      mf_shape_str(b, sb, sizeof sb), trans_a ? "true" : "false",
                      trans_b ? "true" : "false");
  }
  mf_shape batch_a = mf_shape_make(a->rank - 2, a->dims), batch_b = mf_shape_make(b->rank - 2, b->dims);
  mf_shape out;
  if (mf_broadcast_shape(ic->op_name, &batch_a, &batch_b, &out, ic->status)) {
    char sa[160], sb[160];
    return MF_INVALID(ic->status,
                      "%s: the batch dimensions of MatMul inputs of shapes %s and %s do not "
                      "broadcast: each batch dimension must be equal or 1",
                      ic->op_name, mf_shape_str(a, sa, sizeof sa), mf_shape_str(b, sb, sizeof sb));
  }
  out.dims[out.rank++] = m;
  out.dims[out.rank++] = n;
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* One product c[m,n] = op(a) op(b), with op(a) [m,k] and op(b) [k,n]; all of
 * m, n, k are > 0. */
typedef struct mm_args {
  int64_t m, n, k;
  bool ta, tb;
} mm_args;
typedef void (*gemm_fn)(const mm_args *g, const void *a, const void *b, void *c);

/* Row-major BLAS: a leading dimension is the row length of the matrix as
 * stored. The int64_t sizes convert implicitly to the header's integer type
 * (blasint for OpenBLAS, int for the reference CBLAS). */
#define BLAS_GEMM(code, T, gemm)                                                                \
  static void gemm_##code(const mm_args *g, const void *a, const void *b, void *c) {            \
    gemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans,   \
         g->m, g->n, g->k, 1, a, g->ta ? g->m : g->k, b, g->tb ? g->k : g->n, 0, c, g->n);     \
  }

/* Complex BLAS takes alpha and beta by address. */
#define BLAS_COMPLEX_GEMM(code, T, gemm)                                                        \
  static void gemm_##code(const mm_args *g, const void *a, const void *b, void *c) {            \
    const T one = 1, zero = 0;                                                                  \
    gemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans,   \
         g->m, g->n, g->k, &one, a, g->ta ? g->m : g->k, b, g->tb ? g->k : g->n, &zero, c, g->n); \
  }

/* Integers: unsigned arithmetic so overflow wraps (as TensorFlow's does) instead
 * of being undefined. Without transpose_b the loop runs i-k-j, streaming rows of
 * b and c; with it, i-j-k, so the dot product streams rows of b. */
#define INT_GEMM(code, T, U)                                                                    \
  static void gemm_##code(const mm_args *g, const void *a_, const void *b_, void *c_) {          \
    const T *a = a_, *b = b_;                                                                   \
    T *c = c_;                                                                                  \
    const int64_t m = g->m, n = g->n, k = g->k;                                                 \
    const int64_t a_i = g->ta ? 1 : k, a_k = g->ta ? m : 1;                                     \
    for (int64_t i = 0; i < m; i++) {                                                           \
      T *ci = c + i * n;                                                                        \
      if (!g->tb) {                                                                             \
        for (int64_t j = 0; j < n; j++) ci[j] = 0;                                              \
        for (int64_t p = 0; p < k; p++) {                                                       \
          const U aip = (U)a[i * a_i + p * a_k];                                                \
          const T *bp = b + p * n;                                                              \
          for (int64_t j = 0; j < n; j++) ci[j] = (T)((U)ci[j] + aip * (U)bp[j]);               \
        }                                                                                       \
      } else {                                                                                  \
        for (int64_t j = 0; j < n; j++) {                                                       \
          const T *bj = b + j * k;                                                              \
          U sum = 0;                                                                            \
          for (int64_t p = 0; p < k; p++) sum += (U)a[i * a_i + p * a_k] * (U)bj[p];            \
          ci[j] = (T)sum;                                                                       \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
  }

#define MATMUL_TYPES(BLAS, INT, CBLAS)             \
  BLAS(MF_FLOAT32, float, cblas_sgemm)              \
  BLAS(MF_FLOAT64, double, cblas_dgemm)             \
  INT(MF_INT32, int32_t, uint32_t)                  \
  INT(MF_INT64, int64_t, uint64_t)                  \
  CBLAS(MF_COMPLEX64, float _Complex, cblas_cgemm)  \
  CBLAS(MF_COMPLEX128, double _Complex, cblas_zgemm)

MATMUL_TYPES(BLAS_GEMM, INT_GEMM, BLAS_COMPLEX_GEMM)

#define GEMM_ENTRY(code, T, x) [code] = gemm_##code,
static const gemm_fn gemm_fns[MF_DTYPE_SLOTS] = {MATMUL_TYPES(GEMM_ENTRY, GEMM_ENTRY, GEMM_ENTRY)};

/* The op's transposes, read from its attributes once per session: looking
 * them up by name on every run costs as much as a small product. */
typedef struct mm_transposes {
  bool ta, tb;
} mm_transposes;

static void *mm_transposes_new(mf_kernel_ctx *ctx) {
  mm_transposes *t = mf_malloc(sizeof *t);
  if (t) *t = (mm_transposes){.ta = mf_attr_bool(ctx->attrs, "transpose_a", false),
                              .tb = mf_attr_bool(ctx->attrs, "transpose_b", false)};
  return t;
}

mf_matmul_dims mf_matmul_dims_of(const mf_tensor *a, const mf_tensor *b, const mf_tensor *c, bool ta, bool tb) {
  mf_matmul_dims g = {.ta = ta, .tb = tb};
  mat_dims(a->rank, a->dims, ta, &g.m, &g.k);
  mat_dims(b->rank, b->dims, tb, &g.k, &g.n);
  g.mat_a = a->dims[a->rank - 2] * a->dims[a->rank - 1];
  g.mat_b = b->dims[b->rank - 2] * b->dims[b->rank - 1];
  g.mat_c = g.m * g.n;
  g.batch_a = g.mat_a ? a->size / g.mat_a : 0;
  g.batch_b = g.mat_b ? b->size / g.mat_b : 0;
  g.batch = g.mat_c ? c->size / g.mat_c : 0;
  return g;
}

/* The broadcast batch index is walked with stride 0 along the batch axes
 * where an input has size 1. */
int mf_matmul_batches(const mf_tensor *a, const mf_tensor *b, const mf_tensor *c, const mf_matmul_dims *g,
                      int (*each)(void *arg, int64_t oa, int64_t ob, int64_t oc), void *arg) {
  int nb = c->rank - 2;
  int64_t dims[MF_MAX_RANK], sta[MF_MAX_RANK], stb[MF_MAX_RANK], idx[MF_MAX_RANK] = {0};
  int64_t ra = g->mat_a, rb = g->mat_b;
  for (int d = nb - 1; d >= 0; d--) {
    int da = d - (nb - (a->rank - 2)), db = d - (nb - (b->rank - 2));
    int64_t na = da >= 0 ? a->dims[da] : 1, nbd = db >= 0 ? b->dims[db] : 1;
    dims[d] = c->dims[d];
    sta[d] = na == 1 ? 0 : ra;
    stb[d] = nbd == 1 ? 0 : rb;
    ra *= na;
    rb *= nbd;
  }
  int64_t oa = 0, ob = 0;
  for (int64_t i = 0; i < g->batch; i++) {
    int rc = each(arg, oa, ob, i * g->mat_c);
    if (rc) return rc;
    for (int d = nb - 1; d >= 0; d--) {
      oa += sta[d];
      ob += stb[d];
      if (++idx[d] < dims[d]) break;
      oa -= dims[d] * sta[d];
      ob -= dims[d] * stb[d];
      idx[d] = 0;
    }
  }
  return 0;
}

/* One product of the walk on the CPU. */
typedef struct cpu_batches {
  gemm_fn gemm;
  mm_args g;
  const char *a, *b;
  char *c;
  size_t esize;
} cpu_batches;

static int cpu_product(void *arg, int64_t oa, int64_t ob, int64_t oc) {
  const cpu_batches *p = arg;
  p->gemm(&p->g, p->a + (size_t)oa * p->esize, p->b + (size_t)ob * p->esize, p->c + (size_t)oc * p->esize);
  return 0;
}

static mf_code matmul_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *a = ctx->inputs[0], *b = ctx->inputs[1];
  mf_tensor *c = ctx->outputs[0];
  const mm_transposes *t = mf_kernel_state(ctx, mm_transposes_new, mf_free);
  if (!t) return ctx->status->code;
  if (c->size == 0) return MF_OK;
  mf_matmul_dims d = mf_matmul_dims_of(a, b, c, t->ta, t->tb);
  size_t esize = mf_dtype_size(c->dtype);
  if (d.k == 0) {  /* an empty sum; BLAS would reject the zero leading dimension */
    memset(c->data, 0, (size_t)c->size * esize);
    return MF_OK;
  }
  cpu_batches p = {gemm_fns[c->dtype], {.m = d.m, .n = d.n, .k = d.k, .ta = d.ta, .tb = d.tb}, a->data, b->data,
                   c->data, esize};
  /* One matrix b shared by every batch of a (untransposed): the batch folds
   * into the rows of a single product. */
  if (d.batch_b == 1 && d.batch_a == d.batch && !d.ta) {
    mm_args folded = p.g;
    folded.m = d.m * d.batch;
    p.gemm(&folded, a->data, b->data, c->data);
    return MF_OK;
  }
  mf_matmul_batches(a, b, c, &d, cpu_product, &p);
  return MF_OK;
}

mf_output mf_grad_matmul(mf_grad_ctx *gc, mf_output a, mf_output b, bool ta, bool tb) {
  mf_op_desc *d = mf_grad_begin(gc, "MatMul");
  if (d) {
    mf_op_desc_add_input(d, a);
    mf_op_desc_add_input(d, b);
    mf_op_desc_set_attr_bool(d, "transpose_a", ta);
    mf_op_desc_set_attr_bool(d, "transpose_b", tb);
  }
  return mf_grad_finish(gc, d);
}

/* TensorFlow's four cases for c = op(a) op(b) and its gradient g:
 *   plain:      da = g b^T      db = a^T g
 *   a^T:        da = b g^T      db = a g
 *   b^T:        da = g b        db = g^T a
 *   a^T and b^T: da = b^T g^T    db = g^T a^T
 * Broadcast batch dimensions give gradients of the output's batch shape,
 * which the driver sums down to each input's. Complex inputs enter
 * conjugated, as TensorFlow's rule takes them. */
static mf_output conj_if_complex(mf_grad_ctx *gc, mf_output x) {
  return mf_dtype_is_complex(mf_port_dtype(x)) ? mf_grad_op1(gc, "Conj", x) : x;
}
static mf_code matmul_grad(mf_grad_ctx *gc) {
  mf_output a = conj_if_complex(gc, mf_op_in(gc->op, 0)), b = conj_if_complex(gc, mf_op_in(gc->op, 1));
  mf_output g = gc->grads[0];
  bool ta = mf_attr_bool(&gc->op->attrs, "transpose_a", false);
  bool tb = mf_attr_bool(&gc->op->attrs, "transpose_b", false);
  if (!ta) gc->input_grads[0] = mf_grad_matmul(gc, g, b, false, !tb);
  else gc->input_grads[0] = mf_grad_matmul(gc, b, g, tb, true);
  if (!tb) gc->input_grads[1] = mf_grad_matmul(gc, a, g, !ta, false);
  else gc->input_grads[1] = mf_grad_matmul(gc, g, a, true, ta);
  return gc->status->code;
}

static const mf_op_def defs[] = {
    {.name = "MatMul", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_COMPLEX, .infer = matmul_infer,
     .kernel = {[MF_CPU] = matmul_kernel, [MF_CUDA] = mf_gpu_matmul},
     .cuda_dtypes = MF_DTYPE_MASK(MF_FOR_FLOAT_TYPES), .grad = matmul_grad},
};
MF_OP_TABLE(mf_ops_matmul, defs);
