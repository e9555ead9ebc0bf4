// random.cu — the random ops on the GPU (mf_cuda_random_v1): the host
// kernels' generator and conversions (kernels/philox.h, compiled here as
// device code), so a value depends only on (key, run, element index) on
// either side. One thread per Philox block (a group of values), grid-stride.
#include "internal.cuh"
#include "device/cuda/random_api.h"
#include "kernels/philox.h"

namespace {

// The values of block b that fall inside [0, n).
template <typename T, int PER, void (*CONVERT)(const uint32_t *, T *)>
__global__ void fill_blocks(T *out, int64_t n, uint32_t key0, uint32_t key1, uint64_t run) {
  const uint32_t key[2] = {key0, key1};
  const int64_t blocks = (n + PER - 1) / PER;
  for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < blocks; b += (int64_t)gridDim.x * blockDim.x) {
    uint32_t c[4];
    T v[PER];
    mf_philox_block(c, b, run, key);
    CONVERT(c, v);
    for (int j = 0; j < PER && b * PER + j < n; j++) out[b * PER + j] = v[j];
  }
}

template <typename T, int PER, void (*GROUP)(T *, int64_t, int64_t, uint64_t, const uint32_t *)>
__global__ void fill_groups(T *out, int64_t n, uint32_t key0, uint32_t key1, uint64_t run) {
  const uint32_t key[2] = {key0, key1};
  const int64_t groups = (n + PER - 1) / PER;
  for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; b < groups; b += (int64_t)gridDim.x * blockDim.x)
    GROUP(out, b, n, run, key);
}

template <typename T>
__global__ void uniform_ints(T *out, int64_t n, int64_t lo, uint64_t range, uint64_t reject_below, uint32_t key0,
                             uint32_t key1, uint64_t run) {
  const uint32_t key[2] = {key0, key1};
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
    uint32_t c[4];
    mf_philox_block(c, e / 2, run, key);
    const uint64_t v = (uint64_t)lo + mf_uniform_int_word(c, e, reject_below, run, key) % range;
    out[e] = (T)(int64_t)v;
  }
}

// Launches kernel over `items` work items.
template <typename... P, typename... A>
int launch(mf_cuda_device *d, void (*kernel)(P...), const char *name, int64_t items, mf_cuda_error *e, A... args) {
  if (items == 0) return 0;
  kernel<<<mf_cuda_grid(items), MF_CUDA_BLOCK, 0, d->stream>>>(args...);
  MF_CUDA_LAUNCHED(e, name);
  return 0;
}

int fill(mf_cuda_device *d, int kind, int f64, void *out, int64_t n, uint32_t key0, uint32_t key1, uint64_t run,
         mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  const int64_t f32_blocks = (n + MF_PER_BLOCK_F32 - 1) / MF_PER_BLOCK_F32;
  const int64_t f64_blocks = (n + MF_PER_BLOCK_F64 - 1) / MF_PER_BLOCK_F64;
  float *o32 = (float *)out;
  double *o64 = (double *)out;
  switch (kind) {
  case MF_CUDA_RANDOM_UNIFORM:
    return f64 ? launch(d, fill_blocks<double, MF_PER_BLOCK_F64, mf_uniform_f64>, "uniform_f64", f64_blocks, e, o64,
                        n, key0, key1, run)
               : launch(d, fill_blocks<float, MF_PER_BLOCK_F32, mf_uniform_f32>, "uniform_f32", f32_blocks, e, o32,
                        n, key0, key1, run);
  case MF_CUDA_RANDOM_NORMAL:
    return f64 ? launch(d, fill_blocks<double, MF_PER_BLOCK_F64, mf_normal_f64>, "normal_f64", f64_blocks, e, o64, n,
                        key0, key1, run)
               : launch(d, fill_blocks<float, MF_PER_BLOCK_F32, mf_normal_f32>, "normal_f32", f32_blocks, e, o32, n,
                        key0, key1, run);
  case MF_CUDA_RANDOM_TRUNCATED:
    return f64 ? launch(d, fill_groups<double, MF_PER_BLOCK_F64, mf_truncated_group_f64>, "truncated_f64",
                        f64_blocks, e, o64, n, key0, key1, run)
               : launch(d, fill_groups<float, MF_PER_BLOCK_F32, mf_truncated_group_f32>, "truncated_f32",
                        f32_blocks, e, o32, n, key0, key1, run);
  }
  snprintf(e->msg, sizeof e->msg, "random fill: unknown kind %d", kind);
  return 1;
}

int uniform_int(mf_cuda_device *d, int i64, void *out, int64_t n, int64_t lo, uint64_t range, uint64_t reject_below,
                uint32_t key0, uint32_t key1, uint64_t run, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  return i64 ? launch(d, uniform_ints<int64_t>, "uniform_int64", n, e, (int64_t *)out, n, lo, range, reject_below,
                      key0, key1, run)
             : launch(d, uniform_ints<int32_t>, "uniform_int32", n, e, (int32_t *)out, n, lo, range, reject_below,
                      key0, key1, run);
}

}  // namespace

extern "C" MF_CUDA_EXPORT const mf_cuda_random_api mf_cuda_random_v1 = {fill, uniform_int};
