/* plan.c — building a plan: the steps a signature needs, where each op runs,
 * value slots and the step after which each slot is dead. */
#include "exec/exec.h"
#include "exec/fuse.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"
#include "device/device.h"

#include <stdlib.h>
#include <string.h>

void mf_plan_free(mf_plan *p) {
  mf_plan_drop_runs(p);
  pthread_mutex_destroy(&p->idle_lock);
  for (int i = 0; i < p->num_steps; i++) {
    mf_fused_free(p->steps[i].fused);
    mf_free(p->steps[i].in_slots);
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

/* For each slot, the last step that reads it, or that produces it when no
 * step reads it; -1 for none. */
static void last_uses(const mf_plan *p, int *last_use) {
  for (int i = 0; i < p->num_slots; i++) last_use[i] = -1;
  for (int i = 0; i < p->num_steps; i++) {
    const mf_step *st = &p->steps[i];
    for (int k = 0; k < st->op->num_inputs; k++)
      if (st->in_slots[k] >= 0) last_use[st->in_slots[k]] = i;
    for (int k = 0; k < st->op->num_outputs; k++)   /* an output nobody reads dies at once */
      if (last_use[st->out_slot + k] < i) last_use[st->out_slot + k] = i;
  }
}

static bool port_is_fed(const mf_plan *p, mf_output o) {
  for (int i = 0; i < p->nfeeds; i++)
    if (p->feeds[i].op == o.op && p->feeds[i].index == o.index) return true;
  return false;
}

mf_code mf_plan_build(mf_plan *p, mf_status *s) {
  mf_graph *g = p->graph;
  mf_session *sess = p->sess;
  int n = g->num_ops;
  mf_code rc = MF_RESOURCE_EXHAUSTED;
  size_t log_mark = sess->log_len;
  bool *needed = NULL, *fed_op = NULL;
  int *slot_base = NULL, *last_use = NULL;
  if (!PLAN_ALLOC(needed, n) || !PLAN_ALLOC(fed_op, n) || !PLAN_ALLOC(slot_base, n)) goto done;
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
  if (!PLAN_ALLOC(p->const_values, num_slots) || !PLAN_ALLOC(p->slot_fetched, num_slots) ||
      !PLAN_ALLOC(p->slot_read, num_slots) || !PLAN_ALLOC(p->slot_const, num_slots) ||
      !PLAN_ALLOC(p->fetch_moves, p->nfetches) || !PLAN_ALLOC(p->fetch_direct, p->nfetches) ||
      !PLAN_ALLOC(last_use, num_slots) || !PLAN_ALLOC(p->steps, num_steps) ||
      !PLAN_ALLOC(p->feed_slots, p->nfeeds) || !PLAN_ALLOC(p->fetch_slots, p->nfetches))
    goto done;
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
      if (where.soft && !mf_session_log_line(sess, "Soft placement: operation '%s' (%s) asked for '%s', which is not "
                                  "available in this process; placed on %s",
                                  op->name, op->def->name, where.requested, name))
        goto done;
      if (!mf_session_log_line(sess, "%s: (%s): %s", op->name, op->def->name, name)) goto done;
    }
    if (op->def->flags & MF_OP_CONSTANT) {
      /* A constant's value sits in its slot for the plan's life: no step. */
      const mf_attr *v = mf_attrs_find(&op->attrs, "value", MF_ATTR_TENSOR);
      p->const_values[slot_base[id]] = mf_tensor_retain(v->v.tensor);
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
    if (!PLAN_ALLOC(st->in_slots, op->num_inputs)) goto done;
    for (int k = 0; k < op->num_inputs; k++) {
      if (mf_op_is_ref_input(op, k)) {
        st->in_slots[k] = -1;
        continue;
      }
      st->in_slots[k] = slot_base[op->inputs[k].op->id] + op->inputs[k].index;
    }
    if (op->num_inputs > max_in) max_in = op->num_inputs;
    if (op->num_outputs > max_out) max_out = op->num_outputs;
    p->num_steps++;
  }
  if (sess->fuse_elementwise && mf_plan_fuse(p, s)) goto done;
  last_uses(p, last_use);
  for (int i = 0; i < p->num_steps; i++) {
    mf_step *st = &p->steps[i];
    for (int k = 0; k < st->op->num_inputs && k < 32; k++)
      if (st->in_slots[k] >= 0 && last_use[st->in_slots[k]] == i && !p->slot_fetched[st->in_slots[k]] &&
          !p->slot_const[st->in_slots[k]])
        st->dying |= 1u << k;
    if (st->op->def->flags & MF_OP_FORWARDS_INPUT) st->forwardable = st->dying;
  }
  for (int i = 0; i < p->nfetches; i++) {
    const mf_op *op = p->fetches[i].op;
    bool first = true;
    for (int j = 0; j < i; j++) first &= p->fetch_slots[j] != p->fetch_slots[i];
    p->fetch_direct[i] = first && needed[op->id] && !fed_op[op->id] && !(op->def->flags & MF_OP_CONSTANT) &&
                         !(op->def->flags & (MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS));
  }
  for (int i = 0; i < num_slots; i++) p->slot_read[i] = p->slot_fetched[i];
  for (int i = 0; i < p->num_steps; i++)
    for (int k = 0; k < p->steps[i].op->num_inputs; k++)
      if (p->steps[i].in_slots[k] >= 0) p->slot_read[p->steps[i].in_slots[k]] = true;
  if (mf_plan_assign_buffers(p, last_use, s)) goto done;
  for (int i = 0; i < num_slots; i++)
    if (!p->slot_fetched[i] && !p->slot_const[i] && last_use[i] >= 0) p->steps[last_use[i]].num_dead++;
  for (int i = 0; i < p->num_steps; i++)
    if (!PLAN_ALLOC(p->steps[i].dead, p->steps[i].num_dead)) goto done;
  for (int i = 0; i < p->num_steps; i++) p->steps[i].num_dead = 0;
  /* Later values first: a view dies before the value it views, which then
   * has no holder left (pool.c pins arena bytes that are still held). */
  for (int i = num_slots - 1; i >= 0; i--)
    if (!p->slot_fetched[i] && !p->slot_const[i] && last_use[i] >= 0) {
      mf_step *st = &p->steps[last_use[i]];
      st->dead[st->num_dead++] = i;
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
#undef PORT_FED
  return s->code;
}
