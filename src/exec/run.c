/* run.c — run states: what one run of a plan changes, kept between runs so
 * that a steady-state run allocates nothing. A plan hands out one run state
 * per concurrent run: the last one given back sits in `spare` and is taken
 * with one atomic exchange; others wait in a list under the plan's lock.
 * Each run state has its own arena (assign.c), made at its first run. */
#include "exec/exec.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"

/* Leaves the arena to whoever still holds views of it. */
static void drop_arena(mf_run *r) {
  for (int i = 0; i < r->plan->num_slots; i++) {
    mf_tensor_release(r->views[i]);
    r->views[i] = NULL;
  }
  mf_tensor_release(r->arena);
  r->arena = NULL;
}

/* The arena and its views, made anew when missing or when an op of an
 * earlier run kept a view (its holder keeps that arena alive). */
static mf_code arena_ready(mf_run *r, mf_status *s) {
  const mf_plan *p = r->plan;
  r->num_pins = 0;
  if (!p->arena_bytes) return MF_OK;
  if (r->arena) {
    bool held = false;
    for (int i = 0; i < p->num_slots; i++) held |= r->views[i] && mf_tensor_refcount(r->views[i]) != 1;
    if (!held) return MF_OK;
    drop_arena(r);
  }
  int64_t n = (int64_t)p->arena_bytes;
  r->arena = mf_allocator_tensor(p->sess->devices[0]->allocator, MF_UINT8, 1, &n, s);  /* host memory */
  if (!r->arena) return s->code;
  for (int si = 0; si < p->num_steps; si++) {
    const mf_step *st = &p->steps[si];
    for (int k = 0; k < st->op->num_outputs && !st->copy_from; k++) {
      int slot = st->out_slot + k;
      if (p->slot_offset[slot] < 0) continue;
      const mf_shape *shape = &st->op->out_shapes[k];
      mf_tensor *v = mf_tensor_view_at(r->arena, (size_t)p->slot_offset[slot], st->op->out_dtypes[k], shape->rank,
                                       shape->dims, s);
      if (!v) {
        drop_arena(r);
        return s->code;
      }
      v->capacity = mf_tensor_nbytes(v);
      r->views[slot] = v;
    }
  }
  return MF_OK;
}

void mf_run_free(mf_run *r) {
  if (!r) return;
  const mf_plan *p = r->plan;
  if (r->views) drop_arena(r);
  for (int i = 0; i < p->num_slots; i++)
    if (!p->slot_const[i]) mf_tensor_release(r->slots[i]);
  for (int i = 0; i < r->pool_len; i++) mf_tensor_release(r->pool[i]);
  for (int i = 0; i < p->nfetches; i++) mf_tensor_release(r->last_fetched[i]);
  mf_free(r->slots);
  mf_free(r->pool);
  mf_free(r->views);
  mf_free(r->pins);
  mf_free(r->last_fetched);
  mf_free(r->rt_dtypes);
  mf_free(r->rt_in_shapes);
  mf_free(r->rt_out_shapes);
  mf_free(r->rt_values);
  mf_free(r->fed_keep);
  mf_free(r->var_feeds_by_id);
  mf_aligned_free(r->scratch);
  mf_free(r);
}

static mf_run *run_new(mf_plan *p, mf_status *s) {
  mf_run *r = mf_calloc(1, sizeof *r);
  if (!r) goto oom;
  r->plan = p;
  r->pool_cap = p->num_slots + p->nfetches;
  /* Each slot's value dies once a run, and each fetch's once more. */
  if (!PLAN_ALLOC(r->slots, p->num_slots) || !PLAN_ALLOC(r->pool, r->pool_cap) ||
      !PLAN_ALLOC(r->views, p->num_slots) || !PLAN_ALLOC(r->pins, r->pool_cap) ||
      !PLAN_ALLOC(r->last_fetched, p->nfetches) || !PLAN_ALLOC(r->rt_dtypes, p->rt_cap_in) ||
      !PLAN_ALLOC(r->rt_in_shapes, p->rt_cap_in) || !PLAN_ALLOC(r->rt_values, p->rt_cap_in) ||
      !PLAN_ALLOC(r->rt_out_shapes, p->rt_cap_out) || !PLAN_ALLOC(r->fed_keep, p->rt_cap_out) ||
      (p->feeds_variables && !PLAN_ALLOC(r->var_feeds_by_id, p->num_var_ids)))
    goto oom;
  /* Constants sit in their slots for good; the plan holds their references. */
  for (int i = 0; i < p->num_slots; i++) r->slots[i] = p->const_values[i];
  return r;
oom:
  mf_run_free(r);
  mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory preparing a run");
  return NULL;
}

mf_run *mf_run_acquire(mf_plan *p, mf_status *s) {
  mf_run *r = atomic_exchange_explicit(&p->spare, NULL, memory_order_acquire);
  if (!r) {
    pthread_mutex_lock(&p->idle_lock);
    r = p->idle;
    if (r) p->idle = r->next_idle;
    pthread_mutex_unlock(&p->idle_lock);
  }
  if (!r && !(r = run_new(p, s))) return NULL;
  if (arena_ready(r, s)) {
    mf_run_return(r);
    return NULL;
  }
  return r;
}

void mf_run_return(mf_run *r) {
  mf_plan *p = r->plan;
  r->var_feeds = NULL;
  r->num_var_feeds = 0;
  mf_run *none = NULL;
  if (atomic_compare_exchange_strong_explicit(&p->spare, &none, r, memory_order_release, memory_order_relaxed))
    return;
  pthread_mutex_lock(&p->idle_lock);
  r->next_idle = p->idle;
  p->idle = r;
  pthread_mutex_unlock(&p->idle_lock);
}

void mf_plan_drop_runs(mf_plan *p) {
  mf_run_free(atomic_exchange(&p->spare, NULL));
  pthread_mutex_lock(&p->idle_lock);
  mf_run *r = p->idle;
  p->idle = NULL;
  pthread_mutex_unlock(&p->idle_lock);
  while (r) {
    mf_run *next = r->next_idle;
    mf_run_free(r);
    r = next;
  }
}
