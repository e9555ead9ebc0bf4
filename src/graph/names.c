/* names.c — a graph's namespace: one open-addressing table of the names in
 * use, each slot holding its op and TensorFlow's unique_name counter, so that
 * naming an op costs one or two look-ups whatever the graph's size. */
#include "graph/names.h"
#include "core/memory.h"

#include <ctype.h>
#include <string.h>

/* FNV-1a over s, continuing from state h (a name's hash continues its
 * base's: base_17 costs the hash of "_17" once the base's is known). */
enum { FNV_START = 0 };
static uint64_t fnv(uint64_t h, const char *s) {
  if (h == FNV_START) h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

/* The slot hash of an FNV state: its high bits folded into the low ones that
 * pick a slot (names such as Add_17, Add_18 differ in their last bytes only). */
static uint32_t finish(uint64_t h) {
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return (uint32_t)(h ^ (h >> 32));
}

static uint32_t hash(const char *s) { return finish(fnv(FNV_START, s)); }

/* The slot of key (of hash h), or the empty slot where it would go. */
static mf_name_slot *find(mf_name_slot *slots, size_t cap, const char *key, uint32_t h) {
  for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1))
    if (!slots[i].key || (slots[i].hash == h && strcmp(slots[i].key, key) == 0)) return &slots[i];
}

static const mf_name_slot *lookup(const mf_names *t, const char *key, uint32_t h) {
  if (!t->cap) return NULL;
  const mf_name_slot *s = find(t->slots, t->cap, key, h);
  return s->key ? s : NULL;
}

mf_op *mf_names_op(const mf_names *t, const char *name) {
  const mf_name_slot *s = lookup(t, name, hash(name));
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

/* The slot of key (of hash h), added (its key a copy in the arena) when
 * absent; the table has room (reserve). */
static mf_name_slot *insert(mf_names *t, mf_arena *arena, const char *key, uint32_t h) {
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

/* Ops built in a loop take base, base_1, base_2, ...: the slot the next one
 * looks up first (base_<suffix+1>) lies anywhere in a table of megabytes, and
 * fetching it would be most of the cost of naming an op. It is fetched into
 * the cache now, while the caller finishes this op and builds the next. */
static void prefetch_next(const mf_names *t, const mf_unique_name *u) {
#if defined(__GNUC__)
  char suffix[24];
  write_suffix(suffix, u->suffix + 1);
  __builtin_prefetch(&t->slots[finish(fnv(u->base_state, suffix)) & (t->cap - 1)]);
#else
  (void)t;
  (void)u;
#endif
}

bool mf_names_unique(const mf_names *t, const char *base, char *buf, size_t size, mf_unique_name *out) {
  uint64_t state = fnv(FNV_START, base);
  *out = (mf_unique_name){.name = (char *)base, .base_state = state, .base_hash = finish(state)};
  out->name_hash = out->base_hash;
  const mf_name_slot *b = lookup(t, base, out->base_hash);
  if (!b) return true;
  size_t len = strlen(base), need = len + 22; /* "_" and a 64-bit suffix */
  char *name = need <= size ? buf : mf_malloc(need);
  if (!name) return false;
  memcpy(name, base, len);
  /* The counter is past every suffix tried before, all of them taken, so
   * this loop runs once unless the user took base_i names themselves. */
  for (int64_t i = b->next > 0 ? b->next : 1;; i++) {
    write_suffix(name + len, i);
    uint32_t h = finish(fnv(state, name + len));
    if (!lookup(t, name, h)) {
      out->name = name;
      out->suffix = i;
      out->name_hash = h;
      return true;
    }
  }
}

const char *mf_names_claim(mf_names *t, mf_arena *arena, const char *base, const mf_unique_name *u, mf_op *op) {
  if (!reserve(t, 2)) return NULL;
  mf_name_slot *s = insert(t, arena, u->name, u->name_hash);
  if (!s) return NULL;
  s->op = op;
  s->next = 1;
  /* A suffixed name: base is taken already (unique found it so) and its
   * counter moves past the suffix. */
  if (u->suffix) find(t->slots, t->cap, base, u->base_hash)->next = (uint32_t)u->suffix + 1;
  prefetch_next(t, u);
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
