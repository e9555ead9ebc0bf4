// nn.cu — Softmax, the cross-entropy ops and BiasAdd (table in
// device/cuda/nn_api.h), each step in the precision ops/nn.c uses so that
// results agree with the CPU's to float rounding.
//
// The row ops run a block per row: a maximum (started from the row's first
// element, so a leading NaN makes it NaN as on the CPU), the shifted
// exponentials written to the output, their sum in double by a tree in
// shared memory (a fixed order: deterministic), then the scale.
#include <cstdint>

#include "device/cuda/nn_api.h"
#include "internal.cuh"
#include "moonflow.h"

namespace {

__device__ float exp_of(float x) { return expf(x); }
__device__ double exp_of(double x) { return exp(x); }

// The block's reduction of v; every thread gets the result.
template <typename A, typename F>
__device__ A block_fold(A v, A *lane, F combine) {
  lane[threadIdx.x] = v;
  __syncthreads();
  for (int half = MF_CUDA_BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) lane[threadIdx.x] = combine(lane[threadIdx.x], lane[threadIdx.x + half]);
    __syncthreads();
  }
  A r = lane[0];
  __syncthreads();  // lane is free again
  return r;
}

// e[j] = exp(x[j] - m) for the row, m its maximum (0 when that is not finite
// and `finite`); returns the sum of e in double. ops/nn.c's exp_shifted.
template <typename T>
__device__ double exp_shifted(const T *x, T *e, int64_t c, bool finite, T *max) {
  __shared__ T tops[MF_CUDA_BLOCK];
  __shared__ double sums[MF_CUDA_BLOCK];
  T top = x[0];
  for (int64_t j = threadIdx.x; j < c; j += MF_CUDA_BLOCK) top = x[j] > top ? x[j] : top;
  T m = block_fold(top, tops, [](T a, T b) { return b > a ? b : a; });
  if (finite && !(m - m == 0)) m = 0;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < c; j += MF_CUDA_BLOCK) {
    e[j] = exp_of((T)(x[j] - m));
    sum += (double)e[j];
  }
  *max = m;
  return block_fold(sum, sums, [](double a, double b) { return a + b; });
}

template <typename T>
__global__ void softmax_rows(const T *x, T *y, int64_t rows, int64_t c) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T m;
    T *row = y + r * c;
    const double inv = 1.0 / exp_shifted(x + r * c, row, c, true, &m);
    for (int64_t j = threadIdx.x; j < c; j += MF_CUDA_BLOCK) row[j] = (T)((double)row[j] * inv);
  }
}

template <typename T>
__global__ void xent_rows(const T *x, const T *labels, T *loss, T *bp, int64_t rows, int64_t c) {
  __shared__ double totals[MF_CUDA_BLOCK];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = x + r * c, *label = labels + r * c;
    T *b = bp + r * c, m;
    const double sum = exp_shifted(row, b, c, false, &m), log_sum = log(sum);
    const T inv = (T)(1.0 / sum);
    double total = 0;
    for (int64_t j = threadIdx.x; j < c; j += MF_CUDA_BLOCK) {
      total += (double)label[j] * (log_sum - (double)(row[j] - m));
      b[j] = b[j] * inv - label[j];
    }
    total = block_fold(total, totals, [](double a, double b) { return a + b; });
    if (threadIdx.x == 0) loss[r] = (T)total;
  }
}

template <typename T>
__global__ void fill_rows(T *y, int64_t n, T value) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = value;
}

template <typename T, typename L>
__global__ void sparse_xent_rows(const T *x, const L *labels, T *loss, T *bp, int64_t rows, int64_t c,
                                 unsigned long long *first_bad) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = x + r * c;
    T *b = bp + r * c, m;
    const int64_t label = (int64_t)labels[r];
    if (label < 0 || label >= c) {  // the caller reports it; the row holds NaN meanwhile
      for (int64_t j = threadIdx.x; j < c; j += MF_CUDA_BLOCK) b[j] = (T)NAN;
      if (threadIdx.x == 0) {
        loss[r] = (T)NAN;
        atomicMin(first_bad, (unsigned long long)r);
      }
      continue;
    }
    const double sum = exp_shifted(row, b, c, false, &m);
    const T inv = (T)(1.0 / sum);
    for (int64_t j = threadIdx.x; j < c; j += MF_CUDA_BLOCK) b[j] = b[j] * inv - (j == label ? (T)1 : (T)0);
    if (threadIdx.x == 0) loss[r] = (T)(log(sum) - (double)(row[label] - m));
  }
}

template <typename T>
__global__ void bias_add_flat(const T *v, const T *bias, T *y, int64_t n, int64_t c) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = v[i] + bias[i % c];
}

int bad_dtype(const char *what, int dtype, mf_cuda_error *e) {
  snprintf(e->msg, sizeof e->msg, "%s: dtype %d is neither float32 nor float64", what, dtype);
  return 1;
}

