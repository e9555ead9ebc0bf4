/* graph_file.c — graph files: a graph, its function graphs and what the
 * program recorded beside them (variables, collections, the variable store),
 * as JSON through Jansson; read and written here once (tf.train.write_graph
 * and tf.train.import_graph call this code, as C hosts do).
 *
 * Format "moonflow.graph", version 1:
 *   {"format": "moonflow.graph", "version": 1, "seed": -1,
 *    "ops": [op, ...],              the graph's ops in creation order
 *    "functions": [fn, ...],        function graphs (branches, loop bodies)
 *    "collections": {key: [item]},  {"tensor": "w:0"}, {"op": "train"},
 *                                   {"number": 1}, {"string": "s"}, {"bool": true}
 *    "variables": [{"tensor": "w:0", "initializer": "w/Assign",
 *                   "initial_value": "w/initial_value:0", "trainable": true}],
 *    "variable_store": {"scope/w": "scope/w:0"}}
 * op = {"name", "type", "inputs": ["x:0", ...], "control_inputs": ["init", ...],
 *       "device", "origin", "shapes": [[2, -1] or null (unknown rank), ...]
 *       (each output's static shape, refined by set_shape), "attrs": {name: value}}
 * and each attribute value is an object with one key naming its kind:
 *   {"int": 3}, {"float": 0.5} (or "inf", "-inf", "nan"), {"bool": true},
 *   {"type": "float32"}, {"ints": [0, 1]}, {"shape": [2, -1] or null},
 *   {"string": "s"}, {"tensor": {"dtype": "float32", "shape": [2],
 *   "data": base64 of the raw little-endian bytes}} (strings: {"dtype": "string",
 *   "shape": [2], "strings": [base64 of each string]}), {"graph": i} (functions[i]).
 * Integers beyond 2^53 are written as decimal strings (JSON readers that hold
 * numbers as doubles keep them exact). fn = {"seed", "ops"}: a function graph
 * refers to its ops by id (attrs then_in, body_out, ...: see
 * src/ops/control/call.c), and a variable used inside one by the id of the
 * outer VariableV2 op (attr _var_id), so ops are recreated in their order and
 * a graph file imports into a new graph where every id and name comes back
 * the same. Everything is checked while reading; an error names the file, the
 * function, the op and the attribute. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "core/status.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FORMAT "moonflow.graph"
enum { VERSION = 1 };

struct mf_graph_file {
  mf_graph *graph;
  mf_graph_file_variable *variables;
  int num_variables, cap_variables;
  mf_graph_file_item *items;
  int num_items, cap_items;
  mf_graph_file_name *stored;
  int num_stored, cap_stored;
};

/* Grows *array (of elem bytes, *cap of them) to hold n + 1. */
static bool grow(void *array, int *cap, int n, size_t elem) {
  if (n < *cap) return true;
  int want = *cap ? *cap * 2 : 8;
  void *p = realloc(*(void **)array, (size_t)want * elem);
  if (!p) return false;
  *(void **)array = p;
  *cap = want;
  return true;
}

/* A copy of s (NULL stays NULL); *ok turns false when memory runs out. */
static char *copy(const char *s, bool *ok) {
  if (!s) return NULL;
  char *c = strdup(s);
  if (!c) *ok = false;
  return c;
}

mf_graph_file *mf_graph_file_new(mf_graph *g) {
  mf_graph_file *f = calloc(1, sizeof *f);
  if (f) f->graph = mf_graph_retain(g);
  return f;
}

void mf_graph_file_free(mf_graph_file *f) {
  if (!f) return;
  for (int i = 0; i < f->num_variables; i++) {
    free((char *)f->variables[i].tensor);
    free((char *)f->variables[i].initializer);
    free((char *)f->variables[i].initial_value);
  }
  for (int i = 0; i < f->num_items; i++) {
    free((char *)f->items[i].collection);
    free((char *)f->items[i].text);
  }
  for (int i = 0; i < f->num_stored; i++) {
    free((char *)f->stored[i].name);
    free((char *)f->stored[i].tensor);
  }
  free(f->variables);
  free(f->items);
  free(f->stored);
  mf_graph_release(f->graph);
  free(f);
}

mf_graph *mf_graph_file_graph(const mf_graph_file *f) { return f->graph; }

int mf_graph_file_variables(const mf_graph_file *f, const mf_graph_file_variable **out) {
  *out = f->variables;
  return f->num_variables;
}

int mf_graph_file_items(const mf_graph_file *f, const mf_graph_file_item **out) {
  *out = f->items;
  return f->num_items;
}

int mf_graph_file_stored(const mf_graph_file *f, const mf_graph_file_name **out) {
  *out = f->stored;
  return f->num_stored;
}

/* The op of g that port name "<op>:<index>" names, and the index; NULL if none. */
static mf_op *port_of(const mf_graph *g, const char *name, int *index) {
  const char *colon = name ? strrchr(name, ':') : NULL;
  if (!colon || colon[1] < '0' || colon[1] > '9') return NULL;
  char *end;
  errno = 0;
  long i = strtol(colon + 1, &end, 10);
  char *op_name = *end || errno || i > INT32_MAX ? NULL : strndup(name, (size_t)(colon - name));
  mf_op *op = op_name ? mf_graph_op_by_name(g, op_name) : NULL;
  free(op_name);
  if (!op || i >= mf_op_num_outputs(op)) return NULL;
  *index = (int)i;
  return op;
}

static bool is_tensor_of(const mf_graph *g, const char *name) {
  int index;
  return port_of(g, name, &index) != NULL;
}

static bool is_op_of(const mf_graph *g, const char *name) { return name && mf_graph_op_by_name(g, name); }

