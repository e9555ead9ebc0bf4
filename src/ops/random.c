/* random.c — random sources: RandomUniform, RandomUniformInt, RandomNormal,
 * TruncatedNormal, and the random selections RandomShuffle and Multinomial.
 *
 * Counter-based: every element comes from one Philox4x32-10 block (Salmon et
 * al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) addressed by
 *   key     = (seed, seed2)             low 32 bits of each; wider seeds fold
 *                                       their high halves into the other word
 *   counter = (block lo, block hi, run lo, run hi)
 * where `run` counts this op's previous runs in the session and `block` is the
 * element index divided by the values one block yields. So a value depends
 * only on (seed, seed2, run, index): reproducible, and the same whatever
 * order or thread computes it. The Lua layer truncates seeds to 31 bits as
 * TensorFlow does, so there (seed, seed2) maps to the key one-to-one.
 *
 * Conversions (these fix the numbers users see; change them only knowingly):
 *   float32 uniform: (w >> 8) * 2^-24, four values per block;
 *   float64 uniform: ((w[2j] << 32 | w[2j+1]) >> 11) * 2^-53, two per block;
 *   integer uniform: minval + r mod (maxval - minval) for the 64-bit word
 *   r = w[2j] << 32 | w[2j+1], two per block, with rejection (see
 *   uniform_int_kernel);
 *   normal: Box-Muller on (u1, u2) = the two uniforms of a pair, with u1 moved
 *   to (0, 1] for the log: z = sqrt(-2 ln u1) * (cos, sin)(2 pi u2); float32
 *   gives two pairs per block, float64 one.
 *   truncated normal: the normals of block b (as above) fill the group of
 *   elements [b*PER, b*PER + PER) in order, skipping those with |z| >= 2; when
 *   a block runs short, blocks b + k*2^40 (k = 1, 2, ...) continue the group.
 *   So a group depends only on (seed, seed2, run, b), as for the other ops.
 *   shuffle (RandomShuffle): Fisher-Yates from the last row down; step i swaps
 *   row i with row r_i mod (i + 1), where r_i = w[2j] << 32 | w[2j+1] is the
 *   64-bit word j = i % 2 of block i / 2 (the bias of the modulo is below
 *   2^-32 for any dimension that fits in memory).
 *   multinomial: sample s of row b is element e = b * num_samples + s, drawn
 *   as the float64 uniform u of element e (as above) and placed by inverting
 *   the row's cumulative distribution: the first class c whose running sum of
 *   exp(logit - max logit) exceeds u times the total. */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"
#include "kernels/philox.h"
#include "ops/random.h"
#include "ops/gpu/gpu.h"

#include <stdatomic.h>
#include <string.h>

typedef void (*fill_fn)(void *out, int64_t n, const uint32_t key[2], uint64_t run);

/* Fills n values of T, PER per block: element i comes from block i / PER. */
#define DEFINE_FILL(NAME, T, PER, CONVERT)                                       \
  static void NAME(void *out_, int64_t n, const uint32_t key[2], uint64_t run) { \
    T *out = out_;                                                               \
    uint32_t c[4];                                                               \
    int64_t full = n / (PER), rest = n % (PER);                                  \
    for (int64_t b = 0; b < full; b++) {                                         \
      mf_philox_block(c, b, run, key);                                           \
      CONVERT(c, out + b * (PER));                                               \
    }                                                                            \
    if (rest) {                                                                  \
      T tail[PER];                                                               \
      mf_philox_block(c, full, run, key);                                        \
      CONVERT(c, tail);                                                          \
      for (int64_t j = 0; j < rest; j++) out[full * (PER) + j] = tail[j];        \
    }                                                                            \
  }
DEFINE_FILL(fill_uniform_f32, float, MF_PER_BLOCK_F32, mf_uniform_f32)
DEFINE_FILL(fill_uniform_f64, double, MF_PER_BLOCK_F64, mf_uniform_f64)
DEFINE_FILL(fill_normal_f32, float, MF_PER_BLOCK_F32, mf_normal_f32)
DEFINE_FILL(fill_normal_f64, double, MF_PER_BLOCK_F64, mf_normal_f64)

/* TensorFlow's truncation: normals of magnitude 2 or more are drawn again
 * (kernels/philox.h's groups). */
#define DEFINE_TRUNCATED_FILL(NAME, PER, GROUP)                                   \
  static void NAME(void *out, int64_t n, const uint32_t key[2], uint64_t run) { \
    for (int64_t b = 0; b * (PER) < n; b++) GROUP(out, b, n, run, key);         \
  }
