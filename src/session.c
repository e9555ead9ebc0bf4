/* session.c — sessions, execution plans and the executor.
 *
 * A plan is built once per (feeds, fetches, targets) signature: the ops the
 * fetches need in topological order (op ids are already topological, since an
 * op's inputs exist before it), one value slot per port, and for each slot the
 * step after which it is dead. Dead buffers go to the plan's pool and are
 * handed to later outputs, in this run and the next ones, so a steady-state
 * run allocates nothing.
 *
 * Functions (the branches and loop bodies of control flow, see ops_control.c)
 * are graphs of their own that kernels run with the kernel's session: plans
 * over them are built and cached the same way (mf_function_plan), and their
 * ops keep their per-session state per (session, graph). A variable's
 * stand-in inside a function (a VariableV2 op with the int attr "_var_id")
 * has the state of the variable with that op id in the session's graph. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

typedef struct mf_step {
  mf_op *op;
  mf_kernel_fn kernel;
  int *in_slots;         /* one per input */
  int out_slot;          /* outputs use out_slot .. out_slot + num_outputs - 1 */
  int *dead;             /* slots whose last reader is this step */
  int num_dead;
  bool infer_at_runtime;
  unsigned forwardable;  /* bit k: input k dies here, so output 0 may take its buffer */
  unsigned dying;        /* bit k: input k's slot is read by no later step and not fetched */
  bool has_fed_output;
  struct mf_graph_states *state_holder; /* the op's state: state_holder->slots[state_index] */
  int state_index;
  bool stand_in;         /* a variable's stand-in in a function: reads a fed value of the variable */
} mf_step;

/* Per-op state of one graph in one session: the session's graph and each
 * function graph run by its kernels have one. */
typedef struct mf_graph_states {
  mf_graph *graph;
  mf_state_slot *slots;  /* per op id: variable values, RNG counters */
  int num;
} mf_graph_states;

typedef struct mf_plan {
  mf_session *sess;
  mf_graph *graph;       /* the session's graph, or a function graph */
  mf_graph_states *states; /* the state of graph's ops */
  uint64_t hash;
  mf_output *feeds;
  int nfeeds;
  bool feeds_variables;  /* some feed replaces a variable's value (set_var_feeds) */
  mf_output *fetches;
  int nfetches;
  mf_op **targets;
  int ntargets;
  int num_slots;
  mf_tensor **slots;
  bool *slot_fetched;
  bool *slot_read;       /* read by some step or fetched (mf_kernel_ctx.outputs_read) */
  bool *slot_const;      /* holds a Const's value from run to run: no step computes it */
  bool *fetch_moves;     /* mf_function_run hands fetch i over: no other fetch names its slot */
  int *feed_slots;
  int *fetch_slots;
  mf_step *steps;
  int num_steps;
  mf_tensor **pool;      /* idle buffers owned by the plan */
  int pool_len, pool_cap;
  mf_tensor **last_fetched; /* our reference to the last results, reclaimed when the caller drops them */
  mf_dtype *rt_dtypes;   /* runtime shape inference scratch */
  mf_shape *rt_in_shapes, *rt_out_shapes;
  int rt_cap_in, rt_cap_out;
  mf_tensor **fed_keep;  /* per step: fed values of its outputs, set aside (rt_cap_out entries) */
} mf_plan;

struct mf_callable { mf_plan plan; };

struct mf_session {
  mf_graph *graph;
  bool closed;
  mf_callable **plans;
  int num_plans, cap_plans;
  mf_graph_states states;     /* of the session's graph */
  mf_graph_states **fn_states; /* of function graphs, made when first run */
  int num_fn_states, cap_fn_states;
  mf_callable **fn_plans;     /* plans over function graphs */
  int num_fn_plans, cap_fn_plans;
  uint64_t num_allocations;
  /* During a run, the values fed for variables (by op id; NULL when not fed),
   * which their stand-ins in functions read too. */
  mf_tensor **var_feeds;
  int num_var_feeds;
  /* The thread of mf_callable_run_async (async.c), NULL until its first job.
   * Every other use of the session first waits for its jobs (mf_worker_drain). */
  mf_worker *worker;
  unsigned options;           /* MF_ALLOW_SOFT_PLACEMENT | MF_LOG_DEVICE_PLACEMENT */
  /* Placement lines of plans built since the last mf_session_take_placement_log,
   * and the text that call last handed out. */
  char *log;
  size_t log_len, log_cap;
  char *log_taken;
};

/* ---------- buffers ---------- */

static void pool_put(mf_plan *p, mf_tensor *t) {
  if (!t) return;
  /* A dying view (Reshape, Squeeze) hands its base on: the base is reusable
   * when the view held the last other reference to it. */
  while (t->base && mf_tensor_refcount(t) == 1) {
    mf_tensor *base = mf_tensor_retain(t->base);
    mf_tensor_release(t);
    t = base;
  }
  bool reusable = mf_tensor_refcount(t) == 1 && t->owned && t->device == MF_CPU;
  if (reusable && p->pool_len < p->pool_cap) p->pool[p->pool_len++] = t;
  else mf_tensor_release(t);
}

static mf_tensor *plan_alloc(mf_plan *p, mf_dtype dtype, int rank, const int64_t *dims, mf_status *s) {
  int64_t n = mf_shape_num_elements(rank, dims);
  size_t bytes = (size_t)(n > 0 ? n : 0) * mf_dtype_size(dtype);
  int best = -1;
  for (int i = 0; i < p->pool_len; i++) {
    size_t cap = p->pool[i]->capacity;
    if (cap >= bytes && cap <= 2 * bytes + MF_ALIGNMENT &&
        (best < 0 || cap < p->pool[best]->capacity))
      best = i;
  }
  if (best >= 0) {
    mf_tensor *t = p->pool[best];
    p->pool[best] = p->pool[--p->pool_len];
    mf_tensor_reshape_owned(t, dtype, rank, dims);
    return t;
  }
  p->sess->num_allocations++;
  return mf_tensor_new_uninit(dtype, rank, dims, s);
}

