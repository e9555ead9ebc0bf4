/* summary.c — the summary ops: ScalarSummary, HistogramSummary,
 * ImageSummary, TensorSummaryV2 (strings, for tf.summary.text) and
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
#include "graph/attrs.h"
#include "ops/image_codec.h"

#include <math.h>

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

/* ---------- ImageSummary: tag (scalar string), tensor [batch, height, width, 1|3|4] ---------- */
#define IMAGE_TYPES (MF_DTYPE_MASK(MF_FOR_FLOAT_TYPES) | (1u << MF_UINT8))

static mf_code image_summary_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "tag has", STRING_BIT) || mf_check_dtype(ic, 1, "tensor has", IMAGE_TYPES))
    return ic->status->code;
  const mf_shape *t = &ic->in_shapes[0], *x = &ic->in_shapes[1];
  char a[128];
  if (t->rank > 0)
    return MF_INVALID(ic->status, "%s: tag must be a scalar, got shape %s", ic->op_name, mf_shape_str(t, a, sizeof a));
  int64_t depth = x->rank == 4 ? x->dims[3] : -1;
  if (x->rank >= 0 && (x->rank != 4 || (depth >= 0 && depth != 1 && depth != 3 && depth != 4)))
    return MF_INVALID(ic->status, "%s: Tensor must be 4-D with last dim 1, 3, or 4, not %s", ic->op_name,
                      mf_shape_str(x, a, sizeof a));
  if (mf_attr_int(ic->attrs, "max_images", 3) < 1)
    return MF_INVALID(ic->status, "%s: max_images must be >= 1, got %lld", ic->op_name,
                      (long long)mf_attr_int(ic->attrs, "max_images", 3));
  return scalar_out(ic);
}

/* TensorFlow's NormalizeAndAddImages, in the tensor's own precision: pixels
 * with a non-finite sample become red; the finite ones map to uint8 by
 * 255/max when none is negative, else by 127/max|v| around 128 (truncated). */
#define NORMALIZE(real)                                                                                     \
  static void normalize_##real(const real *v, int64_t pixels, int64_t depth, uint8_t *out) {               \
    static const uint8_t bad_color[4] = {255, 0, 0, 255};                                                   \
    real lo = INFINITY, hi = -INFINITY;                                                                     \
    for (int64_t i = 0; i < pixels; i++) {                                                                  \
      bool finite = true;                                                                                   \
      for (int64_t j = 0; j < depth; j++) finite = finite && isfinite(v[i * depth + j]);                    \
      for (int64_t j = 0; finite && j < depth; j++) {                                                       \
        lo = fmin(lo, v[i * depth + j]);                                                                    \
        hi = fmax(hi, v[i * depth + j]);                                                                    \
      }                                                                                                     \
    }                                                                                                       \
    real scale, offset;                                                                                     \
    if (lo < 0) {                                                                                           \
      real m = fmax(fabs(lo), fabs(hi));                                                                    \
      scale = m < (real)1e-6 ? 0 : (real)127 / m, offset = 128;                                             \
    } else {                                                                                                \
      scale = hi < (real)1e-6 ? 0 : (real)255 / hi, offset = 0;                                             \
    }                                                                                                       \
    for (int64_t i = 0; i < pixels; i++) {                                                                  \
      bool finite = true;                                                                                   \
      for (int64_t j = 0; j < depth; j++) finite = finite && isfinite(v[i * depth + j]);                    \
      for (int64_t j = 0; j < depth; j++)                                                                   \
        out[i * depth + j] = finite ? (uint8_t)(v[i * depth + j] * scale + offset) : bad_color[j];          \
    }                                                                                                       \
  }
NORMALIZE(float)
NORMALIZE(double)
#undef NORMALIZE

