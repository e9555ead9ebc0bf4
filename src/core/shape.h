/* shape.h — static shapes: construction, comparison, printing, broadcasting (shape.c). */
#ifndef MF_CORE_SHAPE_H
#define MF_CORE_SHAPE_H

#include "core/base.h"

static inline mf_shape mf_shape_unknown(void) { mf_shape s = {.rank = -1}; return s; }
static inline mf_shape mf_shape_scalar(void) { mf_shape s = {.rank = 0}; return s; }
mf_shape mf_shape_make(int rank, const int64_t *dims);
mf_shape mf_shape_of(const mf_tensor *t);
bool mf_shape_fully_defined(const mf_shape *s);
bool mf_shape_compatible(const mf_shape *a, const mf_shape *b);
/* Writes "[2,-1]" or "<unknown>" into buf; returns buf. */
char *mf_shape_str(const mf_shape *s, char *buf, size_t n);
/* Writes "(2, ?)" as TensorFlow prints shapes; returns buf. */
char *mf_shape_str_tf(const mf_shape *s, char *buf, size_t n);
/* NumPy broadcasting of static shapes; an error names the op. */
mf_code mf_broadcast_shape(const char *op, const mf_shape *a, const mf_shape *b,
                           mf_shape *out, mf_status *s);
/* Normalizes an axis in [-rank, rank) to [0, rank); error names op. */
mf_code mf_normalize_axis(const char *op, int64_t axis, int rank, int *out, mf_status *s);

#endif
