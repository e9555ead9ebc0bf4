/* while.c — While (tf.while_loop) and WhileGrad (its gradient: the body's
 * gradient function run backwards over the stashed iterations). Calling the
 * functions: call.c; While's gradient rule: function_grad.c. */
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

#include <string.h>

/* ---------- While(loop vars..., captures..., [maximum_iterations]) ----------
 * attrs cond/body (+ _in over the loop vars and captures, _out, body_stash),
 * int num_loop_vars, bool has_max (the last input caps the trip count), bool
 * back_prop, and bool fused_cond: the body also returns (after the loop
 * variables) the condition on its results, so an iteration is one run of
 * one function; the cond function then runs only before the first.
 * Outputs: the loop variables after the last iteration, then the stash (one
 * row per iteration). */

static mf_code while_infer(mf_infer_ctx *ic) {
  int nv = (int)mf_attr_int(ic->attrs, "num_loop_vars", -1);
  bool has_max = mf_attr_bool(ic->attrs, "has_max", false);
  int nin = ic->num_inputs - (has_max ? 1 : 0);
  if (nv < 0 || nv > nin)
    return MF_INVALID(ic->status, "%s: num_loop_vars %d does not fit %d inputs",
                      ic->op_name, nv, nin);
  fn_attr c, b;
  if (mf_fn_check(ic, "cond", &c, nin) || mf_fn_check(ic, "body", &b, nin)) return ic->status->code;
  bool fused = mf_attr_bool(ic->attrs, "fused_cond", false);
  if (c.nout != 1 || b.nout != nv + fused)
    return MF_INVALID(ic->status, "%s: cond must return 1 value and body %d, got %d and %d",
                      ic->op_name, nv + fused, c.nout, b.nout);
  if (has_max) {
    mf_dtype t = ic->in_dtypes[nin];
    if ((t != MF_INT32 && t != MF_INT64) || ic->in_shapes[nin].rank > 0)
      return MF_INVALID(ic->status,
                        "%s: maximum_iterations must be an int32 or int64 scalar, got %s", ic->op_name,
                        mf_dtype_name(t));
  }
  if (mf_infer_set_num_outputs(ic, nv + 1)) return ic->status->code;
  for (int k = 0; k < nv; k++) {
    mf_output r = mf_fn_result(&b, k);
    const char *name = ic->in_ports ? ic->in_ports[k].op->name : "?";
    int index = ic->in_ports ? ic->in_ports[k].index : 0;
    if (mf_port_dtype(r) != ic->in_dtypes[k])
      return MF_INVALID(ic->status,
                        "%s: loop variable %d ('%s:%d') enters the loop as %s, but the body returns %s "
                        "for it; use tf.cast in the body",
                        ic->op_name, k, name, index, mf_dtype_name(ic->in_dtypes[k]), mf_dtype_name(mf_port_dtype(r)));
    /* The shape invariant is the body argument's shape. */
    mf_shape inv = b.in[k] >= 0 ? mf_fn_op(&b, b.in[k])->out_shapes[0] : ic->in_shapes[k];
    const mf_shape *have = mf_port_shape(r);
    bool ok = inv.rank < 0 || have->rank == inv.rank;
    for (int d = 0; ok && inv.rank >= 0 && d < inv.rank; d++) ok = inv.dims[d] < 0 || have->dims[d] == inv.dims[d];
    if (!ok) {
      char a[128], h[128];
      mf_shape_str_tf(&inv, a, sizeof a);
      mf_shape_str_tf(have, h, sizeof h);
      if (mf_shape_compatible(&inv, &ic->in_shapes[k]) && inv.rank == ic->in_shapes[k].rank &&
          memcmp(inv.dims, ic->in_shapes[k].dims, (size_t)(inv.rank > 0 ? inv.rank : 0) * sizeof inv.dims[0]) == 0)
        return MF_INVALID(ic->status,
                          "Input tensor '%s:%d' (loop variable %d) has shape %s before the loop, but shape "
                          "%s after one iteration. Provide shape invariants using the `shape_invariants` "
                          "option of tf.while_loop (or set_shape() on the loop variables) to allow the "
                          "shape to vary across iterations",
                          name, index, k, a, h);
      return MF_INVALID(ic->status,
                        "Input tensor '%s:%d' (loop variable %d) has the shape invariant %s, but shape %s "
                        "after one iteration; provide a less specific shape invariant",
                        name, index, k, a, h);
    }
    ic->out_dtypes[k] = ic->in_dtypes[k];
    ic->out_shapes[k] = inv;
  }
  /* After the loop variables: a variable changing shape also changes the
   * shape of the condition the body computes on its results, and the
   * variable's error is the one that says what to do. */
  mf_output p = mf_fn_result(&c, 0);
  if (mf_port_dtype(p) != MF_BOOL || mf_port_shape(p)->rank > 0) {
    char buf[128];
    return MF_INVALID(ic->status,
                      "%s: cond must return a scalar bool, got a %s tensor of shape %s", ic->op_name,
                      mf_dtype_name(mf_port_dtype(p)), mf_shape_str_tf(mf_port_shape(p), buf, sizeof buf));
  }
  if (fused && (p = mf_fn_result(&b, nv), mf_port_dtype(p) != MF_BOOL || mf_port_shape(p)->rank > 0))
    return MF_INVALID(ic->status, "%s: the body's condition must be a scalar bool", ic->op_name);
  ic->out_dtypes[nv] = MF_INT64;
  ic->out_shapes[nv] = mf_shape_scalar();
  return MF_OK;
}

