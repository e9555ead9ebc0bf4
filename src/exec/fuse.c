/* fuse.c — elementwise fusion (fuse.h): grouping a plan's elementwise steps,
 * the group's register program, and running it tile by tile.
 *
 * Grouping (at plan build, in schedule order): an elementwise step joins the
 * groups of the steps computing its inputs and of the steps reading the same
 * inputs (merging them) when their static output shapes are compatible and
 * no other step scheduled between the groups' first step and it reads a
 * value of theirs (data or control edge): then the group can run where its
 * last step was, every other step keeping its order. A group of one step
 * stays an ordinary step.
 *
 * The program: values are the group's inputs (values from outside), its
 * outputs (values a fetch or a step outside reads: materialised) and its
 * temporaries (read only inside: kept in a tile buffer, never materialised).
 * An instruction per step runs the op's element loop over a tile. Every step
 * of a group has the group's output shape (checked at run time); inputs from
 * outside broadcast into it, read in place when they have that shape or one
 * element, else gathered into a tile buffer. */
#include "exec/fuse.h"
#include "core/memory.h"
#include "core/shape.h"
#include "core/status.h"
#include "core/tensor.h"

#include <string.h>

enum {
  FUSE_MAX_OPS = 16,                 /* steps per group */
  FUSE_MAX_VALUES = 3 * FUSE_MAX_OPS, /* per step its output and at most two inputs */
  /* Elements per tile: a tile buffer of 8-byte elements is 4 KiB, so a
   * program's buffers stay in L1/L2 between its instructions. */
  FUSE_TILE = 512,
  FUSE_MAX_REGS = 16,                /* tile buffers: temporaries and gathered inputs */
  FUSE_SPAN = 256,                   /* steps a group may span in the schedule */
  /* Elements per thread at the least, for a one-op group (as kernels/elementwise.c);
   * a group of k ops takes 1/k of it, since each element costs k loops. */
  FUSE_GRAIN = 1 << 15,
};

typedef enum { VALUE_INPUT, VALUE_OUTPUT, VALUE_TEMP } value_kind;

typedef struct fused_value {
  value_kind kind;
  int slot;
  mf_dtype dtype;
  int reg;               /* a temporary's tile buffer */
  int last_read;         /* the last instruction reading it; -1 if none */
  /* An output: inputs (bit per value) that die in the group and are read by
   * no instruction after the one writing it, whose buffer it may take over. */
  uint64_t may_take;
} fused_value;

typedef struct fused_instr {
  mf_element_loop loop;
  int in[2];             /* values; in[1] is -1 for a map */
  int out;
} fused_instr;

struct mf_fused {
  int num_ops;           /* instruction j is step j of the group */
  int num_values, num_temps;
  fused_value values[FUSE_MAX_VALUES];
  fused_instr instrs[FUSE_MAX_OPS];
};

bool mf_fused_in_tiles(const mf_fused *f, int j) { return f->values[f->instrs[j].out].kind == VALUE_TEMP; }

int mf_fused_num_steps(const mf_fused *f) { return f->num_ops; }

void mf_callable_plan_stats(const mf_callable *c, mf_plan_stats *out) {
  const mf_plan *p = &c->plan;
  *out = (mf_plan_stats){0};
  for (int i = 0; i < p->num_steps; i++) {
    out->num_steps++;
    if (!p->steps[i].fused) continue;
    out->num_fused_groups++;
    out->num_fused_ops += p->steps[i].fused->num_ops;
    i += p->steps[i].fused->num_ops - 1;
  }
}
void mf_fused_free(mf_fused *f) { mf_free(f); }

/* ---------- grouping ---------- */

bool mf_step_element_loop(const mf_step *st, mf_element_loop *loop) {
  const mf_op *op = st->op;
  const mf_op_def *def = op->def;
  /* A GPU's steps run its own kernels: fused loops run on the host. */
  if (!def->element_loop || st->copy_from || st->device->type != MF_CPU || st->kernel != def->kernel[MF_CPU] ||
      op->num_outputs != 1 ||
      op->num_inputs < 1 || op->num_inputs > 2 || st->has_fed_output || st->num_locks || st->ref_states ||
      st->var_id >= 0 || def->value_inputs || def->host_inputs || (def->flags & MF_OP_STATEFUL))
    return false;
  for (int k = 0; k < op->num_inputs; k++)
    if (st->in_slots[k] < 0) return false;
  if (!def->element_loop(&op->attrs, mf_port_dtype(op->inputs[0]), loop)) return false;
  return op->num_inputs == 1 ? loop->map != NULL : loop->zip != NULL;
}

