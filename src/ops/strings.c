/* strings.c — tf.strings: StringJoin, ReduceJoin, StringSplitV2, StringSplit,
 * StringLength, Substr, StringLower, StringUpper, StringStrip, StringToNumber,
 * AsString, RegexReplace, RegexFullMatch, StringToHashBucketFast and
 * StringToHashBucketStrong. String values are built whole by
 * the kernels (core/tstring.h), so every op here sets its outputs itself.
 * None is differentiable. */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/tstring.h"
#include "core/string_hash.h"
#include "core/shape.h"
#include "core/memory.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "kernels/helpers.h"
#include "exec/kernel_api.h"

#include <inttypes.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

#define STRING_BIT (1u << MF_STRING)
#define INDEX_TYPES ((1u << MF_INT32) | (1u << MF_INT64))

/* Errors quote a string shortened to what a message holds. */
enum { QUOTE_MAX = 40 };
static const char *quote(const mf_tstring *e, char *buf, size_t n) {
  int len = e->length < QUOTE_MAX ? (int)e->length : QUOTE_MAX;
  snprintf(buf, n, "'%.*s'%s", len, mf_tstring_bytes(e), e->length > QUOTE_MAX ? "..." : "");
  return buf;
}

/* Sets output i to the value built in b, of shape. */
static mf_code finish_output(mf_kernel_ctx *ctx, int i, mf_strings_builder *b, const mf_shape *shape) {
  mf_tensor *t = mf_strings_finish(b, shape->rank, shape->dims, ctx->status);
  if (!t) return ctx->status->code;
  mf_tensor_release(ctx->outputs[i]);
  ctx->outputs[i] = t;
  return MF_OK;
}

/* Inputs of elementwise string ops are scalars or of one shape (TensorFlow's
 * rule for StringJoin and Substr): the static output shape is their merge. */
static mf_code same_or_scalar_shape(mf_infer_ctx *ic, mf_shape *out) {
  *out = mf_shape_make(0, NULL);
  bool unknown = false;
  for (int i = 0; i < ic->num_inputs; i++) {
    const mf_shape *si = &ic->in_shapes[i];
    if (si->rank < 0) { unknown = true; continue; }
    if (si->rank == 0) continue;
    if (out->rank == 0) { *out = *si; continue; }
    if (!mf_merge_shapes(out, si, out)) {
      char a[128], b[128];
      return MF_INVALID(ic->status, "%s: inputs must be scalars or of one shape, but input %d is %s and another %s",
                        ic->op_name, i, mf_shape_str(si, a, sizeof a), mf_shape_str(out, b, sizeof b));
    }
  }
  if (unknown && out->rank == 0) *out = mf_shape_unknown();
  return MF_OK;
}

/* The run-time check of the same rule: the shape of the non-scalar inputs. */
static mf_code same_or_scalar_value_shape(mf_kernel_ctx *ctx, mf_shape *out) {
  *out = mf_shape_make(0, NULL);
  for (int i = 0; i < ctx->num_inputs; i++) {
    const mf_tensor *t = ctx->inputs[i];
    if (t->rank == 0) continue;
    mf_shape si = mf_shape_of(t);
    if (out->rank == 0) { *out = si; continue; }
    bool same = si.rank == out->rank;
    for (int d = 0; same && d < si.rank; d++) same = si.dims[d] == out->dims[d];
    if (!same) {
      char a[128], b[128];
      return MF_INVALID(ctx->status, "%s: inputs must be scalars or of one shape, but input %d is %s and another %s",
                        ctx->op->name, i, mf_shape_str(&si, a, sizeof a), mf_shape_str(out, b, sizeof b));
    }
  }
  return MF_OK;
}

/* Element i of input t of an op whose inputs are scalars or of one shape. */
static const mf_tstring *element(const mf_tensor *t, int64_t i) { return mf_strings_of(t) + (t->rank ? i : 0); }

/* ---------- StringJoin: inputs (strings), attr "separator" ---------- */
static mf_code join_infer(mf_infer_ctx *ic) {
  for (int i = 0; i < ic->num_inputs; i++)
    if (mf_check_dtype(ic, i, "inputs have", STRING_BIT)) return ic->status->code;
  ic->out_dtypes[0] = MF_STRING;
  return same_or_scalar_shape(ic, &ic->out_shapes[0]);
}

static mf_code join_kernel(mf_kernel_ctx *ctx) {
  mf_shape shape;
  if (same_or_scalar_value_shape(ctx, &shape)) return ctx->status->code;
  const mf_attr *sep_attr = mf_attrs_find(ctx->attrs, "separator", MF_ATTR_STRING);
  const char *sep = sep_attr ? sep_attr->v.s : "";
  size_t sep_len = strlen(sep);
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  for (int64_t i = 0, n = mf_shape_num_elements(shape.rank, shape.dims); i < n; i++) {
    mf_strings_begin(&b);
    for (int k = 0; k < ctx->num_inputs; k++) {
      const mf_tstring *e = element(ctx->inputs[k], i);
      if (k) mf_strings_put(&b, sep, sep_len);
      mf_strings_put(&b, mf_tstring_bytes(e), (size_t)e->length);
    }
  }
  return finish_output(ctx, 0, &b, &shape);
}

