/* segment.c — segment reductions, TensorFlow's: SegmentSum, SegmentProd,
 * SegmentMax, SegmentMin (tf.segment_*, sorted ids) and UnsortedSegmentSum,
 * UnsortedSegmentProd, UnsortedSegmentMax, UnsortedSegmentMin
 * (tf.unsorted_segment_*), with their gradient rules. The means and
 * unsorted_segment_sqrt_n are composites of these (lua/moonflow/ops/reduce.lua).
 *
 * segment_ids pick the rows of data: its first rank(segment_ids) dims index
 * the rows, the others are the row. Each row folds into the output row that
 * its id names.
 * - Segment*(data, segment_ids): the ids are a vector as long as data's first
 *   dim, non-negative and never decreasing. The output has last id + 1 rows,
 *   so inference reads the ids (when the graph is built if they are
 *   constant); an empty segment is 0 (1 for Prod).
 * - UnsortedSegment*(data, segment_ids, num_segments): ids in any order, of a
 *   shape that is a prefix of data's, and num_segments rows; a negative id
 *   drops its row; an empty segment is the reduction's identity, for Max and
 *   Min the lowest and highest finite values (TensorFlow's numeric_limits).
 * Integer sums and products wrap around; Max and Min propagate NaN, as NumPy's
 * maximum.at and minimum.at do. */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "kernels/elementwise.h"
#include "kernels/helpers.h"
#include "kernels/parallel.h"

#include <float.h>
#include <stdio.h>

static const unsigned INDEX_TYPES = (1u << MF_INT32) | (1u << MF_INT64);

/* The unsorted ops have a third input, num_segments. */
static bool is_sorted_def(const mf_op_def *def) { return def->num_inputs == 2; }

/* ---------- shapes and ids (shared by inference and kernels) ---------- */

/* segment_ids' shape against data's: a vector as long as data's first dim
 * (sorted), or a prefix of data's shape. Unknown ranks and dims pass. */
static mf_code check_segment_shapes(const char *op, bool sorted, const mf_shape *D, const mf_shape *I, mf_status *s) {
  char a[160], b[160];
  if (sorted && I->rank >= 0 && I->rank != 1)
    return MF_INVALID(s, "%s: segment_ids must be a vector, got shape %s", op, mf_shape_str(I, a, sizeof a));
  if (D->rank < 0 || I->rank < 0) return MF_OK;
  bool prefix = I->rank <= D->rank;
  for (int d = 0; prefix && d < I->rank; d++)
    prefix = I->dims[d] < 0 || D->dims[d] < 0 || I->dims[d] == D->dims[d];
  if (!prefix)
    return MF_INVALID(s, "%s: data.shape = %s does not start with segment_ids.shape = %s", op,
                      mf_shape_str(D, a, sizeof a), mf_shape_str(I, b, sizeof b));
  if (1 + D->rank - I->rank > MF_MAX_RANK)
    return MF_INVALID(s, "%s: the result would have rank %d, more than the %d dimensions tensors may have", op,
                      1 + D->rank - I->rank, MF_MAX_RANK);
  return MF_OK;
}

/* Every id is below `rows`; sorted ids are non-negative and never decrease
 * (unsorted ones may be negative: their rows are dropped). */
static mf_code check_segment_ids(const char *op, bool sorted, const mf_tensor *ids, int64_t rows, mf_status *s) {
  char pos[128], before[128];
  for (int64_t i = 0, last = 0; i < ids->size; i++) {
    int64_t id = mf_load_int64(ids->data, ids->dtype, i);
    bool out_of_range = id >= rows, negative = sorted && id < 0, decreasing = sorted && id < last;
    last = id;
    if (!out_of_range && !negative && !decreasing) continue;
    mf_position_str(pos, sizeof pos, ids->rank, ids->dims, i);
    if (out_of_range)
      return MF_INVALID(s, "%s: segment_ids[%s] = %lld is out of range [0, %lld)", op, pos, (long long)id,
                        (long long)rows);
    if (negative)
      return MF_INVALID(s, "%s: segment_ids[%s] = %lld is negative; segment ids must be >= 0", op, pos,
                        (long long)id);
    return MF_INVALID(s,
                      "%s: segment ids are not increasing: segment_ids[%s] = %lld follows segment_ids[%s] = %lld; "
                      "sort them, or use the unsorted_segment_ reductions",
                      op, pos, (long long)id, mf_position_str(before, sizeof before, 1, ids->dims, i - 1),
                      (long long)mf_load_int64(ids->data, ids->dtype, i - 1));
  }
  return MF_OK;
}

