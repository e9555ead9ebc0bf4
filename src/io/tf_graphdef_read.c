/* tf_graphdef_read.c — a binary TensorFlow GraphDef (a frozen TensorFlow
 * 1.x model) imported into a moonflow graph (tf.import_graph_def, C hosts
 * through mf_graph_file_read): each node built as the table of
 * tf_graphdef_ops.c says, or by an expansion (Softmax, FusedBatchNorm), and
 * each control flow v1 loop as one While (loops_find). Everything read is
 * checked: a malformed protobuf, the ops moonflow lacks (all of them listed,
 * with counts), a bad input or attribute is an error naming the node. */
#include "io/tf_graphdef.h"
#include "core/memory.h"
#include "core/strmap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_PORT ((mf_output){NULL, 0})

/* Reading ------------------------------------------------------------------------------ */

enum { MAX_EXPANDED_OUTPUTS = 1 };

typedef struct node_state {
  const mf_gd_row *row;
  mf_output *ports;   /* its outputs in moonflow (an op's, or an expansion's) */
  int num_ports;
  mf_op *op;          /* the op control inputs on it wait for */
  int pending;        /* inputs not yet built */
  mf_output expanded[MAX_EXPANDED_OUTPUTS];
  int loop;           /* control flow v1: 1 + the index of the loop it belongs to, 0 for none */
  char role;          /* in its loop: 'E'nter, 'M'erge, 'S'witch, 'N'extIteration, 'C' LoopCond, e'X'it,
                       * or 0 for a node of the condition (in_cond) or the body (in_body) */
  bool in_cond, in_body, done;
} node_state;

typedef struct loop {
  const char *frame;  /* the frame_name of its Enters (owned by the GraphDef, n_frame bytes) */
  size_t n_frame;
  int loop_cond;      /* node indices; -1 while not found */
  int n_vars, n_caps;
  int *merge, *switch_, *next, *enter; /* per loop variable */
  int *cap;           /* the Enters of outer tensors the loop reads (is_constant) */
  mf_op *op;          /* the While, once built */
} loop;

struct mf_gd_importer {
  mf_graph *graph;
  const Tensorflow__GraphDef *def;
  node_state *nodes;
  mf_strmap *index;   /* node name -> its index + 1 */
  const mf_graphdef_options *options;
  mf_status *s;
  loop *loops;
  int n_loops;
};

static mf_code bad_node(mf_gd_importer *im, const Tensorflow__NodeDef *node, const char *fmt, ...) MF_PRINTF(3, 4);
static mf_code bad_node(mf_gd_importer *im, const Tensorflow__NodeDef *node, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mf_status_set(im->s, MF_INVALID_ARGUMENT, "GraphDef node '%s' (%s): %s", node->name, node->op, msg);
}

/* The node an input names ("x", "x:1", "^x") and the output index (-1 for a control input); NULL if none. */
static int node_of_input(mf_gd_importer *im, const char *input, int *index) {
  bool control = input[0] == '^';
  const char *name = input + control;
  const char *colon = strrchr(name, ':');
  char buf[1024];
  *index = control ? -1 : 0;
  if (colon && !control) {
    char *end;
    errno = 0;
    long i = strtol(colon + 1, &end, 10);
    if (*end || errno || i < 0 || i > INT32_MAX || colon[1] == '\0') return -1;
    *index = (int)i;
    if ((size_t)(colon - name) >= sizeof buf) return -1;
    snprintf(buf, sizeof buf, "%.*s", (int)(colon - name), name);
    name = buf;
  }
  void **slot = mf_strmap_slot(im->index, name, false);
  return slot ? (int)(intptr_t)*slot - 1 : -1;
}

/* Whether TensorFlow tensor names a and b name one tensor ("x" is "x:0"). */
static bool same_tensor(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  bool a_bare = !strchr(a, ':'), b_bare = !strchr(b, ':');
  if (a_bare == b_bare) return strcmp(a, b) == 0;
  return a_bare ? nb == na + 2 && strncmp(a, b, na) == 0 && strcmp(b + na, ":0") == 0
                : na == nb + 2 && strncmp(a, b, nb) == 0 && strcmp(a + nb, ":0") == 0;
}

/* What input_map puts in place of TensorFlow tensor input; false if nothing. */
static bool mapped(mf_gd_importer *im, const char *input, mf_output *out) {
  const mf_graphdef_options *o = im->options;
  for (int i = 0; o && input[0] != '^' && i < o->num_input_map; i++)
    if (same_tensor(o->input_map_names[i], input)) return *out = o->input_map_ports[i], true;
  return false;
}

static mf_code resolve_input(mf_gd_importer *im, const Tensorflow__NodeDef *node, const char *input, mf_output *out) {
  if (mapped(im, input, out)) return MF_OK;
  int index, k = node_of_input(im, input, &index);
  node_state *src = &im->nodes[k];
  if (index >= src->num_ports || !src->ports[index].op)
    return bad_node(im, node, "input %s: node '%s' has no output %d moonflow imports", input,
                    im->def->node[k]->name, index);
  *out = src->ports[index];
  return MF_OK;
}

