/* plan.c — building a plan: the steps a signature needs, where each op runs
 * (placement), the copies where a value crosses devices, value slots and
 * the step after which each slot is dead. */
#include "exec/exec.h"
#include "exec/fuse.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"
#include "device/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mf_plan_free(mf_plan *p) {
  mf_plan_drop_runs(p);
  pthread_mutex_destroy(&p->idle_lock);
  mf_scalar_program_free(p->scalar);
  for (int i = 0; i < p->num_steps; i++) {
    mf_fused_free(p->steps[i].fused);
    if (!p->steps[i].copy_from) mf_free(p->steps[i].in_slots);  /* a copy's is its copy_in */
    mf_free(p->steps[i].dead);
    mf_free(p->steps[i].ref_states);
    mf_free(p->steps[i].locks);
  }
  for (int i = 0; i < p->num_slots && p->const_values; i++) mf_tensor_release(p->const_values[i]);
  mf_free(p->steps);
  mf_free(p->const_values);
  mf_free(p->slot_fetched);
  mf_free(p->slot_read);
  mf_free(p->slot_const);
  mf_free(p->fetch_moves);
  mf_free(p->fetch_direct);
  mf_free(p->slot_offset);
  mf_free(p->feeds);
  mf_free(p->fetches);
  mf_free(p->targets);
  mf_free(p->feed_slots);
  mf_free(p->feed_devices);
  mf_free(p->slot_devices);
  mf_free(p->fetch_slots);
  mf_free(p);
}

/* The state of the op producing ref input k of op: a variable, or in a
 * function the stand-in of a variable of the session's graph. */
static mf_state_slot *ref_state(const mf_plan *p, const mf_op *op, int k) {
  const mf_op *src = op->inputs[k].op;
  int64_t id;
  if (src->graph != p->sess->graph && mf_var_id_of(src, &id)) return mf_state_at(&p->sess->states, (int)id);
  return mf_state_at(p->states, src->id);
}

static int compare_locks(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)*(pthread_mutex_t *const *)a, y = (uintptr_t)*(pthread_mutex_t *const *)b;
  return (x > y) - (x < y);
}

/* The step's ref states and the variable locks it holds around its kernel:
 * a variable's own, and those of the ops taking refs by definition (Assign,
 * the optimizers). Control flow passes refs on to functions, whose own steps
 * lock; holding them across a whole loop could deadlock two loops. */
static bool step_states(mf_plan *p, mf_step *st) {
  const mf_op *op = st->op;
  bool refs = false;
  for (int k = 0; k < op->num_inputs; k++) refs |= mf_op_is_ref_input(op, k);
  if (refs) {
    if (!PLAN_ALLOC(st->ref_states, op->num_inputs)) return false;
    for (int k = 0; k < op->num_inputs; k++)
      if (mf_op_is_ref_input(op, k)) st->ref_states[k] = ref_state(p, op, k);
  }
  bool own = op->def->flags & MF_OP_VARIABLE;
  int n = own;
  for (int k = 0; k < op->num_inputs && k < 32; k++) n += (op->def->ref_inputs >> k & 1u) != 0;
  if (!n) return true;
  if (!PLAN_ALLOC(st->locks, n)) return false;
  if (own) st->locks[st->num_locks++] = mf_state_lock(p->sess, st->state);
  for (int k = 0; k < op->num_inputs && k < 32; k++)
    if (op->def->ref_inputs >> k & 1u) st->locks[st->num_locks++] = mf_state_lock(p->sess, st->ref_states[k]);
  qsort(st->locks, (size_t)st->num_locks, sizeof *st->locks, compare_locks);
  int distinct = 0;
  for (int i = 0; i < st->num_locks; i++)
    if (!distinct || st->locks[distinct - 1] != st->locks[i]) st->locks[distinct++] = st->locks[i];
  st->num_locks = distinct;
  return true;
}

static bool port_is_fed(const mf_plan *p, mf_output o) {
  for (int i = 0; i < p->nfeeds; i++)
    if (p->feeds[i].op == o.op && p->feeds[i].index == o.index) return true;
  return false;
}

/* ---------- placement ---------- */

