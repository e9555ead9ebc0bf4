/* activations_api.h — the CUDA backend's activations and their gradient ops
 * (src/cuda/activations.cu), generated from kernels/activation_ops.h, whose
 * numbers (enum mf_activation) name them. Conventions in cuda_api.h; dtype
 * an mf_dtype value (moonflow.h) among the op's table dtypes. */
#ifndef MF_DEVICE_CUDA_ACTIVATIONS_API_H
#define MF_DEVICE_CUDA_ACTIVATIONS_API_H

#include "device/cuda/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_cuda_activations_api {
  /* y[i] = activation op of x[i] (with the attr alpha), n elements. */
  int (*map)(mf_cuda_device *d, int op, int dtype, const void *x, void *y, int64_t n, double alpha,
             mf_cuda_error *e);
  /* y[i] = gradient op of g[i] and v[i], n elements each. */
  int (*grad)(mf_cuda_device *d, int op, int dtype, const void *g, const void *v, void *y, int64_t n, double alpha,
              mf_cuda_error *e);
} mf_cuda_activations_api;

#ifdef __CUDACC__
extern MF_CUDA_EXPORT const mf_cuda_activations_api mf_cuda_activations_v1;
#endif

#ifdef __cplusplus
}
#endif

#endif