DEFINE_TRUNCATED_FILL(fill_truncated_f32, MF_PER_BLOCK_F32, mf_truncated_group_f32)
DEFINE_TRUNCATED_FILL(fill_truncated_f64, MF_PER_BLOCK_F64, mf_truncated_group_f64)

/* Output 0 of dtype, its shape from input 0 (an int32/int64 vector). */
static mf_code shape_from_input(mf_infer_ctx *ic, mf_dtype dtype) {
  mf_dtype st = ic->in_dtypes[0];
  if (st != MF_INT32 && st != MF_INT64)
    return MF_INVALID(ic->status,
                      "%s: shape must be an int32 or int64 tensor, got %s", ic->op_name,
                      mf_dtype_name(st));
  const mf_shape *ss = &ic->in_shapes[0];
  if (ss->rank >= 0 && ss->rank != 1)
    return MF_INVALID(ic->status,
                      "%s: shape must be a vector (rank 1), got rank %d", ic->op_name, ss->rank);
  if (ss->rank == 1 && ss->dims[0] > MF_MAX_RANK)
    return MF_INVALID(ic->status, "%s: shape has %lld dimensions, at most %d allowed",
                      ic->op_name, (long long)ss->dims[0], MF_MAX_RANK);
  ic->out_dtypes[0] = dtype;
  mf_tensor *v = ic->in_values[0];
  if (!v) {
    ic->out_shapes[0] = mf_infer_shape_value(ic, 0);
    return MF_OK;
  }
  mf_shape out = {.rank = (int)v->size};
  for (int i = 0; i < out.rank; i++) {
    out.dims[i] = mf_load_int64(v->data, v->dtype, i);
    if (out.dims[i] < 0)
      return MF_INVALID(ic->status,
                        "%s: shape must be non-negative, got %lld for dimension %d",
                        ic->op_name, (long long)out.dims[i], i);
  }
  ic->out_shapes[0] = out;
  return MF_OK;
}

/* Inputs: shape (int32/int64 vector). Attrs: dtype (float32/float64), seed, seed2. */
static mf_code random_infer(mf_infer_ctx *ic) {
  mf_dtype dtype = mf_attr_type(ic->attrs, "dtype", MF_FLOAT32);
  if (!mf_dtype_is_float(dtype))
    return MF_INVALID(ic->status,
                      "%s: dtype must be float32 or float64, got %s; tf.cast the result for "
                      "other dtypes", ic->op_name, mf_dtype_name(dtype));
  return shape_from_input(ic, dtype);
}

/* Per-session state: how many times the op ran, so each run draws new numbers
 * and a new session starts the sequence again. */
typedef struct rng_state { _Atomic uint64_t runs; } rng_state;

static void *rng_state_new(mf_kernel_ctx *ctx) {
  (void)ctx;
  return mf_calloc(1, sizeof(rng_state));
}

mf_code mf_random_next_run(mf_kernel_ctx *ctx, uint32_t key[2], uint64_t *run) {
  rng_state *st = mf_kernel_state(ctx, rng_state_new, mf_free);
  if (!st) return ctx->status->code;
  uint64_t seed = (uint64_t)mf_attr_int(ctx->attrs, "seed", 0);
  uint64_t seed2 = (uint64_t)mf_attr_int(ctx->attrs, "seed2", 0);
  key[0] = (uint32_t)seed ^ (uint32_t)(seed2 >> 32);
  key[1] = (uint32_t)seed2 ^ (uint32_t)(seed >> 32);
  *run = atomic_fetch_add_explicit(&st->runs, 1, memory_order_relaxed);
  return MF_OK;
}

static mf_code random_run(mf_kernel_ctx *ctx, fill_fn f32, fill_fn f64) {
  uint32_t key[2];
  uint64_t run;
  if (mf_random_next_run(ctx, key, &run)) return ctx->status->code;
  mf_tensor *out = ctx->outputs[0];
  (out->dtype == MF_FLOAT32 ? f32 : f64)(out->data, out->size, key, run);
  return MF_OK;
}

static mf_code uniform_kernel(mf_kernel_ctx *ctx) {
  return random_run(ctx, fill_uniform_f32, fill_uniform_f64);
}
static mf_code normal_kernel(mf_kernel_ctx *ctx) {
  return random_run(ctx, fill_normal_f32, fill_normal_f64);
}
static mf_code truncated_kernel(mf_kernel_ctx *ctx) {
  return random_run(ctx, fill_truncated_f32, fill_truncated_f64);
}

/* ---------- RandomUniformInt ---------- */

