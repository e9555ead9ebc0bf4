/* tensor_array.c — the TensorArray ops, their gradient helpers (_TARows,
 * _TAGatherRows, _TAScatterRows, _TAGradBuffer) and gradient rules. */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"
#include "ops/control/control.h"

#include <string.h>

/* ---------- TensorArray ----------
 * A TensorArray is a value: two tensors that its ops take and return.
 * While its elements share one shape (the fast path, as in a loop's RNN):
 *   buffer  [capacity, element...] holding the elements (row i is element i),
 *           or a scalar while the element shape is unknown (until the first
 *           write fixes it);
 *   meta    int64 [1 + capacity]: the size, then per index 0 (not written),
 *           1 (written) or 2 (written, then cleared by a read: attr
 *           clear_after_read of the reads, TensorFlow's default; a second
 *           read of the index is an error).
 * Elements that differ in their first dimension (an unequal split, writes to
 * an array made with infer_shape = false: attr ragged of the write) make the
 * array ragged:
 *   buffer  [rows, rest...]: the elements' rows, element i at rows
 *           [offset_i, offset_i + length_i), in the order they were written;
 *   meta    int64 [2 + 3 * capacity]: the size with bit TA_RAGGED set, the
 *           states, the offsets, the lengths, then the number of rows in use.
 * An array turns ragged at the first write that needs it. Every write's new
 * buffer starts with the bytes of the old one (element i of a uniform buffer
 * of elements of length l sits at rows [i*l, (i+1)*l) of the ragged one), so
 * a buffer's gradient passes back through writes as a prefix (_TAGradBuffer).
 * Reads clear in place: the meta is the array's identity, as TensorFlow's
 * resource handle is. A write returns the new pair. When both inputs die at
 * the write and nobody else holds them (in a loop body, from the second
 * iteration on) the write happens in place, so filling an array in a loop
 * costs O(element) per step.
 * Writes and reads also return the buffer rows they wrote or read (the index
 * itself while the array is uniform); the gradient rules gather and scatter
 * those rows with _TAGatherRows and _TAScatterRows. */

#define TA_RAGGED ((int64_t)1 << 62)

static mf_code ta_check(mf_infer_ctx *ic, int index_input) {
  if (ic->in_dtypes[1] != MF_INT64 || ic->in_shapes[1].rank > 1)
    return MF_INVALID(ic->status, "%s: input 1 is not a TensorArray's metadata", ic->op_name);
  if (index_input >= 0) {
    mf_dtype t = ic->in_dtypes[index_input];
    if (t != MF_INT32 && t != MF_INT64)
      return MF_INVALID(ic->status, "%s: TensorArray indices must be int32 or int64, got %s",
                        ic->op_name, mf_dtype_name(t));
  }
  return MF_OK;
}

/* Whether the op's array may be (or turn) ragged: its buffer's static shape
 * then tells nothing of the elements. */
static bool ta_attr_ragged(const mf_infer_ctx *ic) { return mf_attr_bool(ic->attrs, "ragged", false); }

/* The static shape of the elements of a buffer of static shape b. */
static mf_shape ta_elem_shape(const mf_shape *b) {
  if (b->rank <= 0) return mf_shape_unknown();
  return mf_shape_make(b->rank - 1, b->dims + 1);
}

static bool ta_is_ragged(const mf_tensor *meta) { return (((const int64_t *)meta->data)[0] & TA_RAGGED) != 0; }
static int64_t ta_size(const mf_tensor *meta) { return ((const int64_t *)meta->data)[0] & ~TA_RAGGED; }
static int64_t ta_capacity(const mf_tensor *meta) { return ta_is_ragged(meta) ? (meta->size - 2) / 3 : meta->size - 1; }
static bool ta_written(const mf_tensor *meta, int64_t i) { return ((const int64_t *)meta->data)[1 + i] != 0; }
/* A ragged array's offsets, lengths and rows in use. */
static int64_t *ta_offsets(const mf_tensor *meta) { return (int64_t *)meta->data + 1 + ta_capacity(meta); }
static int64_t *ta_lengths(const mf_tensor *meta) { return (int64_t *)meta->data + 1 + 2 * ta_capacity(meta); }
static int64_t *ta_used(const mf_tensor *meta) { return (int64_t *)meta->data + meta->size - 1; }
static void ta_set_size(mf_tensor *meta, int64_t size) {
  int64_t *m = meta->data;
  m[0] = size | (m[0] & TA_RAGGED);
}