static mf_code tensor_in(mf_gd_importer *im, const Tensorflow__NodeDef *node, const Tensorflow__TensorProto *p,
                         mf_tensor **out) {
  mf_dtype dtype;
  char buf[32];
  if (!mf_gd_mf_dtype(p->dtype, &dtype))
    return bad_node(im, node, "a tensor of dtype %s, which moonflow has not",
                    mf_gd_dtype_name(p->dtype, buf, sizeof buf));
  const Tensorflow__TensorShapeProto *sp = p->tensor_shape;
  int64_t dims[MF_MAX_RANK], size = 1;
  int rank = sp ? (int)sp->n_dim : 0;
  if ((sp && sp->unknown_rank) || rank > MF_MAX_RANK)
    return bad_node(im, node, "a tensor of unknown or too large rank");
  for (int i = 0; i < rank; i++) {
    dims[i] = sp->dim[i]->size;
    if (dims[i] < 0 || (dims[i] > 0 && size > INT64_MAX / 8 / dims[i]))
      return bad_node(im, node, "a tensor with dimension %" PRId64, dims[i]);
    size *= dims[i];
  }
  if (dtype == MF_STRING) {
    if (p->n_string_val > (size_t)size || (p->n_string_val == 0 && size > 0 && p->n_string_val != 0))
      return bad_node(im, node, "a string tensor of %" PRId64 " elements holds %zu", size, p->n_string_val);
    const char **bytes = mf_calloc((size_t)size + 1, sizeof *bytes);
    int64_t *lengths = mf_calloc((size_t)size + 1, sizeof *lengths);
    for (int64_t i = 0; bytes && lengths && p->n_string_val && i < size; i++) {
      const ProtobufCBinaryData *b = &p->string_val[i < (int64_t)p->n_string_val ? i : (int64_t)p->n_string_val - 1];
      bytes[i] = (const char *)b->data, lengths[i] = (int64_t)b->len;
    }
    *out = bytes && lengths ? mf_tensor_new_strings(rank, dims, p->n_string_val ? bytes : NULL,
                                                    p->n_string_val ? lengths : NULL, im->s)
                            : (mf_status_set(im->s, MF_RESOURCE_EXHAUSTED, "out of memory"), NULL);
    mf_free(bytes), mf_free(lengths);
    return *out ? MF_OK : im->s->code;
  }
  size_t elem = mf_dtype_size(dtype);
  const void *vals = NULL;
  size_t n_vals = 0, val_size = elem;
  switch (dtype) {
  case MF_FLOAT32: vals = p->float_val, n_vals = p->n_float_val; break;
  case MF_FLOAT64: vals = p->double_val, n_vals = p->n_double_val; break;
  case MF_INT32: case MF_UINT8: vals = p->int_val, n_vals = p->n_int_val, val_size = 4; break;
  case MF_INT64: vals = p->int64_val, n_vals = p->n_int64_val; break;
  case MF_BOOL: vals = p->bool_val, n_vals = p->n_bool_val, val_size = sizeof(protobuf_c_boolean); break;
  default: break;
  }
  if (p->tensor_content.len && p->tensor_content.len != (size_t)size * elem)
    return bad_node(im, node, "a tensor of %" PRId64 " elements has %zu bytes of content", size,
                    p->tensor_content.len);
  if (!p->tensor_content.len && n_vals > (size_t)size)
    return bad_node(im, node, "a tensor of %" PRId64 " elements holds %zu values", size, n_vals);
  mf_tensor *t = mf_tensor_new(dtype, rank, dims, im->s);
  if (!t) return im->s->code;
  uint8_t *data = mf_tensor_data(t);
  if (p->tensor_content.len) memcpy(data, p->tensor_content.data, p->tensor_content.len);
  else if (n_vals == 0) memset(data, 0, (size_t)size * elem);
  else
    for (int64_t i = 0; i < size; i++) { /* a short list repeats its last value */
      const uint8_t *v = (const uint8_t *)vals + (size_t)(i < (int64_t)n_vals ? i : (int64_t)n_vals - 1) * val_size;
      if (dtype == MF_UINT8) data[i] = (uint8_t) * (const int32_t *)v;
      else if (dtype == MF_BOOL) data[i] = *(const protobuf_c_boolean *)v != 0;
      else memcpy(data + (size_t)i * elem, v, elem);
    }
  *out = t;
  return MF_OK;
}

static mf_code shape_in(mf_gd_importer *im, const Tensorflow__NodeDef *node, const Tensorflow__TensorShapeProto *p,
                        mf_shape *out) {
  out->rank = !p || p->unknown_rank ? -1 : (int)p->n_dim;
  if (out->rank > MF_MAX_RANK) return bad_node(im, node, "a shape of rank %d", out->rank);
  for (int i = 0; i < out->rank; i++) out->dims[i] = p->dim[i]->size < 0 ? -1 : p->dim[i]->size;
  return MF_OK;
}

/* Whether TensorFlow attribute name of a node of row is one moonflow infers or has not. */
static bool skipped_attr(const mf_gd_row *row, const char *name) {
  char word[64];
  const char *list = row->types;
  while (mf_gd_next_word(&list, word, sizeof word))
    if (strncmp(word, name, strcspn(word, "=")) == 0 && strcspn(word, "=") == strlen(name)) return !strchr(word, '!');
  list = row->renames;
  while (mf_gd_next_word(&list, word, sizeof word))
    if (word[0] == ':' && strcmp(word + 1, name) == 0) return true;
  return name[0] == '_';
}

/* moonflow's name of TensorFlow attribute name. */
static const char *mf_attr_name(const mf_gd_row *row, const char *name, char *word, size_t size) {
  const char *list = row->renames;
  while (mf_gd_next_word(&list, word, size))
    if (word[0] != ':' && !strchr(word, '=') && mf_gd_side_is(word, 1, name)) {
      *strchr(word, ':') = '\0';
      return word;
    }
  return name;
}

