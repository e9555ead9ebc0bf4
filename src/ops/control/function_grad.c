/* function_grad.c — gradients of functions: the gradient rules of If and
 * While (ops/control.h declares them for cond.c and while.c).
 *
 * Gradients (checkpoint and recompute). The gradient of a function is built
 * once, by mf_gradients on the function graph itself: its ys are the float
 * results, its grad_ys new _Arg ops, its xs the args. Running that gradient
 * function recomputes the forward values it needs from the args, except for
 * "stash" ports, whose values the forward op keeps: for a loop, the loop
 * variables that the gradient reads (one checkpoint per iteration); for both
 * If and While, the outputs of stateful ops (random draws, variable reads,
 * nested control flow with state) so that a recompute sees the same values,
 * and Shape/Size/Rank outputs, which are tiny and spare keeping the tensor
 * they describe. The forward op keeps these in a stash: its last output, an
 * int64 scalar holding the bytes kept (a value a fetch may print), to which
 * the stash itself is attached; it is filled only when something reads that
 * output (a gradient op), so `back_prop = false`, or a run without
 * gradients, keeps nothing. The gradient of If is an If of the branches'
 * gradient functions (only the taken branch contributes), differentiable in
 * turn like any If (to any order); the gradient of
 * While is WhileGrad, which runs the body's gradient function backwards over
 * the stashed iterations, summing the gradients of captured tensors. */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "ops/control/control.h"

#include <stdio.h>
#include <string.h>

/* ---------- gradients of functions ---------- */

/* A new op of type `type` in function graph g (an argument or stand-in for a
 * gradient), copying dtype and shape (and _var_id) from `like`. */
static mf_output new_arg_like(mf_grad_ctx *gc, mf_graph *g, const char *type, mf_dtype dtype,
                              const mf_shape *shape, const mf_op *var) {
  mf_op_desc *d = mf_op_desc_new(g, type, type[0] == '_' ? "gradient_arg" : var->name);
  mf_output none = {NULL, 0};
  if (!d) {
    mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
    return none;
  }
  mf_op_desc_set_attr_type(d, "dtype", dtype);
  if (shape->rank >= 0) mf_op_desc_set_attr_shape(d, "shape", shape->dims, shape->rank);
  int64_t id;
  if (var && mf_op_attr_int(var, "_var_id", &id)) mf_op_desc_set_attr_int(d, "_var_id", id);
  if (gc->origin) mf_op_desc_set_origin(d, gc->origin);
  mf_op *op = mf_op_desc_finish(d, gc->status);
  return op ? mf_op_out(op, 0) : none;
}

/* A one-input op built in function graph g. */
static mf_output fn_op1(mf_grad_ctx *gc, mf_graph *g, const char *type, mf_output a) {
  mf_grad_ctx inner = *gc;
  inner.graph = g;
  return mf_grad_op1(&inner, type, a);
}

/* Builds, inside function graph g, the gradient of ys with respect to xs:
 * new _Arg ops take the ys' gradients (their ids go to grad_args), dxs gets
 * one port per x ({NULL} when no y depends on it). */
static mf_code fn_gradient(mf_grad_ctx *gc, mf_graph *g, const mf_output *ys, int ny, const mf_output *xs,
                           int nx, int64_t *grad_args, mf_output *dxs) {
  mf_output *gys = mf_malloc((size_t)(ny + 1) * sizeof *gys);
  if (!gys) return mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
  for (int i = 0; i < ny && mf_ok(gc->status); i++) {
    gys[i] = new_arg_like(gc, g, "_Arg", mf_port_dtype(ys[i]), mf_port_shape(ys[i]), NULL);
    if (gys[i].op) grad_args[i] = gys[i].op->id;
  }
  if (mf_ok(gc->status)) mf_gradients(g, ys, ny, xs, nx, gys, dxs, gc->origin, gc->status);
  mf_free(gys);
  return gc->status->code;
}

/* The number of ops function graph g had before gradients were built in it
 * (its forward ops), recorded in the forward op's attribute `name` the
 * first time. */
static int forward_ops(mf_grad_ctx *gc, const char *name, const mf_graph *g) {
  const int64_t *v;
  if (mf_attr_ints(&gc->op->attrs, name, &v) == 1) return (int)v[0];
  int64_t n = g->num_ops;
  mf_op_set_attr_ints((mf_op *)gc->op, name, &n, 1, gc->status);
  return (int)n;
}