static size_t ta_row_bytes(const mf_tensor *buf) {
  return buf->rank == 0 ? 0 : (size_t)(buf->size / (buf->dims[0] ? buf->dims[0] : 1)) * mf_dtype_size(buf->dtype);
}
static int64_t ta_row_elems(const mf_tensor *buf) { return mf_dims_product(buf->dims, 1, buf->rank); }
static bool ta_shape_eq(const mf_shape *a, const mf_shape *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

static int64_t load_index(const mf_tensor *t, int64_t i) { return mf_load_int64(t->data, t->dtype, i); }

/* Checks that meta (and buf, when given) are a TensorArray's consistent pair
 * before a kernel indexes with them: any tensor can be fed, and a graph file
 * can wire any int64 vector here. O(1) for a uniform array with a buffer;
 * O(capacity) while it has none or is ragged. */
static mf_code ta_check_pair(mf_kernel_ctx *ctx, const mf_tensor *buf, const mf_tensor *meta) {
  bool ok = meta->dtype == MF_INT64 && meta->rank == 1 && meta->size >= 1;
  if (ok && ta_is_ragged(meta)) ok = meta->size >= 2 && (meta->size - 2) % 3 == 0;
  const int64_t *m = ok ? meta->data : NULL;
  int64_t cap = ok ? ta_capacity(meta) : 0, size = ok ? ta_size(meta) : 0;
  ok = ok && size >= 0 && size <= cap;
  for (int64_t i = 0; ok && i < cap; i++) ok = m[1 + i] >= 0 && m[1 + i] <= 2;
  if (ok && buf && ta_is_ragged(meta)) {
    const int64_t *off = ta_offsets(meta), *len = ta_lengths(meta), used = *ta_used(meta);
    ok = buf->rank >= 1 && used >= 0 && used <= buf->dims[0];
    for (int64_t i = 0; ok && i < cap; i++)
      ok = m[1 + i] == 0 || (off[i] >= 0 && len[i] >= 0 && off[i] <= used && len[i] <= used - off[i]);
  } else if (ok && buf) {
    if (buf->rank >= 1) ok = buf->dims[0] == cap;
    for (int64_t i = 0; ok && buf->rank == 0 && i < cap; i++) ok = m[1 + i] == 0;
  }
  if (ok) return MF_OK;
  return MF_INVALID(ctx->status,
                    "%s: the TensorArray's buffer and metadata do not belong together (a fed or rewired "
                    "value?); feed neither, or both from one TensorArray",
                    ctx->op->name);
}

/* TensorArray(size): attrs dtype, element_shape (optional), dynamic_size. */
static mf_code ta_new_infer(mf_infer_ctx *ic) {
  mf_dtype st = ic->in_dtypes[0];
  if ((st != MF_INT32 && st != MF_INT64) || ic->in_shapes[0].rank > 0)
    return MF_INVALID(ic->status, "%s: the size must be an int32 scalar, got %s",
                      ic->op_name, mf_dtype_name(st));
  const mf_attr *t = mf_attrs_find(ic->attrs, "dtype", MF_ATTR_TYPE);
  if (!t || !mf_dtype_size(t->v.type))
    return MF_INVALID(ic->status, "%s: needs a valid 'dtype'", ic->op_name);
  const mf_attr *es = mf_attrs_find(ic->attrs, "element_shape", MF_ATTR_SHAPE);
  int64_t size = -1;
  if (ic->in_values[0]) size = load_index(ic->in_values[0], 0);
  if (size < -1 || (ic->runtime && size < 0))
    return MF_INVALID(ic->status, "%s: the size must be non-negative, got %lld", ic->op_name,
                      (long long)size);
  ic->out_dtypes[0] = t->v.type;
  ic->out_dtypes[1] = MF_INT64;
  if (es && mf_shape_fully_defined(&es->v.shape) && es->v.shape.rank < MF_MAX_RANK) {
    mf_shape b = {.rank = es->v.shape.rank + 1};
    b.dims[0] = size;
    memcpy(b.dims + 1, es->v.shape.dims, (size_t)es->v.shape.rank * sizeof b.dims[0]);
    ic->out_shapes[0] = b;
  } else {
    ic->out_shapes[0] = mf_shape_scalar();
  }
  int64_t m = size < 0 ? -1 : size + 1;
  ic->out_shapes[1] = mf_shape_make(1, &m);
  return MF_OK;
}

static mf_code ta_new_kernel(mf_kernel_ctx *ctx) {
  mf_tensor *buf = ctx->outputs[0], *meta = ctx->outputs[1];
  if (buf->size) memset(buf->data, 0, mf_tensor_nbytes(buf));
  int64_t *m = meta->data;
  m[0] = meta->size - 1;
  for (int64_t i = 1; i < meta->size; i++) m[i] = 0;
  return MF_OK;
}

/* Takes over input k for writing when it dies here and nobody else holds it. */
static bool can_take(const mf_kernel_ctx *ctx, int k) {
  const mf_tensor *t = ctx->inputs[k];
  if (!(ctx->dying_inputs >> k & 1u) || mf_tensor_refcount(t) != 1 || !t->owned) return false;
  for (int j = 0; j < ctx->num_inputs; j++)
    if (j != k && ctx->inputs[j] == t) return false;
  return true;
}

/* Output 0 and 1 of a write: the array ready to take rows at `rows` (indices
 * below `size`), element shape `elem` when the buffer has none yet. Grows a
 * dynamic array. In place when the inputs allow, else copies. */
static mf_code ta_prepare_write(mf_kernel_ctx *ctx, int64_t new_size, const mf_shape *elem) {
  mf_tensor *buf = ctx->inputs[0], *meta = ctx->inputs[1];
  int64_t cap = ta_capacity(meta), size = ta_size(meta);
  int64_t need_cap = new_size > cap ? (new_size > 2 * cap ? new_size : 2 * cap) : cap;
  bool allocated = buf->rank > 0;
  if (need_cap == cap && allocated && can_take(ctx, 0) && can_take(ctx, 1)) {
    ctx->outputs[0] = mf_tensor_retain(buf);
    ctx->outputs[1] = mf_tensor_retain(meta);
  } else {
    mf_shape b = {.rank = allocated ? buf->rank : elem->rank + 1};
    b.dims[0] = need_cap;
    for (int d = 1; d < b.rank; d++) b.dims[d] = allocated ? buf->dims[d] : elem->dims[d - 1];
    mf_tensor *nb = mf_kernel_alloc_output(ctx, 0, buf->dtype, b.rank, b.dims);
    int64_t mdim = need_cap + 1;
    mf_tensor *nm = nb ? mf_kernel_alloc_output(ctx, 1, MF_INT64, 1, &mdim) : NULL;
    if (!nm) return ctx->status->code;
    size_t old = allocated ? (size_t)cap * ta_row_bytes(buf) : 0;
    if (old) memcpy(nb->data, buf->data, old);
    if (mf_tensor_nbytes(nb) > old) memset((char *)nb->data + old, 0, mf_tensor_nbytes(nb) - old);
    memcpy(nm->data, meta->data, (size_t)(cap + 1) * sizeof(int64_t));
    for (int64_t i = cap + 1; i <= need_cap; i++) ((int64_t *)nm->data)[i] = 0;
  }
  int64_t *m = ctx->outputs[1]->data;
  if (new_size > size) m[0] = new_size;
  return MF_OK;
}

/* Checks writing `value` rows at index i. */
static mf_code ta_check_write(mf_kernel_ctx *ctx, int64_t i, const mf_tensor *meta) {
  int64_t size = ta_size(meta);
  bool dynamic = mf_attr_bool(ctx->attrs, "dynamic_size", false);
  if (i < 0)
    return MF_INVALID(ctx->status, "%s: Tried to write to index %lld of a TensorArray",
                      ctx->op->name, (long long)i);
  if (i >= size && !dynamic)
    return MF_INVALID(ctx->status,
                      "%s: Tried to write to index %lld but array is not resizeable and size is: %lld",
                      ctx->op->name, (long long)i, (long long)size);
  if (i < ta_capacity(meta) && ta_written(meta, i))
    return MF_INVALID(ctx->status,
                      "%s: Could not write to TensorArray index %lld because it has already been written to.",
                      ctx->op->name, (long long)i);
  return MF_OK;
}

/* The elements one write writes: n of them, element j at index idx[j], of
 * shape `elem` or, with `lead`, of shape [lead[j], elem.dims[1]...]; their
 * data one after another from `src`. */
typedef struct ta_elems {
  int64_t n;
  const int64_t *idx;
  const int64_t *lead;
  mf_shape elem;
  const char *src;
} ta_elems;

static mf_shape ta_elem_j(const ta_elems *e, int64_t j) {
  mf_shape s = e->elem;
  if (e->lead) s.dims[0] = e->lead[j];
  return s;
}

/* Output 2 of a write: the buffer rows it wrote (int64; rank 0: one row, as
 * a write to a uniform array writes). */
static int64_t *ta_rows_output(mf_kernel_ctx *ctx, int rank, int64_t n) {
  mf_tensor *r = mf_kernel_alloc_output(ctx, 2, MF_INT64, rank, &n);
  return r ? r->data : NULL;
}

/* Writes the elements into a ragged array (turning a uniform one ragged). */
static mf_code ta_commit_ragged(mf_kernel_ctx *ctx, const ta_elems *e, int64_t new_size, int64_t bad) {
  mf_tensor *buf = ctx->inputs[0], *meta = ctx->inputs[1];
  bool was = ta_is_ragged(meta);
  char a[128], b[128];
  if (!was && !mf_attr_bool(ctx->attrs, "ragged", false)) {
    mf_shape s = ta_elem_j(e, bad), have = buf->rank > 0 ? mf_shape_make(buf->rank - 1, buf->dims + 1) : ta_elem_j(e, 0);
    return MF_INVALID(ctx->status,
                      "%s: Could not write to TensorArray index %lld because the value shape is %s which is "
                      "incompatible with the TensorArray's inferred element shape: %s (consider setting "
                      "infer_shape=False).",
                      ctx->op->name, (long long)e->idx[bad], mf_shape_str(&s, a, sizeof a),
                      mf_shape_str(&have, b, sizeof b));
  }
  /* The dims after the first, which all elements share. */
  mf_shape rest;
  if (was) rest = mf_shape_make(buf->rank - 1, buf->dims + 1);
  else if (buf->rank > 0) rest = mf_shape_make(buf->rank - 2 < 0 ? 0 : buf->rank - 2, buf->dims + 2);
  else rest = e->elem.rank > 0 ? mf_shape_make(e->elem.rank - 1, e->elem.dims + 1) : mf_shape_scalar();
  bool scalars = (!was && buf->rank == 1) || (!was && buf->rank == 0 && e->elem.rank == 0);
  for (int64_t j = 0; j < e->n; j++) {
    mf_shape s = ta_elem_j(e, j);
    bool ok = !scalars && s.rank == rest.rank + 1;
    for (int d = 0; ok && d < rest.rank; d++) ok = s.dims[d + 1] == rest.dims[d];
    if (ok) continue;
    mf_shape want = {.rank = rest.rank + 1};
    want.dims[0] = -1;
    memcpy(want.dims + 1, rest.dims, (size_t)rest.rank * sizeof want.dims[0]);
    if (scalars) want = buf->rank > 0 ? mf_shape_make(buf->rank - 1, buf->dims + 1) : ta_elem_j(e, 0);
    return MF_INVALID(ctx->status,
                      "%s: Could not write to TensorArray index %lld because the value shape is %s which is "
                      "incompatible with the TensorArray's element shape: %s (elements may differ in their first "
                      "dimension only)",
                      ctx->op->name, (long long)e->idx[j], mf_shape_str(&s, a, sizeof a),
                      mf_shape_str_tf(&want, b, sizeof b));
  }
  int64_t rest_elems = mf_dims_product(rest.dims, 0, rest.rank);
  size_t rest_bytes = (size_t)rest_elems * mf_dtype_size(buf->dtype);
  int64_t cap = ta_capacity(meta);
  int64_t need_cap = new_size > cap ? (new_size > 2 * cap ? new_size : 2 * cap) : cap;
  int64_t l0 = !was && buf->rank > 1 ? buf->dims[1] : 0;
  int64_t old_rows = was ? buf->dims[0] : (buf->rank > 1 ? buf->dims[0] * l0 : 0);
  int64_t used = was ? *ta_used(meta) : old_rows, add = 0;
  for (int64_t j = 0; j < e->n; j++) add += ta_elem_j(e, j).dims[0];
  if (was && need_cap == cap && used + add <= old_rows && can_take(ctx, 0) && can_take(ctx, 1)) {
    ctx->outputs[0] = mf_tensor_retain(buf);
    ctx->outputs[1] = mf_tensor_retain(meta);
  } else {
    int64_t rows = old_rows;
    if (used + add > rows) rows = used + add > 2 * rows ? used + add : 2 * rows;
    int64_t dims[MF_MAX_RANK];
    dims[0] = rows;
    memcpy(dims + 1, rest.dims, (size_t)rest.rank * sizeof dims[0]);
    mf_tensor *nb = mf_kernel_alloc_output(ctx, 0, buf->dtype, rest.rank + 1, dims);
    int64_t mdim = 3 * need_cap + 2;
    mf_tensor *nm = nb ? mf_kernel_alloc_output(ctx, 1, MF_INT64, 1, &mdim) : NULL;
    if (!nm) return ctx->status->code;
    size_t old = buf->rank > 0 ? mf_tensor_nbytes(buf) : 0;
    if (old) memcpy(nb->data, buf->data, old);
    if (mf_tensor_nbytes(nb) > old) memset((char *)nb->data + old, 0, mf_tensor_nbytes(nb) - old);
    int64_t *m = nm->data;
    const int64_t *om = meta->data;
    memset(m, 0, (size_t)mdim * sizeof *m);
    m[0] = ta_size(meta) | TA_RAGGED;
    int64_t *off = ta_offsets(nm), *len = ta_lengths(nm);
    for (int64_t i = 0; i < cap; i++) {
      m[1 + i] = om[1 + i];
      off[i] = was ? ta_offsets(meta)[i] : i * l0;
      len[i] = was ? ta_lengths(meta)[i] : l0;
    }
    *ta_used(nm) = used;
  }
  mf_tensor *ob = ctx->outputs[0], *nm = ctx->outputs[1];
  int64_t *m = nm->data, *off = ta_offsets(nm), *len = ta_lengths(nm), *u = ta_used(nm);
  int64_t *rows = ctx->op->num_outputs > 2 ? ta_rows_output(ctx, 1, add) : NULL;
  if (ctx->op->num_outputs > 2 && !rows) return ctx->status->code;
  const char *src = e->src;
  for (int64_t j = 0, r = 0; j < e->n; j++) {
    int64_t i = e->idx[j], l = ta_elem_j(e, j).dims[0];
    off[i] = *u;
    len[i] = l;
    if (l && rest_bytes) memcpy((char *)ob->data + (size_t)*u * rest_bytes, src, (size_t)l * rest_bytes);
    src += (size_t)l * rest_bytes;
    for (int64_t k = 0; rows && k < l; k++) rows[r++] = *u + k;
    *u += l;
    m[1 + i] = 1;
  }
  if (new_size > ta_size(nm)) ta_set_size(nm, new_size);
  return MF_OK;
}

/* Writes the elements: in the uniform buffer while they have its shape,
 * else ragged. Sets outputs 0 (buffer), 1 (meta) and 2 (rows written: in a
 * uniform buffer the indices, the index input itself when of output 2's
 * dtype, `index`, else of rank `rank`). */
static mf_code ta_commit(mf_kernel_ctx *ctx, const ta_elems *e, int64_t new_size, const mf_tensor *index, int rank) {
  mf_tensor *buf = ctx->inputs[0];
  bool uniform = !ta_is_ragged(ctx->inputs[1]);
  mf_shape one = buf->rank > 0 ? mf_shape_make(buf->rank - 1, buf->dims + 1) : e->n ? ta_elem_j(e, 0) : e->elem;
  int64_t bad = -1;
  for (int64_t j = 0; uniform && j < e->n; j++) {
    mf_shape s = ta_elem_j(e, j);
    if (!ta_shape_eq(&s, &one)) uniform = false, bad = j;
  }
  if (!uniform) return ta_commit_ragged(ctx, e, new_size, bad);
  if (ta_prepare_write(ctx, new_size, &one)) return ctx->status->code;
  mf_tensor *ob = ctx->outputs[0];
  size_t row = ta_row_bytes(ob);
  int64_t *m = ctx->outputs[1]->data;
  for (int64_t j = 0; j < e->n; j++) {
    int64_t i = e->idx[j];
    if (row) memcpy((char *)ob->data + (size_t)i * row, e->src + (size_t)j * row, row);
    m[1 + i] = 1;
  }
  if (ctx->op->num_outputs < 3) return MF_OK;
  if (index && index->dtype == ctx->op->out_dtypes[2]) {
    ctx->outputs[2] = mf_tensor_retain((mf_tensor *)index);
    return MF_OK;
  }
  int64_t *rows = ta_rows_output(ctx, rank, e->n);
  for (int64_t j = 0; rows && j < e->n; j++) rows[j] = e->idx[j];
  return ctx->status->code;
}

/* The static shape of a write's new meta: the old one unless the array may
 * grow or turn ragged. */
static mf_shape ta_meta_shape(const mf_infer_ctx *ic) {
  if (!mf_attr_bool(ic->attrs, "dynamic_size", false) && !ta_attr_ragged(ic)) return ic->in_shapes[1];
  return mf_shape_make(1, (int64_t[]){-1});
}

/* The static shape of the rows output of a write or read with index input
 * `ii` (-1: none; `n` rows when known). */
static mf_shape ta_rows_shape(const mf_infer_ctx *ic, int ii, int64_t n) {
  if (ta_attr_ragged(ic)) return mf_shape_unknown();
  if (ii >= 0) return ic->in_shapes[ii];
  return mf_shape_make(1, &n);
}

static mf_code ta_dtype_check(mf_infer_ctx *ic, int vi) {
  if (ic->in_dtypes[vi] == ic->in_dtypes[0]) return MF_OK;
  return MF_INVALID(ic->status,
                    "%s: TensorArray dtype is %s but Op is trying to write dtype %s; use tf.cast", ic->op_name,
                    mf_dtype_name(ic->in_dtypes[0]), mf_dtype_name(ic->in_dtypes[vi]));
}

/* TensorArrayWrite(buffer, meta, index, value), attrs dynamic_size, ragged. */
static mf_code ta_write_infer(mf_infer_ctx *ic) {
  if (ta_check(ic, 2)) return ic->status->code;
  if (ic->in_shapes[2].rank > 0)
    return MF_INVALID(ic->status, "%s: the index must be a scalar", ic->op_name);
  if (ta_dtype_check(ic, 3)) return ic->status->code;
  const mf_shape *b = &ic->in_shapes[0], *v = &ic->in_shapes[3];
  mf_shape elem = ta_elem_shape(b);
  if (!ta_attr_ragged(ic) && b->rank > 0 && !mf_shape_compatible(&elem, v)) {
    char x[128], y[128];
    return MF_INVALID(ic->status,
                      "%s: the value has shape %s but the TensorArray's elements have shape %s", ic->op_name,
                      mf_shape_str_tf(v, x, sizeof x), mf_shape_str_tf(&elem, y, sizeof y));
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT64;
  if (ta_attr_ragged(ic)) {
    ic->out_shapes[0] = mf_shape_unknown();
  } else if (v->rank >= 0 && v->rank < MF_MAX_RANK) {
    mf_shape out = {.rank = v->rank + 1};
    out.dims[0] = b->rank > 0 && !mf_attr_bool(ic->attrs, "dynamic_size", false) ? b->dims[0] : -1;
    for (int d = 0; d < v->rank; d++)
      out.dims[d + 1] = v->dims[d] >= 0 ? v->dims[d] : (b->rank > 0 ? b->dims[d + 1] : -1);
    ic->out_shapes[0] = out;
  } else {
    ic->out_shapes[0] = b->rank > 0 ? *b : mf_shape_unknown();
  }
  ic->out_shapes[1] = ta_meta_shape(ic);
  return MF_OK;
}

static mf_code ta_write_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  mf_tensor *value = ctx->inputs[3];
  int64_t i = load_index(ctx->inputs[2], 0);
  if (ta_check_write(ctx, i, ctx->inputs[1])) return ctx->status->code;
  int64_t size = ta_size(ctx->inputs[1]);
  ta_elems e = {.n = 1, .idx = &i, .elem = mf_shape_of(value), .src = value->data};
  return ta_commit(ctx, &e, i + 1 > size ? i + 1 : size, NULL, 0);
}

/* Scatter rows of value at indices (TensorArrayScatter) or at 0..n-1
 * (TensorArrayUnstack: no indices input). */
static mf_code ta_scatter_infer_common(mf_infer_ctx *ic, int vi) {
  if (ta_check(ic, vi == 3 ? 2 : -1)) return ic->status->code;
  if (ta_dtype_check(ic, vi)) return ic->status->code;
  const mf_shape *v = &ic->in_shapes[vi];
  if (v->rank == 0)
    return MF_INVALID(ic->status, "%s: the value must have rank >= 1 (one row per element)",
                      ic->op_name);
  if (vi == 3 && ic->in_shapes[2].rank > 1)
    return MF_INVALID(ic->status, "%s: the indices must be a vector", ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT64;
  if (vi == 2) ic->out_dtypes[2] = MF_INT64;
  const mf_shape *b = &ic->in_shapes[0];
  if (ta_attr_ragged(ic)) {
    ic->out_shapes[0] = mf_shape_unknown();
  } else if (v->rank > 0) {
    mf_shape out = *v;
    out.dims[0] = b->rank > 0 && !mf_attr_bool(ic->attrs, "dynamic_size", false) ? b->dims[0] : -1;
    ic->out_shapes[0] = out;
  } else {
    ic->out_shapes[0] = b->rank > 0 ? *b : mf_shape_unknown();
  }
  ic->out_shapes[1] = ta_meta_shape(ic);
  if (vi == 2) ic->out_shapes[2] = ta_rows_shape(ic, -1, v->rank > 0 ? v->dims[0] : -1);
  return MF_OK;
}
static mf_code ta_scatter_infer(mf_infer_ctx *ic) { return ta_scatter_infer_common(ic, 3); }
static mf_code ta_unstack_infer(mf_infer_ctx *ic) { return ta_scatter_infer_common(ic, 2); }

/* Checks the writes of elements at idx[0..n) (no index twice) and gives the new size. */
static mf_code ta_check_writes(mf_kernel_ctx *ctx, const int64_t *idx, int64_t n, int64_t *new_size) {
  *new_size = ta_size(ctx->inputs[1]);
  for (int64_t j = 0; j < n; j++) {
    int64_t i = idx[j];
    if (ta_check_write(ctx, i, ctx->inputs[1])) return ctx->status->code;
    for (int64_t k = 0; k < j; k++)
      if (idx[k] == i)
        return MF_INVALID(ctx->status,
                          "%s: Could not write to TensorArray index %lld because it has already been written to.",
                          ctx->op->name, (long long)i);
    if (i + 1 > *new_size) *new_size = i + 1;
  }
  return MF_OK;
}

static mf_code ta_scatter_common(mf_kernel_ctx *ctx, const mf_tensor *indices, const mf_tensor *value) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  int64_t n = value->dims[0];
  if (indices && indices->size != n)
    return MF_INVALID(ctx->status, "%s: %lld indices for a value of %lld rows",
                      ctx->op->name, (long long)indices->size, (long long)n);
  int64_t *idx = mf_malloc((size_t)(n ? n : 1) * sizeof *idx), new_size;
  if (!idx) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  for (int64_t j = 0; j < n; j++) idx[j] = indices ? load_index(indices, j) : j;
  if (!ta_check_writes(ctx, idx, n, &new_size)) {
    ta_elems e = {.n = n, .idx = idx, .elem = mf_shape_make(value->rank - 1, value->dims + 1), .src = value->data};
    ta_commit(ctx, &e, new_size, NULL, 1);
  }
  mf_free(idx);
  return ctx->status->code;
}
static mf_code ta_scatter_kernel(mf_kernel_ctx *ctx) { return ta_scatter_common(ctx, ctx->inputs[2], ctx->inputs[3]); }
static mf_code ta_unstack_kernel(mf_kernel_ctx *ctx) { return ta_scatter_common(ctx, NULL, ctx->inputs[2]); }

/* TensorArraySplit(buffer, meta, value, lengths): value's rows split into
 * elements 0, 1, ... of the lengths (which may differ). */
static mf_code ta_split_infer(mf_infer_ctx *ic) {
  if (ta_check(ic, 3)) return ic->status->code;
  if (ta_dtype_check(ic, 2)) return ic->status->code;
  const mf_shape *v = &ic->in_shapes[2], *l = &ic->in_shapes[3];
  if (v->rank == 0)
    return MF_INVALID(ic->status, "%s: Expected value to be at least a vector, but received "
                      "shape: []", ic->op_name);
  if (l->rank >= 0 && l->rank != 1)
    return MF_INVALID(ic->status, "%s: Expected lengths to be a vector", ic->op_name);
  if (ic->in_dtypes[3] != MF_INT32 && ic->in_dtypes[3] != MF_INT64)
    return MF_INVALID(ic->status, "%s: lengths must be int32 or int64, got %s",
                      ic->op_name, mf_dtype_name(ic->in_dtypes[3]));
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT64;
  ic->out_dtypes[2] = MF_INT64;
  if (ta_attr_ragged(ic) || v->rank < 0 || v->rank >= MF_MAX_RANK) {
    ic->out_shapes[0] = mf_shape_unknown();
  } else {
    mf_shape out = {.rank = v->rank + 1};
    const mf_shape *b = &ic->in_shapes[0];
    out.dims[0] = b->rank > 0 && !mf_attr_bool(ic->attrs, "dynamic_size", false) ? b->dims[0] : -1;
    out.dims[1] = -1;
    memcpy(out.dims + 2, v->dims + 1, (size_t)(v->rank - 1) * sizeof out.dims[0]);
    ic->out_shapes[0] = out;
  }
  ic->out_shapes[1] = mf_shape_make(1, (int64_t[]){-1});
  ic->out_shapes[2] = mf_shape_make(1, (int64_t[]){-1});
  return MF_OK;
}

static mf_code ta_split_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  const mf_tensor *value = ctx->inputs[2], *lengths = ctx->inputs[3];
  char a[128];
  if (value->rank < 1) {
    mf_shape s = mf_shape_of(value);
    return MF_INVALID(ctx->status,
                      "%s: Expected value to be at least a vector, but received shape: %s", ctx->op->name,
                      mf_shape_str(&s, a, sizeof a));
  }
  int64_t n = lengths->size, total = 0, new_size;
  int64_t *buf = mf_malloc((size_t)(2 * n + 1) * sizeof *buf), *lead = buf, *idx = buf + n;
  if (!buf) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  for (int64_t j = 0; j < n; j++) {
    lead[j] = load_index(lengths, j);
    idx[j] = j;
    if (lead[j] < 0) {
      MF_INVALID(ctx->status, "%s: lengths must be non-negative, got %lld at %lld",
                 ctx->op->name, (long long)lead[j], (long long)j);
      goto done;
    }
    total += lead[j];
  }
  if (total != value->dims[0]) {
    mf_shape s = mf_shape_of(value);
    MF_INVALID(ctx->status,
               "%s: Expected sum of lengths to be equal to values.shape[0], but sum of lengths is %lld and "
               "value's shape is: %s",
               ctx->op->name, (long long)total, mf_shape_str(&s, a, sizeof a));
    goto done;
  }
  if (ta_check_writes(ctx, idx, n, &new_size)) goto done;
  ta_elems e = {.n = n, .idx = idx, .lead = lead, .elem = mf_shape_of(value), .src = value->data};
  ta_commit(ctx, &e, new_size, NULL, 1);
done:
  mf_free(buf);
  return ctx->status->code;
}