/* RandomUniformInt(shape, minval, maxval): attrs seed, seed2. Integers
 * uniform in [minval, maxval), of the bounds' dtype (int32 or int64, both
 * scalars of the same dtype); maxval > minval. */
static mf_code uniform_int_infer(mf_infer_ctx *ic) {
  char buf[160];
  mf_dtype dt = ic->in_dtypes[1];
  if (dt != MF_INT32 && dt != MF_INT64)
    return MF_INVALID(ic->status, "%s: minval and maxval must be int32 or int64, got %s",
                      ic->op_name, mf_dtype_name(dt));
  if (ic->in_dtypes[2] != dt)
    return MF_INVALID(ic->status, "%s: minval is %s but maxval is %s", ic->op_name,
                      mf_dtype_name(dt), mf_dtype_name(ic->in_dtypes[2]));
  for (int i = 1; i <= 2; i++)
    if (ic->in_shapes[i].rank > 0)
      return MF_INVALID(ic->status, "%s: %s must be a scalar, got shape %s", ic->op_name,
                        i == 1 ? "minval" : "maxval", mf_shape_str(&ic->in_shapes[i], buf, sizeof buf));
  if (ic->in_values[1] && ic->in_values[2]) {
    int64_t lo = mf_load_int64(ic->in_values[1]->data, dt, 0), hi = mf_load_int64(ic->in_values[2]->data, dt, 0);
    if (hi <= lo)
      return MF_INVALID(ic->status, "%s: need minval < maxval, got minval %lld, maxval %lld",
                        ic->op_name, (long long)lo, (long long)hi);
  }
  return shape_from_input(ic, dt);
}

mf_code mf_random_int_bounds(mf_kernel_ctx *ctx, int64_t *lo, uint64_t *range, uint64_t *reject_below) {
  const mf_tensor *lo_t = ctx->inputs[1], *hi_t = ctx->inputs[2];
  int64_t hi = mf_load_int64(hi_t->data, hi_t->dtype, 0);
  *lo = mf_load_int64(lo_t->data, lo_t->dtype, 0);
  if (hi <= *lo)
    return MF_INVALID(ctx->status, "%s: need minval < maxval, got minval %lld, maxval %lld",
                      ctx->op->name, (long long)*lo, (long long)hi);
  *range = (uint64_t)hi - (uint64_t)*lo;
  *reject_below = (0 - *range) % *range;
  return MF_OK;
}

/* Element e takes the 64-bit word e % 2 of block e / 2; a word in the
 * incomplete last stretch of [0, 2^64) below (2^64 - range) mod range is
 * rejected (probability under range / 2^64) and the same word of block
 * e / 2 + k * 2^40 (k = 1, 2, ...) drawn instead, so r mod range is exactly
 * uniform and element e still depends only on (seed, seed2, run, e). */
static mf_code uniform_int_kernel(mf_kernel_ctx *ctx) {
  uint32_t key[2];
  uint64_t run;
  if (mf_random_next_run(ctx, key, &run)) return ctx->status->code;
  int64_t lo;
  uint64_t range, reject_below;
  if (mf_random_int_bounds(ctx, &lo, &range, &reject_below)) return ctx->status->code;
  mf_tensor *out = ctx->outputs[0];
  uint32_t c[4];
  for (int64_t e = 0; e < out->size; e++) {
    if (e % 2 == 0) mf_philox_block(c, e / 2, run, key);
    uint64_t r = mf_uniform_int_word(c, e, reject_below, run, key);
    uint64_t v = (uint64_t)lo + r % range;
    if (out->dtype == MF_INT64) ((int64_t *)out->data)[e] = (int64_t)v;
    else ((int32_t *)out->data)[e] = (int32_t)(int64_t)v;
  }
  return MF_OK;
}

/* ---------- RandomShuffle ---------- */

/* RandomShuffle(value): attrs seed, seed2. The rows (along the first dim) in
 * a random order; a scalar passes as is. */
static mf_code shuffle_infer(mf_infer_ctx *ic) {
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

/* Row moves out[i] = in[perm[i]]: rows of one 4- or 8-byte element are plain
 * assignments, longer rows memcpy. */
#define DEFINE_PERMUTE(T)                                                         \
  static void permute_##T(T *out, const T *in, const int64_t *perm, int64_t n) { \
    for (int64_t i = 0; i < n; i++) out[i] = in[perm[i]];                        \
  }
DEFINE_PERMUTE(uint32_t)
DEFINE_PERMUTE(uint64_t)
#undef DEFINE_PERMUTE

