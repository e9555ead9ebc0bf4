/* names.h — a graph's namespace (names.c): which op and scope names are taken,
 * TensorFlow's unique_name and its rule for valid names. Names have any
 * length; uniquifying costs O(1) per name, amortized. */
#ifndef MF_GRAPH_NAMES_H
#define MF_GRAPH_NAMES_H

#include "core/arena.h"
#include "core/base.h"

/* One name in use: an op's (op set), a name scope's or a base name that
 * TensorFlow's unique_name counted (op NULL). */
typedef struct mf_name_slot {
  const char *key;  /* borrowed: a string in the graph's arena */
  mf_op *op;        /* borrowed: the op of this name, or NULL */
  uint32_t hash;    /* of key: most probes compare only this */
  uint32_t next;    /* the next suffix unique_name tries for this base (it
                     * counts names made, so 32 bits suffice) */
} mf_name_slot;

typedef struct mf_names {
  mf_name_slot *slots;  /* owned: open addressing, cap a power of two */
  size_t cap, count;
} mf_names;

/* The op named `name`, or NULL. */
mf_op *mf_names_op(const mf_names *t, const char *name);

/* A name mf_names_unique made, for mf_names_claim. */
typedef struct mf_unique_name {
  char *name;          /* the base, the caller's buffer or from mf_malloc (see mf_names_unique) */
  int64_t suffix;      /* 0: the base itself */
  uint64_t base_state; /* the FNV state after the base: the hash of base_i continues it */
  uint32_t base_hash;  /* the hashes, not computed again by claim */
  uint32_t name_hash;
} mf_unique_name;

/* TensorFlow's unique_name: `base` when it is free (suffix 0), else base_i
 * for the first i from the base's counter on whose name is free (suffix i).
 * out->name is `base`, `buf` (when the name fits its `size` bytes) or a
 * string from mf_malloc that the caller frees. false when out of memory.
 * Claims nothing. */
bool mf_names_unique(const mf_names *t, const char *base, char *buf, size_t size, mf_unique_name *out);

/* Marks the name u, made by mf_names_unique from `base`, as taken (by `op`,
 * or by a name scope when op is NULL): the base's counter moves past its
 * suffix. Returns the copy of the name in `arena` that the graph keeps, or
 * NULL when out of memory (nothing claimed then). */
const char *mf_names_claim(mf_names *t, mf_arena *arena, const char *base, const mf_unique_name *u, mf_op *op);

/* Whether `name` matches TensorFlow's pattern for op names
 * ([A-Za-z0-9.][A-Za-z0-9_.\-/>]*) or, with `scope`, for name scopes
 * ([A-Za-z0-9_.\-/>]*). */
bool mf_names_valid(const char *name, bool scope);
#define MF_OP_NAME_PATTERN "[A-Za-z0-9.][A-Za-z0-9_.\\-/>]*"
#define MF_SCOPE_NAME_PATTERN "[A-Za-z0-9_.\\-/>]*"

void mf_names_free(mf_names *t);

#endif