static bool is_shape_op(const mf_op *op) {
  const char *t = op->def->name;
  return !strcmp(t, "Shape") || !strcmp(t, "Size") || !strcmp(t, "Rank") || !strcmp(t, "_TARows");
}

/* Whether the forward run can compute op: a forward op (id below nfwd), or
 * a Shape, Size or Rank a gradient rule made of one (or a _TARows of a
 * TensorArray's meta: the buffer rows of its elements). */
static bool forward_computable(const mf_op *op, int nfwd) {
  while (op->id >= nfwd) {
    if (!is_shape_op(op)) return false;
    op = op->inputs[0].op;
  }
  return true;
}

/* The ports of g whose values computing `outs` needs kept, as pairs sorted by
 * op id (*ports, new, may be NULL when none): outputs of `checkpoint` ops
 * (loop-variable arguments), of stateful forward ops, and, with keep_shapes,
 * of Shape, Size and Rank of forward values. Ops marked `fed` are given; ops
 * from id nfwd on were made by gradient rules and are never kept. */
static mf_code keep_list(mf_grad_ctx *gc, mf_graph *g, const mf_output *outs, int nout, const bool *fed,
                         const bool *checkpoint, bool keep_shapes, int nfwd, int64_t **ports, int *nports) {
  int n = g->num_ops, total = 0;
  int *base = mf_malloc((size_t)(n + 1) * sizeof *base);
  for (int id = 0; base && id < n; id++) {
    base[id] = total;
    total += g->ops[id]->num_outputs;
  }
  bool *need = mf_calloc((size_t)(total + 1), sizeof *need);
  int64_t *list = mf_malloc((size_t)(2 * total + 2) * sizeof *list);
  *ports = NULL;
  *nports = 0;
  if (!base || !need || !list) {
    mf_free(base);
    mf_free(need);
    mf_free(list);
    return mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
  }
  for (int i = 0; i < nout; i++) need[base[outs[i].op->id] + outs[i].index] = true;
  int count = 0;
  for (int id = n - 1; id >= 0; id--) {
    const mf_op *op = g->ops[id];
    bool any = false;
    for (int o = 0; o < op->num_outputs; o++) any |= need[base[id] + o];
    if (!any || fed[id]) continue;
    bool keep = (id < nfwd && (checkpoint[id] || mf_is_stateful(op, 0))) ||
                (keep_shapes && is_shape_op(op) && forward_computable(op, nfwd));
    if (keep) {
      for (int o = op->num_outputs - 1; o >= 0; o--)
        if (need[base[id] + o]) list[2 * count] = id, list[2 * count + 1] = o, count++;
      continue;
    }
    for (int k = 0; k < op->num_inputs; k++)
      if (!mf_op_is_ref_input(op, k)) need[base[op->inputs[k].op->id] + op->inputs[k].index] = true;
  }
  /* Found in decreasing id order: reverse. */
  for (int i = 0; i < count / 2; i++)
    for (int c = 0; c < 2; c++) {
      int64_t tmp = list[2 * i + c];
      list[2 * i + c] = list[2 * (count - 1 - i) + c];
      list[2 * (count - 1 - i) + c] = tmp;
    }
  mf_free(base);
  mf_free(need);
  if (count == 0) {
    mf_free(list);
    return MF_OK;
  }
  *ports = list;
  *nports = count;
  return MF_OK;
}

/* Adds `ports` to the forward op's attribute `name` (the ports its stash
 * keeps), leaving those already listed. */
static mf_code add_kept_ports(mf_grad_ctx *gc, const char *name, const int64_t *ports, int n) {
  mf_op *op = (mf_op *)gc->op;
  const int64_t *have;
  int nhave = mf_attr_ints(&op->attrs, name, &have);
  if (nhave < 0) nhave = 0;
  nhave /= 2;
  int64_t *all = mf_malloc((size_t)(2 * (nhave + n) + 2) * sizeof *all);
  if (!all) return mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
  if (nhave) memcpy(all, have, (size_t)(2 * nhave) * sizeof *all);
  int count = nhave;
  for (int i = 0; i < n; i++) {
    bool dup = false;
    for (int j = 0; j < count && !dup; j++) dup = all[2 * j] == ports[2 * i] && all[2 * j + 1] == ports[2 * i + 1];
    if (!dup) all[2 * count] = ports[2 * i], all[2 * count + 1] = ports[2 * i + 1], count++;
  }
  if (count > nhave) mf_op_set_attr_ints(op, name, all, 2 * count, gc->status);
  mf_free(all);
  return gc->status->code;
}

