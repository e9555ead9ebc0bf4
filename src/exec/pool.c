/* pool.c — a run state's buffer pool: dead values are kept and handed to
 * later outputs of a fitting size, in this run and the next ones. */
#include "exec/exec.h"
#include "core/memory.h"
#include "core/tensor.h"

void mf_pool_put(mf_run *r, mf_tensor *t) {
  if (!t) return;
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

mf_tensor *mf_pool_alloc(mf_run *r, mf_device *d, mf_dtype dtype, int rank, const int64_t *dims, mf_status *s) {
  int64_t n = mf_shape_num_elements(rank, dims);
  size_t bytes = (size_t)(n > 0 ? n : 0) * mf_dtype_size(dtype);
  int best = -1;
  for (int i = 0; i < r->pool_len; i++) {
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
