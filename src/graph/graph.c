/* graph.c — graphs, name scopes, op construction and inspection. */
#include "graph/graph.h"
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "core/strmap.h"
#include "graph/attrs.h"
#include "graph/op_def.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Most ops have few inputs and attributes: a description holds that many
 * itself and goes to the heap only beyond. */
enum { DESC_INLINE = 4 };

struct mf_op_desc {
  mf_graph *graph;
  const mf_op_def *def;      /* NULL: the type is not registered */
  char *type;                /* the def's name, or owned when there is no def */
  char *name;                /* owned, or NULL */
  const char *origin;        /* interned in the graph, or NULL */
  const char *device;        /* interned in the graph, or NULL */
  mf_output *inputs;         /* inline_inputs or owned */
  int num_inputs, cap_inputs;
  mf_op **control;           /* owned */
  int num_control, cap_control;
  mf_attrs attrs;            /* items inline_attrs or owned; names interned */
  int cap_attrs;
  bool oom;
  mf_output inline_inputs[DESC_INLINE];
  mf_attr inline_attrs[DESC_INLINE];
};

/* ---------- errors about ops ---------- */

void mf_status_append_origin(mf_status *s, const mf_op *op) {
  if (op && op->origin && op->origin[0] && !strstr(s->msg, op->origin))
    mf_status_append(s, " (op '%s' created at %s)", op->name, op->origin);
}

/* ---------- graphs ---------- */

mf_graph *mf_graph_new(void) {
  mf_graph *g = mf_calloc(1, sizeof *g);
  if (!g) return NULL;
  atomic_init(&g->refcount, 1);
  g->interned = mf_strmap_new();
  g->defs = mf_strmap_new();
  g->seed = -1;
  if (!g->interned || !g->defs) { mf_graph_release(g); return NULL; }
  return g;
}

mf_graph *mf_graph_retain(mf_graph *g) {
  atomic_fetch_add(&g->refcount, 1);
  return g;
}

/* Values a description owns (on the heap) or an op holds references to. */
static void attr_clear_value(mf_attr *at, bool heap) {
  if (heap && at->kind == MF_ATTR_INTS) mf_free(at->v.ints.v);
  else if (heap && at->kind == MF_ATTR_STRING) mf_free(at->v.s);
  else if (at->kind == MF_ATTR_TENSOR) mf_tensor_release(at->v.tensor);
  else if (at->kind == MF_ATTR_GRAPH) mf_graph_release(at->v.graph);
  memset(&at->v, 0, sizeof at->v);
}

/* An op's memory is the arena's: only its references go. */
static void op_release_refs(mf_op *op) {
  for (int i = 0; i < op->attrs.n; i++) attr_clear_value(&op->attrs.items[i], false);
}

void mf_graph_release(mf_graph *g) {
  if (!g || atomic_fetch_sub(&g->refcount, 1) != 1) return;
  for (int i = 0; i < g->num_ops; i++) op_release_refs(g->ops[i]);
  for (size_t i = 0; i < MF_ARRAY_LEN(g->scalars); i++) mf_tensor_release(g->scalars[i]);
  mf_free(g->ops);
  mf_names_free(&g->names);
  mf_strmap_free(g->interned);
  mf_strmap_free(g->defs);
  mf_arena_free(&g->arena);
  for (int i = 0; i < g->num_scopes; i++) mf_free(g->scopes[i]);
  mf_free(g->scopes);
  mf_free(g);
}

int mf_graph_num_ops(const mf_graph *g) { return g->num_ops; }
mf_op *mf_graph_op(const mf_graph *g, int i) { return i >= 0 && i < g->num_ops ? g->ops[i] : NULL; }

mf_op *mf_graph_op_by_name(const mf_graph *g, const char *name) { return mf_names_op(&g->names, name); }

void mf_graph_finalize(mf_graph *g) { g->finalized = true; }
bool mf_graph_finalized(const mf_graph *g) { return g->finalized; }
void mf_graph_set_seed(mf_graph *g, int64_t seed) { g->seed = seed; }
int64_t mf_graph_seed(const mf_graph *g) { return g->seed; }

const char *mf_graph_name_scope(const mf_graph *g) {
  return g->num_scopes ? g->scopes[g->num_scopes - 1] : "";
}

/* The graph's one copy of s: origins, devices and attribute names repeat
 * over many ops. NULL when out of memory. */
static const char *intern(mf_graph *g, const char *s) {
  /* Ops built in a loop repeat the last few strings: compare those first. */
  for (size_t i = 0; i < MF_ARRAY_LEN(g->recent_interned); i++)
    if (g->recent_interned[i] && strcmp(g->recent_interned[i], s) == 0) return g->recent_interned[i];
  void **slot = mf_strmap_slot(g->interned, s, true);
  if (slot && !*slot) *slot = mf_arena_strdup(&g->arena, s);
  if (!slot || !*slot) return NULL;
  g->recent_interned[g->next_recent++ % MF_ARRAY_LEN(g->recent_interned)] = *slot;
  return *slot;
}

/* a followed by b, in buf when it fits `size` bytes, else in memory from
 * mf_malloc (the caller frees what is not buf); NULL when out of memory. */
