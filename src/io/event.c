/* event.c — Event messages read back (tf.train.summary_iterator): an
 * mf_event is the protobuf-c unpacked Event, read through accessors. */
#include "core/memory.h"
#include "core/status.h"
#include "proto/event.pb-c.h"

struct mf_event {
  Tensorflow__Event *ev;
};

mf_event *mf_event_parse(const void *data, size_t n, mf_status *s) {
  mf_status_clear(s);
  mf_event *e = mf_calloc(1, sizeof *e);
  if (!e) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory parsing an event");
    return NULL;
  }
  if (!(e->ev = tensorflow__event__unpack(NULL, n, data))) {
    mf_free(e);
    mf_status_set(s, MF_DATA_LOSS, "a record of %zu bytes is no Event", n);
    return NULL;
  }
  return e;
}

void mf_event_free(mf_event *e) {
  if (!e) return;
  tensorflow__event__free_unpacked(e->ev, NULL);
  mf_free(e);
}

double mf_event_wall_time(const mf_event *e) { return e->ev->wall_time; }
int64_t mf_event_step(const mf_event *e) { return e->ev->step; }

const char *mf_event_file_version(const mf_event *e) {
  return e->ev->what_case == TENSORFLOW__EVENT__WHAT_FILE_VERSION ? e->ev->file_version : NULL;
}

const char *mf_event_graph_def(const mf_event *e, size_t *n) {
  if (e->ev->what_case != TENSORFLOW__EVENT__WHAT_GRAPH_DEF) return NULL;
  *n = e->ev->graph_def.len;
  return (const char *)e->ev->graph_def.data;
}

bool mf_event_has_summary(const mf_event *e) { return e->ev->what_case == TENSORFLOW__EVENT__WHAT_SUMMARY; }

int mf_event_num_values(const mf_event *e) {
  return mf_event_has_summary(e) ? (int)e->ev->summary->n_value : 0;
}

static const Tensorflow__Summary__Value *value(const mf_event *e, int i) { return e->ev->summary->value[i]; }

const char *mf_event_value_tag(const mf_event *e, int i) { return value(e, i)->tag; }

mf_summary_kind mf_event_value_kind(const mf_event *e, int i) {
  switch (value(e, i)->value_case) {
    case TENSORFLOW__SUMMARY__VALUE__VALUE_SIMPLE_VALUE: return MF_SUMMARY_SCALAR;
    case TENSORFLOW__SUMMARY__VALUE__VALUE_HISTO: return MF_SUMMARY_HISTOGRAM;
    case TENSORFLOW__SUMMARY__VALUE__VALUE_IMAGE: return MF_SUMMARY_IMAGE;
    case TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR: return MF_SUMMARY_TENSOR;
    default: return MF_SUMMARY_OTHER;
  }
}

double mf_event_value_scalar(const mf_event *e, int i) { return value(e, i)->simple_value; }

void mf_event_value_histogram(const mf_event *e, int i, mf_histogram *h) {
  const Tensorflow__HistogramProto *p = value(e, i)->histo;
  *h = (mf_histogram){.min = p->min, .max = p->max, .num = p->num, .sum = p->sum, .sum_squares = p->sum_squares,
                      .num_buckets = p->n_bucket < p->n_bucket_limit ? p->n_bucket : p->n_bucket_limit,
                      .bucket_limit = p->bucket_limit, .bucket = p->bucket};
}

const char *mf_event_value_image(const mf_event *e, int i, int *height, int *width, int *colorspace, size_t *n) {
  const Tensorflow__Summary__Image *im = value(e, i)->image;
  *height = im->height;
  *width = im->width;
  *colorspace = im->colorspace;
  *n = im->encoded_image_string.len;
  return (const char *)im->encoded_image_string.data;
}

const char *mf_event_value_plugin(const mf_event *e, int i) {
  const Tensorflow__SummaryMetadata *m = value(e, i)->metadata;
  return m && m->plugin_data ? m->plugin_data->plugin_name : NULL;
}

int mf_event_value_tensor_shape(const mf_event *e, int i, int64_t *dims) {
  const Tensorflow__TensorShapeProto *shape = value(e, i)->tensor->tensor_shape;
  int rank = shape ? (int)shape->n_dim : 0;
  for (int d = 0; d < rank && d < MF_MAX_RANK; d++) dims[d] = shape->dim[d]->size;
  return rank;
}

size_t mf_event_value_tensor_num_strings(const mf_event *e, int i) { return value(e, i)->tensor->n_string_val; }

const char *mf_event_value_tensor_string(const mf_event *e, int i, size_t j, size_t *n) {
  const ProtobufCBinaryData *b = &value(e, i)->tensor->string_val[j];
  *n = b->len;
  return (const char *)b->data;
}