/* ---------- ReduceJoin: inputs (strings), attrs reduction_indices, keep_dims, separator ----------
 * Joins along the listed axes in their order, the first listed varying
 * fastest; no list joins all of them, the last axis fastest (row-major).
 * Axes are attributes, as the axes of moonflow's other reductions. */
enum { JOIN_ALL_AXES = -1 };

/* The axes to join for an input of rank rank, in order, into axes; their
 * number, or -1 with s set. */
static int reduce_join_axes(const mf_attrs *attrs, const char *op_name, int rank, int axes[MF_MAX_RANK],
                            mf_status *s) {
  const int64_t *listed;
  int n = mf_attr_ints(attrs, "reduction_indices", &listed);
  if (n == JOIN_ALL_AXES) {
    for (int i = 0; i < rank; i++) axes[i] = rank - 1 - i;
    return rank;
  }
  if (n > rank) {
    MF_INVALID(s, "%s: %d reduction indices for an input of rank %d", op_name, n, rank);
    return -1;
  }
  bool seen[MF_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    int64_t a = listed[i] < 0 ? listed[i] + rank : listed[i];
    if (a < 0 || a >= rank) {
      MF_INVALID(s, "%s: Invalid reduction dimension %lld for input with %d dimensions", op_name,
                 (long long)listed[i], rank);
      return -1;
    }
    if (seen[a]) {
      MF_INVALID(s, "%s: Duplicate reduction dimension %lld", op_name, (long long)listed[i]);
      return -1;
    }
    seen[a] = true;
    axes[i] = (int)a;
  }
  return n;
}

/* The shape of the result: in without the joined axes (1s when keep_dims). */
static mf_shape reduce_join_shape(const mf_shape *in, const int *axes, int n, bool keep_dims) {
  bool joined[MF_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) joined[axes[i]] = true;
  mf_shape out = mf_shape_make(0, NULL);
  for (int d = 0; d < in->rank; d++)
    if (!joined[d]) out.dims[out.rank++] = in->dims[d];
    else if (keep_dims) out.dims[out.rank++] = 1;
  return out;
}

static mf_code reduce_join_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "inputs have", STRING_BIT)) return ic->status->code;
  const mf_shape *in = &ic->in_shapes[0];
  ic->out_dtypes[0] = MF_STRING;
  if (in->rank < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  int axes[MF_MAX_RANK];
  int n = reduce_join_axes(ic->attrs, ic->op_name, in->rank, axes, ic->status);
  if (n < 0) return ic->status->code;
  ic->out_shapes[0] = reduce_join_shape(in, axes, n, mf_attr_bool(ic->attrs, "keep_dims", false));
  return MF_OK;
}

static mf_code reduce_join_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  int axes[MF_MAX_RANK], kept[MF_MAX_RANK], num_kept = 0;
  int n = reduce_join_axes(ctx->attrs, ctx->op->name, in->rank, axes, ctx->status);
  if (n < 0) return ctx->status->code;
  const mf_shape in_shape = mf_shape_of(in);
  const mf_shape out_shape = reduce_join_shape(&in_shape, axes, n, mf_attr_bool(ctx->attrs, "keep_dims", false));
  bool joined[MF_MAX_RANK] = {false};
  int64_t stride[MF_MAX_RANK], joined_count = 1;
  for (int i = 0; i < n; i++) joined[axes[i]] = true, joined_count *= in->dims[axes[i]];
  for (int d = in->rank - 1; d >= 0; d--) stride[d] = d == in->rank - 1 ? 1 : stride[d + 1] * in->dims[d + 1];
  for (int d = 0; d < in->rank; d++)
    if (!joined[d]) kept[num_kept++] = d;
  const mf_attr *sep_attr = mf_attrs_find(ctx->attrs, "separator", MF_ATTR_STRING);
  const char *sep = sep_attr ? sep_attr->v.s : "";
  size_t sep_len = strlen(sep);
  const mf_tstring *x = mf_strings_of(in);
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  for (int64_t o = 0, outs = mf_shape_num_elements(out_shape.rank, out_shape.dims); o < outs; o++) {
    int64_t base = 0, rest = o;
    for (int k = num_kept - 1; k >= 0; k--) {
      base += rest % in->dims[kept[k]] * stride[kept[k]];
      rest /= in->dims[kept[k]];
    }
    mf_strings_begin(&b);
    for (int64_t j = 0; j < joined_count; j++) {
      int64_t at = base, r = j;
      for (int k = 0; k < n; k++) {
        at += r % in->dims[axes[k]] * stride[axes[k]];
        r /= in->dims[axes[k]];
      }
      if (j) mf_strings_put(&b, sep, sep_len);
      mf_strings_put(&b, mf_tstring_bytes(x + at), (size_t)x[at].length);
    }
  }
  return finish_output(ctx, 0, &b, &out_shape);
}

