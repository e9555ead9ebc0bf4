/* tf_graphdef_write.c — a moonflow graph written as TensorFlow's GraphDef
 * (tensorflow/core/framework/graph.proto, through protobuf-c: proto/),
 * binary or in protobuf's text format (tf.train.write_graph, g:as_graph_def,
 * FileWriter's graph), its ops named as the table of tf_graphdef_ops.c says;
 * an op with no row is refused, every such type listed with its count. */
#include "io/tf_graphdef.h"
#include "core/arena.h"
#include "core/memory.h"
#include "core/strmap.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A GraphDef's producer version: TensorFlow 1.15's, which every TensorFlow since reads. */
enum { PRODUCER = 134 };

/* Writing ------------------------------------------------------------------------------ */

typedef struct exporter {
  const mf_graph *graph;
  mf_arena arena;           /* every message part lives here until the bytes are packed */
  Tensorflow__NodeDef **nodes;
  size_t num_nodes, cap_nodes;
  mf_strmap *names;         /* the names of the Const nodes added for constant inputs */
  mf_status *s;
} exporter;

static void *part(exporter *ex, size_t n) {
  void *p = mf_arena_alloc(&ex->arena, n);
  if (p) memset(p, 0, n);
  return p;
}

static bool add_node(exporter *ex, Tensorflow__NodeDef *node) {
  if (ex->num_nodes == ex->cap_nodes) {
    size_t cap = ex->cap_nodes ? ex->cap_nodes * 2 : 64;
    Tensorflow__NodeDef **p = mf_realloc(ex->nodes, cap * sizeof *p);
    if (!p) return false;
    ex->nodes = p, ex->cap_nodes = cap;
  }
  ex->nodes[ex->num_nodes++] = node;
  return true;
}

static Tensorflow__AttrValue *attr_value(exporter *ex) {
  Tensorflow__AttrValue *v = part(ex, sizeof *v);
  if (v) tensorflow__attr_value__init(v);
  return v;
}

static bool add_attr(exporter *ex, Tensorflow__NodeDef *node, const char *name, Tensorflow__AttrValue *v) {
  Tensorflow__NodeDef__AttrEntry *e = part(ex, sizeof *e);
  char *key = mf_arena_strdup(&ex->arena, name);
  if (!v || !e || !key) return false;
  tensorflow__node_def__attr_entry__init(e);
  e->key = key, e->value = v;
  node->attr[node->n_attr++] = e;
  return true;
}

static Tensorflow__TensorShapeProto *shape_out(exporter *ex, const int64_t *dims, int rank) {
  Tensorflow__TensorShapeProto *p = part(ex, sizeof *p);
  if (!p) return NULL;
  tensorflow__tensor_shape_proto__init(p);
  if (rank < 0) return p->unknown_rank = true, p;
  p->dim = part(ex, (size_t)(rank + 1) * sizeof *p->dim);
  if (!p->dim) return NULL;
  for (int i = 0; i < rank; i++) {
    Tensorflow__TensorShapeProto__Dim *d = part(ex, sizeof *d);
    if (!d) return NULL;
    tensorflow__tensor_shape_proto__dim__init(d);
    d->size = dims[i];
    p->dim[p->n_dim++] = d;
  }
  return p;
}

static Tensorflow__TensorProto *tensor_out(exporter *ex, mf_tensor *t) {
  Tensorflow__TensorProto *p = part(ex, sizeof *p);
  if (!p) return NULL;
  tensorflow__tensor_proto__init(p);
  p->dtype = mf_gd_tf_dtype(mf_tensor_dtype(t));
  if (!(p->tensor_shape = shape_out(ex, mf_tensor_dims(t), mf_tensor_rank(t)))) return NULL;
  if (mf_tensor_dtype(t) != MF_STRING) {
    p->tensor_content.len = mf_tensor_nbytes(t);
    p->tensor_content.data = mf_tensor_data(t); /* borrowed from the op's value until packed */
    return p;
  }
  int64_t n = mf_tensor_size(t);
  p->string_val = part(ex, (size_t)(n + 1) * sizeof *p->string_val);
  if (!p->string_val) return NULL;
  for (int64_t i = 0; i < n; i++) {
    int64_t len;
    const char *bytes = mf_tensor_string(t, i, &len);
    p->string_val[i].data = (uint8_t *)bytes, p->string_val[i].len = (size_t)len;
  }
  p->n_string_val = (size_t)n;
  return p;
}

