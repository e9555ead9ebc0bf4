/* static_link_check.c — a C host linked against libmoonflow.a with no special
 * linker flags (no --whole-archive) must see every op family: the registry
 * once referenced some op tables weakly, so the archive members holding them
 * were left out and "Relu" was unregistered. Exits 0 when every check passes.
 * Built and run by spec/static_link_spec.lua. */
#include "moonflow.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;
static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "check failed: %s\n", what);
    failures++;
  }
}

int main(void) {
  /* One op of each family that registry.c lists. */
  static const char *const types[] = {"Const", "Add", "Reshape", "Sum", "MatMul", "RandomUniform",
                                      "VariableV2", "ApplyGradientDescent", "Relu", "Gather",
                                      "While", "CheckNumerics"};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    char what[64];
    snprintf(what, sizeof what, "%s is registered", types[i]);
    check(mf_op_type_registered(types[i]), what);
  }
  /* And one of them runs: relu([-1, 2]) = [0, 2]. */
  mf_status *s = mf_status_new();
  mf_graph *g = mf_graph_new();
  mf_op_desc *d = mf_op_desc_new(g, "Placeholder", "x");
  int64_t dims[1] = {2};
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_shape(d, "shape", dims, 1);
  mf_op *x = mf_op_desc_finish(d, s);
  d = mf_op_desc_new(g, "Relu", "y");
  mf_op_desc_add_input(d, (mf_output){x, 0});
  mf_op *y = mf_op_desc_finish(d, s);
  check(mf_status_code(s) == MF_OK, mf_status_message(s));
  mf_session *sess = mf_session_new(g, s);
  mf_tensor *in = mf_tensor_new(MF_FLOAT32, 1, dims, s), *out = NULL;
  float *v = mf_tensor_data(in);
  v[0] = -1;
  v[1] = 2;
  mf_output feed = {x, 0}, fetch = {y, 0};
  mf_session_run(sess, &feed, &in, 1, &fetch, &out, 1, NULL, 0, s);
  check(mf_status_code(s) == MF_OK, mf_status_message(s));
  if (out) {
    const float *r = mf_tensor_data(out);
    check(r[0] == 0 && r[1] == 2, "relu([-1, 2]) == [0, 2]");
  }
  mf_tensor_release(out);
  mf_tensor_release(in);
  mf_session_free(sess);
  mf_graph_release(g);
  mf_status_free(s);
  if (failures) return 1;
  printf("static_link_check: ok\n");
  return 0;
}
