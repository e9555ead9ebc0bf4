/* helpers.c — the dtype and shape checks op families share (helpers.h). */
#include "kernels/helpers.h"
#include "core/dtype.h"
#include "core/shape.h"

#include <stdio.h>

bool mf_merge_shapes(const mf_shape *a, const mf_shape *b, mf_shape *out) {
  if (!mf_shape_compatible(a, b)) return false;
  if (a->rank < 0) {
    *out = *b;
    return true;
  }
  mf_shape m = *a;
  for (int d = 0; d < m.rank && b->rank >= 0; d++)
    if (m.dims[d] < 0) m.dims[d] = b->dims[d];
  *out = m;
  return true;
}

mf_code mf_check_dtype(mf_infer_ctx *ic, int i, const char *what, unsigned dtypes) {
  mf_dtype t = ic->in_dtypes[i];
  if (dtypes & (1u << t)) return MF_OK;
  char list[96];
  size_t len = 0;
  list[0] = '\0';
  for (int d = 1; d < MF_DTYPE_SLOTS; d++)
    if (dtypes & (1u << d))
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", mf_dtype_name((mf_dtype)d));
  return MF_INVALID(ic->status, "%s: %s dtype %s, but %s takes only %s; use tf.cast to convert", ic->op_name, what,
                    mf_dtype_name(t), ic->def->name, list);
}

mf_code mf_check_same_dtype(mf_infer_ctx *ic, int i, const char *wi, int j, const char *wj) {
  if (ic->in_dtypes[i] == ic->in_dtypes[j]) return MF_OK;
  return MF_INVALID(ic->status, "%s: %s has dtype %s but %s has dtype %s; use tf.cast to convert one of them",
                    ic->op_name, wi, mf_dtype_name(ic->in_dtypes[i]), wj, mf_dtype_name(ic->in_dtypes[j]));
}
