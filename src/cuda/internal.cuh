// internal.cuh — what the backend's files share (libmoonflow_cuda.so): the
// per-device state behind mf_cuda_device and the error helpers that turn a
// CUDA, cuBLAS or cuDNN status into mf_cuda_error. Nothing here is seen by
// the core (src/device/cuda/cuda_api.h is the contract).
#ifndef MF_CUDA_INTERNAL_CUH
#define MF_CUDA_INTERNAL_CUH

#include "device/cuda/cuda_api.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <mutex>
#include <type_traits>
#include <stdio.h>
#include <string.h>

struct mf_cuda_device {
  int ordinal;
  cudaStream_t stream;      // all of the device's work, in order
  std::mutex lock;          // guards the lazily made members below and the staging buffer
  cublasHandle_t blas;      // made on first use (mf_cuda_blas_handle), bound to stream
  cudnnHandle_t dnn;        // made on first use (mf_cuda_dnn_handle), bound to stream
  // Pinned host memory that host-to-device copies go through, so the caller's
  // buffer is free when the copy call returns; `staged` is recorded after the
  // last copy out of it and waited for before it is written again.
  void *staging;
  size_t staging_bytes;
  cudaEvent_t staged;
  int *fail_flag;           // device memory, made on first use: elementwise ops' failed elements
};

// The text of an error of each library.
static inline const char *mf_cuda_error_text(cudaError_t r) { return cudaGetErrorString(r); }
static inline const char *mf_cuda_error_text(cublasStatus_t r) { return cublasGetStatusString(r); }
static inline const char *mf_cuda_error_text(cudnnStatus_t r) { return cudnnGetErrorString(r); }
static inline bool mf_cuda_failed(cudaError_t r) { return r != cudaSuccess; }
static inline bool mf_cuda_failed(cublasStatus_t r) { return r != CUBLAS_STATUS_SUCCESS; }
static inline bool mf_cuda_failed(cudnnStatus_t r) { return r != CUDNN_STATUS_SUCCESS; }

// Whether r is an error; if so, e->msg = "<function>: <error text>", the
// function being the name of the call's text up to its '('. A CUDA runtime
// error is also cleared from the thread's last error, which MF_CUDA_LAUNCHED
// reads: left there, it would be blamed on the next kernel launched.
template <typename R>
static inline bool mf_cuda_check(mf_cuda_error *e, R r, const char *call) {
  if (!mf_cuda_failed(r)) return false;
  if constexpr (std::is_same<R, cudaError_t>::value) (void)cudaGetLastError();
  const char *paren = strchr(call, '(');
  int name_len = paren ? (int)(paren - call) : (int)strlen(call);
  snprintf(e->msg, sizeof e->msg, "%.*s: %s", name_len, call, mf_cuda_error_text(r));
  return true;
}
// Returns 1 from the calling table function when `call` fails, with e->msg set.
#define MF_CUDA_TRY(e, call)                             \
  do {                                                   \
    if (mf_cuda_check((e), (call), #call)) return 1;     \
  } while (0)
// After a kernel launch: a launch error (bad configuration, no kernel image
// for this GPU) named after the kernel.
#define MF_CUDA_LAUNCHED(e, kernel_name)                                                           \
  do {                                                                                             \
    cudaError_t launch_error_ = cudaGetLastError();                                                \
    if (launch_error_ != cudaSuccess) {                                                            \
      snprintf((e)->msg, sizeof (e)->msg, "%s launch: %s", (kernel_name),                          \
               cudaGetErrorString(launch_error_));                                                 \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

// Makes d's GPU the calling thread's current one, so that launches and
// allocations go to it: every table function that works on a device starts
// with it, as the thread may have used another GPU last. 0 on success.
static inline int mf_cuda_use(mf_cuda_device *d, mf_cuda_error *e) {
  MF_CUDA_TRY(e, cudaSetDevice(d->ordinal));
  return 0;
}

// Threads per block and the grid for n elements with a grid-stride loop
// (kernels loop `for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)`).
enum { MF_CUDA_BLOCK = 256 };
static inline unsigned mf_cuda_grid(int64_t n) {
  int64_t blocks = (n + MF_CUDA_BLOCK - 1) / MF_CUDA_BLOCK;
  if (blocks < 1) blocks = 1;
  return (unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

// The device's cuBLAS / cuDNN handle, made on first use and bound to its
// stream (runtime.cu), for a table function that has made d current
// (mf_cuda_use); 0 on success.
int mf_cuda_blas_handle(mf_cuda_device *d, cublasHandle_t *out, mf_cuda_error *e);
int mf_cuda_dnn_handle(mf_cuda_device *d, cudnnHandle_t *out, mf_cuda_error *e);

#endif
