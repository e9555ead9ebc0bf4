/* control.c — functional control flow: _Arg, If, While, WhileGrad,
 * Select, Where, _CaseIndex, and the TensorArray ops.
 *
 * Functions. A branch or loop body is a graph of its own (a function graph,
 * traced from a Lua closure by lua/moonflow/control_flow.lua). The op calling
 * it holds it in a graph attribute F ("then", "else", "cond", "body") with
 *   F_in    ints, one per input of the calling op (after If's predicate): the
 *           id of the op standing for that input in F, or -1 when F does not
 *           use it. An `_Arg` op is fed the input's value; a VariableV2
 *           stand-in (attr "_var_id") is the variable itself, which the
 *           calling op takes as a ref input ("_ref_inputs").
 *   F_out   ints, pairs (op id, output index): the function's results.
 *   F_stash ints, pairs: ports whose values a gradient of this op needs kept
 *           (set by the gradient rules; see below).
 *   F_fwd   ints {n}: F's op count before gradients were first built in it
 *           (set by the rules; ops from id n on compute gradients).
 * Kernels run functions with their session (mf_function_plan/run), so ops
 * inside keep per-session state, and errors name the failing inner op. Ops
 * with effects (assignments, updates: stateful ops writing through a ref
 * input, and control flow containing them) run whenever their function runs,
 * even when no result depends on them.
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
#include "exec/kernel_api.h"

#include <stdio.h>
#include <string.h>

/* ---------- function attributes ---------- */

typedef struct fn_attr {
  mf_graph *g;
  const int64_t *in;   /* per calling input: op id in g, or -1 */
  int nin;
  const int64_t *out;  /* pairs: the results */
  int nout;
  const int64_t *stash; /* pairs: the ports kept for gradients */
  int nstash;
} fn_attr;

/* Reads function attribute `f` ("then", "body", ...); false when missing. */
static bool fn_get(const mf_attrs *a, const char *f, fn_attr *fa) {
  char name[32];
  const mf_attr *g = mf_attrs_find(a, f, MF_ATTR_GRAPH);
  if (!g) return false;
  fa->g = g->v.graph;
  snprintf(name, sizeof name, "%s_in", f);
  fa->nin = mf_attr_ints(a, name, &fa->in);
  snprintf(name, sizeof name, "%s_out", f);
  fa->nout = mf_attr_ints(a, name, &fa->out);
  snprintf(name, sizeof name, "%s_stash", f);
  fa->nstash = mf_attr_ints(a, name, &fa->stash);
  if (fa->nin < 0) fa->nin = 0;
  fa->nout = fa->nout < 0 ? 0 : fa->nout / 2;
  fa->nstash = fa->nstash < 0 ? 0 : fa->nstash / 2;
  return true;
}

static mf_op *fn_op(const fn_attr *f, int64_t id) { return f->g->ops[id]; }
static mf_output fn_port(mf_graph *g, const int64_t *pair) {
  mf_output o = {g->ops[pair[0]], (int)pair[1]};
  return o;
}
static mf_output fn_result(const fn_attr *f, int i) { return fn_port(f->g, &f->out[2 * i]); }

static bool is_type(const mf_op *op, const char *type) { return strcmp(op->def->name, type) == 0; }
static bool is_arg(const mf_op *op) { return is_type(op, "_Arg"); }

/* Checks a function attribute at build time: `nin` inputs, the ids and ports in range. */
static mf_code fn_check(mf_infer_ctx *ic, const char *f, fn_attr *fa, int nin) {
  if (!fn_get(ic->attrs, f, fa))
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: missing function attribute '%s'", ic->op_name, f);
  if (fa->nin != nin)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: '%s_in' has %d entries for %d inputs",
                         ic->op_name, f, fa->nin, nin);
  int n = fa->g->num_ops;
  for (int k = 0; k < fa->nin; k++) {
    int64_t id = fa->in[k];
    if (id >= n || id < -1 || (id >= 0 && !is_arg(fa->g->ops[id]) && !is_type(fa->g->ops[id], "VariableV2")))
      return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: '%s_in'[%d] is not an argument of the function",
                           ic->op_name, f, k);
  }
  const int64_t *lists[2] = {fa->out, fa->stash};
  int counts[2] = {fa->nout, fa->nstash};
  for (int l = 0; l < 2; l++)
    for (int i = 0; i < counts[l]; i++) {
      const int64_t *p = &lists[l][2 * i];
      if (p[0] < 0 || p[0] >= n || p[1] < 0 || p[1] >= fa->g->ops[p[0]]->num_outputs)
        return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: a port of function '%s' is out of range",
                             ic->op_name, f);
    }
  return MF_OK;
}

static const mf_shape *port_shape(mf_output o) { return &o.op->out_shapes[o.index]; }
static mf_dtype port_dtype(mf_output o) { return o.op->out_dtypes[o.index]; }

/* ---------- effects ---------- */

static bool graph_has_effects(const mf_graph *g, int depth);

/* An op that must run when its function runs although nothing reads it: a
 * stateful op writing through a ref input, or control flow containing one. */
static bool has_effects(const mf_op *op, int depth) {
  if (depth > 64) return true;
  if (op->def->flags & MF_OP_STATEFUL)
    for (int k = 0; k < op->num_inputs; k++)
      if (mf_op_is_ref_input(op, k) && !is_type(op, "ReadVariable") && !is_type(op, "IsVariableInitialized"))
        return true;
  for (int i = 0; i < op->attrs.n; i++)
    if (op->attrs.items[i].kind == MF_ATTR_GRAPH && graph_has_effects(op->attrs.items[i].v.graph, depth + 1))
      return true;
  return false;
}

static bool graph_has_effects(const mf_graph *g, int depth) {
  for (int i = 0; i < g->num_ops; i++)
    if (has_effects(g->ops[i], depth)) return true;
  return false;
}

static bool graph_is_stateful(const mf_graph *g, int depth);

/* Whether running op twice may give other values (or effects): such values
 * are kept for gradients rather than recomputed. */
static bool is_stateful(const mf_op *op, int depth) {
  if (depth > 64 || (op->def->flags & MF_OP_STATEFUL)) return true;
  for (int i = 0; i < op->attrs.n; i++)
    if (op->attrs.items[i].kind == MF_ATTR_GRAPH && graph_is_stateful(op->attrs.items[i].v.graph, depth + 1))
      return true;
  return false;
}

static bool graph_is_stateful(const mf_graph *g, int depth) {
  for (int i = 0; i < g->num_ops; i++)
    if (is_stateful(g->ops[i], depth)) return true;
  return false;
}

/* ---------- calling functions ---------- */

/* How deep this thread is in runs of gradient functions (WhileGrad, a
 * gradient If). Those recompute forward values, so their TensorArray reads
 * read elements a second time: such reads neither clear nor check
 * clear_after_read. A run stays on one thread, its functions nested in it. */
static _Thread_local int gradient_depth;

/* A prepared call of a function: its plan and where each feed comes from. */
typedef struct fn_call {
  mf_callable *plan;
  int nargs;
  int *arg_src;    /* feed j < nargs takes calling input arg_src[j] */
  int nextra;      /* then `nextra` feeds of given ports (a gradient's kept values) */
  int nstash;      /* stash ports fetched after the results; -1: not prepared */
} fn_call;

enum { MAX_CALLS = 4 };
/* An op's per-session state: its prepared calls. */
typedef struct call_state { fn_call calls[MAX_CALLS]; } call_state;

static void call_state_free(void *p) {
  call_state *cs = p;
  for (int i = 0; i < MAX_CALLS; i++) mf_free(cs->calls[i].arg_src);
  mf_free(cs);
}

static call_state *calls_of(mf_kernel_ctx *ctx) {
  if (!ctx->state->ptr) {
    call_state *cs = mf_calloc(1, sizeof *cs);
    if (!cs) {
      mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
      return NULL;
    }
    for (int i = 0; i < MAX_CALLS; i++) cs->calls[i].nstash = -1;
    ctx->state->ptr = cs;
    ctx->state->free = call_state_free;
  }
  return ctx->state->ptr;
}

/* Whether function f reads argument op `arg` (else it is not fed at all). */
static bool arg_used(const fn_attr *f, const mf_op *arg) {
  for (int i = 0; i < f->nout; i++)
    if (fn_result(f, i).op == arg) return true;
  for (int i = arg->id + 1; i < f->g->num_ops; i++) {
    const mf_op *op = f->g->ops[i];
    for (int k = 0; k < op->num_inputs; k++)
      if (op->inputs[k].op == arg) return true;
  }
  return false;
}

/* Prepares (once per session, and again when the stash list grew) the call
 * of function f in slot `which`: feeds are f's _Arg inputs and the `nextra`
 * ports `extra` (pairs), fetches its results plus `nstash` of its stash
 * ports, targets its ops with effects (none when `pure`: a gradient). */
static fn_call *prepare_call(mf_kernel_ctx *ctx, int which, const fn_attr *f, int nstash,
                             const int64_t *extra, int nextra, bool pure) {
  call_state *cs = calls_of(ctx);
  if (!cs) return NULL;
  fn_call *call = &cs->calls[which];
  if (call->plan && call->nstash == nstash) return call;
  mf_graph *g = f->g;
  int nfetch = f->nout + nstash;
  mf_output *feeds = mf_malloc((size_t)(f->nin + nextra + 1) * sizeof *feeds);
  mf_output *fetches = mf_malloc((size_t)(nfetch + 1) * sizeof *fetches);
  mf_op **targets = mf_malloc((size_t)(g->num_ops + 1) * sizeof *targets);
  int *src = mf_malloc((size_t)(f->nin + 1) * sizeof *src);
  fn_call *ret = NULL;
  if (!feeds || !fetches || !targets || !src) {
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  int nargs = 0, ntargets = 0;
  for (int k = 0; k < f->nin; k++)
    if (f->in[k] >= 0 && is_arg(fn_op(f, f->in[k])) && arg_used(f, fn_op(f, f->in[k]))) {
      feeds[nargs].op = fn_op(f, f->in[k]);
      feeds[nargs].index = 0;
      src[nargs++] = k;
    }
  for (int i = 0; i < nextra; i++) feeds[nargs + i] = fn_port(g, &extra[2 * i]);
  for (int i = 0; i < f->nout; i++) fetches[i] = fn_result(f, i);
  for (int i = 0; i < nstash; i++) fetches[f->nout + i] = fn_port(g, &f->stash[2 * i]);
  for (int i = 0; i < g->num_ops && !pure; i++)
    if (has_effects(g->ops[i], 0)) targets[ntargets++] = g->ops[i];
  mf_callable *plan = mf_function_plan(ctx, g, feeds, nargs + nextra, fetches, nfetch, targets, ntargets);
  if (!plan) goto done;
  mf_free(call->arg_src);
  call->plan = plan;
  call->nargs = nargs;
  call->arg_src = src;
  call->nextra = nextra;
  call->nstash = nstash;
  src = NULL;
  ret = call;
done:
  mf_free(feeds);
  mf_free(fetches);
  mf_free(targets);
  mf_free(src);
  return ret;
}

/* Runs a prepared call: args from the calling inputs `in`, the extra feeds
 * from `extra`, results into `out` (new references). The inputs k with
 * move[k] (move may be NULL) and, when move_extra, the extras are references
 * the caller gives up (so the function may update them in place); the others
 * are retained. */
static mf_code run_call(mf_kernel_ctx *ctx, fn_call *c, mf_tensor **in, const bool *move,
                        mf_tensor **extra, bool move_extra, mf_tensor **out) {
  mf_tensor *inline_feeds[16];
  int n = c->nargs + c->nextra;
  mf_tensor **feeds = n <= 16 ? inline_feeds : mf_malloc((size_t)n * sizeof *feeds);
  if (!feeds) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
  for (int j = 0; j < c->nargs; j++) {
    int k = c->arg_src[j];
    feeds[j] = move && move[k] ? in[k] : mf_tensor_retain(in[k]);
    if (move && move[k]) in[k] = NULL;
  }
  for (int j = 0; j < c->nextra; j++) {
    feeds[c->nargs + j] = move_extra ? extra[j] : mf_tensor_retain(extra[j]);
    if (move_extra) extra[j] = NULL;
  }
  mf_function_run(c->plan, feeds, out, ctx->status);
  if (feeds != inline_feeds) mf_free(feeds);
  return ctx->status->code;
}

/* ---------- stashes ---------- */

/* The values a forward op keeps for its gradient: per iteration (one for If),
 * the values of `ports` of function graph `g`. */
typedef struct stash {
  int64_t bytes;        /* the handle's value: bytes held */
  mf_graph *g;
  int nports;
  int64_t *ports;       /* pairs */
  int branch;           /* If: the branch taken */
  int niter, cap_iter;
  mf_tensor **values;   /* niter rows of nports */
} stash;

static void stash_free(stash *st) {
  if (!st) return;
  for (int i = 0; i < st->niter * st->nports; i++) mf_tensor_release(st->values[i]);
  mf_free(st->values);
  mf_free(st->ports);
  if (st->g) mf_graph_release(st->g);
  mf_free(st);
}

static void stash_release(void *data, void *arg) {
  MF_UNUSED(data);
  stash_free(arg);
}

static stash *stash_new(mf_kernel_ctx *ctx, const fn_attr *f, int branch) {
  stash *st = mf_calloc(1, sizeof *st);
  if (st) st->ports = mf_malloc((size_t)(2 * f->nstash + 1) * sizeof *st->ports);
  if (!st || !st->ports) {
    mf_free(st);
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory keeping values for a gradient");
    return NULL;
  }
  st->g = mf_graph_retain(f->g);
  st->nports = f->nstash;
  if (f->nstash) memcpy(st->ports, f->stash, (size_t)(2 * f->nstash) * sizeof *st->ports);
  st->branch = branch;
  return st;
}

/* Keeps one iteration's values (new references taken). */
static mf_code stash_push(mf_kernel_ctx *ctx, stash *st, mf_tensor *const *values) {
  if (st->niter == st->cap_iter) {
    int cap = st->cap_iter ? st->cap_iter * 2 : 16;
    mf_tensor **grown = mf_realloc(st->values, (size_t)cap * (size_t)(st->nports ? st->nports : 1) * sizeof *grown);
    if (!grown) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory keeping values for a gradient");
    st->values = grown;
    st->cap_iter = cap;
  }
  mf_tensor **row = st->values + (size_t)st->niter * (size_t)st->nports;
  for (int i = 0; i < st->nports; i++) {
    row[i] = mf_tensor_retain(values[i]);
    /* A value kept again (a variable the loop only reads) costs nothing more. */
    if (st->niter == 0 || row[i - st->nports] != values[i]) st->bytes += (int64_t)mf_tensor_nbytes(values[i]);
  }
  st->niter++;
  return MF_OK;
}

/* Sets output i to the handle of st (NULL: an empty handle). Consumes st. */
static mf_code set_stash_output(mf_kernel_ctx *ctx, int i, stash *st) {
  mf_tensor *h;
  if (st) {
    h = mf_tensor_wrap(MF_INT64, 0, NULL, &st->bytes, stash_release, st, ctx->status);
    if (!h) stash_free(st);
  } else {
    h = mf_kernel_alloc_output(ctx, i, MF_INT64, 0, NULL);
    if (h) *(int64_t *)h->data = 0;
    return h ? MF_OK : ctx->status->code;
  }
  if (!h) return ctx->status->code;
  mf_tensor_release(ctx->outputs[i]);
  ctx->outputs[i] = h;
  return MF_OK;
}

/* The stash behind a handle input, or NULL (an empty handle); an error when
 * the value is not a handle at all. */
static mf_code stash_of(mf_kernel_ctx *ctx, const mf_tensor *h, stash **out) {
  *out = NULL;
  if (h->release == stash_release) {
    *out = h->release_arg;
    return MF_OK;
  }
  if (h->dtype == MF_INT64 && h->rank == 0 && *(const int64_t *)h->data == 0) return MF_OK;
  return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                       "%s: input %d is not the stash output of a forward If/While op", ctx->op->name,
                       ctx->num_inputs - 1);
}