/* Where the ops of a plan run: dev[id] once decided. */
typedef struct placer {
  mf_plan *p;
  const bool *needed;    /* the ops the plan runs: their placement is logged */
  mf_device **dev;       /* per op id, NULL until placed */
} placer;

static mf_code log_placement(mf_session *sess, const mf_op *op, const mf_placement *where) {
  if (where->soft && !mf_session_log_line(sess, "Soft placement: operation '%s' (%s) asked for '%s', which is not "
                                          "available in this process; placed on %s",
                                          op->name, op->def->name, where->requested, where->device->name))
    return MF_RESOURCE_EXHAUSTED;
  if (!mf_session_log_line(sess, "%s: (%s): %s", op->name, op->def->name, where->device->name))
    return MF_RESOURCE_EXHAUSTED;
  return MF_OK;
}

/* Places op, once: by its device string, or, for an op taking a variable by
 * reference (Assign, AssignAdd, the optimizers' apply ops), where that
 * variable is, as TensorFlow colocates them (whatever the op's own string
 * says, as under colocate_with); a variable's stand-in in a function by the
 * variable's string. */
static mf_code place_op(placer *pl, const mf_op *op, mf_status *s) {
  if (pl->dev[op->id]) return MF_OK;
  mf_session *sess = pl->p->sess;
  bool soft = sess->options & MF_ALLOW_SOFT_PLACEMENT;
  mf_placement where = {.device = sess->devices[0]};
  int ref = -1;
  for (int k = 0; k < op->num_inputs && k < 32 && ref < 0; k++)
    if (op->def->ref_inputs >> k & 1u) ref = k;
  if (ref >= 0) {
    const mf_op *var = op->inputs[ref].op;  /* created before op: placed by now when the plan runs it */
    if (place_op(pl, var, s)) return s->code;
    where.device = pl->dev[var->id];
    char why[160];
    if (!mf_device_fits(where.device, op, why, sizeof why)) {
      snprintf(where.requested, sizeof where.requested, "%s", where.device->short_name);
      if (!soft) {
        mf_status_set(s, MF_INVALID_ARGUMENT, "Cannot assign a device for operation '%s': it is colocated with "
                      "variable '%s' on %s, which cannot run it: %s", op->name, var->name,
                      where.device->short_name, why);
        mf_status_append_origin(s, op);
        return s->code;
      }
      where.device = sess->devices[0];
      where.soft = true;
    }
  } else {
    /* A variable's stand-in in a function is where the variable is. */
    const mf_op *by = op;
    int64_t var_id;
    if (op->graph != sess->graph && mf_var_id_of(op, &var_id) && var_id >= 0 && var_id < sess->graph->num_ops)
      by = sess->graph->ops[var_id];
    if (mf_device_place(sess->devices, sess->num_devices, by, soft, &where, s)) {
      mf_status_append_origin(s, by);
      return s->code;
    }
  }
  pl->dev[op->id] = where.device;
  if ((sess->options & MF_LOG_DEVICE_PLACEMENT) && pl->needed[op->id] && log_placement(sess, op, &where))
    return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory logging placement");
  return MF_OK;
}

/* Places the ops the plan runs, in order, and in a function's plan the ops
 * it feeds (whose values the function's caller moves there). */
static mf_code place_ops(placer *pl, const bool *fed_op, bool session_plan, mf_status *s) {
  mf_graph *g = pl->p->graph;
  for (int id = 0; id < g->num_ops; id++)
    if ((pl->needed[id] || (fed_op[id] && !session_plan)) && place_op(pl, g->ops[id], s)) return s->code;
  return MF_OK;
}

/* ---------- copies between devices ---------- */

/* Values cross devices by copy steps: one per (value, device reading it) per
 * run, made before the first step reading it there. A session's feeds arrive
 * on CPU:0 and its fetches leave from there; host-memory inputs are read
 * there. With one device nothing is ever copied. */
typedef struct copier {
  mf_plan *p;
  int num_devices;
  mf_device **slot_dev;  /* per slot: where its value lives */
  int *copy_slot;        /* per (slot, device ordinal): the slot of its copy there, or -1 */
  bool *copy_made;       /* per slot: its copy step is emitted */
  int num_copies;
} copier;