static void set_ports_attr(mf_op_desc *d, const char *name, const mf_output *ports, int n) {
  int64_t *v = mf_malloc((size_t)(2 * n + 2) * sizeof *v);
  if (!v) return;  /* the empty attribute then fails the op's check */
  for (int i = 0; i < n; i++) v[2 * i] = ports[i].op->id, v[2 * i + 1] = ports[i].index;
  mf_op_desc_set_attr_ints(d, name, v, 2 * n);
  mf_free(v);
}

static void copy_attr_ints(mf_op_desc *d, const mf_op *from, const char *name, const char *to) {
  const int64_t *v;
  int n = mf_attr_ints(&from->attrs, name, &v);
  if (n > 0) mf_op_desc_set_attr_ints(d, to, v, n);
}

/* If: an If over the branches' gradient functions. A gradient If is an If
 * like any other (its branches are the forward branches' graphs, their
 * gradient ops included, over the forward inputs and the incoming
 * gradients), so its gradient is built the same way, its stash input aside:
 * the ports it is fed from the forward If's stash (its *_unstash) are
 * checkpoints, kept in its own stash when the new gradient needs them, so
 * that the new gradient If reads one stash, its forward op's, as always. */
mf_code mf_if_grad(mf_grad_ctx *gc) {
  const mf_op *op = gc->op;
  bool of_gradient = mf_attr_bool(&op->attrs, "gradient", false);
  int nin = op->num_inputs - 1 - of_gradient, nres = op->num_outputs - 1;
  fn_attr br[2];
  mf_fn_get(&op->attrs, "then", &br[0]);
  mf_fn_get(&op->attrs, "else", &br[1]);
  int ny = 0, nx = 0;
  size_t sz = (size_t)(nin + nres + 1);
  int *yi = mf_malloc(sz * sizeof *yi), *xi = mf_malloc(sz * sizeof *xi);
  mf_output *ys = mf_malloc(sz * sizeof *ys);
  mf_output *dx[2] = {mf_calloc(sz, sizeof(mf_output)), mf_calloc(sz, sizeof(mf_output))};
  int64_t *gargs[2] = {mf_malloc(sz * sizeof(int64_t)), mf_malloc(sz * sizeof(int64_t))};
  int64_t *in[2] = {mf_malloc(2 * sz * sizeof(int64_t)), mf_malloc(2 * sz * sizeof(int64_t))};
  int64_t *kept[2] = {NULL, NULL};
  int nkept[2] = {0, 0}, nfwd[2] = {0, 0};
  bool *fed = NULL, *ckpt = NULL;
  if (!yi || !xi || !ys || !dx[0] || !dx[1] || !gargs[0] || !gargs[1] || !in[0] || !in[1]) {
    mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
    goto done;
  }
  for (int i = 0; i < nres; i++)
    if (gc->grads[i].op && mf_dtype_is_float(op->out_dtypes[i])) yi[ny++] = i;
  for (int k = 0; k < nin; k++)
    if (mf_dtype_is_float(mf_port_dtype(op->inputs[1 + k]))) xi[nx++] = k;
  if (ny == 0 || nx == 0) goto done;
  bool *conn = mf_calloc((size_t)nx + 1, sizeof *conn);
  if (!conn) {
    mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
    goto done;
  }
  for (int b = 0; b < 2 && mf_ok(gc->status); b++) {
    fn_attr *f = &br[b];
    /* xs: the branch's arguments for the float inputs it uses. */
    int used = 0;
    mf_output *bx = mf_malloc((size_t)nx * sizeof *bx + 1);
    mf_output *bdx = mf_calloc((size_t)nx + 1, sizeof *bdx);
    if (!bx || !bdx) {
      mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
      mf_free(bx);
      mf_free(bdx);
      break;
    }
    for (int j = 0; j < nx; j++)
      if (f->in[xi[j]] >= 0) bx[used++] = mf_op_out(mf_fn_op(f, f->in[xi[j]]), 0);
    for (int i = 0; i < ny; i++) ys[i] = mf_fn_result(f, yi[i]);
    nfwd[b] = forward_ops(gc, b == 0 ? "then_fwd" : "else_fwd", f->g);
    fn_gradient(gc, f->g, ys, ny, bx, used, gargs[b], bdx);
    for (int j = 0, u = 0; j < nx; j++) {
      dx[b][j] = f->in[xi[j]] >= 0 ? bdx[u++] : MF_NO_PORT;
      if (dx[b][j].op) conn[j] = true;
    }
    mf_free(bx);
    mf_free(bdx);
  }
  /* Each branch returns a gradient for every input some branch connects. */
  int nconn = 0;
  for (int j = 0; j < nx; j++) nconn += conn[j];
  for (int b = 0; b < 2 && mf_ok(gc->status); b++) {
    fn_attr *f = &br[b];
    for (int k = 0; k < nin; k++) in[b][k] = f->in[k];
    for (int j = 0; j < nx && mf_ok(gc->status); j++) {
      if (!conn[j] || dx[b][j].op) continue;
      int k = xi[j];
      mf_output arg;
      if (f->in[k] >= 0) {
        arg = mf_op_out(mf_fn_op(f, f->in[k]), 0);
      } else {
        mf_output src = op->inputs[1 + k];
        bool ref = mf_op_is_ref_input(op, 1 + k);
        const fn_attr *other = &br[1 - b];
        arg = new_arg_like(gc, f->g, ref ? "VariableV2" : "_Arg", mf_port_dtype(src), mf_port_shape(src),
                           ref ? mf_fn_op(other, other->in[k]) : NULL);
        if (arg.op) in[b][k] = arg.op->id;
      }
      dx[b][j] = fn_op1(gc, f->g, "ZerosLike", arg);
    }
    for (int i = 0; i < ny; i++) in[b][nin + i] = gargs[b][i];
    if (!mf_ok(gc->status)) break;
    /* What the gradient function needs kept from the forward run. */
    fed = mf_calloc((size_t)f->g->num_ops + 1, sizeof *fed);
    ckpt = mf_calloc((size_t)f->g->num_ops + 1, sizeof *ckpt);
    mf_output *outs = mf_malloc((size_t)nx * sizeof *outs + 1);
    if (!fed || !ckpt || !outs) {
      mf_free(outs);
      mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
      break;
    }
    for (int k = 0; k < nin + ny; k++)
      if (in[b][k] >= 0) fed[in[b][k]] = true;
    const int64_t *unstash;
    int nunstash = of_gradient ? mf_attr_ints(&op->attrs, b == 0 ? "then_unstash" : "else_unstash", &unstash) : 0;
    for (int i = 0; i + 1 < nunstash; i += 2) ckpt[unstash[i]] = true;
    int no = 0;
    for (int j = 0; j < nx; j++)
      if (conn[j]) outs[no++] = dx[b][j];
    keep_list(gc, f->g, outs, no, fed, ckpt, false, nfwd[b], &kept[b], &nkept[b]);
    mf_free(outs);
    mf_free(fed);
    mf_free(ckpt);
    fed = ckpt = NULL;
    if (mf_ok(gc->status) && nkept[b]) add_kept_ports(gc, b == 0 ? "then_stash" : "else_stash", kept[b], nkept[b]);
  }
  if (!mf_ok(gc->status)) {
    mf_free(conn);
    goto done;
  }
  mf_op_desc *d = mf_grad_begin(gc, "If");
  if (d) {
    for (int k = 0; k <= nin; k++) mf_op_desc_add_input(d, op->inputs[k]);
    for (int i = 0; i < ny; i++) mf_op_desc_add_input(d, gc->grads[yi[i]]);
    mf_op_desc_add_input(d, mf_op_out(op, nres));
    static const char *const names[2] = {"then", "else"};
    for (int b = 0; b < 2; b++) {
      char name[32];
      mf_op_desc_set_attr_graph(d, names[b], br[b].g);
      snprintf(name, sizeof name, "%s_in", names[b]);
      mf_op_desc_set_attr_ints(d, name, in[b], nin + ny);
      mf_output *outs = mf_malloc((size_t)nconn * sizeof *outs + 1);
      int no = 0;
      for (int j = 0; outs && j < nx; j++)
        if (conn[j]) outs[no++] = dx[b][j];
      snprintf(name, sizeof name, "%s_out", names[b]);
      if (outs) set_ports_attr(d, name, outs, no);
      mf_free(outs);
      snprintf(name, sizeof name, "%s_unstash", names[b]);
      if (nkept[b]) mf_op_desc_set_attr_ints(d, name, kept[b], 2 * nkept[b]);
    }
    mf_op_desc_set_attr_bool(d, "gradient", true);
    copy_attr_ints(d, op, "_ref_inputs", "_ref_inputs");
  }
  mf_output first = mf_grad_finish(gc, d);
  for (int j = 0, o = 0; first.op && j < nx; j++)
    if (conn[j]) gc->input_grads[1 + xi[j]] = mf_op_out(first.op, o++);
  mf_free(conn);
done:
  mf_free(yi);
  mf_free(xi);
  mf_free(ys);
  for (int b = 0; b < 2; b++) {
    mf_free(dx[b]);
    mf_free(gargs[b]);
    mf_free(in[b]);
    mf_free(kept[b]);
  }
  return gc->status->code;
}

