// reduce.cu — Sum, Mean, Prod, Max, Min, ArgMax, ArgMin (table in
// device/cuda/reduce_api.h), with ops/reduce.c's accumulators and NaN rules.
//
// Two layouts, chosen from the shape alone so that results never depend on
// the device: many outputs that each fold few elements, or whose last axes
// are kept (neighbouring outputs are neighbours in memory), take a thread
// each; otherwise a block folds an output (its threads striding over the
// elements, then a tree in shared memory), and when the outputs are too few
// to fill the GPU each output's elements are split into slices whose partial
// results a second kernel combines in slice order.
#include <cmath>
#include <cstdint>

#include "device/cuda/reduce_api.h"
#include "internal.cuh"
#include "moonflow.h"

namespace {

constexpr int64_t kSliceMin = 16384;   // elements per slice when an output is split
constexpr int64_t kSplitTarget = 512;  // blocks to aim for when outputs are few

typedef unsigned long long u64;

template <typename T>
__device__ bool is_nan(T x) {
  return x != x;
}

// The accumulator of Sum, Mean and Prod: double for floats, wrapping 64-bit for integers.
template <typename T>
struct Wide {
  typedef u64 type;
};
template <>
struct Wide<float> {
  typedef double type;
};
template <>
struct Wide<double> {
  typedef double type;
};

// Where a max or a min over no elements starts (kernels/elementwise.h's MF_LOWEST, MF_HIGHEST).
template <typename T>
struct Bounds;
template <>
struct Bounds<float> {
  static __device__ float lowest() { return -INFINITY; }
  static __device__ float highest() { return INFINITY; }
};
template <>
struct Bounds<double> {
  static __device__ double lowest() { return -INFINITY; }
  static __device__ double highest() { return INFINITY; }
};
template <>
struct Bounds<int32_t> {
  static __device__ int32_t lowest() { return INT32_MIN; }
  static __device__ int32_t highest() { return INT32_MAX; }
};
template <>
struct Bounds<int64_t> {
  static __device__ int64_t lowest() { return INT64_MIN; }
  static __device__ int64_t highest() { return INT64_MAX; }
};

template <typename T>
__device__ T mean_of(double sum, int64_t n) {
  return (T)(sum / (double)n);
}
template <typename T>
__device__ T mean_of(u64 sum, int64_t n) {
  return n ? (T)((long long)sum / n) : (T)0;
}

template <typename T>
struct SumOp {
  typedef typename Wide<T>::type A;
  static __device__ A identity() { return A(0); }
  static __device__ A combine(A a, A b) { return a + b; }
  static __device__ T result(A a, int64_t) { return (T)a; }
};
template <typename T>
struct MeanOp : SumOp<T> {
  typedef typename Wide<T>::type A;
  static __device__ T result(A a, int64_t n) { return mean_of<T>(a, n); }
};
template <typename T>
struct ProdOp {
  typedef typename Wide<T>::type A;
  static __device__ A identity() { return A(1); }
  static __device__ A combine(A a, A b) { return a * b; }
  static __device__ T result(A a, int64_t) { return (T)a; }
};
template <typename T>
struct MaxOp {
  typedef T A;
  static __device__ A identity() { return Bounds<T>::lowest(); }
  static __device__ A combine(A a, A b) { return (b > a || is_nan(b)) ? b : a; }
  static __device__ T result(A a, int64_t) { return a; }
};
template <typename T>
struct MinOp {
  typedef T A;
  static __device__ A identity() { return Bounds<T>::highest(); }
  static __device__ A combine(A a, A b) { return (b < a || is_nan(b)) ? b : a; }
  static __device__ T result(A a, int64_t) { return a; }
};

__device__ int64_t offset_of(int n, const int64_t *dims, const int64_t *strides, int64_t pos) {
  int64_t off = 0;
  for (int d = n - 1; d >= 0; d--) {
    off += pos % dims[d] * strides[d];
    pos /= dims[d];
  }
  return off;
}

__device__ int64_t kept_offset(const mf_cuda_reduce_geom &g, int64_t o) {
  return offset_of(g.nk, g.kdims, g.kstrides, o / g.inner) + o % g.inner;
}
__device__ int64_t reduced_offset(const mf_cuda_reduce_geom &g, int64_t j) {
  return offset_of(g.nr, g.rdims, g.rstrides, j / g.run) + j % g.run;
}

// One thread per output, folding its elements in order.
template <typename T, typename Op>
__global__ void fold_per_thread(const T *in, T *out, mf_cuda_reduce_geom g) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < g.out_size;
       o += (int64_t)gridDim.x * blockDim.x) {
    const T *base = in + kept_offset(g, o);
    typename Op::A acc = Op::identity();
    for (int64_t j = 0; j < g.count; j++) acc = Op::combine(acc, (typename Op::A)base[reduced_offset(g, j)]);
    out[o] = Op::result(acc, g.count);
  }
}