/* A variable's stand-in in a function names the variable by "_var_id". */
static bool var_id_of(const mf_op *op, int64_t *id) { return mf_op_attr_int(op, "_var_id", id); }

/* The state of the op producing ref input k of op: a variable, or in a
 * function the stand-in of a variable of the session's graph. */
static mf_state_slot *ref_state(mf_plan *p, const mf_op *op, int k) {
  const mf_op *src = op->inputs[k].op;
  int64_t id;
  if (src->graph != p->sess->graph && var_id_of(src, &id)) return &p->sess->states.slots[id];
  return &p->states->slots[src->id];
}

mf_state_slot *mf_kernel_ref_state(mf_kernel_ctx *ctx, int k) { return ref_state(ctx->plan, ctx->op, k); }

mf_tensor *mf_kernel_alloc_output(mf_kernel_ctx *ctx, int i, mf_dtype dtype, int rank,
                                  const int64_t *dims) {
  mf_tensor *t = plan_alloc(ctx->plan, dtype, rank, dims, ctx->status);
  if (t) {
    mf_tensor_release(ctx->outputs[i]);
    ctx->outputs[i] = t;
  }
  return t;
}

/* ---------- sessions ---------- */

mf_session *mf_session_new_with_options(mf_graph *g, unsigned options, mf_status *s) {
  mf_status_clear(s);
  if (options & ~(unsigned)(MF_ALLOW_SOFT_PLACEMENT | MF_LOG_DEVICE_PLACEMENT)) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "unknown session options 0x%x", options);
    return NULL;
  }
  mf_session *sess = mf_calloc(1, sizeof *sess);
  if (!sess) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory creating a session");
    return NULL;
  }
  sess->graph = mf_graph_retain(g);
  sess->states.graph = g;
  sess->options = options;
  return sess;
}

mf_session *mf_session_new(mf_graph *g, mf_status *s) { return mf_session_new_with_options(g, 0, s); }

/* Appends a formatted line to the session's placement log; false when out of memory. */
static bool log_line(mf_session *sess, const char *fmt, ...) MF_PRINTF(2, 3);
static bool log_line(mf_session *sess, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return false;
  size_t need = sess->log_len + (size_t)n + 2;
  if (need > sess->log_cap) {
    size_t cap = sess->log_cap ? sess->log_cap : 256;
    while (cap < need) cap *= 2;
    char *grown = mf_realloc(sess->log, cap);
    if (!grown) return false;
    sess->log = grown;
    sess->log_cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(sess->log + sess->log_len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sess->log_len += (size_t)n;
  sess->log[sess->log_len++] = '\n';
  sess->log[sess->log_len] = '\0';
  return true;
}

const char *mf_session_take_placement_log(mf_session *sess) {
  mf_worker_drain(sess->worker);
  mf_free(sess->log_taken);
  sess->log_taken = sess->log_len ? sess->log : NULL;
  if (sess->log_len) {
    sess->log = NULL;
    sess->log_len = sess->log_cap = 0;
  }
  return sess->log_taken ? sess->log_taken : "";
}

static void plan_free(mf_plan *p) {
  for (int i = 0; i < p->num_steps; i++) {
    mf_free(p->steps[i].in_slots);
    mf_free(p->steps[i].dead);
  }
  for (int i = 0; i < p->num_slots; i++) mf_tensor_release(p->slots[i]);
  for (int i = 0; i < p->pool_len; i++) mf_tensor_release(p->pool[i]);
  for (int i = 0; i < p->nfetches; i++) mf_tensor_release(p->last_fetched[i]);
  mf_free(p->steps);
  mf_free(p->slots);
  mf_free(p->slot_fetched);
  mf_free(p->slot_read);
  mf_free(p->slot_const);
  mf_free(p->fetch_moves);
  mf_free(p->feeds);
  mf_free(p->fetches);
  mf_free(p->targets);
  mf_free(p->feed_slots);
  mf_free(p->fetch_slots);
  mf_free(p->pool);
  mf_free(p->last_fetched);
  mf_free(p->rt_dtypes);
  mf_free(p->rt_in_shapes);
  mf_free(p->rt_out_shapes);
  mf_free(p->fed_keep);
  mf_free(p);
}

/* Closing drops every buffer but keeps the plans themselves, so a callable
 * used after close reports the closed session instead of touching freed memory. */
static void plans_drop_buffers(mf_callable **plans, int n) {
  for (int i = 0; i < n; i++) {
    mf_plan *p = &plans[i]->plan;
    for (int k = 0; k < p->pool_len; k++) mf_tensor_release(p->pool[k]);
    p->pool_len = 0;
    for (int k = 0; k < p->nfetches; k++) {
      mf_tensor_release(p->last_fetched[k]);
      p->last_fetched[k] = NULL;
    }
  }
}

static void states_clear(mf_graph_states *st) {
  for (int i = 0; i < st->num; i++)
    if (st->slots[i].ptr && st->slots[i].free) st->slots[i].free(st->slots[i].ptr);
  mf_free(st->slots);
  st->slots = NULL;
  st->num = 0;
}

void mf_session_close(mf_session *sess) {
  if (!sess) return;
  mf_worker_free(sess->worker);  /* cancels jobs not started, waits for the running one */
  sess->worker = NULL;
  if (sess->closed) return;
  sess->closed = true;
  plans_drop_buffers(sess->plans, sess->num_plans);
  plans_drop_buffers(sess->fn_plans, sess->num_fn_plans);
  for (int i = 0; i < sess->num_fn_states; i++) states_clear(sess->fn_states[i]);
  states_clear(&sess->states);
}

void mf_session_free(mf_session *sess) {
  if (!sess) return;
  mf_session_close(sess);
  for (int i = 0; i < sess->num_plans; i++) plan_free(&sess->plans[i]->plan);
  for (int i = 0; i < sess->num_fn_plans; i++) plan_free(&sess->fn_plans[i]->plan);
  for (int i = 0; i < sess->num_fn_states; i++) mf_free(sess->fn_states[i]);
  mf_free(sess->plans);
  mf_free(sess->fn_plans);
  mf_free(sess->fn_states);
  mf_free(sess->var_feeds);
  mf_free(sess->log);
  mf_free(sess->log_taken);
  mf_graph_release(sess->graph);
  mf_free(sess);
}

int mf_session_num_plans(const mf_session *sess) { return sess->num_plans; }
bool mf_session_is_closed(const mf_session *sess) { return sess->closed; }
mf_worker **mf_session_worker(mf_session *sess) { return &sess->worker; }
mf_session *mf_callable_session(const mf_callable *c) { return c->plan.sess; }
int mf_callable_num_feeds(const mf_callable *c) { return c->plan.nfeeds; }
int mf_callable_num_fetches(const mf_callable *c) { return c->plan.nfetches; }
mf_graph *mf_session_graph(const mf_session *sess) { return sess->graph; }

mf_state_slot *mf_session_op_state(mf_session *sess, const mf_op *op) {
  mf_graph_states *st = op->graph == sess->graph ? &sess->states : NULL;
  for (int i = 0; !st && i < sess->num_fn_states; i++)
    if (sess->fn_states[i]->graph == op->graph) st = sess->fn_states[i];
  return st && op->id < st->num ? &st->slots[op->id] : NULL;
}
uint64_t mf_session_num_allocations(const mf_session *sess) {
  mf_worker_drain(sess->worker);
  return sess->num_allocations;
}

/* ---------- plans ---------- */

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; }

static uint64_t signature_hash(const mf_output *feeds, int nfeeds, const mf_output *fetches,
                               int nfetches, mf_op *const *targets, int ntargets) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < nfeeds; i++) h = mix(mix(h, (uintptr_t)feeds[i].op), (uint64_t)feeds[i].index);
  h = mix(h, 0x9e3779b9);
  for (int i = 0; i < nfetches; i++) h = mix(mix(h, (uintptr_t)fetches[i].op), (uint64_t)fetches[i].index);
  h = mix(h, 0x85ebca6b);
  for (int i = 0; i < ntargets; i++) h = mix(h, (uintptr_t)targets[i]);
  return h;
}

