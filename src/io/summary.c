/* summary.c — Summary messages (proto/summary.proto) through protobuf-c, as
 * the summary ops make them: scalars, images, string tensors for plugins,
 * histograms with TensorFlow's bucket scheme
 * (tensorflow/core/lib/histogram/histogram.cc) and the merge of several
 * Summaries. */
#include "core/memory.h"
#include "core/status.h"
#include "proto/summary.pb-c.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Packs sum into *out (new, mf_free_bytes) and *n. */
static mf_code pack_summary(const Tensorflow__Summary *sum, char **out, size_t *n, mf_status *s) {
  *n = tensorflow__summary__get_packed_size(sum);
  *out = mf_malloc(*n ? *n : 1);
  if (!*out) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory packing a Summary of %zu bytes", *n);
  tensorflow__summary__pack(sum, (uint8_t *)*out);
  return MF_OK;
}

/* Packs a Summary of the one value v. */
static mf_code pack_one(Tensorflow__Summary__Value *v, char **out, size_t *n, mf_status *s) {
  Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
  sum.n_value = 1;
  sum.value = &v;
  return pack_summary(&sum, out, n, s);
}

/* A NUL-terminated copy of a tag (protobuf-c's strings end at a NUL, so a
 * tag holding one is refused). */
static char *tag_copy(const char *tag, size_t length, mf_status *s) {
  if (memchr(tag, 0, length)) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "a summary tag must not contain a NUL byte");
    return NULL;
  }
  char *t = mf_malloc(length + 1);
  if (!t) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory copying a summary tag");
    return NULL;
  }
  memcpy(t, tag, length);
  t[length] = 0;
  return t;
}

/* The n Values of a Summary, each with its tag (set_value fills the rest),
 * packed into *out. */
typedef void set_value_fn(Tensorflow__Summary__Value *v, int64_t i, const void *ctx);
static mf_code pack_values(int64_t n, const char *const *tags, const size_t *tag_lengths, set_value_fn *set_value,
                           const void *ctx, char **out, size_t *out_n, mf_status *s) {
  mf_status_clear(s);
  Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
  Tensorflow__Summary__Value *vals = mf_calloc((size_t)(n ? n : 1), sizeof *vals);
  Tensorflow__Summary__Value **ptrs = mf_calloc((size_t)(n ? n : 1), sizeof *ptrs);
  if (!vals || !ptrs) mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory making a Summary of %lld values",
                                    (long long)n);
  int64_t made = 0;
  for (; mf_ok(s) && made < n; made++) {
    Tensorflow__Summary__Value *v = &vals[made];
    tensorflow__summary__value__init(v);
    if (!(v->tag = tag_copy(tags[made], tag_lengths[made], s))) break;
    set_value(v, made, ctx);
    ptrs[made] = v;
  }
  if (mf_ok(s)) {
    sum.n_value = (size_t)n;
    sum.value = ptrs;
    pack_summary(&sum, out, out_n, s);
  }
  for (int64_t i = 0; vals && i < made; i++) mf_free(vals[i].tag);
  mf_free(vals);
  mf_free(ptrs);
  return s->code;
}

static void set_scalar(Tensorflow__Summary__Value *v, int64_t i, const void *values) {
  v->value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
  v->simple_value = (float)((const double *)values)[i];
}

mf_code mf_summary_scalars(int64_t n, const char *const *tags, const size_t *tag_lengths, const double *values,
                           char **out, size_t *out_n, mf_status *s) {
  return pack_values(n, tags, tag_lengths, set_scalar, values, out, out_n, s);
}

typedef struct images {
  Tensorflow__Summary__Image *protos;
  const char *const *pngs;
  const size_t *png_lengths;
} images;

static void set_image(Tensorflow__Summary__Value *v, int64_t i, const void *ctx) {
  const images *im = ctx;
  Tensorflow__Summary__Image *p = &im->protos[i];
  p->encoded_image_string = (ProtobufCBinaryData){.len = im->png_lengths[i], .data = (uint8_t *)im->pngs[i]};
  v->value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_IMAGE;
  v->image = p;
}

mf_code mf_summary_images(int64_t n, const char *const *tags, const size_t *tag_lengths, int64_t height,
                          int64_t width, int colorspace, const char *const *pngs, const size_t *png_lengths,
                          char **out, size_t *out_n, mf_status *s) {
  mf_status_clear(s);
  if (height > INT32_MAX || width > INT32_MAX)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "an image of %lld x %lld is too large for a summary",
                         (long long)height, (long long)width);
  images im = {mf_calloc((size_t)(n ? n : 1), sizeof *im.protos), pngs, png_lengths};
  if (!im.protos) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory making %lld image summaries",
                                       (long long)n);
  for (int64_t i = 0; i < n; i++) {
    tensorflow__summary__image__init(&im.protos[i]);
    im.protos[i].height = (int32_t)height;
    im.protos[i].width = (int32_t)width;
    im.protos[i].colorspace = colorspace;
  }
  pack_values(n, tags, tag_lengths, set_image, &im, out, out_n, s);
  mf_free(im.protos);
  return s->code;
}

