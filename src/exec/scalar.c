/* scalar.c — function plans over one-element values (a loop counter's
 * arithmetic, a loop's condition) as register programs (kernel_api.h).
 *
 * A plan qualifies when every step is an elementwise op (its element loop,
 * fuse.h) or an Identity on the host, over values whose static shapes are
 * fully defined with one element, and its constants are such values too.
 * Registers are the plan's slots: feeds and constants sit in theirs, and an
 * instruction per step calls the op's own element loop on one element, so a
 * value is computed by the same loop as in the plan's run and comes out bit
 * for bit the same; only the buffers, the pool and the per-step bookkeeping
 * are gone. */
#include "exec/fuse.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "core/shape.h"
#include "core/status.h"
#include "core/tensor.h"

#include <string.h>

typedef struct scalar_instr {
  mf_element_loop loop;  /* map and zip both NULL: an Identity, a move */
  int in[2];             /* registers; in[1] is -1 for a map or a move */
  int out;
  const mf_op *op;       /* named in errors */
} scalar_instr;

typedef struct scalar_port {
  int reg;
  mf_dtype dtype;
  mf_shape shape;        /* as built: fully defined, one element */
} scalar_port;

struct mf_scalar_program {
  int num_instrs, num_consts, nfeeds, nfetches;
  scalar_instr *instrs;
  int *const_regs;
  mf_scalar *const_values;
  scalar_port *feeds, *fetches;
};

void mf_scalar_program_free(mf_scalar_program *sp) {
  if (!sp) return;
  mf_free(sp->instrs);
  mf_free(sp->const_regs);
  mf_free(sp->const_values);
  mf_free(sp->feeds);
  mf_free(sp->fetches);
  mf_free(sp);
}

/* Whether a value of this dtype and static shape is one element a register holds. */
static bool one_element(mf_dtype dtype, const mf_shape *shape) {
  return dtype != MF_STRING && mf_dtype_size(dtype) > 0 && mf_dtype_size(dtype) <= sizeof(mf_scalar) &&
         mf_shape_fully_defined(shape) && mf_shape_num_elements(shape->rank, shape->dims) == 1;
}

static bool port_of(const mf_plan *p, mf_output o, int slot, scalar_port *port) {
  *port = (scalar_port){.reg = slot, .dtype = mf_port_dtype(o), .shape = *mf_port_shape(o)};
  return slot >= 0 && slot < p->num_slots && one_element(port->dtype, &port->shape);
}

/* The instruction of step st, false when it has none. */
static bool instr_of(const mf_plan *p, const mf_step *st, scalar_instr *ins) {
  const mf_op *op = st->op;
  if (st->copy_from || st->fused || !st->device->host || op->num_outputs != 1 ||
      !one_element(op->out_dtypes[0], &op->out_shapes[0]))
    return false;
  *ins = (scalar_instr){.in = {-1, -1}, .out = st->out_slot, .op = op};
  if (!mf_step_element_loop(st, &ins->loop)) {
    if (strcmp(op->def->name, "Identity") || op->num_inputs != 1 || st->has_fed_output || st->in_slots[0] < 0)
      return false;
  }
  for (int k = 0; k < op->num_inputs; k++) {
    scalar_port in;
    if (!port_of(p, op->inputs[k], st->in_slots[k], &in)) return false;
    ins->in[k] = in.reg;
  }
  return true;
}

