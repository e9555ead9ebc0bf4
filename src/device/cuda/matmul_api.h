/* matmul_api.h — the CUDA backend's matrix products (src/cuda/matmul.cu):
 * MatMul's batches through cuBLAS. Conventions in cuda_api.h. */
#ifndef MF_DEVICE_CUDA_MATMUL_API_H
#define MF_DEVICE_CUDA_MATMUL_API_H

#include "device/cuda/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_cuda_matmul_api {
  /* For i in [0, batch): c_i[m,n] = op(a_i) op(b_i), row-major, with a_i at
   * a + i*stride_a (elements; 0 repeats one matrix), likewise b_i and c_i;
   * op(a) [m,k] is a transposed when ta (a stored [k,m]), op(b) [k,n] is b
   * transposed when tb. dtype: MF_FLOAT32 or MF_FLOAT64 (moonflow.h). m, n,
   * k > 0 and each at most INT_MAX, as cuBLAS takes them. */
  int (*gemm)(mf_cuda_device *d, int dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a,
              int64_t stride_a, const void *b, int64_t stride_b, void *c, int64_t stride_c, int64_t batch,
              mf_cuda_error *e);
} mf_cuda_matmul_api;

#ifdef __CUDACC__
extern MF_CUDA_EXPORT const mf_cuda_matmul_api mf_cuda_matmul_v1;
#endif

#ifdef __cplusplus
}
#endif

#endif