/* Column of port (id, index) in the stash, or -1. */
static int stash_column(const stash *st, const int64_t *pair) {
  for (int i = 0; i < st->nports; i++)
    if (st->ports[2 * i] == pair[0] && st->ports[2 * i + 1] == pair[1]) return i;
  return -1;
}

/* ---------- _Arg: a function's argument (attrs dtype, shape) ---------- */

static mf_code arg_infer(mf_infer_ctx *ic) {
  const mf_attr *t = mf_attrs_find(ic->attrs, "dtype", MF_ATTR_TYPE);
  if (!t || !mf_dtype_size(t->v.type))
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: _Arg needs a valid 'dtype'", ic->op_name);
  const mf_attr *sh = mf_attrs_find(ic->attrs, "shape", MF_ATTR_SHAPE);
  ic->out_dtypes[0] = t->v.type;
  ic->out_shapes[0] = sh ? sh->v.shape : mf_shape_unknown();
  return MF_OK;
}

static mf_code arg_kernel(mf_kernel_ctx *ctx) {
  return mf_status_set(ctx->status, MF_INTERNAL, "function argument '%s' was not given a value", ctx->op->name);
}

/* ---------- If(pred, inputs...) ----------
 * attrs then/else (+ _in, _out, _stash) and, for the gradient of an If, bool
 * "gradient": then its last input is the forward If's stash, whose values
 * feed the ports listed in then_unstash / else_unstash, and effects do not
 * run. Outputs: the branch results, then the stash. */

/* The most specific shape compatible with both. */
static mf_shape merge_shapes(const mf_shape *a, const mf_shape *b) {
  if (a->rank < 0 || b->rank < 0 || a->rank != b->rank) return mf_shape_unknown();
  mf_shape out = *a;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) out.dims[d] = -1;
  return out;
}

static mf_code if_infer(mf_infer_ctx *ic) {
  if (ic->in_dtypes[0] != MF_BOOL || ic->in_shapes[0].rank > 0) {
    char buf[128];
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "%s: the predicate must be a scalar bool, got a %s tensor of shape %s",
                         ic->op_name, mf_dtype_name(ic->in_dtypes[0]),
                         mf_shape_str_tf(&ic->in_shapes[0], buf, sizeof buf));
  }
  bool stash_in = mf_attr_bool(ic->attrs, "gradient", false);
  int nin = ic->num_inputs - 1 - (stash_in ? 1 : 0);
  fn_attr t, e;
  if (fn_check(ic, "then", &t, nin) || fn_check(ic, "else", &e, nin)) return ic->status->code;
  if (t.nout != e.nout)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: the branches return %d and %d values",
                         ic->op_name, t.nout, e.nout);
  for (int k = 0; k < nin; k++) {
    const int64_t ids[2] = {t.in[k], e.in[k]};
    const fn_attr *fs[2] = {&t, &e};
    for (int b = 0; b < 2; b++)
      if (ids[b] >= 0 && fn_op(fs[b], ids[b])->out_dtypes[0] != ic->in_dtypes[1 + k])
        return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: input %d has dtype %s, its argument %s",
                             ic->op_name, k + 1, mf_dtype_name(ic->in_dtypes[1 + k]),
                             mf_dtype_name(fn_op(fs[b], ids[b])->out_dtypes[0]));
  }
  if (mf_infer_set_num_outputs(ic, t.nout + 1)) return ic->status->code;
  for (int i = 0; i < t.nout; i++) {
    mf_output a = fn_result(&t, i), b = fn_result(&e, i);
    if (port_dtype(a) != port_dtype(b))
      return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                           "%s: output %d has dtype %s in the true branch but %s in the false branch",
                           ic->op_name, i, mf_dtype_name(port_dtype(a)), mf_dtype_name(port_dtype(b)));
    ic->out_dtypes[i] = port_dtype(a);
    ic->out_shapes[i] = merge_shapes(port_shape(a), port_shape(b));
  }
  ic->out_dtypes[t.nout] = MF_INT64;
  ic->out_shapes[t.nout] = mf_shape_scalar();
  return MF_OK;
}

static bool scalar_bool(const mf_tensor *t, bool *v) {
  if (t->dtype != MF_BOOL || t->rank != 0) return false;
  *v = *(const bool *)t->data;
  return true;
}

static mf_code if_kernel(mf_kernel_ctx *ctx) {
  bool pred;
  if (!scalar_bool(ctx->inputs[0], &pred)) {
    char buf[128];
    mf_shape sh = mf_shape_of(ctx->inputs[0]);
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                         "%s: the predicate must be a scalar bool, got shape %s", ctx->op->name,
                         mf_shape_str_tf(&sh, buf, sizeof buf));
  }
  int branch = pred ? 0 : 1;
  fn_attr f;
  fn_get(ctx->attrs, branch == 0 ? "then" : "else", &f);
  int nres = ctx->num_outputs - 1;
  bool keep = ctx->outputs_read[nres] && f.nstash > 0;
  /* A gradient If feeds the values the forward If kept to the ports it lists. */
  const int64_t *unstash = NULL;
  int nunstash = 0;
  stash *st = NULL;
  bool gradient = mf_attr_bool(ctx->attrs, "gradient", false);
  if (gradient) {
    nunstash = mf_attr_ints(ctx->attrs, branch == 0 ? "then_unstash" : "else_unstash", &unstash) / 2;
    if (nunstash < 0) nunstash = 0;
    if (stash_of(ctx, ctx->inputs[ctx->num_inputs - 1], &st)) return ctx->status->code;
    if (nunstash > 0 && (!st || st->branch != branch || st->niter != 1))
      return mf_status_set(ctx->status, MF_INTERNAL, "%s: the forward If kept no values for this branch",
                           ctx->op->name);
  }
  fn_call *call = prepare_call(ctx, branch * 2 + keep, &f, keep ? f.nstash : 0, unstash, nunstash, gradient);
  if (!call) return ctx->status->code;
  int nfetch = nres + call->nstash;
  mf_tensor *inline_out[16], *inline_extra[16];
  mf_tensor **out = nfetch <= 16 ? inline_out : mf_calloc((size_t)nfetch, sizeof *out);
  mf_tensor **extra = nunstash <= 16 ? inline_extra : mf_calloc((size_t)nunstash, sizeof *extra);
  if (!out || !extra) {
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int i = 0; i < nfetch; i++) out[i] = NULL;
  for (int i = 0; i < nunstash; i++) {
    int col = stash_column(st, &unstash[2 * i]);
    if (col < 0) {
      mf_status_set(ctx->status, MF_INTERNAL, "%s: a value the gradient needs was not kept", ctx->op->name);
      goto done;
    }
    extra[i] = st->values[col];
  }
  gradient_depth += gradient;
  run_call(ctx, call, ctx->inputs + 1, NULL, extra, false, out);
  gradient_depth -= gradient;
  if (!mf_ok(ctx->status)) goto done;
  for (int i = 0; i < nres; i++) {
    mf_tensor_release(ctx->outputs[i]);
    ctx->outputs[i] = out[i];
    out[i] = NULL;
  }
  stash *kept = NULL;
  if (keep) {
    kept = stash_new(ctx, &f, branch);
    if (!kept) goto done;
    if (stash_push(ctx, kept, out + nres)) {
      stash_free(kept);
      goto done;
    }
  }
  set_stash_output(ctx, nres, kept);
done:
  for (int i = 0; out && i < nfetch; i++) mf_tensor_release(out[i]);
  if (out != inline_out) mf_free(out);
  if (extra != inline_extra) mf_free(extra);
  return ctx->status->code;
}

/* ---------- While(loop vars..., captures..., [maximum_iterations]) ----------
 * attrs cond/body (+ _in over the loop vars and captures, _out, body_stash),
 * int num_loop_vars, bool has_max (the last input caps the trip count), bool
 * back_prop, and bool fused_cond: the body also returns (after the loop
 * variables) the condition on its results, so an iteration is one run of
 * one function; the cond function then runs only before the first.
 * Outputs: the loop variables after the last iteration, then the stash (one
 * row per iteration). */

static mf_code while_infer(mf_infer_ctx *ic) {
  int nv = (int)mf_attr_int(ic->attrs, "num_loop_vars", -1);
  bool has_max = mf_attr_bool(ic->attrs, "has_max", false);
  int nin = ic->num_inputs - (has_max ? 1 : 0);
  if (nv < 0 || nv > nin)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: num_loop_vars %d does not fit %d inputs",
                         ic->op_name, nv, nin);
  fn_attr c, b;
  if (fn_check(ic, "cond", &c, nin) || fn_check(ic, "body", &b, nin)) return ic->status->code;
  bool fused = mf_attr_bool(ic->attrs, "fused_cond", false);
  if (c.nout != 1 || b.nout != nv + fused)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: cond must return 1 value and body %d, got %d and %d",
                         ic->op_name, nv + fused, c.nout, b.nout);
  if (has_max) {
    mf_dtype t = ic->in_dtypes[nin];
    if ((t != MF_INT32 && t != MF_INT64) || ic->in_shapes[nin].rank > 0)
      return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                           "%s: maximum_iterations must be an int32 or int64 scalar, got %s", ic->op_name,
                           mf_dtype_name(t));
  }
  if (mf_infer_set_num_outputs(ic, nv + 1)) return ic->status->code;
  for (int k = 0; k < nv; k++) {
    mf_output r = fn_result(&b, k);
    const char *name = ic->in_ports ? ic->in_ports[k].op->name : "?";
    int index = ic->in_ports ? ic->in_ports[k].index : 0;
    if (port_dtype(r) != ic->in_dtypes[k])
      return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                           "%s: loop variable %d ('%s:%d') enters the loop as %s, but the body returns %s "
                           "for it; use tf.cast in the body",
                           ic->op_name, k, name, index, mf_dtype_name(ic->in_dtypes[k]), mf_dtype_name(port_dtype(r)));
    /* The shape invariant is the body argument's shape. */
    mf_shape inv = b.in[k] >= 0 ? fn_op(&b, b.in[k])->out_shapes[0] : ic->in_shapes[k];
    const mf_shape *have = port_shape(r);
    bool ok = inv.rank < 0 || have->rank == inv.rank;
    for (int d = 0; ok && inv.rank >= 0 && d < inv.rank; d++) ok = inv.dims[d] < 0 || have->dims[d] == inv.dims[d];
    if (!ok) {
      char a[128], h[128];
      mf_shape_str_tf(&inv, a, sizeof a);
      mf_shape_str_tf(have, h, sizeof h);
      if (mf_shape_compatible(&inv, &ic->in_shapes[k]) && inv.rank == ic->in_shapes[k].rank &&
          memcmp(inv.dims, ic->in_shapes[k].dims, (size_t)(inv.rank > 0 ? inv.rank : 0) * sizeof inv.dims[0]) == 0)
        return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                             "Input tensor '%s:%d' (loop variable %d) has shape %s before the loop, but shape "
                             "%s after one iteration. Provide shape invariants using the `shape_invariants` "
                             "option of tf.while_loop (or set_shape() on the loop variables) to allow the "
                             "shape to vary across iterations",
                             name, index, k, a, h);
      return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                           "Input tensor '%s:%d' (loop variable %d) has the shape invariant %s, but shape %s "
                           "after one iteration; provide a less specific shape invariant",
                           name, index, k, a, h);
    }
    ic->out_dtypes[k] = ic->in_dtypes[k];
    ic->out_shapes[k] = inv;
  }
  /* After the loop variables: a variable changing shape also changes the
   * shape of the condition the body computes on its results, and the
   * variable's error is the one that says what to do. */
  mf_output p = fn_result(&c, 0);
  if (port_dtype(p) != MF_BOOL || port_shape(p)->rank > 0) {
    char buf[128];
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "%s: cond must return a scalar bool, got a %s tensor of shape %s", ic->op_name,
                         mf_dtype_name(port_dtype(p)), mf_shape_str_tf(port_shape(p), buf, sizeof buf));
  }
  if (fused && (p = fn_result(&b, nv), port_dtype(p) != MF_BOOL || port_shape(p)->rank > 0))
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: the body's condition must be a scalar bool", ic->op_name);
  ic->out_dtypes[nv] = MF_INT64;
  ic->out_shapes[nv] = mf_shape_scalar();
  return MF_OK;
}

static bool read_count(const mf_tensor *t, int64_t *v) {
  if (t->rank != 0) return false;
  if (t->dtype == MF_INT32) *v = *(const int32_t *)t->data;
  else if (t->dtype == MF_INT64) *v = *(const int64_t *)t->data;
  else return false;
  return true;
}

