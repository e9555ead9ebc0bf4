/* gpu_matmul.c — MatMul on the GPU (cuBLAS, src/cuda/matmul.cu): batches that
 * are all distinct or all one matrix per operand go in one strided-batched
 * call; other broadcasts call once per product, walked as the CPU does. */
#include "ops/gpu/gpu.h"
#include "device/cuda/matmul_api.h"
#include "device/cuda/runtime_api.h"
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "graph/attrs.h"
#include "ops/matmul.h"

typedef struct gpu_batches {
  const mf_cuda_matmul_api *api;
  mf_cuda_device *dev;
  const mf_matmul_dims *d;
  int dtype;
  const char *a, *b;
  char *c;
  size_t esize;
  mf_cuda_error e;
} gpu_batches;

static int gpu_product(void *arg, int64_t oa, int64_t ob, int64_t oc) {
  gpu_batches *p = arg;
  const mf_matmul_dims *d = p->d;
  return p->api->gemm(p->dev, p->dtype, d->ta, d->tb, d->m, d->n, d->k, p->a + (size_t)oa * p->esize, 0,
                      p->b + (size_t)ob * p->esize, 0, p->c + (size_t)oc * p->esize, 0, 1, &p->e);
}

mf_code mf_gpu_matmul(mf_kernel_ctx *ctx) {
  const mf_tensor *a = ctx->inputs[0], *b = ctx->inputs[1];
  mf_tensor *c = ctx->outputs[0];
  if (c->size == 0) return MF_OK;
  mf_matmul_dims d = mf_matmul_dims_of(a, b, c, mf_attr_bool(ctx->attrs, "transpose_a", false),
                                       mf_attr_bool(ctx->attrs, "transpose_b", false));
  gpu_batches p = {.dev = mf_cuda_dev(ctx), .d = &d, .dtype = c->dtype, .a = a->data, .b = b->data, .c = c->data,
                   .esize = mf_dtype_size(c->dtype)};
  if (d.k == 0) {  /* an empty sum; cuBLAS would reject the zero leading dimension */
    const mf_cuda_runtime_api *rt = mf_cuda_table(ctx, "mf_cuda_runtime_v1");
    if (!rt) return ctx->status->code;
    return rt->memset(p.dev, c->data, 0, (size_t)c->size * p.esize, &p.e) ? mf_cuda_fail(ctx, &p.e) : MF_OK;
  }
  if (!(p.api = mf_cuda_table(ctx, "mf_cuda_matmul_v1"))) return ctx->status->code;
  int rc;
  if ((d.batch_a == 1 || d.batch_a == d.batch) && (d.batch_b == 1 || d.batch_b == d.batch))
    rc = p.api->gemm(p.dev, p.dtype, d.ta, d.tb, d.m, d.n, d.k, a->data, d.batch_a == 1 ? 0 : d.mat_a, b->data,
                     d.batch_b == 1 ? 0 : d.mat_b, c->data, d.mat_c, d.batch, &p.e);
  else
    rc = mf_matmul_batches(a, b, c, &d, gpu_product, &p);
  return rc ? mf_cuda_fail(ctx, &p.e) : MF_OK;
}
