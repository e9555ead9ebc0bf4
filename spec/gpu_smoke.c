/* gpu_smoke.c — a C check of the GPU path with no Lua (tools/gpu_check.sh
 * smoke spec/gpu_smoke.c): y = x * 2 + 1 over 1,000,003 float32 values,
 * placed on GPU:0 by default placement, against the host's arithmetic; an
 * int32 FloorDiv by zero reports its error; the session stays usable. Exits
 * 0 when every check passes, 77 (skipped) without a GPU, saying why. */
#include "c_check.h"

#include <stdio.h>
#include <string.h>

enum { N = 1000003 };

static mf_tensor *scalar_f32(float v, mf_status *s) {
  mf_tensor *t = mf_tensor_new(MF_FLOAT32, 0, NULL, s);
  *(float *)mf_tensor_data(t) = v;
  return t;
}

int main(void) {
  if (mf_num_devices(MF_CUDA) == 0) {
    printf("gpu_smoke: skipped: no GPU: %s\n", mf_gpu_status());
    return 77;
  }
  printf("gpu_smoke: GPU 0 is %s, %lld bytes\n", mf_device_description(MF_CUDA, 0),
         (long long)mf_device_memory_limit(MF_CUDA, 0));
  mf_status *s = mf_status_new();
  mf_graph *g = mf_graph_new();
  mf_op_desc *d = mf_op_desc_new(g, "Placeholder", "x");
  int64_t dims[1] = {N};
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_shape(d, "shape", dims, 1);
  mf_op *x = mf_op_desc_finish(d, s);
  mf_tensor *two = scalar_f32(2, s), *one = scalar_f32(1, s);
  mf_op *m = op_on(g, "Mul", (mf_output){x, 0}, (mf_output){constant(g, two, s), 0}, s);
  mf_op *y = op_on(g, "Add", (mf_output){m, 0}, (mf_output){constant(g, one, s), 0}, s);
  CHECK(mf_status_code(s) == MF_OK);
  mf_session *sess = mf_session_new(g, s);
  CHECK(sess != NULL);
  mf_tensor *in = mf_tensor_new(MF_FLOAT32, 1, dims, s), *out = NULL;
  float *px = mf_tensor_data(in);
  for (int i = 0; i < N; i++) px[i] = (float)(i % 1001) * 0.5f - 250;
  mf_output feed = {x, 0}, fetch = {y, 0};
  for (int run = 0; run < 3; run++) {
    CHECK(mf_session_run(sess, &feed, &in, 1, &fetch, &out, 1, NULL, 0, s) == MF_OK);
    if (!out) break;
    const float *py = mf_tensor_data(out);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += py[i] != px[i] * 2 + 1;
    CHECK(bad == 0);
    mf_tensor_release(out);
    out = NULL;
  }
  /* An integer division by zero on the GPU is the CPU's error. */
  mf_graph *g2 = mf_graph_new();
  int32_t a_values[3] = {7, 8, 9}, b_values[3] = {2, 0, 3};
  int64_t three[1] = {3};
  mf_tensor *a = mf_tensor_new(MF_INT32, 1, three, s), *b = mf_tensor_new(MF_INT32, 1, three, s);
  memcpy(mf_tensor_data(a), a_values, sizeof a_values);
  memcpy(mf_tensor_data(b), b_values, sizeof b_values);
  mf_op *q = op_on(g2, "FloorDiv", (mf_output){constant(g2, a, s), 0}, (mf_output){constant(g2, b, s), 0}, s);
  mf_session *sess2 = mf_session_new(g2, s);
  mf_output qf = {q, 0};
  CHECK(mf_session_run(sess2, NULL, NULL, 0, &qf, &out, 1, NULL, 0, s) == MF_INVALID_ARGUMENT);
  CHECK(strstr(mf_status_message(s), "Integer division by zero") != NULL);
  printf("gpu_smoke: FloorDiv by zero: %s\n", mf_status_message(s));
  /* The session stays usable. */
  mf_status_clear(s);
  CHECK(mf_session_run(sess, &feed, &in, 1, &fetch, &out, 1, NULL, 0, s) == MF_OK);
  mf_tensor_release(out);
  mf_session_free(sess);
  mf_session_free(sess2);
  mf_graph_release(g);
  mf_graph_release(g2);
  mf_tensor_release(in);
  mf_tensor_release(two);
  mf_tensor_release(one);
  mf_tensor_release(a);
  mf_tensor_release(b);
  mf_status_free(s);
  printf("gpu_smoke: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
