/* select.c — Select and SelectV2 (tf.where and tf.where_v2 with three
 * arguments) and Where (with one). */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"

#include <string.h>

/* ---------- Select and SelectV2(cond, x, y) ----------
 * cond bool; x and y one dtype. SelectV2 broadcasts all three together
 * (NumPy). Select does too, except that, as TensorFlow 1.x's Select, a vector
 * cond with x and y of higher rank picks whole rows: cond[i] chooses x[i] or
 * y[i], so its length is their first dimension. */

/* Whether `def`, seeing a condition of rank cond_rank and x and y broadcast to
 * rank xy_rank, picks rows. */
static bool picks_rows(const mf_op_def *def, int cond_rank, int xy_rank) {
  return strcmp(def->name, "Select") == 0 && cond_rank == 1 && xy_rank > 1;
}

static mf_code select_infer(mf_infer_ctx *ic) {
  if (ic->in_dtypes[0] != MF_BOOL)
    return MF_INVALID(ic->status,
                      "%s: the condition must be a bool tensor, got %s (use a comparison such as tf.less)",
                      ic->op_name, mf_dtype_name(ic->in_dtypes[0]));
  if (ic->in_dtypes[1] != ic->in_dtypes[2])
    return MF_INVALID(ic->status,
                      "%s: x and y must have one dtype, got %s and %s; use tf.cast", ic->op_name,
                      mf_dtype_name(ic->in_dtypes[1]), mf_dtype_name(ic->in_dtypes[2]));
  ic->out_dtypes[0] = ic->in_dtypes[1];
  const mf_shape *c = &ic->in_shapes[0];
  mf_shape xy;
  if (mf_broadcast_shape(ic->op_name, &ic->in_shapes[1], &ic->in_shapes[2], &xy, ic->status))
    return ic->status->code;
  if (!picks_rows(ic->def, c->rank, xy.rank))
    return mf_broadcast_shape(ic->op_name, c, &xy, &ic->out_shapes[0], ic->status);
  if (c->dims[0] >= 0 && xy.dims[0] >= 0 && c->dims[0] != xy.dims[0]) {
    char a[160], b[160];
    return MF_INVALID(ic->status,
                      "%s: a vector condition picks rows of x and y, so its length must be their first dimension: "
                      "condition shape %s, x and y %s (tf.where_v2 broadcasts it instead)",
                      ic->op_name, mf_shape_str(c, a, sizeof a), mf_shape_str(&xy, b, sizeof b));
  }
  if (xy.dims[0] < 0) xy.dims[0] = c->dims[0];
  ic->out_shapes[0] = xy;
  return MF_OK;
}

/* Strides of the elements of a tensor of `rank` dims tdims along the dims of
 * a broadcast shape of rank r (0 where it broadcasts). */
static void broadcast_strides(int rank, const int64_t *tdims, int r, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int d = r - 1; d >= 0; d--) {
    int td = rank - r + d;
    bool own = td >= 0 && tdims[td] == dims[d] && dims[d] != 1;
    strides[d] = own ? s : 0;
    if (td >= 0) s *= tdims[td];
  }
}

#define SELECT_LOOP(T)                                                                      \
  {                                                                                         \
    const T *xa = x->data, *ya = y->data;                                                   \
    T *o = out->data;                                                                       \
    for (int64_t row = 0; row < rows; row++) {                                              \
      int64_t oc = 0, ox = 0, oy = 0, rest = row;                                           \
      for (int d = r - 2; d >= 0; d--) {                                                    \
        int64_t i = rest % dims[d];                                                         \
        rest /= dims[d];                                                                    \
        oc += i * sc[d], ox += i * sx[d], oy += i * sy[d];                                  \
      }                                                                                     \
      T *orow = o + row * inner;                                                            \
      for (int64_t j = 0; j < inner; j++)                                                   \
        orow[j] = ca[oc + j * lc] ? xa[ox + j * lx] : ya[oy + j * ly];                      \
    }                                                                                       \
  }

