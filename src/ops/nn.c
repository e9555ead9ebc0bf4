/* nn.c — neural-network ops, TensorFlow's names and semantics, NHWC (the
 * depthwise convolutions take NCHW too):
 *   activations  Relu Relu6 LeakyRelu Elu Selu Softplus Softsign, and their
 *                gradient ops ReluGrad(gradients, features) ... (TF's);
 *   BiasAdd and BiasAddGrad;
 *   Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter (im2col + BLAS gemm);
 *   DepthwiseConv2dNative, DepthwiseConv2dNativeBackpropInput,
 *   DepthwiseConv2dNativeBackpropFilter (direct loops);
 *   MaxPool, MaxPoolGrad, MaxPoolGradGrad, AvgPool, AvgPoolGrad;
 *   LRN, LRNGrad;
 *   SoftmaxCrossEntropyWithLogits and SparseSoftmaxCrossEntropyWithLogits
 *   (fused loss and backprop).
 *
 * Convolutions: the input patches of a block of output pixels are gathered
 * into a scratch matrix (im2col: one row per output pixel, columns ordered
 * (ky, kx, channel) like the rows of the [kh, kw, in, out] filter), so the
 * output block is one gemm with the filter viewed as a [kh*kw*in, out] matrix,
 * written straight into the NHWC output. The input gradient is the transposed
 * product scattered back (col2im, split over threads in stripes of output
 * rows, see col2im_run); the filter gradient is col^T dy summed over
 * blocks. The scratch is bounded (blocks of output rows) and kept in the op's
 * per-session state, so a plan that runs again allocates nothing. 1x1 filters
 * with stride 1 need no im2col at all.
 *
 * Every gradient rule builds graph ops; the gradient ops have rules too (the
 * backprops of a convolution are convolutions, the pool gradients are linear in
 * their incoming gradient), so second derivatives work. */
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
#include "kernels/activation_ops.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"
#include "kernels/parallel.h"
#include "ops/reduce.h"
#include "ops/nn.h"
#include "ops/gpu/gpu.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>


/* ---------- shared checks ---------- */

static const unsigned FLOAT_TYPES = MF_DTYPE_MASK(MF_FOR_FLOAT_TYPES);

/* ---------- activations ----------
 * Their tables are kernels/activation_ops.h's (the GPU's kernels come from
 * them too). Element loops are kernels/elementwise.h's (blocks plus a tail
 * over restrict pointers, the form gcc -O2 vectorizes). Expressions are
 * written once for every dtype; CONST(x, c) is c in x's floating type, so
 * float loops stay in float. */
#define CONST(x, c) _Generic((x), float: (float)(c), default: (c))

/* Loops over one run of n values (a pixel's channels, a window row) for the
 * kernels below, in the same vectorizable form. */
#define RUN_HELPERS(code, T)                                                                        \
  static inline void run_zero_##code(T *restrict d, int64_t n) { MF_ELEMENTS(n, i, d[i] = 0;); }    \
  static inline void run_copy_##code(T *restrict d, const T *restrict s, int64_t n) {               \
    MF_ELEMENTS(n, i, d[i] = s[i];);                                                                \
  }                                                                                                 \
  static inline void run_add_##code(T *restrict d, const T *restrict s, int64_t n) {                \
    MF_ELEMENTS(n, i, d[i] += s[i];);                                                               \
  }                                                                                                 \
  static inline void run_sum_##code(T *restrict d, const T *restrict a, const T *restrict b, int64_t n) { \
    MF_ELEMENTS(n, i, d[i] = a[i] + b[i];);                                                         \
  }                                                                                                 \
  static inline void run_max_##code(T *restrict d, const T *restrict s, int64_t n) {                \
    MF_ELEMENTS(n, i, d[i] = s[i] > d[i] ? s[i] : d[i];);                                           \
  }                                                                                                 \
  static inline void run_div_##code(T *restrict d, T a, int64_t n) { MF_ELEMENTS(n, i, d[i] /= a;); } \
  static inline void run_add_div_##code(T *restrict d, const T *restrict s, T a, int64_t n) {       \
    MF_ELEMENTS(n, i, d[i] += s[i] / a;);                                                           \
  }
MF_FOR_FLOAT_TYPES(RUN_HELPERS)

typedef struct { unsigned dtypes; mf_map_fn loop[MF_DTYPE_SLOTS]; } act_impl;
typedef struct { unsigned dtypes; mf_zip_fn loop[MF_DTYPE_SLOTS]; } act_grad_impl;

#define ACT_LOOP(code, T, name, expr) MF_MAP_FN(name##_##code, T, T, expr)
#define ACT_GRAD_LOOP(code, T, name, expr) MF_ZIP_FN(name##_##code, T, T, g, v, 0, expr)
#define ACT_ENTRY(code, T, name) [code] = name##_##code,

/* tf.nn.leaky_relu's default; the other activations have no alpha. */
static double alpha_attr(const mf_attrs *a) { return mf_attr_float(a, "alpha", 0.2); }

static mf_code act_infer(mf_infer_ctx *ic, unsigned dtypes) {
  if (mf_check_dtype(ic, 0, "features has", dtypes)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static mf_code act_run(mf_kernel_ctx *ctx, const act_impl *impl) {
  const mf_tensor *x = ctx->inputs[0];
  mf_map_run(ctx, impl->loop[x->dtype], x, ctx->outputs[0], alpha_attr(ctx->attrs));
  return MF_OK;
}

/* The loops the executor fuses (mf_op_def.element_loop): those the kernels run. */
static bool act_loop(const mf_attrs *attrs, unsigned dtypes, const mf_map_fn *maps, const mf_zip_fn *zips,
                     mf_dtype t, mf_element_loop *loop) {
  if ((unsigned)t >= MF_DTYPE_SLOTS || !(dtypes >> t & 1u)) return false;
  *loop = (mf_element_loop){.map = maps ? maps[t] : NULL, .zip = zips ? zips[t] : NULL,
                            .alpha = alpha_attr(attrs)};
  return true;
}

/* Gradient ops take (gradients, v) of one dtype and one shape, as TensorFlow's. */
static mf_code act_grad_infer(mf_infer_ctx *ic, unsigned dtypes) {
  if (mf_check_dtype(ic, 1, "features has", dtypes) || mf_check_same_dtype(ic, 0, "gradients", 1, "features"))
    return ic->status->code;
  if (!mf_merge_shapes(&ic->in_shapes[0], &ic->in_shapes[1], &ic->out_shapes[0])) {
    char a[160], b[160];
    return MF_INVALID(ic->status, "%s: gradients has shape %s but features has shape %s; %s needs one shape",
                      ic->op_name, mf_shape_str(&ic->in_shapes[0], a, sizeof a),
                      mf_shape_str(&ic->in_shapes[1], b, sizeof b), ic->def->name);
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  return MF_OK;
}

static mf_code act_grad_run(mf_kernel_ctx *ctx, const act_grad_impl *impl) {
  const mf_tensor *g = ctx->inputs[0], *v = ctx->inputs[1];
  mf_zip_run(ctx, impl->loop[g->dtype], g, true, v, true, ctx->outputs[0], alpha_attr(ctx->attrs));
  return MF_OK;
}

/* The gradient of an activation is its gradient op applied to dy. */
static mf_code act_rule(mf_grad_ctx *gc, const char *grad_op, bool reads_output) {
  mf_output v = reads_output ? mf_op_out(gc->op, 0) : mf_op_in(gc->op, 0);
  gc->input_grads[0] = mf_grad_rebuild(gc, grad_op, (mf_output[]){gc->grads[0], v}, 2);
  return gc->status->code;
}
#define READS_IN false
#define READS_OUT true

/* Second-derivative terms: d/dv of op(g, v), times the incoming gradient gg. */
typedef mf_output (*curvature_fn)(mf_grad_ctx *gc, mf_output g, mf_output v, mf_output gg, mf_dtype t);
#define NUM(x) mf_grad_scalar(gc, t, x)
#define MUL(a, b) mf_grad_op2(gc, "Mul", a, b)
#define DIV(a, b) mf_grad_op2(gc, "Div", a, b)
#define ADD(a, b) mf_grad_op2(gc, "Add", a, b)

/* Elu, Selu: d/dv [g (v + c)] = g where v < 0 (v is the output, below 0 exactly
 * where the input is), else 0. */
static mf_output curvature_below0(mf_grad_ctx *gc, mf_output g, mf_output v, mf_output gg, mf_dtype t) {
  return MUL(MUL(gg, g), mf_grad_cast(gc, mf_grad_op2(gc, "Less", v, NUM(0)), t));
}
/* Softplus: sigmoid'(v) = 1 / (exp(-v) + 2 + exp(v)); an overflowing exp gives 0. */
static mf_output curvature_softplus(mf_grad_ctx *gc, mf_output g, mf_output v, mf_output gg, mf_dtype t) {
  mf_output denom = ADD(ADD(mf_grad_op1(gc, "Exp", mf_grad_op1(gc, "Neg", v)), NUM(2)), mf_grad_op1(gc, "Exp", v));
  return DIV(MUL(gg, g), denom);
}
/* Softsign: d/dv (1 + |v|)^-2 = -2 sign(v) (1 + |v|)^-3. */
static mf_output curvature_softsign(mf_grad_ctx *gc, mf_output g, mf_output v, mf_output gg, mf_dtype t) {
  mf_output s = ADD(NUM(1), mf_grad_op1(gc, "Abs", v));
  mf_output num = MUL(MUL(gg, g), MUL(NUM(-2), mf_grad_op1(gc, "Sign", v)));
  return DIV(num, MUL(s, MUL(s, s)));
}
#define CURVATURE_FLAT NULL
#define CURVATURE_BELOW0 curvature_below0
#define CURVATURE_SOFTPLUS curvature_softplus
#define CURVATURE_SOFTSIGN curvature_softsign

/* A gradient op is linear in g: its gradient for g is the op applied to gg. */
static mf_code act_grad_rule(mf_grad_ctx *gc, curvature_fn curvature) {
  const mf_output g = mf_op_in(gc->op, 0), v = mf_op_in(gc->op, 1), gg = gc->grads[0];
  gc->input_grads[0] = mf_grad_rebuild(gc, gc->op->def->name, (mf_output[]){gg, v}, 2);
  if (curvature) gc->input_grads[1] = curvature(gc, g, v, gg, mf_port_dtype(v));
  return gc->status->code;
}

#define ACT_DEFINE(name, types, grad_op, reads, expr)                                            \
  MF_TYPES(types)(ACT_LOOP, name, expr)                                                          \
  static const act_impl name##_impl = {.dtypes = MF_DTYPE_MASK(MF_TYPES(types)),                 \
                                       .loop = {MF_TYPES(types)(ACT_ENTRY, name)}};              \
  static mf_code name##_infer(mf_infer_ctx *ic) { return act_infer(ic, name##_impl.dtypes); }    \
  static mf_code name##_kernel(mf_kernel_ctx *ctx) { return act_run(ctx, &name##_impl); }        \
  static bool name##_element_loop(const mf_attrs *attrs, mf_dtype t, mf_element_loop *loop) {    \
    return act_loop(attrs, name##_impl.dtypes, name##_impl.loop, NULL, t, loop);                 \
  }                                                                                              \
  static mf_code name##_rule(mf_grad_ctx *gc) { return act_rule(gc, #grad_op, READS_##reads); }
MF_ACTIVATIONS(ACT_DEFINE)

#define ACT_GRAD_DEFINE(name, types, curvature, expr)                                            \
  MF_TYPES(types)(ACT_GRAD_LOOP, name, expr)                                                     \
  static const act_grad_impl name##_impl = {.dtypes = MF_DTYPE_MASK(MF_TYPES(types)),            \
                                            .loop = {MF_TYPES(types)(ACT_ENTRY, name)}};         \
  static mf_code name##_infer(mf_infer_ctx *ic) { return act_grad_infer(ic, name##_impl.dtypes); } \
  static mf_code name##_kernel(mf_kernel_ctx *ctx) { return act_grad_run(ctx, &name##_impl); }   \
  static bool name##_element_loop(const mf_attrs *attrs, mf_dtype t, mf_element_loop *loop) {    \
    return act_loop(attrs, name##_impl.dtypes, NULL, name##_impl.loop, t, loop);                 \
  }                                                                                              \
  static mf_code name##_rule(mf_grad_ctx *gc) { return act_grad_rule(gc, CURVATURE_##curvature); }
MF_ACTIVATION_GRADS(ACT_GRAD_DEFINE)

/* ---------- data_format ---------- */

/* Only NHWC is implemented; the attribute may be absent. */
static mf_code check_data_format(const char *op, const mf_attrs *attrs, mf_status *s) {
  const mf_attr *f = mf_attrs_find(attrs, "data_format", MF_ATTR_STRING);
  if (!f || strcmp(f->v.s, "NHWC") == 0) return MF_OK;
  return MF_INVALID(s,
                    "%s: data_format \"%s\" is not supported: moonflow implements only \"NHWC\" "
                    "(batch, height, width, channels); transpose NCHW values with tf.transpose(x, {0, 2, 3, 1})",
                    op, f->v.s);
}

/* ---------- BiasAdd ---------- */

static mf_code bias_add_infer(mf_infer_ctx *ic) {
  if (check_data_format(ic->op_name, ic->attrs, ic->status) || mf_check_dtype(ic, 0, "value has", FLOAT_TYPES) ||
      mf_check_same_dtype(ic, 0, "value", 1, "bias"))
    return ic->status->code;
  const mf_shape *v = &ic->in_shapes[0], *b = &ic->in_shapes[1];
  char sv[160], sb[160];
  if (v->rank >= 0 && v->rank < 2)
    return MF_INVALID(ic->status, "%s: value must be at least 2-D (batch, ..., channels), got shape %s", ic->op_name,
                      mf_shape_str(v, sv, sizeof sv));
  if (b->rank >= 0 && b->rank != 1)
    return MF_INVALID(ic->status, "%s: bias must be 1-D (one value per channel), got shape %s", ic->op_name,
                      mf_shape_str(b, sb, sizeof sb));
  mf_shape out = *v;
  if (v->rank >= 0 && b->rank == 1) {
    int64_t *c = &out.dims[v->rank - 1];
    if (*c >= 0 && b->dims[0] >= 0 && *c != b->dims[0])
      return MF_INVALID(ic->status,
                        "%s: bias has %lld elements but the last dimension of value is %lld (value shape %s, "
                        "bias shape %s); BiasAdd adds one bias per channel",
                        ic->op_name, (long long)b->dims[0], (long long)*c, mf_shape_str(v, sv, sizeof sv),
                        mf_shape_str(b, sb, sizeof sb));
    if (*c < 0) *c = b->dims[0];
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = out;
  return MF_OK;
}

static mf_code bias_add_grad_infer(mf_infer_ctx *ic) {
  if (check_data_format(ic->op_name, ic->attrs, ic->status) ||
      mf_check_dtype(ic, 0, "out_backprop has", FLOAT_TYPES))
    return ic->status->code;
  const mf_shape *g = &ic->in_shapes[0];
  if (g->rank >= 0 && g->rank < 2) {
    char buf[160];
    return MF_INVALID(ic->status, "%s: out_backprop must be at least 2-D, got shape %s", ic->op_name,
                      mf_shape_str(g, buf, sizeof buf));
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = (mf_shape){.rank = 1, .dims = {g->rank < 0 ? -1 : g->dims[g->rank - 1]}};
  return MF_OK;
}

/* Row by row over the channel axis, rows split over the session's threads:
 * each row is one vectorized loop. */
typedef void (*bias_add_fn)(const void *v, const void *b, void *y, int64_t r0, int64_t r1, int64_t c);
#define BIAS_KERNELS(code, T)                                                                       \
  static void bias_add_##code(const void *v_, const void *b, void *y_, int64_t r0, int64_t r1,      \
                              int64_t c) {                                                          \
    const T *v = v_;                                                                                \
    T *y = y_;                                                                                      \
    for (int64_t r = r0; r < r1; r++) run_sum_##code(y + r * c, v + r * c, b, c);                   \
  }
MF_FOR_FLOAT_TYPES(BIAS_KERNELS)
#define BIAS_ENTRY(code, T) [code] = bias_add_##code,
static const bias_add_fn bias_add_fns[MF_DTYPE_SLOTS] = {MF_FOR_FLOAT_TYPES(BIAS_ENTRY)};

typedef struct bias_add_job {
  bias_add_fn fn;
  const void *v, *b;
  void *y;
  int64_t c;
} bias_add_job;

static void bias_add_rows(void *arg, int64_t begin, int64_t end) {
  const bias_add_job *j = arg;
  j->fn(j->v, j->b, j->y, begin, end, j->c);
}

static mf_code bias_add_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *v = ctx->inputs[0], *b = ctx->inputs[1];
  mf_tensor *y = ctx->outputs[0];
  int64_t c = v->dims[v->rank - 1], rows = c ? v->size / c : 0;
  bias_add_job j = {bias_add_fns[v->dtype], v->data, b->data, y->data, c};
  mf_parallel_for(ctx, rows, c, bias_add_rows, &j);
  return MF_OK;
}

/* In NHWC, the only layout here, BiasAdd is Add with the bias broadcast
 * along the last axis, element for element: fused as Add's loop. */
static bool bias_add_element_loop(const mf_attrs *attrs, mf_dtype t, mf_element_loop *loop) {
  const mf_op_def *add = mf_registry_lookup("Add");
  return (unsigned)t < MF_DTYPE_SLOTS && (FLOAT_TYPES >> t & 1u) && add && add->element_loop(attrs, t, loop);
}

/* BiasAddGrad sums the rows: Sum over every axis but the last. */
static mf_code bias_add_grad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *g = ctx->inputs[0];
  bool mask[MF_MAX_RANK];
  for (int d = 0; d < g->rank; d++) mask[d] = d < g->rank - 1;
  return mf_reduce_sum(ctx, g, mask, ctx->outputs[0]);
}

