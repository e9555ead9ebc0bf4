/* index.c — indexing and selection: Gather, GatherNd, ScatterNd, Pad,
 * ReverseV2, Cumsum, Cumprod, OneHot, ArgMax, ArgMin, TopKV2, InTopK,
 * SequenceMask and BooleanMask, with their gradient rules and the helper ops
 * those rules build (GatherGrad, MirrorPadGrad, BooleanMaskGrad).
 *
 * Semantics are TensorFlow's. Axes, paddings and the like are attributes;
 * what users compute at run time (OneHot's depth, TopKV2's k, SequenceMask's
 * maxlen, ScatterNd's shape) are tensor inputs. An index out of range is an
 * error naming its position, found before anything is written.
 *
 * Index tensors (int32 or int64) are read through mf_index_values, which
 * hands the kernels int64 values, so that the copy loops are specialized on
 * the element size only; moves copy raw bytes and serve every dtype, sums and
 * products are specialized on the numeric dtype. */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "kernels/elementwise.h"
#include "kernels/helpers.h"
#include "kernels/parallel.h"
#include "exec/kernel_api.h"
#include "ops/gpu/gpu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool is_index_dtype(mf_dtype t) { return t == MF_INT32 || t == MF_INT64; }
static bool is_numeric(mf_dtype t) { return t != MF_BOOL && mf_dtype_size(t) > 0; }

/* ---------- element helpers ---------- */

static inline bool is_finite_f32(float x) { return isfinite(x); }
static inline bool is_finite_f64(double x) { return isfinite(x); }
static inline bool is_finite_always(int64_t x) { MF_UNUSED(x); return true; }
#define IS_FINITE(x) _Generic((x), float: is_finite_f32, double: is_finite_f64, default: is_finite_always)(x)

/* NaN ranks above every number (as NumPy's argmax and TensorFlow's top_k see
 * it), so that these orders are total. */
#define GREATER(a, b) ((a) > (b) || (MF_IS_NAN(a) && !MF_IS_NAN(b)))
#define LESS(a, b) ((a) < (b) || (MF_IS_NAN(a) && !MF_IS_NAN(b)))

/* Kernels that only move elements have one version per element width, named
 * fn_uint8_t, fn_uint32_t and fn_uint64_t; BY_WIDTH calls the one for es bytes. */
#define FOR_WIDTHS(X) X(uint8_t) X(uint32_t) X(uint64_t)
#define BY_WIDTH(es, fn, ...) \
  ((es) == 8 ? fn##_uint64_t(__VA_ARGS__) : (es) == 4 ? fn##_uint32_t(__VA_ARGS__) : fn##_uint8_t(__VA_ARGS__))

/* Moves of whole rows: take_rows copies source row rows[i] to destination row
 * i, put_rows destination row rows[i] from source row i. Rows of one element
 * of 1, 4 or 8 bytes (the common case of gathering scalars) are plain
 * assignments; longer rows are memcpy. */
#define DEFINE_ROW_MOVES(T)                                                                    \
  static void take_##T(T *dst, const T *src, const int64_t *rows, int64_t n) {                 \
    for (int64_t i = 0; i < n; i++) dst[i] = src[rows[i]];                                     \
  }                                                                                            \
  static void put_##T(T *dst, const T *src, const int64_t *rows, int64_t n) {                  \
    for (int64_t i = 0; i < n; i++) dst[rows[i]] = src[i];                                     \
  }
FOR_WIDTHS(DEFINE_ROW_MOVES)
#undef DEFINE_ROW_MOVES

static void take_rows(void *dst, const void *src, const int64_t *rows, int64_t n, size_t row) {
  if (row == 8) take_uint64_t(dst, src, rows, n);
  else if (row == 4) take_uint32_t(dst, src, rows, n);
  else if (row == 1) take_uint8_t(dst, src, rows, n);
  else if (row > 0)
    for (int64_t i = 0; i < n; i++) memcpy((char *)dst + i * row, (const char *)src + rows[i] * row, row);
}

static void put_rows(void *dst, const void *src, const int64_t *rows, int64_t n, size_t row) {
  if (row == 8) put_uint64_t(dst, src, rows, n);
  else if (row == 4) put_uint32_t(dst, src, rows, n);
  else if (row == 1) put_uint8_t(dst, src, rows, n);
  else if (row > 0)
    for (int64_t i = 0; i < n; i++) memcpy((char *)dst + rows[i] * row, (const char *)src + i * row, row);
}

/* Scatter-add: destination row rows[i] += source row i, rows of `inner`
 * elements, columns [j0, j1) of them. */
#define DEFINE_ADD_ROWS(code, T)                                                               \
  static void add_rows_##code(T *dst, const T *src, const int64_t *rows, int64_t n, int64_t inner, \
                              int64_t j0, int64_t j1) {                                        \
    for (int64_t i = 0; i < n; i++) {                                                          \
      T *d = dst + rows[i] * inner;                                                            \
      const T *s = src + i * inner;                                                            \
      for (int64_t j = j0; j < j1; j++) d[j] = MF_WRAPPING_ADD(d[j], s[j]);                    \
    }                                                                                          \
  }
MF_FOR_NUMERIC_TYPES(DEFINE_ADD_ROWS)
#undef DEFINE_ADD_ROWS

/* A scatter-add of `blocks` independent blocks: block b adds its n source
 * rows at src + b * n * inner into destination dst + b * dst_block
 * (elements), at rows[b / rows_every * n + i] (consecutive blocks may share
 * their rows: a batch's slabs). Rows may repeat, so the split over the session's
 * threads is by block and column: every destination element gets its
 * additions from one thread, in row order, as with one thread. */
typedef struct add_rows_job {
  mf_dtype t;
  char *dst;
  const char *src;
  const int64_t *rows;
  int64_t n, inner, blocks, dst_block, rows_every;
} add_rows_job;

static void add_rows_columns(void *arg, int64_t begin, int64_t end) {
  const add_rows_job *j = arg;
  size_t es = mf_dtype_size(j->t);
  for (int64_t it = begin; it < end;) {
    int64_t b = it / j->inner, j0 = it % j->inner, j1 = j0 + (end - it) < j->inner ? j0 + (end - it) : j->inner;
    char *dst = j->dst + (size_t)(b * j->dst_block) * es;
    const char *src = j->src + (size_t)(b * j->n * j->inner) * es;
    const int64_t *rows = j->rows + b / j->rows_every * j->n;
    switch (j->t) {
#define CASE(code, T) case code: add_rows_##code((T *)dst, (const T *)src, rows, j->n, j->inner, j0, j1); break;
      MF_FOR_NUMERIC_TYPES(CASE)
#undef CASE
      default: break;
    }
    it += j1 - j0;
  }
}

static void add_rows(mf_kernel_ctx *ctx, add_rows_job *j) {
  mf_parallel_for(ctx, j->blocks * j->inner, j->n, add_rows_columns, j);
}

/* A gather of `blocks` blocks of n rows of `row` bytes each: destination
 * block b is dst + b * n rows, taken from src + b * src_block bytes at
 * rows[b / rows_every * n + i]. Split over destination rows. */
typedef struct take_rows_job {
  char *dst;
  const char *src;
  const int64_t *rows;
  int64_t n, blocks, rows_every;
  size_t row, src_block;
} take_rows_job;

static void take_rows_range(void *arg, int64_t begin, int64_t end) {
  const take_rows_job *j = arg;
  for (int64_t it = begin; it < end;) {
    int64_t b = it / j->n, i = it % j->n, len = j->n - i < end - it ? j->n - i : end - it;
    const int64_t *rows = j->rows + b / j->rows_every * j->n + i;
    take_rows(j->dst + (size_t)it * j->row, j->src + (size_t)b * j->src_block, rows, len, j->row);
    it += len;
  }
}

static void take_rows_run(mf_kernel_ctx *ctx, take_rows_job *j) {
  mf_parallel_for(ctx, j->blocks * j->n, (int64_t)j->row / 4 + 1, take_rows_range, j);
}

/* ---------- index tensors ---------- */

/* Checks that every index is in [0, limit); the error names the first that is not. */
static mf_code check_range(mf_kernel_ctx *ctx, const mf_tensor *indices, const int64_t *v, int64_t limit) {
  for (int64_t i = 0; i < indices->size; i++)
    if ((uint64_t)v[i] >= (uint64_t)limit) {
      char pos[128];
      return MF_INVALID(ctx->status, "%s: indices[%s] = %lld is not in [0, %lld)", ctx->op->name,
                        mf_position_str(pos, sizeof pos, indices->rank, indices->dims, i), (long long)v[i],
                        (long long)limit);
    }
  return MF_OK;
}

/* The flat row numbers that the index vectors of an [..., K] indices tensor
 * pick in a tensor whose first K dims are `dims` (a row is what follows them),
 * in a new array (*rows, *nrows). An index vector outside the shape is an error. */
static mf_code nd_rows(mf_kernel_ctx *ctx, const mf_tensor *indices, const int64_t *dims, int dims_rank,
                       int64_t **rows, int64_t *nrows) {
  int q = indices->rank;
  int64_t k = indices->dims[q - 1];
  int64_t n = mf_dims_product(indices->dims, 0, q - 1);
  int64_t *owned;
  const int64_t *v = mf_index_values(ctx, indices, &owned);
  if (!v) return ctx->status->code;
  int64_t *out = mf_malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
  if (!out) {
    mf_free(owned);
    return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  }
  for (int64_t r = 0; r < n; r++) {
    int64_t flat = 0;
    for (int64_t j = 0; j < k; j++) {
      int64_t c = v[r * k + j];
      if ((uint64_t)c >= (uint64_t)dims[j]) {
        char pos[128], vec[256], shape[160];
        size_t len = 0;
        vec[0] = '\0';
        for (int64_t m = 0; m < k && len < sizeof vec; m++)
          len += (size_t)snprintf(vec + len, sizeof vec - len, "%s%lld", m ? ", " : "", (long long)v[r * k + m]);
        mf_shape s = mf_shape_make(dims_rank, dims);
        MF_INVALID(ctx->status, "%s: indices[%s] = [%s] does not index into shape %s", ctx->op->name,
                   mf_position_str(pos, sizeof pos, q - 1, indices->dims, r), vec,
                   mf_shape_str(&s, shape, sizeof shape));
        mf_free(owned);
        mf_free(out);
        return ctx->status->code;
      }
      flat = flat * dims[j] + c;
    }
    out[r] = flat;
  }
  mf_free(owned);
  *rows = out;
  *nrows = n;
  return MF_OK;
}

/* ---------- shared checks for shape functions ---------- */

static mf_code check_indices(mf_infer_ctx *ic, int i, const char *what) {
  if (!is_index_dtype(ic->in_dtypes[i]))
    return MF_INVALID(ic->status, "%s: %s must be int32 or int64, got %s; use tf.cast", ic->op_name, what,
                      mf_dtype_name(ic->in_dtypes[i]));
  return MF_OK;
}

static mf_code check_numeric(mf_infer_ctx *ic, int i, const char *what) {
  if (!is_numeric(ic->in_dtypes[i]))
    return MF_INVALID(ic->status, "%s: %s must be a number type, got %s; use tf.cast", ic->op_name, what,
                      mf_dtype_name(ic->in_dtypes[i]));
  return MF_OK;
}

