/* state.c — variables: VariableV2, Assign, AssignAdd, AssignSub,
 * ReadVariable, IsVariableInitialized.
 *
 * A variable's value lives in the session, not the graph: it is the
 * VariableV2 op's per-session state slot (an mf_tensor*), so two sessions on
 * one graph hold independent values. The other ops name the variable through
 * a ref input (mf_op_def.ref_inputs): the variable op does not run for them,
 * so assigning an uninitialized variable works.
 *
 * Sharing rule: a value is written in place only when nobody else holds it
 * (refcount 1, data owned). A read hands out the state tensor itself without
 * copying, so a run that read the variable, a fetched result the caller
 * keeps, or a downstream op still holding it all raise the refcount, and the
 * next assignment then builds a fresh buffer and swaps it in (copy on write).
 * What a reader saw therefore never changes under it. In the steady state of
 * a loop such as `assign(x, x + 1)` the reads have died by the time the
 * assignment runs, so the update happens in place and allocates nothing. */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"
#include "ops/variables.h"

#include <stdio.h>
#include <string.h>

static void release_value(void *p) { mf_tensor_release(p); }

static bool is_variable_op(const mf_op *op) { return op->def->flags & MF_OP_VARIABLE; }

static bool same_shape(const mf_tensor *a, const mf_tensor *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

/* Whether the value may be overwritten: nobody else holds it. */
static bool writable(const mf_tensor *t) {
  return mf_tensor_refcount(t) == 1 && t->owned && t->device == MF_CPU;
}

/* The variable op behind ref input k (for messages). */
static const mf_op *ref_op(const mf_kernel_ctx *ctx, int k) { return ctx->op->inputs[k].op; }

/* TensorFlow's message. The executor appends the failing node and its line;
 * when that node is not the variable itself, name the variable's line too. */
static mf_code uninitialized(mf_kernel_ctx *ctx, const mf_op *var) {
  mf_status_set(ctx->status, MF_FAILED_PRECONDITION, "Attempting to use uninitialized value %s", var->name);
  if (var != ctx->op && var->origin[0]) mf_status_append(ctx->status, " (created at %s)", var->origin);
  return ctx->status->code;
}

/* Copies src's elements into dst (same size); an empty value may have no data. */
static void copy_value(mf_tensor *dst, const mf_tensor *src) {
  size_t n = mf_tensor_nbytes(src);
  if (n) memcpy(dst->data, src->data, n);
}

/* Replaces the variable's value; takes the caller's reference to v. */
static void state_set(mf_state_slot *slot, mf_tensor *v) {
  mf_tensor *old = slot->ptr;
  slot->ptr = v;
  slot->free = release_value;
  mf_tensor_release(old);
}

/* For a kernel that updates the variable behind ref input k in place (the
 * training ops): its value, which the caller may overwrite. A value someone
 * else holds is copied first and the copy becomes the variable's (the sharing
 * rule above). NULL with TensorFlow's message when the variable has no value,
 * or when out of memory. */
mf_tensor *mf_kernel_ref_writable(mf_kernel_ctx *ctx, int k) {
  mf_state_slot *slot = mf_kernel_ref_state(ctx, k);
  mf_tensor *cur = slot->ptr;
  if (!cur) {
    uninitialized(ctx, ref_op(ctx, k));
    return NULL;
  }
  if (writable(cur)) return cur;
  mf_tensor *fresh = mf_kernel_new_tensor(ctx, cur->dtype, cur->rank, cur->dims);
  if (!fresh) return NULL;
  copy_value(fresh, cur);
  state_set(slot, fresh);
  return fresh;
}

/* ---------- VariableV2: attrs dtype, shape (optional; unknown dims allowed) ---------- */

static mf_code variable_infer(mf_infer_ctx *ic) {
  const mf_attr *t = mf_attrs_find(ic->attrs, "dtype", MF_ATTR_TYPE);
  if (!t || !mf_dtype_size(t->v.type))
    return MF_INVALID(ic->status, "%s: a variable needs a valid 'dtype'", ic->op_name);
  const mf_attr *sh = mf_attrs_find(ic->attrs, "shape", MF_ATTR_SHAPE);
  ic->out_dtypes[0] = t->v.type;
  ic->out_shapes[0] = sh ? sh->v.shape : mf_shape_unknown();
  return MF_OK;
}

/* A read: the value itself, shared (see the sharing rule above). */
static mf_code variable_kernel(mf_kernel_ctx *ctx) {
  mf_tensor *v = ctx->state->ptr;
  if (!v) return uninitialized(ctx, ctx->op);
  ctx->outputs[0] = mf_tensor_retain(v);
  return MF_OK;
}

/* ---------- ops on a variable: input 0 is the ref ---------- */

/* Checks that input 0 names a variable (build time) and that the value has
 * its dtype; the value's shape must be compatible with the variable's unless
 * `shape_free`. Sets output 0 to the value's dtype and the merged shape. */
static mf_code ref_value_infer(mf_infer_ctx *ic, bool shape_free) {
  /* At run time the ports are gone; the executor's suffix names the node. */
  char var[1100] = "the variable";
  if (ic->in_ports) {
    const mf_op *producer = ic->in_ports[0].op;
    if (!is_variable_op(producer))
      return MF_INVALID(ic->status,
                        "%s: Input 'ref' of '%s' Op requires l-value input: '%s:%d' is a %s, not a "
                        "variable (create one with tf.Variable or tf.get_variable)",
                        ic->op_name, ic->def->name, producer->name, ic->in_ports[0].index,
                        producer->def->name);
    snprintf(var, sizeof var, "variable '%s'", producer->name);
  }
  mf_dtype vt = ic->in_dtypes[0];
  if (ic->num_inputs > 1) {
    if (ic->in_dtypes[1] != vt)
      return MF_INVALID(ic->status,
                        "%s: the value has dtype %s but %s has dtype %s; use tf.cast "
                        "to convert the value",
                        ic->op_name, mf_dtype_name(ic->in_dtypes[1]), var, mf_dtype_name(vt));
    const mf_shape *a = &ic->in_shapes[0], *b = &ic->in_shapes[1];
    if (!shape_free && !mf_shape_compatible(a, b)) {
      char sa[128], sb[128];
      return MF_INVALID(ic->status,
                        "%s: Shapes must be equal: %s has shape %s but the value has "
                        "shape %s; build a value of the variable's shape (tf.fill, tf.reshape)%s",
                        ic->op_name, var, mf_shape_str_tf(a, sa, sizeof sa),
                        mf_shape_str_tf(b, sb, sizeof sb),
                        strcmp(ic->def->name, "Assign") == 0 ? " or pass validate_shape = false" : "");
    }
    mf_shape out = *b;
    if (!shape_free && out.rank < 0) out = *a;
    for (int d = 0; !shape_free && out.rank >= 0 && d < out.rank; d++)
      if (out.dims[d] < 0 && a->rank == out.rank) out.dims[d] = a->dims[d];
    ic->out_shapes[0] = out;
  } else {
    ic->out_shapes[0] = ic->in_shapes[0];
  }
  ic->out_dtypes[0] = vt;
  return MF_OK;
}

/* Assign(ref, value), attr validate_shape (default true): the variable takes
 * the value; output: the new value. */
static mf_code assign_infer(mf_infer_ctx *ic) {
  return ref_value_infer(ic, !mf_attr_bool(ic->attrs, "validate_shape", true));
}

static mf_code shape_mismatch(mf_kernel_ctx *ctx, const mf_tensor *var, const mf_tensor *value) {
  char a[128], b[128];
  mf_shape sa = mf_shape_of(var), sb = mf_shape_of(value);
  return MF_INVALID(ctx->status,
                    "%s: %s requires shapes of both tensors to match. lhs shape= %s rhs shape= %s "
                    "(variable '%s')",
                    ctx->op->name, ctx->op->def->name, mf_shape_str(&sa, a, sizeof a),
                    mf_shape_str(&sb, b, sizeof b), ref_op(ctx, 0)->name);
}

static mf_code assign_kernel(mf_kernel_ctx *ctx) {
  mf_state_slot *slot = mf_kernel_ref_state(ctx, 0);
  mf_tensor *cur = slot->ptr, *value = ctx->inputs[1];
  bool validate = mf_attr_bool(ctx->attrs, "validate_shape", true);
  if (validate && cur && !same_shape(cur, value)) return shape_mismatch(ctx, cur, value);
  if (cur == value) {                       /* tf.assign(v, v) */
    ctx->outputs[0] = mf_tensor_retain(cur);
    return MF_OK;
  }
  if (cur && writable(cur) && same_shape(cur, value) && cur->dtype == value->dtype) {
    copy_value(cur, value);
    ctx->outputs[0] = mf_tensor_retain(cur);
    return MF_OK;
  }
  mf_tensor *fresh;
  if (writable(value)) {
    /* Nobody else holds the value, so it becomes the variable's as is: an
     * initializer's random numbers are not copied. */
    fresh = mf_tensor_retain(value);
    ctx->outputs[0] = mf_tensor_retain(value);
  } else {
    fresh = mf_kernel_alloc_output(ctx, 0, value->dtype, value->rank, value->dims);
    if (!fresh) return ctx->status->code;
    copy_value(fresh, value);
    mf_tensor_retain(fresh);
  }
  state_set(slot, fresh);
  return MF_OK;
}

/* AssignAdd / AssignSub(ref, value): value of the variable's shape. */
static mf_code assign_update_infer(mf_infer_ctx *ic) {
  if (!mf_dtype_size(ic->in_dtypes[0]) || ic->in_dtypes[0] == MF_BOOL)
    return MF_INVALID(ic->status, "%s: %s needs a numeric variable, got %s",
                      ic->op_name, ic->def->name, mf_dtype_name(ic->in_dtypes[0]));
  return ref_value_infer(ic, false);
}

/* out = a + sign * b elementwise, one dtype switch outside the loop. out may be a. */
static void accumulate(mf_tensor *out, const mf_tensor *a, const mf_tensor *b, bool subtract) {
  int64_t n = out->size;
  switch (out->dtype) {
#define ACCUM(ENUM, T)                                                  \
  case ENUM: {                                                          \
    T *o = out->data;                                                   \
    const T *x = a->data, *y = b->data;                                 \
    if (subtract) for (int64_t i = 0; i < n; i++) o[i] = (T)(x[i] - y[i]); \
    else for (int64_t i = 0; i < n; i++) o[i] = (T)(x[i] + y[i]);       \
    break;                                                              \
  }
    MF_FOR_NUMERIC_TYPES(ACCUM)
    MF_FOR_COMPLEX_TYPES(ACCUM)
#undef ACCUM
    default: break;
  }
}

static mf_code assign_update(mf_kernel_ctx *ctx, bool subtract) {
  mf_state_slot *slot = mf_kernel_ref_state(ctx, 0);
  mf_tensor *cur = slot->ptr, *value = ctx->inputs[1];
  if (!cur) return uninitialized(ctx, ref_op(ctx, 0));
  if (!same_shape(cur, value)) return shape_mismatch(ctx, cur, value);
  if (writable(cur)) {
    accumulate(cur, cur, value, subtract);
    ctx->outputs[0] = mf_tensor_retain(cur);
    return MF_OK;
  }
  mf_tensor *fresh = mf_kernel_alloc_output(ctx, 0, cur->dtype, cur->rank, cur->dims);
  if (!fresh) return ctx->status->code;
  accumulate(fresh, cur, value, subtract);
  state_set(slot, mf_tensor_retain(fresh));
  return MF_OK;
}

static mf_code assign_add_kernel(mf_kernel_ctx *ctx) { return assign_update(ctx, false); }
static mf_code assign_sub_kernel(mf_kernel_ctx *ctx) { return assign_update(ctx, true); }

/* ReadVariable(ref): the value when this op runs, so that it honours its
 * control dependencies (v:read_value() after an update), where a plain use
 * of the variable's tensor reads it when the variable op runs. */
static mf_code read_infer(mf_infer_ctx *ic) { return ref_value_infer(ic, false); }

static mf_code read_kernel(mf_kernel_ctx *ctx) {
  mf_tensor *v = mf_kernel_ref_state(ctx, 0)->ptr;
  if (!v) return uninitialized(ctx, ref_op(ctx, 0));
  ctx->outputs[0] = mf_tensor_retain(v);
  return MF_OK;
}

/* A read passes its gradient to the variable it reads. */
static mf_code read_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = gc->grads[0];
  return MF_OK;
}