int softmax(mf_cuda_device *d, int dtype, const void *x, void *y, int64_t rows, int64_t c, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (rows == 0 || c == 0) return 0;
  if (dtype == MF_FLOAT32)
    softmax_rows<float>
        <<<mf_cuda_grid(rows * MF_CUDA_BLOCK), MF_CUDA_BLOCK, 0, d->stream>>>((const float *)x, (float *)y, rows, c);
  else if (dtype == MF_FLOAT64)
    softmax_rows<double>
        <<<mf_cuda_grid(rows * MF_CUDA_BLOCK), MF_CUDA_BLOCK, 0, d->stream>>>((const double *)x, (double *)y, rows, c);
  else
    return bad_dtype("softmax", dtype, e);
  MF_CUDA_LAUNCHED(e, "softmax_rows");
  return 0;
}

template <typename T>
void xent_typed(mf_cuda_device *d, const void *x, const void *labels, void *loss, void *bp, int64_t rows, int64_t c) {
  if (c == 0)
    fill_rows<T><<<mf_cuda_grid(rows), MF_CUDA_BLOCK, 0, d->stream>>>((T *)loss, rows, 0);
  else
    xent_rows<T><<<mf_cuda_grid(rows * MF_CUDA_BLOCK), MF_CUDA_BLOCK, 0, d->stream>>>((const T *)x, (const T *)labels,
                                                                                      (T *)loss, (T *)bp, rows, c);
}

int xent(mf_cuda_device *d, int dtype, const void *x, const void *labels, void *loss, void *bp, int64_t rows, int64_t c,
         mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (rows == 0) return 0;
  if (dtype == MF_FLOAT32)
    xent_typed<float>(d, x, labels, loss, bp, rows, c);
  else if (dtype == MF_FLOAT64)
    xent_typed<double>(d, x, labels, loss, bp, rows, c);
  else
    return bad_dtype("softmax_cross_entropy", dtype, e);
  MF_CUDA_LAUNCHED(e, "xent_rows");
  return 0;
}

template <typename T>
void sparse_typed(mf_cuda_device *d, const void *x, const void *labels, int wide, void *loss, void *bp, int64_t rows,
                  int64_t c, unsigned long long *first_bad) {
  if (wide)
    sparse_xent_rows<T, int64_t><<<mf_cuda_grid(rows * MF_CUDA_BLOCK), MF_CUDA_BLOCK, 0, d->stream>>>(
        (const T *)x, (const int64_t *)labels, (T *)loss, (T *)bp, rows, c, first_bad);
  else
    sparse_xent_rows<T, int32_t><<<mf_cuda_grid(rows * MF_CUDA_BLOCK), MF_CUDA_BLOCK, 0, d->stream>>>(
        (const T *)x, (const int32_t *)labels, (T *)loss, (T *)bp, rows, c, first_bad);
}

int sparse_xent(mf_cuda_device *d, int dtype, const void *x, const void *labels, int wide, void *loss, void *bp,
                int64_t rows, int64_t c, uint64_t *first_bad, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (dtype != MF_FLOAT32 && dtype != MF_FLOAT64) return bad_dtype("sparse_softmax_cross_entropy", dtype, e);
  MF_CUDA_TRY(e, cudaMemsetAsync(first_bad, 0xff, sizeof *first_bad, d->stream));
  if (rows == 0) return 0;
  unsigned long long *bad = (unsigned long long *)first_bad;
  if (dtype == MF_FLOAT32)
    sparse_typed<float>(d, x, labels, wide, loss, bp, rows, c, bad);
  else
    sparse_typed<double>(d, x, labels, wide, loss, bp, rows, c, bad);
  MF_CUDA_LAUNCHED(e, "sparse_xent_rows");
  return 0;
}

int bias_add(mf_cuda_device *d, int dtype, const void *v, const void *bias, void *y, int64_t n, int64_t c,
             mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (n == 0) return 0;
  const unsigned grid = mf_cuda_grid(n);
  if (dtype == MF_FLOAT32)
    bias_add_flat<float>
        <<<grid, MF_CUDA_BLOCK, 0, d->stream>>>((const float *)v, (const float *)bias, (float *)y, n, c);
  else if (dtype == MF_FLOAT64)
    bias_add_flat<double>
        <<<grid, MF_CUDA_BLOCK, 0, d->stream>>>((const double *)v, (const double *)bias, (double *)y, n, c);
  else
    return bad_dtype("bias_add", dtype, e);
  MF_CUDA_LAUNCHED(e, "bias_add_flat");
  return 0;
}

}  // namespace

extern "C" MF_CUDA_EXPORT const mf_cuda_nn_api mf_cuda_nn_v1 = {softmax, xent, sparse_xent, bias_add};
