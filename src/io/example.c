/* example.c — tf.train.Example messages through protobuf-c (the code that
 * src/proto/ holds, generated from TensorFlow's example.proto and
 * feature.proto). An mf_example keeps its features as plain arrays in the
 * order they were set or parsed; the protobuf structures exist only while
 * packing or unpacking. */
#include "io/example.h"
#include "core/memory.h"
#include "core/status.h"
#include "proto/example.pb-c.h"

#include <string.h>

typedef struct feature {
  char *key;
  mf_feature_kind kind;
  size_t n;
  float *floats;
  int64_t *int64s;
  ProtobufCBinaryData *bytes;  /* each .data owned */
} feature;

struct mf_example {
  feature *features;
  int count, cap;
};

mf_example *mf_example_new(void) { return mf_calloc(1, sizeof(mf_example)); }

static void clear_feature(feature *f) {
  for (size_t j = 0; f->bytes && j < f->n; j++) mf_free(f->bytes[j].data);
  mf_free(f->bytes);
  mf_free(f->floats);
  mf_free(f->int64s);
  f->bytes = NULL;
  f->floats = NULL;
  f->int64s = NULL;
  f->n = 0;
}

void mf_example_free(mf_example *e) {
  if (!e) return;
  for (int i = 0; i < e->count; i++) {
    clear_feature(&e->features[i]);
    mf_free(e->features[i].key);
  }
  mf_free(e->features);
  mf_free(e);
}

/* The feature of key, emptied, made when e has none; NULL when out of memory. */
static feature *slot(mf_example *e, const char *key) {
  for (int i = 0; i < e->count; i++)
    if (strcmp(e->features[i].key, key) == 0) {
      clear_feature(&e->features[i]);
      return &e->features[i];
    }
  if (e->count == e->cap) {
    int cap = e->cap ? 2 * e->cap : 8;
    feature *f = mf_realloc(e->features, (size_t)cap * sizeof *f);
    if (!f) return NULL;
    e->features = f;
    e->cap = cap;
  }
  feature *f = &e->features[e->count];
  memset(f, 0, sizeof *f);
  if (!(f->key = mf_strdup(key))) return NULL;
  e->count++;
  return f;
}

static mf_code oom(mf_status *s) {
  return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory building an Example");
}

/* A copy of n items of `size` bytes (NULL for none; *ok false when out of memory). */
static void *copy_of(const void *v, size_t n, size_t size, bool *ok) {
  if (n == 0) return NULL;
  void *p = n <= SIZE_MAX / size ? mf_malloc(n * size) : NULL;
  if (!p) *ok = false;
  else memcpy(p, v, n * size);
  return p;
}

mf_code mf_example_set_floats(mf_example *e, const char *key, const float *v, size_t n, mf_status *s) {
  feature *f = slot(e, key);
  bool ok = f != NULL;
  if (ok) f->floats = copy_of(v, n, sizeof *v, &ok);
  if (!ok) return oom(s);
  f->kind = MF_FEATURE_FLOATS;
  f->n = n;
  return MF_OK;
}

mf_code mf_example_set_int64s(mf_example *e, const char *key, const int64_t *v, size_t n, mf_status *s) {
  feature *f = slot(e, key);
  bool ok = f != NULL;
  if (ok) f->int64s = copy_of(v, n, sizeof *v, &ok);
  if (!ok) return oom(s);
  f->kind = MF_FEATURE_INT64S;
  f->n = n;
  return MF_OK;
}

mf_code mf_example_set_bytes(mf_example *e, const char *key, const char *const *v, const size_t *lengths, size_t n,
                             mf_status *s) {
  feature *f = slot(e, key);
  if (!f) return oom(s);
  f->kind = MF_FEATURE_BYTES;
  if (n && !(f->bytes = mf_calloc(n, sizeof *f->bytes))) return oom(s);
  for (size_t j = 0; j < n; j++) {
    bool ok = true;
    f->bytes[j].data = copy_of(v[j], lengths[j], 1, &ok);
    f->bytes[j].len = lengths[j];
    f->n = j + 1;
    if (!ok) return oom(s);
  }
  return MF_OK;
}

int mf_example_num_features(const mf_example *e) { return e->count; }
const char *mf_example_key(const mf_example *e, int i) { return i >= 0 && i < e->count ? e->features[i].key : NULL; }
int mf_example_find(const mf_example *e, const char *key) {
  for (int i = 0; i < e->count; i++)
    if (strcmp(e->features[i].key, key) == 0) return i;
  return -1;
}
mf_feature_kind mf_example_kind(const mf_example *e, int i) { return e->features[i].kind; }
size_t mf_example_count(const mf_example *e, int i) { return e->features[i].n; }
const float *mf_example_floats(const mf_example *e, int i) { return e->features[i].floats; }
const int64_t *mf_example_int64s(const mf_example *e, int i) { return e->features[i].int64s; }
const char *mf_example_bytes(const mf_example *e, int i, size_t j, size_t *length) {
  *length = e->features[i].bytes[j].len;
  return (const char *)e->features[i].bytes[j].data;
}

/* ---------- packing: protobuf structures pointing into e's arrays ---------- */