static int device_ordinal(const mf_session *sess, const mf_device *d) {
  for (int i = 0; i < sess->num_devices; i++)
    if (sess->devices[i] == d) return i;
  return 0;
}

/* The device input k of an op placed on `at` is read on. */
static mf_device *input_device(const mf_plan *p, const mf_op *op, int k, mf_device *at) {
  return mf_def_host_input(op->def, k) ? p->sess->devices[0] : at;
}

/* The slot holding slot's value on device d: slot itself when it lives
 * there; else its copy's, a new slot numbered from *num_slots when `make`. */
static int copy_of(copier *c, int slot, mf_device *d, bool make, int *num_slots) {
  if (c->num_devices == 1 || c->slot_dev[slot] == d) return slot;
  int *at = &c->copy_slot[slot * c->num_devices + device_ordinal(c->p->sess, d)];
  if (*at < 0 && make) {
    *at = (*num_slots)++;
    c->num_copies++;
  }
  return *at;
}

/* Emits, once, the step copying port o's value (slot `slot`) to device d,
 * before the step that first reads it there. */
static void emit_copy(copier *c, mf_output o, int slot, mf_device *d) {
  mf_plan *p = c->p;
  int to = copy_of(c, slot, d, false, NULL);
  if (to == slot || c->copy_made[to]) return;
  c->copy_made[to] = true;
  mf_step *st = &p->steps[p->num_steps++];
  st->op = o.op;
  st->copy_index = o.index;
  st->device = d;
  st->copy_from = c->slot_dev[slot];
  st->in_slots = &st->copy_in;
  st->copy_in = slot;
  st->out_slot = to;
  st->var_id = -1;
  p->slot_devices[to] = d;
}

/* ---------- building ---------- */

/* For each slot the last step that reads or writes it (-1: none), then the
 * dying inputs, forwarding, what is read and which step frees what. */
static mf_code plan_liveness(mf_plan *p, int *last_use, mf_status *s) {
  int num_slots = p->num_slots;
  for (int i = 0; i < num_slots; i++) last_use[i] = -1;
  for (int i = 0; i < p->num_steps; i++) {
    mf_step *st = &p->steps[i];
    for (int k = 0; k < mf_step_num_inputs(st); k++)
      if (st->in_slots[k] >= 0) last_use[st->in_slots[k]] = i;
    for (int k = 0; k < mf_step_num_outputs(st); k++)   /* an output nobody reads dies at once */
      if (last_use[st->out_slot + k] < i) last_use[st->out_slot + k] = i;
  }
  for (int i = 0; i < p->num_steps; i++) {
    mf_step *st = &p->steps[i];
    if (st->copy_from) continue;
    for (int k = 0; k < st->op->num_inputs && k < 32; k++)
      if (st->in_slots[k] >= 0 && last_use[st->in_slots[k]] == i && !p->slot_fetched[st->in_slots[k]] &&
          !p->slot_const[st->in_slots[k]])
        st->dying |= 1u << k;
    if (st->op->def->flags & MF_OP_FORWARDS_INPUT) st->forwardable = st->dying;
  }
  for (int i = 0; i < num_slots; i++) p->slot_read[i] = p->slot_fetched[i];
  for (int i = 0; i < p->num_steps; i++)
    for (int k = 0; k < mf_step_num_inputs(&p->steps[i]); k++)
      if (p->steps[i].in_slots[k] >= 0) p->slot_read[p->steps[i].in_slots[k]] = true;
  if (mf_plan_assign_buffers(p, last_use, s)) return s->code;
  for (int i = 0; i < num_slots; i++)
    if (!p->slot_fetched[i] && !p->slot_const[i] && last_use[i] >= 0) p->steps[last_use[i]].num_dead++;
  for (int i = 0; i < p->num_steps; i++)
    if (!PLAN_ALLOC(p->steps[i].dead, p->steps[i].num_dead)) return MF_RESOURCE_EXHAUSTED;
  for (int i = 0; i < p->num_steps; i++) p->steps[i].num_dead = 0;
  /* Later values first: a view dies before the value it views, which then
   * has no holder left (pool.c pins arena bytes that are still held). */
  for (int i = num_slots - 1; i >= 0; i--)
    if (!p->slot_fetched[i] && !p->slot_const[i] && last_use[i] >= 0) {
      mf_step *st = &p->steps[last_use[i]];
      st->dead[st->num_dead++] = i;
    }
  return MF_OK;
}

