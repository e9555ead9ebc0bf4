/* math.c — elementwise math: unary and binary arithmetic, comparisons,
 * logic, and Cast.
 *
 * Every op is one line of MF_UNARY_OPS or MF_BINARY_OPS: its name, the dtypes
 * it takes, and its element expression. From that line the macros below write
 * one element loop per dtype, a table of those loops by dtype, and the op's
 * infer and kernel functions, which hand the table to one shared driver. The
 * supported dtypes of an op are exactly the entries of its table, so infer
 * checks dtypes by looking there.
 *
 * Binary ops broadcast like NumPy. The driver walks the output in rows along
 * its last (merged) dimension; each row is a same-shape, tensor-with-scalar or
 * scalar-with-tensor run, and each of those is a tight loop over restrict
 * pointers that the compiler vectorizes (kernels/elementwise.h). Same-shape and
 * scalar operands are one row covering the whole output. */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/tstring.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "kernels/element_ops.h"
#include "kernels/elementwise.h"
#include "kernels/helpers.h"
#include "ops/gpu/gpu.h"

#include <complex.h>
#include <math.h>
#include <string.h>

/* ---------- dtypes ----------
 * An op's dtypes column names a list of core/dtype.h by its set (NUMERIC is
 * MF_FOR_NUMERIC_TYPES, see MF_TYPES). A binary op's output has, by the
 * inputs' dtype code and C type, the input's C type (SAME), bool (BOOL), or
 * the true-division result's (REAL: TensorFlow's truediv, where int32 and
 * int64 give double and uint8 float). */
#define MF_OUTT_SAME(code, T) T
#define MF_OUTT_BOOL(code, T) bool
#define MF_OUTT_REAL(code, T) MF_TRUEDIV_##code
#define MF_TRUEDIV_MF_FLOAT32 float
#define MF_TRUEDIV_MF_FLOAT64 double
#define MF_TRUEDIV_MF_INT32 double
#define MF_TRUEDIV_MF_INT64 double
#define MF_TRUEDIV_MF_UINT8 float
#define MF_TRUEDIV_MF_COMPLEX64 float complex
#define MF_TRUEDIV_MF_COMPLEX128 double complex
/* PART: the dtype of a complex input's parts (Real, Imag, ComplexAbs, Angle);
 * COMPLEX: the complex dtype whose parts are the input's (Complex). */
#define MF_OUTT_PART(code, T) MF_PART_##code
#define MF_PART_MF_COMPLEX64 float
#define MF_PART_MF_COMPLEX128 double
#define MF_OUTT_COMPLEX(code, T) MF_COMPLEX_OF_##code
#define MF_COMPLEX_OF_MF_FLOAT32 float complex
#define MF_COMPLEX_OF_MF_FLOAT64 double complex

/* ---------- element helpers ----------
 * Expressions are written once for every dtype: _Generic picks the float or
 * the integer form. Integer forms work in int64/uint64 so that they wrap like
 * TensorFlow instead of overflowing (undefined in C), and so that comparisons
 * with zero never see an unsigned type. */
#define MF_REAL_OR_INT(x, real, integer) \
  _Generic((x), float: real, double: real, float complex: real, double complex: real, default: integer)
/* C99's complex functions by the element's type: MF_CMATH(exp, x) is cexpf
 * for float complex, cexp for double complex, else MF_VMATH's pick. */
#define MF_CMATH(fn, x) _Generic((x), float complex: c##fn##f, double complex: c##fn, default: MF_VMATH(fn, x))
/* The same over libm's real functions (MF_MATH), for those vecmath.h lacks. */
#define MF_CMATH_LIBM(fn, x) _Generic((x), float complex: c##fn##f, double complex: c##fn, default: MF_MATH(fn, x))
/* a + bi without multiplying by i (inf * i would make a NaN real part), part
 * by part: a complex number is an array of its two parts (C11 6.2.5), and
 * CMPLX is missing from some compilers' headers (clang with glibc). */
static inline float complex mf_complex64_of(float a, float b) {
  float complex z;
  ((float *)&z)[0] = a, ((float *)&z)[1] = b;
  return z;
}
static inline double complex mf_complex128_of(double a, double b) {
  double complex z;
  ((double *)&z)[0] = a, ((double *)&z)[1] = b;
  return z;
}
#define MF_MAKE_COMPLEX(a, b) _Generic((a), float: mf_complex64_of, default: mf_complex128_of)(a, b)
#define MF_CREAL(x) _Generic((x), float complex: crealf, default: creal)(x)
#define MF_CIMAG(x) _Generic((x), float complex: cimagf, default: cimag)(x)
#define MF_WRAP(a, op, b) ((uint64_t)(a) op (uint64_t)(b))