static bool same_ports(const mf_output *a, const mf_output *b, int n) {
  for (int i = 0; i < n; i++)
    if (a[i].op != b[i].op || a[i].index != b[i].index) return false;
  return true;
}

static mf_code check_port(mf_graph *g, const char *what, mf_output o, mf_status *s) {
  if (!o.op) return mf_status_set(s, MF_INVALID_ARGUMENT, "a %s is NULL", what);
  if (o.op->graph != g)
    return mf_status_set(s, MF_INVALID_ARGUMENT,
                         "Tensor %s:%d (a %s) is not an element of this session's graph", o.op->name,
                         o.index, what);
  if (o.index < 0 || o.index >= o.op->num_outputs)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "op '%s' has no output %d", o.op->name, o.index);
  return MF_OK;
}

static mf_code grow_states(mf_graph_states *states, mf_status *s) {
  int n = states->graph->num_ops;
  if (n <= states->num) return MF_OK;
  mf_state_slot *st = mf_realloc(states->slots, (size_t)n * sizeof *st);
  if (!st) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory");
  memset(st + states->num, 0, (size_t)(n - states->num) * sizeof *st);
  states->slots = st;
  states->num = n;
  return MF_OK;
}

static bool port_is_fed(const mf_plan *p, mf_output o) {
  for (int i = 0; i < p->nfeeds; i++)
    if (p->feeds[i].op == o.op && p->feeds[i].index == o.index) return true;
  return false;
}

#define PLAN_ALLOC(ptr, count) \
  ((ptr) = mf_calloc((size_t)((count) > 0 ? (count) : 1), sizeof *(ptr)), (ptr) != NULL)

