// dnn.cu — convolutions and pooling on the GPU (mf_cuda_dnn_v1).
//
// Convolutions go through cuDNN's convolution API on NHWC tensors. Two
// things cuDNN does differently from TensorFlow are bridged here:
//  - filters: TensorFlow's are HWIO, cuDNN's NHWC filters OHWI, so the
//    filter (or the filter gradient) is transposed through the workspace;
//  - SAME padding: TensorFlow pads the smaller half before and may pad one
//    more after; cuDNN pads both sides alike. The convolution runs with the
//    padding before on both sides over an input with the extra rows/columns
//    (zeros) appended: the padded input for the forward pass and the filter
//    gradient, a padded input gradient cropped afterwards for the backprop.
// Math is plain FMA float32 (no TF32 tensor-core math, which would miss the
// host results' 1e-5 relative agreement).
//
// Pooling has kernels of its own rather than cuDNN's, to give ops/nn.c's
// results to the bit: the same window clipping, the same order of sums, and
// max pooling's gradient routed to the first maximum of a window in
// row-major order. Gradients are gathered per input element (one thread
// each, no atomics), adding the windows' terms in the host kernels' order.
#include "internal.cuh"
#include "device/cuda/dnn_api.h"

#include <climits>

namespace {

// ---------- pooling ----------

// The window of output pixel (oy, ox) clipped to the input: rows [y0, y1), columns [x0, x1).
struct clipped {
  int64_t y0, y1, x0, x1;
};
__device__ clipped window_at(const mf_cuda_window &g, int64_t oy, int64_t ox) {
  const int64_t ys = oy * g.sh - g.pt, xs = ox * g.sw - g.pl;
  return {ys < 0 ? 0 : ys, ys + g.kh < g.h ? ys + g.kh : g.h, xs < 0 ? 0 : xs, xs + g.kw < g.w ? xs + g.kw : g.w};
}
__device__ int64_t pixel(const mf_cuda_window &g, int64_t n, int64_t y, int64_t x) { return ((n * g.h + y) * g.w + x) * g.c; }

// The offset in x of the first maximum of channel ch in the window (ops/nn.c's argmax).
template <typename T>
__device__ int64_t argmax(const mf_cuda_window &g, const T *x, int64_t n, const clipped &win, int64_t ch) {
  int64_t idx = pixel(g, n, win.y0, win.x0) + ch;
  T best = x[idx];
  for (int64_t iy = win.y0; iy < win.y1; iy++)
    for (int64_t ix = win.x0; ix < win.x1; ix++) {
      const int64_t off = pixel(g, n, iy, ix) + ch;
      const bool gt = x[off] > best;
      best = gt ? x[off] : best;
      idx = gt ? off : idx;
    }
  return idx;
}

#define GRID_STRIDE(i, count) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (count); i += (int64_t)gridDim.x * blockDim.x)

// One thread per output element (n, oy, ox, ch).
template <typename T>
__global__ void max_pool(mf_cuda_window g, const T *x, T *y) {
  GRID_STRIDE(i, g.n * g.oh * g.ow * g.c) {
    const int64_t ch = i % g.c, pix = i / g.c, ox = pix % g.ow, oy = pix / g.ow % g.oh, n = pix / g.ow / g.oh;
    const clipped win = window_at(g, oy, ox);
    T best = x[pixel(g, n, win.y0, win.x0) + ch];
    for (int64_t iy = win.y0; iy < win.y1; iy++)
      for (int64_t ix = win.x0; ix < win.x1; ix++) {
        const T v = x[pixel(g, n, iy, ix) + ch];
        best = v > best ? v : best;
      }
    y[i] = best;
  }
}

template <typename T>
__global__ void avg_pool(mf_cuda_window g, const T *x, T *y) {
  GRID_STRIDE(i, g.n * g.oh * g.ow * g.c) {
    const int64_t ch = i % g.c, pix = i / g.c, ox = pix % g.ow, oy = pix / g.ow % g.oh, n = pix / g.ow / g.oh;
    const clipped win = window_at(g, oy, ox);
    T sum = 0;
    for (int64_t iy = win.y0; iy < win.y1; iy++)
      for (int64_t ix = win.x0; ix < win.x1; ix++) sum += x[pixel(g, n, iy, ix) + ch];
    y[i] = sum / (T)((win.y1 - win.y0) * (win.x1 - win.x0));
  }
}

// Output rows (or columns) whose windows hold input row iy: [first, last], maybe empty.
__device__ void windows_over(int64_t iy, int64_t pad, int64_t k, int64_t stride, int64_t out, int64_t *first,
                             int64_t *last) {
  const int64_t lo = iy + pad - k + 1, hi = (iy + pad) / stride;
  *first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  *last = hi < out - 1 ? hi : out - 1;
}

// One thread per input element (n, iy, ix, ch), its windows taken in the
// host's order (output pixels row-major), each adding its share.
template <typename T, bool MAX>
__global__ void pool_grad(mf_cuda_window g, const T *x, const T *dy, T *dx) {
  GRID_STRIDE(i, g.n * g.h * g.w * g.c) {
    const int64_t ch = i % g.c, pix = i / g.c, ix = pix % g.w, iy = pix / g.w % g.h, n = pix / g.w / g.h;
    int64_t oy0, oy1, ox0, ox1;
    windows_over(iy, g.pt, g.kh, g.sh, g.oh, &oy0, &oy1);
    windows_over(ix, g.pl, g.kw, g.sw, g.ow, &ox0, &ox1);
    T acc = 0;
    for (int64_t oy = oy0; oy <= oy1; oy++)
      for (int64_t ox = ox0; ox <= ox1; ox++) {
        const clipped win = window_at(g, oy, ox);
        const T gy = dy[((n * g.oh + oy) * g.ow + ox) * g.c + ch];
        if (MAX) {
          if (argmax(g, x, n, win, ch) == i) acc += gy;
        } else {
          acc += gy / (T)((win.y1 - win.y0) * (win.x1 - win.x0));
        }
      }
    dx[i] = acc;
  }
}

// One thread per output element: the gradient at its window's maximum.
template <typename T>
__global__ void max_pool_grad_grad(mf_cuda_window g, const T *x, const T *gx, T *out) {
  GRID_STRIDE(i, g.n * g.oh * g.ow * g.c) {
    const int64_t ch = i % g.c, pix = i / g.c, ox = pix % g.ow, oy = pix / g.ow % g.oh, n = pix / g.ow / g.oh;
    out[i] = gx[argmax(g, x, n, window_at(g, oy, ox), ch)];
  }
}

template <typename T>
int pool_typed(mf_cuda_device *d, int kind, const mf_cuda_window *gp, const void *a_, const void *b_, void *out_,
               mf_cuda_error *e) {
  const mf_cuda_window g = *gp;
  const T *a = (const T *)a_, *b = (const T *)b_;
  T *out = (T *)out_;
  const int64_t pooled = g.n * g.oh * g.ow * g.c, input = g.n * g.h * g.w * g.c;
  const int64_t items = kind == MF_CUDA_MAX_POOL_GRAD || kind == MF_CUDA_AVG_POOL_GRAD ? input : pooled;
  if (items == 0) return 0;
  const unsigned grid = mf_cuda_grid(items);
  switch (kind) {
  case MF_CUDA_MAX_POOL:
    max_pool<T><<<grid, MF_CUDA_BLOCK, 0, d->stream>>>(g, a, out);
    break;
  case MF_CUDA_AVG_POOL:
    avg_pool<T><<<grid, MF_CUDA_BLOCK, 0, d->stream>>>(g, a, out);
    break;
  case MF_CUDA_MAX_POOL_GRAD:
    pool_grad<T, true><<<grid, MF_CUDA_BLOCK, 0, d->stream>>>(g, a, b, out);
    break;
  case MF_CUDA_AVG_POOL_GRAD:
    pool_grad<T, false><<<grid, MF_CUDA_BLOCK, 0, d->stream>>>(g, a, b, out);
    break;
  case MF_CUDA_MAX_POOL_GRAD_GRAD:
    max_pool_grad_grad<T><<<grid, MF_CUDA_BLOCK, 0, d->stream>>>(g, a, b, out);
    break;
  default:
    snprintf(e->msg, sizeof e->msg, "pool: unknown kind %d", kind);
    return 1;
  }
  MF_CUDA_LAUNCHED(e, "pool");
  return 0;
}

int pool(mf_cuda_device *d, int kind, int f64, const mf_cuda_window *g, const void *a, const void *b, void *out,
         mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  return f64 ? pool_typed<double>(d, kind, g, a, b, out, e) : pool_typed<float>(d, kind, g, a, b, out, e);
}

// ---------- convolution ----------

// Filter layouts: element (y, x, i, o) of HWIO [kh, kw, c, oc] and of OHWI
// [oc, kh, kw, c]; one thread per element, copied towards OHWI or back.
__global__ void filter_layout(const float *in, float *out, int64_t kh, int64_t kw, int64_t c, int64_t oc, bool to_ohwi) {
  GRID_STRIDE(hwio, kh * kw * c * oc) {
    const int64_t o = hwio % oc, i = hwio / oc % c, x = hwio / oc / c % kw, y = hwio / oc / c / kw;
    const int64_t ohwi = ((o * kh + y) * kw + x) * c + i;
    if (to_ohwi) out[ohwi] = in[hwio];
    else out[hwio] = in[ohwi];
  }
}

// out [n, oh, ow, c] = in [n, ih, iw, c] where inside, zeros elsewhere: pads
// (out larger) or crops (out smaller) at the bottom and right.
__global__ void resize_nhwc(const float *in, int64_t ih, int64_t iw, float *out, int64_t n, int64_t oh, int64_t ow,
                            int64_t c) {
  GRID_STRIDE(i, n * oh * ow * c) {
    const int64_t ch = i % c, x = i / c % ow, y = i / c / ow % oh, b = i / c / ow / oh;
    out[i] = y < ih && x < iw ? in[((b * ih + y) * iw + x) * c + ch] : 0.0f;
  }
}

// Descriptors of one convolution, destroyed with it.
struct conv_descs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t f = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~conv_descs() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (f) cudnnDestroyFilterDescriptor(f);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

const size_t ALIGN = 256;
size_t aligned(size_t bytes) { return (bytes + ALIGN - 1) / ALIGN * ALIGN; }

// One convolution: its descriptors, the input's padded height and width,
// the algorithm and the workspace's parts (filter in OHWI, padded input or
// input gradient when the padding is uneven, cuDNN's own).
struct conv_plan {
  conv_descs desc;
  cudnnHandle_t dnn;  // the device's, used under d->lock
  int64_t ph, pw;  // the input's height and width with the extra padding after
  bool padded;
  int algo;
  size_t filter_bytes, padded_bytes, cudnn_bytes;
  size_t total() const { return aligned(filter_bytes) + aligned(padded_bytes) + cudnn_bytes; }
};

// The first of cuDNN's ranked algorithms that works without tensor-core math,
// preferring a deterministic one (the same result on every run) when there
// is one.
template <typename Perf>
int pick(const Perf *perf, int returned, int *algo, mf_cuda_error *e) {
  for (int deterministic_only = 1; deterministic_only >= 0; deterministic_only--)
    for (int i = 0; i < returned; i++)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType != CUDNN_TENSOR_OP_MATH &&
          perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
          (!deterministic_only || perf[i].determinism == CUDNN_DETERMINISTIC)) {
        *algo = (int)perf[i].algo;
        return 0;
      }
  snprintf(e->msg, sizeof e->msg, "cuDNN offers no float32 algorithm without tensor-core math for this convolution");
  return 1;
}

