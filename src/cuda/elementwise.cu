// elementwise.cu — the elementwise table (mf_cuda_elementwise_v1): one kernel
// per op and dtype, generated from the op tables of kernels/element_ops.h
// (the lines ops/math.c's CPU loops come from), and Cast. The helpers the
// tables' expressions call are defined here for the device, each as its CPU
// form in ops/math.c computes: integers wrap through 64-bit unsigned
// arithmetic, floor division and modulo round as Python's, a zero divisor
// gives 0 (and a failed element), float -> integer conversions saturate.
#include "device/cuda/elementwise_api.h"
#include "internal.cuh"

#include "core/dtype.h"
#include "kernels/element_ops.h"

#include <stdint.h>
#include <type_traits>

template <typename T>
__device__ constexpr bool is_real() { return std::is_floating_point<T>::value; }

// ---------- the helpers of the tables' expressions ----------
// MF_MATH(fn, x)(args): the math function for x's type (CUDA overloads
// float and double); the CPU's vectorized forms (MF_VMATH) and complex forms
// (MF_CMATH) are the same functions here.
#define MF_MATH(fn, x) fn
#define MF_VMATH(fn, x) fn
#define MF_CMATH(fn, x) fn
#define MF_CMATH_LIBM(fn, x) fn

__device__ inline uint64_t mf_abs_int(int64_t x) { return x < 0 ? 0 - (uint64_t)x : (uint64_t)x; }
__device__ inline int64_t mf_sign_int(int64_t x) { return (x > 0) - (x < 0); }
__device__ inline int64_t mf_floordiv_int(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}
__device__ inline int64_t mf_floormod_int(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}
__device__ inline double mf_floormod_real(double a, double b) {
  double r = fmod(a, b);
  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}
__device__ inline int64_t mf_truncdiv_int(int64_t a, int64_t b) {
  if (b == 0) return 0;
  return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}