static mf_code plan_build(mf_plan *p, mf_status *s) {
  mf_graph *g = p->graph;
  mf_session *sess = p->sess;
  int n = g->num_ops;
  mf_code rc = MF_RESOURCE_EXHAUSTED;
  size_t log_mark = sess->log_len;
  bool *needed = NULL, *fed_op = NULL;
  int *slot_base = NULL, *last_use = NULL;
  if (!PLAN_ALLOC(needed, n) || !PLAN_ALLOC(fed_op, n) || !PLAN_ALLOC(slot_base, n)) goto done;

  /* Build-time inference read the values of constants and shapes; a feed that
   * replaces any such value voids what it inferred. */
  bool fed_values = false;
  for (int i = 0; i < p->nfeeds; i++) {
    fed_op[p->feeds[i].op->id] = true;
    fed_values |= mf_port_value_read_at_build(p->feeds[i]);
    p->feeds_variables |= strcmp(p->feeds[i].op->def->name, "VariableV2") == 0;
  }
  /* A port is fed when some feed names it. */
#define PORT_FED(o) (fed_op[(o).op->id] && port_is_fed(p, (o)))
  for (int i = 0; i < p->nfetches; i++)
    if (!PORT_FED(p->fetches[i])) needed[p->fetches[i].op->id] = true;
  for (int i = 0; i < p->ntargets; i++) needed[p->targets[i]->id] = true;
  for (int id = n - 1; id >= 0; id--) {
    if (!needed[id]) continue;
    mf_op *op = g->ops[id];
    for (int k = 0; k < op->num_inputs; k++)
      if (!mf_op_is_ref_input(op, k) && !PORT_FED(op->inputs[k])) needed[op->inputs[k].op->id] = true;
    for (int k = 0; k < op->num_control; k++) needed[op->control_inputs[k]->id] = true;
  }

  /* Slots for every port of a needed or fed op. */
  int num_slots = 0, num_steps = 0;
  for (int id = 0; id < n; id++) {
    slot_base[id] = -1;
    if (needed[id] || fed_op[id]) {
      slot_base[id] = num_slots;
      num_slots += g->ops[id]->num_outputs;
    }
    num_steps += needed[id];
  }
  p->num_slots = num_slots;
  if (!PLAN_ALLOC(p->slots, num_slots) || !PLAN_ALLOC(p->slot_fetched, num_slots) ||
      !PLAN_ALLOC(p->slot_read, num_slots) || !PLAN_ALLOC(p->slot_const, num_slots) ||
      !PLAN_ALLOC(p->fetch_moves, p->nfetches) ||
      !PLAN_ALLOC(last_use, num_slots) || !PLAN_ALLOC(p->steps, num_steps) ||
      !PLAN_ALLOC(p->feed_slots, p->nfeeds) || !PLAN_ALLOC(p->fetch_slots, p->nfetches) ||
      !PLAN_ALLOC(p->last_fetched, p->nfetches) || !PLAN_ALLOC(p->pool, num_slots + p->nfetches))
    goto done;
  p->pool_cap = num_slots + p->nfetches;
  for (int i = 0; i < num_slots; i++) last_use[i] = -1;
  for (int i = 0; i < p->nfeeds; i++) p->feed_slots[i] = slot_base[p->feeds[i].op->id] + p->feeds[i].index;
  for (int i = 0; i < p->nfetches; i++) {
    p->fetch_slots[i] = slot_base[p->fetches[i].op->id] + p->fetches[i].index;
    p->slot_fetched[p->fetch_slots[i]] = true;
  }
  for (int i = 0; i < p->nfetches; i++) {
    p->fetch_moves[i] = true;
    for (int j = 0; j < p->nfetches; j++) p->fetch_moves[i] &= j == i || p->fetch_slots[j] != p->fetch_slots[i];
  }

  int max_in = 0, max_out = 0;
  for (int id = 0; id < n; id++) {
    if (!needed[id]) continue;
    mf_op *op = g->ops[id];
    mf_placement where;
    if (mf_device_place(op, sess->options & MF_ALLOW_SOFT_PLACEMENT, &where, s)) {
      mf_status_append_origin(s, op);
      goto done;
    }
    if (sess->options & MF_LOG_DEVICE_PLACEMENT) {
      char name[64];
      mf_device_placement_name(&where, name, sizeof name);
      if (where.soft && !log_line(sess, "Soft placement: operation '%s' (%s) asked for '%s', which is not "
                                  "available in this process; placed on %s",
                                  op->name, op->def->name, where.requested, name))
        goto done;
      if (!log_line(sess, "%s: (%s): %s", op->name, op->def->name, name)) goto done;
    }
    if (strcmp(op->def->name, "Const") == 0) {
      /* A constant's value sits in its slot for the plan's life: no step. */
      const mf_attr *v = mf_attrs_find(&op->attrs, "value", MF_ATTR_TENSOR);
      p->slots[slot_base[id]] = mf_tensor_retain(v->v.tensor);
      p->slot_const[slot_base[id]] = true;
      continue;
    }
    mf_step *st = &p->steps[p->num_steps];
    st->op = op;
    st->kernel = op->def->kernel[where.type];
    if (!st->kernel) {
      rc = mf_status_set(s, MF_UNIMPLEMENTED, "No %s kernel registered for op %s ('%s')",
                         where.type == MF_CUDA ? "GPU" : "CPU", op->def->name, op->name);
      mf_status_append_origin(s, op);
      goto done;
    }
    st->out_slot = slot_base[id];
    int64_t var_id;
    st->state_holder = p->states;
    st->state_index = id;
    if (var_id_of(op, &var_id)) {
      if (p->states == &p->sess->states || var_id < 0 || var_id >= p->sess->graph->num_ops) {
        rc = mf_status_set(s, MF_INVALID_ARGUMENT, "'%s' names no variable of the session's graph", op->name);
        goto done;
      }
      st->state_holder = &p->sess->states;
      st->state_index = (int)var_id;
      st->stand_in = true;
    }
    /* A source op learns nothing new at run time (an unfed Placeholder must reach
     * its kernel, which reports the missing feed). */
    st->infer_at_runtime = (fed_values || !op->outputs_fully_defined) && op->num_inputs > 0;
    st->has_fed_output = fed_op[id];
    if (!PLAN_ALLOC(st->in_slots, op->num_inputs)) goto done;
    for (int k = 0; k < op->num_inputs; k++) {
      if (mf_op_is_ref_input(op, k)) {
        st->in_slots[k] = -1;
        continue;
      }
      st->in_slots[k] = slot_base[op->inputs[k].op->id] + op->inputs[k].index;
      last_use[st->in_slots[k]] = p->num_steps;
    }
    for (int k = 0; k < op->num_outputs; k++)   /* an output nobody reads dies at once */
      if (last_use[st->out_slot + k] < p->num_steps) last_use[st->out_slot + k] = p->num_steps;
    if (op->num_inputs > max_in) max_in = op->num_inputs;
    if (op->num_outputs > max_out) max_out = op->num_outputs;
    p->num_steps++;
  }
  for (int i = 0; i < p->num_steps; i++) {
    mf_step *st = &p->steps[i];
    for (int k = 0; k < st->op->num_inputs && k < 32; k++)
      if (st->in_slots[k] >= 0 && last_use[st->in_slots[k]] == i && !p->slot_fetched[st->in_slots[k]] &&
          !p->slot_const[st->in_slots[k]])
        st->dying |= 1u << k;
    if (st->op->def->flags & MF_OP_FORWARDS_INPUT) st->forwardable = st->dying;
  }
  for (int i = 0; i < num_slots; i++) p->slot_read[i] = p->slot_fetched[i];
  for (int i = 0; i < p->num_steps; i++)
    for (int k = 0; k < p->steps[i].op->num_inputs; k++)
      if (p->steps[i].in_slots[k] >= 0) p->slot_read[p->steps[i].in_slots[k]] = true;
  for (int i = 0; i < num_slots; i++)
    if (!p->slot_fetched[i] && !p->slot_const[i] && last_use[i] >= 0) p->steps[last_use[i]].num_dead++;
  for (int i = 0; i < p->num_steps; i++)
    if (!PLAN_ALLOC(p->steps[i].dead, p->steps[i].num_dead)) goto done;
  for (int i = 0; i < p->num_steps; i++) p->steps[i].num_dead = 0;
  for (int i = 0; i < num_slots; i++)
    if (!p->slot_fetched[i] && !p->slot_const[i] && last_use[i] >= 0) {
      mf_step *st = &p->steps[last_use[i]];
      st->dead[st->num_dead++] = i;
    }
  p->rt_cap_in = max_in;
  p->rt_cap_out = max_out > MF_MAX_OUTPUTS_INLINE ? max_out : MF_MAX_OUTPUTS_INLINE;
  if (!PLAN_ALLOC(p->rt_dtypes, p->rt_cap_in) || !PLAN_ALLOC(p->rt_in_shapes, p->rt_cap_in) ||
      !PLAN_ALLOC(p->rt_out_shapes, p->rt_cap_out) || !PLAN_ALLOC(p->fed_keep, p->rt_cap_out))
    goto done;
  rc = grow_states(p->states, s);
  if (rc == MF_OK) rc = grow_states(&p->sess->states, s);
done:
  if (rc == MF_RESOURCE_EXHAUSTED && mf_ok(s)) mf_status_set(s, rc, "out of memory building a plan");
  if (!mf_ok(s) && sess->log) {  /* a plan that failed placed nothing */
    sess->log_len = log_mark;
    sess->log[log_mark] = '\0';
  }
  mf_free(needed);
  mf_free(fed_op);
  mf_free(slot_base);
  mf_free(last_use);
#undef PORT_FED
  return s->code;
}

