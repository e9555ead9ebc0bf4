/* image.c — tf.image's resampling ops, TensorFlow's, with their gradients:
 * ResizeBilinear and ResizeNearestNeighbor (images [batch, height, width,
 * channels], size an int32 [new_height, new_width]) and the gradient ops
 * ResizeBilinearGrad and ResizeNearestNeighborGrad. Flips, crops, pads,
 * standardization, grayscale, brightness and contrast are composites
 * (lua/moonflow/ops/image.lua).
 *
 * The sampling is TensorFlow's to the bit: the scale from input to output
 * is a float, (in - 1) / (out - 1) with align_corners (and out > 1), else
 * in / out; output pixel x reads input position x * scale, or with
 * half_pixel_centers (x + 0.5) * scale - 0.5 (bilinear) and (x + 0.5) *
 * scale (nearest). Bilinear interpolates in float whatever the input dtype
 * and gives float32, as TensorFlow's kernel does; nearest keeps the dtype.
 * The gradient ops add each output pixel's gradient into the input pixels
 * it was read from, with the same weights. */
#include "core/status.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "kernels/helpers.h"
#include "exec/kernel_api.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const unsigned FLOAT_TYPES = MF_DTYPE_MASK(MF_FOR_FLOAT_TYPES);

/* ---------- sampling (shared by kernels and gradient kernels) ---------- */

typedef struct sampling {
  bool align_corners, half_pixel_centers;
} sampling;

static sampling sampling_of(const mf_attrs *attrs) {
  return (sampling){mf_attr_bool(attrs, "align_corners", false), mf_attr_bool(attrs, "half_pixel_centers", false)};
}

/* TensorFlow's CalculateResizeScale: from an output of out_size pixels back
 * to an input of in_size, in float. */
static float resize_scale(int64_t in_size, int64_t out_size, bool align_corners) {
  return align_corners && out_size > 1 ? (float)(in_size - 1) / (float)(out_size - 1)
                                       : (float)in_size / (float)out_size;
}

/* The input row (or column) that nearest-neighbor output pixel i reads. */
static int64_t nearest_index(int64_t i, float scale, int64_t in_size, sampling s) {
  float at = s.half_pixel_centers ? ((float)i + 0.5f) * scale : (float)i * scale;
  int64_t k = s.align_corners ? (int64_t)roundf(at) : (int64_t)floorf(at);
  if (k > in_size - 1) k = in_size - 1;
  return s.half_pixel_centers && k < 0 ? 0 : k;
}

/* Where bilinear output pixel i reads: between input pixels lower and upper,
 * weight lerp on upper (TensorFlow's CachedInterpolation). */
typedef struct lerp_at { int64_t lower, upper; float lerp; } lerp_at;

static lerp_at bilinear_at(int64_t i, float scale, int64_t in_size, sampling s) {
  float at = s.half_pixel_centers ? ((float)i + 0.5f) * scale - 0.5f : (float)i * scale;
  float below = floorf(at);
  int64_t lower = (int64_t)below, upper = (int64_t)ceilf(at);
  return (lerp_at){lower < 0 ? 0 : lower, upper > in_size - 1 ? in_size - 1 : upper, at - below};
}

/* ---------- shape inference ---------- */

/* Input i is a batch of images: rank 4, a dtype of `dtypes`. */
static mf_code check_images(mf_infer_ctx *ic, int i, const char *what, unsigned dtypes) {
  char has[64], buf[160];
  snprintf(has, sizeof has, "%s has", what);
  if (mf_check_dtype(ic, i, has, dtypes)) return ic->status->code;
  const mf_shape *s = &ic->in_shapes[i];
  if (s->rank >= 0 && s->rank != 4)
    return MF_INVALID(ic->status, "%s: %s must be 4-dimensional [batch, height, width, channels], got shape %s",
                      ic->op_name, what, mf_shape_str(s, buf, sizeof buf));
  return MF_OK;
}

/* A new size: 2 positive elements (TensorFlow's words). */
static mf_code check_size_values(const char *op, int64_t height, int64_t width, mf_status *s) {
  if (height <= 0 || width <= 0)
    return MF_INVALID(s, "%s: output dimensions must be positive, got size [%lld, %lld]", op, (long long)height,
                      (long long)width);
  return MF_OK;
}

