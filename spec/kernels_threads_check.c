/* kernels_threads_check.c — the large kernels split over a session's thread
 * pool (src/kernels/parallel.h), run from several session threads at once,
 * for ThreadSanitizer (make test-threads): a session with a 3-thread pool runs
 * one callable from 3 OS threads, each run's kernels splitting their work
 * over the shared pool, and every result must equal, bit for bit, that of a
 * session running on one thread. Reductions (one folded in blocks), softmax
 * cross-entropy, a convolution and its input gradient (im2col, col2im), the
 * depthwise convolution (NHWC and NCHW) and its gradients, LRN and its
 * gradient, max pooling and its gradient, bias_add, gather and its gradient, an unsorted
 * segment sum, cumsum, argmax, a transpose, and FFTW's transforms (rfft, fft,
 * irfft: plans made under one lock, run from every thread). Exits 0 when
 * every check passes. */
#include "c_check.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 3, RUNS = 6, FEEDS = 2, MAX_FETCHES = 28 };
enum { BATCH = 4, SIDE = 48, CH = 16, OUT_CH = 8, ROWS = 40000 };

static struct {
  mf_callable *call;
  int num_fetches;
  mf_tensor *in[FEEDS], *expect[FEEDS][MAX_FETCHES];
} shared;

static mf_graph *g;
static mf_status *st;

static mf_tensor *vector_i32(int n, int mod) {
  int64_t dims[1] = {n};
  mf_tensor *t = mf_tensor_new(MF_INT32, 1, dims, st);
  int32_t *p = mf_tensor_data(t);
  for (int i = 0; i < n; i++) p[i] = (int32_t)((i * 7919L) % mod);
  return t;
}

static mf_output const_of(mf_tensor *t) {
  mf_output o = {constant(g, t, st), 0};
  mf_tensor_release(t);
  return o;
}

static mf_output const_shape(const int64_t *v, int n) {
  int64_t dims[1] = {n};
  mf_tensor *t = mf_tensor_new(MF_INT64, 1, dims, st);
  memcpy(mf_tensor_data(t), v, (size_t)n * sizeof *v);
  return const_of(t);
}

/* An op of `type` on inputs ins, with one int-list attribute (when name_ints) and one string. */
static mf_output op(const char *type, const mf_output *ins, int n, const char *ints_name, const int64_t *ints,
                    int num_ints, const char *str_name, const char *str) {
  mf_op_desc *d = mf_op_desc_new(g, type, NULL);
  for (int i = 0; i < n; i++) mf_op_desc_add_input(d, ins[i]);
  if (ints_name) mf_op_desc_set_attr_ints(d, ints_name, ints, num_ints);
  if (str_name) mf_op_desc_set_attr_string(d, str_name, str);
  return (mf_output){mf_op_desc_finish(d, st), 0};
}

static mf_output op_int(const char *type, mf_output a, const char *name, int64_t v) {
  mf_op_desc *d = mf_op_desc_new(g, type, NULL);
  mf_op_desc_add_input(d, a);
  mf_op_desc_set_attr_int(d, name, v);
  return (mf_output){mf_op_desc_finish(d, st), 0};
}

static mf_output reshape(mf_output x, const int64_t *dims, int rank) {
  mf_output ins[2] = {x, const_shape(dims, rank)};
  return op("Reshape", ins, 2, NULL, NULL, 0, NULL, NULL);
}

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  mf_status *s = mf_status_new();
  for (int i = 0; i < RUNS; i++) {
    int f = (t + i) % FEEDS;
    mf_tensor *out[MAX_FETCHES] = {NULL};
    if (mf_callable_run(shared.call, &shared.in[f], out, s) != MF_OK) {
      fprintf(stderr, "thread %d run %d: %s\n", t, i, mf_status_message(s));
      failures++;
      break;
    }
    for (int k = 0; k < shared.num_fetches; k++) {
      CHECK(mf_tensor_nbytes(out[k]) == mf_tensor_nbytes(shared.expect[f][k]) &&
            memcmp(mf_tensor_data(out[k]), mf_tensor_data(shared.expect[f][k]), mf_tensor_nbytes(out[k])) == 0);
      mf_tensor_release(out[k]);
    }
  }
  mf_status_free(s);
  return NULL;
}

