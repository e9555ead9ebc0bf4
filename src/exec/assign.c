/* assign.c — static buffer assignment, as XLA's buffer assignment and ggml's
 * graph allocator do it: every value whose size the plan knows gets an offset
 * in one arena per run state, chosen from the values' lifetimes over the
 * schedule, so values that are never alive at once share bytes.
 *
 * A value lives from the step that makes it to its last reader. An
 * elementwise op whose input dies at it writes its output over that input
 * (in place): the two share one buffer, whose life spans both. Buffers are
 * placed largest first at the lowest offset free for their whole life.
 *
 * Values outside the arena: constants, fed values, fetched values (they leave
 * the run), outputs of ops that set their outputs themselves or whose shapes
 * only the kernel knows, and values of unknown or empty shape. The executor
 * falls back to the run state's pool whenever the plan's promise fails at run
 * time (a shape larger than planned, a value some op kept: see pool.c). */
#include "exec/exec.h"
#include "exec/fuse.h"
#include "core/memory.h"
#include "core/shape.h"
#include "core/status.h"

#include <stdlib.h>

/* Plans with more buffers than this use the pool alone: placement is
 * quadratic in the number of buffers whose lives overlap. */
enum { MAX_ARENA_BUFFERS = 1 << 14 };

typedef struct buffer {
  size_t bytes;          /* what its values need, rounded up to MF_ALIGNMENT */
  size_t exact;          /* what its first value needs */
  int first, last;       /* the steps it is alive over */
  int64_t offset;
} buffer;

static size_t round_up(size_t n) { return (n + MF_ALIGNMENT - 1) / MF_ALIGNMENT * MF_ALIGNMENT; }

/* Ops that set their outputs themselves (Identity, Reshape's view, control
 * flow) may hand on their inputs' bytes: such an input lives as long as those
 * outputs (last: each slot's last reading step, extended so), and leaves the
 * run when they do (escapes; fetched values leave it). */
static void follow_handed_on(const mf_plan *p, int *last, bool *escapes) {
  for (int i = 0; i < p->num_slots; i++) escapes[i] = p->slot_fetched[i];
  for (int si = p->num_steps - 1; si >= 0; si--) {
    const mf_step *st = &p->steps[si];
    if (st->copy_from || !(st->op->def->flags & MF_OP_SETS_OUTPUTS)) continue;
    bool out_escapes = false;
    int out_last = si;
    for (int k = 0; k < st->op->num_outputs; k++) {
      out_escapes |= escapes[st->out_slot + k];
      if (last[st->out_slot + k] > out_last) out_last = last[st->out_slot + k];
    }
    for (int k = 0; k < st->op->num_inputs; k++) {
      int in = st->in_slots[k];
      if (in < 0) continue;
      escapes[in] |= out_escapes;
      if (out_last > last[in]) last[in] = out_last;
    }
  }
}

/* Bytes of output k of the step's op when the plan can give it arena space
 * (host memory), else 0. Copies between devices keep to the pool. */
static size_t arena_bytes_of(const mf_plan *p, const mf_step *st, int k, const bool *escapes) {
  const mf_op *op = st->op;
  if (st->copy_from || !p->slot_devices[st->out_slot + k]->host) return 0;
  if ((op->def->flags & (MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS)) || st->has_fed_output ||
      escapes[st->out_slot + k] || !mf_shape_fully_defined(&op->out_shapes[k]))
    return 0;
  int64_t n = mf_shape_num_elements(op->out_shapes[k].rank, op->out_shapes[k].dims);
  return n > 0 ? (size_t)n * mf_dtype_size(op->out_dtypes[k]) : 0;
}

/* The input an elementwise step can write its output over: read once, dying
 * here (its buffer's life ends with the step's span, span_last), in the arena
 * with exactly the output's dtype and size; else -1. */
static int inplace_input(const mf_step *st, const int *buffer_of, const buffer *bufs,
                         int span_last) {
  const mf_op *op = st->op;
  if (st->copy_from || !(op->def->flags & MF_OP_FORWARDS_INPUT) || buffer_of[st->out_slot] < 0) return -1;
  size_t out_bytes = bufs[buffer_of[st->out_slot]].exact;
  for (int k = 0; k < op->num_inputs && k < 32; k++) {
    int slot = st->in_slots[k];
    if (!(st->dying & (1u << k)) || slot < 0 || buffer_of[slot] < 0) continue;
    const buffer *b = &bufs[buffer_of[slot]];
    mf_output in = op->inputs[k];
    if (b->last != span_last || b->exact != out_bytes || in.op->out_dtypes[in.index] != op->out_dtypes[0])
      continue;
    bool once = true;
    for (int j = 0; j < op->num_inputs; j++) once &= j == k || st->in_slots[j] != slot;
    if (once) return k;
  }
  return -1;
}

static int by_size_desc(const void *a, const void *b) {
  const buffer *x = *(buffer *const *)a, *y = *(buffer *const *)b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return (x->first > y->first) - (x->first < y->first);
}