/* The number of output rows of a sorted op: the last id + 1. */
static int64_t sorted_rows(const mf_tensor *ids) {
  return ids->size ? mf_load_int64(ids->data, ids->dtype, ids->size - 1) + 1 : 0;
}

static mf_code segment_infer(mf_infer_ctx *ic) {
  bool sorted = is_sorted_def(ic->def);
  const mf_shape *D = &ic->in_shapes[0], *I = &ic->in_shapes[1];
  if (mf_check_dtype(ic, 0, "data has", MF_DTYPE_MASK(MF_FOR_NUMERIC_TYPES)) ||
      mf_check_dtype(ic, 1, "segment_ids has", INDEX_TYPES) ||
      check_segment_shapes(ic->op_name, sorted, D, I, ic->status))
    return ic->status->code;
  int64_t rows = -1;
  const mf_tensor *ids = ic->in_values[1], *n = sorted ? NULL : ic->in_values[2];
  if (sorted && ids) {
    if (check_segment_ids(ic->op_name, true, ids, INT64_MAX, ic->status)) return ic->status->code;
    rows = sorted_rows(ids);
  }
  if (!sorted) {
    char buf[160];
    if (mf_check_dtype(ic, 2, "num_segments has", INDEX_TYPES)) return ic->status->code;
    if (ic->in_shapes[2].rank > 0)
      return MF_INVALID(ic->status, "%s: num_segments must be a scalar, got shape %s", ic->op_name,
                        mf_shape_str(&ic->in_shapes[2], buf, sizeof buf));
    if (n && (rows = mf_load_int64(n->data, n->dtype, 0)) < 0)
      return MF_INVALID(ic->status, "%s: num_segments = %lld must be non-negative", ic->op_name, (long long)rows);
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  if (D->rank < 0 || I->rank < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  mf_shape out = {.rank = 1 + D->rank - I->rank, .dims = {rows}};
  for (int d = I->rank; d < D->rank; d++) out.dims[1 + d - I->rank] = D->dims[d];
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* ---------- kernels ---------- */

/* TensorFlow fills an empty unsorted segment of Max (Min) with
 * numeric_limits<T>::lowest() (max()): finite, unlike reduce_max of nothing. */
#define FINITE_LOWEST(E) _Generic((E)0, float: -FLT_MAX, double: -DBL_MAX, default: MF_LOWEST(E))
#define FINITE_HIGHEST(E) _Generic((E)0, float: FLT_MAX, double: DBL_MAX, default: MF_HIGHEST(E))

/* X(reduction, combine(a, b), an empty unsorted segment (of element type E),
 * an empty sorted segment, gradient rule). */
#define SEGMENT_REDUCTIONS(X)                                                \
  X(Sum, MF_WRAPPING_ADD(a, b), 0, 0, sum_grad)                              \
  X(Prod, MF_WRAPPING_MUL(a, b), 1, 1, prod_grad)                            \
  X(Max, MF_MAX_KEEP_NAN(a, b), FINITE_LOWEST(E), 0, extremum_grad)          \
  X(Min, MF_MIN_KEEP_NAN(a, b), FINITE_HIGHEST(E), 0, extremum_grad)

/* Folds the n rows of data (each `inner` long) into the `rows` output rows
 * their ids name, over columns [j0, j1). Unsorted outputs start as the
 * identity and every row is combined in; a sorted segment starts with its
 * first row, so the rows no id names keep the empty value. Columns split over
 * the session's threads: ids repeat, but each output element is folded by
 * one thread, in row order. */
typedef void (*segment_fn)(void *out, const void *data, const int64_t *ids, int64_t n, int64_t inner, int64_t rows,
                           bool sorted, int64_t j0, int64_t j1);
#define DEFINE_SEGMENT(code, T, kind, combine, unsorted_empty, sorted_empty)                            \
  static inline T kind##_##code##_combine(T a, T b) { return combine; }                                 \
  static void kind##_##code(void *out_, const void *data_, const int64_t *ids, int64_t n, int64_t inner, \
                            int64_t rows, bool sorted, int64_t j0, int64_t j1) {                        \
    typedef T E;                                                                                        \
    E *out = out_;                                                                                      \
    const E *data = data_;                                                                              \
    const E empty = sorted ? (E)(sorted_empty) : (E)(unsorted_empty);                                   \
    for (int64_t r = 0; r < rows; r++)                                                                  \
      for (int64_t j = j0; j < j1; j++) out[r * inner + j] = empty;                                     \
    for (int64_t i = 0; i < n; i++) {                                                                   \
      if (ids[i] < 0) continue;                                                                         \
      E *o = out + ids[i] * inner;                                                                      \
      const E *x = data + i * inner;                                                                    \
      if (sorted && (i == 0 || ids[i] != ids[i - 1]))                                                   \
        for (int64_t j = j0; j < j1; j++) o[j] = x[j];                                                  \
      else                                                                                              \
        for (int64_t j = j0; j < j1; j++) o[j] = kind##_##code##_combine(o[j], x[j]);                   \
    }                                                                                                   \
  }
#define SEGMENT_ENTRY(code, T, kind) [code] = kind##_##code,
#define SEGMENT_FNS(kind, combine, unsorted_empty, sorted_empty, rule)                 \
  MF_FOR_NUMERIC_TYPES(DEFINE_SEGMENT, kind, combine, unsorted_empty, sorted_empty)    \
  static const segment_fn kind##_fns[MF_DTYPE_SLOTS] = {MF_FOR_NUMERIC_TYPES(SEGMENT_ENTRY, kind)};
SEGMENT_REDUCTIONS(SEGMENT_FNS)

typedef struct segment_job {
  segment_fn fn;
  void *out;
  const void *data;
  const int64_t *ids;
  int64_t n, inner, rows;
  bool sorted;
} segment_job;

static void segment_columns(void *arg, int64_t begin, int64_t end) {
  const segment_job *j = arg;
  j->fn(j->out, j->data, j->ids, j->n, j->inner, j->rows, j->sorted, begin, end);
}

static mf_code segment_kernel(mf_kernel_ctx *ctx, const segment_fn *fns) {
  bool sorted = is_sorted_def(ctx->op->def);
  const mf_tensor *data = ctx->inputs[0], *ids = ctx->inputs[1];
  mf_tensor *out = ctx->outputs[0];
  mf_shape D = mf_shape_of(data), I = mf_shape_of(ids);
  /* Checked again: a shape promised by set_shape may disagree with the values. */
  if (check_segment_shapes(ctx->op->name, sorted, &D, &I, ctx->status) ||
      check_segment_ids(ctx->op->name, sorted, ids, out->dims[0], ctx->status))
    return ctx->status->code;
  int64_t *owned;
  const int64_t *v = mf_index_values(ctx, ids, &owned);
  if (!v) return ctx->status->code;
  segment_job j = {fns[data->dtype], out->data, data->data, v, ids->size,
                   mf_dims_product(data->dims, ids->rank, data->rank), out->dims[0], sorted};
  mf_parallel_for(ctx, j.inner, j.n + j.rows, segment_columns, &j);
  mf_free(owned);
  return MF_OK;
}
#define SEGMENT_KERNEL(kind, combine, unsorted_empty, sorted_empty, rule) \
  static mf_code kind##_kernel(mf_kernel_ctx *ctx) { return segment_kernel(ctx, kind##_fns); }
SEGMENT_REDUCTIONS(SEGMENT_KERNEL)

/* ---------- gradients ---------- */

/* The reduction `kind` ("Sum", "Prod") of t over the segments of the op being
 * differentiated: the same ids, sorted or not (and num_segments). */
static mf_output over_segments(mf_grad_ctx *gc, const char *kind, mf_output t) {
  bool sorted = is_sorted_def(gc->op->def);
  char type[32];
  snprintf(type, sizeof type, "%sSegment%s", sorted ? "" : "Unsorted", kind);
  const mf_output in[3] = {t, mf_op_in(gc->op, 1), sorted ? MF_NO_PORT : mf_op_in(gc->op, 2)};
  return mf_grad_rebuild(gc, type, in, gc->op->num_inputs);
}

/* Row ids[i] of t (one row per segment) for each row i of data: a Gather.
 * A negative unsorted id reads zeros: t's n rows are summed into n + 1, the
 * last one zeros, and negative ids read that one. */
static mf_output segment_rows(mf_grad_ctx *gc, mf_output t) {
  mf_output ids = mf_op_in(gc->op, 1);
  if (is_sorted_def(gc->op->def)) return mf_grad_op2(gc, "Gather", t, ids);
  mf_dtype it = mf_port_dtype(ids);
  mf_output n = mf_grad_cast(gc, mf_op_in(gc->op, 2), it);
  mf_output zero = mf_grad_scalar(gc, it, 0), one = mf_grad_scalar(gc, it, 1);
  mf_output each = mf_grad_op3(gc, "Range", zero, n, one);
  mf_output padded = mf_grad_op3(gc, "UnsortedSegmentSum", t, each, mf_grad_op2(gc, "Add", n, one));
  mf_output safe_ids = mf_grad_op3(gc, "Select", mf_grad_op2(gc, "GreaterEqual", ids, zero), ids, n);
  return mf_grad_op2(gc, "Gather", padded, safe_ids);
}

/* Sum: each row gets its segment's gradient. */
static mf_code sum_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = segment_rows(gc, gc->grads[0]);
  return gc->status->code;
}

/* Max and Min: the segment's gradient goes to the rows equal to its result,
 * split evenly among ties (TensorFlow's rule). A segment with no such row
 * divides by 1, not 0, so that the gradient of this gradient stays finite. */
static mf_code extremum_grad(mf_grad_ctx *gc) {
  mf_output x = mf_op_in(gc->op, 0);
  mf_dtype t = mf_port_dtype(x);
  mf_output selected = mf_grad_op2(gc, "Equal", x, segment_rows(gc, mf_op_out(gc->op, 0)));
  mf_output count = over_segments(gc, "Sum", mf_grad_cast(gc, selected, t));
  count = mf_grad_op2(gc, "Maximum", count, mf_grad_scalar(gc, t, 1));
  mf_output share = segment_rows(gc, mf_grad_op2(gc, "Div", gc->grads[0], count));
  gc->input_grads[0] = mf_grad_op3(gc, "Select", selected, share, mf_grad_op1(gc, "ZerosLike", x));
  return gc->status->code;
}

/* Prod: as Prod's rule in reduce.c, zeros counted per segment, so that
 * nothing is divided by zero: with x_nz, x with its zeros replaced by 1,
 *   dx = dy * prod(x_nz) * ([no zeros] / x_nz + [one zero] * [x == 0]),
 * the segment's factors read at each row. */
static mf_code prod_grad(mf_grad_ctx *gc) {
  mf_output x = mf_op_in(gc->op, 0);
  mf_dtype t = mf_port_dtype(x);
  mf_output zero = mf_grad_scalar(gc, t, 0), one = mf_grad_scalar(gc, t, 1);
  mf_output is_zero = mf_grad_cast(gc, mf_grad_op2(gc, "Equal", x, zero), t);
  mf_output x_nz = mf_grad_op2(gc, "Add", x, is_zero);
  mf_output zeros = over_segments(gc, "Sum", is_zero);
  mf_output scale = mf_grad_op2(gc, "Mul", gc->grads[0], over_segments(gc, "Prod", x_nz));
  mf_output none = mf_grad_op2(gc, "Mul", scale, mf_grad_cast(gc, mf_grad_op2(gc, "Equal", zeros, zero), t));
  mf_output single = mf_grad_op2(gc, "Mul", scale, mf_grad_cast(gc, mf_grad_op2(gc, "Equal", zeros, one), t));
  gc->input_grads[0] = mf_grad_op2(gc, "Add", mf_grad_op2(gc, "Div", segment_rows(gc, none), x_nz),
                                   mf_grad_op2(gc, "Mul", segment_rows(gc, single), is_zero));
  return gc->status->code;
}

/* ---------- registrations ---------- */

#define SEGMENT_DEFS(kind, combine, unsorted_empty, sorted_empty, rule)                                 \
  {.name = "Segment" #kind, .num_inputs = 2, .num_outputs = 1, .value_inputs = 1u << 1,                 \
   .infer = segment_infer, .kernel = {[MF_CPU] = kind##_kernel}, .grad = rule},                         \
  {.name = "UnsortedSegment" #kind, .num_inputs = 3, .num_outputs = 1, .value_inputs = 1u << 2,         \
   .infer = segment_infer, .kernel = {[MF_CPU] = kind##_kernel}, .grad = rule},
static const mf_op_def defs[] = {SEGMENT_REDUCTIONS(SEGMENT_DEFS)};
MF_OP_TABLE(mf_ops_segment, defs);
