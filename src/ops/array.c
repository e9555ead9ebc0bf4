/* array.c — shape and layout ops: Shape, Size, Rank, Reshape, Fill, ZerosLike,
 * OnesLike, Tile, Slice, StridedSlice, Pack, Unpack, Concat, SplitV, Squeeze,
 * ExpandDims, Transpose, Range, BroadcastTo, and StridedSliceGrad (the gradient
 * of the slices), with their gradient rules.
 *
 * Shapes a user computes at run time (Reshape's shape, Fill's dims, Range's
 * bounds) are tensor inputs; axes, permutations, slice bounds and multiples are
 * attributes. Every shape function works on partly known shapes at build time
 * and on concrete ones at run time. Copies move raw elements, so one kernel
 * serves every dtype. */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "kernels/elementwise.h"
#include "kernels/helpers.h"
#include "kernels/parallel.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool is_index_dtype(mf_dtype t) { return t == MF_INT32 || t == MF_INT64; }

/* ---------- shared helpers ---------- */

/* Row-major element strides of a concrete shape. */
static void strides_of(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

/* Writes an index value into an int32 or int64 buffer. */
static void store_index(void *data, mf_dtype t, int64_t i, int64_t v) {
  if (t == MF_INT32) ((int32_t *)data)[i] = (int32_t)v;
  else ((int64_t *)data)[i] = v;
}

/* Checks that input i is a shape-like vector: int32 or int64, rank 1, at most
 * MF_MAX_RANK entries. */
static mf_code check_shape_vector(mf_infer_ctx *ic, int i, const char *what) {
  if (!is_index_dtype(ic->in_dtypes[i]))
    return MF_INVALID(ic->status, "%s: %s must be int32 or int64, got %s; use tf.cast", ic->op_name, what,
                      mf_dtype_name(ic->in_dtypes[i]));
  const mf_shape *s = &ic->in_shapes[i];
  char buf[160];
  if (s->rank >= 0 && s->rank != 1)
    return MF_INVALID(ic->status, "%s: %s must be a vector (rank 1), got shape %s", ic->op_name, what,
                      mf_shape_str(s, buf, sizeof buf));
  if (s->rank == 1 && s->dims[0] > MF_MAX_RANK)
    return MF_INVALID(ic->status, "%s: %s has %lld entries, but tensors have at most %d dimensions",
                      ic->op_name, what, (long long)s->dims[0], MF_MAX_RANK);
  return MF_OK;
}

/* Checks that all inputs share one dtype. */
static mf_code check_same_dtypes(mf_infer_ctx *ic, const char *what) {
  for (int i = 1; i < ic->num_inputs; i++)
    if (ic->in_dtypes[i] != ic->in_dtypes[0])
      return MF_INVALID(ic->status, "%s: all %s must have the same dtype, but %s[%d] is %s and %s[0] is %s; "
                        "use tf.cast to convert them",
                        ic->op_name, what, what, i, mf_dtype_name(ic->in_dtypes[i]), what,
                        mf_dtype_name(ic->in_dtypes[0]));
  return MF_OK;
}

/* Normalizes the axis at which a new dimension goes into a tensor of rank
 * `rank`: [-rank-1, rank], negative counting from the end (-1 appends). */
static mf_code insertion_axis(mf_infer_ctx *ic, int64_t axis, int rank, int *out) {
  if (axis < -rank - 1 || axis > rank)
    return MF_INVALID(ic->status, "%s: axis %lld is out of range for inserting a dimension into a tensor of "
                      "rank %d (expected [%d, %d])",
                      ic->op_name, (long long)axis, rank, -rank - 1, rank);
  *out = (int)(axis < 0 ? axis + rank + 1 : axis);
  return MF_OK;
}

/* Kernel of the ops that only reinterpret the shape (Reshape, Squeeze,
 * ExpandDims): the output is a zero-copy view of the input, with the concrete
 * shape the executor inferred. */
static mf_code view_kernel(mf_kernel_ctx *ctx) {
  const mf_shape *out = &ctx->out_shapes[0];
  int64_t n = mf_shape_num_elements(out->rank, out->dims);
  if (n != ctx->inputs[0]->size) {  /* only a static shape set by hand can promise this */
    char buf[160];
    return MF_INVALID(ctx->status,
                      "%s: Cannot reshape a tensor with %lld elements to shape %s (%lld elements)",
                      ctx->op->name, (long long)ctx->inputs[0]->size, mf_shape_str(out, buf, sizeof buf),
                      (long long)n);
  }
  ctx->outputs[0] = mf_tensor_view(ctx->inputs[0], out->rank, out->dims, ctx->status);
  return ctx->outputs[0] ? MF_OK : ctx->status->code;
}

/* ---------- strided copies ---------- */

/* A box of elements read from one strided layout and written to another.
 * Steps are in elements and may be negative (reversed slices). One spare
 * dimension lets odd element sizes be copied as bytes. */
typedef struct box {
  int rank;
  int64_t dims[MF_MAX_RANK + 1];
  int64_t src_step[MF_MAX_RANK + 1];
  int64_t dst_step[MF_MAX_RANK + 1];
} box;

/* Drops size-1 dimensions and merges neighbours that are contiguous on both
 * sides, so that copying whole rows becomes one long inner loop or memcpy. */
static void box_simplify(box *b) {
  int r = 0;
  for (int i = 0; i < b->rank; i++) {
    if (b->dims[i] == 1) continue;
    if (r > 0 && b->src_step[r - 1] == b->dims[i] * b->src_step[i] &&
        b->dst_step[r - 1] == b->dims[i] * b->dst_step[i]) {
      b->dims[r - 1] *= b->dims[i];
      b->src_step[r - 1] = b->src_step[i];
      b->dst_step[r - 1] = b->dst_step[i];
    } else {
      b->dims[r] = b->dims[i];
      b->src_step[r] = b->src_step[i];
      b->dst_step[r] = b->dst_step[i];
      r++;
    }
  }
  b->rank = r;
}

/* The inner loops run over the last dimension (a copy, a fill where one value
 * is broadcast along it, or a strided walk), or, when the source is
 * contiguous along another dimension k instead (a transpose), over 2-D tiles
 * of k and the last one, so that neither side is walked with a cache-missing
 * stride for long. The other dimensions are walked with an odometer. */
enum { TILE = 16 };  /* larger tiles thrash the cache when row strides are powers of two */
#define DEFINE_COPY_BOX(T)                                                                  \
  static void copy_box_##T(T *dst, const T *src, const box *b) {                            \
    int r = b->rank;                                                                        \
    if (r == 0) {                                                                           \
      dst[0] = src[0];                                                                      \
      return;                                                                               \
    }                                                                                       \
    int last = r - 1, k = -1;                                                               \
    int64_t n = b->dims[last], ss = b->src_step[last], ds = b->dst_step[last];              \
    if (ss != 1)                                                                            \
      for (int d = 0; d < last; d++)                                                        \
        if (b->src_step[d] == 1) k = d;                                                     \
    int64_t idx[MF_MAX_RANK + 1] = {0};                                                     \
    int64_t so = 0, d_o = 0;                                                                \
    for (;;) {                                                                              \
      if (k >= 0) {                                                                         \
        int64_t m = b->dims[k], dk = b->dst_step[k];                                        \
        for (int64_t i0 = 0; i0 < m; i0 += TILE)                                            \
          for (int64_t j0 = 0; j0 < n; j0 += TILE) {                                        \
            int64_t i1 = i0 + TILE < m ? i0 + TILE : m, j1 = j0 + TILE < n ? j0 + TILE : n; \
            for (int64_t i = i0; i < i1; i++) {                                             \
              T *out = dst + d_o + i * dk;                                                  \
              const T *in = src + so + i;                                                   \
              for (int64_t j = j0; j < j1; j++) out[j * ds] = in[j * ss];                   \
            }                                                                               \
          }                                                                                 \
      } else if (ss == 1 && ds == 1) {                                                      \
        memcpy(dst + d_o, src + so, (size_t)n * sizeof(T));                                 \
      } else if (ss == 0 && ds == 1) { /* broadcasting one value along the row */           \
        const T v = src[so];                                                                \
        T *out = dst + d_o;                                                                 \
        MF_ELEMENTS(n, i, out[i] = v;);                                                     \
      } else {                                                                              \
        for (int64_t i = 0; i < n; i++) dst[d_o + i * ds] = src[so + i * ss];               \
      }                                                                                     \
      int d = last - 1;                                                                     \
      for (; d >= 0; d--) {                                                                 \
        if (d == k) continue;                                                               \
        so += b->src_step[d];                                                               \
        d_o += b->dst_step[d];                                                              \
        if (++idx[d] < b->dims[d]) break;                                                   \
        so -= b->dims[d] * b->src_step[d];                                                  \
        d_o -= b->dims[d] * b->dst_step[d];                                                 \
        idx[d] = 0;                                                                         \
      }                                                                                     \
      if (d < 0) return;                                                                    \
    }                                                                                       \
  }
DEFINE_COPY_BOX(uint8_t)
DEFINE_COPY_BOX(uint32_t)
DEFINE_COPY_BOX(uint64_t)
#undef DEFINE_COPY_BOX

/* The copy of a box, split over the session's threads along its first
 * dimension: each part is the box with that dimension cut to a range. */
typedef struct copy_box_job {
  char *dst;
  const char *src;
  const box *b;
  size_t elem; /* 4 or 8: the size the steps count; else 1 (bytes) */
} copy_box_job;

static void copy_box_part(void *arg, int64_t begin, int64_t end) {
  const copy_box_job *j = arg;
  box part = *j->b;
  part.dims[0] = end - begin;
  char *dst = j->dst + (size_t)(begin * part.dst_step[0]) * j->elem;
  const char *src = j->src + (size_t)(begin * part.src_step[0]) * j->elem;
  if (j->elem == 4) copy_box_uint32_t((uint32_t *)dst, (const uint32_t *)src, &part);
  else if (j->elem == 8) copy_box_uint64_t((uint64_t *)dst, (const uint64_t *)src, &part);
  else copy_box_uint8_t((uint8_t *)dst, (const uint8_t *)src, &part);
}

