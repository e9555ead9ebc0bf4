/* helpers.c — the dtype and shape checks and the index readers op families
 * share (helpers.h). */
#include "kernels/helpers.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "graph/graph.h"

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

const int64_t *mf_index_values(mf_kernel_ctx *ctx, const mf_tensor *t, int64_t **owned) {
  *owned = NULL;
  if (t->dtype == MF_INT64) return t->data;
  int64_t *v = mf_malloc((size_t)(t->size > 0 ? t->size : 1) * sizeof *v);
  if (!v) {
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
    return NULL;
  }
  if (t->dtype == MF_INT32) {
    const int32_t *s = t->data;
    for (int64_t i = 0; i < t->size; i++) v[i] = s[i];
  } else {
    const uint8_t *s = t->data;
    for (int64_t i = 0; i < t->size; i++) v[i] = s[i];
  }
  *owned = v;
  return v;
}

char *mf_position_str(char *buf, size_t n, int rank, const int64_t *dims, int64_t flat) {
  int64_t coord[MF_MAX_RANK];
  for (int d = rank - 1; d >= 0; d--) {
    coord[d] = dims[d] > 0 ? flat % dims[d] : 0;
    flat = dims[d] > 0 ? flat / dims[d] : 0;
  }
  size_t len = 0;
  buf[0] = '\0';
  for (int d = 0; d < rank && len < n; d++)
    len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? "," : "", (long long)coord[d]);
  return buf;
}
