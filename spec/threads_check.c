/* threads_check.c — one session and one callable run from 4 threads at once,
 * for ThreadSanitizer (make test-threads) and ASan, outside LuaJIT (which the
 * sanitizers cannot see into). Exits 0 when every check passes.
 *
 * Each thread runs RUNS times, taking turns with mf_session_run, the shared
 * callable and the callable into buffers of its own, with feeds of its own, and compares every result bit for bit with
 * the serial run of the same feed. Every run also adds 1 to a shared variable
 * (AssignAdd) and draws from a random op: at the end the variable holds
 * exactly the number of runs made, as updates of one variable are serialized.
 *
 * The shared session has two CPU devices (device_count): the matmul and the
 * variable (with the AssignAdd colocated with it) run on CPU:1, the rest on
 * CPU:0, so every run copies values across devices; the serial session
 * places everything on CPU:0 (soft placement), and the results must still
 * match bit for bit, with exactly the copies each run plans. */
#include "c_check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 8, THREADS = 4, FEEDS = 16 };
static int runs = 10000;

/* An op of `type` on a and b placed on `device`. */
static mf_op *op_at(mf_graph *g, const char *type, const char *device, mf_output a, mf_output b, mf_status *s) {
  mf_op_desc *d = mf_op_desc_new(g, type, NULL);
  mf_op_desc_add_input(d, a);
  mf_op_desc_add_input(d, b);
  mf_op_desc_set_device(d, device);
  return mf_op_desc_finish(d, s);
}

static uint64_t copies_to(mf_session *sess, int device) {
  mf_device_stats st;
  CHECK(mf_session_device_stats(sess, device, &st));
  return st.copies_to;
}

static mf_tensor *matrix(float base, mf_status *s) {
  int64_t dims[2] = {N, N};
  mf_tensor *t = mf_tensor_new(MF_FLOAT32, 2, dims, s);
  float *p = mf_tensor_data(t);
  for (int i = 0; i < N * N; i++) p[i] = base + (float)(i % 5) * 0.125f;
  return t;
}

