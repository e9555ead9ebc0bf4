/* parsing.c — values out of strings: DecodeRaw (bytes as numbers),
 * DecodeCSV (records as columns), ParseExample and ParseSequenceExample
 * (serialized tf.train.Example and SequenceExample messages, through
 * io/example.c). Not differentiable. */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/tstring.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "kernels/helpers.h"
#include "exec/kernel_api.h"
#include "core/memory.h"

#include <stdio.h>
#include <string.h>

#define STRING_BIT (1u << MF_STRING)

/* ---------- DecodeRaw: bytes (strings), attrs "out_type", "little_endian" ----------
 * Each string holds the bytes of n numbers of out_type; all strings hold the
 * same number. The output has the input's shape and a last dim of n. */
static mf_code decode_raw_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "bytes has", STRING_BIT)) return ic->status->code;
  mf_dtype t = mf_attr_type(ic->attrs, "out_type", MF_FLOAT32);
  if (!((MF_DTYPE_MASK(MF_FOR_NUMERIC_TYPES) >> t) & 1u))
    return MF_INVALID(ic->status, "%s: out_type must be a number dtype, got %s", ic->op_name, mf_dtype_name(t));
  const mf_shape *in = &ic->in_shapes[0];
  if (in->rank >= MF_MAX_RANK)
    return MF_INVALID(ic->status, "%s: bytes has rank %d; the output adds a dim, and ranks go up to %d", ic->op_name,
                      in->rank, MF_MAX_RANK);
  ic->out_dtypes[0] = t;
  ic->out_shapes[0] = *in;
  if (in->rank >= 0) ic->out_shapes[0].dims[ic->out_shapes[0].rank++] = -1;
  return MF_OK;
}

static mf_code decode_raw_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_dtype t = ctx->op->out_dtypes[0];
  size_t width = mf_dtype_size(t);
  int64_t length = in->size ? mf_strings_of(in)[0].length : 0;
  for (int64_t i = 0; i < in->size; i++) {
    int64_t n = mf_strings_of(in)[i].length;
    if (n != length)
      return MF_INVALID(ctx->status,
                        "%s: DecodeRaw requires input strings to all be the same size, but element %lld has size "
                        "%lld != %lld",
                        ctx->op->name, (long long)i, (long long)n, (long long)length);
  }
  if (length % (int64_t)width)
    return MF_INVALID(ctx->status,
                      "%s: Input to DecodeRaw has length %lld that is not a multiple of %zu, the size of %s",
                      ctx->op->name, (long long)length, width, mf_dtype_name(t));
  int64_t dims[MF_MAX_RANK];
  memcpy(dims, in->dims, (size_t)in->rank * sizeof *dims);
  dims[in->rank] = length / (int64_t)width;
  mf_tensor *out = mf_kernel_alloc_output(ctx, 0, t, in->rank + 1, dims);
  if (!out) return ctx->status->code;
  bool swap = !mf_attr_bool(ctx->attrs, "little_endian", true);  /* the host is little-endian */
  char *y = out->data;
  for (int64_t i = 0; i < in->size; i++) {
    const char *bytes = mf_tstring_bytes(mf_strings_of(in) + i);
    char *row = y + i * length;
    if (length) memcpy(row, bytes, (size_t)length);
    for (int64_t k = 0; swap && width > 1 && k < length; k += (int64_t)width)
      for (size_t a = 0, b = width - 1; a < b; a++, b--) {
        char c = row[k + (int64_t)a];
        row[k + (int64_t)a] = row[k + (int64_t)b];
        row[k + (int64_t)b] = c;
      }
  }
  return MF_OK;
}

/* ---------- DecodeCSV: records (strings), record_defaults (one per column) ----------
 * Attrs: field_delim (one character, ","), use_quote_delim (true: a field in
 * double quotes may hold the delimiter, "" stands for "), na_value (a field
 * equal to it is missing, like an empty one), select_cols (the columns kept,
 * ascending; absent: all). A default is a scalar or one-element vector of
 * float32, float64, int32, int64 or string (the column's dtype), or empty:
 * the column is required. Output k has the records' shape. */
#define CSV_TYPES ((1u << MF_FLOAT32) | (1u << MF_FLOAT64) | (1u << MF_INT32) | (1u << MF_INT64) | STRING_BIT)

static mf_code csv_attrs(const mf_attrs *attrs, const char *op_name, int ncols, char *delim, mf_status *s) {
  const mf_attr *d = mf_attrs_find(attrs, "field_delim", MF_ATTR_STRING);
  if (d && strlen(d->v.s) != 1)
    return MF_INVALID(s, "%s: field_delim must be one character, got \"%s\"", op_name, d->v.s);
  *delim = d ? d->v.s[0] : ',';
  const int64_t *cols;
  int n = mf_attr_ints(attrs, "select_cols", &cols);
  if (n >= 0 && n != ncols)
    return MF_INVALID(s, "%s: select_cols has %d columns but record_defaults %d", op_name, n, ncols);
  for (int i = 0; i < n; i++)
    if (cols[i] < 0 || (i && cols[i] <= cols[i - 1]))
      return MF_INVALID(s, "%s: select_cols must be ascending column numbers from 0, but select_cols[%d] is %lld",
                        op_name, i, (long long)cols[i]);
  return MF_OK;
}

