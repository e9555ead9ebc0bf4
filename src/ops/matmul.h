/* matmul.h — the MatMul builder that gradient rules share (matmul.c). */
#ifndef MF_OPS_MATMUL_H
#define MF_OPS_MATMUL_H

#include "graph/op_def.h"

/* Builds MatMul(a, b) with the given transposes in the gradient graph of gc;
 * returns its output (a port with no op after a failure). */
mf_output mf_grad_matmul(mf_grad_ctx *gc, mf_output a, mf_output b, bool transpose_a, bool transpose_b);

#endif
