/* train.c — the optimizers' fused update ops: ApplyGradientDescent,
 * ApplyMomentum, ApplyAdam, ApplyRMSProp, ApplyCenteredRMSProp, ApplyAdagrad.
 *
 * Each takes, in TensorFlow's input order, the variable and its slot
 * variables as ref inputs, the hyperparameters as scalar inputs (so a learning
 * rate may be any tensor) and the gradient, and updates the variable and its
 * slots in place in one loop over the elements, with TensorFlow's formulas
 * and operation order. The output is the updated value of the variable.
 *
 * Every op is one signature (its inputs and where the gradient sits) plus one
 * update rule per float dtype; one infer and one kernel driver serve them all.
 * Values are made writable through mf_kernel_ref_writable, so an update never
 * changes what a reader of the variable holds (copy on write, ops/state.c). */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "ops/variables.h"
#include "kernels/helpers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* No fused multiply-adds: an update rounds each operation as written, so
 * results do not depend on the compiler or the target's FMA instructions
 * (gcc does not contract in ISO C mode; clang would without this). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

enum { MAX_TRAIN_INPUTS = 10, MAX_REFS = 4, MAX_HYPER = 6 };

/* refs: the data of the variable and its slots, in input order; hp: the
 * scalar inputs in input order; flag: the op's boolean attribute. */
typedef void (*update_fn)(void *const *refs, const void *grad, int64_t n, const double *hp, bool flag);

typedef struct train_sig {
  int grad;                      /* the gradient's input index */
  const char *flag;              /* a bool attribute the rule reads, or NULL */
  const char *inputs[MAX_TRAIN_INPUTS];  /* TensorFlow's input names, for messages */
  update_fn update[2];           /* float32, float64 */
} train_sig;

/* ---------- update rules, written once for float and double ----------
 * In TensorFlow's order (training_ops.cc); `x -= y` is x = x - y. */
