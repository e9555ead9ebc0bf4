/* ops_reduce.c — reductions: Sum, Mean, Max, Min, Prod (numeric) and Any, All (bool).
 *
 * Attrs: "axis" (ints; absent = every axis, negative axes count from the end)
 * and "keepdims" (bool). One driver serves every op: the shape is collapsed
 * into alternating groups of kept and reduced axes, and the driver walks kept
 * groups (one output each, or one contiguous block of outputs when the last
 * axes are kept) and, inside, the reduced groups. The op-specific part is only
 * the combine step, listed once in REDUCE_OPS and inlined into one driver per
 * (op, dtype) by REDUCE_KERNEL. */
#include "internal.h"

#include <math.h>
#include <string.h>

/* ---------- axes and shapes (shared by infer and kernel) ---------- */

/* The "axis" attribute: a list, or a single int from C callers; -1 when absent. */
static int reduce_axes(const mf_attrs *attrs, const int64_t **axes) {
  const mf_attr *one = mf_attrs_find(attrs, "axis", MF_ATTR_INT);
  if (!one) return mf_attr_ints(attrs, "axis", axes);
  *axes = &one->v.i;
  return 1;
}

/* Marks the reduced axes of a tensor of `rank` in mask[]; absent axes mean all. */
static mf_code reduce_mask(const char *op, const mf_attrs *attrs, int rank, bool *mask, mf_status *s) {
  const int64_t *axes;
  int n = reduce_axes(attrs, &axes);
  for (int d = 0; d < rank; d++) mask[d] = n < 0;
  for (int i = 0; i < n; i++) {
    int d;
    if (mf_normalize_axis(op, axes[i], rank, &d, s)) return s->code;
    if (mask[d])
      return mf_status_set(s, MF_INVALID_ARGUMENT,
                           "%s: axis %lld names dimension %d a second time for a tensor of rank %d; "
                           "list each axis once",
                           op, (long long)axes[i], d, rank);
    mask[d] = true;
  }
  return MF_OK;
}

static mf_code reduce_infer(mf_infer_ctx *ic, bool logical) {
  mf_dtype t = ic->in_dtypes[0];
  const char *type = ic->def->name;
  if (logical && t != MF_BOOL)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "%s: %s takes a bool tensor, got %s; compare first (e.g. tf.not_equal(x, 0)) "
                         "or tf.cast it to tf.bool",
                         ic->op_name, type, mf_dtype_name(t));
  if (!logical && t == MF_BOOL)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "%s: %s takes a numeric tensor, got bool; use reduce_any/reduce_all, or "
                         "tf.cast it to a number type first",
                         ic->op_name, type);
  ic->out_dtypes[0] = t;
  bool keep = mf_attr_bool(ic->attrs, "keepdims", false);
  const mf_shape *in = &ic->in_shapes[0];
  if (in->rank < 0) {
    /* Reducing every axis of an unknown rank still gives a scalar. */
    const int64_t *axes;
    bool all = reduce_axes(ic->attrs, &axes) < 0;
    ic->out_shapes[0] = all && !keep ? mf_shape_scalar() : mf_shape_unknown();
    return MF_OK;
  }
  bool mask[MF_MAX_RANK];
  if (reduce_mask(ic->op_name, ic->attrs, in->rank, mask, ic->status)) return ic->status->code;
  mf_shape out = {.rank = 0};
  for (int d = 0; d < in->rank; d++) {
    if (!mask[d]) out.dims[out.rank++] = in->dims[d];
    else if (keep) out.dims[out.rank++] = 1;
  }
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* The input seen by the driver. Axes of size 1 are dropped and neighbouring
 * axes that are both kept or both reduced are merged, so the groups alternate.
 * The last group is either reduced (`run` contiguous elements fold into one
 * output) or kept (`inner` contiguous outputs advance together). The other
 * groups are listed with their input strides: kept ones (k*) pick the output,
 * reduced ones (r*) are walked for each output. */