/* ---------- StringSplitV2 and StringSplit: input (strings, 1-D), a separator (string scalar) ----------
 * Both give the pieces as a SparseTensor: indices [n, 2] (string, piece),
 * values [n], dense_shape [2] (strings, most pieces). */
static mf_code split_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "input has", STRING_BIT) || mf_check_dtype(ic, 1, "the separator has", STRING_BIT))
    return ic->status->code;
  const mf_shape *in = &ic->in_shapes[0], *sep = &ic->in_shapes[1];
  char buf[128];
  if (in->rank >= 0 && in->rank != 1)
    return MF_INVALID(ic->status, "%s: input must be a vector of strings, got shape %s", ic->op_name,
                      mf_shape_str(in, buf, sizeof buf));
  if (sep->rank > 0)
    return MF_INVALID(ic->status, "%s: the separator must be a scalar, got shape %s", ic->op_name,
                      mf_shape_str(sep, buf, sizeof buf));
  const int64_t n_unknown[2] = {-1, 2}, one_unknown[1] = {-1}, two[1] = {2};
  ic->out_dtypes[0] = MF_INT64;
  ic->out_shapes[0] = mf_shape_make(2, n_unknown);
  ic->out_dtypes[1] = MF_STRING;
  ic->out_shapes[1] = mf_shape_make(1, one_unknown);
  ic->out_dtypes[2] = MF_INT64;
  ic->out_shapes[2] = mf_shape_make(1, two);
  return MF_OK;
}

/* How one op splits a string: sep[0..sep_len) and its attributes. */
typedef struct split_rule {
  const char *sep;
  int64_t sep_len;
  int64_t maxsplit;  /* StringSplitV2 */
  bool skip_empty;   /* StringSplit */
} split_rule;
/* Adds the pieces of s[0..n) to b; returns their number. */
typedef int64_t (*split_fn)(const char *s, int64_t n, const split_rule *r, mf_strings_builder *b);

/* StringSplitV2, Python's str.split: an empty sep splits at runs of
 * whitespace and drops empty pieces; else at each sep, keeping empty pieces.
 * At most maxsplit splits per string (-1: no limit). */
static int64_t split_v2_one(const char *s, int64_t n, const split_rule *r, mf_strings_builder *b) {
  int64_t count = 0, at = 0, maxsplit = r->maxsplit, sep_len = r->sep_len;
  if (sep_len == 0) {
    while (at < n) {
      while (at < n && mf_is_space(s[at])) at++;
      if (at == n) break;
      int64_t start = at;
      if (maxsplit >= 0 && count == maxsplit) {
        int64_t end = n;
        while (end > start && mf_is_space(s[end - 1])) end--;
        mf_strings_add(b, s + start, (size_t)(end - start));
        return count + 1;
      }
      while (at < n && !mf_is_space(s[at])) at++;
      mf_strings_add(b, s + start, (size_t)(at - start));
      count++;
    }
    return count;
  }
  for (;;) {
    int64_t next = -1;
    if (maxsplit < 0 || count < maxsplit)
      for (int64_t j = at; j + sep_len <= n; j++)
        if (memcmp(s + j, r->sep, (size_t)sep_len) == 0) { next = j; break; }
    if (next < 0) {
      mf_strings_add(b, s + at, (size_t)(n - at));
      return count + 1;
    }
    mf_strings_add(b, s + at, (size_t)(next - at));
    count++;
    at = next + sep_len;
  }
}

/* StringSplit, TensorFlow 1's tf.string_split: each byte of the delimiter
 * ends a piece, and empty pieces go when skip_empty; an empty delimiter
 * splits into single bytes. An empty string has no pieces. */
static int64_t split_v1_one(const char *s, int64_t n, const split_rule *r, mf_strings_builder *b) {
  if (r->sep_len == 0) {
    for (int64_t j = 0; j < n; j++) mf_strings_add(b, s + j, 1);
    return n;
  }
  if (n == 0) return 0;
  int64_t count = 0, start = 0;
  for (int64_t j = 0; j <= n; j++) {
    if (j < n && !memchr(r->sep, s[j], (size_t)r->sep_len)) continue;
    if (!r->skip_empty || j > start) {
      mf_strings_add(b, s + start, (size_t)(j - start));
      count++;
    }
    start = j + 1;
  }
  return count;
}

