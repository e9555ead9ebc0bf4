/* elementwise_api.h — the CUDA backend's elementwise table
 * (src/cuda/elementwise.cu): the ops of kernels/element_ops.h, numbered by
 * its enums, and Cast. Conventions in cuda_api.h; dtypes are mf_dtype codes. */
#ifndef MF_DEVICE_CUDA_ELEMENTWISE_API_H
#define MF_DEVICE_CUDA_ELEMENTWISE_API_H

#include "device/cuda/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MF_CUDA_MAX_RANK = 8 }; /* moonflow.h's MF_MAX_RANK */
/* A broadcast output as a loop nest (kernels/elementwise.h's mf_bcast_nest):
 * its dims, outermost first, and each input's element stride per dim (0
 * where it repeats). rank 0: one element. */
typedef struct mf_cuda_bcast {
  int rank;
  int64_t dims[MF_CUDA_MAX_RANK];
  int64_t stride[2][MF_CUDA_MAX_RANK];
} mf_cuda_bcast;

typedef struct mf_cuda_elementwise_api {
  /* y[i] = op(x[i]) for i < n; x and y have the op's input and output dtype for `dtype`. */
  int (*unary)(mf_cuda_device *d, int op, int dtype, const void *x, void *y, int64_t n, mf_cuda_error *e);
  /* z = op(a, b) over the nest's n elements. With failed non-NULL the op's
   * failure test is checked too (integer division by zero): the call then
   * waits for the GPU and sets *failed to whether some element failed. */
  int (*binary)(mf_cuda_device *d, int op, int dtype, const void *a, const void *b, void *z, int64_t n,
                const mf_cuda_bcast *nest, int *failed, mf_cuda_error *e);
  /* y[i] = x[i] converted from src_dtype to dst_dtype as the CPU's Cast does. */
  int (*cast)(mf_cuda_device *d, int src_dtype, int dst_dtype, const void *x, void *y, int64_t n,
              mf_cuda_error *e);
} mf_cuda_elementwise_api;

#ifdef __CUDACC__
extern MF_CUDA_EXPORT const mf_cuda_elementwise_api mf_cuda_elementwise_v1;
#endif

#ifdef __cplusplus
}
#endif

#endif