/* Checks reading index i and, when the reading op clears what it reads,
 * marks it cleared (not in the recomputations of a gradient function). */
static mf_code ta_check_read(mf_kernel_ctx *ctx, mf_tensor *meta, int64_t i) {
  int64_t size = ta_size(meta);
  if (i < 0 || i >= size)
    return MF_INVALID(ctx->status, "%s: Tried to read from index %lld but array size is: %lld",
                      ctx->op->name, (long long)i, (long long)size);
  if (!ta_written(meta, i))
    return MF_INVALID(ctx->status,
                      "%s: Could not read from TensorArray index %lld because it has not yet been written to.",
                      ctx->op->name, (long long)i);
  if (mf_gradient_depth > 0 || !mf_attr_bool(ctx->attrs, "clear_after_read", false)) return MF_OK;
  int64_t *m = meta->data;
  if (m[1 + i] == 2)
    return MF_INVALID(ctx->status,
                      "%s: Could not read index %lld twice because it was cleared after a previous read "
                      "(perhaps try setting clear_after_read = false?).",
                      ctx->op->name, (long long)i);
  m[1 + i] = 2;
  return MF_OK;
}

/* The element shape of a TensorArray without a buffer: its attr
 * element_shape (what the Lua side knows from writes it traced, in a loop
 * that may have run zero times), when fully defined. */
