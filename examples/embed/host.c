/* examples/embed/host.c — a C program running the policy net that train.lua
 * trained and saved, with no Lua: it loads the graph file, restores the
 * checkpoint, and runs "policy:0" for three inputs fed to "x:0", into its own
 * buffer; it prints the outputs as train.lua does, then saves the weights
 * again (DIR/resaved.ckpt) as tf.train.Saver would.
 *   cc host.c $(pkg-config --cflags --libs moonflow) -o host && ./host DIR */
#include <math.h>
#include <moonflow.h>
#include <stdio.h>

static int fail(mf_status *s, const char *what) {
  fprintf(stderr, "%s: %s\n", what, mf_status_message(s));
  return 1;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  char path[4096];
  mf_status *s = mf_status_new();
  snprintf(path, sizeof path, "%s/policy.graph", dir);
  mf_graph_file *model = mf_graph_file_read(path, s);
  if (!model) return fail(s, "loading the graph");
  mf_graph *g = mf_graph_file_graph(model);
  mf_session *sess = mf_session_new(g, s);
  if (!sess) return fail(s, "creating a session");
  snprintf(path, sizeof path, "%s/policy.ckpt", dir);
  if (mf_graph_file_restore(model, sess, path, s) != MF_OK) return fail(s, "restoring the checkpoint");

  mf_output x, policy;
  if (mf_graph_port(g, "x:0", &x, s) != MF_OK || mf_graph_port(g, "policy:0", &policy, s) != MF_OK)
    return fail(s, "finding the tensors");
  mf_callable *run = mf_session_make_callable(sess, &x, 1, &policy, 1, NULL, 0, s);
  if (!run) return fail(s, "preparing the run");

  /* The caller's buffers, wrapped without copies: inputs x[i][j] = sin(i + j) (1-based, as train.lua). */
  static float in[3][8], out[3][4];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 8; j++) in[i][j] = (float)sin((double)(i + 1) + (double)(j + 1));
  const int64_t in_dims[2] = {3, 8}, out_dims[2] = {3, 4};
  mf_tensor *in_t = mf_tensor_wrap(MF_FLOAT32, 2, in_dims, in, NULL, NULL, s);
  mf_tensor *out_t = mf_tensor_wrap(MF_FLOAT32, 2, out_dims, out, NULL, NULL, s);
  if (!in_t || !out_t) return fail(s, "wrapping the buffers");
  if (mf_callable_run_into(run, &in_t, &out_t, s) != MF_OK) return fail(s, "running the net");
  for (int i = 0; i < 3; i++) printf("%.9g %.9g %.9g %.9g\n", out[i][0], out[i][1], out[i][2], out[i][3]);

  snprintf(path, sizeof path, "%s/resaved.ckpt", dir);
  if (mf_graph_file_save(model, sess, path, s) != MF_OK) return fail(s, "saving the checkpoint");
  mf_tensor_release(in_t);
  mf_tensor_release(out_t);
  mf_session_free(sess);
  mf_graph_file_free(model);
  mf_status_free(s);
  return 0;
}
