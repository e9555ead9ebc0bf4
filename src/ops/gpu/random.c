/* gpu/random.c — the random ops on the GPU (issue 14): the host kernels'
 * key and run counter (ops/random.h), the fill on the device
 * (src/cuda/random.cu, mf_cuda_random_v1), so the GPU draws the numbers
 * the CPU kernels draw for the same seeds and run. */
#include "ops/gpu/gpu.h"
#include "ops/random.h"
#include "device/cuda/random_api.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"

static const mf_cuda_random_api *random_api(mf_kernel_ctx *ctx) {
  const mf_cuda_random_api *api = mf_cuda_symbol("mf_cuda_random_v1");
  if (!api)
    mf_status_set(ctx->status, MF_INTERNAL, "%s (%s): the CUDA backend has no random table (mf_cuda_random_v1)",
                  ctx->op->name, ctx->op->def->name);
  return api;
}

static mf_code fill_gpu(mf_kernel_ctx *ctx, mf_cuda_random_kind kind) {
  const mf_cuda_random_api *api = random_api(ctx);
  uint32_t key[2];
  uint64_t run;
  if (!api || mf_random_next_run(ctx, key, &run)) return ctx->status->code;
  mf_tensor *out = ctx->outputs[0];
  mf_cuda_error e;
  if (api->fill(mf_cuda_dev(ctx), kind, out->dtype == MF_FLOAT64, out->data, out->size, key[0], key[1], run, &e))
    return mf_cuda_fail(ctx, &e);
  return MF_OK;
}

mf_code mf_gpu_random_uniform(mf_kernel_ctx *ctx) { return fill_gpu(ctx, MF_CUDA_RANDOM_UNIFORM); }
mf_code mf_gpu_random_normal(mf_kernel_ctx *ctx) { return fill_gpu(ctx, MF_CUDA_RANDOM_NORMAL); }
mf_code mf_gpu_truncated_normal(mf_kernel_ctx *ctx) { return fill_gpu(ctx, MF_CUDA_RANDOM_TRUNCATED); }

mf_code mf_gpu_random_uniform_int(mf_kernel_ctx *ctx) {
  const mf_cuda_random_api *api = random_api(ctx);
  uint32_t key[2];
  uint64_t run, range, reject_below;
  int64_t lo;
  if (!api || mf_random_next_run(ctx, key, &run) || mf_random_int_bounds(ctx, &lo, &range, &reject_below))
    return ctx->status->code;
  mf_tensor *out = ctx->outputs[0];
  mf_cuda_error e;
  if (api->uniform_int(mf_cuda_dev(ctx), out->dtype == MF_INT64, out->data, out->size, lo, range, reject_below,
                       key[0], key[1], run, &e))
    return mf_cuda_fail(ctx, &e);
  return MF_OK;
}
