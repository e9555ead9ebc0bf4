/* sparse.c — tf.sparse's ops on SparseTensors given as their three parts
 * (indices [N, rank] int32/int64, values [N], dense_shape [rank]), with
 * TensorFlow's checks and gradient rules:
 * - SparseToDense(indices, output_shape, values, default_value): the dense
 *   tensor, default_value where no index names an element. indices are a
 *   matrix here (the Lua wrappers reshape TensorFlow's vector and scalar
 *   forms); values a vector of N or a scalar for all. Indices out of bounds
 *   are errors; with validate_indices, repeated and unsorted ones too.
 * - SparseTensorDenseMatMul(a_indices, a_values, a_shape, b): A B for a
 *   sparse matrix A (adjoint_a, adjoint_b transpose: the dtypes are real).
 * - SparseTensorDenseAdd(a_indices, a_values, a_shape, b): b with each value
 *   added at its index (repeated indices add up); a_shape must equal b's.
 * - SparseReorder(indices, values, dense_shape): the entries sorted into
 *   row-major order (what to_dense and TensorFlow's sparse ops expect).
 * - SparseAdd(a_indices, a_values, a_shape, b_indices, b_values, b_shape,
 *   thresh): the SparseTensor a + b, a merge of the two (each in row-major
 *   order); where both have an entry, the sum is kept when |sum| >= thresh.
 *   SparseAddGrad routes the sum's value gradient back to both operands.
 * The SparseTensor class, to_dense, reduce_sum and sparse_placeholder are in
 * lua/moonflow/ops/sparse.lua. */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "core/memory.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "kernels/elementwise.h"
#include "kernels/helpers.h"
#include "exec/kernel_api.h"

#include <stdio.h>
#include <string.h>

static const unsigned INDEX_TYPES = (1u << MF_INT32) | (1u << MF_INT64);
static const unsigned MATMUL_TYPES = MF_DTYPE_MASK(MF_FOR_SIGNED_TYPES);

/* ---------- shape inference ---------- */

/* Input i has a dtype of `dtypes` and rank `rank` (when known). */
static mf_code check_input(mf_infer_ctx *ic, int i, const char *what, unsigned dtypes, int rank,
                           const char *kind) {
  char has[64], buf[160];
  snprintf(has, sizeof has, "%s has", what);
  if (mf_check_dtype(ic, i, has, dtypes)) return ic->status->code;
  const mf_shape *s = &ic->in_shapes[i];
  if (s->rank >= 0 && s->rank != rank)
    return MF_INVALID(ic->status, "%s: %s must be a %s, got shape %s", ic->op_name, what, kind,
                      mf_shape_str(s, buf, sizeof buf));
  return MF_OK;
}

/* The sparse operand at inputs [first, first + 3): indices [N, rank] and
 * values [N] agreeing on N, the dense shape a vector of rank elements. The
 * dense shape's value, when known, goes to *dense (unknown dims -1). */
static mf_code check_sparse(mf_infer_ctx *ic, int first, const char *const names[3], mf_shape *dense) {
  char a[160], b[160];
  const mf_shape *I = &ic->in_shapes[first], *V = &ic->in_shapes[first + 1], *S = &ic->in_shapes[first + 2];
  if (check_input(ic, first, names[0], INDEX_TYPES, 2, "matrix [N, rank]") ||
      check_input(ic, first + 1, names[1], MF_DTYPE_MASK(MF_FOR_NUMERIC_TYPES), 1, "vector [N]") ||
      check_input(ic, first + 2, names[2], INDEX_TYPES, 1, "vector [rank]"))
    return ic->status->code;
  if (I->rank == 2 && V->rank == 1 && I->dims[0] >= 0 && V->dims[0] >= 0 && I->dims[0] != V->dims[0])
    return MF_INVALID(ic->status, "%s: %s %s and %s %s disagree on the number of entries", ic->op_name, names[0],
                      mf_shape_str(I, a, sizeof a), names[1], mf_shape_str(V, b, sizeof b));
  if (I->rank == 2 && S->rank == 1 && I->dims[1] >= 0 && S->dims[0] >= 0 && I->dims[1] != S->dims[0])
    return MF_INVALID(ic->status, "%s: %s %s has %lld columns but %s %s has %lld elements", ic->op_name, names[0],
                      mf_shape_str(I, a, sizeof a), (long long)I->dims[1], names[2], mf_shape_str(S, b, sizeof b),
                      (long long)S->dims[0]);
  *dense = mf_infer_shape_value(ic, first + 2);
  if (dense->rank < 0 && S->rank == 1 && S->dims[0] >= 0) {
    *dense = (mf_shape){.rank = (int)S->dims[0]};
    for (int d = 0; d < dense->rank; d++) dense->dims[d] = -1;
  }
  for (int d = 0; d < dense->rank; d++)
    if (dense->dims[d] < -1)
      return MF_INVALID(ic->status, "%s: %s %s has a negative dimension", ic->op_name, names[2],
                        mf_shape_str(dense, a, sizeof a));
  return MF_OK;
}