static bool read_count(const mf_tensor *t, int64_t *v) {
  if (t->rank != 0) return false;
  if (t->dtype == MF_INT32) *v = *(const int32_t *)t->data;
  else if (t->dtype == MF_INT64) *v = *(const int64_t *)t->data;
  else return false;
  return true;
}

/* Reads a condition's value into *go and gives the tensor back to the plan that made it. */
static mf_code read_pred(mf_kernel_ctx *ctx, mf_callable *plan, mf_tensor *pred, bool *go) {
  bool ok = mf_scalar_bool(pred, go);
  mf_function_recycle(plan, pred);
  if (!ok) return MF_INVALID(ctx->status, "%s: cond must return a scalar bool", ctx->op->name);
  return MF_OK;
}

/* Whether the loop's values fit the arguments of call c's scalar program. */
static bool args_fit(const fn_call *c, const mf_scalar_program *sp, mf_tensor *const *vals) {
  for (int j = 0; j < c->nargs; j++)
    if (!mf_scalar_fits(sp, false, j, vals[c->arg_src[j]])) return false;
  return true;
}

/* Sets the constants and arguments of call c's program in regs, and lists in
 * `moves` the (register, loop variable) pairs to set again before each run
 * (captures stay); returns how many. */
static int feed_args(const fn_call *c, const mf_scalar_program *sp, mf_tensor *const *vals, int nv, mf_scalar *regs,
                     int *moves) {
  int n = 0;
  mf_scalar_begin(sp, regs);
  for (int j = 0; j < c->nargs; j++) {
    const mf_tensor *t = vals[c->arg_src[j]];
    int reg = mf_scalar_feed_reg(sp, j);
    memcpy(&regs[reg], t->data, mf_dtype_size(t->dtype));
    if (c->arg_src[j] < nv) {
      moves[2 * n] = reg;
      moves[2 * n++ + 1] = c->arg_src[j];
    }
  }
  return n;
}

/* The loop in registers, when the cond and body functions are scalar
 * programs (kernel_api.h) that the loop variables and captures fit: each
 * iteration runs the body's program (and the cond's, unless the body returns
 * the condition), with no buffers and no function runs. kept, when set,
 * keeps no values (a linear body's gradient counts iterations only). False
 * when it does not apply: nothing was done. */