typedef struct reduce_geom {
  int64_t out_size;   /* outputs */
  int64_t count;      /* input elements folded into each output */
  int64_t inner, run; /* 1 unless the last group is kept / reduced */
  int nk, nr;
  int64_t kdims[MF_MAX_RANK], kstrides[MF_MAX_RANK];
  int64_t rdims[MF_MAX_RANK], rstrides[MF_MAX_RANK];
} reduce_geom;

static void reduce_geometry(const mf_tensor *in, const bool *mask, reduce_geom *g) {
  int64_t size[MF_MAX_RANK], stride[MF_MAX_RANK];
  bool red[MF_MAX_RANK];
  int m = 0;
  memset(g, 0, sizeof *g);
  g->out_size = g->count = g->inner = g->run = 1;
  for (int d = 0; d < in->rank; d++) {
    int64_t n = in->dims[d];
    if (mask[d]) g->count *= n;
    else g->out_size *= n;
    if (n == 1) continue;
    if (m > 0 && red[m - 1] == mask[d]) {
      size[m - 1] *= n;
    } else {
      size[m] = n;
      red[m++] = mask[d];
    }
  }
  int64_t st = 1;
  for (int i = m - 1; i >= 0; i--) {
    stride[i] = st;
    st *= size[i];
  }
  if (m > 0) {
    m--;
    if (red[m]) g->run = size[m];
    else g->inner = size[m];
  }
  for (int i = 0; i < m; i++) {
    if (red[i]) {
      g->rdims[g->nr] = size[i];
      g->rstrides[g->nr++] = stride[i];
    } else {
      g->kdims[g->nk] = size[i];
      g->kstrides[g->nk++] = stride[i];
    }
  }
}

/* Advances a row-major multi-index; returns the new offset, or -1 once it has
 * wrapped (idx is then all zeros again, ready for the next walk). */
static inline int64_t odo_next(int n, const int64_t *dims, const int64_t *strides, int64_t *idx,
                               int64_t off) {
  for (int d = n - 1; d >= 0; d--) {
    off += strides[d];
    if (++idx[d] < dims[d]) return off;
    off -= dims[d] * strides[d];
    idx[d] = 0;
  }
  return -1;
}

/* ---------- the combine steps ---------- */

/* Sum, Prod and Mean accumulate in a wide type: double for float32 and float64
 * (a float32 sum of millions of elements stays exact to float32 precision,
 * without the drift of a float accumulator), uint64_t for integers, whose
 * wrap-around is defined in C (signed overflow is not) and gives the same
 * modular result as TensorFlow's. Max and Min propagate NaN, as NumPy does. */
#define ACC_WIDE(E, W) W
#define ACC_ELEM(E, W) E

static inline bool is_nan_f32(float x) { return isnan(x); }
static inline bool is_nan_f64(double x) { return isnan(x); }
static inline bool is_nan_never(int64_t x) { MF_UNUSED(x); return false; }
#define IS_NAN(x) _Generic((x), float: is_nan_f32, double: is_nan_f64, default: is_nan_never)(x)

#define TYPE_LOWEST(E) \
  _Generic((E)0, float: -INFINITY, double: -INFINITY, int32_t: INT32_MIN, int64_t: INT64_MIN, uint8_t: 0)
#define TYPE_HIGHEST(E) \
  _Generic((E)0, float: INFINITY, double: INFINITY, int32_t: INT32_MAX, int64_t: INT64_MAX, uint8_t: UINT8_MAX)

/* Mean of an empty reduction: nan for floats (0/0); 0 for integers, which have no nan. */
static inline double mean_float(double sum, int64_t n) { return sum / (double)n; }
static inline int64_t mean_int(uint64_t sum, int64_t n) { return n ? (int64_t)sum / n : 0; }
#define MEAN(a, n) _Generic((a), double: mean_float, default: mean_int)(a, n)

/* X(op, dtypes, accumulator, identity, combine(a, b), result(a, n)): a and b
 * are accumulators, n the number of elements folded, E the element type; the
 * result is converted to E. Max and Min use `|`, not `||`, so that the
 * select stays branch-free and vectorizes. */
