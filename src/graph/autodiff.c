/* autodiff.c — reverse-mode automatic differentiation: one driver over the
 * gradient rules of the op registry.
 *
 * The driver walks the ops between xs and ys in reverse creation order (op ids
 * are topological), sums the gradient contributions reaching each port (AddN),
 * asks each op's rule for its inputs' gradients, and undoes broadcasting
 * (SumToShape) wherever a gradient's shape may differ from its input's. Rules
 * build ordinary graph ops, so the gradients are differentiable in turn.
 * Ref inputs (a variable an op reads or writes) are edges like any other:
 * ReadVariable passes its gradient to the variable, and the assignments are
 * declared non-differentiable. */
#include "graph/autodiff.h"
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/op_def.h"
#include "graph/graph.h"

#include <stdio.h>
#include <string.h>

/* ---------- builders for rules ---------- */

mf_op_desc *mf_grad_begin(mf_grad_ctx *gc, const char *type) {
  if (!mf_ok(gc->status)) return NULL;
  mf_op_desc *d = mf_op_desc_new(gc->graph, type, NULL);
  if (!d) {
    mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
    return NULL;
  }
  if (gc->origin) mf_op_desc_set_origin(d, gc->origin);
  return d;
}

mf_output mf_grad_finish(mf_grad_ctx *gc, mf_op_desc *d) {
  if (!d) return MF_NO_PORT;
  if (!mf_ok(gc->status)) {  /* an input failed after d was begun */
    mf_op_desc_discard(d);
    return MF_NO_PORT;
  }
  mf_op *op = mf_op_desc_finish(d, gc->status);
  return op ? mf_op_out(op, 0) : MF_NO_PORT;
}

mf_output mf_grad_op1(mf_grad_ctx *gc, const char *type, mf_output a) {
  mf_op_desc *d = mf_grad_begin(gc, type);
  if (d) mf_op_desc_add_input(d, a);
  return mf_grad_finish(gc, d);
}

mf_output mf_grad_op2(mf_grad_ctx *gc, const char *type, mf_output a, mf_output b) {
  mf_op_desc *d = mf_grad_begin(gc, type);
  if (d) {
    mf_op_desc_add_input(d, a);
    mf_op_desc_add_input(d, b);
  }
  return mf_grad_finish(gc, d);
}

mf_output mf_grad_op3(mf_grad_ctx *gc, const char *type, mf_output a, mf_output b, mf_output c) {
  mf_op_desc *d = mf_grad_begin(gc, type);
  if (d) {
    mf_op_desc_add_input(d, a);
    mf_op_desc_add_input(d, b);
    mf_op_desc_add_input(d, c);
  }
  return mf_grad_finish(gc, d);
}

mf_output mf_grad_cast(mf_grad_ctx *gc, mf_output v, mf_dtype dtype) {
  mf_op_desc *d = mf_grad_begin(gc, "Cast");
  if (d) {
    mf_op_desc_add_input(d, v);
    mf_op_desc_set_attr_type(d, "DstT", dtype);
  }
  return mf_grad_finish(gc, d);
}

mf_output mf_grad_scalar(mf_grad_ctx *gc, mf_dtype dtype, double v) {
  if (!mf_ok(gc->status)) return MF_NO_PORT;
  mf_tensor *t = mf_tensor_new(dtype, 0, NULL, gc->status);
  if (!t) return MF_NO_PORT;
  mf_store_double(t->data, dtype, 0, v);
  mf_op_desc *d = mf_grad_begin(gc, "Const");
  if (d) mf_op_desc_set_attr_tensor(d, "value", t);
  mf_tensor_release(t);
  return mf_grad_finish(gc, d);
}

mf_output mf_grad_output_or_zeros(mf_grad_ctx *gc, int i) {
  if (gc->grads[i].op) return gc->grads[i];
  return mf_grad_op1(gc, "ZerosLike", mf_op_out(gc->op, i));
}