static bool while_scalar(mf_kernel_ctx *ctx, const fn_call *cc, const fn_call *bc, mf_tensor *const *vals, int nv,
                         bool fused, int64_t max, stash *kept) {
  const mf_scalar_program *cp = mf_function_scalar(ctx, cc->plan), *bp = mf_function_scalar(ctx, bc->plan);
  if (!cp || !bp || cc->nextra || bc->nextra || bc->nstash) return false;
  if (!args_fit(cc, cp, vals) || !args_fit(bc, bp, vals)) return false;
  for (int k = 0; k < nv; k++)  /* the outputs are the body's results, also after no iteration */
    if (!mf_scalar_fits(bp, true, k, vals[k])) return false;
  /* Per run of the body (and of cond): which registers take which loop
   * variables, and where the body leaves them. */
  mf_scalar creg[MF_SCALAR_MAX_REGS], breg[MF_SCALAR_MAX_REGS], *var = mf_malloc((size_t)(nv + 1) * sizeof *var);
  int *b_in = mf_malloc((size_t)(2 * (bc->nargs + cc->nargs) + nv + 1) * sizeof *b_in);
  if (!var || !b_in) {
    mf_free(var);
    mf_free(b_in);
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
    return true;
  }
  int *c_in = b_in + 2 * bc->nargs, *b_out = c_in + 2 * cc->nargs;
  for (int k = 0; k < nv; k++) {
    memcpy(&var[k], vals[k]->data, mf_dtype_size(vals[k]->dtype));
    b_out[k] = mf_scalar_fetch_reg(bp, k);
  }
  int nc = feed_args(cc, cp, vals, nv, creg, c_in), nb = feed_args(bc, bp, vals, nv, breg, b_in);
  int pred = fused ? mf_scalar_fetch_reg(bp, nv) : mf_scalar_fetch_reg(cp, 0);
  bool go = mf_scalar_run(ctx, cp, creg) == MF_OK && creg[mf_scalar_fetch_reg(cp, 0)].bytes[0];
  for (int64_t iter = 0; go && (max < 0 || iter < max); iter++) {
    for (int j = 0; j < nb; j++) breg[b_in[2 * j]] = var[b_in[2 * j + 1]];
    if (mf_scalar_run(ctx, bp, breg)) break;
    for (int k = 0; k < nv; k++) var[k] = breg[b_out[k]];
    if (kept && mf_stash_push(ctx, kept, NULL)) break;
    if (fused) {
      go = breg[pred].bytes[0];
      continue;
    }
    for (int j = 0; j < nc; j++) creg[c_in[2 * j]] = var[c_in[2 * j + 1]];
    go = mf_scalar_run(ctx, cp, creg) == MF_OK && creg[pred].bytes[0];
  }
  for (int k = 0; k < nv && mf_ok(ctx->status); k++) {
    breg[b_out[k]] = var[k];
    mf_scalar_output(ctx, bp, breg, k, k);
  }
  mf_free(var);
  mf_free(b_in);
  return true;
}

static mf_code while_kernel(mf_kernel_ctx *ctx) {
  int nv = (int)mf_attr_int(ctx->attrs, "num_loop_vars", 0);
  bool has_max = mf_attr_bool(ctx->attrs, "has_max", false);
  int nin = ctx->num_inputs - (has_max ? 1 : 0);
  int64_t max = -1;
  if (has_max && (!read_count(ctx->inputs[nin], &max) || max < 0))
    return MF_INVALID(ctx->status,
                      "%s: maximum_iterations must be a non-negative integer scalar", ctx->op->name);
  fn_attr c, b;
  mf_fn_get(ctx->attrs, "cond", &c);
  mf_fn_get(ctx->attrs, "body", &b);
  /* With a gradient reading the stash, the stash is made even when the body
   * keeps no values (a linear body): it still counts the iterations, which
   * WhileGrad runs the body's gradient for. */
  bool grad = ctx->outputs_read[nv] && mf_attr_bool(ctx->attrs, "back_prop", true);
  bool keep = grad && b.nstash > 0;
  fn_call *cc = mf_prepare_call(ctx, 0, &c, 0, NULL, 0, false);
  fn_call *bc = cc ? mf_prepare_call(ctx, 1 + keep, &b, keep ? b.nstash : 0, NULL, 0, false) : NULL;
  if (!bc) return ctx->status->code;
  int fused = mf_attr_bool(ctx->attrs, "fused_cond", false);
  int nfetch = nv + fused + bc->nstash;
  /* vals: the loop variables (our references) then the captures (borrowed). */
  mf_tensor **vals = mf_malloc((size_t)(nin + 1) * sizeof *vals);
  mf_tensor **out = mf_calloc((size_t)(nfetch + 1), sizeof *out);
  bool *move = mf_calloc((size_t)(nin + 1), sizeof *move);
  stash *kept = NULL;
  if (!vals || !out || !move) {
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int k = 0; k < nin; k++) vals[k] = k < nv ? mf_tensor_retain(ctx->inputs[k]) : ctx->inputs[k];
  for (int k = 0; k < nv; k++) move[k] = true;
  if (grad && !(kept = mf_stash_new(ctx, &b, 0))) goto done;
  if (while_scalar(ctx, cc, bc, vals, nv, fused, max, kept)) {
    if (mf_ok(ctx->status)) mf_set_stash_output(ctx, nv, kept);
    else mf_stash_free(kept);
    kept = NULL;
    goto done;
  }
  /* go: whether the body runs (again). The cond function decides first;
   * then the body itself when it returns the condition on its results. */
  bool go = false;
  mf_tensor *pred = NULL;
  if (!mf_run_call(ctx, cc, vals, NULL, NULL, false, &pred)) read_pred(ctx, cc->plan, pred, &go);
  for (int64_t iter = 0; go && (max < 0 || iter < max); iter++) {
    /* The loop variables move into the body: a value nobody else holds is updated in place. */
    mf_run_call(ctx, bc, vals, move, NULL, false, out);
    for (int k = 0; k < nv; k++) {
      mf_tensor_release(vals[k]);  /* those the body does not read */
      vals[k] = out[k];
      out[k] = NULL;
    }
    if (!mf_ok(ctx->status)) break;
    if (kept && mf_stash_push(ctx, kept, out + nv + fused)) break;
    go = false;
    if (fused) {
      read_pred(ctx, bc->plan, out[nv], &go);
      out[nv] = NULL;
    } else if (!mf_run_call(ctx, cc, vals, NULL, NULL, false, &pred)) {
      read_pred(ctx, cc->plan, pred, &go);
    }
    for (int i = nv + fused; i < nfetch; i++) {
      mf_tensor_release(out[i]);
      out[i] = NULL;
    }
  }
  if (mf_ok(ctx->status)) {
    for (int k = 0; k < nv; k++) {
      mf_tensor_release(ctx->outputs[k]);
      ctx->outputs[k] = vals[k];
      vals[k] = NULL;
    }
    mf_set_stash_output(ctx, nv, kept);
    kept = NULL;
  }
done:
  if (vals)
    for (int k = 0; k < nv; k++) mf_tensor_release(vals[k]);
  for (int i = 0; out && i < nfetch; i++) mf_tensor_release(out[i]);
  mf_stash_free(kept);
  mf_free(vals);
  mf_free(out);
  mf_free(move);
  return ctx->status->code;
}