static mf_code bias_add_rule(mf_grad_ctx *gc) {
  gc->input_grads[0] = gc->grads[0];
  gc->input_grads[1] = mf_grad_rebuild(gc, "BiasAddGrad", &gc->grads[0], 1);
  return gc->status->code;
}

/* BiasAddGrad sums over every axis but the last: its gradient spreads gg back. */
static mf_code bias_add_grad_rule(mf_grad_ctx *gc) {
  mf_output shape = mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0));
  gc->input_grads[0] = mf_grad_op2(gc, "BroadcastTo", gc->grads[0], shape);
  return gc->status->code;
}

/* ---------- windows: attributes and geometry ---------- */

/* A window op's attributes: window size (pools; convolutions take it from the
 * filter), strides, dilations (convolutions) and padding. */
typedef struct window {
  int64_t ksize[2], stride[2], dil[2];
  bool same, nchw; /* nchw: the depthwise ops' other layout */
} window;

/* Reads a 4-list attribute {1, h, w, 1} (NHWC; {1, 1, h, w} for NCHW) into out[0..1]. */
static mf_code window_ints(const char *op, const mf_attrs *attrs, const char *name, bool required, bool nchw,
                           int64_t out[2], mf_status *s) {
  const char *form = nchw ? "{1, 1, height, width} (NCHW)" : "{1, height, width, 1} (NHWC)";
  const int64_t *v;
  int n = mf_attr_ints(attrs, name, &v);
  out[0] = out[1] = 1;
  if (n < 0) {
    if (!required) return MF_OK;
    return MF_INVALID(s, "%s: needs the attribute '%s', 4 integers %s", op, name, form);
  }
  if (n != 4) return MF_INVALID(s, "%s: %s must have 4 elements %s, got %d", op, name, form, n);
  const int hi = nchw ? 2 : 1, wi = hi + 1, ci = nchw ? 1 : 3;
  if (v[0] != 1 || v[ci] != 1)
    return MF_INVALID(s,
                      "%s: %s is {%lld, %lld, %lld, %lld}, but windows over the batch and depth dimensions "
                      "are not supported: they must be 1, as in %s",
                      op, name, (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3], form);
  /* The bound keeps the window arithmetic far from int64 overflow. */
  if (v[hi] < 1 || v[wi] < 1 || v[hi] > INT32_MAX || v[wi] > INT32_MAX)
    return MF_INVALID(s, "%s: %s must be positive (and below 2^31), got {%lld, %lld, %lld, %lld}", op, name,
                      (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3]);
  out[0] = v[hi];
  out[1] = v[wi];
  return MF_OK;
}

/* The window of a pool or convolution (NHWC only); depthwise ops read NCHW too. */
static mf_code read_window_format(const char *op, const mf_attrs *attrs, bool pool, bool nchw_ok, window *w,
                                  mf_status *s) {
  const mf_attr *f = mf_attrs_find(attrs, "data_format", MF_ATTR_STRING);
  w->nchw = nchw_ok && f && strcmp(f->v.s, "NCHW") == 0;
  if (nchw_ok && f && !w->nchw && strcmp(f->v.s, "NHWC") != 0)
    return MF_INVALID(s, "%s: data_format must be \"NHWC\" or \"NCHW\", got \"%s\"", op, f->v.s);
  if ((!nchw_ok && check_data_format(op, attrs, s)) ||
      window_ints(op, attrs, "strides", true, w->nchw, w->stride, s) ||
      window_ints(op, attrs, pool ? "ksize" : "dilations", pool, w->nchw, pool ? w->ksize : w->dil, s))
    return s->code;
  if (pool) w->dil[0] = w->dil[1] = 1;
  const mf_attr *p = mf_attrs_find(attrs, "padding", MF_ATTR_STRING);
  if (!p) return MF_INVALID(s, "%s: needs the attribute 'padding', \"SAME\" or \"VALID\"", op);
  if (strcmp(p->v.s, "SAME") != 0 && strcmp(p->v.s, "VALID") != 0)
    return MF_INVALID(s, "%s: padding must be \"SAME\" or \"VALID\", got \"%s\"", op, p->v.s);
  w->same = p->v.s[0] == 'S';
  return MF_OK;
}

static mf_code read_window(const char *op, const mf_attrs *attrs, bool pool, window *w, mf_status *s) {
  return read_window_format(op, attrs, pool, false, w, s);
}

typedef mf_window_geom geom;

/* TensorFlow's windowed output size for one spatial dim: VALID keeps the
 * windows inside the input, (in - eff + stride) / stride of them, and, as
 * TensorFlow's shape function (in - eff, a "negative dimension"), refuses an
 * input smaller than one window rather than give an empty output; SAME gives
 * ceil(in / stride) and pads (out - 1) * stride + eff - in, the smaller half
 * before (so an odd total pads one more after). eff is the dilated window. */
static mf_code window_dim(const char *op, const char *dim, int64_t in, int64_t k, int64_t stride, int64_t dil,
                          bool same, int64_t *out, int64_t *pad, mf_status *s) {
  *out = -1;
  *pad = 0;
  if (in < 0 || k < 0) return MF_OK;
  int64_t eff = (k - 1) * dil + 1;
  if (same) {
    *out = (in + stride - 1) / stride;
    int64_t need = (*out - 1) * stride + eff - in;
    *pad = need > 0 ? need / 2 : 0;
    return MF_OK;
  }
  if (in < eff) {
    *out = -1;
    return MF_INVALID(s,
                      "Negative dimension size caused by subtracting %lld from %lld for '{{node %s}}': the window's "
                      "%s is %lld (%lld with dilation %lld) but the input's is %lld; with padding \"VALID\" the "
                      "input must be at least as large as the window (use padding \"SAME\" or a larger input)",
                      (long long)eff, (long long)in, op, dim, (long long)eff, (long long)k, (long long)dil,
                      (long long)in);
  }
  *out = (in - eff + stride) / stride;
  return MF_OK;
}

/* The geometry of a window op over an input of dims `in` (NHWC, -1 unknown). */
static mf_code make_geom(const char *op, const window *w, const int64_t in[4], int64_t kh, int64_t kw,
                         int64_t oc, geom *g, mf_status *s) {
  *g = (geom){.n = in[0], .h = in[1], .w = in[2], .c = in[3], .kh = kh, .kw = kw, .oc = oc,
              .sh = w->stride[0], .sw = w->stride[1], .dh = w->dil[0], .dw = w->dil[1]};
  if (window_dim(op, "height", g->h, kh, g->sh, g->dh, w->same, &g->oh, &g->pt, s)) return s->code;
  return window_dim(op, "width", g->w, kw, g->sw, g->dw, w->same, &g->ow, &g->pl, s);
}

static mf_shape shape4(int64_t a, int64_t b, int64_t c, int64_t d) {
  return (mf_shape){.rank = 4, .dims = {a, b, c, d}};
}
static void dims_of(const mf_tensor *t, int64_t d[4]) { memcpy(d, t->dims, 4 * sizeof *d); }

/* The dims of a rank-4 static shape (all -1 when the rank is unknown). */
static mf_code rank4(mf_infer_ctx *ic, const mf_shape *sh, const char *what, const char *layout, int64_t d[4]) {
  if (sh->rank >= 0 && sh->rank != 4) {
    char buf[160];
    return MF_INVALID(ic->status, "%s: %s must be 4-D %s, got shape %s (rank %d)", ic->op_name, what, layout,
                      mf_shape_str(sh, buf, sizeof buf), sh->rank);
  }
  for (int i = 0; i < 4; i++) d[i] = sh->rank < 0 ? -1 : sh->dims[i];
  return MF_OK;
}
static const char *const NHWC = "[batch, height, width, channels]";
static const char *const HWIO = "[height, width, in_channels, out_channels]";

/* A shape given as a tensor (input_sizes, filter_sizes, orig_input_shape): an
 * int32 or int64 vector of 4 non-negative dims, as far as known. */
static mf_code sizes_input(mf_infer_ctx *ic, int i, const char *what, int64_t d[4]) {
  mf_dtype t = ic->in_dtypes[i];
  if (t != MF_INT32 && t != MF_INT64)
    return MF_INVALID(ic->status, "%s: %s must be an int32 or int64 vector, got dtype %s", ic->op_name, what,
                      mf_dtype_name(t));
  const mf_shape *s = &ic->in_shapes[i];
  if (s->rank >= 0 && (s->rank != 1 || (s->dims[0] >= 0 && s->dims[0] != 4))) {
    char buf[160];
    return MF_INVALID(ic->status, "%s: %s must be a vector of 4 dims, got shape %s", ic->op_name, what,
                      mf_shape_str(s, buf, sizeof buf));
  }
  mf_shape v = mf_infer_shape_value(ic, i);
  for (int k = 0; k < 4; k++) {
    d[k] = v.rank == 4 ? v.dims[k] : -1;
    if (d[k] < -1 || (ic->runtime && d[k] < 0))
      return MF_INVALID(ic->status, "%s: %s holds a negative dimension %lld", ic->op_name, what, (long long)d[k]);
  }
  return MF_OK;
}

/* Dimension a of one shape against b of another, where both are known. */
static bool dims_conflict(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }
static void fill_unknown(int64_t *a, int64_t b) { if (*a < 0) *a = b; }

/* "[1,3,3,1]" for dims with -1 unknown. */
static char *dims_str(const int64_t d[4], char *buf, size_t n) {
  mf_shape s = shape4(d[0], d[1], d[2], d[3]);
  return mf_shape_str(&s, buf, n);
}

/* Checks that a tensor of dims `got` (input `what`) matches the dims `want` the
 * window op computes from its input `in`. */
static mf_code check_dims(mf_infer_ctx *ic, const char *what, const int64_t got[4], const int64_t want[4],
                          const char *from, const int64_t in[4]) {
  for (int k = 0; k < 4; k++)
    if (dims_conflict(got[k], want[k])) {
      char a[160], b[160], c[160];
      return MF_INVALID(ic->status,
                        "%s: %s has shape %s, but %s of shape %s gives %s (check strides, padding and sizes)",
                        ic->op_name, what, dims_str(got, a, sizeof a), from, dims_str(in, b, sizeof b),
                        dims_str(want, c, sizeof c));
    }
  return MF_OK;
}

/* ---------- im2col scratch ----------
 * im2col blocks live in the run's scratch (mf_kernel_scratch), kept between
 * runs. Blocks cover whole output rows and are bounded so the scratch stays
 * small and cache-warm between im2col and gemm. */
enum { SCRATCH_BUDGET = 4 << 20 };

/* Output rows per im2col block: as many as fit the budget, at least one. */
static int64_t block_rows(int64_t k, size_t esize, int64_t m) {
  int64_t rows = (int64_t)(SCRATCH_BUDGET / ((size_t)k * esize));
  if (rows < 1) rows = 1;
  return rows < m ? rows : m;
}

/* ---------- convolution kernels ----------
 * Per dtype: im2col (gather patches of output rows [r0, r0 + rows) into col,
 * zeros for padding), col2im (add col back into dx, the transpose), and a
 * row-major gemm c = op(a) op(b) + beta c. A row of the window (ky fixed) with
 * dilation 1 fully inside the input is one contiguous run of kw * c values. */
typedef void (*im2col_fn)(const geom *g, const void *x, int64_t r0, int64_t rows, void *col);
typedef void (*col2im_fn)(const geom *g, const void *col, int64_t r0, int64_t rows, void *dx);
typedef void (*gemm_fn)(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                        const void *b, int64_t ldb, double beta, void *c, int64_t ldc);
typedef struct conv_impl {
  im2col_fn im2col;
  col2im_fn col2im;
  gemm_fn gemm;
} conv_impl;

/* Offset of pixel (iy, ix) of image n in an NHWC tensor. */
#define PIXEL(g, n, iy, ix) ((((n) * (g)->h + (iy)) * (g)->w + (ix)) * (g)->c)