// One block per (output, slice): slice s of output o folds elements
// [s*slice_len, (s+1)*slice_len) into out[o] (one slice) or partials[o*slices+s].
template <typename T, typename Op>
__global__ void fold_per_block(const T *in, T *out, typename Op::A *partials, mf_cuda_reduce_geom g, int64_t slices,
                               int64_t slice_len) {
  typedef typename Op::A A;
  __shared__ A lane[MF_CUDA_BLOCK];
  for (int64_t item = blockIdx.x; item < g.out_size * slices; item += gridDim.x) {
    const int64_t o = item / slices, j0 = item % slices * slice_len;
    const int64_t j1 = j0 + slice_len < g.count ? j0 + slice_len : g.count;
    const T *base = in + kept_offset(g, o);
    A acc = Op::identity();
    for (int64_t j = j0 + threadIdx.x; j < j1; j += MF_CUDA_BLOCK)
      acc = Op::combine(acc, (A)base[reduced_offset(g, j)]);
    lane[threadIdx.x] = acc;
    __syncthreads();
    for (int half = MF_CUDA_BLOCK / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) lane[threadIdx.x] = Op::combine(lane[threadIdx.x], lane[threadIdx.x + half]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (slices == 1)
        out[o] = Op::result(lane[0], g.count);
      else
        partials[item] = lane[0];
    }
    __syncthreads();  // lane is read above before the next item overwrites it
  }
}

template <typename T, typename Op>
__global__ void combine_slices(const typename Op::A *partials, T *out, int64_t out_size, int64_t slices,
                               int64_t count) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < out_size; o += (int64_t)gridDim.x * blockDim.x) {
    typename Op::A acc = Op::identity();
    for (int64_t s = 0; s < slices; s++) acc = Op::combine(acc, partials[o * slices + s]);
    out[o] = Op::result(acc, count);
  }
}

bool per_thread(const mf_cuda_reduce_geom *g) { return (g->inner > 1 || g->count <= 32) && g->out_size >= 1024; }

// Slices per output in the block layout; 1 when the outputs fill the GPU.
int64_t slices_of(const mf_cuda_reduce_geom *g) {
  if (per_thread(g) || g->out_size == 0 || g->out_size >= kSplitTarget / 4) return 1;
  int64_t by_size = (g->count + kSliceMin - 1) / kSliceMin, by_target = kSplitTarget / g->out_size;
  return by_size < by_target ? (by_size > 1 ? by_size : 1) : by_target;
}

template <typename T, typename Op>
int run(mf_cuda_device *d, const mf_cuda_reduce_geom *g, const void *in_, void *out_, void *scratch, mf_cuda_error *e) {
  const T *in = (const T *)in_;
  T *out = (T *)out_;
  if (g->out_size == 0) return 0;
  if (per_thread(g)) {
    fold_per_thread<T, Op><<<mf_cuda_grid(g->out_size), MF_CUDA_BLOCK, 0, d->stream>>>(in, out, *g);
  } else {
    const int64_t slices = slices_of(g), slice_len = (g->count + slices - 1) / slices;
    typename Op::A *partials = (typename Op::A *)scratch;
    fold_per_block<T, Op><<<mf_cuda_grid(g->out_size * slices * MF_CUDA_BLOCK), MF_CUDA_BLOCK, 0, d->stream>>>(
        in, out, partials, *g, slices, slice_len);
    if (slices > 1)
      combine_slices<T, Op>
          <<<mf_cuda_grid(g->out_size), MF_CUDA_BLOCK, 0, d->stream>>>(partials, out, g->out_size, slices, g->count);
  }
  MF_CUDA_LAUNCHED(e, "reduce");
  return 0;
}

