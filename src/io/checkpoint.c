/* checkpoint.c — checkpoints: safetensors files, read and written here once
 * (tf.train.Saver and the C API call this code).
 *
 * A file is an 8-byte little-endian header length n, n bytes of JSON (padded
 * with spaces to a multiple of 8) mapping each variable's name to {"dtype":
 * "F32" | "F64" | "I32" | "I64" | "U8" | "BOOL" | "C64" | "C128", "shape": [...],
 * "data_offsets": [begin, end]} (offsets into the data after the header),
 * then the raw little-endian data; "__metadata__" holds {"format":
 * "moonflow"}. A reader checks the whole file before it hands out anything:
 * the JSON, every entry's dtype, shape and offsets, that the tensors cover
 * the data exactly once (safetensors allows no overlaps and no gaps, so one
 * file cannot be read two ways) and that bool values are 0 or 1. Data is read
 * straight into the values, with no copy of the file in memory. */
#define _POSIX_C_SOURCE 200809L /* pread */
#include "core/status.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct mf_checkpoint {
  int n;
  char **names;       /* sorted */
  mf_tensor **values; /* values[i] is names[i]'s */
};

static const struct { const char *code; mf_dtype dtype; } codes[] = {
  {"F32", MF_FLOAT32}, {"F64", MF_FLOAT64}, {"I32", MF_INT32}, {"I64", MF_INT64}, {"U8", MF_UINT8}, {"BOOL", MF_BOOL},
  /* Complex values as pairs of little-endian floats (real, imaginary): safetensors'
   * own C64, and C128 for complex128, which it has no name for. */
  {"C64", MF_COMPLEX64}, {"C128", MF_COMPLEX128},
};
enum { NUM_CODES = sizeof codes / sizeof codes[0] };

static const char *code_of(mf_dtype dtype) {
  for (int i = 0; i < NUM_CODES; i++)
    if (codes[i].dtype == dtype) return codes[i].code;
  return NULL;
}

static bool host_is_little_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

static mf_code big_endian_error(mf_status *s) {
  return mf_status_set(s, MF_UNIMPLEMENTED, "checkpoints are little-endian; this host is big-endian");
}

/* "(3, 4)", "(2,)", "()": how TensorFlow prints a shape. */
static void shape_text(const int64_t *dims, int rank, char *out, size_t cap) {
  size_t at = (size_t)snprintf(out, cap, "(");
  for (int i = 0; i < rank && at < cap; i++)
    at += (size_t)snprintf(out + at, cap - at, i ? ", %" PRId64 : "%" PRId64, dims[i]);
  if (at < cap) snprintf(out + at, cap - at, rank == 1 ? ",)" : ")");
}

void mf_checkpoint_free(mf_checkpoint *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) {
    free(c->names[i]);
    mf_tensor_release(c->values[i]);
  }
  free(c->names);
  free(c->values);
  free(c);
}

int mf_checkpoint_num_entries(const mf_checkpoint *c) { return c->n; }

const char *mf_checkpoint_name(const mf_checkpoint *c, int i) { return i >= 0 && i < c->n ? c->names[i] : NULL; }

mf_tensor *mf_checkpoint_value(const mf_checkpoint *c, int i) { return i >= 0 && i < c->n ? c->values[i] : NULL; }