/* im2col and col2im walk output rows alike: rows [r0, r0 + rows), each its
 * window rows (ky) in turn, col stepping a window row (kw * c values) at a
 * time, and (n, oy, ox) stepped like an odometer instead of divided out per
 * row. IMG is the pointer type into the image img. A window row with
 * dilation 1 fully inside the image is one SPAN(image run, col run, kw * c);
 * else each pixel is SPAN(pixel, col run, c), or GAP(col run, length) where
 * the window is outside the image (padding). */
#define WALK_WINDOWS(g, img, r0, rows, col, IMG, SPAN, GAP)                                         \
  const int64_t c = g->c, run = g->kw * c, plane = g->oh * g->ow;                                   \
  int64_t n = r0 / plane, oy = r0 % plane / g->ow, ox = r0 % g->ow;                                 \
  for (int64_t r = 0; r < rows; r++) {                                                              \
    IMG xn = img + n * g->h * g->w * c;                                                             \
    const int64_t y0 = oy * g->sh - g->pt, x0 = ox * g->sw - g->pl;                                 \
    for (int64_t ky = 0; ky < g->kh; ky++, col += run) {                                            \
      const int64_t iy = y0 + ky * g->dh;                                                           \
      if (iy < 0 || iy >= g->h) {                                                                   \
        GAP(col, run);                                                                              \
        continue;                                                                                   \
      }                                                                                             \
      IMG src = xn + iy * g->w * c;                                                                 \
      if (g->dw == 1 && x0 >= 0 && x0 + g->kw <= g->w) {                                            \
        SPAN(src + x0 * c, col, run);                                                               \
        continue;                                                                                   \
      }                                                                                             \
      for (int64_t kx = 0; kx < g->kw; kx++) {                                                      \
        const int64_t ix = x0 + kx * g->dw;                                                         \
        if (ix < 0 || ix >= g->w)                                                                   \
          GAP(col + kx * c, c);                                                                     \
        else                                                                                        \
          SPAN(src + ix * c, col + kx * c, c);                                                      \
      }                                                                                             \
    }                                                                                               \
    if (++ox == g->ow) {                                                                            \
      ox = 0;                                                                                       \
      if (++oy == g->oh) oy = 0, n++;                                                               \
    }                                                                                               \
  }


#define NO_GAP(col, len) ((void)0)

#define CONV_KERNELS(code, T)                                                                       \
  static inline void im2col_span_##code(const T *restrict img, T *restrict col, int64_t len) {      \
    run_copy_##code(col, img, len);                                                                 \
  }                                                                                                 \
  static inline void col2im_span_##code(T *restrict img, const T *restrict col, int64_t len) {      \
    run_add_##code(img, col, len);                                                                  \
  }                                                                                                 \
  static void im2col_##code(const geom *g, const void *x_, int64_t r0, int64_t rows, void *col_) {  \
    const T *restrict x = x_;                                                                       \
    T *restrict col = col_;                                                                         \
    WALK_WINDOWS(g, x, r0, rows, col, const T *, im2col_span_##code, run_zero_##code)               \
  }                                                                                                 \
  static void col2im_##code(const geom *g, const void *col_, int64_t r0, int64_t rows, void *dx_) { \
    const T *restrict col = col_;                                                                   \
    T *restrict dx = dx_;                                                                           \
    WALK_WINDOWS(g, dx, r0, rows, col, T *, col2im_span_##code, NO_GAP)                             \
  }                                                                                                 \
  static void gemm_##code(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,         \
                          int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) { \
    BLAS_GEMM(T)(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1, \
                 a, lda, b, ldb, (T)beta, c, ldc);                                                  \
  }
/* BLAS's gemm for float or double. */
#define BLAS_GEMM(T) _Generic((T)0, float: cblas_sgemm, double: cblas_dgemm)
MF_FOR_FLOAT_TYPES(CONV_KERNELS)
#define CONV_IMPL(code, T) [code] = {im2col_##code, col2im_##code, gemm_##code},
static const conv_impl conv_impls[MF_DTYPE_SLOTS] = {MF_FOR_FLOAT_TYPES(CONV_IMPL)};

/* ---------- Conv2D and its backprops ---------- */

/* The filter [kh, kw, in, out] against an input of `in_channels`. */
static mf_code check_filter(mf_infer_ctx *ic, int64_t in_channels, const int64_t f[4]) {
  char buf[160];
  if (f[0] == 0 || f[1] == 0)
    return MF_INVALID(ic->status, "%s: the filter's height and width must be at least 1, got filter shape %s",
                      ic->op_name, dims_str(f, buf, sizeof buf));
  if (dims_conflict(in_channels, f[2]))
    return MF_INVALID(ic->status,
                      "%s: the input has %lld channels but the filter %s expects %lld (filter shape %s)",
                      ic->op_name, (long long)in_channels, HWIO, (long long)f[2], dims_str(f, buf, sizeof buf));
  return MF_OK;
}

/* Shape inference of the three: input dims `in`, filter dims `f`, output
 * gradient dims `dy` (all -1 where unknown). Checks that they fit together and
 * fills dims one of them knows into the others. */
static mf_code conv_shapes(mf_infer_ctx *ic, int64_t in[4], int64_t f[4], const int64_t dy[4], geom *g) {
  window w;
  fill_unknown(&in[0], dy[0]);
  fill_unknown(&in[3], f[2]);
  fill_unknown(&f[2], in[3]);
  fill_unknown(&f[3], dy[3]);
  if (read_window(ic->op_name, ic->attrs, false, &w, ic->status) || check_filter(ic, in[3], f) ||
      make_geom(ic->op_name, &w, in, f[0], f[1], f[3], g, ic->status))
    return ic->status->code;
  const int64_t want[4] = {in[0], g->oh, g->ow, f[3]};
  return check_dims(ic, "out_backprop", dy, want, "a convolution of an input", in);
}

static const int64_t UNKNOWN4[4] = {-1, -1, -1, -1};

static mf_code conv2d_infer(mf_infer_ctx *ic) {
  int64_t in[4], f[4];
  geom g;
  if (mf_check_dtype(ic, 0, "input has", FLOAT_TYPES) || mf_check_same_dtype(ic, 0, "input", 1, "filter") ||
      rank4(ic, &ic->in_shapes[0], "input", NHWC, in) || rank4(ic, &ic->in_shapes[1], "filter", HWIO, f) ||
      conv_shapes(ic, in, f, UNKNOWN4, &g))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = shape4(in[0], g.oh, g.ow, f[3]);
  return MF_OK;
}

/* Conv2DBackpropInput(input_sizes, filter, out_backprop): the input's gradient. */
static mf_code conv2d_backprop_input_infer(mf_infer_ctx *ic) {
  int64_t in[4], f[4], dy[4];
  geom g;
  if (sizes_input(ic, 0, "input_sizes", in) || mf_check_dtype(ic, 1, "filter has", FLOAT_TYPES) ||
      mf_check_same_dtype(ic, 1, "filter", 2, "out_backprop") || rank4(ic, &ic->in_shapes[1], "filter", HWIO, f) ||
      rank4(ic, &ic->in_shapes[2], "out_backprop", NHWC, dy) || conv_shapes(ic, in, f, dy, &g))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[1];
  ic->out_shapes[0] = shape4(in[0], in[1], in[2], in[3]);
  return MF_OK;
}

/* Conv2DBackpropFilter(input, filter_sizes, out_backprop): the filter's gradient. */
static mf_code conv2d_backprop_filter_infer(mf_infer_ctx *ic) {
  int64_t in[4], f[4], dy[4];
  geom g;
  if (mf_check_dtype(ic, 0, "input has", FLOAT_TYPES) || mf_check_same_dtype(ic, 0, "input", 2, "out_backprop") ||
      rank4(ic, &ic->in_shapes[0], "input", NHWC, in) || sizes_input(ic, 1, "filter_sizes", f) ||
      rank4(ic, &ic->in_shapes[2], "out_backprop", NHWC, dy) || conv_shapes(ic, in, f, dy, &g))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = shape4(f[0], f[1], f[2], f[3]);
  return MF_OK;
}

/* What the three convolution kernels share: the geometry of a convolution of
 * an input of dims x with a filter of dims f, x's dtype's functions and size,
 * and the gemm sizes: m output pixels, k values of a window, oc channels out. */
typedef struct conv_plan {
  geom g;
  const conv_impl *im;
  size_t es;
  int64_t m, k, oc;
} conv_plan;

mf_code mf_conv_geom(mf_kernel_ctx *ctx, const mf_tensor *x, const mf_tensor *f, geom *g) {
  window w;
  int64_t xd[4], fd[4];
  dims_of(x, xd);
  dims_of(f, fd);
  if (read_window(ctx->op->name, ctx->attrs, false, &w, ctx->status)) return ctx->status->code;
  return make_geom(ctx->op->name, &w, xd, fd[0], fd[1], fd[3], g, ctx->status);
}

static mf_code conv_plan_of(mf_kernel_ctx *ctx, const mf_tensor *x, const mf_tensor *f, conv_plan *p) {
  if (mf_conv_geom(ctx, x, f, &p->g)) return ctx->status->code;
  p->im = &conv_impls[x->dtype];
  p->es = mf_dtype_size(x->dtype);
  p->m = p->g.n * p->g.oh * p->g.ow;
  p->k = p->g.kh * p->g.kw * p->g.c;
  p->oc = p->g.oc;
  return MF_OK;
}

/* Whether out is done without a gemm: empty, or an empty sum (zeros). */
static bool conv_trivial(mf_tensor *out, bool empty_sum, size_t es) {
  if (out->size == 0) return true;
  if (empty_sum) memset(out->data, 0, (size_t)out->size * es);
  return empty_sum;
}

/* The im2col scratch of *rows output rows (a block). */
static char *conv_scratch(mf_kernel_ctx *ctx, const conv_plan *p, int64_t *rows) {
  *rows = block_rows(p->k, p->es, p->m);
  return mf_kernel_scratch(ctx, (size_t)(*rows * p->k) * p->es);
}

/* im2col of output rows [r0, r0 + rows) into col, the rows split over the
 * session's threads (each writes its own rows of col). */
typedef struct im2col_job {
  const conv_plan *p;
  const void *x;
  int64_t r0;
  char *col;
} im2col_job;

static void im2col_rows(void *arg, int64_t begin, int64_t end) {
  const im2col_job *j = arg;
  j->p->im->im2col(&j->p->g, j->x, j->r0 + begin, end - begin, j->col + (size_t)(begin * j->p->k) * j->p->es);
}

static void im2col_run(mf_kernel_ctx *ctx, const conv_plan *p, const void *x, int64_t r0, int64_t rows, char *col) {
  im2col_job j = {p, x, r0, col};
  mf_parallel_for(ctx, rows, p->k, im2col_rows, &j);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* col2im of output rows [r0, r0 + rows) into dx, split over the session's
 * threads. The output rows of an image go in stripes of `stripe` rows, tall
 * enough that the input rows reached by stripes s and s + 2 never meet; the
 * even stripes run first, side by side, then the odd ones. A stripe is added
 * by one thread in row order, so each input element gets its terms in one
 * order fixed by the shape, whatever the thread count. */
typedef struct col2im_job {
  const conv_plan *p;
  const char *col;
  int64_t r0, rows, stripe, per_image, first; /* first: the block's first stripe, counted over images */
  int parity;
  void *dx;
} col2im_job;

static void col2im_stripes(void *arg, int64_t begin, int64_t end) {
  const col2im_job *j = arg;
  const geom *g = &j->p->g;
  for (int64_t it = begin; it < end; it++) {
    const int64_t s = j->first + it, n = s / j->per_image, in_image = s % j->per_image;
    if (in_image % 2 != j->parity) continue;
    int64_t a = (n * g->oh + in_image * j->stripe) * g->ow;
    int64_t b = (n * g->oh + min64((in_image + 1) * j->stripe, g->oh)) * g->ow;
    if (a < j->r0) a = j->r0;
    if (b > j->r0 + j->rows) b = j->r0 + j->rows;
    if (a < b) j->p->im->col2im(g, j->col + (size_t)((a - j->r0) * j->p->k) * j->p->es, a, b - a, j->dx);
  }
}

static void col2im_run(mf_kernel_ctx *ctx, const conv_plan *p, const void *col, int64_t r0, int64_t rows, void *dx) {
  const geom *g = &p->g;
  const int64_t stripe = (g->kh - 1) * g->dh / g->sh + 1, per_image = (g->oh + stripe - 1) / stripe;
  /* The stripe of output row r (pixel index): its image's stripes before it. */
  const int64_t first = r0 / g->ow / g->oh * per_image + r0 / g->ow % g->oh / stripe;
  const int64_t last = (r0 + rows - 1) / g->ow / g->oh * per_image + (r0 + rows - 1) / g->ow % g->oh / stripe;
  col2im_job j = {p, col, r0, rows, stripe, per_image, first, 0, dx};
  for (j.parity = 0; j.parity < 2; j.parity++)
    mf_parallel_for(ctx, last - first + 1, stripe * g->ow * p->k / 2, col2im_stripes, &j);
}

/* A 1x1 filter with stride 1 reads the input as it is: [n*h*w, c] is im2col. */
static bool pointwise(const geom *g) { return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1; }


/* y [m, oc] = col [m, k] filter [k, oc], block by block. */
static mf_code conv2d_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *f = ctx->inputs[1];
  mf_tensor *y = ctx->outputs[0];
  conv_plan p;
  if (conv_plan_of(ctx, x, f, &p)) return ctx->status->code;
  const int64_t m = p.m, k = p.k, oc = p.oc;
  if (conv_trivial(y, k == 0, p.es)) return MF_OK;  /* k == 0: no input channels, an empty sum */
  if (pointwise(&p.g)) {
    p.im->gemm(false, false, m, oc, k, x->data, k, f->data, oc, 0, y->data, oc);
    return MF_OK;
  }
  int64_t rows;
  char *col = conv_scratch(ctx, &p, &rows);
  if (!col) return ctx->status->code;
  for (int64_t r0 = 0; r0 < m; r0 += rows) {
    const int64_t mb = min64(rows, m - r0);
    im2col_run(ctx, &p, x->data, r0, mb, col);
    p.im->gemm(false, false, mb, oc, k, col, k, f->data, oc, 0, (char *)y->data + (size_t)(r0 * oc) * p.es, oc);
  }
  return MF_OK;
}

