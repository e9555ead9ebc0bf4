/* readers.c — libFuzzer entry for moonflow's C readers through the public C
 * API alone, with no Lua: what a host program embedding moonflow calls on
 * files it did not write. MOONFLOW_FUZZ_TARGET names the reader:
 *   graph       mf_graph_file_read, then every variable, item and stored name
 *   checkpoint  mf_checkpoint_read, then every entry's name and value bytes
 *   tfrecord    mf_record_reader, strictly and skipping corrupt records; the
 *               input's first byte picks plain (even) or gzip (odd)
 *   example     mf_example_parse, every feature's values, then serialized
 *   sequence_example  mf_sequence_example_parse, every context feature's and
 *               feature list step's values, then serialized
 * A status that is not OK rejects the input; a crash or a sanitizer report
 * is a finding. The file readers read one temporary file, rewritten for
 * each input. */
#define _POSIX_C_SOURCE 200809L
#include <moonflow.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void (*reader_fn)(const uint8_t *data, size_t size);

static char path[64];
static mf_status *status;
static reader_fn reader;
static volatile uint8_t sink; /* where the bytes read go, so nothing is skipped */

static void touch(const void *p, size_t n) {
  const uint8_t *b = p;
  uint8_t x = 0;
  for (size_t i = 0; i < n; i++) x ^= b[i];
  sink ^= x;
}

static void touch_string(const char *s) {
  if (s) touch(s, strlen(s));
}

static int write_input(const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
  size_t written = size ? fwrite(data, 1, size, f) : 0;
  return fclose(f) == 0 && written == size;
}

static void read_graph(const uint8_t *data, size_t size) {
  if (!write_input(data, size)) return;
  mf_graph_file *f = mf_graph_file_read(path, status);
  if (!f) return;
  sink ^= (uint8_t)mf_graph_num_ops(mf_graph_file_graph(f));
  const mf_graph_file_variable *vars;
  for (int i = 0, n = mf_graph_file_variables(f, &vars); i < n; i++) {
    touch_string(vars[i].tensor);
    touch_string(vars[i].initializer);
    touch_string(vars[i].initial_value);
  }
  const mf_graph_file_item *items;
  for (int i = 0, n = mf_graph_file_items(f, &items); i < n; i++) {
    touch_string(items[i].collection);
    touch_string(items[i].text);
  }
  const mf_graph_file_name *names;
  for (int i = 0, n = mf_graph_file_stored(f, &names); i < n; i++) {
    touch_string(names[i].name);
    touch_string(names[i].tensor);
  }
  mf_graph_file_free(f);
}

static void read_checkpoint(const uint8_t *data, size_t size) {
  if (!write_input(data, size)) return;
  mf_checkpoint *c = mf_checkpoint_read(path, status);
  if (!c) return;
  for (int i = 0, n = mf_checkpoint_num_entries(c); i < n; i++) {
    const char *name = mf_checkpoint_name(c, i);
    if (mf_checkpoint_find(c, name) != i) abort(); /* entries are distinct and sorted */
    mf_tensor *v = mf_checkpoint_value(c, i);
    touch(mf_tensor_dims(v), sizeof(int64_t) * (size_t)mf_tensor_rank(v));
    touch(mf_tensor_data(v), mf_tensor_nbytes(v));
  }
  mf_checkpoint_free(c);
}

static void read_records(const char *compression, bool skip_corrupt) {
  mf_record_reader *r = mf_record_reader_open(path, compression, skip_corrupt, status);
  if (!r) return;
  const char *record;
  size_t n;
  while (mf_record_reader_next(r, &record, &n, status) == MF_OK) touch(record, n);
  mf_record_reader_free(r);
}

static void read_tfrecord(const uint8_t *data, size_t size) {
  if (size < 1 || !write_input(data + 1, size - 1)) return;
  const char *compression = data[0] % 2 ? "GZIP" : "";
  read_records(compression, false);
  read_records(compression, true);
}

/* Reads every feature's values of e (keys must be distinct). */
static void touch_features(const mf_example *e) {
  for (int i = 0, n = mf_example_num_features(e); i < n; i++) {
    if (mf_example_find(e, mf_example_key(e, i)) != i) abort(); /* keys are distinct */
    size_t count = mf_example_count(e, i);
    switch (mf_example_kind(e, i)) {
      case MF_FEATURE_FLOATS: touch(mf_example_floats(e, i), count * sizeof(float)); break;
      case MF_FEATURE_INT64S: touch(mf_example_int64s(e, i), count * sizeof(int64_t)); break;
      case MF_FEATURE_BYTES:
        for (size_t j = 0; j < count; j++) {
          size_t length;
          touch(mf_example_bytes(e, i, j, &length), length);
        }
        break;
      case MF_FEATURE_NONE: break;
    }
  }
}

static void read_example(const uint8_t *data, size_t size) {
  mf_example *e = mf_example_parse(data, size, status);
  if (!e) return;
  touch_features(e);
  char *bytes;
  size_t n;
  if (mf_example_serialize(e, &bytes, &n, status) == MF_OK) mf_free_bytes(bytes);
  mf_example_free(e);
}

static void read_sequence_example(const uint8_t *data, size_t size) {
  mf_sequence_example *se = mf_sequence_example_parse(data, size, status);
  if (!se) return;
  touch_features(mf_sequence_example_context(se));
  for (int i = 0, n = mf_sequence_example_num_lists(se); i < n; i++) {
    if (mf_sequence_example_find_list(se, mf_sequence_example_list_key(se, i)) != i) abort();
    touch_features(mf_sequence_example_list(se, i));
  }
  char *bytes;
  size_t n;
  if (mf_sequence_example_serialize(se, &bytes, &n, status) == MF_OK) mf_free_bytes(bytes);
  mf_sequence_example_free(se);
}

static void remove_file(void) { unlink(path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  static const struct { const char *name; reader_fn fn; } targets[] = {
      {"graph", read_graph}, {"checkpoint", read_checkpoint}, {"tfrecord", read_tfrecord},
      {"example", read_example}, {"sequence_example", read_sequence_example}};
  const char *name = getenv("MOONFLOW_FUZZ_TARGET");
  for (size_t i = 0; name && i < sizeof targets / sizeof targets[0]; i++)
    if (strcmp(name, targets[i].name) == 0) reader = targets[i].fn;
  if (!reader) {
    fprintf(stderr, "fuzz_c: set MOONFLOW_FUZZ_TARGET to graph, checkpoint, tfrecord, example or "
            "sequence_example\n");
    exit(1);
  }
  status = mf_status_new();
  strcpy(path, "/tmp/moonflow-fuzz-XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0 || close(fd) != 0) {
    perror("fuzz_c: mkstemp");
    exit(1);
  }
  atexit(remove_file);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader(data, size);
  return 0;
}
