/* summary.c — the summary ops: ScalarSummary, HistogramSummary and
 * MergeSummary, each making a serialized Summary (a scalar string) through
 * moonflow.h's mf_summary_* (io/summary.c). Not differentiable. */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/tstring.h"
#include "core/shape.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "kernels/helpers.h"
#include "exec/kernel_api.h"
#include "core/memory.h"

#include <stdio.h>

#define STRING_BIT (1u << MF_STRING)
#define REAL_TYPES MF_DTYPE_MASK(MF_FOR_NUMERIC_TYPES)

/* Output 0 becomes the scalar string of n bytes at bytes (freed here), made
 * by an mf_summary_* call that returned `made`. */
static mf_code set_summary(mf_kernel_ctx *ctx, mf_code made, char *bytes, size_t n) {
  if (made) {
    mf_status_append(ctx->status, " (%s)", ctx->op->name);
    return made;
  }
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  mf_strings_add(&b, bytes, n);
  mf_free_bytes(bytes);
  mf_tensor *t = mf_strings_finish(&b, 0, NULL, ctx->status);
  if (!t) return ctx->status->code;
  mf_tensor_release(ctx->outputs[0]);
  ctx->outputs[0] = t;
  return MF_OK;
}

static mf_code scalar_out(mf_infer_ctx *ic) {
  ic->out_dtypes[0] = MF_STRING;
  ic->out_shapes[0] = mf_shape_make(0, NULL);
  return MF_OK;
}

/* A kernel has one scratch buffer: the arrays a summary call takes share
 * it, n entries each (pointers, lengths or values, all 8 bytes). */
typedef union scratch_entry { const char *bytes; size_t length; double value; } scratch_entry;
static scratch_entry *scratch_arrays(mf_kernel_ctx *ctx, int64_t n, int arrays) {
  return mf_kernel_scratch(ctx, (size_t)(n ? n : 1) * (size_t)arrays * sizeof(scratch_entry));
}

/* The values of t (a real dtype) as doubles, into v. */
static void load_values(const mf_tensor *t, double *v) {
  for (int64_t i = 0; i < t->size; i++) v[i] = mf_load_double(t->data, t->dtype, i);
}

/* ---------- ScalarSummary: tags (string), values (real) of one shape ---------- */
static mf_code scalar_summary_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "tags has", STRING_BIT) || mf_check_dtype(ic, 1, "values has", REAL_TYPES))
    return ic->status->code;
  const mf_shape *t = &ic->in_shapes[0], *v = &ic->in_shapes[1];
  mf_shape merged;
  if (t->rank >= 0 && v->rank >= 0 && !mf_merge_shapes(t, v, &merged)) {
    char a[128], b[128];
    return MF_INVALID(ic->status, "%s: tags and values not the same shape: %s != %s", ic->op_name,
                      mf_shape_str(t, a, sizeof a), mf_shape_str(v, b, sizeof b));
  }
  return scalar_out(ic);
}

static mf_code scalar_summary_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *tags = ctx->inputs[0], *values = ctx->inputs[1];
  bool same = tags->rank == values->rank;
  for (int i = 0; same && i < tags->rank; i++) same = tags->dims[i] == values->dims[i];
  if (!same)
    return MF_INVALID(ctx->status, "%s: tags and values not the same shape: %d-d tags of %lld != %d-d values of %lld",
                      ctx->op->name, tags->rank, (long long)tags->size, values->rank, (long long)values->size);
  int64_t n = tags->size;
  scratch_entry *scratch = scratch_arrays(ctx, n, 3);
  if (!scratch) return ctx->status->code;
  const char **t = (const char **)scratch;
  size_t *lengths = (size_t *)(scratch + n);
  double *v = (double *)(scratch + 2 * n);
  load_values(values, v);
  for (int64_t i = 0; i < n; i++) {
    t[i] = mf_tstring_bytes(mf_strings_of(tags) + i);
    lengths[i] = (size_t)mf_strings_of(tags)[i].length;
  }
  char *out;
  size_t out_n;
  mf_code made = mf_summary_scalars(n, t, lengths, v, &out, &out_n, ctx->status);
  return set_summary(ctx, made, out, out_n);
}