static mf_code csv_infer(mf_infer_ctx *ic) {
  int ncols = ic->num_inputs - 1;
  char delim;
  if (mf_check_dtype(ic, 0, "records has", STRING_BIT)) return ic->status->code;
  if (ncols < 1) return MF_INVALID(ic->status, "%s: record_defaults must name at least one column", ic->op_name);
  if (csv_attrs(ic->attrs, ic->op_name, ncols, &delim, ic->status) || mf_infer_set_num_outputs(ic, ncols))
    return ic->status->code;
  for (int k = 0; k < ncols; k++) {
    char what[64];
    snprintf(what, sizeof what, "record_defaults[%d] has", k);
    if (mf_check_dtype(ic, k + 1, what, CSV_TYPES)) return ic->status->code;
    const mf_shape *sk = &ic->in_shapes[k + 1];
    if (sk->rank > 1 || (sk->rank == 1 && sk->dims[0] > 1)) {
      char buf[128];
      return MF_INVALID(ic->status, "%s: record_defaults[%d] must have at most one element, got shape %s",
                        ic->op_name, k, mf_shape_str(sk, buf, sizeof buf));
    }
    ic->out_dtypes[k] = ic->in_dtypes[k + 1];
    ic->out_shapes[k] = ic->in_shapes[0];
  }
  return MF_OK;
}

/* A field of a record: its bytes, in the record or (a quoted field, its
 * quotes undone) in scratch memory. */
typedef struct {
  const char *start;
  int64_t length;
} csv_field;

/* Splits record r[0..n) at delim into fields[0..max) (counting them all in
 * *count); quoted fields are unquoted into scratch (n bytes suffice).
 * Returns NULL on success, else what is wrong. */
static const char *csv_split(const char *r, int64_t n, char delim, bool quotes, csv_field *fields, int max,
                             int *count, char *scratch) {
  int64_t at = 0;
  int k = 0;
  char *out = scratch;
  for (;;) {
    csv_field f;
    if (quotes && at < n && r[at] == '"') {
      f.start = out;
      int64_t j = at + 1;
      for (;; j++) {
        if (j >= n) return "Quoted field has to end with quote followed by delim or end";
        if (r[j] == '"') {
          if (j + 1 < n && r[j + 1] == '"') { *out++ = '"'; j++; continue; }
          break;
        }
        *out++ = r[j];
      }
      f.length = out - f.start;
      at = j + 1;
      if (at < n && r[at] != delim) return "Quote inside a string has to be escaped by another quote";
    } else {
      int64_t j = at;
      while (j < n && r[j] != delim) {
        if (quotes && r[j] == '"') return "Unquoted fields cannot have quotes inside";
        j++;
      }
      f.start = r + at;
      f.length = j - at;
      at = j;
    }
    if (k < max) fields[k] = f;
    k++;
    if (at >= n) break;
    at++;  /* past the delimiter */
  }
  *count = k;
  return NULL;
}

/* Stores field f (missing: the default) of column col as element rec: into
 * b for a string column, else into the column's output. */
static mf_code csv_store(mf_kernel_ctx *ctx, int col, int64_t rec, csv_field f, bool missing,
                         mf_strings_builder *b) {
  const mf_tensor *dflt = ctx->inputs[col + 1];
  mf_tensor *out = ctx->outputs[col];
  mf_dtype dtype = ctx->op->out_dtypes[col];
  if (missing) {
    if (dflt->size == 0)
      return MF_INVALID(ctx->status, "%s: Field %d is required but missing in record %lld!", ctx->op->name, col,
                        (long long)rec);
    if (dtype == MF_STRING) {
      const mf_tstring *e = mf_strings_of(dflt);
      mf_strings_add(b, mf_tstring_bytes(e), (size_t)e->length);
    } else {
      memcpy((char *)out->data + rec * (int64_t)mf_dtype_size(dtype), dflt->data, mf_dtype_size(dtype));
    }
    return MF_OK;
  }
  if (dtype == MF_STRING) {
    mf_strings_add(b, f.start, (size_t)f.length);
    return MF_OK;
  }
  double real = 0;
  int64_t integer = 0;
  if (!mf_parse_number(f.start, f.length, dtype, &real, &integer))
    return MF_INVALID(ctx->status, "%s: Field %d in record %lld is not a valid %s: %.*s", ctx->op->name, col,
                      (long long)rec, mf_dtype_name(dtype), f.length > 40 ? 40 : (int)f.length, f.start);
  if (mf_dtype_is_float(dtype)) mf_store_double(out->data, dtype, rec, real);
  else if (dtype == MF_INT32) ((int32_t *)out->data)[rec] = (int32_t)integer;
  else ((int64_t *)out->data)[rec] = integer;
  return MF_OK;
}