/* Reads a condition's value into *go and gives the tensor back to the plan that made it. */
static mf_code read_pred(mf_kernel_ctx *ctx, mf_callable *plan, mf_tensor *pred, bool *go) {
  bool ok = scalar_bool(pred, go);
  mf_function_recycle(plan, pred);
  if (!ok) return mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: cond must return a scalar bool", ctx->op->name);
  return MF_OK;
}

static mf_code while_kernel(mf_kernel_ctx *ctx) {
  int nv = (int)mf_attr_int(ctx->attrs, "num_loop_vars", 0);
  bool has_max = mf_attr_bool(ctx->attrs, "has_max", false);
  int nin = ctx->num_inputs - (has_max ? 1 : 0);
  int64_t max = -1;
  if (has_max && (!read_count(ctx->inputs[nin], &max) || max < 0))
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                         "%s: maximum_iterations must be a non-negative integer scalar", ctx->op->name);
  fn_attr c, b;
  fn_get(ctx->attrs, "cond", &c);
  fn_get(ctx->attrs, "body", &b);
  /* With a gradient reading the stash, the stash is made even when the body
   * keeps no values (a linear body): it still counts the iterations, which
   * WhileGrad runs the body's gradient for. */
  bool grad = ctx->outputs_read[nv] && mf_attr_bool(ctx->attrs, "back_prop", true);
  bool keep = grad && b.nstash > 0;
  fn_call *cc = prepare_call(ctx, 0, &c, 0, NULL, 0, false);
  fn_call *bc = cc ? prepare_call(ctx, 1 + keep, &b, keep ? b.nstash : 0, NULL, 0, false) : NULL;
  if (!bc) return ctx->status->code;
  int fused = mf_attr_bool(ctx->attrs, "fused_cond", false);
  int nfetch = nv + fused + bc->nstash;
  /* vals: the loop variables (our references) then the captures (borrowed). */
  mf_tensor **vals = mf_malloc((size_t)(nin + 1) * sizeof *vals);
  mf_tensor **out = mf_calloc((size_t)(nfetch + 1), sizeof *out);
  bool *move = mf_calloc((size_t)(nin + 1), sizeof *move);
  stash *kept = NULL;
  if (!vals || !out || !move) {
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int k = 0; k < nin; k++) vals[k] = k < nv ? mf_tensor_retain(ctx->inputs[k]) : ctx->inputs[k];
  for (int k = 0; k < nv; k++) move[k] = true;
  if (grad && !(kept = stash_new(ctx, &b, 0))) goto done;
  /* go: whether the body runs (again). The cond function decides first;
   * then the body itself when it returns the condition on its results. */
  bool go = false;
  mf_tensor *pred = NULL;
  if (!run_call(ctx, cc, vals, NULL, NULL, false, &pred)) read_pred(ctx, cc->plan, pred, &go);
  for (int64_t iter = 0; go && (max < 0 || iter < max); iter++) {
    /* The loop variables move into the body: a value nobody else holds is updated in place. */
    run_call(ctx, bc, vals, move, NULL, false, out);
    for (int k = 0; k < nv; k++) {
      mf_tensor_release(vals[k]);  /* those the body does not read */
      vals[k] = out[k];
      out[k] = NULL;
    }
    if (!mf_ok(ctx->status)) break;
    if (kept && stash_push(ctx, kept, out + nv + fused)) break;
    go = false;
    if (fused) {
      read_pred(ctx, bc->plan, out[nv], &go);
      out[nv] = NULL;
    } else if (!run_call(ctx, cc, vals, NULL, NULL, false, &pred)) {
      read_pred(ctx, cc->plan, pred, &go);
    }
    for (int i = nv + fused; i < nfetch; i++) {
      mf_tensor_release(out[i]);
      out[i] = NULL;
    }
  }
  if (mf_ok(ctx->status)) {
    for (int k = 0; k < nv; k++) {
      mf_tensor_release(ctx->outputs[k]);
      ctx->outputs[k] = vals[k];
      vals[k] = NULL;
    }
    set_stash_output(ctx, nv, kept);
    kept = NULL;
  }
done:
  if (vals)
    for (int k = 0; k < nv; k++) mf_tensor_release(vals[k]);
  for (int i = 0; out && i < nfetch; i++) mf_tensor_release(out[i]);
  stash_free(kept);
  mf_free(vals);
  mf_free(out);
  mf_free(move);
  return ctx->status->code;
}

/* ---------- Select(cond, x, y): tf.where with three arguments ----------
 * cond bool; x and y one dtype; all three broadcast together (NumPy). */

static mf_code select_infer(mf_infer_ctx *ic) {
  if (ic->in_dtypes[0] != MF_BOOL)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "%s: the condition must be a bool tensor, got %s (use a comparison such as tf.less)",
                         ic->op_name, mf_dtype_name(ic->in_dtypes[0]));
  if (ic->in_dtypes[1] != ic->in_dtypes[2])
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "%s: x and y must have one dtype, got %s and %s; use tf.cast", ic->op_name,
                         mf_dtype_name(ic->in_dtypes[1]), mf_dtype_name(ic->in_dtypes[2]));
  mf_shape xy;
  if (mf_broadcast_shape(ic->op_name, &ic->in_shapes[1], &ic->in_shapes[2], &xy, ic->status) ||
      mf_broadcast_shape(ic->op_name, &ic->in_shapes[0], &xy, &ic->out_shapes[0], ic->status))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[1];
  return MF_OK;
}

/* Strides of t's elements along the dims of a broadcast shape of rank r (0 where t broadcasts). */
static void broadcast_strides(const mf_tensor *t, int r, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int d = r - 1; d >= 0; d--) {
    int td = t->rank - r + d;
    bool own = td >= 0 && t->dims[td] == dims[d] && dims[d] != 1;
    strides[d] = own ? s : 0;
    if (td >= 0) s *= t->dims[td];
  }
}

#define SELECT_LOOP(T)                                                                      \
  {                                                                                         \
    const T *xa = x->data, *ya = y->data;                                                   \
    T *o = out->data;                                                                       \
    for (int64_t row = 0; row < rows; row++) {                                              \
      int64_t oc = 0, ox = 0, oy = 0, rest = row;                                           \
      for (int d = r - 2; d >= 0; d--) {                                                    \
        int64_t i = rest % dims[d];                                                         \
        rest /= dims[d];                                                                    \
        oc += i * sc[d], ox += i * sx[d], oy += i * sy[d];                                  \
      }                                                                                     \
      T *orow = o + row * inner;                                                            \
      for (int64_t j = 0; j < inner; j++)                                                   \
        orow[j] = ca[oc + j * lc] ? xa[ox + j * lx] : ya[oy + j * ly];                      \
    }                                                                                       \
  }

static mf_code select_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *c = ctx->inputs[0], *x = ctx->inputs[1], *y = ctx->inputs[2];
  mf_tensor *out = ctx->outputs[0];
  if (out->size == 0) return MF_OK;
  int r = out->rank;
  int64_t one = 1;
  const int64_t *dims = r ? out->dims : &one;
  int64_t sc[MF_MAX_RANK] = {0}, sx[MF_MAX_RANK] = {0}, sy[MF_MAX_RANK] = {0};
  if (r == 0) r = 1, sc[0] = sx[0] = sy[0] = 0;
  else {
    broadcast_strides(c, r, dims, sc);
    broadcast_strides(x, r, dims, sx);
    broadcast_strides(y, r, dims, sy);
  }
  int64_t inner = dims[r - 1], rows = out->size / inner;
  int64_t lc = sc[r - 1], lx = sx[r - 1], ly = sy[r - 1];
  const bool *ca = c->data;
  switch (mf_dtype_size(out->dtype)) {
    case 1: SELECT_LOOP(uint8_t) break;
    case 4: SELECT_LOOP(uint32_t) break;
    default: SELECT_LOOP(uint64_t) break;
  }
  return MF_OK;
}

static mf_code select_grad(mf_grad_ctx *gc) {
  mf_output c = mf_op_in(gc->op, 0), g = gc->grads[0];
  mf_output zeros = mf_grad_op1(gc, "ZerosLike", g);
  for (int k = 1; k <= 2; k++) {
    mf_op_desc *d = mf_grad_begin(gc, "Select");
    if (d) {
      mf_op_desc_add_input(d, c);
      mf_op_desc_add_input(d, k == 1 ? g : zeros);
      mf_op_desc_add_input(d, k == 1 ? zeros : g);
    }
    gc->input_grads[k] = mf_grad_finish(gc, d);
  }
  return gc->status->code;
}

/* ---------- Where(cond): the coordinates of the true (non-zero) elements ----------
 * int64 [count, rank], in row-major order. */

static mf_code where_infer(mf_infer_ctx *ic) {
  ic->out_dtypes[0] = MF_INT64;
  int64_t dims[2] = {-1, ic->in_shapes[0].rank};
  ic->out_shapes[0] = mf_shape_make(2, dims);
  return MF_OK;
}

static mf_code where_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *c = ctx->inputs[0];
  int64_t n = 0, size = c->size;
  switch (c->dtype) {
#define WHERE_COUNT(ENUM, T) \
  case ENUM: for (int64_t i = 0; i < size; i++) n += ((const T *)c->data)[i] != 0; break;
    MF_FOR_ALL_TYPES(WHERE_COUNT)
#undef WHERE_COUNT
    default: break;
  }
  int64_t dims[2] = {n, c->rank};
  mf_tensor *out = mf_kernel_alloc_output(ctx, 0, MF_INT64, 2, dims);
  if (!out) return ctx->status->code;
  int64_t *o = out->data, idx[MF_MAX_RANK] = {0};
  switch (c->dtype) {
#define WHERE_FILL(ENUM, T)                                            \
  case ENUM:                                                           \
    for (int64_t i = 0; i < size; i++) {                               \
      if (((const T *)c->data)[i] != 0)                                \
        for (int d = 0; d < c->rank; d++) *o++ = idx[d];               \
      for (int d = c->rank - 1; d >= 0 && ++idx[d] == c->dims[d]; d--) \
        idx[d] = 0;                                                    \
    }                                                                  \
    break;
    MF_FOR_ALL_TYPES(WHERE_FILL)
#undef WHERE_FILL
    default: break;
  }
  return MF_OK;
}

/* ---------- _CaseIndex(preds): which branch tf.case takes ----------
 * preds bool [n]; attrs exclusive (bool), names (string, the predicates'
 * names for the error). Output int32: the first true one, n when none. */

static mf_code case_index_infer(mf_infer_ctx *ic) {
  if (ic->in_dtypes[0] != MF_BOOL || ic->in_shapes[0].rank != 1)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: expects a bool vector of predicates", ic->op_name);
  ic->out_dtypes[0] = MF_INT32;
  ic->out_shapes[0] = mf_shape_scalar();
  return MF_OK;
}