static int by_offset(const void *a, const void *b) {
  const buffer *x = *(buffer *const *)a, *y = *(buffer *const *)b;
  return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Offsets for bufs (largest first, lowest free offset); the arena's size. */
static bool place(buffer *bufs, int n, size_t *arena_bytes) {
  buffer **order = NULL, **live = NULL;
  if (!PLAN_ALLOC(order, n) || !PLAN_ALLOC(live, n)) {
    mf_free(order);
    return false;
  }
  for (int i = 0; i < n; i++) order[i] = &bufs[i];
  qsort(order, (size_t)n, sizeof *order, by_size_desc);
  size_t top = 0;
  for (int i = 0; i < n; i++) {
    buffer *b = order[i];
    int num_live = 0;   /* placed buffers alive at some step b is */
    for (int j = 0; j < i; j++)
      if (order[j]->first <= b->last && b->first <= order[j]->last) live[num_live++] = order[j];
    qsort(live, (size_t)num_live, sizeof *live, by_offset);
    size_t offset = 0;
    for (int j = 0; j < num_live; j++) {
      if ((size_t)live[j]->offset >= offset + b->bytes) break;  /* b fits in the gap before it */
      size_t end = (size_t)live[j]->offset + live[j]->bytes;
      if (end > offset) offset = end;
    }
    b->offset = (int64_t)offset;
    if (offset + b->bytes > top) top = offset + b->bytes;
  }
  *arena_bytes = top;
  mf_free(order);
  mf_free(live);
  return true;
}

mf_code mf_plan_assign_buffers(mf_plan *p, int *last_use, mf_status *s) {
  int *buffer_of = NULL, *span_first = NULL, *span_last = NULL;
  buffer *bufs = NULL;
  bool *escapes = NULL;
  int n = 0;
  if (!PLAN_ALLOC(p->slot_offset, p->num_slots) || !PLAN_ALLOC(buffer_of, p->num_slots) ||
      !PLAN_ALLOC(bufs, p->num_slots) || !PLAN_ALLOC(escapes, p->num_slots) ||
      !PLAN_ALLOC(span_first, p->num_steps) || !PLAN_ALLOC(span_last, p->num_steps))
    goto oom;
  follow_handed_on(p, last_use, escapes);
  /* A fusion group runs its steps at once, tile by tile and split over
   * threads: a value it makes or reads is alive over the whole group, or one
   * chunk would write a value's bytes over those of another value that
   * another chunk still reads (a float64 input dying at the group beneath its
   * float32 cast). Each step's span is its group's steps (its own, unfused). */
  for (int si = 0; si < p->num_steps;) {
    int len = p->steps[si].fused ? mf_fused_num_steps(p->steps[si].fused) : 1;
    for (int j = si; j < si + len; j++) {
      span_first[j] = si;
      span_last[j] = si + len - 1;
    }
    si += len;
  }
  for (int i = 0; i < p->num_slots; i++) {
    p->slot_offset[i] = -1;
    buffer_of[i] = -1;
  }
  const mf_step *group = NULL;  /* the fusion group step si belongs to: its first step */
  for (int si = 0; si < p->num_steps; si++) {
    mf_step *st = &p->steps[si];
    if (st->fused) group = st;
    else if (group && si - (int)(group - p->steps) >= mf_fused_num_steps(group->fused)) group = NULL;
    /* A value a group keeps in tiles needs bytes only when the group's steps
     * run one by one: the pool serves that rare run. */
    bool in_tiles = group && mf_fused_in_tiles(group->fused, (int)(st - group));
    for (int k = 0; k < st->op->num_outputs; k++) {
      size_t bytes = in_tiles ? 0 : arena_bytes_of(p, st, k, escapes);
      int slot = st->out_slot + k;
      if (!bytes) continue;
      bufs[n] = (buffer){round_up(bytes), bytes, span_first[si], span_last[last_use[slot] > si ? last_use[slot] : si],
                         -1};
      buffer_of[slot] = n++;
    }
    st->inplace_input = inplace_input(st, buffer_of, bufs, span_last[si]);
    if (st->inplace_input >= 0) {  /* the output's buffer is the input's, living on */
      int out = st->out_slot, in = buffer_of[st->in_slots[st->inplace_input]];
      bufs[in].last = bufs[buffer_of[out]].last;
      bufs[buffer_of[out]].bytes = 0;  /* unused: no space */
      buffer_of[out] = in;
    }
  }
  if (n > MAX_ARENA_BUFFERS) {
    for (int si = 0; si < p->num_steps; si++) p->steps[si].inplace_input = -1;
    n = 0;
  }
  if (!place(bufs, n, &p->arena_bytes)) goto oom;
  for (int i = 0; i < p->num_slots && n; i++)
    if (buffer_of[i] >= 0) p->slot_offset[i] = bufs[buffer_of[i]].offset;
  mf_free(buffer_of);
  mf_free(span_first);
  mf_free(span_last);
  mf_free(bufs);
  mf_free(escapes);
  return MF_OK;
oom:
  mf_free(buffer_of);
  mf_free(span_first);
  mf_free(span_last);
  mf_free(bufs);
  mf_free(escapes);
  return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory assigning a plan's buffers");
}
