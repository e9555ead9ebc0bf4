/* autodiff.h — builders for gradient rules (autodiff.c). */
#ifndef MF_GRAPH_AUTODIFF_H
#define MF_GRAPH_AUTODIFF_H

#include "graph/op_def.h"

/* Builders for rules. They take and return ports; a port whose .op is NULL
 * (an earlier failure) makes them return one too. */
mf_op_desc *mf_grad_begin(mf_grad_ctx *gc, const char *type);  /* NULL after a failure */
mf_output mf_grad_finish(mf_grad_ctx *gc, mf_op_desc *d);      /* output 0; discards d after a failure */
mf_output mf_grad_op1(mf_grad_ctx *gc, const char *type, mf_output a);
mf_output mf_grad_op2(mf_grad_ctx *gc, const char *type, mf_output a, mf_output b);
mf_output mf_grad_scalar(mf_grad_ctx *gc, mf_dtype dtype, double v);   /* a Const */
mf_output mf_grad_cast(mf_grad_ctx *gc, mf_output v, mf_dtype dtype);  /* v cast to dtype */
mf_output mf_grad_output_or_zeros(mf_grad_ctx *gc, int i);  /* grads[i], or zeros like output i */

#endif
