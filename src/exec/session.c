/* session.c — sessions: their life (new, close, free), the plan cache keyed
 * by signature, the placement log and what other layers read of a session. */
#include "exec/exec.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"

#include <cblas.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

/* The thread count a config asks for, and whether it was asked (not the cores). */
static int config_threads(const mf_session_config *config, bool *asked) {
  int n = config ? config->intra_op_parallelism_threads : 0;
  const char *env = getenv("MOONFLOW_NUM_THREADS");
  if (n <= 0 && env && atoi(env) > 0) n = atoi(env);
  *asked = n > 0;
  if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 256 ? 256 : n;
}

/* The device_count a config asks for, checked (TensorFlow's ConfigProto.device_count). */
static mf_code check_device_count(const mf_session_config *config, mf_status *s) {
  int cpus = config->device_count[MF_CPU], gpus = config->device_count[MF_CUDA];
  if (cpus < 0 || cpus > MF_MAX_CPU_DEVICES)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "device_count: CPU must be 0 (the default: 1) to %d, got %d",
                         MF_MAX_CPU_DEVICES, cpus);
  if (gpus < -1)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "device_count: GPU must be -1 (none), 0 (the default: all) or "
                         "the most GPUs to use, got %d", gpus);
  return MF_OK;
}

/* The session's devices: CPU:0 .. CPU:n-1, then the GPUs it asked for. */
static mf_code make_devices(mf_session *sess, const mf_session_config *config, mf_status *s) {
  int cpus = config && config->device_count[MF_CPU] > 0 ? config->device_count[MF_CPU] : 1;
  /* As TensorFlow's, a GPU count is a most: a script asking for one runs on a machine without. */
  int gpus = mf_num_devices(MF_CUDA), asked = config ? config->device_count[MF_CUDA] : 0;
  if (asked < 0 || (asked > 0 && asked < gpus)) gpus = asked < 0 ? 0 : asked;
  if (gpus > MF_MAX_DEVICES - cpus) gpus = MF_MAX_DEVICES - cpus;  /* a machine with more GPUs uses the first ones */
  for (int i = 0; i < cpus; i++)
    if (!(sess->devices[sess->num_devices++] = mf_device_new(MF_CPU, i, s))) return s->code;
  for (int i = 0; i < gpus; i++)
    if (!(sess->devices[sess->num_devices++] = mf_device_new(MF_CUDA, i, s))) return s->code;
  return MF_OK;
}

mf_session *mf_session_new_with_config(mf_graph *g, const mf_session_config *config, mf_status *s) {
  mf_status_clear(s);
  unsigned options = config ? config->options : 0;
  if (options & ~(unsigned)(MF_ALLOW_SOFT_PLACEMENT | MF_LOG_DEVICE_PLACEMENT)) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "unknown session options 0x%x", options);
    return NULL;
  }
  if (config && config->intra_op_parallelism_threads < 0) {
    mf_status_set(s, MF_INVALID_ARGUMENT, "intra_op_parallelism_threads must be 0 (the default) or more, got %d",
                  config->intra_op_parallelism_threads);
    return NULL;
  }
  if (config && check_device_count(config, s)) return NULL;
  mf_session *sess = mf_calloc(1, sizeof *sess);
  if (!sess) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory creating a session");
    return NULL;
  }
  if (make_devices(sess, config, s)) {
    for (int i = 0; i < sess->num_devices; i++) mf_device_free(sess->devices[i]);
    mf_free(sess);
    return NULL;
  }
  bool asked;
  sess->num_threads = config_threads(config, &asked);
  if (asked) openblas_set_num_threads(sess->num_threads);
  sess->graph = mf_graph_retain(g);
  sess->states.graph = g;
  pthread_mutex_init(&sess->lock, NULL);
  for (int i = 0; i < MF_STATE_LOCKS; i++) pthread_mutex_init(&sess->state_locks[i], NULL);
  sess->options = options;
  sess->fuse_elementwise = !(config && config->disable_elementwise_fusion);
  return sess;
}

mf_session *mf_session_new_with_options(mf_graph *g, unsigned options, mf_status *s) {
  mf_session_config config = {.options = options};
  return mf_session_new_with_config(g, &config, s);
}