/* The AttrValue of moonflow attribute a of op. */
static Tensorflow__AttrValue *attr_out(exporter *ex, const mf_op *op, int a) {
  const char *name = mf_op_attr_name(op, a);
  Tensorflow__AttrValue *v = attr_value(ex);
  if (!v) return NULL;
  double x;
  bool b;
  mf_dtype t;
  mf_shape shape;
  const int64_t *ints;
  switch (mf_op_attr_kind(op, a)) {
  case MF_ATTR_INT: v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I, mf_op_attr_int(op, name, &v->i); break;
  case MF_ATTR_FLOAT:
    mf_op_attr_float(op, name, &x);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_F, v->f = (float)x;
    break;
  case MF_ATTR_BOOL: mf_op_attr_bool(op, name, &b), v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_B, v->b = b; break;
  case MF_ATTR_TYPE:
    mf_op_attr_type(op, name, &t);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE, v->type = mf_gd_tf_dtype(t);
    break;
  case MF_ATTR_INTS: {
    int n = mf_op_attr_ints(op, name, &ints);
    Tensorflow__AttrValue__ListValue *list = part(ex, sizeof *list);
    if (!list) return NULL;
    tensorflow__attr_value__list_value__init(list);
    list->n_i = (size_t)n, list->i = (int64_t *)ints; /* borrowed from the op */
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_LIST, v->list = list;
    break;
  }
  case MF_ATTR_SHAPE:
    mf_op_attr_shape(op, name, &shape);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE;
    if (!(v->shape = shape_out(ex, shape.dims, shape.rank))) return NULL;
    break;
  case MF_ATTR_STRING: {
    const char *text = mf_op_attr_string(op, name);
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_S, v->s.data = (uint8_t *)text, v->s.len = strlen(text);
    break;
  }
  case MF_ATTR_TENSOR:
    v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR;
    if (!(v->tensor = tensor_out(ex, mf_op_attr_tensor(op, name)))) return NULL;
    break;
  case MF_ATTR_GRAPH: return NULL; /* ops holding functions have no row */
  }
  return v;
}

static Tensorflow__AttrValue *type_value(exporter *ex, mf_dtype t) {
  Tensorflow__AttrValue *v = attr_value(ex);
  if (v) v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TYPE, v->type = mf_gd_tf_dtype(t);
  return v;
}

/* "op:index" as TensorFlow writes an input ("op" for output 0). */
static char *input_name(exporter *ex, mf_output in) {
  char buf[32];
  snprintf(buf, sizeof buf, ":%d", in.index);
  const char *name = mf_op_name(in.op);
  size_t n = strlen(name), k = in.index ? strlen(buf) : 0;
  char *s = mf_arena_alloc(&ex->arena, n + k + 1);
  if (s) memcpy(s, name, n), memcpy(s + n, buf, k), s[n + k] = '\0';
  return s;
}

/* A name for the Const node of op's constant input `what`, unused in the graph and the GraphDef. */
static char *const_name(exporter *ex, const mf_op *op, const char *what) {
  char buf[1024];
  for (int k = 0;; k++) {
    if (k) snprintf(buf, sizeof buf, "%s/%s_%d", mf_op_name(op), what, k);
    else snprintf(buf, sizeof buf, "%s/%s", mf_op_name(op), what);
    if (mf_graph_op_by_name(ex->graph, buf) || mf_strmap_slot(ex->names, buf, false)) continue;
    void **slot = mf_strmap_slot(ex->names, buf, true);
    if (!slot) return NULL;
    *slot = (void *)1;
    return mf_arena_strdup(&ex->arena, buf);
  }
}