/* Whether st runs one element loop the group can call, over more than one element. */
static bool fusible(const mf_step *st, mf_element_loop *loop) {
  /* One element (a loop counter): no memory traffic to save, and a group's
   * setup costs more than running its steps one by one (scalar.c runs those). */
  if (!mf_step_element_loop(st, loop)) return false;
  const mf_shape *out = &st->op->out_shapes[0];
  return !mf_shape_fully_defined(out) || mf_shape_num_elements(out->rank, out->dims) > 1;
}

/* Grouping in schedule order. Groups are sets of steps kept by union-find:
 * parent[i] leads to the group's root, its first step; -1 for a step in no
 * group. size and last (the group's last step) are kept at the root. */
typedef struct grouping {
  const mf_plan *p;
  int *parent, *size, *last;
  int *producer;         /* per slot: the step computing it, or -1 */
  int *step_of_op;       /* per op id: its step, or -1 */
  int *slot_reader;      /* per slot: the last grouped step reading it so far, or -1 */
} grouping;

static int root(const grouping *gr, int i) {
  while (gr->parent[i] != i) i = gr->parent[i];
  return i;
}

static bool in_set(int g, const int *set, int n) {
  for (int k = 0; k < n; k++)
    if (set[k] == g) return true;
  return false;
}

/* The group of step `from` (a step or -1) when it is one of set. */
static bool from_set(const grouping *gr, int from, const int *set, int n) {
  return from >= 0 && gr->parent[from] >= 0 && in_set(root(gr, from), set, n);
}

/* Whether step q reads a value of the groups of set: an input or a control input. */
static bool reads_set(const grouping *gr, int q, const int *set, int n) {
  const mf_step *st = &gr->p->steps[q];
  const mf_op *op = st->op;
  for (int k = 0; k < mf_step_num_inputs(st); k++) {
    int slot = st->in_slots[k];
    if (slot >= 0 && from_set(gr, gr->producer[slot], set, n)) return true;
  }
  for (int k = 0; k < op->num_control && !st->copy_from; k++)
    if (from_set(gr, gr->step_of_op[op->control_inputs[k]->id], set, n)) return true;
  return false;
}

/* Puts step i and the groups of set (roots) into one group, which will run
 * where i is, when that keeps every step after what it reads: no other step
 * scheduled between the groups' first step and i reads a value of theirs. */
static bool join(grouping *gr, int i, const int *set, int n) {
  const mf_op *op = gr->p->steps[i].op;
  int first = i, total = 1;
  for (int k = 0; k < n; k++) {
    const mf_op *other = gr->p->steps[set[k]].op;
    /* One device string: a group never spans devices, whatever placement makes of them. */
    if (!mf_shape_compatible(&op->out_shapes[0], &other->out_shapes[0]) || strcmp(op->device, other->device))
      return false;
    if (set[k] < first) first = set[k];
    total += gr->size[set[k]];
  }
  if (total > FUSE_MAX_OPS || i - first > FUSE_SPAN) return false;
  for (int q = first + 1; q < i; q++)
    if (!from_set(gr, q, set, n) && reads_set(gr, q, set, n)) return false;
  for (int k = 0; k < n; k++)
    if (set[k] != first) gr->parent[set[k]] = first;
  gr->parent[i] = first;
  gr->size[first] = total;
  gr->last[first] = i;
  return true;
}

/* Groups the fusible steps (loops[i] set for them): a step joins the groups
 * computing its inputs and those reading the same inputs, all of them when
 * it can, else the first it can; else it starts a group of its own. */
static void group_steps(grouping *gr, mf_element_loop *loops) {
  const mf_plan *p = gr->p;
  for (int i = 0; i < p->num_steps; i++) {
    const mf_step *st = &p->steps[i];
    gr->parent[i] = -1;
    if (!fusible(st, &loops[i])) continue;
    int cands[4], n = 0;
    for (int k = 0; k < st->op->num_inputs; k++) {
      int from = gr->producer[st->in_slots[k]];
      if (from >= 0 && gr->parent[from] >= 0 && !in_set(root(gr, from), cands, n)) cands[n++] = root(gr, from);
    }
    for (int k = 0; k < st->op->num_inputs; k++) {
      int sibling = gr->slot_reader[st->in_slots[k]];
      if (sibling >= 0 && !in_set(root(gr, sibling), cands, n)) cands[n++] = root(gr, sibling);
    }
    bool joined = n > 0 && join(gr, i, cands, n);
    for (int k = 0; k < n && !joined; k++) joined = join(gr, i, &cands[k], 1);
    if (!joined) {
      gr->parent[i] = i;
      gr->size[i] = 1;
      gr->last[i] = i;
    }
    for (int k = 0; k < mf_step_num_inputs(st); k++) gr->slot_reader[st->in_slots[k]] = i;
  }
}