/* Input i must be an integer scalar; *v is its value, or -1 when unknown. */
static mf_code scalar_input(mf_infer_ctx *ic, int i, const char *what, int64_t *v) {
  if (check_indices(ic, i, what)) return ic->status->code;
  char buf[160];
  if (ic->in_shapes[i].rank > 0)
    return MF_INVALID(ic->status, "%s: %s must be a scalar, got shape %s", ic->op_name, what,
                      mf_shape_str(&ic->in_shapes[i], buf, sizeof buf));
  *v = -1;
  if (ic->in_values[i]) {
    *v = mf_load_int64(ic->in_values[i]->data, ic->in_values[i]->dtype, 0);
    if (*v < 0) return MF_INVALID(ic->status, "%s: %s must be non-negative, got %lld", ic->op_name, what,
                                  (long long)*v);
  }
  return MF_OK;
}

/* A shape given as input i (int32/int64 vector of non-negative sizes). */
static mf_code shape_input(mf_infer_ctx *ic, int i, mf_shape *out) {
  if (check_indices(ic, i, "shape")) return ic->status->code;
  const mf_shape *s = &ic->in_shapes[i];
  char buf[160];
  if (s->rank >= 0 && s->rank != 1)
    return MF_INVALID(ic->status, "%s: shape must be a vector (rank 1), got shape %s", ic->op_name,
                      mf_shape_str(s, buf, sizeof buf));
  if (s->rank == 1 && s->dims[0] > MF_MAX_RANK)
    return MF_INVALID(ic->status, "%s: shape has %lld entries, but tensors have at most %d dimensions", ic->op_name,
                      (long long)s->dims[0], MF_MAX_RANK);
  *out = mf_infer_shape_value(ic, i);
  for (int d = 0; d < out->rank; d++)
    if (out->dims[d] < -1 || (ic->in_values[i] && out->dims[d] < 0))
      return MF_INVALID(ic->status, "%s: shape[%d] = %lld must be non-negative", ic->op_name, d,
                        (long long)out->dims[d]);
  return MF_OK;
}

/* Whether two static dims can be equal; the known one of the two. */
static bool dims_compatible(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }
static int64_t dim_merge(int64_t a, int64_t b) { return a >= 0 ? a : b; }

static mf_code check_rank_limit(mf_infer_ctx *ic, int rank) {
  if (rank > MF_MAX_RANK)
    return MF_INVALID(ic->status, "%s: the result would have rank %d, more than the %d dimensions tensors may have",
                      ic->op_name, rank, MF_MAX_RANK);
  return MF_OK;
}

/* ---------- Gather and GatherGrad ---------- */

/* Resolves the attrs axis (default 0, negative counts from params' rank) and
 * batch_dims (default 0, negative counts from indices' rank) against the ranks
 * p and q (-1 when unknown). *axis or *batch stays -1 when a rank it needs is
 * unknown. */
static mf_code gather_axes(const char *op, const mf_attrs *attrs, int p, int q, int *axis, int *batch,
                           mf_status *s) {
  int64_t a = mf_attr_int(attrs, "axis", 0), b = mf_attr_int(attrs, "batch_dims", 0);
  *axis = *batch = -1;
  if (p == 0)
    return MF_INVALID(s, "%s: params must be at least 1-dimensional, got a scalar", op);
  if (b < 0 && q >= 0) b += q;
  if (b < 0 && q >= 0)
    return MF_INVALID(s, "%s: batch_dims %lld is out of range for indices of rank %d",
                      op, (long long)mf_attr_int(attrs, "batch_dims", 0), q);
  if (q >= 0 && b > q)
    return MF_INVALID(s, "%s: batch_dims (%lld) must be <= rank(indices) (%d)", op,
                      (long long)b, q);
  if (p > 0 && mf_normalize_axis(op, a, p, axis, s)) return s->code;
  if (p < 0 && a >= 0) *axis = (int)a;
  if (b >= 0) *batch = (int)b;
  if (*axis >= 0 && *batch > *axis)
    return MF_INVALID(s, "%s: batch_dims (%d) must be <= axis (%d)", op, *batch, *axis);
  return MF_OK;
}

/* The shape of Gather(params P, indices I): P[:axis] + I[batch:] + P[axis+1:],
 * with the batch dims of P and I matched. */
static mf_code gather_shape(mf_infer_ctx *ic, const mf_shape *P, const mf_shape *I, mf_shape *out) {
  int axis, batch;
  if (gather_axes(ic->op_name, ic->attrs, P->rank, I->rank, &axis, &batch, ic->status)) return ic->status->code;
  *out = mf_shape_unknown();
  if (P->rank < 0 || I->rank < 0 || axis < 0 || batch < 0) return MF_OK;
  int rank = P->rank - 1 + I->rank - batch;
  if (check_rank_limit(ic, rank)) return ic->status->code;
  out->rank = rank;
  int r = 0;
  for (int d = 0; d < batch; d++) {
    if (!dims_compatible(P->dims[d], I->dims[d]))
      return MF_INVALID(ic->status,
                        "%s: params.shape[%d] = %lld but indices.shape[%d] = %lld; the batch dimensions must "
                        "match", ic->op_name, d, (long long)P->dims[d], d, (long long)I->dims[d]);
    out->dims[r++] = dim_merge(P->dims[d], I->dims[d]);
  }
  for (int d = batch; d < axis; d++) out->dims[r++] = P->dims[d];
  for (int d = batch; d < I->rank; d++) out->dims[r++] = I->dims[d];
  for (int d = axis + 1; d < P->rank; d++) out->dims[r++] = P->dims[d];
  return MF_OK;
}

/* Gather(params, indices): attrs axis, batch_dims (tf.gather). */
static mf_code gather_infer(mf_infer_ctx *ic) {
  if (check_indices(ic, 1, "indices")) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  return gather_shape(ic, &ic->in_shapes[0], &ic->in_shapes[1], &ic->out_shapes[0]);
}

/* The loop sizes of a gather: nb batches of outer slabs, each with n rows of
 * `inner` elements in params and nidx rows in the result. */
typedef struct gather_geom { int64_t nb, outer, n, inner, nidx; } gather_geom;

/* The geometry and the index values, each in [0, g->n): NULL after an
 * error, else *owned (if any) to free when done. */
static const int64_t *gather_indices(mf_kernel_ctx *ctx, const mf_tensor *params, const mf_tensor *indices,
                                     gather_geom *g, int64_t **owned) {
  int axis, batch;
  if (gather_axes(ctx->op->name, ctx->attrs, params->rank, indices->rank, &axis, &batch, ctx->status))
    return NULL;
  g->nb = mf_dims_product(params->dims, 0, batch);
  g->outer = mf_dims_product(params->dims, batch, axis);
  g->n = params->dims[axis];
  g->inner = mf_dims_product(params->dims, axis + 1, params->rank);
  g->nidx = mf_dims_product(indices->dims, batch, indices->rank);
  const int64_t *idx = mf_index_values(ctx, indices, owned);
  if (idx && check_range(ctx, indices, idx, g->n)) {
    mf_free(*owned);
    return NULL;
  }
  return idx;
}

static mf_code gather_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *params = ctx->inputs[0], *indices = ctx->inputs[1];
  gather_geom g;
  int64_t *owned;
  const int64_t *idx = gather_indices(ctx, params, indices, &g, &owned);
  if (!idx) return ctx->status->code;
  size_t row = (size_t)g.inner * mf_dtype_size(params->dtype);
  /* Block b * outer + o takes from slab o of batch b, with batch b's indices. */
  take_rows_job j = {.dst = ctx->outputs[0]->data, .src = params->data, .rows = idx, .n = g.nidx,
                     .blocks = g.nb * g.outer, .rows_every = g.outer, .row = row, .src_block = (size_t)g.n * row};
  take_rows_run(ctx, &j);
  mf_free(owned);
  return MF_OK;
}

/* GatherGrad(dy, indices, params_shape): attrs axis, batch_dims. Zeros of
 * params' shape with every row of dy added where Gather read it. */
static mf_code gather_grad_infer(mf_infer_ctx *ic) {
  if (check_numeric(ic, 0, "the gradient") || check_indices(ic, 1, "indices")) return ic->status->code;
  mf_shape P, want;
  if (shape_input(ic, 2, &P) || gather_shape(ic, &P, &ic->in_shapes[1], &want)) return ic->status->code;
  char a[160], b[160], c[160];
  if (!mf_shape_compatible(&want, &ic->in_shapes[0]))
    return MF_INVALID(ic->status, "%s: the gradient has shape %s, but gathering from shape %s gives %s", ic->op_name,
                      mf_shape_str(&ic->in_shapes[0], a, sizeof a), mf_shape_str(&P, b, sizeof b),
                      mf_shape_str(&want, c, sizeof c));
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = P;
  return MF_OK;
}

static mf_code gather_grad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *dy = ctx->inputs[0], *indices = ctx->inputs[1];
  mf_tensor *out = ctx->outputs[0];
  gather_geom g;
  int64_t *owned;
  const int64_t *idx = gather_indices(ctx, out, indices, &g, &owned);
  if (!idx) return ctx->status->code;
  memset(out->data, 0, mf_tensor_nbytes(out));
  /* Block b * outer + o adds into slab o of batch b, at batch b's indices. */
  add_rows_job j = {.t = dy->dtype, .dst = out->data, .src = dy->data, .rows = idx, .n = g.nidx, .inner = g.inner,
                    .blocks = g.nb * g.outer, .dst_block = g.n * g.inner, .rows_every = g.outer};
  add_rows(ctx, &j);
  mf_free(owned);
  return MF_OK;
}

/* ---------- GatherNd and ScatterNd ---------- */

/* The last dim of indices (the length K of each index vector), -1 if unknown. */
static mf_code index_depth(mf_infer_ctx *ic, int i, int64_t *k) {
  const mf_shape *I = &ic->in_shapes[i];
  if (I->rank == 0)
    return MF_INVALID(ic->status,
                      "%s: indices must be at least rank 1 (index vectors along the last axis), got a scalar",
                      ic->op_name);
  *k = I->rank > 0 ? I->dims[I->rank - 1] : -1;
  return MF_OK;
}

/* I[:-1] + S[K:]: the shape that GatherNd gives and ScatterNd's updates have. */
static mf_code nd_slices_shape(mf_infer_ctx *ic, const mf_shape *I, const mf_shape *S, int64_t k, mf_shape *out) {
  *out = mf_shape_unknown();
  if (k >= 0 && S->rank >= 0 && k > S->rank)
    return MF_INVALID(ic->status,
                      "%s: index vectors have length %lld (indices.shape[-1]), more than the rank %d of the "
                      "indexed tensor", ic->op_name, (long long)k, S->rank);
  if (I->rank < 0 || S->rank < 0 || k < 0) return MF_OK;
  int rank = I->rank - 1 + S->rank - (int)k;
  if (check_rank_limit(ic, rank)) return ic->status->code;
  out->rank = rank;
  int r = 0;
  for (int d = 0; d < I->rank - 1; d++) out->dims[r++] = I->dims[d];
  for (int d = (int)k; d < S->rank; d++) out->dims[r++] = S->dims[d];
  return MF_OK;
}

