/* gpu_nn.c — Softmax, the cross-entropy ops, BiasAdd and BiasAddGrad on the GPU
 * (src/cuda/nn.cu; BiasAddGrad through the GPU reductions), and the
 * activations and their gradient ops (src/cuda/activations.cu). Shapes were
 * checked by inference; what only the values tell (labels out of range) is
 * checked here. */
#include "ops/gpu/gpu.h"
#include "device/cuda/nn_api.h"
#include "device/cuda/activations_api.h"
#include "device/cuda/runtime_api.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/graph.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"
#include "kernels/activation_ops.h"

#include <stdio.h>
#include <string.h>

static const mf_cuda_nn_api *nn_api(mf_kernel_ctx *ctx) { return mf_cuda_table(ctx, "mf_cuda_nn_v1"); }

mf_code mf_gpu_softmax(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0];
  const mf_cuda_nn_api *api = nn_api(ctx);
  if (!api) return ctx->status->code;
  int64_t c = x->dims[x->rank - 1];
  mf_cuda_error e;
  if (x->size && api->softmax(mf_cuda_dev(ctx), x->dtype, x->data, ctx->outputs[0]->data, x->size / c, c, &e))
    return mf_cuda_fail(ctx, &e);
  return MF_OK;
}

mf_code mf_gpu_xent(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *labels = ctx->inputs[1];
  mf_shape sx = mf_shape_of(x), sl = mf_shape_of(labels);
  if (!mf_shape_compatible(&sx, &sl)) {  /* a shape promised by set_shape may disagree with the values */
    char a[160], b[160];
    return MF_INVALID(ctx->status, "%s: logits and labels must be same size: logits_size=%s labels_size=%s",
                      ctx->op->name, mf_shape_str(&sx, a, sizeof a), mf_shape_str(&sl, b, sizeof b));
  }
  const mf_cuda_nn_api *api = nn_api(ctx);
  if (!api) return ctx->status->code;
  mf_cuda_error e;
  if (api->xent(mf_cuda_dev(ctx), x->dtype, x->data, labels->data, ctx->outputs[0]->data, ctx->outputs[1]->data,
                x->dims[0], x->dims[1], &e))
    return mf_cuda_fail(ctx, &e);
  return MF_OK;
}

/* The labels are checked on the device: the kernel flags the first row out
 * of [0, classes), and after the run's work so far is done the flag is read
 * back; only then are the labels themselves copied, for the CPU kernel's
 * message. */
static mf_code bad_label(mf_kernel_ctx *ctx, const mf_cuda_runtime_api *rt, const mf_tensor *lab, int64_t row,
                         int64_t classes) {
  mf_status s = {0};
  mf_tensor *host = mf_tensor_new(lab->dtype, lab->rank, lab->dims, &s);
  mf_cuda_error e;
  if (!host) return mf_status_set(ctx->status, s.code, "%s", s.msg);
  if (rt->copy_to_host(mf_cuda_dev(ctx), host->data, lab->data, (size_t)mf_tensor_nbytes(lab), &e)) {
    mf_tensor_release(host);
    return mf_cuda_fail(ctx, &e);
  }
  char list[1024];
  size_t len = 0;
  list[0] = '\0';
  int64_t rows = lab->dims[0];
  for (int64_t r = 0; r < rows && r < 100 && len < sizeof list - 32; r++) {
    int64_t v = lab->dtype == MF_INT32 ? ((const int32_t *)host->data)[r] : ((const int64_t *)host->data)[r];
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%lld", r ? " " : "", (long long)v);
  }
  if (rows > 100) snprintf(list + len, sizeof list - len, " ...");
  int64_t bad = lab->dtype == MF_INT32 ? ((const int32_t *)host->data)[row] : ((const int64_t *)host->data)[row];
  mf_tensor_release(host);
  return MF_INVALID(ctx->status,
                    "Received a label value of %lld which is outside the valid range of [0, %lld).  Label values: %s",
                    (long long)bad, (long long)classes, list);
}

