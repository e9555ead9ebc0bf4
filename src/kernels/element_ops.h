/* element_ops.h — the elementwise op tables: every op of ops/math.c is one
 * line here (name, dtypes, gradient rule, element expression), and both
 * ops/math.c (the CPU loops, shape inference, gradients) and the CUDA backend
 * (src/cuda/elementwise.cu, the GPU kernels) are generated from these lines.
 * Each side defines the helpers the expressions call (mf_add, MF_MATH,
 * mf_floordiv_int, ...) its own way; the grad column is math.c's alone. */
#ifndef MF_KERNELS_ELEMENT_OPS_H
#define MF_KERNELS_ELEMENT_OPS_H

/* ---------- the op tables ----------
 * The grad column is ND for an op declared not differentiable (gradients stop
 * there), else the op's gradient rule: DX(gradient of x) for a unary op,
 * DXY(gradient of a, gradient of b) for a binary one. A rule is an expression
 * that builds graph ops (see "gradient rules" in ops/math.c), so gradients are
 * differentiable in turn. It reads the op's input x (or a, b), its output y (or
 * z), the gradient dy (or dz) reaching that output and their dtype t. A binary
 * rule builds b's gradient first, and a's may reuse it as gb. A gradient of the
 * broadcast shape is fine: the autodiff driver sums it down to the input's. */

/* X(name, dtypes, grad, expression of the element x). Results keep x's dtype.
 * nearbyint rounds half to even in the default rounding mode, as TF's Round.
 * Abs passes dy * sign(x); Tanh, Sigmoid, Exp, Expm1, Sqrt, Rsqrt, Tan, Asinh, Acosh
 * and Reciprocal reuse their output. */
#define MF_UNARY_OPS(X)                                                                  \
  X(Neg, NUMBER, DX(NEG(dy)), mf_neg(x))                                                 \
  X(Abs, NUMERIC, DX(MUL(dy, SIGN(x))), mf_abs(x))                                       \
  X(Sign, NUMERIC, ND, mf_sign(x))                                                       \
  X(Square, NUMBER, DX(MUL(dy, MUL(NUM(2), CONJ(x)))), mf_mul(x, x))                     \
  X(Sqrt, FLOAT_COMPLEX, DX(DIV(MUL(dy, NUM(0.5)), CONJ(y))), MF_CMATH_LIBM(sqrt, x)(x))      \
  X(Rsqrt, FLOAT, DX(MUL(dy, MUL(NUM(-0.5), MUL(y, MUL(y, y))))), 1 / MF_MATH(sqrt, x)(x)) \
  X(Exp, FLOAT_COMPLEX, DX(MUL(dy, CONJ(y))), MF_CMATH(exp, x)(x))                       \
  X(Log, FLOAT_COMPLEX, DX(DIV(dy, CONJ(x))), MF_CMATH(log, x)(x))                       \
  X(Log1p, FLOAT, DX(DIV(dy, ADD(NUM(1), x))), MF_VMATH(log1p, x)(x))                     \
  X(Sin, FLOAT_COMPLEX, DX(MUL(dy, COS(CONJ(x)))), MF_CMATH_LIBM(sin, x)(x))                   \
  X(Cos, FLOAT_COMPLEX, DX(NEG(MUL(dy, SIN(CONJ(x))))), MF_CMATH_LIBM(cos, x)(x))              \
  X(Tan, FLOAT, DX(MUL(dy, ADD(NUM(1), MUL(y, y)))), MF_MATH(tan, x)(x))                 \
  X(Asin, FLOAT, DX(DIV(dy, SQRT(SUB(NUM(1), MUL(x, x))))), MF_MATH(asin, x)(x))         \
  X(Acos, FLOAT, DX(NEG(DIV(dy, SQRT(SUB(NUM(1), MUL(x, x)))))), MF_MATH(acos, x)(x))    \
  X(Atan, FLOAT, DX(DIV(dy, ADD(NUM(1), MUL(x, x)))), MF_MATH(atan, x)(x))               \
  X(Sinh, FLOAT, DX(MUL(dy, COSH(x))), MF_MATH(sinh, x)(x))                              \
  X(Cosh, FLOAT, DX(MUL(dy, SINH(x))), MF_MATH(cosh, x)(x))                              \
  X(Asinh, FLOAT, DX(DIV(dy, COSH(y))), MF_MATH(asinh, x)(x))                            \
  X(Acosh, FLOAT, DX(DIV(dy, SINH(y))), MF_MATH(acosh, x)(x))                            \
  X(Atanh, FLOAT, DX(DIV(dy, SUB(NUM(1), MUL(x, x)))), MF_MATH(atanh, x)(x))             \
  X(Erf, FLOAT, DX(MUL(dy, MUL(NUM(TWO_OVER_SQRT_PI), EXP(NEG(MUL(x, x)))))), MF_MATH(erf, x)(x)) \
  X(Erfc, FLOAT, DX(MUL(dy, MUL(NUM(-TWO_OVER_SQRT_PI), EXP(NEG(MUL(x, x)))))), MF_MATH(erfc, x)(x)) \
  X(Expm1, FLOAT, DX(MUL(dy, ADD(y, NUM(1)))), MF_VMATH(expm1, x)(x))                    \
  X(Reciprocal, FLOAT, DX(MUL(dy, NEG(MUL(y, y)))), 1 / (x))                             \
  X(Tanh, FLOAT, DX(MUL(dy, SUB(NUM(1), MUL(y, y)))), MF_VMATH(tanh, x)(x))              \
  X(Sigmoid, FLOAT, DX(MUL(dy, MUL(y, SUB(NUM(1), y)))), MF_SIGMOID(x))                  \
  X(Floor, FLOAT, ND, MF_MATH(floor, x)(x))                                              \
  X(Ceil, FLOAT, ND, MF_MATH(ceil, x)(x))                                                \
  X(Round, NUMERIC, ND, mf_round(x))                                                     \
  X(LogicalNot, BOOL, ND, !x)                                                            \
  X(Conj, COMPLEX, DX(CONJ(dy)), _Generic((x), float complex: conjf, default: conj)(x))

