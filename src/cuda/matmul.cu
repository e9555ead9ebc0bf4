// matmul.cu — MatMul through cuBLAS (table in device/cuda/matmul_api.h).
//
// cuBLAS is column-major; a row-major matrix read column-major is its
// transpose. So row-major C = op(A) op(B) is computed as column-major
// C^T = op(B)^T op(A)^T: the operands swap places, each keeps its own
// transpose flag, and every leading dimension is the row length as stored.
#include <climits>

#include "device/cuda/matmul_api.h"
#include "internal.cuh"
#include "moonflow.h"

static int gemm(mf_cuda_device *d, int dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a,
                int64_t stride_a, const void *b, int64_t stride_b, void *c, int64_t stride_c, int64_t batch,
                mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX) {
    snprintf(e->msg, sizeof e->msg, "cuBLAS gemm: a size of %lld x %lld x %lld (batch %lld) exceeds INT_MAX",
             (long long)m, (long long)n, (long long)k, (long long)batch);
    return 1;
  }
  cublasHandle_t h;
  if (mf_cuda_blas_handle(d, &h, e)) return 1;
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = (int)(ta ? m : k), ldb = (int)(tb ? k : n), ldc = (int)n;
  if (dtype == MF_FLOAT32) {
    const float one = 1, zero = 0;
    MF_CUDA_TRY(
        e, cublasSgemmStridedBatched(h, op_b, op_a, (int)n, (int)m, (int)k, &one, (const float *)b, ldb, stride_b,
                                     (const float *)a, lda, stride_a, &zero, (float *)c, ldc, stride_c, (int)batch));
  } else if (dtype == MF_FLOAT64) {
    const double one = 1, zero = 0;
    MF_CUDA_TRY(
        e, cublasDgemmStridedBatched(h, op_b, op_a, (int)n, (int)m, (int)k, &one, (const double *)b, ldb, stride_b,
                                     (const double *)a, lda, stride_a, &zero, (double *)c, ldc, stride_c, (int)batch));
  } else {
    snprintf(e->msg, sizeof e->msg, "cuBLAS gemm: dtype %d is neither float32 nor float64", dtype);
    return 1;
  }
  return 0;
}

extern "C" MF_CUDA_EXPORT const mf_cuda_matmul_api mf_cuda_matmul_v1 = {gemm};