mf_code mf_summary_plugin_metadata(const char *plugin_name, char **out, size_t *out_n, mf_status *s) {
  mf_status_clear(s);
  Tensorflow__SummaryMetadata m = TENSORFLOW__SUMMARY_METADATA__INIT;
  Tensorflow__SummaryMetadata__PluginData plugin = TENSORFLOW__SUMMARY_METADATA__PLUGIN_DATA__INIT;
  plugin.plugin_name = (char *)plugin_name;
  m.plugin_data = &plugin;
  *out_n = tensorflow__summary_metadata__get_packed_size(&m);
  if (!(*out = mf_malloc(*out_n ? *out_n : 1)))
    return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory packing a SummaryMetadata");
  tensorflow__summary_metadata__pack(&m, (uint8_t *)*out);
  return MF_OK;
}

mf_code mf_summary_strings(const char *tag, size_t tag_length, int rank, const int64_t *dims,
                           const char *const *strings, const size_t *lengths, const void *metadata,
                           size_t metadata_n, char **out, size_t *out_n, mf_status *s) {
  mf_status_clear(s);
  size_t n = 1;
  for (int d = 0; d < rank; d++) n *= (size_t)dims[d];
  Tensorflow__SummaryMetadata *meta = NULL;
  if (metadata_n && !(meta = tensorflow__summary_metadata__unpack(NULL, metadata_n, metadata)))
    return mf_status_set(s, MF_INVALID_ARGUMENT, "%zu bytes of summary metadata that are no SummaryMetadata",
                         metadata_n);
  Tensorflow__TensorShapeProto__Dim *dim = mf_calloc((size_t)(rank ? rank : 1), sizeof *dim);
  Tensorflow__TensorShapeProto__Dim **dim_ptrs = mf_calloc((size_t)(rank ? rank : 1), sizeof *dim_ptrs);
  ProtobufCBinaryData *values = mf_calloc(n ? n : 1, sizeof *values);
  char *t = NULL;
  if (!dim || !dim_ptrs || !values) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory making a summary of %zu strings", n);
    goto done;
  }
  if (!(t = tag_copy(tag, tag_length, s))) goto done;
  Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
  for (int d = 0; d < rank; d++) {
    tensorflow__tensor_shape_proto__dim__init(&dim[d]);
    dim[d].size = dims[d];
    dim_ptrs[d] = &dim[d];
  }
  shape.n_dim = (size_t)rank;
  shape.dim = dim_ptrs;
  for (size_t i = 0; i < n; i++) values[i] = (ProtobufCBinaryData){.len = lengths[i], .data = (uint8_t *)strings[i]};
  Tensorflow__TensorProto tensor = TENSORFLOW__TENSOR_PROTO__INIT;
  tensor.dtype = TENSORFLOW__DATA_TYPE__DT_STRING;
  tensor.tensor_shape = &shape;
  tensor.n_string_val = n;
  tensor.string_val = values;
  Tensorflow__Summary__Value v = TENSORFLOW__SUMMARY__VALUE__INIT;
  v.tag = t;
  v.metadata = meta;
  v.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR;
  v.tensor = &tensor;
  pack_one(&v, out, out_n, s);
done:
  if (meta) tensorflow__summary_metadata__free_unpacked(meta, NULL);
  mf_free(t);
  mf_free(dim);
  mf_free(dim_ptrs);
  mf_free(values);
  return s->code;
}

/* TensorFlow's default bucket limits: -DBL_MAX, the negatives of 1e-12
 * growing by 1.1 up to 1e20 (largest first), 0, the same positives, DBL_MAX.
 * Computed once; the bucket of a value is the first limit above it. */
enum { MAX_LIMITS = 1600 };
static double limits[MAX_LIMITS];
static size_t num_limits;

static void init_limits(void) {
  double pos[MAX_LIMITS / 2];
  size_t k = 0;
  for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) pos[k++] = v;
  pos[k++] = DBL_MAX;
  size_t j = 0;
  for (size_t i = k; i-- > 0;) limits[j++] = -pos[i];
  limits[j++] = 0.0;
  for (size_t i = 0; i < k; i++) limits[j++] = pos[i];
  num_limits = j;
}

