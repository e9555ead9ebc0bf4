/* executor.c — running a plan in a run state: feeds checked, each step's
 * inputs gathered, outputs inferred and allocated (or forwarded in place),
 * its kernel called, dead values pooled, fetches handed out. */
#include "exec/exec.h"
#include "exec/fuse.h"
#include "core/memory.h"
#include "core/shape.h"
#include "core/status.h"
#include "core/tensor.h"

#include <string.h>

mf_state_slot *mf_kernel_ref_state(mf_kernel_ctx *ctx, int k) { return ctx->ref_states[k]; }

mf_code mf_node_context(mf_status *s, const mf_op *op) {
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
  const mf_shape *static_shape = &o.op->out_shapes[o.index];
  bool fits = static_shape->rank < 0 || static_shape->rank == v->rank;  /* mf_shape_compatible, in place */
  for (int d = 0; fits && static_shape->rank >= 0 && d < v->rank; d++)
    fits = static_shape->dims[d] < 0 || static_shape->dims[d] == v->dims[d];
  if (!fits) {
    mf_shape have = mf_shape_of(v);
    char a[128], b[128];
    return mf_status_set(s, MF_INVALID_ARGUMENT,
                         "Cannot feed value of shape %s for Tensor '%s:%d', which has shape '%s'",
                         mf_shape_str_tf(&have, a, sizeof a), o.op->name, o.index,
                         mf_shape_str_tf(static_shape, b, sizeof b));
  }
  if (v->device != MF_CPU || v->device_index != 0)
    return mf_status_set(s, MF_UNIMPLEMENTED, "feeding a value that lives on a device is not supported: "
                         "feed host memory");
  return MF_OK;
}

/* A feed's dtype and shape checks; an error names the fed op and its line. */
static mf_code check_feed(const mf_plan *p, int i, const mf_tensor *v, mf_status *s) {
  if (check_feed_value(p, i, v, s)) return mf_node_context(s, p->feeds[i].op);
  return MF_OK;
}

