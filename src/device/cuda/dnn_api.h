/* dnn_api.h — the CUDA backend's table for convolutions and pooling
 * (src/cuda/dnn.cu, mf_cuda_dnn_v1): Conv2D and its backprops through
 * cuDNN, pooling and its gradients with kernels of its own that reproduce
 * the host kernels of ops/nn.c to the bit. Tensors NHWC, filters HWIO
 * ([height, width, in, out]) as on the host. Conventions in cuda_api.h. */
#ifndef MF_DEVICE_CUDA_DNN_API_H
#define MF_DEVICE_CUDA_DNN_API_H

#include "device/cuda/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A window op's geometry (ops/nn.c computes it): input [n, h, w, c],
 * window kh x kw, output [n, oh, ow, oc], strides, dilations, and the
 * padding before (pt top, pl left) and after (pb bottom, pr right) in
 * TensorFlow's SAME/VALID sense: after may exceed before by one. */
typedef struct mf_cuda_window {
  int64_t n, h, w, c, kh, kw, oc, oh, ow;
  int64_t sh, sw, dh, dw, pt, pl, pb, pr;
} mf_cuda_window;

typedef enum mf_cuda_conv_kind {
  MF_CUDA_CONV_FORWARD,         /* out y = conv(a = x, b = filter) */
  MF_CUDA_CONV_BACKPROP_INPUT,  /* out dx from a = filter, b = dy */
  MF_CUDA_CONV_BACKPROP_FILTER, /* out dfilter from a = x, b = dy */
} mf_cuda_conv_kind;

typedef enum mf_cuda_pool_kind {
  MF_CUDA_MAX_POOL,           /* out y from a = x */
  MF_CUDA_AVG_POOL,           /* out y from a = x */
  MF_CUDA_MAX_POOL_GRAD,      /* out dx from a = x, b = dy */
  MF_CUDA_AVG_POOL_GRAD,      /* out dx from b = dy */
  MF_CUDA_MAX_POOL_GRAD_GRAD, /* out (y's shape) from a = x, b = the gradient of dx */
} mf_cuda_pool_kind;

typedef struct mf_cuda_dnn_api {
  /* The device memory a float32 convolution of kind over g needs as
   * workspace (the caller allocates it; 0 is possible). */
  int (*conv2d_workspace)(mf_cuda_device *d, int kind, const mf_cuda_window *g, size_t *bytes, mf_cuda_error *e);
  /* The float32 convolution; workspace of at least conv2d_workspace's bytes. */
  int (*conv2d)(mf_cuda_device *d, int kind, const mf_cuda_window *g, const void *a, const void *b, void *out,
                void *workspace, size_t workspace_bytes, mf_cuda_error *e);
  /* A pooling kernel of kind over g (oc == c, no dilation), float32 (f64 == 0)
   * or float64: bit for bit ops/nn.c's results. */
  int (*pool)(mf_cuda_device *d, int kind, int f64, const mf_cuda_window *g, const void *a, const void *b,
              void *out, mf_cuda_error *e);
} mf_cuda_dnn_api;

#ifdef __CUDACC__
extern MF_CUDA_EXPORT const mf_cuda_dnn_api mf_cuda_dnn_v1;
#endif

#ifdef __cplusplus
}
#endif

#endif