static mf_code csv_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *records = ctx->inputs[0];
  int ncols = ctx->num_inputs - 1;
  char delim;
  if (csv_attrs(ctx->attrs, ctx->op->name, ncols, &delim, ctx->status)) return ctx->status->code;
  bool quotes = mf_attr_bool(ctx->attrs, "use_quote_delim", true);
  const mf_attr *na = mf_attrs_find(ctx->attrs, "na_value", MF_ATTR_STRING);
  const char *na_value = na ? na->v.s : "";
  size_t na_len = strlen(na_value);
  const int64_t *cols;
  int nselect = mf_attr_ints(ctx->attrs, "select_cols", &cols);
  int want = nselect > 0 ? (int)cols[nselect - 1] + 1 : ncols;  /* fields read per record */
  size_t longest = 0;
  for (int64_t r = 0; r < records->size; r++)
    if ((size_t)mf_strings_of(records)[r].length > longest) longest = (size_t)mf_strings_of(records)[r].length;
  csv_field *fields = mf_kernel_scratch(ctx, (size_t)want * sizeof *fields + longest + 1);
  if (!fields) return ctx->status->code;
  char *unquoted = (char *)(fields + want);
  for (int k = 0; k < ncols; k++)
    if (ctx->op->out_dtypes[k] != MF_STRING &&
        !mf_kernel_alloc_output(ctx, k, ctx->op->out_dtypes[k], records->rank, records->dims))
      return ctx->status->code;
  mf_shape shape = mf_shape_of(records);
  mf_code code = MF_OK;
  /* String columns are built one at a time, each over all records: few builders, no state per column. */
  for (int pass = -1; pass < ncols && !code; pass++) {
    if (pass >= 0 && ctx->op->out_dtypes[pass] != MF_STRING) continue;
    mf_strings_builder b;
    mf_strings_builder_init(&b);
    for (int64_t r = 0; r < records->size && !code; r++) {
      const mf_tstring *e = mf_strings_of(records) + r;
      int count;
      const char *bad = csv_split(mf_tstring_bytes(e), e->length, delim, quotes, fields, want, &count, unquoted);
      if (bad) {
        code = MF_INVALID(ctx->status, "%s: %s in record %lld", ctx->op->name, bad, (long long)r);
        break;
      }
      if (nselect < 0 ? count != ncols : count < want) {
        code = MF_INVALID(ctx->status, "%s: Expect %d fields but have %d in record %lld", ctx->op->name, want, count,
                          (long long)r);
        break;
      }
      for (int k = 0; k < ncols && !code; k++) {
        if ((pass < 0) == (ctx->op->out_dtypes[k] == MF_STRING) || (pass >= 0 && k != pass)) continue;
        csv_field f = fields[nselect > 0 ? cols[k] : k];
        bool missing = f.length == 0 ||
                       (na_len && (size_t)f.length == na_len && memcmp(f.start, na_value, na_len) == 0);
        code = csv_store(ctx, k, r, f, missing, &b);
      }
    }
    if (pass < 0 || code) {
      mf_strings_builder_free(&b);
      continue;
    }
    mf_tensor *t = mf_strings_finish(&b, shape.rank, shape.dims, ctx->status);
    if (!t) return ctx->status->code;
    mf_tensor_release(ctx->outputs[pass]);
    ctx->outputs[pass] = t;
  }
  return code;
}

/* ---------- ParseExample: serialized (strings, a scalar or a vector), sparse_keys, dense_keys (string
 * vectors), dense_defaults (one per dense key) ----------
 * Attrs: sparse_types (ints: a dtype per sparse key), dense_shapes (ints: for
 * each dense key its rank, then its dims). Features are float32 (a
 * float_list), int64 (an int64_list) or string (a bytes_list). Outputs, as
 * TensorFlow's ParseExample and ParseSingleExample give them: per sparse key
 * its indices (int64 [n, 1 + batch rank]), values [n] and dense shape
 * (int64 [1 + batch rank]); then per dense key its values, of the batch's
 * shape followed by the key's shape. A dense default with no elements makes
 * the key required; else it has the key's shape and fills examples without it. */
#define FEATURE_TYPES ((1u << MF_FLOAT32) | (1u << MF_INT64) | STRING_BIT)

typedef struct {
  int num_sparse, num_dense;
  const int64_t *sparse_types;
  mf_shape dense_shapes[64];
} parse_spec;

/* Attr `attr` of op_name: a dtype per key of a feature (*types, *n; absent: none). */
static mf_code feature_types_of(const mf_attrs *attrs, const char *attr, const char *op_name, const int64_t **types,
                                int *n, mf_status *s) {
  int m = mf_attr_ints(attrs, attr, types);
  *n = m < 0 ? 0 : m;
  for (int k = 0; k < *n; k++)
    if ((*types)[k] < 0 || (*types)[k] >= MF_DTYPE_SLOTS || !((FEATURE_TYPES >> (*types)[k]) & 1u))
      return MF_INVALID(s, "%s: %s[%d] must be float32, int64 or string", op_name, attr, k);
  return MF_OK;
}

/* Attr `attr` of op_name: for each of count keys its rank, then its dims (fully defined). */
static mf_code feature_shapes_of(const mf_attrs *attrs, const char *attr, int count, int max_rank,
                                 const char *op_name, mf_shape *shapes, mf_status *s) {
  const int64_t *v;
  int m = mf_attr_ints(attrs, attr, &v), at = 0;
  for (int k = 0; k < count; k++) {
    if (at >= m || v[at] < 0 || v[at] > max_rank || at + 1 + v[at] > m)
      return MF_INVALID(s, "%s: %s must give a rank (up to %d) and dims for each of %d keys", op_name, attr,
                        max_rank, count);
    shapes[k] = mf_shape_make((int)v[at], v + at + 1);
    for (int d = 0; d < shapes[k].rank; d++)
      if (shapes[k].dims[d] < 0) return MF_INVALID(s, "%s: %s: shape %d must be fully defined", op_name, attr, k);
    at += 1 + (int)v[at];
  }
  return MF_OK;
}

static mf_code parse_spec_of(const mf_attrs *attrs, int num_inputs, const char *op_name, parse_spec *p,
                             mf_status *s) {
  p->num_dense = num_inputs - 3;
  if (p->num_dense < 0 || p->num_dense > 64)
    return MF_INVALID(s, "%s: ParseExample takes serialized, sparse_keys, dense_keys and at most 64 dense defaults",
                      op_name);
  if (feature_types_of(attrs, "sparse_types", op_name, &p->sparse_types, &p->num_sparse, s)) return s->code;
  return feature_shapes_of(attrs, "dense_shapes", p->num_dense, MF_MAX_RANK - 1, op_name, p->dense_shapes, s);
}

/* Shape inference of one sparse feature (outputs first, first + stride,
 * first + 2 stride) with index width `width` (-1: unknown), and of one dense
 * feature of `shape` (output out) over a batch of serialized messages. */
static void infer_sparse(mf_infer_ctx *ic, int first, int stride, mf_dtype t, int width) {
  const int64_t ix[2] = {-1, width}, one[1] = {-1}, sh[1] = {width};
  ic->out_dtypes[first] = MF_INT64;
  ic->out_shapes[first] = mf_shape_make(2, ix);
  ic->out_dtypes[first + stride] = t;
  ic->out_shapes[first + stride] = mf_shape_make(1, one);
  ic->out_dtypes[first + 2 * stride] = MF_INT64;
  ic->out_shapes[first + 2 * stride] = mf_shape_make(1, sh);
}