/* GatherNd(params, indices): indices [..., K] pick slices params[i0, ..., iK-1]. */
static mf_code gather_nd_infer(mf_infer_ctx *ic) {
  int64_t k = -1;
  if (check_indices(ic, 1, "indices") || index_depth(ic, 1, &k)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  return nd_slices_shape(ic, &ic->in_shapes[1], &ic->in_shapes[0], k, &ic->out_shapes[0]);
}

static mf_code gather_nd_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *params = ctx->inputs[0], *indices = ctx->inputs[1];
  int k = (int)indices->dims[indices->rank - 1];
  int64_t *rows, n;
  if (nd_rows(ctx, indices, params->dims, params->rank, &rows, &n)) return ctx->status->code;
  size_t row = (size_t)mf_dims_product(params->dims, k, params->rank) * mf_dtype_size(params->dtype);
  take_rows_job j = {.dst = ctx->outputs[0]->data, .src = params->data, .rows = rows, .n = n, .blocks = 1,
                     .rows_every = 1, .row = row};
  take_rows_run(ctx, &j);
  mf_free(rows);
  return MF_OK;
}

/* ScatterNd(indices, updates, shape): zeros of shape with the slices of
 * updates added at the index vectors (duplicates add up). */
static mf_code scatter_nd_infer(mf_infer_ctx *ic) {
  int64_t k = -1;
  mf_shape S, want;
  if (check_indices(ic, 0, "indices") || check_numeric(ic, 1, "updates") || index_depth(ic, 0, &k) ||
      shape_input(ic, 2, &S) || nd_slices_shape(ic, &ic->in_shapes[0], &S, k, &want))
    return ic->status->code;
  char a[160], b[160], c[160], d[160];
  if (!mf_shape_compatible(&want, &ic->in_shapes[1]))
    return MF_INVALID(ic->status, "%s: updates has shape %s, but indices of shape %s into shape %s need updates of "
                      "shape indices.shape[:-1] + shape[indices.shape[-1]:] = %s",
                      ic->op_name, mf_shape_str(&ic->in_shapes[1], a, sizeof a),
                      mf_shape_str(&ic->in_shapes[0], b, sizeof b), mf_shape_str(&S, c, sizeof c),
                      mf_shape_str(&want, d, sizeof d));
  ic->out_dtypes[0] = ic->in_dtypes[1];
  ic->out_shapes[0] = S;
  return MF_OK;
}

static mf_code scatter_nd_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *indices = ctx->inputs[0], *updates = ctx->inputs[1];
  mf_tensor *out = ctx->outputs[0];
  int k = (int)indices->dims[indices->rank - 1];
  int64_t *rows, n;
  if (nd_rows(ctx, indices, out->dims, out->rank, &rows, &n)) return ctx->status->code;
  memset(out->data, 0, mf_tensor_nbytes(out));
  add_rows_job j = {.t = out->dtype, .dst = out->data, .src = updates->data, .rows = rows, .n = n,
                    .inner = mf_dims_product(out->dims, k, out->rank), .blocks = 1, .rows_every = 1};
  add_rows(ctx, &j);
  mf_free(rows);
  return MF_OK;
}

/* ---------- Pad and MirrorPadGrad ---------- */

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_SYMMETRIC } pad_mode;
static const char *const pad_mode_names[] = {"CONSTANT", "REFLECT", "SYMMETRIC"};

/* Reads the attrs paddings (ints: before and after for each dim, flattened)
 * and mode; rank is the input's rank or -1. *rank_out is the number of dims
 * the paddings cover. */
static mf_code pad_attrs(const char *op, const mf_attrs *attrs, int rank, const int64_t **pads, int *rank_out,
                         pad_mode *mode, mf_status *s) {
  int n = mf_attr_ints(attrs, "paddings", pads);
  if (n < 0 || n % 2 || n / 2 > MF_MAX_RANK)
    return MF_INVALID(s,
                      "%s: paddings must hold a (before, after) pair for each dimension, got %d numbers",
                      op, n < 0 ? 0 : n);
  if (rank >= 0 && n / 2 != rank)
    return MF_INVALID(s,
                      "%s: paddings has %d (before, after) pairs, but the input has rank %d; give one pair "
                      "per dimension", op, n / 2, rank);
  for (int i = 0; i < n; i++)
    if ((*pads)[i] < 0)
      return MF_INVALID(s, "%s: paddings must be non-negative, got %lld for dimension %d",
                        op, (long long)(*pads)[i], i / 2);
  const mf_attr *m = mf_attrs_find(attrs, "mode", MF_ATTR_STRING);
  *mode = PAD_CONSTANT;
  if (m) {
    size_t i = 0;
    while (i < MF_ARRAY_LEN(pad_mode_names) && strcmp(m->v.s, pad_mode_names[i]) != 0) i++;
    if (i == MF_ARRAY_LEN(pad_mode_names))
      return MF_INVALID(s,
                        "%s: mode must be CONSTANT, REFLECT or SYMMETRIC, got '%s'", op, m->v.s);
    *mode = (pad_mode)i;
  }
  *rank_out = n / 2;
  return MF_OK;
}

/* REFLECT pads at most dim - 1 (the edge is not repeated), SYMMETRIC at most dim. */
static mf_code check_mirror(const char *op, pad_mode mode, const int64_t *pads, const mf_shape *in, mf_status *s) {
  if (mode == PAD_CONSTANT) return MF_OK;
  for (int d = 0; d < in->rank; d++) {
    int64_t limit = in->dims[d] - (mode == PAD_REFLECT);
    if (in->dims[d] >= 0 && (pads[2 * d] > limit || pads[2 * d + 1] > limit))
      return MF_INVALID(s,
                        "%s: %s padding of dimension %d (size %lld) takes at most %lld on each side, got "
                        "(%lld, %lld)", op, pad_mode_names[mode], d, (long long)in->dims[d],
                        (long long)(limit < 0 ? 0 : limit), (long long)pads[2 * d], (long long)pads[2 * d + 1]);
  }
  return MF_OK;
}

/* Pad(input): attrs paddings, mode (CONSTANT, REFLECT, SYMMETRIC) and
 * constant_values (a number, converted to the input's dtype). */
static mf_code pad_infer(mf_infer_ctx *ic) {
  const mf_shape *in = &ic->in_shapes[0];
  const int64_t *pads;
  int rank;
  pad_mode mode;
  if (pad_attrs(ic->op_name, ic->attrs, in->rank, &pads, &rank, &mode, ic->status) ||
      check_mirror(ic->op_name, mode, pads, in, ic->status))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  mf_shape out = {.rank = rank};
  for (int d = 0; d < rank; d++) {
    out.dims[d] = -1;
    if (in->rank >= 0 && in->dims[d] >= 0 &&
        (!mf_size_add(in->dims[d], pads[2 * d], &out.dims[d]) ||
         !mf_size_add(out.dims[d], pads[2 * d + 1], &out.dims[d])))
      return MF_INVALID(ic->status, "%s: dimension %d padded, %lld + %lld + %lld, overflows int64", ic->op_name, d,
                        (long long)in->dims[d], (long long)pads[2 * d], (long long)pads[2 * d + 1]);
  }
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* MirrorPadGrad(dy): attrs paddings and mode (REFLECT or SYMMETRIC). Each
 * element of dy is added to the input element Pad copied it from. */
static mf_code mirror_pad_grad_infer(mf_infer_ctx *ic) {
  const mf_shape *dy = &ic->in_shapes[0];
  const int64_t *pads;
  int rank;
  pad_mode mode;
  if (check_numeric(ic, 0, "the gradient") ||
      pad_attrs(ic->op_name, ic->attrs, dy->rank, &pads, &rank, &mode, ic->status))
    return ic->status->code;
  if (mode == PAD_CONSTANT)
    return MF_INVALID(ic->status,
                      "%s: MirrorPadGrad takes mode REFLECT or SYMMETRIC; a CONSTANT pad's gradient is a slice",
                      ic->op_name);
  mf_shape out = {.rank = rank};
  for (int d = 0; d < rank; d++) {
    int64_t n = dy->rank >= 0 ? dy->dims[d] : -1;
    out.dims[d] = n >= 0 ? n - pads[2 * d] - pads[2 * d + 1] : -1;
    if (n >= 0 && out.dims[d] < 0)
      return MF_INVALID(ic->status, "%s: dimension %d of the gradient (%lld) is smaller than its paddings (%lld, %lld)",
                        ic->op_name, d, (long long)n, (long long)pads[2 * d], (long long)pads[2 * d + 1]);
  }
  if (check_mirror(ic->op_name, mode, pads, &out, ic->status)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* Where each padded position reads from: map[d][o] is the input index along
 * dim d of output index o, or -1 for the constant. */
typedef struct pad_geom {
  int rank;
  int64_t in_dims[MF_MAX_RANK], out_dims[MF_MAX_RANK], in_strides[MF_MAX_RANK], before[MF_MAX_RANK];
  int64_t *map[MF_MAX_RANK];
  int64_t *buf;
} pad_geom;

static mf_code pad_geometry(mf_kernel_ctx *ctx, int rank, const int64_t *in_dims, const int64_t *out_dims,
                            pad_geom *g, pad_mode *mode) {
  const int64_t *pads;
  int n;
  if (pad_attrs(ctx->op->name, ctx->attrs, rank, &pads, &n, mode, ctx->status)) return ctx->status->code;
  g->rank = rank;
  int64_t total = 0, stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    g->in_dims[d] = in_dims[d];
    g->out_dims[d] = out_dims[d];
    g->before[d] = pads[2 * d];
    g->in_strides[d] = stride;
    stride *= in_dims[d];
    total += out_dims[d];
  }
  g->buf = mf_malloc((size_t)(total > 0 ? total : 1) * sizeof *g->buf);
  if (!g->buf) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  int64_t *m = g->buf;
  for (int d = 0; d < rank; d++) {
    g->map[d] = m;
    int64_t dim = in_dims[d];
    for (int64_t o = 0; o < out_dims[d]; o++) {
      int64_t i = o - pads[2 * d];
      if (i < 0 || i >= dim) {
        if (*mode == PAD_CONSTANT) i = -1;
        else if (*mode == PAD_REFLECT) i = i < 0 ? -i : 2 * (dim - 1) - i;
        else i = i < 0 ? -i - 1 : 2 * dim - 1 - i;
      }
      m[o] = i;
    }
    m += out_dims[d];
  }
  return MF_OK;
}

/* Walks the rows (all dims but the last) of the padded shape: sets *base to
 * the input offset of the row's start, false when the row lies in a constant
 * pad. idx is the odometer, advanced by pad_next_row. */
static bool pad_row_base(const pad_geom *g, const int64_t *idx, int64_t *base) {
  int64_t b = 0;
  for (int d = 0; d < g->rank - 1; d++) {
    int64_t m = g->map[d][idx[d]];
    if (m < 0) return false;
    b += m * g->in_strides[d];
  }
  *base = b;
  return true;
}

/* The odometer of row r: its index along each dimension but the last. */
static void pad_row_index(const pad_geom *g, int64_t r, int64_t *idx) {
  for (int d = g->rank - 2; d >= 0; d--) {
    idx[d] = r % g->out_dims[d];
    r /= g->out_dims[d];
  }
}

static void pad_next_row(const pad_geom *g, int64_t *idx) {
  for (int d = g->rank - 2; d >= 0; d--) {
    if (++idx[d] < g->out_dims[d]) return;
    idx[d] = 0;
  }
}

/* Writes the padded output, elements of T: each row is its left edge through
 * the map, the input row itself, and its right edge. */
#define DEFINE_PAD(T)                                                                          \
  static void pad_##T(T *out, const T *in, const pad_geom *g, const void *fill_bits, int64_t r0, \
                      int64_t r1) {                                                            \
    T fill;                                                                                    \
    memcpy(&fill, fill_bits, sizeof fill);                                                     \
    int last = g->rank - 1;                                                                    \
    int64_t w = g->out_dims[last], lo = g->before[last], n = g->in_dims[last];                 \
    int64_t idx[MF_MAX_RANK], base;                                                            \
    pad_row_index(g, r0, idx);                                                                 \
    const int64_t *map = g->map[last];                                                         \
    out += r0 * w;                                                                             \
    for (int64_t r = r0; r < r1; r++, out += w, pad_next_row(g, idx)) {                        \
      if (!pad_row_base(g, idx, &base)) {                                                      \
        for (int64_t j = 0; j < w; j++) out[j] = fill;                                         \
        continue;                                                                              \
      }                                                                                        \
      for (int64_t j = 0; j < lo; j++) out[j] = map[j] < 0 ? fill : in[base + map[j]];         \
      if (n > 0) memcpy(out + lo, in + base, (size_t)n * sizeof(T));                           \
      for (int64_t j = lo + n; j < w; j++) out[j] = map[j] < 0 ? fill : in[base + map[j]];     \
    }                                                                                          \
  }
FOR_WIDTHS(DEFINE_PAD)
#undef DEFINE_PAD

/* Rows of the padded output split over the session's threads. */
typedef struct pad_job {
  void *out;
  const void *in;
  const pad_geom *g;
  const void *fill;
  size_t es;
} pad_job;

static void pad_rows(void *arg, int64_t begin, int64_t end) {
  const pad_job *j = arg;
  BY_WIDTH(j->es, pad, j->out, j->in, j->g, j->fill, begin, end);
}

static mf_code pad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  size_t es = mf_dtype_size(in->dtype);
  if (out->size == 0) return MF_OK;
  if (in->rank == 0) {
    memcpy(out->data, in->data, es);
    return MF_OK;
  }
  pad_geom g;
  pad_mode mode;
  if (pad_geometry(ctx, in->rank, in->dims, out->dims, &g, &mode)) return ctx->status->code;
  uint64_t fill = 0;  /* the constant, converted to the dtype, in its first bytes */
  mf_store_double(&fill, in->dtype, 0, mf_attr_float(ctx->attrs, "constant_values", 0));
  pad_job j = {out->data, in->data, &g, &fill, es};
  int64_t w = out->dims[out->rank - 1];
  mf_parallel_for(ctx, out->size / w, w, pad_rows, &j);
  mf_free(g.buf);
  return MF_OK;
}

