/* graph.h — the objects behind mf_graph and mf_op (graph.c, op_desc.c). */
#ifndef MF_GRAPH_GRAPH_H
#define MF_GRAPH_GRAPH_H

#include "core/arena.h"
#include "core/strmap.h"
#include "graph/attrs.h"
#include "graph/names.h"
#include "graph/op_def.h"

#include <stdatomic.h>

/* An op and every array it points to live in its graph's arena, freed with
 * the graph; only the values of tensor and graph attributes are references
 * of their own. */
struct mf_op {
  mf_graph *graph;
  const char *name;
  const char *origin;        /* interned: ops of one line share it */
  const char *device;        /* interned */
  const mf_op_def *def;
  mf_attrs attrs;            /* attribute names interned */
  mf_output *inputs;         /* NULL when there are none */
  mf_op **control_inputs;    /* NULL when there are none */
  mf_dtype *out_dtypes;      /* shared with ops of the same output signature */
  mf_shape *out_shapes;      /* likewise: copy before writing */
  /* Per-op ref inputs, from the ints attr "_ref_inputs" (control flow takes
   * the variables its functions use as refs); NULL: the def's ref_inputs. */
  bool *ref_mask;
  int id;
  int num_inputs;
  int num_control;
  int num_outputs;
  bool outputs_fully_defined; /* inference gave every output a fully defined shape */
};

struct mf_graph {
  atomic_int refcount;
  mf_op **ops;               /* owned array of ops owned by the arena */
  int num_ops, cap_ops;
  mf_arena arena;            /* owned: ops, their names and arrays, interned strings */
  mf_names names;            /* owned: names in use (ops, scopes, unique_name counters) */
  mf_strmap *interned;       /* owned: string -> its copy in the arena (origins, devices, attr names) */
  const char *recent_interned[4]; /* borrowed from interned: the latest strings interned */
  unsigned next_recent;
  mf_strmap *defs;           /* owned: op type -> its registered mf_op_def (a cache) */
  const mf_op_def *recent_defs[4]; /* the latest looked up, compared first */
  unsigned next_recent_def;
  /* References to recent scalar constants' values, shared by the Const ops
   * of equal value and dtype (y = y + 1 in a loop makes one value, not one
   * per op); a slot holds the latest value hashed to it. */
  mf_tensor *scalars[64];
  /* Recent output signatures (dtypes and shapes), in the arena: ops of equal
   * signature share the arrays (mf_op_set_output_shape copies before it
   * writes). A slot holds the latest signature hashed to it. */
  struct mf_signature { int n; mf_dtype *dtypes; mf_shape *shapes; } signatures[256];
  char **scopes;             /* owned name scope stack; each entry "a/b/" */
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