static inline uint64_t mf_abs_int(int64_t x) { return x < 0 ? 0 - (uint64_t)x : (uint64_t)x; }
static inline int64_t mf_sign_int(int64_t x) { return (x > 0) - (x < 0); }
static inline double mf_sign_real(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; /* keeps NaN and -0 */ }
static inline bool mf_negative_int(int64_t x) { return x < 0; }

/* Python's //: rounds toward negative infinity. A zero divisor gives 0 (the
 * kernel reports it); INT64_MIN / -1 wraps instead of trapping. */
static inline int64_t mf_floordiv_int(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}
/* Python's % (TensorFlow's FloorMod): the result takes the divisor's sign. */
static inline int64_t mf_floormod_int(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}
static inline double mf_floormod_real(double a, double b) {
  double r = fmod(a, b);
  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}
/* C's / and %: the quotient rounds toward zero and the remainder takes the
 * dividend's sign. Zero and -1 divisors as above. */
static inline int64_t mf_truncdiv_int(int64_t a, int64_t b) {
  if (b == 0) return 0;
  return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}
static inline int64_t mf_truncmod_int(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
/* Exponentiation by squaring, wrapping; negative exponents give 0 (reported). */
static inline uint64_t mf_pow_int(int64_t base, int64_t e) {
  uint64_t r = 1, b = (uint64_t)base;
  if (e < 0) return 0;
  for (; e; e >>= 1) {
    if (e & 1) r *= b;
    b *= b;
  }
  return r;
}
/* float -> integer truncates toward zero; NaN gives 0 and out-of-range values
 * saturate before narrowing, so no conversion is undefined. */
static inline int64_t mf_real_to_int(double v) {
  if (v != v) return 0;
  if (v >= 0x1p63) return INT64_MAX;
  if (v < -0x1p63) return INT64_MIN;
  return (int64_t)v;
}
#define mf_neg(x) MF_REAL_OR_INT(x, -(x), MF_WRAP(0, -, x))
/* The casts keep gcc from warning about fabs in the arms not taken for integers. */
#define mf_abs(x) _Generic((x), float: fabsf((float)(x)), double: fabs((double)(x)), default: mf_abs_int(x))
#define mf_sign(x) MF_REAL_OR_INT(x, mf_sign_real(x), mf_sign_int(x))
#define mf_add(a, b) MF_REAL_OR_INT(a, (a) + (b), MF_WRAP(a, +, b))
#define mf_sub(a, b) MF_REAL_OR_INT(a, (a) - (b), MF_WRAP(a, -, b))
#define mf_mul(a, b) MF_REAL_OR_INT(a, (a) * (b), MF_WRAP(a, *, b))
#define mf_floordiv(a, b) MF_REAL_OR_INT(a, MF_MATH(floor, a)((a) / (b)), mf_floordiv_int(a, b))
#define mf_floormod(a, b) MF_REAL_OR_INT(a, mf_floormod_real(a, b), mf_floormod_int(a, b))
#define mf_truncmod(a, b) MF_REAL_OR_INT(a, MF_MATH(fmod, a)(a, b), mf_truncmod_int(a, b))
#define mf_pow(a, b) MF_REAL_OR_INT(a, MF_MATH(pow, a)(a, b), mf_pow_int(a, b))
#define mf_round(x) MF_REAL_OR_INT(x, MF_MATH(nearbyint, x)(x), x)
#define mf_int_zero(b) MF_REAL_OR_INT(b, 0, (b) == 0)
#define mf_int_negative(b) MF_REAL_OR_INT(b, 0, mf_negative_int(b))
/* Cast: to bool is x != 0; to an integer goes through mf_real_to_int from floats. */
/* From complex, as TensorFlow's Cast: the real part, the imaginary part dropped. */
#define mf_to_int(x) \
  _Generic((x), float: mf_real_to_int(x), double: mf_real_to_int(x), float complex: mf_real_to_int(MF_CREAL(x)), \
           double complex: mf_real_to_int(MF_CREAL(x)), default: x)
#define mf_to_real(x) _Generic((x), float complex: MF_CREAL(x), double complex: MF_CREAL(x), default: x)
#define mf_convert(D, x)                                                                                   \
  _Generic((D)0, bool: (x) != 0, float: (D)mf_to_real(x), double: (D)mf_to_real(x), float complex: (D)(x), \
           double complex: (D)(x), default: (D)mf_to_int(x))

/* The op tables (MF_UNARY_OPS, MF_PART_OPS, MF_BINARY_OPS) are in kernels/element_ops.h, which the
 * CUDA backend's kernels are generated from too. */

/* EQUALITY (element_ops.h) takes strings besides (MF_STRINGS_EQUALITY
 * adds their entries), compared by the loop the op's name_strings names. */
#define MF_STRINGS_EQUALITY(...) __VA_ARGS__
#define MF_STRINGS_NUMERIC(...)
#define MF_STRINGS_NUMBER(...)
#define MF_STRINGS_COMPLEX(...)
#define MF_STRINGS_FLOAT_COMPLEX(...)
#define MF_STRINGS_INT(...)
#define MF_STRINGS_SIGNED(...)
#define MF_STRINGS_BOOL(...)
#define MF_STRINGS_FLOAT(...)

/* Strings are equal when their bytes are; read where they lie (core/tstring.h). */
static bool strings_equal(const mf_tstring *a, const mf_tstring *b) {
  return a->length == b->length && memcmp(mf_tstring_bytes(a), mf_tstring_bytes(b), (size_t)a->length) == 0;
}
static bool strings_compare(const void *va, bool a_steps, const void *vb, bool b_steps, void *vy, int64_t n,
                            bool equal) {
  const mf_tstring *a = va, *b = vb;
  bool *y = vy;
  for (int64_t i = 0; i < n; i++) y[i] = strings_equal(a + (a_steps ? i : 0), b + (b_steps ? i : 0)) == equal;
  return false;
}
static bool Equal_strings(const void *va, bool a_steps, const void *vb, bool b_steps, void *vy, int64_t n,
                          double alpha) {
  (void)alpha;
  return strings_compare(va, a_steps, vb, b_steps, vy, n, true);
}
static bool NotEqual_strings(const void *va, bool a_steps, const void *vb, bool b_steps, void *vy, int64_t n,
                             double alpha) {
  (void)alpha;
  return strings_compare(va, a_steps, vb, b_steps, vy, n, false);
}

/* ---------- shared infer and kernel drivers ---------- */
typedef struct {
  unsigned dtypes;                    /* bit per supported dtype */
  mf_map_fn loop[MF_DTYPE_SLOTS];
  mf_dtype out[MF_DTYPE_SLOTS];
} mf_unary_impl;

typedef struct {
  unsigned dtypes;
  mf_zip_fn loop[MF_DTYPE_SLOTS];
  mf_dtype out[MF_DTYPE_SLOTS];
  const char *fail_msg;
} mf_binary_impl;

static mf_code unary_infer(mf_infer_ctx *ic, const mf_unary_impl *impl) {
  if (mf_check_dtype(ic, 0, "x has", impl->dtypes)) return ic->status->code;
  ic->out_dtypes[0] = impl->out[ic->in_dtypes[0]];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static mf_code unary_run(mf_kernel_ctx *ctx, const mf_unary_impl *impl) {
  const mf_tensor *x = ctx->inputs[0];
  mf_map_run(ctx, impl->loop[x->dtype], x, ctx->outputs[0], 0);
  return MF_OK;
}

/* The element loops the executor fuses (mf_op_def.element_loop): the ones the kernels run.
 * Complex values run as steps of their own: fused tiles hold elements of at most 8 bytes. */
static bool unary_loop(const mf_unary_impl *impl, mf_dtype t, mf_element_loop *loop) {
  if ((unsigned)t >= MF_DTYPE_SLOTS || !(impl->dtypes >> t & 1u) || mf_dtype_is_complex(t) ||
      mf_dtype_is_complex(impl->out[t]))
    return false;
  *loop = (mf_element_loop){.map = impl->loop[t]};
  return true;
}

/* String comparisons run as steps of their own: fused groups work in tiles of numbers. */
static bool binary_loop(const mf_binary_impl *impl, mf_dtype t, mf_element_loop *loop) {
  if ((unsigned)t >= MF_DTYPE_SLOTS || t == MF_STRING || !(impl->dtypes >> t & 1u) || mf_dtype_is_complex(t) ||
      mf_dtype_is_complex(impl->out[t]))
    return false;
  *loop = (mf_element_loop){.zip = impl->loop[t], .fail_msg = impl->fail_msg};
  return true;
}

static mf_code binary_infer(mf_infer_ctx *ic, const mf_binary_impl *impl) {
  if (mf_check_same_dtype(ic, 0, "x", 1, "y") || mf_check_dtype(ic, 0, "x and y have", impl->dtypes))
    return ic->status->code;
  ic->out_dtypes[0] = impl->out[ic->in_dtypes[0]];
  return mf_broadcast_shape(ic->op_name, &ic->in_shapes[0], &ic->in_shapes[1], &ic->out_shapes[0],
                            ic->status);
}

/* Runs loop over the rows of the nest's last dim, stepping the outer dims like an odometer. */
static bool bcast_run(mf_zip_fn loop, const mf_tensor *const in[2], mf_tensor *z) {
  mf_bcast_nest nest;
  mf_bcast_nest_of(in, z, &nest);
  const char *pa = in[0]->data, *pb = in[1]->data;
  char *pz = z->data;
  size_t ea = mf_dtype_size(in[0]->dtype), eb = mf_dtype_size(in[1]->dtype), ez = mf_dtype_size(z->dtype);
  int last = nest.rank - 1;
  int64_t n = nest.dims[last], idx[MF_MAX_RANK] = {0}, off[2] = {0, 0};
  bool a_steps = nest.stride[0][last] != 0, b_steps = nest.stride[1][last] != 0, bad = false;
  for (int64_t row = 0, rows = z->size / n; row < rows; row++) {
    bad |= loop(pa + off[0] * (int64_t)ea, a_steps, pb + off[1] * (int64_t)eb, b_steps,
                pz + row * n * (int64_t)ez, n, 0);
    for (int d = last - 1; d >= 0; d--) {
      off[0] += nest.stride[0][d];
      off[1] += nest.stride[1][d];
      if (++idx[d] < nest.dims[d]) break;
      off[0] -= nest.stride[0][d] * nest.dims[d];
      off[1] -= nest.stride[1][d] * nest.dims[d];
      idx[d] = 0;
    }
  }
  return bad;
}

static mf_code binary_run(mf_kernel_ctx *ctx, const mf_binary_impl *impl) {
  const mf_tensor *const in[2] = {ctx->inputs[0], ctx->inputs[1]};
  mf_tensor *z = ctx->outputs[0];
  if (z->size == 0) return MF_OK;
  mf_zip_fn loop = impl->loop[in[0]->dtype];
  bool bad;
  bool a_steps = in[0]->size == z->size, b_steps = in[1]->size == z->size;
  if ((a_steps || in[0]->size == 1) && (b_steps || in[1]->size == 1) && (a_steps || b_steps))
    bad = mf_zip_run(ctx, loop, in[0], a_steps, in[1], b_steps, z, 0);
  else
    bad = bcast_run(loop, in, z);
  if (bad) return MF_INVALID(ctx->status, "%s: %s", ctx->op->name, impl->fail_msg);
  return MF_OK;
}

/* ---------- gradient rules ----------
 * The vocabulary of the grad columns: each word builds one graph op in the
 * gradient rule's context gc; NUM(v) is a scalar constant of the rule's dtype t
 * and MASK(c) the bool tensor c as 0/1 of dtype t. */
#define NUM(v) mf_grad_scalar(gc, t, v)
#define TWO_OVER_SQRT_PI 1.1283791670955126 /* erf's derivative at 0 */
#define NEG(u) mf_grad_op1(gc, "Neg", u)
#define SIGN(u) mf_grad_op1(gc, "Sign", u)
#define SIN(u) mf_grad_op1(gc, "Sin", u)
#define COS(u) mf_grad_op1(gc, "Cos", u)
#define ADD(u, v) mf_grad_op2(gc, "Add", u, v)
#define SUB(u, v) mf_grad_op2(gc, "Sub", u, v)
#define MUL(u, v) mf_grad_op2(gc, "Mul", u, v)
#define DIV(u, v) mf_grad_op2(gc, "Div", u, v)
#define POW(u, v) mf_grad_op2(gc, "Pow", u, v)
#define FLOORDIV(u, v) mf_grad_op2(gc, "FloorDiv", u, v)
#define LOG(u) mf_grad_op1(gc, "Log", u)
#define EXP(u) mf_grad_op1(gc, "Exp", u)
#define SQRT(u) mf_grad_op1(gc, "Sqrt", u)
#define SINH(u) mf_grad_op1(gc, "Sinh", u)
#define COSH(u) mf_grad_op1(gc, "Cosh", u)
#define LESS(u, v) mf_grad_op2(gc, "Less", u, v)
#define GREATER(u, v) mf_grad_op2(gc, "Greater", u, v)
#define MASK(c) mf_grad_cast(gc, c, t)
#define LOG_POSITIVE(u) grad_log_positive(gc, u, t)
#define CONJ(u) grad_conj(gc, u, t)
#define COMPLEX(u, v) mf_grad_op2(gc, "Complex", u, v)
#define REAL(u) mf_grad_op1(gc, "Real", u)
#define IMAG(u) mf_grad_op1(gc, "Imag", u)
#define PART(v) mf_grad_scalar(gc, mf_dtype_real(t), v)
#define SELECT(c, u, v) mf_grad_op3(gc, "SelectV2", c, u, v)

/* The conjugate of u of dtype t: u itself unless t is complex (TensorFlow's
 * gradients conjugate where its rules say conj, which real values ignore). */
static mf_output grad_conj(mf_grad_ctx *gc, mf_output u, mf_dtype t) {
  return mf_dtype_is_complex(t) ? mf_grad_op1(gc, "Conj", u) : u;
}

/* ComplexAbs's: complex(dy / |x|, 0) * x, with |x| read as 1 where it is 0
 * (there x is 0 and so is the gradient: TensorFlow's div_no_nan). */
static mf_output grad_complex_abs(mf_grad_ctx *gc, mf_output x, mf_output y, mf_output dy) {
  const mf_dtype t = mf_port_dtype(x);
  return MUL(COMPLEX(DIV(dy, SELECT(GREATER(y, PART(0)), y, PART(1))), PART(0)), x);
}

/* log(u) where u > 0, else 0: the log of u where u > 0 and of 1 elsewhere (NaN
 * included), so no log of a non-positive number is ever taken. */
static mf_output grad_log_positive(mf_grad_ctx *gc, mf_output u, mf_dtype t) {
  return LOG(mf_grad_op3(gc, "SelectV2", GREATER(u, NUM(0)), u, NUM(1)));
}

/* From the grad column: the op's flags, its rule (NULL for ND) and the rule's
 * definition (none for ND). DX(e) and DXY(da, db) expand to a macro name that
 * takes the op's name from the parentheses that follow them. */
#define MF_RULE_FLAGS_ND MF_OP_NOT_DIFFERENTIABLE
#define MF_RULE_FLAGS_DX(e) 0
#define MF_RULE_FLAGS_DXY(da, db) 0
#define MF_RULE_FN_ND(op) NULL
#define MF_RULE_FN_DX(e) MF_RULE_FN
#define MF_RULE_FN_DXY(da, db) MF_RULE_FN
#define MF_RULE_FN(op) op##_grad
#define MF_RULE_HEAD_ND(op)
#define MF_RULE_HEAD_DX(e) MF_RULE_HEAD
#define MF_RULE_HEAD_DXY(da, db) MF_RULE_HEAD
#define MF_RULE_HEAD(op) static mf_code op##_grad(mf_grad_ctx *gc)
#define MF_RULE_BODY_ND
#define MF_RULE_BODY_DX(e)                                                       \
  {                                                                              \
    const mf_output x = mf_op_in(gc->op, 0), y = mf_op_out(gc->op, 0);           \
    const mf_output dy = gc->grads[0];                                           \
    const mf_dtype t = mf_port_dtype(x);                                         \
    (void)x, (void)y, (void)t;                                                   \
    gc->input_grads[0] = (e);                                                    \
    return gc->status->code;                                                     \
  }
#define MF_RULE_BODY_DXY(da, db)                                                 \
  {                                                                              \
    const mf_output a = mf_op_in(gc->op, 0), b = mf_op_in(gc->op, 1);            \
    const mf_output z = mf_op_out(gc->op, 0), dz = gc->grads[0];                 \
    const mf_dtype t = mf_port_dtype(a);                                         \
    (void)a, (void)b, (void)z, (void)t;                                          \
    const mf_output gb = (db);                                                   \
    gc->input_grads[0] = (da);                                                   \
    gc->input_grads[1] = gb;                                                     \
    return gc->status->code;                                                     \
  }
#define MF_RULE_DEFINE(op, grad) MF_RULE_HEAD_##grad(op) MF_RULE_BODY_##grad

/* ---------- the ops, generated from the tables ---------- */
#define MF_UNARY_LOOP(code, T, name, sel, expr) MF_MAP_FN(name##_##code, T, MF_OUTT_##sel(code, T), expr)
#define MF_UNARY_ENTRY(code, T, name) [code] = name##_##code,
#define MF_OUT_ENTRY(code, T, sel) [code] = MF_DTYPE_OF(MF_OUTT_##sel(code, T)),
#define MF_UNARY_DEFINE(name, types, grad, expr) MF_UNARY_DEFINE_SEL(name, types, SAME, grad, expr)
#define MF_PART_DEFINE(name, types, grad, expr) MF_UNARY_DEFINE_SEL(name, types, PART, grad, expr)
#define MF_UNARY_DEFINE_SEL(name, types, sel, grad, expr)                              \
  MF_TYPES(types)(MF_UNARY_LOOP, name, sel, expr)                                      \
  static const mf_unary_impl name##_impl = {                                           \
      .dtypes = MF_DTYPE_MASK(MF_TYPES(types)),                                        \
      .loop = {MF_TYPES(types)(MF_UNARY_ENTRY, name)},                                 \
      .out = {MF_TYPES(types)(MF_OUT_ENTRY, sel)}};                                   \
  static mf_code name##_infer(mf_infer_ctx *ic) { return unary_infer(ic, &name##_impl); } \
  static mf_code name##_kernel(mf_kernel_ctx *ctx) { return unary_run(ctx, &name##_impl); } \
  static bool name##_element_loop(const mf_attrs *attrs, mf_dtype t, mf_element_loop *loop) { \
    (void)attrs;                                                                       \
    return unary_loop(&name##_impl, t, loop);                                          \
  }                                                                                    \
  MF_RULE_DEFINE(name, grad)
MF_UNARY_OPS(MF_UNARY_DEFINE)
MF_PART_OPS(MF_PART_DEFINE)

#define MF_BINARY_LOOP(code, T, name, sel, fail, expr) \
  MF_ZIP_FN(name##_##code, T, MF_OUTT_##sel(code, T), a, b, fail, expr)
#define MF_BINARY_ENTRY(code, T, name) [code] = name##_##code,
#define MF_BINARY_DEFINE(name, types, sel, grad, fail, msg, expr)                       \
  MF_TYPES(types)(MF_BINARY_LOOP, name, sel, fail, expr)                                \
  static const mf_binary_impl name##_impl = {                                           \
      .dtypes = MF_DTYPE_MASK(MF_TYPES(types)) MF_STRINGS_##types(| 1u << MF_STRING),   \
      .loop = {MF_TYPES(types)(MF_BINARY_ENTRY, name) MF_STRINGS_##types([MF_STRING] = name##_strings)}, \
      .out = {MF_TYPES(types)(MF_OUT_ENTRY, sel) MF_STRINGS_##types([MF_STRING] = MF_BOOL)},  \
      .fail_msg = msg};                                                                 \
  static mf_code name##_infer(mf_infer_ctx *ic) { return binary_infer(ic, &name##_impl); } \
  static mf_code name##_kernel(mf_kernel_ctx *ctx) { return binary_run(ctx, &name##_impl); } \
  static bool name##_element_loop(const mf_attrs *attrs, mf_dtype t, mf_element_loop *loop) { \
    (void)attrs;                                                                        \
    return binary_loop(&name##_impl, t, loop);                                          \
  }                                                                                     \
  MF_RULE_DEFINE(name, grad)
MF_BINARY_OPS(MF_BINARY_DEFINE)

/* ---------- GPU kernels ----------
 * Every op whose dtypes are not complex-only runs on a GPU too: its kernel
 * hands its op number to the glue (ops/gpu/gpu_elementwise.c), which runs the
 * backend's kernel generated from the same table line. Its cuda_dtypes: the
 * line's real dtypes and the dtypes of its outputs for them. */
#define MF_GPU_DTYPE_BIT(code, T) MF_GPU_DTYPE_##code((1u << (code)) |)
#define MF_GPU_OUT_BIT(code, T, sel) MF_GPU_DTYPE_##code((1u << MF_DTYPE_OF(MF_OUTT_##sel(code, T))) |)
#define MF_GPU_DTYPES(types, sel) (MF_TYPES(types)(MF_GPU_DTYPE_BIT) MF_TYPES(types)(MF_GPU_OUT_BIT, sel) 0u)
#define MF_GPU_UNARY_KERNEL(name, types, grad, expr) \
  MF_GPU_KEEP_##types(static mf_code name##_gpu_kernel(mf_kernel_ctx *ctx) { \
    return mf_gpu_unary(ctx, MF_ELEMENT_OP_##name); \
  })
MF_UNARY_OPS(MF_GPU_UNARY_KERNEL)
#define MF_GPU_BINARY_KERNEL(name, types, sel, grad, fail, msg, expr) \
  MF_GPU_KEEP_##types(MF_GPU_KEEP_##sel(static mf_code name##_gpu_kernel(mf_kernel_ctx *ctx) { \
    return mf_gpu_binary(ctx, MF_ELEMENT_OP_##name, msg); \
  }))
