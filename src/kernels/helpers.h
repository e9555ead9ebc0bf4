/* helpers.h — the small helpers op families share: argument errors, products
 * of dims, the dtype and shape checks of shape inference, and index tensors
 * read by kernels (helpers.c).
 * The port accessors (MF_NO_PORT, mf_port_dtype, mf_port_shape) sit beside
 * mf_op_in / mf_op_out in graph/graph.h, since graph/autodiff.c uses them too. */
#ifndef MF_KERNELS_HELPERS_H
#define MF_KERNELS_HELPERS_H

#include "core/status.h"
#include "graph/op_def.h"

/* Sets an invalid-argument error with a printf-style message on status s (an
 * infer or kernel context's ->status); evaluates to MF_INVALID_ARGUMENT. */
#define MF_INVALID(s, ...) mf_status_set((s), MF_INVALID_ARGUMENT, __VA_ARGS__)

/* The product of dims[from] ... dims[to - 1] of a value; 1 when from >= to.
 * A value's dims multiply within int64 (it was allocated); static shapes use
 * core/shape.h's checked arithmetic instead. */
static inline int64_t mf_dims_product(const int64_t *dims, int from, int to) {
  int64_t n = 1;
  for (int i = from; i < to; i++) n *= dims[i];
  return n;
}

/* The merge of two compatible static shapes (a known dim wins over an unknown
 * one) into *out, which may be a or b; false, *out untouched, when they conflict. */
bool mf_merge_shapes(const mf_shape *a, const mf_shape *b, mf_shape *out);

/* Checks that input i has one of `dtypes` (a mask of 1u << dtype, see
 * MF_DTYPE_MASK); `what` names the input with its verb ("x has", "x and y
 * have"). The error lists the dtypes the op takes. */
mf_code mf_check_dtype(mf_infer_ctx *ic, int i, const char *what, unsigned dtypes);
/* Checks that inputs i and j (named wi and wj) have one dtype. */
mf_code mf_check_same_dtype(mf_infer_ctx *ic, int i, const char *wi, int j, const char *wj);

/* The elements of an int32, int64 or uint8 tensor as int64: the tensor's own
 * data when it is int64, else a converted copy returned in *owned (free it
 * with mf_free). NULL with the status set when out of memory. */
const int64_t *mf_index_values(mf_kernel_ctx *ctx, const mf_tensor *t, int64_t **owned);

/* "1,0": the coordinates of element `flat` within the first `rank` dims, for
 * errors that name an element (indices[1,0] = 7 ...). Returns buf. */
char *mf_position_str(char *buf, size_t n, int rank, const int64_t *dims, int64_t flat);

#endif