mf_op_desc *mf_grad_begin_like(mf_grad_ctx *gc, const char *type, const mf_output *inputs, int n) {
  mf_op_desc *d = mf_grad_begin(gc, type);
  if (!d) return NULL;
  for (int i = 0; i < n; i++) mf_op_desc_add_input(d, inputs[i]);
  const mf_attrs *attrs = &gc->op->attrs;
  for (int i = 0; i < attrs->n; i++) {
    const mf_attr *a = &attrs->items[i];
    switch (a->kind) {
      case MF_ATTR_INT: mf_op_desc_set_attr_int(d, a->name, a->v.i); break;
      case MF_ATTR_FLOAT: mf_op_desc_set_attr_float(d, a->name, a->v.f); break;
      case MF_ATTR_BOOL: mf_op_desc_set_attr_bool(d, a->name, a->v.b); break;
      case MF_ATTR_TYPE: mf_op_desc_set_attr_type(d, a->name, a->v.type); break;
      case MF_ATTR_INTS: mf_op_desc_set_attr_ints(d, a->name, a->v.ints.v, a->v.ints.n); break;
      case MF_ATTR_SHAPE: mf_op_desc_set_attr_shape(d, a->name, a->v.shape.dims, a->v.shape.rank); break;
      case MF_ATTR_STRING: mf_op_desc_set_attr_string(d, a->name, a->v.s); break;
      case MF_ATTR_TENSOR: mf_op_desc_set_attr_tensor(d, a->name, a->v.tensor); break;
      case MF_ATTR_GRAPH: mf_op_desc_set_attr_graph(d, a->name, a->v.graph); break;
    }
  }
  return d;
}

mf_output mf_grad_rebuild(mf_grad_ctx *gc, const char *type, const mf_output *inputs, int n) {
  return mf_grad_finish(gc, mf_grad_begin_like(gc, type, inputs, n));
}

/* ---------- the driver ---------- */

/* The contributions reaching one port. */
typedef struct grad_list {
  mf_output *items;
  int n, cap;
} grad_list;

typedef struct driver {
  mf_graph *g;
  mf_status *s;
  const char *origin;
  int num_ops;          /* ops that existed when the driver started */
  int *port_base;       /* op id -> index of its output 0 in lists */
  grad_list *lists;
  bool *from_x, *to_y;
} driver;

static grad_list *port_list(driver *dr, mf_output o) { return &dr->lists[dr->port_base[o.op->id] + o.index]; }

static mf_code add_contribution(driver *dr, mf_output port, mf_output grad) {
  grad_list *l = port_list(dr, port);
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 2;
    mf_output *items = mf_realloc(l->items, (size_t)cap * sizeof *items);
    if (!items) return mf_status_set(dr->s, MF_RESOURCE_EXHAUSTED, "out of memory in tf.gradients");
    l->items = items;
    l->cap = cap;
  }
  l->items[l->n++] = grad;
  return MF_OK;
}

/* The gradient of a port: its one contribution, or their AddN (then kept as
 * the only one, so a port is summed once). {NULL} when nothing reached it. */
static mf_output summed(driver *dr, mf_grad_ctx *gc, mf_output port) {
  grad_list *l = port_list(dr, port);
  if (l->n == 0) return MF_NO_PORT;
  if (l->n == 1) return l->items[0];
  mf_op_desc *d = mf_grad_begin(gc, "AddN");
  for (int i = 0; d && i < l->n; i++) mf_op_desc_add_input(d, l->items[i]);
  mf_output sum = mf_grad_finish(gc, d);
  if (sum.op) {
    l->items[0] = sum;
    l->n = 1;
  }
  return sum;
}

static bool same_static_shape(const mf_shape *a, const mf_shape *b) {
  if (!mf_shape_fully_defined(a) || !mf_shape_fully_defined(b) || a->rank != b->rank) return false;
  return memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) == 0;
}

/* A rule may hand back a gradient of the broadcast (output) shape; sum it down
 * to the input's shape unless the static shapes prove them equal. */
static mf_output unbroadcast(mf_grad_ctx *gc, mf_output grad, mf_output input) {
  if (!grad.op) return grad;
  if (same_static_shape(mf_port_shape(grad), mf_port_shape(input))) return grad;
  mf_output shape = mf_grad_op1(gc, "Shape", input);
  return mf_grad_op2(gc, "SumToShape", grad, shape);
}

static bool differentiable_dtype(mf_dtype t) { return mf_dtype_is_float(t) || mf_dtype_is_complex(t); }