#define REDUCE_OPS(X)                                                              \
  X(Sum, NUMERIC, ACC_WIDE, 0, a + b, a)                                           \
  X(Mean, NUMERIC, ACC_WIDE, 0, a + b, MEAN(a, n))                                 \
  X(Prod, NUMERIC, ACC_WIDE, 1, a * b, a)                                          \
  X(Max, NUMERIC, ACC_ELEM, TYPE_LOWEST(E), ((b > a) | IS_NAN(b)) ? b : a, a)      \
  X(Min, NUMERIC, ACC_ELEM, TYPE_HIGHEST(E), ((b < a) | IS_NAN(b)) ? b : a, a)     \
  X(Any, LOGICAL, ACC_ELEM, false, a || b, a)                                      \
  X(All, LOGICAL, ACC_ELEM, true, a && b, a)

/* X(..., code, element type, wide accumulator) for each dtype an op class takes. */
#define NUMERIC_TYPES(X, ...)                      \
  X(__VA_ARGS__, MF_FLOAT32, float, double)        \
  X(__VA_ARGS__, MF_FLOAT64, double, double)       \
  X(__VA_ARGS__, MF_INT32, int32_t, uint64_t)      \
  X(__VA_ARGS__, MF_INT64, int64_t, uint64_t)      \
  X(__VA_ARGS__, MF_UINT8, uint8_t, uint64_t)
#define LOGICAL_TYPES(X, ...) X(__VA_ARGS__, MF_BOOL, bool, bool)

/* ---------- the driver ---------- */

typedef void (*reduce_fn)(const reduce_geom *g, const void *in, void *out);

enum { REDUCE_CHUNK = 1024 };

/* Per (op, dtype): combine and result from REDUCE_OPS, two inner loops, and
 * the driver.
 * - fold: a contiguous run into one accumulator, through 8 independent lanes
 *   (written out so that they stay in registers and vectorize); the path for
 *   reducing a whole contiguous tensor and for reducing the last axis.
 * - accumulate: a row of m inputs into m accumulators, in blocks of 16 whose
 *   constant trip count compilers vectorize at -O2.
 * When the last axes are kept, REDUCE_CHUNK outputs accumulate side by side on
 * the stack while the reduced groups are walked, so input rows are read
 * contiguously and nothing is allocated. */
