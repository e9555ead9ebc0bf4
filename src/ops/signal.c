/* signal.c — tf.signal's discrete Fourier transforms on FFTW: FFT, IFFT,
 * FFT2D, IFFT2D (complex to complex over the innermost one or two axes), RFFT
 * and IRFFT (real to complex and back over the innermost axis, with
 * fft_length), and the internal ops their gradients are.
 *
 * Conventions are NumPy's and TensorFlow's: the forward transform is
 * unnormalized, y_k = sum_n x_n exp(-2 pi i k n / N), and the inverse divides
 * by N. RFFT crops or zero-pads the innermost axis to fft_length N and keeps
 * the N/2 + 1 non-negative frequencies; IRFFT crops or zero-pads its input to
 * N/2 + 1 bins, reads it as the half of a Hermitian spectrum (the imaginary
 * parts of bin 0 and, for even N, bin N/2 ignored) and returns N reals.
 *
 * Gradients are TensorFlow's (for a real loss L and complex z, dL/dz is
 * dL/d(re z) + i dL/d(im z)): FFT's is N * IFFT(dy), written conj(FFT(conj dy))
 * so that no shape-dependent constant is needed, and so on. RFFT's is
 * RFFTGrad: dx_n = re(sum_k dy_k exp(+2 pi i k n / N)), zero where the input
 * was cropped; IRFFT's is IRFFTGrad: dX_k = w_k / N * RFFT(dy)_k with w = 1 for
 * bin 0 and (even N) bin N/2, else 2. Each of the two is linear and the
 * other's adjoint, so their own gradients are RFFT and IRFFT again.
 *
 * FFTW's planner is not thread-safe and keeps process-wide state, so plans are
 * made under one lock and kept for the life of the process in a list keyed by
 * (precision, kind, lengths); executing a plan on new arrays (fftw_execute_dft
 * and friends) is thread-safe, and plans made with FFTW_UNALIGNED take arrays
 * of any alignment. */
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

#include <fftw3.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---------- plans ---------- */

typedef enum { PLAN_FORWARD, PLAN_BACKWARD, PLAN_R2C, PLAN_C2R } plan_kind;

typedef struct plan_entry {
  struct plan_entry *next;
  bool dbl;      /* double precision (fftw_), else float (fftwf_) */
  plan_kind kind;
  int rank;      /* 1 or 2 (complex to complex only) */
  int n[2];
  void *plan;    /* fftw_plan or fftwf_plan */
} plan_entry;

static pthread_mutex_t planner_lock = PTHREAD_MUTEX_INITIALIZER;
static plan_entry *plans; /* guarded by planner_lock; entries never change once listed */

/* Makes the FFTW plan for p's key (under planner_lock). FFTW_ESTIMATE plans
 * without touching the arrays, which are only samples of the sizes. */
static void *make_plan(const plan_entry *p) {
  int n = p->n[0] * (p->rank == 2 ? p->n[1] : 1);
  size_t real_size = p->dbl ? sizeof(double) : sizeof(float);
  void *in = (p->dbl ? fftw_malloc : fftwf_malloc)((size_t)(n > 0 ? n : 1) * 2 * real_size);
  void *out = (p->dbl ? fftw_malloc : fftwf_malloc)((size_t)(n > 0 ? n : 1) * 2 * real_size);
  void *plan = NULL;
  unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
  if (in && out) {
    int sign = p->kind == PLAN_BACKWARD ? FFTW_BACKWARD : FFTW_FORWARD;
    if (p->dbl) {
      if (p->kind == PLAN_R2C) plan = fftw_plan_dft_r2c_1d(p->n[0], in, out, flags);
      else if (p->kind == PLAN_C2R) plan = fftw_plan_dft_c2r_1d(p->n[0], in, out, flags);
      else plan = fftw_plan_dft(p->rank, p->n, in, out, sign, flags);
    } else {
      if (p->kind == PLAN_R2C) plan = fftwf_plan_dft_r2c_1d(p->n[0], in, out, flags);
      else if (p->kind == PLAN_C2R) plan = fftwf_plan_dft_c2r_1d(p->n[0], in, out, flags);
      else plan = fftwf_plan_dft(p->rank, p->n, in, out, sign, flags);
    }
  }
  (p->dbl ? fftw_free : fftwf_free)(in);
  (p->dbl ? fftw_free : fftwf_free)(out);
  return plan;
}

