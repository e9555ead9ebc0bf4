/* reduce.c — reductions: Sum, Mean, Max, Min, Prod (numeric) and Any, All (bool),
 * with their gradient rules, and the ops gradients use: SumToShape, TileGrad,
 * ReducedShape.
 *
 * Attrs: "axis" (ints; absent = every axis, negative axes count from the end)
 * and "keepdims" (bool). One driver serves every op: the shape is collapsed
 * into alternating groups of kept and reduced axes, and the driver walks kept
 * groups (one output each, or one contiguous block of outputs when the last
 * axes are kept) and, inside, the reduced groups. The op-specific part is only
 * the combine step, listed once in REDUCE_OPS and inlined into one driver per
 * (op, dtype) by REDUCE_KERNEL. */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "kernels/elementwise.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"
#include "kernels/parallel.h"
#include "ops/reduce.h"
#include "ops/gpu/gpu.h"

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

mf_code mf_reduce_mask(const char *op, const mf_attrs *attrs, int rank, bool *mask, mf_status *s) {
  const int64_t *axes;
  int n = reduce_axes(attrs, &axes);
  for (int d = 0; d < rank; d++) mask[d] = n < 0;
  for (int i = 0; i < n; i++) {
    int d;
    if (mf_normalize_axis(op, axes[i], rank, &d, s)) return s->code;
    if (mask[d])
      return MF_INVALID(s,
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
    return MF_INVALID(ic->status,
                      "%s: %s takes a bool tensor, got %s; compare first (e.g. tf.not_equal(x, 0)) "
                      "or tf.cast it to tf.bool",
                      ic->op_name, type, mf_dtype_name(t));
  if (!logical && t == MF_BOOL)
    return MF_INVALID(ic->status,
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
  if (mf_reduce_mask(ic->op_name, ic->attrs, in->rank, mask, ic->status)) return ic->status->code;
  mf_shape out = {.rank = 0};
  for (int d = 0; d < in->rank; d++) {
    if (!mask[d]) out.dims[out.rank++] = in->dims[d];
    else if (keep) out.dims[out.rank++] = 1;
  }
  ic->out_shapes[0] = out;
  return MF_OK;
}

void mf_reduce_geometry(int rank, const int64_t *dims, const bool *mask, mf_reduce_geom *g) {
  int64_t size[MF_REDUCE_MAX_DIMS], stride[MF_REDUCE_MAX_DIMS];
  bool red[MF_REDUCE_MAX_DIMS];
  int m = 0;
  memset(g, 0, sizeof *g);
  g->out_size = g->count = g->inner = g->run = 1;
  for (int d = 0; d < rank; d++) {
    int64_t n = dims[d];
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
#define ACC_WIDE(code, E) WIDE_##code
#define ACC_ELEM(code, E) E
#define WIDE_MF_FLOAT32 double
#define WIDE_MF_FLOAT64 double
#define WIDE_MF_INT32 uint64_t
#define WIDE_MF_INT64 uint64_t
#define WIDE_MF_UINT8 uint64_t
#define WIDE_MF_COMPLEX64 double _Complex
#define WIDE_MF_COMPLEX128 double _Complex

/* Mean of an empty reduction: nan for floats (0/0); 0 for integers, which have no nan. */
static inline double mean_float(double sum, int64_t n) { return sum / (double)n; }
static inline int64_t mean_int(uint64_t sum, int64_t n) { return n ? (int64_t)sum / n : 0; }
static inline double _Complex mean_complex(double _Complex sum, int64_t n) { return sum / (double)n; }
#define MEAN(a, n) _Generic((a), double: mean_float, double _Complex: mean_complex, default: mean_int)(a, n)

/* X(op, dtypes (a list of core/dtype.h by its set, see MF_TYPES), accumulator,
 * identity, combine(a, b), result(a, n), gradient rule): a and b are
 * accumulators, n the number of elements folded, E the element type; the
 * result is converted to E. */
#define REDUCE_OPS(X)                                                                         \
  X(Sum, NUMBER, ACC_WIDE, 0, a + b, a, sum_grad)                                             \
  X(Mean, NUMBER, ACC_WIDE, 0, a + b, MEAN(a, n), mean_grad)                                  \
  X(Prod, NUMERIC, ACC_WIDE, 1, a * b, a, prod_grad)                                          \
  X(Max, NUMERIC, ACC_ELEM, MF_LOWEST(E), MF_MAX_KEEP_NAN(a, b), a, extremum_grad)            \
  X(Min, NUMERIC, ACC_ELEM, MF_HIGHEST(E), MF_MIN_KEEP_NAN(a, b), a, extremum_grad)           \
  X(Any, BOOL, ACC_ELEM, false, a || b, a, NULL)                                              \
  X(All, BOOL, ACC_ELEM, true, a && b, a, NULL)


/* ---------- the driver ---------- */

/* Outputs per piece when the last axes are kept: they accumulate side by side
 * on the stack while the reduced groups are walked, so input rows are read
 * contiguously and nothing is allocated. */
enum { REDUCE_CHUNK = 1024 };

/* Offset of the row-major position `pos` of a walk over dims with strides;
 * idx receives the multi-index. */
static int64_t unravel(int n, const int64_t *dims, const int64_t *strides, int64_t pos, int64_t *idx) {
  int64_t off = 0;
  for (int d = n - 1; d >= 0; d--) {
    idx[d] = pos % dims[d];
    pos /= dims[d];
    off += idx[d] * strides[d];
  }
  return off;
}

/* How a reduction splits over threads (kernels/parallel.h): into pieces, a
 * kept position and up to REDUCE_CHUNK of its inner outputs each, and, when
 * the pieces are few and each folds many elements, each piece's walk into
 * blocks of mf_parallel_block_len steps whose partial accumulators (in
 * `partials`, [piece][block][width]) are combined in block order. A step of
 * the walk is an element when inner == 1, else a row of the piece's inner
 * outputs. Pieces and blocks follow from the shape alone, so every thread
 * count gives the same bits. */
typedef struct reduce_job {
  const mf_reduce_geom *g;
  const void *in;
  void *out;
  int64_t chunks;    /* pieces per kept position: ceil(inner / REDUCE_CHUNK) */
  int64_t width;     /* outputs of a full piece: min(inner, REDUCE_CHUNK) */
  int64_t blocks;    /* blocks per piece; 1 when the walk is not split */
  int64_t block_len; /* steps per block */
  void *partials;
} reduce_job;

/* Fewer pieces than this split their walks: with more, the pieces alone
 * keep every thread busy. */
enum { REDUCE_FEW_PIECES = 64 };

/* Piece p: its kept position, its first inner output i0 and its m outputs,
 * which start at `out` (an offset in outputs). */
typedef struct reduce_piece {
  int64_t kept, i0, m, out;
} reduce_piece;

static inline reduce_piece piece_of(const reduce_job *jb, int64_t p) {
  reduce_piece r = {.kept = p / jb->chunks, .i0 = p % jb->chunks * REDUCE_CHUNK};
  r.m = jb->g->inner - r.i0 < REDUCE_CHUNK ? jb->g->inner - r.i0 : REDUCE_CHUNK;
  r.out = r.kept * jb->g->inner + r.i0;
  return r;
}

/* Per (op, dtype): combine and result from REDUCE_OPS, two inner loops, and
 * the walk over a piece's steps.
 * - fold: a contiguous run into one accumulator, through 8 independent lanes
 *   (written out so that they stay in registers and vectorize); the path for
 *   reducing a whole contiguous tensor and for reducing the last axis.
 * - accumulate: a row of m inputs into m accumulators, in the block loop of
 *   kernels/elementwise.h, which compilers vectorize at -O2.
 * - walk: steps [j0, j1) of the reduced groups into acc (m of them), from the
 *   input at offset base.
 * - items: pieces x blocks [begin, end), results written (one block) or kept
 *   as partials; combine: the partials of pieces [begin, end) into results. */
#define REDUCE_KERNEL(code, E_, op, acc, identity, combine, result)                          \
  typedef acc(code, E_) op##_##code##_acc;                                                   \
  static inline op##_##code##_acc op##_##code##_combine(op##_##code##_acc a,                 \
                                                        op##_##code##_acc b) {               \
    return (combine);                                                                        \
  }                                                                                          \
  static inline E_ op##_##code##_result(op##_##code##_acc a, int64_t n) {                    \
    MF_UNUSED(n);                                                                            \
    return (E_)(result);                                                                     \
  }                                                                                          \
  static inline op##_##code##_acc op##_##code##_identity(void) {                             \
    typedef E_ E;                                                                            \
    (void)sizeof(E);                                                                         \
    return (op##_##code##_acc)(identity);                                                    \
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
    MF_ELEMENTS(m, j, acc[j] = op##_##code##_combine(acc[j], p[j]););                        \
  }                                                                                          \
  static void op##_##code##_walk(const mf_reduce_geom *g, const E_ *in, int64_t j0, int64_t j1, \
                                 op##_##code##_acc *acc, int64_t m) {                        \
    int64_t ridx[MF_REDUCE_MAX_DIMS];                                                           \
    if (j0 >= j1) return;                                                                    \
    if (g->inner == 1) {                                                                     \
      int64_t e = j0 % g->run;                                                               \
      int64_t off = unravel(g->nr, g->rdims, g->rstrides, j0 / g->run, ridx);                \
      for (int64_t j = j0;;) {                                                               \
        int64_t len = g->run - e < j1 - j ? g->run - e : j1 - j;                             \
        acc[0] = op##_##code##_fold(acc[0], in + off + e, len);                              \
        if ((j += len) >= j1) return;                                                        \
        e = 0;                                                                               \
        off = odo_next(g->nr, g->rdims, g->rstrides, ridx, off);                             \
      }                                                                                      \
    }                                                                                        \
    int64_t off = unravel(g->nr, g->rdims, g->rstrides, j0, ridx);                           \
    for (int64_t j = j0;;) {                                                                 \
      op##_##code##_accumulate(acc, in + off, m);                                            \
      if (++j >= j1) return;                                                                 \
      off = odo_next(g->nr, g->rdims, g->rstrides, ridx, off);                               \
    }                                                                                        \
  }                                                                                          \
  static void op##_##code##_items(void *arg, int64_t begin, int64_t end) {                   \
    typedef op##_##code##_acc A;                                                             \
    const reduce_job *jb = arg;                                                              \
    const mf_reduce_geom *g = jb->g;                                                            \
    int64_t kidx[MF_REDUCE_MAX_DIMS];                                                           \
    for (int64_t it = begin; it < end; it++) {                                               \
      const int64_t b = it % jb->blocks;                                                     \
      const reduce_piece pc = piece_of(jb, it / jb->blocks);                                 \
      const int64_t m = pc.m, base = unravel(g->nk, g->kdims, g->kstrides, pc.kept, kidx) + pc.i0; \
      const int64_t j0 = b * jb->block_len;                                                  \
      const int64_t j1 = j0 + jb->block_len < g->count ? j0 + jb->block_len : g->count;      \
      A acc[REDUCE_CHUNK];                                                                   \
      for (int64_t j = 0; j < m; j++) acc[j] = op##_##code##_identity();                     \
      op##_##code##_walk(g, (const E_ *)jb->in + base, j0, j1, acc, m);                      \
      if (jb->blocks == 1) {                                                                 \
        E_ *o = (E_ *)jb->out + pc.out;                                                      \
        for (int64_t j = 0; j < m; j++) o[j] = op##_##code##_result(acc[j], g->count);       \
      } else {                                                                               \
        memcpy((A *)jb->partials + it * jb->width, acc, (size_t)m * sizeof *acc);            \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void op##_##code##_combine_blocks(void *arg, int64_t begin, int64_t end) {          \
    typedef op##_##code##_acc A;                                                             \
    const reduce_job *jb = arg;                                                              \
    const mf_reduce_geom *g = jb->g;                                                            \
    for (int64_t piece = begin; piece < end; piece++) {                                      \
      const reduce_piece pc = piece_of(jb, piece);                                           \
      const A *part = (const A *)jb->partials + piece * jb->blocks * jb->width;              \
      E_ *o = (E_ *)jb->out + pc.out;                                                        \
      for (int64_t j = 0; j < pc.m; j++) {                                                   \
        A a = op##_##code##_identity();                                                      \
        for (int64_t b = 0; b < jb->blocks; b++)                                             \
          a = op##_##code##_combine(a, part[b * jb->width + j]);                             \
        o[j] = op##_##code##_result(a, g->count);                                            \
      }                                                                                      \
    }                                                                                        \
  }

#define REDUCE_KERNEL_FOR_TYPES(op, types, acc, identity, combine, result, rule) \
  MF_TYPES(types)(REDUCE_KERNEL, op, acc, identity, combine, result)
REDUCE_OPS(REDUCE_KERNEL_FOR_TYPES)

/* ---------- kernels and registration ---------- */

/* A reduction's functions for one dtype (REDUCE_KERNEL) and its accumulator's size. */
typedef struct reduce_impl {
  mf_parallel_fn items, combine_blocks;
  size_t acc_size;
} reduce_impl;

/* Runs a reduction of geometry g from in to out, split as reduce_job says. */
static mf_code reduce_run(mf_kernel_ctx *ctx, const reduce_impl *impl, const mf_reduce_geom *g, const void *in,
                          void *out) {
  if (g->out_size == 0) return MF_OK;
  reduce_job jb = {.g = g, .in = in, .out = out, .chunks = (g->inner + REDUCE_CHUNK - 1) / REDUCE_CHUNK,
                   .width = g->inner < REDUCE_CHUNK ? g->inner : REDUCE_CHUNK, .blocks = 1, .block_len = g->count};
  const int64_t pieces = g->out_size / g->inner * jb.chunks;
  if (pieces < REDUCE_FEW_PIECES) {
    /* A block of steps folds block_len * width elements. */
    int64_t len = mf_parallel_block_len(g->count * jb.width) / jb.width;
    jb.block_len = len < 1 ? 1 : len;
    jb.blocks = (g->count + jb.block_len - 1) / jb.block_len;
    if (jb.blocks <= 1) jb.blocks = 1, jb.block_len = g->count;
  }
  if (jb.blocks > 1 &&
      !(jb.partials = mf_kernel_scratch(ctx, (size_t)(pieces * jb.blocks * jb.width) * impl->acc_size)))
    return ctx->status->code;
  mf_parallel_for(ctx, pieces * jb.blocks, jb.block_len * jb.width, impl->items, &jb);
  if (jb.blocks > 1) mf_parallel_for(ctx, pieces, jb.blocks * jb.width, impl->combine_blocks, &jb);
  return MF_OK;
}

static mf_code reduce_kernel(mf_kernel_ctx *ctx, const reduce_impl *impls) {
  const mf_tensor *in = ctx->inputs[0];
  bool mask[MF_MAX_RANK];
  if (mf_reduce_mask(ctx->op->name, ctx->attrs, in->rank, mask, ctx->status)) return ctx->status->code;
  mf_reduce_geom g;
  mf_reduce_geometry(in->rank, in->dims, mask, &g);
  return reduce_run(ctx, &impls[in->dtype], &g, in->data, ctx->outputs[0]->data);
}

#define REDUCE_IMPL_ENTRY(code, E_, op) \
  [code] = {op##_##code##_items, op##_##code##_combine_blocks, sizeof(op##_##code##_acc)},
#define REDUCE_OP_FUNCS(op, types, acc, identity, combine, result, rule)                          \
  static const reduce_impl op##_impls[MF_DTYPE_SLOTS] = {MF_TYPES(types)(REDUCE_IMPL_ENTRY, op)}; \
  static mf_code op##_infer(mf_infer_ctx *ic) { return reduce_infer(ic, types##_IS_LOGICAL); }    \
  static mf_code op##_kernel(mf_kernel_ctx *ctx) { return reduce_kernel(ctx, op##_impls); }
/* Any and All take and give bools: there is no gradient to take. */
enum { NUMERIC_IS_LOGICAL = false, NUMBER_IS_LOGICAL = false, BOOL_IS_LOGICAL = true };
enum { NUMERIC_FLAGS = 0, NUMBER_FLAGS = MF_OP_COMPLEX, BOOL_FLAGS = MF_OP_NOT_DIFFERENTIABLE };
REDUCE_OPS(REDUCE_OP_FUNCS)

mf_code mf_reduce_sum(mf_kernel_ctx *ctx, const mf_tensor *x, const bool *mask, mf_tensor *out) {
  mf_reduce_geom g;
  mf_reduce_geometry(x->rank, x->dims, mask, &g);
  return reduce_run(ctx, &Sum_impls[x->dtype], &g, x->data, out->data);
}

/* ---------- SumToShape ---------- */

/* SumToShape(grad, shape): sums grad over the dimensions that broadcasting
 * added or stretched from 1, giving a tensor of `shape`. It undoes NumPy
 * broadcasting in tf.gradients; when nothing was broadcast it forwards grad. */
static mf_code sum_to_shape_infer(mf_infer_ctx *ic) {
  mf_dtype t = ic->in_dtypes[0];
  if (t == MF_BOOL)
    return MF_INVALID(ic->status, "%s: SumToShape takes a numeric tensor, got bool",
                      ic->op_name);
  if (ic->in_dtypes[1] != MF_INT32 && ic->in_dtypes[1] != MF_INT64)
    return MF_INVALID(ic->status, "%s: the shape must be int32 or int64, got %s",
                      ic->op_name, mf_dtype_name(ic->in_dtypes[1]));
  ic->out_dtypes[0] = t;
  ic->out_shapes[0] = mf_infer_shape_value(ic, 1);
  return MF_OK;
}

mf_code mf_sum_to_shape(mf_kernel_ctx *ctx, mf_reduce_sum_fn sum) {
  mf_tensor *grad = ctx->inputs[0];
  const mf_shape *want = &ctx->out_shapes[0];
  bool mask[MF_MAX_RANK], same = want->rank == grad->rank;
  int lead = grad->rank - want->rank;
  for (int d = 0; d < grad->rank || (lead < 0 && d == 0); d++) {
    int64_t w = lead < 0 ? -1 : d >= lead ? want->dims[d - lead] : 1;
    if (lead < 0 || (w != grad->dims[d] && w != 1)) {
      char a[128], b[128];
      mf_shape gs = mf_shape_of(grad);
      return MF_INVALID(ctx->status,
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
  return sum(ctx, grad, mask, out);
}
static mf_code sum_to_shape_kernel(mf_kernel_ctx *ctx) { return mf_sum_to_shape(ctx, mf_reduce_sum); }

/* The gradient of a sum to a shape is the gradient broadcast back. */
static mf_code sum_to_shape_grad(mf_grad_ctx *gc) {
  mf_output shape = mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0));
  gc->input_grads[0] = mf_grad_op2(gc, "BroadcastTo", gc->grads[0], shape);
  return gc->status->code;
}

/* ---------- TileGrad ---------- */

/* TileGrad(dy, shape): the gradient of Tile, dy summed over the tiles into a
 * tensor of `shape` (Tile's input shape), multiples as Tile's. dy is seen as
 * [m0, d0, m1, d1, ...] and summed over the m axes by the reduction driver. */
static mf_code tile_grad_infer(mf_infer_ctx *ic) {
  const mf_shape *dy = &ic->in_shapes[0], *sv = &ic->in_shapes[1];
  char a[160], b[160];
  if (ic->in_dtypes[0] == MF_BOOL)
    return MF_INVALID(ic->status, "%s: TileGrad takes a numeric tensor, got bool",
                      ic->op_name);
  if ((ic->in_dtypes[1] != MF_INT32 && ic->in_dtypes[1] != MF_INT64) || (sv->rank >= 0 && sv->rank != 1))
    return MF_INVALID(ic->status,
                      "%s: the shape must be an int32 or int64 vector, got %s of shape %s", ic->op_name,
                      mf_dtype_name(ic->in_dtypes[1]), mf_shape_str(sv, a, sizeof a));
  const int64_t *m;
  int n = mf_attr_ints(ic->attrs, "multiples", &m);
  if (n < 0 || n > MF_MAX_RANK)
    return MF_INVALID(ic->status,
                      "%s: TileGrad needs a 'multiples' attribute of at most %d entries", ic->op_name,
                      MF_MAX_RANK);
  mf_shape out = mf_infer_shape_value(ic, 1);
  if (out.rank < 0) {
    out.rank = n;
    for (int i = 0; i < n; i++) out.dims[i] = -1;
  }
  if (out.rank != n || (dy->rank >= 0 && dy->rank != n))
    return MF_INVALID(ic->status,
                      "%s: multiples has %d entries, but the gradient has shape %s and the shape is %s",
                      ic->op_name, n, mf_shape_str(dy, a, sizeof a), mf_shape_str(&out, b, sizeof b));
  for (int i = 0; i < n; i++) {
    int64_t g = dy->rank >= 0 ? dy->dims[i] : -1;
    if (m[i] < 0)
      return MF_INVALID(ic->status, "%s: multiples[%d] = %lld must be non-negative",
                        ic->op_name, i, (long long)m[i]);
    if (out.dims[i] < 0 && g >= 0 && m[i] > 0 && g % m[i] == 0) out.dims[i] = g / m[i];
    int64_t tiled;
    if (out.dims[i] >= 0 && g >= 0 && (!mf_size_mul(out.dims[i], m[i], &tiled) || g != tiled))
      return MF_INVALID(ic->status,
                        "%s: a gradient of shape %s is not shape %s tiled by the multiples "
                        "(dimension %d: %lld is not %lld * %lld)",
                        ic->op_name, mf_shape_str(dy, a, sizeof a), mf_shape_str(&out, b, sizeof b), i,
                        (long long)g, (long long)out.dims[i], (long long)m[i]);
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = out;
  return MF_OK;
}

static mf_code tile_grad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *dy = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  const int64_t *m;
  int n = mf_attr_ints(ctx->attrs, "multiples", &m);
  int64_t dims[MF_REDUCE_MAX_DIMS];
  bool mask[MF_REDUCE_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    /* A shape promised by set_shape can disagree with the values; never read past dy. */
    if (dy->rank != n || out->rank != n || dy->dims[i] != out->dims[i] * m[i]) {
      char a[160], b[160];
      mf_shape ds = mf_shape_of(dy), os = mf_shape_of(out);
      return MF_INVALID(ctx->status,
                        "%s: a gradient of shape %s is not shape %s tiled by the multiples",
                        ctx->op->name, mf_shape_str(&ds, a, sizeof a), mf_shape_str(&os, b, sizeof b));
    }
    dims[2 * i] = m[i];
    dims[2 * i + 1] = out->dims[i];
    mask[2 * i] = true;
    mask[2 * i + 1] = false;
  }
  mf_reduce_geom g;
  mf_reduce_geometry(2 * n, dims, mask, &g);
  return reduce_run(ctx, &Sum_impls[dy->dtype], &g, dy->data, out->data);
}

/* ---------- ReducedShape ---------- */

/* ReducedShape(shape), attrs axis as a reduction's: the shape with the
 * reduced axes set to 1 — the keepdims shape of a reduction of an input of
 * that shape. Gradients reshape a reduction's result with it when the input's
 * shape is only known at run time. */
static mf_code reduced_shape_infer(mf_infer_ctx *ic) {
  const mf_shape *s = &ic->in_shapes[0];
  char buf[160];
  if ((ic->in_dtypes[0] != MF_INT32 && ic->in_dtypes[0] != MF_INT64) || (s->rank >= 0 && s->rank != 1))
    return MF_INVALID(ic->status,
                      "%s: the shape must be an int32 or int64 vector, got %s of shape %s", ic->op_name,
                      mf_dtype_name(ic->in_dtypes[0]), mf_shape_str(s, buf, sizeof buf));
  int64_t n = s->rank == 1 ? s->dims[0] : -1;
  if (n > MF_MAX_RANK)
    return MF_INVALID(ic->status, "%s: a shape of %lld dimensions; at most %d",
                      ic->op_name, (long long)n, MF_MAX_RANK);
  bool mask[MF_MAX_RANK];
  if (n >= 0 && mf_reduce_mask(ic->op_name, ic->attrs, (int)n, mask, ic->status)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = (mf_shape){.rank = 1, .dims = {n}};
  return MF_OK;
}

static mf_code reduced_shape_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  bool mask[MF_MAX_RANK];
  if (in->size > MF_MAX_RANK)
    return MF_INVALID(ctx->status, "%s: a shape of %lld dimensions; at most %d",
                      ctx->op->name, (long long)in->size, MF_MAX_RANK);
  if (mf_reduce_mask(ctx->op->name, ctx->attrs, (int)in->size, mask, ctx->status)) return ctx->status->code;
  for (int64_t i = 0; i < in->size; i++) {
    int64_t d = mask[i] ? 1 : mf_load_int64(in->data, in->dtype, i);
    if (in->dtype == MF_INT32) ((int32_t *)out->data)[i] = (int32_t)d;
    else ((int64_t *)out->data)[i] = d;
  }
  return MF_OK;
}

/* ---------- gradients ---------- */

/* Rules follow TensorFlow's and build graph ops only, so they differentiate
 * again; shapes come from Shape ops, so unknown dimensions are fine. */

/* A constant int64 vector holding a fully defined shape. */
static mf_output shape_const(mf_grad_ctx *gc, const mf_shape *s) {
  if (!mf_ok(gc->status)) return MF_NO_PORT;
  int64_t n = s->rank;
  mf_tensor *v = mf_tensor_new(MF_INT64, 1, &n, gc->status);
  if (!v) return MF_NO_PORT;
  if (n > 0) memcpy(v->data, s->dims, (size_t)n * sizeof s->dims[0]);
  mf_op_desc *d = mf_grad_begin(gc, "Const");
  if (d) mf_op_desc_set_attr_tensor(d, "value", v);
  mf_tensor_release(v);
  return mf_grad_finish(gc, d);
}

/* The shape t of the reduction's output (its result or its gradient) takes
 * to broadcast against the input: the reduced axes back as 1s. A constant
 * when the input's shape is known, else ReducedShape(Shape(x)) at run time;
 * {NULL} when t already broadcasts — with keepdims, or when every axis was
 * reduced (t is then a scalar). */
static mf_output kept_shape(mf_grad_ctx *gc) {
  const int64_t *axes;
  int n = reduce_axes(&gc->op->attrs, &axes);
  if (n < 0 || mf_attr_bool(&gc->op->attrs, "keepdims", false)) return MF_NO_PORT;
  mf_output x = mf_op_in(gc->op, 0);
  const mf_shape *xs = mf_port_shape(x);
  bool mask[MF_MAX_RANK];
  if (mf_shape_fully_defined(xs) &&
      mf_reduce_mask(gc->op->name, &gc->op->attrs, xs->rank, mask, gc->status) == MF_OK) {
    mf_shape k = *xs;
    for (int d = 0; d < k.rank; d++)
      if (mask[d]) k.dims[d] = 1;
    return shape_const(gc, &k);
  }
  mf_output shape = mf_grad_op1(gc, "Shape", x);
  mf_op_desc *d = mf_grad_begin(gc, "ReducedShape");
  if (d) {
    mf_op_desc_add_input(d, shape);
    mf_op_desc_set_attr_ints(d, "axis", axes, n);
  }
  return mf_grad_finish(gc, d);
}

/* t reshaped to `kept` from kept_shape (unchanged when that is {NULL}). */
static mf_output with_kept_dims(mf_grad_ctx *gc, mf_output t, mf_output kept) {
  return kept.op ? mf_grad_op2(gc, "Reshape", t, kept) : t;
}

/* The reduction `type` of t over the op's axes, keeping them as 1s. */
static mf_output reduce_kept(mf_grad_ctx *gc, const char *type, mf_output t) {
  mf_op_desc *d = mf_grad_begin_like(gc, type, &t, 1);
  if (d) mf_op_desc_set_attr_bool(d, "keepdims", true);
  return mf_grad_finish(gc, d);
}

/* 1.0 where a == b, else 0.0, in dtype. */
static mf_output indicator(mf_grad_ctx *gc, mf_output a, mf_output b, mf_dtype dtype) {
  return mf_grad_cast(gc, mf_grad_op2(gc, "Equal", a, b), dtype);
}

static mf_output size_of(mf_grad_ctx *gc, mf_output t) {
  mf_op_desc *d = mf_grad_begin(gc, "Size");
  if (d) {
    mf_op_desc_add_input(d, t);
    mf_op_desc_set_attr_type(d, "out_type", MF_INT64);
  }
  return mf_grad_finish(gc, d);
}

/* Sum: dy broadcast back over the reduced axes. */
static mf_code sum_grad(mf_grad_ctx *gc) {
  mf_output shape = mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0));
  mf_output dy = with_kept_dims(gc, gc->grads[0], kept_shape(gc));
  gc->input_grads[0] = mf_grad_op2(gc, "BroadcastTo", dy, shape);
  return gc->status->code;
}

/* Mean: as Sum, divided by the number of elements averaged — a constant when
 * the shapes are known, else size(x) / max(size(y), 1) at run time (an empty
 * output has an empty input, whose gradient has no elements to divide). */
static mf_code mean_grad(mf_grad_ctx *gc) {
  mf_output x = mf_op_in(gc->op, 0), y = mf_op_out(gc->op, 0);
  mf_dtype t = gc->op->out_dtypes[0];
  const mf_shape *xs = mf_port_shape(x), *ys = &gc->op->out_shapes[0];
  mf_output count;
  if (mf_shape_fully_defined(xs) && mf_shape_fully_defined(ys)) {
    int64_t nx = mf_shape_num_elements(xs->rank, xs->dims), ny = mf_shape_num_elements(ys->rank, ys->dims);
    count = mf_grad_scalar(gc, t, (double)(nx / (ny > 0 ? ny : 1)));
  } else {
    mf_output ny = mf_grad_op2(gc, "Maximum", size_of(gc, y), mf_grad_scalar(gc, MF_INT64, 1));
    count = mf_grad_cast(gc, mf_grad_op2(gc, "FloorDiv", size_of(gc, x), ny), t);
  }
  mf_output shape = mf_grad_op1(gc, "Shape", x);
  mf_output dy = mf_grad_op2(gc, "Div", gc->grads[0], count);
  gc->input_grads[0] = mf_grad_op2(gc, "BroadcastTo", with_kept_dims(gc, dy, kept_shape(gc)), shape);
  return gc->status->code;
}

/* Prod: d(prod x)/dx_i is the product of the other elements. Dividing the
 * product by x_i fails at zeros, so zeros are counted per reduced group: with
 * none, the product over x_i; with one, the product of the nonzero elements at
 * the zero and 0 elsewhere; with more, 0 everywhere. x_nz is x with its zeros
 * replaced by 1:
 *   dx = dy * prod(x_nz) * ([no zeros] / x_nz + [one zero] * [x == 0]).
 * First derivatives are exact everywhere; differentiating this again is exact
 * where x has no zeros (the zero counts are held constant). */
static mf_code prod_grad(mf_grad_ctx *gc) {
  mf_output x = mf_op_in(gc->op, 0);
  mf_dtype t = gc->op->out_dtypes[0];
  mf_output zero = mf_grad_scalar(gc, t, 0), one = mf_grad_scalar(gc, t, 1);
  mf_output is_zero = indicator(gc, x, zero, t);
  mf_output x_nz = mf_grad_op2(gc, "Add", x, is_zero);
  mf_output prod_nz = reduce_kept(gc, "Prod", x_nz);
  mf_output zeros = reduce_kept(gc, "Sum", is_zero);
  mf_output none = indicator(gc, zeros, zero, t), single = indicator(gc, zeros, one, t);
  mf_output factor = mf_grad_op2(gc, "Add", mf_grad_op2(gc, "Div", none, x_nz),
                                 mf_grad_op2(gc, "Mul", single, is_zero));
  mf_output scale = mf_grad_op2(gc, "Mul", with_kept_dims(gc, gc->grads[0], kept_shape(gc)), prod_nz);
  gc->input_grads[0] = mf_grad_op2(gc, "Mul", scale, factor);
  return gc->status->code;
}

/* Max and Min: dy goes to the elements equal to the result, split evenly
 * among ties. */
static mf_code extremum_grad(mf_grad_ctx *gc) {
  mf_output x = mf_op_in(gc->op, 0);
  mf_dtype t = gc->op->out_dtypes[0];
  mf_output kept = kept_shape(gc);
  mf_output y = with_kept_dims(gc, mf_op_out(gc->op, 0), kept);
  mf_output hits = indicator(gc, y, x, t);
  mf_output share = mf_grad_op2(gc, "Div", hits, reduce_kept(gc, "Sum", hits));
  gc->input_grads[0] = mf_grad_op2(gc, "Mul", share, with_kept_dims(gc, gc->grads[0], kept));
  return gc->status->code;
}

/* Tile: the tiles' gradients summed; TileGrad's own gradient tiles again
 * (the same multiples). */
static mf_code tile_grad_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_rebuild(gc, "Tile", gc->grads, 1);
  return gc->status->code;
}

/* The GPU runs the numeric reductions on float32, float64, int32 and int64 (ops/gpu/gpu_reduce.c). */
#define NUMERIC_GPU(op) mf_gpu_reduce_##op
#define NUMBER_GPU(op) mf_gpu_reduce_##op
#define BOOL_GPU(op) NULL
#define REDUCE_DEF(op, types, acc, identity, combine, result, rule)                            \
  {.name = #op, .num_inputs = 1, .num_outputs = 1, .flags = types##_FLAGS,                     \
   .infer = op##_infer, .kernel = {[MF_CPU] = op##_kernel, [MF_CUDA] = types##_GPU(op)},      \
   .cuda_dtypes = MF_DTYPE_MASK(MF_FOR_SIGNED_TYPES), .grad = rule},
static const mf_op_def defs[] = {
    REDUCE_OPS(REDUCE_DEF)
    {.name = "SumToShape", .num_inputs = 2, .num_outputs = 1, .value_inputs = 1u << 1,
     .flags = MF_OP_INTERNAL | MF_OP_SETS_OUTPUTS | MF_OP_COMPLEX,
     .infer = sum_to_shape_infer, .kernel = {[MF_CPU] = sum_to_shape_kernel, [MF_CUDA] = mf_gpu_sum_to_shape},
     .cuda_dtypes = MF_DTYPE_MASK(MF_FOR_SIGNED_TYPES),
     .grad = sum_to_shape_grad},
    {.name = "TileGrad", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_INTERNAL | MF_OP_COMPLEX, .value_inputs = 1u << 1,
     .infer = tile_grad_infer, .kernel = {[MF_CPU] = tile_grad_kernel}, .grad = tile_grad_grad},
    {.name = "ReducedShape", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_INTERNAL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = reduced_shape_infer, .kernel = {[MF_CPU] = reduced_shape_kernel}},
};
MF_OP_TABLE(mf_ops_reduce, defs);