/* SparseToDense(indices, output_shape, values, default_value). */
static mf_code to_dense_infer(mf_infer_ctx *ic) {
  char buf[160];
  static const char *const names[3] = {"sparse_indices", "sparse_values", "output_shape"};
  const mf_shape *V = &ic->in_shapes[2];
  if (check_input(ic, 0, names[0], INDEX_TYPES, 2, "matrix [N, rank]") ||
      check_input(ic, 1, names[2], INDEX_TYPES, 1, "vector [rank]") ||
      mf_check_same_dtype(ic, 2, names[1], 3, "default_value"))
    return ic->status->code;
  if (V->rank > 1)
    return MF_INVALID(ic->status, "%s: sparse_values must be a vector [N] or a scalar, got shape %s", ic->op_name,
                      mf_shape_str(V, buf, sizeof buf));
  if (ic->in_shapes[3].rank > 0)
    return MF_INVALID(ic->status, "%s: default_value must be a scalar, got shape %s", ic->op_name,
                      mf_shape_str(&ic->in_shapes[3], buf, sizeof buf));
  const mf_shape *I = &ic->in_shapes[0];
  if (I->rank == 2 && V->rank == 1 && I->dims[0] >= 0 && V->dims[0] >= 0 && I->dims[0] != V->dims[0])
    return MF_INVALID(ic->status, "%s: sparse_values has shape %s, should be [] or [%lld]", ic->op_name,
                      mf_shape_str(V, buf, sizeof buf), (long long)I->dims[0]);
  const mf_shape *S = &ic->in_shapes[1];
  if (I->rank == 2 && S->rank == 1 && I->dims[1] >= 0 && S->dims[0] >= 0 && I->dims[1] != S->dims[0])
    return MF_INVALID(ic->status, "%s: sparse_indices has %lld columns but output_shape has %lld elements",
                      ic->op_name, (long long)I->dims[1], (long long)S->dims[0]);
  mf_shape out = mf_infer_shape_value(ic, 1);
  for (int d = 0; d < out.rank; d++)
    if (out.dims[d] < -1)
      return MF_INVALID(ic->status, "%s: output_shape %s has a negative dimension", ic->op_name,
                        mf_shape_str(&out, buf, sizeof buf));
  ic->out_dtypes[0] = ic->in_dtypes[2];
  ic->out_shapes[0] = out;
  return MF_OK;
}

static const char *const A_NAMES[3] = {"a_indices", "a_values", "a_shape"};

/* SparseTensorDenseMatMul(a_indices, a_values, a_shape, b): [M, N]. */
static mf_code matmul_infer(mf_infer_ctx *ic) {
  char a[160], b[160];
  mf_shape dense;
  if (check_sparse(ic, 0, A_NAMES, &dense) || check_input(ic, 3, "b", MATMUL_TYPES, 2, "matrix") ||
      mf_check_same_dtype(ic, 1, "a_values", 3, "b"))
    return ic->status->code;
  if (dense.rank >= 0 && dense.rank != 2)
    return MF_INVALID(ic->status, "%s: a_shape must have 2 elements (A is a matrix), got %d", ic->op_name,
                      dense.rank);
  bool adj_a = mf_attr_bool(ic->attrs, "adjoint_a", false), adj_b = mf_attr_bool(ic->attrs, "adjoint_b", false);
  int64_t m = -1, k = -1, kb = -1, n = -1;
  if (dense.rank == 2) {
    m = dense.dims[adj_a ? 1 : 0];
    k = dense.dims[adj_a ? 0 : 1];
  }
  const mf_shape *B = &ic->in_shapes[3];
  if (B->rank == 2) {
    kb = B->dims[adj_b ? 1 : 0];
    n = B->dims[adj_b ? 0 : 1];
  }
  if (k >= 0 && kb >= 0 && k != kb)
    return MF_INVALID(ic->status,
                      "%s: Cannot multiply A and B because inner dimension does not match: %lld vs. %lld.  Did you "
                      "forget a transpose?  Dimensions of A: %s.  Dimensions of B: %s",
                      ic->op_name, (long long)k, (long long)kb, mf_shape_str(&dense, a, sizeof a),
                      mf_shape_str(B, b, sizeof b));
  ic->out_dtypes[0] = ic->in_dtypes[3];
  ic->out_shapes[0] = mf_shape_make(2, (int64_t[]){m, n});
  return MF_OK;
}

/* a_shape against b's shape: equal, no broadcasting. */
static mf_code check_same_dense(const char *op, const mf_shape *dense, const mf_shape *b, mf_status *s) {
  char x[160], y[160];
  if (dense->rank < 0 || b->rank < 0) return MF_OK;
  bool same = dense->rank == b->rank;
  for (int d = 0; same && d < b->rank; d++)
    same = dense->dims[d] < 0 || b->dims[d] < 0 || dense->dims[d] == b->dims[d];
  if (!same)
    return MF_INVALID(s, "%s: the sparse side's shape %s does not equal the dense side's %s (no broadcasting is "
                         "supported)", op, mf_shape_str(dense, x, sizeof x), mf_shape_str(b, y, sizeof y));
  return MF_OK;
}

/* SparseTensorDenseAdd(a_indices, a_values, a_shape, b): b's shape. */
static mf_code add_infer(mf_infer_ctx *ic) {
  mf_shape dense, out;
  if (check_sparse(ic, 0, A_NAMES, &dense) || mf_check_same_dtype(ic, 1, "a_values", 3, "b") ||
      check_same_dense(ic->op_name, &dense, &ic->in_shapes[3], ic->status))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[3];
  ic->out_shapes[0] = mf_merge_shapes(&dense, &ic->in_shapes[3], &out) ? out : ic->in_shapes[3];
  return MF_OK;
}

/* ---------- index checks (kernels) ---------- */

