/* dtype.h — element types: dispatch macros and conversions (dtype.c). */
#ifndef MF_CORE_DTYPE_H
#define MF_CORE_DTYPE_H

#include "core/base.h"

/* Dtype dispatch: kernels write one function per dtype from these X-macro
 * lists and pick it by a table indexed by dtype (MF_DTYPE_SLOTS entries) or
 * by a switch whose cases a list writes. A list calls X(code, C type) once per
 * dtype; arguments after X pass through, X(code, C type, args...). */
#define MF_FOR_FLOAT_TYPES(X, ...) X(MF_FLOAT32, float, ##__VA_ARGS__) X(MF_FLOAT64, double, ##__VA_ARGS__)
#define MF_FOR_INT_TYPES(X, ...) \
  X(MF_INT32, int32_t, ##__VA_ARGS__) X(MF_INT64, int64_t, ##__VA_ARGS__) X(MF_UINT8, uint8_t, ##__VA_ARGS__)
/* The dtypes with negative values: the floats, int32 and int64. */
#define MF_FOR_SIGNED_TYPES(X, ...) \
  MF_FOR_FLOAT_TYPES(X, ##__VA_ARGS__) X(MF_INT32, int32_t, ##__VA_ARGS__) X(MF_INT64, int64_t, ##__VA_ARGS__)
#define MF_FOR_NUMERIC_TYPES(X, ...) MF_FOR_FLOAT_TYPES(X, ##__VA_ARGS__) MF_FOR_INT_TYPES(X, ##__VA_ARGS__)
#define MF_FOR_BOOL_TYPES(X, ...) X(MF_BOOL, bool, ##__VA_ARGS__)
#define MF_FOR_ALL_TYPES(X, ...) MF_FOR_NUMERIC_TYPES(X, ##__VA_ARGS__) MF_FOR_BOOL_TYPES(X, ##__VA_ARGS__)
/* The complex dtypes are in none of the lists above (their C types are
 * spelled with _Complex: <complex.h>'s I and complex would clash with names): only the ops that list
 * them take them (TensorFlow's complex kernels are a subset of its real ones). */
#define MF_FOR_COMPLEX_TYPES(X, ...) \
  X(MF_COMPLEX64, float _Complex, ##__VA_ARGS__) X(MF_COMPLEX128, double _Complex, ##__VA_ARGS__)
/* The floats and the complex dtypes: what exp, log and sqrt take. */
#define MF_FOR_FLOAT_COMPLEX_TYPES(X, ...) MF_FOR_FLOAT_TYPES(X, ##__VA_ARGS__) MF_FOR_COMPLEX_TYPES(X, ##__VA_ARGS__)
/* The numbers: NUMERIC and the complex dtypes (add, multiply, divide). */
#define MF_FOR_NUMBER_TYPES(X, ...) MF_FOR_NUMERIC_TYPES(X, ##__VA_ARGS__) MF_FOR_COMPLEX_TYPES(X, ##__VA_ARGS__)
/* The signed numbers: SIGNED and the complex dtypes (negation). */
#define MF_FOR_SIGNED_NUMBER_TYPES(X, ...) MF_FOR_SIGNED_TYPES(X, ##__VA_ARGS__) MF_FOR_COMPLEX_TYPES(X, ##__VA_ARGS__)
/* A list by the name of its set, for tables whose dtypes column names one:
 * MF_TYPES(FLOAT) is MF_FOR_FLOAT_TYPES (FLOAT, INT, SIGNED, NUMERIC, BOOL, ALL,
 * COMPLEX, FLOAT_COMPLEX, NUMBER, SIGNED_NUMBER). */
#define MF_TYPES(set) MF_FOR_##set##_TYPES
/* MF_FOR_ALL_TYPES and the complex dtypes again under a name of its own, for
 * the inner dimension of tables of dtype pairs (Cast's): a macro does not
 * expand within its own expansion. */
#define MF_FOR_CAST_TYPES_INNER(X, ...)                                                                  \
  X(MF_FLOAT32, float, ##__VA_ARGS__) X(MF_FLOAT64, double, ##__VA_ARGS__) X(MF_INT32, int32_t, ##__VA_ARGS__) \
  X(MF_INT64, int64_t, ##__VA_ARGS__) X(MF_UINT8, uint8_t, ##__VA_ARGS__) X(MF_BOOL, bool, ##__VA_ARGS__)     \
  X(MF_COMPLEX64, float _Complex, ##__VA_ARGS__) X(MF_COMPLEX128, double _Complex, ##__VA_ARGS__)

/* Tables indexed by dtype have this many slots (dtypes run from 1 to MF_COMPLEX128).
 * MF_STRING is in none of the lists: strings are no numbers, and only the ops
 * that say so take them (MF_OP_STRINGS, core/tstring.h). */
enum { MF_DTYPE_SLOTS = MF_COMPLEX128 + 1 };
/* The largest element of a number dtype (complex128), for buffers of elements of any dtype. */
enum { MF_MAX_ELEMENT_SIZE = 16 };
/* The mask of the dtypes of a list, 1u << code for each: MF_DTYPE_MASK(MF_FOR_FLOAT_TYPES). */
#define MF_DTYPE_MASK(list) (list(MF_DTYPE_BIT_) 0u)
#define MF_DTYPE_BIT_(code, T) (1u << (code)) |
/* The dtype of a C type (a constant expression). */
#define MF_DTYPE_OF(T) \
  _Generic((T)0, float: MF_FLOAT32, double: MF_FLOAT64, int32_t: MF_INT32, int64_t: MF_INT64, uint8_t: MF_UINT8, \
           bool: MF_BOOL, float _Complex: MF_COMPLEX64, double _Complex: MF_COMPLEX128)

static inline bool mf_dtype_is_float(mf_dtype t) { return t == MF_FLOAT32 || t == MF_FLOAT64; }
static inline bool mf_dtype_is_integer(mf_dtype t) {
  return t == MF_INT32 || t == MF_INT64 || t == MF_UINT8;
}
static inline bool mf_dtype_is_complex(mf_dtype t) { return t == MF_COMPLEX64 || t == MF_COMPLEX128; }
/* The dtype of a complex dtype's parts (float32 for complex64); t itself for the others. */
static inline mf_dtype mf_dtype_real(mf_dtype t) {
  return t == MF_COMPLEX64 ? MF_FLOAT32 : t == MF_COMPLEX128 ? MF_FLOAT64 : t;
}
/* The complex dtype of float parts (complex64 for float32); 0 for the others. */
static inline mf_dtype mf_dtype_complex(mf_dtype t) {
  return t == MF_FLOAT32 ? MF_COMPLEX64 : t == MF_FLOAT64 ? MF_COMPLEX128 : (mf_dtype)0;
}
/* Reads element i of any numeric or bool dtype as double / writes a double
 * into one (strings read as 0 and take no numbers; complex values read as
 * their real part and take a real number). */
double mf_load_double(const void *data, mf_dtype t, int64_t i);
int64_t mf_load_int64(const void *data, mf_dtype t, int64_t i);
void mf_store_double(void *data, mf_dtype t, int64_t i, double v);

#endif