static struct {
  mf_session *sess;
  mf_callable *call;
  mf_output x, fetches[3];
  mf_op *bump;
  mf_tensor *in[FEEDS], *expect[FEEDS];
} shared;

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  mf_status *s = mf_status_new();
  int64_t n = N;
  mf_tensor *into[3] = {matrix(0, s), mf_tensor_new(MF_FLOAT32, 1, &n, s), mf_tensor_new(MF_FLOAT32, 0, NULL, s)};
  for (int i = 0; i < runs; i++) {
    int f = (t * 7 + i) % FEEDS;
    mf_tensor *out[3] = {NULL, NULL, NULL};
    mf_code rc;
    if (i % 3 == 2) {  /* into buffers of this thread's own */
      for (int k = 0; k < 3; k++) out[k] = mf_tensor_retain(into[k]);
      rc = mf_callable_run_into(shared.call, &shared.in[f], into, s);
    } else {
      rc = i % 3 ? mf_callable_run(shared.call, &shared.in[f], out, s)
                 : mf_session_run(shared.sess, &shared.x, &shared.in[f], 1, shared.fetches, out, 3, &shared.bump,
                                  1, s);
    }
    if (rc != MF_OK) {
      fprintf(stderr, "thread %d run %d: %s\n", t, i, mf_status_message(s));
      failures++;
      break;
    }
    CHECK(memcmp(mf_tensor_data(out[0]), mf_tensor_data(shared.expect[f]), mf_tensor_nbytes(out[0])) == 0);
    const float *u = mf_tensor_data(out[1]);
    CHECK(mf_tensor_size(out[1]) == N && u[0] >= 0.0f && u[0] < 1.0f);
    for (int k = 0; k < 3; k++) mf_tensor_release(out[k]);
  }
  for (int k = 0; k < 3; k++) mf_tensor_release(into[k]);
  mf_status_free(s);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) runs = atoi(argv[1]);
  mf_status *s = mf_status_new();
  mf_graph *g = mf_graph_new();
  /* y = (x @ x + x) * 0.5 ; u = RandomUniform([N]) ; bump = AssignAdd(v, 1) */
  mf_op_desc *d = mf_op_desc_new(g, "Placeholder", "x");
  int64_t dims[2] = {N, N};
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_shape(d, "shape", dims, 2);
  mf_op *x = mf_op_desc_finish(d, s);
  mf_op *m = op_at(g, "MatMul", "/device:CPU:1", (mf_output){x, 0}, (mf_output){x, 0}, s);
  mf_op *a = op_on(g, "Add", (mf_output){m, 0}, (mf_output){x, 0}, s);
  mf_tensor *half = mf_tensor_new(MF_FLOAT32, 0, NULL, s), *one = mf_tensor_new(MF_FLOAT32, 0, NULL, s);
  *(float *)mf_tensor_data(half) = 0.5f;
  *(float *)mf_tensor_data(one) = 1.0f;
  mf_op *y = op_on(g, "Mul", (mf_output){a, 0}, (mf_output){constant(g, half, s), 0}, s);
  int64_t n = N;
  mf_tensor *shape = mf_tensor_new(MF_INT32, 1, (int64_t[]){1}, s);
  *(int32_t *)mf_tensor_data(shape) = (int32_t)n;
  d = mf_op_desc_new(g, "RandomUniform", NULL);
  mf_op_desc_add_input(d, (mf_output){constant(g, shape, s), 0});
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_int(d, "seed", 7);
  mf_op *u = mf_op_desc_finish(d, s);
  d = mf_op_desc_new(g, "VariableV2", "v");
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_shape(d, "shape", NULL, 0);
  mf_op_desc_set_device(d, "/cpu:1");
  mf_op *v = mf_op_desc_finish(d, s);
  mf_tensor *zero = mf_tensor_new(MF_FLOAT32, 0, NULL, s);
  *(float *)mf_tensor_data(zero) = 0.0f;
  mf_op *init = op_on(g, "Assign", (mf_output){v, 0}, (mf_output){constant(g, zero, s), 0}, s);
  mf_op *bump = op_on(g, "AssignAdd", (mf_output){v, 0}, (mf_output){constant(g, one, s), 0}, s);
  mf_op *read = op_on(g, "Identity", (mf_output){v, 0}, (mf_output){0}, s);
  if (mf_status_code(s) != MF_OK) {
    fprintf(stderr, "building the graph: %s\n", mf_status_message(s));
    return 1;
  }
  mf_session_config two_cpus = {.device_count = {[MF_CPU] = 2}};
  shared.sess = mf_session_new_with_config(g, &two_cpus, s);
  CHECK(mf_session_num_devices(shared.sess) == 2);
  CHECK(strcmp(mf_session_device_name(shared.sess, 1), "/job:localhost/replica:0/task:0/device:CPU:1") == 0);
  CHECK(mf_session_run(shared.sess, NULL, NULL, 0, NULL, NULL, 0, &init, 1, s) == MF_OK);
  shared.x = (mf_output){x, 0};
  shared.fetches[0] = (mf_output){y, 0};
  shared.fetches[1] = (mf_output){u, 0};
  shared.fetches[2] = (mf_output){read, 0};
  shared.bump = bump;
  shared.call = mf_session_make_callable(shared.sess, &shared.x, 1, shared.fetches, 3, &bump, 1, s);
  CHECK(shared.call != NULL);
  /* The serial results, from a session of its own (its variable counts apart). */
  mf_session *serial = mf_session_new_with_options(g, MF_ALLOW_SOFT_PLACEMENT, s);
  CHECK(mf_session_run(serial, NULL, NULL, 0, NULL, NULL, 0, &init, 1, s) == MF_OK);
  for (int f = 0; f < FEEDS; f++) {
    shared.in[f] = matrix((float)f * 0.03125f, s);
    CHECK(mf_session_run(serial, &shared.x, &shared.in[f], 1, shared.fetches, &shared.expect[f], 1, NULL, 0, s) ==
          MF_OK);
  }
  CHECK(copies_to(serial, 0) == 0);  /* one device: nothing crosses */
  uint64_t before = copies_to(shared.sess, 1);
  pthread_t threads[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)t);
  for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
  /* Each run copies x and the constant 1 onto CPU:1, the product and the variable's value back. */
  CHECK(copies_to(shared.sess, 1) - before == 2 * (uint64_t)THREADS * (uint64_t)runs);
  mf_tensor *count = NULL;
  mf_output rd = {read, 0};
  CHECK(mf_session_run(shared.sess, NULL, NULL, 0, &rd, &count, 1, NULL, 0, s) == MF_OK);
  if (count) CHECK(*(const float *)mf_tensor_data(count) == (float)(THREADS * runs));
  mf_tensor_release(count);
  for (int f = 0; f < FEEDS; f++) {
    mf_tensor_release(shared.in[f]);
    mf_tensor_release(shared.expect[f]);
  }
  mf_tensor_release(half);
  mf_tensor_release(one);
  mf_tensor_release(zero);
  mf_tensor_release(shape);
  mf_session_free(serial);
  mf_session_free(shared.sess);
  mf_graph_release(g);
  mf_status_free(s);
  if (failures) return 1;
  printf("threads_check: ok (%d threads x %d runs on one session and one callable, over two devices)\n", THREADS,
         runs);
  return 0;
}