static void infer_dense(mf_infer_ctx *ic, int out, mf_dtype t, const mf_shape *ser, mf_shape shape) {
  if (ser->rank < 0) {
    shape = mf_shape_unknown();
  } else if (ser->rank == 1) {
    memmove(shape.dims + 1, shape.dims, (size_t)shape.rank * sizeof *shape.dims);
    shape.dims[0] = ser->dims[0];
    shape.rank++;
  }
  ic->out_dtypes[out] = t;
  ic->out_shapes[out] = shape;
}

static mf_code parse_example_infer(mf_infer_ctx *ic) {
  parse_spec p;
  if (mf_check_dtype(ic, 0, "serialized has", STRING_BIT) || mf_check_dtype(ic, 1, "sparse_keys has", STRING_BIT) ||
      mf_check_dtype(ic, 2, "dense_keys has", STRING_BIT) ||
      parse_spec_of(ic->attrs, ic->num_inputs, ic->op_name, &p, ic->status))
    return ic->status->code;
  const mf_shape *ser = &ic->in_shapes[0];
  if (ser->rank > 1) {
    char buf[128];
    return MF_INVALID(ic->status, "%s: serialized must be a scalar or a vector, got shape %s", ic->op_name,
                      mf_shape_str(ser, buf, sizeof buf));
  }
  if (mf_infer_set_num_outputs(ic, 3 * p.num_sparse + p.num_dense)) return ic->status->code;
  int width = ser->rank < 0 ? -1 : 1 + ser->rank;
  for (int k = 0; k < p.num_sparse; k++) infer_sparse(ic, k, p.num_sparse, (mf_dtype)p.sparse_types[k], width);
  for (int k = 0; k < p.num_dense; k++) {
    char what[64];
    snprintf(what, sizeof what, "dense_defaults[%d] has", k);
    if (mf_check_dtype(ic, 3 + k, what, FEATURE_TYPES)) return ic->status->code;
    infer_dense(ic, 3 * p.num_sparse + k, ic->in_dtypes[3 + k], ser, p.dense_shapes[k]);
  }
  return MF_OK;
}

static const char *feature_type_name(mf_dtype t) {
  return t == MF_FLOAT32 ? "float" : t == MF_INT64 ? "int64" : "string";
}
static const char *kind_name(mf_feature_kind k) {
  return k == MF_FEATURE_FLOATS ? "float"
         : k == MF_FEATURE_INT64S ? "int64"
         : k == MF_FEATURE_BYTES ? "string"
                                  : "none";
}
static mf_feature_kind kind_of(mf_dtype t) {
  return t == MF_FLOAT32 ? MF_FEATURE_FLOATS : t == MF_INT64 ? MF_FEATURE_INT64S : MF_FEATURE_BYTES;
}

/* key as a C string (cut at 255 bytes) in name. */
static const char *key_name(const mf_tstring *key, char name[256]) {
  snprintf(name, 256, "%.*s", (int)(key->length < 255 ? key->length : 255), mf_tstring_bytes(key));
  return name;
}

/* Feature `key` of e with dtype t: its index, -1 when absent (or empty and
 * kindless); -2 with the status set when its kind differs. */
static int find_feature(mf_kernel_ctx *ctx, const mf_example *e, const char *key, mf_dtype t, int64_t b) {
  int i = mf_example_find(e, key);
  if (i < 0 || mf_example_kind(e, i) == MF_FEATURE_NONE) return -1;
  if (mf_example_kind(e, i) != kind_of(t)) {
    MF_INVALID(ctx->status, "%s: Name: <unknown>, Key: %s, Index: %lld.  Data types don't match. Data type: %s but "
               "expected type: %s", ctx->op->name, key, (long long)b, kind_name(mf_example_kind(e, i)),
               feature_type_name(t));
    return -2;
  }
  return i;
}

/* Appends value j of feature i of e (dtype t) to out at element `at` or, for strings, to b. */
static void put_value(const mf_example *e, int i, size_t j, mf_dtype t, mf_tensor *out, int64_t at,
                      mf_strings_builder *b) {
  if (t == MF_FLOAT32) ((float *)out->data)[at] = mf_example_floats(e, i)[j];
  else if (t == MF_INT64) ((int64_t *)out->data)[at] = mf_example_int64s(e, i)[j];
  else {
    size_t len;
    const char *p = mf_example_bytes(e, i, j, &len);
    mf_strings_add(b, p, len);
  }
}

/* Output out: b's strings, of shape; b is freed. */
static mf_code finish_strings(mf_kernel_ctx *ctx, int out, mf_strings_builder *b, int rank, const int64_t *dims) {
  mf_tensor *strings = mf_strings_finish(b, rank, dims, ctx->status);
  if (!strings) return ctx->status->code;
  mf_tensor_release(ctx->outputs[out]);
  ctx->outputs[out] = strings;
  return MF_OK;
}

/* Output out, of the batch's shape followed by `shape`, from feature key
 * (dtype t, default dflt: none when empty) of each of the batch's features. */