/* IsVariableInitialized(ref): a bool scalar. */
static mf_code is_initialized_infer(mf_infer_ctx *ic) {
  mf_code rc = ref_value_infer(ic, false);
  if (rc) return rc;
  ic->out_dtypes[0] = MF_BOOL;
  ic->out_shapes[0] = mf_shape_scalar();
  return MF_OK;
}

static mf_code is_initialized_kernel(mf_kernel_ctx *ctx) {
  *(bool *)ctx->outputs[0]->data = mf_kernel_ref_state(ctx, 0)->ptr != NULL;
  return MF_OK;
}

static const mf_op_def defs[] = {
    /* Its gradient is the driver's business: a variable is an x of tf.gradients. */
    {.name = "VariableV2", .num_inputs = 0, .num_outputs = 1,
     .flags = MF_OP_STATEFUL | MF_OP_SETS_OUTPUTS | MF_OP_VARIABLE | MF_OP_COMPLEX,
     .infer = variable_infer, .kernel = {[MF_CPU] = variable_kernel}},
    {.name = "Assign", .num_inputs = 2, .num_outputs = 1, .ref_inputs = 1u << 0,
     .flags = MF_OP_STATEFUL | MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_COMPLEX,
     .infer = assign_infer, .kernel = {[MF_CPU] = assign_kernel}},
    {.name = "AssignAdd", .num_inputs = 2, .num_outputs = 1, .ref_inputs = 1u << 0,
     .flags = MF_OP_STATEFUL | MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_COMPLEX,
     .infer = assign_update_infer, .kernel = {[MF_CPU] = assign_add_kernel}},
    {.name = "AssignSub", .num_inputs = 2, .num_outputs = 1, .ref_inputs = 1u << 0,
     .flags = MF_OP_STATEFUL | MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_COMPLEX,
     .infer = assign_update_infer, .kernel = {[MF_CPU] = assign_sub_kernel}},
    {.name = "ReadVariable", .num_inputs = 1, .num_outputs = 1, .ref_inputs = 1u << 0,
     .flags = MF_OP_STATEFUL | MF_OP_SETS_OUTPUTS | MF_OP_COMPLEX,
     .infer = read_infer, .kernel = {[MF_CPU] = read_kernel}, .grad = read_grad},
    {.name = "IsVariableInitialized", .num_inputs = 1, .num_outputs = 1, .ref_inputs = 1u << 0,
     .flags = MF_OP_STATEFUL | MF_OP_NOT_DIFFERENTIABLE | MF_OP_COMPLEX,
     .infer = is_initialized_infer, .kernel = {[MF_CPU] = is_initialized_kernel}},
};
MF_OP_TABLE(mf_ops_state, defs);