static bool ta_attr_elem(const mf_attrs *attrs, mf_shape *elem) {
  const mf_attr *es = mf_attrs_find(attrs, "element_shape", MF_ATTR_SHAPE);
  if (!es || !mf_shape_fully_defined(&es->v.shape) || es->v.shape.rank >= MF_MAX_RANK) return false;
  *elem = es->v.shape;
  return true;
}

/* The error of reading the elements of an array without a buffer (nothing
 * written) whose element shape is not known. */
static mf_code ta_unknown_elem(mf_kernel_ctx *ctx) {
  return MF_INVALID(ctx->status,
                    "%s: TensorArray has size zero, but element shape <unknown> is not fully defined. Give "
                    "element_shape when creating a TensorArray that may stay empty",
                    ctx->op->name);
}

/* Reads of a ragged array: elements idx (NULL: 0..n-1), one (`single`: the
 * element itself) or n of one shape stacked (`concat`: joined along their
 * first dimension, shapes agreeing after it). Sets output 0 and, for Stack
 * and Concat, output 1 (the rows read). */
static mf_code ta_read_ragged(mf_kernel_ctx *ctx, const mf_tensor *idx, int64_t n, bool single, bool concat) {
  const mf_tensor *buf = ctx->inputs[0], *meta = ctx->inputs[1];
  const int64_t *off = ta_offsets(meta), *len = ta_lengths(meta);
  mf_shape rest = mf_shape_make(buf->rank - 1, buf->dims + 1);
  size_t rest_bytes = (size_t)ta_row_elems(buf) * mf_dtype_size(buf->dtype);
  int64_t total = 0, l0 = -1, i0 = -1;
  for (int64_t j = 0; j < n; j++) {
    int64_t i = idx ? load_index(idx, j) : j;
    if (!concat && l0 >= 0 && len[i] != l0) {
      char a[128], b[128];
      mf_shape s0 = rest, s1 = rest;
      s0.rank = s1.rank = rest.rank + 1;
      memmove(s0.dims + 1, rest.dims, (size_t)rest.rank * sizeof rest.dims[0]);
      memmove(s1.dims + 1, rest.dims, (size_t)rest.rank * sizeof rest.dims[0]);
      s0.dims[0] = l0;
      s1.dims[0] = len[i];
      return MF_INVALID(ctx->status,
                        "%s: TensorArray has inconsistent shapes.  Index %lld has shape: %s but index %lld has "
                        "shape: %s",
                        ctx->op->name, (long long)i0, mf_shape_str(&s0, a, sizeof a), (long long)i,
                        mf_shape_str(&s1, b, sizeof b));
    }
    if (l0 < 0) l0 = len[i], i0 = i;
    total += len[i];
  }
  int64_t dims[MF_MAX_RANK];
  int r = 0;
  if (concat || single) {
    dims[r++] = total;
  } else {
    if (n == 0) return ta_unknown_elem(ctx);
    dims[r++] = n;
    dims[r++] = l0;
  }
  if (r + rest.rank > MF_MAX_RANK)
    return MF_INVALID(ctx->status, "%s: the result has too many dimensions", ctx->op->name);
  memcpy(dims + r, rest.dims, (size_t)rest.rank * sizeof dims[0]);
  mf_tensor *o = mf_kernel_alloc_output(ctx, 0, buf->dtype, r + rest.rank, dims);
  int64_t one = total;
  bool with_rows = ctx->op->num_outputs > 1;
  mf_tensor *rt = o && with_rows ? mf_kernel_alloc_output(ctx, 1, MF_INT64, 1, &one) : NULL;
  if (!o || (with_rows && !rt)) return ctx->status->code;
  char *dst = o->data;
  for (int64_t j = 0, k = 0; j < n; j++) {
    int64_t i = idx ? load_index(idx, j) : j;
    size_t nb = (size_t)len[i] * rest_bytes;
    if (nb) memcpy(dst, (const char *)buf->data + (size_t)off[i] * rest_bytes, nb);
    dst += nb;
    for (int64_t q = 0; rt && q < len[i]; q++, k++) ((int64_t *)rt->data)[k] = off[i] + q;
  }
  return MF_OK;
}