static char *concat(const char *a, const char *b, char *buf, size_t size) {
  size_t la = strlen(a), lb = strlen(b);
  char *out = la + lb + 1 <= size ? buf : mf_malloc(la + lb + 1);
  if (!out) return NULL;
  memcpy(out, a, la);
  memcpy(out + la, b, lb + 1);
  return out;
}

static void free_unless(char *p, const char *a, const char *b) {
  if (p != a && p != b) mf_free(p);
}

const char *mf_graph_push_name_scope(mf_graph *g, const char *name, mf_status *s) {
  if (name && !mf_names_valid(name, true)) {
    mf_status_set(s, MF_INVALID_ARGUMENT,
                  "'%s' is not a valid scope name: TensorFlow's scope names match " MF_SCOPE_NAME_PATTERN, name);
    return NULL;
  }
  if (g->num_scopes == g->cap_scopes) {
    int cap = g->cap_scopes ? g->cap_scopes * 2 : 8;
    char **scopes = mf_realloc(g->scopes, (size_t)cap * sizeof *scopes);
    if (!scopes) goto oom;
    g->scopes = scopes;
    g->cap_scopes = cap;
  }
  char *scope;
  if (!name || !name[0]) scope = mf_strdup("");
  else if (name[strlen(name) - 1] == '/') scope = mf_strdup(name);
  else {
    /* A new scope takes a unique name as an op would, then gets its "/". */
    char base_buf[256], name_buf[256];
    char *base = concat(mf_graph_name_scope(g), name, base_buf, sizeof base_buf);
    mf_unique_name unique = {0};
    bool made = base && mf_names_unique(&g->names, base, name_buf, sizeof name_buf, &unique);
    const char *claimed = made ? mf_names_claim(&g->names, &g->arena, base, &unique, NULL) : NULL;
    scope = claimed ? concat(claimed, "/", NULL, 0) : NULL;
    if (made) free_unless(unique.name, base, name_buf);
    if (base) free_unless(base, base_buf, NULL);
  }
  if (!scope) goto oom;
  g->scopes[g->num_scopes++] = scope;
  return scope;
oom:
  mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory entering name scope");
  return NULL;
}

void mf_graph_pop_name_scope(mf_graph *g) {
  if (g->num_scopes > 0) mf_free(g->scopes[--g->num_scopes]);
}

/* ---------- attributes ---------- */

int64_t mf_attr_int(const mf_attrs *a, const char *name, int64_t dflt) {
  const mf_attr *at = mf_attrs_find(a, name, MF_ATTR_INT);
  return at ? at->v.i : dflt;
}
double mf_attr_float(const mf_attrs *a, const char *name, double dflt) {
  const mf_attr *at = mf_attrs_find(a, name, MF_ATTR_FLOAT);
  return at ? at->v.f : dflt;
}
bool mf_attr_bool(const mf_attrs *a, const char *name, bool dflt) {
  const mf_attr *at = mf_attrs_find(a, name, MF_ATTR_BOOL);
  return at ? at->v.b : dflt;
}
mf_dtype mf_attr_type(const mf_attrs *a, const char *name, mf_dtype dflt) {
  const mf_attr *at = mf_attrs_find(a, name, MF_ATTR_TYPE);
  return at ? at->v.type : dflt;
}
int mf_attr_ints(const mf_attrs *a, const char *name, const int64_t **out) {
  const mf_attr *at = mf_attrs_find(a, name, MF_ATTR_INTS);
  if (!at) return -1;
  *out = at->v.ints.v;
  return at->v.ints.n;
}

/* ---------- op descriptions ---------- */

/* The registered op of `type`, looked up once per graph and type (the
 * registry's own look-up walks every table). */
static const mf_op_def *lookup_def(mf_graph *g, const char *type) {
  for (size_t i = 0; i < MF_ARRAY_LEN(g->recent_defs); i++)
    if (g->recent_defs[i] && strcmp(g->recent_defs[i]->name, type) == 0) return g->recent_defs[i];
  void **slot = mf_strmap_slot(g->defs, type, false);
  const mf_op_def *def = slot ? *slot : mf_registry_lookup(type);
  if (def && !slot && (slot = mf_strmap_slot(g->defs, type, true))) *slot = (void *)def;
  if (def) g->recent_defs[g->next_recent_def++ % MF_ARRAY_LEN(g->recent_defs)] = def;
  return def;
}

mf_op_desc *mf_op_desc_new(mf_graph *g, const char *type, const char *name) {
  /* The inline arrays are filled as items come: only the fields before them are cleared. */
  mf_op_desc *d = mf_malloc(sizeof *d);
  if (!d) return NULL;
  memset(d, 0, offsetof(mf_op_desc, inline_inputs));
  d->graph = g;
  d->def = lookup_def(g, type);
  d->type = d->def ? (char *)d->def->name : mf_strdup(type);
  d->name = name ? mf_strdup(name) : NULL;
  d->inputs = d->inline_inputs;
  d->cap_inputs = DESC_INLINE;
  d->attrs.items = d->inline_attrs;
  d->cap_attrs = DESC_INLINE;
  d->oom = !d->type || (name && !d->name);
  return d;
}

/* Room for `need` items of `elem` bytes at *arr (capacity *cap), which is
 * `inline_items` or owned. */