/* Adds each element of dy to the input element it was copied from. */
#define DEFINE_MIRROR_PAD_GRAD(code, T)                                                        \
  static void mirror_pad_grad_##code(T *dx, const T *dy, const pad_geom *g) {                  \
    int last = g->rank - 1;                                                                    \
    int64_t w = g->out_dims[last], rows = mf_dims_product(g->out_dims, 0, last), idx[MF_MAX_RANK] = {0}; \
    int64_t base;                                                                              \
    const int64_t *map = g->map[last];                                                         \
    for (int64_t r = 0; r < rows; r++, dy += w, pad_next_row(g, idx)) {                        \
      pad_row_base(g, idx, &base);                                                             \
      T *row = dx + base;                                                                      \
      for (int64_t j = 0; j < w; j++) row[map[j]] = MF_WRAPPING_ADD(row[map[j]], dy[j]);       \
    }                                                                                          \
  }
MF_FOR_NUMERIC_TYPES(DEFINE_MIRROR_PAD_GRAD)
#undef DEFINE_MIRROR_PAD_GRAD

static mf_code mirror_pad_grad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *dy = ctx->inputs[0];
  mf_tensor *dx = ctx->outputs[0];
  memset(dx->data, 0, mf_tensor_nbytes(dx));
  if (dy->size == 0) return MF_OK;
  if (dy->rank == 0) {
    memcpy(dx->data, dy->data, mf_dtype_size(dy->dtype));
    return MF_OK;
  }
  pad_geom g;
  pad_mode mode;
  if (pad_geometry(ctx, dx->rank, dx->dims, dy->dims, &g, &mode)) return ctx->status->code;
  switch (dy->dtype) {
#define CASE(code, T) case code: mirror_pad_grad_##code(dx->data, dy->data, &g); break;
    MF_FOR_NUMERIC_TYPES(CASE)
#undef CASE
    default: break;
  }
  mf_free(g.buf);
  return MF_OK;
}

/* ---------- ReverseV2 ---------- */

/* attr axis (ints, negative allowed, each at most once) -> flags per dim. */
static mf_code reverse_axes(const char *op, const mf_attrs *attrs, int rank, bool *rev, mf_status *s) {
  const int64_t *axes;
  int n = mf_attr_ints(attrs, "axis", &axes);
  for (int d = 0; d < MF_MAX_RANK; d++) rev[d] = false;
  if (rank < 0) return MF_OK;
  for (int i = 0; i < n; i++) {
    int a;
    if (mf_normalize_axis(op, axes[i], rank, &a, s)) return s->code;
    if (rev[a])
      return MF_INVALID(s, "%s: axis %d specified more than once", op, a);
    rev[a] = true;
  }
  return MF_OK;
}

static mf_code reverse_infer(mf_infer_ctx *ic) {
  bool rev[MF_MAX_RANK];
  if (reverse_axes(ic->op_name, ic->attrs, ic->in_shapes[0].rank, rev, ic->status)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

/* Row by row (all dims but the last): the source row mirrors the reversed
 * coordinates; the row itself is copied backwards or as is. */
#define DEFINE_REVERSE(T)                                                                      \
  static void reverse_##T(T *out, const T *in, int rank, const int64_t *dims, const bool *rev) { \
    int last = rank - 1;                                                                       \
    int64_t w = dims[last], rows = mf_dims_product(dims, 0, last), idx[MF_MAX_RANK] = {0};     \
    int64_t strides[MF_MAX_RANK], s = 1;                                                       \
    for (int d = last; d >= 0; d--) {                                                          \
      strides[d] = s;                                                                          \
      s *= dims[d];                                                                            \
    }                                                                                          \
    for (int64_t r = 0; r < rows; r++, out += w) {                                             \
      const T *src = in;                                                                       \
      for (int d = 0; d < last; d++) src += (rev[d] ? dims[d] - 1 - idx[d] : idx[d]) * strides[d]; \
      if (rev[last])                                                                           \
        for (int64_t j = 0; j < w; j++) out[j] = src[w - 1 - j];                               \
      else                                                                                     \
        memcpy(out, src, (size_t)w * sizeof(T));                                               \
      for (int d = last - 1; d >= 0; d--) {                                                    \
        if (++idx[d] < dims[d]) break;                                                         \
        idx[d] = 0;                                                                            \
      }                                                                                        \
    }                                                                                          \
  }
FOR_WIDTHS(DEFINE_REVERSE)
#undef DEFINE_REVERSE

static mf_code reverse_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  bool rev[MF_MAX_RANK];
  if (reverse_axes(ctx->op->name, ctx->attrs, in->rank, rev, ctx->status)) return ctx->status->code;
  if (in->size == 0) return MF_OK;
  if (in->rank == 0) {
    memcpy(out->data, in->data, mf_tensor_nbytes(in));
    return MF_OK;
  }
  size_t es = mf_dtype_size(in->dtype);
  BY_WIDTH(es, reverse, out->data, in->data, in->rank, in->dims, rev);
  return MF_OK;
}

/* ---------- Cumsum and Cumprod ---------- */

/* Cumsum(x), Cumprod(x): attrs axis (default 0), exclusive, reverse. */
static mf_code cumulative_infer(mf_infer_ctx *ic) {
  if (check_numeric(ic, 0, "x")) return ic->status->code;
  const mf_shape *in = &ic->in_shapes[0];
  int axis;
  if (in->rank == 0) return MF_INVALID(ic->status, "%s: x must be at least rank 1, got a scalar", ic->op_name);
  if (in->rank > 0 && mf_normalize_axis(ic->op_name, mf_attr_int(ic->attrs, "axis", 0), in->rank, &axis, ic->status))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = *in;
  return MF_OK;
}

/* X(op, combine, identity): the running combination and what an exclusive
 * scan starts from. */
#define CUMULATIVE_OPS(X) X(Cumsum, MF_WRAPPING_ADD, 0) X(Cumprod, MF_WRAPPING_MUL, 1)

/* Kernels along one axis of x viewed as [outer, n, inner] (Cumsum, Cumprod,
 * ArgMax, ArgMin) work on the lines of one slab and up to LINE_COLUMNS of its
 * columns at a time: rows of that slab run over contiguous memory, and the
 * (slab, columns) pieces, independent of one another, split over the
 * session's threads. */
enum { LINE_COLUMNS = 256 };

typedef struct lines_job {
  void (*fn)(const struct lines_job *j, int64_t o, int64_t j0, int64_t j1);
  const void *fns;  /* the kernel's per-dtype function */
  void *y;
  const void *x;
  int64_t n, inner;
  mf_dtype t;
  bool flag_a, flag_b; /* exclusive and reverse; wide (int64 output) */
} lines_job;

static void lines_pieces(void *arg, int64_t begin, int64_t end) {
  const lines_job *j = arg;
  int64_t per = (j->inner + LINE_COLUMNS - 1) / LINE_COLUMNS;
  for (int64_t it = begin; it < end; it++) {
    int64_t o = it / per, j0 = it % per * LINE_COLUMNS;
    j->fn(j, o, j0, j0 + LINE_COLUMNS < j->inner ? j0 + LINE_COLUMNS : j->inner);
  }
}

static void lines_run(mf_kernel_ctx *ctx, lines_job *j, int64_t outer) {
  int64_t per = (j->inner + LINE_COLUMNS - 1) / LINE_COLUMNS;
  mf_parallel_for(ctx, outer * per, j->n * (j->inner < LINE_COLUMNS ? j->inner : LINE_COLUMNS), lines_pieces, j);
}

/* Row i of the result is row i-1 of the result combined with row i of x (row
 * i-1 when exclusive); reverse walks the rows from the end. Over columns [j0,
 * j1) of slab x (n rows of `inner`). */
typedef void (*cumulative_fn)(void *y, const void *x, int64_t n, int64_t inner, int64_t j0, int64_t j1,
                              bool exclusive, bool reverse);