static mf_code attr_in(mf_gd_importer *im, const Tensorflow__NodeDef *node, mf_op_desc *d, const char *name,
                       const Tensorflow__AttrValue *v) {
  mf_dtype t;
  mf_shape shape;
  mf_tensor *value;
  char buf[32];
  switch (v->value_case) {
  case TENSORFLOW__ATTR_VALUE__VALUE_S: {
    if (memchr(v->s.data, 0, v->s.len)) return bad_node(im, node, "attribute %s: a string holding a NUL byte", name);
    char *text = mf_malloc(v->s.len + 1);
    if (!text) return mf_status_set(im->s, MF_RESOURCE_EXHAUSTED, "out of memory");
    memcpy(text, v->s.data, v->s.len), text[v->s.len] = '\0';
    mf_op_desc_set_attr_string(d, name, text);
    mf_free(text);
    return MF_OK;
  }
  case TENSORFLOW__ATTR_VALUE__VALUE_I: return mf_op_desc_set_attr_int(d, name, v->i), MF_OK;
  case TENSORFLOW__ATTR_VALUE__VALUE_F: return mf_op_desc_set_attr_float(d, name, v->f), MF_OK;
  case TENSORFLOW__ATTR_VALUE__VALUE_B: return mf_op_desc_set_attr_bool(d, name, v->b), MF_OK;
  case TENSORFLOW__ATTR_VALUE__VALUE_TYPE:
    if (!mf_gd_mf_dtype(v->type, &t))
      return bad_node(im, node, "attribute %s: dtype %s, which moonflow has not", name,
                      mf_gd_dtype_name(v->type, buf, sizeof buf));
    return mf_op_desc_set_attr_type(d, name, t), MF_OK;
  case TENSORFLOW__ATTR_VALUE__VALUE_SHAPE:
    if (shape_in(im, node, v->shape, &shape) != MF_OK) return im->s->code;
    return mf_op_desc_set_attr_shape(d, name, shape.dims, shape.rank), MF_OK;
  case TENSORFLOW__ATTR_VALUE__VALUE_TENSOR:
    if (!v->tensor) return bad_node(im, node, "attribute %s: an empty tensor", name);
    if (tensor_in(im, node, v->tensor, &value) != MF_OK) return im->s->code;
    mf_op_desc_set_attr_tensor(d, name, value);
    mf_tensor_release(value);
    return MF_OK;
  case TENSORFLOW__ATTR_VALUE__VALUE_LIST: {
    const Tensorflow__AttrValue__ListValue *l = v->list;
    if (l->n_s || l->n_f || l->n_b || l->n_type || l->n_shape || l->n_tensor || l->n_func)
      return bad_node(im, node, "attribute %s: a list of other than integers, which moonflow does not take", name);
    if (l->n_i > INT32_MAX) return bad_node(im, node, "attribute %s: a list too long", name);
    return mf_op_desc_set_attr_ints(d, name, l->i, (int)l->n_i), MF_OK;
  }
  default: return bad_node(im, node, "attribute %s: a function or placeholder, which moonflow does not take", name);
  }
}

/* Sets moonflow attribute attr of d from the value of Const node input (TensorFlow's constant input). */
static mf_code const_attr_in(mf_gd_importer *im, const Tensorflow__NodeDef *node, mf_op_desc *d, const char *attr,
                             const char *input) {
  int index, k = node_of_input(im, input, &index);
  const Tensorflow__NodeDef *src = im->def->node[k];
  const Tensorflow__AttrValue *v = NULL;
  for (size_t i = 0; i < src->n_attr; i++)
    if (strcmp(src->attr[i]->key, "value") == 0) v = src->attr[i]->value;
  if (strcmp(src->op, "Const") != 0 || !v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_TENSOR || !v->tensor)
    return bad_node(im, node, "input %s (moonflow's attribute %s) must be a Const, not a %s", input, attr, src->op);
  mf_tensor *t;
  if (tensor_in(im, src, v->tensor, &t) != MF_OK) return im->s->code;
  mf_dtype dt = mf_tensor_dtype(t);
  int64_t n = mf_tensor_size(t);
  int64_t *ints = dt == MF_INT32 || dt == MF_INT64 ? mf_malloc((size_t)(n + 1) * sizeof *ints) : NULL;
  for (int64_t i = 0; ints && i < n; i++)
    ints[i] = dt == MF_INT32 ? ((int32_t *)mf_tensor_data(t))[i] : ((int64_t *)mf_tensor_data(t))[i];
  if (ints && mf_tensor_rank(t) == 0) mf_op_desc_set_attr_int(d, attr, ints[0]);
  else if (ints && n <= INT32_MAX) mf_op_desc_set_attr_ints(d, attr, ints, (int)n);
  mf_tensor_release(t);
  mf_free(ints);
  return ints ? MF_OK : bad_node(im, node, "input %s (moonflow's attribute %s) must hold int32 or int64", input, attr);
}

/* The name for an op of node: the node's own, or "node/what". */
static void op_name(char *buf, size_t size, const Tensorflow__NodeDef *node, const char *what) {
  if (what) snprintf(buf, size, "%s/%s", node->name, what);
  else snprintf(buf, size, "%s", node->name);
}

/* Finishes d (for node), which must come out named want (under the graph's name scope). */
static mf_op *finish(mf_gd_importer *im, const Tensorflow__NodeDef *node, mf_op_desc *d, const char *want) {
  mf_op *op = mf_op_desc_finish(d, im->s);
  if (!op) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mf_status_message(im->s));
    bad_node(im, node, "%s", msg);
    return NULL;
  }
  const char *scope = mf_graph_name_scope(im->graph);
  const char *got = mf_op_name(op);
  if (strncmp(got, scope, strlen(scope)) != 0 || strcmp(got + strlen(scope), want) != 0) {
    bad_node(im, node, "its op came back as '%s': the name is taken (two nodes of one name?)", got);
    return NULL;
  }
  return op;
}

/* Builds op type of node's expansion from inputs (an attribute: keepdims with axis -1 when reduce). */
static mf_output build(mf_gd_importer *im, const Tensorflow__NodeDef *node, const char *type, const char *what,
                       const mf_output *in, int n, bool reduce) {
  char name[1024];
  op_name(name, sizeof name, node, what);
  mf_op_desc *d = mf_op_desc_new(im->graph, type, name);
  for (int i = 0; i < n; i++) mf_op_desc_add_input(d, in[i]);
  if (node->device[0]) mf_op_desc_set_device(d, node->device);
  if (reduce) {
    mf_op_desc_set_attr_int(d, "axis", -1);
    mf_op_desc_set_attr_bool(d, "keepdims", true);
  }
  mf_op *op = finish(im, node, d, name);
  return op ? (mf_output){op, 0} : NO_PORT;
}

#define BUILD(type, what, reduce, ...)                                                                 \
  build(im, node, type, what, (const mf_output[]){__VA_ARGS__},                                        \
        (int)(sizeof((const mf_output[]){__VA_ARGS__}) / sizeof(mf_output)), reduce)