static mf_code parse_dense(mf_kernel_ctx *ctx, mf_example *const *ex, int64_t batch, const char *key, mf_dtype t,
                           const mf_tensor *dflt, const mf_shape *shape, int out_index) {
  int64_t per = mf_shape_num_elements(shape->rank, shape->dims);
  if (dflt->size != 0 && dflt->size != per) {
    char buf[128];
    return MF_INVALID(ctx->status, "%s: the default of dense key %s has %lld values, but its shape %s holds %lld",
                      ctx->op->name, key, (long long)dflt->size, mf_shape_str(shape, buf, sizeof buf), (long long)per);
  }
  mf_shape out_shape = *shape;
  if (ctx->inputs[0]->rank == 1) {
    memmove(out_shape.dims + 1, out_shape.dims, (size_t)out_shape.rank * sizeof *out_shape.dims);
    out_shape.dims[0] = batch;
    out_shape.rank++;
  }
  mf_tensor *out = NULL;
  if (t != MF_STRING && !(out = mf_kernel_alloc_output(ctx, out_index, t, out_shape.rank, out_shape.dims)))
    return ctx->status->code;
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  for (int64_t e = 0; e < batch; e++) {
    int i = find_feature(ctx, ex[e], key, t, e);
    if (i == -2) break;
    if (i < 0) {
      if (dflt->size == 0) {
        MF_INVALID(ctx->status, "%s: Name: <unknown>, Feature: %s (data type: %s) is required but could not be "
                   "found.", ctx->op->name, key, feature_type_name(t));
        break;
      }
      for (int64_t j = 0; j < per; j++) {
        if (t == MF_STRING) {
          const mf_tstring *d = mf_strings_of(dflt) + j;
          mf_strings_add(&b, mf_tstring_bytes(d), (size_t)d->length);
        } else {
          memcpy((char *)out->data + (e * per + j) * (int64_t)mf_dtype_size(t),
                 (const char *)dflt->data + j * (int64_t)mf_dtype_size(t), mf_dtype_size(t));
        }
      }
      continue;
    }
    if ((int64_t)mf_example_count(ex[e], i) != per) {
      char buf[128];
      MF_INVALID(ctx->status, "%s: Name: <unknown>, Key: %s, Index: %lld.  Number of %s values != expected.  "
                 "Values size: %zu but output shape: %s", ctx->op->name, key, (long long)e, feature_type_name(t),
                 mf_example_count(ex[e], i), mf_shape_str(shape, buf, sizeof buf));
      break;
    }
    for (int64_t j = 0; j < per; j++) put_value(ex[e], i, (size_t)j, t, out, e * per + j, &b);
  }
  if (!mf_ok(ctx->status) || t != MF_STRING) {
    mf_strings_builder_free(&b);
    return ctx->status->code;
  }
  return finish_strings(ctx, out_index, &b, out_shape.rank, out_shape.dims);
}

/* The sparse outputs (indices, values, dense shape) at first, first +
 * stride, first + 2 stride, for `total` values with `width` indices each,
 * and b made ready for string values (finish_sparse frees it). */
static mf_tensor *alloc_sparse(mf_kernel_ctx *ctx, int first, int stride, mf_dtype t, int64_t total, int width,
                               mf_tensor **values, mf_tensor **shape, mf_strings_builder *b) {
  mf_strings_builder_init(b);
  const int64_t index_dims[2] = {total, width}, shape_dims[1] = {width};
  mf_tensor *indices = mf_kernel_alloc_output(ctx, first, MF_INT64, 2, index_dims);
  *shape = indices ? mf_kernel_alloc_output(ctx, first + 2 * stride, MF_INT64, 1, shape_dims) : NULL;
  *values = NULL;
  if (*shape && t != MF_STRING) *values = mf_kernel_alloc_output(ctx, first + stride, t, 1, &total);
  return *shape && (t == MF_STRING || *values) ? indices : NULL;
}

/* A sparse feature's dense shape (dims, as many as it has) and, for strings,
 * its `total` values (output values) from b, which is freed. */
static mf_code finish_sparse(mf_kernel_ctx *ctx, int values, mf_dtype t, mf_strings_builder *b, int64_t total,
                             mf_tensor *shape, const int64_t *dims) {
  memcpy(shape->data, dims, (size_t)shape->size * sizeof *dims);
  if (t != MF_STRING) {
    mf_strings_builder_free(b);
    return MF_OK;
  }
  return finish_strings(ctx, values, b, 1, &total);
}

static mf_code parse_sparse(mf_kernel_ctx *ctx, mf_example *const *ex, int64_t batch, const char *key, mf_dtype t,
                            int first, int stride) {
  int64_t total = 0, widest = 0;
  for (int64_t e = 0; e < batch; e++) {
    int i = find_feature(ctx, ex[e], key, t, e);
    if (i == -2) return ctx->status->code;
    int64_t n = i < 0 ? 0 : (int64_t)mf_example_count(ex[e], i);
    total += n;
    if (n > widest) widest = n;
  }
  int batch_rank = ctx->inputs[0]->rank, width = 1 + batch_rank;
  mf_strings_builder b;
  mf_tensor *values, *shape, *indices = alloc_sparse(ctx, first, stride, t, total, width, &values, &shape, &b);
  if (!indices) return ctx->status->code;
  int64_t at = 0;
  for (int64_t e = 0; e < batch; e++) {
    int i = find_feature(ctx, ex[e], key, t, e);
    for (size_t j = 0; i >= 0 && j < mf_example_count(ex[e], i); j++, at++) {
      int64_t *ix = (int64_t *)indices->data + at * width;
      if (batch_rank) ix[0] = e;
      ix[batch_rank] = (int64_t)j;
      put_value(ex[e], i, j, t, values, at, &b);
    }
  }
  const int64_t dims[2] = {batch, widest};
  return finish_sparse(ctx, first + stride, t, &b, total, shape, dims + 1 - batch_rank);
}

/* Each of the batch's serialized messages parsed with parse, in the first
 * of `slots` pointers per message of the kernel's scratch memory (one
 * buffer per call: the others are the caller's); on failure frees those
 * parsed and returns NULL. */
