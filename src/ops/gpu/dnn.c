/* gpu/dnn.c — convolutions and pooling on the GPU (issue 14): the
 * geometry nn.c computes (ops/nn.h), the work in the backend's dnn table
 * (src/cuda/dnn.cu, mf_cuda_dnn_v1): Conv2D and its backprops through cuDNN
 * (float32), pooling and its gradients with kernels giving nn.c's results to
 * the bit (float32, float64). */
#include "ops/gpu/gpu.h"
#include "ops/nn.h"
#include "device/cuda/dnn_api.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "exec/kernel_api.h"

static const mf_cuda_dnn_api *dnn_api(mf_kernel_ctx *ctx) {
  const mf_cuda_dnn_api *api = mf_cuda_symbol("mf_cuda_dnn_v1");
  if (!api)
    mf_status_set(ctx->status, MF_INTERNAL, "%s (%s): the CUDA backend has no dnn table (mf_cuda_dnn_v1)",
                  ctx->op->name, ctx->op->def->name);
  return api;
}

/* The backend's window: nn.c's, with the padding after that TensorFlow's
 * SAME adds (the total (oh - 1) * stride + dilated window - input, when
 * positive, less the padding before; none for VALID). */
static int64_t pad_after(int64_t out, int64_t stride, int64_t k, int64_t dil, int64_t in, int64_t before) {
  const int64_t need = (out - 1) * stride + (k - 1) * dil + 1 - in;
  return need > before ? need - before : 0;
}
static mf_cuda_window cuda_window(const mf_window_geom *g) {
  return (mf_cuda_window){.n = g->n, .h = g->h, .w = g->w, .c = g->c, .kh = g->kh, .kw = g->kw, .oc = g->oc,
                          .oh = g->oh, .ow = g->ow, .sh = g->sh, .sw = g->sw, .dh = g->dh, .dw = g->dw,
                          .pt = g->pt, .pl = g->pl, .pb = pad_after(g->oh, g->sh, g->kh, g->dh, g->h, g->pt),
                          .pr = pad_after(g->ow, g->sw, g->kw, g->dw, g->w, g->pl)};
}

/* A convolution of kind over input (dims of) x and filter (dims of) f, from
 * operands a and b into output 0, with its workspace from the device's memory. */
static mf_code conv_gpu(mf_kernel_ctx *ctx, mf_cuda_conv_kind kind, const mf_tensor *x, const mf_tensor *f,
                        const mf_tensor *a, const mf_tensor *b) {
  const mf_cuda_dnn_api *api = dnn_api(ctx);
  mf_window_geom g;
  if (!api || mf_conv_geom(ctx, x, f, &g)) return ctx->status->code;
  const mf_cuda_window w = cuda_window(&g);
  mf_cuda_device *dev = mf_cuda_dev(ctx);
  mf_cuda_error e;
  size_t bytes;
  if (api->conv2d_workspace(dev, kind, &w, &bytes, &e)) return mf_cuda_fail(ctx, &e);
  mf_tensor *ws = NULL;
  if (bytes) {
    const int64_t words = (int64_t)((bytes + sizeof(float) - 1) / sizeof(float));
    if (!(ws = mf_kernel_new_tensor(ctx, MF_FLOAT32, 1, &words))) return ctx->status->code;
  }
  const int failed = api->conv2d(dev, kind, &w, a->data, b->data, ctx->outputs[0]->data, ws ? ws->data : NULL,
                                 bytes, &e);
  mf_tensor_release(ws); /* back to the device's memory, reused only by work queued after ours */
  return failed ? mf_cuda_fail(ctx, &e) : MF_OK;
}

mf_code mf_gpu_conv2d(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *f = ctx->inputs[1];
  return conv_gpu(ctx, MF_CUDA_CONV_FORWARD, x, f, x, f);
}
mf_code mf_gpu_conv2d_backprop_input(mf_kernel_ctx *ctx) {
  const mf_tensor *f = ctx->inputs[1];
  return conv_gpu(ctx, MF_CUDA_CONV_BACKPROP_INPUT, ctx->outputs[0], f, f, ctx->inputs[2]);
}
mf_code mf_gpu_conv2d_backprop_filter(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0];
  return conv_gpu(ctx, MF_CUDA_CONV_BACKPROP_FILTER, x, ctx->outputs[0], x, ctx->inputs[2]);
}

/* A pooling kernel of kind sliding over (the dims of) `over`, operands a and b. */
static mf_code pool_gpu(mf_kernel_ctx *ctx, mf_cuda_pool_kind kind, const mf_tensor *over, const mf_tensor *a,
                        const mf_tensor *b) {
  const mf_cuda_dnn_api *api = dnn_api(ctx);
  mf_window_geom g;
  if (!api || mf_pool_geom(ctx, over, &g)) return ctx->status->code;
  const mf_cuda_window w = cuda_window(&g);
  mf_tensor *out = ctx->outputs[0];
  mf_cuda_error e;
  if (api->pool(mf_cuda_dev(ctx), kind, out->dtype == MF_FLOAT64, &w, a ? a->data : NULL, b ? b->data : NULL,
                out->data, &e))
    return mf_cuda_fail(ctx, &e);
  return MF_OK;
}

mf_code mf_gpu_max_pool(mf_kernel_ctx *ctx) {
  return pool_gpu(ctx, MF_CUDA_MAX_POOL, ctx->inputs[0], ctx->inputs[0], NULL);
}
mf_code mf_gpu_avg_pool(mf_kernel_ctx *ctx) {
  return pool_gpu(ctx, MF_CUDA_AVG_POOL, ctx->inputs[0], ctx->inputs[0], NULL);
}
mf_code mf_gpu_max_pool_grad(mf_kernel_ctx *ctx) {
  return pool_gpu(ctx, MF_CUDA_MAX_POOL_GRAD, ctx->inputs[0], ctx->inputs[0], ctx->inputs[2]);
}
mf_code mf_gpu_avg_pool_grad(mf_kernel_ctx *ctx) {
  return pool_gpu(ctx, MF_CUDA_AVG_POOL_GRAD, ctx->outputs[0], NULL, ctx->inputs[1]);
}
mf_code mf_gpu_max_pool_grad_grad(mf_kernel_ctx *ctx) {
  return pool_gpu(ctx, MF_CUDA_MAX_POOL_GRAD_GRAD, ctx->inputs[0], ctx->inputs[0], ctx->inputs[2]);
}
