/* arena.c — a bump allocator over a list of blocks that double in size. */
#include "core/arena.h"
#include "core/memory.h"

#include <string.h>

struct mf_arena_block {
  mf_arena_block *next;
  size_t used, cap;
  int64_t data[];  /* 8-byte aligned */
};

enum { FIRST_BLOCK = 4096, LARGEST_BLOCK = 1 << 20 };

void *mf_arena_alloc(mf_arena *a, size_t n) {
  size_t need = (n + 7) & ~(size_t)7;
  if (need < n) return NULL;
  mf_arena_block *b = a->head;
  if (!b || b->cap - b->used < need) {
    /* Blocks grow with the arena, so a big graph makes few of them; a
     * request larger than a block gets one of its own size. */
    size_t cap = b ? b->cap * 2 : FIRST_BLOCK;
    if (cap > LARGEST_BLOCK) cap = LARGEST_BLOCK;
    if (cap < need) cap = need;
    mf_arena_block *nb = mf_malloc(sizeof *nb + cap);
    if (!nb) return NULL;
    nb->cap = cap;
    nb->used = 0;
    if (b && b->cap - b->used > cap - need) {
      /* Keep filling the current block: the new one goes behind it. */
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      a->head = nb;
    }
    a->bytes += cap;
    b = nb;
  }
  void *p = (unsigned char *)b->data + b->used;
  b->used += need;
  return p;
}

void *mf_arena_dup(mf_arena *a, const void *p, size_t n) {
  void *q = mf_arena_alloc(a, n ? n : 1);
  if (q && n) memcpy(q, p, n);
  return q;
}

char *mf_arena_strdup(mf_arena *a, const char *s) { return mf_arena_dup(a, s, strlen(s) + 1); }

void mf_arena_free(mf_arena *a) {
  while (a->head) {
    mf_arena_block *next = a->head->next;
    mf_free(a->head);
    a->head = next;
  }
  a->bytes = 0;
}