/* "[1,3]": index row r of indices [N, rank]. */
static char *index_str(char *buf, size_t n, const int64_t *idx, int64_t rank) {
  size_t at = 0;
  buf[at++] = '[';
  for (int64_t d = 0; d < rank && at < n; d++)
    at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? "," : "", (long long)idx[d]);
  if (at < n - 1) {
    buf[at++] = ']';
    buf[at] = '\0';
  }
  return buf;
}

/* What check_indices asks of the order of the indices. */
typedef enum index_order { ANY_ORDER, ROW_MAJOR, ROW_MAJOR_UNIQUE } index_order;

/* Each index within dims (0 <= index < dims); in row-major order (each not
 * before the one before it) or, unique, each after it (TensorFlow's words). */
static mf_code check_indices(const char *op, const int64_t *idx, int64_t count, int rank, const int64_t *dims,
                             index_order sorted, mf_status *s) {
  char a[160], b[160];
  for (int64_t i = 0; i < count; i++) {
    const int64_t *x = idx + i * rank;
    for (int d = 0; d < rank; d++)
      if (x[d] < 0 || x[d] >= dims[d]) {
        mf_shape shape = mf_shape_make(rank, dims);
        return MF_INVALID(s, "%s: indices[%lld] = %s is out of bounds: need 0 <= index < %s", op, (long long)i,
                          index_str(a, sizeof a, x, rank), mf_shape_str(&shape, b, sizeof b));
      }
    if (sorted == ANY_ORDER || i == 0) continue;
    int order = 0;
    for (int d = 0; d < rank && !order; d++) order = x[d] < x[d - rank] ? -1 : x[d] > x[d - rank];
    if (order < 0)
      return MF_INVALID(s,
                        "%s: indices[%lld] = %s is out of order. Many sparse ops require sorted indices. Use "
                        "`tf.sparse.reorder` to create a correctly ordered copy.",
                        op, (long long)i, index_str(a, sizeof a, x, rank));
    if (order == 0 && sorted == ROW_MAJOR_UNIQUE)
      return MF_INVALID(s, "%s: indices[%lld] = %s is repeated", op, (long long)i, index_str(a, sizeof a, x, rank));
  }
  return MF_OK;
}

/* The dense shape's value (input i, `rank` elements) into dims; an error when it disagrees with `expect`. */
static mf_code dense_dims(mf_kernel_ctx *ctx, int i, int64_t *dims, int rank, const int64_t *expect) {
  const mf_tensor *t = ctx->inputs[i];
  char a[160], b[160];
  for (int d = 0; d < rank && d < t->size; d++) dims[d] = mf_load_int64(t->data, t->dtype, d);
  mf_shape got = mf_shape_make((int)t->size, dims), want = mf_shape_make(rank, expect);
  if (t->size != rank || (expect && memcmp(dims, expect, (size_t)rank * sizeof *dims) != 0))
    return MF_INVALID(ctx->status, "%s: the dense shape %s does not fit the shape %s of the other operand",
                      ctx->op->name, t->size == rank ? mf_shape_str(&got, a, sizeof a) : "(of another rank)",
                      mf_shape_str(&want, b, sizeof b));
  return MF_OK;
}

/* ---------- kernels ---------- */

/* The flat position of each index row within dims. */
static void flat_positions(const int64_t *idx, int64_t count, int rank, const int64_t *dims, int64_t *out) {
  for (int64_t i = 0; i < count; i++) {
    int64_t at = 0;
    for (int d = 0; d < rank; d++) at = at * dims[d] + idx[i * rank + d];
    out[i] = at;
  }
}

/* The indices as int64 and their flat positions within dims (checked); NULL with the status set. */
static int64_t *checked_positions(mf_kernel_ctx *ctx, const mf_tensor *indices, const int64_t *dims,
                                  index_order sorted) {
  int64_t *owned, count = indices->dims[0];
  int rank = (int)indices->dims[1];
  const int64_t *idx = mf_index_values(ctx, indices, &owned);
  if (!idx) return NULL;
  int64_t *pos = NULL;
  if (!check_indices(ctx->op->name, idx, count, rank, dims, sorted, ctx->status)) {
    pos = mf_malloc((size_t)(count ? count : 1) * sizeof *pos);
    if (pos) flat_positions(idx, count, rank, dims, pos);
    else mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  }
  mf_free(owned);
  return pos;
}

static mf_code to_dense_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *indices = ctx->inputs[0], *values = ctx->inputs[2], *dflt = ctx->inputs[3];
  mf_tensor *out = ctx->outputs[0];
  if (values->rank == 1 && values->dims[0] != indices->dims[0]) {
    char buf[160];
    mf_shape v = mf_shape_of(values);
    return MF_INVALID(ctx->status, "%s: sparse_values has shape %s, should be [] or [%lld]", ctx->op->name,
                      mf_shape_str(&v, buf, sizeof buf), (long long)indices->dims[0]);
  }
  if (indices->dims[1] != out->rank)
    return MF_INVALID(ctx->status, "%s: sparse_indices has %lld columns but output_shape has %d elements",
                      ctx->op->name, (long long)indices->dims[1], out->rank);
  int64_t *pos = checked_positions(ctx, indices, out->dims,
                                   mf_attr_bool(ctx->attrs, "validate_indices", true) ? ROW_MAJOR_UNIQUE : ANY_ORDER);
  if (!pos) return ctx->status->code;
  size_t es = mf_dtype_size(out->dtype);
  char *o = out->data;
  for (int64_t i = 0; i < out->size; i++) memcpy(o + (size_t)i * es, dflt->data, es);
  for (int64_t i = 0; i < indices->dims[0]; i++)
    memcpy(o + (size_t)pos[i] * es, (const char *)values->data + (values->rank ? (size_t)i * es : 0), es);
  mf_free(pos);
  return MF_OK;
}

