/* cuda_api.h — the conventions every table of the CUDA backend follows
 * (issue 14). The backend, libmoonflow_cuda.so (src/cuda/, C++ built by
 * nvcc), knows nothing of the core's structs: it exports one `const` table
 * of plain C functions per family, `mf_cuda_<family>_v1` of type
 * `mf_cuda_<family>_api`, declared in src/device/cuda/<family>_api.h, which
 * both sides include. Those headers use plain C types only: no CUDA types
 * (streams and handles stay inside the backend). */
#ifndef MF_DEVICE_CUDA_CUDA_API_H
#define MF_DEVICE_CUDA_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The backend's per-device state (src/cuda/internal.cuh): its ordinal, its
 * one stream, the library handles it makes lazily. Opaque to the core. */
typedef struct mf_cuda_device mf_cuda_device;
/* What went wrong, for the caller's message ("cublasSgemm: CUBLAS_STATUS_..."). */
typedef struct mf_cuda_error { char msg[256]; } mf_cuda_error;
/* Every table function returns 0 on success, else non-zero with e->msg set;
 * work is queued on the device's one stream (asynchronous unless the
 * function says otherwise). */

/* The backend exports its tables with C linkage and default visibility. */
#if defined(__GNUC__)
#define MF_CUDA_EXPORT __attribute__((visibility("default")))
#else
#define MF_CUDA_EXPORT
#endif

#ifndef __CUDACC__
/* Core side (src/device/cuda.c): the table or object `name` of the backend
 * ("mf_cuda_runtime_v1"), loaded on first use; NULL when there is no
 * backend (not built, not found, a different version, MOONFLOW_CUDA=0). */
const void *mf_cuda_symbol(const char *name);
/* Why there is no backend or no GPU ("" when the backend is loaded and
 * reports GPUs): a static string, for messages and tf.config listings. */
const char *mf_cuda_status(void);
#endif

#ifdef __cplusplus
}
#endif

#endif