/* Copies box b (no dimension of size 0) from src to dst, elements of elem bytes. */
static void copy_box(mf_kernel_ctx *ctx, void *dst, const void *src, box *b, size_t elem) {
  if (elem != 4 && elem != 8) {  /* bytes: one more dimension of elem bytes */
    for (int i = 0; i < b->rank; i++) {
      b->src_step[i] *= (int64_t)elem;
      b->dst_step[i] *= (int64_t)elem;
    }
    b->dims[b->rank] = (int64_t)elem;
    b->src_step[b->rank] = b->dst_step[b->rank] = 1;
    b->rank++;
  }
  box_simplify(b);
  copy_box_job j = {dst, src, b, elem == 4 || elem == 8 ? elem : 1};
  if (b->rank == 0) {
    copy_box_part(&j, 0, 1);
    return;
  }
  int64_t total = 1;
  for (int i = 0; i < b->rank; i++) total *= b->dims[i];
  mf_parallel_for(ctx, b->dims[0], total / b->dims[0], copy_box_part, &j);
}

/* Fills out (size > 0) from the input at element offset `start`, moving
 * src_step[d] input elements per step of output dimension d. */
static void gather_box(mf_kernel_ctx *ctx, mf_tensor *out, const mf_tensor *in, int64_t start, int rank,
                       const int64_t *dims, const int64_t *src_step) {
  size_t elem = mf_dtype_size(in->dtype);
  box b = {.rank = rank};
  int64_t dst_step[MF_MAX_RANK];
  strides_of(rank, dims, dst_step);
  for (int i = 0; i < rank; i++) {
    b.dims[i] = dims[i];
    b.src_step[i] = src_step[i];
    b.dst_step[i] = dst_step[i];
  }
  copy_box(ctx, out->data, (const char *)in->data + start * (int64_t)elem, &b, elem);
}

/* ---------- Shape, Size, Rank ---------- */

static mf_code out_type_attr(mf_infer_ctx *ic) {
  mf_dtype t = mf_attr_type(ic->attrs, "out_type", MF_INT32);
  if (!is_index_dtype(t))
    return MF_INVALID(ic->status, "%s: out_type must be int32 or int64, got %s", ic->op_name, mf_dtype_name(t));
  ic->out_dtypes[0] = t;
  return MF_OK;
}

static mf_code shape_infer(mf_infer_ctx *ic) {
  if (out_type_attr(ic)) return ic->status->code;
  ic->out_shapes[0] = (mf_shape){.rank = 1, .dims = {ic->in_shapes[0].rank}};
  return MF_OK;
}
static mf_code shape_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  for (int i = 0; i < in->rank; i++) {
    if (out->dtype == MF_INT32 && in->dims[i] > INT32_MAX)
      return MF_INVALID(ctx->status,
                        "%s: dimension %d is %lld, too large for out_type int32; use int64",
                        ctx->op->name, i, (long long)in->dims[i]);
    store_index(out->data, out->dtype, i, in->dims[i]);
  }
  return MF_OK;
}

static mf_code size_infer(mf_infer_ctx *ic) {
  if (out_type_attr(ic)) return ic->status->code;
  ic->out_shapes[0] = mf_shape_scalar();
  return MF_OK;
}
static mf_code size_kernel(mf_kernel_ctx *ctx) {
  mf_tensor *out = ctx->outputs[0];
  int64_t n = ctx->inputs[0]->size;
  if (out->dtype == MF_INT32 && n > INT32_MAX)
    return MF_INVALID(ctx->status,
                      "%s: %lld elements is too many for out_type int32; use int64",
                      ctx->op->name, (long long)n);
  store_index(out->data, out->dtype, 0, n);
  return MF_OK;
}

static mf_code rank_infer(mf_infer_ctx *ic) {
  ic->out_dtypes[0] = MF_INT32;
  ic->out_shapes[0] = mf_shape_scalar();
  return MF_OK;
}
static mf_code rank_kernel(mf_kernel_ctx *ctx) {
  *(int32_t *)ctx->outputs[0]->data = ctx->inputs[0]->rank;
  return MF_OK;
}

/* ---------- Reshape ---------- */

/* Reshape(tensor, shape): shape holds at most one -1, which takes whatever
 * number of elements is left. */
