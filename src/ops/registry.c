/* registry.c — the op registry: every op family file of ops/ contributes one table. */
#include "graph/op_def.h"

#include <string.h>

/* Strong references: a host linking libmoonflow.a pulls in every op file. */
extern const mf_op_table mf_ops_core, mf_ops_math, mf_ops_array, mf_ops_reduce, mf_ops_matmul,
    mf_ops_random, mf_ops_state, mf_ops_train, mf_ops_nn, mf_ops_index, mf_ops_select, mf_ops_call,
    mf_ops_cond, mf_ops_while, mf_ops_tensor_array, mf_ops_debug, mf_ops_segment, mf_ops_linalg,
    mf_ops_strings, mf_ops_parsing;

static const mf_op_table *const tables[] = {
    &mf_ops_core, &mf_ops_math, &mf_ops_array, &mf_ops_reduce, &mf_ops_matmul, &mf_ops_random,
    &mf_ops_state, &mf_ops_train, &mf_ops_nn, &mf_ops_index, &mf_ops_select, &mf_ops_call,
    &mf_ops_cond, &mf_ops_while, &mf_ops_tensor_array, &mf_ops_debug, &mf_ops_segment, &mf_ops_linalg,
    &mf_ops_strings, &mf_ops_parsing,
};

const mf_op_def *mf_registry_lookup(const char *name) {
  for (size_t t = 0; t < MF_ARRAY_LEN(tables); t++)
    for (size_t i = 0; i < tables[t]->count; i++)
      if (strcmp(tables[t]->defs[i].name, name) == 0) return &tables[t]->defs[i];
  return NULL;
}

bool mf_op_type_registered(const char *type) { return mf_registry_lookup(type) != NULL; }

int mf_registry_num_ops(void) {
  size_t n = 0;
  for (size_t t = 0; t < MF_ARRAY_LEN(tables); t++) n += tables[t]->count;
  return (int)n;
}

const char *mf_registry_op_name(int i) {
  for (size_t t = 0; i >= 0 && t < MF_ARRAY_LEN(tables); t++) {
    if ((size_t)i < tables[t]->count) return tables[t]->defs[i].name;
    i -= (int)tables[t]->count;
  }
  return NULL;
}

bool mf_registry_op_info(const char *type, mf_op_info *out) {
  const mf_op_def *def = type ? mf_registry_lookup(type) : NULL;
  if (!def) return false;
  *out = (mf_op_info){
      .num_inputs = def->num_inputs,
      .num_outputs = def->num_outputs,
      .variadic_inputs = def->flags & MF_OP_VARIADIC_INPUTS,
      .stateful = def->flags & MF_OP_STATEFUL,
      .has_shape_fn = def->infer != NULL,
      .has_gradient = def->grad != NULL,
      .not_differentiable = def->flags & MF_OP_NOT_DIFFERENTIABLE,
      .ref_inputs = def->ref_inputs,
      .value_inputs = def->value_inputs,
      .host_memory_inputs = def->value_inputs | def->host_inputs,
      .constant = def->flags & MF_OP_CONSTANT,
      .variable = def->flags & MF_OP_VARIABLE,
      .internal = def->flags & MF_OP_INTERNAL,
  };
  for (int d = 0; d < MF_NUM_DEVICE_TYPES; d++) out->has_kernel[d] = def->kernel[d] != NULL;
  return true;
}