/* The plan for a transform of lengths n (rank 1 or 2); NULL with the status
 * set when FFTW cannot make one (out of memory). */
static const plan_entry *get_plan(bool dbl, plan_kind kind, int rank, const int *n, mf_status *s) {
  pthread_mutex_lock(&planner_lock);
  plan_entry *p = plans;
  for (; p; p = p->next)
    if (p->dbl == dbl && p->kind == kind && p->rank == rank && p->n[0] == n[0] && (rank == 1 || p->n[1] == n[1]))
      break;
  if (!p && (p = calloc(1, sizeof *p))) {
    *p = (plan_entry){.dbl = dbl, .kind = kind, .rank = rank, .n = {n[0], rank == 2 ? n[1] : 0}};
    p->plan = make_plan(p);
    if (p->plan) {
      p->next = plans;
      plans = p;
    } else {
      free(p);
      p = NULL;
    }
  }
  pthread_mutex_unlock(&planner_lock);
  if (!p) mf_status_set(s, MF_RESOURCE_EXHAUSTED, "FFTW could not plan a transform of length %d", n[0]);
  return p;
}

/* Runs plan p from in to out (FFTW's new-array execution). */
static void run_plan(const plan_entry *p, void *in, void *out) {
  if (p->dbl) {
    if (p->kind == PLAN_R2C) fftw_execute_dft_r2c(p->plan, in, out);
    else if (p->kind == PLAN_C2R) fftw_execute_dft_c2r(p->plan, in, out);
    else fftw_execute_dft(p->plan, in, out);
  } else {
    if (p->kind == PLAN_R2C) fftwf_execute_dft_r2c(p->plan, in, out);
    else if (p->kind == PLAN_C2R) fftwf_execute_dft_c2r(p->plan, in, out);
    else fftwf_execute_dft(p->plan, in, out);
  }
}

/* ---------- shape inference ---------- */

#define COMPLEX_MASK MF_DTYPE_MASK(MF_FOR_COMPLEX_TYPES)
#define FLOAT_MASK MF_DTYPE_MASK(MF_FOR_FLOAT_TYPES)

/* The transform's axes: the innermost `rank` of input 0, which needs at least that rank. */
static mf_code check_rank(mf_infer_ctx *ic, int rank) {
  const mf_shape *x = &ic->in_shapes[0];
  if (x->rank >= 0 && x->rank < rank) {
    char buf[128];
    return MF_INVALID(ic->status, "%s: %s transforms the innermost %s of its input, which needs rank >= %d, got shape %s",
                      ic->op_name, ic->def->name, rank == 1 ? "axis" : "2 axes", rank,
                      mf_shape_str(x, buf, sizeof buf));
  }
  return MF_OK;
}

/* FFT, IFFT, FFT2D, IFFT2D: complex in, complex out of the same shape. */
static mf_code c2c_infer(mf_infer_ctx *ic, int rank) {
  if (mf_check_dtype(ic, 0, "input has", COMPLEX_MASK) || check_rank(ic, rank)) return ic->status->code;
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}
static mf_code fft_infer(mf_infer_ctx *ic) { return c2c_infer(ic, 1); }
static mf_code fft2d_infer(mf_infer_ctx *ic) { return c2c_infer(ic, 2); }

/* fft_length (input i): an int32 vector of one non-negative length; -1 when
 * only the run knows it. */