static mf_code case_index_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *p = ctx->inputs[0];
  const bool *v = p->data;
  int64_t first = p->size, count = 0;
  for (int64_t i = p->size - 1; i >= 0; i--)
    if (v[i]) first = i, count++;
  if (count > 1 && mf_attr_bool(ctx->attrs, "exclusive", false)) {
    /* TensorFlow's words, with the predicates' values as its Assert prints them: [1 1 0]. */
    const mf_attr *names = mf_attrs_find(ctx->attrs, "names", MF_ATTR_STRING);
    char vals[256];
    size_t at = 0;
    vals[at++] = '[';
    for (int64_t i = 0; i < p->size && at + 8 < sizeof vals; i++) {
      if (i) vals[at++] = ' ';
      vals[at++] = v[i] ? '1' : '0';
      if (i + 1 < p->size && at + 8 >= sizeof vals) at += (size_t)snprintf(vals + at, sizeof vals - at, " ...");
    }
    vals[at++] = ']';
    vals[at] = '\0';
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                         "More than one condition evaluated as True but exclusive=True. Conditions: (%s), "
                         "Values: %s (%lld of them are True)",
                         names ? names->v.s : "", vals, (long long)count);
  }
  *(int32_t *)ctx->outputs[0]->data = (int32_t)first;
  return MF_OK;
}

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
    gys[i] = new_arg_like(gc, g, "_Arg", port_dtype(ys[i]), port_shape(ys[i]), NULL);
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
    bool keep = (id < nfwd && (checkpoint[id] || is_stateful(op, 0))) ||
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
static mf_code if_grad(mf_grad_ctx *gc) {
  const mf_op *op = gc->op;
  bool of_gradient = mf_attr_bool(&op->attrs, "gradient", false);
  int nin = op->num_inputs - 1 - of_gradient, nres = op->num_outputs - 1;
  fn_attr br[2];
  fn_get(&op->attrs, "then", &br[0]);
  fn_get(&op->attrs, "else", &br[1]);
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
    if (mf_dtype_is_float(port_dtype(op->inputs[1 + k]))) xi[nx++] = k;
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
      if (f->in[xi[j]] >= 0) bx[used++] = mf_op_out(fn_op(f, f->in[xi[j]]), 0);
    for (int i = 0; i < ny; i++) ys[i] = fn_result(f, yi[i]);
    nfwd[b] = forward_ops(gc, b == 0 ? "then_fwd" : "else_fwd", f->g);
    fn_gradient(gc, f->g, ys, ny, bx, used, gargs[b], bdx);
    for (int j = 0, u = 0; j < nx; j++) {
      dx[b][j] = f->in[xi[j]] >= 0 ? bdx[u++] : (mf_output){NULL, 0};
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
        arg = mf_op_out(fn_op(f, f->in[k]), 0);
      } else {
        mf_output src = op->inputs[1 + k];
        bool ref = mf_op_is_ref_input(op, 1 + k);
        const fn_attr *other = &br[1 - b];
        arg = new_arg_like(gc, f->g, ref ? "VariableV2" : "_Arg", port_dtype(src), port_shape(src),
                           ref ? fn_op(other, other->in[k]) : NULL);
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
  if (is_type(op, "SumToShape")) {  /* the driver's unbroadcast of equal shapes */
    const mf_op *sh = op->inputs[1].op;
    if (!is_type(sh, "Shape") || sh->inputs[0].op != arg.op || sh->inputs[0].index != arg.index) return false;
    op = op->inputs[0].op;
  }
  if (!is_type(op, "_TAScatterRows")) return false;
  const mf_op *sh = op->inputs[0].op;
  if (!is_type(sh, "Shape") || sh->inputs[0].op != arg.op || sh->inputs[0].index != arg.index) return false;
  *idx = op->inputs[1];
  *rows = op->inputs[2];
  return true;
}

/* While: WhileGrad over the body's gradient function. */
static mf_code while_grad(mf_grad_ctx *gc) {
  const mf_op *op = gc->op;
  if (!mf_attr_bool(&op->attrs, "back_prop", true)) return MF_OK;  /* no gradient flows */
  int nv = (int)mf_attr_int(&op->attrs, "num_loop_vars", 0);
  int nin = op->num_inputs - (mf_attr_bool(&op->attrs, "has_max", false) ? 1 : 0);
  fn_attr b;
  fn_get(&op->attrs, "body", &b);
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
    if (mf_dtype_is_float(port_dtype(op->inputs[k]))) {
      kv[nvf] = k;
      ys[nvf++] = fn_result(&b, k);
    }
  for (int i = 0; i < nvf; i++)
    if (b.in[kv[i]] >= 0) xs[nx++] = mf_op_out(fn_op(&b, b.in[kv[i]]), 0);
  for (int k = nv; k < nin; k++)
    if (b.in[k] >= 0 && mf_dtype_is_float(port_dtype(op->inputs[k]))) {
      kc[ncf++] = k;
      xs[nx++] = mf_op_out(fn_op(&b, b.in[k]), 0);
    }
  if (nvf == 0 && ncf == 0) goto done;
  int nfwd = forward_ops(gc, "body_fwd", g);
  if (fn_gradient(gc, g, ys, nvf, xs, nx, gargs, dxs)) goto done;
  /* outs: d(loop var) for each float loop var (zeros when unconnected), then
   * d(capture) for the connected captures. */
  int nout = 0, ndc = 0, x = 0;
  for (int i = 0; i < nvf; i++) {
    mf_output d = b.in[kv[i]] >= 0 ? dxs[x++] : (mf_output){NULL, 0};
    outs[nout++] = d.op ? d : fn_op1(gc, g, "ZerosLike", mf_op_out(g->ops[gargs[i]], 0));
  }
  for (int j = 0; j < ncf; j++, x++)
    if (dxs[x].op) {
      mf_output idx, rows;
      sparse[ndc] = scattered_rows(dxs[x], mf_op_out(fn_op(&b, b.in[kc[j]]), 0), &idx, &rows);
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
      else if (is_arg(fn_op(&b, b.in[k]))) fed[b.in[k]] = true;
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

/* ---------- WhileGrad(captures..., stash, dys...) ----------
 * attrs body (the forward body graph, holding the gradient function), body_in
 * (per input: the argument fed, -1 for the stash), body_out (the gradients of
 * the float loop variables, num_dx of them, then those of captures
 * dc_inputs), body_unstash (ports fed from the stash). Runs the gradient
 * function once per forward iteration, last first: the loop variables'
 * gradients pass from one to the next, the captures' are summed. */

static mf_code while_grad_infer(mf_infer_ctx *ic) {
  int ndx = (int)mf_attr_int(ic->attrs, "num_dx", -1);
  const int64_t *dc, *sparse;
  int ndc = mf_attr_ints(ic->attrs, "dc_inputs", &dc);
  int nsparse = mf_attr_ints(ic->attrs, "dc_sparse", &sparse);
  int nc = ic->num_inputs - 1 - ndx;
  fn_attr f;
  if (ndx < 0 || ndc < 0 || nsparse != ndc || nc < 0)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: bad attributes", ic->op_name);
  if (fn_check(ic, "body", &f, ic->num_inputs)) return ic->status->code;
  int nports = ndx + ndc;
  for (int j = 0; j < ndc; j++) nports += sparse[j] != 0;
  if (f.nout != nports) return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: bad outputs", ic->op_name);
  if (mf_infer_set_num_outputs(ic, ndx + ndc)) return ic->status->code;
  for (int i = 0, port = 0; i < ndx + ndc; i++, port++) {
    bool rows = i >= ndx && sparse[i - ndx];
    if (rows) port++;  /* the indices, then the rows */
    mf_output o = fn_result(&f, port);
    ic->out_dtypes[i] = port_dtype(o);
    ic->out_shapes[i] = *port_shape(o);
    if (i >= ndx) {
      if (dc[i - ndx] < 0 || dc[i - ndx] >= nc) return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: bad dc_inputs", ic->op_name);
      ic->out_shapes[i] = ic->in_shapes[dc[i - ndx]];
    }
  }
  return MF_OK;
}

/* WhileGrad has no gradient of its own: second derivatives through a loop
 * would need the values of every run of the body's gradient function, and
 * gradients through the forward loop's stash. Fails clearly, like If's, in
 * the autodiff driver's words for an op without a rule. */
static mf_code while_grad_grad(mf_grad_ctx *gc) {
  const mf_op *op = gc->op;
  int nc = op->num_inputs - 1 - (int)mf_attr_int(&op->attrs, "num_dx", 0);
  const char *loop = nc >= 0 && nc < op->num_inputs ? op->inputs[nc].op->name : "?";
  return mf_status_set(gc->status, MF_UNIMPLEMENTED,
                       "No gradient defined for operation '%s' (op type: WhileGrad): gradients of the gradient "
                       "of tf.while_loop ('%s') are not supported (second derivatives through loops); unroll "
                       "the loop in Lua for them, or wrap its input in tf.stop_gradient",
                       op->name, loop);
}

/* acc += v elementwise (float gradients of one shape); acc is replaced by a
 * new buffer unless nobody else holds it. */
static mf_code accumulate(mf_kernel_ctx *ctx, mf_tensor **acc, mf_tensor *v) {
  mf_tensor *a = *acc;
  if (!a) {
    *acc = mf_tensor_retain(v);
    return MF_OK;
  }
  if (a->size != v->size || a->dtype != v->dtype)
    return mf_status_set(ctx->status, MF_INTERNAL, "%s: gradients of one capture differ in shape", ctx->op->name);
  mf_tensor *dst = a;
  if (mf_tensor_refcount(a) != 1 || !a->owned) {
    dst = mf_tensor_new_uninit(a->dtype, a->rank, a->dims, ctx->status);
    if (!dst) return ctx->status->code;
  }
  int64_t n = a->size;
  if (a->dtype == MF_FLOAT32) {
    float *o = dst->data;
    const float *x = a->data, *y = v->data;
    for (int64_t i = 0; i < n; i++) o[i] = x[i] + y[i];
  } else {
    double *o = dst->data;
    const double *x = a->data, *y = v->data;
    for (int64_t i = 0; i < n; i++) o[i] = x[i] + y[i];
  }
  if (dst != a) {
    mf_tensor_release(a);
    *acc = dst;
  }
  return MF_OK;
}

static mf_code add_rows(mf_kernel_ctx *ctx, mf_tensor *o, const mf_tensor *idx, const mf_tensor *u);

/* Zeros of the shape of input k (a variable's value for a ref input). */
static mf_tensor *zeros_like_input(mf_kernel_ctx *ctx, int k, mf_dtype dtype) {
  mf_tensor *like = ctx->inputs[k] ? ctx->inputs[k] : mf_kernel_ref_state(ctx, k)->ptr;
  if (!like) {
    mf_status_set(ctx->status, MF_FAILED_PRECONDITION, "%s: a variable the loop reads has no value", ctx->op->name);
    return NULL;
  }
  return mf_tensor_new(dtype, like->rank, like->dims, ctx->status);
}

static mf_code while_grad_kernel(mf_kernel_ctx *ctx) {
  int ndx = (int)mf_attr_int(ctx->attrs, "num_dx", 0);
  const int64_t *dc_in, *unstash, *sparse;
  int ndc = mf_attr_ints(ctx->attrs, "dc_inputs", &dc_in);
  mf_attr_ints(ctx->attrs, "dc_sparse", &sparse);
  int nunstash = mf_attr_ints(ctx->attrs, "body_unstash", &unstash) / 2;
  if (nunstash < 0) nunstash = 0;
  int nc = ctx->num_inputs - 1 - ndx;
  fn_attr f;
  fn_get(ctx->attrs, "body", &f);
  stash *st;
  mf_tensor *handle = ctx->inputs[nc];
  if (stash_of(ctx, handle, &st)) return ctx->status->code;
  int niter = st ? st->niter : 0;
  /* The stash is ours alone when its handle dies here: its values then move
   * into the gradient function and are freed as the backward pass goes. */
  bool own = st && nc < 32 && (ctx->dying_inputs >> nc & 1u) && mf_tensor_refcount(handle) == 1;
  fn_call *call = prepare_call(ctx, 0, &f, 0, unstash, nunstash, true);
  if (!call) return ctx->status->code;
  int nin = ctx->num_inputs;
  mf_tensor **vals = mf_malloc((size_t)(nin + 1) * sizeof *vals);
  mf_tensor **out = mf_calloc((size_t)(f.nout + 1), sizeof *out);
  mf_tensor **acc = mf_calloc((size_t)(ndc + 1), sizeof *acc);
  mf_tensor **extra = mf_calloc((size_t)(nunstash + 1), sizeof *extra);
  int *cols = mf_malloc((size_t)(nunstash + 1) * sizeof *cols);
  bool *move = mf_calloc((size_t)(nin + 1), sizeof *move);
  if (!vals || !out || !acc || !extra || !cols || !move) {
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int i = 0; i < nunstash && niter > 0; i++)
    if ((cols[i] = stash_column(st, &unstash[2 * i])) < 0) {
      mf_status_set(ctx->status, MF_INTERNAL, "%s: a value the gradient needs was not kept", ctx->op->name);
      goto done;
    }
  for (int k = 0; k < nin; k++) vals[k] = ctx->inputs[k];
  for (int i = 0; i < ndx; i++) {
    vals[nc + 1 + i] = mf_tensor_retain(ctx->inputs[nc + 1 + i]);
    move[nc + 1 + i] = true;
  }
  for (int t = niter - 1; t >= 0 && mf_ok(ctx->status); t--) {
    mf_tensor **row = st->values + (size_t)t * (size_t)st->nports;
    for (int i = 0; i < nunstash; i++) extra[i] = row[cols[i]];
    gradient_depth++;
    run_call(ctx, call, vals, move, extra, false, out);
    gradient_depth--;
    if (own)
      for (int i = 0; i < st->nports; i++) {
        mf_tensor_release(row[i]);
        row[i] = NULL;
      }
    for (int i = 0; i < ndx; i++) {
      mf_tensor_release(vals[nc + 1 + i]);
      vals[nc + 1 + i] = out[i];
      out[i] = NULL;
    }
    /* The captures' gradients add up: dense ones whole, scattered rows (a
     * TensorArray read) row by row into a sum made once. */
    for (int j = 0, port = ndx; j < ndc && mf_ok(ctx->status); j++, port++) {
      if (!sparse[j]) {
        accumulate(ctx, &acc[j], out[port]);
        continue;
      }
      if (!acc[j] && !(acc[j] = zeros_like_input(ctx, (int)dc_in[j], out[port + 1]->dtype))) break;
      add_rows(ctx, acc[j], out[port], out[port + 1]);
      port++;
    }
    for (int i = ndx; i < f.nout; i++) {
      mf_tensor_release(out[i]);
      out[i] = NULL;
    }
  }
  if (!mf_ok(ctx->status)) goto done;
  for (int i = 0; i < ndx; i++) {
    mf_tensor_release(ctx->outputs[i]);
    ctx->outputs[i] = vals[nc + 1 + i];
    vals[nc + 1 + i] = NULL;
  }
  for (int j = 0; j < ndc; j++) {
    mf_tensor *a = acc[j];
    if (!a && !(a = zeros_like_input(ctx, (int)dc_in[j], ctx->op->out_dtypes[ndx + j]))) goto done;
    acc[j] = NULL;
    mf_tensor_release(ctx->outputs[ndx + j]);
    ctx->outputs[ndx + j] = a;
  }
done:
  if (vals)
    for (int i = 0; i < ndx; i++) mf_tensor_release(vals[nc + 1 + i]);
  for (int i = 0; out && i < f.nout; i++) mf_tensor_release(out[i]);
  for (int j = 0; acc && j < ndc; j++) mf_tensor_release(acc[j]);
  mf_free(vals);
  mf_free(out);
  mf_free(acc);
  mf_free(extra);
  mf_free(cols);
  mf_free(move);
  return ctx->status->code;
}

/* ---------- TensorArray ----------
 * A TensorArray is a value: two tensors that its ops take and return.
 * While its elements share one shape (the fast path, as in a loop's RNN):
 *   buffer  [capacity, element...] holding the elements (row i is element i),
 *           or a scalar while the element shape is unknown (until the first
 *           write fixes it);
 *   meta    int64 [1 + capacity]: the size, then per index 0 (not written),
 *           1 (written) or 2 (written, then cleared by a read: attr
 *           clear_after_read of the reads, TensorFlow's default; a second
 *           read of the index is an error).
 * Elements that differ in their first dimension (an unequal split, writes to
 * an array made with infer_shape = false: attr ragged of the write) make the
 * array ragged:
 *   buffer  [rows, rest...]: the elements' rows, element i at rows
 *           [offset_i, offset_i + length_i), in the order they were written;
 *   meta    int64 [2 + 3 * capacity]: the size with bit TA_RAGGED set, the
 *           states, the offsets, the lengths, then the number of rows in use.
 * An array turns ragged at the first write that needs it. Every write's new
 * buffer starts with the bytes of the old one (element i of a uniform buffer
 * of elements of length l sits at rows [i*l, (i+1)*l) of the ragged one), so
 * a buffer's gradient passes back through writes as a prefix (_TAGradBuffer).
 * Reads clear in place: the meta is the array's identity, as TensorFlow's
 * resource handle is. A write returns the new pair. When both inputs die at
 * the write and nobody else holds them (in a loop body, from the second
 * iteration on) the write happens in place, so filling an array in a loop
 * costs O(element) per step.
 * Writes and reads also return the buffer rows they wrote or read (the index
 * itself while the array is uniform); the gradient rules gather and scatter
 * those rows with _TAGatherRows and _TAScatterRows. */

#define TA_RAGGED ((int64_t)1 << 62)

static mf_code ta_check(mf_infer_ctx *ic, int index_input) {
  if (ic->in_dtypes[1] != MF_INT64 || ic->in_shapes[1].rank > 1)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: input 1 is not a TensorArray's metadata", ic->op_name);
  if (index_input >= 0) {
    mf_dtype t = ic->in_dtypes[index_input];
    if (t != MF_INT32 && t != MF_INT64)
      return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: TensorArray indices must be int32 or int64, got %s",
                           ic->op_name, mf_dtype_name(t));
  }
  return MF_OK;
}

/* Whether the op's array may be (or turn) ragged: its buffer's static shape
 * then tells nothing of the elements. */
static bool ta_attr_ragged(const mf_infer_ctx *ic) { return mf_attr_bool(ic->attrs, "ragged", false); }

/* The static shape of the elements of a buffer of static shape b. */
static mf_shape ta_elem_shape(const mf_shape *b) {
  if (b->rank <= 0) return mf_shape_unknown();
  return mf_shape_make(b->rank - 1, b->dims + 1);
}

static bool ta_is_ragged(const mf_tensor *meta) { return (((const int64_t *)meta->data)[0] & TA_RAGGED) != 0; }
static int64_t ta_size(const mf_tensor *meta) { return ((const int64_t *)meta->data)[0] & ~TA_RAGGED; }
static int64_t ta_capacity(const mf_tensor *meta) { return ta_is_ragged(meta) ? (meta->size - 2) / 3 : meta->size - 1; }
static bool ta_written(const mf_tensor *meta, int64_t i) { return ((const int64_t *)meta->data)[1 + i] != 0; }
/* A ragged array's offsets, lengths and rows in use. */
static int64_t *ta_offsets(const mf_tensor *meta) { return (int64_t *)meta->data + 1 + ta_capacity(meta); }
static int64_t *ta_lengths(const mf_tensor *meta) { return (int64_t *)meta->data + 1 + 2 * ta_capacity(meta); }
static int64_t *ta_used(const mf_tensor *meta) { return (int64_t *)meta->data + meta->size - 1; }
static void ta_set_size(mf_tensor *meta, int64_t size) {
  int64_t *m = meta->data;
  m[0] = size | (m[0] & TA_RAGGED);
}

static size_t ta_row_bytes(const mf_tensor *buf) {
  return buf->rank == 0 ? 0 : (size_t)(buf->size / (buf->dims[0] ? buf->dims[0] : 1)) * mf_dtype_size(buf->dtype);
}
static int64_t ta_row_elems(const mf_tensor *buf) {
  int64_t n = 1;
  for (int d = 1; d < buf->rank; d++) n *= buf->dims[d];
  return n;
}
static bool ta_shape_eq(const mf_shape *a, const mf_shape *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

static int64_t load_index(const mf_tensor *t, int64_t i) { return mf_load_int64(t->data, t->dtype, i); }

/* Checks that meta (and buf, when given) are a TensorArray's consistent pair
 * before a kernel indexes with them: any tensor can be fed, and a graph file
 * can wire any int64 vector here. O(1) for a uniform array with a buffer;
 * O(capacity) while it has none or is ragged. */
static mf_code ta_check_pair(mf_kernel_ctx *ctx, const mf_tensor *buf, const mf_tensor *meta) {
  bool ok = meta->dtype == MF_INT64 && meta->rank == 1 && meta->size >= 1;
  if (ok && ta_is_ragged(meta)) ok = meta->size >= 2 && (meta->size - 2) % 3 == 0;
  const int64_t *m = ok ? meta->data : NULL;
  int64_t cap = ok ? ta_capacity(meta) : 0, size = ok ? ta_size(meta) : 0;
  ok = ok && size >= 0 && size <= cap;
  for (int64_t i = 0; ok && i < cap; i++) ok = m[1 + i] >= 0 && m[1 + i] <= 2;
  if (ok && buf && ta_is_ragged(meta)) {
    const int64_t *off = ta_offsets(meta), *len = ta_lengths(meta), used = *ta_used(meta);
    ok = buf->rank >= 1 && used >= 0 && used <= buf->dims[0];
    for (int64_t i = 0; ok && i < cap; i++)
      ok = m[1 + i] == 0 || (off[i] >= 0 && len[i] >= 0 && off[i] <= used && len[i] <= used - off[i]);
  } else if (ok && buf) {
    if (buf->rank >= 1) ok = buf->dims[0] == cap;
    for (int64_t i = 0; ok && buf->rank == 0 && i < cap; i++) ok = m[1 + i] == 0;
  }
  if (ok) return MF_OK;
  return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                       "%s: the TensorArray's buffer and metadata do not belong together (a fed or rewired "
                       "value?); feed neither, or both from one TensorArray",
                       ctx->op->name);
}

/* TensorArray(size): attrs dtype, element_shape (optional), dynamic_size. */
static mf_code ta_new_infer(mf_infer_ctx *ic) {
  mf_dtype st = ic->in_dtypes[0];
  if ((st != MF_INT32 && st != MF_INT64) || ic->in_shapes[0].rank > 0)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: the size must be an int32 scalar, got %s",
                         ic->op_name, mf_dtype_name(st));
  const mf_attr *t = mf_attrs_find(ic->attrs, "dtype", MF_ATTR_TYPE);
  if (!t || !mf_dtype_size(t->v.type))
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: needs a valid 'dtype'", ic->op_name);
  const mf_attr *es = mf_attrs_find(ic->attrs, "element_shape", MF_ATTR_SHAPE);
  int64_t size = -1;
  if (ic->in_values[0]) size = load_index(ic->in_values[0], 0);
  if (size < -1 || (ic->runtime && size < 0))
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: the size must be non-negative, got %lld", ic->op_name,
                         (long long)size);
  ic->out_dtypes[0] = t->v.type;
  ic->out_dtypes[1] = MF_INT64;
  if (es && mf_shape_fully_defined(&es->v.shape) && es->v.shape.rank < MF_MAX_RANK) {
    mf_shape b = {.rank = es->v.shape.rank + 1};
    b.dims[0] = size;
    memcpy(b.dims + 1, es->v.shape.dims, (size_t)es->v.shape.rank * sizeof b.dims[0]);
    ic->out_shapes[0] = b;
  } else {
    ic->out_shapes[0] = mf_shape_scalar();
  }
  int64_t m = size < 0 ? -1 : size + 1;
  ic->out_shapes[1] = mf_shape_make(1, &m);
  return MF_OK;
}