MF_BINARY_OPS(MF_GPU_BINARY_KERNEL)

/* Cast: attr "DstT" (type). One loop per (source, destination) pair. */
#define MF_CAST_LOOP(dcode, D, scode, S) MF_MAP_FN(Cast_##scode##_##dcode, S, D, mf_convert(D, x))
#define MF_CAST_LOOPS(scode, S) MF_FOR_CAST_TYPES_INNER(MF_CAST_LOOP, scode, S)
MF_FOR_ALL_TYPES(MF_CAST_LOOPS)
MF_FOR_COMPLEX_TYPES(MF_CAST_LOOPS)
#define MF_CAST_ENTRY(dcode, D, scode) [dcode] = Cast_##scode##_##dcode,
#define MF_CAST_ROW(scode, S) [scode] = {MF_FOR_CAST_TYPES_INNER(MF_CAST_ENTRY, scode)},
static const mf_map_fn cast_loops[MF_DTYPE_SLOTS][MF_DTYPE_SLOTS] = {MF_FOR_ALL_TYPES(MF_CAST_ROW)
                                                                     MF_FOR_COMPLEX_TYPES(MF_CAST_ROW)};

static mf_code cast_infer(mf_infer_ctx *ic) {
  const mf_attr *dst = mf_attrs_find(ic->attrs, "DstT", MF_ATTR_TYPE);
  if (!dst || !mf_dtype_size(dst->v.type))
    return MF_INVALID(ic->status,
                      "%s: Cast needs a 'DstT' attribute naming the dtype to convert to", ic->op_name);
  ic->out_dtypes[0] = dst->v.type;
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static bool cast_element_loop(const mf_attrs *attrs, mf_dtype t, mf_element_loop *loop) {
  const mf_attr *dst = mf_attrs_find(attrs, "DstT", MF_ATTR_TYPE);
  if (!dst || (unsigned)t >= MF_DTYPE_SLOTS || (unsigned)dst->v.type >= MF_DTYPE_SLOTS ||
      !cast_loops[t][dst->v.type] || mf_dtype_is_complex(t) || mf_dtype_is_complex(dst->v.type))
    return false;
  *loop = (mf_element_loop){.map = cast_loops[t][dst->v.type]};
  return true;
}

static mf_code cast_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0];
  mf_tensor *y = ctx->outputs[0];
  cast_loops[x->dtype][y->dtype](x->data, y->data, x->size, 0);
  return MF_OK;
}

