/* nn_api.h — the CUDA backend's softmax, cross-entropies and BiasAdd
 * (src/cuda/nn.cu), computed as ops/nn.c computes them. Conventions in
 * cuda_api.h; dtype is MF_FLOAT32 or MF_FLOAT64 (moonflow.h). */
#ifndef MF_DEVICE_CUDA_NN_API_H
#define MF_DEVICE_CUDA_NN_API_H

#include "device/cuda/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_cuda_nn_api {
  /* y = softmax of each of the rows of x [rows, c > 0]: shifted by the row's
   * maximum (0 when not finite), the exponentials' sum taken in double. */
  int (*softmax)(mf_cuda_device *d, int dtype, const void *x, void *y, int64_t rows, int64_t c, mf_cuda_error *e);
  /* SoftmaxCrossEntropyWithLogits: x and labels [rows, c] into loss [rows]
   * and backprop [rows, c] (c == 0: every loss 0). */
  int (*xent)(mf_cuda_device *d, int dtype, const void *x, const void *labels, void *loss, void *backprop,
              int64_t rows, int64_t c, mf_cuda_error *e);
  /* SparseSoftmaxCrossEntropyWithLogits: x [rows, c > 0], labels [rows]
   * (int64 when wide, else int32). A row whose label lies outside [0, c) gets
   * NaN loss and backprop, and *first_bad (8 bytes of device memory) the
   * lowest such row, else UINT64_MAX; the caller reads it back. */
  int (*sparse_xent)(mf_cuda_device *d, int dtype, const void *x, const void *labels, int wide, void *loss,
                     void *backprop, int64_t rows, int64_t c, uint64_t *first_bad, mf_cuda_error *e);
  /* y = v + bias along the last axis: v and y hold n elements, bias c > 0. */
  int (*bias_add)(mf_cuda_device *d, int dtype, const void *v, const void *bias, void *y, int64_t n, int64_t c,
                  mf_cuda_error *e);
} mf_cuda_nn_api;

#ifdef __CUDACC__
extern MF_CUDA_EXPORT const mf_cuda_nn_api mf_cuda_nn_v1;
#endif

#ifdef __cplusplus
}
#endif

#endif