static mf_code split_kernel(mf_kernel_ctx *ctx, split_fn split_one) {
  const mf_tensor *in = ctx->inputs[0];
  const mf_tstring *sep = mf_strings_of(ctx->inputs[1]);
  const split_rule rule = {.sep = mf_tstring_bytes(sep), .sep_len = sep->length,
                           .maxsplit = mf_attr_int(ctx->attrs, "maxsplit", -1),
                           .skip_empty = mf_attr_bool(ctx->attrs, "skip_empty", true)};
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  int64_t *counts = mf_malloc((size_t)(in->size ? in->size : 1) * sizeof *counts);
  if (!counts) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  int64_t total = 0, widest = 0;
  for (int64_t i = 0; i < in->size; i++) {
    const mf_tstring *e = mf_strings_of(in) + i;
    counts[i] = split_one(mf_tstring_bytes(e), e->length, &rule, &b);
    total += counts[i];
    if (counts[i] > widest) widest = counts[i];
  }
  const int64_t index_dims[2] = {total, 2};
  mf_tensor *indices = mf_kernel_alloc_output(ctx, 0, MF_INT64, 2, index_dims);
  mf_tensor *dense_shape = indices ? mf_kernel_alloc_output(ctx, 2, MF_INT64, 1, (const int64_t[]){2}) : NULL;
  if (!dense_shape) {
    mf_free(counts);
    mf_strings_builder_free(&b);
    return ctx->status->code;
  }
  int64_t *ix = indices->data;
  for (int64_t i = 0, k = 0; i < in->size; i++)
    for (int64_t j = 0; j < counts[i]; j++, k++) {
      ix[2 * k] = i;
      ix[2 * k + 1] = j;
    }
  ((int64_t *)dense_shape->data)[0] = in->size;
  ((int64_t *)dense_shape->data)[1] = widest;
  mf_free(counts);
  const mf_shape values_shape = mf_shape_make(1, &total);
  return finish_output(ctx, 1, &b, &values_shape);
}

static mf_code split_v2_kernel(mf_kernel_ctx *ctx) { return split_kernel(ctx, split_v2_one); }
static mf_code split_v1_kernel(mf_kernel_ctx *ctx) { return split_kernel(ctx, split_v1_one); }

/* ---------- StringLength: input (strings), attr "unit" ("BYTE" or "UTF8_CHAR") ---------- */
static bool utf8_unit(const mf_attrs *attrs, const char *op_name, mf_status *s) {
  const mf_attr *unit = mf_attrs_find(attrs, "unit", MF_ATTR_STRING);
  if (!unit || strcmp(unit->v.s, "BYTE") == 0) return false;
  if (strcmp(unit->v.s, "UTF8_CHAR") != 0)
    MF_INVALID(s, "%s: unit must be \"BYTE\" or \"UTF8_CHAR\", got \"%s\"", op_name, unit->v.s);
  return true;
}

static mf_code length_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "input has", STRING_BIT)) return ic->status->code;
  utf8_unit(ic->attrs, ic->op_name, ic->status);
  ic->out_dtypes[0] = MF_INT32;
  ic->out_shapes[0] = ic->in_shapes[0];
  return ic->status->code;
}

/* Characters of UTF-8 text: the bytes that start one (not 10xxxxxx), as TensorFlow counts. */
static int64_t utf8_chars(const char *s, int64_t n) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; i++) count += ((unsigned char)s[i] & 0xC0) != 0x80;
  return count;
}

static mf_code length_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  bool chars = utf8_unit(ctx->attrs, ctx->op->name, ctx->status);
  mf_tensor *out = mf_kernel_alloc_output(ctx, 0, MF_INT32, in->rank, in->dims);
  if (!out) return ctx->status->code;
  int32_t *y = out->data;
  for (int64_t i = 0; i < in->size; i++) {
    const mf_tstring *e = mf_strings_of(in) + i;
    int64_t n = chars ? utf8_chars(mf_tstring_bytes(e), e->length) : e->length;
    if (n > INT32_MAX) return MF_INVALID(ctx->status, "%s: string %lld is longer than int32 counts", ctx->op->name,
                                         (long long)i);
    y[i] = (int32_t)n;
  }
  return MF_OK;
}

/* ---------- Substr: input (strings), pos, len (int32 or int64), attr "unit" "BYTE" ----------
 * pos counts from the end when negative; a pos beyond the string is an error,
 * a len past its end stops there (TensorFlow's rules). */
static mf_code substr_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "input has", STRING_BIT) || mf_check_dtype(ic, 1, "pos has", INDEX_TYPES) ||
      mf_check_same_dtype(ic, 1, "pos", 2, "len"))
    return ic->status->code;
  bool chars = utf8_unit(ic->attrs, ic->op_name, ic->status);
  if (!mf_ok(ic->status)) return ic->status->code;
  if (chars) return MF_INVALID(ic->status, "%s: Substr counts bytes only (unit \"BYTE\")", ic->op_name);
  ic->out_dtypes[0] = MF_STRING;
  return same_or_scalar_shape(ic, &ic->out_shapes[0]);
}