int main(void) {
  st = mf_status_new();
  g = mf_graph_new();
  const int64_t n_in = (int64_t)BATCH * SIDE * SIDE * CH;
  int64_t xdims[1] = {n_in};
  mf_op_desc *d = mf_op_desc_new(g, "Placeholder", "x");
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_shape(d, "shape", xdims, 1);
  mf_output flat = {mf_op_desc_finish(d, st), 0};

  const int64_t nhwc[4] = {BATCH, SIDE, SIDE, CH}, tall[2] = {n_in / 4, 4}, wide[2] = {n_in / 256, 256};
  mf_output image = reshape(flat, nhwc, 4), t4 = reshape(flat, tall, 2), w256 = reshape(flat, wide, 2);
  /* The filter, the bias and the gather and segment ids are constants. */
  int64_t fdims[4] = {3, 3, CH, OUT_CH};
  mf_tensor *fv = mf_tensor_new(MF_FLOAT32, 4, fdims, st);
  float *fp = mf_tensor_data(fv);
  for (int i = 0; i < 3 * 3 * CH * OUT_CH; i++) fp[i] = (float)((i * 13) % 17) * 0.01f - 0.08f;
  mf_output filter = const_of(fv);
  int64_t bdims[1] = {256};
  mf_tensor *bv = mf_tensor_new(MF_FLOAT32, 1, bdims, st);
  for (int i = 0; i < 256; i++) ((float *)mf_tensor_data(bv))[i] = (float)i * 0.5f;
  mf_output bias = const_of(bv);
  mf_output gather_ids = const_of(vector_i32(ROWS, (int)(n_in / 4)));
  mf_output segment_ids = const_of(vector_i32((int)(n_in / 256), 37));
  mf_tensor *nseg = mf_tensor_new(MF_INT32, 0, NULL, st);
  *(int32_t *)mf_tensor_data(nseg) = 37;
  mf_output num_segments = const_of(nseg);
  mf_tensor *labels_v = mf_tensor_new(MF_FLOAT32, 2, wide, st);
  float *lp = mf_tensor_data(labels_v);
  for (int64_t i = 0; i < n_in; i++) lp[i] = (i % 256) == (i / 256) % 256 ? 1.0f : 0.0f;
  mf_output labels = const_of(labels_v);

  const int64_t ones[4] = {1, 1, 1, 1}, pool_k[4] = {1, 3, 3, 1}, pool_s[4] = {1, 2, 2, 1};
  const int64_t axis0[1] = {0}, perm[2] = {1, 0};
  mf_output fetches[MAX_FETCHES];
  int n = 0;
  fetches[n++] = op("Sum", &flat, 1, NULL, NULL, 0, NULL, NULL);         /* one output: blocks */
  fetches[n++] = op("Sum", &t4, 1, "axis", axis0, 1, NULL, NULL);        /* four outputs: blocks */
  fetches[n++] = op("Max", &w256, 1, "axis", (const int64_t[]){1}, 1, NULL, NULL);
  fetches[n++] = op_int("ArgMax", w256, "axis", 1);
  mf_output xent_in[2] = {w256, labels};
  mf_output xent = op("SoftmaxCrossEntropyWithLogits", xent_in, 2, NULL, NULL, 0, NULL, NULL);
  fetches[n++] = xent;
  fetches[n++] = (mf_output){xent.op, 1};  /* the backprop */
  mf_output conv_in[2] = {image, filter};
  mf_output conv = op("Conv2D", conv_in, 2, "strides", ones, 4, "padding", "SAME");
  fetches[n++] = conv;
  mf_output back_in[3] = {const_shape(nhwc, 4), filter, conv};
  fetches[n++] = op("Conv2DBackpropInput", back_in, 3, "strides", ones, 4, "padding", "SAME");
  int64_t dwdims[4] = {3, 3, CH, 2};
  mf_tensor *dwv = mf_tensor_new(MF_FLOAT32, 4, dwdims, st);
  float *dwp = mf_tensor_data(dwv);
  for (int i = 0; i < 3 * 3 * CH * 2; i++) dwp[i] = (float)((i * 11) % 19) * 0.01f - 0.09f;
  mf_output dw_filter = const_of(dwv);
  mf_output dw_in[2] = {image, dw_filter};
  mf_output dw = op("DepthwiseConv2dNative", dw_in, 2, "strides", ones, 4, "padding", "SAME");
  fetches[n++] = dw;
  mf_output dw_input_in[3] = {const_shape(nhwc, 4), dw_filter, dw};
  fetches[n++] = op("DepthwiseConv2dNativeBackpropInput", dw_input_in, 3, "strides", ones, 4, "padding", "SAME");
  mf_output dw_filter_in[3] = {image, const_shape(dwdims, 4), dw};
  fetches[n++] = op("DepthwiseConv2dNativeBackpropFilter", dw_filter_in, 3, "strides", ones, 4, "padding", "SAME");
  mf_op_desc *nchw = mf_op_desc_new(g, "DepthwiseConv2dNative", NULL);
  mf_op_desc_add_input(nchw, reshape(flat, (const int64_t[]){BATCH, CH, SIDE, SIDE}, 4));
  mf_op_desc_add_input(nchw, dw_filter);
  mf_op_desc_set_attr_ints(nchw, "strides", (const int64_t[]){1, 1, 2, 1}, 4); /* NCHW: 2 down, 1 across */
  mf_op_desc_set_attr_string(nchw, "padding", "VALID");
  mf_op_desc_set_attr_string(nchw, "data_format", "NCHW");
  fetches[n++] = (mf_output){mf_op_desc_finish(nchw, st), 0};
  mf_output lrn = op("LRN", &image, 1, NULL, NULL, 0, NULL, NULL);
  fetches[n++] = lrn;
  mf_output lrn_grad_in[3] = {image, image, lrn};
  fetches[n++] = op("LRNGrad", lrn_grad_in, 3, NULL, NULL, 0, NULL, NULL);
  mf_op_desc *pd = mf_op_desc_new(g, "MaxPool", NULL);
  mf_op_desc_add_input(pd, image);
  mf_op_desc_set_attr_ints(pd, "ksize", pool_k, 4);
  mf_op_desc_set_attr_ints(pd, "strides", pool_s, 4);
  mf_op_desc_set_attr_string(pd, "padding", "SAME");
  mf_output pooled = {mf_op_desc_finish(pd, st), 0};
  fetches[n++] = pooled;
  mf_op_desc *gd = mf_op_desc_new(g, "MaxPoolGrad", NULL);
  mf_op_desc_add_input(gd, image);
  mf_op_desc_add_input(gd, pooled);
  mf_op_desc_add_input(gd, pooled);
  mf_op_desc_set_attr_ints(gd, "ksize", pool_k, 4);
  mf_op_desc_set_attr_ints(gd, "strides", pool_s, 4);
  mf_op_desc_set_attr_string(gd, "padding", "SAME");
  fetches[n++] = (mf_output){mf_op_desc_finish(gd, st), 0};
  mf_output bias_in[2] = {w256, bias};
  fetches[n++] = op("BiasAdd", bias_in, 2, NULL, NULL, 0, NULL, NULL);
  mf_output gather_in[2] = {t4, gather_ids};
  fetches[n++] = op("Gather", gather_in, 2, NULL, NULL, 0, NULL, NULL);
  mf_output segment_in[3] = {w256, segment_ids, num_segments};
  fetches[n++] = op("UnsortedSegmentSum", segment_in, 3, NULL, NULL, 0, NULL, NULL);
  fetches[n++] = op_int("Cumsum", t4, "axis", 0);
  fetches[n++] = op("Transpose", &w256, 1, "perm", perm, 2, NULL, NULL);
  mf_tensor *len_v = mf_tensor_new(MF_INT32, 1, (int64_t[]){1}, st);
  *(int32_t *)mf_tensor_data(len_v) = 250; /* crops the rows of 256 */
  mf_output fft_length = const_of(len_v);
  mf_output rfft_in[2] = {w256, fft_length};
  mf_output spectrum = op("RFFT", rfft_in, 2, NULL, NULL, 0, NULL, NULL);
  fetches[n++] = spectrum;
  fetches[n++] = op("FFT", &spectrum, 1, NULL, NULL, 0, NULL, NULL);
  mf_output irfft_in[2] = {spectrum, fft_length};
  fetches[n++] = op("IRFFT", irfft_in, 2, NULL, NULL, 0, NULL, NULL);
  shared.num_fetches = n;
  if (mf_status_code(st) != MF_OK) {
    fprintf(stderr, "building the graph: %s\n", mf_status_message(st));
    return 1;
  }

  mf_session_config pooled_config = {.intra_op_parallelism_threads = 3};
  mf_session_config serial_config = {.intra_op_parallelism_threads = 1};
  mf_session *serial = mf_session_new_with_config(g, &serial_config, st);
  mf_session *threaded = mf_session_new_with_config(g, &pooled_config, st);
  CHECK(serial && threaded);
  /* A session asking for threads sets OpenBLAS's count too; pinned back to
   * one, as make test-threads runs it: TSan cannot see OpenBLAS's own
   * hand-offs (see the Makefile). Both sessions' gemms then run alike. */
  openblas_set_num_threads(1);
  shared.call = mf_session_make_callable(threaded, &flat, 1, fetches, n, NULL, 0, st);
  CHECK(shared.call != NULL);
  for (int f = 0; f < FEEDS; f++) {
    shared.in[f] = mf_tensor_new(MF_FLOAT32, 1, xdims, st);
    float *p = mf_tensor_data(shared.in[f]);
    for (int64_t i = 0; i < n_in; i++) p[i] = (float)((i * 37 + f * 11) % 1001) * 0.01f - 5.0f;
    CHECK(mf_session_run(serial, &flat, &shared.in[f], 1, fetches, shared.expect[f], n, NULL, 0, st) == MF_OK);
  }
  if (failures) {
    fprintf(stderr, "serial run: %s\n", mf_status_message(st));
    return 1;
  }
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  for (int f = 0; f < FEEDS; f++) {
    mf_tensor_release(shared.in[f]);
    for (int k = 0; k < n; k++) mf_tensor_release(shared.expect[f][k]);
  }
  mf_session_free(threaded);
  mf_session_free(serial);
  mf_graph_release(g);
  mf_status_free(st);
  if (failures) return 1;
  printf("kernels_threads_check: ok (%d threads x %d runs of %d threaded kernels on a 3-thread pool)\n", THREADS,
         RUNS, n);
  return 0;
}
