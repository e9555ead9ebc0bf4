/* pool.c — a run state's buffers: the arena bytes the plan assigned
 * (assign.c), and the pool, where dead values that are not in the arena are
 * kept and handed to later outputs of a fitting size, in this run and the
 * next ones. */
#include "exec/exec.h"
#include "core/memory.h"
#include "core/tensor.h"

void mf_pool_pin_if_held(mf_run *r, const mf_tensor *t, int references) {
  if (!t || !r->arena || t->base != r->arena || mf_tensor_refcount(t) <= references) return;
  size_t lo = (size_t)((const char *)t->data - (const char *)r->arena->data);
  r->pins[r->num_pins][0] = lo;
  r->pins[r->num_pins++][1] = lo + mf_tensor_nbytes(t);
}

void mf_pool_put(mf_run *r, mf_tensor *t) {
  if (!t) return;
  if (r->arena && t->base == r->arena) {
    /* The run state keeps its own reference; another one left means some op
     * kept the value (a TensorArray, a later reader through Identity): its
     * bytes stay untouched for the rest of the run. */
    mf_tensor_release(t);
    mf_pool_pin_if_held(r, t, 1);
    return;
  }
  /* A dying view (Reshape, Squeeze) hands its base on: the base is reusable
   * when the view held the last other reference to it. */
  while (t->base && mf_tensor_refcount(t) == 1) {
    mf_tensor *base = mf_tensor_retain(t->base);
    mf_tensor_release(t);
    t = base;
  }
  bool reusable = mf_tensor_refcount(t) == 1 && t->owned;
  if (reusable && r->pool_len < r->pool_cap) r->pool[r->pool_len++] = t;
  else mf_tensor_release(t);
}

mf_tensor *mf_pool_arena_output(mf_run *r, int slot, mf_dtype dtype, int rank, const int64_t *dims) {
  const mf_plan *p = r->plan;
  mf_tensor *t = r->views[slot];
  if (!t || mf_tensor_refcount(t) != 1) return NULL;
  int64_t n = mf_shape_num_elements(rank, dims);
  size_t lo = (size_t)p->slot_offset[slot], hi = lo + (size_t)n * mf_dtype_size(dtype);
  if (n < 0 || hi > p->arena_bytes || hi - lo > t->capacity) return NULL;
  for (int i = 0; i < r->num_pins; i++)
    if (lo < r->pins[i][1] && r->pins[i][0] < hi) return NULL;
  t->dtype = dtype;
  t->rank = rank;
  for (int d = 0; d < rank; d++) t->dims[d] = dims[d];
  t->size = n;
  return mf_tensor_retain(t);
}

mf_tensor *mf_pool_alloc(mf_run *r, mf_device *d, mf_dtype dtype, int rank, const int64_t *dims, mf_status *s) {
  int64_t n = mf_shape_num_elements(rank, dims);
  size_t bytes = (size_t)(n > 0 ? n : 0) * mf_dtype_size(dtype);
  int best = -1;
  /* A string value is built whole (core/tstring.h): never into a used buffer. */
  for (int i = 0; i < r->pool_len && dtype != MF_STRING; i++) {
    size_t cap = r->pool[i]->capacity;
    if (cap >= bytes && cap <= 2 * bytes + MF_ALIGNMENT && r->pool[i]->device == d->type &&
        r->pool[i]->device_index == d->index &&
        (best < 0 || cap < r->pool[best]->capacity))
      best = i;
  }
  if (best >= 0) {
    mf_tensor *t = r->pool[best];
    r->pool[best] = r->pool[--r->pool_len];
    mf_tensor_reshape_owned(t, dtype, rank, dims);
    return t;
  }
  return mf_allocator_tensor(d->allocator, dtype, rank, dims, s);
}

mf_tensor *mf_kernel_alloc_output(mf_kernel_ctx *ctx, int i, mf_dtype dtype, int rank,
                                  const int64_t *dims) {
  mf_tensor *t = mf_pool_alloc(ctx->run, ctx->device, dtype, rank, dims, ctx->status);
  if (t) {
    mf_tensor_release(ctx->outputs[i]);
    ctx->outputs[i] = t;
  }
  return t;
}

mf_tensor *mf_kernel_new_tensor(mf_kernel_ctx *ctx, mf_dtype dtype, int rank, const int64_t *dims) {
  return mf_allocator_tensor(ctx->device->allocator, dtype, rank, dims, ctx->status);
}
