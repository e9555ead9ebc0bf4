/* nn.h — what the window ops' kernels on other devices (ops/gpu/dnn.c) take
 * from nn.c: the geometry nn.c computes from an op's attributes, so every
 * device slides the same windows. */
#ifndef MF_OPS_NN_H
#define MF_OPS_NN_H

#include "graph/op_def.h"

/* One window op: the input [n, h, w, c], the window kh x kw, output
 * channels oc (the input's for pools), the output oh x ow, strides,
 * dilations and the padding before (top, left): TensorFlow's SAME pads the
 * smaller half before. Dims unknown at build time are -1. */
typedef struct mf_window_geom {
  int64_t n, h, w, c, kh, kw, oc, oh, ow;
  int64_t sh, sw, dh, dw, pt, pl;
} mf_window_geom;

/* The geometry of the running Conv2D-family kernel over input x (NHWC) and
 * filter f (HWIO); an error naming the op for bad attributes. */
mf_code mf_conv_geom(mf_kernel_ctx *ctx, const mf_tensor *x, const mf_tensor *f, mf_window_geom *g);
/* The geometry of the running pooling kernel over input `over` (NHWC). */
mf_code mf_pool_geom(mf_kernel_ctx *ctx, const mf_tensor *over, mf_window_geom *g);

#endif