static mf_code select_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *c = ctx->inputs[0], *x = ctx->inputs[1], *y = ctx->inputs[2];
  mf_tensor *out = ctx->outputs[0];
  if (out->size == 0) return MF_OK;
  int r = out->rank;
  int64_t one = 1;
  const int64_t *dims = r ? out->dims : &one;
  int64_t sc[MF_MAX_RANK] = {0}, sx[MF_MAX_RANK] = {0}, sy[MF_MAX_RANK] = {0};
  if (r == 0) r = 1, sc[0] = sx[0] = sy[0] = 0;
  else {
    if (picks_rows(ctx->op->def, c->rank, r)) {
      /* The condition seen as [n, 1, ..., 1]. */
      int64_t column[MF_MAX_RANK];
      for (int d = 0; d < r; d++) column[d] = d ? 1 : c->dims[0];
      broadcast_strides(r, column, r, dims, sc);
    } else {
      broadcast_strides(c->rank, c->dims, r, dims, sc);
    }
    broadcast_strides(x->rank, x->dims, r, dims, sx);
    broadcast_strides(y->rank, y->dims, r, dims, sy);
  }
  int64_t inner = dims[r - 1], rows = out->size / inner;
  int64_t lc = sc[r - 1], lx = sx[r - 1], ly = sy[r - 1];
  const bool *ca = c->data;
  switch (mf_dtype_size(out->dtype)) {
    case 1: SELECT_LOOP(uint8_t) break;
    case 4: SELECT_LOOP(uint32_t) break;
    default: SELECT_LOOP(uint64_t) break;
  }
  return MF_OK;
}

static mf_code select_grad(mf_grad_ctx *gc) {
  mf_output c = mf_op_in(gc->op, 0), g = gc->grads[0];
  mf_output zeros = mf_grad_op1(gc, "ZerosLike", g);
  gc->input_grads[1] = mf_grad_op3(gc, gc->op->def->name, c, g, zeros);
  gc->input_grads[2] = mf_grad_op3(gc, gc->op->def->name, c, zeros, g);
  return gc->status->code;
}

/* ---------- Where(cond): the coordinates of the true (non-zero) elements ----------
 * int64 [count, rank], in row-major order. */

static mf_code where_infer(mf_infer_ctx *ic) {
  ic->out_dtypes[0] = MF_INT64;
  int64_t dims[2] = {-1, ic->in_shapes[0].rank};
  ic->out_shapes[0] = mf_shape_make(2, dims);
  return MF_OK;
}

static mf_code where_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *c = ctx->inputs[0];
  int64_t n = 0, size = c->size;
  switch (c->dtype) {
#define WHERE_COUNT(ENUM, T) \
  case ENUM: for (int64_t i = 0; i < size; i++) n += ((const T *)c->data)[i] != 0; break;
    MF_FOR_ALL_TYPES(WHERE_COUNT)
#undef WHERE_COUNT
    default: break;
  }
  int64_t dims[2] = {n, c->rank};
  mf_tensor *out = mf_kernel_alloc_output(ctx, 0, MF_INT64, 2, dims);
  if (!out) return ctx->status->code;
  int64_t *o = out->data, idx[MF_MAX_RANK] = {0};
  switch (c->dtype) {
#define WHERE_FILL(ENUM, T)                                            \
  case ENUM:                                                           \
    for (int64_t i = 0; i < size; i++) {                               \
      if (((const T *)c->data)[i] != 0)                                \
        for (int d = 0; d < c->rank; d++) *o++ = idx[d];               \
      for (int d = c->rank - 1; d >= 0 && ++idx[d] == c->dims[d]; d--) \
        idx[d] = 0;                                                    \
    }                                                                  \
    break;
    MF_FOR_ALL_TYPES(WHERE_FILL)
#undef WHERE_FILL
    default: break;
  }
  return MF_OK;
}

static const mf_op_def defs[] = {
    {.name = "Select", .num_inputs = 3, .num_outputs = 1,
     .infer = select_infer, .kernel = {[MF_CPU] = select_kernel}, .grad = select_grad},
    {.name = "SelectV2", .num_inputs = 3, .num_outputs = 1,
     .infer = select_infer, .kernel = {[MF_CPU] = select_kernel}, .grad = select_grad},
    {.name = "Where", .num_inputs = 1, .num_outputs = 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE,
     .infer = where_infer, .kernel = {[MF_CPU] = where_kernel}},
};
MF_OP_TABLE(mf_ops_select, defs);