/* Appends c to a session's plan list (plans or fn_plans); false when out of memory. */
static bool plans_push(mf_callable ***plans, int *n, int *cap, mf_callable *c) {
  if (*n == *cap) {
    int cap2 = *cap ? *cap * 2 : 8;
    mf_callable **grown = mf_realloc(*plans, (size_t)cap2 * sizeof *grown);
    if (!grown) return false;
    *plans = grown;
    *cap = cap2;
  }
  (*plans)[(*n)++] = c;
  return true;
}

/* The cached plan of this signature over states->graph among plans[0..n), or NULL. */
static mf_callable *plans_find(mf_callable **plans, int n, const mf_graph_states *states, uint64_t h,
                               const mf_output *feeds, int nfeeds, const mf_output *fetches,
                               int nfetches, mf_op *const *targets, int ntargets) {
  for (int i = 0; i < n; i++) {
    mf_plan *p = &plans[i]->plan;
    if (p->hash == h && p->states == states && p->nfeeds == nfeeds && p->nfetches == nfetches &&
        p->ntargets == ntargets && same_ports(p->feeds, feeds, nfeeds) &&
        same_ports(p->fetches, fetches, nfetches) &&
        (ntargets == 0 || memcmp(p->targets, targets, (size_t)ntargets * sizeof *targets) == 0))
      return plans[i];
  }
  return NULL;
}

/* A new plan over states->graph, added to the session's function plans when
 * that graph is a function, else to its plans. */
static mf_callable *plan_new(mf_session *sess, mf_graph_states *states, uint64_t hash,
                             const mf_output *feeds, int nfeeds, const mf_output *fetches,
                             int nfetches, mf_op *const *targets, int ntargets, mf_status *s) {
  mf_graph *g = states->graph;
  for (int i = 0; i < nfeeds; i++) {
    if (check_port(g, "feed", feeds[i], s)) return NULL;
    for (int j = 0; j < i; j++)
      if (feeds[j].op == feeds[i].op && feeds[j].index == feeds[i].index) {
        mf_status_set(s, MF_INVALID_ARGUMENT, "%s:%d is fed twice", feeds[i].op->name, feeds[i].index);
        return NULL;
      }
  }
  for (int i = 0; i < nfetches; i++)
    if (check_port(g, "fetch", fetches[i], s)) return NULL;
  for (int i = 0; i < ntargets; i++)
    if (!targets[i] || targets[i]->graph != g) {
      mf_status_set(s, MF_INVALID_ARGUMENT, "a target op is not an element of this session's graph");
      return NULL;
    }
  mf_callable *c = mf_calloc(1, sizeof *c);
  mf_plan *p = c ? &c->plan : NULL;
  if (!c || !PLAN_ALLOC(p->feeds, nfeeds) || !PLAN_ALLOC(p->fetches, nfetches) ||
      !PLAN_ALLOC(p->targets, ntargets)) {
    if (c) plan_free(p);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory building a plan");
    return NULL;
  }
  p->sess = sess;
  p->graph = g;
  p->states = states;
  p->hash = hash;
  if (nfeeds) memcpy(p->feeds, feeds, (size_t)nfeeds * sizeof *feeds);
  if (nfetches) memcpy(p->fetches, fetches, (size_t)nfetches * sizeof *fetches);
  if (ntargets) memcpy(p->targets, targets, (size_t)ntargets * sizeof *targets);
  p->nfeeds = nfeeds;
  p->nfetches = nfetches;
  p->ntargets = ntargets;
  if (plan_build(p, s)) {
    plan_free(p);
    return NULL;
  }
  bool pushed = states == &sess->states
                    ? plans_push(&sess->plans, &sess->num_plans, &sess->cap_plans, c)
                    : plans_push(&sess->fn_plans, &sess->num_fn_plans, &sess->cap_fn_plans, c);
  if (!pushed) {
    plan_free(p);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory caching a plan");
    return NULL;
  }
  return c;
}