/* x - max - log(sum(exp(x - max))), along the last axis, as tf.nn.log_softmax. */
static mf_code log_softmax(mf_gd_importer *im, const Tensorflow__NodeDef *node, const mf_output *in, int n_in,
                           mf_output *out) {
  if (n_in != 1) return bad_node(im, node, "expected 1 input, got %d", n_in);
  mf_output max = BUILD("Max", "max", true, in[0]);
  mf_output shifted = max.op ? BUILD("Sub", "shifted", false, in[0], max) : NO_PORT;
  mf_output e = shifted.op ? BUILD("Exp", "exp", false, shifted) : NO_PORT;
  mf_output sum = e.op ? BUILD("Sum", "sum", true, e) : NO_PORT;
  mf_output log_sum = sum.op ? BUILD("Log", "log_sum", false, sum) : NO_PORT;
  *out = log_sum.op ? BUILD("Sub", NULL, false, shifted, log_sum) : NO_PORT;
  return out->op ? MF_OK : im->s->code;
}

static node_state *state_of(mf_gd_importer *im, const Tensorflow__NodeDef *node) {
  for (size_t i = 0; i < im->def->n_node; i++)
    if (im->def->node[i] == node) return &im->nodes[i];
  return NULL;
}

static mf_code set_expanded(mf_gd_importer *im, const Tensorflow__NodeDef *node, mf_output y) {
  node_state *st = state_of(im, node);
  st->expanded[0] = y;
  st->ports = st->expanded, st->num_ports = 1, st->op = y.op;
  return MF_OK;
}

mf_code mf_gd_expand_log_softmax(mf_gd_importer *im, const Tensorflow__NodeDef *node, const mf_output *in, int n_in) {
  mf_output y = NO_PORT;
  return log_softmax(im, node, in, n_in, &y) != MF_OK ? im->s->code : set_expanded(im, node, y);
}

static const Tensorflow__AttrValue *node_attr(const Tensorflow__NodeDef *node, const char *name) {
  for (size_t i = 0; i < node->n_attr; i++)
    if (strcmp(node->attr[i]->key, name) == 0) return node->attr[i]->value;
  return NULL;
}

/* Batch normalization with the stored statistics (is_training false):
 * y = x * (scale / sqrt(variance + epsilon)) + (offset - mean * scale / sqrt(variance + epsilon)). */
mf_code mf_gd_expand_batch_norm(mf_gd_importer *im, const Tensorflow__NodeDef *node, const mf_output *in, int n_in) {
  if (n_in != 5) return bad_node(im, node, "expected 5 inputs (x, scale, offset, mean, variance), got %d", n_in);
  const Tensorflow__AttrValue *training = node_attr(node, "is_training"), *eps = node_attr(node, "epsilon");
  const Tensorflow__AttrValue *format = node_attr(node, "data_format");
  if (training && training->value_case == TENSORFLOW__ATTR_VALUE__VALUE_B && training->b)
    return bad_node(im, node, "is_training is true; moonflow imports batch normalization with stored statistics "
                    "(a frozen model, is_training false)");
  if (format && format->value_case == TENSORFLOW__ATTR_VALUE__VALUE_S &&
      !(format->s.len == 4 && memcmp(format->s.data, "NHWC", 4) == 0))
    return bad_node(im, node, "data_format %.*s; moonflow imports NHWC", (int)format->s.len,
                    (const char *)format->s.data);
  double epsilon = eps && eps->value_case == TENSORFLOW__ATTR_VALUE__VALUE_F ? eps->f : 1e-4;
  char name[1024];
  op_name(name, sizeof name, node, "epsilon");
  mf_op_desc *d = mf_op_desc_new(im->graph, "Const", name);
  mf_op_desc_set_attr_scalar(d, "value", mf_op_output_dtype(in[4].op, in[4].index), epsilon);
  mf_op *e = finish(im, node, d, name);
  if (!e) return im->s->code;
  mf_output v = BUILD("Add", "variance_epsilon", false, in[4], (mf_output){e, 0});
  mf_output r = v.op ? BUILD("Rsqrt", "rsqrt", false, v) : NO_PORT;
  mf_output scale = r.op ? BUILD("Mul", "scale", false, r, in[1]) : NO_PORT;
  mf_output m = scale.op ? BUILD("Mul", "mean_scaled", false, in[3], scale) : NO_PORT;
  mf_output shift = m.op ? BUILD("Sub", "shift", false, in[2], m) : NO_PORT;
  mf_output xs = shift.op ? BUILD("Mul", "x_scaled", false, in[0], scale) : NO_PORT;
  mf_output y = xs.op ? BUILD("Add", NULL, false, xs, shift) : NO_PORT;
  return y.op ? set_expanded(im, node, y) : im->s->code;
}