static mf_code fft_length(mf_infer_ctx *ic, int i, int64_t *n) {
  const mf_shape *s = &ic->in_shapes[i];
  char buf[128];
  if (ic->in_dtypes[i] != MF_INT32 || (s->rank >= 0 && (s->rank != 1 || (s->dims[0] >= 0 && s->dims[0] != 1))))
    return MF_INVALID(ic->status, "%s: fft_length must be an int32 vector of one length, got %s of shape %s",
                      ic->op_name, mf_dtype_name(ic->in_dtypes[i]), mf_shape_str(s, buf, sizeof buf));
  *n = -1;
  const mf_tensor *v = ic->in_values[i];
  if (!v) return MF_OK;
  *n = mf_load_int64(v->data, v->dtype, 0);
  if (*n < 0 || *n > INT32_MAX / 2)
    return MF_INVALID(ic->status, "%s: fft_length must be in [0, %d], got %lld", ic->op_name, INT32_MAX / 2,
                      (long long)*n);
  return MF_OK;
}

/* RFFT(input real, fft_length) -> complex [..., N/2 + 1];
 * IRFFT(input complex, fft_length) -> real [..., N]. */
static mf_code real_fft_infer(mf_infer_ctx *ic, bool inverse) {
  int64_t n;
  if (mf_check_dtype(ic, 0, "input has", inverse ? COMPLEX_MASK : FLOAT_MASK) || check_rank(ic, 1) ||
      fft_length(ic, 1, &n))
    return ic->status->code;
  mf_dtype t = ic->in_dtypes[0];
  ic->out_dtypes[0] = inverse ? mf_dtype_real(t) : mf_dtype_complex(t);
  mf_shape out = ic->in_shapes[0];
  if (out.rank > 0) out.dims[out.rank - 1] = n < 0 ? -1 : inverse ? n : n / 2 + 1;
  ic->out_shapes[0] = out;
  return MF_OK;
}
static mf_code rfft_infer(mf_infer_ctx *ic) { return real_fft_infer(ic, false); }
static mf_code irfft_infer(mf_infer_ctx *ic) { return real_fft_infer(ic, true); }

/* RFFTGrad(dy complex [..., N/2 + 1], x real, fft_length) and IRFFTGrad(dy
 * real [..., N], x complex, fft_length) -> x's shape and dtype. */
static mf_code real_fft_grad_infer(mf_infer_ctx *ic) {
  int64_t n;
  if (check_rank(ic, 1) || fft_length(ic, 2, &n)) return ic->status->code;
  const mf_shape *dy = &ic->in_shapes[0];
  int64_t want = strcmp(ic->def->name, "RFFTGrad") == 0 ? n / 2 + 1 : n;
  int64_t got = dy->rank > 0 ? dy->dims[dy->rank - 1] : -1;
  if (n >= 0 && got >= 0 && got != want)
    return MF_INVALID(ic->status, "%s: %s needs a gradient of %lld per row for fft_length %lld, got %lld",
                      ic->op_name, ic->def->name, (long long)want, (long long)n, (long long)got);
  ic->out_dtypes[0] = ic->in_dtypes[1];
  ic->out_shapes[0] = ic->in_shapes[1];
  return MF_OK;
}

/* ---------- kernels ---------- */

/* Innermost length and number of rows of tensor t. */
static int64_t inner_len(const mf_tensor *t) { return t->rank > 0 ? t->dims[t->rank - 1] : 1; }

/* Lengths beyond FFTW's int. */
static mf_code check_length(mf_kernel_ctx *ctx, int64_t n) {
  if (n > INT32_MAX / 2)
    return MF_INVALID(ctx->status, "%s: a transform of length %lld is beyond FFTW's int lengths", ctx->op->name,
                      (long long)n);
  return MF_OK;
}

/* Multiplies the n complex values (parts of dtype dbl) at z by scale. */
static void scale_complex(void *z, bool dbl, int64_t n, double scale) {
  if (dbl) for (int64_t i = 0; i < 2 * n; i++) ((double *)z)[i] *= scale;
  else for (int64_t i = 0; i < 2 * n; i++) ((float *)z)[i] *= (float)scale;
}