/* AddN: the sum of n tensors of one dtype and shape, with Add's loops (in
 * place over the output after the first pair). It is how tf.gradients sums
 * the gradients that fan out from one tensor. */
static mf_code addn_infer(mf_infer_ctx *ic) {
  mf_dtype t = ic->in_dtypes[0];
  if (mf_check_dtype(ic, 0, "inputs have", Add_impl.dtypes)) return ic->status->code;
  mf_shape shape = ic->in_shapes[0];
  for (int i = 1; i < ic->num_inputs; i++) {
    if (ic->in_dtypes[i] != t)
      return MF_INVALID(ic->status,
                        "%s: input %d has dtype %s but input 0 has %s; use tf.cast to convert", ic->op_name,
                        i, mf_dtype_name(ic->in_dtypes[i]), mf_dtype_name(t));
    const mf_shape *si = &ic->in_shapes[i];
    if (!mf_merge_shapes(&shape, si, &shape)) {
      char a[128], b[128];
      return MF_INVALID(ic->status,
                        "%s: AddN needs inputs of one shape, but input %d is %s and the others %s",
                        ic->op_name, i, mf_shape_str(si, a, sizeof a), mf_shape_str(&shape, b, sizeof b));
    }
  }
  ic->out_dtypes[0] = t;
  ic->out_shapes[0] = shape;
  return MF_OK;
}