static size_t bucket_of(double x) {
  size_t lo = 0, hi = num_limits;  /* upper_bound */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (limits[mid] <= x) lo = mid + 1; else hi = mid;
  }
  return lo < num_limits ? lo : num_limits - 1;
}

mf_code mf_summary_histogram(const char *tag, size_t tag_length, const double *values, size_t n, char **out,
                             size_t *out_n, mf_status *s) {
  mf_status_clear(s);
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_limits);
  Tensorflow__HistogramProto h = TENSORFLOW__HISTOGRAM_PROTO__INIT;
  h.min = DBL_MAX;
  h.max = -DBL_MAX;
  double *counts = mf_calloc(num_limits, sizeof *counts);
  double *out_limits = mf_malloc((num_limits + 1) * sizeof *out_limits);
  double *out_counts = mf_malloc((num_limits + 1) * sizeof *out_counts);
  char *t = NULL;
  if (!counts || !out_limits || !out_counts) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory making a histogram");
    goto done;
  }
  if (!(t = tag_copy(tag, tag_length, s))) goto done;
  for (size_t i = 0; i < n; i++) {
    double x = values[i];
    if (!isfinite(x)) {
      mf_status_set(s, MF_INVALID_ARGUMENT, "%s in summary histogram for: %s", isnan(x) ? "Nan" : "Infinity", t);
      goto done;
    }
    counts[bucket_of(x)] += 1.0;
    if (x < h.min) h.min = x;
    if (x > h.max) h.max = x;
    h.num += 1.0;
    h.sum += x;
    h.sum_squares += x * x;
  }
  /* TensorFlow's encoding: each run of empty buckets collapses into one, the
   * limit of its last; no buckets at all is one empty bucket up to DBL_MAX. */
  size_t k = 0;
  for (size_t i = 0; i < num_limits;) {
    double end = limits[i], count = counts[i];
    i++;
    while (count <= 0.0 && i < num_limits && counts[i] <= 0.0) end = limits[i++];
    out_limits[k] = end;
    out_counts[k++] = count;
  }
  h.n_bucket_limit = h.n_bucket = k;
  h.bucket_limit = out_limits;
  h.bucket = out_counts;
  Tensorflow__Summary__Value v = TENSORFLOW__SUMMARY__VALUE__INIT;
  v.tag = t;
  v.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_HISTO;
  v.histo = &h;
  pack_one(&v, out, out_n, s);
done:
  mf_free(t);
  mf_free(counts);
  mf_free(out_limits);
  mf_free(out_counts);
  return s->code;
}

mf_code mf_summary_merge(int64_t n, const char *const *summaries, const size_t *lengths, char **out, size_t *out_n,
                         mf_status *s) {
  mf_status_clear(s);
  Tensorflow__Summary **parsed = mf_calloc((size_t)(n ? n : 1), sizeof *parsed);
  size_t total = 0;
  int64_t k = 0;
  if (!parsed) mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory merging %lld summaries", (long long)n);
  for (; mf_ok(s) && k < n; k++) {
    parsed[k] = tensorflow__summary__unpack(NULL, lengths[k], (const uint8_t *)summaries[k]);
    if (!parsed[k]) {
      mf_status_set(s, MF_INVALID_ARGUMENT, "Could not parse one of the summary inputs (input %lld is no Summary)",
                    (long long)k);
      break;
    }
    total += parsed[k]->n_value;
  }
  Tensorflow__Summary__Value **all = mf_ok(s) ? mf_calloc(total ? total : 1, sizeof *all) : NULL;
  if (mf_ok(s) && !all) mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory merging %zu summary values", total);
  size_t m = 0;
  for (int64_t i = 0; mf_ok(s) && i < k; i++) {
    for (size_t j = 0; mf_ok(s) && j < parsed[i]->n_value; j++) {
      Tensorflow__Summary__Value *v = parsed[i]->value[j];
      /* TensorFlow refuses a tag twice (quadratic, as summaries are few). */
      for (size_t e = 0; e < m; e++)
        if (strcmp(all[e]->tag, v->tag) == 0) {
          mf_status_set(s, MF_INVALID_ARGUMENT, "Duplicate tag %s found in summary inputs", v->tag);
          break;
        }
      all[m++] = v;
    }
  }
  if (mf_ok(s)) {
    Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
    sum.n_value = m;
    sum.value = all;
    pack_summary(&sum, out, out_n, s);
  }
  mf_free(all);
  for (int64_t i = 0; i < k; i++)
    if (parsed[i]) tensorflow__summary__free_unpacked(parsed[i], NULL);
  mf_free(parsed);
  return s->code;
}