/* Builds node k, whose inputs are built. */
static mf_code node_in(mf_gd_importer *im, size_t k) {
  const Tensorflow__NodeDef *node = im->def->node[k];
  node_state *st = &im->nodes[k];
  const mf_gd_row *row = st->row;
  size_t n_data = 0;
  while (n_data < node->n_input && node->input[n_data][0] != '^') n_data++;
  int n_consts = mf_gd_count_words(row->consts);
  if (n_data < (size_t)n_consts) return bad_node(im, node, "expected at least %d inputs, got %zu", n_consts, n_data);
  int n_in = (int)n_data - n_consts;
  mf_output *in = mf_calloc((size_t)n_in + 1, sizeof *in);
  if (!in) return mf_status_set(im->s, MF_RESOURCE_EXHAUSTED, "out of memory");
  mf_code code = MF_OK;
  for (int i = 0; i < n_in && code == MF_OK; i++) code = resolve_input(im, node, node->input[i], &in[i]);
  if (code == MF_OK && row->expand) {
    code = row->expand(im, node, in, n_in);
    mf_free(in);
    return code;
  }
  mf_op_desc *d = code == MF_OK ? mf_op_desc_new(im->graph, row->mf, node->name) : NULL;
  for (int i = 0; d && i < n_in; i++) mf_op_desc_add_input(d, in[i]);
  mf_free(in);
  if (!d) return code;
  char word[64];
  const char *list = row->consts;
  for (int i = n_in; code == MF_OK && mf_gd_next_word(&list, word, sizeof word); i++) {
    *strchr(word, ':') = '\0';
    code = const_attr_in(im, node, d, word, node->input[i]);
  }
  for (size_t i = n_data; code == MF_OK && i < node->n_input; i++) {
    int index, c = node_of_input(im, node->input[i], &index);
    mf_op *after = im->nodes[c].op; /* in a loop's function, its arguments are there from the start */
    if (after && mf_op_graph(after) == im->graph && strcmp(mf_op_type(after), "_Arg") != 0)
      mf_op_desc_add_control_input(d, after);
  }
  for (size_t i = 0; code == MF_OK && i < node->n_attr; i++) {
    const char *name = node->attr[i]->key;
    if (skipped_attr(row, name)) continue;
    if (!node->attr[i]->value) code = bad_node(im, node, "attribute %s has no value", name);
    else code = attr_in(im, node, d, mf_attr_name(row, name, word, sizeof word), node->attr[i]->value);
  }
  if (node->device[0]) mf_op_desc_set_device(d, node->device);
  if (code != MF_OK) { /* a desc, once made, is finished; that error is not the one to report */
    mf_status ignored;
    mf_op_desc_finish(d, &ignored);
    return code;
  }
  mf_op *op = finish(im, node, d, node->name);
  if (!op) return im->s->code;
  st->op = op;
  st->num_ports = mf_op_num_outputs(op);
  if (st->ports != st->expanded) mf_free(st->ports); /* built before, in a loop's other function */
  st->ports = mf_calloc((size_t)st->num_ports + 1, sizeof *st->ports);
  if (!st->ports) return mf_status_set(im->s, MF_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < st->num_ports; i++) st->ports[i] = (mf_output){op, i};
  return MF_OK;
}

/* Control flow v1 ------------------------------------------------------------------------
 * A tf.while_loop of a TensorFlow 1.x graph is a frame of nodes: an Enter for
 * each loop variable (and for each outer tensor the loop reads: is_constant),
 * a Merge of each variable's Enter and NextIteration, the condition on the
 * Merges ending in LoopCond, a Switch of each Merge by the LoopCond (output 1
 * feeds the body, output 0 the Exit), the body from the Switches ending in the
 * NextIterations, and the Exits. A loop becomes one moonflow While: its
 * condition and body nodes are built into the While's cond and body
 * functions, with _Arg ops in place of the Merges, Switches and constant
 * Enters, and each Exit an Identity of the While's output. */

static const Tensorflow__AttrValue *node_attr(const Tensorflow__NodeDef *node, const char *name);

static int input_node(mf_gd_importer *im, const Tensorflow__NodeDef *node, size_t i) {
  int index;
  return i < node->n_input ? node_of_input(im, node->input[i], &index) : -1;
}

static bool grow_ints(int **list, int n) {
  int *p = mf_realloc(*list, (size_t)(n + 1) * sizeof *p);
  if (p) *list = p;
  return p != NULL;
}

/* The loop of Enter node `node` (by its frame name), added when new; NULL when out of memory. */
static loop *loop_of_enter(mf_gd_importer *im, const Tensorflow__NodeDef *node) {
  const Tensorflow__AttrValue *f = node_attr(node, "frame_name");
  const char *frame = f && f->value_case == TENSORFLOW__ATTR_VALUE__VALUE_S ? (const char *)f->s.data : "";
  size_t n = f && f->value_case == TENSORFLOW__ATTR_VALUE__VALUE_S ? f->s.len : 0;
  for (int i = 0; i < im->n_loops; i++)
    if (im->loops[i].n_frame == n && memcmp(im->loops[i].frame, frame, n) == 0) return &im->loops[i];
  loop *p = mf_realloc(im->loops, (size_t)(im->n_loops + 1) * sizeof *p);
  if (!p) return NULL;
  im->loops = p;
  p = &im->loops[im->n_loops++];
  memset(p, 0, sizeof *p);
  p->frame = frame, p->n_frame = n, p->loop_cond = -1;
  return p;
}

static mf_code no_memory(mf_gd_importer *im) { return mf_status_set(im->s, MF_RESOURCE_EXHAUSTED, "out of memory"); }

/* Whether node k has op type `type`. */
static bool is_op(mf_gd_importer *im, int k, const char *type) {
  return k >= 0 && strcmp(im->def->node[k]->op, type) == 0;
}

/* Marks the nodes computing node k's inputs (and theirs) as loop L's condition or body, up to L's Merges,
 * Switches and Enters. */
static mf_code mark_loop_nodes(mf_gd_importer *im, int l, int k, bool cond) {
  size_t n = im->def->n_node, top = 0;
  int *stack = mf_malloc((n + 1) * sizeof *stack);
  if (!stack) return no_memory(im);
  stack[top++] = k;
  mf_code code = MF_OK;
  while (top > 0 && code == MF_OK) {
    const Tensorflow__NodeDef *node = im->def->node[stack[--top]];
    for (size_t i = 0; i < node->n_input && code == MF_OK; i++) {
      int src = input_node(im, node, i);
      if (src < 0) continue;
      node_state *st = &im->nodes[src];
      if (st->loop == l + 1 && st->role) continue; /* an argument of the function (or an error when built) */
      if (st->loop && st->loop != l + 1) code = bad_node(im, im->def->node[src], "is in two loops (nested "
                                                         "control flow v1 loops are not imported)");
      else if (st->role || (cond ? st->in_cond : st->in_body)) continue;
      else if (is_op(im, src, "Placeholder") || is_op(im, src, "VariableV2"))
        code = bad_node(im, im->def->node[src], "is read inside a loop without an Enter");
      else {
        st->loop = l + 1;
        if (cond) st->in_cond = true;
        else st->in_body = true;
        if (top < n) stack[top++] = src;
      }
    }
  }
  mf_free(stack);
  return code;
}

