/* cond.c — If (tf.cond, and the gradient of an If) and _CaseIndex (which
 * branch tf.case takes). Calling the branches: call.c; If's gradient rule:
 * function_grad.c. */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"
#include "ops/control/control.h"

#include <stdio.h>
#include <string.h>

/* ---------- If(pred, inputs...) ----------
 * attrs then/else (+ _in, _out, _stash) and, for the gradient of an If, bool
 * "gradient": then its last input is the forward If's stash, whose values
 * feed the ports listed in then_unstash / else_unstash, and effects do not
 * run. Outputs: the branch results, then the stash. */

/* The most specific shape both a and b have, what either branch may give:
 * dims that differ become unknown (unlike mf_merge_shapes, which narrows). */
static mf_shape either_shape(const mf_shape *a, const mf_shape *b) {
  if (a->rank < 0 || b->rank < 0 || a->rank != b->rank) return mf_shape_unknown();
  mf_shape out = *a;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) out.dims[d] = -1;
  return out;
}

static mf_code if_infer(mf_infer_ctx *ic) {
  if (ic->in_dtypes[0] != MF_BOOL || ic->in_shapes[0].rank > 0) {
    char buf[128];
    return MF_INVALID(ic->status,
                      "%s: the predicate must be a scalar bool, got a %s tensor of shape %s",
                      ic->op_name, mf_dtype_name(ic->in_dtypes[0]),
                      mf_shape_str_tf(&ic->in_shapes[0], buf, sizeof buf));
  }
  bool stash_in = mf_attr_bool(ic->attrs, "gradient", false);
  int nin = ic->num_inputs - 1 - (stash_in ? 1 : 0);
  fn_attr t, e;
  if (mf_fn_check(ic, "then", &t, nin) || mf_fn_check(ic, "else", &e, nin)) return ic->status->code;
  if (t.nout != e.nout)
    return MF_INVALID(ic->status, "%s: the branches return %d and %d values",
                      ic->op_name, t.nout, e.nout);
  for (int k = 0; k < nin; k++) {
    const int64_t ids[2] = {t.in[k], e.in[k]};
    const fn_attr *fs[2] = {&t, &e};
    for (int b = 0; b < 2; b++)
      if (ids[b] >= 0 && mf_fn_op(fs[b], ids[b])->out_dtypes[0] != ic->in_dtypes[1 + k])
        return MF_INVALID(ic->status, "%s: input %d has dtype %s, its argument %s",
                          ic->op_name, k + 1, mf_dtype_name(ic->in_dtypes[1 + k]),
                          mf_dtype_name(mf_fn_op(fs[b], ids[b])->out_dtypes[0]));
  }
  if (mf_infer_set_num_outputs(ic, t.nout + 1)) return ic->status->code;
  for (int i = 0; i < t.nout; i++) {
    mf_output a = mf_fn_result(&t, i), b = mf_fn_result(&e, i);
    if (mf_port_dtype(a) != mf_port_dtype(b))
      return MF_INVALID(ic->status,
                        "%s: output %d has dtype %s in the true branch but %s in the false branch",
                        ic->op_name, i, mf_dtype_name(mf_port_dtype(a)), mf_dtype_name(mf_port_dtype(b)));
    ic->out_dtypes[i] = mf_port_dtype(a);
    ic->out_shapes[i] = either_shape(mf_port_shape(a), mf_port_shape(b));
  }
  ic->out_dtypes[t.nout] = MF_INT64;
  ic->out_shapes[t.nout] = mf_shape_scalar();
  return MF_OK;
}