/* ---------- WhileGrad(captures..., stash, dys...) ----------
 * attrs body (the forward body graph, holding the gradient function), body_in
 * (per input: the argument fed, -1 for the stash), body_out (the gradients of
 * the float loop variables, num_dx of them, then those of captures
 * dc_inputs), body_unstash (ports fed from the stash). Runs the gradient
 * function once per forward iteration, last first: the loop variables'
 * gradients pass from one to the next, the captures' are summed. */

static mf_code while_grad_infer(mf_infer_ctx *ic) {
  int ndx = (int)mf_attr_int(ic->attrs, "num_dx", -1);
  const int64_t *dc, *sparse;
  int ndc = mf_attr_ints(ic->attrs, "dc_inputs", &dc);
  int nsparse = mf_attr_ints(ic->attrs, "dc_sparse", &sparse);
  int nc = ic->num_inputs - 1 - ndx;
  fn_attr f;
  if (ndx < 0 || ndc < 0 || nsparse != ndc || nc < 0)
    return MF_INVALID(ic->status, "%s: bad attributes", ic->op_name);
  if (mf_fn_check(ic, "body", &f, ic->num_inputs)) return ic->status->code;
  int nports = ndx + ndc;
  for (int j = 0; j < ndc; j++) nports += sparse[j] != 0;
  if (f.nout != nports) return MF_INVALID(ic->status, "%s: bad outputs", ic->op_name);
  if (mf_infer_set_num_outputs(ic, ndx + ndc)) return ic->status->code;
  for (int i = 0, port = 0; i < ndx + ndc; i++, port++) {
    bool rows = i >= ndx && sparse[i - ndx];
    if (rows) port++;  /* the indices, then the rows */
    mf_output o = mf_fn_result(&f, port);
    ic->out_dtypes[i] = mf_port_dtype(o);
    ic->out_shapes[i] = *mf_port_shape(o);
    if (i >= ndx) {
      if (dc[i - ndx] < 0 || dc[i - ndx] >= nc) return MF_INVALID(ic->status, "%s: bad dc_inputs", ic->op_name);
      ic->out_shapes[i] = ic->in_shapes[dc[i - ndx]];
    }
  }
  return MF_OK;
}

