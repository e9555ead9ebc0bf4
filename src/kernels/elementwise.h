/* elementwise.h — element loops for every elementwise kernel: the block loop
 * that compilers vectorize, the map (one input) and zip (two inputs) loop
 * functions written from an element expression, and element helpers. Kernels
 * write one loop function per dtype from a list of core/dtype.h and keep them
 * in tables indexed by dtype (ops/math.c, ops/nn.c). */
#ifndef MF_KERNELS_ELEMENTWISE_H
#define MF_KERNELS_ELEMENTWISE_H

#include "core/base.h"
#include "core/tensor.h"
#include "graph/op_def.h"
#include "kernels/vecmath.h"

#include <math.h>

/* ---------- the block loop ----------
 * gcc -O2 vectorizes only loops that need no alias checks and whose trip count
 * is a known multiple of the vector width. So loops take restrict pointer
 * parameters (gcc ignores restrict on local variables) in a typed function that
 * the void* entry point inlines, and run in fixed blocks plus a tail:
 * MF_ELEMENTS(n, i, body) runs body for i in [0, n). The lanes of a block are
 * unrolled, so a block is a few vector instructions with no inner loop whose
 * speed would hang on where the linker happens to place it. */
enum { MF_BLOCK = 16 };
#define MF_ELEMENTS(n, i, ...)                                                 \
  do {                                                                         \
    int64_t i##_block = 0;                                                     \
    for (; i##_block + MF_BLOCK <= (n); i##_block += MF_BLOCK)                 \
      _Pragma("GCC unroll 16")                                                 \
      for (int i##_lane = 0; i##_lane < MF_BLOCK; i##_lane++) {                \
        const int64_t i = i##_block + i##_lane;                                \
        __VA_ARGS__                                                            \
      }                                                                        \
    for (int64_t i = i##_block; i < (n); i++) { __VA_ARGS__ }                  \
  } while (0)

/* ---------- loop functions ----------
 * Both kinds take a scalar parameter `alpha`, converted to the element type T
 * (LeakyRelu's slope; 0 where an op has none). */

/* mf_map_fn (graph/op_def.h): y[i] = expr over n elements; expr reads the
 * element x (type T) and alpha. */
#define MF_MAP_FN(fn, T, R, expr)                                                          \
  static inline void fn##_typed(const T *restrict px, R *restrict py, int64_t n, T alpha) { \
    (void)alpha;                                                                           \
    MF_ELEMENTS(n, i, const T x = px[i]; py[i] = (R)(expr););                              \
  }                                                                                        \
  static void fn(const void *x, void *y, int64_t n, double alpha) { fn##_typed(x, y, n, (T)alpha); }

/* mf_zip_fn (graph/op_def.h): y[i] = expr over n elements of two operands;
 * expr reads their elements, named a and b by the caller, alpha, and out_t
 * (R). An operand that does not step repeats its first element. `fail`, an
 * expression of the same, marks elements with no result (integer division by
 * zero); the function returns whether any did. */
#define MF_ZIP_STEP(expr, fail) py[i] = (out_t)(expr); bad |= (fail);
#define MF_ZIP_FN(fn, T, R, a, b, fail, expr)                                                      \
  static inline bool fn##_typed(const T *restrict pa, bool a_steps, const T *restrict pb,          \
                                bool b_steps, R *restrict py, int64_t n, T alpha) {                \
    typedef R out_t;                                                                               \
    bool bad = false;                                                                              \
    (void)alpha;                                                                                   \
    if (a_steps && b_steps) {                                                                      \
      MF_ELEMENTS(n, i, const T a = pa[i]; const T b = pb[i]; MF_ZIP_STEP(expr, fail));            \
    } else if (a_steps) {                                                                          \
      const T b = pb[0];                                                                           \
      MF_ELEMENTS(n, i, const T a = pa[i]; MF_ZIP_STEP(expr, fail));                               \
    } else {                                                                                       \
      const T a = pa[0];                                                                           \
      MF_ELEMENTS(n, i, const T b = pb[i]; MF_ZIP_STEP(expr, fail));                               \
    }                                                                                              \
    return bad;                                                                                    \
  }                                                                                                \
  static bool fn(const void *va, bool a_steps, const void *vb, bool b_steps, void *vy, int64_t n,  \
                 double alpha) {                                                                   \
    return fn##_typed(va, a_steps, vb, b_steps, vy, n, (T)alpha);                                  \
  }

/* The output of a broadcast as a loop nest: dims, and each input's element
 * stride per dim (0 where it repeats). Dims of size 1 are dropped and neighbours
 * that both inputs walk alike are merged, so the last dim is as long as it can be. */
typedef struct mf_bcast_nest {
  int rank;
  int64_t dims[MF_MAX_RANK];
  int64_t stride[2][MF_MAX_RANK];
} mf_bcast_nest;
/* The nest of z = f(in[0], in[1]) (z has the broadcast shape, at least one element). */
void mf_bcast_nest_of(const mf_tensor *const in[2], const mf_tensor *z, mf_bcast_nest *nest);

/* ---------- running them over tensors (elementwise.c) ----------
 * Over all of y's elements, split over the session's threads when there are
 * many. x, a, b: tensors of y's size, or (when not stepping) one element. */
void mf_map_run(mf_kernel_ctx *ctx, mf_map_fn fn, const mf_tensor *x, mf_tensor *y, double alpha);
/* Returns whether any element failed (see MF_ZIP_FN). */
bool mf_zip_run(mf_kernel_ctx *ctx, mf_zip_fn fn, const mf_tensor *a, bool a_steps, const mf_tensor *b, bool b_steps,
                mf_tensor *y, double alpha);

/* ---------- element helpers ---------- */

/* A <math.h> function for float or double arguments: MF_MATH(exp, x)(x). */
#define MF_MATH(fn, x) _Generic((x), float: fn##f, default: fn)

/* exp(-|x|) never overflows: sigmoid(-1000) is 0 and sigmoid(1000) is 1, not nan. */
#define MF_SIGMOID_FN(T, suffix)                        \
  static inline T mf_sigmoid##suffix(T x) {             \
    T e = MF_VMATH(exp, x)(-MF_MATH(fabs, x)(x));       \
    return (x >= 0 ? 1 : e) / (1 + e);                  \
  }