static mf_code reshape_infer(mf_infer_ctx *ic) {
  if (check_shape_vector(ic, 1, "shape")) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  const mf_tensor *sv = ic->in_values[1];
  mf_shape out;
  int wild = -1;  /* the one dimension the element count determines */
  if (sv) {
    out.rank = (int)sv->size;
    for (int i = 0; i < out.rank; i++) {
      int64_t d = mf_load_int64(sv->data, sv->dtype, i);
      if (d == -1 && wild >= 0)
        return MF_INVALID(ic->status, "%s: only one input size may be -1, not both %d and %d", ic->op_name, wild, i);
      if (d == -1) wild = i;
      else if (d < 0) return MF_INVALID(ic->status, "%s: size %d must be non-negative, not %lld", ic->op_name, i,
                                        (long long)d);
      out.dims[i] = d;
    }
  } else {
    out = mf_infer_shape_value(ic, 1);
    for (int i = 0; i < out.rank; i++) {
      if (out.dims[i] >= 0) continue;
      if (wild >= 0) {  /* two unknown dims: the element count fixes neither */
        ic->out_shapes[0] = out;
        return MF_OK;
      }
      wild = i;
    }
    if (out.rank < 0) {
      ic->out_shapes[0] = out;
      return MF_OK;
    }
  }
  int64_t known;
  if (mf_shape_known_elements(ic->op_name, &out, &known, ic->status)) return ic->status->code;
  const mf_shape *in = &ic->in_shapes[0];
  int64_t n = in->rank < 0 ? -1 : mf_shape_num_elements(in->rank, in->dims);
  char buf[160];
  if (wild >= 0 && n >= 0) {
    if (known == 0 && !sv) {  /* an unknown dim of an empty result: anything goes */
    } else if (known == 0) {
      return MF_INVALID(ic->status, "%s: Reshape cannot infer the missing input size for an empty tensor unless "
                        "all specified input sizes are non-zero (shape %s)",
                        ic->op_name, mf_shape_str(&out, buf, sizeof buf));
    } else if (n % known) {
      return MF_INVALID(ic->status, "%s: Input to reshape is a tensor with %lld values, but the requested shape "
                        "%s requires a multiple of %lld",
                        ic->op_name, (long long)n, mf_shape_str(&out, buf, sizeof buf), (long long)known);
    } else {
      out.dims[wild] = n / known;
    }
  } else if (wild < 0 && n >= 0 && n != known) {
    return MF_INVALID(ic->status, "%s: Cannot reshape a tensor with %lld elements to shape %s (%lld elements)",
                      ic->op_name, (long long)n, mf_shape_str(&out, buf, sizeof buf), (long long)known);
  } else if (wild < 0 && n < 0 && in->rank >= 0) {
    /* Partly known input: its element count is a multiple of its known dims. */
    int64_t part;
    if (mf_shape_known_elements(ic->op_name, in, &part, ic->status)) return ic->status->code;
    char ibuf[160];
    if (part > 0 && known % part)
      return MF_INVALID(ic->status, "%s: Cannot reshape a tensor of shape %s (a multiple of %lld elements) to "
                        "shape %s (%lld elements)",
                        ic->op_name, mf_shape_str(in, ibuf, sizeof ibuf), (long long)part,
                        mf_shape_str(&out, buf, sizeof buf), (long long)known);
  }
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* ---------- Fill, ZerosLike, OnesLike ---------- */

/* Fill(dims, value): a tensor of shape dims filled with the scalar value. */
static mf_code fill_infer(mf_infer_ctx *ic) {
  if (check_shape_vector(ic, 0, "dims")) return ic->status->code;
  char buf[160];
  if (ic->in_shapes[1].rank > 0)
    return MF_INVALID(ic->status, "%s: value must be a scalar, got shape %s", ic->op_name,
                      mf_shape_str(&ic->in_shapes[1], buf, sizeof buf));
  ic->out_dtypes[0] = ic->in_dtypes[1];
  const mf_tensor *dv = ic->in_values[0];
  if (!dv) {
    ic->out_shapes[0] = mf_infer_shape_value(ic, 0);
    return MF_OK;
  }
  mf_shape out = {.rank = (int)dv->size};
  for (int i = 0; i < out.rank; i++) {
    out.dims[i] = mf_load_int64(dv->data, dv->dtype, i);
    if (out.dims[i] < 0)
      return MF_INVALID(ic->status, "%s: dims[%d] = %lld must be nonnegative", ic->op_name, i, (long long)out.dims[i]);
  }
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* Sets every element of out to the one element at value (same dtype). */
static void fill_with(mf_tensor *out, const void *value) {
  switch (out->dtype) {
#define FILL(code, T)                                          \
  case code: {                                                 \
    T v;                                                       \
    memcpy(&v, value, sizeof v);                               \
    T *o = out->data;                                          \
    for (int64_t i = 0; i < out->size; i++) o[i] = v;          \
  } break;
    MF_FOR_ALL_TYPES(FILL)
    MF_FOR_COMPLEX_TYPES(FILL)
#undef FILL
    case MF_STRING: break;  /* Fill takes no strings (MF_OP_STRINGS) */
  }
}

static mf_code fill_kernel(mf_kernel_ctx *ctx) {
  fill_with(ctx->outputs[0], ctx->inputs[1]->data);
  return MF_OK;
}

static mf_code like_infer(mf_infer_ctx *ic) {
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}
static mf_code zeros_like_kernel(mf_kernel_ctx *ctx) {
  memset(ctx->outputs[0]->data, 0, mf_tensor_nbytes(ctx->outputs[0]));  /* all-zero bits: 0, 0.0, false */
  return MF_OK;
}
static mf_code ones_like_kernel(mf_kernel_ctx *ctx) {
  _Alignas(16) char one[MF_MAX_ELEMENT_SIZE];  /* room and alignment for one element of any dtype */
  mf_store_double(one, ctx->outputs[0]->dtype, 0, 1.0);
  fill_with(ctx->outputs[0], one);
  return MF_OK;
}

/* ---------- Tile ---------- */

static mf_code tile_infer(mf_infer_ctx *ic) {
  const int64_t *m;
  int n = mf_attr_ints(ic->attrs, "multiples", &m);
  if (n < 0) return MF_INVALID(ic->status, "%s: Tile needs a 'multiples' attribute", ic->op_name);
  const mf_shape *in = &ic->in_shapes[0];
  if (in->rank >= 0 && in->rank != n)
    return MF_INVALID(ic->status, "%s: multiples has %d entries but the input has rank %d; give one multiple per "
                      "dimension", ic->op_name, n, in->rank);
  if (n > MF_MAX_RANK)
    return MF_INVALID(ic->status, "%s: multiples has %d entries, but tensors have at most %d dimensions",
                      ic->op_name, n, MF_MAX_RANK);
  mf_shape out = {.rank = n};
  for (int i = 0; i < n; i++) {
    if (m[i] < 0)
      return MF_INVALID(ic->status, "%s: multiples[%d] = %lld must be non-negative", ic->op_name, i, (long long)m[i]);
    int64_t d = in->rank < 0 ? -1 : in->dims[i];
    if (m[i] == 0 || d < 0) out.dims[i] = m[i] == 0 ? 0 : -1;
    else if (!mf_size_mul(d, m[i], &out.dims[i]))
      return MF_INVALID(ic->status, "%s: dimension %d tiled, %lld * %lld, overflows int64", ic->op_name, i,
                        (long long)d, (long long)m[i]);
  }
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* Writes the tile of dimension d and below: the input rows are copied once,
 * then each finished block is repeated with memcpy. Strides are in bytes. */
static void tile_dim(int d, int rank, const char *src, char *dst, const int64_t *in_dims,
                     const int64_t *mult, const int64_t *in_stride, const int64_t *out_stride) {
  if (d == rank - 1) {
    size_t row = (size_t)in_stride[d] * (size_t)in_dims[d];
    for (int64_t k = 0; k < mult[d]; k++) memcpy(dst + (size_t)k * row, src, row);
    return;
  }
  for (int64_t i = 0; i < in_dims[d]; i++)
    tile_dim(d + 1, rank, src + i * in_stride[d], dst + i * out_stride[d], in_dims, mult, in_stride,
             out_stride);
  size_t block = (size_t)in_dims[d] * (size_t)out_stride[d];
  for (int64_t k = 1; k < mult[d]; k++) memcpy(dst + (size_t)k * block, dst, block);
}

/* Tile split over the session's threads along the output's first dimension. */
typedef struct tile_job {
  const char *src;
  char *dst;
  const int64_t *in_dims, *mult, *in_stride, *out_stride;
  int rank;
} tile_job;

static void tile_outer(void *arg, int64_t begin, int64_t end) {
  const tile_job *j = arg;
  if (j->rank == 1) {
    size_t row = (size_t)j->in_stride[0] * (size_t)j->in_dims[0];
    for (int64_t k = begin; k < end; k++) memcpy(j->dst + (size_t)k * row, j->src, row);
    return;
  }
  for (int64_t i = begin; i < end; i++)
    tile_dim(1, j->rank, j->src + i % j->in_dims[0] * j->in_stride[0], j->dst + i * j->out_stride[0], j->in_dims,
             j->mult, j->in_stride, j->out_stride);
}

static mf_code tile_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  size_t elem = mf_dtype_size(in->dtype);
  if (out->size == 0) return MF_OK;
  if (in->rank == 0) {
    memcpy(out->data, in->data, elem);
    return MF_OK;
  }
  const int64_t *m;
  mf_attr_ints(ctx->attrs, "multiples", &m);
  int64_t in_stride[MF_MAX_RANK], out_stride[MF_MAX_RANK];
  strides_of(in->rank, in->dims, in_stride);
  strides_of(out->rank, out->dims, out_stride);
  for (int i = 0; i < in->rank; i++) {
    in_stride[i] *= (int64_t)elem;
    out_stride[i] *= (int64_t)elem;
  }
  tile_job j = {in->data, out->data, in->dims, m, in_stride, out_stride, in->rank};
  /* Rank 1: the copies of the row; else output index i along dimension 0,
   * tiled from input index i % dims[0]. */
  int64_t items = in->rank == 1 ? m[0] : out->dims[0];
  mf_parallel_for(ctx, items, (int64_t)(mf_tensor_nbytes(out) / (size_t)items) / 4 + 1, tile_outer, &j);
  return MF_OK;
}

/* ---------- Slice ---------- */

/* Slice bounds for input shape `in`: begin[i] in [0, dim], size -1 means "to
 * the end". Fills the output shape and the start indices. */
static mf_code slice_spec(const char *op, const mf_attrs *attrs, const mf_shape *in, mf_shape *out,
                          int64_t *start, mf_status *s) {
  const int64_t *begin, *size;
  int nb = mf_attr_ints(attrs, "begin", &begin), ns = mf_attr_ints(attrs, "size", &size);
  if (nb < 0 || ns < 0) return MF_INVALID(s, "%s: Slice needs 'begin' and 'size' attributes", op);
  if (nb != ns || (in->rank >= 0 && nb != in->rank))
    return MF_INVALID(s,
                      "%s: Expected begin and size to have one entry per dimension of the input "
                      "(rank %d), but they have %d and %d",
                      op, in->rank, nb, ns);
  if (nb > MF_MAX_RANK)
    return MF_INVALID(s, "%s: begin has %d entries, but tensors have at most %d dimensions",
                      op, nb, MF_MAX_RANK);
  out->rank = nb;
  for (int i = 0; i < nb; i++) {
    int64_t dim = in->rank < 0 ? -1 : in->dims[i];
    int64_t b = begin[i], n = size[i];
    if (b < 0 || n < -1)
      return MF_INVALID(s,
                        "%s: begin[%d] = %lld must be non-negative and size[%d] = %lld at least -1 "
                        "(-1 means to the end)",
                        op, i, (long long)b, i, (long long)n);
    if (dim >= 0 && b > dim)
      return MF_INVALID(s, "%s: Expected begin[%d] in [0, %lld], but got %lld",
                        op, i, (long long)dim, (long long)b);
    if (dim >= 0 && n > dim - b)
      return MF_INVALID(s, "%s: Expected size[%d] in [0, %lld], but got %lld",
                        op, i, (long long)(dim - b), (long long)n);
    out->dims[i] = n >= 0 ? n : dim >= 0 ? dim - b : -1;
    start[i] = b;
  }
  return MF_OK;
}

static mf_code slice_infer(mf_infer_ctx *ic) {
  int64_t start[MF_MAX_RANK];
  ic->out_dtypes[0] = ic->in_dtypes[0];
  return slice_spec(ic->op_name, ic->attrs, &ic->in_shapes[0], &ic->out_shapes[0], start, ic->status);
}

static mf_code slice_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  if (out->size == 0) return MF_OK;
  const int64_t *begin;
  mf_attr_ints(ctx->attrs, "begin", &begin);
  int64_t stride[MF_MAX_RANK];
  strides_of(in->rank, in->dims, stride);
  int64_t offset = 0;
  for (int i = 0; i < in->rank; i++) offset += begin[i] * stride[i];
  gather_box(ctx, out, in, offset, in->rank, out->dims, stride);
  return MF_OK;
}

/* ---------- StridedSlice ---------- */

/* TensorFlow's StridedSlice: the sparse spec (begin/end/strides with masks,
 * one optional ellipsis, new axes) is expanded into a dense spec over the
 * input's dimensions; the op reads a "processing" box of the input and then
 * inserts new axes and drops shrunk ones to get the final shape. */
typedef struct ss_spec {
  int rank;                      /* the input's */
  int64_t begin[MF_MAX_RANK];    /* canonical start per input dimension */
  int64_t stride[MF_MAX_RANK];
  int64_t size[MF_MAX_RANK];     /* processing shape (-1 unknown) */
  mf_shape final;
} ss_spec;

enum { SS_NEW_AXIS = -1, SS_SHRINK = -2, SS_MAX_SPARSE = 31 };

/* An unmasked bound: negative counts from the end (once), then it is clamped to [lo, hi]. */
static int64_t ss_bound(int64_t x, int64_t dim, int64_t lo, int64_t hi) {
  if (x < 0) x += dim;
  return x < lo ? lo : x > hi ? hi : x;
}

static mf_code ss_compute(const char *op, const mf_attrs *attrs, const mf_shape *in, ss_spec *sp,
                          mf_status *s) {
  const int64_t *begin, *end, *strides = NULL;
  int nb = mf_attr_ints(attrs, "begin", &begin), ne = mf_attr_ints(attrs, "end", &end);
  int ns = mf_attr_ints(attrs, "strides", &strides);
  if (nb < 0 || ne < 0)
    return MF_INVALID(s, "%s: StridedSlice needs 'begin' and 'end' attributes", op);
  if (ns < 0) ns = nb;  /* no strides: all 1 */
  if (nb != ne || nb != ns)
    return MF_INVALID(s,
                      "%s: begin, end and strides must have the same length, got %d, %d and %d",
                      op, nb, ne, ns);
  if (nb >= SS_MAX_SPARSE)
    return MF_INVALID(s, "%s: too many slice entries (%d)", op, nb);
  int64_t begin_mask = mf_attr_int(attrs, "begin_mask", 0), end_mask = mf_attr_int(attrs, "end_mask", 0);
  int64_t ellipsis_mask = mf_attr_int(attrs, "ellipsis_mask", 0);
  int64_t new_axis_mask = mf_attr_int(attrs, "new_axis_mask", 0);
  int64_t shrink_mask = mf_attr_int(attrs, "shrink_axis_mask", 0);
  if (ellipsis_mask & (ellipsis_mask - 1))
    return MF_INVALID(s, "%s: Multiple ellipses in slice spec not allowed", op);
  for (int i = 0; i < nb; i++)
    if (strides && strides[i] == 0)
      return MF_INVALID(s, "%s: strides[%d] must be non-zero", op, i);

  /* Step 1: count new axes after the ellipsis; without one, an ellipsis is implied at the end. */
  int sparse_dims = nb, add_after_ellipsis = 0;
  bool ellipsis_seen = false;
  for (int i = 0; i < nb; i++) {
    if (ellipsis_seen && ((1LL << i) & new_axis_mask)) add_after_ellipsis++;
    if ((1LL << i) & ellipsis_mask) ellipsis_seen = true;
  }
  if (!ellipsis_seen) ellipsis_mask |= 1LL << sparse_dims++;
  if (in->rank < 0) {
    sp->rank = -1;
    sp->final = mf_shape_unknown();
    return MF_OK;
  }

  /* Step 2: the dense spec, one entry per input dimension. */
  int dims = in->rank, full = 0, ngather = 0;
  int gather[SS_MAX_SPARSE + MF_MAX_RANK + 1];
  int64_t dbegin[MF_MAX_RANK] = {0}, dend[MF_MAX_RANK] = {0}, dstride[MF_MAX_RANK];
  int64_t dbegin_mask = 0, dend_mask = 0, dshrink = 0;
  for (int i = 0; i < MF_MAX_RANK; i++) dstride[i] = 1;
  for (int i = 0; i < sparse_dims; i++) {
    int64_t bit = 1LL << i;
    if (bit & ellipsis_mask) {
      int next = dims - (sparse_dims - i) + 1 + add_after_ellipsis;
      if (next > dims) next = dims;
      for (; full < next; full++) {
        dbegin_mask |= 1LL << full;
        dend_mask |= 1LL << full;
        gather[ngather++] = full;
      }
    } else if (bit & new_axis_mask) {
      gather[ngather++] = SS_NEW_AXIS;
    } else {
      if (full == dims)
        return MF_INVALID(s,
                          "%s: Index out of range using input dim %d; input has only %d dims",
                          op, full, dims);
      dbegin[full] = begin[i];
      dend[full] = end[i];
      dstride[full] = strides ? strides[i] : 1;
      if (begin_mask & bit) dbegin_mask |= 1LL << full;
      if (end_mask & bit) dend_mask |= 1LL << full;
      if (shrink_mask & bit) {
        gather[ngather++] = SS_SHRINK;
        dshrink |= 1LL << full;
      } else {
        gather[ngather++] = full;
      }
      full++;
    }
  }

  /* Step 3: canonical bounds and the processing shape. */
  sp->rank = dims;
  for (int i = 0; i < dims; i++) {
    int64_t dim = in->dims[i], stride = dstride[i];
    bool shrink = dshrink & (1LL << i);
    sp->stride[i] = stride;
    sp->begin[i] = 0;
    if (shrink && stride <= 0)
      return MF_INVALID(s,
                        "%s: only stride 1 allowed on non-range indexing (dimension %d has stride %lld)",
                        op, i, (long long)stride);
    if (dim < 0) {
      sp->size[i] = shrink ? 1 : -1;
      continue;
    }
    int64_t lo = stride > 0 ? 0 : -1, hi = stride > 0 ? dim : dim - 1;
    int64_t b, e;
    if (shrink) {
      b = dbegin[i] < 0 ? dim + dbegin[i] : dbegin[i];
      e = b + 1;
      if (b < 0 || b >= dim)
        return MF_INVALID(s,
                          "%s: slice index %lld of dimension %d out of bounds (size %lld)",
                          op, (long long)dbegin[i], i, (long long)dim);
    } else {  /* a masked bound is the far end in the stride's direction */
      b = dbegin_mask & (1LL << i) ? (stride > 0 ? lo : hi) : ss_bound(dbegin[i], dim, lo, hi);
      e = dend_mask & (1LL << i) ? (stride > 0 ? hi : lo) : ss_bound(dend[i], dim, lo, hi);
    }
    int64_t len = e - b, n;
    if (len == 0 || ((len < 0) != (stride < 0))) n = 0;
    else n = len / stride + (len % stride != 0);
    sp->begin[i] = b;
    sp->size[i] = n;
  }

  /* Step 4: the final shape. */
  mf_shape fin = {.rank = 0};
  for (int g = 0; g < ngather; g++) {
    if (gather[g] == SS_SHRINK) continue;
    if (fin.rank == MF_MAX_RANK)
      return MF_INVALID(s, "%s: the result would have more than %d dimensions",
                        op, MF_MAX_RANK);
    fin.dims[fin.rank++] = gather[g] == SS_NEW_AXIS ? 1 : sp->size[gather[g]];
  }
  sp->final = fin;
  return MF_OK;
}

static mf_code strided_slice_infer(mf_infer_ctx *ic) {
  ss_spec sp;
  if (ss_compute(ic->op_name, ic->attrs, &ic->in_shapes[0], &sp, ic->status)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = sp.final;
  return MF_OK;
}

/* The canonical bounds depend on the concrete input shape, so the kernel
 * expands the spec again. */
static mf_code strided_slice_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_shape in_shape = mf_shape_of(in);
  ss_spec sp;
  if (ss_compute(ctx->op->name, ctx->attrs, &in_shape, &sp, ctx->status)) return ctx->status->code;
  if (ctx->outputs[0]->size == 0) return MF_OK;
  int64_t stride[MF_MAX_RANK], step[MF_MAX_RANK];
  strides_of(in->rank, in->dims, stride);
  int64_t offset = 0;
  for (int i = 0; i < in->rank; i++) {
    offset += sp.begin[i] * stride[i];
    step[i] = sp.stride[i] * stride[i];
  }
  gather_box(ctx, ctx->outputs[0], in, offset, in->rank, sp.size, step);
  return MF_OK;
}

/* StridedSliceGrad(shape, dy), attrs as StridedSlice's: a tensor of `shape`
 * holding dy where StridedSlice would read and zeros elsewhere — the gradient
 * of StridedSlice (and of Slice, with end = begin + size). */
static mf_code strided_slice_grad_infer(mf_infer_ctx *ic) {
  if (check_shape_vector(ic, 0, "shape")) return ic->status->code;
  mf_shape out = mf_infer_shape_value(ic, 0);
  ss_spec sp;
  if (ss_compute(ic->op_name, ic->attrs, &out, &sp, ic->status)) return ic->status->code;
  if (!mf_shape_compatible(&sp.final, &ic->in_shapes[1])) {
    char a[160], b[160], c[160];
    return MF_INVALID(ic->status, "%s: the gradient has shape %s, but this slice of a tensor of shape %s has shape %s",
                      ic->op_name, mf_shape_str(&ic->in_shapes[1], a, sizeof a), mf_shape_str(&out, b, sizeof b),
                      mf_shape_str(&sp.final, c, sizeof c));
  }
  ic->out_dtypes[0] = ic->in_dtypes[1];
  ic->out_shapes[0] = out;
  return MF_OK;
}

static mf_code strided_slice_grad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *dy = ctx->inputs[1];
  mf_tensor *out = ctx->outputs[0];
  mf_shape shape = mf_shape_of(out), dys = mf_shape_of(dy);
  ss_spec sp;
  if (ss_compute(ctx->op->name, ctx->attrs, &shape, &sp, ctx->status)) return ctx->status->code;
  /* Shapes read through ops at build time (or promised by set_shape) can
   * disagree with the values: check before writing. */
  if (sp.final.rank != dys.rank ||
      memcmp(sp.final.dims, dys.dims, (size_t)dys.rank * sizeof dys.dims[0]) != 0) {
    char a[160], b[160];
    return MF_INVALID(ctx->status,
                      "%s: the gradient has shape %s, but the slice has shape %s", ctx->op->name,
                      mf_shape_str(&dys, a, sizeof a), mf_shape_str(&sp.final, b, sizeof b));
  }
  memset(out->data, 0, mf_tensor_nbytes(out));  /* all-zero bits are 0.0 */
  if (dy->size == 0) return MF_OK;
  /* dy holds the processing box in row-major order (new and shrunk axes have
   * size 1); it is written back with the slice's steps. */
  size_t elem = mf_dtype_size(out->dtype);
  int64_t stride[MF_MAX_RANK];
  strides_of(out->rank, out->dims, stride);
  box b = {.rank = out->rank};
  strides_of(out->rank, sp.size, b.src_step);
  int64_t offset = 0;
  for (int i = 0; i < out->rank; i++) {
    b.dims[i] = sp.size[i];
    b.dst_step[i] = sp.stride[i] * stride[i];
    offset += sp.begin[i] * stride[i];
  }
  copy_box(ctx, (char *)out->data + offset * (int64_t)elem, dy->data, &b, elem);
  return MF_OK;
}

