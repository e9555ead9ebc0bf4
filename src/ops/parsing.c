/* parsing.c — values out of strings: DecodeRaw (bytes as numbers) and
 * DecodeCSV (records as columns). Not differentiable. */
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
    return MF_INVALID(ctx->status, "%s: Input to DecodeRaw has length %lld that is not a multiple of %zu, the size of %s",
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
        bool missing = f.length == 0 || (na_len && (size_t)f.length == na_len && memcmp(f.start, na_value, na_len) == 0);
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

#define PARSING_OP MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS
static const mf_op_def defs[] = {
    {.name = "DecodeRaw", .num_inputs = 1, .num_outputs = 1, .flags = PARSING_OP | MF_OP_DYNAMIC_OUTPUTS,
     .infer = decode_raw_infer, .kernel = {[MF_CPU] = decode_raw_kernel}},
    {.name = "DecodeCSV", .num_inputs = 2, .num_outputs = -1, .flags = PARSING_OP | MF_OP_VARIADIC_INPUTS,
     .infer = csv_infer, .kernel = {[MF_CPU] = csv_kernel}},
};
MF_OP_TABLE(mf_ops_parsing, defs);