__device__ inline int64_t mf_truncmod_int(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
__device__ inline uint64_t mf_pow_int(int64_t base, int64_t e) {
  uint64_t r = 1, b = (uint64_t)base;
  if (e < 0) return 0;
  for (; e; e >>= 1) {
    if (e & 1) r *= b;
    b *= b;
  }
  return r;
}
__device__ inline int64_t mf_real_to_int(double v) {
  if (v != v) return 0;
  if (v >= 0x1p63) return INT64_MAX;
  if (v < -0x1p63) return INT64_MIN;
  return (int64_t)v;
}

template <typename T> __device__ inline auto mf_neg(T x) {
  if constexpr (is_real<T>()) return -x;
  else return (uint64_t)0 - (uint64_t)x;
}
template <typename T> __device__ inline auto mf_abs(T x) {
  if constexpr (is_real<T>()) return fabs(x);
  else return mf_abs_int((int64_t)x);
}
template <typename T> __device__ inline auto mf_sign(T x) {
  if constexpr (is_real<T>()) return x > 0 ? 1.0 : x < 0 ? -1.0 : (double)x;  // keeps NaN and -0
  else return mf_sign_int((int64_t)x);
}
template <typename T> __device__ inline auto mf_add(T a, T b) {
  if constexpr (is_real<T>()) return a + b;
  else return (uint64_t)a + (uint64_t)b;
}
template <typename T> __device__ inline auto mf_sub(T a, T b) {
  if constexpr (is_real<T>()) return a - b;
  else return (uint64_t)a - (uint64_t)b;
}
template <typename T> __device__ inline auto mf_mul(T a, T b) {
  if constexpr (is_real<T>()) return a * b;
  else return (uint64_t)a * (uint64_t)b;
}
template <typename T> __device__ inline auto mf_floordiv(T a, T b) {
  if constexpr (is_real<T>()) return floor(a / b);
  else return mf_floordiv_int((int64_t)a, (int64_t)b);
}
template <typename T> __device__ inline auto mf_floormod(T a, T b) {
  if constexpr (is_real<T>()) return mf_floormod_real(a, b);
  else return mf_floormod_int((int64_t)a, (int64_t)b);
}
template <typename T> __device__ inline auto mf_truncmod(T a, T b) {
  if constexpr (is_real<T>()) return fmod(a, b);
  else return mf_truncmod_int((int64_t)a, (int64_t)b);
}
template <typename T> __device__ inline auto mf_pow(T a, T b) {
  if constexpr (is_real<T>()) return pow(a, b);
  else return mf_pow_int((int64_t)a, (int64_t)b);
}
template <typename T> __device__ inline auto mf_round(T x) {
  if constexpr (is_real<T>()) return nearbyint(x);  // half to even
  else return x;
}
template <typename T> __device__ inline bool mf_int_zero(T b) {
  if constexpr (is_real<T>()) return false;
  else return b == 0;
}
template <typename T> __device__ inline bool mf_int_negative(T b) {
  if constexpr (is_real<T>()) return false;
  else return (int64_t)b < 0;
}
template <typename T> __device__ inline bool mf_is_nan(T x) {
  if constexpr (is_real<T>()) return isnan(x);
  else return false;
}
#define MF_MAX_KEEP_NAN(a, b) ((((b) > (a)) | mf_is_nan(b)) ? (b) : (a))
#define MF_MIN_KEEP_NAN(a, b) ((((b) < (a)) | mf_is_nan(b)) ? (b) : (a))
// exp(-|x|) never overflows: sigmoid(-1000) is 0 and sigmoid(1000) is 1, not nan.
template <typename T> __device__ inline T mf_sigmoid(T x) {
  T e = exp(-fabs(x));
  return (x >= 0 ? (T)1 : e) / (1 + e);
}
#define MF_SIGMOID(x) mf_sigmoid(x)
// Cast: to bool is x != 0; to an integer from a float through mf_real_to_int.
template <typename D, typename S> __device__ inline D mf_convert(S x) {
  if constexpr (std::is_same<D, bool>::value) return x != 0;
  else if constexpr (is_real<D>() || !is_real<S>()) return (D)x;
  else return (D)mf_real_to_int((double)x);
}

// The output C type of a binary op by its selector (ops/math.c's MF_OUTT_*):
// true division of integers gives double (uint8: float).
#define MF_OUTT_SAME(code, T) T
#define MF_OUTT_BOOL(code, T) bool
#define MF_OUTT_REAL(code, T) MF_TRUEDIV_##code
#define MF_TRUEDIV_MF_FLOAT32 float
#define MF_TRUEDIV_MF_FLOAT64 double
#define MF_TRUEDIV_MF_INT32 double
#define MF_TRUEDIV_MF_INT64 double
#define MF_TRUEDIV_MF_UINT8 float

// ---------- kernels ----------

#define MF_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

template <typename F, typename T, typename R>
__global__ void map_kernel(const T *x, R *y, int64_t n) {
  MF_GRID_STRIDE(i, n) y[i] = (R)F::template apply<T, R>(x[i]);
}

// Element i of the nest's output reads a[offset_a], b[offset_b].
__device__ inline void nest_offsets(const mf_cuda_bcast &nest, int64_t i, int64_t *oa, int64_t *ob) {
  if (nest.rank == 1) {
    *oa = i * nest.stride[0][0];
    *ob = i * nest.stride[1][0];
    return;
  }
  int64_t a = 0, b = 0;
  for (int d = nest.rank - 1; d >= 0; d--) {
    int64_t q = i / nest.dims[d], idx = i - q * nest.dims[d];
    a += idx * nest.stride[0][d];
    b += idx * nest.stride[1][d];
    i = q;
  }
  *oa = a;
  *ob = b;
}

// failed: NULL, or a device int set to 1 when some element fails the op's test.
template <typename F, typename T, typename R>
__global__ void zip_kernel(const T *a, const T *b, R *z, int64_t n, mf_cuda_bcast nest, int *failed) {
  MF_GRID_STRIDE(i, n) {
    int64_t oa, ob;
    nest_offsets(nest, i, &oa, &ob);
    T av = a[oa], bv = b[ob];
    if (failed && F::template fails<T>(av, bv)) *failed = 1;
    z[i] = (R)F::template apply<T, R>(av, bv);
  }
}

template <typename S, typename D>
__global__ void cast_kernel(const S *x, D *y, int64_t n) {
  MF_GRID_STRIDE(i, n) y[i] = mf_convert<D, S>(x[i]);
}

// ---------- launchers ----------

static int no_kernel(mf_cuda_error *e, const char *op, int dtype) {
  snprintf(e->msg, sizeof e->msg, "no GPU kernel of %s for dtype code %d", op, dtype);
  return 1;
}

template <typename F, typename T, typename R>
static int launch_map(mf_cuda_device *d, const void *x, void *y, int64_t n, mf_cuda_error *e) {
  if (n == 0) return 0;
  map_kernel<F, T, R><<<mf_cuda_grid(n), MF_CUDA_BLOCK, 0, d->stream>>>((const T *)x, (R *)y, n);
  MF_CUDA_LAUNCHED(e, F::label);
  return 0;
}

// With `failed`, the failure flag (device memory of the device's) is cleared,
// set by the kernel and read back: the caller waits for the GPU.
template <typename F, typename T, typename R>
static int launch_zip(mf_cuda_device *d, const void *a, const void *b, void *z, int64_t n, const mf_cuda_bcast *nest,
                      int *failed, mf_cuda_error *e) {
  if (failed) *failed = 0;
  if (n == 0) return 0;
  if (!failed) {
    zip_kernel<F, T, R><<<mf_cuda_grid(n), MF_CUDA_BLOCK, 0, d->stream>>>((const T *)a, (const T *)b, (R *)z, n,
                                                                          *nest, NULL);
    MF_CUDA_LAUNCHED(e, F::label);
    return 0;
  }
  std::lock_guard<std::mutex> hold(d->lock);
  if (!d->fail_flag) MF_CUDA_TRY(e, cudaMalloc(&d->fail_flag, sizeof(int)));
  MF_CUDA_TRY(e, cudaMemsetAsync(d->fail_flag, 0, sizeof(int), d->stream));
  zip_kernel<F, T, R><<<mf_cuda_grid(n), MF_CUDA_BLOCK, 0, d->stream>>>((const T *)a, (const T *)b, (R *)z, n,
                                                                        *nest, d->fail_flag);
  MF_CUDA_LAUNCHED(e, F::label);
  MF_CUDA_TRY(e, cudaMemcpyAsync(failed, d->fail_flag, sizeof(int), cudaMemcpyDeviceToHost, d->stream));
  MF_CUDA_TRY(e, cudaStreamSynchronize(d->stream));
  return 0;
}

// ---------- the ops, generated from the tables ----------
// Per op: a functor with the element expression (apply) and, for binary
// ops, the failure test (fails); a launcher switching on the dtype over the
// op's dtypes list (complex ones dropped); an entry in the table by op id
// (NULL for complex-only ops, which have no GPU kernels).

#define MF_UNARY_FUNCTOR(name, types, grad, expr)                      \
  MF_GPU_KEEP_##types(struct name##_op {                               \
    static constexpr const char *label = #name "_kernel";               \
    template <typename T, typename out_t> __device__ static out_t apply(T x) { return (out_t)(expr); } \
  };)
