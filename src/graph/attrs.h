/* attrs.h — op attributes and their typed getters (attrs.c). */
#ifndef MF_GRAPH_ATTRS_H
#define MF_GRAPH_ATTRS_H

#include "core/base.h"

#include <string.h>

typedef struct mf_attr {
  char *name;
  mf_attr_kind kind;
  union {
    int64_t i;
    double f;
    bool b;
    mf_dtype type;
    struct { int64_t *v; int n; } ints;
    mf_shape shape;
    char *s;
    mf_tensor *tensor;
    mf_graph *graph;     /* function-valued attribute: a subgraph */
  } v;
} mf_attr;

typedef struct mf_attrs { mf_attr *items; int n; } mf_attrs;
/* Inline, so that op libraries (src/mpi/) read attributes without a call into the engine. */
static inline const mf_attr *mf_attrs_find(const mf_attrs *a, const char *name, mf_attr_kind kind) {
  for (int i = 0; i < a->n; i++)
    if (a->items[i].kind == kind && strcmp(a->items[i].name, name) == 0) return &a->items[i];
  return NULL;
}
/* Convenience getters with defaults, for shape functions and kernels. */
int64_t mf_attr_int(const mf_attrs *a, const char *name, int64_t dflt);
double mf_attr_float(const mf_attrs *a, const char *name, double dflt);
bool mf_attr_bool(const mf_attrs *a, const char *name, bool dflt);
mf_dtype mf_attr_type(const mf_attrs *a, const char *name, mf_dtype dflt);
/* Returns the count and sets *out, or -1 when absent. */
int mf_attr_ints(const mf_attrs *a, const char *name, const int64_t **out);

#endif