/* Output 1 of a stack or concat of a uniform array: the element indices 0..n-1. */
static mf_code ta_index_rows(mf_kernel_ctx *ctx, int64_t n) {
  mf_tensor *rt = mf_kernel_alloc_output(ctx, 1, MF_INT64, 1, &n);
  for (int64_t j = 0; rt && j < n; j++) ((int64_t *)rt->data)[j] = j;
  return ctx->status->code;
}

/* TensorArrayRead(buffer, meta, index) / TensorArrayGather(buffer, meta, indices). */
static mf_code ta_read_infer(mf_infer_ctx *ic) {
  if (ta_check(ic, 2)) return ic->status->code;
  if (ic->in_shapes[2].rank > 1)
    return MF_INVALID(ic->status, "%s: the index must be a scalar or a vector", ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  mf_shape elem = ta_attr_ragged(ic) ? mf_shape_unknown() : ta_elem_shape(&ic->in_shapes[0]);
  if (elem.rank < 0 && !ta_attr_ragged(ic)) ta_attr_elem(ic->attrs, &elem);
  if (ic->in_shapes[2].rank == 1 || ic->in_shapes[2].rank < 0) {  /* gather */
    if (elem.rank >= 0 && elem.rank < MF_MAX_RANK && ic->in_shapes[2].rank == 1) {
      mf_shape out = {.rank = elem.rank + 1};
      out.dims[0] = ic->in_shapes[2].dims[0];
      memcpy(out.dims + 1, elem.dims, (size_t)elem.rank * sizeof out.dims[0]);
      elem = out;
    } else {
      elem = mf_shape_unknown();
    }
  }
  ic->out_shapes[0] = elem;
  return MF_OK;
}

static mf_code ta_read_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  mf_tensor *buf = ctx->inputs[0], *idx = ctx->inputs[2];
  for (int64_t j = 0; j < idx->size; j++)
    if (ta_check_read(ctx, ctx->inputs[1], load_index(idx, j))) return ctx->status->code;
  if (ta_is_ragged(ctx->inputs[1])) return ta_read_ragged(ctx, idx, idx->size, idx->rank == 0, false);
  /* The element shape: the buffer's, or (nothing written: a gather of no
   * indices) the attribute's. */
  mf_shape elem;
  if (buf->rank > 0) elem = mf_shape_make(buf->rank - 1, buf->dims + 1);
  else if (!ta_attr_elem(ctx->attrs, &elem)) return ta_unknown_elem(ctx);
  mf_shape out = {.rank = elem.rank + idx->rank};
  if (idx->rank) out.dims[0] = idx->size;
  for (int d = 0; d < elem.rank; d++) out.dims[d + idx->rank] = elem.dims[d];
  mf_tensor *o = mf_kernel_alloc_output(ctx, 0, buf->dtype, out.rank, out.dims);
  if (!o) return ctx->status->code;
  size_t row = ta_row_bytes(buf);
  for (int64_t j = 0; j < idx->size && row; j++)
    memcpy((char *)o->data + (size_t)j * row, (const char *)buf->data + (size_t)load_index(idx, j) * row, row);
  return MF_OK;
}

