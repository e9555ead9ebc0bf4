/* strmap.c — an open-addressing string hash map (op names, unique-name counters). */
#include "core/strmap.h"
#include "core/memory.h"

#include <string.h>

typedef struct { char *key; void *value; } entry;
struct mf_strmap { entry *slots; size_t cap, count; };

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

mf_strmap *mf_strmap_new(void) { return mf_calloc(1, sizeof(mf_strmap)); }

void mf_strmap_free(mf_strmap *m) {
  if (!m) return;
  for (size_t i = 0; i < m->cap; i++) mf_free(m->slots[i].key);
  mf_free(m->slots);
  mf_free(m);
}

static entry *find(entry *slots, size_t cap, const char *key) {
  for (size_t i = hash(key) & (cap - 1);; i = (i + 1) & (cap - 1))
    if (!slots[i].key || strcmp(slots[i].key, key) == 0) return &slots[i];
}

static bool grow(mf_strmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  entry *slots = mf_calloc(cap, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].key) *find(slots, cap, m->slots[i].key) = m->slots[i];
  mf_free(m->slots);
  m->slots = slots;
  m->cap = cap;
  return true;
}

void **mf_strmap_slot(mf_strmap *m, const char *key, bool create) {
  if (!m->cap) {
    if (!create || !grow(m)) return NULL;
  }
  entry *e = find(m->slots, m->cap, key);
  if (e->key) return &e->value;
  if (!create) return NULL;
  if ((m->count + 1) * 2 > m->cap) {
    if (!grow(m)) return NULL;
    e = find(m->slots, m->cap, key);
  }
  e->key = mf_strdup(key);
  if (!e->key) return NULL;
  e->value = NULL;
  m->count++;
  return &e->value;
}
