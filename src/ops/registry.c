/* registry.c — the op registry: every op family file of ops/ contributes one table,
 * and op libraries loaded at run time (src/mpi/) add theirs (mf_registry_add). */
#include "core/status.h"
#include "graph/op_def.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* Strong references: a host linking libmoonflow.a pulls in every op file. */
extern const mf_op_table mf_ops_core, mf_ops_math, mf_ops_array, mf_ops_reduce, mf_ops_matmul,
    mf_ops_random, mf_ops_state, mf_ops_train, mf_ops_nn, mf_ops_index, mf_ops_select, mf_ops_call,
    mf_ops_cond, mf_ops_while, mf_ops_tensor_array, mf_ops_debug, mf_ops_segment, mf_ops_linalg,
    mf_ops_image, mf_ops_image_codec, mf_ops_sparse, mf_ops_strings, mf_ops_parsing, mf_ops_signal,
    mf_ops_summary;

static const mf_op_table *const tables[] = {
    &mf_ops_core, &mf_ops_math, &mf_ops_array, &mf_ops_reduce, &mf_ops_matmul, &mf_ops_random,
    &mf_ops_state, &mf_ops_train, &mf_ops_nn, &mf_ops_index, &mf_ops_select, &mf_ops_call,
    &mf_ops_cond, &mf_ops_while, &mf_ops_tensor_array, &mf_ops_debug, &mf_ops_segment, &mf_ops_linalg,
    &mf_ops_image, &mf_ops_image_codec, &mf_ops_sparse, &mf_ops_strings, &mf_ops_parsing, &mf_ops_signal, &mf_ops_summary,
};

/* The op libraries' tables. Readers take no lock: a table is stored before
 * the count that publishes it, and entries never change once published. */
enum { MAX_ADDED_TABLES = 8 };
static const mf_op_table *added[MAX_ADDED_TABLES];
static atomic_int num_added;
static pthread_mutex_t add_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t num_tables(void) { return MF_ARRAY_LEN(tables) + (size_t)atomic_load(&num_added); }
static const mf_op_table *table_at(size_t t) {
  return t < MF_ARRAY_LEN(tables) ? tables[t] : added[t - MF_ARRAY_LEN(tables)];
}

const mf_op_def *mf_registry_lookup(const char *name) {
  for (size_t t = 0, n = num_tables(); t < n; t++) {
    const mf_op_table *table = table_at(t);
    for (size_t i = 0; i < table->count; i++)
      if (strcmp(table->defs[i].name, name) == 0) return &table->defs[i];
  }
  return NULL;
}

mf_code mf_registry_add(const mf_op_table *table, const char *abi_version, mf_status *s) {
  if (!table || !abi_version) return mf_status_set(s, MF_INVALID_ARGUMENT, "mf_registry_add: no table");
  if (strcmp(abi_version, MF_VERSION) != 0)
    return mf_status_set(s, MF_FAILED_PRECONDITION,
                         "mf_registry_add: the op library was built against moonflow %s, this library is %s; "
                         "rebuild it with this tree",
                         abi_version, MF_VERSION);
  pthread_mutex_lock(&add_lock);
  mf_code code = MF_OK;
  size_t n = num_tables();
  for (size_t t = MF_ARRAY_LEN(tables); t < n; t++)
    if (table_at(t) == table) goto done; /* loaded again (another Lua state): already there */
  for (size_t i = 0; i < table->count && code == MF_OK; i++) {
    const mf_op_def *def = &table->defs[i];
    if (!def->name || !def->infer)
      code = mf_status_set(s, MF_INVALID_ARGUMENT, "mf_registry_add: entry %zu has no name or no shape function", i);
    else if (mf_registry_lookup(def->name))
      code = mf_status_set(s, MF_ALREADY_EXISTS, "mf_registry_add: op type '%s' is already registered", def->name);
  }
  if (code == MF_OK && n - MF_ARRAY_LEN(tables) == MAX_ADDED_TABLES)
    code = mf_status_set(s, MF_RESOURCE_EXHAUSTED, "mf_registry_add: at most %d op libraries", MAX_ADDED_TABLES);
  if (code == MF_OK) {
    added[n - MF_ARRAY_LEN(tables)] = table;
    atomic_fetch_add(&num_added, 1);
  }
done:
  pthread_mutex_unlock(&add_lock);
  return code;
}

bool mf_op_type_registered(const char *type) { return mf_registry_lookup(type) != NULL; }

int mf_registry_num_ops(void) {
  size_t n = 0;
  for (size_t t = 0, nt = num_tables(); t < nt; t++) n += table_at(t)->count;
  return (int)n;
}

const char *mf_registry_op_name(int i) {
  for (size_t t = 0, nt = num_tables(); i >= 0 && t < nt; t++) {
    const mf_op_table *table = table_at(t);
    if ((size_t)i < table->count) return table->defs[i].name;
    i -= (int)table->count;
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
      .elementwise = def->element_loop != NULL,
      .gpu_dtypes = def->cuda_dtypes,
  };
  for (int d = 0; d < MF_NUM_DEVICE_TYPES; d++) out->has_kernel[d] = def->kernel[d] != NULL;
  return true;
}