/* TensorArrayStack(buffer, meta): the elements as one tensor [size, element...]. */
static mf_code ta_stack_infer(mf_infer_ctx *ic) {
  if (ta_check(ic, -1)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT64;
  ic->out_shapes[1] = mf_shape_make(1, (int64_t[]){-1});
  ic->out_shapes[0] = ic->in_shapes[0].rank > 0 && !ta_attr_ragged(ic) ? ic->in_shapes[0] : mf_shape_unknown();
  mf_shape elem;
  if (ic->out_shapes[0].rank < 0 && !ta_attr_ragged(ic) && ta_attr_elem(ic->attrs, &elem)) {
    mf_shape out = {.rank = elem.rank + 1};
    memcpy(out.dims + 1, elem.dims, (size_t)elem.rank * sizeof out.dims[0]);
    ic->out_shapes[0] = out;
  }
  if (ic->out_shapes[0].rank > 0) {
    const mf_shape *m = &ic->in_shapes[1];
    ic->out_shapes[0].dims[0] = m->rank == 1 && m->dims[0] > 0 ? m->dims[0] - 1 : -1;
  }
  return MF_OK;
}

static mf_code ta_stack_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  mf_tensor *buf = ctx->inputs[0], *meta = ctx->inputs[1];
  int64_t size = ta_size(meta);
  for (int64_t i = 0; i < size; i++)
    if (ta_check_read(ctx, meta, i)) return ctx->status->code;
  if (ta_is_ragged(meta)) return ta_read_ragged(ctx, NULL, size, false, false);
  if (buf->rank == 0) {
    /* Nothing written: [0, element...] when the element shape is known. */
    mf_shape elem;
    if (size > 0) return mf_status_set(ctx->status, MF_INTERNAL, "%s: written array without a buffer", ctx->op->name);
    if (!ta_attr_elem(ctx->attrs, &elem)) return ta_unknown_elem(ctx);
    int64_t dims[MF_MAX_RANK] = {0};
    memcpy(dims + 1, elem.dims, (size_t)elem.rank * sizeof dims[0]);
    if (!mf_kernel_alloc_output(ctx, 0, buf->dtype, elem.rank + 1, dims)) return ctx->status->code;
    return ta_index_rows(ctx, 0);
  }
  if (buf->dims[0] == size) {  /* exactly full: the buffer itself */
    ctx->outputs[0] = mf_tensor_retain(buf);
    return ta_index_rows(ctx, size);
  }
  int64_t dims[MF_MAX_RANK];
  memcpy(dims, buf->dims, (size_t)buf->rank * sizeof dims[0]);
  dims[0] = size;
  mf_tensor *o = mf_kernel_alloc_output(ctx, 0, buf->dtype, buf->rank, dims);
  if (!o) return ctx->status->code;
  if (mf_tensor_nbytes(o)) memcpy(o->data, buf->data, mf_tensor_nbytes(o));
  return ta_index_rows(ctx, size);
}

/* TensorArrayConcat(buffer, meta): the elements joined along their first
 * dimension (they may differ in it). */
static mf_code ta_concat_infer(mf_infer_ctx *ic) {
  if (ta_check(ic, -1)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT64;
  ic->out_shapes[1] = mf_shape_make(1, (int64_t[]){-1});
  const mf_shape *b = &ic->in_shapes[0];
  mf_shape elem;
  if (ta_attr_ragged(ic)) elem = mf_shape_unknown();
  else if (b->rank > 0) elem = ta_elem_shape(b);
  else if (!ta_attr_elem(ic->attrs, &elem)) elem = mf_shape_unknown();
  if (elem.rank == 0)
    return MF_INVALID(ic->status,
                      "%s: TensorArray concat needs elements of rank >= 1, got scalars (use stack)", ic->op_name);
  ic->out_shapes[0] = elem;
  if (elem.rank > 0) ic->out_shapes[0].dims[0] = -1;
  return MF_OK;
}

static mf_code ta_scalar_concat(mf_kernel_ctx *ctx) {
  return MF_INVALID(ctx->status,
                    "%s: TensorArray concat needs elements of rank >= 1, got scalars (use stack)", ctx->op->name);
}

static mf_code ta_concat_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  mf_tensor *buf = ctx->inputs[0], *meta = ctx->inputs[1];
  int64_t size = ta_size(meta);
  for (int64_t i = 0; i < size; i++)
    if (ta_check_read(ctx, meta, i)) return ctx->status->code;
  if (ta_is_ragged(meta)) return ta_read_ragged(ctx, NULL, size, false, true);
  mf_shape elem;
  if (buf->rank > 0) elem = mf_shape_make(buf->rank - 1, buf->dims + 1);
  else if (size > 0) return mf_status_set(ctx->status, MF_INTERNAL, "%s: written array without a buffer", ctx->op->name);
  else if (!ta_attr_elem(ctx->attrs, &elem)) return ta_unknown_elem(ctx);
  if (elem.rank == 0) return ta_scalar_concat(ctx);
  mf_shape out = elem;
  out.dims[0] = size * elem.dims[0];
  mf_tensor *o = mf_kernel_alloc_output(ctx, 0, buf->dtype, out.rank, out.dims);
  if (!o) return ctx->status->code;
  if (mf_tensor_nbytes(o)) memcpy(o->data, buf->data, mf_tensor_nbytes(o));
  return ta_index_rows(ctx, size);
}

