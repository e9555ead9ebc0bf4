/* dtype.h — element types: dispatch macros and conversions (dtype.c). */
#ifndef MF_CORE_DTYPE_H
#define MF_CORE_DTYPE_H

#include "core/base.h"

/* Element loops dispatch on dtype with these X-macros. */
#define MF_FOR_NUMERIC_TYPES(X) \
  X(MF_FLOAT32, float) X(MF_FLOAT64, double) X(MF_INT32, int32_t) \
  X(MF_INT64, int64_t) X(MF_UINT8, uint8_t)
#define MF_FOR_ALL_TYPES(X) MF_FOR_NUMERIC_TYPES(X) X(MF_BOOL, bool)
/* Tables indexed by dtype have this many slots (dtypes run from 1 to MF_UINT8). */
enum { MF_DTYPE_SLOTS = MF_UINT8 + 1 };

static inline bool mf_dtype_is_float(mf_dtype t) { return t == MF_FLOAT32 || t == MF_FLOAT64; }
static inline bool mf_dtype_is_integer(mf_dtype t) {
  return t == MF_INT32 || t == MF_INT64 || t == MF_UINT8;
}
/* Reads element i of any dtype as double / writes a double into any dtype. */
double mf_load_double(const void *data, mf_dtype t, int64_t i);
int64_t mf_load_int64(const void *data, mf_dtype t, int64_t i);
void mf_store_double(void *data, mf_dtype t, int64_t i, double v);

#endif