mf_threadpool *mf_session_threads(mf_session *sess) {
  mf_threadpool *tp = atomic_load_explicit(&sess->threads, memory_order_acquire);
  if (tp || sess->num_threads <= 1) return tp;
  pthread_mutex_lock(&sess->lock);
  if (!(tp = sess->threads) && (tp = mf_threadpool_new(sess->num_threads))) sess->threads = tp;
  pthread_mutex_unlock(&sess->lock);
  return tp;  /* NULL (no threads to be had): loops run on the caller */
}

void mf_kernel_parallel_for(mf_kernel_ctx *ctx, int64_t n, int64_t grain,
                            void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
  if (n <= grain) {
    fn(arg, 0, n);
    return;
  }
  mf_threadpool_for(mf_session_threads(ctx->session), n, grain, fn, arg);
}

mf_session *mf_session_new(mf_graph *g, mf_status *s) { return mf_session_new_with_options(g, 0, s); }

bool mf_session_log_line(mf_session *sess, const char *fmt, ...) {
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
  pthread_mutex_lock(&sess->lock);
  mf_free(sess->log_taken);
  sess->log_taken = sess->log_len ? sess->log : NULL;
  if (sess->log_len) {
    sess->log = NULL;
    sess->log_len = sess->log_cap = 0;
  }
  pthread_mutex_unlock(&sess->lock);
  return sess->log_taken ? sess->log_taken : "";
}

/* Closing drops every buffer but keeps the plans themselves, so a callable
 * used after close reports the closed session instead of touching freed memory. */
static void plans_drop_buffers(mf_callable **plans, int n) {
  for (int i = 0; i < n; i++) mf_plan_drop_runs(&plans[i]->plan);
}

void mf_session_close(mf_session *sess) {
  if (!sess) return;
  mf_worker_free(atomic_exchange(&sess->worker, NULL));  /* cancels jobs not started, waits for the running one */
  mf_threadpool_free(atomic_exchange(&sess->threads, NULL));
  if (sess->closed) return;
  sess->closed = true;
  plans_drop_buffers(sess->plans, sess->num_plans);
  plans_drop_buffers(sess->fn_plans, sess->num_fn_plans);
  for (int i = 0; i < sess->num_fn_states; i++) mf_states_clear(sess->fn_states[i]);
  mf_states_clear(&sess->states);
  for (int i = 0; i < sess->num_devices; i++) mf_allocator_close(sess->devices[i]->allocator);
}

void mf_session_free(mf_session *sess) {
  if (!sess) return;
  mf_session_close(sess);
  for (int i = 0; i < sess->num_plans; i++) mf_plan_free(&sess->plans[i]->plan);
  for (int i = 0; i < sess->num_fn_plans; i++) mf_plan_free(&sess->fn_plans[i]->plan);
  for (int i = 0; i < sess->num_fn_states; i++) mf_free(sess->fn_states[i]);
  mf_free(sess->plans);
  mf_free(sess->fn_plans);
  mf_free(sess->fn_states);
  mf_free(sess->log);
  mf_free(sess->log_taken);
  for (int i = 0; i < sess->num_devices; i++) mf_device_free(sess->devices[i]);
  pthread_mutex_destroy(&sess->lock);
  for (int i = 0; i < MF_STATE_LOCKS; i++) pthread_mutex_destroy(&sess->state_locks[i]);
  mf_graph_release(sess->graph);
  mf_free(sess);
}

int mf_session_num_plans(const mf_session *sess) { return sess->num_plans; }
mf_graph *mf_session_graph(const mf_session *sess) { return sess->graph; }

mf_state_slot *mf_session_op_state(mf_session *sess, const mf_op *op) {
  mf_worker_drain(sess->worker);  /* its async runs count too */
  pthread_mutex_lock(&sess->lock);
  mf_graph_states *st = op->graph == sess->graph ? &sess->states : NULL;
  for (int i = 0; !st && i < sess->num_fn_states; i++)
    if (sess->fn_states[i]->graph == op->graph) st = sess->fn_states[i];
  mf_state_slot *slot = st && op->id < st->num ? mf_state_at(st, op->id) : NULL;
  pthread_mutex_unlock(&sess->lock);
  return slot;
}
uint64_t mf_session_num_allocations(const mf_session *sess) {
  mf_memory_stats m;
  mf_session_memory_stats((mf_session *)sess, &m);
  return m.num_allocations;
}