/* FFT, IFFT, FFT2D, IFFT2D: one transform per matrix of the innermost axes. */
static mf_code c2c_kernel(mf_kernel_ctx *ctx, int rank, bool inverse) {
  const mf_tensor *x = ctx->inputs[0];
  mf_tensor *y = ctx->outputs[0];
  if (x->size == 0) return MF_OK;
  int n[2] = {0, 0};
  int64_t len = 1;
  for (int d = 0; d < rank; d++) {
    int64_t dim = x->dims[x->rank - rank + d];
    if (check_length(ctx, dim)) return ctx->status->code;
    n[d] = (int)dim;
    len *= dim;
  }
  bool dbl = x->dtype == MF_COMPLEX128;
  const plan_entry *p = get_plan(dbl, inverse ? PLAN_BACKWARD : PLAN_FORWARD, rank, n, ctx->status);
  if (!p) return ctx->status->code;
  size_t elem = mf_dtype_size(x->dtype);
  /* Out of place, FFTW leaves a complex input as it is. */
  for (int64_t at = 0; at < x->size; at += len) {
    void *out = (char *)y->data + (size_t)at * elem;
    run_plan(p, (char *)x->data + (size_t)at * elem, out);
    if (inverse) scale_complex(out, dbl, len, 1.0 / (double)len);
  }
  return MF_OK;
}
static mf_code fft_kernel(mf_kernel_ctx *ctx) { return c2c_kernel(ctx, 1, false); }
static mf_code ifft_kernel(mf_kernel_ctx *ctx) { return c2c_kernel(ctx, 1, true); }
static mf_code fft2d_kernel(mf_kernel_ctx *ctx) { return c2c_kernel(ctx, 2, false); }
static mf_code ifft2d_kernel(mf_kernel_ctx *ctx) { return c2c_kernel(ctx, 2, true); }

/* Copies m elements of `elem` bytes from src to dst and zero-fills dst up to n
 * (m <= n): a row cropped or zero-padded to n. */
static void fit_row(void *dst, const void *src, int64_t m, int64_t n, size_t elem) {
  memcpy(dst, src, (size_t)m * elem);
  memset((char *)dst + (size_t)m * elem, 0, (size_t)(n - m) * elem);
}

/* What the real transforms and their gradients share: fft_length N (input
 * 1, or 2 for the gradients), its N/2 + 1 bins, the innermost lengths and
 * element sizes of input 0 and the output, the rows, and the plan of `kind`
 * (double precision when either side is float64 or complex128). */
typedef struct real_job {
  int64_t n, bins, in_len, out_len, rows;
  size_t in_elem, out_elem;
  bool dbl;
  const plan_entry *plan;
  const char *in;
  char *out;
} real_job;

/* Fills *j and zeroes the output (the parts a transform leaves, cropped away
 * or beyond an empty input, are 0); false when nothing is left to do, with
 * the status set on an error. */
static bool real_job_begin(mf_kernel_ctx *ctx, int length_input, plan_kind kind, real_job *j) {
  const mf_tensor *x = ctx->inputs[0], *nv = ctx->inputs[length_input];
  mf_tensor *y = ctx->outputs[0];
  *j = (real_job){.n = mf_load_int64(nv->data, nv->dtype, 0), .in_len = inner_len(x), .out_len = inner_len(y),
                  .in_elem = mf_dtype_size(x->dtype), .out_elem = mf_dtype_size(y->dtype),
                  .dbl = x->dtype == MF_FLOAT64 || x->dtype == MF_COMPLEX128, .in = x->data, .out = y->data};
  j->bins = j->n / 2 + 1;
  if (y->size == 0) return false;
  memset(y->data, 0, (size_t)y->size * j->out_elem);
  if (j->n == 0 || j->in_len == 0 || check_length(ctx, j->n)) return false;
  j->rows = y->size / j->out_len;
  j->plan = get_plan(j->dbl, kind, 1, (int[]){(int)j->n}, ctx->status);
  return j->plan != NULL;
}

/* Row r of the input and of the output. */
static const char *in_row(const real_job *j, int64_t r) { return j->in + (size_t)(r * j->in_len) * j->in_elem; }
static char *out_row(const real_job *j, int64_t r) { return j->out + (size_t)(r * j->out_len) * j->out_elem; }