/* Finds the loops, their variables and their condition and body nodes. */
static mf_code loops_find(mf_gd_importer *im) {
  const Tensorflow__GraphDef *def = im->def;
  int n = (int)def->n_node;
  for (int k = 0; k < n; k++) {
    if (!is_op(im, k, "Enter")) continue;
    loop *l = loop_of_enter(im, def->node[k]);
    if (!l) return no_memory(im);
    const Tensorflow__AttrValue *c = node_attr(def->node[k], "is_constant");
    im->nodes[k].loop = (int)(l - im->loops) + 1, im->nodes[k].role = 'E';
    if (c && c->value_case == TENSORFLOW__ATTR_VALUE__VALUE_B && c->b) {
      if (!grow_ints(&l->cap, l->n_caps)) return no_memory(im);
      l->cap[l->n_caps++] = k;
    }
  }
  for (int k = 0; k < n; k++) {
    const Tensorflow__NodeDef *node = def->node[k];
    if (!is_op(im, k, "Merge")) continue;
    int enter = input_node(im, node, 0), next = input_node(im, node, 1);
    if (node->n_input != 2 || !is_op(im, enter, "Enter") || !is_op(im, next, "NextIteration"))
      return bad_node(im, node, "is no Merge of a loop's Enter and NextIteration (tf.cond of control flow v1 is "
                      "not imported)");
    loop *l = &im->loops[im->nodes[enter].loop - 1];
    int v = l->n_vars;
    if (!grow_ints(&l->merge, v) || !grow_ints(&l->switch_, v) || !grow_ints(&l->next, v) || !grow_ints(&l->enter, v))
      return no_memory(im);
    l->merge[v] = k, l->enter[v] = enter, l->next[v] = next, l->switch_[v] = -1;
    l->n_vars++;
    im->nodes[k].loop = im->nodes[next].loop = im->nodes[enter].loop;
    im->nodes[k].role = 'M', im->nodes[next].role = 'N';
  }
  for (int k = 0; k < n; k++) {
    const Tensorflow__NodeDef *node = def->node[k];
    bool is_switch = is_op(im, k, "Switch"), is_exit = is_op(im, k, "Exit");
    if (!is_switch && !is_exit) continue;
    int src = input_node(im, node, 0), pred = input_node(im, node, 1);
    bool ok = is_switch ? is_op(im, src, "Merge") && is_op(im, pred, "LoopCond") && im->nodes[src].loop
                        : is_op(im, src, "Switch");
    if (!ok)
      return bad_node(im, node, "is no %s of a loop (tf.cond of control flow v1 is not imported)",
                      is_switch ? "Switch of a Merge by a LoopCond" : "Exit of a loop's Switch");
    im->nodes[k].loop = im->nodes[src].loop, im->nodes[k].role = is_switch ? 'S' : 'X';
    if (is_exit) continue;
    loop *l = &im->loops[im->nodes[src].loop - 1];
    for (int v = 0; v < l->n_vars; v++)
      if (l->merge[v] == src) l->switch_[v] = k;
    if (l->loop_cond >= 0 && l->loop_cond != pred) return bad_node(im, node, "switches by a second LoopCond");
    l->loop_cond = pred;
    im->nodes[pred].loop = im->nodes[src].loop, im->nodes[pred].role = 'C';
  }
  for (int k = 0; k < n; k++)
    if ((is_op(im, k, "LoopCond") || is_op(im, k, "NextIteration")) && !im->nodes[k].role)
      return bad_node(im, def->node[k], "belongs to no loop");
  for (int i = 0; i < im->n_loops; i++) {
    loop *l = &im->loops[i];
    if (l->loop_cond < 0 || l->n_vars == 0)
      return mf_status_set(im->s, MF_INVALID_ARGUMENT, "GraphDef loop '%.*s' has no LoopCond or no variables",
                           (int)l->n_frame, l->frame);
    for (int v = 0; v < l->n_vars; v++)
      if (l->switch_[v] < 0) return bad_node(im, def->node[l->merge[v]], "has no Switch");
    mf_code code = mark_loop_nodes(im, i, l->loop_cond, true);
    for (int v = 0; v < l->n_vars && code == MF_OK; v++) code = mark_loop_nodes(im, i, l->next[v], false);
    if (code != MF_OK) return code;
  }
  return MF_OK;
}

/* _Arg op `name` of function graph im->graph standing for outer port `outer` (shape: only when known_shape). */
static mf_op *loop_arg(mf_gd_importer *im, const Tensorflow__NodeDef *node, mf_output outer, bool known_shape) {
  mf_op_desc *d = mf_op_desc_new(im->graph, "_Arg", node->name);
  mf_op_desc_set_attr_type(d, "dtype", mf_op_output_dtype(outer.op, outer.index));
  if (known_shape) {
    mf_shape shape;
    mf_op_output_shape(outer.op, outer.index, &shape);
    mf_op_desc_set_attr_shape(d, "shape", shape.dims, shape.rank);
  }
  return finish(im, node, d, node->name);
}

/* Sets output i of node k (of a loop) to port p. */
static mf_code set_port(mf_gd_importer *im, int k, int i, mf_output p) {
  node_state *st = &im->nodes[k];
  if (!st->ports) {
    st->num_ports = 2;
    if (!(st->ports = mf_calloc(2, sizeof *st->ports))) return no_memory(im);
  }
  st->ports[i] = p, st->op = p.op;
  return MF_OK;
}

/* Builds the condition (cond) or body nodes of loop l into function graph im->graph, whose _Arg ops are
 * made first (loop variables, then captures); *results gets the function's result ports as op id pairs. */