/* ---------- Pack, Unpack, Concat ---------- */

/* Pack (tf.stack): N tensors of one shape become one with a new dimension N at axis. */
static mf_code pack_infer(mf_infer_ctx *ic) {
  if (check_same_dtypes(ic, "values")) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  mf_shape merged = mf_shape_unknown();
  int first = -1;
  char a[160], b[160];
  for (int i = 0; i < ic->num_inputs; i++) {
    const mf_shape *s = &ic->in_shapes[i];
    if (s->rank < 0) continue;
    if (first < 0) {
      merged = *s;
      first = i;
      continue;
    }
    bool match = s->rank == merged.rank;
    for (int d = 0; match && d < s->rank; d++) {
      if (merged.dims[d] < 0) merged.dims[d] = s->dims[d];
      else if (s->dims[d] >= 0 && s->dims[d] != merged.dims[d]) match = false;
    }
    if (!match)
      return MF_INVALID(ic->status,
                        "%s: Shapes of all inputs must match: values[%d].shape = %s != values[%d].shape = %s",
                        ic->op_name, first, mf_shape_str(&ic->in_shapes[first], a, sizeof a), i,
                        mf_shape_str(s, b, sizeof b));
  }
  if (merged.rank < 0) {
    ic->out_shapes[0] = merged;
    return MF_OK;
  }
  if (merged.rank == MF_MAX_RANK)
    return MF_INVALID(ic->status, "%s: stacking tensors of rank %d would exceed %d dimensions", ic->op_name,
                      merged.rank, MF_MAX_RANK);
  int axis;
  if (insertion_axis(ic, mf_attr_int(ic->attrs, "axis", 0), merged.rank, &axis)) return ic->status->code;
  mf_shape out = {.rank = merged.rank + 1};
  for (int d = 0, k = 0; d < out.rank; d++)
    out.dims[d] = d == axis ? ic->num_inputs : merged.dims[k++];
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* Pack and Concat are one loop: per outer index, each input's chunk in turn.
 * A chunk is inner_bytes times the input's size along axis, or just
 * inner_bytes for Pack (axis -1: the inputs lack the new dimension). Outer
 * indices split over the session's threads. */
typedef struct concat_job {
  mf_kernel_ctx *ctx;
  int64_t inner_bytes, out_bytes; /* out_bytes: the output's bytes per outer index */
  int axis;
} concat_job;

static void concat_outer(void *arg, int64_t begin, int64_t end) {
  const concat_job *j = arg;
  char *dst = (char *)j->ctx->outputs[0]->data + (size_t)(begin * j->out_bytes);
  for (int64_t o = begin; o < end; o++)
    for (int i = 0; i < j->ctx->num_inputs; i++) {
      const mf_tensor *in = j->ctx->inputs[i];
      size_t chunk = (size_t)j->inner_bytes * (size_t)(j->axis >= 0 ? in->dims[j->axis] : 1);
      if (chunk) memcpy(dst, (const char *)in->data + (size_t)o * chunk, chunk);
      dst += chunk;
    }
}

static void concat_chunks(mf_kernel_ctx *ctx, int64_t outer, int64_t inner_bytes, int axis) {
  concat_job j = {ctx, inner_bytes, outer ? (int64_t)mf_tensor_nbytes(ctx->outputs[0]) / outer : 0, axis};
  mf_parallel_for(ctx, outer, j.out_bytes / 4 + 1, concat_outer, &j);
}

/* Pack and Concat: the inputs' chunks along the output's attr axis; Pack's
 * inputs lack that dimension (stacked). */
static mf_code join_run(mf_kernel_ctx *ctx, bool stacked) {
  const mf_tensor *out = ctx->outputs[0];
  if (out->size == 0) return MF_OK;
  int axis;
  if (mf_normalize_axis(ctx->op->name, mf_attr_int(ctx->attrs, "axis", 0), out->rank, &axis, ctx->status))
    return ctx->status->code;
  int64_t inner = mf_dims_product(out->dims, axis + 1, out->rank) * (int64_t)mf_dtype_size(out->dtype);
  concat_chunks(ctx, mf_dims_product(out->dims, 0, axis), inner, stacked ? -1 : axis);
  return MF_OK;
}

static mf_code pack_kernel(mf_kernel_ctx *ctx) { return join_run(ctx, true); }

/* Concat: tensors of one rank joined along axis; every other dimension must match. */
static mf_code concat_infer(mf_infer_ctx *ic) {
  if (check_same_dtypes(ic, "values")) return ic->status->code;
  const mf_attr *axis_attr = mf_attrs_find(ic->attrs, "axis", MF_ATTR_INT);
  if (!axis_attr) return MF_INVALID(ic->status, "%s: Concat needs an 'axis' attribute", ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  int first = -1;
  for (int i = 0; i < ic->num_inputs && first < 0; i++)
    if (ic->in_shapes[i].rank >= 0) first = i;
  if (first < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  mf_shape out = ic->in_shapes[first];
  if (out.rank == 0)
    return MF_INVALID(ic->status, "%s: Can't concatenate scalars (use tf.stack instead)", ic->op_name);
  int axis;
  if (mf_normalize_axis(ic->op_name, axis_attr->v.i, out.rank, &axis, ic->status)) return ic->status->code;
  out.dims[axis] = 0;
  char a[160], b[160];
  for (int i = 0; i < ic->num_inputs; i++) {
    const mf_shape *s = &ic->in_shapes[i];
    if (s->rank < 0) {
      out.dims[axis] = -1;
      continue;
    }
    if (s->rank != out.rank)
      return MF_INVALID(ic->status, "%s: Ranks of all input tensors should match: shape[%d] = %s vs. shape[%d] = %s",
                        ic->op_name, first, mf_shape_str(&ic->in_shapes[first], a, sizeof a), i,
                        mf_shape_str(s, b, sizeof b));
    for (int d = 0; d < out.rank; d++) {
      if (d == axis) continue;
      if (out.dims[d] < 0) out.dims[d] = s->dims[d];
      else if (s->dims[d] >= 0 && s->dims[d] != out.dims[d])
        return MF_INVALID(ic->status, "%s: Dimensions of inputs should match: shape[%d] = %s vs. shape[%d] = %s "
                          "(only dimension %d, the concat axis, may differ)",
                          ic->op_name, first, mf_shape_str(&ic->in_shapes[first], a, sizeof a), i,
                          mf_shape_str(s, b, sizeof b), axis);
    }
    if (out.dims[axis] < 0) continue;
    if (s->dims[axis] < 0) out.dims[axis] = -1;
    else if (!mf_size_add(out.dims[axis], s->dims[axis], &out.dims[axis]))
      return MF_INVALID(ic->status, "%s: the sizes of dimension %d, the concat axis, add up to more than int64 holds",
                        ic->op_name, axis);
  }
  ic->out_shapes[0] = out;
  return MF_OK;
}

static mf_code concat_kernel(mf_kernel_ctx *ctx) { return join_run(ctx, false); }

/* Unpack (tf.unstack): one output per index along axis. The count comes from
 * attr "num" or from a known dimension. */
static mf_code unpack_infer(mf_infer_ctx *ic) {
  const mf_shape *in = &ic->in_shapes[0];
  const mf_attr *num_attr = mf_attrs_find(ic->attrs, "num", MF_ATTR_INT);
  int64_t dim = -1;
  mf_shape out = mf_shape_unknown();
  char buf[160];
  if (in->rank == 0) return MF_INVALID(ic->status, "%s: cannot unstack a scalar", ic->op_name);
  if (in->rank > 0) {
    int axis;
    if (mf_normalize_axis(ic->op_name, mf_attr_int(ic->attrs, "axis", 0), in->rank, &axis, ic->status))
      return ic->status->code;
    dim = in->dims[axis];
    out.rank = in->rank - 1;
    for (int d = 0, k = 0; d < in->rank; d++)
      if (d != axis) out.dims[k++] = in->dims[d];
  }
  int64_t num = num_attr ? num_attr->v.i : dim;
  if (num < 0)
    return MF_INVALID(ic->status, "%s: Cannot infer argument `num` from shape %s; pass num", ic->op_name,
                      mf_shape_str(in, buf, sizeof buf));
  if (dim >= 0 && num != dim)
    return MF_INVALID(ic->status, "%s: num = %lld does not match the dimension of size %lld being unstacked "
                      "(input shape %s)",
                      ic->op_name, (long long)num, (long long)dim, mf_shape_str(in, buf, sizeof buf));
  if (num > 1 << 20) return MF_INVALID(ic->status, "%s: num = %lld outputs is too many", ic->op_name, (long long)num);
  if (mf_infer_set_num_outputs(ic, (int)num)) return ic->status->code;
  for (int i = 0; i < ic->num_outputs; i++) {
    ic->out_dtypes[i] = ic->in_dtypes[0];
    ic->out_shapes[i] = out;
  }
  return MF_OK;
}

/* The inverse of concat_chunks: the input is rows (the dims before axis) of
 * the outputs' chunks in turn, each the inner bytes (after axis) times output
 * i's dimension axis, or once for Unpack (stacked: the outputs lack it). */
static void split_chunks(mf_kernel_ctx *ctx, int axis, bool stacked) {
  const mf_tensor *in = ctx->inputs[0];
  int64_t outer = mf_dims_product(in->dims, 0, axis);
  size_t inner = (size_t)mf_dims_product(in->dims, axis + 1, in->rank) * mf_dtype_size(in->dtype);
  size_t row = (size_t)in->dims[axis] * inner, offset = 0;
  for (int i = 0; i < ctx->num_outputs; i++) {
    size_t chunk = inner * (size_t)(stacked ? 1 : ctx->outputs[i]->dims[axis]);
    if (chunk) {
      char *dst = ctx->outputs[i]->data;
      const char *src = (const char *)in->data + offset;
      for (int64_t o = 0; o < outer; o++) memcpy(dst + (size_t)o * chunk, src + (size_t)o * row, chunk);
    }
    offset += chunk;
  }
}

static mf_code unpack_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  int axis;
  if (mf_normalize_axis(ctx->op->name, mf_attr_int(ctx->attrs, "axis", 0), in->rank, &axis, ctx->status))
    return ctx->status->code;
  split_chunks(ctx, axis, true);
  return MF_OK;
}

/* SplitV (tf.split with sizes): value cut along attr axis into num_split
 * pieces whose sizes the vector size_splits gives; one size may be -1, the
 * rest of the dimension. Concat's gradient cuts with it, the sizes being the
 * inputs' dimensions read at run time. */
static mf_code split_infer(mf_infer_ctx *ic) {
  const mf_shape *v = &ic->in_shapes[0], *ss = &ic->in_shapes[1];
  const mf_attr *axis_attr = mf_attrs_find(ic->attrs, "axis", MF_ATTR_INT);
  int64_t num = mf_attr_int(ic->attrs, "num_split", -1);
  char buf[160];
  if (!axis_attr) return MF_INVALID(ic->status, "%s: SplitV needs an 'axis' attribute", ic->op_name);
  if (num < 1 || num > 1 << 20)
    return MF_INVALID(ic->status, "%s: SplitV needs a 'num_split' attribute in [1, %d], got %lld", ic->op_name, 1 << 20,
                      (long long)num);
  if (!is_index_dtype(ic->in_dtypes[1]) || (ss->rank >= 0 && ss->rank != 1))
    return MF_INVALID(ic->status, "%s: size_splits must be an int32 or int64 vector, got %s of shape %s", ic->op_name,
                      mf_dtype_name(ic->in_dtypes[1]), mf_shape_str(ss, buf, sizeof buf));
  if (ss->rank == 1 && ss->dims[0] >= 0 && ss->dims[0] != num)
    return MF_INVALID(ic->status, "%s: size_splits has %lld entries but num_split is %lld", ic->op_name,
                      (long long)ss->dims[0], (long long)num);
  if (v->rank == 0) return MF_INVALID(ic->status, "%s: cannot split a scalar", ic->op_name);
  int axis = -1;
  if (v->rank > 0 && mf_normalize_axis(ic->op_name, axis_attr->v.i, v->rank, &axis, ic->status))
    return ic->status->code;
  int64_t dim = axis >= 0 ? v->dims[axis] : -1;
  const mf_tensor *sv = ic->in_values[1];
  int64_t sum = 0, wild = -1;
  if (sv) {  /* exact sizes: check them against the dimension */
    for (int64_t i = 0; i < num; i++) {
      int64_t n = mf_load_int64(sv->data, sv->dtype, i);
      if (n == -1 && wild < 0) wild = i;
      else if (n < 0)
        return MF_INVALID(ic->status, "%s: size_splits[%lld] = %lld; sizes must be non-negative, and at most one "
                          "may be -1", ic->op_name, (long long)i, (long long)n);
      else sum += n;
    }
    if (dim >= 0 && (wild >= 0 ? sum > dim : sum != dim))
      return MF_INVALID(ic->status, "%s: the sizes add up to %lld, but the dimension %d being split has size %lld",
                        ic->op_name, (long long)sum, axis, (long long)dim);
  }
  mf_shape known = !sv && num <= MF_MAX_RANK ? mf_infer_shape_value(ic, 1) : mf_shape_unknown();
  if (mf_infer_set_num_outputs(ic, (int)num)) return ic->status->code;
  for (int i = 0; i < ic->num_outputs; i++) {
    int64_t n = -1;
    if (sv) n = i == wild ? (dim >= 0 ? dim - sum : -1) : mf_load_int64(sv->data, sv->dtype, i);
    else if (known.rank == num) n = known.dims[i];
    ic->out_dtypes[i] = ic->in_dtypes[0];
    ic->out_shapes[i] = *v;
    if (axis >= 0) ic->out_shapes[i].dims[axis] = n;
  }
  return MF_OK;
}

static mf_code split_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  int axis;
  if (mf_normalize_axis(ctx->op->name, mf_attr_int(ctx->attrs, "axis", 0), in->rank, &axis, ctx->status))
    return ctx->status->code;
  /* Sizes read through ops at build time (or promised by set_shape) can
   * disagree with the values; never read past the input. */
  int64_t total = 0;
  for (int i = 0; i < ctx->num_outputs; i++) total += ctx->outputs[i]->dims[axis];
  if (total != in->dims[axis])
    return MF_INVALID(ctx->status,
                      "%s: the pieces' sizes add up to %lld, but the dimension being split has size %lld",
                      ctx->op->name, (long long)total, (long long)in->dims[axis]);
  split_chunks(ctx, axis, false);
  return MF_OK;
}

/* ---------- Squeeze, ExpandDims ---------- */

/* Squeeze: drops the listed size-1 dimensions, or all of them when attr
 * "axis" is absent or empty. An unknown listed dimension is taken to be 1 and
 * checked when the op runs. */
static mf_code squeeze_infer(mf_infer_ctx *ic) {
  const mf_shape *in = &ic->in_shapes[0];
  const int64_t *axes;
  int n = mf_attr_ints(ic->attrs, "axis", &axes);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  if (in->rank < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  bool listed[MF_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    int a;
    if (mf_normalize_axis(ic->op_name, axes[i], in->rank, &a, ic->status)) return ic->status->code;
    listed[a] = true;
  }
  mf_shape out = {.rank = 0};
  for (int d = 0; d < in->rank; d++) {
    int64_t dim = in->dims[d];
    if (n > 0 && listed[d]) {
      if (dim >= 0 && dim != 1)
        return MF_INVALID(ic->status, "%s: Can not squeeze dim[%d], expected a dimension of 1, got %lld",
                          ic->op_name, d, (long long)dim);
      continue;
    }
    if (n <= 0 && dim == 1) continue;
    if (n <= 0 && dim < 0) {  /* might be 1: the rank is unknown until run time */
      ic->out_shapes[0] = mf_shape_unknown();
      return MF_OK;
    }
    out.dims[out.rank++] = dim;
  }
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* ExpandDims: inserts a dimension of size 1 at axis in [-rank-1, rank]; -1 appends. */
static mf_code expand_dims_infer(mf_infer_ctx *ic) {
  const mf_shape *in = &ic->in_shapes[0];
  const mf_attr *axis_attr = mf_attrs_find(ic->attrs, "axis", MF_ATTR_INT);
  if (!axis_attr) return MF_INVALID(ic->status, "%s: ExpandDims needs an 'axis' attribute", ic->op_name);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  if (in->rank < 0) {
    ic->out_shapes[0] = mf_shape_unknown();
    return MF_OK;
  }
  if (in->rank == MF_MAX_RANK)
    return MF_INVALID(ic->status, "%s: the input already has the maximum rank %d", ic->op_name, MF_MAX_RANK);
  int axis;
  if (insertion_axis(ic, axis_attr->v.i, in->rank, &axis)) return ic->status->code;
  mf_shape out = {.rank = in->rank + 1};
  for (int d = 0, k = 0; d < out.rank; d++) out.dims[d] = d == axis ? 1 : in->dims[k++];
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* ---------- Transpose ---------- */

/* The permutation for `rank`: attr "perm", or reversed dimensions. */
static mf_code transpose_perm(const char *op, const mf_attrs *attrs, int rank, int *n, int *perm,
                              mf_status *s) {
  const int64_t *p;
  int np = mf_attr_ints(attrs, "perm", &p);
  if (np < 0) {
    *n = rank;
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
    return MF_OK;
  }
  if (rank >= 0 && np != rank)
    return MF_INVALID(s, "%s: perm has %d entries but the input has rank %d",
                      op, np, rank);
  if (np > MF_MAX_RANK)
    return MF_INVALID(s, "%s: perm has %d entries, but tensors have at most %d dimensions",
                      op, np, MF_MAX_RANK);
  bool seen[MF_MAX_RANK] = {false};
  for (int i = 0; i < np; i++) {
    if (p[i] < 0 || p[i] >= np)
      return MF_INVALID(s, "%s: perm[%d] = %lld is out of range [0, %d)", op, i,
                           (long long)p[i], np);
    if (seen[p[i]])
      return MF_INVALID(s, "%s: %lld appears twice in perm; perm must be a permutation",
                        op, (long long)p[i]);
    seen[p[i]] = true;
    perm[i] = (int)p[i];
  }
  *n = np;
  return MF_OK;
}

static mf_code transpose_infer(mf_infer_ctx *ic) {
  const mf_shape *in = &ic->in_shapes[0];
  int perm[MF_MAX_RANK], n;
  if (transpose_perm(ic->op_name, ic->attrs, in->rank, &n, perm, ic->status)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  mf_shape out = {.rank = n};
  for (int i = 0; i < n; i++) out.dims[i] = in->rank < 0 ? -1 : in->dims[perm[i]];
  ic->out_shapes[0] = out;
  return MF_OK;
}

static mf_code transpose_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  int perm[MF_MAX_RANK], n;
  if (transpose_perm(ctx->op->name, ctx->attrs, in->rank, &n, perm, ctx->status)) return ctx->status->code;
  if (out->size == 0) return MF_OK;
  int64_t stride[MF_MAX_RANK], step[MF_MAX_RANK];
  strides_of(in->rank, in->dims, stride);
  for (int i = 0; i < n; i++) step[i] = stride[perm[i]];
  gather_box(ctx, out, in, 0, n, out->dims, step);
  return MF_OK;
}

/* ---------- Range ---------- */

/* v for %g: a NaN without its sign bit, which is noise (0/0 is -nan on x86). */
static double printable(double v) { return isnan(v) ? fabs(v) : v; }

/* Number of elements of range(start, limit, delta), TensorFlow's rules. */
static mf_code range_size(mf_infer_ctx *ic, int64_t *size) {
  mf_tensor *const *v = ic->in_values;
  mf_dtype t = ic->in_dtypes[0];
  double start, limit, delta;
  if (mf_dtype_is_float(t)) {
    start = mf_load_double(v[0]->data, t, 0);
    limit = mf_load_double(v[1]->data, t, 0);
    delta = mf_load_double(v[2]->data, t, 0);
  } else {
    start = (double)mf_load_int64(v[0]->data, t, 0);
    limit = (double)mf_load_int64(v[1]->data, t, 0);
    delta = (double)mf_load_int64(v[2]->data, t, 0);
  }
  if (!isfinite(start) || !isfinite(limit) || !isfinite(delta))
    return MF_INVALID(ic->status, "%s: start, limit and delta must be finite, got %g, %g and %g", ic->op_name,
                      printable(start), printable(limit), printable(delta));
  if (delta == 0) return MF_INVALID(ic->status, "%s: Requires delta != 0: %g", ic->op_name, delta);
  if (delta > 0 && start > limit)
    return MF_INVALID(ic->status, "%s: Requires start <= limit when delta > 0: %g/%g", ic->op_name, start, limit);
  if (delta < 0 && start < limit)
    return MF_INVALID(ic->status, "%s: Requires start >= limit when delta < 0: %g/%g", ic->op_name, start, limit);
  double count;
  if (mf_dtype_is_float(t)) {
    count = ceil(fabs((limit - start) / delta));
  } else {  /* unsigned: the span of two int64s fits in uint64 */
    int64_t s = mf_load_int64(v[0]->data, t, 0), l = mf_load_int64(v[1]->data, t, 0);
    int64_t d = mf_load_int64(v[2]->data, t, 0);
    uint64_t span = l > s ? (uint64_t)l - (uint64_t)s : (uint64_t)s - (uint64_t)l;
    uint64_t step = d > 0 ? (uint64_t)d : -(uint64_t)d;
    count = (double)(span / step + (span % step != 0));
  }
  if (count >= 0x1p63)
    return MF_INVALID(ic->status, "%s: the range from %g to %g by %g would have %g elements, more than 2^63 - 1",
                      ic->op_name, start, limit, delta, count);
  *size = (int64_t)count;
  return MF_OK;
}

static mf_code range_infer(mf_infer_ctx *ic) {
  if (check_same_dtypes(ic, "inputs (start, limit, delta)")) return ic->status->code;
  mf_dtype t = ic->in_dtypes[0];
  if (t == MF_BOOL) return MF_INVALID(ic->status, "%s: Range needs numbers, got bool; use tf.cast", ic->op_name);
  static const char *const names[] = {"start", "limit", "delta"};
  char buf[160];
  for (int i = 0; i < 3; i++)
    if (ic->in_shapes[i].rank > 0)
      return MF_INVALID(ic->status, "%s: %s must be a scalar, got shape %s", ic->op_name, names[i],
                        mf_shape_str(&ic->in_shapes[i], buf, sizeof buf));
  ic->out_dtypes[0] = t;
  int64_t n = -1;
  if (ic->in_values[0] && ic->in_values[1] && ic->in_values[2] && range_size(ic, &n))
    return ic->status->code;
  ic->out_shapes[0] = (mf_shape){.rank = 1, .dims = {n}};
  return MF_OK;
}

static mf_code range_kernel(mf_kernel_ctx *ctx) {
  mf_tensor *out = ctx->outputs[0];
  const void *start = ctx->inputs[0]->data, *delta = ctx->inputs[2]->data;
  switch (out->dtype) {
#define RANGE(code, T)                                                            \
  case code: {                                                                    \
    T s = *(const T *)start, d = *(const T *)delta;                               \
    T *o = out->data;                                                             \
    if (mf_dtype_is_float(code)) /* start + i * delta: no rounding error builds up */ \
      for (int64_t i = 0; i < out->size; i++) o[i] = (T)(s + (T)i * d);           \
    else /* each step lands inside [start, limit), so none overflows */           \
      for (int64_t i = 0; i < out->size; i++) o[i] = i ? (T)(o[i - 1] + d) : s;   \
  } break;
    MF_FOR_NUMERIC_TYPES(RANGE)
#undef RANGE
    case MF_BOOL: case MF_STRING: case MF_COMPLEX64: case MF_COMPLEX128: break;  /* rejected by range_infer */
  }
  return MF_OK;
}

/* ---------- BroadcastTo ---------- */

/* BroadcastTo(x, shape): x repeated along the dimensions NumPy broadcasting
 * would stretch or add. */
static mf_code broadcast_to_infer(mf_infer_ctx *ic) {
  if (check_shape_vector(ic, 1, "shape")) return ic->status->code;
  const mf_shape *x = &ic->in_shapes[0];
  mf_shape out = mf_infer_shape_value(ic, 1);
  ic->out_dtypes[0] = ic->in_dtypes[0];
  if (out.rank >= 0 && x->rank >= 0) {
    char a[160], b[160];
    if (x->rank > out.rank)
      return MF_INVALID(ic->status, "%s: cannot broadcast a tensor of shape %s to the lower rank shape %s", ic->op_name,
                        mf_shape_str(x, a, sizeof a), mf_shape_str(&out, b, sizeof b));
    int lead = out.rank - x->rank;
    for (int d = 0; d < x->rank; d++) {
      int64_t xd = x->dims[d], *od = &out.dims[lead + d];
      if (xd >= 0 && *od >= 0 && xd != 1 && xd != *od)
        return MF_INVALID(ic->status,
                          "%s: cannot broadcast a tensor of shape %s to shape %s (dimension %d: %lld vs. %lld)",
                          ic->op_name, mf_shape_str(x, a, sizeof a), mf_shape_str(&out, b, sizeof b),
                          lead + d, (long long)xd, (long long)*od);
      if (*od < 0 && xd > 1) *od = xd;
    }
  }
  ic->out_shapes[0] = out;
  return MF_OK;
}

static mf_code broadcast_to_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *x = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  if (out->size == 0) return MF_OK;
  int lead = out->rank - x->rank;
  int64_t x_strides[MF_MAX_RANK], step[MF_MAX_RANK];
  strides_of(x->rank, x->dims, x_strides);
  for (int d = 0; d < out->rank; d++)
    step[d] = d < lead || x->dims[d - lead] == 1 ? 0 : x_strides[d - lead];
  gather_box(ctx, out, x, 0, out->rank, out->dims, step);
  return MF_OK;
}

/* The gradient of a broadcast is the gradient summed back; the driver does
 * exactly that for a gradient of the output's shape. */
static mf_code broadcast_to_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = gc->grads[0];
  return MF_OK;
}

/* ---------- gradients ---------- */

/* Rules follow TensorFlow's and build graph ops only, so they differentiate
 * again; shapes come from Shape ops, so unknown dimensions are fine. */

/* Reshape, Squeeze, ExpandDims: dy back in x's shape. */
static mf_code reshape_grad(mf_grad_ctx *gc) {
  mf_output shape = mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0));
  gc->input_grads[0] = mf_grad_op2(gc, "Reshape", gc->grads[0], shape);
  return gc->status->code;
}