static mf_code if_kernel(mf_kernel_ctx *ctx) {
  bool pred;
  if (!mf_scalar_bool(ctx->inputs[0], &pred)) {
    char buf[128];
    mf_shape sh = mf_shape_of(ctx->inputs[0]);
    return MF_INVALID(ctx->status,
                      "%s: the predicate must be a scalar bool, got shape %s", ctx->op->name,
                      mf_shape_str_tf(&sh, buf, sizeof buf));
  }
  int branch = pred ? 0 : 1;
  fn_attr f;
  mf_fn_get(ctx->attrs, branch == 0 ? "then" : "else", &f);
  int nres = ctx->num_outputs - 1;
  bool keep = ctx->outputs_read[nres] && f.nstash > 0;
  /* A gradient If feeds the values the forward If kept to the ports it lists. */
  const int64_t *unstash = NULL;
  int nunstash = 0;
  stash *st = NULL;
  bool gradient = mf_attr_bool(ctx->attrs, "gradient", false);
  if (gradient) {
    nunstash = mf_attr_ints(ctx->attrs, branch == 0 ? "then_unstash" : "else_unstash", &unstash) / 2;
    if (nunstash < 0) nunstash = 0;
    if (mf_stash_of(ctx, ctx->inputs[ctx->num_inputs - 1], &st)) return ctx->status->code;
    if (nunstash > 0 && (!st || st->branch != branch || st->niter != 1))
      return mf_status_set(ctx->status, MF_INTERNAL, "%s: the forward If kept no values for this branch",
                           ctx->op->name);
  }
  fn_call *call = mf_prepare_call(ctx, branch * 2 + keep, &f, keep ? f.nstash : 0, unstash, nunstash, gradient);
  if (!call) return ctx->status->code;
  int nfetch = nres + call->nstash;
  mf_tensor *inline_out[16], *inline_extra[16];
  mf_tensor **out = nfetch <= 16 ? inline_out : mf_calloc((size_t)nfetch, sizeof *out);
  mf_tensor **extra = nunstash <= 16 ? inline_extra : mf_calloc((size_t)nunstash, sizeof *extra);
  if (!out || !extra) {
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int i = 0; i < nfetch; i++) out[i] = NULL;
  for (int i = 0; i < nunstash; i++) {
    int col = mf_stash_column(st, &unstash[2 * i]);
    if (col < 0) {
      mf_status_set(ctx->status, MF_INTERNAL, "%s: a value the gradient needs was not kept", ctx->op->name);
      goto done;
    }
    extra[i] = st->values[col];
  }
  mf_gradient_depth += gradient;
  mf_run_call(ctx, call, ctx->inputs + 1, NULL, extra, false, out);
  mf_gradient_depth -= gradient;
  if (!mf_ok(ctx->status)) goto done;
  for (int i = 0; i < nres; i++) {
    mf_tensor_release(ctx->outputs[i]);
    ctx->outputs[i] = out[i];
    out[i] = NULL;
  }
  stash *kept = NULL;
  if (keep) {
    kept = mf_stash_new(ctx, &f, branch);
    if (!kept) goto done;
    if (mf_stash_push(ctx, kept, out + nres)) {
      mf_stash_free(kept);
      goto done;
    }
  }
  mf_set_stash_output(ctx, nres, kept);
done:
  for (int i = 0; out && i < nfetch; i++) mf_tensor_release(out[i]);
  if (out != inline_out) mf_free(out);
  if (extra != inline_extra) mf_free(extra);
  return ctx->status->code;
}

/* ---------- _CaseIndex(preds): which branch tf.case takes ----------
 * preds bool [n]; attrs exclusive (bool), names (string, the predicates'
 * names for the error). Output int32: the first true one, n when none. */

static mf_code case_index_infer(mf_infer_ctx *ic) {
  if (ic->in_dtypes[0] != MF_BOOL || ic->in_shapes[0].rank != 1)
    return MF_INVALID(ic->status, "%s: expects a bool vector of predicates", ic->op_name);
  ic->out_dtypes[0] = MF_INT32;
  ic->out_shapes[0] = mf_shape_scalar();
  return MF_OK;
}

static mf_code case_index_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *p = ctx->inputs[0];
  const bool *v = p->data;
  int64_t first = p->size, count = 0;
  for (int64_t i = p->size - 1; i >= 0; i--)
    if (v[i]) first = i, count++;
  if (count > 1 && mf_attr_bool(ctx->attrs, "exclusive", false)) {
    /* TensorFlow's words, with the predicates' values as its Assert prints them: [1 1 0]. */
    const mf_attr *names = mf_attrs_find(ctx->attrs, "names", MF_ATTR_STRING);
    char vals[256];
    size_t at = 0;
    vals[at++] = '[';
    for (int64_t i = 0; i < p->size && at + 8 < sizeof vals; i++) {
      if (i) vals[at++] = ' ';
      vals[at++] = v[i] ? '1' : '0';
      if (i + 1 < p->size && at + 8 >= sizeof vals) at += (size_t)snprintf(vals + at, sizeof vals - at, " ...");
    }
    vals[at++] = ']';
    vals[at] = '\0';
    return MF_INVALID(ctx->status,
                      "More than one condition evaluated as True but exclusive=True. Conditions: (%s), "
                      "Values: %s (%lld of them are True)",
                      names ? names->v.s : "", vals, (long long)count);
  }
  *(int32_t *)ctx->outputs[0]->data = (int32_t)first;
  return MF_OK;
}

static const mf_op_def defs[] = {
    {.name = "If", .num_inputs = 1, .num_outputs = -1, .host_inputs = 1u << 0,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_VARIADIC_INPUTS,
     .infer = if_infer, .kernel = {[MF_CPU] = if_kernel}, .grad = mf_if_grad},
    {.name = "_CaseIndex", .num_inputs = 1, .num_outputs = 1, .host_inputs = 1u << 0,
     .flags = MF_OP_INTERNAL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = case_index_infer, .kernel = {[MF_CPU] = case_index_kernel}},
};
MF_OP_TABLE(mf_ops_cond, defs);