static mf_code closed_error(mf_status *s) {
  return mf_status_set(s, MF_FAILED_PRECONDITION,
                       "Attempted to use a closed Session: create a new tf.Session to run again");
}

mf_callable *mf_session_make_callable(mf_session *sess, const mf_output *feeds, int nfeeds,
                                      const mf_output *fetches, int nfetches,
                                      mf_op *const *targets, int ntargets, mf_status *s) {
  mf_status_clear(s);
  mf_worker_drain(sess->worker);
  if (sess->closed) {
    closed_error(s);
    return NULL;
  }
  uint64_t h = signature_hash(feeds, nfeeds, fetches, nfetches, targets, ntargets);
  mf_callable *c = plans_find(sess->plans, sess->num_plans, &sess->states, h, feeds, nfeeds,
                              fetches, nfetches, targets, ntargets);
  return c ? c : plan_new(sess, &sess->states, h, feeds, nfeeds, fetches, nfetches, targets, ntargets, s);
}

/* ---------- execution ---------- */

/* Appends the op's name and the line that created it to an error about it. */
static mf_code node_context(mf_status *s, const mf_op *op) {
  if (op->origin[0]) mf_status_append(s, " [[node %s (defined at %s)]]", op->name, op->origin);
  else mf_status_append(s, " [[node %s]]", op->name);
  return s->code;
}

static mf_code check_feed_value(const mf_plan *p, int i, const mf_tensor *v, mf_status *s) {
  mf_output o = p->feeds[i];
  if (!v) return mf_status_set(s, MF_INVALID_ARGUMENT, "no value given for feed %s:%d", o.op->name, o.index);
  mf_dtype want = o.op->out_dtypes[o.index];
  if (v->dtype != want)
    return mf_status_set(s, MF_INVALID_ARGUMENT,
                         "Cannot feed value of dtype %s for Tensor '%s:%d', which has dtype %s; "
                         "cast the value or feed a matching dtype",
                         mf_dtype_name(v->dtype), o.op->name, o.index, mf_dtype_name(want));
  mf_shape have = mf_shape_of(v);
  const mf_shape *static_shape = &o.op->out_shapes[o.index];
  if (!mf_shape_compatible(&have, static_shape)) {
    char a[128], b[128];
    return mf_status_set(s, MF_INVALID_ARGUMENT,
                         "Cannot feed value of shape %s for Tensor '%s:%d', which has shape '%s'",
                         mf_shape_str_tf(&have, a, sizeof a), o.op->name, o.index,
                         mf_shape_str_tf(static_shape, b, sizeof b));
  }
  if (v->device != MF_CPU)
    return mf_status_set(s, MF_UNIMPLEMENTED, "feeding a value that lives on a device is not supported");
  return MF_OK;
}

/* A feed's dtype and shape checks; an error names the fed op and its line. */
static mf_code check_feed(const mf_plan *p, int i, const mf_tensor *v, mf_status *s) {
  if (check_feed_value(p, i, v, s)) return node_context(s, p->feeds[i].op);
  return MF_OK;
}

static mf_code infer_runtime(mf_plan *p, mf_step *st, mf_tensor **inputs, mf_status *s) {
  mf_op *op = st->op;
  for (int k = 0; k < op->num_inputs; k++) {
    mf_output in = op->inputs[k];
    /* A ref input is described by the variable's current value, if any. */
    const mf_tensor *v = inputs[k] ? inputs[k] : mf_op_is_ref_input(op, k) ? ref_state(p, op, k)->ptr : NULL;
    p->rt_dtypes[k] = v ? v->dtype : in.op->out_dtypes[in.index];
    p->rt_in_shapes[k] = v ? mf_shape_of(v) : in.op->out_shapes[in.index];
  }
  mf_dtype out_dtypes[MF_MAX_OUTPUTS_INLINE];
  mf_infer_ctx ic = {
      .op_name = op->name, .def = op->def, .attrs = &op->attrs, .num_inputs = op->num_inputs,
      .in_dtypes = p->rt_dtypes, .in_shapes = p->rt_in_shapes, .in_values = inputs,
      .num_outputs = op->num_outputs, .out_dtypes = out_dtypes, .out_shapes = p->rt_out_shapes,
      .status = s, .runtime = true};
  if (op->num_outputs > MF_MAX_OUTPUTS_INLINE) {
    /* Wide ops infer into heap buffers that mf_infer_set_num_outputs makes. */
    ic.num_outputs = 0;
    ic.out_shapes = p->rt_out_shapes;
  }
  op->def->infer(&ic);
  mf_shape *shapes = ic.out_shapes;
  if (mf_ok(s)) {
    for (int k = 0; k < op->num_outputs && k < ic.num_outputs; k++)
      p->rt_out_shapes[k] = shapes[k];
    for (int k = 0; k < op->num_outputs; k++)
      if (!mf_shape_fully_defined(&p->rt_out_shapes[k]))
        mf_status_set(s, MF_INTERNAL, "%s: shape inference left output %d undefined at run time",
                      op->name, k);
  }
  if (ic.num_outputs > MF_MAX_OUTPUTS_INLINE) {
    mf_free(ic.out_dtypes);
    mf_free(ic.out_shapes);
  }
  return s->code;
}

/* A dying input that nobody else holds, of the output's dtype and shape, whose
 * buffer the elementwise kernel can write in place (in x*2+1 the product's
 * buffer becomes the sum's): its index, or -1. */