/* Transpose: dy transposed by the inverse permutation (reversal is its own). */
static mf_code transpose_grad(mf_grad_ctx *gc) {
  const int64_t *p;
  int n = mf_attr_ints(&gc->op->attrs, "perm", &p);
  int64_t inverse[MF_MAX_RANK];
  for (int i = 0; i < n; i++) inverse[p[i]] = i;
  mf_op_desc *d = mf_grad_begin(gc, "Transpose");
  if (d) {
    mf_op_desc_add_input(d, gc->grads[0]);
    if (n >= 0) mf_op_desc_set_attr_ints(d, "perm", inverse, n);
  }
  gc->input_grads[0] = mf_grad_finish(gc, d);
  return gc->status->code;
}

/* Tile: dy summed over the tiles (TileGrad, in ops/reduce.c, with Tile's multiples). */
static mf_code tile_grad(mf_grad_ctx *gc) {
  const mf_output in[2] = {gc->grads[0], mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0))};
  gc->input_grads[0] = mf_grad_rebuild(gc, "TileGrad", in, 2);
  return gc->status->code;
}

/* StridedSlice: dy put back where the slice read, zeros elsewhere (a
 * StridedSliceGrad with the slice's attributes). */
static mf_code strided_slice_grad(mf_grad_ctx *gc) {
  const mf_output in[2] = {mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0)), gc->grads[0]};
  gc->input_grads[0] = mf_grad_rebuild(gc, "StridedSliceGrad", in, 2);
  return gc->status->code;
}