/* Whether step `before` must run before step `st`: it writes one of st's
 * inputs, or is (a step of) one of st's control inputs. */
static bool step_needs(const mf_step *st, const mf_step *before) {
  for (int k = 0; k < mf_step_num_inputs(st); k++)
    if (st->in_slots[k] >= 0 && st->in_slots[k] >= before->out_slot &&
        st->in_slots[k] < before->out_slot + mf_step_num_outputs(before))
      return true;
  for (int k = 0; k < st->op->num_control; k++)
    if (!before->copy_from && before->op == st->op->control_inputs[k]) return true;
  return false;
}

/* Moves each step of an MF_OP_STARTS_EARLY op to right after the last step
 * it needs: an asynchronous start (an MPI allreduce handed to the
 * communication thread) then overlaps the steps that follow. Schedule order
 * stays a function of the graph, the same in every process that built it. */
static void schedule_early_starts(mf_plan *p) {
  for (int i = 0; i < p->num_steps; i++) {
    mf_step st = p->steps[i];
    if (st.copy_from || !(st.op->def->flags & MF_OP_STARTS_EARLY)) continue;
    int at = i;
    while (at > 0 && !step_needs(&st, &p->steps[at - 1])) at--;
    if (at == i) continue;
    memmove(&p->steps[at + 1], &p->steps[at], (size_t)(i - at) * sizeof *p->steps);
    p->steps[at] = st;
    for (int j = at + 1; j <= i; j++)  /* a copy's in_slots points into itself */
      if (p->steps[j].copy_from) p->steps[j].in_slots = &p->steps[j].copy_in;
  }
}

/* A Const placed off the host: its value, uploaded once for the plan's life. */
static mf_tensor *const_on_device(mf_tensor *v, mf_device *d, mf_status *s) {
  if (d->host) return mf_tensor_retain(v);
  mf_tensor *t = mf_allocator_tensor(d->allocator, v->dtype, v->rank, v->dims, s);
  if (t && d->cls->copy_from_host(d, t, v, s)) {
    mf_tensor_release(t);
    t = NULL;
  }
  return t;
}