static mf_code ta_new_kernel(mf_kernel_ctx *ctx) {
  mf_tensor *buf = ctx->outputs[0], *meta = ctx->outputs[1];
  if (buf->size) memset(buf->data, 0, mf_tensor_nbytes(buf));
  int64_t *m = meta->data;
  m[0] = meta->size - 1;
  for (int64_t i = 1; i < meta->size; i++) m[i] = 0;
  return MF_OK;
}

/* Takes over input k for writing when it dies here and nobody else holds it. */
static bool can_take(const mf_kernel_ctx *ctx, int k) {
  const mf_tensor *t = ctx->inputs[k];
  if (!(ctx->dying_inputs >> k & 1u) || mf_tensor_refcount(t) != 1 || !t->owned) return false;
  for (int j = 0; j < ctx->num_inputs; j++)
    if (j != k && ctx->inputs[j] == t) return false;
  return true;
}

/* Output 0 and 1 of a write: the array ready to take rows at `rows` (indices
 * below `size`), element shape `elem` when the buffer has none yet. Grows a
 * dynamic array. In place when the inputs allow, else copies. */
static mf_code ta_prepare_write(mf_kernel_ctx *ctx, int64_t new_size, const mf_shape *elem) {
  mf_tensor *buf = ctx->inputs[0], *meta = ctx->inputs[1];
  int64_t cap = ta_capacity(meta), size = ta_size(meta);
  int64_t need_cap = new_size > cap ? (new_size > 2 * cap ? new_size : 2 * cap) : cap;
  bool allocated = buf->rank > 0;
  if (need_cap == cap && allocated && can_take(ctx, 0) && can_take(ctx, 1)) {
    ctx->outputs[0] = mf_tensor_retain(buf);
    ctx->outputs[1] = mf_tensor_retain(meta);
  } else {
    mf_shape b = {.rank = allocated ? buf->rank : elem->rank + 1};
    b.dims[0] = need_cap;
    for (int d = 1; d < b.rank; d++) b.dims[d] = allocated ? buf->dims[d] : elem->dims[d - 1];
    mf_tensor *nb = mf_kernel_alloc_output(ctx, 0, buf->dtype, b.rank, b.dims);
    int64_t mdim = need_cap + 1;
    mf_tensor *nm = nb ? mf_kernel_alloc_output(ctx, 1, MF_INT64, 1, &mdim) : NULL;
    if (!nm) return ctx->status->code;
    size_t old = allocated ? (size_t)cap * ta_row_bytes(buf) : 0;
    if (old) memcpy(nb->data, buf->data, old);
    if (mf_tensor_nbytes(nb) > old) memset((char *)nb->data + old, 0, mf_tensor_nbytes(nb) - old);
    memcpy(nm->data, meta->data, (size_t)(cap + 1) * sizeof(int64_t));
    for (int64_t i = cap + 1; i <= need_cap; i++) ((int64_t *)nm->data)[i] = 0;
  }
  int64_t *m = ctx->outputs[1]->data;
  if (new_size > size) m[0] = new_size;
  return MF_OK;
}

/* Checks writing `value` rows at index i. */
static mf_code ta_check_write(mf_kernel_ctx *ctx, int64_t i, const mf_tensor *meta) {
  int64_t size = ta_size(meta);
  bool dynamic = mf_attr_bool(ctx->attrs, "dynamic_size", false);
  if (i < 0)
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: Tried to write to index %lld of a TensorArray",
                         ctx->op->name, (long long)i);
  if (i >= size && !dynamic)
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                         "%s: Tried to write to index %lld but array is not resizeable and size is: %lld",
                         ctx->op->name, (long long)i, (long long)size);
  if (i < ta_capacity(meta) && ta_written(meta, i))
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                         "%s: Could not write to TensorArray index %lld because it has already been written to.",
                         ctx->op->name, (long long)i);
  return MF_OK;
}

/* The elements one write writes: n of them, element j at index idx[j], of
 * shape `elem` or, with `lead`, of shape [lead[j], elem.dims[1]...]; their
 * data one after another from `src`. */
typedef struct ta_elems {
  int64_t n;
  const int64_t *idx;
  const int64_t *lead;
  mf_shape elem;
  const char *src;
} ta_elems;

static mf_shape ta_elem_j(const ta_elems *e, int64_t j) {
  mf_shape s = e->elem;
  if (e->lead) s.dims[0] = e->lead[j];
  return s;
}

/* Output 2 of a write: the buffer rows it wrote (int64; rank 0: one row, as
 * a write to a uniform array writes). */
static int64_t *ta_rows_output(mf_kernel_ctx *ctx, int rank, int64_t n) {
  mf_tensor *r = mf_kernel_alloc_output(ctx, 2, MF_INT64, rank, &n);
  return r ? r->data : NULL;
}

/* Writes the elements into a ragged array (turning a uniform one ragged). */
static mf_code ta_commit_ragged(mf_kernel_ctx *ctx, const ta_elems *e, int64_t new_size, int64_t bad) {
  mf_tensor *buf = ctx->inputs[0], *meta = ctx->inputs[1];
  bool was = ta_is_ragged(meta);
  char a[128], b[128];
  if (!was && !mf_attr_bool(ctx->attrs, "ragged", false)) {
    mf_shape s = ta_elem_j(e, bad), have = buf->rank > 0 ? mf_shape_make(buf->rank - 1, buf->dims + 1) : ta_elem_j(e, 0);
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                         "%s: Could not write to TensorArray index %lld because the value shape is %s which is "
                         "incompatible with the TensorArray's inferred element shape: %s (consider setting "
                         "infer_shape=False).",
                         ctx->op->name, (long long)e->idx[bad], mf_shape_str(&s, a, sizeof a),
                         mf_shape_str(&have, b, sizeof b));
  }
  /* The dims after the first, which all elements share. */
  mf_shape rest;
  if (was) rest = mf_shape_make(buf->rank - 1, buf->dims + 1);
  else if (buf->rank > 0) rest = mf_shape_make(buf->rank - 2 < 0 ? 0 : buf->rank - 2, buf->dims + 2);
  else rest = e->elem.rank > 0 ? mf_shape_make(e->elem.rank - 1, e->elem.dims + 1) : mf_shape_scalar();
  bool scalars = (!was && buf->rank == 1) || (!was && buf->rank == 0 && e->elem.rank == 0);
  for (int64_t j = 0; j < e->n; j++) {
    mf_shape s = ta_elem_j(e, j);
    bool ok = !scalars && s.rank == rest.rank + 1;
    for (int d = 0; ok && d < rest.rank; d++) ok = s.dims[d + 1] == rest.dims[d];
    if (ok) continue;
    mf_shape want = {.rank = rest.rank + 1};
    want.dims[0] = -1;
    memcpy(want.dims + 1, rest.dims, (size_t)rest.rank * sizeof want.dims[0]);
    if (scalars) want = buf->rank > 0 ? mf_shape_make(buf->rank - 1, buf->dims + 1) : ta_elem_j(e, 0);
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                         "%s: Could not write to TensorArray index %lld because the value shape is %s which is "
                         "incompatible with the TensorArray's element shape: %s (elements may differ in their first "
                         "dimension only)",
                         ctx->op->name, (long long)e->idx[j], mf_shape_str(&s, a, sizeof a),
                         mf_shape_str_tf(&want, b, sizeof b));
  }
  int64_t rest_elems = 1;
  for (int d = 0; d < rest.rank; d++) rest_elems *= rest.dims[d];
  size_t rest_bytes = (size_t)rest_elems * mf_dtype_size(buf->dtype);
  int64_t cap = ta_capacity(meta);
  int64_t need_cap = new_size > cap ? (new_size > 2 * cap ? new_size : 2 * cap) : cap;
  int64_t l0 = !was && buf->rank > 1 ? buf->dims[1] : 0;
  int64_t old_rows = was ? buf->dims[0] : (buf->rank > 1 ? buf->dims[0] * l0 : 0);
  int64_t used = was ? *ta_used(meta) : old_rows, add = 0;
  for (int64_t j = 0; j < e->n; j++) add += ta_elem_j(e, j).dims[0];
  if (was && need_cap == cap && used + add <= old_rows && can_take(ctx, 0) && can_take(ctx, 1)) {
    ctx->outputs[0] = mf_tensor_retain(buf);
    ctx->outputs[1] = mf_tensor_retain(meta);
  } else {
    int64_t rows = old_rows;
    if (used + add > rows) rows = used + add > 2 * rows ? used + add : 2 * rows;
    int64_t dims[MF_MAX_RANK];
    dims[0] = rows;
    memcpy(dims + 1, rest.dims, (size_t)rest.rank * sizeof dims[0]);
    mf_tensor *nb = mf_kernel_alloc_output(ctx, 0, buf->dtype, rest.rank + 1, dims);
    int64_t mdim = 3 * need_cap + 2;
    mf_tensor *nm = nb ? mf_kernel_alloc_output(ctx, 1, MF_INT64, 1, &mdim) : NULL;
    if (!nm) return ctx->status->code;
    size_t old = buf->rank > 0 ? mf_tensor_nbytes(buf) : 0;
    if (old) memcpy(nb->data, buf->data, old);
    if (mf_tensor_nbytes(nb) > old) memset((char *)nb->data + old, 0, mf_tensor_nbytes(nb) - old);
    int64_t *m = nm->data;
    const int64_t *om = meta->data;
    memset(m, 0, (size_t)mdim * sizeof *m);
    m[0] = ta_size(meta) | TA_RAGGED;
    int64_t *off = ta_offsets(nm), *len = ta_lengths(nm);
    for (int64_t i = 0; i < cap; i++) {
      m[1 + i] = om[1 + i];
      off[i] = was ? ta_offsets(meta)[i] : i * l0;
      len[i] = was ? ta_lengths(meta)[i] : l0;
    }
    *ta_used(nm) = used;
  }
  mf_tensor *ob = ctx->outputs[0], *nm = ctx->outputs[1];
  int64_t *m = nm->data, *off = ta_offsets(nm), *len = ta_lengths(nm), *u = ta_used(nm);
  int64_t *rows = ctx->op->num_outputs > 2 ? ta_rows_output(ctx, 1, add) : NULL;
  if (ctx->op->num_outputs > 2 && !rows) return ctx->status->code;
  const char *src = e->src;
  for (int64_t j = 0, r = 0; j < e->n; j++) {
    int64_t i = e->idx[j], l = ta_elem_j(e, j).dims[0];
    off[i] = *u;
    len[i] = l;
    if (l && rest_bytes) memcpy((char *)ob->data + (size_t)*u * rest_bytes, src, (size_t)l * rest_bytes);
    src += (size_t)l * rest_bytes;
    for (int64_t k = 0; rows && k < l; k++) rows[r++] = *u + k;
    *u += l;
    m[1 + i] = 1;
  }
  if (new_size > ta_size(nm)) ta_set_size(nm, new_size);
  return MF_OK;
}

