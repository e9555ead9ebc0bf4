// runtime.cu — the runtime table (mf_cuda_runtime_v1): devices, per-device
// state with its one stream, memory, copies and sync.
#include "device/cuda/runtime_api.h"
#include "internal.cuh"

#include <new>

// The staging buffer's size: host-to-device copies go through it in pieces
// of at most this many bytes.
static const size_t staging_capacity = (size_t)8 << 20;

static int device_count(int *count, mf_cuda_error *e) {
  *count = 0;
  MF_CUDA_TRY(e, cudaGetDeviceCount(count));
  return 0;
}

static int device_info(int ordinal, char *name, size_t cap, int64_t *total_bytes, mf_cuda_error *e) {
  cudaDeviceProp prop;
  MF_CUDA_TRY(e, cudaGetDeviceProperties(&prop, ordinal));
  snprintf(name, cap, "%s", prop.name);
  *total_bytes = (int64_t)prop.totalGlobalMem;
  return 0;
}

static void close_device(mf_cuda_device *d) {
  if (!d) return;
  cudaSetDevice(d->ordinal);
  if (d->stream) cudaStreamSynchronize(d->stream);
  if (d->blas) cublasDestroy(d->blas);
  if (d->dnn) cudnnDestroy(d->dnn);
  if (d->staged) cudaEventDestroy(d->staged);
  if (d->staging) cudaFreeHost(d->staging);
  if (d->fail_flag) cudaFree(d->fail_flag);
  if (d->stream) cudaStreamDestroy(d->stream);
  (void)cudaGetLastError();  // failures above are not reported, and must not be blamed on a later launch
  delete d;
}

static int open_device(int ordinal, mf_cuda_device **out, mf_cuda_error *e) {
  *out = NULL;
  mf_cuda_device *d = new (std::nothrow) mf_cuda_device();
  if (!d) {
    snprintf(e->msg, sizeof e->msg, "out of host memory opening GPU %d", ordinal);
    return 1;
  }
  d->ordinal = ordinal;
  if (mf_cuda_use(d, e) ||
      mf_cuda_check(e, cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
      mf_cuda_check(e, cudaEventCreateWithFlags(&d->staged, cudaEventDisableTiming), "cudaEventCreateWithFlags")) {
    close_device(d);
    return 1;
  }
  *out = d;
  return 0;
}

static int alloc(mf_cuda_device *d, size_t bytes, void **out, mf_cuda_error *e) {
  *out = NULL;
  if (mf_cuda_use(d, e)) return 1;
  if (!bytes) return 0;
  MF_CUDA_TRY(e, cudaMalloc(out, bytes));
  return 0;
}

static void free_memory(mf_cuda_device *d, void *p) {
  if (!p) return;
  cudaSetDevice(d->ordinal);
  cudaFree(p);  // waits for the device's work that may still use p
  (void)cudaGetLastError();  // a failure is not reported, and must not be blamed on a later launch
}

// Copies through the pinned staging buffer, piece by piece: each piece waits
// until the copy out of the previous one has finished.
static int copy_staged(mf_cuda_device *d, void *dst, const void *src, size_t bytes, mf_cuda_error *e) {
  if (!d->staging) {
    MF_CUDA_TRY(e, cudaHostAlloc(&d->staging, staging_capacity, cudaHostAllocPortable));
    d->staging_bytes = staging_capacity;
  }
  for (size_t done = 0; done < bytes;) {
    size_t n = bytes - done < d->staging_bytes ? bytes - done : d->staging_bytes;
    MF_CUDA_TRY(e, cudaEventSynchronize(d->staged));
    memcpy(d->staging, (const char *)src + done, n);
    MF_CUDA_TRY(e, cudaMemcpyAsync((char *)dst + done, d->staging, n, cudaMemcpyHostToDevice, d->stream));
    MF_CUDA_TRY(e, cudaEventRecord(d->staged, d->stream));
    done += n;
  }
  return 0;
}

static int copy_from_host(mf_cuda_device *d, void *dst, const void *src, size_t bytes, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (!bytes) return 0;
  std::lock_guard<std::mutex> hold(d->lock);
  return copy_staged(d, dst, src, bytes, e);
}

static int copy_to_host(mf_cuda_device *d, void *dst, const void *src, size_t bytes, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (!bytes) return 0;
  MF_CUDA_TRY(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, d->stream));
  MF_CUDA_TRY(e, cudaStreamSynchronize(d->stream));
  return 0;
}

static int copy_device(mf_cuda_device *d, void *dst, const void *src, size_t bytes, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (!bytes) return 0;
  MF_CUDA_TRY(e, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, d->stream));
  return 0;
}

static int memset_device(mf_cuda_device *d, void *dst, int value, size_t bytes, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (!bytes) return 0;
  MF_CUDA_TRY(e, cudaMemsetAsync(dst, value, bytes, d->stream));
  return 0;
}

static int sync_device(mf_cuda_device *d, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  MF_CUDA_TRY(e, cudaStreamSynchronize(d->stream));
  return 0;
}

int mf_cuda_blas_handle(mf_cuda_device *d, cublasHandle_t *out, mf_cuda_error *e) {
  std::lock_guard<std::mutex> hold(d->lock);
  if (!d->blas) {
    cublasHandle_t h;
    MF_CUDA_TRY(e, cublasCreate(&h));
    if (mf_cuda_check(e, cublasSetStream(h, d->stream), "cublasSetStream")) {
      cublasDestroy(h);
      return 1;
    }
    d->blas = h;
  }
  *out = d->blas;
  return 0;
}

int mf_cuda_dnn_handle(mf_cuda_device *d, cudnnHandle_t *out, mf_cuda_error *e) {
  std::lock_guard<std::mutex> hold(d->lock);
  if (!d->dnn) {
    cudnnHandle_t h;
    MF_CUDA_TRY(e, cudnnCreate(&h));
    if (mf_cuda_check(e, cudnnSetStream(h, d->stream), "cudnnSetStream")) {
      cudnnDestroy(h);
      return 1;
    }
    d->dnn = h;
  }
  *out = d->dnn;
  return 0;
}

extern "C" MF_CUDA_EXPORT const mf_cuda_runtime_api mf_cuda_runtime_v1 = {
    MF_BACKEND_VERSION, device_count, device_info, open_device,  close_device, alloc,
    free_memory,        copy_from_host, copy_to_host, copy_device, memset_device, sync_device,
};