#define DEFINE_CUMULATIVE(code, T, op, combine, identity)                                      \
  static void op##_##code(void *y_, const void *x_, int64_t n, int64_t inner, int64_t j0,      \
                          int64_t j1, bool exclusive, bool reverse) {                          \
    T *y = y_;                                                                                 \
    const T *x = x_;                                                                           \
    int64_t step = reverse ? -inner : inner;                                                   \
    int64_t first = reverse ? (n - 1) * inner : 0;                                             \
    T *yi = y + first;                                                                         \
    const T *xi = x + first;                                                                   \
    for (int64_t j = j0; j < j1; j++) yi[j] = exclusive ? (T)(identity) : xi[j];               \
    for (int64_t i = 1; i < n; i++) {                                                          \
      const T *prev = yi, *next = exclusive ? xi : xi + step;                                  \
      yi += step;                                                                              \
      xi += step;                                                                              \
      for (int64_t j = j0; j < j1; j++) yi[j] = combine(prev[j], next[j]);                     \
    }                                                                                          \
  }
#define CUMULATIVE_ENTRY(code, T, op) [code] = op##_##code,
#define CUMULATIVE_FNS(op, combine, identity)                                                  \
  MF_FOR_NUMERIC_TYPES(DEFINE_CUMULATIVE, op, combine, identity)                               \
  static const cumulative_fn op##_fns[MF_DTYPE_SLOTS] = {MF_FOR_NUMERIC_TYPES(CUMULATIVE_ENTRY, op)};
CUMULATIVE_OPS(CUMULATIVE_FNS)

static void cumulative_piece(const lines_job *j, int64_t o, int64_t j0, int64_t j1) {
  size_t slab = (size_t)(o * j->n * j->inner) * mf_dtype_size(j->t);
  ((const cumulative_fn *)j->fns)[j->t]((char *)j->y + slab, (const char *)j->x + slab, j->n, j->inner, j0, j1,
                                        j->flag_a, j->flag_b);
}

static mf_code cumulative_kernel(mf_kernel_ctx *ctx, const cumulative_fn *fns) {
  const mf_tensor *in = ctx->inputs[0];
  int axis;
  if (mf_normalize_axis(ctx->op->name, mf_attr_int(ctx->attrs, "axis", 0), in->rank, &axis, ctx->status))
    return ctx->status->code;
  int64_t outer = mf_dims_product(in->dims, 0, axis), n = in->dims[axis];
  int64_t inner = mf_dims_product(in->dims, axis + 1, in->rank);
  bool exclusive = mf_attr_bool(ctx->attrs, "exclusive", false), reverse = mf_attr_bool(ctx->attrs, "reverse", false);
  lines_job j = {cumulative_piece, fns, ctx->outputs[0]->data, in->data, n, inner, in->dtype, exclusive, reverse};
  if (in->size > 0) lines_run(ctx, &j, outer);
  return MF_OK;
}
#define CUMULATIVE_KERNEL(op, combine, identity) \
  static mf_code op##_kernel(mf_kernel_ctx *ctx) { return cumulative_kernel(ctx, op##_fns); }
CUMULATIVE_OPS(CUMULATIVE_KERNEL)

/* ---------- OneHot ---------- */

/* The axis where OneHot inserts the depth dimension into indices of rank q:
 * [-q-1, q], -1 (the default) appending it. */
static mf_code one_hot_axis(const char *op, const mf_attrs *attrs, int q, int *axis, mf_status *s) {
  int64_t a = mf_attr_int(attrs, "axis", -1);
  if (a < -q - 1 || a > q)
    return MF_INVALID(s,
                      "%s: axis %lld is out of range for indices of rank %d (expected -1 or [0, %d])", op,
                      (long long)a, q, q);
  *axis = (int)(a < 0 ? a + q + 1 : a);
  return MF_OK;
}

/* OneHot(indices, depth, on_value, off_value): attr axis. */
static mf_code one_hot_infer(mf_infer_ctx *ic) {
  mf_dtype it = ic->in_dtypes[0];
  if (!is_index_dtype(it) && it != MF_UINT8)
    return MF_INVALID(ic->status, "%s: indices must be uint8, int32 or int64, got %s; use tf.cast", ic->op_name,
                      mf_dtype_name(it));
  int64_t depth = -1;
  if (scalar_input(ic, 1, "depth", &depth)) return ic->status->code;
  char buf[160];
  for (int i = 2; i < 4; i++)
    if (ic->in_shapes[i].rank > 0)
      return MF_INVALID(ic->status, "%s: %s must be a scalar, got shape %s", ic->op_name,
                        i == 2 ? "on_value" : "off_value", mf_shape_str(&ic->in_shapes[i], buf, sizeof buf));
  if (ic->in_dtypes[2] != ic->in_dtypes[3])
    return MF_INVALID(ic->status, "%s: on_value is %s but off_value is %s; they must have the same dtype (use tf.cast)",
                      ic->op_name, mf_dtype_name(ic->in_dtypes[2]), mf_dtype_name(ic->in_dtypes[3]));
  ic->out_dtypes[0] = ic->in_dtypes[2];
  const mf_shape *I = &ic->in_shapes[0];
  int axis;
  if (I->rank < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  if (check_rank_limit(ic, I->rank + 1) || one_hot_axis(ic->op_name, ic->attrs, I->rank, &axis, ic->status))
    return ic->status->code;
  mf_shape out = {.rank = I->rank + 1};
  for (int d = 0, r = 0; d < out.rank; d++) out.dims[d] = d == axis ? depth : I->dims[r++];
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* The result is off_value everywhere, then on_value where an index in
 * [0, depth) points; other indices leave their whole line off. Over the
 * [depth, suf] blocks [p0, p1), which split over the session's threads. */
#define DEFINE_ONE_HOT(T)                                                                      \
  static void one_hot_##T(T *out, const int64_t *idx, int64_t p0, int64_t p1, int64_t depth,   \
                          int64_t suf, const void *on_bits, const void *off_bits) {            \
    T on, off;                                                                                 \
    memcpy(&on, on_bits, sizeof on);                                                           \
    memcpy(&off, off_bits, sizeof off);                                                        \
    out += p0 * depth * suf;                                                                   \
    idx += p0 * suf;                                                                           \
    int64_t n = (p1 - p0) * depth * suf;                                                       \
    for (int64_t i = 0; i < n; i++) out[i] = off;                                              \
    for (int64_t p = p0; p < p1; p++, idx += suf, out += depth * suf)                          \
      for (int64_t s = 0; s < suf; s++)                                                        \
        if ((uint64_t)idx[s] < (uint64_t)depth) out[idx[s] * suf + s] = on;                    \
  }
FOR_WIDTHS(DEFINE_ONE_HOT)
#undef DEFINE_ONE_HOT

typedef struct one_hot_job {
  void *out;
  const int64_t *idx;
  int64_t depth, suf;
  const void *on, *off;
  size_t es;
} one_hot_job;

static void one_hot_blocks(void *arg, int64_t begin, int64_t end) {
  const one_hot_job *j = arg;
  BY_WIDTH(j->es, one_hot, j->out, j->idx, begin, end, j->depth, j->suf, j->on, j->off);
}

static mf_code one_hot_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *indices = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  int axis;
  if (one_hot_axis(ctx->op->name, ctx->attrs, indices->rank, &axis, ctx->status)) return ctx->status->code;
  int64_t depth = out->dims[axis], pre = mf_dims_product(indices->dims, 0, axis);
  int64_t suf = mf_dims_product(indices->dims, axis, indices->rank);
  int64_t *owned;
  const int64_t *idx = mf_index_values(ctx, indices, &owned);
  if (!idx) return ctx->status->code;
  one_hot_job j = {out->data, idx, depth, suf, ctx->inputs[2]->data, ctx->inputs[3]->data, mf_dtype_size(out->dtype)};
  mf_parallel_for(ctx, pre, depth * suf, one_hot_blocks, &j);
  mf_free(owned);
  return MF_OK;
}

/* ---------- ArgMax and ArgMin ---------- */

/* ArgMax/ArgMin(input): attrs axis (default 0), output_type (int64 default, or int32). */
static mf_code arg_infer(mf_infer_ctx *ic) {
  if (check_numeric(ic, 0, "input")) return ic->status->code;
  mf_dtype ot = mf_attr_type(ic->attrs, "output_type", MF_INT64);
  if (!is_index_dtype(ot))
    return MF_INVALID(ic->status, "%s: output_type must be int32 or int64, got %s", ic->op_name, mf_dtype_name(ot));
  ic->out_dtypes[0] = ot;
  const mf_shape *in = &ic->in_shapes[0];
  if (in->rank < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  int axis;
  if (in->rank == 0) return MF_INVALID(ic->status, "%s: input must be at least rank 1, got a scalar", ic->op_name);
  if (mf_normalize_axis(ic->op_name, mf_attr_int(ic->attrs, "axis", 0), in->rank, &axis, ic->status))
    return ic->status->code;
  char buf[160];
  if (in->dims[axis] == 0)
    return MF_INVALID(ic->status, "%s: reduction axis %d is empty in shape %s", ic->op_name, axis,
                      mf_shape_str(in, buf, sizeof buf));
  mf_shape out = {.rank = in->rank - 1};
  for (int d = 0, r = 0; d < in->rank; d++)
    if (d != axis) out.dims[r++] = in->dims[d];
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* For slab o, the best row so far is tracked per column [j0, j1), so the
 * scan runs along contiguous rows; ties keep the first. */
typedef void (*arg_fn)(const void *x, int64_t o, int64_t n, int64_t inner, int64_t j0, int64_t j1, void *out,
                       bool wide);
#define DEFINE_ARG(name, code, T, BETTER)                                                      \
  static void name##_##code(const void *x_, int64_t o, int64_t n, int64_t inner, int64_t j0,   \
                            int64_t j1, void *out, bool wide) {                                \
    const T *x = (const T *)x_ + o * n * inner;                                                \
    int64_t arg[LINE_COLUMNS];                                                                 \
    for (int64_t j = j0; j < j1; j++) arg[j - j0] = 0;                                         \
    for (int64_t i = 1; i < n; i++) {                                                          \
      const T *row = x + i * inner;                                                            \
      for (int64_t j = j0; j < j1; j++)                                                        \
        if (BETTER(row[j], x[arg[j - j0] * inner + j])) arg[j - j0] = i;                       \
    }                                                                                          \
    for (int64_t j = j0; j < j1; j++) {                                                        \
      if (wide) ((int64_t *)out)[o * inner + j] = arg[j - j0];                                 \
      else ((int32_t *)out)[o * inner + j] = (int32_t)arg[j - j0];                             \
    }                                                                                          \
  }
#define DEFINE_ARGS(code, T) DEFINE_ARG(argmax, code, T, GREATER) DEFINE_ARG(argmin, code, T, LESS)
MF_FOR_NUMERIC_TYPES(DEFINE_ARGS)
#undef DEFINE_ARGS
#undef DEFINE_ARG

#define ARG_ENTRY(code, T, name) [code] = name##_##code,
static const arg_fn argmax_fns[MF_DTYPE_SLOTS] = {MF_FOR_NUMERIC_TYPES(ARG_ENTRY, argmax)};
static const arg_fn argmin_fns[MF_DTYPE_SLOTS] = {MF_FOR_NUMERIC_TYPES(ARG_ENTRY, argmin)};
#undef ARG_ENTRY

static void arg_piece(const lines_job *j, int64_t o, int64_t j0, int64_t j1) {
  ((const arg_fn *)j->fns)[j->t](j->x, o, j->n, j->inner, j0, j1, j->y, j->flag_a);
}

static mf_code arg_kernel(mf_kernel_ctx *ctx, bool max) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  int axis;
  if (mf_normalize_axis(ctx->op->name, mf_attr_int(ctx->attrs, "axis", 0), in->rank, &axis, ctx->status))
    return ctx->status->code;
  int64_t outer = mf_dims_product(in->dims, 0, axis), n = in->dims[axis];
  int64_t inner = mf_dims_product(in->dims, axis + 1, in->rank);
  if (out->size == 0) return MF_OK;
  lines_job j = {arg_piece, max ? argmax_fns : argmin_fns, out->data, in->data, n, inner, in->dtype,
                 out->dtype == MF_INT64, false};
  lines_run(ctx, &j, outer);
  return MF_OK;
}
static mf_code argmax_kernel(mf_kernel_ctx *ctx) { return arg_kernel(ctx, true); }
static mf_code argmin_kernel(mf_kernel_ctx *ctx) { return arg_kernel(ctx, false); }