/* WhileGrad has no gradient of its own: second derivatives through a loop
 * would need the values of every run of the body's gradient function, and
 * gradients through the forward loop's stash. Fails clearly, like If's, in
 * the autodiff driver's words for an op without a rule. */
static mf_code while_grad_grad(mf_grad_ctx *gc) {
  const mf_op *op = gc->op;
  int nc = op->num_inputs - 1 - (int)mf_attr_int(&op->attrs, "num_dx", 0);
  const char *loop = nc >= 0 && nc < op->num_inputs ? op->inputs[nc].op->name : "?";
  return mf_status_set(gc->status, MF_UNIMPLEMENTED,
                       "No gradient defined for operation '%s' (op type: WhileGrad): gradients of the gradient "
                       "of tf.while_loop ('%s') are not supported (second derivatives through loops); unroll "
                       "the loop in Lua for them, or wrap its input in tf.stop_gradient",
                       op->name, loop);
}

/* acc += v elementwise (float gradients of one shape); acc is replaced by a
 * new buffer unless nobody else holds it. */
static mf_code accumulate(mf_kernel_ctx *ctx, mf_tensor **acc, mf_tensor *v) {
  mf_tensor *a = *acc;
  if (!a) {
    *acc = mf_tensor_retain(v);
    return MF_OK;
  }
  if (a->size != v->size || a->dtype != v->dtype)
    return mf_status_set(ctx->status, MF_INTERNAL, "%s: gradients of one capture differ in shape", ctx->op->name);
  mf_tensor *dst = a;
  if (mf_tensor_refcount(a) != 1 || !a->owned) {
    dst = mf_kernel_new_tensor(ctx, a->dtype, a->rank, a->dims);
    if (!dst) return ctx->status->code;
  }
  int64_t n = a->size;
  if (a->dtype == MF_FLOAT32) {
    float *o = dst->data;
    const float *x = a->data, *y = v->data;
    for (int64_t i = 0; i < n; i++) o[i] = x[i] + y[i];
  } else {
    double *o = dst->data;
    const double *x = a->data, *y = v->data;
    for (int64_t i = 0; i < n; i++) o[i] = x[i] + y[i];
  }
  if (dst != a) {
    mf_tensor_release(a);
    *acc = dst;
  }
  return MF_OK;
}

/* Zeros of the shape of input k (a variable's value for a ref input). */
static mf_tensor *zeros_like_input(mf_kernel_ctx *ctx, int k, mf_dtype dtype) {
  mf_tensor *like = ctx->inputs[k] ? ctx->inputs[k] : mf_kernel_ref_state(ctx, k)->ptr;
  if (!like) {
    mf_status_set(ctx->status, MF_FAILED_PRECONDITION, "%s: a variable the loop reads has no value", ctx->op->name);
    return NULL;
  }
  mf_tensor *z = mf_kernel_new_tensor(ctx, dtype, like->rank, like->dims);  /* on the kernel's device */
  if (z) memset(z->data, 0, mf_tensor_nbytes(z));
  return z;
}