/* ---------- the program ---------- */

static int value_of_slot(mf_fused *f, int slot) {
  for (int v = 0; v < f->num_values; v++)
    if (f->values[v].slot == slot) return v;
  return -1;
}

/* Whether only steps of group g read slot (or none does): reader_group[slot]
 * is the group all its readers are in, -2 when it has none, else -1. */
static bool only_group_reads(const int *reader_group, int slot, int g) {
  return reader_group[slot] == g || reader_group[slot] == -2;
}

/* The program of group g, whose n steps (at `steps`) run the element loops
 * loops[]. */
static void build_program(const mf_plan *p, int g, const mf_step *steps, int n, const mf_element_loop *loops,
                          const int *reader_group, mf_fused *f) {
  f->num_ops = n;
  for (int j = 0; j < n; j++) {
    const mf_step *st = &steps[j];
    fused_instr *ins = &f->instrs[j];
    ins->loop = loops[j];
    ins->in[1] = -1;
    for (int k = 0; k < st->op->num_inputs; k++) {
      int v = value_of_slot(f, st->in_slots[k]);
      if (v < 0) {  /* produced outside the group: an input */
        v = f->num_values++;
        f->values[v] = (fused_value){.kind = VALUE_INPUT, .slot = st->in_slots[k],
                                     .dtype = mf_port_dtype(st->op->inputs[k])};
      }
      ins->in[k] = v;
      f->values[v].last_read = j;
    }
    int out = f->num_values++;
    bool temp = only_group_reads(reader_group, st->out_slot, g) && !p->slot_fetched[st->out_slot];
    f->values[out] = (fused_value){.kind = temp ? VALUE_TEMP : VALUE_OUTPUT, .slot = st->out_slot,
                                   .dtype = st->op->out_dtypes[0], .last_read = -1};
    ins->out = out;
  }
  /* Temporaries get tile buffers by liveness; an instruction's output never
   * shares one with its inputs (the loops take restrict pointers). */
  bool busy[FUSE_MAX_OPS] = {false};
  for (int j = 0; j < n; j++) {
    const fused_instr *ins = &f->instrs[j];
    fused_value *o = &f->values[ins->out];
    if (o->kind == VALUE_TEMP) {
      int reg = 0;
      while (busy[reg]) reg++;
      busy[reg] = true;
      o->reg = reg;
      if (reg + 1 > f->num_temps) f->num_temps = reg + 1;
    }
    for (int k = 0; k < 2; k++) {  /* temporaries read for the last time free their buffers */
      const fused_value *in = ins->in[k] >= 0 ? &f->values[ins->in[k]] : NULL;
      if (in && in->kind == VALUE_TEMP && in->last_read == j) busy[in->reg] = false;
    }
    if (o->kind == VALUE_TEMP && o->last_read < 0) busy[o->reg] = false;  /* read by nobody */
  }
  /* Outputs may take over the buffers of inputs dying in the group. */
  for (int j = 0; j < n; j++) {
    fused_value *o = &f->values[f->instrs[j].out];
    if (o->kind != VALUE_OUTPUT) continue;
    const fused_instr *ins = &f->instrs[j];
    for (int v = 0; v < f->num_values; v++) {
      const fused_value *in = &f->values[v];
      if (in->kind == VALUE_INPUT && only_group_reads(reader_group, in->slot, g) && !p->slot_fetched[in->slot] &&
          !p->slot_const[in->slot] && in->last_read <= j && !(ins->in[0] == v && ins->in[1] == v))
        o->may_take |= (uint64_t)1 << v;
    }
  }
}

/* The steps in their new order into `order`: each group (group[i], the
 * group's first step, or -1) where its last step was, with its program, the
 * other steps in place. False when out of memory. */
