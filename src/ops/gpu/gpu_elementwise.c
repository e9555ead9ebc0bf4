/* gpu_elementwise.c — the GPU kernels of ops/math.c's elementwise ops and
 * Cast: they run the CUDA backend's kernels (src/cuda/elementwise.cu), which
 * are generated from the same op table (kernels/element_ops.h). */
#include "ops/gpu/gpu.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "device/cuda/elementwise_api.h"
#include "graph/graph.h"
#include "kernels/elementwise.h"
#include "kernels/helpers.h"

#include <stdatomic.h>
#include <string.h>

_Static_assert((int)MF_CUDA_MAX_RANK == (int)MF_MAX_RANK, "the backend's broadcast nest has moonflow's ranks");

/* The backend's table: present whenever a GPU kernel runs (a GPU device exists only with a backend). */
static const mf_cuda_elementwise_api *table(void) {
  static _Atomic(const mf_cuda_elementwise_api *) cached;
  const mf_cuda_elementwise_api *t = atomic_load_explicit(&cached, memory_order_acquire);
  if (!t) {
    t = mf_cuda_symbol("mf_cuda_elementwise_v1");
    atomic_store_explicit(&cached, t, memory_order_release);
  }
  return t;
}

/* NULL with ctx->status set when the backend lacks the elementwise table (a backend of another build). */
static const mf_cuda_elementwise_api *table_of(mf_kernel_ctx *ctx) {
  const mf_cuda_elementwise_api *t = table();
  if (!t) mf_status_set(ctx->status, MF_INTERNAL, "%s (%s): the CUDA backend has no elementwise kernels",
                        ctx->op->name, ctx->op->def->name);
  return t;
}

mf_code mf_gpu_unary(mf_kernel_ctx *ctx, int op) {
  const mf_cuda_elementwise_api *t = table_of(ctx);
  if (!t) return ctx->status->code;
  const mf_tensor *x = ctx->inputs[0];
  mf_cuda_error e;
  if (t->unary(mf_cuda_dev(ctx), op, x->dtype, x->data, ctx->outputs[0]->data, x->size, &e))
    return mf_cuda_fail(ctx, &e);
  return MF_OK;
}

mf_code mf_gpu_binary(mf_kernel_ctx *ctx, int op, const char *fail_msg) {
  const mf_cuda_elementwise_api *t = table_of(ctx);
  if (!t) return ctx->status->code;
  const mf_tensor *const in[2] = {ctx->inputs[0], ctx->inputs[1]};
  mf_tensor *z = ctx->outputs[0];
  if (z->size == 0) return MF_OK;
  mf_bcast_nest nest;
  mf_bcast_nest_of(in, z, &nest);
  mf_cuda_bcast shape = {.rank = nest.rank};
  memcpy(shape.dims, nest.dims, sizeof shape.dims);
  memcpy(shape.stride, nest.stride, sizeof shape.stride);
  /* Only integer elements can fail (division by zero, negative powers):
   * checking makes the call wait for the GPU, so float ops never do. */
  int failed = 0;
  bool check = fail_msg && mf_dtype_is_integer(in[0]->dtype);
  mf_cuda_error e;
  if (t->binary(mf_cuda_dev(ctx), op, in[0]->dtype, in[0]->data, in[1]->data, z->data, z->size, &shape,
                check ? &failed : NULL, &e))
    return mf_cuda_fail(ctx, &e);
  if (failed) return MF_INVALID(ctx->status, "%s: %s", ctx->op->name, fail_msg);
  return MF_OK;
}

mf_code mf_gpu_cast(mf_kernel_ctx *ctx) {
  const mf_cuda_elementwise_api *t = table_of(ctx);
  if (!t) return ctx->status->code;
  const mf_tensor *x = ctx->inputs[0];
  mf_tensor *y = ctx->outputs[0];
  mf_cuda_error e;
  if (t->cast(mf_cuda_dev(ctx), x->dtype, y->dtype, x->data, y->data, x->size, &e)) return mf_cuda_fail(ctx, &e);
  return MF_OK;
}