/* The int32 Const node holding moonflow attribute `attr` of op as TensorFlow's input `what` (rows: the
 * matrix's row length, 0 for a vector or scalar); its name goes to *input. */
static mf_code const_input(exporter *ex, const mf_op *op, const char *attr, const char *what, int rows,
                           char **input) {
  const int64_t *ints = NULL;
  int64_t one, range[MF_MAX_RANK];
  int n = mf_op_attr_ints(op, attr, &ints), rank = 1;
  if (n < 0 && mf_op_attr_int(op, attr, &one)) ints = &one, n = 1, rank = 0;
  if (n < 0 && strcmp(what, "reduction_indices") == 0) { /* moonflow reduces every axis when none is given */
    mf_shape shape;
    mf_op_output_shape(mf_op_input(op, 0).op, mf_op_input(op, 0).index, &shape);
    if (shape.rank < 0)
      return mf_status_set(ex->s, MF_INVALID_ARGUMENT, "op '%s' (%s) reduces every axis of an input of unknown "
                           "rank, which a GraphDef cannot say", mf_op_name(op), mf_op_type(op));
    for (int i = 0; i < shape.rank; i++) range[i] = i;
    ints = range, n = shape.rank;
  }
  if (n < 0)
    return mf_status_set(ex->s, MF_INVALID_ARGUMENT, "op '%s' (%s) has no attribute %s, TensorFlow's input %s",
                         mf_op_name(op), mf_op_type(op), attr, what);
  int64_t dims[2] = {rows ? n / rows : n, rows};
  mf_tensor *t = mf_tensor_new(MF_INT32, rows ? 2 : rank, dims, ex->s);
  if (!t) return ex->s->code;
  for (int i = 0; i < n; i++) ((int32_t *)mf_tensor_data(t))[i] = (int32_t)ints[i];
  Tensorflow__NodeDef *node = part(ex, sizeof *node);
  Tensorflow__AttrValue *value = attr_value(ex);
  Tensorflow__TensorProto *proto = value ? tensor_out(ex, t) : NULL;
  /* the values must outlive the tensor: copy them into the arena */
  void *data = proto ? mf_arena_dup(&ex->arena, mf_tensor_data(t), mf_tensor_nbytes(t)) : NULL;
  mf_tensor_release(t);
  if (!node || !data) return mf_status_set(ex->s, MF_RESOURCE_EXHAUSTED, "out of memory");
  proto->tensor_content.data = data;
  tensorflow__node_def__init(node);
  node->op = "Const";
  node->name = *input = const_name(ex, op, what);
  node->attr = part(ex, 2 * sizeof *node->attr);
  value->value_case = TENSORFLOW__ATTR_VALUE__VALUE_TENSOR, value->tensor = proto;
  if (!node->name || !node->attr || !add_attr(ex, node, "value", value) ||
      !add_attr(ex, node, "dtype", type_value(ex, MF_INT32)) || !add_node(ex, node))
    return mf_status_set(ex->s, MF_RESOURCE_EXHAUSTED, "out of memory");
  return MF_OK;
}

/* Whether moonflow attribute name of op is left out (renames "name=value:"); an error when its value differs. */
static bool dropped(exporter *ex, const mf_gd_row *row, const mf_op *op, const char *name, bool *bad) {
  char word[64];
  const char *list = row->renames;
  while (mf_gd_next_word(&list, word, sizeof word)) {
    char *eq = strchr(word, '=');
    if (!eq || !mf_gd_side_is(word, 0, name)) continue;
    *strchr(eq, ':') = '\0';
    const char *v = mf_op_attr_string(op, name);
    if (!v || strcmp(v, eq + 1) != 0) {
      mf_status_set(ex->s, MF_INVALID_ARGUMENT, "op '%s' (%s) has %s '%s', which TensorFlow's %s has not",
                    mf_op_name(op), mf_op_type(op), name, v ? v : "?", row->tf);
      *bad = true;
    }
    return true;
  }
  return false;
}