#define DEFINE_SPARSE_MATMUL(code, T)                                                                     \
  static void sparse_matmul_##code(T *out, const int64_t *idx, int64_t nnz, const T *v, const T *b,     \
                                   int64_t m, int64_t n, int64_t b_cols, bool adj_a, bool adj_b) {      \
    memset(out, 0, (size_t)(m * n) * sizeof(T));                                                        \
    for (int64_t e = 0; e < nnz; e++) {                                                                 \
      int64_t i = idx[2 * e + (adj_a ? 1 : 0)], k = idx[2 * e + (adj_a ? 0 : 1)];                       \
      T *o = out + i * n;                                                                               \
      if (adj_b)                                                                                        \
        for (int64_t j = 0; j < n; j++) o[j] += v[e] * b[j * b_cols + k];                               \
      else                                                                                              \
        for (int64_t j = 0; j < n; j++) o[j] += v[e] * b[k * b_cols + j];                               \
    }                                                                                                   \
  }
MF_FOR_SIGNED_TYPES(DEFINE_SPARSE_MATMUL)

static mf_code matmul_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *indices = ctx->inputs[0], *values = ctx->inputs[1], *b = ctx->inputs[3];
  mf_tensor *out = ctx->outputs[0];
  bool adj_a = mf_attr_bool(ctx->attrs, "adjoint_a", false), adj_b = mf_attr_bool(ctx->attrs, "adjoint_b", false);
  int64_t dims[2], k = b->dims[adj_b ? 1 : 0];
  if (ctx->inputs[2]->size != 2 || indices->dims[1] != 2)
    return MF_INVALID(ctx->status, "%s: A must be a matrix: a_shape has %lld elements and a_indices %lld columns",
                      ctx->op->name, (long long)ctx->inputs[2]->size, (long long)indices->dims[1]);
  /* A's [rows, columns] as stored: out's rows and b's inner dim, swapped with adjoint_a. */
  const int64_t expect[2] = {adj_a ? k : out->dims[0], adj_a ? out->dims[0] : k};
  if (dense_dims(ctx, 2, dims, 2, expect)) return ctx->status->code;
  int64_t *owned;
  const int64_t *idx = mf_index_values(ctx, indices, &owned);
  if (!idx) return ctx->status->code;
  if (!check_indices(ctx->op->name, idx, indices->dims[0], 2, dims, ANY_ORDER, ctx->status)) {
    switch (out->dtype) {
#define MATMUL_CASE(code, T)                                                                                 \
  case code:                                                                                                 \
    sparse_matmul_##code(out->data, idx, indices->dims[0], values->data, b->data, out->dims[0], out->dims[1], \
                         b->dims[1], adj_a, adj_b);                                                          \
    break;
      MF_FOR_SIGNED_TYPES(MATMUL_CASE)
      default: break;
    }
  }
  mf_free(owned);
  return ctx->status->code;
}

#define DEFINE_SPARSE_ADD(code, T)                                                                     \
  static void sparse_add_##code(T *out, const int64_t *pos, int64_t nnz, const T *v) {               \
    for (int64_t e = 0; e < nnz; e++) out[pos[e]] = MF_WRAPPING_ADD(out[pos[e]], v[e]);              \
  }
MF_FOR_NUMERIC_TYPES(DEFINE_SPARSE_ADD)

static mf_code add_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *indices = ctx->inputs[0], *values = ctx->inputs[1], *b = ctx->inputs[3];
  mf_tensor *out = ctx->outputs[0];
  int64_t dims[MF_MAX_RANK];
  if (indices->dims[1] != b->rank || ctx->inputs[2]->size != b->rank)
    return MF_INVALID(ctx->status, "%s: a has rank %lld but b has rank %d", ctx->op->name,
                      (long long)ctx->inputs[2]->size, b->rank);
  if (dense_dims(ctx, 2, dims, b->rank, b->dims)) return ctx->status->code;
  int64_t *pos = checked_positions(ctx, indices, b->dims, ANY_ORDER);
  if (!pos) return ctx->status->code;
  memcpy(out->data, b->data, (size_t)b->size * mf_dtype_size(b->dtype));
  switch (out->dtype) {
#define ADD_CASE(code, T) case code: sparse_add_##code(out->data, pos, indices->dims[0], values->data); break;
    MF_FOR_NUMERIC_TYPES(ADD_CASE)
    default: break;
  }
  mf_free(pos);
  return MF_OK;
}

/* SparseReorder: the entries in row-major order of their indices, ties in
 * their given order (a stable merge sort of entry numbers). */
static bool index_before(const int64_t *idx, int rank, int64_t a, int64_t b) {
  for (int d = 0; d < rank; d++)
    if (idx[a * rank + d] != idx[b * rank + d]) return idx[a * rank + d] < idx[b * rank + d];
  return false;
}

static void sort_entries(const int64_t *idx, int rank, int64_t *order, int64_t *tmp, int64_t n) {
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      int64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = index_before(idx, rank, order[j], order[i]) ? order[j++] : order[i++];
      while (i < mid) tmp[k++] = order[i++];
      while (j < hi) tmp[k++] = order[j++];
    }
    memcpy(order, tmp, (size_t)n * sizeof *order);
  }
}

