/* gpu.h — the GPU kernels of the op families ("glue", issue 14): C
 * functions that check inputs and attributes, pick device pointers and
 * sizes, call a table of the CUDA backend (src/device/cuda/<family>_api.h)
 * and turn its error into the op's status. Each op registers its glue as
 * kernel[MF_CUDA] in its one registration. The device's backend state is
 * `ctx->device->backend` (an mf_cuda_device *). One block per family. */
#ifndef MF_OPS_GPU_GPU_H
#define MF_OPS_GPU_GPU_H

#include "device/cuda/cuda_api.h"
#include "device/device.h"
#include "graph/op_def.h"

/* Sets ctx->status to MF_INTERNAL "<op name> (<op type>) on <device>: <e->msg>"; returns its code. */
mf_code mf_cuda_fail(mf_kernel_ctx *ctx, const mf_cuda_error *e);
/* The backend's mf_cuda_device of the kernel's device. */
static inline mf_cuda_device *mf_cuda_dev(const mf_kernel_ctx *ctx) { return ctx->device->backend; }

/* ---------- elementwise (gpu_elementwise.c; cuda-core) ---------- */
/* The GPU kernels of ops/math.c's ops, by their number in kernels/element_ops.h. */
mf_code mf_gpu_unary(mf_kernel_ctx *ctx, int op);
/* fail_msg: the op's message for an element with no result (integer division by zero), else NULL. */
mf_code mf_gpu_binary(mf_kernel_ctx *ctx, int op, const char *fail_msg);
mf_code mf_gpu_cast(mf_kernel_ctx *ctx);
/* ---------- cuda-blas: matmul, reductions, nn, activations (gpu_matmul.c, gpu_reduce.c, gpu_nn.c, gpu_table.c) ---------- */
/* The backend's table `name` ("mf_cuda_matmul_v1"); NULL with ctx->status set when it has none. */
const void *mf_cuda_table(mf_kernel_ctx *ctx, const char *name);
mf_code mf_gpu_matmul(mf_kernel_ctx *ctx);
mf_code mf_gpu_reduce_Sum(mf_kernel_ctx *ctx);
mf_code mf_gpu_reduce_Mean(mf_kernel_ctx *ctx);
mf_code mf_gpu_reduce_Prod(mf_kernel_ctx *ctx);
mf_code mf_gpu_reduce_Max(mf_kernel_ctx *ctx);
mf_code mf_gpu_reduce_Min(mf_kernel_ctx *ctx);
mf_code mf_gpu_argmax(mf_kernel_ctx *ctx);
mf_code mf_gpu_argmin(mf_kernel_ctx *ctx);
/* mf_reduce_sum (ops/reduce.h) on the GPU. */
mf_code mf_gpu_reduce_sum(mf_kernel_ctx *ctx, const mf_tensor *x, const bool *mask, mf_tensor *out);
mf_code mf_gpu_sum_to_shape(mf_kernel_ctx *ctx);
mf_code mf_gpu_softmax(mf_kernel_ctx *ctx);
mf_code mf_gpu_xent(mf_kernel_ctx *ctx);
mf_code mf_gpu_sparse_xent(mf_kernel_ctx *ctx);
mf_code mf_gpu_bias_add(mf_kernel_ctx *ctx);
mf_code mf_gpu_bias_add_grad(mf_kernel_ctx *ctx);
/* The activations and their gradient ops of kernels/activation_ops.h, told apart by op type. */
mf_code mf_gpu_activation(mf_kernel_ctx *ctx);
mf_code mf_gpu_activation_grad(mf_kernel_ctx *ctx);
/* ---------- cuda-dnn: convolutions and pooling (dnn.c), random ops (random.c) ---------- */
mf_code mf_gpu_conv2d(mf_kernel_ctx *ctx);
mf_code mf_gpu_conv2d_backprop_input(mf_kernel_ctx *ctx);
mf_code mf_gpu_conv2d_backprop_filter(mf_kernel_ctx *ctx);
mf_code mf_gpu_max_pool(mf_kernel_ctx *ctx);
mf_code mf_gpu_avg_pool(mf_kernel_ctx *ctx);
mf_code mf_gpu_max_pool_grad(mf_kernel_ctx *ctx);
mf_code mf_gpu_avg_pool_grad(mf_kernel_ctx *ctx);
mf_code mf_gpu_max_pool_grad_grad(mf_kernel_ctx *ctx);
mf_code mf_gpu_random_uniform(mf_kernel_ctx *ctx);
mf_code mf_gpu_random_normal(mf_kernel_ctx *ctx);
mf_code mf_gpu_truncated_normal(mf_kernel_ctx *ctx);
mf_code mf_gpu_random_uniform_int(mf_kernel_ctx *ctx);

#endif