static mf_code addn_kernel(mf_kernel_ctx *ctx) {
  mf_tensor *z = ctx->outputs[0];
  mf_tensor *const *in = ctx->inputs;
  if (z->size == 0) return MF_OK;
  if (ctx->num_inputs == 1) {
    if (z->data != in[0]->data) memcpy(z->data, in[0]->data, mf_tensor_nbytes(z));
    return MF_OK;
  }
  mf_zip_fn add = Add_impl.loop[z->dtype];
  bool over_later_input = false;  /* the output took the buffer of input 2 or later */
  for (int i = 2; i < ctx->num_inputs; i++) over_later_input |= in[i]->data == z->data;
  if (!over_later_input) {
    add(in[0]->data, true, in[1]->data, true, z->data, z->size, 0);
    for (int i = 2; i < ctx->num_inputs; i++) add(z->data, true, in[i]->data, true, z->data, z->size, 0);
    return MF_OK;
  }
  /* Summing into z would overwrite that input before its turn: sum block by
   * block aside, in the same order, then write the block. */
  enum { BLOCK = 1024 };
  _Alignas(MF_ALIGNMENT) char sum[BLOCK * MF_MAX_ELEMENT_SIZE];
  size_t width = mf_dtype_size(z->dtype);
  for (int64_t at = 0; at < z->size; at += BLOCK) {
    int64_t n = z->size - at < BLOCK ? z->size - at : BLOCK;
    size_t off = (size_t)at * width;
    add((char *)in[0]->data + off, true, (char *)in[1]->data + off, true, sum, n, 0);
    for (int i = 2; i < ctx->num_inputs; i++) add(sum, true, (char *)in[i]->data + off, true, sum, n, 0);
    memcpy((char *)z->data + off, sum, (size_t)n * width);
  }
  return MF_OK;
}