/* TensorFlow's name of moonflow attribute name (renames "name:tf"). */
static const char *renamed(const mf_gd_row *row, const char *name, char *word, size_t size) {
  const char *list = row->renames;
  while (mf_gd_next_word(&list, word, size))
    if (mf_gd_side_is(word, 0, name) && !strchr(word, '=')) return strchr(word, ':') + 1;
  return name;
}

static mf_code node_out(exporter *ex, const mf_op *op, const mf_gd_row *row) {
  Tensorflow__NodeDef *node = part(ex, sizeof *node);
  int n_in = mf_op_num_inputs(op), n_consts = mf_gd_count_words(row->consts), n_ctl = mf_op_num_control_inputs(op);
  size_t max_attrs = (size_t)mf_op_num_attrs(op) + (size_t)mf_gd_count_words(row->types) + 1;
  if (!node) goto oom;
  tensorflow__node_def__init(node);
  node->name = (char *)mf_op_name(op), node->op = (char *)row->tf, node->device = (char *)mf_op_device(op);
  node->input = part(ex, (size_t)(n_in + n_consts + n_ctl + 1) * sizeof *node->input);
  node->attr = part(ex, max_attrs * sizeof *node->attr);
  if (!node->input || !node->attr) goto oom;
  for (int i = 0; i < n_in; i++)
    if (!(node->input[node->n_input++] = input_name(ex, mf_op_input(op, i)))) goto oom;
  char word[64];
  const char *list = row->consts;
  mf_dtype const_dtype[8];
  for (int k = 0; mf_gd_next_word(&list, word, sizeof word); k++) {
    char *what = strchr(word, ':') + 1, *rows = strchr(what, ':');
    if (rows) *rows++ = '\0';
    char attr[64];
    snprintf(attr, sizeof attr, "%.*s", (int)(strchr(word, ':') - word), word);
    if (const_input(ex, op, attr, what, rows ? atoi(rows) : 0, &node->input[node->n_input]) != MF_OK)
      return ex->s->code;
    node->n_input++;
    const_dtype[k] = MF_INT32;
  }
  for (int i = 0; i < n_ctl; i++) {
    const char *name = mf_op_name(mf_op_control_input(op, i));
    char *s = mf_arena_alloc(&ex->arena, strlen(name) + 2);
    if (!s) goto oom;
    s[0] = '^', strcpy(s + 1, name);
    node->input[node->n_input++] = s;
  }
  for (int a = 0; a < mf_op_num_attrs(op); a++) {
    const char *name = mf_op_attr_name(op, a);
    bool bad = false, is_const = false;
    list = row->consts;
    while (mf_gd_next_word(&list, word, sizeof word)) is_const = is_const || mf_gd_side_is(word, 0, name);
    if (is_const || name[0] == '_') continue;
    if (dropped(ex, row, op, name, &bad)) {
      if (bad) return ex->s->code;
      continue;
    }
    char buf[64];
    if (!add_attr(ex, node, renamed(row, name, buf, sizeof buf), attr_out(ex, op, a))) goto oom;
  }
  list = row->types;
  while (mf_gd_next_word(&list, word, sizeof word)) {
    char *eq = strchr(word, '='), *only_if_absent = strchr(word, '!');
    *eq = '\0';
    if (only_if_absent) {
      *only_if_absent = '\0';
      bool present = false;
      for (int a = 0; a < mf_op_num_attrs(op); a++) present = present || strcmp(mf_op_attr_name(op, a), word) == 0;
      if (present) continue;
    }
    Tensorflow__AttrValue *v;
    if (strcmp(eq + 1, "n") == 0) {
      if ((v = attr_value(ex))) v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_I, v->i = n_in;
    } else if (strcmp(eq + 1, "out") == 0) {
      v = type_value(ex, mf_op_output_dtype(op, 0));
    } else if (strcmp(eq + 1, "outshape") == 0) {
      mf_shape shape;
      mf_op_output_shape(op, 0, &shape);
      if ((v = attr_value(ex)))
        v->value_case = TENSORFLOW__ATTR_VALUE__VALUE_SHAPE, v->shape = shape_out(ex, shape.dims, shape.rank);
    } else {
      int i = atoi(eq + 1);
      if (i < 0) i += n_in + n_consts;
      mf_dtype t = i < n_in ? mf_op_output_dtype(mf_op_input(op, i).op, mf_op_input(op, i).index)
                            : const_dtype[i - n_in];
      v = type_value(ex, t);
    }
    if (!add_attr(ex, node, word, v)) goto oom;
  }
  if (add_node(ex, node)) return MF_OK;
oom:
  return mf_status_set(ex->s, MF_RESOURCE_EXHAUSTED, "out of memory");
}

