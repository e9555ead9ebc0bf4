/* static_link_check.c — a C host of the installed library: linked with plain
 * `-lmoonflow` against libmoonflow.a (no --whole-archive), or against the
 * shared library, it must see every op family and run one op or more of each.
 * The registry once referenced some op tables weakly, so the archive members
 * holding them were left out and "Relu" was unregistered.
 * usage: static_link_check [number of registered op types expected]
 * Exits 0 and prints "static_link_check: ok" when every check passes.
 * Built and run by spec/install_spec.lua. */
#include "moonflow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "check failed: %s\n", what);
    failures++;
  }
}

static mf_status *status;

static mf_op *finish(mf_op_desc *d) {
  mf_op *op = mf_op_desc_finish(d, status);
  if (!op) {
    fprintf(stderr, "building an op: %s\n", mf_status_message(status));
    failures++;
    mf_status_clear(status);
  }
  return op;
}

static mf_output out0(mf_op *op) { return (mf_output){op, 0}; }

/* A constant of dtype (float32, int32 or bool) holding v, of shape dims. */
static mf_op *constant(mf_graph *g, mf_dtype dtype, int rank, const int64_t *dims, const double *v) {
  mf_tensor *t = mf_tensor_new(dtype, rank, dims, status);
  for (int64_t i = 0; i < mf_tensor_size(t); i++) {
    if (dtype == MF_FLOAT32) ((float *)mf_tensor_data(t))[i] = (float)v[i];
    else if (dtype == MF_INT32) ((int32_t *)mf_tensor_data(t))[i] = (int32_t)v[i];
    else ((bool *)mf_tensor_data(t))[i] = v[i] != 0;
  }
  mf_op_desc *d = mf_op_desc_new(g, "Const", NULL);
  mf_op_desc_set_attr_tensor(d, "value", t);
  mf_op_desc_set_attr_type(d, "dtype", dtype);
  mf_tensor_release(t);
  return finish(d);
}
static mf_op *scalar(mf_graph *g, mf_dtype dtype, double v) { return constant(g, dtype, 0, NULL, &v); }

/* An op of `type` on n inputs. */
static mf_op *op(mf_graph *g, const char *type, int n, const mf_output *in) {
  mf_op_desc *d = mf_op_desc_new(g, type, NULL);
  for (int i = 0; i < n; i++) mf_op_desc_add_input(d, in[i]);
  return finish(d);
}
#define OP(g, type, ...) op(g, type, sizeof((mf_output[]){__VA_ARGS__}) / sizeof(mf_output), \
                            (mf_output[]){__VA_ARGS__})

/* A function argument (_Arg) of a float32 scalar. */
static mf_op *scalar_arg(mf_graph *f) {
  mf_op_desc *d = mf_op_desc_new(f, "_Arg", NULL);
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_shape(d, "shape", NULL, 0);
  return finish(d);
}

/* Sets function attribute `name` (with _in and _out) of d: f, its argument, its result. */
static void set_function(mf_op_desc *d, const char *name, mf_graph *f, mf_op *arg, mf_op *result) {
  char key[32];
  int64_t in[1] = {mf_op_id(arg)}, out[2] = {mf_op_id(result), 0};
  mf_op_desc_set_attr_graph(d, name, f);
  snprintf(key, sizeof key, "%s_in", name);
  mf_op_desc_set_attr_ints(d, key, in, 1);
  snprintf(key, sizeof key, "%s_out", name);
  mf_op_desc_set_attr_ints(d, key, out, 2);
}

/* The value of port p (a new reference) after running sess with x fed. */
static mf_tensor *run(mf_session *sess, mf_output x, mf_tensor *xv, mf_output p) {
  mf_tensor *v = NULL;
  mf_session_run(sess, &x, &xv, 1, &p, &v, 1, NULL, 0, status);
  if (mf_status_code(status) != MF_OK) {
    fprintf(stderr, "running %s: %s\n", mf_op_name(p.op), mf_status_message(status));
    failures++;
    mf_status_clear(status);
  }
  return v;
}