MF_UNARY_OPS(MF_UNARY_FUNCTOR)

#define MF_UNARY_CASE(code, T, op) \
  MF_GPU_DTYPE_##code(case code: return launch_map<op##_op, T, T>(d, x, y, n, e);)
#define MF_UNARY_LAUNCHER(op, types, grad, expr)                                                            \
  MF_GPU_KEEP_##types(static int op##_run(mf_cuda_device *d, int dtype, const void *x, void *y, int64_t n, \
                                          mf_cuda_error *e) {                                              \
    switch (dtype) {                                                                                       \
      MF_TYPES(types)(MF_UNARY_CASE, op)                                                                   \
      default: return no_kernel(e, #op, dtype);                                                            \
    }                                                                                                      \
  })
MF_UNARY_OPS(MF_UNARY_LAUNCHER)

typedef int (*unary_fn)(mf_cuda_device *, int, const void *, void *, int64_t, mf_cuda_error *);
#define MF_UNARY_ENTRY(op, types, grad, expr) MF_GPU_FIRST(MF_GPU_KEEP_##types(op##_run, ) NULL),
static const unary_fn unary_ops[MF_NUM_UNARY_OPS] = {MF_UNARY_OPS(MF_UNARY_ENTRY)};

#define MF_BINARY_FUNCTOR(name, types, sel, grad, fail, msg, expr)                                \
  MF_GPU_KEEP_##types(MF_GPU_KEEP_##sel(struct name##_op {                                        \
    static constexpr const char *label = #name "_kernel";                                          \
    template <typename T, typename out_t> __device__ static out_t apply(T a, T b) { return (out_t)(expr); } \
    template <typename T> __device__ static bool fails(T a, T b) {                                \
      (void)a, (void)b;                                                                           \
      return fail;                                                                                \
    }                                                                                             \
  };))