template <typename T>
int run_op(mf_cuda_device *d, mf_cuda_reduce_op op, const mf_cuda_reduce_geom *g, const void *in, void *out,
           void *scratch, mf_cuda_error *e) {
  switch (op) {
    case MF_CUDA_REDUCE_SUM:
      return run<T, SumOp<T>>(d, g, in, out, scratch, e);
    case MF_CUDA_REDUCE_MEAN:
      return run<T, MeanOp<T>>(d, g, in, out, scratch, e);
    case MF_CUDA_REDUCE_PROD:
      return run<T, ProdOp<T>>(d, g, in, out, scratch, e);
    case MF_CUDA_REDUCE_MAX:
      return run<T, MaxOp<T>>(d, g, in, out, scratch, e);
    case MF_CUDA_REDUCE_MIN:
      return run<T, MinOp<T>>(d, g, in, out, scratch, e);
  }
  snprintf(e->msg, sizeof e->msg, "reduce: unknown reduction %d", (int)op);
  return 1;
}

size_t scratch_bytes(mf_cuda_device *, const mf_cuda_reduce_geom *g) {
  const int64_t slices = slices_of(g);
  return slices > 1 ? (size_t)(g->out_size * slices) * sizeof(u64) : 0;  // every accumulator fits 8 bytes
}

int reduce(mf_cuda_device *d, mf_cuda_reduce_op op, int dtype, const mf_cuda_reduce_geom *g, const void *in, void *out,
           void *scratch, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  switch (dtype) {
    case MF_FLOAT32:
      return run_op<float>(d, op, g, in, out, scratch, e);
    case MF_FLOAT64:
      return run_op<double>(d, op, g, in, out, scratch, e);
    case MF_INT32:
      return run_op<int32_t>(d, op, g, in, out, scratch, e);
    case MF_INT64:
      return run_op<int64_t>(d, op, g, in, out, scratch, e);
  }
  snprintf(e->msg, sizeof e->msg, "reduce: dtype %d has no CUDA kernel", dtype);
  return 1;
}

// ops/index.c's GREATER and LESS: a NaN beats any number; ties keep the first.
template <typename T, bool kMax>
__device__ bool better(T a, T b) {
  return (kMax ? a > b : a < b) || (is_nan(a) && !is_nan(b));
}

template <typename T, typename I, bool kMax>
__global__ void arg_per_thread(const T *x, int64_t outer, int64_t n, int64_t inner, I *out) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < outer * inner;
       o += (int64_t)gridDim.x * blockDim.x) {
    const T *line = x + o / inner * n * inner + o % inner;
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
      if (better<T, kMax>(line[i * inner], line[best * inner])) best = i;
    out[o] = (I)best;
  }
}

template <typename T>
int arg_typed(mf_cuda_device *d, int max, const void *x, int64_t outer, int64_t n, int64_t inner, void *out, int wide,
              mf_cuda_error *e) {
  const unsigned grid = mf_cuda_grid(outer * inner);
  const T *xt = (const T *)x;
  if (max && wide)
    arg_per_thread<T, int64_t, true><<<grid, MF_CUDA_BLOCK, 0, d->stream>>>(xt, outer, n, inner, (int64_t *)out);
  else if (max)
    arg_per_thread<T, int32_t, true><<<grid, MF_CUDA_BLOCK, 0, d->stream>>>(xt, outer, n, inner, (int32_t *)out);
  else if (wide)
    arg_per_thread<T, int64_t, false><<<grid, MF_CUDA_BLOCK, 0, d->stream>>>(xt, outer, n, inner, (int64_t *)out);
  else
    arg_per_thread<T, int32_t, false><<<grid, MF_CUDA_BLOCK, 0, d->stream>>>(xt, outer, n, inner, (int32_t *)out);
  MF_CUDA_LAUNCHED(e, "arg_per_thread");
  return 0;
}

int arg(mf_cuda_device *d, int max, int dtype, const void *x, int64_t outer, int64_t n, int64_t inner, void *out,
        int wide, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (outer * inner == 0) return 0;
  switch (dtype) {
    case MF_FLOAT32:
      return arg_typed<float>(d, max, x, outer, n, inner, out, wide, e);
    case MF_FLOAT64:
      return arg_typed<double>(d, max, x, outer, n, inner, out, wide, e);
    case MF_INT32:
      return arg_typed<int32_t>(d, max, x, outer, n, inner, out, wide, e);
    case MF_INT64:
      return arg_typed<int64_t>(d, max, x, outer, n, inner, out, wide, e);
  }
  snprintf(e->msg, sizeof e->msg, "arg: dtype %d has no CUDA kernel", dtype);
  return 1;
}

}  // namespace

extern "C" MF_CUDA_EXPORT const mf_cuda_reduce_api mf_cuda_reduce_v1 = {scratch_bytes, reduce, arg};