/* ---------- TopKV2 and InTopK ---------- */

/* TopKV2(input, k): attr sorted. The k largest entries of each last-axis
 * row, largest first (ties: lower index first), and their int32 indices. The
 * result is sorted whether or not `sorted` asks for it: TensorFlow leaves the
 * order unspecified then. */
static mf_code top_k_infer(mf_infer_ctx *ic) {
  int64_t k = -1;
  if (check_numeric(ic, 0, "input") || scalar_input(ic, 1, "k", &k)) return ic->status->code;
  const mf_shape *in = &ic->in_shapes[0];
  char buf[160];
  if (in->rank == 0) return MF_INVALID(ic->status, "%s: input must be at least rank 1, got a scalar", ic->op_name);
  mf_shape out = *in;
  if (in->rank > 0) {
    int64_t n = in->dims[in->rank - 1];
    if (k >= 0 && n >= 0 && n < k)
      return MF_INVALID(ic->status, "%s: input must have at least k = %lld columns, got shape %s", ic->op_name,
                        (long long)k, mf_shape_str(in, buf, sizeof buf));
    if (n > INT32_MAX)
      return MF_INVALID(ic->status, "%s: rows of %lld entries are too long for int32 indices", ic->op_name,
                        (long long)n);
    out.dims[in->rank - 1] = k;
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT32;
  ic->out_shapes[0] = ic->out_shapes[1] = out;
  return MF_OK;
}

/* A heap of the best k indices of a row with its worst entry at the root;
 * emptying it from the root writes the winners from the back, best first. */
#define BETTER_AT(v, i, j) (GREATER(v[i], v[j]) || (!GREATER(v[j], v[i]) && (i) < (j)))
#define DEFINE_TOP_K(code, T)                                                                  \
  static void top_k_sift_##code(const T *v, int64_t *heap, int64_t size, int64_t i) {          \
    for (;;) {                                                                                 \
      int64_t c = 2 * i + 1;                                                                   \
      if (c >= size) return;                                                                   \
      if (c + 1 < size && BETTER_AT(v, heap[c], heap[c + 1])) c++;                             \
      if (!BETTER_AT(v, heap[i], heap[c])) return;                                             \
      int64_t t = heap[i];                                                                     \
      heap[i] = heap[c];                                                                       \
      heap[c] = t;                                                                             \
      i = c;                                                                                   \
    }                                                                                          \
  }                                                                                            \
  static void top_k_##code(const T *x, int64_t rows, int64_t n, int64_t k, T *vals, int32_t *idx, \
                           int64_t *heap) {                                                    \
    for (int64_t r = 0; r < rows; r++, x += n, vals += k, idx += k) {                          \
      int64_t size = 0;                                                                        \
      for (int64_t i = 0; i < n; i++) {                                                        \
        if (size < k) {                                                                        \
          int64_t c = size++;                                                                  \
          heap[c] = i;                                                                         \
          while (c > 0 && BETTER_AT(x, heap[(c - 1) / 2], heap[c])) {                          \
            int64_t p = (c - 1) / 2, t = heap[p];                                              \
            heap[p] = heap[c];                                                                 \
            heap[c] = t;                                                                       \
            c = p;                                                                             \
          }                                                                                    \
        } else if (k > 0 && BETTER_AT(x, i, heap[0])) {                                        \
          heap[0] = i;                                                                         \
          top_k_sift_##code(x, heap, size, 0);                                                 \
        }                                                                                      \
      }                                                                                        \
      for (int64_t m = size; m > 0; m--) {                                                     \
        int64_t worst = heap[0];                                                               \
        heap[0] = heap[m - 1];                                                                 \
        top_k_sift_##code(x, heap, m - 1, 0);                                                  \
        vals[m - 1] = x[worst];                                                                \
        idx[m - 1] = (int32_t)worst;                                                           \
      }                                                                                        \
    }                                                                                          \
  }
MF_FOR_NUMERIC_TYPES(DEFINE_TOP_K)
#undef DEFINE_TOP_K

static mf_code top_k_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *vals = ctx->outputs[0], *idx = ctx->outputs[1];
  int64_t k = vals->dims[vals->rank - 1], n = in->dims[in->rank - 1], rows = mf_dims_product(in->dims, 0, in->rank - 1);
  if (vals->size == 0) return MF_OK;
  int64_t *heap = mf_malloc((size_t)k * sizeof *heap);
  if (!heap) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  switch (in->dtype) {
#define CASE(code, T) case code: top_k_##code(in->data, rows, n, k, vals->data, idx->data, heap); break;
    MF_FOR_NUMERIC_TYPES(CASE)
#undef CASE
    default: break;
  }
  mf_free(heap);
  return MF_OK;
}

/* InTopK(predictions [batch, classes], targets [batch]): attr k. Whether the
 * target's prediction is among the k largest of its row; ties at the
 * boundary count as in. As TensorFlow: false for a target out of range or a
 * row with a non-finite prediction. */
static mf_code in_top_k_infer(mf_infer_ctx *ic) {
  if (check_numeric(ic, 0, "predictions") || check_indices(ic, 1, "targets")) return ic->status->code;
  if (!mf_attrs_find(ic->attrs, "k", MF_ATTR_INT))
    return MF_INVALID(ic->status, "%s: InTopK needs an int attribute 'k'", ic->op_name);
  const mf_shape *p = &ic->in_shapes[0], *t = &ic->in_shapes[1];
  char a[160], b[160];
  if (p->rank >= 0 && p->rank != 2)
    return MF_INVALID(ic->status, "%s: predictions must be a matrix [batch, classes], got shape %s", ic->op_name,
                      mf_shape_str(p, a, sizeof a));
  if (t->rank >= 0 && t->rank != 1)
    return MF_INVALID(ic->status, "%s: targets must be a vector [batch], got shape %s", ic->op_name,
                      mf_shape_str(t, a, sizeof a));
  int64_t pb = p->rank == 2 ? p->dims[0] : -1, tb = t->rank == 1 ? t->dims[0] : -1;
  if (!dims_compatible(pb, tb))
    return MF_INVALID(ic->status, "%s: predictions has shape %s but targets %s; they need one entry per batch row",
                      ic->op_name, mf_shape_str(p, a, sizeof a), mf_shape_str(t, b, sizeof b));
  ic->out_dtypes[0] = MF_BOOL;
  ic->out_shapes[0] = (mf_shape){.rank = 1, .dims = {dim_merge(pb, tb)}};
  return MF_OK;
}

#define DEFINE_IN_TOP_K(code, T)                                                               \
  static void in_top_k_##code(const T *x, const int64_t *targets, int64_t batch, int64_t n, int64_t k, \
                              bool *out) {                                                     \
    for (int64_t b = 0; b < batch; b++, x += n) {                                              \
      int64_t t = targets[b];                                                                  \
      bool ok = (uint64_t)t < (uint64_t)n && IS_FINITE(x[t]);                                  \
      int64_t above = 0;                                                                       \
      for (int64_t i = 0; ok && i < n; i++) {                                                  \
        ok = IS_FINITE(x[i]);                                                                  \
        above += x[i] > x[t];                                                                  \
      }                                                                                        \
      out[b] = ok && above < k;                                                                \
    }                                                                                          \
  }
MF_FOR_NUMERIC_TYPES(DEFINE_IN_TOP_K)
#undef DEFINE_IN_TOP_K

static mf_code in_top_k_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *pred = ctx->inputs[0], *targets = ctx->inputs[1];
  int64_t batch = pred->dims[0], n = pred->dims[1], k = mf_attr_int(ctx->attrs, "k", 1);
  if (targets->dims[0] != batch)  /* only a hand-set static shape can promise otherwise */
    return MF_INVALID(ctx->status, "%s: predictions has %lld rows but targets %lld entries", ctx->op->name,
                      (long long)batch, (long long)targets->dims[0]);
  int64_t *owned;
  const int64_t *t = mf_index_values(ctx, targets, &owned);
  if (!t) return ctx->status->code;
  switch (pred->dtype) {
#define CASE(code, T) case code: in_top_k_##code(pred->data, t, batch, n, k, ctx->outputs[0]->data); break;
    MF_FOR_NUMERIC_TYPES(CASE)
#undef CASE
    default: break;
  }
  mf_free(owned);
  return MF_OK;
}

/* ---------- SequenceMask ---------- */

/* SequenceMask(lengths, maxlen): attr dtype (default bool). out[..., j] is
 * j < lengths[...], in dtype. */
static mf_code sequence_mask_infer(mf_infer_ctx *ic) {
  int64_t maxlen = -1;
  if (check_indices(ic, 0, "lengths") || scalar_input(ic, 1, "maxlen", &maxlen)) return ic->status->code;
  mf_dtype t = mf_attr_type(ic->attrs, "dtype", MF_BOOL);
  if (!mf_dtype_size(t)) return MF_INVALID(ic->status, "%s: dtype is not a valid dtype", ic->op_name);
  ic->out_dtypes[0] = t;
  const mf_shape *L = &ic->in_shapes[0];
  if (L->rank < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  if (check_rank_limit(ic, L->rank + 1)) return ic->status->code;
  mf_shape out = *L;
  out.dims[out.rank++] = maxlen;
  ic->out_shapes[0] = out;
  return MF_OK;
}

#define DEFINE_SEQUENCE_MASK(code, T)                                                          \
  static void sequence_mask_##code(T *out, const int64_t *len, int64_t n, int64_t m) {         \
    for (int64_t i = 0; i < n; i++, out += m)                                                  \
      for (int64_t j = 0; j < m; j++) out[j] = (T)(j < len[i]);                                \
  }
MF_FOR_ALL_TYPES(DEFINE_SEQUENCE_MASK)
#undef DEFINE_SEQUENCE_MASK

