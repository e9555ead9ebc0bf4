/* parsing.c — values out of strings: DecodeRaw (bytes as numbers),
 * DecodeCSV (records as columns) and ParseExample (serialized
 * tf.train.Example messages, through io/example.c). Not differentiable. */
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

static mf_code parse_spec_of(const mf_attrs *attrs, int num_inputs, const char *op_name, parse_spec *p,
                             mf_status *s) {
  int n = mf_attr_ints(attrs, "sparse_types", &p->sparse_types);
  p->num_sparse = n < 0 ? 0 : n;
  p->num_dense = num_inputs - 3;
  if (p->num_dense < 0 || p->num_dense > 64)
    return MF_INVALID(s, "%s: ParseExample takes serialized, sparse_keys, dense_keys and at most 64 dense defaults",
                      op_name);
  for (int k = 0; k < p->num_sparse; k++)
    if (p->sparse_types[k] < 0 || p->sparse_types[k] >= MF_DTYPE_SLOTS ||
        !((FEATURE_TYPES >> p->sparse_types[k]) & 1u))
      return MF_INVALID(s, "%s: sparse_types[%d] must be float32, int64 or string", op_name, k);
  const int64_t *shapes;
  int m = mf_attr_ints(attrs, "dense_shapes", &shapes), at = 0;
  for (int k = 0; k < p->num_dense; k++) {
    if (at >= m || shapes[at] < 0 || shapes[at] > MF_MAX_RANK - 1 || at + 1 + shapes[at] > m)
      return MF_INVALID(s, "%s: dense_shapes must give a rank and dims for each of %d dense keys", op_name,
                        p->num_dense);
    p->dense_shapes[k] = mf_shape_make((int)shapes[at], shapes + at + 1);
    for (int d = 0; d < p->dense_shapes[k].rank; d++)
      if (p->dense_shapes[k].dims[d] < 0)
        return MF_INVALID(s, "%s: dense shape %d must be fully defined", op_name, k);
    at += 1 + (int)shapes[at];
  }
  return MF_OK;
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
  int batch_rank = ser->rank < 0 ? -1 : ser->rank;
  for (int k = 0; k < p.num_sparse; k++) {
    const int64_t ix[2] = {-1, batch_rank < 0 ? -1 : 1 + batch_rank}, one[1] = {-1}, sh[1] = {ix[1]};
    ic->out_dtypes[k] = MF_INT64;
    ic->out_shapes[k] = mf_shape_make(2, ix);
    ic->out_dtypes[p.num_sparse + k] = (mf_dtype)p.sparse_types[k];
    ic->out_shapes[p.num_sparse + k] = mf_shape_make(1, one);
    ic->out_dtypes[2 * p.num_sparse + k] = MF_INT64;
    ic->out_shapes[2 * p.num_sparse + k] = mf_shape_make(1, sh);
  }
  for (int k = 0; k < p.num_dense; k++) {
    char what[64];
    snprintf(what, sizeof what, "dense_defaults[%d] has", k);
    if (mf_check_dtype(ic, 3 + k, what, FEATURE_TYPES)) return ic->status->code;
    mf_shape out = p.dense_shapes[k];
    if (batch_rank < 0) {
      out = mf_shape_unknown();
    } else if (batch_rank == 1) {
      memmove(out.dims + 1, out.dims, (size_t)out.rank * sizeof *out.dims);
      out.dims[0] = ser->dims[0];
      out.rank++;
    }
    ic->out_dtypes[3 * p.num_sparse + k] = ic->in_dtypes[3 + k];
    ic->out_shapes[3 * p.num_sparse + k] = out;
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

/* Feature `key` of e with dtype t: its index, -1 when absent (or empty and
 * kindless); -2 with the status set when its kind differs. */
static int find_feature(mf_kernel_ctx *ctx, const mf_example *e, const mf_tstring *key, mf_dtype t, int64_t b) {
  char name[256];
  snprintf(name, sizeof name, "%.*s", (int)(key->length < 255 ? key->length : 255), mf_tstring_bytes(key));
  int i = mf_example_find(e, name);
  if (i < 0 || mf_example_kind(e, i) == MF_FEATURE_NONE) return -1;
  if (mf_example_kind(e, i) != kind_of(t)) {
    MF_INVALID(ctx->status, "%s: Name: <unknown>, Key: %s, Index: %lld.  Data types don't match. Data type: %s but "
               "expected type: %s", ctx->op->name, name, (long long)b, kind_name(mf_example_kind(e, i)),
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

static mf_code parse_dense(mf_kernel_ctx *ctx, mf_example *const *ex, int64_t batch, int k, const parse_spec *p) {
  int out_index = 3 * p->num_sparse + k;
  mf_dtype t = ctx->op->out_dtypes[out_index];
  const mf_tstring *key = mf_strings_of(ctx->inputs[2]) + k;
  const mf_tensor *dflt = ctx->inputs[3 + k];
  const mf_shape *shape = &p->dense_shapes[k];
  int64_t per = mf_shape_num_elements(shape->rank, shape->dims);
  if (dflt->size != 0 && dflt->size != per) {
    char buf[128];
    return MF_INVALID(ctx->status, "%s: the default of dense key %d has %lld values, but its shape %s holds %lld",
                      ctx->op->name, k, (long long)dflt->size, mf_shape_str(shape, buf, sizeof buf), (long long)per);
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
        MF_INVALID(ctx->status, "%s: Name: <unknown>, Feature: %.*s (data type: %s) is required but could not be "
                   "found.", ctx->op->name, (int)key->length, mf_tstring_bytes(key), feature_type_name(t));
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
      MF_INVALID(ctx->status, "%s: Name: <unknown>, Key: %.*s, Index: %lld.  Number of %s values != expected.  "
                 "Values size: %zu but output shape: %s", ctx->op->name, (int)key->length, mf_tstring_bytes(key),
                 (long long)e, feature_type_name(t), mf_example_count(ex[e], i), mf_shape_str(shape, buf, sizeof buf));
      break;
    }
    for (int64_t j = 0; j < per; j++) put_value(ex[e], i, (size_t)j, t, out, e * per + j, &b);
  }
  if (!mf_ok(ctx->status) || t != MF_STRING) {
    mf_strings_builder_free(&b);
    return ctx->status->code;
  }
  mf_tensor *strings = mf_strings_finish(&b, out_shape.rank, out_shape.dims, ctx->status);
  if (!strings) return ctx->status->code;
  mf_tensor_release(ctx->outputs[out_index]);
  ctx->outputs[out_index] = strings;
  return MF_OK;
}

static mf_code parse_sparse(mf_kernel_ctx *ctx, mf_example *const *ex, int64_t batch, int k, const parse_spec *p) {
  mf_dtype t = (mf_dtype)p->sparse_types[k];
  const mf_tstring *key = mf_strings_of(ctx->inputs[1]) + k;
  int64_t total = 0, widest = 0;
  for (int64_t e = 0; e < batch; e++) {
    int i = find_feature(ctx, ex[e], key, t, e);
    if (i == -2) return ctx->status->code;
    int64_t n = i < 0 ? 0 : (int64_t)mf_example_count(ex[e], i);
    total += n;
    if (n > widest) widest = n;
  }
  int batch_rank = ctx->inputs[0]->rank, width = 1 + batch_rank;
  const int64_t index_dims[2] = {total, width}, shape_dims[1] = {width};
  mf_tensor *indices = mf_kernel_alloc_output(ctx, k, MF_INT64, 2, index_dims);
  mf_tensor *shape = indices ? mf_kernel_alloc_output(ctx, 2 * p->num_sparse + k, MF_INT64, 1, shape_dims) : NULL;
  mf_tensor *values = NULL;
  if (shape && t != MF_STRING) values = mf_kernel_alloc_output(ctx, p->num_sparse + k, t, 1, &total);
  if (!shape || (t != MF_STRING && !values)) return ctx->status->code;
  mf_strings_builder b;
  mf_strings_builder_init(&b);
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
  int64_t *sh = shape->data;
  if (batch_rank) sh[0] = batch;
  sh[batch_rank] = widest;
  if (t != MF_STRING) {
    mf_strings_builder_free(&b);
    return MF_OK;
  }
  mf_tensor *strings = mf_strings_finish(&b, 1, &total, ctx->status);
  if (!strings) return ctx->status->code;
  mf_tensor_release(ctx->outputs[p->num_sparse + k]);
  ctx->outputs[p->num_sparse + k] = strings;
  return MF_OK;
}

static mf_code parse_example_kernel(mf_kernel_ctx *ctx) {
  parse_spec p;
  if (parse_spec_of(ctx->attrs, ctx->num_inputs, ctx->op->name, &p, ctx->status)) return ctx->status->code;
  const mf_tensor *ser = ctx->inputs[0];
  int64_t batch = ser->size;
  mf_example **ex = mf_kernel_scratch(ctx, (size_t)(batch ? batch : 1) * sizeof *ex);
  if (!ex) return ctx->status->code;
  int64_t parsed = 0;
  for (; parsed < batch; parsed++) {
    const mf_tstring *e = mf_strings_of(ser) + parsed;
    if (!(ex[parsed] = mf_example_parse(mf_tstring_bytes(e), (size_t)e->length, ctx->status))) {
      mf_status_append(ctx->status, " (%s, example %lld)", ctx->op->name, (long long)parsed);
      break;
    }
  }
  for (int k = 0; mf_ok(ctx->status) && k < p.num_sparse; k++) parse_sparse(ctx, ex, batch, k, &p);
  for (int k = 0; mf_ok(ctx->status) && k < p.num_dense; k++) parse_dense(ctx, ex, batch, k, &p);
  for (int64_t e = 0; e < parsed; e++) mf_example_free(ex[e]);
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
};
MF_OP_TABLE(mf_ops_parsing, defs);