/* RFFT: each row cropped or zero-padded to N, then r2c (which leaves its input). */
static mf_code rfft_kernel(mf_kernel_ctx *ctx) {
  real_job j;
  if (!real_job_begin(ctx, 1, PLAN_R2C, &j)) return ctx->status->code;
  void *row = mf_kernel_scratch(ctx, (size_t)j.n * j.in_elem);
  if (!row) return ctx->status->code;
  for (int64_t r = 0; r < j.rows; r++) {
    fit_row(row, in_row(&j, r), j.in_len < j.n ? j.in_len : j.n, j.n, j.in_elem);
    run_plan(j.plan, row, out_row(&j, r));
  }
  return MF_OK;
}

/* Zeroes the imaginary part of complex element i (parts of dtype dbl) at z. */
static void zero_imag(void *z, bool dbl, int64_t i) {
  if (dbl) ((double *)z)[2 * i + 1] = 0;
  else ((float *)z)[2 * i + 1] = 0;
}

/* IRFFT: each row cropped or zero-padded to N/2 + 1 bins, the parts a real
 * signal cannot have dropped, then c2r (which overwrites its input: a copy)
 * and 1/N. */
static mf_code irfft_kernel(mf_kernel_ctx *ctx) {
  real_job j;
  if (!real_job_begin(ctx, 1, PLAN_C2R, &j)) return ctx->status->code;
  void *row = mf_kernel_scratch(ctx, (size_t)j.bins * j.in_elem);
  if (!row) return ctx->status->code;
  for (int64_t r = 0; r < j.rows; r++) {
    fit_row(row, in_row(&j, r), j.in_len < j.bins ? j.in_len : j.bins, j.bins, j.in_elem);
    zero_imag(row, j.dbl, 0);
    if (j.n % 2 == 0) zero_imag(row, j.dbl, j.bins - 1);
    char *out = out_row(&j, r);
    run_plan(j.plan, row, out);
    if (j.dbl) for (int64_t i = 0; i < j.n; i++) ((double *)out)[i] /= (double)j.n;
    else for (int64_t i = 0; i < j.n; i++) ((float *)out)[i] /= (float)j.n;
  }
  return MF_OK;
}

/* RFFTGrad(dy, x, N): per row, dy's N/2 + 1 bins zero-padded to N, the
 * unnormalized backward transform, and its real parts into x's first min(L, N)
 * elements (the rest, cropped away by RFFT, stay 0). */
static mf_code rfft_grad_kernel(mf_kernel_ctx *ctx) {
  real_job j;
  if (!real_job_begin(ctx, 2, PLAN_BACKWARD, &j)) return ctx->status->code;
  char *spectrum = mf_kernel_scratch(ctx, 2 * (size_t)j.n * j.in_elem);
  if (!spectrum) return ctx->status->code;
  const void *signal = spectrum + (size_t)j.n * j.in_elem;
  int64_t keep = j.out_len < j.n ? j.out_len : j.n;
  for (int64_t r = 0; r < j.rows; r++) {
    fit_row(spectrum, in_row(&j, r), j.in_len < j.bins ? j.in_len : j.bins, j.n, j.in_elem);
    run_plan(j.plan, spectrum, (void *)signal);
    char *out = out_row(&j, r);
    if (j.dbl) for (int64_t i = 0; i < keep; i++) ((double *)out)[i] = ((const double *)signal)[2 * i];
    else for (int64_t i = 0; i < keep; i++) ((float *)out)[i] = ((const float *)signal)[2 * i];
  }
  return MF_OK;
}

/* IRFFTGrad(dy, x, N): per row, RFFT(dy) weighted by w_k / N into x's first
 * min(K, N/2 + 1) bins (the rest, cropped away by IRFFT, stay 0). */