/* SparseReorder(indices, values, dense_shape): the indices and values reordered. */
static mf_code reorder_infer(mf_infer_ctx *ic) {
  mf_shape dense;
  if (check_sparse(ic, 0, (const char *const[3]){"input_indices", "input_values", "input_shape"}, &dense))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  ic->out_dtypes[1] = ic->in_dtypes[1];
  ic->out_shapes[1] = ic->in_shapes[1];
  return MF_OK;
}

static mf_code reorder_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *indices = ctx->inputs[0], *values = ctx->inputs[1];
  int64_t n = indices->dims[0];
  int rank = (int)indices->dims[1];
  if (values->dims[0] != n)
    return MF_INVALID(ctx->status, "%s: input_indices has %lld entries but input_values %lld", ctx->op->name,
                      (long long)n, (long long)values->dims[0]);
  int64_t *owned, *order = mf_kernel_scratch(ctx, (size_t)(2 * n + 1) * sizeof(int64_t));
  if (!order) return ctx->status->code;
  const int64_t *idx = mf_index_values(ctx, indices, &owned);
  if (!idx) return ctx->status->code;
  for (int64_t i = 0; i < n; i++) order[i] = i;
  sort_entries(idx, rank, order, order + n, n);
  mf_free(owned);
  size_t row = (size_t)rank * mf_dtype_size(indices->dtype), es = mf_dtype_size(values->dtype);
  for (int64_t i = 0; i < n; i++) {
    memcpy((char *)ctx->outputs[0]->data + (size_t)i * row, (const char *)indices->data + (size_t)order[i] * row, row);
    memcpy((char *)ctx->outputs[1]->data + (size_t)i * es, (const char *)values->data + (size_t)order[i] * es, es);
  }
  return MF_OK;
}

/* SparseAdd: a + b merged in row-major order (both operands in it). */
static const char *const B_NAMES[3] = {"b_indices", "b_values", "b_shape"};

static mf_code sparse_add_infer(mf_infer_ctx *ic) {
  mf_shape a, b;
  char x[160], y[160];
  if (check_sparse(ic, 0, A_NAMES, &a) || check_sparse(ic, 3, B_NAMES, &b) ||
      mf_check_same_dtype(ic, 1, "a_values", 4, "b_values") || mf_check_same_dtype(ic, 1, "a_values", 6, "thresh"))
    return ic->status->code;
  if (ic->in_shapes[6].rank > 0)
    return MF_INVALID(ic->status, "%s: thresh must be a scalar, got shape %s", ic->op_name,
                      mf_shape_str(&ic->in_shapes[6], x, sizeof x));
  if (a.rank >= 0 && b.rank >= 0 && a.rank != b.rank)
    return MF_INVALID(ic->status, "%s: Operands do not have the same ranks; got shapes: %s and %s", ic->op_name,
                      mf_shape_str(&a, x, sizeof x), mf_shape_str(&b, y, sizeof y));
  for (int d = 0; a.rank >= 0 && d < a.rank && d < b.rank; d++)
    if (a.dims[d] >= 0 && b.dims[d] >= 0 && a.dims[d] != b.dims[d])
      return MF_INVALID(ic->status, "%s: Operands' shapes do not match: got %lld and %lld for dimension %d",
                        ic->op_name, (long long)a.dims[d], (long long)b.dims[d], d);
  int64_t rank = a.rank >= 0 ? a.rank : b.rank;
  ic->out_dtypes[0] = MF_INT64;
  ic->out_shapes[0] = mf_shape_make(2, (int64_t[]){-1, rank});
  ic->out_dtypes[1] = ic->in_dtypes[1];
  ic->out_shapes[1] = mf_shape_make(1, (int64_t[]){-1});
  ic->out_dtypes[2] = MF_INT64;
  ic->out_shapes[2] = mf_shape_make(1, &rank);
  return MF_OK;
}

/* -1, 0 or 1 as index row x comes before, with or after row y. */
static int compare_rows(const int64_t *x, const int64_t *y, int rank) {
  for (int d = 0; d < rank; d++)
    if (x[d] != y[d]) return x[d] < y[d] ? -1 : 1;
  return 0;
}

/* Merges a and b into values; from[n] is the entry an output index row is
 * copied from (a's i, or na + b's j). Returns the number of entries. */
#define DEFINE_SPARSE_MERGE(code, T)                                                                             \
  static int64_t sparse_merge_##code(const int64_t *ai, const T *av, int64_t na, const int64_t *bi, const T *bv, \
                                     int64_t nb, int rank, T thresh, int64_t *from, T *values) {                \
    int64_t i = 0, j = 0, n = 0;                                                                                 \
    while (i < na || j < nb) {                                                                                   \
      int c = i == na ? 1 : j == nb ? -1 : compare_rows(ai + i * rank, bi + j * rank, rank);                    \
      if (c < 0) {                                                                                               \
        from[n] = i;                                                                                             \
        values[n++] = av[i++];                                                                                   \
      } else if (c > 0) {                                                                                        \
        from[n] = na + j;                                                                                        \
        values[n++] = bv[j++];                                                                                   \
      } else {                                                                                                   \
        T sum = MF_WRAPPING_ADD(av[i], bv[j]);                                                                   \
        if (sum >= thresh || sum <= -thresh) { /* |sum| >= thresh, without negating sum */                       \
          from[n] = i;                                                                                           \
          values[n++] = sum;                                                                                     \
        }                                                                                                        \
        i++;                                                                                                     \
        j++;                                                                                                     \
      }                                                                                                          \
    }                                                                                                            \
    return n;                                                                                                    \
  }