static mf_code shuffle_kernel(mf_kernel_ctx *ctx) {
  uint32_t key[2];
  uint64_t run;
  if (mf_random_next_run(ctx, key, &run)) return ctx->status->code;
  const mf_tensor *in = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  int64_t n = in->rank > 0 ? in->dims[0] : 1;
  if (in->size == 0) return MF_OK;
  int64_t *perm = mf_malloc((size_t)n * sizeof *perm);
  if (!perm) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  uint32_t c[4];
  for (int64_t i = n - 1; i > 0; i--) {
    if (i == n - 1 || i % 2 == 1) mf_philox_block(c, i / 2, run, key);
    int j = (int)(i % 2) * 2;
    uint64_t r = (uint64_t)c[j] << 32 | c[j + 1];
    int64_t k = (int64_t)(r % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[k];
    perm[k] = t;
  }
  size_t row = mf_tensor_nbytes(in) / (size_t)n;
  if (row == 8) permute_uint64_t(out->data, in->data, perm, n);
  else if (row == 4) permute_uint32_t(out->data, in->data, perm, n);
  else
    for (int64_t i = 0; i < n; i++)
      memcpy((char *)out->data + (size_t)i * row, (const char *)in->data + (size_t)perm[i] * row, row);
  mf_free(perm);
  return MF_OK;
}

/* ---------- Multinomial ---------- */

/* Multinomial(logits [batch, classes], num_samples): attrs seed, seed2,
 * output_dtype (int64 default, or int32). Class indices drawn with the
 * probabilities softmax(logits) of each row. */
static mf_code multinomial_infer(mf_infer_ctx *ic) {
  char buf[160];
  if (!mf_dtype_is_float(ic->in_dtypes[0]))
    return MF_INVALID(ic->status, "%s: logits must be float32 or float64, got %s; use tf.cast",
                      ic->op_name, mf_dtype_name(ic->in_dtypes[0]));
  const mf_shape *l = &ic->in_shapes[0];
  if (l->rank >= 0 && l->rank != 2)
    return MF_INVALID(ic->status, "%s: logits must be a matrix [batch, classes], got shape %s",
                      ic->op_name, mf_shape_str(l, buf, sizeof buf));
  mf_dtype nt = ic->in_dtypes[1];
  if ((nt != MF_INT32 && nt != MF_INT64) || ic->in_shapes[1].rank > 0)
    return MF_INVALID(ic->status, "%s: num_samples must be an int32 or int64 scalar, got %s "
                      "of shape %s", ic->op_name, mf_dtype_name(nt), mf_shape_str(&ic->in_shapes[1], buf, sizeof buf));
  mf_dtype ot = mf_attr_type(ic->attrs, "output_dtype", MF_INT64);
  if (ot != MF_INT32 && ot != MF_INT64)
    return MF_INVALID(ic->status, "%s: output_dtype must be int32 or int64, got %s",
                      ic->op_name, mf_dtype_name(ot));
  int64_t samples = -1;
  if (ic->in_values[1]) {
    samples = mf_load_int64(ic->in_values[1]->data, nt, 0);
    if (samples < 0)
      return MF_INVALID(ic->status, "%s: num_samples must be non-negative, got %lld",
                        ic->op_name, (long long)samples);
  }
  if (l->rank == 2 && l->dims[1] == 0 && samples != 0)
    return MF_INVALID(ic->status, "%s: logits has no classes to draw from (shape %s)",
                      ic->op_name, mf_shape_str(l, buf, sizeof buf));
  ic->out_dtypes[0] = ot;
  ic->out_shapes[0] = (mf_shape){.rank = 2, .dims = {l->rank == 2 ? l->dims[0] : -1, samples}};
  return MF_OK;
}

/* The n samples of one row from element e on, given the row's cumulative
 * sums cdf[0..classes). */
#define DEFINE_SAMPLE(T)                                                                    \
  static void sample_##T(T *out, const double *cdf, int64_t classes, int64_t e, int64_t n, \
                         const uint32_t key[2], uint64_t run) {                            \
    uint32_t c[4];                                                                         \
    double total = cdf[classes - 1];                                                       \
    for (int64_t s = 0; s < n; s++, e++) {                                                 \
      if (s == 0 || e % 2 == 0) mf_philox_block(c, e / 2, run, key);                          \
      int j = (int)(e % 2) * 2;                                                            \
      double target = MF_U53(c[j], c[j + 1]) * total;                                         \
      int64_t lo = 0, hi = classes - 1;                                                    \
      while (lo < hi) {                                                                    \
        int64_t mid = lo + (hi - lo) / 2;                                                  \
        if (cdf[mid] > target) hi = mid;                                                   \
        else lo = mid + 1;                                                                 \
      }                                                                                    \
      out[s] = (T)lo;                                                                      \
    }                                                                                      \
  }