static void **parse_batch(mf_kernel_ctx *ctx, void *(*parse)(const void *, size_t, mf_status *),
                          void (*release)(void *), size_t slots) {
  const mf_tensor *ser = ctx->inputs[0];
  void **parsed = mf_kernel_scratch(ctx, (size_t)(ser->size ? ser->size : 1) * slots * sizeof *parsed);
  if (!parsed) return NULL;
  for (int64_t e = 0; e < ser->size; e++) {
    const mf_tstring *bytes = mf_strings_of(ser) + e;
    if (!(parsed[e] = parse(mf_tstring_bytes(bytes), (size_t)bytes->length, ctx->status))) {
      mf_status_append(ctx->status, " (%s, example %lld)", ctx->op->name, (long long)e);
      while (e-- > 0) release(parsed[e]);
      return NULL;
    }
  }
  return parsed;
}

static void *parse_example(const void *p, size_t n, mf_status *s) { return mf_example_parse(p, n, s); }
static void release_example(void *e) { mf_example_free(e); }

static mf_code parse_example_kernel(mf_kernel_ctx *ctx) {
  parse_spec p;
  if (parse_spec_of(ctx->attrs, ctx->num_inputs, ctx->op->name, &p, ctx->status)) return ctx->status->code;
  int64_t batch = ctx->inputs[0]->size;
  mf_example **ex = (mf_example **)parse_batch(ctx, parse_example, release_example, 1);
  if (!ex) return ctx->status->code;
  char name[256];
  for (int k = 0; mf_ok(ctx->status) && k < p.num_sparse; k++)
    parse_sparse(ctx, ex, batch, key_name(mf_strings_of(ctx->inputs[1]) + k, name), (mf_dtype)p.sparse_types[k], k,
                 p.num_sparse);
  for (int k = 0; mf_ok(ctx->status) && k < p.num_dense; k++)
    parse_dense(ctx, ex, batch, key_name(mf_strings_of(ctx->inputs[2]) + k, name), ctx->op->out_dtypes[3 * p.num_sparse + k],
                ctx->inputs[3 + k], &p.dense_shapes[k], 3 * p.num_sparse + k);
  for (int64_t e = 0; e < batch; e++) mf_example_free(ex[e]);
  return ctx->status->code;
}

/* ---------- ParseSequenceExample: serialized (strings, a scalar or a vector),
 * context_sparse_keys, context_dense_keys, feature_list_sparse_keys,
 * feature_list_dense_keys (string vectors), context_dense_defaults (one per
 * context dense key) ----------
 * Attrs: context_sparse_types, context_dense_shapes (as ParseExample's),
 * feature_list_sparse_types, feature_list_dense_types (a dtype per key),
 * feature_list_dense_shapes (a rank and dims per key: each step's shape),
 * feature_list_dense_allow_missing (a 0/1 per dense key: a missing list has
 * no steps, else it is an error). Outputs, as TensorFlow's
 * ParseSequenceExample gives them: the context's as ParseExample's; per
 * sparse feature list its indices (int64 [n, 2 + batch rank]: example, step,
 * value), values and dense shape; per dense feature list its values (the
 * batch's shape, the steps (padded with zeros or "" to the longest), the
 * step's shape); then per dense feature list its lengths (int64, the batch's
 * shape). */
typedef struct {
  parse_spec context;
  int num_list_sparse, num_list_dense;
  const int64_t *list_sparse_types, *list_dense_types, *allow_missing;
  mf_shape list_dense_shapes[64];
} sequence_spec;

static mf_code sequence_spec_of(const mf_attrs *attrs, int num_inputs, const char *op_name, sequence_spec *p,
                                mf_status *s) {
  parse_spec *c = &p->context;
  c->num_dense = num_inputs - 5;
  if (c->num_dense < 0 || c->num_dense > 64)
    return MF_INVALID(s, "%s: ParseSequenceExample takes serialized, four key vectors and at most 64 context dense "
                      "defaults", op_name);
  int n;
  if (feature_types_of(attrs, "context_sparse_types", op_name, &c->sparse_types, &c->num_sparse, s) ||
      feature_shapes_of(attrs, "context_dense_shapes", c->num_dense, MF_MAX_RANK - 1, op_name, c->dense_shapes, s) ||
      feature_types_of(attrs, "feature_list_sparse_types", op_name, &p->list_sparse_types, &p->num_list_sparse, s) ||
      feature_types_of(attrs, "feature_list_dense_types", op_name, &p->list_dense_types, &p->num_list_dense, s))
    return s->code;
  if (p->num_list_dense > 64) return MF_INVALID(s, "%s: at most 64 dense feature lists", op_name);
  if (feature_shapes_of(attrs, "feature_list_dense_shapes", p->num_list_dense, MF_MAX_RANK - 2, op_name,
                        p->list_dense_shapes, s))
    return s->code;
  n = mf_attr_ints(attrs, "feature_list_dense_allow_missing", &p->allow_missing);
  if (n != p->num_list_dense)
    return MF_INVALID(s, "%s: feature_list_dense_allow_missing must have one flag for each of %d dense feature lists",
                      op_name, p->num_list_dense);
  return MF_OK;
}

/* Output positions: context sparse, context dense, list sparse, list dense, list lengths. */
static int list_sparse_first(const sequence_spec *p) { return 3 * p->context.num_sparse + p->context.num_dense; }
static int list_dense_first(const sequence_spec *p) { return list_sparse_first(p) + 3 * p->num_list_sparse; }