MF_FOR_NUMERIC_TYPES(DEFINE_SPARSE_MERGE)

/* The dims of both operands (inputs 2 and 5), which must agree, and each
 * operand's indices (checked: in bounds and in row-major order) as int64. */
static mf_code sparse_add_operands(mf_kernel_ctx *ctx, int *rank, const int64_t *idx[2], int64_t *owned[2]) {
  const mf_tensor *as = ctx->inputs[2], *bs = ctx->inputs[5];
  int64_t dims[MF_MAX_RANK];
  if (as->size != bs->size)
    return MF_INVALID(ctx->status, "%s: Operands do not have the same ranks; got %lld and %lld dimensions",
                      ctx->op->name, (long long)as->size, (long long)bs->size);
  if (as->size > MF_MAX_RANK)
    return MF_INVALID(ctx->status, "%s: a_shape has %lld elements; ranks go up to %d", ctx->op->name,
                      (long long)as->size, MF_MAX_RANK);
  *rank = (int)as->size;
  for (int d = 0; d < *rank; d++) {
    dims[d] = mf_load_int64(as->data, as->dtype, d);
    int64_t other = mf_load_int64(bs->data, bs->dtype, d);
    if (dims[d] != other)
      return MF_INVALID(ctx->status, "%s: Operands' shapes do not match: got %lld and %lld for dimension %d",
                        ctx->op->name, (long long)dims[d], (long long)other, d);
  }
  for (int k = 0; k < 2; k++) {
    const mf_tensor *indices = ctx->inputs[3 * k], *values = ctx->inputs[3 * k + 1];
    const char *side = k ? "b" : "a";
    if (indices->dims[1] != *rank || values->dims[0] != indices->dims[0])
      return MF_INVALID(ctx->status, "%s: %s_indices [%lld, %lld] does not fit %s_values [%lld] and a dense shape "
                        "of %d dimensions", ctx->op->name, side, (long long)indices->dims[0],
                        (long long)indices->dims[1], side, (long long)values->dims[0], *rank);
    idx[k] = mf_index_values(ctx, indices, &owned[k]);
    if (!idx[k] || check_indices(ctx->op->name, idx[k], indices->dims[0], *rank, dims, ROW_MAJOR, ctx->status))
      return ctx->status->code;
  }
  return MF_OK;
}

static mf_code sparse_add_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *av = ctx->inputs[1], *bv = ctx->inputs[4], *thresh = ctx->inputs[6];
  int64_t na = av->size, nb = bv->size;
  const int64_t *idx[2] = {NULL, NULL};
  int64_t *owned[2] = {NULL, NULL};
  int rank = 0;
  size_t es = mf_dtype_size(av->dtype);
  int64_t *from = NULL;
  void *values = NULL;
  if (!sparse_add_operands(ctx, &rank, idx, owned)) {
    from = mf_kernel_scratch(ctx, (size_t)(na + nb + 1) * (sizeof *from + es));
    values = from ? from + na + nb + 1 : NULL;
  }
  int64_t n = 0;
  if (values) {
    switch (av->dtype) {
#define MERGE_CASE(code, T)                                                                                    \
  case code:                                                                                                   \
    n = sparse_merge_##code(idx[0], av->data, na, idx[1], bv->data, nb, rank, *(const T *)thresh->data, from, \
                            values);                                                                           \
    break;
      MF_FOR_NUMERIC_TYPES(MERGE_CASE)
      default: break;
    }
    mf_tensor *indices = mf_kernel_alloc_output(ctx, 0, MF_INT64, 2, (int64_t[]){n, rank});
    mf_tensor *sum = indices ? mf_kernel_alloc_output(ctx, 1, av->dtype, 1, &n) : NULL;
    mf_tensor *shape = sum ? mf_kernel_alloc_output(ctx, 2, MF_INT64, 1, (int64_t[]){rank}) : NULL;
    if (shape) {
      for (int64_t e = 0; e < n; e++) {
        const int64_t *row = from[e] < na ? idx[0] + from[e] * rank : idx[1] + (from[e] - na) * rank;
        memcpy((int64_t *)indices->data + e * rank, row, (size_t)rank * sizeof(int64_t));
      }
      if (n) memcpy(sum->data, values, (size_t)n * es);
      for (int d = 0; d < rank; d++)
        ((int64_t *)shape->data)[d] = mf_load_int64(ctx->inputs[2]->data, ctx->inputs[2]->dtype, d);
    }
  }
  mf_free(owned[0]);
  mf_free(owned[1]);
  return ctx->status->code;
}

/* SparseAddGrad(backprop_val_grad, a_indices, b_indices, sum_indices): each
 * value of a and b gets the gradient of the sum's entry at its index, or 0
 * where that entry was dropped by the threshold (TensorFlow's walk). */
static mf_code sparse_add_grad_infer(mf_infer_ctx *ic) {
  static const char *const names[4] = {"backprop_val_grad", "a_indices", "b_indices", "sum_indices"};
  if (check_input(ic, 0, names[0], MF_DTYPE_MASK(MF_FOR_NUMERIC_TYPES), 1, "vector"))
    return ic->status->code;
  for (int i = 1; i < 4; i++)
    if (check_input(ic, i, names[i], INDEX_TYPES, 2, "matrix [N, rank]")) return ic->status->code;
  for (int k = 0; k < 2; k++) {
    const mf_shape *I = &ic->in_shapes[1 + k];
    ic->out_dtypes[k] = ic->in_dtypes[0];
    ic->out_shapes[k] = mf_shape_make(1, (int64_t[]){I->rank == 2 ? I->dims[0] : -1});
  }
  return MF_OK;
}