void mf_session_memory_stats(mf_session *sess, mf_memory_stats *out) {
  mf_worker_drain(sess->worker);
  *out = (mf_memory_stats){0};
  for (int i = 0; i < sess->num_devices; i++) {
    mf_memory_stats m;
    mf_allocator_stats(sess->devices[i]->allocator, &m);
    out->bytes_in_use += m.bytes_in_use;
    out->peak_bytes_in_use += m.peak_bytes_in_use;
    out->bytes_kept += m.bytes_kept;
    out->num_allocations += m.num_allocations;
  }
}

int mf_session_num_devices(const mf_session *sess) { return sess->num_devices; }

mf_device *mf_session_device_of(mf_session *sess, const mf_tensor *t) {
  for (int i = 1; i < sess->num_devices; i++)
    if (sess->devices[i]->type == t->device && sess->devices[i]->index == t->device_index) return sess->devices[i];
  return sess->devices[0];
}

const char *mf_session_device_name(const mf_session *sess, int i) {
  return i >= 0 && i < sess->num_devices ? sess->devices[i]->name : NULL;
}

bool mf_session_device_stats(mf_session *sess, int i, mf_device_stats *out) {
  if (i < 0 || i >= sess->num_devices) return false;
  mf_worker_drain(sess->worker);
  mf_device *d = sess->devices[i];
  mf_allocator_stats(d->allocator, &out->memory);
  out->copies_to = atomic_load_explicit(&d->copies_to, memory_order_relaxed);
  out->copies_from = atomic_load_explicit(&d->copies_from, memory_order_relaxed);
  out->bytes_to = atomic_load_explicit(&d->bytes_to, memory_order_relaxed);
  out->bytes_from = atomic_load_explicit(&d->bytes_from, memory_order_relaxed);
  return true;
}

/* ---------- the plan cache ---------- */

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
  if (p) pthread_mutex_init(&p->idle_lock, NULL);
  if (!c || !PLAN_ALLOC(p->feeds, nfeeds) || !PLAN_ALLOC(p->fetches, nfetches) ||
      !PLAN_ALLOC(p->targets, ntargets)) {
    if (c) mf_plan_free(p);
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
  if (mf_plan_build(p, s)) {
    mf_plan_free(p);
    return NULL;
  }
  bool pushed = states == &sess->states
                    ? plans_push(&sess->plans, &sess->num_plans, &sess->cap_plans, c)
                    : plans_push(&sess->fn_plans, &sess->num_fn_plans, &sess->cap_fn_plans, c);
  if (!pushed) {
    mf_plan_free(p);
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory caching a plan");
    return NULL;
  }
  return c;
}

mf_code mf_session_closed_error(mf_status *s) {
  return mf_status_set(s, MF_FAILED_PRECONDITION,
                       "Attempted to use a closed Session: create a new tf.Session to run again");
}

/* The op states of function graph g in this session, made on first use. */
static mf_graph_states *function_states(mf_session *sess, mf_graph *g, mf_status *s) {
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

mf_callable *mf_session_plan(mf_session *sess, mf_graph *g, const mf_output *feeds, int nfeeds,
                             const mf_output *fetches, int nfetches, mf_op *const *targets, int ntargets,
                             mf_status *s) {
  bool fn = g != sess->graph;
  uint64_t h = signature_hash(feeds, nfeeds, fetches, nfetches, targets, ntargets);
  pthread_mutex_lock(&sess->lock);
  mf_graph_states *states = fn ? function_states(sess, g, s) : &sess->states;
  mf_callable *c = states ? plans_find(fn ? sess->fn_plans : sess->plans, fn ? sess->num_fn_plans : sess->num_plans,
                                       states, h, feeds, nfeeds, fetches, nfetches, targets, ntargets)
                          : NULL;
  if (!c && states) c = plan_new(sess, states, h, feeds, nfeeds, fetches, nfetches, targets, ntargets, s);
  pthread_mutex_unlock(&sess->lock);
  return c;
}

mf_callable *mf_session_make_callable(mf_session *sess, const mf_output *feeds, int nfeeds,
                                      const mf_output *fetches, int nfetches,
                                      mf_op *const *targets, int ntargets, mf_status *s) {
  mf_status_clear(s);
  mf_worker_drain(sess->worker);
  if (sess->closed) {
    mf_session_closed_error(s);
    return NULL;
  }
  return mf_session_plan(sess, sess->graph, feeds, nfeeds, fetches, nfetches, targets, ntargets, s);
}