static mf_code sequence_mask_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *lengths = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  int64_t *owned;
  const int64_t *len = mf_index_values(ctx, lengths, &owned);
  if (!len) return ctx->status->code;
  switch (out->dtype) {
#define CASE(code, T) case code: sequence_mask_##code(out->data, len, lengths->size, out->dims[out->rank - 1]); break;
    MF_FOR_ALL_TYPES(CASE)
#undef CASE
    case MF_STRING: case MF_COMPLEX64: case MF_COMPLEX128: break;  /* SequenceMask makes neither (MF_OP_STRINGS, MF_OP_COMPLEX) */
  }
  mf_free(owned);
  return MF_OK;
}

/* ---------- BooleanMask and BooleanMaskGrad ---------- */

/* Resolves the attr axis (default 0; negative counts from the masked tensor's
 * rank, -1 when unknown) where a mask of rank k starts. */
static mf_code mask_axis(mf_infer_ctx *ic, int rank, int k, int *axis) {
  int64_t a = mf_attr_int(ic->attrs, "axis", 0);
  *axis = -1;
  if (rank < 0) {
    if (a >= 0) *axis = (int)a;
    return MF_OK;
  }
  if (a < 0) a += rank;
  if (a < 0 || (k >= 0 && a + k > rank))
    return MF_INVALID(ic->status, "%s: a mask of rank %d at axis %lld does not fit a tensor of rank %d", ic->op_name, k,
                      (long long)mf_attr_int(ic->attrs, "axis", 0), rank);
  *axis = (int)a;
  return MF_OK;
}

static mf_code check_mask(mf_infer_ctx *ic, int i) {
  if (ic->in_dtypes[i] != MF_BOOL)
    return MF_INVALID(ic->status, "%s: mask must be bool, got %s; compare (tf.greater, ...) or tf.cast to get one",
                      ic->op_name, mf_dtype_name(ic->in_dtypes[i]));
  if (ic->in_shapes[i].rank == 0) return MF_INVALID(ic->status, "%s: mask cannot be a scalar", ic->op_name);
  return MF_OK;
}

/* The number of true entries of a known mask, else -1. */
static int64_t mask_count(const mf_tensor *mask) {
  if (!mask) return -1;
  const bool *m = mask->data;
  int64_t n = 0;
  for (int64_t i = 0; i < mask->size; i++) n += m[i];
  return n;
}

/* BooleanMask(tensor, mask): attr axis. The mask covers tensor dims
 * [axis, axis + rank(mask)); those become one dim holding the entries where
 * the mask is true. Its size depends on the mask's values: shape inference
 * counts them when it sees them (a constant mask, or at run time), and the
 * kernel counts again and allocates its output itself, since a constant mask
 * may be fed another value at run time. */
static mf_code boolean_mask_infer(mf_infer_ctx *ic) {
  if (check_mask(ic, 1)) return ic->status->code;
  const mf_shape *T = &ic->in_shapes[0], *M = &ic->in_shapes[1];
  int axis;
  if (mask_axis(ic, T->rank, M->rank, &axis)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  if (T->rank < 0 || M->rank < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  char a[160], b[160];
  for (int d = 0; d < M->rank; d++)
    if (!dims_compatible(T->dims[axis + d], M->dims[d]))
      return MF_INVALID(ic->status, "%s: mask of shape %s does not match the dims [%d, %d) of the tensor's shape %s",
                        ic->op_name, mf_shape_str(M, a, sizeof a), axis, axis + M->rank, mf_shape_str(T, b, sizeof b));
  mf_shape out = {.rank = T->rank - M->rank + 1};
  int r = 0;
  for (int d = 0; d < axis; d++) out.dims[r++] = T->dims[d];
  out.dims[r++] = mask_count(ic->in_values[1]);
  for (int d = axis + M->rank; d < T->rank; d++) out.dims[r++] = T->dims[d];
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* The positions of the mask's true entries, in a new array; *count their number. */
static int64_t *mask_positions(mf_kernel_ctx *ctx, const mf_tensor *mask, int64_t *count) {
  *count = mask_count(mask);
  int64_t *pos = mf_malloc((size_t)(*count > 0 ? *count : 1) * sizeof *pos);
  if (!pos) {
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
    return NULL;
  }
  const bool *m = mask->data;
  for (int64_t i = 0, n = 0; i < mask->size; i++)
    if (m[i]) pos[n++] = i;
  return pos;
}

/* The loop sizes both BooleanMask kernels share: `outer` slabs of the mask's
 * `m` entries, each a row of `row` bytes. */
static void mask_geometry(const mf_tensor *full, const mf_tensor *mask, int axis, int64_t *outer, size_t *row) {
  *outer = mf_dims_product(full->dims, 0, axis);
  *row = (size_t)mf_dims_product(full->dims, axis + mask->rank, full->rank) * mf_dtype_size(full->dtype);
}

static int kernel_mask_axis(const mf_kernel_ctx *ctx, int rank) {
  int64_t a = mf_attr_int(ctx->attrs, "axis", 0);
  return (int)(a < 0 ? a + rank : a);
}

static mf_code boolean_mask_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0], *mask = ctx->inputs[1];
  int axis = kernel_mask_axis(ctx, in->rank);
  int64_t count, outer;
  size_t row;
  mask_geometry(in, mask, axis, &outer, &row);
  int64_t *pos = mask_positions(ctx, mask, &count);
  if (!pos) return ctx->status->code;
  int64_t dims[MF_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < axis; d++) dims[rank++] = in->dims[d];
  dims[rank++] = count;
  for (int d = axis + mask->rank; d < in->rank; d++) dims[rank++] = in->dims[d];
  mf_tensor *out = mf_kernel_alloc_output(ctx, 0, in->dtype, rank, dims);
  if (!out) {
    mf_free(pos);
    return ctx->status->code;
  }
  for (int64_t o = 0; o < outer; o++)
    take_rows((char *)out->data + (size_t)(o * count) * row, (const char *)in->data + (size_t)(o * mask->size) * row,
              pos, count, row);
  mf_free(pos);
  return MF_OK;
}

/* BooleanMaskGrad(dy, mask): attr axis. Zeros of the masked tensor's shape
 * with the rows of dy put back where the mask is true. */
static mf_code boolean_mask_grad_infer(mf_infer_ctx *ic) {
  if (check_mask(ic, 1)) return ic->status->code;
  const mf_shape *dy = &ic->in_shapes[0], *M = &ic->in_shapes[1];
  int rank = dy->rank < 0 || M->rank < 0 ? -1 : dy->rank - 1 + M->rank, axis;
  if (mask_axis(ic, rank, M->rank, &axis)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  if (rank < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  if (check_rank_limit(ic, rank)) return ic->status->code;
  int64_t count = mask_count(ic->in_values[1]);
  char a[160], b[160];
  if (!dims_compatible(dy->dims[axis], count))
    return MF_INVALID(ic->status, "%s: the gradient has shape %s, but the mask %s holds %lld true entries", ic->op_name,
                      mf_shape_str(dy, a, sizeof a), mf_shape_str(M, b, sizeof b), (long long)count);
  mf_shape out = {.rank = rank};
  int r = 0;
  for (int d = 0; d < axis; d++) out.dims[r++] = dy->dims[d];
  for (int d = 0; d < M->rank; d++) out.dims[r++] = M->dims[d];
  for (int d = axis + 1; d < dy->rank; d++) out.dims[r++] = dy->dims[d];
  ic->out_shapes[0] = out;
  return MF_OK;
}

static mf_code boolean_mask_grad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *dy = ctx->inputs[0], *mask = ctx->inputs[1];
  mf_tensor *out = ctx->outputs[0];
  int axis = kernel_mask_axis(ctx, out->rank);
  int64_t count, outer;
  size_t row;
  mask_geometry(out, mask, axis, &outer, &row);
  int64_t *pos = mask_positions(ctx, mask, &count);
  if (!pos) return ctx->status->code;
  if (count != dy->dims[axis]) {  /* a constant mask fed another value */
    mf_free(pos);
    return MF_INVALID(ctx->status, "%s: the gradient has %lld entries along axis %d, but the mask holds %lld true "
                      "entries", ctx->op->name, (long long)dy->dims[axis], axis, (long long)count);
  }
  memset(out->data, 0, mf_tensor_nbytes(out));
  for (int64_t o = 0; o < outer; o++)
    put_rows((char *)out->data + (size_t)(o * mask->size) * row, (const char *)dy->data + (size_t)(o * count) * row,
             pos, count, row);
  mf_free(pos);
  return MF_OK;
}

/* ---------- gradients ---------- */

/* Rules build graph ops only (so they differentiate again); the helper ops'
 * rules close the loop: Gather <-> GatherGrad, GatherNd <-> ScatterNd,
 * Pad <-> MirrorPadGrad, BooleanMask <-> BooleanMaskGrad. */

/* input 0's gradient as `type`(dy, the op's input 1) with the op's attributes:
 * the gradient of an op linear in its first input (or its adjoint). */
static mf_code dy_with_input1_grad(mf_grad_ctx *gc, const char *type) {
  const mf_output in[2] = {gc->grads[0], mf_op_in(gc->op, 1)};
  gc->input_grads[0] = mf_grad_rebuild(gc, type, in, 2);
  return gc->status->code;
}

/* Gather: dy added back into the rows it came from, by a GatherGrad(dy,
 * indices, Shape(params)) with Gather's axis and batch_dims. */
static mf_code gather_grad(mf_grad_ctx *gc) {
  const mf_output in[3] = {gc->grads[0], mf_op_in(gc->op, 1), mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0))};
  gc->input_grads[0] = mf_grad_rebuild(gc, "GatherGrad", in, 3);
  return gc->status->code;
}

/* GatherGrad is linear in dy: its gradient gathers again. */
static mf_code gather_grad_grad(mf_grad_ctx *gc) { return dy_with_input1_grad(gc, "Gather"); }

/* GatherNd: dy scattered back (ScatterNd adds duplicates). */
static mf_code gather_nd_grad(mf_grad_ctx *gc) {
  mf_output shape = mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0));
  mf_op_desc *d = mf_grad_begin(gc, "ScatterNd");
  if (d) {
    mf_op_desc_add_input(d, mf_op_in(gc->op, 1));
    mf_op_desc_add_input(d, gc->grads[0]);
    mf_op_desc_add_input(d, shape);
  }
  gc->input_grads[0] = mf_grad_finish(gc, d);
  return gc->status->code;
}

/* ScatterNd: each update's gradient is dy at its index vector. */
static mf_code scatter_nd_grad(mf_grad_ctx *gc) {
  gc->input_grads[1] = mf_grad_op2(gc, "GatherNd", gc->grads[0], mf_op_in(gc->op, 0));
  return gc->status->code;
}

/* Pad: CONSTANT pads slice dy back to the input (the constant has no
 * gradient, as in TensorFlow); mirrored pads also add the copies back. */