/* The gradient goes back in the input's dtype: float32 <-> float64. (Integer
 * inputs are never asked for, so a cast from or to an integer passes none.) */
static mf_code cast_grad(mf_grad_ctx *gc) {
  const mf_output x = mf_op_in(gc->op, 0);
  gc->input_grads[0] = mf_grad_cast(gc, gc->grads[0], mf_port_dtype(x));
  return gc->status->code;
}

/* Every input of a sum gets the sum's gradient. */
static mf_code addn_grad(mf_grad_ctx *gc) {
  for (int i = 0; i < gc->op->num_inputs; i++) gc->input_grads[i] = gc->grads[0];
  return MF_OK;
}

/* Parameters are not called name/flags/grad: they would replace the designators.
 * Every op here takes complex values as far as MF_OP_COMPLEX goes: infer checks
 * the dtypes by the op's table. */
#define MF_OP_DEF(op, arity, fl, rule, gpu_kernel, gpu_dtypes) \
  {.name = #op, .num_inputs = arity, .num_outputs = 1, .flags = (fl) | MF_OP_COMPLEX, \
   .infer = op##_infer, .kernel = {[MF_CPU] = op##_kernel, [MF_CUDA] = gpu_kernel}, .cuda_dtypes = gpu_dtypes, \
   .grad = rule, .element_loop = op##_element_loop},
#define MF_UNARY_DEF(op, types, g, expr) \
  MF_OP_DEF(op, 1, (MF_RULE_FLAGS_##g) | MF_OP_FORWARDS_INPUT, MF_RULE_FN_##g(op), \
            MF_GPU_FIRST(MF_GPU_KEEP_##types(op##_gpu_kernel, ) NULL), \
            MF_GPU_FIRST(MF_GPU_KEEP_##types(MF_GPU_DTYPES(types, SAME), ) 0))
#define MF_BINARY_DEF(op, types, sel, g, fail, msg, expr) \
  MF_OP_DEF(op, 2, (MF_RULE_FLAGS_##g) | MF_OP_FORWARDS_INPUT MF_STRINGS_##types(| MF_OP_STRINGS), MF_RULE_FN_##g(op), \
            MF_GPU_FIRST(MF_GPU_KEEP_##types(MF_GPU_KEEP_##sel(op##_gpu_kernel, )) NULL), \
            MF_GPU_FIRST(MF_GPU_KEEP_##types(MF_GPU_KEEP_##sel(MF_GPU_DTYPES(types, sel), )) 0))

static const mf_op_def defs[] = {
    MF_UNARY_OPS(MF_UNARY_DEF)
    MF_PART_OPS(MF_UNARY_DEF)
    MF_BINARY_OPS(MF_BINARY_DEF)
    {.name = "Cast", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_COMPLEX, .infer = cast_infer,
     .kernel = {[MF_CPU] = cast_kernel, [MF_CUDA] = mf_gpu_cast}, .cuda_dtypes = MF_DTYPE_MASK(MF_FOR_ALL_TYPES),
     .grad = cast_grad, .element_loop = cast_element_loop},
    {.name = "AddN", .num_inputs = 1, .num_outputs = 1,
     .flags = MF_OP_VARIADIC_INPUTS | MF_OP_FORWARDS_INPUT | MF_OP_COMPLEX, .infer = addn_infer,
     .kernel = {[MF_CPU] = addn_kernel}, .grad = addn_grad},
};
MF_OP_TABLE(mf_ops_math, defs);