/* Writes the elements: in the uniform buffer while they have its shape,
 * else ragged. Sets outputs 0 (buffer), 1 (meta) and 2 (rows written: in a
 * uniform buffer the indices, the index input itself when of output 2's
 * dtype, `index`, else of rank `rank`). */
static mf_code ta_commit(mf_kernel_ctx *ctx, const ta_elems *e, int64_t new_size, const mf_tensor *index, int rank) {
  mf_tensor *buf = ctx->inputs[0];
  bool uniform = !ta_is_ragged(ctx->inputs[1]);
  mf_shape one = buf->rank > 0 ? mf_shape_make(buf->rank - 1, buf->dims + 1) : e->n ? ta_elem_j(e, 0) : e->elem;
  int64_t bad = -1;
  for (int64_t j = 0; uniform && j < e->n; j++) {
    mf_shape s = ta_elem_j(e, j);
    if (!ta_shape_eq(&s, &one)) uniform = false, bad = j;
  }
  if (!uniform) return ta_commit_ragged(ctx, e, new_size, bad);
  if (ta_prepare_write(ctx, new_size, &one)) return ctx->status->code;
  mf_tensor *ob = ctx->outputs[0];
  size_t row = ta_row_bytes(ob);
  int64_t *m = ctx->outputs[1]->data;
  for (int64_t j = 0; j < e->n; j++) {
    int64_t i = e->idx[j];
    if (row) memcpy((char *)ob->data + (size_t)i * row, e->src + (size_t)j * row, row);
    m[1 + i] = 1;
  }
  if (ctx->op->num_outputs < 3) return MF_OK;
  if (index && index->dtype == ctx->op->out_dtypes[2]) {
    ctx->outputs[2] = mf_tensor_retain((mf_tensor *)index);
    return MF_OK;
  }
  int64_t *rows = ta_rows_output(ctx, rank, e->n);
  for (int64_t j = 0; rows && j < e->n; j++) rows[j] = e->idx[j];
  return ctx->status->code;
}

/* The static shape of a write's new meta: the old one unless the array may
 * grow or turn ragged. */
static mf_shape ta_meta_shape(const mf_infer_ctx *ic) {
  if (!mf_attr_bool(ic->attrs, "dynamic_size", false) && !ta_attr_ragged(ic)) return ic->in_shapes[1];
  return mf_shape_make(1, (int64_t[]){-1});
}

/* The static shape of the rows output of a write or read with index input
 * `ii` (-1: none; `n` rows when known). */
static mf_shape ta_rows_shape(const mf_infer_ctx *ic, int ii, int64_t n) {
  if (ta_attr_ragged(ic)) return mf_shape_unknown();
  if (ii >= 0) return ic->in_shapes[ii];
  return mf_shape_make(1, &n);
}

static mf_code ta_dtype_check(mf_infer_ctx *ic, int vi) {
  if (ic->in_dtypes[vi] == ic->in_dtypes[0]) return MF_OK;
  return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                       "%s: TensorArray dtype is %s but Op is trying to write dtype %s; use tf.cast", ic->op_name,
                       mf_dtype_name(ic->in_dtypes[0]), mf_dtype_name(ic->in_dtypes[vi]));
}

/* TensorArrayWrite(buffer, meta, index, value), attrs dynamic_size, ragged. */
static mf_code ta_write_infer(mf_infer_ctx *ic) {
  if (ta_check(ic, 2)) return ic->status->code;
  if (ic->in_shapes[2].rank > 0)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: the index must be a scalar", ic->op_name);
  if (ta_dtype_check(ic, 3)) return ic->status->code;
  const mf_shape *b = &ic->in_shapes[0], *v = &ic->in_shapes[3];
  mf_shape elem = ta_elem_shape(b);
  if (!ta_attr_ragged(ic) && b->rank > 0 && !mf_shape_compatible(&elem, v)) {
    char x[128], y[128];
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "%s: the value has shape %s but the TensorArray's elements have shape %s", ic->op_name,
                         mf_shape_str_tf(v, x, sizeof x), mf_shape_str_tf(&elem, y, sizeof y));
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT64;
  if (ta_attr_ragged(ic)) {
    ic->out_shapes[0] = mf_shape_unknown();
  } else if (v->rank >= 0 && v->rank < MF_MAX_RANK) {
    mf_shape out = {.rank = v->rank + 1};
    out.dims[0] = b->rank > 0 && !mf_attr_bool(ic->attrs, "dynamic_size", false) ? b->dims[0] : -1;
    for (int d = 0; d < v->rank; d++)
      out.dims[d + 1] = v->dims[d] >= 0 ? v->dims[d] : (b->rank > 0 ? b->dims[d + 1] : -1);
    ic->out_shapes[0] = out;
  } else {
    ic->out_shapes[0] = b->rank > 0 ? *b : mf_shape_unknown();
  }
  ic->out_shapes[1] = ta_meta_shape(ic);
  return MF_OK;
}

static mf_code ta_write_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  mf_tensor *value = ctx->inputs[3];
  int64_t i = load_index(ctx->inputs[2], 0);
  if (ta_check_write(ctx, i, ctx->inputs[1])) return ctx->status->code;
  int64_t size = ta_size(ctx->inputs[1]);
  ta_elems e = {.n = 1, .idx = &i, .elem = mf_shape_of(value), .src = value->data};
  return ta_commit(ctx, &e, i + 1 > size ? i + 1 : size, NULL, 0);
}

/* Scatter rows of value at indices (TensorArrayScatter) or at 0..n-1
 * (TensorArrayUnstack: no indices input). */
static mf_code ta_scatter_infer_common(mf_infer_ctx *ic, int vi) {
  if (ta_check(ic, vi == 3 ? 2 : -1)) return ic->status->code;
  if (ta_dtype_check(ic, vi)) return ic->status->code;
  const mf_shape *v = &ic->in_shapes[vi];
  if (v->rank == 0)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: the value must have rank >= 1 (one row per element)",
                         ic->op_name);
  if (vi == 3 && ic->in_shapes[2].rank > 1)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: the indices must be a vector", ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT64;
  if (vi == 2) ic->out_dtypes[2] = MF_INT64;
  const mf_shape *b = &ic->in_shapes[0];
  if (ta_attr_ragged(ic)) {
    ic->out_shapes[0] = mf_shape_unknown();
  } else if (v->rank > 0) {
    mf_shape out = *v;
    out.dims[0] = b->rank > 0 && !mf_attr_bool(ic->attrs, "dynamic_size", false) ? b->dims[0] : -1;
    ic->out_shapes[0] = out;
  } else {
    ic->out_shapes[0] = b->rank > 0 ? *b : mf_shape_unknown();
  }
  ic->out_shapes[1] = ta_meta_shape(ic);
  if (vi == 2) ic->out_shapes[2] = ta_rows_shape(ic, -1, v->rank > 0 ? v->dims[0] : -1);
  return MF_OK;
}
static mf_code ta_scatter_infer(mf_infer_ctx *ic) { return ta_scatter_infer_common(ic, 3); }
static mf_code ta_unstack_infer(mf_infer_ctx *ic) { return ta_scatter_infer_common(ic, 2); }

/* Checks the writes of elements at idx[0..n) (no index twice) and gives the new size. */
static mf_code ta_check_writes(mf_kernel_ctx *ctx, const int64_t *idx, int64_t n, int64_t *new_size) {
  *new_size = ta_size(ctx->inputs[1]);
  for (int64_t j = 0; j < n; j++) {
    int64_t i = idx[j];
    if (ta_check_write(ctx, i, ctx->inputs[1])) return ctx->status->code;
    for (int64_t k = 0; k < j; k++)
      if (idx[k] == i)
        return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                             "%s: Could not write to TensorArray index %lld because it has already been written to.",
                             ctx->op->name, (long long)i);
    if (i + 1 > *new_size) *new_size = i + 1;
  }
  return MF_OK;
}

static mf_code ta_scatter_common(mf_kernel_ctx *ctx, const mf_tensor *indices, const mf_tensor *value) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  int64_t n = value->dims[0];
  if (indices && indices->size != n)
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: %lld indices for a value of %lld rows",
                         ctx->op->name, (long long)indices->size, (long long)n);
  int64_t *idx = mf_malloc((size_t)(n ? n : 1) * sizeof *idx), new_size;
  if (!idx) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  for (int64_t j = 0; j < n; j++) idx[j] = indices ? load_index(indices, j) : j;
  if (!ta_check_writes(ctx, idx, n, &new_size)) {
    ta_elems e = {.n = n, .idx = idx, .elem = mf_shape_make(value->rank - 1, value->dims + 1), .src = value->data};
    ta_commit(ctx, &e, new_size, NULL, 1);
  }
  mf_free(idx);
  return ctx->status->code;
}
static mf_code ta_scatter_kernel(mf_kernel_ctx *ctx) { return ta_scatter_common(ctx, ctx->inputs[2], ctx->inputs[3]); }
static mf_code ta_unstack_kernel(mf_kernel_ctx *ctx) { return ta_scatter_common(ctx, NULL, ctx->inputs[2]); }

/* TensorArraySplit(buffer, meta, value, lengths): value's rows split into
 * elements 0, 1, ... of the lengths (which may differ). */
static mf_code ta_split_infer(mf_infer_ctx *ic) {
  if (ta_check(ic, 3)) return ic->status->code;
  if (ta_dtype_check(ic, 2)) return ic->status->code;
  const mf_shape *v = &ic->in_shapes[2], *l = &ic->in_shapes[3];
  if (v->rank == 0)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: Expected value to be at least a vector, but received "
                         "shape: []", ic->op_name);
  if (l->rank >= 0 && l->rank != 1)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: Expected lengths to be a vector", ic->op_name);
  if (ic->in_dtypes[3] != MF_INT32 && ic->in_dtypes[3] != MF_INT64)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: lengths must be int32 or int64, got %s",
                         ic->op_name, mf_dtype_name(ic->in_dtypes[3]));
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT64;
  ic->out_dtypes[2] = MF_INT64;
  if (ta_attr_ragged(ic) || v->rank < 0 || v->rank >= MF_MAX_RANK) {
    ic->out_shapes[0] = mf_shape_unknown();
  } else {
    mf_shape out = {.rank = v->rank + 1};
    const mf_shape *b = &ic->in_shapes[0];
    out.dims[0] = b->rank > 0 && !mf_attr_bool(ic->attrs, "dynamic_size", false) ? b->dims[0] : -1;
    out.dims[1] = -1;
    memcpy(out.dims + 2, v->dims + 1, (size_t)(v->rank - 1) * sizeof out.dims[0]);
    ic->out_shapes[0] = out;
  }
  ic->out_shapes[1] = mf_shape_make(1, (int64_t[]){-1});
  ic->out_shapes[2] = mf_shape_make(1, (int64_t[]){-1});
  return MF_OK;
}

static mf_code ta_split_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  const mf_tensor *value = ctx->inputs[2], *lengths = ctx->inputs[3];
  char a[128];
  if (value->rank < 1) {
    mf_shape s = mf_shape_of(value);
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                         "%s: Expected value to be at least a vector, but received shape: %s", ctx->op->name,
                         mf_shape_str(&s, a, sizeof a));
  }
  int64_t n = lengths->size, total = 0, new_size;
  int64_t *buf = mf_malloc((size_t)(2 * n + 1) * sizeof *buf), *lead = buf, *idx = buf + n;
  if (!buf) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  for (int64_t j = 0; j < n; j++) {
    lead[j] = load_index(lengths, j);
    idx[j] = j;
    if (lead[j] < 0) {
      mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: lengths must be non-negative, got %lld at %lld",
                    ctx->op->name, (long long)lead[j], (long long)j);
      goto done;
    }
    total += lead[j];
  }
  if (total != value->dims[0]) {
    mf_shape s = mf_shape_of(value);
    mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                  "%s: Expected sum of lengths to be equal to values.shape[0], but sum of lengths is %lld and "
                  "value's shape is: %s",
                  ctx->op->name, (long long)total, mf_shape_str(&s, a, sizeof a));
    goto done;
  }
  if (ta_check_writes(ctx, idx, n, &new_size)) goto done;
  ta_elems e = {.n = n, .idx = idx, .lead = lead, .elem = mf_shape_of(value), .src = value->data};
  ta_commit(ctx, &e, new_size, NULL, 1);
