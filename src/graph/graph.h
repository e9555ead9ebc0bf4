/* graph.h — the objects behind mf_graph and mf_op (graph.c, op_desc.c). */
#ifndef MF_GRAPH_GRAPH_H
#define MF_GRAPH_GRAPH_H

#include "core/strmap.h"
#include "graph/attrs.h"
#include "graph/op_def.h"

#include <stdatomic.h>

struct mf_op {
  mf_graph *graph;
  int id;
  char *name;
  char *origin;
  char *device;
  const mf_op_def *def;
  mf_attrs attrs;
  int num_inputs;
  mf_output *inputs;
  int num_control;
  mf_op **control_inputs;
  int num_outputs;
  mf_dtype *out_dtypes;
  mf_shape *out_shapes;
  bool outputs_fully_defined; /* inference gave every output a fully defined shape */
  /* Per-op ref inputs, from the ints attr "_ref_inputs" (control flow takes
   * the variables its functions use as refs); NULL: the def's ref_inputs. */
  bool *ref_mask;
};

struct mf_graph {
  atomic_int refcount;
  mf_op **ops;
  int num_ops, cap_ops;
  mf_strmap *names;          /* op name -> op */
  mf_strmap *name_counts;    /* base name -> next suffix (TensorFlow's unique_name) */
  char **scopes;             /* name scope stack; each entry "a/b/" */
  int num_scopes, cap_scopes;
  bool finalized;
  int64_t seed;
  mf_host host;              /* callbacks of LuaFunc and Print ops (ops/debug.c) */
};

static inline mf_output mf_op_in(const mf_op *op, int i) { return op->inputs[i]; }
/* A port: its dtype and static shape. MF_NO_PORT has no op: "no gradient", or
 * what a gradient builder returns after a failure. */
static inline mf_dtype mf_port_dtype(mf_output o) { return o.op->out_dtypes[o.index]; }
static inline const mf_shape *mf_port_shape(mf_output o) { return &o.op->out_shapes[o.index]; }
#define MF_NO_PORT ((mf_output){NULL, 0})
static inline bool mf_op_is_ref_input(const mf_op *op, int k) {
  if (op->ref_mask) return op->ref_mask[k];
  return k < 32 && (op->def->ref_inputs >> k & 1u);
}
/* Sets an ints attribute of an existing op (control flow records there what
 * its gradient needs kept). Attributes may change after plans were built:
 * kernels read them when they run. */
mf_code mf_op_set_attr_ints(mf_op *op, const char *name, const int64_t *v, int n, mf_status *s);
static inline mf_output mf_op_out(const mf_op *op, int i) { mf_output o = {(mf_op *)op, i}; return o; }

/* Sets the error "<op>: ... (created at <origin>)" style suffix. */
void mf_status_append_origin(mf_status *s, const mf_op *op);

/* Frees an op description without building it. */
void mf_op_desc_discard(mf_op_desc *d);

#endif