static mf_code while_grad_kernel(mf_kernel_ctx *ctx) {
  int ndx = (int)mf_attr_int(ctx->attrs, "num_dx", 0);
  const int64_t *dc_in, *unstash, *sparse;
  int ndc = mf_attr_ints(ctx->attrs, "dc_inputs", &dc_in);
  mf_attr_ints(ctx->attrs, "dc_sparse", &sparse);
  int nunstash = mf_attr_ints(ctx->attrs, "body_unstash", &unstash) / 2;
  if (nunstash < 0) nunstash = 0;
  int nc = ctx->num_inputs - 1 - ndx;
  fn_attr f;
  mf_fn_get(ctx->attrs, "body", &f);
  stash *st;
  mf_tensor *handle = ctx->inputs[nc];
  if (mf_stash_of(ctx, handle, &st)) return ctx->status->code;
  int niter = st ? st->niter : 0;
  /* The stash is ours alone when its handle dies here: its values then move
   * into the gradient function and are freed as the backward pass goes. */
  bool own = st && nc < 32 && (ctx->dying_inputs >> nc & 1u) && mf_tensor_refcount(handle) == 1;
  fn_call *call = mf_prepare_call(ctx, 0, &f, 0, unstash, nunstash, true);
  if (!call) return ctx->status->code;
  int nin = ctx->num_inputs;
  mf_tensor **vals = mf_malloc((size_t)(nin + 1) * sizeof *vals);
  mf_tensor **out = mf_calloc((size_t)(f.nout + 1), sizeof *out);
  mf_tensor **acc = mf_calloc((size_t)(ndc + 1), sizeof *acc);
  mf_tensor **extra = mf_calloc((size_t)(nunstash + 1), sizeof *extra);
  int *cols = mf_malloc((size_t)(nunstash + 1) * sizeof *cols);
  bool *move = mf_calloc((size_t)(nin + 1), sizeof *move);
  if (!vals || !out || !acc || !extra || !cols || !move) {
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int i = 0; i < nunstash && niter > 0; i++)
    if ((cols[i] = mf_stash_column(st, &unstash[2 * i])) < 0) {
      mf_status_set(ctx->status, MF_INTERNAL, "%s: a value the gradient needs was not kept", ctx->op->name);
      goto done;
    }
  for (int k = 0; k < nin; k++) vals[k] = ctx->inputs[k];
  for (int i = 0; i < ndx; i++) {
    vals[nc + 1 + i] = mf_tensor_retain(ctx->inputs[nc + 1 + i]);
    move[nc + 1 + i] = true;
  }
  for (int t = niter - 1; t >= 0 && mf_ok(ctx->status); t--) {
    mf_tensor **row = st->values + (size_t)t * (size_t)st->nports;
    for (int i = 0; i < nunstash; i++) extra[i] = row[cols[i]];
    mf_gradient_depth++;
    mf_run_call(ctx, call, vals, move, extra, false, out);
    mf_gradient_depth--;
    if (own)
      for (int i = 0; i < st->nports; i++) {
        mf_tensor_release(row[i]);
        row[i] = NULL;
      }
    for (int i = 0; i < ndx; i++) {
      mf_tensor_release(vals[nc + 1 + i]);
      vals[nc + 1 + i] = out[i];
      out[i] = NULL;
    }
    /* The captures' gradients add up: dense ones whole, scattered rows (a
     * TensorArray read) row by row into a sum made once. */
    for (int j = 0, port = ndx; j < ndc && mf_ok(ctx->status); j++, port++) {
      if (!sparse[j]) {
        accumulate(ctx, &acc[j], out[port]);
        continue;
      }
      if (!acc[j] && !(acc[j] = zeros_like_input(ctx, (int)dc_in[j], out[port + 1]->dtype))) break;
      mf_add_rows(ctx, acc[j], out[port], out[port + 1]);
      port++;
    }
    for (int i = ndx; i < f.nout; i++) {
      mf_tensor_release(out[i]);
      out[i] = NULL;
    }
  }
  if (!mf_ok(ctx->status)) goto done;
  for (int i = 0; i < ndx; i++) {
    mf_tensor_release(ctx->outputs[i]);
    ctx->outputs[i] = vals[nc + 1 + i];
    vals[nc + 1 + i] = NULL;
  }
  for (int j = 0; j < ndc; j++) {
    mf_tensor *a = acc[j];
    if (!a && !(a = zeros_like_input(ctx, (int)dc_in[j], ctx->op->out_dtypes[ndx + j]))) goto done;
    acc[j] = NULL;
    mf_tensor_release(ctx->outputs[ndx + j]);
    ctx->outputs[ndx + j] = a;
  }
done:
  if (vals)
    for (int i = 0; i < ndx; i++) mf_tensor_release(vals[nc + 1 + i]);
  for (int i = 0; out && i < f.nout; i++) mf_tensor_release(out[i]);
  for (int j = 0; acc && j < ndc; j++) mf_tensor_release(acc[j]);
  mf_free(vals);
  mf_free(out);
  mf_free(acc);
  mf_free(extra);
  mf_free(cols);
  mf_free(move);
  return ctx->status->code;
}

static const mf_op_def defs[] = {
    {.name = "While", .num_inputs = 0, .num_outputs = -1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_VARIADIC_INPUTS,
     .infer = while_infer, .kernel = {[MF_CPU] = while_kernel}, .grad = mf_while_grad},
    {.name = "WhileGrad", .num_inputs = 1, .num_outputs = -1,
     .flags = MF_OP_INTERNAL | MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_VARIADIC_INPUTS,
     .infer = while_grad_infer, .kernel = {[MF_CPU] = while_grad_kernel}, .grad = while_grad_grad},
};
MF_OP_TABLE(mf_ops_while, defs);