static mf_code substr_kernel(mf_kernel_ctx *ctx) {
  mf_shape shape;
  if (same_or_scalar_value_shape(ctx, &shape)) return ctx->status->code;
  const mf_tensor *in = ctx->inputs[0], *pos_t = ctx->inputs[1], *len_t = ctx->inputs[2];
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  for (int64_t i = 0, n = mf_shape_num_elements(shape.rank, shape.dims); i < n; i++) {
    const mf_tstring *e = element(in, i);
    int64_t pos = mf_load_int64(pos_t->data, pos_t->dtype, pos_t->rank ? i : 0);
    int64_t len = mf_load_int64(len_t->data, len_t->dtype, len_t->rank ? i : 0);
    if (pos < -e->length || pos > e->length || len < 0) {
      char q[QUOTE_MAX + 8];
      mf_strings_builder_free(&b);
      if (len < 0) return MF_INVALID(ctx->status, "%s: len %lld at index %lld is negative", ctx->op->name,
                                     (long long)len, (long long)i);
      return MF_INVALID(ctx->status, "%s: pos %lld out of range for string %s at index %lld", ctx->op->name,
                        (long long)pos, quote(e, q, sizeof q), (long long)i);
    }
    if (pos < 0) pos += e->length;
    if (len > e->length - pos) len = e->length - pos;
    mf_strings_add(&b, mf_tstring_bytes(e) + pos, (size_t)len);
  }
  return finish_output(ctx, 0, &b, &shape);
}

/* ---------- StringLower, StringUpper: input, attr "encoding"; StringStrip: input ----------
 * ASCII letters only (TensorFlow's encoding ""; "utf-8" would need ICU), and
 * ASCII whitespace off both ends. */
static mf_code same_shape_string_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "input has", STRING_BIT)) return ic->status->code;
  const mf_attr *encoding = mf_attrs_find(ic->attrs, "encoding", MF_ATTR_STRING);
  if (encoding && encoding->v.s[0])
    return MF_INVALID(ic->status, "%s: encoding must be \"\" (ASCII letters only), got \"%s\"", ic->op_name,
                      encoding->v.s);
  ic->out_dtypes[0] = MF_STRING;
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

/* Sets output 0 to each string of input 0 through map, which adds one element to b. */
static mf_code map_strings(mf_kernel_ctx *ctx, void (*map)(const char *s, int64_t n, mf_strings_builder *b)) {
  const mf_tensor *in = ctx->inputs[0];
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  for (int64_t i = 0; i < in->size; i++) {
    const mf_tstring *e = mf_strings_of(in) + i;
    map(mf_tstring_bytes(e), e->length, &b);
  }
  mf_shape shape = mf_shape_of(in);
  return finish_output(ctx, 0, &b, &shape);
}

static void lower_one(const char *s, int64_t n, mf_strings_builder *b) {
  mf_strings_begin(b);
  char *out = mf_strings_room(b, (size_t)n);
  for (int64_t j = 0; out && j < n; j++) out[j] = s[j] >= 'A' && s[j] <= 'Z' ? (char)(s[j] - 'A' + 'a') : s[j];
}

static void upper_one(const char *s, int64_t n, mf_strings_builder *b) {
  mf_strings_begin(b);
  char *out = mf_strings_room(b, (size_t)n);
  for (int64_t j = 0; out && j < n; j++) out[j] = s[j] >= 'a' && s[j] <= 'z' ? (char)(s[j] - 'a' + 'A') : s[j];
}

static void strip_one(const char *s, int64_t n, mf_strings_builder *b) {
  int64_t start = 0;
  while (start < n && mf_is_space(s[start])) start++;
  while (n > start && mf_is_space(s[n - 1])) n--;
  mf_strings_add(b, s + start, (size_t)(n - start));
}

static mf_code lower_kernel(mf_kernel_ctx *ctx) { return map_strings(ctx, lower_one); }
static mf_code upper_kernel(mf_kernel_ctx *ctx) { return map_strings(ctx, upper_one); }
static mf_code strip_kernel(mf_kernel_ctx *ctx) { return map_strings(ctx, strip_one); }

/* ---------- StringToHashBucketFast: input, attr num_buckets; StringToHashBucketStrong: also key ----------
 * int64 buckets: Fingerprint64 or SipHash-2-4 (under key, two ints) modulo
 * num_buckets, TensorFlow's numbers. */
static mf_code hash_bucket_check(const mf_attrs *attrs, const char *op_name, bool keyed, mf_status *s) {
  int64_t buckets = mf_attr_int(attrs, "num_buckets", 0);
  if (buckets < 1) return MF_INVALID(s, "%s: num_buckets must be at least 1, got %lld", op_name, (long long)buckets);
  const int64_t *key;
  int key_len = keyed ? mf_attr_ints(attrs, "key", &key) : 2;
  if (key_len != 2) return MF_INVALID(s, "%s: key must be a list of 2 integers, got %d", op_name, key_len < 0 ? 0 : key_len);
  return MF_OK;
}

static mf_code hash_bucket_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "input has", STRING_BIT) ||
      hash_bucket_check(ic->attrs, ic->op_name, strcmp(ic->def->name, "StringToHashBucketStrong") == 0, ic->status))
    return ic->status->code;
  ic->out_dtypes[0] = MF_INT64;
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static mf_code hash_bucket_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  uint64_t buckets = (uint64_t)mf_attr_int(ctx->attrs, "num_buckets", 1);
  const int64_t *key_attr;
  bool keyed = mf_attr_ints(ctx->attrs, "key", &key_attr) == 2;
  const uint64_t key[2] = {keyed ? (uint64_t)key_attr[0] : 0, keyed ? (uint64_t)key_attr[1] : 0};
  mf_tensor *out = mf_kernel_alloc_output(ctx, 0, MF_INT64, in->rank, in->dims);
  if (!out) return ctx->status->code;
  int64_t *y = out->data;
  for (int64_t i = 0; i < in->size; i++) {
    const mf_tstring *e = mf_strings_of(in) + i;
    const char *s = mf_tstring_bytes(e);
    uint64_t h = keyed ? mf_siphash24(key, s, (size_t)e->length) : mf_fingerprint64(s, (size_t)e->length);
    y[i] = (int64_t)(h % buckets);
  }
  return MF_OK;
}

