/* reduce_api.h — the CUDA backend's reductions (src/cuda/reduce.cu): Sum,
 * Mean, Prod, Max, Min over any axes, ArgMax and ArgMin. Conventions in
 * cuda_api.h. Results are deterministic: each output is folded in an order
 * fixed by the shape alone (no atomics). */
#ifndef MF_DEVICE_CUDA_REDUCE_API_H
#define MF_DEVICE_CUDA_REDUCE_API_H

#include "device/cuda/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MF_CUDA_REDUCE_MAX_DIMS = 16 };
typedef enum mf_cuda_reduce_op {
  MF_CUDA_REDUCE_SUM, MF_CUDA_REDUCE_MEAN, MF_CUDA_REDUCE_PROD, MF_CUDA_REDUCE_MAX, MF_CUDA_REDUCE_MIN
} mf_cuda_reduce_op;

/* The input as the CPU driver sees it (ops/reduce.c, mf_reduce_geom): output
 * o folds the elements j in [0, count) at offset
 *   kept(o / inner) + o % inner + reduced(j / run) + j % run,
 * kept(i) and reduced(i) being the offsets of row-major index i over kdims
 * with kstrides and over rdims with rstrides (element units). */
typedef struct mf_cuda_reduce_geom {
  int64_t out_size, count, inner, run;
  int nk, nr;
  int64_t kdims[MF_CUDA_REDUCE_MAX_DIMS], kstrides[MF_CUDA_REDUCE_MAX_DIMS];
  int64_t rdims[MF_CUDA_REDUCE_MAX_DIMS], rstrides[MF_CUDA_REDUCE_MAX_DIMS];
} mf_cuda_reduce_geom;

typedef struct mf_cuda_reduce_api {
  /* Bytes of device scratch that reduce needs for g (0: none). */
  size_t (*scratch_bytes)(mf_cuda_device *d, const mf_cuda_reduce_geom *g);
  /* out[o] for o in [0, out_size) as the CPU's op computes it: float32 and
   * float64 sum, mean and product in double, integers in wrapping 64-bit
   * arithmetic (mean of no elements: NaN, or 0 for integers); max and min
   * propagate NaN. dtype: MF_FLOAT32, MF_FLOAT64, MF_INT32 or MF_INT64;
   * scratch: scratch_bytes(g) bytes of device memory. */
  int (*reduce)(mf_cuda_device *d, mf_cuda_reduce_op op, int dtype, const mf_cuda_reduce_geom *g,
                const void *in, void *out, void *scratch, mf_cuda_error *e);
  /* ArgMax (max != 0) or ArgMin of x [outer, n, inner] along n > 0 into
   * out [outer, inner] (int64 when wide, else int32): the first index of the
   * extremum, the first NaN when there is one (ops/index.c's rule). */
  int (*arg)(mf_cuda_device *d, int max, int dtype, const void *x, int64_t outer, int64_t n, int64_t inner,
             void *out, int wide, mf_cuda_error *e);
} mf_cuda_reduce_api;

#ifdef __CUDACC__
extern MF_CUDA_EXPORT const mf_cuda_reduce_api mf_cuda_reduce_v1;
#endif

#ifdef __cplusplus
}
#endif

#endif
