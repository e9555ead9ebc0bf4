/* strings.c — tf.strings: StringJoin, StringSplitV2, StringLength, Substr,
 * StringToNumber, AsString, RegexReplace. String values are built whole by
 * the kernels (core/tstring.h), so every op here sets its outputs itself.
 * None is differentiable. */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/tstring.h"
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

/* ---------- StringSplitV2: input (strings, 1-D), sep (string scalar), attr "maxsplit" ----------
 * Python's str.split: an empty sep splits at runs of whitespace and drops
 * empty pieces; else at each sep, keeping empty pieces. At most maxsplit
 * splits per string (-1: no limit). Outputs the pieces as a SparseTensor:
 * indices [n, 2] (string, piece), values [n], dense_shape [2]. */
static mf_code split_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "input has", STRING_BIT) || mf_check_dtype(ic, 1, "sep has", STRING_BIT))
    return ic->status->code;
  const mf_shape *in = &ic->in_shapes[0], *sep = &ic->in_shapes[1];
  char buf[128];
  if (in->rank >= 0 && in->rank != 1)
    return MF_INVALID(ic->status, "%s: input must be a vector of strings, got shape %s", ic->op_name,
                      mf_shape_str(in, buf, sizeof buf));
  if (sep->rank > 0)
    return MF_INVALID(ic->status, "%s: sep must be a scalar, got shape %s", ic->op_name,
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

/* Adds the pieces of s[0..n) to b; returns their number. */
static int64_t split_one(const char *s, int64_t n, const char *sep, int64_t sep_len, int64_t maxsplit,
                         mf_strings_builder *b) {
  int64_t count = 0, at = 0;
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
        if (memcmp(s + j, sep, (size_t)sep_len) == 0) { next = j; break; }
    if (next < 0) {
      mf_strings_add(b, s + at, (size_t)(n - at));
      return count + 1;
    }
    mf_strings_add(b, s + at, (size_t)(next - at));
    count++;
    at = next + sep_len;
  }
}

static mf_code split_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  const mf_tstring *sep = mf_strings_of(ctx->inputs[1]);
  int64_t maxsplit = mf_attr_int(ctx->attrs, "maxsplit", -1);
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  int64_t *counts = mf_malloc((size_t)(in->size ? in->size : 1) * sizeof *counts);
  if (!counts) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  int64_t total = 0, widest = 0;
  for (int64_t i = 0; i < in->size; i++) {
    const mf_tstring *e = mf_strings_of(in) + i;
    counts[i] = split_one(mf_tstring_bytes(e), e->length, mf_tstring_bytes(sep), sep->length, maxsplit, &b);
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

static mf_code regex_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  const mf_tstring *rewrite = mf_strings_of(ctx->inputs[2]);
  bool global = mf_attr_bool(ctx->attrs, "replace_global", true);
  char *pattern = c_string(mf_strings_of(ctx->inputs[1]));
  if (!pattern) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  regex_t re;
  int rc = regcomp(&re, pattern, REG_EXTENDED);
  if (rc) {
    char why[160];
    regerror(rc, &re, why, sizeof why);
    mf_code code = MF_INVALID(ctx->status, "%s: Invalid pattern: %s, error: %s", ctx->op->name, pattern, why);
    mf_free(pattern);
    return code;
  }
  mf_free(pattern);
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

#define STRING_OP MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS
static const mf_op_def defs[] = {
    {.name = "StringJoin", .num_inputs = 1, .num_outputs = 1, .flags = STRING_OP | MF_OP_VARIADIC_INPUTS,
     .infer = join_infer, .kernel = {[MF_CPU] = join_kernel}},
    {.name = "StringSplitV2", .num_inputs = 2, .num_outputs = 3, .flags = STRING_OP | MF_OP_DYNAMIC_OUTPUTS,
     .infer = split_infer, .kernel = {[MF_CPU] = split_kernel}},
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
};
MF_OP_TABLE(mf_ops_strings, defs);