static mf_code parse_sequence_example_infer(mf_infer_ctx *ic) {
  sequence_spec p;
  for (int k = 0; k < 5; k++) {
    static const char *const what[5] = {"serialized has", "context_sparse_keys has", "context_dense_keys has",
                                        "feature_list_sparse_keys has", "feature_list_dense_keys has"};
    if (mf_check_dtype(ic, k, what[k], STRING_BIT)) return ic->status->code;
  }
  if (sequence_spec_of(ic->attrs, ic->num_inputs, ic->op_name, &p, ic->status)) return ic->status->code;
  const mf_shape *ser = &ic->in_shapes[0];
  if (ser->rank > 1) {
    char buf[128];
    return MF_INVALID(ic->status, "%s: serialized must be a scalar or a vector, got shape %s", ic->op_name,
                      mf_shape_str(ser, buf, sizeof buf));
  }
  int ls = list_sparse_first(&p), ld = list_dense_first(&p);
  if (mf_infer_set_num_outputs(ic, ld + 2 * p.num_list_dense)) return ic->status->code;
  const parse_spec *c = &p.context;
  int width = ser->rank < 0 ? -1 : 1 + ser->rank;
  for (int k = 0; k < c->num_sparse; k++) infer_sparse(ic, k, c->num_sparse, (mf_dtype)c->sparse_types[k], width);
  for (int k = 0; k < c->num_dense; k++) {
    char what[64];
    snprintf(what, sizeof what, "context_dense_defaults[%d] has", k);
    if (mf_check_dtype(ic, 5 + k, what, FEATURE_TYPES)) return ic->status->code;
    infer_dense(ic, 3 * c->num_sparse + k, ic->in_dtypes[5 + k], ser, c->dense_shapes[k]);
  }
  for (int k = 0; k < p.num_list_sparse; k++)
    infer_sparse(ic, ls + k, p.num_list_sparse, (mf_dtype)p.list_sparse_types[k], width < 0 ? -1 : width + 1);
  for (int k = 0; k < p.num_list_dense; k++) {
    mf_shape steps = p.list_dense_shapes[k];  /* [steps, step's shape] */
    memmove(steps.dims + 1, steps.dims, (size_t)steps.rank * sizeof *steps.dims);
    steps.dims[0] = -1;
    steps.rank++;
    infer_dense(ic, ld + k, (mf_dtype)p.list_dense_types[k], ser, steps);
    ic->out_dtypes[ld + p.num_list_dense + k] = MF_INT64;
    ic->out_shapes[ld + p.num_list_dense + k] = *ser;
  }
  return MF_OK;
}

/* The steps of feature list key in se (NULL when absent). */
static const mf_example *list_of(const mf_sequence_example *se, const char *key) {
  return mf_sequence_example_list(se, mf_sequence_example_find_list(se, key));
}

/* Step j of feature list key (steps) of example e, checked for dtype t: its
 * number of values; -1 with the status set when its kind differs. */
static int64_t step_count(mf_kernel_ctx *ctx, const mf_example *steps, int j, const char *key, mf_dtype t,
                          int64_t e) {
  mf_feature_kind kind = mf_example_kind(steps, j);
  if (kind == MF_FEATURE_NONE) return 0;
  if (kind != kind_of(t)) {
    MF_INVALID(ctx->status, "%s: Name: <unknown>, Feature list: %s, Index: %d.  Data types don't match. Expected "
               "type: %s (example %lld)", ctx->op->name, key, j, feature_type_name(t), (long long)e);
    return -1;
  }
  return (int64_t)mf_example_count(steps, j);
}

static mf_code parse_list_sparse(mf_kernel_ctx *ctx, mf_sequence_example *const *se, int64_t batch, const char *key,
                                 mf_dtype t, int first, int stride) {
  int64_t total = 0, widest = 0, longest = 0;
  for (int64_t e = 0; e < batch; e++) {
    const mf_example *steps = list_of(se[e], key);
    int n = steps ? mf_example_num_features(steps) : 0;
    if (n > longest) longest = n;
    for (int j = 0; j < n; j++) {
      int64_t count = step_count(ctx, steps, j, key, t, e);
      if (count < 0) return ctx->status->code;
      total += count;
      if (count > widest) widest = count;
    }
  }
  int batch_rank = ctx->inputs[0]->rank, width = 2 + batch_rank;
  mf_strings_builder b;
  mf_tensor *values, *shape, *indices = alloc_sparse(ctx, first, stride, t, total, width, &values, &shape, &b);
  if (!indices) return ctx->status->code;
  int64_t at = 0;
  for (int64_t e = 0; e < batch; e++) {
    const mf_example *steps = list_of(se[e], key);
    for (int j = 0; steps && j < mf_example_num_features(steps); j++)
      for (int64_t v = 0; v < step_count(ctx, steps, j, key, t, e); v++, at++) {
        int64_t *ix = (int64_t *)indices->data + at * width;
        if (batch_rank) ix[0] = e;
        ix[batch_rank] = j;
        ix[batch_rank + 1] = v;
        put_value(steps, j, (size_t)v, t, values, at, &b);
      }
  }
  const int64_t dims[3] = {batch, longest, widest};
  return finish_sparse(ctx, first + stride, t, &b, total, shape, dims + 1 - batch_rank);
}

