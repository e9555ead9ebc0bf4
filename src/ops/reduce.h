/* reduce.h — the reduction driver that other op families share (reduce.c),
 * and its view of the input, which the GPU reductions (ops/gpu/gpu_reduce.c) use too. */
#ifndef MF_OPS_REDUCE_H
#define MF_OPS_REDUCE_H

#include "graph/op_def.h"

/* TileGrad views its input with two axes per dimension, so the driver takes
 * up to twice the rank of a tensor. */
enum { MF_REDUCE_MAX_DIMS = 2 * MF_MAX_RANK };

/* The input seen by the driver. Axes of size 1 are dropped and neighbouring
 * axes that are both kept or both reduced are merged, so the groups alternate.
 * The last group is either reduced (`run` contiguous elements fold into one
 * output) or kept (`inner` contiguous outputs advance together). The other
 * groups are listed with their input strides: kept ones (k*) pick the output,
 * reduced ones (r*) are walked for each output. */
typedef struct mf_reduce_geom {
  int64_t out_size;   /* outputs */
  int64_t count;      /* input elements folded into each output */
  int64_t inner, run; /* 1 unless the last group is kept / reduced */
  int nk, nr;
  int64_t kdims[MF_REDUCE_MAX_DIMS], kstrides[MF_REDUCE_MAX_DIMS];
  int64_t rdims[MF_REDUCE_MAX_DIMS], rstrides[MF_REDUCE_MAX_DIMS];
} mf_reduce_geom;

/* The geometry of reducing a tensor of `rank` dims over the axes marked in mask. */
void mf_reduce_geometry(int rank, const int64_t *dims, const bool *mask, mf_reduce_geom *g);
/* Marks the reduced axes of a tensor of `rank` in mask[] from a reduction's
 * "axis" attribute (absent: all); an error names op. */
mf_code mf_reduce_mask(const char *op, const mf_attrs *attrs, int rank, bool *mask, mf_status *s);

/* Sums the numeric tensor x over the axes marked in mask (one per axis of x)
 * into out, whose size is that of the kept axes; split over the session's
 * threads with results independent of their number (BiasAddGrad). */
mf_code mf_reduce_sum(mf_kernel_ctx *ctx, const mf_tensor *x, const bool *mask, mf_tensor *out);
typedef mf_code (*mf_reduce_sum_fn)(mf_kernel_ctx *ctx, const mf_tensor *x, const bool *mask, mf_tensor *out);

/* SumToShape's kernel with the sum of its device (mf_reduce_sum on the CPU). */
mf_code mf_sum_to_shape(mf_kernel_ctx *ctx, mf_reduce_sum_fn sum);

#endif
