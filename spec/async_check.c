/* async_check.c — a C check of mf_callable_run_async for ThreadSanitizer and
 * ASan, outside LuaJIT (which the sanitizers cannot see into). Build and run:
 *   cc -std=c11 -O1 -g -fsanitize=thread -Isrc -Isrc/include spec/async_check.c $(find src -name '*.c') \
 *      -lopenblas -lm -lpthread -o /tmp/async_check && /tmp/async_check
 * Exits 0 when every check passes. It runs two sessions at once (one on the
 * main thread, one on a worker), compares asynchronous results with
 * synchronous ones bit for bit, waits for jobs the worker has not started
 * (which then run on the waiting thread), cancels queued jobs, frees jobs
 * mid-flight, and closes a session with jobs queued. */
#include "c_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 96 };

static mf_op *placeholder(mf_graph *g, const char *name, mf_status *s) {
  mf_op_desc *d = mf_op_desc_new(g, "Placeholder", name);
  int64_t dims[2] = {N, N};
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_shape(d, "shape", dims, 2);
  return mf_op_desc_finish(d, s);
}

static mf_tensor *filled(float v, mf_status *s) {
  int64_t dims[2] = {N, N};
  mf_tensor *t = mf_tensor_new(MF_FLOAT32, 2, dims, s);
  float *p = mf_tensor_data(t);
  for (int i = 0; i < N * N; i++) p[i] = v + (float)(i % 7) * 0.25f;
  return t;
}