static bool order_groups(const mf_plan *p, const int *group, const int *last, const mf_element_loop *loops,
                         int *reader_group, mf_step *order) {
  for (int i = 0; i < p->num_slots; i++) reader_group[i] = -2;
  for (int i = 0; i < p->num_steps; i++)
    for (int k = 0; k < mf_step_num_inputs(&p->steps[i]); k++) {
      int slot = p->steps[i].in_slots[k];
      if (slot < 0) continue;
      if (reader_group[slot] == -2) reader_group[slot] = group[i];
      else if (reader_group[slot] != group[i]) reader_group[slot] = -1;
    }
  int m = 0;
  for (int i = 0; i < p->num_steps; i++) {
    int g = group[i];
    if (g < 0) {
      order[m++] = p->steps[i];
      continue;
    }
    if (last[g] != i) continue;
    int first = m;
    mf_element_loop group_loops[FUSE_MAX_OPS];
    for (int j = g; j <= i; j++)
      if (group[j] == g) {
        group_loops[m - first] = loops[j];
        order[m++] = p->steps[j];
      }
    mf_fused *f = mf_calloc(1, sizeof *f);
    if (!f) {
      for (int j = 0; j < first; j++) mf_fused_free(order[j].fused);
      return false;
    }
    build_program(p, g, &order[first], m - first, group_loops, reader_group, f);
    order[first].fused = f;
  }
  return true;
}

mf_code mf_plan_fuse(mf_plan *p, mf_status *s) {
  int n = p->num_steps;
  grouping gr = {.p = p};
  int *group = NULL, *reader_group = NULL;
  mf_element_loop *loops = NULL;
  mf_step *order = NULL;
  mf_code rc = MF_RESOURCE_EXHAUSTED;
  if (!PLAN_ALLOC(gr.parent, n) || !PLAN_ALLOC(gr.size, n) || !PLAN_ALLOC(gr.last, n) ||
      !PLAN_ALLOC(gr.producer, p->num_slots) || !PLAN_ALLOC(gr.step_of_op, p->graph->num_ops) ||
      !PLAN_ALLOC(gr.slot_reader, p->num_slots) || !PLAN_ALLOC(group, n) || !PLAN_ALLOC(loops, n) ||
      !PLAN_ALLOC(reader_group, p->num_slots) || !PLAN_ALLOC(order, n))
    goto done;
  for (int i = 0; i < p->num_slots; i++) gr.producer[i] = gr.slot_reader[i] = -1;
  for (int i = 0; i < p->graph->num_ops; i++) gr.step_of_op[i] = -1;
  for (int i = 0; i < n; i++) {
    if (!p->steps[i].copy_from) gr.step_of_op[p->steps[i].op->id] = i;  /* a copy's op has its own step */
    for (int k = 0; k < mf_step_num_outputs(&p->steps[i]); k++) gr.producer[p->steps[i].out_slot + k] = i;
  }
  group_steps(&gr, loops);
  /* group[i]: the first step of i's group, -1 when i runs alone. */
  int groups = 0;
  for (int i = 0; i < n; i++) {
    group[i] = gr.parent[i] >= 0 ? root(&gr, i) : -1;
    if (group[i] >= 0 && gr.size[group[i]] < 2) group[i] = -1;
    groups += group[i] == i;
  }
  if (groups && !order_groups(p, group, gr.last, loops, reader_group, order)) goto done;
  if (groups) {
    memcpy(p->steps, order, (size_t)n * sizeof *order);
    for (int i = 0; i < n; i++)  /* a copy step's input list is its own field, which moved */
      if (p->steps[i].copy_from) p->steps[i].in_slots = &p->steps[i].copy_in;
  }
  rc = MF_OK;
done:
  if (rc != MF_OK) mf_status_set(s, rc, "out of memory building a plan");
  mf_free(gr.parent);
  mf_free(gr.size);
  mf_free(gr.last);
  mf_free(gr.producer);
  mf_free(gr.step_of_op);
  mf_free(gr.slot_reader);
  mf_free(group);
  mf_free(loops);
  mf_free(reader_group);
  mf_free(order);
  return rc;
}

/* ---------- running a group ---------- */

/* How an instruction finds a value in a tile. */
typedef enum { AT_TENSOR, AT_SCALAR, AT_GATHER, AT_REG } value_place;

