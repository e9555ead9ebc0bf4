/* memory.h — the one allocator hook (memory.c). */
#ifndef MF_CORE_MEMORY_H
#define MF_CORE_MEMORY_H

#include "core/base.h"

void *mf_malloc(size_t n);               /* NULL on failure */
void *mf_calloc(size_t count, size_t n);
void *mf_realloc(void *p, size_t n);
void mf_free(void *p);
char *mf_strdup(const char *s);
void *mf_aligned_alloc(size_t n);        /* MF_ALIGNMENT-aligned, uninitialized */
void mf_aligned_free(void *p);

#endif