#define REDUCE_KERNEL(op, acc, identity, combine, result, code, E_, W_)                      \
  typedef acc(E_, W_) op##_##code##_acc;                                                     \
  static inline op##_##code##_acc op##_##code##_combine(op##_##code##_acc a,                 \
                                                        op##_##code##_acc b) {               \
    return (combine);                                                                        \
  }                                                                                          \
  static inline E_ op##_##code##_result(op##_##code##_acc a, int64_t n) {                    \
    MF_UNUSED(n);                                                                            \
    return (E_)(result);                                                                     \
  }                                                                                          \
  static inline op##_##code##_acc op##_##code##_fold(op##_##code##_acc a, const E_ *p,       \
                                                     int64_t len) {                          \
    typedef op##_##code##_acc A;                                                             \
    A (*const f)(A, A) = op##_##code##_combine;                                              \
    int64_t i = 0;                                                                           \
    if (len >= 16) {                                                                         \
      A l0 = (A)p[0], l1 = (A)p[1], l2 = (A)p[2], l3 = (A)p[3];                              \
      A l4 = (A)p[4], l5 = (A)p[5], l6 = (A)p[6], l7 = (A)p[7];                              \
      for (i = 8; i + 8 <= len; i += 8) {                                                    \
        l0 = f(l0, (A)p[i]), l1 = f(l1, (A)p[i + 1]), l2 = f(l2, (A)p[i + 2]);               \
        l3 = f(l3, (A)p[i + 3]), l4 = f(l4, (A)p[i + 4]), l5 = f(l5, (A)p[i + 5]);           \
        l6 = f(l6, (A)p[i + 6]), l7 = f(l7, (A)p[i + 7]);                                    \
      }                                                                                      \
      a = f(a, f(f(f(l0, l1), f(l2, l3)), f(f(l4, l5), f(l6, l7))));                         \
    }                                                                                        \
    for (; i < len; i++) a = f(a, (A)p[i]);                                                  \
    return a;                                                                                \
  }                                                                                          \
  static inline void op##_##code##_accumulate(op##_##code##_acc *restrict acc,               \
                                              const E_ *restrict p, int64_t m) {             \
    int64_t j = 0;                                                                           \
    for (; j + 16 <= m; j += 16)                                                             \
      for (int l = 0; l < 16; l++) acc[j + l] = op##_##code##_combine(acc[j + l], p[j + l]); \
    for (; j < m; j++) acc[j] = op##_##code##_combine(acc[j], p[j]);                         \
  }                                                                                          \
  static void op##_##code(const reduce_geom *g, const void *in_, void *out_) {               \
    typedef op##_##code##_acc A;                                                             \
    typedef E_ E;                                                                            \
    const E *in = in_;                                                                       \
    E *out = out_;                                                                           \
    const A init = (A)(identity);                                                            \
    const int64_t n = g->count;                                                              \
    if (g->out_size == 0) return;                                                            \
    if (n == 0) {                                                                            \
      for (int64_t i = 0; i < g->out_size; i++) out[i] = op##_##code##_result(init, 0);      \
      return;                                                                                \
    }                                                                                        \
    int64_t kidx[MF_MAX_RANK] = {0}, ridx[MF_MAX_RANK] = {0};                                \
    int64_t base = 0;                                                                        \
    E *o = out;                                                                              \
    do {                                                                                     \
      if (g->inner == 1) {                                                                   \
        A a = init;                                                                          \
        int64_t off = 0;                                                                     \
        do {                                                                                 \
          a = op##_##code##_fold(a, in + base + off, g->run);                                \
        } while ((off = odo_next(g->nr, g->rdims, g->rstrides, ridx, off)) >= 0);            \
        *o++ = op##_##code##_result(a, n);                                                   \
      } else {                                                                               \
        for (int64_t j0 = 0; j0 < g->inner; j0 += REDUCE_CHUNK) {                            \
          int64_t m = g->inner - j0 < REDUCE_CHUNK ? g->inner - j0 : REDUCE_CHUNK;           \
          A acc[REDUCE_CHUNK];                                                               \
          for (int64_t j = 0; j < m; j++) acc[j] = init;                                     \
          int64_t off = 0;                                                                   \
          do {                                                                               \
            op##_##code##_accumulate(acc, in + base + off + j0, m);                          \
          } while ((off = odo_next(g->nr, g->rdims, g->rstrides, ridx, off)) >= 0);          \
          for (int64_t j = 0; j < m; j++) o[j0 + j] = op##_##code##_result(acc[j], n);       \
        }                                                                                    \
        o += g->inner;                                                                       \
      }                                                                                      \
    } while ((base = odo_next(g->nk, g->kdims, g->kstrides, kidx, base)) >= 0);              \
  }

#define REDUCE_KERNEL_FOR_TYPES(op, types, acc, identity, combine, result) \
  types##_TYPES(REDUCE_KERNEL, op, acc, identity, combine, result)
REDUCE_OPS(REDUCE_KERNEL_FOR_TYPES)

/* ---------- kernels and registration ---------- */

static mf_code reduce_kernel(mf_kernel_ctx *ctx, const reduce_fn *fns) {
  const mf_tensor *in = ctx->inputs[0];
  bool mask[MF_MAX_RANK];
  if (reduce_mask(ctx->op->name, ctx->attrs, in->rank, mask, ctx->status)) return ctx->status->code;
  reduce_geom g;
  reduce_geometry(in, mask, &g);
  fns[in->dtype](&g, in->data, ctx->outputs[0]->data);
  return MF_OK;
}