/* X(name, dtypes, grad, expression of the complex element x): the real-valued
 * functions of complex values, whose results have the dtype of x's parts.
 * Gradients as TensorFlow's: Real's is complex(dy, 0), Imag's complex(0, dy),
 * ComplexAbs's dy * x / |x| (0 where x is 0), Angle's -dy / complex(imag(x),
 * real(x)), which is dy * i / conj(x). */
#define MF_PART_OPS(X)                                                                         \
  X(Real, COMPLEX, DX(COMPLEX(dy, PART(0))), MF_CREAL(x))                                      \
  X(Imag, COMPLEX, DX(COMPLEX(PART(0), dy)), MF_CIMAG(x))                                      \
  X(ComplexAbs, COMPLEX, DX(grad_complex_abs(gc, x, y, dy)),                                   \
    _Generic((x), float complex: cabsf, default: cabs)(x))                                     \
  X(Angle, COMPLEX, DX(NEG(DIV(COMPLEX(dy, PART(0)), COMPLEX(IMAG(x), REAL(x))))),             \
    _Generic((x), float complex: cargf, default: carg)(x))

/* X(name, dtypes, output dtype, grad, failure test, failure message,
 *   expression of the elements a and b). The failure test marks elements
 * with no result (integer division by zero); the kernel then fails with the
 * message. out_t is the output's C type.
 * Gradients as TensorFlow's: Mod's is FloorMod's (a - floor(a/b)*b, floor held
 * constant); TruncateMod's likewise, with trunc(a/b) read off the result as
 * (a - z) / b (TruncateDiv, as TensorFlow's CPU kernels, takes integers only);
 * Pow's gradient for b is z*log(a) where a > 0 and 0 elsewhere; Maximum and
 * Minimum pass dz to the input their kernel picked: b where it is strictly
 * greater (smaller), else a, so ties go to a. Maximum and Minimum are NaN
 * when either input is, as TensorFlow's and NumPy's. */