int mf_checkpoint_find(const mf_checkpoint *c, const char *name) {
  int lo = 0, hi = c->n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2, cmp = strcmp(c->names[mid], name);
    if (cmp == 0) return mid;
    if (cmp < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/* Reading ------------------------------------------------------------------------------ */

/* One entry of the header, checked. */
typedef struct entry {
  const char *name; /* owned by the JSON header */
  mf_dtype dtype;
  int rank;
  int64_t dims[MF_MAX_RANK];
  int64_t begin, end;
} entry;

typedef struct reader {
  const char *path;
  mf_status *s;
} reader;

static mf_code corrupt(const reader *r, const char *fmt, ...) MF_PRINTF(2, 3);
static mf_code corrupt(const reader *r, const char *fmt, ...) {
  char what[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return mf_status_set(r->s, MF_DATA_LOSS, "%s is not a valid checkpoint (truncated or corrupted?): %s", r->path,
                       what);
}

static bool is_count(const json_t *v) { return json_is_integer(v) && json_integer_value(v) >= 0; }

/* Checks entry `name` (value e) against a data part of data_size bytes. */
static mf_code entry_in(const reader *r, const char *name, json_t *e, int64_t data_size, entry *out) {
  if (!json_is_object(e)) return corrupt(r, "the entry for '%s' is not an object", name);
  out->name = name;
  json_t *dtype = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape");
  json_t *off = json_object_get(e, "data_offsets");
  int k = 0;
  while (k < NUM_CODES && !(json_is_string(dtype) && strcmp(json_string_value(dtype), codes[k].code) == 0)) k++;
  if (k == NUM_CODES) {
    return corrupt(r, "'%s' has an unsupported dtype %s", name,
                   json_is_string(dtype) ? json_string_value(dtype) : "(not a string)");
  }
  out->dtype = codes[k].dtype;
  if (!json_is_array(shape) || json_array_size(shape) > MF_MAX_RANK) return corrupt(r, "'%s' has no valid shape", name);
  out->rank = (int)json_array_size(shape);
  /* The element count stops growing past what the data part can hold, so
   * it cannot overflow; a zero dimension makes it zero. */
  int64_t count = 1;
  bool zero = false;
  for (int i = 0; i < out->rank; i++) {
    json_t *d = json_array_get(shape, (size_t)i);
    if (!is_count(d)) return corrupt(r, "'%s' has an invalid dimension (shape entry %d)", name, i);
    out->dims[i] = json_integer_value(d);
    if (out->dims[i] == 0) zero = true;
  }
  for (int i = 0; i < out->rank && !zero; i++) {
    if (count > data_size) break;
    count = out->dims[i] > data_size + 1 ? data_size + 1 : count * out->dims[i];
  }
  int64_t nbytes = zero ? 0 : count > data_size ? data_size + 1 : count * (int64_t)mf_dtype_size(out->dtype);
  if (!json_is_array(off) || json_array_size(off) != 2 || !is_count(json_array_get(off, 0)) ||
      !is_count(json_array_get(off, 1)) ||
      json_integer_value(json_array_get(off, 0)) > json_integer_value(json_array_get(off, 1)))
    return corrupt(r, "'%s' has invalid data_offsets", name);
  out->begin = json_integer_value(json_array_get(off, 0));
  out->end = json_integer_value(json_array_get(off, 1));
  if (out->end > data_size) {
    return corrupt(r, "the data of '%s' ends at byte %" PRId64 " past the %" PRId64 " bytes of data", name, out->end,
                   data_size);
  }
  if (out->end - out->begin != nbytes) {
    char shown[MF_MAX_RANK * 24 + 8];
    shape_text(out->dims, out->rank, shown, sizeof shown);
    if (nbytes > data_size)
      return corrupt(r, "'%s' holds %" PRId64 " bytes, but %s %s needs more than the file holds", name,
                     out->end - out->begin, mf_dtype_name(out->dtype), shown);
    return corrupt(r, "'%s' holds %" PRId64 " bytes, but %s %s needs %" PRId64, name, out->end - out->begin,
                   mf_dtype_name(out->dtype), shown, nbytes);
  }
  return MF_OK;
}

static int by_offsets(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int by_name(const void *a, const void *b) { return strcmp(((const entry *)a)->name, ((const entry *)b)->name); }

/* Each byte of the data in exactly one tensor; entries sorted by offsets. */
static mf_code check_coverage(const reader *r, const entry *es, int n, int64_t data_size) {
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    const entry *t = &es[i];
    if (t->begin < at) {
      const entry *p = &es[i - 1];
      return corrupt(r,
                     "the data of '%s' (bytes %" PRId64 " to %" PRId64 ") overlaps that of '%s' (bytes %" PRId64
                     " to %" PRId64 "); safetensors tensors may not share bytes",
                     t->name, t->begin, t->end, p->name, p->begin, p->end);
    }
    if (t->begin > at) {
      return corrupt(r,
                     "bytes %" PRId64 " to %" PRId64 " of the data belong to no tensor (a gap before '%s'); "
                     "safetensors data has no gaps",
                     at, t->begin, t->name);
    }
    at = t->end;
  }
  if (at != data_size) {
    return corrupt(r, "bytes %" PRId64 " to %" PRId64 " of the data, after the last tensor, belong to no tensor", at,
                   data_size);
  }
  return MF_OK;
}

/* Reads n bytes at offset into dst; false on a short read or an error. */
static bool read_at(int fd, void *dst, size_t n, int64_t offset) {
  char *p = dst;
  while (n > 0) {
    ssize_t got = pread(fd, p, n, (off_t)offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= (size_t)got;
    offset += got;
  }
  return true;
}

/* Reads the checked entries' values (sorted by name) into c. */
static mf_code values_in(const reader *r, int fd, entry *es, int n, int64_t base, mf_checkpoint *c) {
  qsort(es, (size_t)n, sizeof *es, by_name);
  c->names = calloc((size_t)n + 1, sizeof *c->names);
  c->values = calloc((size_t)n + 1, sizeof *c->values);
  if (!c->names || !c->values) return mf_status_set(r->s, MF_RESOURCE_EXHAUSTED, "out of memory reading %s", r->path);
  for (int i = 0; i < n; i++) {
    c->names[i] = strdup(es[i].name);
    c->values[i] = mf_tensor_new(es[i].dtype, es[i].rank, es[i].dims, r->s);
    c->n++;  /* c owns entry i from here: freed with c on any error below */
    if (!c->names[i] || !c->values[i]) {
      if (!c->names[i]) mf_status_set(r->s, MF_RESOURCE_EXHAUSTED, "out of memory reading %s", r->path);
      return r->s->code;
    }
    size_t nbytes = (size_t)(es[i].end - es[i].begin);
    uint8_t *data = mf_tensor_data(c->values[i]);
    if (nbytes > 0 && !read_at(fd, data, nbytes, base + es[i].begin))
      return corrupt(r, "cannot read the data of '%s' (%s)", es[i].name, errno ? strerror(errno) : "short read");
    if (es[i].dtype == MF_BOOL) {
      for (size_t k = 0; k < nbytes; k++)
        if (data[k] > 1) return corrupt(r, "'%s' has bool values other than 0 and 1", es[i].name);
    }
  }
  return MF_OK;
}

/* Opens path for reading; -1 with s set, the path named. */
static int open_checkpoint(const char *path, int64_t *size, mf_status *s) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == EACCES)
      return mf_status_set(s, MF_PERMISSION_DENIED, "cannot read checkpoint %s: %s", path, strerror(errno)), -1;
    return mf_status_set(s, MF_NOT_FOUND, "Failed to find any matching files for %s", path), -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    close(fd);
    return mf_status_set(s, MF_FAILED_PRECONDITION,
                         "%s is a directory, not a checkpoint file; use tf.train.latest_checkpoint(dir) for the "
                         "newest checkpoint in it", path), -1;
  }
  *size = st.st_size;
  return fd;
}

static mf_code checkpoint_in(const reader *r, int fd, int64_t size, mf_checkpoint *c) {
  if (size < 8) return corrupt(r, "the file has %" PRId64 " bytes, fewer than the 8-byte header length", size);
  uint8_t len[8];
  if (!read_at(fd, len, 8, 0)) return corrupt(r, "cannot read the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | len[i];
  if (n > (uint64_t)(size - 8))
    return corrupt(r, "the header length is %" PRIu64 " bytes but only %" PRId64 " bytes follow it", n, size - 8);
  char *text = malloc(n + 1);
  if (!text) return mf_status_set(r->s, MF_RESOURCE_EXHAUSTED, "out of memory reading %s", r->path);
  if (!read_at(fd, text, n, 8)) {
    free(text);
    return corrupt(r, "cannot read the header");
  }
  json_error_t jerr;
  json_t *header = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
  free(text);
  if (!header) return corrupt(r, "the header is not valid JSON (%s at byte %d)", jerr.text, jerr.position);
  mf_code code = MF_OK;
  entry *es = NULL;
  int count = 0;
  int64_t data_size = size - 8 - (int64_t)n;
  if (!json_is_object(header)) {
    code = corrupt(r, "the header is not a JSON object");
    goto done;
  }
  es = calloc(json_object_size(header) + 1, sizeof *es);
  if (!es) {
    code = mf_status_set(r->s, MF_RESOURCE_EXHAUSTED, "out of memory reading %s", r->path);
    goto done;
  }
  const char *name;
  json_t *value;
  json_object_foreach(header, name, value) {
    if (strcmp(name, "__metadata__") == 0) continue;
    if ((code = entry_in(r, name, value, data_size, &es[count])) != MF_OK) goto done;
    count++;
  }
  qsort(es, (size_t)count, sizeof *es, by_offsets);
  if ((code = check_coverage(r, es, count, data_size)) != MF_OK) goto done;
  code = values_in(r, fd, es, count, 8 + (int64_t)n, c);
done:
  free(es);
  json_decref(header);
  return code;
}

mf_checkpoint *mf_checkpoint_read(const char *path, mf_status *s) {
  mf_status_clear(s);
  if (!host_is_little_endian()) return big_endian_error(s), NULL;
  int64_t size;
  int fd = open_checkpoint(path, &size, s);
  if (fd < 0) return NULL;
  mf_checkpoint *c = calloc(1, sizeof *c);
  reader r = {path, s};
  if (!c) mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory reading %s", path);
  else if (checkpoint_in(&r, fd, size, c) != MF_OK) {
    mf_checkpoint_free(c);
    c = NULL;
  }
  close(fd);
  return c;
}

/* Writing ------------------------------------------------------------------------------- */

/* The JSON header of the values, in their order; NULL with s set. */
static char *header_out(const char *const *names, mf_tensor *const *values, int n, mf_status *s) {
  json_t *header = json_object();
  json_t *meta = json_pack("{s:s}", "format", "moonflow");
  if (!header || !meta || json_object_set_new(header, "__metadata__", meta) != 0) {
    json_decref(header);
    return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory writing a checkpoint header"), NULL;
  }
  int64_t offset = 0;
  for (int i = 0; i < n; i++) {
    const char *code = code_of(mf_tensor_dtype(values[i]));
    if (!names[i] || !*names[i] || strcmp(names[i], "__metadata__") == 0 || json_object_get(header, names[i])) {
      mf_status_set(s, MF_INVALID_ARGUMENT, "name %d ('%s') is empty, reserved or given twice", i,
                    names[i] ? names[i] : "(null)");
      json_decref(header);
      return NULL;
    }
    if (mf_tensor_dtype(values[i]) == MF_STRING) {
      mf_status_set(s, MF_INVALID_ARGUMENT, "'%s' is a string value; safetensors checkpoints have no string dtype "
                    "(they hold float32, float64, int32, int64, uint8 and bool)", names[i]);
      json_decref(header);
      return NULL;
    }
    if (!code || mf_tensor_device(values[i]) != MF_CPU) {
      mf_status_set(s, MF_INVALID_ARGUMENT, "'%s' is a %s value %s; checkpoints hold host values of float32, "
                    "float64, int32, int64, uint8 and bool", names[i], mf_dtype_name(mf_tensor_dtype(values[i])),
                    mf_tensor_device(values[i]) == MF_CPU ? "in host memory" : "in device memory");
      json_decref(header);
      return NULL;
    }
    json_t *shape = json_array();
    for (int k = 0; shape && k < mf_tensor_rank(values[i]); k++)
      json_array_append_new(shape, json_integer(mf_tensor_dims(values[i])[k]));
    int64_t end = offset + (int64_t)mf_tensor_nbytes(values[i]);
    json_t *e = json_pack("{s:s,s:o,s:[I,I]}", "dtype", code, "shape", shape, "data_offsets", (json_int_t)offset,
                          (json_int_t)end);
    if (!e || json_object_set_new(header, names[i], e) != 0) {
      json_decref(header);
      return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory writing a checkpoint header"), NULL;
    }
    offset = end;
  }
  char *text = json_dumps(header, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(header);
  if (!text) mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory writing a checkpoint header");
  return text;
}

mf_code mf_checkpoint_write(const char *path, const char *const *names, mf_tensor *const *values, int n,
                            mf_status *s) {
  mf_status_clear(s);
  if (!host_is_little_endian()) return big_endian_error(s);
  if (n < 0) return mf_status_set(s, MF_INVALID_ARGUMENT, "a checkpoint of %d values", n);
  char *text = header_out(names, values, n, s);
  if (!text) return s->code;
  size_t len = strlen(text), padded = (len + 7) / 8 * 8;
  char *header = realloc(text, padded);
  const void **data = calloc((size_t)n + 2, sizeof *data);
  size_t *sizes = calloc((size_t)n + 2, sizeof *sizes);
  mf_code code;
  if (!header || !data || !sizes) {
    free(header ? header : text);
    code = mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory writing %s", path);
  } else {
    memset(header + len, ' ', padded - len);
    uint8_t length[8];
    for (int i = 0; i < 8; i++) length[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    data[0] = length, sizes[0] = 8;
    data[1] = header, sizes[1] = padded;
    for (int i = 0; i < n; i++) data[i + 2] = mf_tensor_data(values[i]), sizes[i + 2] = mf_tensor_nbytes(values[i]);
    code = mf_file_write_atomic(path, data, sizes, n + 2, s);
    free(header);
  }
  free(data);
  free(sizes);
  return code;
}
