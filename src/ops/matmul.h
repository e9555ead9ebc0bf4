/* matmul.h — the MatMul builder that gradient rules share, and the walk over
 * a product's broadcast batches that the CPU and GPU kernels share (matmul.c). */
#ifndef MF_OPS_MATMUL_H
#define MF_OPS_MATMUL_H

#include "graph/op_def.h"

/* Builds MatMul(a, b) with the given transposes in the gradient graph of gc;
 * returns its output (a port with no op after a failure). */
mf_output mf_grad_matmul(mf_grad_ctx *gc, mf_output a, mf_output b, bool transpose_a, bool transpose_b);

/* The sizes of c = op(a) op(b) for a MatMul's inputs and output: op(a) is
 * [m,k], op(b) [k,n]; the matrices of each hold mat_* elements, and a and b
 * have batch_a and batch_b of them, c has batch. */
typedef struct mf_matmul_dims {
  int64_t m, n, k;
  bool ta, tb;
  int64_t mat_a, mat_b, mat_c, batch_a, batch_b, batch;
} mf_matmul_dims;
mf_matmul_dims mf_matmul_dims_of(const mf_tensor *a, const mf_tensor *b, const mf_tensor *c, bool ta, bool tb);
/* Calls each(arg, oa, ob, oc) for every matrix product of c in order, the
 * offsets (in elements) of its operands in a and b (broadcast along the
 * batch axes where an input has size 1) and of its result in c; stops at
 * the first that returns non-zero and returns that. */
int mf_matmul_batches(const mf_tensor *a, const mf_tensor *b, const mf_tensor *c, const mf_matmul_dims *g,
                      int (*each)(void *arg, int64_t oa, int64_t ob, int64_t oc), void *arg);

#endif
