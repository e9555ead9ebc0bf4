/* frames.c — the per-frame latency section's C sides (bench/run.lua). The
 * harness compiles it with the library's CC and CFLAGS against the public
 * header and links it to build/libmoonflow.so and OpenBLAS:
 *   - frames_capi_*: the 8-64-64-4 net loaded from its graph file and
 *     checkpoint through the C API and run into the caller's buffers, as a
 *     host program embedding moonflow would (examples/embed/host.c);
 *   - frames_cblas: the same net written by hand with cblas_sgemm, the
 *     reference the C API is held to.
 * Both time every frame with CLOCK_MONOTONIC, as the Lua side does. */
#define _POSIX_C_SOURCE 199309L
#include <cblas.h>
#include <moonflow.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { IN = 8, HIDDEN = 64, OUT = 4 };

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

typedef struct frames_capi {
  mf_status *status;
  mf_graph_file *model;
  mf_session *session;
  mf_callable *callable;
  float in[IN], out[OUT];
  mf_tensor *in_t, *out_t; /* wrap in and out */
} frames_capi;

void frames_capi_close(frames_capi *f) {
  if (!f) return;
  mf_tensor_release(f->in_t);
  mf_tensor_release(f->out_t);
  mf_session_free(f->session);
  mf_graph_file_free(f->model);
  mf_status_free(f->status);
  free(f);
}

/* Loads the graph file, restores the checkpoint and prepares a callable of
 * the tensors named input (1 x 8) -> output (1 x 4) writing into the frame's
 * own buffers. NULL on failure, with the C API's message in why (why_size
 * bytes). */
frames_capi *frames_capi_open(const char *graph_path, const char *checkpoint_path, const char *input,
                              const char *output, char *why, size_t why_size) {
  frames_capi *f = calloc(1, sizeof *f);
  if (!f) {
    snprintf(why, why_size, "out of memory");
    return NULL;
  }
  f->status = mf_status_new();
  const char *step = "reading the graph file";
  f->model = mf_graph_file_read(graph_path, f->status);
  if (!f->model) goto failed;
  mf_graph *g = mf_graph_file_graph(f->model);
  step = "creating the session";
  f->session = mf_session_new(g, f->status);
  if (!f->session) goto failed;
  step = "restoring the checkpoint";
  if (mf_graph_file_restore(f->model, f->session, checkpoint_path, f->status) != MF_OK) goto failed;
  mf_output x, y;
  step = "finding the input and output";
  if (mf_graph_port(g, input, &x, f->status) != MF_OK || mf_graph_port(g, output, &y, f->status) != MF_OK)
    goto failed;
  step = "making the callable";
  f->callable = mf_session_make_callable(f->session, &x, 1, &y, 1, NULL, 0, f->status);
  if (!f->callable) goto failed;
  const int64_t in_dims[2] = {1, IN}, out_dims[2] = {1, OUT};
  step = "wrapping the buffers";
  f->in_t = mf_tensor_wrap(MF_FLOAT32, 2, in_dims, f->in, NULL, NULL, f->status);
  if (!f->in_t) goto failed;
  f->out_t = mf_tensor_wrap(MF_FLOAT32, 2, out_dims, f->out, NULL, NULL, f->status);
  if (!f->out_t) goto failed;
  return f;
failed:
  snprintf(why, why_size, "%s: %s", step, mf_status_message(f->status));
  frames_capi_close(f);
  return NULL;
}

/* Runs frames frames, numbered first, first + 1, ...: frame first + i on
 * inputs[(first + i) % n_inputs] (IN floats each), writing its output to
 * outputs + OUT * i (NULL: not kept) and its time in ns to ns[i] (NULL: not
 * timed). 0, or -1 with why set. */
int frames_capi_run(frames_capi *f, const float *inputs, int n_inputs, int first, int frames, float *outputs,
                    double *ns, char *why, size_t why_size) {
  for (int i = 0; i < frames; i++) {
    double t0 = ns ? now_ns() : 0;
    memcpy(f->in, inputs + (size_t)IN * (size_t)((first + i) % n_inputs), sizeof f->in);
    if (mf_callable_run_into(f->callable, &f->in_t, &f->out_t, f->status) != MF_OK) {
      snprintf(why, why_size, "running frame %d: %s", first + i, mf_status_message(f->status));
      return -1;
    }
    if (ns) ns[i] = now_ns() - t0;
    if (outputs) memcpy(outputs + (size_t)OUT * (size_t)i, f->out, sizeof f->out);
  }
  return 0;
}

/* One dense layer of a single row: out = in . w + b (w is k x n, row-major),
 * through ReLU when relu is set. */
static void dense(const float *in, const float *w, const float *b, float *out, int k, int n, int relu) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, n, k, 1.0f, in, k, w, n, 0.0f, out, n);
  for (int j = 0; j < n; j++) {
    float v = out[j] + b[j];
    out[j] = relu && v < 0.0f ? 0.0f : v;
  }
}

/* The same net by hand, with frames_capi_run's arguments; weights w1 (8x64),
 * b1, w2 (64x64), b2, w3 (64x4), b3, row-major. */
void frames_cblas(const float *w1, const float *b1, const float *w2, const float *b2, const float *w3,
                  const float *b3, const float *inputs, int n_inputs, int first, int frames, float *outputs,
                  double *ns) {
  float h1[HIDDEN], h2[HIDDEN], out[OUT];
  for (int i = 0; i < frames; i++) {
    double t0 = ns ? now_ns() : 0;
    dense(inputs + (size_t)IN * (size_t)((first + i) % n_inputs), w1, b1, h1, IN, HIDDEN, 1);
    dense(h1, w2, b2, h2, HIDDEN, HIDDEN, 1);
    dense(h2, w3, b3, out, HIDDEN, OUT, 0);
    if (ns) ns[i] = now_ns() - t0;
    if (outputs) memcpy(outputs + (size_t)OUT * (size_t)i, out, sizeof out);
  }
}
