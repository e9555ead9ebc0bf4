/* random_api.h — the CUDA backend's random table (src/cuda/random.cu): the
 * random ops' fills, the same numbers as the host kernels of ops/random.c
 * (the generator and conversions of kernels/philox.h) for the same key and
 * run. Conventions in cuda_api.h. */
#ifndef MF_DEVICE_CUDA_RANDOM_API_H
#define MF_DEVICE_CUDA_RANDOM_API_H

#include "device/cuda/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a float fill draws (RandomUniform, RandomNormal, TruncatedNormal). */
typedef enum mf_cuda_random_kind {
  MF_CUDA_RANDOM_UNIFORM, MF_CUDA_RANDOM_NORMAL, MF_CUDA_RANDOM_TRUNCATED
} mf_cuda_random_kind;

typedef struct mf_cuda_random_api {
  /* n float32 (f64 == 0) or float64 values of `kind` into device memory out,
   * for the Philox key (key0, key1) and the op's run number. */
  int (*fill)(mf_cuda_device *d, int kind, int f64, void *out, int64_t n, uint32_t key0, uint32_t key1,
              uint64_t run, mf_cuda_error *e);
  /* n integers lo + r mod range (int64 when i64, else int32) into device
   * memory out, r rejected below reject_below (RandomUniformInt). */
  int (*uniform_int)(mf_cuda_device *d, int i64, void *out, int64_t n, int64_t lo, uint64_t range,
                     uint64_t reject_below, uint32_t key0, uint32_t key1, uint64_t run, mf_cuda_error *e);
} mf_cuda_random_api;

#ifdef __CUDACC__
extern MF_CUDA_EXPORT const mf_cuda_random_api mf_cuda_random_v1;
#endif

#ifdef __cplusplus
}
#endif

#endif