typedef struct fused_job {
  const mf_fused *f;
  int rank;
  int64_t dims[MF_MAX_RANK];   /* the group's output shape */
  struct {
    value_place place;
    char *data;                /* AT_TENSOR, AT_SCALAR, AT_GATHER: the tensor's elements */
    size_t elem;               /* bytes per element */
    int reg;                   /* AT_GATHER, AT_REG */
    int64_t stride[MF_MAX_RANK]; /* AT_GATHER: elements per step along each dim (0: broadcast) */
  } v[FUSE_MAX_VALUES];
  atomic_uint failed;          /* bit j: instruction j found elements with no result */
} fused_job;

/* n copies of the element of elem bytes (1, 4 or 8: core/dtype.c) at src into
 * buf, by stores of that size: a memcpy per element of a size known only at
 * run time is a call each (most of a softmax's time, repeating a row's max). */
static void repeat_element(char *buf, const char *src, size_t elem, int64_t n) {
  if (elem == 8) {
    uint64_t v;
    memcpy(&v, src, sizeof v);
    for (int64_t i = 0; i < n; i++) memcpy(buf + i * (int64_t)sizeof v, &v, sizeof v);
  } else if (elem == 4) {
    uint32_t v;
    memcpy(&v, src, sizeof v);
    for (int64_t i = 0; i < n; i++) memcpy(buf + i * (int64_t)sizeof v, &v, sizeof v);
  } else {
    memset(buf, *src, (size_t)n);
  }
}

/* Copies elements [t0, t0 + n) of the group's shape, broadcast from value v's tensor, into buf. */
static void gather(const fused_job *job, int v, int64_t t0, int64_t n, char *buf) {
  const int64_t *stride = job->v[v].stride;
  size_t elem = job->v[v].elem;
  int last = job->rank - 1;
  int64_t idx[MF_MAX_RANK], off = 0, rest = t0;
  for (int d = last; d >= 0; d--) {
    idx[d] = rest % job->dims[d];
    rest /= job->dims[d];
    off += idx[d] * stride[d];
  }
  while (n > 0) {
    int64_t run = job->dims[last] - idx[last];
    if (run > n) run = n;
    const char *src = job->v[v].data + off * (int64_t)elem;
    if (stride[last]) memcpy(buf, src, (size_t)run * elem);
    else repeat_element(buf, src, elem, run);
    buf += run * (int64_t)elem;
    n -= run;
    off += run * stride[last];
    idx[last] += run;
    for (int d = last; d > 0 && idx[d] == job->dims[d]; d--) {  /* carry like an odometer */
      off -= idx[d] * stride[d];
      idx[d] = 0;
      idx[d - 1]++;
      off += stride[d - 1];
    }
  }
}

static void fused_chunk(void *arg, int64_t begin, int64_t end) {
  fused_job *job = arg;
  const mf_fused *f = job->f;
  _Alignas(64) char regs[FUSE_MAX_REGS][FUSE_TILE * 8];
  char *at[FUSE_MAX_VALUES];
  unsigned failed = 0;
  for (int64_t t0 = begin; t0 < end; t0 += FUSE_TILE) {
    int64_t n = end - t0 < FUSE_TILE ? end - t0 : FUSE_TILE;
    for (int v = 0; v < f->num_values; v++) {
      switch (job->v[v].place) {
      case AT_TENSOR: at[v] = job->v[v].data + t0 * (int64_t)job->v[v].elem; break;
      case AT_SCALAR: at[v] = job->v[v].data; break;
      case AT_GATHER: at[v] = regs[job->v[v].reg]; gather(job, v, t0, n, at[v]); break;
      case AT_REG: at[v] = regs[job->v[v].reg]; break;
      }
    }
    for (int j = 0; j < f->num_ops; j++) {
      const fused_instr *ins = &f->instrs[j];
      if (ins->loop.map) {
        ins->loop.map(at[ins->in[0]], at[ins->out], n, ins->loop.alpha);
        continue;
      }
      int a = ins->in[0], b = ins->in[1];
      if (ins->loop.zip(at[a], job->v[a].place != AT_SCALAR, at[b], job->v[b].place != AT_SCALAR, at[ins->out], n,
                        ins->loop.alpha))
        failed |= 1u << j;
    }
  }
  if (failed) atomic_fetch_or_explicit(&job->failed, failed, memory_order_relaxed);
}

