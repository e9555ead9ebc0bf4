/* gpu_table.c — a backend table for a GPU kernel (gpu.h, cuda-blas block). */
#include "ops/gpu/gpu.h"
#include "core/status.h"
#include "graph/graph.h"

const void *mf_cuda_table(mf_kernel_ctx *ctx, const char *name) {
  const void *t = mf_cuda_symbol(name);
  if (!t)
    mf_status_set(ctx->status, MF_INTERNAL, "%s (%s) on %s: the CUDA backend has no table %s (%s)", ctx->op->name,
                  ctx->op->def->name, ctx->device->short_name, name, mf_cuda_status());
  return t;
}