/* dx = col2im(dy [m, oc] filter^T [oc, k]), block by block. */
static mf_code conv2d_backprop_input_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *f = ctx->inputs[1], *dy = ctx->inputs[2];
  mf_tensor *dx = ctx->outputs[0];
  conv_plan p;
  if (conv_plan_of(ctx, dx, f, &p)) return ctx->status->code;
  const int64_t m = p.m, k = p.k, oc = p.oc;
  if (conv_trivial(dx, m == 0 || oc == 0, p.es)) return MF_OK;  /* nothing flows back: an empty sum */
  if (pointwise(&p.g)) {
    p.im->gemm(false, true, m, k, oc, dy->data, oc, f->data, oc, 0, dx->data, k);
    return MF_OK;
  }
  int64_t rows;
  char *col = conv_scratch(ctx, &p, &rows);
  if (!col) return ctx->status->code;
  memset(dx->data, 0, (size_t)dx->size * p.es);
  for (int64_t r0 = 0; r0 < m; r0 += rows) {
    const int64_t mb = min64(rows, m - r0);
    p.im->gemm(false, true, mb, k, oc, (const char *)dy->data + (size_t)(r0 * oc) * p.es, oc, f->data, oc, 0, col,
               k);
    col2im_run(ctx, &p, col, r0, mb, dx->data);
  }
  return MF_OK;
}

/* df [k, oc] = sum over blocks of col^T [k, m] dy [m, oc]. */
static mf_code conv2d_backprop_filter_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *dy = ctx->inputs[2];
  mf_tensor *df = ctx->outputs[0];
  conv_plan p;
  if (conv_plan_of(ctx, x, df, &p)) return ctx->status->code;
  const int64_t m = p.m, k = p.k, oc = p.oc;
  if (conv_trivial(df, m == 0, p.es)) return MF_OK;  /* no output pixels: an empty sum */
  if (pointwise(&p.g)) {
    p.im->gemm(true, false, k, oc, m, x->data, k, dy->data, oc, 0, df->data, oc);
    return MF_OK;
  }
  int64_t rows;
  char *col = conv_scratch(ctx, &p, &rows);
  if (!col) return ctx->status->code;
  for (int64_t r0 = 0; r0 < m; r0 += rows) {
    const int64_t mb = min64(rows, m - r0);
    im2col_run(ctx, &p, x->data, r0, mb, col);
    p.im->gemm(true, false, k, oc, mb, col, k, (const char *)dy->data + (size_t)(r0 * oc) * p.es, oc, r0 ? 1 : 0,
               df->data, oc);
  }
  return MF_OK;
}

#define SHAPE(t) mf_grad_op1(gc, "Shape", t)

/* TensorFlow's rules: a convolution is bilinear in (input, filter), and each
 * backprop is bilinear in its two tensor inputs, so every gradient is one of
 * the three ops with the same window attributes. Conv2D's and the depthwise
 * convolution's trios follow the same rules. */