#define MF_BINARY_OPS(X)                                                                        \
  X(Add, NUMBER, SAME, DXY(dz, dz), 0, NULL, mf_add(a, b))                                      \
  X(Sub, NUMBER, SAME, DXY(dz, NEG(dz)), 0, NULL, mf_sub(a, b))                                 \
  X(Mul, NUMBER, SAME, DXY(MUL(dz, CONJ(b)), MUL(CONJ(a), dz)), 0, NULL, mf_mul(a, b))          \
  X(Div, NUMBER, REAL, DXY(DIV(dz, CONJ(b)), MUL(dz, DIV(DIV(NEG(CONJ(a)), CONJ(b)), CONJ(b)))), \
    0, NULL, (out_t)a / (out_t)b)                                                               \
  X(Complex, FLOAT, COMPLEX, DXY(REAL(dz), IMAG(dz)), 0, NULL, MF_MAKE_COMPLEX(a, b))           \
  X(FloorDiv, NUMERIC, SAME, ND, mf_int_zero(b), "Integer division by zero", mf_floordiv(a, b)) \
  X(Mod, NUMERIC, SAME, DXY(dz, MUL(dz, NEG(FLOORDIV(a, b)))), mf_int_zero(b),                  \
    "Integer division by zero", mf_floormod(a, b))                                              \
  X(TruncateDiv, INT, SAME, ND, mf_int_zero(b), "Integer division by zero", mf_truncdiv_int(a, b)) \
  X(TruncateMod, SIGNED, SAME, DXY(dz, MUL(dz, NEG(DIV(SUB(a, z), b)))), mf_int_zero(b),        \
    "Integer division by zero", mf_truncmod(a, b))                                              \
  X(Pow, NUMERIC, SAME,                                                                         \
    DXY(MUL(dz, MUL(b, POW(a, SUB(b, NUM(1))))), MUL(dz, MUL(z, LOG_POSITIVE(a)))),             \
    mf_int_negative(b),                                                                         \
    "Integers to negative integer powers are not allowed; cast to a float type first", mf_pow(a, b)) \
  X(SquaredDifference, SIGNED, SAME, DXY(NEG(gb), MUL(dz, MUL(NUM(-2), SUB(a, b)))), 0, NULL,     \
    mf_mul(mf_sub(a, b), mf_sub(a, b)))                                                         \
  X(Atan2, FLOAT, SAME, DXY(MUL(dz, DIV(b, ADD(MUL(a, a), MUL(b, b)))),                         \
                            NEG(MUL(dz, DIV(a, ADD(MUL(a, a), MUL(b, b)))))), 0, NULL,          \
    MF_MATH(atan2, a)(a, b))                                                                    \
  X(Maximum, NUMERIC, SAME, DXY(SUB(dz, gb), MUL(dz, MASK(LESS(a, b)))), 0, NULL, MF_MAX_KEEP_NAN(a, b)) \
  X(Minimum, NUMERIC, SAME, DXY(SUB(dz, gb), MUL(dz, MASK(LESS(b, a)))), 0, NULL, MF_MIN_KEEP_NAN(a, b)) \
  X(Equal, EQUALITY, BOOL, ND, 0, NULL, a == b)                                                 \
  X(NotEqual, EQUALITY, BOOL, ND, 0, NULL, a != b)                                              \
  X(Less, NUMERIC, BOOL, ND, 0, NULL, a < b)                                                    \
  X(LessEqual, NUMERIC, BOOL, ND, 0, NULL, a <= b)                                              \
  X(Greater, NUMERIC, BOOL, ND, 0, NULL, a > b)                                                 \
  X(GreaterEqual, NUMERIC, BOOL, ND, 0, NULL, a >= b)                                           \
  X(LogicalAnd, BOOL, SAME, ND, 0, NULL, a && b)                                                \
  X(LogicalOr, BOOL, SAME, ND, 0, NULL, a || b)                                                 \
  X(LogicalXor, BOOL, SAME, ND, 0, NULL, a != b)


/* EQUALITY: every dtype of ALL and the complex ones (math.c adds strings). */
#define MF_FOR_EQUALITY_TYPES(X, ...) MF_FOR_ALL_TYPES(X, ##__VA_ARGS__) MF_FOR_COMPLEX_TYPES(X, ##__VA_ARGS__)

/* The ops with GPU kernels: MF_GPU_KEEP_<column>(...) keeps its arguments
 * unless the column (an op's dtypes, or its output selector) is complex-only:
 * complex values never run on a GPU in this first step. */
#define MF_GPU_KEEP_NUMBER(...) __VA_ARGS__
#define MF_GPU_KEEP_NUMERIC(...) __VA_ARGS__
#define MF_GPU_KEEP_FLOAT_COMPLEX(...) __VA_ARGS__
#define MF_GPU_KEEP_FLOAT(...) __VA_ARGS__
#define MF_GPU_KEEP_INT(...) __VA_ARGS__
#define MF_GPU_KEEP_SIGNED(...) __VA_ARGS__
#define MF_GPU_KEEP_EQUALITY(...) __VA_ARGS__
#define MF_GPU_KEEP_BOOL(...) __VA_ARGS__
#define MF_GPU_KEEP_SAME(...) __VA_ARGS__
#define MF_GPU_KEEP_REAL(...) __VA_ARGS__
#define MF_GPU_KEEP_COMPLEX(...)
#define MF_GPU_KEEP_PART(...)
/* MF_GPU_FIRST(MF_GPU_KEEP_<column>(k, ) fallback): k when the column keeps it, else fallback. */
#define MF_GPU_FIRST(...) MF_GPU_FIRST_(__VA_ARGS__, ~)
#define MF_GPU_FIRST_(a, ...) a
/* The same per dtype code, for the lists of core/dtype.h: the GPU's dtypes. */
#define MF_GPU_DTYPE_MF_FLOAT32(...) __VA_ARGS__
#define MF_GPU_DTYPE_MF_FLOAT64(...) __VA_ARGS__
#define MF_GPU_DTYPE_MF_INT32(...) __VA_ARGS__
#define MF_GPU_DTYPE_MF_INT64(...) __VA_ARGS__
#define MF_GPU_DTYPE_MF_UINT8(...) __VA_ARGS__
#define MF_GPU_DTYPE_MF_BOOL(...) __VA_ARGS__
#define MF_GPU_DTYPE_MF_COMPLEX64(...)
#define MF_GPU_DTYPE_MF_COMPLEX128(...)

/* The ops' numbers, shared by the GPU glue and the backend (elementwise_api.h). */
#define MF_ELEMENT_OP_ID(name, ...) MF_ELEMENT_OP_##name,
enum mf_unary_op_id { MF_UNARY_OPS(MF_ELEMENT_OP_ID) MF_NUM_UNARY_OPS };
enum mf_binary_op_id { MF_BINARY_OPS(MF_ELEMENT_OP_ID) MF_NUM_BINARY_OPS };

#endif