mf_code mf_plan_build(mf_plan *p, mf_status *s) {
  mf_graph *g = p->graph;
  mf_session *sess = p->sess;
  int n = g->num_ops, ndev = sess->num_devices;
  mf_code rc = MF_RESOURCE_EXHAUSTED;
  size_t log_mark = sess->log_len;
  bool *needed = NULL, *fed_op = NULL;
  int *slot_base = NULL, *last_use = NULL;
  mf_device **op_dev = NULL;
  copier cp = {.p = p, .num_devices = ndev};
  if (!PLAN_ALLOC(needed, n) || !PLAN_ALLOC(fed_op, n) || !PLAN_ALLOC(slot_base, n) || !PLAN_ALLOC(op_dev, n))
    goto done;
  if (mf_states_grow(p->states, s) || mf_states_grow(&sess->states, s)) goto done;

  /* Build-time inference read the values of constants and shapes; a feed that
   * replaces any such value voids what it inferred. */
  bool fed_values = false;
  for (int i = 0; i < p->nfeeds; i++) {
    fed_op[p->feeds[i].op->id] = true;
    fed_values |= mf_port_value_read_at_build(p->feeds[i]);
    p->feeds_variables |= (p->feeds[i].op->def->flags & MF_OP_VARIABLE) != 0;
  }
  if (p->feeds_variables) p->num_var_ids = sess->graph->num_ops;
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
    for (int k = 0; k < op->num_control; k++) {
      const mf_op *c = op->control_inputs[k];
      if (!(fed_op[c->id] && (c->def->flags & MF_OP_REPLACED_BY_FEED))) needed[c->id] = true;
    }
  }
  bool session_plan = p->states == &sess->states;
  placer pl = {.p = p, .needed = needed, .dev = op_dev};
  if (place_ops(&pl, fed_op, session_plan, s)) goto done;

  /* Slots for every port of a needed or fed op, then for the copies. */
  int num_slots = 0, num_steps = 0;
  for (int id = 0; id < n; id++) {
    slot_base[id] = -1;
    if (needed[id] || fed_op[id]) {
      slot_base[id] = num_slots;
      num_slots += g->ops[id]->num_outputs;
    }
    num_steps += needed[id] && !(g->ops[id]->def->flags & MF_OP_CONSTANT);
  }
  if (!PLAN_ALLOC(cp.slot_dev, num_slots) || !PLAN_ALLOC(cp.copy_slot, (size_t)num_slots * (size_t)ndev)) goto done;
  for (int id = 0; id < n; id++)
    for (int k = 0; slot_base[id] >= 0 && k < g->ops[id]->num_outputs; k++)
      cp.slot_dev[slot_base[id] + k] = op_dev[id];
  for (int i = 0; i < p->nfeeds; i++)  /* a session's feeds arrive on the host */
    if (session_plan) cp.slot_dev[slot_base[p->feeds[i].op->id] + p->feeds[i].index] = sess->devices[0];
  for (int i = 0; i < num_slots * ndev; i++) cp.copy_slot[i] = -1;
  int base_slots = num_slots;
  for (int id = 0; id < n; id++) {
    mf_op *op = g->ops[id];
    if (!needed[id] || (op->def->flags & MF_OP_CONSTANT)) continue;
    for (int k = 0; k < op->num_inputs; k++)
      if (!mf_op_is_ref_input(op, k))
        copy_of(&cp, slot_base[op->inputs[k].op->id] + op->inputs[k].index, input_device(p, op, k, op_dev[id]), true,
                &num_slots);
  }
  for (int i = 0; i < p->nfetches && session_plan; i++)  /* a session's fetches leave from the host */
    copy_of(&cp, slot_base[p->fetches[i].op->id] + p->fetches[i].index, sess->devices[0], true, &num_slots);
  num_steps += cp.num_copies;

  p->num_slots = num_slots;
  if (!PLAN_ALLOC(p->const_values, num_slots) || !PLAN_ALLOC(p->slot_fetched, num_slots) ||
      !PLAN_ALLOC(p->slot_read, num_slots) || !PLAN_ALLOC(p->slot_const, num_slots) ||
      !PLAN_ALLOC(p->fetch_moves, p->nfetches) || !PLAN_ALLOC(p->fetch_direct, p->nfetches) ||
      !PLAN_ALLOC(last_use, num_slots) || !PLAN_ALLOC(p->steps, num_steps) || !PLAN_ALLOC(cp.copy_made, num_slots) ||
      !PLAN_ALLOC(p->feed_slots, p->nfeeds) || !PLAN_ALLOC(p->feed_devices, p->nfeeds) ||
      !PLAN_ALLOC(p->fetch_slots, p->nfetches) || !PLAN_ALLOC(p->slot_devices, num_slots))
    goto done;
  for (int i = 0; i < num_slots; i++) p->slot_devices[i] = i < base_slots ? cp.slot_dev[i] : NULL;
  for (int i = 0; i < p->nfeeds; i++) {
    p->feed_slots[i] = slot_base[p->feeds[i].op->id] + p->feeds[i].index;
    p->feed_devices[i] = cp.slot_dev[p->feed_slots[i]];
  }
  for (int i = 0; i < p->nfetches; i++) {
    int slot = slot_base[p->fetches[i].op->id] + p->fetches[i].index;
    p->fetch_slots[i] = session_plan ? copy_of(&cp, slot, sess->devices[0], false, NULL) : slot;
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
    if (op->def->flags & MF_OP_CONSTANT) {
      /* A constant's value sits in its slot for the plan's life: no step. */
      const mf_attr *v = mf_attrs_find(&op->attrs, "value", MF_ATTR_TENSOR);
      if (!(p->const_values[slot_base[id]] = const_on_device(v->v.tensor, op_dev[id], s))) goto done;
      p->slot_const[slot_base[id]] = true;
      continue;
    }
    for (int k = 0; k < op->num_inputs; k++)
      if (!mf_op_is_ref_input(op, k))
        emit_copy(&cp, op->inputs[k], slot_base[op->inputs[k].op->id] + op->inputs[k].index,
                  input_device(p, op, k, op_dev[id]));
    mf_step *st = &p->steps[p->num_steps];
    st->op = op;
    st->device = op_dev[id];
    st->kernel = mf_device_kernel(st->device, op->def);
    p->off_host |= !st->device->host;
    if (!st->kernel) {
      rc = mf_status_set(s, MF_UNIMPLEMENTED, "No %s kernel registered for op %s ('%s')",
                         st->device->cls->type_name, op->def->name, op->name);
      mf_status_append_origin(s, op);
      goto done;
    }
    st->out_slot = slot_base[id];
    int64_t var_id;
    st->state = mf_state_at(p->states, id);
    st->var_id = -1;
    if (mf_var_id_of(op, &var_id)) {
      if (p->states == &p->sess->states || var_id < 0 || var_id >= p->sess->graph->num_ops) {
        rc = mf_status_set(s, MF_INVALID_ARGUMENT, "'%s' names no variable of the session's graph", op->name);
        goto done;
      }
      st->state = mf_state_at(&sess->states, (int)var_id);
      st->var_id = (int)var_id;
    }
    if (!step_states(p, st)) goto done;
    /* A source op learns nothing new at run time (an unfed Placeholder must reach
     * its kernel, which reports the missing feed). */
    st->infer_at_runtime = (fed_values || !op->outputs_fully_defined) && op->num_inputs > 0;
    st->has_fed_output = fed_op[id];
    /* Reading a variable is all its kernel does: no inputs, shapes or buffers
     * for mf_run_steps to prepare, only the variable's lock to hold. */
    st->reads_variable = (op->def->flags & MF_OP_VARIABLE) && (op->def->flags & MF_OP_SETS_OUTPUTS) &&
                         op->num_inputs == 0 && st->var_id < 0 && !st->has_fed_output && st->num_locks == 1;
    if (!PLAN_ALLOC(st->in_slots, op->num_inputs)) goto done;
    for (int k = 0; k < op->num_inputs; k++)
      st->in_slots[k] = mf_op_is_ref_input(op, k) ? -1
                        : copy_of(&cp, slot_base[op->inputs[k].op->id] + op->inputs[k].index,
                                  input_device(p, op, k, st->device), false, NULL);
    if (op->num_inputs > max_in) max_in = op->num_inputs;
    if (op->num_outputs > max_out) max_out = op->num_outputs;
    p->num_steps++;
  }
  for (int i = 0; i < p->nfetches && session_plan; i++)
    emit_copy(&cp, p->fetches[i], slot_base[p->fetches[i].op->id] + p->fetches[i].index, sess->devices[0]);
  schedule_early_starts(p);
  if (sess->fuse_elementwise && mf_plan_fuse(p, s)) goto done;
  if (plan_liveness(p, last_use, s)) goto done;
  if (!session_plan && mf_plan_scalar(p, s)) goto done;
  for (int i = 0; i < p->nfetches; i++) {
    const mf_op *op = p->fetches[i].op;
    bool first = true, copied = p->fetch_slots[i] >= base_slots;
    for (int j = 0; j < i; j++) first &= p->fetch_slots[j] != p->fetch_slots[i];
    p->fetch_direct[i] = first && (copied || (needed[op->id] && !fed_op[op->id] && !(op->def->flags & MF_OP_CONSTANT) &&
                                              !(op->def->flags & (MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS))));
  }
  p->rt_cap_in = max_in;
  p->rt_cap_out = max_out > MF_MAX_OUTPUTS_INLINE ? max_out : MF_MAX_OUTPUTS_INLINE;
  rc = MF_OK;
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
  mf_free(op_dev);
  mf_free(cp.slot_dev);
  mf_free(cp.copy_slot);
  mf_free(cp.copy_made);
#undef PORT_FED
  return s->code;
}