typedef struct conv_ops { const char *forward, *backprop_input, *backprop_filter; } conv_ops;
static const conv_ops CONV2D_OPS = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"};
static const conv_ops DEPTHWISE_OPS = {"DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                                       "DepthwiseConv2dNativeBackpropFilter"};

static mf_code conv_forward_rule(mf_grad_ctx *gc, const conv_ops *o) {
  const mf_output x = mf_op_in(gc->op, 0), f = mf_op_in(gc->op, 1), dy = gc->grads[0];
  gc->input_grads[0] = mf_grad_rebuild(gc, o->backprop_input, (mf_output[]){SHAPE(x), f, dy}, 3);
  gc->input_grads[1] = mf_grad_rebuild(gc, o->backprop_filter, (mf_output[]){x, SHAPE(f), dy}, 3);
  return gc->status->code;
}

static mf_code conv_backprop_input_rule(mf_grad_ctx *gc, const conv_ops *o) {
  const mf_output f = mf_op_in(gc->op, 1), dy = mf_op_in(gc->op, 2), gg = gc->grads[0];
  gc->input_grads[1] = mf_grad_rebuild(gc, o->backprop_filter, (mf_output[]){gg, SHAPE(f), dy}, 3);
  gc->input_grads[2] = mf_grad_rebuild(gc, o->forward, (mf_output[]){gg, f}, 2);
  return gc->status->code;
}

static mf_code conv_backprop_filter_rule(mf_grad_ctx *gc, const conv_ops *o) {
  const mf_output x = mf_op_in(gc->op, 0), dy = mf_op_in(gc->op, 2), gg = gc->grads[0];
  gc->input_grads[0] = mf_grad_rebuild(gc, o->backprop_input, (mf_output[]){SHAPE(x), gg, dy}, 3);
  gc->input_grads[2] = mf_grad_rebuild(gc, o->forward, (mf_output[]){x, gg}, 2);
  return gc->status->code;
}

#define CONV_RULES(prefix, ops)                                                                              \
  static mf_code prefix##_rule(mf_grad_ctx *gc) { return conv_forward_rule(gc, &ops); }                      \
  static mf_code prefix##_backprop_input_rule(mf_grad_ctx *gc) { return conv_backprop_input_rule(gc, &ops); } \
  static mf_code prefix##_backprop_filter_rule(mf_grad_ctx *gc) { return conv_backprop_filter_rule(gc, &ops); }
CONV_RULES(conv2d, CONV2D_OPS)
CONV_RULES(depthwise, DEPTHWISE_OPS)

/* ---------- DepthwiseConv2dNative and its backprops ----------
 * Input [n, h, w, c] (or NCHW), filter [kh, kw, c, m]: output channel
 * ci * m + q is input channel ci convolved with filter[:, :, ci, q], as
 * TensorFlow's. Direct loops, one window tap at a time along the channels of
 * a pixel (a vector loop when m is 1): the forward op by output row, the
 * input gradient by input row (gathering the output pixels whose windows
 * reach it), the filter gradient by window tap (summing over every output
 * pixel in order), so results never depend on the thread count. NCHW values
 * are transposed to NHWC in the op's scratch and back. */
static const char *const NCHW = "[batch, channels, height, width]";
static const char *const HWCM = "[height, width, in_channels, channel_multiplier]";

/* Dims d of a layout in NHWC order, and back. */
static void to_nhwc(const int64_t d[4], bool nchw, int64_t out[4]) {
  const int64_t t[4] = {d[0], nchw ? d[2] : d[1], nchw ? d[3] : d[2], nchw ? d[1] : d[3]};
  memcpy(out, t, sizeof t);
}
static void from_nhwc(const int64_t d[4], bool nchw, int64_t out[4]) {
  const int64_t t[4] = {d[0], nchw ? d[3] : d[1], nchw ? d[1] : d[2], nchw ? d[2] : d[3]};
  memcpy(out, t, sizeof t);
}

/* An image-shaped value of the op (input, out_backprop) as NHWC dims. */
static mf_code image_dims(mf_infer_ctx *ic, const window *w, int i, const char *what, int64_t d[4]) {
  int64_t raw[4];
  if (rank4(ic, &ic->in_shapes[i], what, w->nchw ? NCHW : NHWC, raw)) return ic->status->code;
  to_nhwc(raw, w->nchw, d);
  return MF_OK;
}

/* Shape inference of the three, dims in NHWC order (-1 unknown): checks that
 * input `in`, filter `f` and output gradient `dy` fit together and fills dims
 * one knows into the others. */
static mf_code depthwise_shapes(mf_infer_ctx *ic, const window *w, int64_t in[4], int64_t f[4], const int64_t dy[4],
                                geom *g) {
  char a[160], b[160];
  int64_t in_layout[4];
  fill_unknown(&in[0], dy[0]);
  fill_unknown(&in[3], f[2]);
  fill_unknown(&f[2], in[3]);
  if (f[3] < 0 && dy[3] >= 0 && in[3] > 0 && dy[3] % in[3] == 0) f[3] = dy[3] / in[3];
  if (f[0] == 0 || f[1] == 0)
    return MF_INVALID(ic->status, "%s: the filter's height and width must be at least 1, got filter shape %s",
                      ic->op_name, dims_str(f, a, sizeof a));
  from_nhwc(in, w->nchw, in_layout);
  if (dims_conflict(in[3], f[2]))
    return MF_INVALID(ic->status,
                      "%s: input and filter must have the same depth: the input has %lld channels but the filter "
                      "%s has %lld (input shape %s, filter shape %s)",
                      ic->op_name, (long long)in[3], HWCM, (long long)f[2], dims_str(in_layout, b, sizeof b),
                      dims_str(f, a, sizeof a));
  const int64_t oc = in[3] >= 0 && f[3] >= 0 ? in[3] * f[3] : -1;
  if (make_geom(ic->op_name, w, in, f[0], f[1], oc, g, ic->status)) return ic->status->code;
  int64_t want[4], got[4];
  from_nhwc((const int64_t[4]){in[0], g->oh, g->ow, oc}, w->nchw, want);
  from_nhwc(dy, w->nchw, got);
  return check_dims(ic, "out_backprop", got, want, "a depthwise convolution of an input", in_layout);
}

static mf_shape image_shape(const int64_t nhwc[4], bool nchw) {
  int64_t d[4];
  from_nhwc(nhwc, nchw, d);
  return shape4(d[0], d[1], d[2], d[3]);
}

static mf_code depthwise_infer(mf_infer_ctx *ic) {
  window w;
  int64_t in[4], f[4];
  geom g;
  if (mf_check_dtype(ic, 0, "input has", FLOAT_TYPES) || mf_check_same_dtype(ic, 0, "input", 1, "filter") ||
      read_window_format(ic->op_name, ic->attrs, false, true, &w, ic->status) ||
      image_dims(ic, &w, 0, "input", in) || rank4(ic, &ic->in_shapes[1], "filter", HWCM, f) ||
      depthwise_shapes(ic, &w, in, f, UNKNOWN4, &g))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = image_shape((const int64_t[4]){in[0], g.oh, g.ow, g.oc}, w.nchw);
  return MF_OK;
}

/* DepthwiseConv2dNativeBackpropInput(input_sizes, filter, out_backprop). */
static mf_code depthwise_backprop_input_infer(mf_infer_ctx *ic) {
  window w;
  int64_t sizes[4], in[4], f[4], dy[4];
  geom g;
  if (mf_check_dtype(ic, 1, "filter has", FLOAT_TYPES) || mf_check_same_dtype(ic, 1, "filter", 2, "out_backprop") ||
      read_window_format(ic->op_name, ic->attrs, false, true, &w, ic->status) ||
      sizes_input(ic, 0, "input_sizes", sizes) || rank4(ic, &ic->in_shapes[1], "filter", HWCM, f) ||
      image_dims(ic, &w, 2, "out_backprop", dy))
    return ic->status->code;
  to_nhwc(sizes, w.nchw, in);
  if (depthwise_shapes(ic, &w, in, f, dy, &g)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[1];
  ic->out_shapes[0] = image_shape(in, w.nchw);
  return MF_OK;
}

/* DepthwiseConv2dNativeBackpropFilter(input, filter_sizes, out_backprop). */
static mf_code depthwise_backprop_filter_infer(mf_infer_ctx *ic) {
  window w;
  int64_t in[4], f[4], dy[4];
  geom g;
  if (mf_check_dtype(ic, 0, "input has", FLOAT_TYPES) || mf_check_same_dtype(ic, 0, "input", 2, "out_backprop") ||
      read_window_format(ic->op_name, ic->attrs, false, true, &w, ic->status) ||
      image_dims(ic, &w, 0, "input", in) || sizes_input(ic, 1, "filter_sizes", f) ||
      image_dims(ic, &w, 2, "out_backprop", dy) || depthwise_shapes(ic, &w, in, f, dy, &g))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = shape4(f[0], f[1], f[2], f[3]);
  return MF_OK;
}

/* Every depthwise kernel as f(geometry, a, b, out, items [i0, i1)): forward
 * (x, filter, y) by output row, input gradient (dy, filter, dx) by input row,
 * filter gradient (x, dy, df) by window tap. */
typedef void (*depthwise_fn)(const geom *g, const void *a, const void *b, void *out, int64_t i0, int64_t i1);

/* The window taps of output pixel (oy, ox) inside the input: ky, kx, iy, ix. */
#define FOR_EACH_TAP(g, oy, ox, ...)                                                                \
  for (int64_t ky = 0; ky < (g)->kh; ky++) {                                                        \
    const int64_t iy = (oy) * (g)->sh - (g)->pt + ky * (g)->dh;                                     \
    if (iy < 0 || iy >= (g)->h) continue;                                                           \
    for (int64_t kx = 0; kx < (g)->kw; kx++) {                                                      \
      const int64_t ix = (ox) * (g)->sw - (g)->pl + kx * (g)->dw;                                   \
      if (ix < 0 || ix >= (g)->w) continue;                                                         \
      __VA_ARGS__                                                                                   \
    }                                                                                               \
  }

/* The output pixel (oy, ox) of tap (ky, kx) reading input pixel (iy, ix), if any. */
static bool tap_source(int64_t i, int64_t k, int64_t pad, int64_t dil, int64_t stride, int64_t out_size,
                       int64_t *o) {
  const int64_t t = i + pad - k * dil;
  if (t < 0 || t % stride) return false;
  *o = t / stride;
  return *o < out_size;
}

#define DEPTHWISE_KERNELS(code, T)                                                                  \
  /* out[ci * m + q] += x[ci] * f[ci * m + q] over the c channels of a pixel. */                    \
  static inline void tap_##code(T *restrict out, const T *restrict x, const T *restrict f, int64_t c, \
                                int64_t m) {                                                        \
    if (m == 1) {                                                                                   \
      MF_ELEMENTS(c, i, out[i] += x[i] * f[i];);                                                    \
      return;                                                                                       \
    }                                                                                               \
    for (int64_t ci = 0; ci < c; ci++) {                                                            \
      const T v = x[ci];                                                                            \
      T *restrict o = out + ci * m;                                                                 \
      const T *restrict fc = f + ci * m;                                                            \
      MF_ELEMENTS(m, q, o[q] += v * fc[q];);                                                        \
    }                                                                                               \
  }                                                                                                 \
  /* dx[ci] += sum over q of dy[ci * m + q] * f[ci * m + q]. */                                     \
  static inline void tap_back_##code(T *restrict dx, const T *restrict dy, const T *restrict f, int64_t c, \
                                     int64_t m) {                                                   \
    if (m == 1) {                                                                                   \
      MF_ELEMENTS(c, i, dx[i] += dy[i] * f[i];);                                                    \
      return;                                                                                       \
    }                                                                                               \
    for (int64_t ci = 0; ci < c; ci++) {                                                            \
      T sum = 0;                                                                                    \
      for (int64_t q = 0; q < m; q++) sum += dy[ci * m + q] * f[ci * m + q];                        \
      dx[ci] += sum;                                                                                \
    }                                                                                               \
  }                                                                                                 \
  static void depthwise_##code(const geom *g, const void *x_, const void *f_, void *y_, int64_t i0, int64_t i1) { \
    const T *x = x_, *f = f_;                                                                       \
    T *y = y_;                                                                                      \
    const int64_t c = g->c, oc = g->oc, m = oc / c;                                                 \
    for (int64_t r = i0; r < i1; r++) {                                                             \
      const int64_t n = r / g->oh, oy = r % g->oh;                                                  \
      for (int64_t ox = 0; ox < g->ow; ox++) {                                                      \
        T *out = y + (r * g->ow + ox) * oc;                                                         \
        run_zero_##code(out, oc);                                                                   \
        FOR_EACH_TAP(g, oy, ox, tap_##code(out, x + PIXEL(g, n, iy, ix), f + (ky * g->kw + kx) * oc, c, m);) \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  static void depthwise_input_##code(const geom *g, const void *dy_, const void *f_, void *dx_, int64_t i0, \
                                     int64_t i1) {                                                  \
    const T *dy = dy_, *f = f_;                                                                     \
    T *dx = dx_;                                                                                    \
    const int64_t c = g->c, oc = g->oc, m = oc / c;                                                 \
    for (int64_t r = i0; r < i1; r++) {                                                             \
      const int64_t n = r / g->h, iy = r % g->h;                                                    \
      for (int64_t ix = 0; ix < g->w; ix++) {                                                       \
        T *out = dx + PIXEL(g, n, iy, ix);                                                          \
        run_zero_##code(out, c);                                                                    \
        for (int64_t ky = 0, oy; ky < g->kh; ky++) {                                                \
          if (!tap_source(iy, ky, g->pt, g->dh, g->sh, g->oh, &oy)) continue;                       \
          for (int64_t kx = 0, ox; kx < g->kw; kx++)                                                \
            if (tap_source(ix, kx, g->pl, g->dw, g->sw, g->ow, &ox))                                \
              tap_back_##code(out, dy + ((n * g->oh + oy) * g->ow + ox) * oc, f + (ky * g->kw + kx) * oc, c, m); \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  static void depthwise_filter_##code(const geom *g, const void *x_, const void *dy_, void *df_, int64_t i0, \
                                      int64_t i1) {                                                 \
    const T *x = x_, *dy = dy_;                                                                     \
    T *df = df_;                                                                                    \
    const int64_t c = g->c, oc = g->oc, m = oc / c;                                                 \
    for (int64_t t = i0; t < i1; t++) {                                                             \
      const int64_t ky = t / g->kw, kx = t % g->kw;                                                 \
      T *out = df + t * oc;                                                                         \
      run_zero_##code(out, oc);                                                                     \
      for (int64_t n = 0; n < g->n; n++)                                                            \
        for (int64_t oy = 0; oy < g->oh; oy++) {                                                    \
          const int64_t iy = oy * g->sh - g->pt + ky * g->dh;                                       \
          if (iy < 0 || iy >= g->h) continue;                                                       \
          for (int64_t ox = 0; ox < g->ow; ox++) {                                                  \
            const int64_t ix = ox * g->sw - g->pl + kx * g->dw;                                     \
            if (ix >= 0 && ix < g->w)                                                               \
              tap_##code(out, x + PIXEL(g, n, iy, ix), dy + ((n * g->oh + oy) * g->ow + ox) * oc, c, m); \
          }                                                                                         \
        }                                                                                           \
    }                                                                                               \
  }                                                                                                 \
  /* Each of images [n0, n1) from [a][b] to [b][a] (NCHW <-> NHWC). */                              \
  static void swap_layout_##code(const void *src_, void *dst_, int64_t n0, int64_t n1, int64_t a, int64_t b) { \
    const T *src = src_;                                                                            \
    T *dst = dst_;                                                                                  \
    for (int64_t n = n0; n < n1; n++)                                                               \
      for (int64_t i = 0; i < a; i++)                                                               \
        for (int64_t j = 0; j < b; j++) dst[(n * b + j) * a + i] = src[(n * a + i) * b + j];        \
  }
MF_FOR_FLOAT_TYPES(DEPTHWISE_KERNELS)

typedef void (*swap_layout_fn)(const void *src, void *dst, int64_t n0, int64_t n1, int64_t a, int64_t b);
typedef struct depthwise_impl {
  depthwise_fn fn[3]; /* by depthwise_kind */
  swap_layout_fn swap;
} depthwise_impl;
enum depthwise_kind { DW_FORWARD, DW_INPUT, DW_FILTER };
#define DEPTHWISE_IMPL(code, T) \
  [code] = {{depthwise_##code, depthwise_input_##code, depthwise_filter_##code}, swap_layout_##code},
static const depthwise_impl depthwise_impls[MF_DTYPE_SLOTS] = {MF_FOR_FLOAT_TYPES(DEPTHWISE_IMPL)};

typedef struct depthwise_job {
  depthwise_fn fn;
  const geom *g;
  const void *a, *b;
  void *out;
} depthwise_job;

static void depthwise_items(void *arg, int64_t begin, int64_t end) {
  const depthwise_job *j = arg;
  j->fn(j->g, j->a, j->b, j->out, begin, end);
}

typedef struct swap_job {
  swap_layout_fn fn;
  const void *src;
  void *dst;
  int64_t a, b;
} swap_job;

static void swap_images(void *arg, int64_t begin, int64_t end) {
  const swap_job *j = arg;
  j->fn(j->src, j->dst, begin, end, j->a, j->b);
}

/* src [n][a][b] into dst [n][b][a], by image over the session's threads. */
static void swap_layout(mf_kernel_ctx *ctx, const depthwise_impl *im, const void *src, void *dst, int64_t n,
                        int64_t a, int64_t b) {
  swap_job j = {im->swap, src, dst, a, b};
  mf_parallel_for(ctx, n, a * b, swap_images, &j);
}

/* Runs one depthwise kernel. `image` is the image-shaped tensor the geometry
 * comes from (the input, or its gradient), `filter` the filter-shaped one;
 * a, b and out are the kernel's operands: a is image-shaped, b is too for the
 * filter gradient, out is except for it. NCHW operands are transposed to
 * NHWC in the scratch, an NCHW result back. */
static mf_code depthwise_run(mf_kernel_ctx *ctx, enum depthwise_kind kind, const mf_tensor *image,
                             const mf_tensor *filter, const mf_tensor *a, const mf_tensor *b, mf_tensor *out) {
  window w;
  geom g;
  int64_t in[4];
  if (read_window_format(ctx->op->name, ctx->attrs, false, true, &w, ctx->status)) return ctx->status->code;
  to_nhwc(image->dims, w.nchw, in);
  if (make_geom(ctx->op->name, &w, in, filter->dims[0], filter->dims[1], in[3] * filter->dims[3], &g, ctx->status))
    return ctx->status->code;
  if (out->size == 0) return MF_OK;  /* no channels, or an empty image */
  const depthwise_impl *im = &depthwise_impls[a->dtype];
  const bool b_image = kind == DW_FILTER, out_image = !b_image;
  const void *ad = a->data, *bd = b->data;
  void *od = out->data;
  const size_t es = mf_dtype_size(a->dtype);
    const int64_t plane = g.h * g.w, out_plane = g.oh * g.ow;
  if (w.nchw) {
    const mf_tensor *second = b_image ? b : out;
    char *scratch = mf_kernel_scratch(ctx, (size_t)(a->size + second->size) * es);
    if (!scratch) return ctx->status->code;
    void *a_nhwc = scratch, *second_nhwc = scratch + (size_t)a->size * es;
    /* a is the input (x) or out_backprop (dy): its channels and plane. */
    const bool a_is_input = kind != DW_INPUT;
    swap_layout(ctx, im, ad, a_nhwc, g.n, a_is_input ? g.c : g.oc, a_is_input ? plane : out_plane);
    if (b_image) swap_layout(ctx, im, bd, second_nhwc, g.n, g.oc, out_plane), bd = second_nhwc;
    ad = a_nhwc;
    if (out_image) od = second_nhwc;
  }
  depthwise_job j = {im->fn[kind], &g, ad, bd, od};
  const int64_t taps = g.kh * g.kw;
  if (kind == DW_FORWARD) mf_parallel_for(ctx, g.n * g.oh, g.ow * g.oc * taps, depthwise_items, &j);
  if (kind == DW_INPUT) mf_parallel_for(ctx, g.n * g.h, g.w * g.oc * taps, depthwise_items, &j);
  if (kind == DW_FILTER) mf_parallel_for(ctx, taps, g.n * out_plane * g.oc, depthwise_items, &j);
  if (w.nchw && out_image) {
    if (kind == DW_FORWARD) swap_layout(ctx, im, od, out->data, g.n, out_plane, g.oc);
    else swap_layout(ctx, im, od, out->data, g.n, plane, g.c);
  }
  return MF_OK;
}

static mf_code depthwise_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *f = ctx->inputs[1];
  return depthwise_run(ctx, DW_FORWARD, x, f, x, f, ctx->outputs[0]);
}

static mf_code depthwise_backprop_input_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *f = ctx->inputs[1], *dy = ctx->inputs[2];
  return depthwise_run(ctx, DW_INPUT, ctx->outputs[0], f, dy, f, ctx->outputs[0]);
}

static mf_code depthwise_backprop_filter_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *dy = ctx->inputs[2];
  return depthwise_run(ctx, DW_FILTER, x, ctx->outputs[0], x, dy, ctx->outputs[0]);
}

/* ---------- pooling ---------- */

static mf_code pool_geom(const char *op, const mf_attrs *attrs, const int64_t in[4], geom *g, mf_status *s) {
  window w;
  if (read_window(op, attrs, true, &w, s)) return s->code;
  return make_geom(op, &w, in, w.ksize[0], w.ksize[1], in[3], g, s);
}

static mf_code pool_infer(mf_infer_ctx *ic) {
  int64_t in[4];
  geom g;
  if (mf_check_dtype(ic, 0, "value has", FLOAT_TYPES) || rank4(ic, &ic->in_shapes[0], "value", NHWC, in) ||
      pool_geom(ic->op_name, ic->attrs, in, &g, ic->status))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = shape4(in[0], g.oh, g.ow, in[3]);
  return MF_OK;
}

/* MaxPoolGrad(orig_input, orig_output, grad) gives orig_input's gradient from
 * grad (orig_output's shape); MaxPoolGradGrad(orig_input, orig_output, grad)
 * gives orig_output's shape from grad (orig_input's shape). */
static mf_code max_pool_grads_infer(mf_infer_ctx *ic, bool gradgrad) {
  int64_t in[4], out[4], gr[4];
  geom g;
  if (mf_check_dtype(ic, 0, "orig_input has", FLOAT_TYPES) ||
      mf_check_same_dtype(ic, 0, "orig_input", 1, "orig_output") ||
      mf_check_same_dtype(ic, 0, "orig_input", 2, "grad") || rank4(ic, &ic->in_shapes[0], "orig_input", NHWC, in) ||
      rank4(ic, &ic->in_shapes[1], "orig_output", NHWC, out) || rank4(ic, &ic->in_shapes[2], "grad", NHWC, gr))
    return ic->status->code;
  const int64_t *pooled_grad = gradgrad ? out : gr;  /* the gradient that has the pooled shape */
  const int64_t *input_grad = gradgrad ? gr : NULL;  /* the one that has the input's shape */
  for (int k = 0; k < 4 && input_grad; k++) fill_unknown(&in[k], input_grad[k]);
  fill_unknown(&in[0], out[0]);
  fill_unknown(&in[3], out[3]);
  if (pool_geom(ic->op_name, ic->attrs, in, &g, ic->status)) return ic->status->code;
  int64_t want[4] = {in[0], g.oh, g.ow, in[3]};
  if (check_dims(ic, "orig_output", out, want, "pooling an input", in) ||
      (!gradgrad && check_dims(ic, "grad", pooled_grad, want, "pooling an input", in)))
    return ic->status->code;
  for (int k = 0; k < 4 && input_grad; k++)
    if (dims_conflict(input_grad[k], in[k])) {
      char a[160], b[160];
      return MF_INVALID(ic->status, "%s: grad has shape %s but must have orig_input's shape %s", ic->op_name,
                        dims_str(input_grad, a, sizeof a), dims_str(in, b, sizeof b));
    }
  for (int k = 0; k < 4; k++) fill_unknown(&want[k], out[k]);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = gradgrad ? shape4(want[0], want[1], want[2], want[3]) : shape4(in[0], in[1], in[2], in[3]);
  return MF_OK;
}
static mf_code max_pool_grad_infer(mf_infer_ctx *ic) { return max_pool_grads_infer(ic, false); }
static mf_code max_pool_grad_grad_infer(mf_infer_ctx *ic) { return max_pool_grads_infer(ic, true); }

/* AvgPoolGrad(orig_input_shape, grad). */
static mf_code avg_pool_grad_infer(mf_infer_ctx *ic) {
  int64_t in[4], gr[4];
  geom g;
  if (sizes_input(ic, 0, "orig_input_shape", in) || mf_check_dtype(ic, 1, "grad has", FLOAT_TYPES) ||
      rank4(ic, &ic->in_shapes[1], "grad", NHWC, gr))
    return ic->status->code;
  fill_unknown(&in[0], gr[0]);
  fill_unknown(&in[3], gr[3]);
  if (pool_geom(ic->op_name, ic->attrs, in, &g, ic->status)) return ic->status->code;
  const int64_t want[4] = {in[0], g.oh, g.ow, in[3]};
  if (check_dims(ic, "grad", gr, want, "pooling an input", in)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[1];
  ic->out_shapes[0] = shape4(in[0], in[1], in[2], in[3]);
  return MF_OK;
}

/* The window of output pixel (oy, ox) of images [n0, n1) clipped to the
 * input: rows [y0, y1), columns [x0, x1). Never empty: VALID windows lie
 * inside the input and SAME pads less than a window before (see window_dim). */
#define FOR_EACH_WINDOW(g, n0, n1, ...)                                                \
  for (int64_t n = n0, pix = n0 * (g)->oh * (g)->ow; n < n1; n++)                      \
    for (int64_t oy = 0; oy < (g)->oh; oy++)                                           \
      for (int64_t ox = 0; ox < (g)->ow; ox++, pix++) {                                \
        const int64_t ys = oy * (g)->sh - (g)->pt, xs = ox * (g)->sw - (g)->pl;        \
        const int64_t y0 = ys < 0 ? 0 : ys, y1 = min64(ys + (g)->kh, (g)->h);          \
        const int64_t x0 = xs < 0 ? 0 : xs, x1 = min64(xs + (g)->kw, (g)->w);          \
        __VA_ARGS__                                                                    \
      }

/* Max pooling routes to the first maximum of a window in row-major order (as
 * TensorFlow's MaxPoolGrad): channels go in blocks of CBLOCK, each a vector
 * loop keeping the best value and its offset. */
enum { CBLOCK = 64 };

/* Every pooling kernel as f(geometry, a, b, out, n0, n1) over images [n0,
 * n1); `a` is the tensor pooled over, b the gradient for the gradient ops.
 * Each inner loop runs along the channels of one pixel. Images are split over
 * the session's threads: a gradient's windows overlap within an image but
 * never across images, so each image is summed by one thread in order. */
typedef void (*pool_fn)(const geom *g, const void *a, const void *b, void *out, int64_t n0, int64_t n1);

#define POOL_KERNELS(code, T)                                                                       \
  static void max_pool_##code(const geom *g, const void *x_, const void *unused_, void *y_, int64_t n0, \
                              int64_t n1) {                                                         \
    const T *restrict x = x_;                                                                       \
    T *restrict y = y_;                                                                             \
    const int64_t c = g->c;                                                                         \
    (void)unused_;                                                                                  \
    FOR_EACH_WINDOW(g, n0, n1, T *out = y + pix * c; const T *first = x + PIXEL(g, n, y0, x0);      \
                    run_copy_##code(out, first, c);                                                 \
                    for (int64_t iy = y0; iy < y1; iy++) for (int64_t ix = x0; ix < x1; ix++) {     \
                      const T *src = x + PIXEL(g, n, iy, ix);                                       \
                      run_max_##code(out, src, c);                                                  \
                    })                                                                              \
  }                                                                                                 \
  static void avg_pool_##code(const geom *g, const void *x_, const void *unused_, void *y_, int64_t n0, \
                              int64_t n1) {                                                         \
    const T *restrict x = x_;                                                                       \
    T *restrict y = y_;                                                                             \
    const int64_t c = g->c;                                                                         \
    (void)unused_;                                                                                  \
    FOR_EACH_WINDOW(g, n0, n1, T *out = y + pix * c; const T count = (T)((y1 - y0) * (x1 - x0));    \
                    run_zero_##code(out, c);                                                        \
                    for (int64_t iy = y0; iy < y1; iy++) for (int64_t ix = x0; ix < x1; ix++) {     \
                      const T *src = x + PIXEL(g, n, iy, ix);                                       \
                      run_add_##code(out, src, c);                                                  \
                    } run_div_##code(out, count, c);)                                               \
  }                                                                                                 \
  /* Each input of a window gets the window's gradient over the window's count. */                  \
  static void avg_pool_grad_##code(const geom *g, const void *unused_, const void *dy_, void *dx_,  \
                              int64_t n0, int64_t n1) {                                             \
    const T *restrict dy = dy_;                                                                     \
    T *restrict dx = dx_;                                                                           \
    const int64_t c = g->c;                                                                         \
    (void)unused_;                                                                                  \
    run_zero_##code(dx + n0 * g->h * g->w * c, (n1 - n0) * g->h * g->w * c);                        \
    FOR_EACH_WINDOW(g, n0, n1, const T *gy = dy + pix * c; const T count = (T)((y1 - y0) * (x1 - x0)); \
                    for (int64_t iy = y0; iy < y1; iy++) for (int64_t ix = x0; ix < x1; ix++) {     \
                      T *dst = dx + PIXEL(g, n, iy, ix);                                            \
                      run_add_div_##code(dst, gy, count, c);                                        \
                    })                                                                              \
  }                                                                                                 \
  /* idx[j]: the offset in x of the first maximum of channel c0 + j in the window. */               \
  static void argmax_##code(const geom *g, const T *restrict x, int64_t n, int64_t y0, int64_t y1,  \
                            int64_t x0, int64_t x1, int64_t c0, int64_t nc, int64_t *restrict idx) { \
    T best[CBLOCK];                                                                                 \
    const int64_t first = PIXEL(g, n, y0, x0) + c0;                                                 \
    MF_ELEMENTS(nc, j, best[j] = x[first + j]; idx[j] = first + j;);                                \
    for (int64_t iy = y0; iy < y1; iy++)                                                            \
      for (int64_t ix = x0; ix < x1; ix++) {                                                        \
        const int64_t off = PIXEL(g, n, iy, ix) + c0;                                               \
        MF_ELEMENTS(nc, j, const bool gt = x[off + j] > best[j]; best[j] = gt ? x[off + j] : best[j]; \
                    idx[j] = gt ? off + j : idx[j];);                                               \
      }                                                                                             \
  }                                                                                                 \
  static void max_pool_grad_##code(const geom *g, const void *x_, const void *dy_, void *dx_, int64_t n0, \
                              int64_t n1) {                                                         \
    const T *restrict x = x_, *restrict dy = dy_;                                                   \
    T *restrict dx = dx_;                                                                           \
    const int64_t c = g->c;                                                                         \
    int64_t idx[CBLOCK];                                                                            \
    run_zero_##code(dx + n0 * g->h * g->w * c, (n1 - n0) * g->h * g->w * c);                        \
    FOR_EACH_WINDOW(g, n0, n1, for (int64_t c0 = 0; c0 < c; c0 += CBLOCK) {                         \
      const int64_t nc = min64(CBLOCK, c - c0);                                                     \
      argmax_##code(g, x, n, y0, y1, x0, x1, c0, nc, idx);                                          \
      for (int64_t j = 0; j < nc; j++) dx[idx[j]] += dy[pix * c + c0 + j];                          \
    })                                                                                              \
  }                                                                                                 \
  /* Each output pixel picks the gradient at its window's maximum. */                               \
  static void max_pool_grad_grad_##code(const geom *g, const void *x_, const void *gx_, void *out_, \
                              int64_t n0, int64_t n1) {                                             \
    const T *restrict x = x_, *restrict gx = gx_;                                                   \
    T *restrict out = out_;                                                                         \
    const int64_t c = g->c;                                                                         \
    int64_t idx[CBLOCK];                                                                            \
    FOR_EACH_WINDOW(g, n0, n1, for (int64_t c0 = 0; c0 < c; c0 += CBLOCK) {                         \
      const int64_t nc = min64(CBLOCK, c - c0);                                                     \
      argmax_##code(g, x, n, y0, y1, x0, x1, c0, nc, idx);                                          \
      for (int64_t j = 0; j < nc; j++) out[pix * c + c0 + j] = gx[idx[j]];                          \
    })                                                                                              \
  }