static mf_code graph_out(exporter *ex, Tensorflow__GraphDef *def, Tensorflow__VersionDef *versions) {
  const char **missing = NULL;
  int *counts = NULL, n_missing = 0;
  for (int id = 0; id < mf_graph_num_ops(ex->graph); id++) {
    const char *type = mf_op_type(mf_graph_op(ex->graph, id));
    if (!mf_gd_row_for_mf(type) && !mf_gd_count_type(&missing, &counts, &n_missing, type)) {
      n_missing = -1;
      break;
    }
  }
  if (n_missing != 0) {
    char text[768];
    if (n_missing > 0) mf_gd_list_types(text, sizeof text, missing, counts, n_missing);
    mf_free(missing), mf_free(counts);
    if (n_missing < 0) return mf_status_set(ex->s, MF_RESOURCE_EXHAUSTED, "out of memory");
    return mf_status_set(ex->s, MF_UNIMPLEMENTED, "the graph has ops that cannot be written as a TensorFlow "
                         "GraphDef: %s", text);
  }
  for (int id = 0; id < mf_graph_num_ops(ex->graph); id++) {
    const mf_op *op = mf_graph_op(ex->graph, id);
    if (node_out(ex, op, mf_gd_row_for_mf(mf_op_type(op))) != MF_OK) return ex->s->code;
  }
  tensorflow__graph_def__init(def);
  tensorflow__version_def__init(versions);
  versions->producer = PRODUCER;
  def->versions = versions;
  def->node = ex->nodes, def->n_node = ex->num_nodes;
  return MF_OK;
}

/* Protobuf's text format, as TensorFlow's text_format writes a GraphDef: fields
 * by name, messages in braces, enums by name, bytes escaped. */
typedef struct text {
  char *data;
  size_t len, cap;
  bool ok;
} text;

static void put(text *t, const char *fmt, ...) MF_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...) {
  for (int tries = 0; t->ok && tries < 2; tries++) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->data + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0) t->ok = false;
    else if ((size_t)n < t->cap - t->len) return (void)(t->len += (size_t)n);
    else {
      size_t cap = (t->cap + (size_t)n) * 2;
      char *p = mf_realloc(t->data, cap);
      if (!p) t->ok = false;
      else t->data = p, t->cap = cap;
    }
  }
}

static void put_bytes(text *t, const uint8_t *b, size_t n) {
  put(t, "\"");
  for (size_t i = 0; i < n && t->ok; i++) {
    uint8_t c = b[i];
    if (c == '"' || c == '\\') put(t, "\\%c", c);
    else if (c == '\n') put(t, "\\n");
    else if (c >= 32 && c < 127) put(t, "%c", c);
    else put(t, "\\%03o", c);
  }
  put(t, "\"");
}

static void message_text(text *t, const ProtobufCMessage *m, int depth);