static bool same_shape(const mf_shape *a, const mf_shape *b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

/* Instruction j's output shape from its inputs' (shapes, by value) into *out:
 * the static one when the inputs have their static shapes, else inferred
 * again. False, with s set, when inference fails. */
static bool instr_shape(const mf_step *st, const fused_instr *ins, const mf_fused *f, const mf_shape *shapes,
                        mf_shape *out, mf_status *s) {
  const mf_op *op = st->op;
  bool as_built = op->outputs_fully_defined;
  for (int k = 0; k < op->num_inputs && as_built; k++)
    as_built = same_shape(&shapes[ins->in[k]], &op->inputs[k].op->out_shapes[op->inputs[k].index]);
  if (as_built) {
    *out = op->out_shapes[0];
    return true;
  }
  mf_dtype in_dtypes[2];
  mf_shape in_shapes[2];
  mf_tensor *in_values[2] = {NULL, NULL};
  for (int k = 0; k < op->num_inputs; k++) {
    in_dtypes[k] = f->values[ins->in[k]].dtype;
    in_shapes[k] = shapes[ins->in[k]];
  }
  mf_dtype out_dtypes[MF_MAX_OUTPUTS_INLINE];
  mf_shape out_shapes[MF_MAX_OUTPUTS_INLINE];
  mf_infer_ctx ic = {
      .op_name = op->name, .def = op->def, .attrs = &op->attrs, .num_inputs = op->num_inputs,
      .in_dtypes = in_dtypes, .in_shapes = in_shapes, .in_values = in_values, .num_outputs = 1,
      .out_dtypes = out_dtypes, .out_shapes = out_shapes, .status = s, .runtime = true};
  if (op->def->infer(&ic) != MF_OK || !mf_ok(s) || !mf_shape_fully_defined(&out_shapes[0])) return false;
  *out = out_shapes[0];
  return true;
}

/* Whether the caller's buffer t (mf_callable_run_into) can take a value of this dtype and shape. */
static bool buffer_fits(const mf_tensor *t, mf_dtype dtype, const mf_shape *shape) {
  if (t->dtype != dtype || t->device != MF_CPU || t->rank != shape->rank) return false;
  for (int d = 0; d < t->rank; d++)
    if (t->dims[d] != shape->dims[d]) return false;
  return true;
}

/* Values' shapes and the group's: false when the group cannot run as one pass. */
static bool group_shapes(mf_run *r, const mf_step *steps, const mf_fused *f, mf_shape *shapes, mf_status *s) {
  for (int v = 0; v < f->num_values; v++) {
    const fused_value *fv = &f->values[v];
    mf_tensor *t = r->slots[fv->slot];
    if (fv->kind == VALUE_INPUT) {
      if (!t || t->device != MF_CPU) return false;
      shapes[v].rank = t->rank;  /* only the dims in use: mf_shape_of zeroes the rest */
      for (int d = 0; d < t->rank; d++) shapes[v].dims[d] = t->dims[d];
    }
  }
  for (int j = 0; j < f->num_ops; j++) {
    const fused_instr *ins = &f->instrs[j];
    if (!instr_shape(&steps[j], ins, f, shapes, &shapes[ins->out], s)) {
      mf_status_clear(s);  /* the steps run one by one and report it as unfused */
      return false;
    }
  }
  const mf_shape *shape = &shapes[f->instrs[f->num_ops - 1].out];
  for (int j = 0; j < f->num_ops; j++) {
    const fused_value *o = &f->values[f->instrs[j].out];
    if (!same_shape(&shapes[f->instrs[j].out], shape)) return false;
    mf_tensor *t = r->slots[o->slot];
    if (o->kind == VALUE_OUTPUT && t && !buffer_fits(t, o->dtype, shape)) return false;
  }
  return true;
}

/* Where instructions find each value: inputs in place, broadcast or gathered;
 * false when the tile buffers do not suffice. */
static bool place_values(const mf_fused *f, mf_run *r, const mf_shape *shapes, int64_t size, fused_job *job) {
  int regs = f->num_temps;
  for (int v = 0; v < f->num_values; v++) {
    const fused_value *fv = &f->values[v];
    job->v[v].elem = mf_dtype_size(fv->dtype);
    if (fv->kind == VALUE_TEMP) {
      job->v[v].place = AT_REG;
      job->v[v].reg = fv->reg;
      continue;
    }
    if (fv->kind == VALUE_OUTPUT) continue;  /* placed once allocated */
    mf_tensor *t = r->slots[fv->slot];
    job->v[v].data = t->data;
    if (t->size == size) job->v[v].place = AT_TENSOR;
    else if (t->size == 1) job->v[v].place = AT_SCALAR;
    else {
      if (regs == FUSE_MAX_REGS) return false;
      job->v[v].place = AT_GATHER;
      job->v[v].reg = regs++;
      const mf_shape *in = &shapes[v];
      int64_t step = 1;
      for (int d = job->rank - 1; d >= 0; d--) {
        int id = in->rank - job->rank + d;
        int64_t dim = id >= 0 ? in->dims[id] : 1;
        job->v[v].stride[d] = dim == 1 ? 0 : step;
        step *= dim;
      }
    }
  }
  return true;
}

/* Output value v's buffer: the caller's, an input's that dies here, the
 * plan's arena bytes, or one from the pool. */
static mf_tensor *output_buffer(mf_run *r, const mf_step *st, const mf_fused *f, int v, const mf_shape *shape,
                                mf_status *s) {
  const fused_value *o = &f->values[v];
  if (r->slots[o->slot]) return r->slots[o->slot];
  for (int k = 0; k < f->num_values; k++) {
    if (!(o->may_take >> k & 1u)) continue;
    mf_tensor *t = r->slots[f->values[k].slot];
    if (!t || mf_tensor_refcount(t) != 1 || !t->owned || !buffer_fits(t, o->dtype, shape)) continue;
    r->slots[f->values[k].slot] = NULL;  /* its slot hands the reference over */
    return t;
  }
  if (st->inplace_input >= 0)  /* planned over that input's bytes: not while an op keeps it */
    mf_pool_pin_if_held(r, r->slots[st->in_slots[st->inplace_input]], 2);
  mf_tensor *t = r->plan->slot_offset[o->slot] >= 0
                    ? mf_pool_arena_output(r, o->slot, o->dtype, shape->rank, shape->dims)
                    : NULL;
  return t ? t : mf_pool_alloc(r, st->device, o->dtype, shape->rank, shape->dims, s);
}

bool mf_fused_run(mf_run *r, const mf_step *first, const mf_op **failed_op, mf_status *s) {
  const mf_fused *f = first->fused;
  mf_shape shapes[FUSE_MAX_VALUES];
  if (!group_shapes(r, first, f, shapes, s)) return false;
  const mf_shape *shape = &shapes[f->instrs[f->num_ops - 1].out];
  int64_t size = mf_shape_num_elements(shape->rank, shape->dims);
  fused_job job;  /* filled field by field: zeroing all of it costs more than a small group's run */
  job.f = f;
  job.rank = shape->rank;
  memcpy(job.dims, shape->dims, (size_t)shape->rank * sizeof *shape->dims);
  atomic_init(&job.failed, 0);
  if (!place_values(f, r, shapes, size, &job)) return false;
  for (int j = 0; j < f->num_ops; j++) {
    int v = f->instrs[j].out;
    if (f->values[v].kind != VALUE_OUTPUT) continue;
    mf_tensor *t = output_buffer(r, &first[j], f, v, shape, s);
    if (!t) {
      *failed_op = first[j].op;
      return true;
    }
    r->slots[f->values[v].slot] = t;
    job.v[v].place = AT_TENSOR;
    job.v[v].data = t->data;
  }
  int64_t grain = FUSE_GRAIN / f->num_ops;
  if (grain < FUSE_TILE) grain = FUSE_TILE;
  if (size > grain) {
    mf_kernel_ctx ctx = {.status = s, .session = r->plan->sess, .run = r};
    mf_kernel_parallel_for(&ctx, size, grain, fused_chunk, &job);
  } else if (size > 0) {
    fused_chunk(&job, 0, size);  /* one chunk: on this thread, as mf_kernel_parallel_for would */
  }
  unsigned failed = atomic_load(&job.failed);
  for (int j = 0; j < f->num_ops; j++)
    if (failed >> j & 1u) {  /* the first step that failed, as when the steps run one by one */
      mf_status_set(s, MF_INVALID_ARGUMENT, "%s: %s", first[j].op->name, f->instrs[j].loop.fail_msg);
      *failed_op = first[j].op;
      return true;
    }
  for (int j = 0; j < f->num_ops; j++)
    for (int k = 0; k < first[j].num_dead; k++) {
      mf_pool_put(r, r->slots[first[j].dead[k]]);
      r->slots[first[j].dead[k]] = NULL;
    }
  return true;
}
