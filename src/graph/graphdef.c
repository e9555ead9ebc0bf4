/* graphdef.c — enumerating an op's attributes, for writing graph files
 * (lua/moonflow/graph_io.lua) and for tools that inspect graphs. */
#include "graph/attrs.h"
#include "graph/graph.h"

int mf_op_num_attrs(const mf_op *op) { return op->attrs.n; }

const char *mf_op_attr_name(const mf_op *op, int i) {
  return i >= 0 && i < op->attrs.n ? op->attrs.items[i].name : NULL;
}

mf_attr_kind mf_op_attr_kind(const mf_op *op, int i) {
  return i >= 0 && i < op->attrs.n ? op->attrs.items[i].kind : MF_ATTR_INT;
}

bool mf_op_attr_shape(const mf_op *op, const char *name, mf_shape *out) {
  const mf_attr *at = mf_attrs_find(&op->attrs, name, MF_ATTR_SHAPE);
  if (at) *out = at->v.shape;
  return at != NULL;
}

mf_graph *mf_op_attr_graph(const mf_op *op, const char *name) {
  const mf_attr *at = mf_attrs_find(&op->attrs, name, MF_ATTR_GRAPH);
  return at ? at->v.graph : NULL;
}