static mf_code loop_function(mf_gd_importer *im, loop *l, bool cond, const mf_output *outer, int64_t *results) {
  const Tensorflow__GraphDef *def = im->def;
  int nv = l->n_vars;
  mf_code code = MF_OK;
  for (int i = 0; i < nv + l->n_caps && code == MF_OK; i++) {
    int k = i < nv ? (cond ? l->merge[i] : l->switch_[i]) : l->cap[i - nv];
    mf_op *arg = loop_arg(im, def->node[k], outer[i], i >= nv);
    code = arg ? set_port(im, k, i < nv && !cond ? 1 : 0, (mf_output){arg, 0}) : im->s->code;
  }
  size_t n = def->n_node;
  for (size_t k = 0; k < n; k++) im->nodes[k].done = false;
  for (bool progress = true; progress && code == MF_OK;) { /* each pass builds the nodes whose inputs are built */
    progress = false;
    for (size_t k = 0; k < n && code == MF_OK; k++) {
      node_state *st = &im->nodes[k];
      if (st->done || st->loop != (int)(l - im->loops) + 1 || st->role || !(cond ? st->in_cond : st->in_body))
        continue;
      bool ready = true;
      for (size_t i = 0; i < def->node[k]->n_input && ready; i++) {
        int src = input_node(im, def->node[k], i);
        ready = src < 0 || im->nodes[src].role || im->nodes[src].done;
      }
      if (!ready) continue;
      code = node_in(im, k);
      st->done = progress = true;
    }
  }
  for (size_t k = 0; k < n && code == MF_OK; k++) {
    node_state *st = &im->nodes[k];
    if (!st->done && !st->role && st->loop == (int)(l - im->loops) + 1 && (cond ? st->in_cond : st->in_body))
      code = bad_node(im, def->node[k], "its inputs in the loop form a cycle");
  }
  for (int r = 0; r < (cond ? 1 : nv) && code == MF_OK; r++) {
    const Tensorflow__NodeDef *end = def->node[cond ? l->loop_cond : l->next[r]];
    mf_output p;
    if (end->n_input < 1) return bad_node(im, end, "has no input");
    code = resolve_input(im, end, end->input[0], &p);
    results[2 * r] = code == MF_OK ? mf_op_id(p.op) : 0, results[2 * r + 1] = p.index;
  }
  return code;
}

/* Builds loop l as a While of the outer graph (its Enters' inputs built). */
static mf_code loop_build(mf_gd_importer *im, loop *l) {
  const Tensorflow__GraphDef *def = im->def;
  int nv = l->n_vars, nin = nv + l->n_caps;
  mf_output *outer = mf_calloc((size_t)nin + 1, sizeof *outer);
  int64_t *ids = mf_calloc((size_t)nin + 1, sizeof *ids), *cond_out = mf_calloc(2, sizeof *cond_out);
  int64_t *body_out = mf_calloc(2 * (size_t)nv, sizeof *body_out);
  mf_graph *outer_graph = im->graph, *fns[2] = {mf_graph_new(), mf_graph_new()};
  mf_code code = outer && ids && cond_out && body_out && fns[0] && fns[1] ? MF_OK : no_memory(im);
  for (int i = 0; i < nin && code == MF_OK; i++) {
    const Tensorflow__NodeDef *enter = def->node[i < nv ? l->enter[i] : l->cap[i - nv]];
    ids[i] = i;
    code = enter->n_input < 1 ? bad_node(im, enter, "has no input")
                              : resolve_input(im, enter, enter->input[0], &outer[i]);
  }
  if (code == MF_OK) im->graph = fns[0], code = loop_function(im, l, true, outer, cond_out);
  if (code == MF_OK) im->graph = fns[1], code = loop_function(im, l, false, outer, body_out);
  im->graph = outer_graph;
  const Tensorflow__NodeDef *lc = def->node[l->loop_cond];
  char name[1024];
  const char *slash = strrchr(lc->name, '/');
  snprintf(name, sizeof name, "%.*s", slash ? (int)(slash - lc->name) : 5, slash ? lc->name : "while");
  mf_op_desc *d = code == MF_OK ? mf_op_desc_new(im->graph, "While", name) : NULL;
  for (int i = 0; d && i < nin; i++) mf_op_desc_add_input(d, outer[i]);
  if (d) {
    mf_op_desc_set_attr_graph(d, "cond", fns[0]);
    mf_op_desc_set_attr_graph(d, "body", fns[1]);
    mf_op_desc_set_attr_ints(d, "cond_in", ids, nin);
    mf_op_desc_set_attr_ints(d, "body_in", ids, nin);
    mf_op_desc_set_attr_ints(d, "cond_out", cond_out, 2);
    mf_op_desc_set_attr_ints(d, "body_out", body_out, 2 * nv);
    mf_op_desc_set_attr_int(d, "num_loop_vars", nv);
    mf_op_desc_set_attr_bool(d, "back_prop", false);
    mf_op_desc_set_attr_bool(d, "fused_cond", false);
    if (!(l->op = finish(im, lc, d, name))) code = im->s->code;
  }
  mf_graph_release(fns[0]), mf_graph_release(fns[1]); /* the While holds them */
  mf_free(outer), mf_free(ids), mf_free(cond_out), mf_free(body_out);
  return code;
}

/* Exit node k: an Identity of its loop's While output (the loop built first). */
static mf_code exit_in(mf_gd_importer *im, size_t k) {
  const Tensorflow__NodeDef *node = im->def->node[k];
  loop *l = &im->loops[im->nodes[k].loop - 1];
  if (!l->op && loop_build(im, l) != MF_OK) return im->s->code;
  int sw = input_node(im, node, 0), v = 0;
  while (v < l->n_vars && l->switch_[v] != sw) v++;
  mf_op_desc *d = mf_op_desc_new(im->graph, "Identity", node->name);
  mf_op_desc_add_input(d, (mf_output){l->op, v});
  mf_op *op = finish(im, node, d, node->name);
  return op ? set_port(im, (int)k, 0, (mf_output){op, 0}) : im->s->code;
}

/* The nodes node k follows in the order of building: its inputs' nodes; for an Exit, those of its loop's
 * Enters; none for the other nodes of a loop (built with it). */
static int ordering_count(mf_gd_importer *im, size_t k) {
  const node_state *st = &im->nodes[k];
  if (st->role == 'X') return im->loops[st->loop - 1].n_vars + im->loops[st->loop - 1].n_caps;
  return st->loop ? 0 : (int)im->def->node[k]->n_input;
}