DEFINE_SAMPLE(int32_t)
DEFINE_SAMPLE(int64_t)
#undef DEFINE_SAMPLE

static mf_code multinomial_kernel(mf_kernel_ctx *ctx) {
  uint32_t key[2];
  uint64_t run;
  if (mf_random_next_run(ctx, key, &run)) return ctx->status->code;
  const mf_tensor *logits = ctx->inputs[0];
  mf_tensor *out = ctx->outputs[0];
  int64_t batch = logits->dims[0], classes = logits->dims[1], n = out->dims[1];
  if (out->size == 0) return MF_OK;
  double *cdf = mf_malloc((size_t)classes * sizeof *cdf);
  if (!cdf) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  for (int64_t b = 0; b < batch; b++) {
    if (logits->dtype == MF_FLOAT32)
      for (int64_t k = 0; k < classes; k++) cdf[k] = ((const float *)logits->data)[b * classes + k];
    else
      memcpy(cdf, (const double *)logits->data + b * classes, (size_t)classes * sizeof *cdf);
    double max = -INFINITY;
    bool nan = false;
    for (int64_t k = 0; k < classes; k++) {
      nan |= isnan(cdf[k]);
      if (cdf[k] > max) max = cdf[k];
    }
    if (nan || !isfinite(max)) {
      mf_free(cdf);
      return MF_INVALID(ctx->status,
                        "%s: row %lld of logits has %s; every row needs a finite largest logit", ctx->op->name,
                        (long long)b, nan ? "a nan" : max > 0 ? "an inf" : "only -inf");
    }
    double acc = 0;
    for (int64_t k = 0; k < classes; k++) cdf[k] = acc += exp(cdf[k] - max);
    if (out->dtype == MF_INT64) sample_int64_t((int64_t *)out->data + b * n, cdf, classes, b * n, n, key, run);
    else sample_int32_t((int32_t *)out->data + b * n, cdf, classes, b * n, n, key, run);
  }
  mf_free(cdf);
  return MF_OK;
}

/* The GPU kernels (ops/gpu/random.c) draw the same numbers from kernels/philox.h. */
static const unsigned FLOAT_TYPES = MF_DTYPE_MASK(MF_FOR_FLOAT_TYPES);

static const mf_op_def defs[] = {
    {.name = "RandomUniform", .num_inputs = 1, .num_outputs = 1, .value_inputs = 1u << 0,
     .flags = MF_OP_STATEFUL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = random_infer, .kernel = {[MF_CPU] = uniform_kernel, [MF_CUDA] = mf_gpu_random_uniform},
     .cuda_dtypes = FLOAT_TYPES},
    {.name = "RandomUniformInt", .num_inputs = 3, .num_outputs = 1, .value_inputs = 0x7u,
     .flags = MF_OP_STATEFUL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = uniform_int_infer, .kernel = {[MF_CPU] = uniform_int_kernel, [MF_CUDA] = mf_gpu_random_uniform_int},
     .cuda_dtypes = (1u << MF_INT32) | (1u << MF_INT64)},
    {.name = "RandomNormal", .num_inputs = 1, .num_outputs = 1, .value_inputs = 1u << 0,
     .flags = MF_OP_STATEFUL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = random_infer, .kernel = {[MF_CPU] = normal_kernel, [MF_CUDA] = mf_gpu_random_normal},
     .cuda_dtypes = FLOAT_TYPES},
    {.name = "TruncatedNormal", .num_inputs = 1, .num_outputs = 1, .value_inputs = 1u << 0,
     .flags = MF_OP_STATEFUL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = random_infer, .kernel = {[MF_CPU] = truncated_kernel, [MF_CUDA] = mf_gpu_truncated_normal},
     .cuda_dtypes = FLOAT_TYPES},
    {.name = "RandomShuffle", .num_inputs = 1, .num_outputs = 1,
     .flags = MF_OP_STATEFUL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = shuffle_infer, .kernel = {[MF_CPU] = shuffle_kernel}},
    {.name = "Multinomial", .num_inputs = 2, .num_outputs = 1, .value_inputs = 1u << 1,
     .flags = MF_OP_STATEFUL | MF_OP_NOT_DIFFERENTIABLE,
     .infer = multinomial_infer, .kernel = {[MF_CPU] = multinomial_kernel}},
};
MF_OP_TABLE(mf_ops_random, defs);