static bool grow_array_from(void **arr, int *cap, int need, size_t elem, const void *inline_items) {
  if (need <= *cap) return true;
  int cap2 = *cap ? *cap * 2 : 4;
  while (cap2 < need) cap2 *= 2;
  bool was_inline = inline_items && *arr == inline_items;
  void *p = mf_realloc(was_inline ? NULL : *arr, (size_t)cap2 * elem);
  if (!p) return false;
  if (was_inline) memcpy(p, inline_items, (size_t)*cap * elem);
  *arr = p;
  *cap = cap2;
  return true;
}

static bool grow_array(void **arr, int *cap, int need, size_t elem) {
  return grow_array_from(arr, cap, need, elem, NULL);
}

void mf_op_desc_add_input(mf_op_desc *d, mf_output in) {
  if (!grow_array_from((void **)&d->inputs, &d->cap_inputs, d->num_inputs + 1, sizeof in, d->inline_inputs)) {
    d->oom = true;
    return;
  }
  d->inputs[d->num_inputs++] = in;
}

void mf_op_desc_add_input_id(mf_op_desc *d, int op_id, int index) {
  mf_output in = {mf_graph_op(d->graph, op_id), index};  /* no op: finish reports the input missing */
  mf_op_desc_add_input(d, in);
}

void mf_op_desc_add_control_input(mf_op_desc *d, mf_op *op) {
  if (!grow_array((void **)&d->control, &d->cap_control, d->num_control + 1, sizeof op)) {
    d->oom = true;
    return;
  }
  d->control[d->num_control++] = op;
}

/* Returns a fresh attribute slot named `name`, replacing an earlier one. */
static mf_attr *new_attr(mf_op_desc *d, const char *name, mf_attr_kind kind) {
  for (int i = 0; i < d->attrs.n; i++) {
    mf_attr *at = &d->attrs.items[i];
    if (strcmp(at->name, name) == 0) {
      attr_clear_value(at, true);
      at->kind = kind;
      return at;
    }
  }
  if (!grow_array_from((void **)&d->attrs.items, &d->cap_attrs, d->attrs.n + 1, sizeof(mf_attr), d->inline_attrs)) {
    d->oom = true;
    return NULL;
  }
  mf_attr *at = &d->attrs.items[d->attrs.n];
  memset(at, 0, sizeof *at);
  at->name = (char *)intern(d->graph, name);
  if (!at->name) { d->oom = true; return NULL; }
  at->kind = kind;
  d->attrs.n++;
  return at;
}

void mf_op_desc_set_attr_int(mf_op_desc *d, const char *name, int64_t v) {
  mf_attr *at = new_attr(d, name, MF_ATTR_INT);
  if (at) at->v.i = v;
}
void mf_op_desc_set_attr_float(mf_op_desc *d, const char *name, double v) {
  mf_attr *at = new_attr(d, name, MF_ATTR_FLOAT);
  if (at) at->v.f = v;
}
void mf_op_desc_set_attr_bool(mf_op_desc *d, const char *name, bool v) {
  mf_attr *at = new_attr(d, name, MF_ATTR_BOOL);
  if (at) at->v.b = v;
}
void mf_op_desc_set_attr_type(mf_op_desc *d, const char *name, mf_dtype v) {
  mf_attr *at = new_attr(d, name, MF_ATTR_TYPE);
  if (at) at->v.type = v;
}
void mf_op_desc_set_attr_ints(mf_op_desc *d, const char *name, const int64_t *v, int n) {
  mf_attr *at = new_attr(d, name, MF_ATTR_INTS);
  if (!at) return;
  at->v.ints.v = mf_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
  if (!at->v.ints.v) { d->oom = true; return; }
  if (n > 0) memcpy(at->v.ints.v, v, (size_t)n * sizeof *v);
  at->v.ints.n = n;
}
void mf_op_desc_set_attr_shape(mf_op_desc *d, const char *name, const int64_t *dims, int rank) {
  mf_attr *at = new_attr(d, name, MF_ATTR_SHAPE);
  if (!at) return;
  if (rank > MF_MAX_RANK) rank = MF_MAX_RANK + 1;  /* rejected by finish */
  at->v.shape.rank = rank;
  for (int i = 0; i < rank && i < MF_MAX_RANK; i++) at->v.shape.dims[i] = dims[i];
}
void mf_op_desc_set_attr_string(mf_op_desc *d, const char *name, const char *v) {
  mf_attr *at = new_attr(d, name, MF_ATTR_STRING);
  if (!at) return;
  at->v.s = mf_strdup(v);
  if (!at->v.s) d->oom = true;
}
void mf_op_desc_set_attr_tensor(mf_op_desc *d, const char *name, mf_tensor *v) {
  mf_attr *at = new_attr(d, name, MF_ATTR_TENSOR);
  if (at) at->v.tensor = mf_tensor_retain(v);
}
/* The graph's scalar of dtype holding the bytes at `value` (a new reference). */
static mf_tensor *shared_scalar(mf_graph *g, mf_dtype dtype, const unsigned char value[MF_MAX_ELEMENT_SIZE]) {
  size_t size = mf_dtype_size(dtype);
  uint64_t h = (uint64_t)dtype * 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < size; i++) h = (h ^ value[i]) * 1099511628211ull;
  mf_tensor **slot = &g->scalars[(h >> 32) % MF_ARRAY_LEN(g->scalars)];
  if (*slot && (*slot)->dtype == dtype && memcmp((*slot)->data, value, size) == 0) return mf_tensor_retain(*slot);
  mf_status s;
  mf_tensor *t = mf_tensor_new_uninit(dtype, 0, NULL, &s);
  if (!t) return NULL;
  memcpy(t->data, value, size);
  mf_tensor_release(*slot);
  *slot = mf_tensor_retain(t);
  return t;
}