#define MF_UPDATE_RULES(T, S, SQRT)                                                       \
  static void gradient_descent_##S(void *const *ref, const void *grad, int64_t n,         \
                                   const double *hp, bool flag) {                         \
    MF_UNUSED(flag);                                                                  \
    T *restrict var = ref[0];                                                             \
    const T *restrict g = grad;                                                           \
    const T alpha = (T)hp[0];                                                             \
    for (int64_t i = 0; i < n; i++) var[i] -= g[i] * alpha;                               \
  }                                                                                       \
  /* accum = accum * momentum + grad; var -= accum * lr, or with Nesterov                 \
   * var -= grad * lr + accum * momentum * lr. hp: lr, momentum. */                       \
  static void momentum_##S(void *const *ref, const void *grad, int64_t n, const double *hp, \
                           bool nesterov) {                                               \
    T *restrict var = ref[0], *restrict accum = ref[1];                                   \
    const T *restrict g = grad;                                                           \
    const T lr = (T)hp[0], momentum = (T)hp[1];                                           \
    if (nesterov) {                                                                       \
      for (int64_t i = 0; i < n; i++) {                                                   \
        accum[i] = accum[i] * momentum + g[i];                                            \
        var[i] -= g[i] * lr + accum[i] * momentum * lr;                                   \
      }                                                                                   \
    } else {                                                                              \
      for (int64_t i = 0; i < n; i++) {                                                   \
        accum[i] = accum[i] * momentum + g[i];                                            \
        var[i] -= accum[i] * lr;                                                          \
      }                                                                                   \
    }                                                                                     \
  }                                                                                       \
  /* Bias-corrected: alpha = lr * sqrt(1 - beta2^t) / (1 - beta1^t).                      \
   * hp: beta1_power, beta2_power, lr, beta1, beta2, epsilon. */                          \
  static void adam_##S(void *const *ref, const void *grad, int64_t n, const double *hp,   \
                       bool flag) {                                                       \
    MF_UNUSED(flag);                                                                  \
    T *restrict var = ref[0], *restrict m = ref[1], *restrict v = ref[2];                 \
    const T *restrict g = grad;                                                           \
    const T b1p = (T)hp[0], b2p = (T)hp[1], lr = (T)hp[2];                                \
    const T one_minus_b1 = (T)1 - (T)hp[3], one_minus_b2 = (T)1 - (T)hp[4], eps = (T)hp[5]; \
    const T alpha = lr * SQRT((T)1 - b2p) / ((T)1 - b1p);                                 \
    for (int64_t i = 0; i < n; i++) {                                                     \
      m[i] += (g[i] - m[i]) * one_minus_b1;                                               \
      v[i] += (g[i] * g[i] - v[i]) * one_minus_b2;                                        \
      var[i] -= (m[i] * alpha) / (SQRT(v[i]) + eps);                                      \
    }                                                                                     \
  }                                                                                       \
  /* hp: lr, rho, momentum, epsilon. */                                                   \
  static void rmsprop_##S(void *const *ref, const void *grad, int64_t n, const double *hp, \
                          bool flag) {                                                    \
    MF_UNUSED(flag);                                                                  \
    T *restrict var = ref[0], *restrict ms = ref[1], *restrict mom = ref[2];              \
    const T *restrict g = grad;                                                           \
    const T lr = (T)hp[0], one_minus_rho = (T)1 - (T)hp[1], momentum = (T)hp[2], eps = (T)hp[3]; \
    for (int64_t i = 0; i < n; i++) {                                                     \
      ms[i] += (g[i] * g[i] - ms[i]) * one_minus_rho;                                     \
      mom[i] = mom[i] * momentum + (g[i] * lr) / SQRT(ms[i] + eps);                       \
      var[i] -= mom[i];                                                                   \
    }                                                                                     \
  }                                                                                       \
  /* The mean gradient mg centers the second moment: denominator                          \
   * sqrt(ms - mg^2 + epsilon). hp: lr, rho, momentum, epsilon. */                        \
  static void centered_rmsprop_##S(void *const *ref, const void *grad, int64_t n,         \
                                   const double *hp, bool flag) {                         \
    MF_UNUSED(flag);                                                                  \
    T *restrict var = ref[0], *restrict mg = ref[1], *restrict ms = ref[2],               \
               *restrict mom = ref[3];                                                    \
    const T *restrict g = grad;                                                           \
    const T lr = (T)hp[0], one_minus_rho = (T)1 - (T)hp[1], momentum = (T)hp[2], eps = (T)hp[3]; \
    for (int64_t i = 0; i < n; i++) {                                                     \
      ms[i] += (g[i] * g[i] - ms[i]) * one_minus_rho;                                     \
      mg[i] += (g[i] - mg[i]) * one_minus_rho;                                            \
      const T denom = (ms[i] - mg[i] * mg[i]) + eps;                                      \
      mom[i] = mom[i] * momentum + (g[i] * lr) / SQRT(denom);                             \
      var[i] -= mom[i];                                                                   \
    }                                                                                     \
  }                                                                                       \
  /* accum += grad^2; var -= grad * lr / sqrt(accum). hp: lr. */                          \
  static void adagrad_##S(void *const *ref, const void *grad, int64_t n, const double *hp, \
                          bool flag) {                                                    \
    MF_UNUSED(flag);                                                                  \
    T *restrict var = ref[0], *restrict accum = ref[1];                                   \
    const T *restrict g = grad;                                                           \
    const T lr = (T)hp[0];                                                                \
    for (int64_t i = 0; i < n; i++) {                                                     \
      accum[i] += g[i] * g[i];                                                            \
      var[i] -= g[i] * lr * ((T)1 / SQRT(accum[i]));                                      \
    }                                                                                     \
  }

MF_UPDATE_RULES(float, f32, sqrtf)
MF_UPDATE_RULES(double, f64, sqrt)
#undef MF_UPDATE_RULES

/* ---------- the ops' signatures ---------- */
static const train_sig sig_gradient_descent = {
    .grad = 2, .inputs = {"var", "alpha", "delta"},
    .update = {gradient_descent_f32, gradient_descent_f64}};
