/* examples/embed/frozen.c — a C program running a model trained in
 * TensorFlow: a frozen GraphDef (.pb, variables folded into constants), read
 * by the same call as moonflow's graph files. It feeds ROWS x COLS float32
 * numbers read from standard input to tensor INPUT, runs OUTPUT and prints
 * its rows, one a line.
 *   cc frozen.c $(pkg-config --cflags --libs moonflow) -o frozen
 *   ./frozen spec/fixtures/graphdef/mlp.pb x:0 probs:0 4 5 < inputs.txt */
#include <moonflow.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(mf_status *s, const char *what) {
  fprintf(stderr, "%s: %s\n", what, mf_status_message(s));
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s MODEL.pb INPUT OUTPUT ROWS COLS < numbers\n", argv[0]);
    return 2;
  }
  const int64_t dims[2] = {atoll(argv[4]), atoll(argv[5])};
  mf_status *s = mf_status_new();
  mf_graph_file *model = mf_graph_file_read(argv[1], s);
  if (!model) return fail(s, "loading the model");
  mf_graph *g = mf_graph_file_graph(model);
  mf_output input, output;
  if (mf_graph_port(g, argv[2], &input, s) != MF_OK || mf_graph_port(g, argv[3], &output, s) != MF_OK)
    return fail(s, "finding the tensors");
  mf_tensor *x = mf_tensor_new(MF_FLOAT32, 2, dims, s);
  if (!x) return fail(s, "making the input");
  float *in = mf_tensor_data(x);
  for (int64_t i = 0; i < dims[0] * dims[1]; i++)
    if (scanf("%f", &in[i]) != 1) {
      fprintf(stderr, "reading the input: expected %lld numbers\n", (long long)(dims[0] * dims[1]));
      return 1;
    }
  mf_session *sess = mf_session_new(g, s);
  if (!sess) return fail(s, "creating a session");
  mf_tensor *y = NULL;
  if (mf_session_run(sess, &input, &x, 1, &output, &y, 1, NULL, 0, s) != MF_OK) return fail(s, "running the model");
  const float *out = mf_tensor_data(y);
  int64_t rows = mf_tensor_rank(y) > 0 ? mf_tensor_dims(y)[0] : 1, cols = rows ? mf_tensor_size(y) / rows : 0;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) printf("%.9g%s", out[i * cols + j], j + 1 < cols ? " " : "\n");
  mf_tensor_release(x);
  mf_tensor_release(y);
  mf_session_free(sess);
  mf_graph_file_free(model);
  mf_status_free(s);
  return 0;
}