/* Input i is the size: an int32 vector of 2; *size gets what is known of it. */
static mf_code check_size(mf_infer_ctx *ic, int i, int64_t size[2]) {
  char buf[160];
  size[0] = size[1] = -1;
  if (mf_check_dtype(ic, i, "size has", 1u << MF_INT32)) return ic->status->code;
  const mf_shape *s = &ic->in_shapes[i];
  if (s->rank >= 0 && (s->rank != 1 || (s->dims[0] >= 0 && s->dims[0] != 2)))
    return MF_INVALID(ic->status, "%s: size must be a vector of 2 elements [new_height, new_width], got shape %s",
                      ic->op_name, mf_shape_str(s, buf, sizeof buf));
  const mf_tensor *v = ic->in_values[i];
  if (v) {
    size[0] = mf_load_int64(v->data, v->dtype, 0);
    size[1] = mf_load_int64(v->data, v->dtype, 1);
    return check_size_values(ic->op_name, size[0], size[1], ic->status);
  }
  mf_shape known = mf_infer_shape_value(ic, i);
  if (known.rank == 2) {
    size[0] = known.dims[0];
    size[1] = known.dims[1];
  }
  return MF_OK;
}

/* An input image with no pixels cannot be resized into one with some. */
static mf_code check_not_empty(const char *op, const mf_shape *images, mf_status *s) {
  char buf[160];
  if (images->rank == 4 && (images->dims[1] == 0 || images->dims[2] == 0))
    return MF_INVALID(s, "%s: input image must be of non-zero size, got shape %s", op,
                      mf_shape_str(images, buf, sizeof buf));
  return MF_OK;
}

static mf_code check_sampling(const char *op, sampling smp, mf_status *s) {
  if (smp.half_pixel_centers && smp.align_corners)
    return MF_INVALID(s, "%s: if half_pixel_centers is True, align_corners must be False.", op);
  return MF_OK;
}

/* [batch, height, width, channels] of images with the height and width of size. */
static mf_shape resized_shape(const mf_shape *images, const int64_t size[2]) {
  int64_t batch = images->rank == 4 ? images->dims[0] : -1, channels = images->rank == 4 ? images->dims[3] : -1;
  return mf_shape_make(4, (int64_t[]){batch, size[0], size[1], channels});
}

/* ResizeBilinear / ResizeNearestNeighbor(images, size); output dtype float32
 * (bilinear) or the images' (nearest). ResizeNearestNeighborGrad(grads, size)
 * is this too: the original size comes back in size. */
static mf_code resize_infer(mf_infer_ctx *ic) {
  bool bilinear = strcmp(ic->def->name, "ResizeBilinear") == 0;
  bool grad = strcmp(ic->def->name, "ResizeNearestNeighborGrad") == 0;
  int64_t size[2];
  if (check_sampling(ic->op_name, sampling_of(ic->attrs), ic->status) ||
      check_images(ic, 0, grad ? "grads" : "images",
                   grad ? FLOAT_TYPES : MF_DTYPE_MASK(MF_FOR_NUMERIC_TYPES)) ||
      check_size(ic, 1, size) || (!grad && check_not_empty(ic->op_name, &ic->in_shapes[0], ic->status)))
    return ic->status->code;
  ic->out_dtypes[0] = bilinear ? MF_FLOAT32 : ic->in_dtypes[0];
  ic->out_shapes[0] = resized_shape(&ic->in_shapes[0], size);
  return MF_OK;
}

/* ResizeBilinearGrad(grads float32, original_image): original_image's shape and dtype. */
static mf_code bilinear_grad_infer(mf_infer_ctx *ic) {
  char a[160], b[160];
  if (check_sampling(ic->op_name, sampling_of(ic->attrs), ic->status) ||
      check_images(ic, 0, "grads", 1u << MF_FLOAT32) || check_images(ic, 1, "original_image", FLOAT_TYPES))
    return ic->status->code;
  const mf_shape *g = &ic->in_shapes[0], *o = &ic->in_shapes[1];
  if (g->rank == 4 && o->rank == 4)
    for (int d = 0; d < 4; d += 3)
      if (g->dims[d] >= 0 && o->dims[d] >= 0 && g->dims[d] != o->dims[d])
        return MF_INVALID(ic->status, "%s: grads %s and original_image %s differ in batch or channels", ic->op_name,
                          mf_shape_str(g, a, sizeof a), mf_shape_str(o, b, sizeof b));
  ic->out_dtypes[0] = ic->in_dtypes[1];
  ic->out_shapes[0] = *o;
  return MF_OK;
}

/* ---------- kernels ---------- */

/* One batch of images as the kernels see it: dims and the scales from the
 * output's rows and columns back to the input's. */
typedef struct resize_job {
  const mf_tensor *in;
  mf_tensor *out;
  int64_t batch, in_h, in_w, out_h, out_w, channels;
  float scale_h, scale_w;
  sampling s;
} resize_job;

