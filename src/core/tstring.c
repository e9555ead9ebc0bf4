/* tstring.c — building string values and reading their elements. */
#include "core/tstring.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void mf_strings_builder_init(mf_strings_builder *b) { memset(b, 0, sizeof *b); }

void mf_strings_builder_free(mf_strings_builder *b) {
  mf_free(b->bytes);
  mf_free(b->lengths);
  memset(b, 0, sizeof *b);
}

/* Grows *p (of *cap items of `size` bytes) to hold `need` items. */
static bool grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap : 16;
  while (n < need) {
    if (n > SIZE_MAX / 2 / size) return false;
    n *= 2;
  }
  void *q = mf_realloc(*p, n * size);
  if (!q) return false;
  *p = q;
  *cap = n;
  return true;
}

void mf_strings_begin(mf_strings_builder *b) {
  if (b->oom) return;
  size_t cap = (size_t)b->cap_count;
  if (!grow((void **)&b->lengths, &cap, (size_t)b->count + 1, sizeof *b->lengths)) {
    b->oom = true;
    return;
  }
  b->cap_count = (int64_t)cap;
  b->lengths[b->count++] = 0;
}

char *mf_strings_room(mf_strings_builder *b, size_t n) {
  if (b->oom || b->count == 0) return NULL;
  if (n > SIZE_MAX - b->used || !grow((void **)&b->bytes, &b->cap, b->used + n + 1, 1)) {
    b->oom = true;
    return NULL;
  }
  char *at = b->bytes + b->used;
  b->used += n;
  b->lengths[b->count - 1] += (int64_t)n;
  return at;
}

void mf_strings_put(mf_strings_builder *b, const void *bytes, size_t n) {
  char *at = mf_strings_room(b, n);
  if (at && n) memcpy(at, bytes, n);
}

void mf_strings_add(mf_strings_builder *b, const void *bytes, size_t n) {
  mf_strings_begin(b);
  mf_strings_put(b, bytes, n);
}

mf_tensor *mf_strings_finish(mf_strings_builder *b, int rank, const int64_t *dims, mf_status *s) {
  mf_tensor *t = NULL;
  if (b->oom) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory building a string value (%zu bytes so far)", b->used);
  } else if ((t = mf_tensor_new_sized(MF_STRING, rank, dims, b->used, s)) && t->size != b->count) {
    mf_status_set(s, MF_INTERNAL, "a string value of %lld elements built from %lld strings",
                  (long long)t->size, (long long)b->count);
    mf_tensor_release(t);
    t = NULL;
  } else if (t) {
    mf_tstring *e = t->data;
    char *bytes = (char *)(e + t->size);
    if (b->used) memcpy(bytes, b->bytes, b->used);
    t->string_bytes = b->used;
    for (int64_t i = 0, at = 0; i < t->size; at += b->lengths[i], i++) {
      e[i].offset = (bytes + at) - (char *)&e[i];
      e[i].length = b->lengths[i];
    }
  }
  mf_strings_builder_free(b);
  return t;
}

mf_tensor *mf_tensor_new_strings(int rank, const int64_t *dims, const char *const *bytes, const int64_t *lengths,
                                 mf_status *s) {
  int64_t n = rank >= 0 && rank <= MF_MAX_RANK ? mf_shape_num_elements(rank, dims) : 0;
  mf_strings_builder b;
  mf_strings_builder_init(&b);
  for (int64_t i = 0; i < n; i++) {
    if (lengths[i] < 0) {
      mf_strings_builder_free(&b);
      mf_status_set(s, MF_INVALID_ARGUMENT, "mf_tensor_new_strings: string %lld has length %lld", (long long)i,
                    (long long)lengths[i]);
      return NULL;
    }
    mf_strings_add(&b, bytes[i], (size_t)lengths[i]);
  }
  return mf_strings_finish(&b, rank, dims, s);
}

const char *mf_tensor_string(const mf_tensor *t, int64_t i, int64_t *length) {
  const mf_tstring *e = mf_strings_of(t) + i;
  *length = e->length;
  return mf_tstring_bytes(e);
}

bool mf_parse_number(const char *s, int64_t n, mf_dtype t, double *real, int64_t *integer) {
  char buf[128];
  while (n > 0 && mf_is_space(*s)) s++, n--;
  while (n > 0 && mf_is_space(s[n - 1])) n--;
  if (n == 0 || n >= (int64_t)sizeof buf) return false;
  memcpy(buf, s, (size_t)n);
  buf[n] = 0;
  char *end;
  errno = 0;
  if (t == MF_FLOAT32 || t == MF_FLOAT64) {
    *real = t == MF_FLOAT32 ? strtof(buf, &end) : strtod(buf, &end);
    return end == buf + n;
  }
  long long v = strtoll(buf, &end, 10);
  if (end != buf + n || errno == ERANGE || (t == MF_INT32 && (v < INT32_MIN || v > INT32_MAX))) return false;
  *integer = v;
  return true;
}