static mf_code sparse_add_grad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *g = ctx->inputs[0];
  const int64_t *idx[3] = {NULL, NULL, NULL};
  int64_t *owned[3] = {NULL, NULL, NULL}, count[3];
  int rank = (int)ctx->inputs[1]->dims[1];
  for (int k = 0; k < 3; k++) {
    const mf_tensor *t = ctx->inputs[1 + k];
    count[k] = t->dims[0];
    if (t->dims[1] != rank) {
      MF_INVALID(ctx->status, "%s: a_indices, b_indices and sum_indices must have as many columns", ctx->op->name);
      break;
    }
    if (!(idx[k] = mf_index_values(ctx, t, &owned[k]))) break;
  }
  if (mf_ok(ctx->status) && g->size != count[2])
    MF_INVALID(ctx->status, "%s: backprop_val_grad has %lld entries but sum_indices %lld", ctx->op->name,
               (long long)g->size, (long long)count[2]);
  if (mf_ok(ctx->status)) {
    size_t es = mf_dtype_size(g->dtype);
    char *ga = ctx->outputs[0]->data, *gb = ctx->outputs[1]->data;
    const char *gs = g->data;
    memset(ga, 0, (size_t)count[0] * es);
    memset(gb, 0, (size_t)count[1] * es);
    int64_t i = 0, j = 0, k = 0;
    while ((i < count[0] || j < count[1]) && k < count[2]) {
      int c = i == count[0] ? 1 : j == count[1] ? -1 : compare_rows(idx[0] + i * rank, idx[1] + j * rank, rank);
      const int64_t *row = c <= 0 ? idx[0] + i * rank : idx[1] + j * rank;
      bool kept = compare_rows(row, idx[2] + k * rank, rank) == 0;
      if (kept && c <= 0) memcpy(ga + i * (int64_t)es, gs + k * (int64_t)es, es);
      if (kept && c >= 0) memcpy(gb + j * (int64_t)es, gs + k * (int64_t)es, es);
      k += kept;
      i += c <= 0;
      j += c >= 0;
    }
  }
  for (int k = 0; k < 3; k++) mf_free(owned[k]);
  return ctx->status->code;
}

/* ---------- gradients ---------- */

/* Column c of a [N, 2] index matrix: x[:, c]. */
static mf_output index_column(mf_grad_ctx *gc, mf_output indices, int64_t c) {
  mf_op_desc *d = mf_grad_begin(gc, "StridedSlice");
  if (d) {
    mf_op_desc_add_input(d, indices);
    mf_op_desc_set_attr_ints(d, "begin", (int64_t[]){0, c}, 2);
    mf_op_desc_set_attr_ints(d, "end", (int64_t[]){0, c + 1}, 2);
    mf_op_desc_set_attr_ints(d, "strides", (int64_t[]){1, 1}, 2);
    mf_op_desc_set_attr_int(d, "begin_mask", 1);
    mf_op_desc_set_attr_int(d, "end_mask", 1);
    mf_op_desc_set_attr_int(d, "shrink_axis_mask", 2);
  }
  return mf_grad_finish(gc, d);
}

static mf_output transposed(mf_grad_ctx *gc, mf_output x) {
  mf_op_desc *d = mf_grad_begin(gc, "Transpose");
  if (d) {
    mf_op_desc_add_input(d, x);
    mf_op_desc_set_attr_ints(d, "perm", (int64_t[]){1, 0}, 2);
  }
  return mf_grad_finish(gc, d);
}

/* SparseToDense: the values get the gradient at their indices; the default
 * value the rest of it (TensorFlow's rule). */
static mf_code to_dense_grad(mf_grad_ctx *gc) {
  mf_output dy = gc->grads[0];
  mf_output at = mf_grad_op2(gc, "GatherNd", dy, mf_op_in(gc->op, 0));
  gc->input_grads[2] = at;
  mf_op_desc *d = mf_grad_begin(gc, "Sum");
  if (d) {
    mf_op_desc_add_input(d, at);
    mf_op_desc_set_attr_bool(d, "keepdims", false);
  }
  mf_output taken = mf_grad_finish(gc, d);
  d = mf_grad_begin(gc, "Sum");
  if (d) {
    mf_op_desc_add_input(d, dy);
    mf_op_desc_set_attr_bool(d, "keepdims", false);
  }
  gc->input_grads[3] = mf_grad_op2(gc, "Sub", mf_grad_finish(gc, d), taken);
  return gc->status->code;
}

/* SparseTensorDenseMatMul (TensorFlow's rule): for an entry (i, k) of A,
 * d value = <dy[i, :], B[k, :]> (rows and columns swapped by the adjoints),
 * and dB = A^T dy, one more sparse product. */