static int ordering_source(mf_gd_importer *im, size_t k, int i) {
  const node_state *st = &im->nodes[k];
  if (st->role != 'X') return input_node(im, im->def->node[k], (size_t)i);
  const loop *l = &im->loops[st->loop - 1];
  return input_node(im, im->def->node[i < l->n_vars ? l->enter[i] : l->cap[i - l->n_vars]], 0);
}

/* Names, op types and inputs checked, every missing op type listed; then the nodes built in an order
 * where each follows its inputs (a GraphDef's nodes come in any order). */
static mf_code graph_in(mf_gd_importer *im) {
  const Tensorflow__GraphDef *def = im->def;
  size_t n = def->n_node;
  const char **missing = NULL;
  int *counts = NULL, n_missing = 0;
  mf_code code = MF_OK;
  for (size_t k = 0; k < n && code == MF_OK; k++) {
    const Tensorflow__NodeDef *node = def->node[k];
    if (!node->name[0]) code = mf_status_set(im->s, MF_INVALID_ARGUMENT, "GraphDef node %zu has no name", k);
    void **slot = code == MF_OK ? mf_strmap_slot(im->index, node->name, true) : NULL;
    if (code == MF_OK && !slot) code = no_memory(im);
    else if (code == MF_OK && *slot)
      code = mf_status_set(im->s, MF_INVALID_ARGUMENT, "GraphDef has two nodes named '%s'", node->name);
    else if (code == MF_OK) *slot = (void *)(intptr_t)(k + 1);
    if (code == MF_OK && !(im->nodes[k].row = mf_gd_row_for_tf(node->op)) &&
        !mf_gd_count_type(&missing, &counts, &n_missing, node->op))
      code = no_memory(im);
  }
  if (code == MF_OK && n_missing) {
    char text[768];
    mf_gd_list_types(text, sizeof text, missing, counts, n_missing);
    code = mf_status_set(im->s, MF_UNIMPLEMENTED, "the GraphDef has ops moonflow lacks: %s", text);
  }
  mf_free(missing), mf_free(counts);
  for (size_t k = 0; k < n && code == MF_OK; k++)
    for (size_t i = 0; i < def->node[k]->n_input && code == MF_OK; i++) {
      mf_output ignored;
      if (input_node(im, def->node[k], i) < 0 && !mapped(im, def->node[k]->input[i], &ignored))
        code = bad_node(im, def->node[k], "input %s is no node of the GraphDef", def->node[k]->input[i]);
    }
  if (code == MF_OK) code = loops_find(im);
  if (code != MF_OK) return code;
  /* Kahn's order: each node's consumers, found through its inputs. */
  size_t edges = 0, waiting = 0;
  for (size_t k = 0; k < n; k++) edges += (size_t)ordering_count(im, k);
  size_t *first = mf_calloc(n + 1, sizeof *first), *consumers = mf_calloc(edges + 1, sizeof *consumers);
  size_t *fill = mf_calloc(n + 1, sizeof *fill), *queue = mf_calloc(n + 1, sizeof *queue);
  if (!first || !consumers || !fill || !queue) code = no_memory(im);
  for (size_t k = 0; k < n && code == MF_OK; k++)
    for (int i = 0; i < ordering_count(im, k); i++) {
      int src = ordering_source(im, k, i);
      if (src >= 0) first[src + 1]++, im->nodes[k].pending++;
    }
  for (size_t k = 0; k < n && code == MF_OK; k++) first[k + 1] += first[k];
  for (size_t k = 0; k < n && code == MF_OK; k++)
    for (int i = 0; i < ordering_count(im, k); i++) {
      int src = ordering_source(im, k, i);
      if (src >= 0) consumers[first[src] + fill[src]++] = k;
    }
  size_t head = 0, tail = 0;
  for (size_t k = 0; k < n && code == MF_OK; k++) {
    bool in_loop = im->nodes[k].loop && im->nodes[k].role != 'X';
    if (!in_loop) waiting++;
    if (!in_loop && im->nodes[k].pending == 0) queue[tail++] = k;
  }
  while (head < tail && code == MF_OK) {
    size_t k = queue[head++];
    code = im->nodes[k].role == 'X' ? exit_in(im, k) : node_in(im, k);
    for (size_t e = first[k]; code == MF_OK && e < first[k + 1]; e++) {
      node_state *c = &im->nodes[consumers[e]];
      if (--c->pending == 0 && (!c->loop || c->role == 'X')) queue[tail++] = consumers[e];
    }
  }
  if (code == MF_OK && tail < waiting) {
    size_t k = 0;
    while (im->nodes[k].pending == 0 || (im->nodes[k].loop && im->nodes[k].role != 'X')) k++;
    code = bad_node(im, def->node[k], "its inputs form a cycle, or come from inside a loop");
  }
  mf_free(first), mf_free(consumers), mf_free(fill), mf_free(queue);
  return code;
}

mf_code mf_graphdef_import(mf_graph *g, const void *data, size_t n, const mf_graphdef_options *options,
                           mf_status *s) {
  mf_status_clear(s);
  Tensorflow__GraphDef *def = tensorflow__graph_def__unpack(NULL, n, data);
  if (!def)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "not a TensorFlow GraphDef: %zu bytes that are no valid "
                         "protocol buffer of one", n);
  mf_gd_importer im = {g, def, mf_calloc(def->n_node + 1, sizeof(node_state)), mf_strmap_new(), options, s, NULL, 0};
  mf_code code = im.nodes && im.index ? graph_in(&im) : mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t k = 0; im.nodes && k < def->n_node; k++)
    if (im.nodes[k].ports != im.nodes[k].expanded) mf_free(im.nodes[k].ports);
  for (int i = 0; i < im.n_loops; i++) {
    loop *l = &im.loops[i];
    mf_free(l->merge), mf_free(l->switch_), mf_free(l->next), mf_free(l->enter), mf_free(l->cap);
  }
  mf_free(im.loops);
  mf_free(im.nodes);
  mf_strmap_free(im.index);
  tensorflow__graph_def__free_unpacked(def, NULL);
  return code;
}