/* ---------- StringToNumber: string_tensor, attr "out_type" (float32, float64, int32, int64) ---------- */
#define NUMBER_TYPES ((1u << MF_FLOAT32) | (1u << MF_FLOAT64) | (1u << MF_INT32) | (1u << MF_INT64))

static mf_code to_number_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "string_tensor has", STRING_BIT)) return ic->status->code;
  mf_dtype t = mf_attr_type(ic->attrs, "out_type", MF_FLOAT32);
  if (!((NUMBER_TYPES >> t) & 1u))
    return MF_INVALID(ic->status, "%s: out_type must be float32, float64, int32 or int64, got %s", ic->op_name,
                      mf_dtype_name(t));
  ic->out_dtypes[0] = t;
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static mf_code to_number_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = mf_kernel_alloc_output(ctx, 0, ctx->op->out_dtypes[0], in->rank, in->dims);
  if (!out) return ctx->status->code;
  for (int64_t i = 0; i < in->size; i++) {
    const mf_tstring *e = mf_strings_of(in) + i;
    double real = 0;
    int64_t integer = 0;
    if (!mf_parse_number(mf_tstring_bytes(e), e->length, out->dtype, &real, &integer)) {
      char q[QUOTE_MAX + 8];
      return MF_INVALID(ctx->status, "%s: StringToNumberOp could not correctly convert string: %s (to %s)",
                        ctx->op->name, quote(e, q, sizeof q), mf_dtype_name(out->dtype));
    }
    switch (out->dtype) {
      case MF_FLOAT32: ((float *)out->data)[i] = (float)real; break;
      case MF_FLOAT64: ((double *)out->data)[i] = real; break;
      case MF_INT32: ((int32_t *)out->data)[i] = (int32_t)integer; break;
      default: ((int64_t *)out->data)[i] = integer; break;
    }
  }
  return MF_OK;
}

/* ---------- AsString: input (numbers or bool), attrs precision, scientific, shortest, width, fill ----------
 * TensorFlow's formats: floats "%f" (precision digits after the point, 6 by
 * default), "%e" when scientific, "%g" when shortest; integers "%d"; bools
 * "true"/"false"; padded to width with fill (one character, ' ' or '0'). */
static mf_code as_string_format(const mf_attrs *attrs, const char *op_name, mf_dtype t, char *fmt, size_t n,
                                 mf_status *s) {
  int64_t precision = mf_attr_int(attrs, "precision", -1), width = mf_attr_int(attrs, "width", -1);
  bool scientific = mf_attr_bool(attrs, "scientific", false), shortest = mf_attr_bool(attrs, "shortest", false);
  const mf_attr *fill_attr = mf_attrs_find(attrs, "fill", MF_ATTR_STRING);
  const char *fill = fill_attr ? fill_attr->v.s : "";
  if (strlen(fill) > 1) return MF_INVALID(s, "%s: fill must be at most one character, got \"%s\"", op_name, fill);
  if (scientific && shortest) return MF_INVALID(s, "%s: Cannot select both scientific and shortest notation", op_name);
  if (fill[0] && fill[0] != ' ' && fill[0] != '0')
    return MF_INVALID(s, "%s: fill may be ' ' or '0', got \"%s\"", op_name, fill);
  if (precision > 64 || width > 256)
    return MF_INVALID(s, "%s: precision (%lld) and width (%lld) go up to 64 and 256", op_name, (long long)precision,
                      (long long)width);
  if (!mf_dtype_is_float(t) && (precision >= 0 || scientific || shortest))
    return MF_INVALID(s, "%s: precision, scientific and shortest apply to floats, not %s", op_name,
                      mf_dtype_name(t));
  char w[32] = "", p[32] = "";
  if (width >= 0) snprintf(w, sizeof w, "%s%lld", fill[0] == '0' ? "0" : "", (long long)width);
  if (precision >= 0) snprintf(p, sizeof p, ".%lld", (long long)precision);
  const char *conv = mf_dtype_is_float(t) ? (scientific ? "e" : shortest ? "g" : "f") : t == MF_BOOL ? "s" : PRId64;
  snprintf(fmt, n, "%%%s%s%s", w, p, conv);
  return MF_OK;
}

#define AS_STRING_TYPES (MF_DTYPE_MASK(MF_FOR_ALL_TYPES))