static int forward_input(const mf_step *st, mf_tensor *const *inputs, mf_dtype dtype,
                         const mf_shape *shape) {
  for (int k = 0; k < st->op->num_inputs; k++) {
    mf_tensor *t = inputs[k];
    if (!t || !(st->forwardable & (1u << k)) || mf_tensor_refcount(t) != 1 || !t->owned ||
        t->dtype != dtype || t->rank != shape->rank)
      continue;
    bool same = true;
    for (int d = 0; d < t->rank; d++) same &= t->dims[d] == shape->dims[d];
    /* A value read by two inputs (x + x, AddN(g, g, g)) stays read-only: a
     * kernel making several passes would read its own partial results. */
    for (int j = 0; j < st->op->num_inputs && same; j++) same &= j == k || inputs[j] != t;
    if (same) return k;
  }
  return -1;
}

static bool inputs_match_static(const mf_op *op, mf_tensor *const *inputs) {
  for (int k = 0; k < op->num_inputs; k++) {
    const mf_shape *want = &op->inputs[k].op->out_shapes[op->inputs[k].index];
    const mf_tensor *t = inputs[k];
    if (!t) continue;  /* a ref input */
    if (want->rank != t->rank) return false;
    for (int d = 0; d < t->rank; d++)
      if (want->dims[d] != t->dims[d]) return false;
  }
  return true;
}

/* After a run: every value but the constants goes back to the pool. */
static void release_slots(mf_plan *p) {
  for (int i = 0; i < p->num_slots; i++)
    if (p->slots[i] && !p->slot_const[i]) {
      pool_put(p, p->slots[i]);
      p->slots[i] = NULL;
    }
}

