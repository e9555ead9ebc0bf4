// activations.cu — the activations of ops/nn.c and their gradient ops
// (table in device/cuda/activations_api.h): one kernel per op and dtype,
// generated from the tables of kernels/activation_ops.h that the CPU loops
// come from, with the helpers their expressions call defined for the device.
#include "internal.cuh"
#include "device/cuda/activations_api.h"
#include "moonflow.h"

#include <cstdint>
#include <type_traits>

// CUDA overloads the math functions for float and double: the CPU's
// vectorized forms are the same functions here.
#define MF_MATH(fn, x) fn
#define MF_VMATH(fn, x) fn
#define CONST(x, c) ((decltype(x))(c))
template <typename T> __device__ T mf_sigmoid(T x) {  // kernels/elementwise.h's form
  T e = exp(-fabs(x));
  return (x >= 0 ? (T)1 : e) / (1 + e);
}
#define MF_SIGMOID(x) mf_sigmoid(x)
#include "kernels/activation_ops.h"

namespace {

// The dtype sets of the tables' dtypes column.
template <typename T> constexpr bool in_set_SIGNED() { return true; }
template <typename T> constexpr bool in_set_FLOAT() { return std::is_floating_point<T>::value; }

#define ACT_KERNEL(name, types, grad_op, reads, expr)                                                        \
  template <typename T> __global__ void name##_kernel(const T *xs, T *y, int64_t n, T alpha) {              \
    (void)alpha;                                                                                             \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) { \
      const T x = xs[i];                                                                                     \
      y[i] = (T)(expr);                                                                                      \
    }                                                                                                        \
  }
MF_ACTIVATIONS(ACT_KERNEL)

#define GRAD_KERNEL(name, types, curvature, expr)                                                            \
  template <typename T> __global__ void name##_kernel(const T *gs, const T *vs, T *y, int64_t n, T alpha) {  \
    (void)alpha;                                                                                             \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) { \
      const T g = gs[i], v = vs[i];                                                                          \
      y[i] = (T)(expr);                                                                                      \
    }                                                                                                        \
  }
MF_ACTIVATION_GRADS(GRAD_KERNEL)

// Queues op's kernel for T; false when T is not among its dtypes.
template <typename T>
bool map_typed(mf_cuda_device *d, int op, const void *x, void *y, int64_t n, double alpha) {
  switch (op) {
#define ACT_CASE(name, types, grad_op, reads, expr)                                                   \
  case MF_ACT_##name:                                                                                  \
    if constexpr (in_set_##types<T>()) {                                                               \
      name##_kernel<T><<<mf_cuda_grid(n), MF_CUDA_BLOCK, 0, d->stream>>>((const T *)x, (T *)y, n, (T)alpha); \
      return true;                                                                                     \
    }                                                                                                  \
    return false;
    MF_ACTIVATIONS(ACT_CASE)
  }
  return false;
}

template <typename T>
bool grad_typed(mf_cuda_device *d, int op, const void *g, const void *v, void *y, int64_t n, double alpha) {
  switch (op) {
#define GRAD_CASE(name, types, curvature, expr)                                                                 \
  case MF_ACT_##name:                                                                                            \
    if constexpr (in_set_##types<T>()) {                                                                         \
      name##_kernel<T><<<mf_cuda_grid(n), MF_CUDA_BLOCK, 0, d->stream>>>((const T *)g, (const T *)v, (T *)y, n, \
                                                                         (T)alpha);                              \
      return true;                                                                                               \
    }                                                                                                            \
    return false;
    MF_ACTIVATION_GRADS(GRAD_CASE)
  }
  return false;
}

int unsupported(int op, int dtype, mf_cuda_error *e) {
  snprintf(e->msg, sizeof e->msg, "activation %d has no CUDA kernel for dtype %d", op, dtype);
  return 1;
}

int map(mf_cuda_device *d, int op, int dtype, const void *x, void *y, int64_t n, double alpha, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (n == 0) return 0;
  bool queued = dtype == MF_FLOAT32   ? map_typed<float>(d, op, x, y, n, alpha)
                : dtype == MF_FLOAT64 ? map_typed<double>(d, op, x, y, n, alpha)
                : dtype == MF_INT32   ? map_typed<int32_t>(d, op, x, y, n, alpha)
                : dtype == MF_INT64   ? map_typed<int64_t>(d, op, x, y, n, alpha)
                                      : false;
  if (!queued) return unsupported(op, dtype, e);
  MF_CUDA_LAUNCHED(e, "activation");
  return 0;
}

int grad(mf_cuda_device *d, int op, int dtype, const void *g, const void *v, void *y, int64_t n, double alpha,
         mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (n == 0) return 0;
  bool queued = dtype == MF_FLOAT32   ? grad_typed<float>(d, op, g, v, y, n, alpha)
                : dtype == MF_FLOAT64 ? grad_typed<double>(d, op, g, v, y, n, alpha)
                : dtype == MF_INT32   ? grad_typed<int32_t>(d, op, g, v, y, n, alpha)
                : dtype == MF_INT64   ? grad_typed<int64_t>(d, op, g, v, y, n, alpha)
                                      : false;
  if (!queued) return unsupported(op, dtype, e);
  MF_CUDA_LAUNCHED(e, "activation gradient");
  return 0;
}

}  // namespace

extern "C" MF_CUDA_EXPORT const mf_cuda_activations_api mf_cuda_activations_v1 = {map, grad};
