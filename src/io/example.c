/* example.c — tf.train.Example messages through protobuf-c (the code that
 * src/proto/ holds, generated from TensorFlow's example.proto and
 * feature.proto). An mf_example keeps its features as plain arrays in the
 * order they were set or parsed; the protobuf structures exist only while
 * packing or unpacking. A SequenceExample is a context (an mf_example) and
 * feature lists, each an mf_example whose features are its steps. */
#include "io/example.h"
#include "core/memory.h"
#include "core/status.h"
#include "proto/example.pb-c.h"

#include <stdio.h>
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

mf_code mf_example_set_empty(mf_example *e, const char *key, mf_status *s) {
  feature *f = slot(e, key);
  if (!f) return oom(s);
  f->kind = MF_FEATURE_NONE;
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

/* e's features as protobuf structures: feature_ptrs[i] for a FeatureList's
 * steps, entry_ptrs[i] (key and feature) for a Features map. */
typedef struct {
  Tensorflow__Feature *features, **feature_ptrs;
  Tensorflow__FloatList *floats;  /* each feature's list: one of the three kinds */
  Tensorflow__Int64List *ints;
  Tensorflow__BytesList *bytes;
  Tensorflow__Features__FeatureEntry *entries, **entry_ptrs;
} packed_features;

static void packed_free(packed_features *p) {
  mf_free(p->features);
  mf_free(p->feature_ptrs);
  mf_free(p->floats);
  mf_free(p->ints);
  mf_free(p->bytes);
  mf_free(p->entries);
  mf_free(p->entry_ptrs);
}

/* False when out of memory (p then holds nothing to free). */
static bool pack_features(const mf_example *e, packed_features *p) {
  size_t n = (size_t)(e->count ? e->count : 1);
  p->features = mf_calloc(n, sizeof *p->features);
  p->feature_ptrs = mf_calloc(n, sizeof *p->feature_ptrs);
  p->floats = mf_calloc(n, sizeof *p->floats);
  p->ints = mf_calloc(n, sizeof *p->ints);
  p->bytes = mf_calloc(n, sizeof *p->bytes);
  p->entries = mf_calloc(n, sizeof *p->entries);
  p->entry_ptrs = mf_calloc(n, sizeof *p->entry_ptrs);
  if (!p->features || !p->feature_ptrs || !p->floats || !p->ints || !p->bytes || !p->entries || !p->entry_ptrs) {
    packed_free(p);
    return false;
  }
  for (int i = 0; i < e->count; i++) {
    const feature *f = &e->features[i];
    Tensorflow__Feature *pf = &p->features[i];
    tensorflow__feature__init(pf);
    switch (f->kind) {
      case MF_FEATURE_FLOATS:
        tensorflow__float_list__init(&p->floats[i]);
        p->floats[i].n_value = f->n;
        p->floats[i].value = f->floats;
        pf->kind_case = TENSORFLOW__FEATURE__KIND_FLOAT_LIST;
        pf->float_list = &p->floats[i];
        break;
      case MF_FEATURE_INT64S:
        tensorflow__int64_list__init(&p->ints[i]);
        p->ints[i].n_value = f->n;
        p->ints[i].value = f->int64s;
        pf->kind_case = TENSORFLOW__FEATURE__KIND_INT64_LIST;
        pf->int64_list = &p->ints[i];
        break;
      case MF_FEATURE_BYTES:
        tensorflow__bytes_list__init(&p->bytes[i]);
        p->bytes[i].n_value = f->n;
        p->bytes[i].value = f->bytes;
        pf->kind_case = TENSORFLOW__FEATURE__KIND_BYTES_LIST;
        pf->bytes_list = &p->bytes[i];
        break;
      case MF_FEATURE_NONE: break;
    }
    p->feature_ptrs[i] = pf;
    tensorflow__features__feature_entry__init(&p->entries[i]);
    p->entries[i].key = f->key;
    p->entries[i].value = pf;
    p->entry_ptrs[i] = &p->entries[i];
  }
  return true;
}

static void features_message(const mf_example *e, const packed_features *p, Tensorflow__Features *msg) {
  tensorflow__features__init(msg);
  msg->n_feature = (size_t)e->count;
  msg->feature = p->entry_ptrs;
}

/* The packed bytes of msg (size n) into *out, by pack. */
static mf_code pack_into(const void *msg, size_t n, size_t (*pack)(const void *, uint8_t *), char **out,
                         size_t *out_n, mf_status *s) {
  *out_n = n;
  if (!(*out = mf_malloc(n ? n : 1))) return oom(s);
  pack(msg, (uint8_t *)*out);
  return MF_OK;
}

static size_t pack_example(const void *m, uint8_t *out) { return tensorflow__example__pack(m, out); }
static size_t pack_sequence_example(const void *m, uint8_t *out) {
  return tensorflow__sequence_example__pack(m, out);
}

mf_code mf_example_serialize(const mf_example *e, char **out, size_t *n, mf_status *s) {
  packed_features p;
  *out = NULL;
  if (!pack_features(e, &p)) return oom(s);
  Tensorflow__Features feats;
  features_message(e, &p, &feats);
  Tensorflow__Example ex;
  tensorflow__example__init(&ex);
  ex.features = &feats;
  mf_code code = pack_into(&ex, tensorflow__example__get_packed_size(&ex), pack_example, out, n, s);
  packed_free(&p);
  return code;
}

/* ---------- unpacking ---------- */

/* protobuf-c allocates through our allocator hook. */
static void *pb_alloc(void *ud, size_t n) { (void)ud; return mf_malloc(n); }
static void pb_free(void *ud, void *p) { (void)ud; mf_free(p); }
static ProtobufCAllocator allocator = {.alloc = pb_alloc, .free = pb_free};

/* INVALID_ARGUMENT for bytes that are no `what`, showing the first of them. */
static void not_a_message(const void *data, size_t n, const char *what, mf_status *s) {
  char shown[41];  /* the first bytes, unprintable ones as '?' */
  size_t k = n < 40 ? n : 40;
  for (size_t i = 0; i < k; i++) {
    unsigned char c = ((const unsigned char *)data)[i];
    shown[i] = c >= 32 && c < 127 ? (char)c : '?';
  }
  shown[k] = 0;
  mf_status_set(s, MF_INVALID_ARGUMENT, "Could not parse %s input, value: '%s'%s", what, shown, n > 40 ? "..." : "");
}

/* Sets feature key of e to f's values (taking f's byte strings over: they
 * came from our allocator). False when out of memory. */
static bool add_feature(mf_example *e, const char *key, Tensorflow__Feature *f, mf_status *s) {
  switch (f ? f->kind_case : TENSORFLOW__FEATURE__KIND__NOT_SET) {
    case TENSORFLOW__FEATURE__KIND_FLOAT_LIST:
      return mf_example_set_floats(e, key, f->float_list->value, f->float_list->n_value, s) == MF_OK;
    case TENSORFLOW__FEATURE__KIND_INT64_LIST:
      return mf_example_set_int64s(e, key, f->int64_list->value, f->int64_list->n_value, s) == MF_OK;
    case TENSORFLOW__FEATURE__KIND_BYTES_LIST: {
      feature *slot_f = slot(e, key);
      if (!slot_f) return false;
      slot_f->kind = MF_FEATURE_BYTES;
      slot_f->bytes = f->bytes_list->value;
      slot_f->n = f->bytes_list->n_value;
      f->bytes_list->value = NULL;
      f->bytes_list->n_value = 0;
      return true;
    }
    default: return mf_example_set_empty(e, key, s) == MF_OK;  /* no list */
  }
}

/* Adds the features of msg (NULL: none) to e. */
static bool add_features(mf_example *e, Tensorflow__Features *msg, mf_status *s) {
  for (size_t i = 0; msg && i < msg->n_feature; i++) {
    Tensorflow__Features__FeatureEntry *entry = msg->feature[i];
    if (!add_feature(e, entry->key ? entry->key : "", entry->value, s)) return false;
  }
  return true;
}

mf_example *mf_example_parse(const void *data, size_t n, mf_status *s) {
  Tensorflow__Example *msg = tensorflow__example__unpack(&allocator, n, data);
  if (!msg) {
    not_a_message(data, n, "example", s);
    return NULL;
  }
  mf_example *e = mf_example_new();
  bool ok = e && add_features(e, msg->features, s);
  tensorflow__example__free_unpacked(msg, &allocator);
  if (!ok) {
    mf_example_free(e);
    if (mf_ok(s)) oom(s);
    return NULL;
  }
  return e;
}

/* ---------- SequenceExample: context features and feature lists ---------- */

typedef struct {
  char *key;
  mf_example *steps;
} feature_list;

struct mf_sequence_example {
  mf_example *context;
  feature_list *lists;
  int count, cap;
};

mf_sequence_example *mf_sequence_example_new(void) {
  mf_sequence_example *se = mf_calloc(1, sizeof *se);
  if (se && !(se->context = mf_example_new())) {
    mf_free(se);
    return NULL;
  }
  return se;
}

void mf_sequence_example_free(mf_sequence_example *se) {
  if (!se) return;
  mf_example_free(se->context);
  for (int i = 0; i < se->count; i++) {
    mf_free(se->lists[i].key);
    mf_example_free(se->lists[i].steps);
  }
  mf_free(se->lists);
  mf_free(se);
}

mf_example *mf_sequence_example_context(mf_sequence_example *se) { return se->context; }

mf_example *mf_sequence_example_add_list(mf_sequence_example *se, const char *key, mf_status *s) {
  mf_example *steps = mf_example_new();
  if (!steps) {
    oom(s);
    return NULL;
  }
  int i = mf_sequence_example_find_list(se, key);
  if (i >= 0) {
    mf_example_free(se->lists[i].steps);
    return se->lists[i].steps = steps;
  }
  if (se->count == se->cap) {
    int cap = se->cap ? 2 * se->cap : 8;
    feature_list *lists = mf_realloc(se->lists, (size_t)cap * sizeof *lists);
    if (!lists) goto fail;
    se->lists = lists;
    se->cap = cap;
  }
  char *copy = mf_strdup(key);
  if (!copy) goto fail;
  se->lists[se->count++] = (feature_list){copy, steps};
  return steps;
fail:
  mf_example_free(steps);
  oom(s);
  return NULL;
}

int mf_sequence_example_num_lists(const mf_sequence_example *se) { return se->count; }
const char *mf_sequence_example_list_key(const mf_sequence_example *se, int i) {
  return i >= 0 && i < se->count ? se->lists[i].key : NULL;
}
int mf_sequence_example_find_list(const mf_sequence_example *se, const char *key) {
  for (int i = 0; i < se->count; i++)
    if (strcmp(se->lists[i].key, key) == 0) return i;
  return -1;
}
const mf_example *mf_sequence_example_list(const mf_sequence_example *se, int i) {
  return i >= 0 && i < se->count ? se->lists[i].steps : NULL;
}

mf_code mf_sequence_example_serialize(const mf_sequence_example *se, char **out, size_t *n, mf_status *s) {
  int count = se->count;
  size_t slots = (size_t)(count ? count : 1);
  packed_features context, *steps = mf_calloc(slots, sizeof *steps);
  Tensorflow__FeatureList *lists = mf_calloc(slots, sizeof *lists);
  Tensorflow__FeatureLists__FeatureListEntry *entries = mf_calloc(slots, sizeof *entries);
  Tensorflow__FeatureLists__FeatureListEntry **entry_ptrs = mf_calloc(slots, sizeof *entry_ptrs);
  int packed = 0;
  bool context_packed = false;
  mf_code code = MF_OK;
  *out = NULL;
  if (!steps || !lists || !entries || !entry_ptrs || !(context_packed = pack_features(se->context, &context))) {
    code = oom(s);
    goto done;
  }
  for (; packed < count; packed++) {
    const mf_example *e = se->lists[packed].steps;
    if (!pack_features(e, &steps[packed])) {
      code = oom(s);
      goto done;
    }
    tensorflow__feature_list__init(&lists[packed]);
    lists[packed].n_feature = (size_t)e->count;
    lists[packed].feature = steps[packed].feature_ptrs;
    tensorflow__feature_lists__feature_list_entry__init(&entries[packed]);
    entries[packed].key = se->lists[packed].key;
    entries[packed].value = &lists[packed];
    entry_ptrs[packed] = &entries[packed];
  }
  Tensorflow__Features context_msg;
  features_message(se->context, &context, &context_msg);
  Tensorflow__FeatureLists lists_msg;
  tensorflow__feature_lists__init(&lists_msg);
  lists_msg.n_feature_list = (size_t)count;
  lists_msg.feature_list = entry_ptrs;
  Tensorflow__SequenceExample msg;
  tensorflow__sequence_example__init(&msg);
  msg.context = se->context->count ? &context_msg : NULL;  /* empty parts left out, as TensorFlow does */
  msg.feature_lists = count ? &lists_msg : NULL;
  code = pack_into(&msg, tensorflow__sequence_example__get_packed_size(&msg), pack_sequence_example, out, n, s);
done:
  if (context_packed) packed_free(&context);
  for (int i = 0; i < packed; i++) packed_free(&steps[i]);
  mf_free(steps);
  mf_free(lists);
  mf_free(entries);
  mf_free(entry_ptrs);
  return code;
}

/* Adds feature list msg (NULL: no steps) to se as list key, its steps keyed by position. */
static bool add_list(mf_sequence_example *se, const char *key, Tensorflow__FeatureList *msg, mf_status *s) {
  mf_example *steps = mf_sequence_example_add_list(se, key, s);
  if (!steps) return false;
  for (size_t j = 0; msg && j < msg->n_feature; j++) {
    char position[24];
    snprintf(position, sizeof position, "%zu", j);
    if (!add_feature(steps, position, msg->feature[j], s)) return false;
  }
  return true;
}

mf_sequence_example *mf_sequence_example_parse(const void *data, size_t n, mf_status *s) {
  Tensorflow__SequenceExample *msg = tensorflow__sequence_example__unpack(&allocator, n, data);
  if (!msg) {
    not_a_message(data, n, "sequence example", s);
    return NULL;
  }
  mf_sequence_example *se = mf_sequence_example_new();
  bool ok = se && add_features(se->context, msg->context, s);
  size_t count = msg->feature_lists ? msg->feature_lists->n_feature_list : 0;
  for (size_t i = 0; ok && i < count; i++) {
    Tensorflow__FeatureLists__FeatureListEntry *entry = msg->feature_lists->feature_list[i];
    ok = add_list(se, entry->key ? entry->key : "", entry->value, s);
  }
  tensorflow__sequence_example__free_unpacked(msg, &allocator);
  if (!ok) {
    mf_sequence_example_free(se);
    if (mf_ok(s)) oom(s);
    return NULL;
  }
  return se;
}

void mf_free_bytes(char *p) { mf_free(p); }
