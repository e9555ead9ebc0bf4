/* select.c — Select (tf.where with three arguments) and Where (with one). */
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

/* ---------- Select(cond, x, y): tf.where with three arguments ----------
 * cond bool; x and y one dtype; all three broadcast together (NumPy). */

static mf_code select_infer(mf_infer_ctx *ic) {
  if (ic->in_dtypes[0] != MF_BOOL)
    return MF_INVALID(ic->status,
                      "%s: the condition must be a bool tensor, got %s (use a comparison such as tf.less)",
                      ic->op_name, mf_dtype_name(ic->in_dtypes[0]));
  if (ic->in_dtypes[1] != ic->in_dtypes[2])
    return MF_INVALID(ic->status,
                      "%s: x and y must have one dtype, got %s and %s; use tf.cast", ic->op_name,
                      mf_dtype_name(ic->in_dtypes[1]), mf_dtype_name(ic->in_dtypes[2]));
  mf_shape xy;
  if (mf_broadcast_shape(ic->op_name, &ic->in_shapes[1], &ic->in_shapes[2], &xy, ic->status) ||
      mf_broadcast_shape(ic->op_name, &ic->in_shapes[0], &xy, &ic->out_shapes[0], ic->status))
    return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[1];
  return MF_OK;
}

/* Strides of t's elements along the dims of a broadcast shape of rank r (0 where t broadcasts). */
static void broadcast_strides(const mf_tensor *t, int r, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int d = r - 1; d >= 0; d--) {
    int td = t->rank - r + d;
    bool own = td >= 0 && t->dims[td] == dims[d] && dims[d] != 1;
    strides[d] = own ? s : 0;
    if (td >= 0) s *= t->dims[td];
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
    broadcast_strides(c, r, dims, sc);
    broadcast_strides(x, r, dims, sx);
    broadcast_strides(y, r, dims, sy);
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
  for (int k = 1; k <= 2; k++) {
    mf_op_desc *d = mf_grad_begin(gc, "Select");
    if (d) {
      mf_op_desc_add_input(d, c);
      mf_op_desc_add_input(d, k == 1 ? g : zeros);
      mf_op_desc_add_input(d, k == 1 ? zeros : g);
    }
    gc->input_grads[k] = mf_grad_finish(gc, d);
  }
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
    {.name = "Where", .num_inputs = 1, .num_outputs = 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_NOT_DIFFERENTIABLE,
     .infer = where_infer, .kernel = {[MF_CPU] = where_kernel}},
};
MF_OP_TABLE(mf_ops_select, defs);