static mf_code matmul_grad(mf_grad_ctx *gc) {
  const mf_op *op = gc->op;
  bool adj_a = mf_attr_bool(&op->attrs, "adjoint_a", false), adj_b = mf_attr_bool(&op->attrs, "adjoint_b", false);
  mf_output indices = mf_op_in(op, 0), b = mf_op_in(op, 3), dy = gc->grads[0];
  mf_output rows = index_column(gc, indices, adj_a ? 1 : 0), cols = index_column(gc, indices, adj_a ? 0 : 1);
  mf_output parts_a = mf_grad_op2(gc, "Gather", dy, rows);
  mf_output parts_b = mf_grad_op2(gc, "Gather", adj_b ? transposed(gc, b) : b, cols);
  mf_op_desc *d = mf_grad_begin(gc, "Sum");
  if (d) {
    mf_op_desc_add_input(d, mf_grad_op2(gc, "Mul", parts_a, parts_b));
    mf_op_desc_set_attr_ints(d, "axis", (int64_t[]){1}, 1);
    mf_op_desc_set_attr_bool(d, "keepdims", false);
  }
  gc->input_grads[1] = mf_grad_finish(gc, d);
  const mf_output in[4] = {indices, mf_op_in(op, 1), mf_op_in(op, 2), dy};
  d = mf_grad_begin_like(gc, "SparseTensorDenseMatMul", in, 4);
  if (d) {
    mf_op_desc_set_attr_bool(d, "adjoint_a", !adj_a);
    mf_op_desc_set_attr_bool(d, "adjoint_b", false);
  }
  mf_output db = mf_grad_finish(gc, d);
  gc->input_grads[3] = adj_b ? transposed(gc, db) : db;
  return gc->status->code;
}

/* SparseTensorDenseAdd: the values get dy at their indices, b all of it. */
static mf_code add_grad(mf_grad_ctx *gc) {
  gc->input_grads[1] = mf_grad_op2(gc, "GatherNd", gc->grads[0], mf_op_in(gc->op, 0));
  gc->input_grads[3] = gc->grads[0];
  return gc->status->code;
}

/* SparseReorder (TensorFlow's rule): entry i of the output came from
 * entry perm[i], where perm is the reorder of the entry numbers 0..N-1; the
 * values' gradient puts dy[i] back there (each entry once: a segment sum). */
static mf_code reorder_grad(mf_grad_ctx *gc) {
  if (!gc->grads[1].op) return MF_OK;
  mf_output indices = mf_op_in(gc->op, 0), dy = gc->grads[1];
  mf_output n = mf_grad_op1(gc, "Size", dy);
  mf_output numbers = mf_grad_op3(gc, "Range", mf_grad_scalar(gc, MF_INT32, 0), n, mf_grad_scalar(gc, MF_INT32, 1));
  mf_op_desc *d = mf_grad_begin(gc, "SparseReorder");
  if (d) {
    mf_op_desc_add_input(d, indices);
    mf_op_desc_add_input(d, numbers);
    mf_op_desc_add_input(d, mf_op_in(gc->op, 2));
  }
  mf_output perm = mf_grad_finish(gc, d);
  if (perm.op) perm.index = 1;
  gc->input_grads[1] = mf_grad_op3(gc, "UnsortedSegmentSum", dy, perm, n);
  return gc->status->code;
}

/* SparseAdd (TensorFlow's rule): the values' gradients through
 * SparseAddGrad; indices, shapes and thresh get none. */
static mf_code sparse_add_grad(mf_grad_ctx *gc) {
  if (!gc->grads[1].op) return MF_OK;
  mf_op_desc *d = mf_grad_begin(gc, "SparseAddGrad");
  if (d) {
    mf_op_desc_add_input(d, gc->grads[1]);
    mf_op_desc_add_input(d, mf_op_in(gc->op, 0));
    mf_op_desc_add_input(d, mf_op_in(gc->op, 3));
    mf_op_desc_add_input(d, mf_op_out(gc->op, 0));
  }
  mf_output a = mf_grad_finish(gc, d), b = a;
  if (b.op) b.index = 1;
  gc->input_grads[1] = a;
  gc->input_grads[4] = b;
  return gc->status->code;
}

/* ---------- registrations ---------- */

static const mf_op_def defs[] = {
    {.name = "SparseToDense", .num_inputs = 4, .num_outputs = 1, .value_inputs = 1u << 1, .infer = to_dense_infer,
     .kernel = {[MF_CPU] = to_dense_kernel}, .grad = to_dense_grad},
    {.name = "SparseTensorDenseMatMul", .num_inputs = 4, .num_outputs = 1, .value_inputs = 1u << 2,
     .infer = matmul_infer, .kernel = {[MF_CPU] = matmul_kernel}, .grad = matmul_grad},
    {.name = "SparseTensorDenseAdd", .num_inputs = 4, .num_outputs = 1, .value_inputs = 1u << 2,
     .infer = add_infer, .kernel = {[MF_CPU] = add_kernel}, .grad = add_grad},
    {.name = "SparseReorder", .num_inputs = 3, .num_outputs = 2, .infer = reorder_infer,
     .kernel = {[MF_CPU] = reorder_kernel}, .grad = reorder_grad},
    {.name = "SparseAdd", .num_inputs = 7, .num_outputs = 3, .value_inputs = (1u << 2) | (1u << 5),
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = sparse_add_infer, .kernel = {[MF_CPU] = sparse_add_kernel}, .grad = sparse_add_grad},
    {.name = "SparseAddGrad", .num_inputs = 4, .num_outputs = 2, .flags = MF_OP_INTERNAL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = sparse_add_grad_infer, .kernel = {[MF_CPU] = sparse_add_grad_kernel}},
};
MF_OP_TABLE(mf_ops_sparse, defs);