MF_FOR_FLOAT_TYPES(POOL_KERNELS)

#define POOL_ENTRY(code, T, kind) [code] = kind##_##code,
#define POOL_FNS(kind) static const pool_fn kind##_fns[MF_DTYPE_SLOTS] = {MF_FOR_FLOAT_TYPES(POOL_ENTRY, kind)};
POOL_FNS(max_pool)
POOL_FNS(avg_pool)
POOL_FNS(avg_pool_grad)
POOL_FNS(max_pool_grad)
POOL_FNS(max_pool_grad_grad)

typedef struct pool_job {
  pool_fn fn;
  const geom *g;
  const void *a, *b;
  void *out;
} pool_job;

static void pool_images(void *arg, int64_t begin, int64_t end) {
  const pool_job *j = arg;
  j->fn(j->g, j->a, j->b, j->out, begin, end);
}

mf_code mf_pool_geom(mf_kernel_ctx *ctx, const mf_tensor *over, geom *g) {
  int64_t in[4];
  dims_of(over, in);
  return pool_geom(ctx->op->name, ctx->attrs, in, g, ctx->status);
}

/* Runs one pooling kernel: the window slides over `over` (input dims), a and b
 * are its operands. */
static mf_code pool_run(mf_kernel_ctx *ctx, const mf_tensor *over, const pool_fn *fns, const mf_tensor *a,
                        const mf_tensor *b) {
  mf_tensor *y = ctx->outputs[0];
  geom g;
  if (mf_pool_geom(ctx, over, &g)) return ctx->status->code;
  if (y->size == 0) return MF_OK;
  pool_job j = {fns[y->dtype], &g, a ? a->data : NULL, b ? b->data : NULL, y->data};
  mf_parallel_for(ctx, g.n, g.oh * g.ow * g.kh * g.kw * g.c, pool_images, &j);
  return MF_OK;
}

static mf_code max_pool_kernel(mf_kernel_ctx *ctx) {
  return pool_run(ctx, ctx->inputs[0], max_pool_fns, ctx->inputs[0], NULL);
}
static mf_code avg_pool_kernel(mf_kernel_ctx *ctx) {
  return pool_run(ctx, ctx->inputs[0], avg_pool_fns, ctx->inputs[0], NULL);
}
static mf_code avg_pool_grad_kernel(mf_kernel_ctx *ctx) {
  return pool_run(ctx, ctx->outputs[0], avg_pool_grad_fns, NULL, ctx->inputs[1]);
}
static mf_code max_pool_grad_kernel(mf_kernel_ctx *ctx) {
  return pool_run(ctx, ctx->inputs[0], max_pool_grad_fns, ctx->inputs[0], ctx->inputs[2]);
}
static mf_code max_pool_grad_grad_kernel(mf_kernel_ctx *ctx) {
  return pool_run(ctx, ctx->inputs[0], max_pool_grad_grad_fns, ctx->inputs[0], ctx->inputs[2]);
}

/* Max pooling's gradients are linear in the incoming gradient and route it
 * through the argmax, which is piecewise constant in orig_input and
 * orig_output: no gradient flows to those (TensorFlow passes zeros). */
static mf_code max_pool_rule(mf_grad_ctx *gc) {
  const mf_output in[3] = {mf_op_in(gc->op, 0), mf_op_out(gc->op, 0), gc->grads[0]};
  gc->input_grads[0] = mf_grad_rebuild(gc, "MaxPoolGrad", in, 3);
  return gc->status->code;
}
static mf_code max_pool_grad_rule(mf_grad_ctx *gc) {
  const mf_output in[3] = {mf_op_in(gc->op, 0), mf_op_in(gc->op, 1), gc->grads[0]};
  gc->input_grads[2] = mf_grad_rebuild(gc, "MaxPoolGradGrad", in, 3);
  return gc->status->code;
}
static mf_code max_pool_grad_grad_rule(mf_grad_ctx *gc) {
  const mf_output in[3] = {mf_op_in(gc->op, 0), mf_op_in(gc->op, 1), gc->grads[0]};
  gc->input_grads[2] = mf_grad_rebuild(gc, "MaxPoolGrad", in, 3);
  return gc->status->code;
}
/* Average pooling is linear: AvgPoolGrad is its transpose and AvgPool AvgPoolGrad's. */
static mf_code avg_pool_rule(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_rebuild(gc, "AvgPoolGrad", (mf_output[]){SHAPE(mf_op_in(gc->op, 0)), gc->grads[0]}, 2);
  return gc->status->code;
}
static mf_code avg_pool_grad_rule(mf_grad_ctx *gc) {
  gc->input_grads[1] = mf_grad_rebuild(gc, "AvgPool", &gc->grads[0], 1);
  return gc->status->code;
}

/* ---------- SparseSoftmaxCrossEntropyWithLogits ---------- */

/* SparseSoftmaxCrossEntropyWithLogits(features [batch, classes], labels
 * [batch] int32/int64) -> loss [batch], backprop [batch, classes], as
 * TensorFlow's fused op: loss = logsumexp(row) - row[label] and backprop =
 * softmax(row) - one_hot(label). The label's entry is picked, never
 * multiplied by a one-hot mask, so a -inf logit elsewhere costs nothing; a
 * label outside [0, classes) fails the run. */
static mf_code sparse_xent_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "features has", FLOAT_TYPES) ||
      mf_check_dtype(ic, 1, "labels has", (1u << MF_INT32) | (1u << MF_INT64)))
    return ic->status->code;
  const mf_shape *f = &ic->in_shapes[0], *l = &ic->in_shapes[1];
  char sf[160], sl[160];
  if (f->rank >= 0 && f->rank != 2)
    return MF_INVALID(ic->status, "%s: logits must be 2-D (batch, classes), got shape %s", ic->op_name,
                      mf_shape_str(f, sf, sizeof sf));
  if (l->rank >= 0 && l->rank != 1)
    return MF_INVALID(ic->status, "%s: labels must be 1-D (one class index per row), got shape %s", ic->op_name,
                      mf_shape_str(l, sl, sizeof sl));
  int64_t batch = f->rank == 2 ? f->dims[0] : -1, classes = f->rank == 2 ? f->dims[1] : -1;
  int64_t lb = l->rank == 1 ? l->dims[0] : -1;
  if (batch >= 0 && lb >= 0 && batch != lb)
    return MF_INVALID(ic->status,
                      "%s: logits and labels must have the same first dimension, got logits shape %s and labels "
                      "shape %s",
                      ic->op_name, mf_shape_str(f, sf, sizeof sf), mf_shape_str(l, sl, sizeof sl));
  if (batch < 0) batch = lb;
  ic->out_dtypes[0] = ic->out_dtypes[1] = ic->in_dtypes[0];
  ic->out_shapes[0] = (mf_shape){.rank = 1, .dims = {batch}};
  ic->out_shapes[1] = (mf_shape){.rank = 2, .dims = {batch, classes}};
  return MF_OK;
}

/* The loss and backprop of rows [r0, r1) of either cross-entropy op, the
 * labels an int64 index per row (sparse) or a row of probabilities. */
typedef void (*xent_fn)(const void *x, const void *labels, void *loss, void *bp, int64_t r0, int64_t r1, int64_t c);

/* e[j] = exp(x[j] - m) over a row of c > 0 elements, m its maximum (into
 * *max; with `finite`, 0 when that is not finite, as tf.nn.softmax's
 * shift), float32's exp from kernels/vecmath.h; returns sum(e), added in
 * double over 4 lanes and then in lane order, so the loops vectorize and the
 * sum is the same whichever thread runs the row. */
#define EXP_SHIFTED(code, T)                                                                         \
  static double exp_shifted_##code(const T *x, T *e, int64_t c, bool finite, T *max) {               \
    T top[4] = {x[0], x[0], x[0], x[0]}, m;  /* a NaN anywhere makes the sum NaN: its place is moot */ \
    int64_t j = 0;                                                                                   \
    for (; j + 4 <= c; j += 4)                                                                       \
      for (int l = 0; l < 4; l++) top[l] = x[j + l] > top[l] ? x[j + l] : top[l];                   \
    for (; j < c; j++) top[0] = x[j] > top[0] ? x[j] : top[0];                                       \
    m = top[0] > top[1] ? top[0] : top[1];                                                           \
    m = top[2] > m ? top[2] : m;                                                                     \
    m = top[3] > m ? top[3] : m;                                                                     \
    if (finite && !(m - m == 0)) m = 0;                                                              \
    for (j = 0; j < c; j++) e[j] = MF_VMATH(exp, m)(x[j] - m);                                       \
    double lane[4] = {0, 0, 0, 0};                                                                   \
    for (j = 0; j + 4 <= c; j += 4)                                                                  \
      for (int l = 0; l < 4; l++) lane[l] += (double)e[j + l];                                       \
    double sum = (lane[0] + lane[1]) + (lane[2] + lane[3]);                                          \
    for (; j < c; j++) sum += (double)e[j];                                                          \
    *max = m;                                                                                        \
    return sum;                                                                                      \
  }
MF_FOR_FLOAT_TYPES(EXP_SHIFTED)

#define SPARSE_XENT(code, T)                                                                         \
  static void sparse_xent_##code(const void *x_, const void *label_, void *loss_, void *bp_,         \
                                 int64_t r0, int64_t r1, int64_t c) {                                \
    const T *x = x_;                                                                                 \
    const int64_t *label = label_;                                                                   \
    T *loss = loss_, *bp = bp_;                                                                      \
    for (int64_t r = r0; r < r1; r++) {                                                              \
      const T *row = x + r * c;                                                                      \
      T *b = bp + r * c, m;                                                                          \
      double sum = exp_shifted_##code(row, b, c, false, &m);                                                \
      T inv = (T)(1.0 / sum);                                                                        \
      for (int64_t j = 0; j < c; j++) b[j] *= inv;                                                   \
      b[label[r]] -= 1;                                                                              \
      loss[r] = (T)(log(sum) - (double)(row[label[r]] - m));                                         \
    }                                                                                                \
  }