/* ---------- HistogramSummary: tag (scalar string), values (real, any shape) ---------- */
static mf_code histogram_summary_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "tag has", STRING_BIT) || mf_check_dtype(ic, 1, "values has", REAL_TYPES))
    return ic->status->code;
  if (ic->in_shapes[0].rank > 0) {
    char a[128];
    return MF_INVALID(ic->status, "%s: tag must be a scalar, got shape %s", ic->op_name,
                      mf_shape_str(&ic->in_shapes[0], a, sizeof a));
  }
  return scalar_out(ic);
}

static mf_code histogram_summary_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *tag = ctx->inputs[0], *values = ctx->inputs[1];
  if (tag->size != 1 || tag->rank != 0)
    return MF_INVALID(ctx->status, "%s: tag must be a scalar, got a %d-d tensor", ctx->op->name, tag->rank);
  double *v = (double *)scratch_arrays(ctx, values->size, 1);
  if (!v) return ctx->status->code;
  load_values(values, v);
  char *out;
  size_t out_n;
  const mf_tstring *t = mf_strings_of(tag);
  mf_code made =
      mf_summary_histogram(mf_tstring_bytes(t), (size_t)t->length, v, (size_t)values->size, &out, &out_n, ctx->status);
  return set_summary(ctx, made, out, out_n);
}

/* ---------- MergeSummary: N string tensors of serialized Summaries ---------- */
static mf_code merge_summary_infer(mf_infer_ctx *ic) {
  for (int i = 0; i < ic->num_inputs; i++) {
    char what[48];
    snprintf(what, sizeof what, "input %d has", i);
    if (mf_check_dtype(ic, i, what, STRING_BIT)) return ic->status->code;
  }
  return scalar_out(ic);
}

static mf_code merge_summary_kernel(mf_kernel_ctx *ctx) {
  int64_t n = 0;
  for (int i = 0; i < ctx->num_inputs; i++) n += ctx->inputs[i]->size;
  scratch_entry *scratch = scratch_arrays(ctx, n, 2);
  if (!scratch) return ctx->status->code;
  const char **parts = (const char **)scratch;
  size_t *lengths = (size_t *)(scratch + n);
  int64_t k = 0;
  for (int i = 0; i < ctx->num_inputs; i++)
    for (int64_t j = 0; j < ctx->inputs[i]->size; j++, k++) {
      const mf_tstring *e = mf_strings_of(ctx->inputs[i]) + j;
      parts[k] = mf_tstring_bytes(e);
      lengths[k] = (size_t)e->length;
    }
  char *out;
  size_t out_n;
  mf_code made = mf_summary_merge(n, parts, lengths, &out, &out_n, ctx->status);
  return set_summary(ctx, made, out, out_n);
}

#define SUMMARY_OP MF_OP_SETS_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS
static const mf_op_def defs[] = {
    {.name = "ScalarSummary", .num_inputs = 2, .num_outputs = 1, .flags = SUMMARY_OP,
     .infer = scalar_summary_infer, .kernel = {[MF_CPU] = scalar_summary_kernel}},
    {.name = "HistogramSummary", .num_inputs = 2, .num_outputs = 1, .flags = SUMMARY_OP,
     .infer = histogram_summary_infer, .kernel = {[MF_CPU] = histogram_summary_kernel}},
    {.name = "MergeSummary", .num_inputs = 1, .num_outputs = 1, .flags = SUMMARY_OP | MF_OP_VARIADIC_INPUTS,
     .infer = merge_summary_infer, .kernel = {[MF_CPU] = merge_summary_kernel}},
};
MF_OP_TABLE(mf_ops_summary, defs);