done:
  mf_free(buf);
  return ctx->status->code;
}

/* Checks reading index i and, when the reading op clears what it reads,
 * marks it cleared (not in the recomputations of a gradient function). */
static mf_code ta_check_read(mf_kernel_ctx *ctx, mf_tensor *meta, int64_t i) {
  int64_t size = ta_size(meta);
  if (i < 0 || i >= size)
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: Tried to read from index %lld but array size is: %lld",
                         ctx->op->name, (long long)i, (long long)size);
  if (!ta_written(meta, i))
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                         "%s: Could not read from TensorArray index %lld because it has not yet been written to.",
                         ctx->op->name, (long long)i);
  if (gradient_depth > 0 || !mf_attr_bool(ctx->attrs, "clear_after_read", false)) return MF_OK;
  int64_t *m = meta->data;
  if (m[1 + i] == 2)
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                         "%s: Could not read index %lld twice because it was cleared after a previous read "
                         "(perhaps try setting clear_after_read = false?).",
                         ctx->op->name, (long long)i);
  m[1 + i] = 2;
  return MF_OK;
}

/* The element shape of a TensorArray without a buffer: its attr
 * element_shape (what the Lua side knows from writes it traced, in a loop
 * that may have run zero times), when fully defined. */
static bool ta_attr_elem(const mf_attrs *attrs, mf_shape *elem) {
  const mf_attr *es = mf_attrs_find(attrs, "element_shape", MF_ATTR_SHAPE);
  if (!es || !mf_shape_fully_defined(&es->v.shape) || es->v.shape.rank >= MF_MAX_RANK) return false;
  *elem = es->v.shape;
  return true;
}

/* The error of reading the elements of an array without a buffer (nothing
 * written) whose element shape is not known. */
static mf_code ta_unknown_elem(mf_kernel_ctx *ctx) {
  return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                       "%s: TensorArray has size zero, but element shape <unknown> is not fully defined. Give "
                       "element_shape when creating a TensorArray that may stay empty",
                       ctx->op->name);
}

/* Reads of a ragged array: elements idx (NULL: 0..n-1), one (`single`: the
 * element itself) or n of one shape stacked (`concat`: joined along their
 * first dimension, shapes agreeing after it). Sets output 0 and, for Stack
 * and Concat, output 1 (the rows read). */
static mf_code ta_read_ragged(mf_kernel_ctx *ctx, const mf_tensor *idx, int64_t n, bool single, bool concat) {
  const mf_tensor *buf = ctx->inputs[0], *meta = ctx->inputs[1];
  const int64_t *off = ta_offsets(meta), *len = ta_lengths(meta);
  mf_shape rest = mf_shape_make(buf->rank - 1, buf->dims + 1);
  size_t rest_bytes = (size_t)ta_row_elems(buf) * mf_dtype_size(buf->dtype);
  int64_t total = 0, l0 = -1, i0 = -1;
  for (int64_t j = 0; j < n; j++) {
    int64_t i = idx ? load_index(idx, j) : j;
    if (!concat && l0 >= 0 && len[i] != l0) {
      char a[128], b[128];
      mf_shape s0 = rest, s1 = rest;
      s0.rank = s1.rank = rest.rank + 1;
      memmove(s0.dims + 1, rest.dims, (size_t)rest.rank * sizeof rest.dims[0]);
      memmove(s1.dims + 1, rest.dims, (size_t)rest.rank * sizeof rest.dims[0]);
      s0.dims[0] = l0;
      s1.dims[0] = len[i];
      return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                           "%s: TensorArray has inconsistent shapes.  Index %lld has shape: %s but index %lld has "
                           "shape: %s",
                           ctx->op->name, (long long)i0, mf_shape_str(&s0, a, sizeof a), (long long)i,
                           mf_shape_str(&s1, b, sizeof b));
    }
    if (l0 < 0) l0 = len[i], i0 = i;
    total += len[i];
  }
  int64_t dims[MF_MAX_RANK];
  int r = 0;
  if (concat || single) {
    dims[r++] = total;
  } else {
    if (n == 0) return ta_unknown_elem(ctx);
    dims[r++] = n;
    dims[r++] = l0;
  }
  if (r + rest.rank > MF_MAX_RANK)
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: the result has too many dimensions", ctx->op->name);
  memcpy(dims + r, rest.dims, (size_t)rest.rank * sizeof dims[0]);
  mf_tensor *o = mf_kernel_alloc_output(ctx, 0, buf->dtype, r + rest.rank, dims);
  int64_t one = total;
  bool with_rows = ctx->op->num_outputs > 1;
  mf_tensor *rt = o && with_rows ? mf_kernel_alloc_output(ctx, 1, MF_INT64, 1, &one) : NULL;
  if (!o || (with_rows && !rt)) return ctx->status->code;
  char *dst = o->data;
  for (int64_t j = 0, k = 0; j < n; j++) {
    int64_t i = idx ? load_index(idx, j) : j;
    size_t nb = (size_t)len[i] * rest_bytes;
    if (nb) memcpy(dst, (const char *)buf->data + (size_t)off[i] * rest_bytes, nb);
    dst += nb;
    for (int64_t q = 0; rt && q < len[i]; q++, k++) ((int64_t *)rt->data)[k] = off[i] + q;
  }
  return MF_OK;
}

/* Output 1 of a stack or concat of a uniform array: the element indices 0..n-1. */
static mf_code ta_index_rows(mf_kernel_ctx *ctx, int64_t n) {
  mf_tensor *rt = mf_kernel_alloc_output(ctx, 1, MF_INT64, 1, &n);
  for (int64_t j = 0; rt && j < n; j++) ((int64_t *)rt->data)[j] = j;
  return ctx->status->code;
}

/* TensorArrayRead(buffer, meta, index) / TensorArrayGather(buffer, meta, indices). */
static mf_code ta_read_infer(mf_infer_ctx *ic) {
  if (ta_check(ic, 2)) return ic->status->code;
  if (ic->in_shapes[2].rank > 1)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: the index must be a scalar or a vector", ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  mf_shape elem = ta_attr_ragged(ic) ? mf_shape_unknown() : ta_elem_shape(&ic->in_shapes[0]);
  if (elem.rank < 0 && !ta_attr_ragged(ic)) ta_attr_elem(ic->attrs, &elem);
  if (ic->in_shapes[2].rank == 1 || ic->in_shapes[2].rank < 0) {  /* gather */
    if (elem.rank >= 0 && elem.rank < MF_MAX_RANK && ic->in_shapes[2].rank == 1) {
      mf_shape out = {.rank = elem.rank + 1};
      out.dims[0] = ic->in_shapes[2].dims[0];
      memcpy(out.dims + 1, elem.dims, (size_t)elem.rank * sizeof out.dims[0]);
      elem = out;
    } else {
      elem = mf_shape_unknown();
    }
  }
  ic->out_shapes[0] = elem;
  return MF_OK;
}

static mf_code ta_read_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  mf_tensor *buf = ctx->inputs[0], *idx = ctx->inputs[2];
  for (int64_t j = 0; j < idx->size; j++)
    if (ta_check_read(ctx, ctx->inputs[1], load_index(idx, j))) return ctx->status->code;
  if (ta_is_ragged(ctx->inputs[1])) return ta_read_ragged(ctx, idx, idx->size, idx->rank == 0, false);
  /* The element shape: the buffer's, or (nothing written: a gather of no
   * indices) the attribute's. */
  mf_shape elem;
  if (buf->rank > 0) elem = mf_shape_make(buf->rank - 1, buf->dims + 1);
  else if (!ta_attr_elem(ctx->attrs, &elem)) return ta_unknown_elem(ctx);
  mf_shape out = {.rank = elem.rank + idx->rank};
  if (idx->rank) out.dims[0] = idx->size;
  for (int d = 0; d < elem.rank; d++) out.dims[d + idx->rank] = elem.dims[d];
  mf_tensor *o = mf_kernel_alloc_output(ctx, 0, buf->dtype, out.rank, out.dims);
  if (!o) return ctx->status->code;
  size_t row = ta_row_bytes(buf);
  for (int64_t j = 0; j < idx->size && row; j++)
    memcpy((char *)o->data + (size_t)j * row, (const char *)buf->data + (size_t)load_index(idx, j) * row, row);
  return MF_OK;
}

/* TensorArrayStack(buffer, meta): the elements as one tensor [size, element...]. */
static mf_code ta_stack_infer(mf_infer_ctx *ic) {
  if (ta_check(ic, -1)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT64;
  ic->out_shapes[1] = mf_shape_make(1, (int64_t[]){-1});
  ic->out_shapes[0] = ic->in_shapes[0].rank > 0 && !ta_attr_ragged(ic) ? ic->in_shapes[0] : mf_shape_unknown();
  mf_shape elem;
  if (ic->out_shapes[0].rank < 0 && !ta_attr_ragged(ic) && ta_attr_elem(ic->attrs, &elem)) {
    mf_shape out = {.rank = elem.rank + 1};
    memcpy(out.dims + 1, elem.dims, (size_t)elem.rank * sizeof out.dims[0]);
    ic->out_shapes[0] = out;
  }
  if (ic->out_shapes[0].rank > 0) {
    const mf_shape *m = &ic->in_shapes[1];
    ic->out_shapes[0].dims[0] = m->rank == 1 && m->dims[0] > 0 ? m->dims[0] - 1 : -1;
  }
  return MF_OK;
}

static mf_code ta_stack_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  mf_tensor *buf = ctx->inputs[0], *meta = ctx->inputs[1];
  int64_t size = ta_size(meta);
  for (int64_t i = 0; i < size; i++)
    if (ta_check_read(ctx, meta, i)) return ctx->status->code;
  if (ta_is_ragged(meta)) return ta_read_ragged(ctx, NULL, size, false, false);
  if (buf->rank == 0) {
    /* Nothing written: [0, element...] when the element shape is known. */
    mf_shape elem;
    if (size > 0) return mf_status_set(ctx->status, MF_INTERNAL, "%s: written array without a buffer", ctx->op->name);
    if (!ta_attr_elem(ctx->attrs, &elem)) return ta_unknown_elem(ctx);
    int64_t dims[MF_MAX_RANK] = {0};
    memcpy(dims + 1, elem.dims, (size_t)elem.rank * sizeof dims[0]);
    if (!mf_kernel_alloc_output(ctx, 0, buf->dtype, elem.rank + 1, dims)) return ctx->status->code;
    return ta_index_rows(ctx, 0);
  }
  if (buf->dims[0] == size) {  /* exactly full: the buffer itself */
    ctx->outputs[0] = mf_tensor_retain(buf);
    return ta_index_rows(ctx, size);
  }
  int64_t dims[MF_MAX_RANK];
  memcpy(dims, buf->dims, (size_t)buf->rank * sizeof dims[0]);
  dims[0] = size;
  mf_tensor *o = mf_kernel_alloc_output(ctx, 0, buf->dtype, buf->rank, dims);
  if (!o) return ctx->status->code;
  if (mf_tensor_nbytes(o)) memcpy(o->data, buf->data, mf_tensor_nbytes(o));
  return ta_index_rows(ctx, size);
}

/* TensorArrayConcat(buffer, meta): the elements joined along their first
 * dimension (they may differ in it). */
static mf_code ta_concat_infer(mf_infer_ctx *ic) {
  if (ta_check(ic, -1)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_dtypes[1] = MF_INT64;
  ic->out_shapes[1] = mf_shape_make(1, (int64_t[]){-1});
  const mf_shape *b = &ic->in_shapes[0];
  mf_shape elem;
  if (ta_attr_ragged(ic)) elem = mf_shape_unknown();
  else if (b->rank > 0) elem = ta_elem_shape(b);
  else if (!ta_attr_elem(ic->attrs, &elem)) elem = mf_shape_unknown();
  if (elem.rank == 0)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT,
                         "%s: TensorArray concat needs elements of rank >= 1, got scalars (use stack)", ic->op_name);
  ic->out_shapes[0] = elem;
  if (elem.rank > 0) ic->out_shapes[0].dims[0] = -1;
  return MF_OK;
}

static mf_code ta_scalar_concat(mf_kernel_ctx *ctx) {
  return mf_status_set(ctx->status, MF_INVALID_ARGUMENT,
                       "%s: TensorArray concat needs elements of rank >= 1, got scalars (use stack)", ctx->op->name);
}

static mf_code ta_concat_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, ctx->inputs[0], ctx->inputs[1])) return ctx->status->code;
  mf_tensor *buf = ctx->inputs[0], *meta = ctx->inputs[1];
  int64_t size = ta_size(meta);
  for (int64_t i = 0; i < size; i++)
    if (ta_check_read(ctx, meta, i)) return ctx->status->code;
  if (ta_is_ragged(meta)) return ta_read_ragged(ctx, NULL, size, false, true);
  mf_shape elem;
  if (buf->rank > 0) elem = mf_shape_make(buf->rank - 1, buf->dims + 1);
  else if (size > 0) return mf_status_set(ctx->status, MF_INTERNAL, "%s: written array without a buffer", ctx->op->name);
  else if (!ta_attr_elem(ctx->attrs, &elem)) return ta_unknown_elem(ctx);
  if (elem.rank == 0) return ta_scalar_concat(ctx);
  mf_shape out = elem;
  out.dims[0] = size * elem.dims[0];
  mf_tensor *o = mf_kernel_alloc_output(ctx, 0, buf->dtype, out.rank, out.dims);
  if (!o) return ctx->status->code;
  if (mf_tensor_nbytes(o)) memcpy(o->data, buf->data, mf_tensor_nbytes(o));
  return ta_index_rows(ctx, size);
}

/* TensorArraySize(meta): int32 scalar. */
static mf_code ta_size_infer(mf_infer_ctx *ic) {
  if (ic->in_dtypes[0] != MF_INT64 || ic->in_shapes[0].rank > 1)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: the input is not a TensorArray's metadata", ic->op_name);
  ic->out_dtypes[0] = MF_INT32;
  ic->out_shapes[0] = mf_shape_scalar();
  return MF_OK;
}
static mf_code ta_size_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, NULL, ctx->inputs[0])) return ctx->status->code;
  *(int32_t *)ctx->outputs[0]->data = (int32_t)ta_size(ctx->inputs[0]);
  return MF_OK;
}