static mf_code image_summary_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *tag = ctx->inputs[0], *x = ctx->inputs[1];
  if (tag->rank != 0)
    return MF_INVALID(ctx->status, "%s: tag must be a scalar, got a %d-d tensor", ctx->op->name, tag->rank);
  if (x->rank != 4 || (x->dims[3] != 1 && x->dims[3] != 3 && x->dims[3] != 4))
    return MF_INVALID(ctx->status, "%s: Tensor must be 4-D with last dim 1, 3, or 4, not a %d-d tensor",
                      ctx->op->name, x->rank);
  int64_t max_images = mf_attr_int(ctx->attrs, "max_images", 3);
  int64_t n = x->dims[0] < max_images ? x->dims[0] : max_images;
  int64_t h = x->dims[1], w = x->dims[2], depth = x->dims[3], image_size = h * w * depth;
  /* Per image: its tag "<tag>/image/<i>" ("<tag>/image" for max_images 1), its length, its PNG and size. */
  scratch_entry *scratch = scratch_arrays(ctx, n, 4);
  if (!scratch) return ctx->status->code;
  const mf_tstring *t = mf_strings_of(tag);
  size_t base_length = (size_t)t->length, tag_size = base_length + 32;
  char *tags_text = mf_malloc((size_t)(n ? n : 1) * tag_size);
  uint8_t *pixels = x->dtype == MF_UINT8 ? NULL : mf_malloc((size_t)(image_size ? image_size : 1));
  mf_code made = MF_OK;
  if (!tags_text || (x->dtype != MF_UINT8 && !pixels))
    made = mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory for %lld images", ctx->op->name,
                         (long long)n);
  int64_t encoded = 0;
  for (; made == MF_OK && encoded < n; encoded++) {
    int64_t i = encoded;
    char *tag_i = tags_text + (size_t)i * tag_size;
    memcpy(tag_i, mf_tstring_bytes(t), base_length);
    int len = max_images == 1 ? snprintf(tag_i + base_length, 32, "/image")
                              : snprintf(tag_i + base_length, 32, "/image/%lld", (long long)i);
    scratch[i].bytes = tag_i;
    scratch[n + i].length = base_length + (size_t)len;
    const uint8_t *image = pixels;
    if (x->dtype == MF_UINT8) image = (const uint8_t *)x->data + i * image_size;
    else if (x->dtype == MF_FLOAT32) normalize_float((const float *)x->data + i * image_size, h * w, depth, pixels);
    else normalize_double((const double *)x->data + i * image_size, h * w, depth, pixels);
    unsigned char *png;
    made = mf_png_encode(image, h, w, depth, -1, ctx->op->name, &png, &scratch[3 * n + i].length, ctx->status);
    if (made) break;
    scratch[2 * n + i].bytes = (const char *)png;
  }
  char *out = NULL;
  size_t out_n = 0;
  if (made == MF_OK)
    made = mf_summary_images(n, (const char **)scratch, (size_t *)(scratch + n), h, w, (int)depth,
                             (const char **)(scratch + 2 * n), (size_t *)(scratch + 3 * n), &out, &out_n,
                             ctx->status);
  for (int64_t i = 0; i < encoded; i++) mf_free((char *)scratch[2 * n + i].bytes);
  mf_free(pixels);
  mf_free(tags_text);
  return set_summary(ctx, made, out, out_n);
}

/* ---------- TensorSummaryV2: tag (scalar string), tensor (strings), serialized_summary_metadata (scalar string) ---------- */
static mf_code tensor_summary_infer(mf_infer_ctx *ic) {
  if (mf_check_dtype(ic, 0, "tag has", STRING_BIT) || mf_check_dtype(ic, 1, "tensor has", STRING_BIT) ||
      mf_check_dtype(ic, 2, "serialized_summary_metadata has", STRING_BIT))
    return ic->status->code;
  static const char *const names[] = {"tag", NULL, "serialized_summary_metadata"};
  for (int i = 0; i < 3; i += 2)
    if (ic->in_shapes[i].rank > 0) {
      char a[128];
      return MF_INVALID(ic->status, "%s: %s must be a scalar, got shape %s", ic->op_name, names[i],
                        mf_shape_str(&ic->in_shapes[i], a, sizeof a));
    }
  return scalar_out(ic);
}

static mf_code tensor_summary_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *tag = ctx->inputs[0], *x = ctx->inputs[1], *meta = ctx->inputs[2];
  if (tag->rank != 0 || meta->rank != 0)
    return MF_INVALID(ctx->status, "%s: tag and serialized_summary_metadata must be scalars, got %d-d and %d-d",
                      ctx->op->name, tag->rank, meta->rank);
  int64_t n = x->size;
  scratch_entry *scratch = scratch_arrays(ctx, n, 2);
  if (!scratch) return ctx->status->code;
  for (int64_t i = 0; i < n; i++) {
    scratch[i].bytes = mf_tstring_bytes(mf_strings_of(x) + i);
    scratch[n + i].length = (size_t)mf_strings_of(x)[i].length;
  }
  const mf_tstring *t = mf_strings_of(tag), *m = mf_strings_of(meta);
  char *out;
  size_t out_n;
  mf_code made = mf_summary_strings(mf_tstring_bytes(t), (size_t)t->length, x->rank, x->dims,
                                    (const char **)scratch, (size_t *)(scratch + n), mf_tstring_bytes(m),
                                    (size_t)m->length, &out, &out_n, ctx->status);
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
    {.name = "ImageSummary", .num_inputs = 2, .num_outputs = 1, .flags = SUMMARY_OP,
     .infer = image_summary_infer, .kernel = {[MF_CPU] = image_summary_kernel}},
    {.name = "TensorSummaryV2", .num_inputs = 3, .num_outputs = 1, .flags = SUMMARY_OP,
     .infer = tensor_summary_infer, .kernel = {[MF_CPU] = tensor_summary_kernel}},
    {.name = "MergeSummary", .num_inputs = 1, .num_outputs = 1, .flags = SUMMARY_OP | MF_OP_VARIADIC_INPUTS,
     .infer = merge_summary_infer, .kernel = {[MF_CPU] = merge_summary_kernel}},
};
MF_OP_TABLE(mf_ops_summary, defs);