MF_BINARY_OPS(MF_BINARY_FUNCTOR)

#define MF_BINARY_CASE(code, T, op, sel) \
  MF_GPU_DTYPE_##code(case code: return launch_zip<op##_op, T, MF_OUTT_##sel(code, T)>(d, a, b, z, n, nest, failed, e);)
#define MF_BINARY_LAUNCHER(op, types, sel, grad, fail, msg, expr)                                               \
  MF_GPU_KEEP_##types(MF_GPU_KEEP_##sel(static int op##_run(mf_cuda_device *d, int dtype, const void *a,      \
                                                            const void *b, void *z, int64_t n,                \
                                                            const mf_cuda_bcast *nest, int *failed,           \
                                                            mf_cuda_error *e) {                               \
    switch (dtype) {                                                                                          \
      MF_TYPES(types)(MF_BINARY_CASE, op, sel)                                                                \
      default: return no_kernel(e, #op, dtype);                                                               \
    }                                                                                                         \
  }))
MF_BINARY_OPS(MF_BINARY_LAUNCHER)

typedef int (*binary_fn)(mf_cuda_device *, int, const void *, const void *, void *, int64_t, const mf_cuda_bcast *,
                         int *, mf_cuda_error *);
#define MF_BINARY_ENTRY(op, types, sel, grad, fail, msg, expr) \
  MF_GPU_FIRST(MF_GPU_KEEP_##types(MF_GPU_KEEP_##sel(op##_run, )) NULL),
static const binary_fn binary_ops[MF_NUM_BINARY_OPS] = {MF_BINARY_OPS(MF_BINARY_ENTRY)};

static int unary(mf_cuda_device *d, int op, int dtype, const void *x, void *y, int64_t n, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (op < 0 || op >= MF_NUM_UNARY_OPS || !unary_ops[op]) return no_kernel(e, "a unary op", dtype);
  return unary_ops[op](d, dtype, x, y, n, e);
}

static int binary(mf_cuda_device *d, int op, int dtype, const void *a, const void *b, void *z, int64_t n,
                  const mf_cuda_bcast *nest, int *failed, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  if (op < 0 || op >= MF_NUM_BINARY_OPS || !binary_ops[op]) return no_kernel(e, "a binary op", dtype);
  return binary_ops[op](d, dtype, a, b, z, n, nest, failed, e);
}

// ---------- Cast ----------

template <typename S, typename D>
static int launch_cast(mf_cuda_device *d, const void *x, void *y, int64_t n, mf_cuda_error *e) {
  if (n == 0) return 0;
  cast_kernel<S, D><<<mf_cuda_grid(n), MF_CUDA_BLOCK, 0, d->stream>>>((const S *)x, (D *)y, n);
  MF_CUDA_LAUNCHED(e, "Cast_kernel");
  return 0;
}

#define MF_CAST_CASE_TO(dcode, D, S) MF_GPU_DTYPE_##dcode(case dcode: return launch_cast<S, D>(d, x, y, n, e);)
#define MF_CAST_CASE_FROM(scode, S)                          \
  MF_GPU_DTYPE_##scode(case scode:                           \
    switch (dst) {                                           \
      MF_FOR_CAST_TYPES_INNER(MF_CAST_CASE_TO, S)            \
      default: return no_kernel(e, "Cast", dst);             \
    })
static int cast(mf_cuda_device *d, int src, int dst, const void *x, void *y, int64_t n, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  switch (src) {
    MF_FOR_ALL_TYPES(MF_CAST_CASE_FROM)
    default: return no_kernel(e, "Cast", src);
  }
}

extern "C" MF_CUDA_EXPORT const mf_cuda_elementwise_api mf_cuda_elementwise_v1 = {unary, binary, cast};