static mf_code no_memory(mf_status *s) { return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory"); }

mf_code mf_graph_file_add_variable(mf_graph_file *f, const mf_graph_file_variable *v, mf_status *s) {
  mf_status_clear(s);
  if (!is_tensor_of(f->graph, v->tensor) || !is_op_of(f->graph, v->initializer) ||
      (v->initial_value && !is_tensor_of(f->graph, v->initial_value)))
    return mf_status_set(s, MF_INVALID_ARGUMENT, "variable %s: its tensor, initializer op or initial value is not "
                         "in the graph", v->tensor ? v->tensor : "(null)");
  if (!grow(&f->variables, &f->cap_variables, f->num_variables, sizeof *f->variables)) return no_memory(s);
  bool ok = true;
  mf_graph_file_variable c = {copy(v->tensor, &ok), copy(v->initializer, &ok), copy(v->initial_value, &ok),
                              v->trainable};
  f->variables[f->num_variables++] = c;
  return ok ? MF_OK : no_memory(s);
}

mf_code mf_graph_file_add_item(mf_graph_file *f, const mf_graph_file_item *item, mf_status *s) {
  mf_status_clear(s);
  bool named = item->kind == MF_ITEM_TENSOR || item->kind == MF_ITEM_OP;
  if (!item->collection || (item->kind < MF_ITEM_TENSOR || item->kind > MF_ITEM_BOOL) ||
      ((named || item->kind == MF_ITEM_STRING) && !item->text) ||
      (item->kind == MF_ITEM_TENSOR && !is_tensor_of(f->graph, item->text)) ||
      (item->kind == MF_ITEM_OP && !is_op_of(f->graph, item->text)))
    return mf_status_set(s, MF_INVALID_ARGUMENT, "collection %s: an item that is not a tensor or op of the graph, "
                         "a number, a string or a boolean", item->collection ? item->collection : "(null)");
  if (!grow(&f->items, &f->cap_items, f->num_items, sizeof *f->items)) return no_memory(s);
  bool ok = true;
  mf_graph_file_item c = *item;
  c.collection = copy(item->collection, &ok);
  c.text = named || item->kind == MF_ITEM_STRING ? copy(item->text, &ok) : NULL;
  f->items[f->num_items++] = c;
  return ok ? MF_OK : no_memory(s);
}

mf_code mf_graph_file_add_stored(mf_graph_file *f, const char *name, const char *tensor, mf_status *s) {
  mf_status_clear(s);
  if (!name || !is_tensor_of(f->graph, tensor))
    return mf_status_set(s, MF_INVALID_ARGUMENT, "variable store entry %s: %s is not a tensor of the graph",
                         name ? name : "(null)", tensor ? tensor : "(null)");
  if (!grow(&f->stored, &f->cap_stored, f->num_stored, sizeof *f->stored)) return no_memory(s);
  bool ok = true;
  mf_graph_file_name c = {copy(name, &ok), copy(tensor, &ok)};
  f->stored[f->num_stored++] = c;
  return ok ? MF_OK : no_memory(s);
}

/* base64 ------------------------------------------------------------------------------ */
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t b64_length(size_t n) { return (n + 2) / 3 * 4; }

static void b64_encode(const uint8_t *src, size_t n, char *out) {
  for (size_t i = 0; i < n; i += 3, out += 4) {
    uint32_t v = (uint32_t)src[i] << 16 | (i + 1 < n ? (uint32_t)src[i + 1] << 8 : 0) | (i + 2 < n ? src[i + 2] : 0);
    out[0] = B64[v >> 18];
    out[1] = B64[v >> 12 & 63];
    out[2] = i + 1 < n ? B64[v >> 6 & 63] : '=';
    out[3] = i + 2 < n ? B64[v & 63] : '=';
  }
  *out = '\0';
}

static int b64_value(char c) {
  const char *p = c ? strchr(B64, c) : NULL;
  return p ? (int)(p - B64) : -1;
}

/* Decodes text (b64_length(n) characters) into dst[0..n); false if it is not base64. */
static bool b64_decode(const char *text, uint8_t *dst, size_t n) {
  size_t o = 0;
  for (size_t i = 0; o < n; i += 4) {
    int c[4];
    for (int k = 0; k < 4; k++) c[k] = b64_value(text[i + k]);
    size_t left = n - o;
    if (c[0] < 0 || c[1] < 0 || (left > 1 && c[2] < 0) || (left > 2 && c[3] < 0)) return false;
    uint32_t v = (uint32_t)c[0] << 18 | (uint32_t)c[1] << 12 | (uint32_t)(c[2] < 0 ? 0 : c[2]) << 6 |
                 (uint32_t)(c[3] < 0 ? 0 : c[3]);
    dst[o++] = (uint8_t)(v >> 16);
    if (o < n) dst[o++] = (uint8_t)(v >> 8);
    if (o < n) dst[o++] = (uint8_t)v;
  }
  return true;
}

/* Writing ------------------------------------------------------------------------------ */

typedef struct writer {
  json_t *functions;   /* the function graphs written so far */
  const mf_graph **written; /* ... and which graphs they are */
  int num_written, cap_written;
  mf_status *s;
} writer;

/* An int64 as a JSON integer when a double holds it exactly, else a decimal string. */
static json_t *int_out(int64_t v) {
  if (v > -(INT64_C(1) << 53) && v < INT64_C(1) << 53) return json_integer(v);
  char text[24];
  snprintf(text, sizeof text, "%" PRId64, v);
  return json_string(text);
}

static json_t *float_out(double v) {
  if (isnan(v)) return json_string("nan");
  if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
  return json_real(v);
}

static json_t *dims_out(const int64_t *dims, int rank) {
  if (rank < 0) return json_null();
  json_t *a = json_array();
  for (int i = 0; a && i < rank; i++) json_array_append_new(a, int_out(dims[i]));
  return a;
}

/* A string value: each element's bytes as base64, in row-major order. */
static json_t *strings_out(mf_tensor *t) {
  json_t *strings = json_array();
  for (int64_t i = 0; strings && i < mf_tensor_size(t); i++) {
    int64_t n;
    const char *bytes = mf_tensor_string(t, i, &n);
    char *text = malloc(b64_length((size_t)n) + 1);
    if (!text || json_array_append_new(strings, (b64_encode((const uint8_t *)bytes, (size_t)n, text),
                                                 json_string(text))) != 0) {
      free(text);
      json_decref(strings);
      return NULL;
    }
    free(text);
  }
  return strings;
}

static json_t *tensor_out(mf_tensor *t) {
  if (mf_tensor_dtype(t) == MF_STRING)
    return json_pack("{s:s,s:o,s:o}", "dtype", "string", "shape", dims_out(mf_tensor_dims(t), mf_tensor_rank(t)),
                     "strings", strings_out(t));
  size_t n = mf_tensor_nbytes(t);
  char *text = malloc(b64_length(n) + 1);
  if (!text) return NULL;
  b64_encode(mf_tensor_data(t), n, text);
  json_t *v = json_pack("{s:s,s:o,s:s}", "dtype", mf_dtype_name(mf_tensor_dtype(t)), "shape",
                        dims_out(mf_tensor_dims(t), mf_tensor_rank(t)), "data", text);
  free(text);
  return v;
}

static json_t *ops_out(writer *w, const mf_graph *g);

/* The index of function graph fg in the file, writing it (and its own functions) first. */
static json_t *function_out(writer *w, const mf_graph *fg) {
  for (int i = 0; i < w->num_written; i++)
    if (w->written[i] == fg) return json_integer(i);
  json_t *ops = ops_out(w, fg);
  if (!ops) return NULL;
  json_t *f = json_pack("{s:o,s:o}", "seed", int_out(mf_graph_seed(fg)), "ops", ops);
  if (!f || !grow(&w->written, &w->cap_written, w->num_written, sizeof *w->written) ||
      json_array_append_new(w->functions, f) != 0)
    return no_memory(w->s), NULL;
  w->written[w->num_written] = fg;
  return json_integer(w->num_written++);
}

static json_t *attr_out(writer *w, const mf_op *op, int a) {
  const char *name = mf_op_attr_name(op, a);
  int64_t i;
  double x;
  bool b;
  mf_dtype t;
  mf_shape shape;
  const int64_t *ints;
  switch (mf_op_attr_kind(op, a)) {
  case MF_ATTR_INT: return mf_op_attr_int(op, name, &i), json_pack("{s:o}", "int", int_out(i));
  case MF_ATTR_FLOAT: return mf_op_attr_float(op, name, &x), json_pack("{s:o}", "float", float_out(x));
  case MF_ATTR_BOOL: return mf_op_attr_bool(op, name, &b), json_pack("{s:b}", "bool", b);
  case MF_ATTR_TYPE: return mf_op_attr_type(op, name, &t), json_pack("{s:s}", "type", mf_dtype_name(t));
  case MF_ATTR_INTS: {
    int n = mf_op_attr_ints(op, name, &ints);
    json_t *list = json_array();
    for (int k = 0; list && k < n; k++) json_array_append_new(list, int_out(ints[k]));
    return json_pack("{s:o}", "ints", list);
  }
  case MF_ATTR_SHAPE: return mf_op_attr_shape(op, name, &shape), json_pack("{s:o}", "shape",
                                                                           dims_out(shape.dims, shape.rank));
  case MF_ATTR_STRING: return json_pack("{s:s}", "string", mf_op_attr_string(op, name));
  case MF_ATTR_TENSOR: return json_pack("{s:o}", "tensor", tensor_out(mf_op_attr_tensor(op, name)));
  case MF_ATTR_GRAPH: return json_pack("{s:o}", "graph", function_out(w, mf_op_attr_graph(op, name)));
  }
  return NULL;
}

static json_t *op_out(writer *w, const mf_op *op) {
  if (strcmp(mf_op_type(op), "LuaFunc") == 0) {
    mf_status_set(w->s, MF_INVALID_ARGUMENT, "op '%s' is a tf.lua_func, whose Lua function cannot be written to "
                  "a file; build it again after importing the graph", mf_op_name(op));
    return NULL;
  }
  json_t *inputs = json_array(), *controls = json_array(), *shapes = json_array(), *attrs = json_object();
  json_t *e = json_pack("{s:s,s:s,s:o,s:o,s:o,s:o}", "name", mf_op_name(op), "type", mf_op_type(op), "inputs",
                        inputs, "control_inputs", controls, "shapes", shapes, "attrs", attrs);
  if (!e) return no_memory(w->s), NULL;
  for (int i = 0; i < mf_op_num_inputs(op); i++) {
    mf_output in = mf_op_input(op, i);
    json_array_append_new(inputs, json_sprintf("%s:%d", mf_op_name(in.op), in.index));
  }
  for (int i = 0; i < mf_op_num_control_inputs(op); i++)
    json_array_append_new(controls, json_string(mf_op_name(mf_op_control_input(op, i))));
  for (int i = 0; i < mf_op_num_outputs(op); i++) {
    mf_shape shape;
    mf_op_output_shape(op, i, &shape);
    json_array_append_new(shapes, dims_out(shape.dims, shape.rank));
  }
  if (*mf_op_device(op)) json_object_set_new(e, "device", json_string(mf_op_device(op)));
  if (*mf_op_origin(op)) json_object_set_new(e, "origin", json_string(mf_op_origin(op)));
  for (int a = 0; a < mf_op_num_attrs(op); a++) {
    json_t *v = attr_out(w, op, a);
    if (!v || json_object_set_new(attrs, mf_op_attr_name(op, a), v) != 0) {
      if (mf_ok(w->s)) no_memory(w->s);
      json_decref(e);
      return NULL;
    }
  }
  return e;
}

static json_t *ops_out(writer *w, const mf_graph *g) {
  json_t *ops = json_array();
  for (int id = 0; ops && id < mf_graph_num_ops(g); id++) {
    json_t *e = op_out(w, mf_graph_op(g, id));
    if (!e || json_array_append_new(ops, e) != 0) {
      if (mf_ok(w->s)) no_memory(w->s);
      json_decref(ops);
      return NULL;
    }
  }
  return ops;
}

static json_t *extras_out(const mf_graph_file *f, json_t *doc) {
  json_t *collections = json_object(), *variables = json_array(), *store = json_object();
  if (json_object_set_new(doc, "collections", collections) || json_object_set_new(doc, "variables", variables) ||
      json_object_set_new(doc, "variable_store", store))
    return NULL;
  for (int i = 0; i < f->num_items; i++) {
    const mf_graph_file_item *it = &f->items[i];
    json_t *list = json_object_get(collections, it->collection);
    if (!list && json_object_set_new(collections, it->collection, list = json_array())) return NULL;
    json_t *v = it->kind == MF_ITEM_TENSOR ? json_pack("{s:s}", "tensor", it->text)
                : it->kind == MF_ITEM_OP   ? json_pack("{s:s}", "op", it->text)
                : it->kind == MF_ITEM_NUMBER ? json_pack("{s:o}", "number", float_out(it->number))
                : it->kind == MF_ITEM_STRING ? json_pack("{s:s}", "string", it->text)
                                             : json_pack("{s:b}", "bool", it->flag);
    if (json_array_append_new(list, v)) return NULL;
  }
  for (int i = 0; i < f->num_variables; i++) {
    const mf_graph_file_variable *v = &f->variables[i];
    json_t *e = json_pack("{s:s,s:s,s:b}", "tensor", v->tensor, "initializer", v->initializer, "trainable",
                          v->trainable);
    if (!e || (v->initial_value && json_object_set_new(e, "initial_value", json_string(v->initial_value))) ||
        json_array_append_new(variables, e))
      return NULL;
  }
  for (int i = 0; i < f->num_stored; i++)
    if (json_object_set_new(store, f->stored[i].name, json_string(f->stored[i].tensor))) return NULL;
  return doc;
}

/* The document as text: one line per op and per function, keys sorted. */
static char *text_out(json_t *doc) {
  size_t cap = 1 << 16, len = 0;
  char *out = malloc(cap);
  bool ok = out != NULL;
  const char *key;
  json_t *value;
  void *tmp;
#define PUT(str, n)                                                          \
  do {                                                                       \
    size_t n_ = (n);                                                         \
    while (ok && len + n_ + 1 > cap) {                                       \
      ok = (tmp = realloc(out, cap *= 2)) != NULL;                           \
      if (ok) out = tmp;                                                     \
    }                                                                        \
    if (ok) memcpy(out + len, (str), n_), len += n_;                         \
  } while (0)
  PUT("{", 1);
  const char **keys = calloc(json_object_size(doc) + 1, sizeof *keys);
  size_t nkeys = 0;
  ok = ok && keys;
  json_object_foreach(doc, key, value) if (keys) keys[nkeys++] = key;
  for (size_t i = 1; ok && i < nkeys; i++) /* insertion sort: a handful of keys */
    for (size_t k = i; k > 0 && strcmp(keys[k - 1], keys[k]) > 0; k--) {
      const char *t = keys[k];
      keys[k] = keys[k - 1], keys[k - 1] = t;
    }
  for (size_t i = 0; ok && i < nkeys; i++) {
    value = json_object_get(doc, keys[i]);
    PUT(i ? ",\n \"" : "\n \"", i ? 4 : 3); /* the document's own keys: no escapes needed */
    PUT(keys[i], strlen(keys[i]));
    PUT("\": ", 3);
    bool lines = json_is_array(value) && json_array_size(value) > 0;
    size_t n = lines ? json_array_size(value) : 1;
    if (lines) PUT("[\n  ", 4);
    for (size_t j = 0; ok && j < n; j++) {
      char *t = json_dumps(lines ? json_array_get(value, j) : value, JSON_COMPACT | JSON_SORT_KEYS |
                           JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
      ok = t != NULL;
      if (!ok) break;
      if (j) PUT(",\n  ", 4);
      PUT(t, strlen(t));
      free(t);
    }
    if (lines) PUT("\n ]", 3);
  }
  PUT("\n}\n", 3);
#undef PUT
  free(keys);
  if (!ok) {
    free(out);
    return NULL;
  }
  out[len] = '\0';
  return out;
}

mf_code mf_graph_file_write(const mf_graph_file *f, const char *path, mf_status *s) {
  mf_status_clear(s);
  writer w = {json_array(), NULL, 0, 0, s};
  json_t *ops = ops_out(&w, f->graph);
  json_t *doc = ops && w.functions ? json_pack("{s:s,s:i,s:o,s:o,s:O}", "format", FORMAT, "version", VERSION,
                                               "seed", int_out(mf_graph_seed(f->graph)), "ops", ops, "functions",
                                               w.functions)
                                   : NULL;
  char *text = doc && extras_out(f, doc) ? text_out(doc) : NULL;
  json_decref(doc);
  json_decref(w.functions);
  free(w.written);
  if (!text) return mf_ok(s) ? no_memory(s) : s->code;
  const void *data[1] = {text};
  size_t sizes[1] = {strlen(text)};
  mf_code code = mf_file_write_atomic(path, data, sizes, 1, s);
  free(text);
  return code;
}

/* Reading ------------------------------------------------------------------------------ */

typedef struct reader {
  const char *path;
  char where[512];     /* ", function 2: op 'a', attribute b": what is being read */
  const mf_graph *graph; /* the file's graph, where variables and collections name tensors and ops */
  mf_graph **functions;  /* the function graphs read so far (references) */
  int num_functions;
  mf_status *s;
} reader;

static mf_code bad(reader *r, const char *fmt, ...) MF_PRINTF(2, 3);
static mf_code bad(reader *r, const char *fmt, ...) {
  char msg[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mf_status_set(r->s, MF_INVALID_ARGUMENT, "graph file %s%s: %s", r->path, r->where, msg);
}

/* An integer: a JSON integer, an integral number, or a decimal string (past 2^53). */
static bool int_in(const json_t *v, int64_t *out) {
  if (json_is_integer(v)) return *out = json_integer_value(v), true;
  if (json_is_real(v)) {
    double x = json_real_value(v);
    if (x != floor(x) || !(fabs(x) < 9.2e18)) return false;
    return *out = (int64_t)x, true;
  }
  if (!json_is_string(v)) return false;
  const char *text = json_string_value(v), *p = text + (*text == '-');
  if (!*p || strspn(p, "0123456789") != strlen(p)) return false;
  errno = 0;
  long long x = strtoll(text, NULL, 10);
  if (errno == ERANGE) return false;
  return *out = x, true;
}

static bool float_in(const json_t *v, double *out) {
  if (json_is_number(v)) return *out = json_number_value(v), true;
  const char *t = json_string_value(v);
  if (!t) return false;
  if (strcmp(t, "nan") == 0) *out = NAN;
  else if (strcmp(t, "inf") == 0) *out = INFINITY;
  else if (strcmp(t, "-inf") == 0) *out = -INFINITY;
  else return false;
  return true;
}

static mf_code dims_in(reader *r, const json_t *v, mf_shape *out) {
  if (json_is_null(v)) return out->rank = -1, MF_OK;
  if (!json_is_array(v)) return bad(r, "expected a shape list");
  if (json_array_size(v) > MF_MAX_RANK) return bad(r, "shapes have at most %d dimensions", MF_MAX_RANK);
  out->rank = (int)json_array_size(v);
  for (int i = 0; i < out->rank; i++)
    if (!int_in(json_array_get(v, (size_t)i), &out->dims[i])) return bad(r, "expected an integer in a shape");
  return MF_OK;
}

static bool dtype_in(const json_t *v, mf_dtype *out) {
  const char *name = json_string_value(v);
  for (int t = MF_FLOAT32; name && mf_dtype_size((mf_dtype)t) > 0; t++)
    if (strcmp(mf_dtype_name((mf_dtype)t), name) == 0) return *out = (mf_dtype)t, true;
  return false;
}

/* The length of the bytes that base64 text (padded to whole quads) carries; false if it is not base64. */
static bool b64_decoded_length(const char *text, size_t *n) {
  size_t length = strlen(text), pad = 0;
  while (pad < 2 && pad < length && text[length - 1 - pad] == '=') pad++;
  if (length % 4 != 0) return false;
  *n = length / 4 * 3 - pad;
  return b64_length(*n) == length;
}

/* {dtype: "string", shape, strings: [base64 of each element]}: as many strings as the shape holds. */
static mf_tensor *strings_in(reader *r, const json_t *v, const mf_shape *shape, const char *shown) {
  const json_t *strings = json_object_get(v, "strings");
  if (!json_is_array(strings)) return bad(r, "expected {dtype, shape, strings} for a string tensor"), NULL;
  size_t count = json_array_size(strings), total = 0;
  int64_t numel = 1;
  for (int i = 0; i < shape->rank; i++)
    if (__builtin_mul_overflow(numel, shape->dims[i], &numel)) numel = INT64_MAX;
  if ((uint64_t)numel != count)
    return bad(r, "%zu strings for shape [%s], which holds %" PRId64, count, shown, numel), NULL;
  for (size_t i = 0; i < count; i++) {
    const char *text = json_string_value(json_array_get(strings, i));
    size_t n;
    if (!text || !b64_decoded_length(text, &n)) return bad(r, "string %zu is not base64", i + 1), NULL;
    total += n;
  }
  /* The decoded strings lie one after another in one buffer; mf_tensor_new_strings copies them. */
  uint8_t *buffer = malloc(total + 1);
  const char **bytes = malloc((count + 1) * sizeof *bytes);
  int64_t *lengths = malloc((count + 1) * sizeof *lengths);
  mf_tensor *t = NULL;
  if (!buffer || !bytes || !lengths) {
    no_memory(r->s);
    goto done;
  }
  for (size_t i = 0, at = 0; i < count; i++) {
    const char *text = json_string_value(json_array_get(strings, i));
    size_t n;
    b64_decoded_length(text, &n);
    if (!b64_decode(text, buffer + at, n)) {
      bad(r, "string %zu is not base64", i + 1);
      goto done;
    }
    bytes[i] = (const char *)buffer + at;
    lengths[i] = (int64_t)n;
    at += n;
  }
  t = mf_tensor_new_strings(shape->rank, shape->dims, bytes, lengths, r->s);
done:
  free(buffer);
  free(bytes);
  free(lengths);
  return t;
}

/* {dtype, shape, data}: the data is checked against the shape before anything
 * is allocated; string tensors hold {strings} instead (strings_in). */
static mf_tensor *tensor_in(reader *r, const json_t *v) {
  const char *data = json_string_value(json_object_get(v, "data"));
  mf_dtype dtype;
  mf_shape shape;
  if (!json_is_object(v)) return bad(r, "expected {dtype, shape, data}"), NULL;
  if (!dtype_in(json_object_get(v, "dtype"), &dtype)) {
    const char *name = json_string_value(json_object_get(v, "dtype"));
    return bad(r, "unknown dtype %s", name ? name : "(not a string)"), NULL;
  }
  if (dtype != MF_STRING && !data) return bad(r, "expected {dtype, shape, data}"), NULL;
  if (dims_in(r, json_object_get(v, "shape"), &shape) != MF_OK) return NULL;
  if (shape.rank < 0) return bad(r, "a tensor needs a shape"), NULL;
  int64_t numel = 1;
  char shown[MF_MAX_RANK * 24 + 4] = "";
  for (int i = 0; i < shape.rank; i++) {
    if (shape.dims[i] < 0) return bad(r, "dimension %d is negative (%" PRId64 ")", i + 1, shape.dims[i]), NULL;
    if (shape.dims[i] == 0) numel = 0;
    size_t at = strlen(shown);
    snprintf(shown + at, sizeof shown - at, i ? ", %" PRId64 : "%" PRId64, shape.dims[i]);
  }
  if (dtype == MF_STRING) return strings_in(r, v, &shape, shown);
  /* The byte count stops growing once it passes what the base64 carries. */
  size_t length = strlen(data), cap = length / 4 * 3, size = mf_dtype_size(dtype);
  for (int i = 0; i < shape.rank && numel > 0 && (uint64_t)numel * size <= cap; i++)
    if (__builtin_mul_overflow(numel, shape.dims[i], &numel)) numel = INT64_MAX / (int64_t)size;
  double nbytes = (double)numel * (double)size;
  if (length != b64_length((size_t)(nbytes <= (double)cap ? nbytes : cap + 3)) || nbytes > (double)cap + 2)
    return bad(r, "the data (%zu characters of base64) is not the %.0f bytes that shape [%s] of %s needs", length,
               nbytes, shown, mf_dtype_name(dtype)), NULL;
  mf_tensor *t = mf_tensor_new(dtype, shape.rank, shape.dims, r->s);
  if (!t) return NULL;
  if (!b64_decode(data, mf_tensor_data(t), mf_tensor_nbytes(t))) {
    mf_tensor_release(t);
    return bad(r, "the data is not %zu bytes of base64", (size_t)nbytes), NULL;
  }
  return t;
}

/* Sets attribute name (encoded as enc) on d; on error d is left to the caller to finish. */
static mf_code attr_in(reader *r, mf_op_desc *d, const char *name, const json_t *enc) {
  if (!json_is_object(enc) || json_object_size(enc) != 1) return bad(r, "bad attribute value");
  const char *kind = json_object_iter_key(json_object_iter((json_t *)enc));
  const json_t *v = json_object_iter_value(json_object_iter((json_t *)enc));
  int64_t i;
  double x;
  mf_dtype t;
  mf_shape shape;
  if (strcmp(kind, "int") == 0) {
    if (!int_in(v, &i)) return bad(r, "expected an integer");
    mf_op_desc_set_attr_int(d, name, i);
  } else if (strcmp(kind, "float") == 0) {
    if (!float_in(v, &x)) return bad(r, "expected a number");
    mf_op_desc_set_attr_float(d, name, x);
  } else if (strcmp(kind, "bool") == 0) {
    if (!json_is_boolean(v)) return bad(r, "expected a boolean");
    mf_op_desc_set_attr_bool(d, name, json_is_true(v));
  } else if (strcmp(kind, "type") == 0) {
    if (!dtype_in(v, &t)) return bad(r, "unknown dtype %s", json_is_string(v) ? json_string_value(v) : "(not a string)");
    mf_op_desc_set_attr_type(d, name, t);
  } else if (strcmp(kind, "ints") == 0) {
    if (!json_is_array(v)) return bad(r, "expected a list");
    size_t n = json_array_size(v);
    int64_t *list = malloc((n + 1) * sizeof *list);
    if (!list) return no_memory(r->s);
    for (size_t k = 0; k < n; k++)
      if (!int_in(json_array_get(v, k), &list[k])) return free(list), bad(r, "expected an integer");
    mf_op_desc_set_attr_ints(d, name, list, (int)n);
    free(list);
  } else if (strcmp(kind, "shape") == 0) {
    if (dims_in(r, v, &shape) != MF_OK) return r->s->code;
    mf_op_desc_set_attr_shape(d, name, shape.dims, shape.rank);
  } else if (strcmp(kind, "string") == 0) {
    if (!json_is_string(v)) return bad(r, "expected a string");
    mf_op_desc_set_attr_string(d, name, json_string_value(v));
  } else if (strcmp(kind, "tensor") == 0) {
    mf_tensor *value = tensor_in(r, v);
    if (!value) return r->s->code;
    mf_op_desc_set_attr_tensor(d, name, value);
    mf_tensor_release(value);
  } else if (strcmp(kind, "graph") == 0) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= r->num_functions)
      return bad(r, "function %s is not defined before its use", json_is_integer(v) ? "index" : "(not an index)");
    mf_op_desc_set_attr_graph(d, name, r->functions[json_integer_value(v)]);
  } else {
    return bad(r, "unknown attribute kind %s", kind);
  }
  return MF_OK;
}

/* Everything of entry e but its attributes goes into d; attributes too
 * unless one is bad. */
static mf_code op_fields_in(reader *r, mf_graph *g, mf_op_desc *d, const json_t *e) {
  size_t k;
  json_t *v;
  json_array_foreach(json_object_get(e, "inputs"), k, v) {
    int index;
    mf_op *src = port_of(g, json_string_value(v), &index);
    if (!src)
      return bad(r, "input %s is not an earlier op's output", json_is_string(v) ? json_string_value(v) : "(not a name)");
    mf_op_desc_add_input_id(d, mf_op_id(src), index);
  }
  json_array_foreach(json_object_get(e, "control_inputs"), k, v) {
    mf_op *c = json_is_string(v) ? mf_graph_op_by_name(g, json_string_value(v)) : NULL;
    if (!c) return bad(r, "control input %s is not an earlier op", json_is_string(v) ? json_string_value(v) : "?");
    mf_op_desc_add_control_input(d, c);
  }
  const char *device = json_string_value(json_object_get(e, "device"));
  const char *origin = json_string_value(json_object_get(e, "origin"));
  if (device) mf_op_desc_set_device(d, device);
  if (origin) mf_op_desc_set_origin(d, origin);
  const char *name;
  json_object_foreach((json_t *)json_object_get(e, "attrs"), name, v) {
    size_t at = strlen(r->where);
    snprintf(r->where + at, sizeof r->where - at, ", attribute %s", name);
    mf_code code = attr_in(r, d, name, v);
    r->where[at] = '\0';
    if (code != MF_OK) return code;
  }
  return MF_OK;
}

/* Rebuilds the ops of list into g (empty, at the root scope). */
static mf_code ops_in(reader *r, mf_graph *g, const json_t *list) {
  if (!json_is_array(list)) return bad(r, "'ops' must be a list");
  size_t at = strlen(r->where), id;
  json_t *e;
  json_array_foreach(list, id, e) {
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *type = json_string_value(json_object_get(e, "type"));
    if (!json_is_object(e) || !name || !type) return bad(r, "op %zu: expected {name, type, ...}", id);
    snprintf(r->where + at, sizeof r->where - at, ": op '%s'", name);
    mf_op_desc *d = mf_op_desc_new(g, type, name);
    mf_code code = op_fields_in(r, g, d, e);
    if (code != MF_OK) {  /* a desc, once made, is finished; that error is not the one to report */
      mf_status ignored;
      mf_op *op = mf_op_desc_finish(d, &ignored);
      (void)op;
      return code;
    }
    mf_op *op = mf_op_desc_finish(d, r->s);
    if (!op) return bad(r, "%s", mf_status_message(r->s));
    if (mf_op_id(op) != (int)id || mf_graph_op_by_name(g, name) != op)
      return bad(r, "came back as '%s' (duplicate names in the file?)", mf_op_name(op));
    json_t *shapes = json_object_get(e, "shapes"), *v;
    size_t i;
    json_array_foreach(shapes, i, v) {
      mf_shape shape;
      if (dims_in(r, v, &shape) != MF_OK) return r->s->code;
      if ((int)i < mf_op_num_outputs(op) && mf_op_set_output_shape(op, (int)i, &shape, r->s) != MF_OK)
        return bad(r, "%s", mf_status_message(r->s));
    }
    r->where[at] = '\0';
  }
  return MF_OK;
}

static mf_code graph_in(reader *r, mf_graph *g, const json_t *seed, const json_t *ops) {
  int64_t v = -1;
  if (seed && !int_in(seed, &v)) return bad(r, "the seed is not an integer");
  mf_graph_set_seed(g, v);
  return ops_in(r, g, ops);
}

static const char *name_in(reader *r, const json_t *v, bool tensor, bool *ok) {
  const char *name = json_string_value(v);
  if (*ok && !(tensor ? is_tensor_of(r->graph, name) : is_op_of(r->graph, name))) {
    bad(r, "%s %s is not in the graph", tensor ? "tensor" : "op", name ? name : "(not a name)");
    *ok = false;
  }
  return name;
}

/* Variables, collections and the variable store, checked against the graph. */
static mf_code extras_in(reader *r, mf_graph_file *f, const json_t *doc) {
  size_t i;
  json_t *v;
  bool ok = true;
  snprintf(r->where, sizeof r->where, ", variables");
  json_array_foreach(json_object_get(doc, "variables"), i, v) {
    json_t *iv = json_object_get(v, "initial_value");
    mf_graph_file_variable var = {name_in(r, json_object_get(v, "tensor"), true, &ok),
                                  name_in(r, json_object_get(v, "initializer"), false, &ok),
                                  iv ? name_in(r, iv, true, &ok) : NULL, json_is_true(json_object_get(v, "trainable"))};
    if (!ok || mf_graph_file_add_variable(f, &var, r->s) != MF_OK) return r->s->code;
  }
  const char *key;
  json_t *list;
  json_object_foreach((json_t *)json_object_get(doc, "collections"), key, list) {
    snprintf(r->where, sizeof r->where, ", collection %s", key);
    json_array_foreach(list, i, v) {
      mf_graph_file_item item = {key, MF_ITEM_BOOL, NULL, 0, false};
      json_t *x;
      if ((x = json_object_get(v, "tensor"))) item.kind = MF_ITEM_TENSOR, item.text = name_in(r, x, true, &ok);
      else if ((x = json_object_get(v, "op"))) item.kind = MF_ITEM_OP, item.text = name_in(r, x, false, &ok);
      else if ((x = json_object_get(v, "number"))) {
        item.kind = MF_ITEM_NUMBER;
        if (!float_in(x, &item.number)) return bad(r, "item %zu: expected a number", i);
      } else if ((x = json_object_get(v, "string"))) {
        item.kind = MF_ITEM_STRING, item.text = json_string_value(x);
        if (!item.text) return bad(r, "item %zu: expected a string", i);
      } else if ((x = json_object_get(v, "bool")) && json_is_boolean(x)) item.flag = json_is_true(x);
      else return bad(r, "item %zu: expected {tensor|op|number|string|bool: value}", i);
      if (!ok || mf_graph_file_add_item(f, &item, r->s) != MF_OK) return r->s->code;
    }
  }
  snprintf(r->where, sizeof r->where, ", variable_store");
  json_object_foreach((json_t *)json_object_get(doc, "variable_store"), key, v) {
    const char *tensor = name_in(r, v, true, &ok);
    if (!ok || mf_graph_file_add_stored(f, key, tensor, r->s) != MF_OK) return r->s->code;
  }
  r->where[0] = '\0';
  return MF_OK;
}

static mf_code doc_in(reader *r, mf_graph_file *f, const json_t *doc) {
  const char *format = json_string_value(json_object_get(doc, "format"));
  if (!json_is_object(doc) || !format || strcmp(format, FORMAT) != 0)
    return mf_status_set(r->s, MF_INVALID_ARGUMENT, "graph file %s is not a moonflow graph (format '" FORMAT "')",
                         r->path);
  json_t *version = json_object_get(doc, "version");
  if (!json_is_number(version) || json_number_value(version) > VERSION) {
    char shown[64] = "(none)";
    if (json_is_number(version)) snprintf(shown, sizeof shown, "%g", json_number_value(version));
    return mf_status_set(r->s, MF_INVALID_ARGUMENT, "graph file %s has version %s; this moonflow reads version %d "
                         "and older", r->path, shown, VERSION);
  }
  json_t *functions = json_object_get(doc, "functions"), *fn;
  size_t n = json_array_size(functions), i;
  r->functions = calloc(n + 1, sizeof *r->functions);
  if (!r->functions) return no_memory(r->s);
  json_array_foreach(functions, i, fn) {
    mf_graph *fg = mf_graph_new();
    if (!fg) return no_memory(r->s);
    r->functions[r->num_functions++] = fg;
    snprintf(r->where, sizeof r->where, ", function %zu", i);
    if (graph_in(r, fg, json_object_get(fn, "seed"), json_object_get(fn, "ops")) != MF_OK) return r->s->code;
  }
  r->where[0] = '\0';
  if (graph_in(r, f->graph, json_object_get(doc, "seed"), json_object_get(doc, "ops")) != MF_OK) return r->s->code;
  return extras_in(r, f, doc);
}

/* The whole of file f (its size in *n; new, free with free), NULL when out of memory or unreadable. */
static char *read_all(FILE *f, size_t *n) {
  size_t cap = 1 << 16, len = 0, got;
  char *data = malloc(cap), *p;
  while (data && (got = fread(data + len, 1, cap - len, f)) > 0)
    if ((len += got) == cap) data = (p = realloc(data, cap *= 2)) ? p : (free(data), NULL);
  if (data && ferror(f)) free(data), data = NULL;
  *n = len;
  return data;
}

/* A file whose first character is no '{' is no JSON graph file: it is read
 * as a binary TensorFlow GraphDef (a frozen model: a graph with no variables). */
static mf_graph_file *graphdef_read(const char *path, FILE *file, mf_status *s) {
  size_t n;
  char *data = read_all(file, &n);
  mf_graph *g = data ? mf_graph_new() : NULL;
  mf_graph_file *f = g ? mf_graph_file_new(g) : NULL;
  mf_graph_release(g);
  if (!f) no_memory(s);
  else if (mf_graphdef_import(g, data, n, NULL, s) != MF_OK) {
    char msg[sizeof s->msg];
    snprintf(msg, sizeof msg, "%s", mf_status_message(s));
    mf_status_set(s, s->code, "graph file %s (no JSON, read as a TensorFlow GraphDef): %s", path, msg);
    mf_graph_file_free(f);
    f = NULL;
  }
  free(data);
  return f;
}

mf_graph_file *mf_graph_file_read(const char *path, mf_status *s) {
  mf_status_clear(s);
  FILE *probe = fopen(path, "rb");
  int first = ' ';
  while (probe && (first == ' ' || first == '\n' || first == '\r' || first == '\t')) first = fgetc(probe);
  if (probe && first != '{' && first != EOF) {
    rewind(probe);
    mf_graph_file *f = graphdef_read(path, probe, s);
    fclose(probe);
    return f;
  }
  if (probe) fclose(probe);
  json_error_t jerr;
  json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
  if (!doc) {
    FILE *probe = fopen(path, "rb");
    if (!probe && errno == ENOENT) return mf_status_set(s, MF_NOT_FOUND, "graph file %s does not exist", path), NULL;
    if (!probe) return mf_status_set(s, MF_NOT_FOUND, "cannot read graph file %s: %s", path, strerror(errno)), NULL;
    fclose(probe);
    return mf_status_set(s, MF_INVALID_ARGUMENT, "graph file %s is not valid JSON: %s (line %d, column %d)", path,
                         jerr.text, jerr.line, jerr.column), NULL;
  }
  mf_graph *g = mf_graph_new();
  mf_graph_file *f = g ? mf_graph_file_new(g) : NULL;
  mf_graph_release(g);
  reader r = {.path = path, .graph = g, .s = s};
  if (!f) no_memory(s);
  else if (doc_in(&r, f, doc) != MF_OK) {
    mf_graph_file_free(f);
    f = NULL;
  }
  for (int i = 0; i < r.num_functions; i++) mf_graph_release(r.functions[i]); /* the ops using them hold them */
  free(r.functions);
  json_decref(doc);
  return f;
}

/* Running a graph file's model --------------------------------------------------------- */

mf_code mf_graph_port(const mf_graph *g, const char *name, mf_output *out, mf_status *s) {
  mf_status_clear(s);
  int index = 0;
  mf_op *op = name && strchr(name, ':') ? port_of(g, name, &index) : name ? mf_graph_op_by_name(g, name) : NULL;
  if (!op || mf_op_num_outputs(op) == 0)
    return mf_status_set(s, MF_NOT_FOUND, "The name '%s' refers to a Tensor which does not exist in the graph",
                         name ? name : "(null)");
  out->op = op, out->index = index;
  return MF_OK;
}

/* The ports of f's variables and of their initializers' value inputs, and their checkpoint names. */
static mf_code variable_ports(const mf_graph_file *f, mf_output *vars, mf_output *values, mf_op **inits,
                              const char **names, mf_status *s) {
  for (int i = 0; i < f->num_variables; i++) {
    const mf_graph_file_variable *v = &f->variables[i];
    if (mf_graph_port(f->graph, v->tensor, &vars[i], s) != MF_OK) return s->code;
    inits[i] = mf_graph_op_by_name(f->graph, v->initializer);
    if (!inits[i] || mf_op_num_inputs(inits[i]) < 2)
      return mf_status_set(s, MF_INVALID_ARGUMENT, "variable %s: its initializer %s assigns no value", v->tensor,
                           v->initializer);
    values[i] = mf_op_input(inits[i], 1);
    names[i] = mf_op_name(vars[i].op);
  }
  return MF_OK;
}

typedef struct ports {
  mf_output *vars, *values;
  mf_op **inits;
  const char **names;
  mf_tensor **tensors;
} ports;

static bool ports_new(ports *p, int n) {
  size_t k = (size_t)n + 1;
  p->vars = calloc(k, sizeof *p->vars), p->values = calloc(k, sizeof *p->values);
  p->inits = calloc(k, sizeof *p->inits), p->names = calloc(k, sizeof *p->names);
  p->tensors = calloc(k, sizeof *p->tensors);
  return p->vars && p->values && p->inits && p->names && p->tensors;
}

static void ports_free(ports *p, int n) {
  for (int i = 0; p->tensors && i < n; i++) mf_tensor_release(p->tensors[i]);
  free(p->vars), free(p->values), free(p->inits), free(p->names), free(p->tensors);
}

mf_code mf_graph_file_initialize(const mf_graph_file *f, mf_session *sess, mf_status *s) {
  mf_status_clear(s);
  int n = f->num_variables;
  ports p;
  mf_code code = !ports_new(&p, n) ? no_memory(s) : variable_ports(f, p.vars, p.values, p.inits, p.names, s);
  if (code == MF_OK) code = mf_session_run(sess, NULL, NULL, 0, NULL, NULL, 0, p.inits, n, s);
  ports_free(&p, 0);
  return code;
}

mf_code mf_graph_file_restore(const mf_graph_file *f, mf_session *sess, const char *path, mf_status *s) {
  mf_status_clear(s);
  int n = f->num_variables;
  ports p;
  mf_checkpoint *c = NULL;
  mf_code code = !ports_new(&p, n) ? no_memory(s) : variable_ports(f, p.vars, p.values, p.inits, p.names, s);
  if (code == MF_OK && !(c = mf_checkpoint_read(path, s))) code = s->code;
  for (int i = 0; code == MF_OK && i < n; i++) {
    int k = mf_checkpoint_find(c, p.names[i]);
    if (k < 0) {
      code = mf_status_set(s, MF_NOT_FOUND, "Key %s not found in checkpoint %s", p.names[i], path);
      break;
    }
    mf_tensor *t = mf_checkpoint_value(c, k);
    mf_shape want;
    mf_op_output_shape(p.vars[i].op, p.vars[i].index, &want);
    bool same = mf_tensor_dtype(t) == mf_op_output_dtype(p.vars[i].op, p.vars[i].index) &&
                (want.rank < 0 || want.rank == mf_tensor_rank(t));
    for (int d = 0; same && d < want.rank; d++) same = want.dims[d] < 0 || want.dims[d] == mf_tensor_dims(t)[d];
    if (!same) {
      code = mf_status_set(s, MF_INVALID_ARGUMENT, "checkpoint %s holds '%s' as %s of rank %d, which does not match "
                           "the variable's %s of rank %d", path, p.names[i], mf_dtype_name(mf_tensor_dtype(t)),
                           mf_tensor_rank(t), mf_dtype_name(mf_op_output_dtype(p.vars[i].op, p.vars[i].index)),
                           want.rank);
      break;
    }
    p.tensors[i] = mf_tensor_retain(t);
  }
  /* Every value checked before any is assigned: one run of the initializers, their values fed. */
  if (code == MF_OK) code = mf_session_run(sess, p.values, p.tensors, n, NULL, NULL, 0, p.inits, n, s);
  mf_checkpoint_free(c);
  ports_free(&p, n);
  return code;
}

mf_code mf_graph_file_save(const mf_graph_file *f, mf_session *sess, const char *path, mf_status *s) {
  mf_status_clear(s);
  int n = f->num_variables;
  ports p;
  mf_code code = !ports_new(&p, n) ? no_memory(s) : variable_ports(f, p.vars, p.values, p.inits, p.names, s);
  if (code == MF_OK) code = mf_session_run(sess, NULL, NULL, 0, p.vars, p.tensors, n, NULL, 0, s);
  if (code == MF_OK) code = mf_checkpoint_write(path, p.names, p.tensors, n, s);
  ports_free(&p, n);
  return code;
}