void mf_op_desc_set_attr_scalar(mf_op_desc *d, const char *name, mf_dtype dtype, double v) {
  _Alignas(16) unsigned char value[MF_MAX_ELEMENT_SIZE] = {0}; /* any dtype's element (complex128 the largest) */
  mf_store_double(value, dtype, 0, v);
  mf_tensor *t = shared_scalar(d->graph, dtype, value);
  if (!t) { d->oom = true; return; }
  mf_attr *at = new_attr(d, name, MF_ATTR_TENSOR);
  if (at) at->v.tensor = t;
  else mf_tensor_release(t);
}
void mf_op_desc_set_attr_graph(mf_op_desc *d, const char *name, mf_graph *v) {
  mf_attr *at = new_attr(d, name, MF_ATTR_GRAPH);
  if (at) at->v.graph = mf_graph_retain(v);
}
static void set_interned(mf_op_desc *d, const char **field, const char *v) {
  *field = v ? intern(d->graph, v) : NULL;
  if (v && !*field) d->oom = true;
}
void mf_op_desc_set_origin(mf_op_desc *d, const char *where) { set_interned(d, &d->origin, where); }
void mf_op_desc_set_device(mf_op_desc *d, const char *device) { set_interned(d, &d->device, device); }

void mf_op_desc_discard(mf_op_desc *d) {
  if (!d->def) mf_free(d->type);
  mf_free(d->name);
  if (d->inputs != d->inline_inputs) mf_free(d->inputs);
  mf_free(d->control);
  for (int i = 0; i < d->attrs.n; i++) attr_clear_value(&d->attrs.items[i], true);
  if (d->attrs.items != d->inline_attrs) mf_free(d->attrs.items);
  mf_free(d);
}

mf_code mf_infer_set_num_outputs(mf_infer_ctx *ic, int n) {
  if (n < 0) return mf_status_set(ic->status, MF_INVALID_ARGUMENT, "%s: negative number of outputs", ic->op_name);
  if (n > MF_MAX_OUTPUTS_INLINE) {
    /* The caller gave inline room; grow onto the heap it tracks through these pointers. */
    mf_dtype *dt = mf_calloc((size_t)n, sizeof *dt);
    mf_shape *sh = mf_calloc((size_t)n, sizeof *sh);
    if (!dt || !sh) {
      mf_free(dt);
      mf_free(sh);
      return mf_status_set(ic->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ic->op_name);
    }
    if (ic->num_outputs > MF_MAX_OUTPUTS_INLINE) {
      mf_free(ic->out_dtypes);
      mf_free(ic->out_shapes);
    }
    ic->out_dtypes = dt;
    ic->out_shapes = sh;
  }
  ic->num_outputs = n;
  return MF_OK;
}

/* Builds the error suffix naming where the failing op was written. */
static mf_code desc_error(mf_op_desc *d, mf_status *s) {
  if (d->origin && d->origin[0] && !strstr(s->msg, d->origin)) mf_status_append(s, " (at %s)", d->origin);
  return s->code;
}

static mf_code check_inputs(mf_op_desc *d, const mf_op_def *def, const char *name, mf_status *s) {
  for (int i = 0; i < d->num_inputs; i++) {
    mf_output in = d->inputs[i];
    if (!in.op) return mf_status_set(s, MF_INVALID_ARGUMENT, "%s: input %d is missing", name, i);
    if (in.op->graph != d->graph)
      return mf_status_set(s, MF_INVALID_ARGUMENT,
                           "%s: Tensor(\"%s:%d\") must be from the same graph as the op it feeds; "
                           "build every op of a computation in one graph",
                           name, in.op->name, in.index);
    if (in.index < 0 || in.index >= in.op->num_outputs)
      return mf_status_set(s, MF_INVALID_ARGUMENT, "%s: op '%s' has no output %d", name,
                           in.op->name, in.index);
  }
  for (int i = 0; i < d->num_control; i++)
    if (!d->control[i] || d->control[i]->graph != d->graph)
      return mf_status_set(s, MF_INVALID_ARGUMENT,
                           "%s: a control input must be an op of the same graph", name);
  bool variadic = def->flags & MF_OP_VARIADIC_INPUTS;
  if (variadic ? d->num_inputs < def->num_inputs : d->num_inputs != def->num_inputs)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "%s: op %s takes %s%d input%s, got %d", name,
                         def->name, variadic ? "at least " : "", def->num_inputs,
                         def->num_inputs == 1 ? "" : "s", d->num_inputs);
  for (int i = 0; i < d->attrs.n; i++)
    if (d->attrs.items[i].kind == MF_ATTR_SHAPE && d->attrs.items[i].v.shape.rank > MF_MAX_RANK)
      return mf_status_set(s, MF_INVALID_ARGUMENT, "%s: shapes have at most %d dimensions", name, MF_MAX_RANK);
  return MF_OK;
}