/* ---- gradient helpers over plain buffers ---- */

/* _TAGatherRows(x, indices): x[indices] (a scalar index drops the first dim), no checks but range. */
static mf_code rows_gather_infer(mf_infer_ctx *ic) {
  mf_dtype t = ic->in_dtypes[1];
  if (t != MF_INT32 && t != MF_INT64)
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: indices must be int32 or int64", ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  mf_shape elem = ta_elem_shape(&ic->in_shapes[0]);
  const mf_shape *ix = &ic->in_shapes[1];
  if (ix->rank == 0) ic->out_shapes[0] = elem;
  else if (ix->rank == 1 && elem.rank >= 0) {
    mf_shape out = {.rank = elem.rank + 1};
    out.dims[0] = ix->dims[0];
    memcpy(out.dims + 1, elem.dims, (size_t)elem.rank * sizeof out.dims[0]);
    ic->out_shapes[0] = out;
  } else {
    ic->out_shapes[0] = mf_shape_unknown();
  }
  return MF_OK;
}

static mf_code rows_range_error(mf_kernel_ctx *ctx, int64_t i, int64_t n) {
  return mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: row %lld is out of range [0, %lld)", ctx->op->name,
                       (long long)i, (long long)n);
}

static mf_code rows_gather_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *idx = ctx->inputs[1];
  mf_tensor *o = ctx->outputs[0];
  if (x->rank == 0) return mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: expects rows", ctx->op->name);
  size_t row = (size_t)ta_row_elems(x) * mf_dtype_size(x->dtype);
  for (int64_t j = 0; j < idx->size; j++) {
    int64_t i = load_index(idx, j);
    if (i < 0 || i >= x->dims[0]) return rows_range_error(ctx, i, x->dims[0]);
    if (row) memcpy((char *)o->data + (size_t)j * row, (const char *)x->data + (size_t)i * row, row);
  }
  return MF_OK;
}

/* _TAScatterRows(shape, indices, updates): zeros of `shape` with updates
 * added at rows `indices` (a scalar index: one row). */
static mf_code rows_scatter_infer(mf_infer_ctx *ic) {
  if (!mf_dtype_is_float(ic->in_dtypes[2]))
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: updates must be float", ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[2];
  ic->out_shapes[0] = mf_infer_shape_value(ic, 0);
  return MF_OK;
}

/* o[idx[j]] += u[j] for each row j (o float, of u's dtype). */
static mf_code add_rows(mf_kernel_ctx *ctx, mf_tensor *o, const mf_tensor *idx, const mf_tensor *u) {
  if (o->rank == 0) return MF_OK;  /* an array without a buffer yet takes no gradient */
  int64_t row = ta_row_elems(o);
  if (u->size != idx->size * row || u->dtype != o->dtype)
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: updates do not match the rows", ctx->op->name);
  for (int64_t j = 0; j < idx->size; j++) {
    int64_t i = load_index(idx, j);
    if (i < 0 || i >= o->dims[0]) return rows_range_error(ctx, i, o->dims[0]);
    if (o->dtype == MF_FLOAT32) {
      float *d = (float *)o->data + i * row;
      const float *s = (const float *)u->data + j * row;
      for (int64_t e = 0; e < row; e++) d[e] += s[e];
    } else {
      double *d = (double *)o->data + i * row;
      const double *s = (const double *)u->data + j * row;
      for (int64_t e = 0; e < row; e++) d[e] += s[e];
    }
  }
  return MF_OK;
}

static mf_code rows_scatter_kernel(mf_kernel_ctx *ctx) {
  mf_tensor *o = ctx->outputs[0];
  if (mf_tensor_nbytes(o)) memset(o->data, 0, mf_tensor_nbytes(o));
  return add_rows(ctx, o, ctx->inputs[1], ctx->inputs[2]);
}

/* _TAGradBuffer(g, shape): g fitted to `shape`: its first bytes, zeros past
 * g's end (a write's new buffer starts with the bytes of its old one); a
 * scalar shape gives 0. */
static mf_code grad_buffer_infer(mf_infer_ctx *ic) {
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = mf_infer_shape_value(ic, 1);
  return MF_OK;
}

static mf_code grad_buffer_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *g = ctx->inputs[0];
  mf_tensor *o = ctx->outputs[0];
  size_t n = mf_tensor_nbytes(o), have = o->rank == 0 || g->rank == 0 ? 0 : mf_tensor_nbytes(g);
  if (g->dtype != o->dtype)
    return mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: the gradient's dtype does not match", ctx->op->name);
  if (have > n) have = n;
  if (have) memcpy(o->data, g->data, have);
  if (n > have) memset((char *)o->data + have, 0, n - have);
  return MF_OK;
}

/* _TARows(meta, index), attr ragged: the buffer rows of the elements at
 * index (a scalar or a vector): the index itself while the array is uniform,
 * else the vector of their rows, one element after another. */
static mf_code ta_rows_infer(mf_infer_ctx *ic) {
  mf_dtype t = ic->in_dtypes[1];
  if (ic->in_dtypes[0] != MF_INT64 || ic->in_shapes[0].rank > 1 || (t != MF_INT32 && t != MF_INT64))
    return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: expects a TensorArray's metadata and indices",
                         ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[1];
  ic->out_shapes[0] = ta_rows_shape(ic, 1, -1);
  return MF_OK;
}

static mf_code ta_rows_kernel(mf_kernel_ctx *ctx) {
  if (ta_check_pair(ctx, NULL, ctx->inputs[0])) return ctx->status->code;
  const mf_tensor *meta = ctx->inputs[0], *idx = ctx->inputs[1];
  if (!ta_is_ragged(meta)) {
    ctx->outputs[0] = mf_tensor_retain(ctx->inputs[1]);
    return MF_OK;
  }
  const int64_t *off = ta_offsets(meta), *len = ta_lengths(meta);
  int64_t cap = ta_capacity(meta), n = 0;
  for (int64_t j = 0; j < idx->size; j++) {
    int64_t i = load_index(idx, j);
    if (i < 0 || i >= cap) return rows_range_error(ctx, i, cap);
    n += len[i];
  }
  mf_tensor *o = mf_kernel_alloc_output(ctx, 0, idx->dtype, 1, &n);
  if (!o) return ctx->status->code;
  for (int64_t j = 0, k = 0; j < idx->size; j++) {
    int64_t i = load_index(idx, j);
    for (int64_t q = 0; q < len[i]; q++, k++) {
      if (o->dtype == MF_INT32) ((int32_t *)o->data)[k] = (int32_t)(off[i] + q);
      else ((int64_t *)o->data)[k] = off[i] + q;
    }
  }
  return MF_OK;
}

/* ---- gradient rules ---- */

static mf_output shape_of(mf_grad_ctx *gc, mf_output x) { return mf_grad_op1(gc, "Shape", x); }

static mf_output grad_buffer(mf_grad_ctx *gc, mf_output g, mf_output like) {
  return mf_grad_op2(gc, "_TAGradBuffer", g, shape_of(gc, like));
}

static mf_output scatter_rows(mf_grad_ctx *gc, mf_output like, mf_output idx, mf_output g) {
  mf_op_desc *d = mf_grad_begin(gc, "_TAScatterRows");
  if (d) {
    mf_op_desc_add_input(d, shape_of(gc, like));
    mf_op_desc_add_input(d, idx);
    mf_op_desc_add_input(d, g);
  }
  return mf_grad_finish(gc, d);
}

/* The buffer rows of the elements at index in the array of `meta`: a
 * _TARows, which a loop's gradient keeps per iteration as it keeps shapes
 * (not the array). */
static mf_output ta_rows_of(mf_grad_ctx *gc, mf_output meta, mf_output index) {
  mf_op_desc *d = mf_grad_begin(gc, "_TARows");
  if (d) {
    mf_op_desc_add_input(d, meta);
    mf_op_desc_add_input(d, index);
    mf_op_desc_set_attr_bool(d, "ragged", mf_attr_bool(&gc->op->attrs, "ragged", false));
  }
  return mf_grad_finish(gc, d);
}

/* Write / Scatter / Unstack / Split: the buffer's gradient passes on (a
 * prefix), the value's is the rows written (of the new meta: a written
 * element's rows never move; output 2 of Unstack and Split). */
static mf_code ta_write_grad(mf_grad_ctx *gc) {
  mf_output g = gc->grads[0];
  if (!g.op) return MF_OK;
  const mf_op *op = gc->op;
  gc->input_grads[0] = grad_buffer(gc, g, mf_op_in(op, 0));
  const char *t = op->def->name;
  bool write = strcmp(t, "TensorArrayWrite") == 0, scatter = strcmp(t, "TensorArrayScatter") == 0;
  int vi = write || scatter ? 3 : 2;
  mf_output rows = write || scatter ? ta_rows_of(gc, mf_op_out(op, 1), mf_op_in(op, 2)) : mf_op_out(op, 2);
  mf_output value = mf_grad_op2(gc, "_TAGatherRows", g, rows);
  gc->input_grads[vi] = write ? value : mf_grad_op2(gc, "Reshape", value, shape_of(gc, mf_op_in(op, vi)));
  return gc->status->code;
}

/* Read / Gather: the rows read, scattered into zeros of the buffer's shape;
 * Stack / Concat: the same with the rows they return (output 1). */
static mf_code ta_read_grad(mf_grad_ctx *gc) {
  if (!gc->grads[0].op) return MF_OK;
  const mf_op *op = gc->op;
  mf_output rows = op->num_inputs == 3 ? ta_rows_of(gc, mf_op_in(op, 1), mf_op_in(op, 2)) : mf_op_out(op, 1);
  gc->input_grads[0] = scatter_rows(gc, mf_op_in(op, 0), rows, gc->grads[0]);
  return gc->status->code;
}

static mf_code rows_gather_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = scatter_rows(gc, mf_op_in(gc->op, 0), mf_op_in(gc->op, 1), gc->grads[0]);
  return gc->status->code;
}

static mf_code rows_scatter_grad(mf_grad_ctx *gc) {
  gc->input_grads[2] = mf_grad_op2(gc, "_TAGatherRows", gc->grads[0], mf_op_in(gc->op, 1));
  return gc->status->code;
}

static mf_code grad_buffer_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = grad_buffer(gc, gc->grads[0], mf_op_in(gc->op, 0));
  return gc->status->code;
}

static const mf_op_def defs[] = {
    {.name = "_Arg", .num_inputs = 0, .num_outputs = 1, .flags = MF_OP_SETS_OUTPUTS,
     .infer = arg_infer, .kernel = {[MF_CPU] = arg_kernel}},
    {.name = "If", .num_inputs = 1, .num_outputs = -1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_VARIADIC_INPUTS,
     .infer = if_infer, .kernel = {[MF_CPU] = if_kernel}, .grad = if_grad},
    {.name = "While", .num_inputs = 0, .num_outputs = -1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_VARIADIC_INPUTS,
     .infer = while_infer, .kernel = {[MF_CPU] = while_kernel}, .grad = while_grad},
    {.name = "WhileGrad", .num_inputs = 1, .num_outputs = -1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_VARIADIC_INPUTS,
     .infer = while_grad_infer, .kernel = {[MF_CPU] = while_grad_kernel}, .grad = while_grad_grad},
    {.name = "Select", .num_inputs = 3, .num_outputs = 1,
     .infer = select_infer, .kernel = {[MF_CPU] = select_kernel}, .grad = select_grad},
    {.name = "Where", .num_inputs = 1, .num_outputs = 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE,
     .infer = where_infer, .kernel = {[MF_CPU] = where_kernel}},
    {.name = "_CaseIndex", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = case_index_infer, .kernel = {[MF_CPU] = case_index_kernel}},
    {.name = "TensorArray", .num_inputs = 1, .num_outputs = 2, .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = ta_new_infer, .kernel = {[MF_CPU] = ta_new_kernel}},
    {.name = "TensorArrayWrite", .num_inputs = 4, .num_outputs = 2,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_write_infer, .kernel = {[MF_CPU] = ta_write_kernel}, .grad = ta_write_grad},
    {.name = "TensorArrayScatter", .num_inputs = 4, .num_outputs = 2,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_scatter_infer, .kernel = {[MF_CPU] = ta_scatter_kernel}, .grad = ta_write_grad},
    {.name = "TensorArrayUnstack", .num_inputs = 3, .num_outputs = 3,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_unstack_infer, .kernel = {[MF_CPU] = ta_unstack_kernel}, .grad = ta_write_grad},
    {.name = "TensorArraySplit", .num_inputs = 4, .num_outputs = 3,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_split_infer, .kernel = {[MF_CPU] = ta_split_kernel}, .grad = ta_write_grad},
    {.name = "TensorArrayRead", .num_inputs = 3, .num_outputs = 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_read_infer, .kernel = {[MF_CPU] = ta_read_kernel}, .grad = ta_read_grad},
    {.name = "TensorArrayStack", .num_inputs = 2, .num_outputs = 2,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_stack_infer, .kernel = {[MF_CPU] = ta_stack_kernel}, .grad = ta_read_grad},
    {.name = "TensorArrayConcat", .num_inputs = 2, .num_outputs = 2,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS,
     .infer = ta_concat_infer, .kernel = {[MF_CPU] = ta_concat_kernel}, .grad = ta_read_grad},
    {.name = "TensorArraySize", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = ta_size_infer, .kernel = {[MF_CPU] = ta_size_kernel}},
    {.name = "_TARows", .num_inputs = 2, .num_outputs = 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE,
     .infer = ta_rows_infer, .kernel = {[MF_CPU] = ta_rows_kernel}},
    {.name = "_TAGatherRows", .num_inputs = 2, .num_outputs = 1,
     .infer = rows_gather_infer, .kernel = {[MF_CPU] = rows_gather_kernel}, .grad = rows_gather_grad},
    {.name = "_TAScatterRows", .num_inputs = 3, .num_outputs = 1,
     .infer = rows_scatter_infer, .kernel = {[MF_CPU] = rows_scatter_kernel}, .grad = rows_scatter_grad},
    {.name = "_TAGradBuffer", .num_inputs = 2, .num_outputs = 1,
     .infer = grad_buffer_infer, .kernel = {[MF_CPU] = grad_buffer_kernel}, .grad = grad_buffer_grad},
};
MF_OP_TABLE(mf_ops_control, defs);
