/* gpu.c — what the GPU glue of every family shares (gpu.h). */
#include "ops/gpu/gpu.h"
#include "graph/graph.h"

mf_code mf_cuda_fail(mf_kernel_ctx *ctx, const mf_cuda_error *e) {
  return mf_status_set(ctx->status, MF_INTERNAL, "%s (%s) on %s: %s", ctx->op->name, ctx->op->def->name,
                       ctx->device->short_name, e->msg);
}
