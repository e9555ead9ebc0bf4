/* arena.h — a bump allocator for memory that lives exactly as long as its
 * owner (arena.c): a graph's ops, names and small arrays, which are never
 * freed one by one. */
#ifndef MF_CORE_ARENA_H
#define MF_CORE_ARENA_H

#include "core/base.h"

typedef struct mf_arena_block mf_arena_block;
typedef struct mf_arena {
  mf_arena_block *head;  /* owned: the newest block, linking to older ones */
  size_t bytes;          /* total bytes of the blocks, for memory reports */
} mf_arena;

/* n bytes aligned to 8 (pointers, 64-bit scalars), valid until mf_arena_free; NULL when out of
 * memory. The arena starts zeroed ({0}) and needs no init. */
void *mf_arena_alloc(mf_arena *a, size_t n);
/* Copies of memory and strings into the arena (returned pointers owned by it). */
void *mf_arena_dup(mf_arena *a, const void *p, size_t n);
char *mf_arena_strdup(mf_arena *a, const char *s);
/* Frees every block; the arena is empty again. */
void mf_arena_free(mf_arena *a);

#endif