/* Checks that port p computes the n float32 values want. */
static void expect(mf_session *sess, mf_output x, mf_tensor *xv, mf_output p, int n, const float *want) {
  mf_tensor *v = run(sess, x, xv, p);
  char what[160];
  snprintf(what, sizeof what, "%s computes what it should", mf_op_name(p.op));
  int ok = v && mf_tensor_dtype(v) == MF_FLOAT32 && mf_tensor_size(v) == n;
  for (int i = 0; ok && i < n; i++) ok = ((float *)mf_tensor_data(v))[i] == want[i];
  check(ok, what);
  mf_tensor_release(v);
}

int main(int argc, char **argv) {
  status = mf_status_new();
  check(strcmp(mf_version(), MF_VERSION) == 0, "mf_version() is the header's MF_VERSION");
  if (argc > 1) {
    char what[96];
    snprintf(what, sizeof what, "%d op types registered, as in the shared library (%s)",
             mf_registry_num_ops(), argv[1]);
    check(mf_registry_num_ops() == atoi(argv[1]), what);
  }

  mf_graph *g = mf_graph_new();
  int64_t d22[2] = {2, 2}, d2[1] = {2}, d4[1] = {4};
  mf_op_desc *d = mf_op_desc_new(g, "Placeholder", "x");
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_shape(d, "shape", d22, 2);
  mf_output x = out0(finish(d));
  /* x = [[1, -2], [3, 4]] */
  mf_tensor *xv = mf_tensor_new(MF_FLOAT32, 2, d22, status);
  memcpy(mf_tensor_data(xv), (float[]){1, -2, 3, 4}, sizeof(float[4]));

  mf_output sum = out0(OP(g, "Add", x, x));                               /* math */
  mf_output relu = out0(OP(g, "Relu", sum));                              /* nn */
  mf_output prod = out0(OP(g, "MatMul", relu, x));                        /* matmul */
  d = mf_op_desc_new(g, "Sum", NULL);                                     /* reduce */
  mf_op_desc_add_input(d, prod);
  mf_op_desc_set_attr_ints(d, "axis", (int64_t[]){0, 1}, 2);
  mf_output total = out0(finish(d));
  mf_output flat = out0(OP(g, "Reshape", x, out0(constant(g, MF_INT32, 1, (int64_t[]){1}, (double[]){4}))));
  mf_output picked = out0(OP(g, "Gather", flat, out0(constant(g, MF_INT32, 1, d2, (double[]){3, 0}))));
  mf_output chosen = out0(OP(g, "Select", out0(constant(g, MF_BOOL, 1, d2, (double[]){1, 0})), picked,
                             out0(constant(g, MF_FLOAT32, 1, d2, (double[]){7, 8}))));
  mf_output segments = out0(OP(g, "SegmentSum", flat, out0(constant(g, MF_INT32, 1, d4, (double[]){0, 0, 1, 1}))));
  mf_output det = out0(OP(g, "MatrixDeterminant", x));                    /* linalg */
  d = mf_op_desc_new(g, "CheckNumerics", NULL);                           /* debug */
  mf_op_desc_add_input(d, x);
  mf_op_desc_set_attr_string(d, "message", "x");
  mf_output checked = out0(finish(d));
  d = mf_op_desc_new(g, "RandomUniform", NULL);                           /* random */
  mf_op_desc_add_input(d, out0(constant(g, MF_INT32, 1, (int64_t[]){1}, (double[]){1000})));
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_int(d, "seed", 1);
  mf_op_desc_set_attr_int(d, "seed2", 2);
  mf_output uniform = out0(finish(d));

  /* state and train: v = [1, 2]; v -= 0.5 * [2, 2] */
  d = mf_op_desc_new(g, "VariableV2", "v");
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op_desc_set_attr_shape(d, "shape", d2, 1);
  mf_output v = out0(finish(d));
  mf_op *init = OP(g, "Assign", v, out0(constant(g, MF_FLOAT32, 1, d2, (double[]){1, 2})));
  mf_op *step = OP(g, "ApplyGradientDescent", v, out0(scalar(g, MF_FLOAT32, 0.5)),
                   out0(constant(g, MF_FLOAT32, 1, d2, (double[]){2, 2})));

  /* call and while: n = 0; while n < 5: n = n + 1 */
  mf_graph *cond = mf_graph_new(), *body = mf_graph_new();
  mf_op *carg = scalar_arg(cond), *barg = scalar_arg(body);
  mf_op *less = OP(cond, "Less", out0(carg), out0(scalar(cond, MF_FLOAT32, 5)));
  mf_op *next = OP(body, "Add", out0(barg), out0(scalar(body, MF_FLOAT32, 1)));
  d = mf_op_desc_new(g, "While", NULL);
  mf_op_desc_add_input(d, out0(scalar(g, MF_FLOAT32, 0)));
  mf_op_desc_set_attr_int(d, "num_loop_vars", 1);
  set_function(d, "cond", cond, carg, less);
  set_function(d, "body", body, barg, next);
  mf_output loop = out0(finish(d));

  /* cond: det > 0 ? det * 2 : -det */
  mf_graph *then_fn = mf_graph_new(), *else_fn = mf_graph_new();
  mf_op *targ = scalar_arg(then_fn), *earg = scalar_arg(else_fn);
  mf_op *twice = OP(then_fn, "Mul", out0(targ), out0(scalar(then_fn, MF_FLOAT32, 2)));
  mf_op *negated = OP(else_fn, "Neg", out0(earg));
  d = mf_op_desc_new(g, "If", NULL);
  mf_op_desc_add_input(d, out0(OP(g, "Greater", det, out0(scalar(g, MF_FLOAT32, 0)))));
  mf_op_desc_add_input(d, det);
  set_function(d, "then", then_fn, targ, twice);
  set_function(d, "else", else_fn, earg, negated);
  mf_output branch = out0(finish(d));

  /* tensor_array: an array of 2 with element 1 written, then read */
  d = mf_op_desc_new(g, "TensorArray", NULL);
  mf_op_desc_add_input(d, out0(scalar(g, MF_INT32, 2)));
  mf_op_desc_set_attr_type(d, "dtype", MF_FLOAT32);
  mf_op *ta = finish(d);
  mf_output one = out0(scalar(g, MF_INT32, 1));
  mf_op *written = OP(g, "TensorArrayWrite", out0(ta), (mf_output){ta, 1}, one, chosen);
  mf_output read = out0(OP(g, "TensorArrayRead", out0(written), (mf_output){written, 1}, one));
  mf_graph_release(cond);
  mf_graph_release(body);
  mf_graph_release(then_fn);
  mf_graph_release(else_fn);

  mf_session *sess = mf_session_new(g, status);
  if (failures == 0 && sess) {
    expect(sess, x, xv, relu, 4, (float[]){2, 0, 6, 8});
    expect(sess, x, xv, prod, 4, (float[]){2, -4, 30, 20});
    expect(sess, x, xv, total, 1, (float[]){48});
    expect(sess, x, xv, picked, 2, (float[]){4, 1});
    expect(sess, x, xv, chosen, 2, (float[]){4, 8});
    expect(sess, x, xv, segments, 2, (float[]){-1, 7});
    expect(sess, x, xv, det, 1, (float[]){10});
    expect(sess, x, xv, checked, 4, (float[]){1, -2, 3, 4});
    expect(sess, x, xv, loop, 1, (float[]){5});
    expect(sess, x, xv, branch, 1, (float[]){20});
    expect(sess, x, xv, read, 2, (float[]){4, 8});
    mf_tensor *u = run(sess, x, xv, uniform);
    double mean = 0;
    int in_range = u != NULL;
    for (int i = 0; u && i < 1000; i++) {
      float f = ((float *)mf_tensor_data(u))[i];
      in_range = in_range && f >= 0 && f < 1;
      mean += f / 1000;
    }
    check(in_range && mean > 0.4 && mean < 0.6, "RandomUniform: 1000 values in [0, 1), mean near 0.5");
    mf_tensor_release(u);
    expect(sess, x, xv, out0(init), 2, (float[]){1, 2});
    expect(sess, x, xv, out0(step), 2, (float[]){0, 1});
    expect(sess, x, xv, v, 2, (float[]){0, 1});
  }
  mf_session_free(sess);
  mf_graph_release(g);
  mf_tensor_release(xv);
  mf_status_free(status);
  if (failures) return 1;
  printf("static_link_check: ok\n");
  return 0;
}
