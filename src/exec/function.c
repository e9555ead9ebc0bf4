/* function.c — plans over function graphs (the branches and loop bodies of
 * control flow), run by kernels with their own session. */
#include "exec/exec.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"

mf_callable *mf_function_plan(mf_kernel_ctx *ctx, mf_graph *fn, const mf_output *feeds, int nfeeds,
                              const mf_output *fetches, int nfetches, mf_op *const *targets,
                              int ntargets) {
  return mf_session_plan(ctx->session, fn, feeds, nfeeds, fetches, nfetches, targets, ntargets, ctx->status);
}

void mf_function_recycle(mf_callable *c, mf_tensor *t) {
  /* Into the pool of the plan's spare run state, which the next call takes;
   * while another thread holds it, the value is simply released. */
  mf_plan *p = &c->plan;
  mf_run *r = atomic_exchange_explicit(&p->spare, NULL, memory_order_acquire);
  if (!r) {
    mf_tensor_release(t);
    return;
  }
  mf_pool_put(r, t);
  mf_run_return(r);
}

/* v on device d: v itself when it lives there, else a copy there (counted);
 * takes the caller's reference to v. NULL with s set on error. */
static mf_tensor *onto(mf_run *r, mf_tensor *v, mf_device *d, mf_status *s) {
  if (v->device == d->type && v->device_index == d->index) return v;  /* the common case: no lookup */
  mf_device *from = mf_session_device_of(r->plan->sess, v);
  if (from == d || v->handle) return v;  /* a host object's handle crosses as it is */
  mf_tensor *t = mf_pool_alloc(r, d, v->dtype, v->rank, v->dims, s);
  if (t && mf_device_copy(from, v, d, t, s)) {
    mf_tensor_release(t);
    t = NULL;
  }
  mf_tensor_release(v);
  return t;
}

/* A function's feeds arrive where the plan placed the ops it feeds, and its
 * results go to the device of the kernel that called it: values crossing
 * devices there are copied, as a plan's copy steps copy them inside it. */
mf_code mf_function_run(mf_kernel_ctx *ctx, mf_callable *c, mf_tensor **feed_values, mf_tensor **fetch_values) {
  mf_plan *p = &c->plan;
  mf_status *s = ctx->status;
  for (int i = 0; i < p->nfetches; i++) fetch_values[i] = NULL;
  mf_run *r = mf_run_acquire(p, s);
  if (!r) {
    for (int i = 0; i < p->nfeeds; i++) mf_tensor_release(feed_values[i]);
    return s->code;
  }
  r->var_feeds = ctx->run->var_feeds;
  r->num_var_feeds = ctx->run->num_var_feeds;
  for (int i = 0; i < p->nfeeds; i++) {
    if (mf_ok(s)) r->slots[p->feed_slots[i]] = onto(r, feed_values[i], p->feed_devices[i], s);
    else mf_tensor_release(feed_values[i]);
  }
  if (mf_ok(s)) mf_run_steps(r, s);
  for (int i = 0; i < p->nfetches; i++) {
    int slot = p->fetch_slots[i];
    mf_tensor *v = r->slots[slot];
    if (!mf_ok(s) || !v) continue;
    if (p->fetch_moves[i] && !p->slot_const[slot]) {
      fetch_values[i] = v;  /* the slot's reference moves out */
      r->slots[slot] = NULL;
    } else {
      fetch_values[i] = mf_tensor_retain(v);
    }
    fetch_values[i] = onto(r, fetch_values[i], ctx->device, s);
  }
  mf_run_release_slots(r);
  mf_run_return(r);
  return s->code;
}
