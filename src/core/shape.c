/* shape.c — static shapes: compatibility, printing, broadcasting, axes. */
#include "core/shape.h"
#include "core/status.h"
#include "core/tensor.h"

#include <stdio.h>
#include <string.h>

mf_shape mf_shape_make(int rank, const int64_t *dims) {
  mf_shape s = {.rank = rank};
  if (rank > 0) memcpy(s.dims, dims, (size_t)rank * sizeof *dims);
  return s;
}

mf_shape mf_shape_of(const mf_tensor *t) { return mf_shape_make(t->rank, t->dims); }

bool mf_shape_fully_defined(const mf_shape *s) {
  if (s->rank < 0) return false;
  for (int i = 0; i < s->rank; i++)
    if (s->dims[i] < 0) return false;
  return true;
}

int64_t mf_shape_num_elements(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++)
    if (dims[i] < 0 || !mf_size_mul(n, dims[i], &n)) return -1;
  return n;
}

mf_code mf_shape_known_elements(const char *op, const mf_shape *shape, int64_t *count, mf_status *s) {
  int64_t n = 1;
  bool empty = false;
  char buf[200];
  for (int i = 0; i < shape->rank; i++) {
    if (shape->dims[i] < -1)
      return mf_status_set(s, MF_INVALID_ARGUMENT, "%s: shape %s has dimension %d = %lld; dimensions are sizes, "
                           "or -1 when unknown", op, mf_shape_str(shape, buf, sizeof buf), i,
                           (long long)shape->dims[i]);
    if (shape->dims[i] == 0) empty = true;
    if (shape->dims[i] > 0 && !mf_size_mul(n, shape->dims[i], &n))
      return mf_status_set(s, MF_INVALID_ARGUMENT, "%s: shape %s would have more than 2^63 - 1 elements", op,
                           mf_shape_str(shape, buf, sizeof buf));
  }
  if (count) *count = empty ? 0 : n;
  return MF_OK;
}

bool mf_shape_compatible(const mf_shape *a, const mf_shape *b) {
  if (a->rank < 0 || b->rank < 0) return true;
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] >= 0 && b->dims[i] >= 0 && a->dims[i] != b->dims[i]) return false;
  return true;
}

char *mf_shape_str(const mf_shape *s, char *buf, size_t n) {
  if (s->rank < 0) { snprintf(buf, n, "<unknown>"); return buf; }
  size_t len = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < s->rank && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%lld", i ? "," : "", (long long)s->dims[i]);
  if (len < n) snprintf(buf + len, n - len, "]");
  return buf;
}

char *mf_shape_str_tf(const mf_shape *s, char *buf, size_t n) {
  if (s->rank < 0) { snprintf(buf, n, "<unknown>"); return buf; }
  size_t len = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < s->rank && len < n; i++) {
    const char *sep = i ? ", " : "";
    if (s->dims[i] < 0) len += (size_t)snprintf(buf + len, n - len, "%s?", sep);
    else len += (size_t)snprintf(buf + len, n - len, "%s%lld", sep, (long long)s->dims[i]);
  }
  if (len < n) snprintf(buf + len, n - len, s->rank == 1 ? ",)" : ")");
  return buf;
}

mf_code mf_broadcast_shape(const char *op, const mf_shape *a, const mf_shape *b, mf_shape *out,
                           mf_status *s) {
  if (a->rank < 0 || b->rank < 0) { *out = mf_shape_unknown(); return MF_OK; }
  int rank = a->rank > b->rank ? a->rank : b->rank;
  out->rank = rank;
  for (int i = 0; i < rank; i++) {
    int ia = a->rank - rank + i, ib = b->rank - rank + i;
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    int64_t d;
    if (da == db) d = da;
    else if (da == 1) d = db;
    else if (db == 1) d = da;
    else if (da < 0 || db < 0) d = da < 0 ? db : da;  /* the unknown one must match or be 1 */
    else {
      char sa[128], sb[128];
      return mf_status_set(s, MF_INVALID_ARGUMENT,
                           "%s: Incompatible shapes: %s vs. %s (dimension %d: %lld vs. %lld); "
                           "broadcasting needs equal dimensions or 1",
                           op, mf_shape_str(a, sa, sizeof sa), mf_shape_str(b, sb, sizeof sb), i,
                           (long long)da, (long long)db);
    }
    out->dims[i] = d;
  }
  return MF_OK;
}

mf_code mf_normalize_axis(const char *op, int64_t axis, int rank, int *out, mf_status *s) {
  if (axis < -rank || axis >= rank)
    return mf_status_set(s, MF_INVALID_ARGUMENT,
                         "%s: axis %lld is out of range for a tensor of rank %d (expected [%d, %d))",
                         op, (long long)axis, rank, -rank, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return MF_OK;
}