static mf_code irfft_grad_kernel(mf_kernel_ctx *ctx) {
  real_job j;
  if (!real_job_begin(ctx, 2, PLAN_R2C, &j)) return ctx->status->code;
  if (j.in_len != j.n) /* a shape promised by set_shape can disagree with the values */
    return MF_INVALID(ctx->status, "%s: IRFFTGrad needs rows of fft_length %lld, got %lld", ctx->op->name,
                      (long long)j.n, (long long)j.in_len);
  void *spectrum = mf_kernel_scratch(ctx, (size_t)j.bins * j.out_elem);
  if (!spectrum) return ctx->status->code;
  int64_t keep = j.out_len < j.bins ? j.out_len : j.bins;
  for (int64_t r = 0; r < j.rows; r++) {
    run_plan(j.plan, (void *)in_row(&j, r), spectrum);
    char *out = out_row(&j, r);
    for (int64_t k = 0; k < keep; k++) {
      double w = (k == 0 || (j.n % 2 == 0 && k == j.bins - 1) ? 1.0 : 2.0) / (double)j.n;
      for (int part = 0; part < 2; part++) {
        if (j.dbl) ((double *)out)[2 * k + part] = ((const double *)spectrum)[2 * k + part] * w;
        else ((float *)out)[2 * k + part] = (float)(((const float *)spectrum)[2 * k + part] * w);
      }
    }
  }
  return MF_OK;
}

/* ---------- gradient rules ---------- */

/* A complex-to-complex transform's gradient: its adjoint, conj(T'(conj dy))
 * with T' the transform of the other direction and the same kind (FFT's is
 * N * IFFT(dy) = conj(FFT(conj dy)), IFFT's IFFT(dy)'s likewise). */
static mf_code c2c_grad(mf_grad_ctx *gc) {
  mf_output conj_dy = mf_grad_op1(gc, "Conj", gc->grads[0]);
  gc->input_grads[0] = mf_grad_op1(gc, "Conj", mf_grad_op1(gc, gc->op->def->name, conj_dy));
  return gc->status->code;
}

/* RFFT <-> RFFTGrad and IRFFT <-> IRFFTGrad: (dy, x, fft_length). */
static mf_code rfft_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_op3(gc, "RFFTGrad", gc->grads[0], mf_op_in(gc->op, 0), mf_op_in(gc->op, 1));
  return gc->status->code;
}
static mf_code irfft_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_op3(gc, "IRFFTGrad", gc->grads[0], mf_op_in(gc->op, 0), mf_op_in(gc->op, 1));
  return gc->status->code;
}
static mf_code rfft_grad_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_op2(gc, "RFFT", gc->grads[0], mf_op_in(gc->op, 2));
  return gc->status->code;
}
static mf_code irfft_grad_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = mf_grad_op2(gc, "IRFFT", gc->grads[0], mf_op_in(gc->op, 2));
  return gc->status->code;
}

#define C2C_DEF(op, infer_fn, kernel_fn)                                                               \
  {.name = op, .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_COMPLEX, .infer = infer_fn,           \
   .kernel = {[MF_CPU] = kernel_fn}, .grad = c2c_grad}
static const mf_op_def defs[] = {
    C2C_DEF("FFT", fft_infer, fft_kernel),
    C2C_DEF("IFFT", fft_infer, ifft_kernel),
    C2C_DEF("FFT2D", fft2d_infer, fft2d_kernel),
    C2C_DEF("IFFT2D", fft2d_infer, ifft2d_kernel),
    {.name = "RFFT", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_COMPLEX, .value_inputs = 1u << 1,
     .infer = rfft_infer, .kernel = {[MF_CPU] = rfft_kernel}, .grad = rfft_grad},
    {.name = "IRFFT", .num_inputs = 2, .num_outputs = 1, .flags = MF_OP_COMPLEX, .value_inputs = 1u << 1,
     .infer = irfft_infer, .kernel = {[MF_CPU] = irfft_kernel}, .grad = irfft_grad},
    {.name = "RFFTGrad", .num_inputs = 3, .num_outputs = 1, .flags = MF_OP_COMPLEX | MF_OP_INTERNAL,
     .value_inputs = 1u << 2, .infer = real_fft_grad_infer, .kernel = {[MF_CPU] = rfft_grad_kernel},
     .grad = rfft_grad_grad},
    {.name = "IRFFTGrad", .num_inputs = 3, .num_outputs = 1, .flags = MF_OP_COMPLEX | MF_OP_INTERNAL,
     .value_inputs = 1u << 2, .infer = real_fft_grad_infer, .kernel = {[MF_CPU] = irfft_grad_kernel},
     .grad = irfft_grad_grad},
};
MF_OP_TABLE(mf_ops_signal, defs);