mf_code mf_example_serialize(const mf_example *e, char **out, size_t *n, mf_status *s) {
  int count = e->count;
  Tensorflow__Features__FeatureEntry *entries = mf_calloc((size_t)(count ? count : 1), sizeof *entries);
  Tensorflow__Features__FeatureEntry **entry_ptrs = mf_calloc((size_t)(count ? count : 1), sizeof *entry_ptrs);
  Tensorflow__Feature *features = mf_calloc((size_t)(count ? count : 1), sizeof *features);
  /* Each feature's list: one of the three kinds. */
  Tensorflow__FloatList *floats = mf_calloc((size_t)(count ? count : 1), sizeof *floats);
  Tensorflow__Int64List *ints = mf_calloc((size_t)(count ? count : 1), sizeof *ints);
  Tensorflow__BytesList *bytes = mf_calloc((size_t)(count ? count : 1), sizeof *bytes);
  mf_code code = MF_OK;
  *out = NULL;
  if (!entries || !entry_ptrs || !features || !floats || !ints || !bytes) {
    code = oom(s);
    goto done;
  }
  for (int i = 0; i < count; i++) {
    const feature *f = &e->features[i];
    tensorflow__feature__init(&features[i]);
    switch (f->kind) {
      case MF_FEATURE_FLOATS:
        tensorflow__float_list__init(&floats[i]);
        floats[i].n_value = f->n;
        floats[i].value = f->floats;
        features[i].kind_case = TENSORFLOW__FEATURE__KIND_FLOAT_LIST;
        features[i].float_list = &floats[i];
        break;
      case MF_FEATURE_INT64S:
        tensorflow__int64_list__init(&ints[i]);
        ints[i].n_value = f->n;
        ints[i].value = f->int64s;
        features[i].kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
        features[i].int64_list = &ints[i];
        break;
      case MF_FEATURE_BYTES:
        tensorflow__bytes_list__init(&bytes[i]);
        bytes[i].n_value = f->n;
        bytes[i].value = f->bytes;
        features[i].kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
        features[i].bytes_list = &bytes[i];
        break;
      case MF_FEATURE_NONE: break;
    }
    tensorflow__features__feature_entry__init(&entries[i]);
    entries[i].key = f->key;
    entries[i].value = &features[i];
    entry_ptrs[i] = &entries[i];
  }
  Tensorflow__Features feats;
  tensorflow__features__init(&feats);
  feats.n_feature = (size_t)count;
  feats.feature = entry_ptrs;
  Tensorflow__Example ex;
  tensorflow__example__init(&ex);
  ex.features = &feats;
  *n = tensorflow__example__get_packed_size(&ex);
  if (!(*out = mf_malloc(*n ? *n : 1))) {
    code = oom(s);
    goto done;
  }
  tensorflow__example__pack(&ex, (uint8_t *)*out);
done:
  mf_free(entries);
  mf_free(entry_ptrs);
  mf_free(features);
  mf_free(floats);
  mf_free(ints);
  mf_free(bytes);
  return code;
}

/* ---------- unpacking ---------- */

/* protobuf-c allocates through our allocator hook. */
static void *pb_alloc(void *ud, size_t n) { (void)ud; return mf_malloc(n); }
static void pb_free(void *ud, void *p) { (void)ud; mf_free(p); }
static ProtobufCAllocator allocator = {.alloc = pb_alloc, .free = pb_free};

mf_example *mf_example_parse(const void *data, size_t n, mf_status *s) {
  Tensorflow__Example *msg = tensorflow__example__unpack(&allocator, n, data);
  if (!msg) {
    char shown[41];  /* the first bytes, unprintable ones as '?' */
    size_t k = n < 40 ? n : 40;
    for (size_t i = 0; i < k; i++) {
      unsigned char c = ((const unsigned char *)data)[i];
      shown[i] = c >= 32 && c < 127 ? (char)c : '?';
    }
    shown[k] = 0;
    mf_status_set(s, MF_INVALID_ARGUMENT, "Could not parse example input, value: '%s'%s", shown, n > 40 ? "..." : "");
    return NULL;
  }
  mf_example *e = mf_example_new();
  bool ok = e != NULL;
  size_t count = msg->features ? msg->features->n_feature : 0;
  for (size_t i = 0; ok && i < count; i++) {
    const Tensorflow__Features__FeatureEntry *entry = msg->features->feature[i];
    const Tensorflow__Feature *f = entry->value;
    const char *key = entry->key ? entry->key : "";
    mf_code code = MF_OK;
    if (!f || f->kind_case == TENSORFLOW__FEATURE__KIND__NOT_SET) {
      feature *empty = slot(e, key);
      ok = empty != NULL;
      continue;
    }
    switch (f->kind_case) {
      case TENSORFLOW__FEATURE__KIND_FLOAT_LIST:
        code = mf_example_set_floats(e, key, f->float_list->value, f->float_list->n_value, s);
        break;
      case TENSORFLOW__FEATURE__KIND_INT64_LIST:
        code = mf_example_set_int64s(e, key, f->int64_list->value, f->int64_list->n_value, s);
        break;
      case TENSORFLOW__FEATURE__KIND_BYTES_LIST: {
        const Tensorflow__BytesList *b = f->bytes_list;
        feature *slot_f = slot(e, key);
        ok = slot_f != NULL;
        if (!ok) break;
        slot_f->kind = MF_FEATURE_BYTES;
        /* Take protobuf-c's copies of the bytes over: they came from our allocator. */
        slot_f->bytes = b->value;
        slot_f->n = b->n_value;
        ((Tensorflow__BytesList *)b)->value = NULL;
        ((Tensorflow__BytesList *)b)->n_value = 0;
        break;
      }
      default: break;
    }
    ok = ok && code == MF_OK;
  }
  tensorflow__example__free_unpacked(msg, &allocator);
  if (!ok) {
    mf_example_free(e);
    if (mf_ok(s)) oom(s);
    return NULL;
  }
  return e;
}

void mf_free_bytes(char *p) { mf_free(p); }