static mf_code check_ports(mf_graph *g, const char *what, const mf_output *ports, int n, mf_status *s) {
  for (int i = 0; i < n; i++) {
    mf_output o = ports[i];
    if (!o.op || o.op->graph != g || o.index < 0 || o.index >= o.op->num_outputs)
      return mf_status_set(s, MF_INVALID_ARGUMENT,
                           "tf.gradients: %s[%d] is not a tensor of this graph", what, i);
  }
  return MF_OK;
}

/* Marks the ops that depend on some x, and those some y depends on. */
static void mark_paths(driver *dr, const mf_output *xs, int nx, const mf_output *ys, int ny) {
  mf_graph *g = dr->g;
  for (int i = 0; i < nx; i++) dr->from_x[xs[i].op->id] = true;
  for (int id = 0; id < dr->num_ops; id++) {
    const mf_op *op = g->ops[id];
    for (int k = 0; k < op->num_inputs && !dr->from_x[id]; k++)
      if (dr->from_x[op->inputs[k].op->id]) dr->from_x[id] = true;
  }
  for (int i = 0; i < ny; i++) dr->to_y[ys[i].op->id] = true;
  for (int id = dr->num_ops - 1; id >= 0; id--) {
    if (!dr->to_y[id]) continue;
    const mf_op *op = g->ops[id];
    for (int k = 0; k < op->num_inputs; k++) dr->to_y[op->inputs[k].op->id] = true;
  }
}

/* Runs the rule of op (whose outputs' gradients are known) and passes the
 * inputs' gradients on. */
static mf_code backprop_op(driver *dr, const mf_op *op) {
  mf_output grads_inline[8], in_grads_inline[8];
  mf_output *grads = op->num_outputs <= 8 ? grads_inline : mf_calloc((size_t)op->num_outputs, sizeof *grads);
  mf_output *in_grads = op->num_inputs <= 8 ? in_grads_inline : mf_calloc((size_t)op->num_inputs, sizeof *in_grads);
  mf_grad_ctx gc = {.graph = dr->g, .op = op, .grads = grads, .input_grads = in_grads,
                    .origin = dr->origin, .status = dr->s};
  if (!grads || !in_grads) {
    mf_status_set(dr->s, MF_RESOURCE_EXHAUSTED, "out of memory in tf.gradients");
    goto done;
  }
  bool any = false;
  for (int i = 0; i < op->num_outputs; i++) {
    grads[i] = summed(dr, &gc, mf_op_out(op, i));
    any |= grads[i].op != NULL;
  }
  bool wanted = false;  /* does any float input lead back to an x? */
  for (int k = 0; k < op->num_inputs; k++) {
    in_grads[k] = MF_NO_PORT;
    mf_output in = op->inputs[k];
    wanted |= dr->from_x[in.op->id] && differentiable_dtype(mf_port_dtype(in));
  }
  if (!any || !wanted || !mf_ok(dr->s) || (op->def->flags & MF_OP_NOT_DIFFERENTIABLE)) goto done;
  if (!op->def->grad) {
    mf_status_set(dr->s, MF_UNIMPLEMENTED,
                  "No gradient defined for operation '%s' (op type: %s); it lies between the xs "
                  "and ys of tf.gradients: wrap its input in tf.stop_gradient if no gradient "
                  "should flow there",
                  op->name, op->def->name);
    mf_status_append_origin(dr->s, op);
    goto done;
  }
  char scope[1100];
  snprintf(scope, sizeof scope, "%s_grad", op->name);
  if (!mf_graph_push_name_scope(dr->g, scope, dr->s)) goto done;
  if (op->def->grad(&gc) == MF_OK && mf_ok(dr->s)) {
    for (int k = 0; k < op->num_inputs && mf_ok(dr->s); k++) {
      mf_output in = op->inputs[k];
      if (!in_grads[k].op || !dr->from_x[in.op->id] || !differentiable_dtype(mf_port_dtype(in)))
        continue;
      mf_output g = unbroadcast(&gc, in_grads[k], in);
      if (g.op && mf_port_dtype(g) != mf_port_dtype(in))
        mf_status_set(dr->s, MF_INTERNAL, "the gradient rule of %s gave input %d dtype %s instead of %s",
                      op->def->name, k, mf_dtype_name(mf_port_dtype(g)), mf_dtype_name(mf_port_dtype(in)));
      else if (g.op)
        add_contribution(dr, in, g);
    }
  }
  mf_graph_pop_name_scope(dr->g);
  if (!mf_ok(dr->s)) mf_status_append_origin(dr->s, op);
done:
  if (grads != grads_inline) mf_free(grads);
  if (in_grads != in_grads_inline) mf_free(in_grads);
  return dr->s->code;
}