#define REDUCE_FN_ENTRY(op, acc, identity, combine, result, code, E_, W_) [code] = op##_##code,
#define REDUCE_OP_FUNCS(op, types, acc, identity, combine, result)                           \
  static const reduce_fn op##_fns[MF_UINT8 + 1] = {                                          \
      types##_TYPES(REDUCE_FN_ENTRY, op, acc, identity, combine, result)};                   \
  static mf_code op##_infer(mf_infer_ctx *ic) { return reduce_infer(ic, types##_IS_LOGICAL); } \
  static mf_code op##_kernel(mf_kernel_ctx *ctx) { return reduce_kernel(ctx, op##_fns); }
/* Any and All take and give bools: there is no gradient to take. */
enum { NUMERIC_IS_LOGICAL = false, LOGICAL_IS_LOGICAL = true };
enum { NUMERIC_FLAGS = 0, LOGICAL_FLAGS = MF_OP_NOT_DIFFERENTIABLE };
REDUCE_OPS(REDUCE_OP_FUNCS)

/* ---------- SumToShape ---------- */

/* SumToShape(grad, shape): sums grad over the dimensions that broadcasting
 * added or stretched from 1, giving a tensor of `shape`. It undoes NumPy
 * broadcasting in tf.gradients; when nothing was broadcast it forwards grad. */
static mf_code sum_to_shape_infer(mf_infer_ctx *ic) {
  mf_dtype t = ic->in_dtypes[0];
  if (t == MF_BOOL)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: SumToShape takes a numeric tensor, got bool",
                         ic->op_name);
  if (ic->in_dtypes[1] != MF_INT32 && ic->in_dtypes[1] != MF_INT64)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: the shape must be int32 or int64, got %s",
                         ic->op_name, mf_dtype_name(ic->in_dtypes[1]));
  ic->out_dtypes[0] = t;
  ic->out_shapes[0] = mf_infer_shape_value(ic, 1);
  return MF_OK;
}

static mf_code sum_to_shape_kernel(mf_kernel_ctx *ctx) {
  mf_tensor *grad = ctx->inputs[0];
  const mf_shape *want = &ctx->out_shapes[0];
  bool mask[MF_MAX_RANK], same = want->rank == grad->rank;
  int lead = grad->rank - want->rank;
  for (int d = 0; d < grad->rank || (lead < 0 && d == 0); d++) {
    int64_t w = lead < 0 ? -1 : d >= lead ? want->dims[d - lead] : 1;
    if (lead < 0 || (w != grad->dims[d] && w != 1)) {
      char a[128], b[128];
      mf_shape gs = mf_shape_of(grad);
      return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                           "%s: a gradient of shape %s cannot be summed to shape %s, which does not "
                           "broadcast to it", ctx->op->name, mf_shape_str(&gs, a, sizeof a),
                           mf_shape_str(want, b, sizeof b));
    }
    mask[d] = d < lead || w != grad->dims[d];
    same &= !mask[d];
  }
  if (same) {
    ctx->outputs[0] = mf_tensor_retain(grad);
    return MF_OK;
  }
  mf_tensor *out = mf_kernel_alloc_output(ctx, 0, grad->dtype, want->rank, want->dims);
  if (!out) return ctx->status->code;
  reduce_geom g;
  reduce_geometry(grad, mask, &g);
  Sum_fns[grad->dtype](&g, grad->data, out->data);
  return MF_OK;
}

/* The gradient of a sum to a shape is the gradient broadcast back. */
static mf_code sum_to_shape_grad(mf_grad_ctx *gc) {
  mf_output shape = mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0));
  gc->input_grads[0] = mf_grad_op2(gc, "BroadcastTo", gc->grads[0], shape);
  return gc->status->code;
}

#define REDUCE_DEF(op, types, acc, identity, combine, result)                                  \
  {.name = #op, .num_inputs = 1, .num_outputs = 1, .flags = types##_FLAGS,                  \
   .infer = op##_infer, .kernel = {[MF_CPU] = op##_kernel}},
static const mf_op_def defs[] = {
    REDUCE_OPS(REDUCE_DEF)
    {.name = "SumToShape", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_SETS_OUTPUTS,
     .infer = sum_to_shape_infer, .kernel = {[MF_CPU] = sum_to_shape_kernel},
     .grad = sum_to_shape_grad},
};
MF_OP_TABLE(mf_ops_reduce, defs);