static void value_text(text *t, const ProtobufCFieldDescriptor *f, const void *p, int depth) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    put(t, "%" PRId32, *(const int32_t *)p); break;
  case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: put(t, "%" PRIu32, *(const uint32_t *)p); break;
  case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    put(t, "%" PRId64, *(const int64_t *)p); break;
  case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: put(t, "%" PRIu64, *(const uint64_t *)p); break;
  case PROTOBUF_C_TYPE_FLOAT: {
    float x = *(const float *)p;
    if (isnan(x)) put(t, "nan");
    else if (isinf(x)) put(t, x > 0 ? "inf" : "-inf");
    else put(t, "%.9g", (double)x);
    break;
  }
  case PROTOBUF_C_TYPE_DOUBLE: {
    double x = *(const double *)p;
    if (isnan(x)) put(t, "nan");
    else if (isinf(x)) put(t, x > 0 ? "inf" : "-inf");
    else put(t, "%.17g", x);
    break;
  }
  case PROTOBUF_C_TYPE_BOOL: put(t, "%s", *(const protobuf_c_boolean *)p ? "true" : "false"); break;
  case PROTOBUF_C_TYPE_ENUM: {
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
    if (v) put(t, "%s", v->name);
    else put(t, "%d", *(const int *)p);
    break;
  }
  case PROTOBUF_C_TYPE_STRING: {
    const char *s = *(char *const *)p;
    put_bytes(t, (const uint8_t *)s, strlen(s));
    break;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    const ProtobufCBinaryData *b = p;
    put_bytes(t, b->data, b->len);
    break;
  }
  case PROTOBUF_C_TYPE_MESSAGE:
    put(t, "{\n");
    message_text(t, *(const ProtobufCMessage *const *)p, depth + 1);
    put(t, "%*s}", 2 * depth, "");
    break;
  }
}

static size_t value_size(const ProtobufCFieldDescriptor *f) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: return 8;
  case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
  case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
  case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
  case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
  case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
  default: return 4;
  }
}

/* Whether singular field f (no presence bit: proto3) holds its default, which the text format leaves out. */
static bool is_default(const ProtobufCFieldDescriptor *f, const void *p) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING: return **(char *const *)p == '\0';
  case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)p)->len == 0;
  case PROTOBUF_C_TYPE_MESSAGE: return *(void *const *)p == NULL;
  default: {
    static const uint8_t zero[8];
    return memcmp(p, zero, value_size(f)) == 0;
  }
  }
}

static void message_text(text *t, const ProtobufCMessage *m, int depth) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields && t->ok; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const char *base = (const char *)m;
    const void *p = base + f->offset;
    size_t n = 1;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      n = *(const size_t *)(base + f->quantifier_offset);
      p = *(void *const *)p;
    } else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      if (*(const uint32_t *)(base + f->quantifier_offset) != f->id) continue;
    } else if (is_default(f, p)) {
      continue;
    }
    for (size_t k = 0; k < n; k++) {
      put(t, "%*s%s%s", 2 * depth, "", f->name, f->type == PROTOBUF_C_TYPE_MESSAGE ? " " : ": ");
      value_text(t, f, (const char *)p + k * value_size(f), depth);
      put(t, "\n");
    }
  }
}

mf_code mf_graphdef_serialize(const mf_graph *g, bool as_text, char **out, size_t *n, mf_status *s) {
  mf_status_clear(s);
  *out = NULL, *n = 0;
  exporter ex = {.graph = g, .names = mf_strmap_new(), .s = s};
  Tensorflow__GraphDef def;
  Tensorflow__VersionDef versions;
  mf_code code = !ex.names ? mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory") : graph_out(&ex, &def, &versions);
  if (code == MF_OK && as_text) {
    text t = {NULL, 0, 0, true};
    message_text(&t, &def.base, 0);
    put(&t, "%s", "");
    if (!t.ok) mf_free(t.data), code = mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory");
    else *out = t.data, *n = t.len;
  } else if (code == MF_OK) {
    size_t size = tensorflow__graph_def__get_packed_size(&def);
    if (!(*out = mf_malloc(size + 1))) code = mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory");
    else *n = tensorflow__graph_def__pack(&def, (uint8_t *)*out);
  }
  mf_free(ex.nodes);
  mf_strmap_free(ex.names);
  mf_arena_free(&ex.arena);
  return code;
}

mf_code mf_graphdef_write(const mf_graph *g, const char *path, bool as_text, mf_status *s) {
  char *bytes;
  size_t n;
  if (mf_graphdef_serialize(g, as_text, &bytes, &n, s) != MF_OK) return s->code;
  const void *parts[1] = {bytes};
  mf_code code = mf_file_write_atomic(path, parts, &n, 1, s);
  mf_free(bytes);
  return code;
}
