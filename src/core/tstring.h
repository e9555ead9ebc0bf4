/* tstring.h — string values (dtype MF_STRING): reading elements and building
 * values (tstring.c). The layout is mf_tstring's in moonflow.h: one buffer
 * holds the elements, then the bytes of all strings. */
#ifndef MF_CORE_TSTRING_H
#define MF_CORE_TSTRING_H

#include "core/base.h"
#include "core/tensor.h"

/* The bytes of element e, read where it lies (e->length of them). */
static inline const char *mf_tstring_bytes(const mf_tstring *e) { return (const char *)e + e->offset; }
static inline const mf_tstring *mf_strings_of(const mf_tensor *t) { return (const mf_tstring *)t->data; }

/* Builds a string value element by element, in row-major order: begin an
 * element, then put its bytes in one piece or several; finish makes the
 * value. Owned by its user: finish or free it. A failed allocation is kept
 * and reported by finish (the calls before it do nothing). */
typedef struct mf_strings_builder {
  char *bytes;         /* all strings so far, back to back */
  size_t used, cap;
  int64_t *lengths;    /* per element begun */
  int64_t count, cap_count;
  bool oom;
} mf_strings_builder;

void mf_strings_builder_init(mf_strings_builder *b);
void mf_strings_begin(mf_strings_builder *b);
/* Appends n bytes to the element begun last. */
void mf_strings_put(mf_strings_builder *b, const void *bytes, size_t n);
/* Room for n more bytes of the element begun last, to be written by the
 * caller (NULL when out of memory); they count as put. */
char *mf_strings_room(mf_strings_builder *b, size_t n);
/* begin + put. */
void mf_strings_add(mf_strings_builder *b, const void *bytes, size_t n);
/* The value of shape dims from the elements built (as many as dims holds;
 * fewer or more is an INTERNAL error); frees the builder. New reference or
 * NULL with s set. */
mf_tensor *mf_strings_finish(mf_strings_builder *b, int rank, const int64_t *dims, mf_status *s);
void mf_strings_builder_free(mf_strings_builder *b);

/* Text in strings: ASCII whitespace (C's isspace in the C locale). */
static inline bool mf_is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
/* Parses all of s[0..n), spaces around it allowed, as a decimal number for
 * dtype t (float32, float64: into *real; int32, int64: into *integer); false
 * when it is none or out of an integer dtype's range (floats overflow to inf,
 * as TensorFlow's do). */
bool mf_parse_number(const char *s, int64_t n, mf_dtype t, double *real, int64_t *integer);

#endif