/* Runs the steps over the fed slots; stops at the first error. */
static void run_steps(mf_plan *p, mf_status *s) {
  mf_session *sess = p->sess;
  mf_tensor *in_inline[16];
  for (int si = 0; si < p->num_steps && mf_ok(s); si++) {
    mf_step *st = &p->steps[si];
    mf_op *op = st->op;
    mf_tensor **inputs = op->num_inputs <= 16 ? in_inline : mf_malloc((size_t)op->num_inputs * sizeof *inputs);
    if (!inputs) { mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory"); break; }
    for (int k = 0; k < op->num_inputs; k++) inputs[k] = st->in_slots[k] >= 0 ? p->slots[st->in_slots[k]] : NULL;
    mf_tensor **outputs = &p->slots[st->out_slot];
    mf_tensor **fed_keep = p->fed_keep;
    if (st->has_fed_output) {  /* keep fed values aside; the op still computes its other outputs */
      for (int k = 0; k < op->num_outputs; k++) {
        fed_keep[k] = outputs[k];
        outputs[k] = NULL;
      }
    }
    bool alloc = !(op->def->flags & MF_OP_SETS_OUTPUTS);
    /* Static shapes are exact when fully defined and the inputs match theirs
     * (set_shape may promise more than a fed value keeps); else infer again. */
    bool infer = !(op->def->flags & MF_OP_DYNAMIC_OUTPUTS) &&
                 (st->infer_at_runtime || !inputs_match_static(op, inputs));
    if (infer) infer_runtime(p, st, inputs, s);
    const mf_shape *out_shapes = infer ? p->rt_out_shapes : op->out_shapes;
    if (st->forwardable && mf_ok(s)) {
      int k = forward_input(st, inputs, op->out_dtypes[0], &out_shapes[0]);
      if (k >= 0) {  /* the input's slot (dead after this step) hands its reference over */
        outputs[0] = inputs[k];
        p->slots[st->in_slots[k]] = NULL;
      }
    }
    for (int k = 0; alloc && mf_ok(s) && k < op->num_outputs; k++)
      if (!outputs[k]) outputs[k] = plan_alloc(p, op->out_dtypes[k], out_shapes[k].rank, out_shapes[k].dims, s);
    if (mf_ok(s)) {
      mf_state_slot *state = &st->state_holder->slots[st->state_index], fed_var;
      if (st->stand_in && st->state_index < sess->num_var_feeds && sess->var_feeds[st->state_index]) {
        fed_var = (mf_state_slot){sess->var_feeds[st->state_index], NULL};
        state = &fed_var;
      }
      mf_kernel_ctx ctx = {
          .op = op, .attrs = &op->attrs, .num_inputs = op->num_inputs, .inputs = inputs,
          .num_outputs = op->num_outputs, .outputs = outputs, .out_shapes = out_shapes,
          .status = s, .session = sess,
          .state = state, .plan = p, .dying_inputs = st->dying,
          .outputs_read = &p->slot_read[st->out_slot]};
      if (st->kernel(&ctx) == MF_OK && !mf_ok(s)) s->code = MF_OK;  /* a kernel's word wins */
      for (int k = 0; mf_ok(s) && k < op->num_outputs; k++)
        if (!outputs[k]) mf_status_set(s, MF_INTERNAL, "kernel %s set no output %d", op->def->name, k);
    }
    if (inputs != in_inline) mf_free(inputs);
    if (st->has_fed_output)
      for (int k = 0; k < op->num_outputs; k++)
        if (fed_keep[k]) {
          pool_put(p, outputs[k]);
          outputs[k] = fed_keep[k];
        }
    if (!mf_ok(s)) {
      if (!strstr(s->msg, "[[node ")) node_context(s, op);
      break;
    }
    for (int k = 0; k < st->num_dead; k++) {
      pool_put(p, p->slots[st->dead[k]]);
      p->slots[st->dead[k]] = NULL;
    }
  }
}

/* Notes the values fed for variables, which functions' stand-ins read (NULL
 * values: the run is over, forget them). */
static mf_code set_var_feeds(mf_plan *p, mf_tensor *const *values, mf_status *s) {
  if (!p->feeds_variables) return MF_OK;
  mf_session *sess = p->sess;
  for (int i = 0; i < p->nfeeds; i++) {
    const mf_op *op = p->feeds[i].op;
    if (strcmp(op->def->name, "VariableV2") != 0) continue;
    if (op->id >= sess->num_var_feeds) {
      if (!values) continue;
      int n = sess->graph->num_ops;
      mf_tensor **grown = mf_realloc(sess->var_feeds, (size_t)n * sizeof *grown);
      if (!grown) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory");
      memset(grown + sess->num_var_feeds, 0, (size_t)(n - sess->num_var_feeds) * sizeof *grown);
      sess->var_feeds = grown;
      sess->num_var_feeds = n;
    }
    sess->var_feeds[op->id] = values ? values[i] : NULL;
  }
  return MF_OK;
}

static mf_code run_plan(mf_plan *p, mf_tensor *const *feed_values, mf_tensor **fetch_values,
                        mf_status *s) {
  mf_status_clear(s);
  if (p->sess->closed) return closed_error(s);
  for (int i = 0; i < p->nfetches; i++) fetch_values[i] = NULL;
  for (int i = 0; i < p->nfeeds; i++)
    if (check_feed(p, i, feed_values[i], s)) return s->code;
  /* Reclaim last run's results the caller has dropped. */
  for (int i = 0; i < p->nfetches; i++) {
    pool_put(p, p->last_fetched[i]);
    p->last_fetched[i] = NULL;
  }
  if (set_var_feeds(p, feed_values, s)) return s->code;
  for (int i = 0; i < p->nfeeds; i++) p->slots[p->feed_slots[i]] = mf_tensor_retain(feed_values[i]);
  run_steps(p, s);
  set_var_feeds(p, NULL, s);
  for (int i = 0; i < p->nfetches; i++) {
    mf_tensor *v = p->slots[p->fetch_slots[i]];
    if (mf_ok(s) && v) {
      fetch_values[i] = mf_tensor_retain(v);
      p->last_fetched[i] = mf_tensor_retain(v);
    }
  }
  release_slots(p);
  return s->code;
}

mf_code mf_callable_run(mf_callable *c, mf_tensor *const *feed_values, mf_tensor **fetch_values,
                        mf_status *s) {
  mf_worker_drain(c->plan.sess->worker);
  return run_plan(&c->plan, feed_values, fetch_values, s);
}

mf_code mf_callable_run_now(mf_callable *c, mf_tensor *const *feed_values, mf_tensor **fetch_values,
                            mf_status *s) {
  return run_plan(&c->plan, feed_values, fetch_values, s);
}

mf_code mf_session_run(mf_session *sess, const mf_output *feeds, mf_tensor *const *feed_values,
                       int nfeeds, const mf_output *fetches, mf_tensor **fetch_values, int nfetches,
                       mf_op *const *targets, int ntargets, mf_status *s) {
  mf_callable *c = mf_session_make_callable(sess, feeds, nfeeds, fetches, nfetches, targets, ntargets, s);
  if (!c) return s->code;
  return run_plan(&c->plan, feed_values, fetch_values, s);
}

/* ---------- functions ---------- */

static mf_graph_states *function_states(mf_session *sess, mf_graph *g, mf_status *s) {
  if (g == sess->graph) return &sess->states;
  for (int i = 0; i < sess->num_fn_states; i++)
    if (sess->fn_states[i]->graph == g) return sess->fn_states[i];
  if (sess->num_fn_states == sess->cap_fn_states) {
    int cap = sess->cap_fn_states ? sess->cap_fn_states * 2 : 8;
    mf_graph_states **grown = mf_realloc(sess->fn_states, (size_t)cap * sizeof *grown);
    if (!grown) goto oom;
    sess->fn_states = grown;
    sess->cap_fn_states = cap;
  }
  mf_graph_states *st = mf_calloc(1, sizeof *st);
  if (!st) goto oom;
  st->graph = g;
  sess->fn_states[sess->num_fn_states++] = st;
  return st;
oom:
  mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory preparing a function");
  return NULL;
}

mf_callable *mf_function_plan(mf_kernel_ctx *ctx, mf_graph *fn, const mf_output *feeds, int nfeeds,
                              const mf_output *fetches, int nfetches, mf_op *const *targets,
                              int ntargets) {
  mf_session *sess = ctx->session;
  mf_graph_states *states = function_states(sess, fn, ctx->status);
  if (!states) return NULL;
  uint64_t h = signature_hash(feeds, nfeeds, fetches, nfetches, targets, ntargets);
  mf_callable *c = plans_find(sess->fn_plans, sess->num_fn_plans, states, h, feeds, nfeeds, fetches,
                              nfetches, targets, ntargets);
  return c ? c : plan_new(sess, states, h, feeds, nfeeds, fetches, nfetches, targets, ntargets, ctx->status);
}

void mf_function_recycle(mf_callable *c, mf_tensor *t) { pool_put(&c->plan, t); }

mf_code mf_function_run(mf_callable *c, mf_tensor **feed_values, mf_tensor **fetch_values, mf_status *s) {
  mf_plan *p = &c->plan;
  for (int i = 0; i < p->nfeeds; i++) p->slots[p->feed_slots[i]] = feed_values[i];
  run_steps(p, s);
  for (int i = 0; i < p->nfetches; i++) {
    int slot = p->fetch_slots[i];
    mf_tensor *v = p->slots[slot];
    fetch_values[i] = NULL;
    if (!mf_ok(s) || !v) continue;
    if (p->fetch_moves[i] && !p->slot_const[slot]) {
      fetch_values[i] = v;  /* the slot's reference moves out */
      p->slots[slot] = NULL;
    } else {
      fetch_values[i] = mf_tensor_retain(v);
    }
  }
  release_slots(p);
  return s->code;
}
