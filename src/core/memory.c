/* memory.c — the one allocation hook: every byte the engine owns goes through here. */
#include "core/memory.h"

#include <stdlib.h>
#include <string.h>

void *mf_malloc(size_t n) { return malloc(n ? n : 1); }
void *mf_calloc(size_t count, size_t n) { return calloc(count ? count : 1, n ? n : 1); }
void *mf_realloc(void *p, size_t n) { return realloc(p, n ? n : 1); }
void mf_free(void *p) { free(p); }

char *mf_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = mf_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void *mf_aligned_alloc(size_t n) {
  size_t rounded = (n + MF_ALIGNMENT - 1) / MF_ALIGNMENT * MF_ALIGNMENT;
  return aligned_alloc(MF_ALIGNMENT, rounded ? rounded : MF_ALIGNMENT);
}

void mf_aligned_free(void *p) { free(p); }
