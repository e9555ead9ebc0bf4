/* names.c — a graph's namespace: one open-addressing table of the names in
 * use, each slot holding its op and TensorFlow's unique_name counter, so that
 * naming an op costs one or two look-ups whatever the graph's size. */
#include "graph/names.h"
#include "core/memory.h"

#include <ctype.h>
#include <string.h>

/* FNV-1a, its high bits folded into the low ones that pick a slot (names
 * such as Add_17, Add_18 differ in their last bytes only). */
static uint32_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return (uint32_t)(h ^ (h >> 32));
}

/* The slot of key (of hash h), or the empty slot where it would go. */
static mf_name_slot *find(mf_name_slot *slots, size_t cap, const char *key, uint32_t h) {
  for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1))
    if (!slots[i].key || (slots[i].hash == h && strcmp(slots[i].key, key) == 0)) return &slots[i];
}

static const mf_name_slot *lookup(const mf_names *t, const char *key) {
  if (!t->cap) return NULL;
  const mf_name_slot *s = find(t->slots, t->cap, key, hash(key));
  return s->key ? s : NULL;
}

mf_op *mf_names_op(const mf_names *t, const char *name) {
  const mf_name_slot *s = lookup(t, name);
  return s ? s->op : NULL;
}

/* Room for `extra` more names at a load of at most 3/4. */
static bool reserve(mf_names *t, size_t extra) {
  if ((t->count + extra) * 4 <= t->cap * 3) return true;
  size_t cap = t->cap ? t->cap * 2 : 64;
  mf_name_slot *slots = mf_calloc(cap, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < t->cap; i++)
    if (t->slots[i].key) *find(slots, cap, t->slots[i].key, t->slots[i].hash) = t->slots[i];
  mf_free(t->slots);
  t->slots = slots;
  t->cap = cap;
  return true;
}

/* The slot of key, added (its key a copy in the arena) when absent; the
 * table has room (reserve). */
static mf_name_slot *insert(mf_names *t, mf_arena *arena, const char *key) {
  uint32_t h = hash(key);
  mf_name_slot *s = find(t->slots, t->cap, key, h);
  if (s->key) return s;
  const char *copy = mf_arena_strdup(arena, key);
  if (!copy) return NULL;
  *s = (mf_name_slot){.key = copy, .hash = h};
  t->count++;
  return s;
}

/* Writes "_<i>" and a NUL at p (snprintf would cost more than the look-ups). */
static void write_suffix(char *p, int64_t i) {
  char digits[20];
  int n = 0;
  do digits[n++] = (char)('0' + i % 10);
  while ((i /= 10) > 0);
  *p++ = '_';
  while (n > 0) *p++ = digits[--n];
  *p = '\0';
}

char *mf_names_unique(const mf_names *t, const char *base, char *buf, size_t size, int64_t *suffix) {
  const mf_name_slot *b = lookup(t, base);
  *suffix = 0;
  if (!b) return (char *)base;
  size_t len = strlen(base), need = len + 22; /* "_" and a 64-bit suffix */
  char *name = need <= size ? buf : mf_malloc(need);
  if (!name) return NULL;
  memcpy(name, base, len);
  /* The counter is past every suffix tried before, all of them taken, so
   * this loop runs once unless the user took base_i names themselves. */
  for (int64_t i = b->next > 0 ? b->next : 1;; i++) {
    write_suffix(name + len, i);
    if (!lookup(t, name)) {
      *suffix = i;
      return name;
    }
  }
}

const char *mf_names_claim(mf_names *t, mf_arena *arena, const char *base, const char *name, int64_t suffix,
                           mf_op *op) {
  if (!reserve(t, 2)) return NULL;
  if (suffix == 0) {
    mf_name_slot *b = insert(t, arena, base);
    if (!b) return NULL;
    b->op = op;
    b->next = 1;
    return b->key;
  }
  /* base is taken already (unique_name found it so): only name is new. */
  mf_name_slot *s = insert(t, arena, name);
  if (!s) return NULL;
  s->op = op;
  s->next = 1;
  find(t->slots, t->cap, base, hash(base))->next = (uint32_t)suffix + 1;
  return s->key;
}

bool mf_names_valid(const char *name, bool scope) {
  if (!scope && (!name[0] || strchr("_-/>", name[0]))) return false;
  for (const char *p = name; *p; p++)
    if (!isalnum((unsigned char)*p) && !strchr("_.-/>", *p)) return false;
  return true;
}

void mf_names_free(mf_names *t) {
  mf_free(t->slots);
  *t = (mf_names){0};
}