mf_code mf_gpu_sparse_xent(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0], *lab = ctx->inputs[1];
  int64_t rows = x->dims[0], c = x->dims[1];
  if (rows == 0) return MF_OK;
  if (c == 0)
    return MF_INVALID(ctx->status, "Must have at least one class, but got logits shape %lld x 0", (long long)rows);
  const mf_cuda_nn_api *api = nn_api(ctx);
  const mf_cuda_runtime_api *rt = api ? mf_cuda_table(ctx, "mf_cuda_runtime_v1") : NULL;
  if (!rt) return ctx->status->code;
  int64_t one = 1;
  mf_tensor *flag = mf_kernel_new_tensor(ctx, MF_INT64, 1, &one);
  if (!flag) return ctx->status->code;
  mf_cuda_device *dev = mf_cuda_dev(ctx);
  mf_cuda_error e;
  uint64_t first_bad = 0;
  int rc = api->sparse_xent(dev, x->dtype, x->data, lab->data, lab->dtype == MF_INT64, ctx->outputs[0]->data,
                            ctx->outputs[1]->data, rows, c, flag->data, &e);
  if (!rc) rc = rt->copy_to_host(dev, &first_bad, flag->data, sizeof first_bad, &e);
  mf_tensor_release(flag);
  if (rc) return mf_cuda_fail(ctx, &e);
  return first_bad == UINT64_MAX ? MF_OK : bad_label(ctx, rt, lab, (int64_t)first_bad, c);
}

mf_code mf_gpu_bias_add(mf_kernel_ctx *ctx) {
  const mf_tensor *v = ctx->inputs[0], *b = ctx->inputs[1];
  const mf_cuda_nn_api *api = nn_api(ctx);
  if (!api) return ctx->status->code;
  mf_cuda_error e;
  if (v->size && api->bias_add(mf_cuda_dev(ctx), v->dtype, v->data, b->data, ctx->outputs[0]->data, v->size,
                               v->dims[v->rank - 1], &e))
    return mf_cuda_fail(ctx, &e);
  return MF_OK;
}

/* BiasAddGrad sums the rows: Sum over every axis but the last. */
mf_code mf_gpu_bias_add_grad(mf_kernel_ctx *ctx) {
  const mf_tensor *g = ctx->inputs[0];
  bool mask[MF_MAX_RANK];
  for (int d = 0; d < g->rank; d++) mask[d] = d < g->rank - 1;
  return mf_gpu_reduce_sum(ctx, g, mask, ctx->outputs[0]);
}

/* ---------- activations and their gradient ops (kernels/activation_ops.h) ---------- */

/* The op's number in the tables, from its type. */
#define ACT_NAME_(name, ...) #name,
static const char *const activation_names[MF_ACT_COUNT] = {
    MF_ACTIVATIONS(ACT_NAME_) MF_ACTIVATION_GRADS(ACT_NAME_)};
static int activation_number(const mf_kernel_ctx *ctx) {
  int k = 0;
  while (k < MF_ACT_COUNT - 1 && strcmp(activation_names[k], ctx->op->def->name) != 0) k++;
  return k;
}

static const mf_cuda_activations_api *activations_api(mf_kernel_ctx *ctx) {
  return mf_cuda_table(ctx, "mf_cuda_activations_v1");
}

/* tf.nn.leaky_relu's default alpha, as ops/nn.c reads it; the others have none. */
static double alpha_of(const mf_kernel_ctx *ctx) { return mf_attr_float(ctx->attrs, "alpha", 0.2); }

mf_code mf_gpu_activation(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0];
  const mf_cuda_activations_api *api = activations_api(ctx);
  if (!api) return ctx->status->code;
  mf_cuda_error e;
  if (api->map(mf_cuda_dev(ctx), activation_number(ctx), x->dtype, x->data, ctx->outputs[0]->data, x->size,
               alpha_of(ctx), &e))
    return mf_cuda_fail(ctx, &e);
  return MF_OK;
}

mf_code mf_gpu_activation_grad(mf_kernel_ctx *ctx) {
  const mf_tensor *g = ctx->inputs[0], *v = ctx->inputs[1];
  const mf_cuda_activations_api *api = activations_api(ctx);
  if (!api) return ctx->status->code;
  mf_cuda_error e;
  if (api->grad(mf_cuda_dev(ctx), activation_number(ctx), g->dtype, g->data, v->data, ctx->outputs[0]->data,
                g->size, alpha_of(ctx), &e))
    return mf_cuda_fail(ctx, &e);
  return MF_OK;
}
