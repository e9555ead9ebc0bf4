/* call.c — what the control-flow ops share to call functions: function
 * attributes, effects, prepared calls and stashes (ops/control.h declares
 * them), and _Arg, a function's argument. The ops: cond.c (If, _CaseIndex),
 * while.c (While, WhileGrad), their gradient rules: function_grad.c, and
 * tensor_array.c.
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
 *           (set by the gradient rules; see function_grad.c).
 *   F_fwd   ints {n}: F's op count before gradients were first built in it
 *           (set by the rules; ops from id n on compute gradients).
 * Kernels run functions with their session (mf_function_plan/run), so ops
 * inside keep per-session state, and errors name the failing inner op. Ops
 * with effects (assignments, updates: stateful ops writing through a ref
 * input, and control flow containing them) run whenever their function runs,
 * even when no result depends on them. */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"
#include "ops/control/control.h"

#include <stdio.h>
#include <pthread.h>
#include <string.h>

/* ---------- function attributes ---------- */

/* Reads function attribute `f` ("then", "body", ...); false when missing. */
bool mf_fn_get(const mf_attrs *a, const char *f, fn_attr *fa) {
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

mf_op *mf_fn_op(const fn_attr *f, int64_t id) { return f->g->ops[id]; }
static mf_output fn_port(mf_graph *g, const int64_t *pair) {
  mf_output o = {g->ops[pair[0]], (int)pair[1]};
  return o;
}
mf_output mf_fn_result(const fn_attr *f, int i) { return fn_port(f->g, &f->out[2 * i]); }

bool mf_is_type(const mf_op *op, const char *type) { return strcmp(op->def->name, type) == 0; }
bool mf_is_arg(const mf_op *op) { return mf_is_type(op, "_Arg"); }

/* Checks a function attribute at build time: `nin` inputs, the ids and ports in range. */
mf_code mf_fn_check(mf_infer_ctx *ic, const char *f, fn_attr *fa, int nin) {
  if (!mf_fn_get(ic->attrs, f, fa))
    return MF_INVALID(ic->status, "%s: missing function attribute '%s'", ic->op_name, f);
  if (fa->nin != nin)
    return MF_INVALID(ic->status, "%s: '%s_in' has %d entries for %d inputs",
                      ic->op_name, f, fa->nin, nin);
  int n = fa->g->num_ops;
  for (int k = 0; k < fa->nin; k++) {
    int64_t id = fa->in[k];
    if (id >= n || id < -1 || (id >= 0 && !mf_is_arg(fa->g->ops[id]) && !mf_is_type(fa->g->ops[id], "VariableV2")))
      return MF_INVALID(ic->status, "%s: '%s_in'[%d] is not an argument of the function",
                        ic->op_name, f, k);
  }
  const int64_t *lists[2] = {fa->out, fa->stash};
  int counts[2] = {fa->nout, fa->nstash};
  for (int l = 0; l < 2; l++)
    for (int i = 0; i < counts[l]; i++) {
      const int64_t *p = &lists[l][2 * i];
      if (p[0] < 0 || p[0] >= n || p[1] < 0 || p[1] >= fa->g->ops[p[0]]->num_outputs)
        return MF_INVALID(ic->status, "%s: a port of function '%s' is out of range",
                          ic->op_name, f);
    }
  return MF_OK;
}

/* ---------- effects ---------- */

static bool graph_has_effects(const mf_graph *g, int depth);

/* An op that must run when its function runs although nothing reads it: a
 * stateful op writing through a ref input, or control flow containing one. */
static bool has_effects(const mf_op *op, int depth) {
  if (depth > 64) return true;
  if (op->def->flags & MF_OP_STATEFUL)
    for (int k = 0; k < op->num_inputs; k++)
      if (mf_op_is_ref_input(op, k) && !mf_is_type(op, "ReadVariable") && !mf_is_type(op, "IsVariableInitialized"))
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
bool mf_is_stateful(const mf_op *op, int depth) {
  if (depth > 64 || (op->def->flags & MF_OP_STATEFUL)) return true;
  for (int i = 0; i < op->attrs.n; i++)
    if (op->attrs.items[i].kind == MF_ATTR_GRAPH && graph_is_stateful(op->attrs.items[i].v.graph, depth + 1))
      return true;
  return false;
}

static bool graph_is_stateful(const mf_graph *g, int depth) {
  for (int i = 0; i < g->num_ops; i++)
    if (mf_is_stateful(g->ops[i], depth)) return true;
  return false;
}

/* ---------- calling functions ---------- */

/* How deep this thread is in runs of gradient functions (WhileGrad, a
 * gradient If). Those recompute forward values, so their TensorArray reads
 * read elements a second time: such reads neither clear nor check
 * clear_after_read. A run stays on one thread, its functions nested in it. */
_Thread_local int mf_gradient_depth;

enum { MAX_CALLS = 4 };
/* An op's per-session state: its prepared calls, made under `lock` and
 * published atomically, so concurrent runs of the op read them without it. */
typedef struct call_state {
  pthread_mutex_t lock;
  _Atomic(fn_call *) calls[MAX_CALLS];
} call_state;

static void fn_call_free(fn_call *c) {
  while (c) {
    fn_call *older = c->replaced;
    mf_free(c->arg_src);
    mf_free(c);
    c = older;
  }
}

static void call_state_free(void *p) {
  call_state *cs = p;
  for (int i = 0; i < MAX_CALLS; i++) fn_call_free(atomic_load(&cs->calls[i]));
  pthread_mutex_destroy(&cs->lock);
  mf_free(cs);
}

static void *call_state_new(mf_kernel_ctx *ctx) {
  (void)ctx;
  call_state *cs = mf_calloc(1, sizeof *cs);
  if (cs) pthread_mutex_init(&cs->lock, NULL);
  return cs;
}

/* Whether function f reads argument op `arg` (else it is not fed at all). */
static bool arg_used(const fn_attr *f, const mf_op *arg) {
  for (int i = 0; i < f->nout; i++)
    if (mf_fn_result(f, i).op == arg) return true;
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
fn_call *mf_prepare_call(mf_kernel_ctx *ctx, int which, const fn_attr *f, int nstash,
                         const int64_t *extra, int nextra, bool pure) {
  call_state *cs = mf_kernel_state(ctx, call_state_new, call_state_free);
  if (!cs) return NULL;
  fn_call *call = atomic_load_explicit(&cs->calls[which], memory_order_acquire);
  if (call && call->nstash == nstash) return call;
  pthread_mutex_lock(&cs->lock);
  call = atomic_load_explicit(&cs->calls[which], memory_order_relaxed);
  fn_call *ret = call && call->nstash == nstash ? call : NULL;
  if (ret) goto unlock;
  mf_graph *g = f->g;
  int nfetch = f->nout + nstash;
  mf_output *feeds = mf_malloc((size_t)(f->nin + nextra + 1) * sizeof *feeds);
  mf_output *fetches = mf_malloc((size_t)(nfetch + 1) * sizeof *fetches);
  mf_op **targets = mf_malloc((size_t)(g->num_ops + 1) * sizeof *targets);
  fn_call *made = mf_calloc(1, sizeof *made);
  int *src = mf_malloc((size_t)(f->nin + 1) * sizeof *src);
  if (!feeds || !fetches || !targets || !made || !src) {
    mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  int nargs = 0, ntargets = 0;
  for (int k = 0; k < f->nin; k++)
    if (f->in[k] >= 0 && mf_is_arg(mf_fn_op(f, f->in[k])) && arg_used(f, mf_fn_op(f, f->in[k]))) {
      feeds[nargs].op = mf_fn_op(f, f->in[k]);
      feeds[nargs].index = 0;
      src[nargs++] = k;
    }
  for (int i = 0; i < nextra; i++) feeds[nargs + i] = fn_port(g, &extra[2 * i]);
  for (int i = 0; i < f->nout; i++) fetches[i] = mf_fn_result(f, i);
  for (int i = 0; i < nstash; i++) fetches[f->nout + i] = fn_port(g, &f->stash[2 * i]);
  for (int i = 0; i < g->num_ops && !pure; i++)
    if (has_effects(g->ops[i], 0)) targets[ntargets++] = g->ops[i];
  mf_callable *plan = mf_function_plan(ctx, g, feeds, nargs + nextra, fetches, nfetch, targets, ntargets);
  if (!plan) goto done;
  *made = (fn_call){.plan = plan, .nargs = nargs, .arg_src = src, .nextra = nextra, .nstash = nstash,
                    .replaced = call};
  atomic_store_explicit(&cs->calls[which], made, memory_order_release);
  ret = made;
  made = NULL;
  src = NULL;
done:
  mf_free(feeds);
  mf_free(fetches);
  mf_free(targets);
  mf_free(made);
  mf_free(src);
unlock:
  pthread_mutex_unlock(&cs->lock);
  return ret;
}

/* Runs a prepared call: args from the calling inputs `in`, the extra feeds
 * from `extra`, results into `out` (new references). The inputs k with
 * move[k] (move may be NULL) and, when move_extra, the extras are references
 * the caller gives up (so the function may update them in place); the others
 * are retained. */
mf_code mf_run_call(mf_kernel_ctx *ctx, fn_call *c, mf_tensor **in, const bool *move,
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
  mf_function_run(ctx, c->plan, feeds, out);
  if (feeds != inline_feeds) mf_free(feeds);
  return ctx->status->code;
}

/* Reads a scalar bool (a predicate a function returned) into *v; false when t is not one. */
bool mf_scalar_bool(const mf_tensor *t, bool *v) {
  if (t->dtype != MF_BOOL || t->rank != 0) return false;
  *v = *(const bool *)t->data;
  return true;
}

/* ---------- stashes ---------- */

/* The stash type: control.h; what a stash keeps and when: function_grad.c. */

void mf_stash_free(stash *st) {
  if (!st) return;
  for (int i = 0; i < st->niter * st->nports; i++) mf_tensor_release(st->values[i]);
  mf_free(st->values);
  mf_free(st->ports);
  if (st->g) mf_graph_release(st->g);
  mf_free(st);
}

static void stash_release(void *data, void *arg) {
  MF_UNUSED(data);
  mf_stash_free(arg);
}

stash *mf_stash_new(mf_kernel_ctx *ctx, const fn_attr *f, int branch) {
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
mf_code mf_stash_push(mf_kernel_ctx *ctx, stash *st, mf_tensor *const *values) {
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
mf_code mf_set_stash_output(mf_kernel_ctx *ctx, int i, stash *st) {
  mf_tensor *h;
  if (st) {
    h = mf_tensor_wrap(MF_INT64, 0, NULL, &st->bytes, stash_release, st, ctx->status);
    if (h) h->handle = true;  /* the stash itself must reach the gradient op, on whatever device */
    else mf_stash_free(st);
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
mf_code mf_stash_of(mf_kernel_ctx *ctx, const mf_tensor *h, stash **out) {
  *out = NULL;
  if (h->release == stash_release) {
    *out = h->release_arg;
    return MF_OK;
  }
  if (h->dtype == MF_INT64 && h->rank == 0 && *(const int64_t *)h->data == 0) return MF_OK;
  return MF_INVALID(ctx->status,
                    "%s: input %d is not the stash output of a forward If/While op", ctx->op->name,
                    ctx->num_inputs - 1);
}

/* Column of port (id, index) in the stash, or -1. */
int mf_stash_column(const stash *st, const int64_t *pair) {
  for (int i = 0; i < st->nports; i++)
    if (st->ports[2 * i] == pair[0] && st->ports[2 * i + 1] == pair[1]) return i;
  return -1;
}

/* ---------- _Arg: a function's argument (attrs dtype, shape) ---------- */

static mf_code arg_infer(mf_infer_ctx *ic) {
  const mf_attr *t = mf_attrs_find(ic->attrs, "dtype", MF_ATTR_TYPE);
  if (!t || !mf_dtype_size(t->v.type))
    return MF_INVALID(ic->status, "%s: _Arg needs a valid 'dtype'", ic->op_name);
  const mf_attr *sh = mf_attrs_find(ic->attrs, "shape", MF_ATTR_SHAPE);
  ic->out_dtypes[0] = t->v.type;
  ic->out_shapes[0] = sh ? sh->v.shape : mf_shape_unknown();
  return MF_OK;
}

static mf_code arg_kernel(mf_kernel_ctx *ctx) {
  return mf_status_set(ctx->status, MF_INTERNAL, "function argument '%s' was not given a value", ctx->op->name);
}

static const mf_op_def defs[] = {
    {.name = "_Arg", .num_inputs = 0, .num_outputs = 1, .flags = MF_OP_INTERNAL | MF_OP_SETS_OUTPUTS,
     .infer = arg_infer, .kernel = {[MF_CPU] = arg_kernel}},
};
MF_OP_TABLE(mf_ops_call, defs);