static mf_code as_string_infer(mf_infer_ctx *ic) {
  char fmt[64];
  if (mf_check_dtype(ic, 0, "input has", AS_STRING_TYPES) ||
      as_string_format(ic->attrs, ic->op_name, ic->in_dtypes[0], fmt, sizeof fmt, ic->status))
    return ic->status->code;
  ic->out_dtypes[0] = MF_STRING;
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static mf_code as_string_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  char fmt[64], text[512];
  if (as_string_format(ctx->attrs, ctx->op->name, in->dtype, fmt, sizeof fmt, ctx->status)) return ctx->status->code;
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  for (int64_t i = 0; i < in->size; i++) {
    int n;
    if (mf_dtype_is_float(in->dtype)) n = snprintf(text, sizeof text, fmt, mf_load_double(in->data, in->dtype, i));
    else if (in->dtype == MF_BOOL) n = snprintf(text, sizeof text, fmt, ((const bool *)in->data)[i] ? "true" : "false");
    else n = snprintf(text, sizeof text, fmt, mf_load_int64(in->data, in->dtype, i));
    mf_strings_add(&b, text, n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
  }
  mf_shape shape = mf_shape_of(in);
  return finish_output(ctx, 0, &b, &shape);
}

/* ---------- RegexReplace: input, pattern, rewrite (strings), attr "replace_global" ----------
 * Patterns are POSIX extended regular expressions (regex.h), not RE2: the
 * common syntax (classes, anchors, groups, alternation, repetition) is the
 * same. In rewrite, \0 to \9 insert groups and \\ a backslash. Matching
 * stops at a NUL byte of the input (regexec reads C strings). */
static mf_code regex_infer(mf_infer_ctx *ic) {
  static const char *const names[3] = {"input has", "pattern has", "rewrite has"};
  for (int i = 0; i < 3; i++)
    if (mf_check_dtype(ic, i, names[i], STRING_BIT)) return ic->status->code;
  for (int i = 1; i < 3; i++)
    if (ic->in_shapes[i].rank > 0) {
      char buf[128];
      return MF_INVALID(ic->status, "%s: %s must be a scalar, got shape %s", ic->op_name,
                        i == 1 ? "pattern" : "rewrite",
                        mf_shape_str(&ic->in_shapes[i], buf, sizeof buf));
    }
  ic->out_dtypes[0] = MF_STRING;
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

/* A copy of e as a C string (NULL when out of memory); free with mf_free. */
static char *c_string(const mf_tstring *e) {
  char *s = mf_malloc((size_t)e->length + 1);
  if (s) {
    memcpy(s, mf_tstring_bytes(e), (size_t)e->length);
    s[e->length] = 0;
  }
  return s;
}

/* Appends rewrite with its groups filled in from the match m of subject. */
static void put_rewrite(mf_strings_builder *b, const mf_tstring *rewrite, const char *subject, const regmatch_t *m,
                        size_t ngroups) {
  const char *r = mf_tstring_bytes(rewrite);
  for (int64_t k = 0; k < rewrite->length; k++) {
    if (r[k] == '\\' && k + 1 < rewrite->length) {
      char c = r[k + 1];
      if (c >= '0' && c <= '9') {
        size_t g = (size_t)(c - '0');
        if (g < ngroups && m[g].rm_so >= 0) mf_strings_put(b, subject + m[g].rm_so, (size_t)(m[g].rm_eo - m[g].rm_so));
        k++;
        continue;
      }
      if (c == '\\') {
        mf_strings_put(b, "\\", 1);
        k++;
        continue;
      }
    }
    mf_strings_put(b, r + k, 1);
  }
}

/* Compiles the pattern of input 1 into re (flags for regcomp); a bad one is an error naming it. */
static mf_code compile_pattern(mf_kernel_ctx *ctx, int flags, regex_t *re) {
  char *pattern = c_string(mf_strings_of(ctx->inputs[1]));
  if (!pattern) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  int rc = regcomp(re, pattern, flags);
  if (rc) {
    char why[160];
    regerror(rc, re, why, sizeof why);
    MF_INVALID(ctx->status, "%s: Invalid pattern: %s, error: %s", ctx->op->name, pattern, why);
  }
  mf_free(pattern);
  return ctx->status->code;
}

static mf_code regex_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  const mf_tstring *rewrite = mf_strings_of(ctx->inputs[2]);
  bool global = mf_attr_bool(ctx->attrs, "replace_global", true);
  regex_t re;
  if (compile_pattern(ctx, REG_EXTENDED, &re)) return ctx->status->code;
  enum { GROUPS = 10 };
  regmatch_t m[GROUPS];
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  for (int64_t i = 0; i < in->size; i++) {
    char *subject = c_string(mf_strings_of(in) + i);
    if (!subject) { b.oom = true; break; }
    size_t n = strlen(subject), at = 0;
    mf_strings_begin(&b);
    while (at <= n && regexec(&re, subject + at, GROUPS, m, at ? REG_NOTBOL : 0) == 0) {
      for (size_t g = 0; g < GROUPS; g++)
        if (m[g].rm_so >= 0) m[g].rm_so += (regoff_t)at, m[g].rm_eo += (regoff_t)at;
      mf_strings_put(&b, subject + at, (size_t)m[0].rm_so - at);
      put_rewrite(&b, rewrite, subject, m, GROUPS);
      if (m[0].rm_eo == m[0].rm_so) {  /* an empty match: keep the next character and go on past it */
        if ((size_t)m[0].rm_eo < n) mf_strings_put(&b, subject + m[0].rm_eo, 1);
        at = (size_t)m[0].rm_eo + 1;
      } else {
        at = (size_t)m[0].rm_eo;
      }
      if (!global) break;
    }
    if (at < n) mf_strings_put(&b, subject + at, n - at);
    mf_free(subject);
  }
  regfree(&re);
  mf_shape shape = mf_shape_of(in);
  return finish_output(ctx, 0, &b, &shape);
}

/* ---------- RegexFullMatch: input, pattern (string scalar) -> bool ----------
 * Whether the whole string matches: POSIX extended expressions as
 * RegexReplace, with '.' not matching a newline (as RE2's default; REG_NEWLINE
 * also keeps bracket negations from matching one). A string holding a NUL
 * byte never matches whole (regexec stops there). */
static mf_code full_match_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "input has", STRING_BIT) || mf_check_dtype(ic, 1, "pattern has", STRING_BIT))
    return ic->status->code;
  if (ic->in_shapes[1].rank > 0) {
    char buf[128];
    return MF_INVALID(ic->status, "%s: pattern must be a scalar, got shape %s", ic->op_name,
                      mf_shape_str(&ic->in_shapes[1], buf, sizeof buf));
  }
  ic->out_dtypes[0] = MF_BOOL;
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static mf_code full_match_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  regex_t re;
  if (compile_pattern(ctx, REG_EXTENDED | REG_NEWLINE, &re)) return ctx->status->code;
  mf_tensor *out = mf_kernel_alloc_output(ctx, 0, MF_BOOL, in->rank, in->dims);
  bool *y = out ? out->data : NULL;
  for (int64_t i = 0; y && i < in->size; i++) {
    const mf_tstring *e = mf_strings_of(in) + i;
    char *subject = c_string(e);
    if (!subject) {
      regfree(&re);
      return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
    }
    regmatch_t m;
    y[i] = regexec(&re, subject, 1, &m, 0) == 0 && m.rm_so == 0 && (int64_t)m.rm_eo == e->length;
    mf_free(subject);
  }
  regfree(&re);
  return ctx->status->code;
}