MF_FOR_FLOAT_TYPES(SPARSE_XENT)
#define SPARSE_XENT_ENTRY(code, T) [code] = sparse_xent_##code,
static const xent_fn sparse_xent_fns[MF_DTYPE_SLOTS] = {MF_FOR_FLOAT_TYPES(SPARSE_XENT_ENTRY)};

typedef struct xent_job {
  xent_fn fn;
  const void *x, *labels;
  void *loss, *bp;
  int64_t c;
} xent_job;

static void xent_rows(void *arg, int64_t begin, int64_t end) {
  const xent_job *j = arg;
  j->fn(j->x, j->labels, j->loss, j->bp, begin, end, j->c);
}

/* Rows split over the session's threads: each row is read and written by one. */
static void xent_run(mf_kernel_ctx *ctx, xent_fn fn, const mf_tensor *x, const void *labels) {
  xent_job j = {fn, x->data, labels, ctx->outputs[0]->data, ctx->outputs[1]->data, x->dims[1]};
  mf_parallel_for(ctx, x->dims[0], 4 * x->dims[1], xent_rows, &j);
}

static mf_code sparse_xent_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *lab = ctx->inputs[1];
  int64_t rows = x->dims[0], c = x->dims[1];
  if (rows == 0) return MF_OK;
  if (c == 0) return MF_INVALID(ctx->status, "Must have at least one class, but got logits shape %lld x 0",
                                (long long)rows);
  /* The labels as int64, checked against [0, classes) before any row is done. */
  int64_t inline_labels[256];
  int64_t *labels = rows <= 256 ? inline_labels : mf_malloc((size_t)rows * sizeof *labels);
  if (!labels) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
  int64_t bad = -1;
  for (int64_t r = 0; r < rows; r++) {
    labels[r] = lab->dtype == MF_INT32 ? ((const int32_t *)lab->data)[r] : ((const int64_t *)lab->data)[r];
    if (bad < 0 && (labels[r] < 0 || labels[r] >= c)) bad = r;
  }
  if (bad >= 0) {
    /* TensorFlow's words; the label values listed (the first 100 of them). */
    char list[1024];
    size_t len = 0;
    list[0] = '\0';
    for (int64_t r = 0; r < rows && r < 100 && len < sizeof list - 32; r++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%lld", r ? " " : "", (long long)labels[r]);
    if (rows > 100) snprintf(list + len, sizeof list - len, " ...");
    MF_INVALID(ctx->status,
               "Received a label value of %lld which is outside the valid range of [0, %lld).  Label values: %s",
                  (long long)labels[bad], (long long)c, list);
  } else {
    xent_run(ctx, sparse_xent_fns[x->dtype], x, labels);
  }
  if (labels != inline_labels) mf_free(labels);
  return ctx->status->code;
}

/* ---------- Softmax ---------- */

static mf_output reduce_last(mf_grad_ctx *gc, const char *type, mf_output x);

/* Softmax(logits) along the last axis, as TensorFlow's op: each row shifted
 * by its maximum (0 when that is not finite, as tf.nn.softmax's composite
 * form), exponentiated, scaled by the inverse of its sum: one pass for the
 * maximum, one for exp and the sum, one for the scale, a row per thread. */
static mf_code softmax_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "logits has", FLOAT_TYPES)) return ic->status->code;
  const mf_shape *x = &ic->in_shapes[0];
  if (x->rank == 0)
    return MF_INVALID(ic->status, "%s: logits must have at least one dimension (the classes), got a scalar",
                      ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = *x;
  return MF_OK;
}

#define SOFTMAX_ROWS(code, T)                                                                        \
  static void softmax_##code(const void *x_, void *y_, int64_t r0, int64_t r1, int64_t c) {         \
    const T *x = x_;                                                                                 \
    T *y = y_, m;                                                                                    \
    for (int64_t r = r0; r < r1; r++) {                                                              \
      T *row = y + r * c;                                                                            \
      double inv = 1.0 / exp_shifted_##code(x + r * c, row, c, true, &m);                            \
      for (int64_t j = 0; j < c; j++) row[j] = (T)((double)row[j] * inv);  /* rounded once */       \
    }                                                                                                \
  }
MF_FOR_FLOAT_TYPES(SOFTMAX_ROWS)
#define SOFTMAX_ENTRY(code, T) [code] = softmax_##code,
typedef void (*softmax_fn)(const void *x, void *y, int64_t r0, int64_t r1, int64_t c);
static const softmax_fn softmax_fns[MF_DTYPE_SLOTS] = {MF_FOR_FLOAT_TYPES(SOFTMAX_ENTRY)};

typedef struct softmax_job {
  softmax_fn fn;
  const void *x;
  void *y;
  int64_t c;
} softmax_job;

static void softmax_chunk(void *arg, int64_t begin, int64_t end) {
  const softmax_job *j = arg;
  j->fn(j->x, j->y, begin, end, j->c);
}

static mf_code softmax_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0];
  if (x->rank == 0)
    return MF_INVALID(ctx->status, "%s: logits must have at least one dimension (the classes), got a scalar",
                      ctx->op->name);
  int64_t c = x->dims[x->rank - 1];
  if (x->size == 0) return MF_OK;
  softmax_job j = {softmax_fns[x->dtype], x->data, ctx->outputs[0]->data, c};
  mf_parallel_for(ctx, x->size / c, 4 * c, softmax_chunk, &j);
  return MF_OK;
}

/* d logits = (g - sum(g * y)) * y by row, y the op's result. */
static mf_code softmax_rule(mf_grad_ctx *gc) {
  mf_output y = mf_op_out(gc->op, 0);
  mf_output inner = reduce_last(gc, "Sum", mf_grad_op2(gc, "Mul", gc->grads[0], y));
  gc->input_grads[0] = mf_grad_op2(gc, "Mul", mf_grad_op2(gc, "Sub", gc->grads[0], inner), y);
  return gc->status->code;
}

/* ---------- SoftmaxCrossEntropyWithLogits ---------- */

/* SoftmaxCrossEntropyWithLogits(features [batch, classes], labels of the
 * same shape) -> loss [batch], backprop [batch, classes], as TensorFlow's
 * fused kernel: with shifted = row - max(row), loss = sum(labels *
 * (log(sum(exp(shifted))) - shifted)) and backprop = softmax(row) - labels.
 * Shifting first keeps float32's precision at large logits (logits {-1000,
 * 1000, 999} with labels {0, .5, .5} give 0.8132617). A zero label times an
 * infinite shifted logit is NaN, as in TensorFlow. */
static mf_code xent_sizes_differ(const char *op, const mf_shape *logits, const mf_shape *labels, mf_status *s) {
  char a[160], b[160];
  return MF_INVALID(s, "%s: logits and labels must be same size: logits_size=%s labels_size=%s", op,
                    mf_shape_str(logits, a, sizeof a), mf_shape_str(labels, b, sizeof b));
}

static mf_code xent_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "features has", FLOAT_TYPES) || mf_check_same_dtype(ic, 0, "logits", 1, "labels"))
    return ic->status->code;
  const mf_shape *f = &ic->in_shapes[0], *l = &ic->in_shapes[1];
  if (f->rank >= 0 && f->rank != 2) {
    char buf[160];
    return MF_INVALID(ic->status, "%s: logits must be 2-D (batch, classes), got shape %s", ic->op_name,
                      mf_shape_str(f, buf, sizeof buf));
  }
  mf_shape both;
  if (!mf_merge_shapes(f, l, &both)) return xent_sizes_differ(ic->op_name, f, l, ic->status);
  if (both.rank < 0) both = (mf_shape){.rank = 2, .dims = {-1, -1}};
  ic->out_dtypes[0] = ic->out_dtypes[1] = ic->in_dtypes[0];
  ic->out_shapes[0] = (mf_shape){.rank = 1, .dims = {both.dims[0]}};
  ic->out_shapes[1] = both;
  return MF_OK;
}

/* Sums and logs in double; each term as TensorFlow writes it. */
#define XENT(code, T)                                                                                \
  static void xent_##code(const void *x_, const void *labels_, void *loss_, void *bp_, int64_t r0,   \
                          int64_t r1, int64_t c) {                                                   \
    const T *x = x_, *labels = labels_;                                                              \
    T *loss = loss_, *bp = bp_;                                                                      \
    for (int64_t r = r0; r < r1 && c > 0; r++) {                                                     \
      const T *row = x + r * c, *label = labels + r * c;                                             \
      T *b = bp + r * c, m;                                                                          \
      double sum = exp_shifted_##code(row, b, c, false, &m), log_sum = log(sum), total = 0;                 \
      T inv = (T)(1.0 / sum);                                                                        \
      for (int64_t j = 0; j < c; j++) {                                                              \
        total += (double)label[j] * (log_sum - (double)(row[j] - m));                                \
        b[j] = b[j] * inv - label[j];                                                                \
      }                                                                                              \
      loss[r] = (T)total;                                                                            \
    }                                                                                                \
    for (int64_t r = r0; r < r1 && c == 0; r++) loss[r] = 0;                                         \
  }
MF_FOR_FLOAT_TYPES(XENT)
#define XENT_ENTRY(code, T) [code] = xent_##code,
static const xent_fn xent_fns[MF_DTYPE_SLOTS] = {MF_FOR_FLOAT_TYPES(XENT_ENTRY)};

static mf_code xent_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *labels = ctx->inputs[1];
  mf_shape sx = mf_shape_of(x), sl = mf_shape_of(labels);
  /* A shape promised by set_shape may disagree with the values. */
  if (!mf_shape_compatible(&sx, &sl)) return xent_sizes_differ(ctx->op->name, &sx, &sl, ctx->status);
  xent_run(ctx, xent_fns[x->dtype], x, labels->data);
  return MF_OK;
}

/* ---------- gradients of the cross-entropy ops ---------- */

/* A reduction of x over its last axis, the axis kept. */
static mf_output reduce_last(mf_grad_ctx *gc, const char *type, mf_output x) {
  mf_op_desc *d = mf_grad_begin(gc, type);
  if (d) {
    mf_op_desc_add_input(d, x);
    mf_op_desc_set_attr_int(d, "axis", -1);
    mf_op_desc_set_attr_bool(d, "keepdims", true);
  }
  return mf_grad_finish(gc, d);
}

/* The op's logits less their row's maximum, which is held constant. */
static mf_output shifted_logits(mf_grad_ctx *gc) {
  mf_output x = mf_op_in(gc->op, 0);
  return mf_grad_op2(gc, "Sub", x, mf_grad_op1(gc, "StopGradient", reduce_last(gc, "Max", x)));
}

/* The loss's gradient as a column, to scale each row. */
static mf_output loss_grad_column(mf_grad_ctx *gc) {
  mf_op_desc *d = mf_grad_begin(gc, "ExpandDims");
  if (d) {
    mf_op_desc_add_input(d, gc->grads[0]);
    mf_op_desc_set_attr_int(d, "axis", -1);
  }
  return mf_grad_finish(gc, d);
}

/* The logits' gradient of both cross-entropy ops: d loss = dy * backprop, row
 * by row. A gradient reaching backprop (a second derivative of the loss)
 * flows through softmax(features): its Jacobian applied to g is softmax * (g
 * - sum(g * softmax)). */
static mf_output xent_logits_grad(mf_grad_ctx *gc) {
  mf_output dx = MF_NO_PORT;
  if (gc->grads[0].op) dx = mf_grad_op2(gc, "Mul", loss_grad_column(gc), mf_op_out(gc->op, 1));
  if (gc->grads[1].op) {
    mf_output g = gc->grads[1], e = mf_grad_op1(gc, "Exp", shifted_logits(gc));
    mf_output softmax = mf_grad_op2(gc, "Div", e, reduce_last(gc, "Sum", e));
    mf_output inner = reduce_last(gc, "Sum", mf_grad_op2(gc, "Mul", g, softmax));
    mf_output second = mf_grad_op2(gc, "Mul", softmax, mf_grad_op2(gc, "Sub", g, inner));
    dx = dx.op ? mf_grad_op2(gc, "Add", dx, second) : second;
  }
  return dx;
}

/* Sparse labels are indices: they get no gradient. */
static mf_code sparse_xent_rule(mf_grad_ctx *gc) {
  gc->input_grads[0] = xent_logits_grad(gc);
  return gc->status->code;
}

/* Dense labels get dy * -log_softmax(logits) from the loss and -g from a
 * gradient g reaching backprop = softmax - labels. */
static mf_code xent_rule(mf_grad_ctx *gc) {
  gc->input_grads[0] = xent_logits_grad(gc);
  mf_output dlabels = MF_NO_PORT;
  if (gc->grads[0].op) {
    mf_output shifted = shifted_logits(gc);
    mf_output log_sum = mf_grad_op1(gc, "Log", reduce_last(gc, "Sum", mf_grad_op1(gc, "Exp", shifted)));
    dlabels = mf_grad_op2(gc, "Mul", loss_grad_column(gc), mf_grad_op2(gc, "Sub", log_sum, shifted));
  }
  if (gc->grads[1].op) {
    mf_output minus_g = mf_grad_op1(gc, "Neg", gc->grads[1]);
    dlabels = dlabels.op ? mf_grad_op2(gc, "Add", dlabels, minus_g) : minus_g;
  }
  gc->input_grads[1] = dlabels;
  return gc->status->code;
}

/* ---------- LRN and LRNGrad ----------
 * LRN(input [n, h, w, c]): each value divided by (bias + alpha * the sum of
 * the squares of the values within depth_radius channels of it) ^ beta, as
 * TensorFlow's; LRNGrad(input_grads, input_image, output_image) its input's
 * gradient. Sums and powers in double, a pixel's channels per item. */
typedef struct lrn_params {
  int64_t radius;
  double bias, alpha, beta;
} lrn_params;

static mf_code lrn_params_of(const char *op, const mf_attrs *attrs, lrn_params *p, mf_status *s) {
  *p = (lrn_params){mf_attr_int(attrs, "depth_radius", 5), mf_attr_float(attrs, "bias", 1),
                    mf_attr_float(attrs, "alpha", 1), mf_attr_float(attrs, "beta", 0.5)};
  if (p->radius < 0 || p->radius > INT32_MAX)
    return MF_INVALID(s, "%s: depth_radius must be between 0 and 2^31 - 1, got %lld", op, (long long)p->radius);
  return MF_OK;
}

static mf_code lrn_infer(mf_infer_ctx *ic) {
  lrn_params p;
  int64_t d[4];
  if (mf_check_dtype(ic, 0, "input has", FLOAT_TYPES) || lrn_params_of(ic->op_name, ic->attrs, &p, ic->status) ||
      rank4(ic, &ic->in_shapes[0], "input", NHWC, d))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = shape4(d[0], d[1], d[2], d[3]);
  return MF_OK;
}