/* StridedSliceGrad is linear in dy: its gradient is the slice again. */
static mf_code strided_slice_grad_grad(mf_grad_ctx *gc) {
  gc->input_grads[1] = mf_grad_rebuild(gc, "StridedSlice", gc->grads, 1);
  return gc->status->code;
}

/* Slice: as StridedSlice from begin to begin + size (size -1: to the end). */
static mf_code slice_grad(mf_grad_ctx *gc) {
  const int64_t *begin, *size;
  int n = mf_attr_ints(&gc->op->attrs, "begin", &begin);
  mf_attr_ints(&gc->op->attrs, "size", &size);
  int64_t end[MF_MAX_RANK], end_mask = 0;
  for (int i = 0; i < n; i++) {
    end[i] = size[i] < 0 ? 0 : begin[i] + size[i];
    if (size[i] < 0) end_mask |= 1LL << i;
  }
  mf_output shape = mf_grad_op1(gc, "Shape", mf_op_in(gc->op, 0));
  mf_op_desc *d = mf_grad_begin(gc, "StridedSliceGrad");
  if (d) {
    mf_op_desc_add_input(d, shape);
    mf_op_desc_add_input(d, gc->grads[0]);
    mf_op_desc_set_attr_ints(d, "begin", begin, n);
    mf_op_desc_set_attr_ints(d, "end", end, n);
    mf_op_desc_set_attr_int(d, "end_mask", end_mask);
  }
  gc->input_grads[0] = mf_grad_finish(gc, d);
  return gc->status->code;
}