mf_code mf_plan_scalar(mf_plan *p, mf_status *s) {
  if (p->num_slots > MF_SCALAR_MAX_REGS) return MF_OK;
  for (int i = 0; i < p->nfeeds; i++)
    if (!p->feed_devices[i]->host) return MF_OK;
  for (int i = 0; i < p->num_slots; i++) {
    const mf_tensor *c = p->const_values[i];
    if (c && (c->size != 1 || c->dtype == MF_STRING || mf_dtype_size(c->dtype) > sizeof(mf_scalar) ||
              c->device != MF_CPU || c->device_index != 0))
      return MF_OK;
  }
  mf_scalar_program *sp = mf_calloc(1, sizeof *sp);
  if (!sp || !PLAN_ALLOC(sp->instrs, p->num_steps) || !PLAN_ALLOC(sp->const_regs, p->num_slots) ||
      !PLAN_ALLOC(sp->const_values, p->num_slots) || !PLAN_ALLOC(sp->feeds, p->nfeeds) ||
      !PLAN_ALLOC(sp->fetches, p->nfetches)) {
    mf_scalar_program_free(sp);
    return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory building a plan");
  }
  sp->nfeeds = p->nfeeds;
  sp->nfetches = p->nfetches;
  bool ok = true;
  for (int i = 0; i < p->num_steps && ok; i++) ok = instr_of(p, &p->steps[i], &sp->instrs[sp->num_instrs++]);
  for (int i = 0; i < p->nfeeds && ok; i++) ok = port_of(p, p->feeds[i], p->feed_slots[i], &sp->feeds[i]);
  for (int i = 0; i < p->nfetches && ok; i++) ok = port_of(p, p->fetches[i], p->fetch_slots[i], &sp->fetches[i]);
  for (int i = 0; i < p->num_slots && ok; i++) {
    const mf_tensor *c = p->const_values[i];
    if (!c) continue;
    sp->const_regs[sp->num_consts] = i;
    memcpy(&sp->const_values[sp->num_consts++], c->data, mf_dtype_size(c->dtype));
  }
  if (ok) p->scalar = sp;
  else mf_scalar_program_free(sp);
  return MF_OK;
}

const mf_scalar_program *mf_function_scalar(const mf_kernel_ctx *ctx, const mf_callable *c) {
  return ctx->device->host ? c->plan.scalar : NULL;
}

int mf_scalar_feed_reg(const mf_scalar_program *sp, int i) { return sp->feeds[i].reg; }
int mf_scalar_fetch_reg(const mf_scalar_program *sp, int i) { return sp->fetches[i].reg; }

bool mf_scalar_fits(const mf_scalar_program *sp, bool fetch, int i, const mf_tensor *t) {
  const scalar_port *port = fetch ? &sp->fetches[i] : &sp->feeds[i];
  if (t->dtype != port->dtype || t->rank != port->shape.rank || t->device != MF_CPU || t->device_index != 0 ||
      t->handle)
    return false;
  for (int d = 0; d < t->rank; d++)
    if (t->dims[d] != port->shape.dims[d]) return false;
  return true;
}

void mf_scalar_begin(const mf_scalar_program *sp, mf_scalar *regs) {
  for (int i = 0; i < sp->num_consts; i++) regs[sp->const_regs[i]] = sp->const_values[i];
}

mf_code mf_scalar_run(mf_kernel_ctx *ctx, const mf_scalar_program *sp, mf_scalar *regs) {
  for (int j = 0; j < sp->num_instrs; j++) {
    const scalar_instr *ins = &sp->instrs[j];
    if (ins->loop.map) {
      ins->loop.map(&regs[ins->in[0]], &regs[ins->out], 1, ins->loop.alpha);
    } else if (ins->loop.zip) {
      if (ins->loop.zip(&regs[ins->in[0]], false, &regs[ins->in[1]], false, &regs[ins->out], 1, ins->loop.alpha)) {
        mf_status_set(ctx->status, MF_INVALID_ARGUMENT, "%s: %s", ins->op->name, ins->loop.fail_msg);
        return mf_node_context(ctx->status, ins->op);
      }
    } else {
      regs[ins->out] = regs[ins->in[0]];
    }
  }
  return MF_OK;
}

mf_tensor *mf_scalar_output(mf_kernel_ctx *ctx, const mf_scalar_program *sp, const mf_scalar *regs, int i, int k) {
  const scalar_port *port = &sp->fetches[i];
  mf_tensor *t = mf_kernel_alloc_output(ctx, k, port->dtype, port->shape.rank, port->shape.dims);
  if (t) memcpy(t->data, &regs[port->reg], mf_dtype_size(port->dtype));
  return t;
}