static mf_code lrn_grad_infer(mf_infer_ctx *ic) {
  lrn_params p;
  int64_t d[4];
  if (mf_check_dtype(ic, 0, "input_grads has", FLOAT_TYPES) ||
      mf_check_same_dtype(ic, 0, "input_grads", 1, "input_image") ||
      mf_check_same_dtype(ic, 0, "input_grads", 2, "output_image") ||
      lrn_params_of(ic->op_name, ic->attrs, &p, ic->status) || rank4(ic, &ic->in_shapes[0], "input_grads", NHWC, d))
    return ic->status->code;
  mf_shape all = ic->in_shapes[0];
  for (int i = 1; i < 3; i++)
    if (!mf_merge_shapes(&all, &ic->in_shapes[i], &all)) {
      char a[160], b[160], c[160];
      return MF_INVALID(ic->status,
                        "%s: input_grads, input_image, and out_image should have the same shape, got %s, %s and %s",
                        ic->op_name, mf_shape_str(&ic->in_shapes[0], a, sizeof a),
                        mf_shape_str(&ic->in_shapes[1], b, sizeof b), mf_shape_str(&ic->in_shapes[2], c, sizeof c));
    }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = all;
  return MF_OK;
}

/* The window of channel k: [*lo, *hi]. */
static void lrn_window(const lrn_params *p, int64_t k, int64_t c, int64_t *lo, int64_t *hi) {
  *lo = k - p->radius < 0 ? 0 : k - p->radius;
  *hi = k + p->radius >= c ? c - 1 : k + p->radius;
}

/* Per dtype, over pixels [r0, r1) of c channels: LRN's y, and LRNGrad's dx
 * = g * norm^-beta - 2 alpha beta x * sum over the window of g y / norm,
 * with `work` 2 c doubles per pixel (the terms of one pixel's channels). */
typedef void (*lrn_fn)(const lrn_params *p, const void *g, const void *x, const void *y, void *out, double *work,
                       int64_t r0, int64_t r1, int64_t c);
#define LRN_KERNELS(code, T)                                                                        \
  static double lrn_norm_##code(const lrn_params *p, const T *x, int64_t k, int64_t c) {            \
    int64_t lo, hi;                                                                                 \
    lrn_window(p, k, c, &lo, &hi);                                                                  \
    double s = 0;                                                                                   \
    for (int64_t j = lo; j <= hi; j++) s += (double)x[j] * (double)x[j];                            \
    return p->bias + p->alpha * s;                                                                  \
  }                                                                                                 \
  static void lrn_##code(const lrn_params *p, const void *g_, const void *x_, const void *y_, void *out_, \
                         double *work, int64_t r0, int64_t r1, int64_t c) {                         \
    const T *x = x_;                                                                                \
    T *y = out_;                                                                                    \
    (void)g_, (void)y_, (void)work;                                                                 \
    for (int64_t i = r0 * c; i < r1 * c; i += c)                                                    \
      for (int64_t k = 0; k < c; k++) y[i + k] = (T)(x[i + k] * pow(lrn_norm_##code(p, x + i, k, c), -p->beta)); \
  }                                                                                                 \
  static void lrn_grad_##code(const lrn_params *p, const void *g_, const void *x_, const void *y_, void *out_, \
                              double *work, int64_t r0, int64_t r1, int64_t c) {                    \
    const T *g = g_, *x = x_, *y = y_;                                                              \
    T *dx = out_;                                                                                   \
    for (int64_t i = r0 * c; i < r1 * c; i += c) {                                                  \
      double *direct = work + 2 * i, *spread = direct + c;                                          \
      for (int64_t k = 0; k < c; k++) {                                                             \
        const double norm = lrn_norm_##code(p, x + i, k, c);                                        \
        direct[k] = g[i + k] * pow(norm, -p->beta);                                                 \
        spread[k] = g[i + k] * (double)y[i + k] / norm;                                             \
      }                                                                                             \
      for (int64_t k = 0; k < c; k++) {                                                             \
        int64_t lo, hi;                                                                             \
        lrn_window(p, k, c, &lo, &hi);                                                              \
        double s = 0;                                                                               \
        for (int64_t j = lo; j <= hi; j++) s += spread[j];                                          \
        dx[i + k] = (T)(direct[k] - 2 * p->alpha * p->beta * x[i + k] * s);                         \
      }                                                                                             \
    }                                                                                               \
  }
MF_FOR_FLOAT_TYPES(LRN_KERNELS)
#define LRN_ENTRY(code, T) [code] = {lrn_##code, lrn_grad_##code},
static const lrn_fn lrn_fns[MF_DTYPE_SLOTS][2] = {MF_FOR_FLOAT_TYPES(LRN_ENTRY)};

typedef struct lrn_job {
  lrn_fn fn;
  const lrn_params *p;
  const void *g, *x, *y;
  void *out;
  double *work;
  int64_t c;
} lrn_job;

static void lrn_pixels(void *arg, int64_t begin, int64_t end) {
  const lrn_job *j = arg;
  j->fn(j->p, j->g, j->x, j->y, j->out, j->work, begin, end, j->c);
}

/* LRN (grad false: x) or LRNGrad (g, x, y), by pixel over the session's threads. */
static mf_code lrn_run(mf_kernel_ctx *ctx, bool grad, const mf_tensor *g, const mf_tensor *x, const mf_tensor *y) {
  lrn_params p;
  if (lrn_params_of(ctx->op->name, ctx->attrs, &p, ctx->status)) return ctx->status->code;
  mf_tensor *out = ctx->outputs[0];
  const int64_t c = x->dims[3];
  if (out->size == 0) return MF_OK;
  double *work = NULL;
  if (grad && !(work = mf_kernel_scratch(ctx, (size_t)out->size * 2 * sizeof *work))) return ctx->status->code;
  const int64_t window = 2 * p.radius + 1 < c ? 2 * p.radius + 1 : c;
  lrn_job j = {lrn_fns[x->dtype][grad], &p, g ? g->data : NULL, x->data, y ? y->data : NULL, out->data, work, c};
  mf_parallel_for(ctx, out->size / c, c * window * (grad ? 2 : 1), lrn_pixels, &j);
  return MF_OK;
}

static mf_code lrn_kernel(mf_kernel_ctx *ctx) { return lrn_run(ctx, false, NULL, ctx->inputs[0], NULL); }

static mf_code lrn_grad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *g = ctx->inputs[0], *x = ctx->inputs[1], *y = ctx->inputs[2];
  mf_shape sg = mf_shape_of(g), sx = mf_shape_of(x), sy = mf_shape_of(y);
  /* A shape promised by set_shape may disagree with the values. */
  if (!mf_shape_compatible(&sg, &sx) || !mf_shape_compatible(&sg, &sy)) {
    char a[160], b[160], c[160];
    return MF_INVALID(ctx->status,
                      "%s: input_grads, input_image, and out_image should have the same shape, got %s, %s and %s",
                      ctx->op->name, mf_shape_str(&sg, a, sizeof a), mf_shape_str(&sx, b, sizeof b),
                      mf_shape_str(&sy, c, sizeof c));
  }
  return lrn_run(ctx, true, g, x, y);
}

/* TensorFlow's rule: LRNGrad(dy, x, y), with LRN's attributes. */
static mf_code lrn_rule(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_rebuild(gc, "LRNGrad", (mf_output[]){gc->grads[0], mf_op_in(gc->op, 0),
                                                                   mf_op_out(gc->op, 0)}, 3);
  return gc->status->code;
}

/* TensorFlow defines no gradient for LRNGrad: a second derivative through
 * tf.nn.lrn is an error, never a silent zero. */
static mf_code lrn_grad_rule(mf_grad_ctx *gc) {
  return mf_status_set(gc->status, MF_UNIMPLEMENTED,
                       "%s: LRNGrad has no gradient (TensorFlow defines none either): second derivatives through "
                       "tf.nn.lrn are not supported",
                       gc->op->name);
}

/* ---------- registrations ---------- */

/* values: the def's value_inputs (the backprops read their sizes input). */
#define SIZED_OP_DEF(op, arity, fl, values, infer_fn, kernel_fn, rule) \
  GPU_OP_DEF(op, arity, fl, values, infer_fn, kernel_fn, NULL, 0, rule)
#define OP_DEF(op, arity, fl, infer_fn, kernel_fn, rule) SIZED_OP_DEF(op, arity, fl, 0, infer_fn, kernel_fn, rule)
/* With a GPU kernel (ops/gpu/dnn.c) for the dtypes gpu_types. */
#define GPU_OP_DEF(op, arity, fl, values, infer_fn, kernel_fn, gpu_fn, gpu_types, rule) \
  {.name = #op, .num_inputs = arity, .num_outputs = 1, .flags = fl, .value_inputs = values, \
   .infer = infer_fn, .kernel = {[MF_CPU] = kernel_fn, [MF_CUDA] = gpu_fn}, .cuda_dtypes = gpu_types, .grad = rule},
/* cuDNN's convolutions run float32; the pooling kernels both float dtypes. */
#define CONV_GPU_TYPES (1u << MF_FLOAT32)
#define POOL_GPU_TYPES GPU_FLOAT_TYPES
#define GPU_FLOAT_TYPES MF_DTYPE_MASK(MF_FOR_FLOAT_TYPES)
/* Activations and their gradients are elementwise: the executor may fuse them. */
#define ELEMENT_OP_DEF(op, arity, fl, types, gpu_kernel) \
  {.name = #op, .num_inputs = arity, .num_outputs = 1, .flags = fl, .infer = op##_infer, \
   .kernel = {[MF_CPU] = op##_kernel, [MF_CUDA] = gpu_kernel}, .cuda_dtypes = MF_DTYPE_MASK(MF_TYPES(types)), \
   .grad = op##_rule, .element_loop = op##_element_loop},
#define ACT_DEF(op, types, grad_op, reads, expr) ELEMENT_OP_DEF(op, 1, MF_OP_FORWARDS_INPUT, types, mf_gpu_activation)
#define ACT_GRAD_DEF(op, types, curvature, expr) \
  ELEMENT_OP_DEF(op, 2, MF_OP_FORWARDS_INPUT | MF_OP_INTERNAL, types, mf_gpu_activation_grad)

static const mf_op_def defs[] = {
    MF_ACTIVATIONS(ACT_DEF)
    MF_ACTIVATION_GRADS(ACT_GRAD_DEF)
    {.name = "BiasAdd", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_FORWARDS_INPUT, .infer = bias_add_infer,
     .kernel = {[MF_CPU] = bias_add_kernel, [MF_CUDA] = mf_gpu_bias_add}, .cuda_dtypes = GPU_FLOAT_TYPES,
     .grad = bias_add_rule, .element_loop = bias_add_element_loop},
    GPU_OP_DEF(BiasAddGrad, 1, MF_OP_INTERNAL, 0, bias_add_grad_infer, bias_add_grad_kernel, mf_gpu_bias_add_grad,
               GPU_FLOAT_TYPES, bias_add_grad_rule)
    GPU_OP_DEF(Conv2D, 2, 0, 0, conv2d_infer, conv2d_kernel, mf_gpu_conv2d, CONV_GPU_TYPES, conv2d_rule)
    GPU_OP_DEF(Conv2DBackpropInput, 3, 0, 1u << 0, conv2d_backprop_input_infer, conv2d_backprop_input_kernel,
               mf_gpu_conv2d_backprop_input, CONV_GPU_TYPES, conv2d_backprop_input_rule)
    GPU_OP_DEF(Conv2DBackpropFilter, 3, 0, 1u << 1, conv2d_backprop_filter_infer, conv2d_backprop_filter_kernel,
               mf_gpu_conv2d_backprop_filter, CONV_GPU_TYPES, conv2d_backprop_filter_rule)
    OP_DEF(DepthwiseConv2dNative, 2, 0, depthwise_infer, depthwise_kernel, depthwise_rule)
    SIZED_OP_DEF(DepthwiseConv2dNativeBackpropInput, 3, 0, 1u << 0, depthwise_backprop_input_infer,
                 depthwise_backprop_input_kernel, depthwise_backprop_input_rule)
    SIZED_OP_DEF(DepthwiseConv2dNativeBackpropFilter, 3, 0, 1u << 1, depthwise_backprop_filter_infer,
                 depthwise_backprop_filter_kernel, depthwise_backprop_filter_rule)
    OP_DEF(LRN, 1, 0, lrn_infer, lrn_kernel, lrn_rule)
    OP_DEF(LRNGrad, 3, MF_OP_INTERNAL, lrn_grad_infer, lrn_grad_kernel, lrn_grad_rule)
    GPU_OP_DEF(MaxPool, 1, 0, 0, pool_infer, max_pool_kernel, mf_gpu_max_pool, POOL_GPU_TYPES, max_pool_rule)
    GPU_OP_DEF(MaxPoolGrad, 3, MF_OP_INTERNAL, 0, max_pool_grad_infer, max_pool_grad_kernel, mf_gpu_max_pool_grad,
               POOL_GPU_TYPES, max_pool_grad_rule)
    GPU_OP_DEF(MaxPoolGradGrad, 3, MF_OP_INTERNAL, 0, max_pool_grad_grad_infer, max_pool_grad_grad_kernel,
               mf_gpu_max_pool_grad_grad, POOL_GPU_TYPES, max_pool_grad_grad_rule)
    GPU_OP_DEF(AvgPool, 1, 0, 0, pool_infer, avg_pool_kernel, mf_gpu_avg_pool, POOL_GPU_TYPES, avg_pool_rule)
    GPU_OP_DEF(AvgPoolGrad, 2, MF_OP_INTERNAL, 1u << 0, avg_pool_grad_infer, avg_pool_grad_kernel,
               mf_gpu_avg_pool_grad, POOL_GPU_TYPES, avg_pool_grad_rule)
    {.name = "SparseSoftmaxCrossEntropyWithLogits", .num_inputs = 2, .num_outputs = 2,
     .infer = sparse_xent_infer, .kernel = {[MF_CPU] = sparse_xent_kernel, [MF_CUDA] = mf_gpu_sparse_xent},
     .cuda_dtypes = MF_DTYPE_MASK(MF_FOR_SIGNED_TYPES), .grad = sparse_xent_rule},
    GPU_OP_DEF(Softmax, 1, 0, 0, softmax_infer, softmax_kernel, mf_gpu_softmax, GPU_FLOAT_TYPES, softmax_rule)
    {.name = "SoftmaxCrossEntropyWithLogits", .num_inputs = 2, .num_outputs = 2,
     .infer = xent_infer, .kernel = {[MF_CPU] = xent_kernel, [MF_CUDA] = mf_gpu_xent}, .cuda_dtypes = GPU_FLOAT_TYPES,
     .grad = xent_rule},
};
MF_OP_TABLE(mf_ops_nn, defs);
