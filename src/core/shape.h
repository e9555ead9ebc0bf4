/* shape.h — static shapes: construction, comparison, printing, broadcasting (shape.c). */
#ifndef MF_CORE_SHAPE_H
#define MF_CORE_SHAPE_H

#include "core/base.h"

/* Size arithmetic: every product or sum of dimensions, element counts or
 * byte counts that shape code computes goes through these. They return false
 * when the exact result does not fit in int64 (signed overflow is undefined
 * in C, and a wrapped count would pass for a small one). */
static inline bool mf_size_mul(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool mf_size_add(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

static inline mf_shape mf_shape_unknown(void) { mf_shape s = {.rank = -1}; return s; }
static inline mf_shape mf_shape_scalar(void) { mf_shape s = {.rank = 0}; return s; }
mf_shape mf_shape_make(int rank, const int64_t *dims);
mf_shape mf_shape_of(const mf_tensor *t);
bool mf_shape_fully_defined(const mf_shape *s);
/* The number of elements of dims[0..rank): -1 when a dimension is unknown or
 * the count overflows int64 (which no value's or op output's shape does:
 * mf_shape_known_elements). */
int64_t mf_shape_num_elements(int rank, const int64_t *dims);
/* The product of the known dimensions of shape into *count (when not NULL):
 * its element count when it is fully defined. An error naming op when the
 * shape is no valid shape: a dimension below -1 (unknown), or room for more
 * than 2^63 - 1 elements (the product of its known nonzero dims overflows
 * int64). Every op output passes this check, so products of an op's known
 * dimensions fit. */
mf_code mf_shape_known_elements(const char *op, const mf_shape *shape, int64_t *count, mf_status *s);
bool mf_shape_compatible(const mf_shape *a, const mf_shape *b);
/* mf_shape_str ("[2,-1]") is in moonflow.h, for op libraries. */
/* Writes "(2, ?)" as TensorFlow prints shapes; returns buf. */
char *mf_shape_str_tf(const mf_shape *s, char *buf, size_t n);
/* NumPy broadcasting of static shapes; an error names the op. */
mf_code mf_broadcast_shape(const char *op, const mf_shape *a, const mf_shape *b,
                           mf_shape *out, mf_status *s);
/* Normalizes an axis in [-rank, rank) to [0, rank); error names op. */
mf_code mf_normalize_axis(const char *op, int64_t axis, int rank, int *out, mf_status *s);

#endif
