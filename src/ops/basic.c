/* basic.c — sources and plumbing: Const, Placeholder, Identity, StopGradient, NoOp. */
#include "core/status.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "kernels/helpers.h"

#include <stdio.h>

/* Const: attr "value" (tensor). */
static mf_code const_infer(mf_infer_ctx *ic) {
  const mf_attr *v = mf_attrs_find(ic->attrs, "value", MF_ATTR_TENSOR);
  if (!v) return MF_INVALID(ic->status, "%s: Const needs a 'value' attribute", ic->op_name);
  ic->out_dtypes[0] = v->v.tensor->dtype;
  ic->out_shapes[0] = mf_shape_of(v->v.tensor);
  return MF_OK;
}
static mf_code const_kernel(mf_kernel_ctx *ctx) {
  ctx->outputs[0] = mf_tensor_retain(mf_attrs_find(ctx->attrs, "value", MF_ATTR_TENSOR)->v.tensor);
  return MF_OK;
}

/* Placeholder: attrs "dtype" (type) and optional "shape" (shape). */
static mf_code placeholder_infer(mf_infer_ctx *ic) {
  const mf_attr *t = mf_attrs_find(ic->attrs, "dtype", MF_ATTR_TYPE);
  if (!t || !mf_dtype_size(t->v.type))
    return MF_INVALID(ic->status, "%s: Placeholder needs a valid 'dtype'", ic->op_name);
  const mf_attr *sh = mf_attrs_find(ic->attrs, "shape", MF_ATTR_SHAPE);
  ic->out_dtypes[0] = t->v.type;
  ic->out_shapes[0] = sh ? sh->v.shape : mf_shape_unknown();
  return MF_OK;
}
static mf_code placeholder_kernel(mf_kernel_ctx *ctx) {
  const mf_shape *sh = &ctx->op->out_shapes[0];
  const char *dtype = mf_dtype_name(ctx->op->out_dtypes[0]);
  if (sh->rank < 0)
    return MF_INVALID(ctx->status,
                      "You must feed a value for placeholder tensor '%s' with dtype %s",
                      ctx->op->name, dtype);
  char buf[160];
  return MF_INVALID(ctx->status,
                    "You must feed a value for placeholder tensor '%s' with dtype %s and shape %s",
                    ctx->op->name, dtype, mf_shape_str(sh, buf, sizeof buf));
}

/* Identity: forwards its input without copying. */
static mf_code identity_infer(mf_infer_ctx *ic) {
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}
static mf_code identity_kernel(mf_kernel_ctx *ctx) {
  ctx->outputs[0] = mf_tensor_retain(ctx->inputs[0]);
  return MF_OK;
}

static mf_code identity_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = gc->grads[0];
  return MF_OK;
}

/* NoOp: groups control inputs. */
static mf_code noop_infer(mf_infer_ctx *ic) { MF_UNUSED(ic); return MF_OK; }
static mf_code noop_kernel(mf_kernel_ctx *ctx) { MF_UNUSED(ctx); return MF_OK; }

static const mf_op_def defs[] = {
    {.name = "Const", .num_inputs = 0, .num_outputs = 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_CONSTANT | MF_OP_STRINGS | MF_OP_COMPLEX,
     .infer = const_infer, .kernel = {[MF_CPU] = const_kernel, [MF_CUDA] = const_kernel}},
    {.name = "Placeholder", .num_inputs = 0, .num_outputs = 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS | MF_OP_COMPLEX | MF_OP_REPLACED_BY_FEED,
     .infer = placeholder_infer, .kernel = {[MF_CPU] = placeholder_kernel}},
    {.name = "Identity", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_SETS_OUTPUTS | MF_OP_STRINGS | MF_OP_COMPLEX,
     .infer = identity_infer, .kernel = {[MF_CPU] = identity_kernel, [MF_CUDA] = identity_kernel},
     .grad = identity_grad},
    {.name = "StopGradient", .num_inputs = 1, .num_outputs = 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_COMPLEX,
     .infer = identity_infer, .kernel = {[MF_CPU] = identity_kernel, [MF_CUDA] = identity_kernel}},
    {.name = "NoOp", .num_inputs = 0, .num_outputs = 0, .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = noop_infer, .kernel = {[MF_CPU] = noop_kernel, [MF_CUDA] = noop_kernel}},
};
MF_OP_TABLE(mf_ops_core, defs);
