/* autodiff.h — builders for gradient rules (autodiff.c). */
#ifndef MF_GRAPH_AUTODIFF_H
#define MF_GRAPH_AUTODIFF_H

#include "graph/op_def.h"

/* Builders for rules. They take and return ports; a port whose .op is NULL
 * (an earlier failure) makes them return one too. */
/* mf_grad_begin, mf_grad_finish, mf_grad_op1, mf_grad_op2 and mf_grad_rebuild are
 * in moonflow.h, for op libraries. */
mf_output mf_grad_op3(mf_grad_ctx *gc, const char *type, mf_output a, mf_output b, mf_output c);
mf_output mf_grad_scalar(mf_grad_ctx *gc, mf_dtype dtype, double v);   /* a Const */
mf_output mf_grad_cast(mf_grad_ctx *gc, mf_output v, mf_dtype dtype);  /* v cast to dtype */
mf_output mf_grad_output_or_zeros(mf_grad_ctx *gc, int i);  /* grads[i], or zeros like output i */
/* An op of `type` on the n ports `inputs` with every attribute of the op
 * being differentiated: the rules of ops whose gradient is an op of the same
 * family with the same attributes (a window op's backprops, a slice and its
 * gradient, Gather and GatherGrad, Tile and TileGrad ...). begin_like returns
 * the description (NULL after a failure), for a rule to change an attribute
 * before mf_grad_finish; rebuild finishes it (output 0). */
mf_op_desc *mf_grad_begin_like(mf_grad_ctx *gc, const char *type, const mf_output *inputs, int n);

#endif
