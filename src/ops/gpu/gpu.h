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

#endif