/* TensorArraySize(meta): int32 scalar. */
static mf_code ta_size_infer(mf_infer_ctx *ic) {
  if (ic->in_dtypes[0] != MF_INT64 || ic->in_shapes[0].rank > 1)
    return MF_INVALID(ic->status, "%s: the input is not a TensorArray's metadata", ic->op_name);
  ic->out_dtypes[0] = MF_INT32;
  ic->out_shapes[0] = mf_shape_scalar();
  return MF_OK;
}
static mf_code ta_size_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, NULL, ctx->inputs[0])) return ctx->status->code;
  *(int32_t *)ctx->outputs[0]->data = (int32_t)ta_size(ctx->inputs[0]);
  return MF_OK;
}

/* ---- gradient helpers over plain buffers ---- */

/* _TAGatherRows(x, indices): x[indices] (a scalar index drops the first dim), no checks but range. */
static mf_code rows_gather_infer(mf_infer_ctx *ic) {
  mf_dtype t = ic->in_dtypes[1];
  if (t != MF_INT32 && t != MF_INT64)
    return MF_INVALID(ic->status, "%s: indices must be int32 or int64", ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  mf_shape elem = ta_elem_shape(&ic->in_shapes[0]);
  const mf_shape *ix = &ic->in_shapes[1];
  if (ix->rank == 0) ic->out_shapes[0] = elem;
  else if (ix->rank == 1 && elem.rank >= 0) {
    mf_shape out = {.rank = elem.rank + 1};
    out.dims[0] = ix->dims[0];
    memcpy(out.dims + 1, elem.dims, (size_t)elem.rank * sizeof out.dims[0]);
    ic->out_shapes[0] = out;
  } else {
    ic->out_shapes[0] = mf_shape_unknown();
  }
  return MF_OK;
}

static mf_code rows_range_error(mf_kernel_ctx *ctx, int64_t i, int64_t n) {
  return MF_INVALID(ctx->status, "%s: row %lld is out of range [0, %lld)", ctx->op->name,
                       (long long)i, (long long)n);
}

static mf_code rows_gather_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *idx = ctx->inputs[1];
  mf_tensor *o = ctx->outputs[0];
  if (x->rank == 0) return MF_INVALID(ctx->status, "%s: expects rows", ctx->op->name);
  size_t row = (size_t)ta_row_elems(x) * mf_dtype_size(x->dtype);
  for (int64_t j = 0; j < idx->size; j++) {
    int64_t i = load_index(idx, j);
    if (i < 0 || i >= x->dims[0]) return rows_range_error(ctx, i, x->dims[0]);
    if (row) memcpy((char *)o->data + (size_t)j * row, (const char *)x->data + (size_t)i * row, row);
  }
  return MF_OK;
}

/* _TAScatterRows(shape, indices, updates): zeros of `shape` with updates
 * added at rows `indices` (a scalar index: one row). */
static mf_code rows_scatter_infer(mf_infer_ctx *ic) {
  if (!mf_dtype_is_float(ic->in_dtypes[2]))
    return MF_INVALID(ic->status, "%s: updates must be float", ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[2];
  ic->out_shapes[0] = mf_infer_shape_value(ic, 0);
  return MF_OK;
}

/* o[idx[j]] += u[j] for each row j (o float, of u's dtype). */
mf_code mf_add_rows(mf_kernel_ctx *ctx, mf_tensor *o, const mf_tensor *idx, const mf_tensor *u) {
  if (o->rank == 0) return MF_OK;  /* an array without a buffer yet takes no gradient */
  int64_t row = ta_row_elems(o);
  if (u->size != idx->size * row || u->dtype != o->dtype)
    return MF_INVALID(ctx->status, "%s: updates do not match the rows", ctx->op->name);
  for (int64_t j = 0; j < idx->size; j++) {
    int64_t i = load_index(idx, j);
    if (i < 0 || i >= o->dims[0]) return rows_range_error(ctx, i, o->dims[0]);
    if (o->dtype == MF_FLOAT32) {
      float *d = (float *)o->data + i * row;
      const float *s = (const float *)u->data + j * row;
      for (int64_t e = 0; e < row; e++) d[e] += s[e];
    } else {
      double *d = (double *)o->data + i * row;
      const double *s = (const double *)u->data + j * row;
      for (int64_t e = 0; e < row; e++) d[e] += s[e];
    }
  }
  return MF_OK;
}

static mf_code rows_scatter_kernel(mf_kernel_ctx *ctx) {
  mf_tensor *o = ctx->outputs[0];
  if (mf_tensor_nbytes(o)) memset(o->data, 0, mf_tensor_nbytes(o));
  return mf_add_rows(ctx, o, ctx->inputs[1], ctx->inputs[2]);
}

/* _TAGradBuffer(g, shape): g fitted to `shape`: its first bytes, zeros past
 * g's end (a write's new buffer starts with the bytes of its old one); a
 * scalar shape gives 0. */
static mf_code grad_buffer_infer(mf_infer_ctx *ic) {
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = mf_infer_shape_value(ic, 1);
  return MF_OK;
}

static mf_code grad_buffer_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *g = ctx->inputs[0];
  mf_tensor *o = ctx->outputs[0];
  size_t n = mf_tensor_nbytes(o), have = o->rank == 0 || g->rank == 0 ? 0 : mf_tensor_nbytes(g);
  if (g->dtype != o->dtype)
    return MF_INVALID(ctx->status, "%s: the gradient's dtype does not match", ctx->op->name);
  if (have > n) have = n;
  if (have) memcpy(o->data, g->data, have);
  if (n > have) memset((char *)o->data + have, 0, n - have);
  return MF_OK;
}

/* _TARows(meta, index), attr ragged: the buffer rows of the elements at
 * index (a scalar or a vector): the index itself while the array is uniform,
 * else the vector of their rows, one element after another. */
static mf_code ta_rows_infer(mf_infer_ctx *ic) {
  mf_dtype t = ic->in_dtypes[1];
  if (ic->in_dtypes[0] != MF_INT64 || ic->in_shapes[0].rank > 1 || (t != MF_INT32 && t != MF_INT64))
    return MF_INVALID(ic->status, "%s: expects a TensorArray's metadata and indices",
                      ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[1];
  ic->out_shapes[0] = ta_rows_shape(ic, 1, -1);
  return MF_OK;
}

static mf_code ta_rows_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, NULL, ctx->inputs[0])) return ctx->status->code;
  const mf_tensor *meta = ctx->inputs[0], *idx = ctx->inputs[1];
  if (!ta_is_ragged(meta)) {
    ctx->outputs[0] = mf_tensor_retain(ctx->inputs[1]);
    return MF_OK;
  }
  const int64_t *off = ta_offsets(meta), *len = ta_lengths(meta);
  int64_t cap = ta_capacity(meta), n = 0;
  for (int64_t j = 0; j < idx->size; j++) {
    int64_t i = load_index(idx, j);
    if (i < 0 || i >= cap) return rows_range_error(ctx, i, cap);
    n += len[i];
  }
  mf_tensor *o = mf_kernel_alloc_output(ctx, 0, idx->dtype, 1, &n);
  if (!o) return ctx->status->code;
  for (int64_t j = 0, k = 0; j < idx->size; j++) {
    int64_t i = load_index(idx, j);
    for (int64_t q = 0; q < len[i]; q++, k++) {
      if (o->dtype == MF_INT32) ((int32_t *)o->data)[k] = (int32_t)(off[i] + q);
      else ((int64_t *)o->data)[k] = off[i] + q;
    }
  }
  return MF_OK;
}

