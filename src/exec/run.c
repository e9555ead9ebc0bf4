/* run.c — run states: what one run of a plan changes, kept between runs so
 * that a steady-state run allocates nothing. A plan hands out one run state
 * per concurrent run: the last one given back sits in `spare` and is taken
 * with one atomic exchange; others wait in a list under the plan's lock. */
#include "exec/exec.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"

void mf_run_free(mf_run *r) {
  if (!r) return;
  const mf_plan *p = r->plan;
  for (int i = 0; i < p->num_slots; i++)
    if (!p->slot_const[i]) mf_tensor_release(r->slots[i]);
  for (int i = 0; i < r->pool_len; i++) mf_tensor_release(r->pool[i]);
  for (int i = 0; i < p->nfetches; i++) mf_tensor_release(r->last_fetched[i]);
  mf_free(r->slots);
  mf_free(r->pool);
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
  if (!PLAN_ALLOC(r->slots, p->num_slots) || !PLAN_ALLOC(r->pool, r->pool_cap) ||
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
  if (r) return r;
  pthread_mutex_lock(&p->idle_lock);
  r = p->idle;
  if (r) p->idle = r->next_idle;
  pthread_mutex_unlock(&p->idle_lock);
  return r ? r : run_new(p, s);
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