/* An op over n ports with int attrs axis and, when >= 0, `count` (Pack,
 * Unpack, Concat, SplitV); output 0. */
static mf_output axis_op(mf_grad_ctx *gc, const char *type, const mf_output *in, int n, int64_t axis,
                         const char *count, int64_t count_value) {
  mf_op_desc *d = mf_grad_begin(gc, type);
  if (!d) return MF_NO_PORT;
  for (int i = 0; i < n; i++) mf_op_desc_add_input(d, in[i]);
  mf_op_desc_set_attr_int(d, "axis", axis);
  if (count) mf_op_desc_set_attr_int(d, count, count_value);
  return mf_grad_finish(gc, d);
}

/* Output i of the op behind port first (a multi-output op built by a rule). */
static mf_output output_of(mf_output first, int i) {
  return first.op ? mf_op_out(first.op, i) : MF_NO_PORT;
}

/* The gradients of every output, zeros where none came, in a new array (or
 * NULL with the status set). */
static mf_output *output_grads(mf_grad_ctx *gc) {
  int n = gc->op->num_outputs;
  mf_output *g = mf_malloc((size_t)n * sizeof *g);
  if (!g) {
    mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
    return NULL;
  }
  for (int i = 0; i < n; i++) g[i] = mf_grad_output_or_zeros(gc, i);
  return g;
}

/* Pack: dy unstacked along the axis. */
static mf_code pack_grad(mf_grad_ctx *gc) {
  int n = gc->op->num_inputs;
  mf_output first = axis_op(gc, "Unpack", gc->grads, 1, mf_attr_int(&gc->op->attrs, "axis", 0), "num", n);
  for (int i = 0; i < n; i++) gc->input_grads[i] = output_of(first, i);
  return gc->status->code;
}

/* The outputs' gradients joined along the axis by `type` (Pack or Concat). */
static mf_code joined_output_grads(mf_grad_ctx *gc, const char *type) {
  mf_output *g = output_grads(gc);
  if (g && mf_ok(gc->status))
    gc->input_grads[0] = axis_op(gc, type, g, gc->op->num_outputs, mf_attr_int(&gc->op->attrs, "axis", 0),
                                 NULL, 0);
  mf_free(g);
  return gc->status->code;
}

/* Unpack: the outputs' gradients stacked along the axis. */
static mf_code unpack_grad(mf_grad_ctx *gc) { return joined_output_grads(gc, "Pack"); }

/* SplitV: the pieces' gradients concatenated. */
static mf_code split_grad(mf_grad_ctx *gc) { return joined_output_grads(gc, "Concat"); }

/* The size of x along axis as an int64 scalar: a constant when known,
 * else read from Shape(x) at run time. */