static mf_code parse_list_dense(mf_kernel_ctx *ctx, mf_sequence_example *const *se, int64_t batch, const char *key,
                                mf_dtype t, const mf_shape *shape, bool allow_missing, int out_index,
                                int lengths_index) {
  int64_t per = mf_shape_num_elements(shape->rank, shape->dims);
  const mf_tensor *ser = ctx->inputs[0];
  mf_tensor *lengths = mf_kernel_alloc_output(ctx, lengths_index, MF_INT64, ser->rank, ser->dims);
  if (!lengths) return ctx->status->code;
  int64_t longest = 0, *length = lengths->data;
  for (int64_t e = 0; e < batch; e++) {
    const mf_example *steps = list_of(se[e], key);
    if (!steps && !allow_missing)
      return MF_INVALID(ctx->status, "%s: Name: <unknown>, Feature list '%s' is required but could not be found.  "
                        "Did you mean to include it in feature_list_dense_missing_assumed_empty or "
                        "feature_list_dense_defaults? (example %lld)", ctx->op->name, key, (long long)e);
    length[e] = steps ? mf_example_num_features(steps) : 0;
    if (length[e] > longest) longest = length[e];
    for (int j = 0; j < length[e]; j++) {
      int64_t count = step_count(ctx, steps, j, key, t, e);
      if (count < 0) return ctx->status->code;
      if (count != per) {
        char buf[128];
        return MF_INVALID(ctx->status, "%s: Name: <unknown>, Key: %s, Index: %d.  Number of values != expected.  "
                          "values size: %lld but output shape: %s (example %lld)", ctx->op->name, key, j,
                          (long long)count, mf_shape_str(shape, buf, sizeof buf), (long long)e);
      }
    }
  }
  mf_shape out_shape = *shape;  /* [batch,] steps, step's shape */
  int lead = ser->rank + 1;
  memmove(out_shape.dims + lead, out_shape.dims, (size_t)out_shape.rank * sizeof *out_shape.dims);
  if (ser->rank) out_shape.dims[0] = batch;
  out_shape.dims[lead - 1] = longest;
  out_shape.rank += lead;
  mf_tensor *out = NULL;
  if (t != MF_STRING) {
    if (!(out = mf_kernel_alloc_output(ctx, out_index, t, out_shape.rank, out_shape.dims))) return ctx->status->code;
    memset(out->data, 0, (size_t)out->size * mf_dtype_size(t));
  }
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  for (int64_t e = 0; e < batch; e++) {
    const mf_example *steps = list_of(se[e], key);
    for (int64_t j = 0; j < longest; j++)
      for (int64_t v = 0; v < per; v++) {
        if (j < length[e]) put_value(steps, (int)j, (size_t)v, t, out, (e * longest + j) * per + v, &b);
        else if (t == MF_STRING) mf_strings_add(&b, "", 0);
      }
  }
  if (t != MF_STRING) {
    mf_strings_builder_free(&b);
    return MF_OK;
  }
  return finish_strings(ctx, out_index, &b, out_shape.rank, out_shape.dims);
}

static void *parse_sequence_example(const void *p, size_t n, mf_status *s) {
  return mf_sequence_example_parse(p, n, s);
}
static void release_sequence_example(void *se) { mf_sequence_example_free(se); }

static mf_code parse_sequence_example_kernel(mf_kernel_ctx *ctx) {
  sequence_spec p;
  if (sequence_spec_of(ctx->attrs, ctx->num_inputs, ctx->op->name, &p, ctx->status)) return ctx->status->code;
  int64_t batch = ctx->inputs[0]->size;
  mf_sequence_example **se = (mf_sequence_example **)parse_batch(ctx, parse_sequence_example,
                                                                 release_sequence_example, 2);
  mf_example **context = se ? (mf_example **)(se + batch) : NULL;  /* the second slots */
  const parse_spec *c = &p.context;
  int ls = list_sparse_first(&p), ld = list_dense_first(&p);
  char name[256];
  for (int64_t e = 0; context && e < batch; e++) context[e] = mf_sequence_example_context(se[e]);
  for (int k = 0; context && mf_ok(ctx->status) && k < c->num_sparse; k++)
    parse_sparse(ctx, context, batch, key_name(mf_strings_of(ctx->inputs[1]) + k, name),
                 (mf_dtype)c->sparse_types[k], k, c->num_sparse);
  for (int k = 0; context && mf_ok(ctx->status) && k < c->num_dense; k++)
    parse_dense(ctx, context, batch, key_name(mf_strings_of(ctx->inputs[2]) + k, name),
                ctx->op->out_dtypes[3 * c->num_sparse + k], ctx->inputs[5 + k], &c->dense_shapes[k],
                3 * c->num_sparse + k);
  for (int k = 0; context && mf_ok(ctx->status) && k < p.num_list_sparse; k++)
    parse_list_sparse(ctx, se, batch, key_name(mf_strings_of(ctx->inputs[3]) + k, name),
                      (mf_dtype)p.list_sparse_types[k], ls + k, p.num_list_sparse);
  for (int k = 0; context && mf_ok(ctx->status) && k < p.num_list_dense; k++)
    parse_list_dense(ctx, se, batch, key_name(mf_strings_of(ctx->inputs[4]) + k, name),
                     (mf_dtype)p.list_dense_types[k], &p.list_dense_shapes[k], p.allow_missing[k] != 0, ld + k,
                     ld + p.num_list_dense + k);
  for (int64_t e = 0; se && e < batch; e++) mf_sequence_example_free(se[e]);
  return ctx->status->code;
}

#define PARSING_OP MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS
static const mf_op_def defs[] = {
    {.name = "DecodeRaw", .num_inputs = 1, .num_outputs = 1, .flags = PARSING_OP | MF_OP_DYNAMIC_OUTPUTS,
     .infer = decode_raw_infer, .kernel = {[MF_CPU] = decode_raw_kernel}},
    {.name = "DecodeCSV", .num_inputs = 2, .num_outputs = -1, .flags = PARSING_OP | MF_OP_VARIADIC_INPUTS,
     .infer = csv_infer, .kernel = {[MF_CPU] = csv_kernel}},
    {.name = "ParseExample", .num_inputs = 3, .num_outputs = -1,
     .flags = PARSING_OP | MF_OP_VARIADIC_INPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = parse_example_infer, .kernel = {[MF_CPU] = parse_example_kernel}},
    {.name = "ParseSequenceExample", .num_inputs = 5, .num_outputs = -1,
     .flags = PARSING_OP | MF_OP_VARIADIC_INPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = parse_sequence_example_infer, .kernel = {[MF_CPU] = parse_sequence_example_kernel}},
};
MF_OP_TABLE(mf_ops_parsing, defs);