#define STRING_OP MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS
static const mf_op_def defs[] = {
    {.name = "StringJoin", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP | MF_OP_VARIADIC_INPUTS,
     .infer = join_infer, .kernel = {[MF_CPU] = join_kernel}},
    {.name = "StringSplitV2", .num_inputs = 2, .num_outputs = 3, .flags = STRING_OP | MF_OP_DYNAMIC_OUTPUTS,
     .infer = split_infer, .kernel = {[MF_CPU] = split_v2_kernel}},
    {.name = "StringSplit", .num_inputs = 2, .num_outputs = 3, .flags = STRING_OP | MF_OP_DYNAMIC_OUTPUTS,
     .infer = split_infer, .kernel = {[MF_CPU] = split_v1_kernel}},
    {.name = "ReduceJoin", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP,
     .infer = reduce_join_infer, .kernel = {[MF_CPU] = reduce_join_kernel}},
    {.name = "StringLower", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP,
     .infer = same_shape_string_infer, .kernel = {[MF_CPU] = lower_kernel}},
    {.name = "StringUpper", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP,
     .infer = same_shape_string_infer, .kernel = {[MF_CPU] = upper_kernel}},
    {.name = "StringStrip", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP,
     .infer = same_shape_string_infer, .kernel = {[MF_CPU] = strip_kernel}},
    {.name = "StringToHashBucketFast", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP,
     .infer = hash_bucket_infer, .kernel = {[MF_CPU] = hash_bucket_kernel}},
    {.name = "StringToHashBucketStrong", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP,
     .infer = hash_bucket_infer, .kernel = {[MF_CPU] = hash_bucket_kernel}},
    {.name = "StringLength", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP,
     .infer = length_infer, .kernel = {[MF_CPU] = length_kernel}},
    {.name = "Substr", .num_inputs = 3, .num_outputs = 1, .flags = STRING_OP,
     .infer = substr_infer, .kernel = {[MF_CPU] = substr_kernel}},
    {.name = "StringToNumber", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP,
     .infer = to_number_infer, .kernel = {[MF_CPU] = to_number_kernel}},
    {.name = "AsString", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP,
     .infer = as_string_infer, .kernel = {[MF_CPU] = as_string_kernel}},
    {.name = "RegexReplace", .num_inputs = 3, .num_outputs = 1, .flags = STRING_OP,
     .infer = regex_infer, .kernel = {[MF_CPU] = regex_kernel}},
    {.name = "RegexFullMatch", .num_inputs = 2, .num_outputs = 1, .flags = STRING_OP,
     .infer = full_match_infer, .kernel = {[MF_CPU] = full_match_kernel}},
};
MF_OP_TABLE(mf_ops_strings, defs);