MF_SIGMOID_FN(double, )
MF_SIGMOID_FN(float, f)
#define MF_SIGMOID(x) MF_MATH(mf_sigmoid, x)(x)

/* Whether x is NaN, for any element type (never for integers). */
static inline bool mf_is_nan_f32(float x) { return isnan(x); }
static inline bool mf_is_nan_f64(double x) { return isnan(x); }
static inline bool mf_is_nan_never(int64_t x) { MF_UNUSED(x); return false; }
#define MF_IS_NAN(x) _Generic((x), float: mf_is_nan_f32, double: mf_is_nan_f64, default: mf_is_nan_never)(x)

/* The larger (smaller) of an accumulator a and an element b, NaN once either
 * is, as NumPy's maximum.reduce: a NaN a stays, a NaN b wins. `|`, not `||`,
 * keeps the select branch-free so that it vectorizes. */
#define MF_MAX_KEEP_NAN(a, b) ((((b) > (a)) | MF_IS_NAN(b)) ? (b) : (a))
#define MF_MIN_KEEP_NAN(a, b) ((((b) < (a)) | MF_IS_NAN(b)) ? (b) : (a))

/* The lowest and the highest value of element type E: where a max or a min
 * over no elements starts. */
#define MF_LOWEST(E) \
  _Generic((E)0, float: -INFINITY, double: -INFINITY, int32_t: INT32_MIN, int64_t: INT64_MIN, uint8_t: 0)
#define MF_HIGHEST(E) \
  _Generic((E)0, float: INFINITY, double: INFINITY, int32_t: INT32_MAX, int64_t: INT64_MAX, uint8_t: UINT8_MAX)

/* Sums and products in which integers wrap around as TensorFlow's do (in
 * unsigned arithmetic, where C defines the wrap). */
#define MF_DEFINE_WRAPPING(name, op)                                                                      \
  static inline float name##_f32(float a, float b) { return a op b; }                                    \
  static inline double name##_f64(double a, double b) { return a op b; }                                 \
  static inline int32_t name##_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a op (uint32_t)b); } \
  static inline int64_t name##_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a op (uint64_t)b); } \
  static inline uint8_t name##_u8(uint8_t a, uint8_t b) { return (uint8_t)(a op b); }
MF_DEFINE_WRAPPING(mf_wrapping_add, +)
MF_DEFINE_WRAPPING(mf_wrapping_mul, *)
#undef MF_DEFINE_WRAPPING
#define MF_WRAPPING(name, a, b)                                                                  \
  _Generic((a), float: name##_f32, double: name##_f64, int32_t: name##_i32, int64_t: name##_i64, \
           uint8_t: name##_u8)(a, b)
#define MF_WRAPPING_ADD(a, b) MF_WRAPPING(mf_wrapping_add, a, b)
#define MF_WRAPPING_MUL(a, b) MF_WRAPPING(mf_wrapping_mul, a, b)

#endif