static mf_code infer_runtime(mf_run *r, mf_step *st, mf_tensor **inputs, mf_status *s) {
  mf_op *op = st->op;
  for (int k = 0; k < op->num_inputs; k++) {
    mf_output in = op->inputs[k];
    r->rt_dtypes[k] = in.op->out_dtypes[in.index];
    r->rt_in_shapes[k] = in.op->out_shapes[in.index];
    if (inputs[k]) {
      r->rt_dtypes[k] = inputs[k]->dtype;
      r->rt_in_shapes[k] = mf_shape_of(inputs[k]);
    } else if (st->ref_states && st->ref_states[k]) {
      /* A ref input is described by the variable's current value, if any,
       * read under its lock unless the step holds it already. */
      pthread_mutex_t *lock = st->num_locks ? NULL : mf_state_lock(r->plan->sess, st->ref_states[k]);
      if (lock) pthread_mutex_lock(lock);
      const mf_tensor *v = atomic_load(&st->ref_states[k]->ptr);
      if (v) {
        r->rt_dtypes[k] = v->dtype;
        r->rt_in_shapes[k] = mf_shape_of(v);
      }
      if (lock) pthread_mutex_unlock(lock);
    }
    r->rt_values[k] = mf_def_reads_value(op->def, k) ? inputs[k] : NULL;
  }
  mf_dtype out_dtypes[MF_MAX_OUTPUTS_INLINE];
  mf_infer_ctx ic = {
      .op_name = op->name, .def = op->def, .attrs = &op->attrs, .num_inputs = op->num_inputs,
      .in_dtypes = r->rt_dtypes, .in_shapes = r->rt_in_shapes, .in_values = r->rt_values,
      .num_outputs = op->num_outputs, .out_dtypes = out_dtypes, .out_shapes = r->rt_out_shapes,
      .status = s, .runtime = true};
  if (op->num_outputs > MF_MAX_OUTPUTS_INLINE) {
    /* Wide ops infer into heap buffers that mf_infer_set_num_outputs makes. */
    ic.num_outputs = 0;
    ic.out_shapes = r->rt_out_shapes;
  }
  op->def->infer(&ic);
  mf_shape *shapes = ic.out_shapes;
  if (mf_ok(s)) {
    for (int k = 0; k < op->num_outputs && k < ic.num_outputs; k++)
      r->rt_out_shapes[k] = shapes[k];
    for (int k = 0; k < op->num_outputs; k++)
      if (!mf_shape_fully_defined(&r->rt_out_shapes[k]))
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

/* Whether the caller's buffer t can take output k of op, of this dtype and shape. */
static mf_code check_into(const mf_op *op, int k, const mf_tensor *t, mf_dtype dtype, const mf_shape *shape,
                          mf_status *s) {
  mf_shape have = mf_shape_of(t);
  /* A string result is built whole: it is handed over, never written into a buffer. */
  bool same = t->dtype == dtype && dtype != MF_STRING && have.rank == shape->rank;
  for (int d = 0; same && d < have.rank; d++) same = have.dims[d] == shape->dims[d];
  if (same && t->device == MF_CPU && t->device_index == 0) return MF_OK;
  char a[128], b[128];
  return mf_status_set(s, MF_INVALID_ARGUMENT,
                       "the buffer given for %s:%d is a %s %s value, but the result is a %s %s value",
                       op->name, k, mf_dtype_name(t->dtype), mf_shape_str_tf(&have, a, sizeof a),
                       mf_dtype_name(dtype), mf_shape_str_tf(shape, b, sizeof b));
}

/* Whether t's bytes overlap any feed's. */
static bool aliases_feed(const mf_plan *p, mf_tensor *const *feed_values, const mf_tensor *t) {
  const char *lo = t->data, *hi = lo + mf_tensor_nbytes(t);
  for (int i = 0; i < p->nfeeds; i++) {
    const char *flo = feed_values[i]->data, *fhi = flo + mf_tensor_nbytes(feed_values[i]);
    if (lo < fhi && flo < hi) return true;
  }
  return false;
}

void mf_run_release_slots(mf_run *r) {
  const mf_plan *p = r->plan;
  for (int i = 0; i < p->num_slots; i++)
    if (r->slots[i] && !p->slot_const[i]) {
      mf_pool_put(r, r->slots[i]);
      r->slots[i] = NULL;
    }
}

/* A copy step: the value in its input slot onto its device, into the
 * caller's buffer when one waits in the slot (a fetch, mf_callable_run_into). */
static mf_code run_copy(mf_run *r, const mf_step *st, mf_status *s) {
  mf_tensor *src = r->slots[st->copy_in], **dst = &r->slots[st->out_slot];
  if (!src) return mf_status_set(s, MF_INTERNAL, "no value of %s:%d to copy to %s", st->op->name, st->copy_index,
                                 st->device->short_name);
  if (src->handle) {  /* a host object's handle: shared as it is */
    mf_tensor_release(*dst);
    *dst = mf_tensor_retain(src);
    return MF_OK;
  }
  mf_shape shape = mf_shape_of(src);
  if (*dst) {
    if (check_into(st->op, st->copy_index, *dst, src->dtype, &shape, s)) return s->code;
  } else if (!(*dst = mf_pool_alloc(r, st->device, src->dtype, shape.rank, shape.dims, s))) {
    return s->code;
  }
  return mf_device_copy(st->copy_from, src, st->device, *dst, s);
}

/* The values whose last reader was step st go back to the pool. */
static void release_dead(mf_run *r, const mf_step *st) {
  for (int k = 0; k < st->num_dead; k++) {
    mf_pool_put(r, r->slots[st->dead[k]]);
    r->slots[st->dead[k]] = NULL;
  }
}

/* Step st's kernel on inputs into its output slots, with the op state given. */
static void run_kernel(mf_run *r, const mf_step *st, mf_tensor **inputs, const mf_shape *out_shapes,
                       mf_state_slot *state, mf_status *s) {
  const mf_plan *p = r->plan;
  mf_op *op = st->op;
  mf_tensor **outputs = &r->slots[st->out_slot];
  mf_kernel_ctx ctx = {
      .op = op, .attrs = &op->attrs, .num_inputs = op->num_inputs, .inputs = inputs,
      .num_outputs = op->num_outputs, .outputs = outputs, .out_shapes = out_shapes,
      .status = s, .session = p->sess,
      .state = state, .ref_states = st->ref_states, .run = r, .device = st->device, .dying_inputs = st->dying,
      .outputs_read = &p->slot_read[st->out_slot]};
  if (st->kernel(&ctx) == MF_OK && !mf_ok(s)) s->code = MF_OK;  /* a kernel's word wins */
  for (int k = 0; mf_ok(s) && k < op->num_outputs; k++)
    if (!outputs[k]) mf_status_set(s, MF_INTERNAL, "kernel %s set no output %d", op->def->name, k);
}

void mf_run_steps(mf_run *r, mf_status *s) {
  const mf_plan *p = r->plan;
  mf_tensor *in_inline[16];
  for (int si = 0; si < p->num_steps && mf_ok(s); si++) {
    mf_step *st = &p->steps[si];
    const mf_op *failed = NULL;
    if (st->fused && mf_fused_run(r, st, &failed, s)) {  /* a fusion group's steps in one pass */
      if (failed) {
        mf_node_context(s, failed);
        break;
      }
      si += mf_fused_num_steps(st->fused) - 1;
      continue;
    }
    mf_op *op = st->op;
    if (st->copy_from) {
      if (run_copy(r, st, s)) {
        mf_node_context(s, op);
        break;
      }
      release_dead(r, st);
      continue;
    }
    if (st->reads_variable && !r->slots[st->out_slot]) {
      /* A variable's read: only its kernel, under the variable's lock. */
      pthread_mutex_lock(st->locks[0]);
      run_kernel(r, st, NULL, op->out_shapes, st->state, s);
      pthread_mutex_unlock(st->locks[0]);
      if (!mf_ok(s)) {
        if (!strstr(s->msg, "[[node ")) mf_node_context(s, op);
        break;
      }
      release_dead(r, st);
      continue;
    }
    mf_tensor **inputs = op->num_inputs <= 16 ? in_inline : mf_malloc((size_t)op->num_inputs * sizeof *inputs);
    if (!inputs) { mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory"); break; }
    for (int k = 0; k < op->num_inputs; k++) inputs[k] = st->in_slots[k] >= 0 ? r->slots[st->in_slots[k]] : NULL;
    mf_tensor **outputs = &r->slots[st->out_slot];
    mf_tensor **fed_keep = r->fed_keep;
    if (st->has_fed_output) {  /* keep fed values aside; the op still computes its other outputs */
      for (int k = 0; k < op->num_outputs; k++) {
        fed_keep[k] = outputs[k];
        outputs[k] = NULL;
      }
    }
    for (int k = 0; k < st->num_locks; k++) pthread_mutex_lock(st->locks[k]);
    bool alloc = !(op->def->flags & MF_OP_SETS_OUTPUTS);
    /* Static shapes are exact when fully defined and the inputs match theirs
     * (set_shape may promise more than a fed value keeps); else infer again. */
    bool infer = !(op->def->flags & MF_OP_DYNAMIC_OUTPUTS) &&
                 (st->infer_at_runtime || !inputs_match_static(op, inputs));
    if (infer) infer_runtime(r, st, inputs, s);
    const mf_shape *out_shapes = infer ? r->rt_out_shapes : op->out_shapes;
    /* A fetch's slot may hold the caller's buffer (mf_callable_run_into). */
    bool into = alloc && op->num_outputs > 0 && outputs[0] != NULL;
    if (st->forwardable && mf_ok(s) && !outputs[0]) {
      int k = forward_input(st, inputs, op->out_dtypes[0], &out_shapes[0]);
      if (k >= 0) {  /* the input's slot (dead after this step) hands its reference over */
        outputs[0] = inputs[k];
        r->slots[st->in_slots[k]] = NULL;
      }
    }
    /* Output 0 is planned over this input's bytes: not while an op keeps it
     * (references beyond the run state's and the input slot's). */
    if (st->inplace_input >= 0 && alloc) mf_pool_pin_if_held(r, inputs[st->inplace_input], 2);
    for (int k = 0; alloc && mf_ok(s) && k < op->num_outputs; k++) {
      if (outputs[k]) {
        if (into || k > 0) check_into(op, k, outputs[k], op->out_dtypes[k], &out_shapes[k], s);
        continue;
      }
      if (p->slot_offset[st->out_slot + k] >= 0)  /* the plan's bytes, when this run can keep its promise */
        outputs[k] = mf_pool_arena_output(r, st->out_slot + k, op->out_dtypes[k], out_shapes[k].rank,
                                          out_shapes[k].dims);
      if (!outputs[k]) outputs[k] = mf_pool_alloc(r, st->device, op->out_dtypes[k], out_shapes[k].rank, out_shapes[k].dims, s);
    }
    if (mf_ok(s)) {
      mf_state_slot *state = st->state, fed_var;
      if (st->var_id >= 0 && st->var_id < r->num_var_feeds && r->var_feeds[st->var_id]) {
        fed_var = (mf_state_slot){r->var_feeds[st->var_id], NULL};
        state = &fed_var;
      }
      run_kernel(r, st, inputs, out_shapes, state, s);
    }
    for (int k = st->num_locks - 1; k >= 0; k--) pthread_mutex_unlock(st->locks[k]);
    if (inputs != in_inline) mf_free(inputs);
    if (st->has_fed_output)
      for (int k = 0; k < op->num_outputs; k++)
        if (fed_keep[k]) {
          mf_pool_put(r, outputs[k]);
          outputs[k] = fed_keep[k];
        }
    if (!mf_ok(s)) {
      if (!strstr(s->msg, "[[node ")) mf_node_context(s, op);
      break;
    }
    release_dead(r, st);
  }
}

/* Waits for the work a run queued on the session's devices (a GPU's
 * stream), so that its effects (variables' updates) are done when it returns. */
static void sync_devices(mf_session *sess, mf_status *s) {
  for (int i = 1; i < sess->num_devices && mf_ok(s); i++) sess->devices[i]->cls->sync(sess->devices[i], s);
}

/* Notes the values fed for variables by op id, which stand-ins in functions read. */
static void run_var_feeds(mf_run *r, mf_tensor *const *values) {
  const mf_plan *p = r->plan;
  if (!p->feeds_variables) return;
  for (int i = 0; i < p->num_var_ids; i++) r->var_feeds_by_id[i] = NULL;
  for (int i = 0; i < p->nfeeds; i++)
    if (p->feeds[i].op->def->flags & MF_OP_VARIABLE) r->var_feeds_by_id[p->feeds[i].op->id] = values[i];
  r->var_feeds = r->var_feeds_by_id;
  r->num_var_feeds = p->num_var_ids;
}

/* A run of p. With `into`, fetch i goes into the caller's tensor into[i]
 * (its producer writes there when it can, else the result is copied) and
 * fetch_values is not set; else fetch_values gets new references. */
static mf_code run_plan(mf_plan *p, mf_tensor *const *feed_values, mf_tensor *const *into,
                        mf_tensor **fetch_values, mf_status *s) {
  mf_status_clear(s);
  if (p->sess->closed) return mf_session_closed_error(s);
  for (int i = 0; i < p->nfetches && !into; i++) fetch_values[i] = NULL;
  for (int i = 0; i < p->nfeeds; i++)
    if (check_feed(p, i, feed_values[i], s)) return s->code;
  for (int i = 0; i < p->nfetches && into; i++)
    if (!into[i])
      return mf_status_set(s, MF_INVALID_ARGUMENT, "no buffer given for fetch %s:%d", p->fetches[i].op->name,
                           p->fetches[i].index);
  mf_run *r = mf_run_acquire(p, s);
  if (!r) return s->code;
  /* Reclaim the results of this run state's last run that the caller has dropped. */
  for (int i = 0; i < p->nfetches; i++) {
    mf_pool_put(r, r->last_fetched[i]);
    r->last_fetched[i] = NULL;
  }
  run_var_feeds(r, feed_values);
  for (int i = 0; i < p->nfeeds; i++) r->slots[p->feed_slots[i]] = mf_tensor_retain(feed_values[i]);
  for (int i = 0; i < p->nfetches && into; i++)
    if (p->fetch_direct[i] && !aliases_feed(p, feed_values, into[i]))
      r->slots[p->fetch_slots[i]] = mf_tensor_retain(into[i]);
  mf_run_steps(r, s);
  if (p->off_host) sync_devices(p->sess, s);
  for (int i = 0; i < p->nfetches && mf_ok(s); i++) {
    mf_tensor *v = r->slots[p->fetch_slots[i]];
    if (!v) continue;
    if (!into) {
      fetch_values[i] = mf_tensor_retain(v);
      r->last_fetched[i] = mf_tensor_retain(v);
    } else if (v != into[i]) {  /* the producer could not write there: copy */
      mf_shape shape = mf_shape_of(v);
      if (check_into(p->fetches[i].op, p->fetches[i].index, into[i], v->dtype, &shape, s)) break;
      size_t n = mf_tensor_nbytes(v);
      if (n) memmove(into[i]->data, v->data, n);
    }
  }
  mf_run_release_slots(r);
  mf_run_return(r);
  return s->code;
}

mf_code mf_callable_run(mf_callable *c, mf_tensor *const *feed_values, mf_tensor **fetch_values,
                        mf_status *s) {
  mf_worker_drain(c->plan.sess->worker);
  return run_plan(&c->plan, feed_values, NULL, fetch_values, s);
}

mf_code mf_callable_run_into(mf_callable *c, mf_tensor *const *feed_values, mf_tensor *const *outputs,
                             mf_status *s) {
  mf_worker_drain(c->plan.sess->worker);
  return run_plan(&c->plan, feed_values, outputs, NULL, s);
}

mf_code mf_callable_run_now(mf_callable *c, mf_tensor *const *feed_values, mf_tensor **fetch_values,
                            mf_status *s) {
  return run_plan(&c->plan, feed_values, NULL, fetch_values, s);
}

mf_code mf_session_run(mf_session *sess, const mf_output *feeds, mf_tensor *const *feed_values,
                       int nfeeds, const mf_output *fetches, mf_tensor **fetch_values, int nfetches,
                       mf_op *const *targets, int ntargets, mf_status *s) {
  mf_callable *c = mf_session_make_callable(sess, feeds, nfeeds, fetches, nfetches, targets, ntargets, s);
  if (!c) return s->code;
  return run_plan(&c->plan, feed_values, NULL, fetch_values, s);
}