/* Whether a capture's gradient d is rows scattered into zeros of its shape
 * (reads of a TensorArray the loop captures): then each iteration's rows are
 * added to the sum in place of a whole zero buffer (O(rows), not O(array)).
 * Sets the indices and the rows. */
static bool scattered_rows(mf_output d, mf_output arg, mf_output *idx, mf_output *rows) {
  const mf_op *op = d.op;
  if (mf_is_type(op, "SumToShape")) {  /* the driver's unbroadcast of equal shapes */
    const mf_op *sh = op->inputs[1].op;
    if (!mf_is_type(sh, "Shape") || sh->inputs[0].op != arg.op || sh->inputs[0].index != arg.index) return false;
    op = op->inputs[0].op;
  }
  if (!mf_is_type(op, "_TAScatterRows")) return false;
  const mf_op *sh = op->inputs[0].op;
  if (!mf_is_type(sh, "Shape") || sh->inputs[0].op != arg.op || sh->inputs[0].index != arg.index) return false;
  *idx = op->inputs[1];
  *rows = op->inputs[2];
  return true;
}

/* While: WhileGrad over the body's gradient function. */
mf_code mf_while_grad(mf_grad_ctx *gc) {
  const mf_op *op = gc->op;
  if (!mf_attr_bool(&op->attrs, "back_prop", true)) return MF_OK;  /* no gradient flows */
  int nv = (int)mf_attr_int(&op->attrs, "num_loop_vars", 0);
  int nin = op->num_inputs - (mf_attr_bool(&op->attrs, "has_max", false) ? 1 : 0);
  fn_attr b;
  mf_fn_get(&op->attrs, "body", &b);
  mf_graph *g = b.g;
  size_t sz = (size_t)nin + 1;
  int *kv = mf_malloc(sz * sizeof *kv), *kc = mf_malloc(sz * sizeof *kc);
  mf_output *ys = mf_malloc(sz * sizeof *ys), *xs = mf_malloc(sz * sizeof *xs);
  mf_output *dxs = mf_calloc(sz, sizeof *dxs), *outs = mf_malloc(2 * sz * sizeof *outs);
  int64_t *gargs = mf_malloc(sz * sizeof *gargs), *in = mf_malloc(2 * sz * sizeof *in);
  int64_t *dc_inputs = mf_malloc(sz * sizeof *dc_inputs), *refs = mf_malloc(sz * sizeof *refs);
  int64_t *sparse = mf_calloc(sz, sizeof *sparse);
  int64_t *kept = NULL;
  int nkept = 0;
  bool *fed = NULL, *ckpt = NULL;
  if (!kv || !kc || !ys || !xs || !dxs || !outs || !gargs || !in || !dc_inputs || !refs || !sparse) goto oom;
  /* ys: the float loop variables' results; xs: their arguments, then the float captures'. */
  int nvf = 0, ncf = 0, nx = 0;
  for (int k = 0; k < nv; k++)
    if (mf_dtype_is_float(mf_port_dtype(op->inputs[k]))) {
      kv[nvf] = k;
      ys[nvf++] = mf_fn_result(&b, k);
    }
  for (int i = 0; i < nvf; i++)
    if (b.in[kv[i]] >= 0) xs[nx++] = mf_op_out(mf_fn_op(&b, b.in[kv[i]]), 0);
  for (int k = nv; k < nin; k++)
    if (b.in[k] >= 0 && mf_dtype_is_float(mf_port_dtype(op->inputs[k]))) {
      kc[ncf++] = k;
      xs[nx++] = mf_op_out(mf_fn_op(&b, b.in[k]), 0);
    }
  if (nvf == 0 && ncf == 0) goto done;
  int nfwd = forward_ops(gc, "body_fwd", g);
  if (fn_gradient(gc, g, ys, nvf, xs, nx, gargs, dxs)) goto done;
  /* outs: d(loop var) for each float loop var (zeros when unconnected), then
   * d(capture) for the connected captures. */
  int nout = 0, ndc = 0, x = 0;
  for (int i = 0; i < nvf; i++) {
    mf_output d = b.in[kv[i]] >= 0 ? dxs[x++] : MF_NO_PORT;
    outs[nout++] = d.op ? d : fn_op1(gc, g, "ZerosLike", mf_op_out(g->ops[gargs[i]], 0));
  }
  for (int j = 0; j < ncf; j++, x++)
    if (dxs[x].op) {
      mf_output idx, rows;
      sparse[ndc] = scattered_rows(dxs[x], mf_op_out(mf_fn_op(&b, b.in[kc[j]]), 0), &idx, &rows);
      if (sparse[ndc]) {
        outs[nout++] = idx;
        outs[nout++] = rows;
      } else {
        outs[nout++] = dxs[x];
      }
      dc_inputs[ndc++] = kc[j] - nv;
    }
  if (!mf_ok(gc->status) || nout == 0) goto done;
  /* Kept per iteration: the loop-variable arguments the gradient reads, stateful values, shapes. */
  fed = mf_calloc((size_t)g->num_ops + 1, sizeof *fed);
  ckpt = mf_calloc((size_t)g->num_ops + 1, sizeof *ckpt);
  if (!fed || !ckpt) goto oom;
  for (int k = 0; k < nin; k++)
    if (b.in[k] >= 0) {
      if (k < nv) ckpt[b.in[k]] = true;
      else if (mf_is_arg(mf_fn_op(&b, b.in[k]))) fed[b.in[k]] = true;
    }
  for (int i = 0; i < nvf; i++) fed[gargs[i]] = true;
  if (keep_list(gc, g, outs, nout, fed, ckpt, true, nfwd, &kept, &nkept)) goto done;
  if (nkept && add_kept_ports(gc, "body_stash", kept, nkept)) goto done;
  /* WhileGrad(captures..., stash, gradients of the float loop vars...). */
  int nin_fn = 0, nrefs = 0;
  for (int k = nv; k < nin; k++) {
    in[nin_fn++] = b.in[k];
    if (mf_op_is_ref_input(op, k)) refs[nrefs++] = k - nv;
  }
  in[nin_fn++] = -1;
  for (int i = 0; i < nvf; i++) in[nin_fn++] = gargs[i];
  mf_op_desc *d = mf_grad_begin(gc, "WhileGrad");
  if (d) {
    for (int k = nv; k < nin; k++) mf_op_desc_add_input(d, op->inputs[k]);
    mf_op_desc_add_input(d, mf_op_out(op, nv));
    for (int i = 0; i < nvf; i++) mf_op_desc_add_input(d, mf_grad_output_or_zeros(gc, kv[i]));
    mf_op_desc_set_attr_graph(d, "body", g);
    mf_op_desc_set_attr_ints(d, "body_in", in, nin_fn);
    set_ports_attr(d, "body_out", outs, nout);
    if (nkept) mf_op_desc_set_attr_ints(d, "body_unstash", kept, 2 * nkept);
    mf_op_desc_set_attr_int(d, "num_dx", nvf);
    mf_op_desc_set_attr_ints(d, "dc_inputs", dc_inputs, ndc);
    mf_op_desc_set_attr_ints(d, "dc_sparse", sparse, ndc);
    if (nrefs) mf_op_desc_set_attr_ints(d, "_ref_inputs", refs, nrefs);
  }
  mf_output first = mf_grad_finish(gc, d);
  if (first.op) {
    for (int i = 0; i < nvf; i++) gc->input_grads[kv[i]] = mf_op_out(first.op, i);
    for (int j = 0; j < ndc; j++) gc->input_grads[nv + dc_inputs[j]] = mf_op_out(first.op, nvf + j);
  }
  goto done;
oom:
  mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
done:
  mf_free(kv);
  mf_free(kc);
  mf_free(ys);
  mf_free(xs);
  mf_free(dxs);
  mf_free(outs);
  mf_free(gargs);
  mf_free(in);
  mf_free(dc_inputs);
  mf_free(refs);
  mf_free(sparse);
  mf_free(kept);
  mf_free(fed);
  mf_free(ckpt);
  return gc->status->code;
}
