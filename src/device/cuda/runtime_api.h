/* runtime_api.h — the CUDA backend's runtime table (src/cuda/runtime.cu):
 * devices, memory, copies and sync. Conventions in cuda_api.h. */
#ifndef MF_DEVICE_CUDA_RUNTIME_API_H
#define MF_DEVICE_CUDA_RUNTIME_API_H

#include "device/cuda/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_cuda_runtime_api {
  /* The MF_VERSION the backend was built with: the core loads only its own. */
  const char *version;
  /* The GPUs this process may use (CUDA_VISIBLE_DEVICES applies). An error
   * (no driver, no device) is reported, not 0 with success. */
  int (*device_count)(int *count, mf_cuda_error *e);
  /* GPU `ordinal`'s name ("NVIDIA H100 80GB HBM3") and total memory in bytes. */
  int (*device_info)(int ordinal, char *name, size_t cap, int64_t *total_bytes, mf_cuda_error *e);
  /* Per-device state with a stream of its own (non-blocking); closed by close. */
  int (*open)(int ordinal, mf_cuda_device **out, mf_cuda_error *e);
  /* Waits for the stream's work, then frees d; NULL is fine. */
  void (*close)(mf_cuda_device *d);
  /* Device memory (synchronous; *out NULL for 0 bytes) and its release. */
  int (*alloc)(mf_cuda_device *d, size_t bytes, void **out, mf_cuda_error *e);
  void (*free)(mf_cuda_device *d, void *p);
  /* Host to device, queued on the stream; the caller may reuse src when it returns. */
  int (*copy_from_host)(mf_cuda_device *d, void *dst, const void *src, size_t bytes, mf_cuda_error *e);
  /* Device to host, finished when it returns (after the stream's earlier work). */
  int (*copy_to_host)(mf_cuda_device *d, void *dst, const void *src, size_t bytes, mf_cuda_error *e);
  /* Device to device on the stream. */
  int (*copy_device)(mf_cuda_device *d, void *dst, const void *src, size_t bytes, mf_cuda_error *e);
  /* Sets bytes at dst to value on the stream. */
  int (*memset)(mf_cuda_device *d, void *dst, int value, size_t bytes, mf_cuda_error *e);
  /* Returns when the stream's work is done, with the first error it met. */
  int (*sync)(mf_cuda_device *d, mf_cuda_error *e);
} mf_cuda_runtime_api;

#ifdef __CUDACC__
extern MF_CUDA_EXPORT const mf_cuda_runtime_api mf_cuda_runtime_v1;
#endif

#ifdef __cplusplus
}
#endif

#endif