/* The value of a port when the graph knows it statically (a constant). */
static mf_tensor *static_value(mf_output o) {
  if (!(o.op->def->flags & MF_OP_CONSTANT)) return NULL;
  const mf_attr *at = mf_attrs_find(&o.op->attrs, "value", MF_ATTR_TENSOR);
  return at ? at->v.tensor : NULL;
}

enum { MAX_VALUE_DEPTH = 8 };

int64_t mf_port_scalar_value(mf_output o, int depth) {
  mf_tensor *v = static_value(o);
  if (v) return v->rank == 0 && mf_dtype_is_integer(v->dtype) ? mf_load_int64(v->data, v->dtype, 0) : -1;
  const mf_build_value *bv = &o.op->def->build_value;
  return depth <= MAX_VALUE_DEPTH && bv->scalar ? bv->scalar(o.op, o.index, depth + 1) : -1;
}

mf_shape mf_port_shape_value(mf_output o, int depth) {
  const mf_op *op = o.op;
  const mf_shape *vec = &op->out_shapes[o.index];
  mf_shape out = mf_shape_unknown();
  if (vec->rank == 1 && vec->dims[0] >= 0 && vec->dims[0] <= MF_MAX_RANK) {
    out.rank = (int)vec->dims[0];
    for (int i = 0; i < out.rank; i++) out.dims[i] = -1;
  }
  mf_tensor *v = static_value(o);
  if (v && v->rank == 1 && v->size <= MF_MAX_RANK && mf_dtype_is_integer(v->dtype)) {
    for (int i = 0; i < out.rank; i++) {
      int64_t d = mf_load_int64(v->data, v->dtype, i);
      out.dims[i] = d < 0 ? -1 : d;
    }
    return out;
  }
  const mf_build_value *bv = &op->def->build_value;
  /* Only a vector of known length is read as a shape. */
  if (v || out.rank < 0 || depth > MAX_VALUE_DEPTH || !bv->shape) return out;
  mf_shape known = bv->shape(op, o.index, depth + 1);
  return known.rank == out.rank ? known : out;
}

bool mf_port_value_read_at_build(mf_output o) {
  if (static_value(o) || mf_port_scalar_value(o, 0) >= 0) return true;
  mf_shape v = mf_port_shape_value(o, 0);
  for (int i = 0; i < v.rank; i++)
    if (v.dims[i] >= 0) return true;
  return false;
}

mf_shape mf_infer_shape_value(const mf_infer_ctx *ic, int i) {
  const mf_tensor *v = ic->in_values[i];
  if (v && v->rank == 1 && v->size <= MF_MAX_RANK) {
    mf_shape out = {.rank = (int)v->size};
    for (int k = 0; k < out.rank; k++) out.dims[k] = mf_load_int64(v->data, v->dtype, k);
    return out;
  }
  if (ic->in_ports && mf_def_reads_value(ic->def, i)) return mf_port_shape_value(ic->in_ports[i], 0);
  return mf_shape_unknown();
}

/* Points op's out_dtypes and out_shapes at arrays in the arena holding
 * dtypes and shapes (n of each): the arrays of an earlier op of the same
 * signature when the cache has them. false when out of memory. */
static bool set_signature(mf_graph *g, mf_op *op, int n, const mf_dtype *dtypes, const mf_shape *shapes) {
  op->num_outputs = n;
  if (n == 0) return true;
  uint64_t h = (uint64_t)n;
  for (int i = 0; i < n; i++) {
    h = (h ^ (uint64_t)dtypes[i]) * 1099511628211ull;
    h = (h ^ (uint64_t)(int64_t)shapes[i].rank) * 1099511628211ull;
    for (int k = 0; k < shapes[i].rank; k++) h = (h ^ (uint64_t)shapes[i].dims[k]) * 1099511628211ull;
  }
  struct mf_signature *slot = &g->signatures[(h >> 32) % MF_ARRAY_LEN(g->signatures)];
  bool same = slot->n == n && memcmp(slot->dtypes, dtypes, (size_t)n * sizeof *dtypes) == 0;
  for (int i = 0; same && i < n; i++) {
    same = slot->shapes[i].rank == shapes[i].rank;
    for (int k = 0; same && k < shapes[i].rank; k++) same = slot->shapes[i].dims[k] == shapes[i].dims[k];
  }
  if (!same) {
    mf_dtype *d = mf_arena_dup(&g->arena, dtypes, (size_t)n * sizeof *dtypes);
    mf_shape *sh = mf_arena_dup(&g->arena, shapes, (size_t)n * sizeof *shapes);
    if (!d || !sh) return false;
    *slot = (struct mf_signature){n, d, sh};
  }
  op->out_dtypes = slot->dtypes;
  op->out_shapes = slot->shapes;
  return true;
}

/* Moves a description's attributes into the graph's arena for its op:
 * ints and strings copied, the references of tensors and
 * graphs taken over. false when out of memory (the description keeps all). */
