/* fuse_check.c — a fused elementwise chain large enough to be split over a
 * session's 4 threads, its callable run from 2 threads at once, for
 * ThreadSanitizer (make test-threads): every result must equal, bit for bit,
 * that of a session running the same ops one by one on one thread.
 * Exits 0 when every check passes. */
#include "c_check.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { M = 100000, THREADS = 2, FEEDS = 4, RUNS = 40 };

static struct {
  mf_callable *call;
  mf_tensor *in[FEEDS], *expect[FEEDS][2];
} shared;

static mf_tensor *scalar(float v, mf_status *s) {
  mf_tensor *t = mf_tensor_new(MF_FLOAT32, 0, NULL, s);
  *(float *)mf_tensor_data(t) = v;
  return t;
}

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  mf_status *s = mf_status_new();
  for (int i = 0; i < RUNS; i++) {
    int f = (t + i) % FEEDS;
    mf_tensor *out[2] = {NULL, NULL};
    if (mf_callable_run(shared.call, &shared.in[f], out, s) != MF_OK) {
      fprintf(stderr, "thread %d run %d: %s\n", t, i, mf_status_message(s));
      failures++;
      break;
    }
    for (int k = 0; k < 2; k++) {
      CHECK(memcmp(mf_tensor_data(out[k]), mf_tensor_data(shared.expect[f][k]), mf_tensor_nbytes(out[k])) == 0);
      mf_tensor_release(out[k]);
    }
  }
  mf_status_free(s);
  return NULL;
}

int main(void) {
  mf_status *s = mf_status_new();
  mf_graph *g = mf_graph_new();
  /* t = x * 0.75 (fetched); y = sigmoid(t + x) - tanh(x) */
  int64_t dims[1] = {M};
  mf_op_desc *d = mf_op_desc_new(g, "Placeholder", "x");
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_shape(d, "shape", dims, 1);
  mf_output x = {mf_op_desc_finish(d, s), 0};
  mf_tensor *k = scalar(0.75f, s);
  mf_op *t = op_on(g, "Mul", x, (mf_output){constant(g, k, s), 0}, s);
  mf_tensor_release(k);
  mf_op *a = op_on(g, "Add", (mf_output){t, 0}, x, s);
  mf_op *sg = op_on(g, "Sigmoid", (mf_output){a, 0}, (mf_output){0}, s);
  mf_op *th = op_on(g, "Tanh", x, (mf_output){0}, s);
  mf_op *y = op_on(g, "Sub", (mf_output){sg, 0}, (mf_output){th, 0}, s);
  if (mf_status_code(s) != MF_OK) {
    fprintf(stderr, "building the graph: %s\n", mf_status_message(s));
    return 1;
  }
  mf_output fetches[2] = {{y, 0}, {t, 0}};
  mf_session_config fused_config = {.intra_op_parallelism_threads = 4};
  mf_session_config plain_config = {.intra_op_parallelism_threads = 1, .disable_elementwise_fusion = true};
  mf_session *fused = mf_session_new_with_config(g, &fused_config, s);
  mf_session *plain = mf_session_new_with_config(g, &plain_config, s);
  CHECK(fused && plain);
  shared.call = mf_session_make_callable(fused, &x, 1, fetches, 2, NULL, 0, s);
  CHECK(shared.call != NULL);
  mf_plan_stats stats;
  mf_callable_plan_stats(shared.call, &stats);
  CHECK(stats.num_steps == 1 && stats.num_fused_groups == 1 && stats.num_fused_ops == 5);
  for (int f = 0; f < FEEDS; f++) {
    shared.in[f] = mf_tensor_new(MF_FLOAT32, 1, dims, s);
    float *p = mf_tensor_data(shared.in[f]);
    for (int i = 0; i < M; i++) p[i] = (float)((i * 37 + f * 11) % 1000) * 0.01f - 5.0f;
    CHECK(mf_session_run(plain, &x, &shared.in[f], 1, fetches, shared.expect[f], 2, NULL, 0, s) == MF_OK);
  }
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  for (int f = 0; f < FEEDS; f++) {
    mf_tensor_release(shared.in[f]);
    mf_tensor_release(shared.expect[f][0]);
    mf_tensor_release(shared.expect[f][1]);
  }
  mf_session_free(fused);
  mf_session_free(plain);
  mf_graph_release(g);
  mf_status_free(s);
  if (failures) return 1;
  printf("fuse_check: ok (%d threads x %d runs of a fused chain split over 4 threads)\n", THREADS, RUNS);
  return 0;
}
