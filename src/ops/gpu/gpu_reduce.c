/* gpu_reduce.c — Sum, Mean, Prod, Max, Min, ArgMax, ArgMin and SumToShape on the
 * GPU (src/cuda/reduce.cu), over the geometry of the CPU driver (ops/reduce.h). */
#include "ops/gpu/gpu.h"
#include "device/cuda/reduce_api.h"
#include "core/status.h"
#include "graph/graph.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"
#include "ops/reduce.h"

_Static_assert((int)MF_CUDA_REDUCE_MAX_DIMS == (int)MF_REDUCE_MAX_DIMS, "the backend's geometry holds the driver's");

static mf_code reduce_masked(mf_kernel_ctx *ctx, mf_cuda_reduce_op op, const mf_tensor *x, const bool *mask,
                             mf_tensor *out) {
  const mf_cuda_reduce_api *api = mf_cuda_table(ctx, "mf_cuda_reduce_v1");
  if (!api) return ctx->status->code;
  mf_reduce_geom g;
  mf_reduce_geometry(x->rank, x->dims, mask, &g);
  mf_cuda_reduce_geom cg = {.out_size = g.out_size, .count = g.count, .inner = g.inner, .run = g.run,
                            .nk = g.nk, .nr = g.nr};
  for (int i = 0; i < g.nk; i++) cg.kdims[i] = g.kdims[i], cg.kstrides[i] = g.kstrides[i];
  for (int i = 0; i < g.nr; i++) cg.rdims[i] = g.rdims[i], cg.rstrides[i] = g.rstrides[i];
  mf_cuda_device *dev = mf_cuda_dev(ctx);
  int64_t scratch_bytes = (int64_t)api->scratch_bytes(dev, &cg);
  mf_tensor *scratch = NULL;
  if (scratch_bytes && !(scratch = mf_kernel_new_tensor(ctx, MF_UINT8, 1, &scratch_bytes))) return ctx->status->code;
  mf_cuda_error e;
  /* The scratch goes back to the allocator at once: later users of its
   * memory are queued on the same stream, after this reduction. */
  int rc = api->reduce(dev, op, x->dtype, &cg, x->data, out->data, scratch ? scratch->data : NULL, &e);
  mf_tensor_release(scratch);
  return rc ? mf_cuda_fail(ctx, &e) : MF_OK;
}

mf_code mf_gpu_reduce_sum(mf_kernel_ctx *ctx, const mf_tensor *x, const bool *mask, mf_tensor *out) {
  return reduce_masked(ctx, MF_CUDA_REDUCE_SUM, x, mask, out);
}

static mf_code reduce_op(mf_kernel_ctx *ctx, mf_cuda_reduce_op op) {
  const mf_tensor *in = ctx->inputs[0];
  bool mask[MF_MAX_RANK];
  if (mf_reduce_mask(ctx->op->name, ctx->attrs, in->rank, mask, ctx->status)) return ctx->status->code;
  return reduce_masked(ctx, op, in, mask, ctx->outputs[0]);
}
mf_code mf_gpu_reduce_Sum(mf_kernel_ctx *ctx) { return reduce_op(ctx, MF_CUDA_REDUCE_SUM); }
mf_code mf_gpu_reduce_Mean(mf_kernel_ctx *ctx) { return reduce_op(ctx, MF_CUDA_REDUCE_MEAN); }
mf_code mf_gpu_reduce_Prod(mf_kernel_ctx *ctx) { return reduce_op(ctx, MF_CUDA_REDUCE_PROD); }
mf_code mf_gpu_reduce_Max(mf_kernel_ctx *ctx) { return reduce_op(ctx, MF_CUDA_REDUCE_MAX); }
mf_code mf_gpu_reduce_Min(mf_kernel_ctx *ctx) { return reduce_op(ctx, MF_CUDA_REDUCE_MIN); }

mf_code mf_gpu_sum_to_shape(mf_kernel_ctx *ctx) { return mf_sum_to_shape(ctx, mf_gpu_reduce_sum); }

static mf_code arg_op(mf_kernel_ctx *ctx, bool max) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  int axis;
  if (mf_normalize_axis(ctx->op->name, mf_attr_int(ctx->attrs, "axis", 0), in->rank, &axis, ctx->status))
    return ctx->status->code;
  const mf_cuda_reduce_api *api = mf_cuda_table(ctx, "mf_cuda_reduce_v1");
  if (!api) return ctx->status->code;
  int64_t outer = mf_dims_product(in->dims, 0, axis), n = in->dims[axis];
  int64_t inner = mf_dims_product(in->dims, axis + 1, in->rank);
  mf_cuda_error e;
  if (api->arg(mf_cuda_dev(ctx), max, in->dtype, in->data, outer, n, inner, out->data, out->dtype == MF_INT64, &e))
    return mf_cuda_fail(ctx, &e);
  return MF_OK;
}
mf_code mf_gpu_argmax(mf_kernel_ctx *ctx) { return arg_op(ctx, true); }
mf_code mf_gpu_argmin(mf_kernel_ctx *ctx) { return arg_op(ctx, false); }