static bool move_attrs(mf_graph *g, mf_op_desc *d, mf_attrs *out) {
  int n = d->attrs.n;
  mf_attr *items = n ? mf_arena_alloc(&g->arena, (size_t)n * sizeof *items) : NULL;
  if (n && !items) return false;
  for (int i = 0; i < n; i++) {
    const mf_attr *src = &d->attrs.items[i];
    mf_attr *dst = &items[i];
    *dst = *src;
    if (src->kind == MF_ATTR_INTS)
      dst->v.ints.v = mf_arena_dup(&g->arena, src->v.ints.v, (size_t)src->v.ints.n * sizeof(int64_t));
    else if (src->kind == MF_ATTR_STRING)
      dst->v.s = mf_arena_strdup(&g->arena, src->v.s);
    if ((src->kind == MF_ATTR_INTS && !dst->v.ints.v) || (src->kind == MF_ATTR_STRING && !dst->v.s))
      return false;
  }
  for (int i = 0; i < n; i++) {
    mf_attr *src = &d->attrs.items[i];
    if (src->kind == MF_ATTR_TENSOR || src->kind == MF_ATTR_GRAPH) memset(&src->v, 0, sizeof src->v);
  }
  out->items = items;
  out->n = n;
  return true;
}

/* The inputs that control flow takes as refs (the ints attr "_ref_inputs"),
 * checked against the number of inputs. */
static mf_code check_ref_inputs(const mf_op_desc *d, const char *name, const int64_t **refs, int *n,
                                mf_status *s) {
  *n = mf_attr_ints(&d->attrs, "_ref_inputs", refs);
  for (int i = 0; i < *n; i++)
    if ((*refs)[i] < 0 || (*refs)[i] >= d->num_inputs)
      return mf_status_set(s, MF_INVALID_ARGUMENT, "%s: _ref_inputs names input %lld of %d", name,
                           (long long)(*refs)[i], d->num_inputs);
  return MF_OK;
}

/* Strings and complex values reach only the ops that take them
 * (MF_OP_STRINGS, MF_OP_COMPLEX): the others' kernels would read their
 * elements as other numbers. */
static mf_code check_strings(const mf_op_def *def, const char *name, const char *what, int n,
                             const mf_dtype *dtypes, mf_status *s) {
  for (int i = 0; i < n; i++) {
    if (dtypes[i] == MF_STRING && !(def->flags & MF_OP_STRINGS))
      return mf_status_set(s, MF_INVALID_ARGUMENT,
                           "%s: %s takes no strings, but its %s %d is a string; strings go through tf.strings "
                           "ops, Identity, Equal, NotEqual, Reshape, ExpandDims, Squeeze, Shape, Size and Rank",
                           name, def->name, what, i);
    if (mf_dtype_is_complex(dtypes[i]) && !(def->flags & MF_OP_COMPLEX))
      return mf_status_set(s, MF_INVALID_ARGUMENT,
                           "%s: %s takes no complex values, but its %s %d is %s; see docs/api/signal.md for "
                           "the ops that do, or take tf.math.real / tf.math.imag first",
                           name, def->name, what, i, mf_dtype_name(dtypes[i]));
  }
  return MF_OK;
}