static mf_code pad_grad(mf_grad_ctx *gc) {
  const int64_t *pads;
  int rank;
  pad_mode mode;
  if (pad_attrs(gc->op->name, &gc->op->attrs, -1, &pads, &rank, &mode, gc->status)) return gc->status->code;
  mf_op_desc *d = mf_grad_begin(gc, mode == PAD_CONSTANT ? "StridedSlice" : "MirrorPadGrad");
  if (d) {
    mf_op_desc_add_input(d, gc->grads[0]);
    if (mode == PAD_CONSTANT) {
      int64_t begin[MF_MAX_RANK], end[MF_MAX_RANK], strides[MF_MAX_RANK], end_mask = 0;
      for (int i = 0; i < rank; i++) {
        begin[i] = pads[2 * i];
        end[i] = -pads[2 * i + 1];  /* counted from the end; 0 means "to the end" via end_mask */
        strides[i] = 1;
        if (pads[2 * i + 1] == 0) end_mask |= 1LL << i;
      }
      mf_op_desc_set_attr_ints(d, "begin", begin, rank);
      mf_op_desc_set_attr_ints(d, "end", end, rank);
      mf_op_desc_set_attr_ints(d, "strides", strides, rank);
      mf_op_desc_set_attr_int(d, "end_mask", end_mask);
    } else {
      mf_op_desc_set_attr_ints(d, "paddings", pads, 2 * rank);
      mf_op_desc_set_attr_string(d, "mode", pad_mode_names[mode]);
    }
  }
  gc->input_grads[0] = mf_grad_finish(gc, d);
  return gc->status->code;
}

/* MirrorPadGrad is linear in dy and Pad's adjoint: its gradient pads again
 * (the same paddings and mode). */
static mf_code mirror_pad_grad_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_rebuild(gc, "Pad", gc->grads, 1);
  return gc->status->code;
}

/* ReverseV2: dy reversed along the same axes. */
static mf_code reverse_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_rebuild(gc, "ReverseV2", gc->grads, 1);
  return gc->status->code;
}

/* A Cumsum of t along the axis of the op (a Cumsum or Cumprod) being differentiated. */
static mf_output cumsum_along(mf_grad_ctx *gc, mf_output t, bool exclusive, bool reverse) {
  mf_op_desc *d = mf_grad_begin_like(gc, "Cumsum", &t, 1);
  if (d) {
    mf_op_desc_set_attr_bool(d, "exclusive", exclusive);
    mf_op_desc_set_attr_bool(d, "reverse", reverse);
  }
  return mf_grad_finish(gc, d);
}

/* Cumsum: dy summed the other way along the axis (same exclusiveness). */
static mf_code cumsum_grad(mf_grad_ctx *gc) {
  bool exclusive = mf_attr_bool(&gc->op->attrs, "exclusive", false);
  gc->input_grads[0] = cumsum_along(gc, gc->grads[0], exclusive, !mf_attr_bool(&gc->op->attrs, "reverse", false));
  return gc->status->code;
}

/* Cumprod: x_k's gradient is the sum, over the products y_i that hold it, of
 * dy_i times y_i without x_k. TensorFlow's rule, cumsum(dy * y) the other way
 * over x, divides by zero at zeros; here, in the scan's order, the elements
 * before the first zero take that rule, the first zero takes the same sum of
 * the products with that zero replaced by 1 (y1), and later elements take 0:
 * every product they are in holds the zero. Masks are held constant, as in
 * Prod's rule (reduce.c). */
static mf_code cumprod_grad(mf_grad_ctx *gc) {
  const mf_attrs *a = &gc->op->attrs;
  bool exclusive = mf_attr_bool(a, "exclusive", false), reverse = mf_attr_bool(a, "reverse", false);
  mf_output x = mf_op_in(gc->op, 0), y = mf_op_out(gc->op, 0), dy = gc->grads[0];
  mf_dtype t = mf_port_dtype(x);
  mf_output zero = mf_grad_scalar(gc, t, 0), one = mf_grad_scalar(gc, t, 1);
  mf_output is_zero = mf_grad_cast(gc, mf_grad_op2(gc, "Equal", x, zero), t);
  mf_output zeros_so_far = cumsum_along(gc, is_zero, false, reverse);
  mf_output no_zero = mf_grad_op2(gc, "Equal", zeros_so_far, zero);
  mf_output first_zero = mf_grad_op2(gc, "Equal", zeros_so_far, one);
  first_zero = mf_grad_op2(gc, "Mul", is_zero, mf_grad_cast(gc, first_zero, t));
  mf_output x_safe = mf_grad_op3(gc, "Select", no_zero, x, mf_grad_op1(gc, "OnesLike", x));
  mf_output before = cumsum_along(gc, mf_grad_op2(gc, "Mul", dy, y), exclusive, !reverse);
  before = mf_grad_op2(gc, "Mul", mf_grad_cast(gc, no_zero, t), mf_grad_op2(gc, "Div", before, x_safe));
  mf_output y1 = mf_grad_rebuild(gc, "Cumprod", (mf_output[]){mf_grad_op2(gc, "Add", x, first_zero)}, 1);
  mf_output at_zero = cumsum_along(gc, mf_grad_op2(gc, "Mul", dy, y1), exclusive, !reverse);
  gc->input_grads[0] = mf_grad_op2(gc, "Add", before, mf_grad_op2(gc, "Mul", first_zero, at_zero));
  return gc->status->code;
}

/* OneHot: nothing flows to indices or depth; on_value gets dy summed where
 * the one-hot mask is 1, off_value the rest of dy's sum. */
static mf_code one_hot_grad(mf_grad_ctx *gc) {
  mf_dtype t = gc->op->out_dtypes[0];
  if (!mf_dtype_is_float(t)) return MF_OK;
  mf_output one = mf_grad_scalar(gc, t, 1), zero = mf_grad_scalar(gc, t, 0);
  const mf_output in[4] = {mf_op_in(gc->op, 0), mf_op_in(gc->op, 1), one, zero};
  mf_output mask = mf_grad_rebuild(gc, "OneHot", in, 4);
  mf_output on = mf_grad_op1(gc, "Sum", mf_grad_op2(gc, "Mul", gc->grads[0], mask));
  gc->input_grads[2] = on;
  gc->input_grads[3] = mf_grad_op2(gc, "Sub", mf_grad_op1(gc, "Sum", gc->grads[0]), on);
  return gc->status->code;
}

/* TopKV2: the values' gradient added at the indices along the last axis (a
 * gather with batch_dims = axis = -1 read them). */
static mf_code top_k_grad(mf_grad_ctx *gc) {
  if (!gc->grads[0].op) return MF_OK;
  mf_output shape = mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0));
  mf_op_desc *d = mf_grad_begin(gc, "GatherGrad");
  if (d) {
    mf_op_desc_add_input(d, gc->grads[0]);
    mf_op_desc_add_input(d, mf_op_out(gc->op, 1));
    mf_op_desc_add_input(d, shape);
    mf_op_desc_set_attr_int(d, "axis", -1);
    mf_op_desc_set_attr_int(d, "batch_dims", -1);
  }
  gc->input_grads[0] = mf_grad_finish(gc, d);
  return gc->status->code;
}

/* BooleanMask: dy put back where the mask is true, zeros elsewhere. */
static mf_code boolean_mask_grad(mf_grad_ctx *gc) {
  return dy_with_input1_grad(gc, "BooleanMaskGrad");
}

/* BooleanMaskGrad is linear in dy: its gradient masks again. */
static mf_code boolean_mask_grad_grad(mf_grad_ctx *gc) {
  return dy_with_input1_grad(gc, "BooleanMask");
}

static const mf_op_def defs[] = {
    {.name = "Gather", .num_inputs = 2, .num_outputs = 1,
     .infer = gather_infer, .kernel = {[MF_CPU] = gather_kernel}, .grad = gather_grad},
    {.name = "GatherGrad", .num_inputs = 3, .num_outputs = 1, .flags = MF_OP_INTERNAL, .value_inputs = 1u << 2,
     .infer = gather_grad_infer, .kernel = {[MF_CPU] = gather_grad_kernel}, .grad = gather_grad_grad},
    {.name = "GatherNd", .num_inputs = 2, .num_outputs = 1,
     .infer = gather_nd_infer, .kernel = {[MF_CPU] = gather_nd_kernel}, .grad = gather_nd_grad},
    {.name = "ScatterNd", .num_inputs = 3, .num_outputs = 1, .value_inputs = 1u << 2,
     .infer = scatter_nd_infer, .kernel = {[MF_CPU] = scatter_nd_kernel}, .grad = scatter_nd_grad},
    {.name = "Pad", .num_inputs = 1, .num_outputs = 1,
     .infer = pad_infer, .kernel = {[MF_CPU] = pad_kernel}, .grad = pad_grad},
    {.name = "MirrorPadGrad", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_INTERNAL,
     .infer = mirror_pad_grad_infer, .kernel = {[MF_CPU] = mirror_pad_grad_kernel}, .grad = mirror_pad_grad_grad},
    {.name = "ReverseV2", .num_inputs = 1, .num_outputs = 1,
     .infer = reverse_infer, .kernel = {[MF_CPU] = reverse_kernel}, .grad = reverse_grad},
    {.name = "Cumsum", .num_inputs = 1, .num_outputs = 1,
     .infer = cumulative_infer, .kernel = {[MF_CPU] = Cumsum_kernel}, .grad = cumsum_grad},
    {.name = "Cumprod", .num_inputs = 1, .num_outputs = 1,
     .infer = cumulative_infer, .kernel = {[MF_CPU] = Cumprod_kernel}, .grad = cumprod_grad},
    {.name = "OneHot", .num_inputs = 4, .num_outputs = 1, .value_inputs = 1u << 1,
     .infer = one_hot_infer, .kernel = {[MF_CPU] = one_hot_kernel}, .grad = one_hot_grad},
    {.name = "ArgMax", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = arg_infer, .kernel = {[MF_CPU] = argmax_kernel, [MF_CUDA] = mf_gpu_argmax},
     .cuda_dtypes = MF_DTYPE_MASK(MF_FOR_SIGNED_TYPES)},
    {.name = "ArgMin", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = arg_infer, .kernel = {[MF_CPU] = argmin_kernel, [MF_CUDA] = mf_gpu_argmin},
     .cuda_dtypes = MF_DTYPE_MASK(MF_FOR_SIGNED_TYPES)},
    {.name = "TopKV2", .num_inputs = 2, .num_outputs = 2, .value_inputs = 1u << 1,
     .infer = top_k_infer, .kernel = {[MF_CPU] = top_k_kernel}, .grad = top_k_grad},
    {.name = "InTopK", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = in_top_k_infer, .kernel = {[MF_CPU] = in_top_k_kernel}},
    {.name = "SequenceMask", .num_inputs = 2, .num_outputs = 1, .value_inputs = 1u << 1,
     .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = sequence_mask_infer, .kernel = {[MF_CPU] = sequence_mask_kernel}},
    {.name = "BooleanMask", .num_inputs = 2, .num_outputs = 1, .value_inputs = 1u << 1, .flags = MF_OP_SETS_OUTPUTS,
     .infer = boolean_mask_infer, .kernel = {[MF_CPU] = boolean_mask_kernel}, .grad = boolean_mask_grad},
    {.name = "BooleanMaskGrad", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_INTERNAL, .value_inputs = 1u << 1,
     .infer = boolean_mask_grad_infer, .kernel = {[MF_CPU] = boolean_mask_grad_kernel},
     .grad = boolean_mask_grad_grad},
};
MF_OP_TABLE(mf_ops_index, defs);