/* in: the images read (for gradients, the original's size); out: the resized. */
static resize_job job_of(mf_kernel_ctx *ctx, const mf_tensor *in, const mf_tensor *out, const mf_tensor *small,
                         const mf_tensor *large) {
  resize_job j = {.in = in, .out = (mf_tensor *)out, .s = sampling_of(ctx->attrs)};
  j.batch = small->dims[0];
  j.channels = small->dims[3];
  j.in_h = small->dims[1];
  j.in_w = small->dims[2];
  j.out_h = large->dims[1];
  j.out_w = large->dims[2];
  j.scale_h = resize_scale(j.in_h, j.out_h, j.s.align_corners);
  j.scale_w = resize_scale(j.in_w, j.out_w, j.s.align_corners);
  return j;
}

/* Output rows [begin, end) of the flat (batch, row) range. */
#define DEFINE_BILINEAR(code, T)                                                                   \
  static void bilinear_##code(void *arg, int64_t begin, int64_t end) {                             \
    const resize_job *j = arg;                                                                     \
    const T *in = j->in->data;                                                                     \
    float *out = j->out->data;                                                                     \
    int64_t C = j->channels;                                                                       \
    for (int64_t r = begin; r < end; r++) {                                                        \
      int64_t b = r / j->out_h, y = r % j->out_h;                                                  \
      lerp_at ys = bilinear_at(y, j->scale_h, j->in_h, j->s);                                      \
      const T *top = in + ((b * j->in_h + ys.lower) * j->in_w) * C;                                \
      const T *bottom = in + ((b * j->in_h + ys.upper) * j->in_w) * C;                             \
      float *o = out + r * j->out_w * C;                                                           \
      for (int64_t x = 0; x < j->out_w; x++) {                                                     \
        lerp_at xs = bilinear_at(x, j->scale_w, j->in_w, j->s);                                    \
        for (int64_t c = 0; c < C; c++) {                                                          \
          float tl = (float)top[xs.lower * C + c], tr = (float)top[xs.upper * C + c];              \
          float bl = (float)bottom[xs.lower * C + c], br = (float)bottom[xs.upper * C + c];        \
          float t = tl + (tr - tl) * xs.lerp, u = bl + (br - bl) * xs.lerp;                        \
          o[x * C + c] = t + (u - t) * ys.lerp;                                                    \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }
MF_FOR_NUMERIC_TYPES(DEFINE_BILINEAR)

#define DEFINE_NEAREST(code, T)                                                                    \
  static void nearest_##code(void *arg, int64_t begin, int64_t end) {                              \
    const resize_job *j = arg;                                                                     \
    const T *in = j->in->data;                                                                     \
    T *out = j->out->data;                                                                         \
    int64_t C = j->channels;                                                                       \
    for (int64_t r = begin; r < end; r++) {                                                        \
      int64_t b = r / j->out_h, y = r % j->out_h;                                                  \
      const T *row = in + ((b * j->in_h + nearest_index(y, j->scale_h, j->in_h, j->s)) * j->in_w) * C; \
      T *o = out + r * j->out_w * C;                                                               \
      for (int64_t x = 0; x < j->out_w; x++)                                                       \
        memcpy(o + x * C, row + nearest_index(x, j->scale_w, j->in_w, j->s) * C, (size_t)C * sizeof(T)); \
    }                                                                                              \
  }
MF_FOR_NUMERIC_TYPES(DEFINE_NEAREST)

typedef void (*rows_fn)(void *arg, int64_t begin, int64_t end);
#define ROWS_ENTRY(code, T, kind) [code] = kind##_##code,
static const rows_fn bilinear_fns[MF_DTYPE_SLOTS] = {MF_FOR_NUMERIC_TYPES(ROWS_ENTRY, bilinear)};
static const rows_fn nearest_fns[MF_DTYPE_SLOTS] = {MF_FOR_NUMERIC_TYPES(ROWS_ENTRY, nearest)};

/* The checks inference made, again on the values: a fed size or a shape
 * promised by set_shape may disagree. */
static mf_code check_run(mf_kernel_ctx *ctx, const mf_tensor *images, const mf_tensor *size, bool need_pixels) {
  mf_shape s = mf_shape_of(images);
  if (check_sampling(ctx->op->name, sampling_of(ctx->attrs), ctx->status) ||
      check_size_values(ctx->op->name, mf_load_int64(size->data, size->dtype, 0),
                        mf_load_int64(size->data, size->dtype, 1), ctx->status) ||
      (need_pixels && check_not_empty(ctx->op->name, &s, ctx->status)))
    return ctx->status->code;
  return MF_OK;
}

static mf_code resize_kernel(mf_kernel_ctx *ctx, const rows_fn *fns) {
  const mf_tensor *images = ctx->inputs[0];
  if (check_run(ctx, images, ctx->inputs[1], true)) return ctx->status->code;
  resize_job j = job_of(ctx, images, ctx->outputs[0], images, ctx->outputs[0]);
  int64_t rows = j.batch * j.out_h, grain = 1 + 16384 / (1 + j.out_w * j.channels);
  if (ctx->outputs[0]->size) mf_kernel_parallel_for(ctx, rows, grain, fns[images->dtype], &j);
  return MF_OK;
}
static mf_code bilinear_kernel(mf_kernel_ctx *ctx) { return resize_kernel(ctx, bilinear_fns); }
static mf_code nearest_kernel(mf_kernel_ctx *ctx) { return resize_kernel(ctx, nearest_fns); }

/* Gradients: every pixel of grads adds into the original's pixels it was
 * read from (serial: pixels share targets). j.in is grads, j.out the
 * original-sized result, zeroed first. */
#define DEFINE_BILINEAR_GRAD(code, T)                                                              \
  static void bilinear_grad_##code(const resize_job *j) {                                          \
    const float *g = j->in->data;                                                                  \
    T *out = j->out->data;                                                                         \
    int64_t C = j->channels;                                                                       \
    memset(out, 0, (size_t)j->out->size * sizeof(T));                                              \
    for (int64_t b = 0; b < j->batch; b++)                                                         \
      for (int64_t y = 0; y < j->out_h; y++) {                                                     \
        lerp_at ys = bilinear_at(y, j->scale_h, j->in_h, j->s);                                    \
        T *top = out + (b * j->in_h + ys.lower) * j->in_w * C;                                     \
        T *bottom = out + (b * j->in_h + ys.upper) * j->in_w * C;                                  \
        for (int64_t x = 0; x < j->out_w; x++) {                                                   \
          lerp_at xs = bilinear_at(x, j->scale_w, j->in_w, j->s);                                  \
          const float *gp = g + ((b * j->out_h + y) * j->out_w + x) * C;                           \
          for (int64_t c = 0; c < C; c++) {                                                        \
            float d = gp[c], up = d * (1.0f - ys.lerp), down = d * ys.lerp;                        \
            top[xs.lower * C + c] += (T)(up * (1.0f - xs.lerp));                                   \
            top[xs.upper * C + c] += (T)(up * xs.lerp);                                            \
            bottom[xs.lower * C + c] += (T)(down * (1.0f - xs.lerp));                              \
            bottom[xs.upper * C + c] += (T)(down * xs.lerp);                                       \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
  }
MF_FOR_FLOAT_TYPES(DEFINE_BILINEAR_GRAD)

#define DEFINE_NEAREST_GRAD(code, T)                                                               \
  static void nearest_grad_##code(const resize_job *j) {                                           \
    const T *g = j->in->data;                                                                      \
    T *out = j->out->data;                                                                         \
    int64_t C = j->channels;                                                                       \
    memset(out, 0, (size_t)j->out->size * sizeof(T));                                              \
    for (int64_t b = 0; b < j->batch; b++)                                                         \
      for (int64_t y = 0; y < j->out_h; y++) {                                                     \
        T *row = out + (b * j->in_h + nearest_index(y, j->scale_h, j->in_h, j->s)) * j->in_w * C;  \
        for (int64_t x = 0; x < j->out_w; x++) {                                                   \
          T *o = row + nearest_index(x, j->scale_w, j->in_w, j->s) * C;                            \
          const T *gp = g + ((b * j->out_h + y) * j->out_w + x) * C;                               \
          for (int64_t c = 0; c < C; c++) o[c] += gp[c];                                           \
        }                                                                                          \
      }                                                                                            \
  }
MF_FOR_FLOAT_TYPES(DEFINE_NEAREST_GRAD)

typedef void (*grad_fn)(const resize_job *j);
#define GRAD_ENTRY(code, T, kind) [code] = kind##_grad_##code,
static const grad_fn bilinear_grad_fns[MF_DTYPE_SLOTS] = {MF_FOR_FLOAT_TYPES(GRAD_ENTRY, bilinear)};
static const grad_fn nearest_grad_fns[MF_DTYPE_SLOTS] = {MF_FOR_FLOAT_TYPES(GRAD_ENTRY, nearest)};

/* ResizeBilinearGrad(grads, original_image). */
static mf_code bilinear_grad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *grads = ctx->inputs[0], *original = ctx->inputs[1];
  mf_tensor *out = ctx->outputs[0];
  if (check_sampling(ctx->op->name, sampling_of(ctx->attrs), ctx->status)) return ctx->status->code;
  if (grads->dims[0] != original->dims[0] || grads->dims[3] != original->dims[3]) {
    char a[160], b[160];
    mf_shape g = mf_shape_of(grads), o = mf_shape_of(original);
    return MF_INVALID(ctx->status, "%s: grads %s and original_image %s differ in batch or channels", ctx->op->name,
                      mf_shape_str(&g, a, sizeof a), mf_shape_str(&o, b, sizeof b));
  }
  resize_job j = job_of(ctx, grads, out, original, grads);
  bilinear_grad_fns[out->dtype](&j);
  return MF_OK;
}

/* ResizeNearestNeighborGrad(grads, size): size is the original's. */
static mf_code nearest_grad_kernel(mf_kernel_ctx *ctx) {
  const mf_tensor *grads = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  if (check_run(ctx, grads, ctx->inputs[1], false)) return ctx->status->code;
  resize_job j = job_of(ctx, grads, out, out, grads);
  nearest_grad_fns[out->dtype](&j);
  return MF_OK;
}

/* ---------- gradients ---------- */

/* ResizeBilinear: ResizeBilinearGrad of the images (float images only:
 * integer ones get no gradient, as in TensorFlow). */
static mf_code bilinear_grad(mf_grad_ctx *gc) {
  mf_output images = mf_op_in(gc->op, 0);
  if (!mf_dtype_is_float(mf_port_dtype(images))) return MF_OK;
  const mf_output in[2] = {gc->grads[0], images};
  gc->input_grads[0] = mf_grad_rebuild(gc, "ResizeBilinearGrad", in, 2);
  return gc->status->code;
}

/* The height and width of images x as an int32 [2]: Shape(x)[1:3]. */
static mf_output size_of(mf_grad_ctx *gc, mf_output x) {
  mf_op_desc *d = mf_grad_begin(gc, "StridedSlice");
  if (d) {
    mf_op_desc_add_input(d, mf_grad_op1(gc, "Shape", x));
    mf_op_desc_set_attr_ints(d, "begin", (int64_t[]){1}, 1);
    mf_op_desc_set_attr_ints(d, "end", (int64_t[]){3}, 1);
  }
  return mf_grad_finish(gc, d);
}

/* ResizeNearestNeighbor: ResizeNearestNeighborGrad to the images' height and width. */
static mf_code nearest_grad(mf_grad_ctx *gc) {
  const mf_output in[2] = {gc->grads[0], size_of(gc, mf_op_in(gc->op, 0))};
  gc->input_grads[0] = mf_grad_rebuild(gc, "ResizeNearestNeighborGrad", in, 2);
  return gc->status->code;
}

/* The gradient ops are linear in grads, the adjoints of the resizes: their
 * own gradient is the resize again, to the size of grads (so second-order
 * gradients through a resize work; TensorFlow has none). */
static mf_code resize_grad_grad(mf_grad_ctx *gc, const char *resize) {
  mf_output grads = mf_op_in(gc->op, 0);
  const mf_output in[2] = {gc->grads[0], size_of(gc, grads)};
  gc->input_grads[0] = mf_grad_rebuild(gc, resize, in, 2);
  return gc->status->code;
}
static mf_code bilinear_grad_grad(mf_grad_ctx *gc) { return resize_grad_grad(gc, "ResizeBilinear"); }
static mf_code nearest_grad_grad(mf_grad_ctx *gc) { return resize_grad_grad(gc, "ResizeNearestNeighbor"); }

/* ---------- registrations ---------- */

static const mf_op_def defs[] = {
    {.name = "ResizeBilinear", .num_inputs = 2, .num_outputs = 1, .value_inputs = 1u << 1, .infer = resize_infer,
     .kernel = {[MF_CPU] = bilinear_kernel}, .grad = bilinear_grad},
    {.name = "ResizeNearestNeighbor", .num_inputs = 2, .num_outputs = 1, .value_inputs = 1u << 1,
     .infer = resize_infer, .kernel = {[MF_CPU] = nearest_kernel}, .grad = nearest_grad},
    {.name = "ResizeBilinearGrad", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_INTERNAL,
     .infer = bilinear_grad_infer, .kernel = {[MF_CPU] = bilinear_grad_kernel}, .grad = bilinear_grad_grad},
    {.name = "ResizeNearestNeighborGrad", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_INTERNAL,
     .value_inputs = 1u << 1, .infer = resize_infer, .kernel = {[MF_CPU] = nearest_grad_kernel},
     .grad = nearest_grad_grad},
};
MF_OP_TABLE(mf_ops_image, defs);