mf_op *mf_op_desc_finish(mf_op_desc *d, mf_status *s) {
  mf_graph *g = d->graph;
  mf_op *op = NULL;
  /* Most names fit these; longer ones go to the heap. */
  char scoped_buf[256], name_buf[256];
  char *scoped = NULL;
  mf_unique_name unique = {0};
  mf_status_clear(s);
  if (d->oom) { mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory building an op"); goto fail; }
  const char *base = d->name ? d->name : d->type;
  if (d->name && !mf_names_valid(d->name, false)) {
    mf_status_set(s, MF_INVALID_ARGUMENT,
                  "%s: '%s' is not a valid op name: TensorFlow's op names match " MF_OP_NAME_PATTERN,
                  d->type, d->name);
    goto fail;
  }
  if (g->finalized) {
    mf_status_set(s, MF_FAILED_PRECONDITION,
                  "Graph is finalized and cannot be modified (creating %s op '%s')", d->type, base);
    goto fail;
  }
  const mf_op_def *def = d->def;
  if (!def) {
    mf_status_set(s, MF_NOT_FOUND, "Op type not registered '%s'", d->type);
    goto fail;
  }
  scoped = concat(mf_graph_name_scope(g), base, scoped_buf, sizeof scoped_buf);
  if (!scoped || !mf_names_unique(&g->names, scoped, name_buf, sizeof name_buf, &unique)) goto oom;
  const char *name = unique.name;
  if (check_inputs(d, def, name, s)) goto fail;
  const int64_t *refs = NULL;  /* check_ref_inputs sets both; gcc may not see it */
  int nrefs = 0;
  if (check_ref_inputs(d, name, &refs, &nrefs, s)) goto fail;

  int n_in = d->num_inputs;
  mf_dtype in_dtypes_inline[8];
  mf_shape in_shapes_inline[8];
  mf_tensor *in_values_inline[8];
  mf_dtype *in_dtypes = n_in <= 8 ? in_dtypes_inline : mf_malloc((size_t)n_in * sizeof *in_dtypes);
  mf_shape *in_shapes = n_in <= 8 ? in_shapes_inline : mf_malloc((size_t)n_in * sizeof *in_shapes);
  mf_tensor **in_values = n_in <= 8 ? in_values_inline : mf_malloc((size_t)n_in * sizeof *in_values);
  mf_dtype out_dtypes_inline[MF_MAX_OUTPUTS_INLINE];
  mf_shape out_shapes_inline[MF_MAX_OUTPUTS_INLINE];
  mf_infer_ctx ic = {
      .op_name = name, .def = def, .attrs = &d->attrs, .num_inputs = n_in,
      .in_dtypes = in_dtypes, .in_shapes = in_shapes, .in_values = in_values,
      .in_ports = d->inputs, .num_outputs = def->num_outputs > 0 ? def->num_outputs : 0,
      .out_dtypes = out_dtypes_inline, .out_shapes = out_shapes_inline, .status = s};
  if (!in_dtypes || !in_shapes || !in_values) {
    mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    for (int i = 0; i < n_in; i++) {
      mf_output in = d->inputs[i];
      in_dtypes[i] = in.op->out_dtypes[in.index];
      in_shapes[i] = in.op->out_shapes[in.index];
      in_values[i] = mf_def_reads_value(def, i) ? static_value(in) : NULL;
    }
    for (int i = 0; i < MF_MAX_OUTPUTS_INLINE; i++) out_shapes_inline[i] = mf_shape_unknown();
    if (!check_strings(def, name, "input", n_in, in_dtypes, s)) def->infer(&ic);
  }
  if (mf_ok(s)) check_strings(def, name, "output", ic.num_outputs, ic.out_dtypes, s);
  for (int i = 0; mf_ok(s) && i < ic.num_outputs; i++) mf_shape_known_elements(name, &ic.out_shapes[i], NULL, s);
  if (mf_ok(s)) {
    /* Everything that can be wrong with the op is known now: what follows
     * fails only when out of memory. */
    op = mf_arena_alloc(&g->arena, sizeof *op);
    if (op) memset(op, 0, sizeof *op);
    if (!op || !set_signature(g, op, ic.num_outputs, ic.out_dtypes, ic.out_shapes))
      mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (ic.num_outputs > MF_MAX_OUTPUTS_INLINE) {
    mf_free(ic.out_dtypes);
    mf_free(ic.out_shapes);
  }
  if (n_in > 8) {
    mf_free(in_dtypes);
    mf_free(in_shapes);
    mf_free(in_values);
  }
  if (!mf_ok(s)) goto fail;

  if (!grow_array((void **)&g->ops, &g->cap_ops, g->num_ops + 1, sizeof *g->ops)) goto oom;
  op->graph = g;
  op->def = def;
  op->origin = d->origin ? d->origin : "";
  op->device = d->device ? d->device : "";
  op->num_inputs = d->num_inputs;
  if (op->num_inputs) op->inputs = mf_arena_dup(&g->arena, d->inputs, (size_t)d->num_inputs * sizeof *d->inputs);
  op->num_control = d->num_control;
  if (op->num_control)
    op->control_inputs = mf_arena_dup(&g->arena, d->control, (size_t)d->num_control * sizeof *d->control);
  if ((op->num_inputs && !op->inputs) || (op->num_control && !op->control_inputs) || !move_attrs(g, d, &op->attrs))
    goto oom;
  op->outputs_fully_defined = true;
  for (int i = 0; i < op->num_outputs; i++)
    if (!mf_shape_fully_defined(&op->out_shapes[i])) op->outputs_fully_defined = false;
  if (nrefs > 0) {
    op->ref_mask = mf_arena_alloc(&g->arena, (size_t)op->num_inputs * sizeof *op->ref_mask);
    if (!op->ref_mask) goto oom;
    memset(op->ref_mask, 0, (size_t)op->num_inputs * sizeof *op->ref_mask);
    for (int i = 0; i < nrefs; i++) op->ref_mask[refs[i]] = true;
  }
  op->name = mf_names_claim(&g->names, &g->arena, scoped, &unique, op);
  if (!op->name) goto oom;
  op->id = g->num_ops;
  g->ops[g->num_ops++] = op;
  free_unless(unique.name, scoped, name_buf);
  free_unless(scoped, scoped_buf, NULL);
  mf_op_desc_discard(d);
  return op;
oom:
  mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory building an op");
fail:
  desc_error(d, s);
  if (op) op_release_refs(op);
  if (unique.name) free_unless(unique.name, scoped, name_buf);
  if (scoped) free_unless(scoped, scoped_buf, NULL);
  mf_op_desc_discard(d);
  return NULL;
}

/* ---------- inspecting ops ---------- */

const char *mf_op_name(const mf_op *op) { return op->name; }
const char *mf_op_type(const mf_op *op) { return op->def->name; }
const char *mf_op_origin(const mf_op *op) { return op->origin; }
const char *mf_op_device(const mf_op *op) { return op->device; }
mf_graph *mf_op_graph(const mf_op *op) { return op->graph; }
int mf_op_id(const mf_op *op) { return op->id; }
int mf_op_num_inputs(const mf_op *op) { return op->num_inputs; }
mf_output mf_op_input(const mf_op *op, int i) { return op->inputs[i]; }
int mf_op_num_control_inputs(const mf_op *op) { return op->num_control; }
mf_op *mf_op_control_input(const mf_op *op, int i) { return op->control_inputs[i]; }
int mf_op_num_outputs(const mf_op *op) { return op->num_outputs; }
mf_dtype mf_op_output_dtype(const mf_op *op, int i) { return op->out_dtypes[i]; }
void mf_op_output_shape(const mf_op *op, int i, mf_shape *out) { *out = op->out_shapes[i]; }

mf_code mf_op_set_output_shape(mf_op *op, int i, const mf_shape *shape, mf_status *s) {
  const mf_shape *cur = &op->out_shapes[i];
  if (shape->rank > MF_MAX_RANK)
    return mf_status_set(s, MF_INVALID_ARGUMENT, "shapes have at most %d dimensions", MF_MAX_RANK);
  if (mf_shape_known_elements(op->name, shape, NULL, s)) return s->code;
  if (!mf_shape_compatible(cur, shape)) {
    char a[128], b[128];
    mf_status_set(s, MF_INVALID_ARGUMENT, "Shapes %s and %s are incompatible (set_shape on '%s:%d')",
                  mf_shape_str_tf(cur, a, sizeof a), mf_shape_str_tf(shape, b, sizeof b), op->name, i);
    mf_status_append_origin(s, op);
    return s->code;
  }
  if (shape->rank < 0) return MF_OK;
  mf_shape merged = *shape;
  for (int k = 0; cur->rank >= 0 && k < cur->rank; k++)
    if (merged.dims[k] < 0) merged.dims[k] = cur->dims[k];
  /* outputs_fully_defined stays as inference left it: a promised shape is no
   * reason to skip run-time inference of this op. The shapes may be shared
   * with other ops (set_signature): this op gets its own copy. */
  mf_shape *own = mf_arena_dup(&op->graph->arena, op->out_shapes, (size_t)op->num_outputs * sizeof *own);
  if (!own) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory setting the shape of '%s'", op->name);
  own[i] = merged;
  op->out_shapes = own;
  return MF_OK;
}

mf_code mf_op_set_attr_ints(mf_op *op, const char *name, const int64_t *v, int n, mf_status *s) {
  mf_graph *g = op->graph;
  int64_t *copy = mf_arena_dup(&g->arena, v, (size_t)(n > 0 ? n : 0) * sizeof *v);
  if (!copy) return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory setting attribute %s", name);
  mf_attr *at = NULL;
  for (int i = 0; i < op->attrs.n && !at; i++)
    if (strcmp(op->attrs.items[i].name, name) == 0) at = &op->attrs.items[i];
  if (!at) {
    /* A new array in the arena; the old one stays there until the graph goes. */
    mf_attr *items = mf_arena_alloc(&g->arena, (size_t)(op->attrs.n + 1) * sizeof *items);
    const char *interned = intern(g, name);
    if (!items || !interned)
      return mf_status_set(s, MF_RESOURCE_EXHAUSTED, "out of memory setting attribute %s", name);
    if (op->attrs.n) memcpy(items, op->attrs.items, (size_t)op->attrs.n * sizeof *items);
    op->attrs.items = items;
    at = &op->attrs.items[op->attrs.n++];
    memset(at, 0, sizeof *at);
    at->name = (char *)interned;
  } else {
    attr_clear_value(at, false);
  }
  at->kind = MF_ATTR_INTS;
  at->v.ints.v = copy;
  at->v.ints.n = n;
  return MF_OK;
}

bool mf_op_attr_int(const mf_op *op, const char *name, int64_t *out) {
  const mf_attr *at = mf_attrs_find(&op->attrs, name, MF_ATTR_INT);
  if (at) *out = at->v.i;
  return at != NULL;
}
bool mf_op_attr_float(const mf_op *op, const char *name, double *out) {
  const mf_attr *at = mf_attrs_find(&op->attrs, name, MF_ATTR_FLOAT);
  if (at) *out = at->v.f;
  return at != NULL;
}
bool mf_op_attr_bool(const mf_op *op, const char *name, bool *out) {
  const mf_attr *at = mf_attrs_find(&op->attrs, name, MF_ATTR_BOOL);
  if (at) *out = at->v.b;
  return at != NULL;
}
bool mf_op_attr_type(const mf_op *op, const char *name, mf_dtype *out) {
  const mf_attr *at = mf_attrs_find(&op->attrs, name, MF_ATTR_TYPE);
  if (at) *out = at->v.type;
  return at != NULL;
}
int mf_op_attr_ints(const mf_op *op, const char *name, const int64_t **out) {
  return mf_attr_ints(&op->attrs, name, out);
}
const char *mf_op_attr_string(const mf_op *op, const char *name) {
  const mf_attr *at = mf_attrs_find(&op->attrs, name, MF_ATTR_STRING);
  return at ? at->v.s : NULL;
}
mf_tensor *mf_op_attr_tensor(const mf_op *op, const char *name) {
  const mf_attr *at = mf_attrs_find(&op->attrs, name, MF_ATTR_TENSOR);
  return at ? at->v.tensor : NULL;
}