static const train_sig sig_momentum = {
    .grad = 3, .flag = "use_nesterov",
    .inputs = {"var", "accum", "lr", "grad", "momentum"}, .update = {momentum_f32, momentum_f64}};
static const train_sig sig_adam = {
    .grad = 9,
    .inputs = {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"},
    .update = {adam_f32, adam_f64}};
static const train_sig sig_rmsprop = {
    .grad = 7, .inputs = {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"},
    .update = {rmsprop_f32, rmsprop_f64}};
static const train_sig sig_centered_rmsprop = {
    .grad = 8,
    .inputs = {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"},
    .update = {centered_rmsprop_f32, centered_rmsprop_f64}};
static const train_sig sig_adagrad = {
    .grad = 3, .inputs = {"var", "accum", "lr", "grad"},
    .update = {adagrad_f32, adagrad_f64}};

/* ---------- shape and dtype inference ---------- */

/* The refs are the first inputs (the variable, then its slots). */
static int num_refs(const mf_op_def *def) {
  int n = 0;
  while (n < MAX_REFS && (def->ref_inputs >> n & 1u)) n++;
  return n;
}

/* Refs name distinct variables of one float dtype; every other input has
 * that dtype; slots and the gradient have the variable's shape, the
 * hyperparameters are scalars. Output: the variable's dtype and shape. */
/* Input k of an update does not match the variable: said the same way at
 * build time and at run time. */
static mf_code shape_mismatch(mf_status *status, const char *op_name, const train_sig *sig, int k,
                              const char *variable, const mf_shape *var, const mf_shape *got) {
  char a[128], b[128];
  return MF_INVALID(status,
                    "%s: '%s' must have the shape of '%s' (variable '%s'): %s vs %s", op_name,
                    sig->inputs[k], sig->inputs[0], variable, mf_shape_str(got, a, sizeof a),
                    mf_shape_str(var, b, sizeof b));
}

static mf_code apply_infer(mf_infer_ctx *ic, const train_sig *sig) {
  const char *const *in = sig->inputs;
  const int refs = num_refs(ic->def);
  for (int k = 0; ic->in_ports && k < refs; k++) {
    const mf_op *p = ic->in_ports[k].op;
    if (!(p->def->flags & MF_OP_VARIABLE))
      return MF_INVALID(ic->status,
                        "%s: Input '%s' of '%s' Op requires l-value input: '%s:%d' is a %s, not a "
                        "variable (create one with tf.Variable or tf.get_variable)",
                        ic->op_name, in[k], ic->def->name, p->name, ic->in_ports[k].index, p->def->name);
    for (int j = 0; j < k; j++)
      if (ic->in_ports[j].op == p)
        return MF_INVALID(ic->status,
                          "%s: inputs '%s' and '%s' are both the variable '%s'; each slot of %s "
                          "needs a variable of its own",
                          ic->op_name, in[j], in[k], p->name, ic->def->name);
  }
  mf_dtype t = ic->in_dtypes[0];
  if (!mf_dtype_is_float(t))
    return MF_INVALID(ic->status,
                      "%s: %s updates float32 or float64 variables, but '%s' has dtype %s",
                      ic->op_name, ic->def->name, in[0], mf_dtype_name(t));
  const mf_shape *var = &ic->in_shapes[0];
  mf_shape out = *var;
  for (int k = 1; k < ic->num_inputs; k++) {
    if (ic->in_dtypes[k] != t)
      return MF_INVALID(ic->status,
                        "%s: '%s' has dtype %s but '%s' has dtype %s; use tf.cast to convert it",
                        ic->op_name, in[k], mf_dtype_name(ic->in_dtypes[k]), in[0], mf_dtype_name(t));
    const mf_shape *s = &ic->in_shapes[k];
    char a[128];
    if (k < refs || k == sig->grad) {
      /* At run time the kernel checks the values themselves. */
      if (!ic->runtime && !mf_shape_compatible(var, s))
        return shape_mismatch(ic->status, ic->op_name, sig, k, ic->in_ports[0].op->name, var, s);
      if (out.rank < 0) out = *s;
      for (int d = 0; d < out.rank && s->rank == out.rank; d++)
        if (out.dims[d] < 0) out.dims[d] = s->dims[d];
    } else if (s->rank > 0) {
      return MF_INVALID(ic->status,
                        "%s: '%s' must be a scalar, got shape %s", ic->op_name, in[k],
                        mf_shape_str_tf(s, a, sizeof a));
    }
  }
  ic->out_dtypes[0] = t;
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* ---------- the kernel driver ---------- */

static bool same_dims(const mf_tensor *a, const mf_tensor *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

static mf_code apply_kernel(mf_kernel_ctx *ctx, const train_sig *sig) {
  const int nrefs = num_refs(ctx->op->def);
  double hp[MAX_HYPER];
  int nh = 0;
  for (int k = nrefs; k < ctx->num_inputs; k++)
    if (k != sig->grad) hp[nh++] = mf_load_double(ctx->inputs[k]->data, ctx->inputs[k]->dtype, 0);
  const mf_tensor *grad = ctx->inputs[sig->grad];
  mf_tensor *var = mf_kernel_ref_writable(ctx, 0);
  if (!var) return ctx->status->code;
  const char *variable = ctx->op->inputs[0].op->name;
  mf_shape var_shape = mf_shape_of(var);
  /* A variable created with validate_shape = false may change shape, so the
   * values are checked again here. */
  if (!same_dims(var, grad)) {
    mf_shape got = mf_shape_of(grad);
    return shape_mismatch(ctx->status, ctx->op->name, sig, sig->grad, variable, &var_shape, &got);
  }
  void *data[MAX_REFS] = {var->data};
  for (int k = 1; k < nrefs; k++) {
    mf_tensor *slot = mf_kernel_ref_writable(ctx, k);
    if (!slot) return ctx->status->code;
    if (!same_dims(var, slot)) {
      mf_shape got = mf_shape_of(slot);
      return shape_mismatch(ctx->status, ctx->op->name, sig, k, variable, &var_shape, &got);
    }
    data[k] = slot->data;
  }
  bool flag = sig->flag && mf_attr_bool(ctx->attrs, sig->flag, false);
  sig->update[var->dtype == MF_FLOAT64](data, grad->data, var->size, hp, flag);
  ctx->outputs[0] = mf_tensor_retain(var);
  return MF_OK;
}

/* Each op: its signature, number of inputs and number of refs. */
#define MF_TRAIN_OPS(X)                                    \
  X(ApplyGradientDescent, sig_gradient_descent, 3, 1)      \
  X(ApplyMomentum, sig_momentum, 5, 2)                     \
  X(ApplyAdam, sig_adam, 10, 3)                            \
  X(ApplyRMSProp, sig_rmsprop, 8, 3)                       \
  X(ApplyCenteredRMSProp, sig_centered_rmsprop, 9, 4)      \
  X(ApplyAdagrad, sig_adagrad, 4, 2)

#define MF_TRAIN_FNS(op, sig, n_in, n_refs)                                        \
  static mf_code op##_infer(mf_infer_ctx *ic) { return apply_infer(ic, &sig); } \
  static mf_code op##_kernel(mf_kernel_ctx *ctx) { return apply_kernel(ctx, &sig); }
MF_TRAIN_OPS(MF_TRAIN_FNS)
#undef MF_TRAIN_FNS

/* Updates are side effects (stateful) and have no gradient. */
#define MF_TRAIN_DEF(op, sig, n_in, n_refs)                                             \
  {.name = #op, .num_inputs = n_in, .num_outputs = 1, .ref_inputs = (1u << n_refs) - 1,  \
   .flags = MF_OP_STATEFUL | MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE,              \
   .infer = op##_infer, .kernel = {[MF_CPU] = op##_kernel}},

static const mf_op_def defs[] = {MF_TRAIN_OPS(MF_TRAIN_DEF)};
MF_OP_TABLE(mf_ops_train, defs);
