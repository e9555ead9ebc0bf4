/* reduce.h — the reduction driver that other op families share (reduce.c). */
#ifndef MF_OPS_REDUCE_H
#define MF_OPS_REDUCE_H

#include "graph/op_def.h"

/* Sums the numeric tensor x over the axes marked in mask (one per axis of x)
 * into out, whose size is that of the kept axes; split over the session's
 * threads with results independent of their number (BiasAddGrad). */
mf_code mf_reduce_sum(mf_kernel_ctx *ctx, const mf_tensor *x, const bool *mask, mf_tensor *out);

#endif