int main(void) {
  mf_status *s = mf_status_new();
  /* y = tanh-free pipeline: (x @ x) + x, twice, in two independent graphs. */
  mf_graph *g[2];
  mf_session *sess[2];
  mf_callable *call[2];
  for (int k = 0; k < 2; k++) {
    g[k] = mf_graph_new();
    mf_op *x = placeholder(g[k], "x", s);
    mf_op *m = op_on(g[k], "MatMul", (mf_output){x, 0}, (mf_output){x, 0}, s);
    mf_op *y = op_on(g[k], "Add", (mf_output){m, 0}, (mf_output){x, 0}, s);
    CHECK(mf_status_code(s) == MF_OK);
    sess[k] = mf_session_new(g[k], s);
    mf_output feed = {x, 0}, fetch = {y, 0};
    call[k] = mf_session_make_callable(sess[k], &feed, 1, &fetch, 1, NULL, 0, s);
    CHECK(call[k] != NULL);
  }
  enum { JOBS = 24 };
  mf_tensor *in[JOBS], *sync_out[JOBS];
  for (int j = 0; j < JOBS; j++) {
    in[j] = filled((float)j * 0.01f, s);
    CHECK(mf_callable_run(call[0], &in[j], &sync_out[j], s) == MF_OK);
  }
  /* Asynchronous jobs on session 0 while session 1 runs on this thread. */
  mf_async *jobs[JOBS];
  for (int j = 0; j < JOBS; j++) jobs[j] = mf_callable_run_async(call[0], &in[j], s);
  for (int j = 0; j < JOBS; j++) {
    mf_tensor *o = NULL;
    CHECK(mf_callable_run(call[1], &in[j], &o, s) == MF_OK);
    CHECK(memcmp(mf_tensor_data(o), mf_tensor_data(sync_out[j]), mf_tensor_nbytes(o)) == 0);
    mf_tensor_release(o);
  }
  for (int j = 0; j < JOBS; j++) {
    mf_tensor *o = NULL;
    CHECK(mf_async_wait(jobs[j], &o, s) == MF_OK);
    CHECK(o && memcmp(mf_tensor_data(o), mf_tensor_data(sync_out[j]), mf_tensor_nbytes(o)) == 0);
    CHECK(mf_async_wait(jobs[j], &o, s) == MF_FAILED_PRECONDITION);
    mf_tensor_release(o);
    mf_async_free(jobs[j]);
  }
  /* Waited for at once: a job the worker has not started runs on this thread
   * instead, the next one behind it, in order (the worker holds back meanwhile). */
  for (int round = 0; round < 200; round++) {
    int j = round % (JOBS - 1);
    mf_async *first = mf_callable_run_async(call[0], &in[j], s);
    mf_async *second = mf_callable_run_async(call[0], &in[j + 1], s);
    mf_tensor *o1 = NULL, *o2 = NULL;
    CHECK(mf_async_wait(first, &o1, s) == MF_OK);
    CHECK(mf_async_wait(second, &o2, s) == MF_OK);
    CHECK(o1 && memcmp(mf_tensor_data(o1), mf_tensor_data(sync_out[j]), mf_tensor_nbytes(o1)) == 0);
    CHECK(o2 && memcmp(mf_tensor_data(o2), mf_tensor_data(sync_out[j + 1]), mf_tensor_nbytes(o2)) == 0);
    mf_tensor_release(o1);
    mf_tensor_release(o2);
    mf_async_free(first);
    mf_async_free(second);
  }
  /* A job finishes with no help from this thread. */
  mf_async *a = mf_callable_run_async(call[0], &in[0], s);
  while (!mf_async_done(a)) {
  }
  mf_async_free(a);
  /* A synchronous run after queued jobs waits for them (and sees the same results). */
  for (int j = 0; j < JOBS; j++) jobs[j] = mf_callable_run_async(call[0], &in[j], s);
  mf_tensor *o = NULL;
  CHECK(mf_callable_run(call[0], &in[3], &o, s) == MF_OK);
  for (int j = 0; j < JOBS; j++) CHECK(mf_async_done(jobs[j]));
  CHECK(memcmp(mf_tensor_data(o), mf_tensor_data(sync_out[3]), mf_tensor_nbytes(o)) == 0);
  mf_tensor_release(o);
  for (int j = 0; j < JOBS; j++) mf_async_free(jobs[j]);  /* results never taken */
  /* Freeing jobs in flight: queued ones are cancelled, the running one awaited. */
  for (int j = 0; j < JOBS; j++) jobs[j] = mf_callable_run_async(call[0], &in[j], s);
  for (int j = JOBS - 1; j >= 0; j--) mf_async_free(jobs[j]);
  /* An error (a missing feed) comes back from wait. */
  mf_tensor *none[1] = {NULL};
  a = mf_callable_run_async(call[0], none, s);
  CHECK(a != NULL);
  CHECK(mf_async_wait(a, &o, s) == MF_INVALID_ARGUMENT);
  CHECK(o == NULL);
  mf_async_free(a);
  /* Closing with jobs queued: they are cancelled or finished; freeing them later is fine. */
  for (int j = 0; j < JOBS; j++) jobs[j] = mf_callable_run_async(call[0], &in[j], s);
  mf_session_close(sess[0]);
  int cancelled = 0;
  for (int j = 0; j < JOBS; j++) {
    CHECK(mf_async_done(jobs[j]));
    mf_code rc = mf_async_wait(jobs[j], &o, s);
    CHECK(rc == MF_OK || rc == MF_CANCELLED);
    cancelled += rc == MF_CANCELLED;
    if (rc == MF_OK) mf_tensor_release(o);
  }
  for (int j = 0; j < JOBS; j++) mf_async_free(jobs[j]);
  CHECK(mf_callable_run_async(call[0], &in[0], s) == NULL);
  CHECK(mf_status_code(s) == MF_FAILED_PRECONDITION);
  for (int k = 0; k < 2; k++) {
    mf_session_free(sess[k]);
    mf_graph_release(g[k]);
  }
  for (int j = 0; j < JOBS; j++) {
    mf_tensor_release(in[j]);
    mf_tensor_release(sync_out[j]);
  }
  mf_status_free(s);
  printf("async_check: %s (%d of %d queued jobs cancelled by close)\n", failures ? "FAILED" : "ok",
         cancelled, JOBS);
  return failures ? 1 : 0;
}