static mf_output dim_of(mf_grad_ctx *gc, mf_output x, int64_t axis) {
  const mf_shape *s = mf_port_shape(x);
  if (s->rank > 0 && axis >= -s->rank && axis < s->rank && s->dims[axis < 0 ? axis + s->rank : axis] >= 0)
    return mf_grad_scalar(gc, MF_INT64, (double)s->dims[axis < 0 ? axis + s->rank : axis]);
  mf_op_desc *d = mf_grad_begin(gc, "Shape");
  if (d) {
    mf_op_desc_add_input(d, x);
    mf_op_desc_set_attr_type(d, "out_type", MF_INT64);
  }
  mf_output shape = mf_grad_finish(gc, d);
  d = mf_grad_begin(gc, "StridedSlice");
  if (d) {
    int64_t one = 1;
    mf_op_desc_add_input(d, shape);
    mf_op_desc_set_attr_ints(d, "begin", &axis, 1);
    mf_op_desc_set_attr_ints(d, "end", &axis, 1);  /* unused: the axis is shrunk */
    mf_op_desc_set_attr_ints(d, "strides", &one, 1);
    mf_op_desc_set_attr_int(d, "shrink_axis_mask", 1);
  }
  return mf_grad_finish(gc, d);
}

/* Concat: dy cut back into the inputs' sizes along the axis. The pieces take
 * the inputs' static shapes, which may be more precise than SplitV infers
 * from sizes it reads through ops. */
static mf_code concat_grad(mf_grad_ctx *gc) {
  const mf_op *op = gc->op;
  int n = op->num_inputs;
  int64_t axis = mf_attr_int(&op->attrs, "axis", 0);
  mf_output *sizes = mf_malloc((size_t)n * sizeof *sizes);
  if (!sizes) return mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
  for (int i = 0; i < n; i++) sizes[i] = dim_of(gc, mf_op_in(op, i), axis);
  mf_output packed = mf_ok(gc->status) ? axis_op(gc, "Pack", sizes, n, 0, NULL, 0) : MF_NO_PORT;
  mf_free(sizes);
  mf_output in[2] = {gc->grads[0], packed};
  mf_output first = mf_ok(gc->status) ? axis_op(gc, "SplitV", in, 2, axis, "num_split", n) : MF_NO_PORT;
  for (int i = 0; i < n && first.op; i++) {
    mf_output x = mf_op_in(op, i);
    if (mf_op_set_output_shape(first.op, i, mf_port_shape(x), gc->status)) break;
    gc->input_grads[i] = output_of(first, i);
  }
  return gc->status->code;
}

/* Fill: every element is the value, so the value's gradient is dy's sum;
 * dims are integers. */
static mf_code fill_grad(mf_grad_ctx *gc) {
  gc->input_grads[1] = mf_grad_op1(gc, "Sum", gc->grads[0]);
  return gc->status->code;
}

/* ---------- build-time values of shape vectors (graph.c's mf_port_shape_value) ---------- */

/* Shape(x) holds x's static shape. */
static mf_shape shape_build_value(const mf_op *op, int index, int depth) {
  MF_UNUSED(index);
  MF_UNUSED(depth);
  return op->inputs[0].op->out_shapes[op->inputs[0].index];
}

/* Pack of scalars along axis 0 holds their values. */
static mf_shape pack_build_value(const mf_op *op, int index, int depth) {
  MF_UNUSED(index);
  if (mf_attr_int(&op->attrs, "axis", 0) != 0 || op->num_inputs > MF_MAX_RANK) return mf_shape_unknown();
  mf_shape out = {.rank = op->num_inputs};
  for (int i = 0; i < out.rank; i++) {
    int64_t d = mf_port_scalar_value(op->inputs[i], depth);
    out.dims[i] = d < 0 ? -1 : d;
  }
  return out;
}

/* Dim k of a shape vector; -1 when unknown. */
static int64_t shape_vector_dim(mf_output vec, int64_t k, int depth) {
  mf_shape dims = mf_port_shape_value(vec, depth);
  if (k < 0) k += dims.rank;
  return dims.rank >= 0 && k >= 0 && k < dims.rank ? dims.dims[k] : -1;
}

/* Unpack along axis 0 of a shape vector: output i holds dim i. */
static int64_t unpack_build_scalar(const mf_op *op, int index, int depth) {
  if (mf_attr_int(&op->attrs, "axis", 0) != 0) return -1;
  return shape_vector_dim(op->inputs[0], index, depth);
}

/* A StridedSlice taking one element of a shape vector (x[k]) holds dim k. */
static int64_t strided_slice_build_scalar(const mf_op *op, int index, int depth) {
  MF_UNUSED(index);
  const int64_t *begin;
  if (mf_attr_int(&op->attrs, "shrink_axis_mask", 0) != 1 || mf_attr_int(&op->attrs, "ellipsis_mask", 0) != 0 ||
      mf_attr_int(&op->attrs, "new_axis_mask", 0) != 0 || mf_attr_ints(&op->attrs, "begin", &begin) != 1)
    return -1;
  return shape_vector_dim(op->inputs[0], begin[0], depth);
}

static const mf_op_def defs[] = {
    {.name = "Shape", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS | MF_OP_COMPLEX,
     .infer = shape_infer, .kernel = {[MF_CPU] = shape_kernel},
     .build_value = {.shape = shape_build_value}},
    {.name = "Size", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS | MF_OP_COMPLEX,
     .infer = size_infer, .kernel = {[MF_CPU] = size_kernel}},
    {.name = "Rank", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_NOT_DIFFERENTIABLE | MF_OP_STRINGS | MF_OP_COMPLEX,
     .infer = rank_infer, .kernel = {[MF_CPU] = rank_kernel}},
    {.name = "Reshape", .num_inputs = 2, .num_outputs = 1, .value_inputs = 1u << 1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_STRINGS | MF_OP_COMPLEX,
     .infer = reshape_infer, .kernel = {[MF_CPU] = view_kernel, [MF_CUDA] = view_kernel}, .grad = reshape_grad},
    {.name = "Fill", .flags = MF_OP_COMPLEX, .num_inputs = 2, .num_outputs = 1, .value_inputs = 1u << 0,
     .infer = fill_infer, .kernel = {[MF_CPU] = fill_kernel}, .grad = fill_grad},
    {.name = "ZerosLike", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_NOT_DIFFERENTIABLE | MF_OP_COMPLEX,
     .infer = like_infer, .kernel = {[MF_CPU] = zeros_like_kernel}},
    {.name = "OnesLike", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_NOT_DIFFERENTIABLE | MF_OP_COMPLEX,
     .infer = like_infer, .kernel = {[MF_CPU] = ones_like_kernel}},
    {.name = "Tile", .flags = MF_OP_COMPLEX, .num_inputs = 1, .num_outputs = 1,
     .infer = tile_infer, .kernel = {[MF_CPU] = tile_kernel}, .grad = tile_grad},
    {.name = "Slice", .flags = MF_OP_COMPLEX, .num_inputs = 1, .num_outputs = 1,
     .infer = slice_infer, .kernel = {[MF_CPU] = slice_kernel}, .grad = slice_grad},
    {.name = "StridedSlice", .flags = MF_OP_COMPLEX, .num_inputs = 1, .num_outputs = 1,
     .infer = strided_slice_infer, .kernel = {[MF_CPU] = strided_slice_kernel},
     .grad = strided_slice_grad, .build_value = {.scalar = strided_slice_build_scalar}},
    {.name = "StridedSliceGrad", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_INTERNAL | MF_OP_COMPLEX, .value_inputs = 1u << 0,
     .infer = strided_slice_grad_infer, .kernel = {[MF_CPU] = strided_slice_grad_kernel},
     .grad = strided_slice_grad_grad},
    {.name = "Pack", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_VARIADIC_INPUTS | MF_OP_COMPLEX,
     .infer = pack_infer, .kernel = {[MF_CPU] = pack_kernel}, .grad = pack_grad,
     .build_value = {.shape = pack_build_value}},
    {.name = "Unpack", .flags = MF_OP_COMPLEX, .num_inputs = 1, .num_outputs = -1,
     .infer = unpack_infer, .kernel = {[MF_CPU] = unpack_kernel}, .grad = unpack_grad,
     .build_value = {.scalar = unpack_build_scalar}},
    {.name = "Concat", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_VARIADIC_INPUTS | MF_OP_COMPLEX,
     .infer = concat_infer, .kernel = {[MF_CPU] = concat_kernel}, .grad = concat_grad},
    {.name = "SplitV", .flags = MF_OP_COMPLEX, .num_inputs = 2, .num_outputs = -1, .value_inputs = 1u << 1,
     .infer = split_infer, .kernel = {[MF_CPU] = split_kernel}, .grad = split_grad},
    {.name = "Squeeze", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_SETS_OUTPUTS | MF_OP_STRINGS | MF_OP_COMPLEX,
     .infer = squeeze_infer, .kernel = {[MF_CPU] = view_kernel, [MF_CUDA] = view_kernel}, .grad = reshape_grad},
    {.name = "ExpandDims", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_SETS_OUTPUTS | MF_OP_STRINGS | MF_OP_COMPLEX,
     .infer = expand_dims_infer, .kernel = {[MF_CPU] = view_kernel, [MF_CUDA] = view_kernel},
     .grad = reshape_grad},
    {.name = "Transpose", .flags = MF_OP_COMPLEX, .num_inputs = 1, .num_outputs = 1,
     .infer = transpose_infer, .kernel = {[MF_CPU] = transpose_kernel}, .grad = transpose_grad},
    {.name = "BroadcastTo", .flags = MF_OP_COMPLEX, .num_inputs = 2, .num_outputs = 1, .value_inputs = 1u << 1,
     .infer = broadcast_to_infer, .kernel = {[MF_CPU] = broadcast_to_kernel},
     .grad = broadcast_to_grad},
    {.name = "Range", .num_inputs = 3, .num_outputs = 1, .value_inputs = 0x7u, .flags = MF_OP_NOT_DIFFERENTIABLE,
     .infer = range_infer, .kernel = {[MF_CPU] = range_kernel}},
};
MF_OP_TABLE(mf_ops_array, defs);