mf_code mf_gradients(mf_graph *g, const mf_output *ys, int ny, const mf_output *xs, int nx,
                     const mf_output *grad_ys, mf_output *dxs, const char *origin, mf_status *s) {
  mf_status_clear(s);
  for (int i = 0; i < nx; i++) dxs[i] = MF_NO_PORT;
  if (check_ports(g, "ys", ys, ny, s) || check_ports(g, "xs", xs, nx, s) ||
      (grad_ys && check_ports(g, "grad_ys", grad_ys, ny, s)))
    return s->code;
  for (int j = 0; j < ny; j++) {
    mf_dtype t = mf_port_dtype(ys[j]);
    if (!differentiable_dtype(t))
      return mf_status_set(s, MF_INVALID_ARGUMENT,
                           "tf.gradients: y '%s:%d' has dtype %s; only float32 and float64 tensors "
                           "have gradients (tf.cast it first)",
                           ys[j].op->name, ys[j].index, mf_dtype_name(t));
    if (grad_ys && mf_port_dtype(grad_ys[j]) != t)
      return mf_status_set(s, MF_INVALID_ARGUMENT, "tf.gradients: grad_ys[%d] must have y's dtype %s",
                           j, mf_dtype_name(t));
  }
  if (g->finalized)
    return mf_status_set(s, MF_FAILED_PRECONDITION,
                         "Graph is finalized and cannot be modified (tf.gradients adds ops)%s%s",
                         origin ? " at " : "", origin ? origin : "");
  driver dr = {.g = g, .s = s, .origin = origin, .num_ops = g->num_ops};
  int n = dr.num_ops, ports = 0;
  dr.port_base = mf_malloc((size_t)(n ? n : 1) * sizeof *dr.port_base);
  dr.from_x = mf_calloc((size_t)(n ? n : 1), sizeof *dr.from_x);
  dr.to_y = mf_calloc((size_t)(n ? n : 1), sizeof *dr.to_y);
  if (dr.port_base)
    for (int id = 0; id < n; id++) {
      dr.port_base[id] = ports;
      ports += g->ops[id]->num_outputs;
    }
  dr.lists = mf_calloc((size_t)(ports ? ports : 1), sizeof *dr.lists);
  if (!dr.port_base || !dr.from_x || !dr.to_y || !dr.lists) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory in tf.gradients");
    goto done;
  }
  mark_paths(&dr, xs, nx, ys, ny);
  if (!mf_graph_push_name_scope(g, "gradients", s)) goto done;
  mf_grad_ctx top = {.graph = g, .origin = origin, .status = s};
  for (int j = 0; j < ny && mf_ok(s); j++) {
    mf_output seed = grad_ys ? grad_ys[j] : mf_grad_op1(&top, "OnesLike", ys[j]);
    if (seed.op) add_contribution(&dr, ys[j], seed);
  }
  for (int id = n - 1; id >= 0 && mf_ok(s); id--)
    if (dr.from_x[id] && dr.to_y[id]) backprop_op(&dr, g->ops[id]);
  for (int i = 0; i < nx && mf_ok(s); i++) {
    mf_output x = xs[i];
    if (differentiable_dtype(mf_port_dtype(x))) dxs[i] = summed(&dr, &top, x);
  }
  mf_graph_pop_name_scope(g);
  if (!mf_ok(s))
    for (int i = 0; i < nx; i++) dxs[i] = MF_NO_PORT;
done:
  if (dr.lists)
    for (int i = 0; i < ports; i++) mf_free(dr.lists[i].items);
  mf_free(dr.lists);
  mf_free(dr.port_base);
  mf_free(dr.from_x);
  mf_free(dr.to_y);
  return s->code;
}