/* ---- gradient rules ---- */

static mf_output shape_of(mf_grad_ctx *gc, mf_output x) { return mf_grad_op1(gc, "Shape", x); }

static mf_output grad_buffer(mf_grad_ctx *gc, mf_output g, mf_output like) {
  return mf_grad_op2(gc, "_TAGradBuffer", g, shape_of(gc, like));
}

static mf_output scatter_rows(mf_grad_ctx *gc, mf_output like, mf_output idx, mf_output g) {
  mf_op_desc *d = mf_grad_begin(gc, "_TAScatterRows");
  if (d) {
    mf_op_desc_add_input(d, shape_of(gc, like));
    mf_op_desc_add_input(d, idx);
    mf_op_desc_add_input(d, g);
  }
  return mf_grad_finish(gc, d);
}

/* The buffer rows of the elements at index in the array of `meta`: a
 * _TARows, which a loop's gradient keeps per iteration as it keeps shapes
 * (not the array). */
static mf_output ta_rows_of(mf_grad_ctx *gc, mf_output meta, mf_output index) {
  mf_op_desc *d = mf_grad_begin(gc, "_TARows");
  if (d) {
    mf_op_desc_add_input(d, meta);
    mf_op_desc_add_input(d, index);
    mf_op_desc_set_attr_bool(d, "ragged", mf_attr_bool(&gc->op->attrs, "ragged", false));
  }
  return mf_grad_finish(gc, d);
}

/* Write / Scatter / Unstack / Split: the buffer's gradient passes on (a
 * prefix), the value's is the rows written (of the new meta: a written
 * element's rows never move; output 2 of Unstack and Split). */
static mf_code ta_write_grad(mf_grad_ctx *gc) {
  mf_output g = gc->grads[0];
  if (!g.op) return MF_OK;
  const mf_op *op = gc->op;
  gc->input_grads[0] = grad_buffer(gc, g, mf_op_in(op, 0));
  const char *t = op->def->name;
  bool write = strcmp(t, "TensorArrayWrite") == 0, scatter = strcmp(t, "TensorArrayScatter") == 0;
  int vi = write || scatter ? 3 : 2;
  mf_output rows = write || scatter ? ta_rows_of(gc, mf_op_out(op, 1), mf_op_in(op, 2)) : mf_op_out(op, 2);
  mf_output value = mf_grad_op2(gc, "_TAGatherRows", g, rows);
  gc->input_grads[vi] = write ? value : mf_grad_op2(gc, "Reshape", value, shape_of(gc, mf_op_in(op, vi)));
  return gc->status->code;
}

/* Read / Gather: the rows read, scattered into zeros of the buffer's shape;
 * Stack / Concat: the same with the rows they return (output 1). */
static mf_code ta_read_grad(mf_grad_ctx *gc) {
  if (!gc->grads[0].op) return MF_OK;
  const mf_op *op = gc->op;
  mf_output rows = op->num_inputs == 3 ? ta_rows_of(gc, mf_op_in(op, 1), mf_op_in(op, 2)) : mf_op_out(op, 1);
  gc->input_grads[0] = scatter_rows(gc, mf_op_in(op, 0), rows, gc->grads[0]);
  return gc->status->code;
}

static mf_code rows_gather_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = scatter_rows(gc, mf_op_in(gc->op, 0), mf_op_in(gc->op, 1), gc->grads[0]);
  return gc->status->code;
}

static mf_code rows_scatter_grad(mf_grad_ctx *gc) {
  gc->input_grads[2] = mf_grad_op2(gc, "_TAGatherRows", gc->grads[0], mf_op_in(gc->op, 1));
  return gc->status->code;
}

static mf_code grad_buffer_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = grad_buffer(gc, gc->grads[0], mf_op_in(gc->op, 0));
  return gc->status->code;
}

static const mf_op_def defs[] = {
    {.name = "TensorArray", .num_inputs = 1, .num_outputs = 2, .value_inputs = 1u << 0,
     .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = ta_new_infer, .kernel = {[MF_CPU] = ta_new_kernel}},
    {.name = "TensorArrayWrite", .num_inputs = 4, .num_outputs = 2, .host_inputs = 0x6u,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_write_infer, .kernel = {[MF_CPU] = ta_write_kernel}, .grad = ta_write_grad},
    {.name = "TensorArrayScatter", .num_inputs = 4, .num_outputs = 2, .host_inputs = 0x6u,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_scatter_infer, .kernel = {[MF_CPU] = ta_scatter_kernel}, .grad = ta_write_grad},
    {.name = "TensorArrayUnstack", .num_inputs = 3, .num_outputs = 3, .host_inputs = 1u << 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_unstack_infer, .kernel = {[MF_CPU] = ta_unstack_kernel}, .grad = ta_write_grad},
    {.name = "TensorArraySplit", .num_inputs = 4, .num_outputs = 3, .host_inputs = 0xau,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_split_infer, .kernel = {[MF_CPU] = ta_split_kernel}, .grad = ta_write_grad},
    {.name = "TensorArrayRead", .num_inputs = 3, .num_outputs = 1, .host_inputs = 0x6u,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_read_infer, .kernel = {[MF_CPU] = ta_read_kernel}, .grad = ta_read_grad},
    {.name = "TensorArrayStack", .num_inputs = 2, .num_outputs = 2, .host_inputs = 1u << 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_stack_infer, .kernel = {[MF_CPU] = ta_stack_kernel}, .grad = ta_read_grad},
    {.name = "TensorArrayConcat", .num_inputs = 2, .num_outputs = 2, .host_inputs = 1u << 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_concat_infer, .kernel = {[MF_CPU] = ta_concat_kernel}, .grad = ta_read_grad},
    {.name = "TensorArraySize", .num_inputs = 1, .num_outputs = 1, .host_inputs = 1u << 0,
     .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = ta_size_infer, .kernel = {[MF_CPU] = ta_size_kernel}},
    {.name = "_TARows", .num_inputs = 2, .num_outputs = 1, .host_inputs = 0x3u,
     .flags = MF_OP_INTERNAL | MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE,
     .infer = ta_rows_infer, .kernel = {[MF_CPU] = ta_rows_kernel}},
    {.name = "_TAGatherRows", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_INTERNAL,
     .infer = rows_gather_infer, .kernel = {[MF_CPU] = rows_gather_kernel}, .grad = rows_gather_grad},
    {.name = "_TAScatterRows", .num_inputs = 3, .num_outputs = 1, .flags = MF_OP_INTERNAL, .value_inputs = 1u << 0,
     .infer = rows_scatter_infer, .kernel = {[MF_CPU] = rows_scatter_kernel}, .grad = rows_scatter_grad},
    {.name = "_TAGradBuffer", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_INTERNAL, .value_inputs = 1u << 1,
     .infer = grad_buffer_infer, .kernel = {[MF_CPU] = grad_buffer_kernel}, .grad = grad_buffer_grad},
};
MF_OP_TABLE(mf_ops_tensor_array, defs);
