/* registry.c — the op registry: every op family file of ops/ contributes one table. */
#include "graph/op_def.h"

#include <string.h>

/* Strong references: a host linking libmoonflow.a pulls in every op file. */
extern const mf_op_table mf_ops_core, mf_ops_math, mf_ops_array, mf_ops_reduce, mf_ops_matmul,
    mf_ops_random, mf_ops_state, mf_ops_train, mf_ops_nn, mf_ops_index, mf_ops_control,
    mf_ops_debug;

static const mf_op_table *const tables[] = {
    &mf_ops_core, &mf_ops_math, &mf_ops_array, &mf_ops_reduce, &mf_ops_matmul, &mf_ops_random,
    &mf_ops_state, &mf_ops_train, &mf_ops_nn, &mf_ops_index, &mf_ops_control,
    &mf_ops_debug,
};

const mf_op_def *mf_registry_lookup(const char *name) {
  for (size_t t = 0; t < MF_ARRAY_LEN(tables); t++)
    for (size_t i = 0; i < tables[t]->count; i++)
      if (strcmp(tables[t]->defs[i].name, name) == 0) return &tables[t]->defs[i];
  return NULL;
}

bool mf_op_type_registered(const char *type) { return mf_registry_lookup(type) != NULL; }