int plan_conv(cudnnHandle_t dnn, int kind, const mf_cuda_window &g, conv_plan *p, mf_cuda_error *e) {
  p->dnn = dnn;
  const int64_t eh = g.pb - g.pt, ew = g.pr - g.pl;
  if (eh < 0 || ew < 0 || eh > 1 || ew > 1) {
    snprintf(e->msg, sizeof e->msg, "conv2d: padding (%lld, %lld) before and (%lld, %lld) after is not TensorFlow's",
             (long long)g.pt, (long long)g.pl, (long long)g.pb, (long long)g.pr);
    return 1;
  }
  p->ph = g.h + eh;
  p->pw = g.w + ew;
  p->padded = eh || ew;
  const int64_t sizes[] = {g.n * p->ph * p->pw * g.c, g.n * g.oh * g.ow * g.oc, g.kh * g.kw * g.c * g.oc,
                           g.sh, g.sw, g.dh, g.dw, g.pt, g.pl};
  for (int64_t v : sizes)
    if (v > INT_MAX) {
      snprintf(e->msg, sizeof e->msg, "conv2d: a tensor size or attribute (%lld) beyond cuDNN's int range",
               (long long)v);
      return 1;
    }
  conv_descs &s = p->desc;
  MF_CUDA_TRY(e, cudnnCreateTensorDescriptor(&s.x));
  MF_CUDA_TRY(e, cudnnCreateTensorDescriptor(&s.y));
  MF_CUDA_TRY(e, cudnnCreateFilterDescriptor(&s.f));
  MF_CUDA_TRY(e, cudnnCreateConvolutionDescriptor(&s.conv));
  MF_CUDA_TRY(e, cudnnSetTensor4dDescriptor(s.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, (int)g.n, (int)g.c,
                                            (int)p->ph, (int)p->pw));
  MF_CUDA_TRY(e, cudnnSetTensor4dDescriptor(s.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, (int)g.n, (int)g.oc,
                                            (int)g.oh, (int)g.ow));
  MF_CUDA_TRY(e, cudnnSetFilter4dDescriptor(s.f, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, (int)g.oc, (int)g.c,
                                            (int)g.kh, (int)g.kw));
  MF_CUDA_TRY(e, cudnnSetConvolution2dDescriptor(s.conv, (int)g.pt, (int)g.pl, (int)g.sh, (int)g.sw, (int)g.dh,
                                                 (int)g.dw, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  MF_CUDA_TRY(e, cudnnSetConvolutionMathType(s.conv, CUDNN_FMA_MATH));
  int n, c, h, w;
  MF_CUDA_TRY(e, cudnnGetConvolution2dForwardOutputDim(s.conv, s.x, s.f, &n, &c, &h, &w));
  if (n != g.n || c != g.oc || h != g.oh || w != g.ow) {
    snprintf(e->msg, sizeof e->msg, "conv2d: cuDNN's output [%d, %d, %d, %d] (NCHW) is not the expected [%lld, %lld, "
             "%lld, %lld]", n, c, h, w, (long long)g.n, (long long)g.oc, (long long)g.oh, (long long)g.ow);
    return 1;
  }
  int returned = 0;
  if (kind == MF_CUDA_CONV_FORWARD) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    MF_CUDA_TRY(e, cudnnGetConvolutionForwardAlgorithm_v7(p->dnn, s.x, s.f, s.conv, s.y,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
    if (pick(perf, returned, &p->algo, e)) return 1;
    MF_CUDA_TRY(e, cudnnGetConvolutionForwardWorkspaceSize(p->dnn, s.x, s.f, s.conv, s.y,
                                                           (cudnnConvolutionFwdAlgo_t)p->algo, &p->cudnn_bytes));
  } else if (kind == MF_CUDA_CONV_BACKPROP_INPUT) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    MF_CUDA_TRY(e, cudnnGetConvolutionBackwardDataAlgorithm_v7(p->dnn, s.f, s.y, s.conv, s.x,
                                                                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf));
    if (pick(perf, returned, &p->algo, e)) return 1;
    MF_CUDA_TRY(e, cudnnGetConvolutionBackwardDataWorkspaceSize(p->dnn, s.f, s.y, s.conv, s.x,
                                                                (cudnnConvolutionBwdDataAlgo_t)p->algo,
                                                                &p->cudnn_bytes));
  } else if (kind == MF_CUDA_CONV_BACKPROP_FILTER) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    MF_CUDA_TRY(e, cudnnGetConvolutionBackwardFilterAlgorithm_v7(p->dnn, s.x, s.y, s.conv, s.f,
                                                                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned,
                                                                  perf));
    if (pick(perf, returned, &p->algo, e)) return 1;
    MF_CUDA_TRY(e, cudnnGetConvolutionBackwardFilterWorkspaceSize(p->dnn, s.x, s.y, s.conv, s.f,
                                                                  (cudnnConvolutionBwdFilterAlgo_t)p->algo,
                                                                  &p->cudnn_bytes));
  } else {
    snprintf(e->msg, sizeof e->msg, "conv2d: unknown kind %d", kind);
    return 1;
  }
  p->filter_bytes = (size_t)(g.kh * g.kw * g.c * g.oc) * sizeof(float);
  p->padded_bytes = p->padded ? (size_t)(g.n * p->ph * p->pw * g.c) * sizeof(float) : 0;
  return 0;
}

// Whether the convolution's output is empty or an empty sum (zeros), which cuDNN refuses to compute.
bool trivial(int kind, const mf_cuda_window &g, int64_t *out_elems) {
  const int64_t pixels = g.n * g.oh * g.ow;
  switch (kind) {
  case MF_CUDA_CONV_FORWARD: *out_elems = pixels * g.oc; return *out_elems == 0 || g.c == 0;
  case MF_CUDA_CONV_BACKPROP_INPUT: *out_elems = g.n * g.h * g.w * g.c; return *out_elems == 0 || pixels == 0 || g.oc == 0;
  default: *out_elems = g.kh * g.kw * g.c * g.oc; return *out_elems == 0 || pixels == 0;
  }
}

int conv2d_workspace(mf_cuda_device *d, int kind, const mf_cuda_window *g, size_t *bytes, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  int64_t out_elems;
  *bytes = 0;
  if (trivial(kind, *g, &out_elems)) return 0;
  cudnnHandle_t dnn;
  if (mf_cuda_dnn_handle(d, &dnn, e)) return 1;
  std::lock_guard<std::mutex> hold(d->lock);  // a cuDNN handle serves one thread at a time
  conv_plan p;
  if (plan_conv(dnn, kind, *g, &p, e)) return 1;
  *bytes = p.total();
  return 0;
}

int launch_layout(mf_cuda_device *d, const mf_cuda_window &g, const float *in, float *out, bool to_ohwi,
                  mf_cuda_error *e) {
  filter_layout<<<mf_cuda_grid(g.kh * g.kw * g.c * g.oc), MF_CUDA_BLOCK, 0, d->stream>>>(in, out, g.kh, g.kw, g.c,
                                                                                            g.oc, to_ohwi);
  MF_CUDA_LAUNCHED(e, "filter_layout");
  return 0;
}
int launch_resize(mf_cuda_device *d, const float *in, int64_t ih, int64_t iw, float *out, int64_t n, int64_t oh,
                  int64_t ow, int64_t c, mf_cuda_error *e) {
  resize_nhwc<<<mf_cuda_grid(n * oh * ow * c), MF_CUDA_BLOCK, 0, d->stream>>>(in, ih, iw, out, n, oh, ow, c);
  MF_CUDA_LAUNCHED(e, "resize_nhwc");
  return 0;
}

int conv2d(mf_cuda_device *d, int kind, const mf_cuda_window *gp, const void *a, const void *b, void *out,
           void *workspace, size_t workspace_bytes, mf_cuda_error *e) {
  if (mf_cuda_use(d, e)) return 1;
  const mf_cuda_window &g = *gp;
  int64_t out_elems;
  if (trivial(kind, g, &out_elems)) {
    if (out_elems) MF_CUDA_TRY(e, cudaMemsetAsync(out, 0, (size_t)out_elems * sizeof(float), d->stream));
    return 0;
  }
  cudnnHandle_t dnn;
  if (mf_cuda_dnn_handle(d, &dnn, e)) return 1;
  std::lock_guard<std::mutex> hold(d->lock);
  conv_plan p;
  if (plan_conv(dnn, kind, g, &p, e)) return 1;
  if (workspace_bytes < p.total()) {
    snprintf(e->msg, sizeof e->msg, "conv2d: workspace of %zu bytes, %zu needed", workspace_bytes, p.total());
    return 1;
  }
  float *filter = (float *)workspace;
  float *padded = (float *)((char *)workspace + aligned(p.filter_bytes));
  void *scratch = p.cudnn_bytes ? (char *)workspace + aligned(p.filter_bytes) + aligned(p.padded_bytes) : nullptr;
  const float one = 1.0f, zero = 0.0f;
  const conv_descs &s = p.desc;
  if (kind == MF_CUDA_CONV_FORWARD) {
    const float *x = (const float *)a;
    if (launch_layout(d, g, (const float *)b, filter, true, e)) return 1;
    if (p.padded) {
      if (launch_resize(d, x, g.h, g.w, padded, g.n, p.ph, p.pw, g.c, e)) return 1;
      x = padded;
    }
    MF_CUDA_TRY(e, cudnnConvolutionForward(p.dnn, &one, s.x, x, s.f, filter, s.conv,
                                           (cudnnConvolutionFwdAlgo_t)p.algo, scratch, p.cudnn_bytes, &zero, s.y,
                                           out));
  } else if (kind == MF_CUDA_CONV_BACKPROP_INPUT) {
    if (launch_layout(d, g, (const float *)a, filter, true, e)) return 1;
    float *dx = p.padded ? padded : (float *)out;
    MF_CUDA_TRY(e, cudnnConvolutionBackwardData(p.dnn, &one, s.f, filter, s.y, b, s.conv,
                                                (cudnnConvolutionBwdDataAlgo_t)p.algo, scratch, p.cudnn_bytes, &zero,
                                                s.x, dx));
    if (p.padded && launch_resize(d, dx, p.ph, p.pw, (float *)out, g.n, g.h, g.w, g.c, e)) return 1;
  } else {
    const float *x = (const float *)a;
    if (p.padded) {
      if (launch_resize(d, x, g.h, g.w, padded, g.n, p.ph, p.pw, g.c, e)) return 1;
      x = padded;
    }
    MF_CUDA_TRY(e, cudnnConvolutionBackwardFilter(p.dnn, &one, s.x, x, s.y, b, s.conv,
                                                  (cudnnConvolutionBwdFilterAlgo_t)p.algo, scratch, p.cudnn_bytes,
                                                  &zero, s.f, filter));
    if (launch_layout(d, g, filter, (float *)out, false, e)) return 1;
  }
  return 0;
}

}  // namespace

extern "C" MF_CUDA_EXPORT const mf_cuda_dnn_api mf_cuda_dnn_v1 = {conv2d_workspace, conv2d, pool};
