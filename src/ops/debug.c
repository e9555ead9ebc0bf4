/* debug.c — debugging ops and host functions: Print, Assert,
 * CheckNumerics, LuaFunc and LuaFuncStateless.
 *
 * Print and Assert summarize values as TensorFlow does (SummarizeValue): at
 * most `summarize` entries of a tensor, nested dims in brackets, "..." where
 * entries were left out; a scalar is its value.
 *
 * LuaFunc calls back into the program embedding the engine (the Lua binding:
 * tf.lua_func) through the host callbacks of its graph (mf_graph_set_host);
 * Print hands its text to the host the same way, so that it is printed
 * through the host's output (Lua's), not a hidden C stream. The engine never
 * lets a callback unwind through it: callbacks report failures through the
 * status they are given.
 *
 * Print, Assert and CheckNumerics count their runs in their per-session state
 * (Print's first_n needs the count); mf_session_op_run_count reads it for the
 * hygiene warning about debugging ops that no run reached. */
#include "core/status.h"
#include "core/memory.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/shape.h"
#include "graph/attrs.h"
#include "graph/op_def.h"
#include "graph/graph.h"
#include "graph/autodiff.h"
#include "exec/kernel_api.h"
#include "kernels/helpers.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

/* ---------- host callbacks ---------- */

void mf_graph_set_host(mf_graph *g, const mf_host *host) {
  if (host) g->host = *host;
  else memset(&g->host, 0, sizeof g->host);
}

mf_code mf_status_set_error(mf_status *s, mf_code code, const char *message) {
  if (code == MF_OK) code = MF_UNKNOWN;
  return mf_status_set(s, code, "%s", message ? message : "unknown error");
}

/* The host of op's graph, else of the session's graph (ops of function graphs
 * that were made without one). */
static const mf_host *host_of(const mf_op *op, const mf_session *sess) {
  if (op->graph->host.call || op->graph->host.print || op->graph->host.grad || !sess) return &op->graph->host;
  return &mf_session_graph(sess)->host;
}

/* ---------- run counts ---------- */

static void *run_count_new(mf_kernel_ctx *ctx) {
  (void)ctx;
  return mf_calloc(1, sizeof(_Atomic int64_t));
}

/* The op's run count in its per-session state, incremented; made on first use. */
static int64_t count_run(mf_kernel_ctx *ctx) {
  _Atomic int64_t *count = mf_kernel_state(ctx, run_count_new, mf_free);
  return count ? atomic_fetch_add(count, 1) + 1 : -1;
}

static bool counts_runs(const mf_op *op) {
  const char *t = op->def->name;
  return strcmp(t, "Print") == 0 || strcmp(t, "Assert") == 0 || strcmp(t, "CheckNumerics") == 0;
}

int64_t mf_session_op_run_count(const mf_session *sess, const mf_op *op) {
  if (!sess || !op || !counts_runs(op)) return 0;
  mf_state_slot *st = mf_session_op_state((mf_session *)sess, op);
  _Atomic int64_t *count = st ? atomic_load(&st->ptr) : NULL;
  return count ? atomic_load(count) : 0;
}

/* ---------- text ---------- */

typedef struct strbuf {
  char *s;
  size_t len, cap;
  bool oom;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 128;
    while (cap < b->len + n + 1) cap *= 2;
    char *grown = mf_realloc(b->s, cap);
    if (!grown) {
      b->oom = true;
      return;
    }
    b->s = grown;
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void sb_str(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

/* The shortest of %.{short}g and %.{long}g that reads back as v. */
static void format_float(char *buf, size_t n, double v, bool single) {
  if (isnan(v)) { snprintf(buf, n, "nan"); return; }
  if (isinf(v)) { snprintf(buf, n, v > 0 ? "inf" : "-inf"); return; }
  snprintf(buf, n, "%.*g", single ? 6 : 15, v);
  double back = strtod(buf, NULL);
  if (single ? (float)back != (float)v : back != v) snprintf(buf, n, "%.*g", single ? 9 : 17, v);
}

static void sb_element(strbuf *b, const mf_tensor *t, int64_t i) {
  char buf[64];
  switch (t->dtype) {
    case MF_FLOAT32: format_float(buf, sizeof buf, ((const float *)t->data)[i], true); break;
    case MF_FLOAT64: format_float(buf, sizeof buf, ((const double *)t->data)[i], false); break;
    case MF_BOOL: snprintf(buf, sizeof buf, "%s", ((const bool *)t->data)[i] ? "True" : "False"); break;
    default: snprintf(buf, sizeof buf, "%" PRId64, mf_load_int64(t->data, t->dtype, i)); break;
  }
  sb_str(b, buf);
}

/* TensorFlow's PrintOneDim: entries of dim `d` on, until `limit` entries. */
static void summarize_dim(strbuf *b, const mf_tensor *t, int d, int64_t limit, int64_t *next) {
  if (*next >= limit) return;
  int64_t count = t->dims[d];
  if (d == t->rank - 1) {
    for (int64_t i = 0; i < count; i++) {
      if (*next >= limit) {
        if (d != 0) sb_str(b, "...");
        return;
      }
      if (i > 0) sb_str(b, " ");
      sb_element(b, t, (*next)++);
    }
    return;
  }
  for (int64_t i = 0; i < count; i++) {
    bool opened = false;
    if (*next < limit) {
      sb_str(b, "[");
      opened = true;
    }
    summarize_dim(b, t, d + 1, limit, next);
    if (*next < limit || opened) sb_str(b, "]");
  }
}

/* TensorFlow's SummarizeValue: at most max_entries entries (all when < 0). */
static void summarize(strbuf *b, const mf_tensor *t, int64_t max_entries) {
  if (t->device != MF_CPU) {
    sb_str(b, "<a value on a device>");
    return;
  }
  if (t->rank == 0) {
    sb_element(b, t, 0);
    return;
  }
  int64_t limit = max_entries < 0 || max_entries > t->size ? t->size : max_entries;
  int64_t next = 0;
  summarize_dim(b, t, 0, limit, &next);
  if (t->size > limit) sb_str(b, "...");
}

/* ---------- Print(input, data...) ---------- */
/* attrs: message (string), first_n (int, negative: always), summarize (int,
 * negative: every entry; default 3). Output: input, unchanged. */

static mf_code print_infer(mf_infer_ctx *ic) {
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static mf_code print_kernel(mf_kernel_ctx *ctx) {
  int64_t runs = count_run(ctx);
  if (runs < 0) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  int64_t first_n = mf_attr_int(ctx->attrs, "first_n", -1);
  if (first_n < 0 || runs <= first_n) {
    const mf_attr *msg = mf_attrs_find(ctx->attrs, "message", MF_ATTR_STRING);
    int64_t limit = mf_attr_int(ctx->attrs, "summarize", 3);
    strbuf b = {0};
    sb_str(&b, msg ? msg->v.s : "");
    for (int k = 1; k < ctx->num_inputs; k++) {
      sb_str(&b, "[");
      summarize(&b, ctx->inputs[k], limit);
      sb_str(&b, "]");
    }
    if (!b.s) sb_str(&b, "");
    if (b.oom) {
      mf_free(b.s);
      return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory formatting the values",
                           ctx->op->name);
    }
    const mf_host *h = host_of(ctx->op, ctx->session);
    mf_code rc = MF_OK;
    if (h->print) {
      rc = h->print(h->ud, ctx->op, b.s, ctx->status);
      if (rc != MF_OK && mf_ok(ctx->status))
        mf_status_set(ctx->status, rc, "%s: the host's print function failed", ctx->op->name);
    } else {
      fprintf(stderr, "%s\n", b.s);
    }
    mf_free(b.s);
    if (rc != MF_OK) return ctx->status->code;
  }
  ctx->outputs[0] = mf_tensor_retain(ctx->inputs[0]);
  return MF_OK;
}

/* The gradient passes through to the input; the printed values get none. */
static mf_code print_grad(mf_grad_ctx *gc) {
  gc->input_grads[0] = gc->grads[0];
  return MF_OK;
}

/* ---------- Assert(condition, data...) ---------- */
/* attrs: strings (string: the message items, separated by '\x1f'), layout
 * (ints: per data item, -1 for the next string or the input index of a
 * tensor), summarize (int, default 3). Fails unless every element of the
 * bool condition is true; no outputs. */

static mf_code assert_infer(mf_infer_ctx *ic) {
  if (ic->in_dtypes[0] != MF_BOOL)
    return MF_INVALID(ic->status, "%s: the condition of an Assert must be bool, got %s",
                      ic->op_name, mf_dtype_name(ic->in_dtypes[0]));
  const int64_t *layout;
  int n = mf_attr_ints(ic->attrs, "layout", &layout);
  for (int i = 0; i < n; i++)
    if (layout[i] == 0 || layout[i] >= ic->num_inputs)
      return MF_INVALID(ic->status, "%s: Assert's layout names no data input (%" PRId64 ")",
                        ic->op_name, layout[i]);
  return MF_OK;
}

static void format_index(strbuf *b, const mf_tensor *t, int64_t flat) {
  int64_t idx[MF_MAX_RANK];
  for (int d = t->rank - 1; d >= 0; d--) {
    idx[d] = t->dims[d] ? flat % t->dims[d] : 0;
    flat = t->dims[d] ? flat / t->dims[d] : 0;
  }
  sb_str(b, "[");
  for (int d = 0; d < t->rank; d++) {
    char buf[32];
    snprintf(buf, sizeof buf, "%s%" PRId64, d ? ", " : "", idx[d]);
    sb_str(b, buf);
  }
  sb_str(b, "]");
}

static mf_code assert_kernel(mf_kernel_ctx *ctx) {
  if (count_run(ctx) < 0) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  const mf_tensor *cond = ctx->inputs[0];
  const bool *c = cond->data;
  int64_t failed = 0, first = -1;
  for (int64_t i = 0; i < cond->size; i++)
    if (!c[i]) {
      if (first < 0) first = i;
      failed++;
    }
  if (!failed) return MF_OK;
  const mf_attr *strings = mf_attrs_find(ctx->attrs, "strings", MF_ATTR_STRING);
  const char *next_string = strings ? strings->v.s : "";
  const int64_t *layout;
  int n = mf_attr_ints(ctx->attrs, "layout", &layout);
  int64_t limit = mf_attr_int(ctx->attrs, "summarize", 3);
  strbuf b = {0};
  sb_str(&b, "assertion failed:");
  for (int i = 0; i < n; i++) {
    sb_str(&b, " [");
    if (layout[i] < 0) {
      const char *end = strchr(next_string, '\x1f');
      size_t len = end ? (size_t)(end - next_string) : strlen(next_string);
      sb_add(&b, next_string, len);
      next_string += len + (end ? 1 : 0);
    } else {
      summarize(&b, ctx->inputs[layout[i]], limit);
    }
    sb_str(&b, "]");
  }
  if (cond->rank > 0) {
    char buf[96];
    snprintf(buf, sizeof buf, " (the condition is false at %" PRId64 " of %" PRId64 " elements, the first at index ",
             failed, cond->size);
    sb_str(&b, buf);
    format_index(&b, cond, first);
    sb_str(&b, ")");
  }
  mf_code rc = b.oom ? MF_INVALID(ctx->status, "assertion failed (%s)", ctx->op->name)
                     : MF_INVALID(ctx->status, "%s", b.s);
  mf_free(b.s);
  return rc;
}

/* ---------- CheckNumerics(tensor), attr message ---------- */

static mf_code check_numerics_infer(mf_infer_ctx *ic) {
  if (!mf_dtype_is_float(ic->in_dtypes[0]))
    return MF_INVALID(ic->status,
                      "%s: check_numerics needs a float32 or float64 tensor, got %s", ic->op_name,
                      mf_dtype_name(ic->in_dtypes[0]));
  ic->out_dtypes[0] = ic->in_dtypes[0];
  ic->out_shapes[0] = ic->in_shapes[0];
  return MF_OK;
}

static mf_code check_numerics_kernel(mf_kernel_ctx *ctx) {
  if (count_run(ctx) < 0) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", ctx->op->name);
  const mf_tensor *t = ctx->inputs[0];
  bool nan = false, inf = false;
  if (t->dtype == MF_FLOAT32) {
    const float *x = t->data;
    for (int64_t i = 0; i < t->size; i++) {
      nan |= isnan(x[i]);
      inf |= isinf(x[i]);
    }
  } else {
    const double *x = t->data;
    for (int64_t i = 0; i < t->size; i++) {
      nan |= isnan(x[i]);
      inf |= isinf(x[i]);
    }
  }
  if (nan || inf) {
    const mf_attr *msg = mf_attrs_find(ctx->attrs, "message", MF_ATTR_STRING);
    return MF_INVALID(ctx->status, "%s : Tensor had %s values", msg ? msg->v.s : "",
                      nan && inf ? "Inf and NaN" : nan ? "NaN" : "Inf");
  }
  ctx->outputs[0] = mf_tensor_retain(ctx->inputs[0]);
  return MF_OK;
}

/* TensorFlow's rule: the gradient is checked too. */
static mf_code check_numerics_grad(mf_grad_ctx *gc) {
  if (!gc->grads[0].op) return MF_OK;
  const mf_attr *msg = mf_attrs_find(&gc->op->attrs, "message", MF_ATTR_STRING);
  const char *head = "Not a number (NaN) or infinity (Inf) values detected in gradient. ";
  const char *user = msg ? msg->v.s : "";
  char *text = mf_malloc(strlen(head) + strlen(user) + 1);
  if (!text) return mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
  strcpy(text, head);
  strcat(text, user);
  mf_op_desc *d = mf_grad_begin(gc, "CheckNumerics");
  if (d) {
    mf_op_desc_add_input(d, gc->grads[0]);
    mf_op_desc_set_attr_string(d, "message", text);
  }
  gc->input_grads[0] = mf_grad_finish(gc, d);
  mf_free(text);
  return gc->status->code;
}

/* ---------- LuaFunc(inputs...) ---------- */
/* attrs: fn_id (int: the host's function), Tout (ints: output dtypes),
 * shapes (ints, optional: per output its rank, -1 for unknown, then its
 * dims), has_grad (bool: the host builds the gradient). The output shapes
 * are what `shapes` says (unknown by default); only the kernel knows them. */

static mf_code luafunc_infer(mf_infer_ctx *ic) {
  const int64_t *tout, *shapes;
  int n = mf_attr_ints(ic->attrs, "Tout", &tout);
  if (n < 0) return MF_INVALID(ic->status, "%s: a LuaFunc needs the 'Tout' attribute", ic->op_name);
  if (mf_infer_set_num_outputs(ic, n)) return ic->status->code;
  int ns = mf_attr_ints(ic->attrs, "shapes", &shapes), at = 0;
  for (int i = 0; i < n; i++) {
    if (!mf_dtype_size((mf_dtype)tout[i]))
      return MF_INVALID(ic->status, "%s: output %d has an invalid dtype", ic->op_name, i);
    ic->out_dtypes[i] = (mf_dtype)tout[i];
    ic->out_shapes[i] = mf_shape_unknown();
    if (ns < 0) continue;
    if (at >= ns || shapes[at] > MF_MAX_RANK || at + 1 + (shapes[at] > 0 ? shapes[at] : 0) > ns)
      return MF_INVALID(ic->status, "%s: the 'shapes' attribute is malformed", ic->op_name);
    int rank = (int)shapes[at++];
    if (rank < 0) continue;
    ic->out_shapes[i] = mf_shape_make(rank, &shapes[at]);
    at += rank;
  }
  return MF_OK;
}

static mf_code luafunc_kernel(mf_kernel_ctx *ctx) {
  const mf_op *op = ctx->op;
  const mf_host *h = host_of(op, ctx->session);
  if (!h->call)
    return mf_status_set(ctx->status, MF_FAILED_PRECONDITION,
                         "%s: no host function runner is set for this graph: a LuaFunc op runs only "
                         "in the program that built it with tf.lua_func",
                         op->name);
  int n = ctx->num_outputs;
  mf_tensor *inline_out[MF_MAX_OUTPUTS_INLINE] = {0};
  mf_tensor **out = n <= MF_MAX_OUTPUTS_INLINE ? inline_out : mf_calloc((size_t)n, sizeof *out);
  if (!out) return mf_status_set(ctx->status, MF_RESOURCE_EXHAUSTED, "%s: out of memory", op->name);
  mf_code rc = h->call(h->ud, op, mf_attr_int(ctx->attrs, "fn_id", -1), ctx->inputs, ctx->num_inputs, out, n,
                       ctx->status);
  if (rc != MF_OK && mf_ok(ctx->status))
    mf_status_set(ctx->status, rc, "%s: the host function failed", op->name);
  for (int i = 0; rc == MF_OK && i < n; i++) {
    char have[128], want[128];
    mf_shape sh = out[i] ? mf_shape_of(out[i]) : mf_shape_unknown();
    if (!out[i])
      rc = mf_status_set(ctx->status, MF_INTERNAL, "%s: the host function gave no output %d", op->name, i);
    else if (out[i]->dtype != op->out_dtypes[i])
      rc = MF_INVALID(ctx->status, "%s: output %d of the function has dtype %s, not %s",
                      op->name, i, mf_dtype_name(out[i]->dtype), mf_dtype_name(op->out_dtypes[i]));
    else if (!mf_shape_compatible(&sh, &op->out_shapes[i]))
      rc = MF_INVALID(ctx->status,
                      "%s: output %d of the function has shape %s, not the declared %s", op->name, i,
                      mf_shape_str_tf(&sh, have, sizeof have), mf_shape_str_tf(&op->out_shapes[i], want, sizeof want));
    else if (out[i]->device != MF_CPU)
      rc = MF_INVALID(ctx->status, "%s: output %d of the function is not a CPU value",
                      op->name, i);
  }
  for (int i = 0; i < n; i++) {
    if (rc == MF_OK) {
      mf_tensor_release(ctx->outputs[i]);
      ctx->outputs[i] = out[i];
    } else {
      mf_tensor_release(out[i]);
    }
  }
  if (out != inline_out) mf_free(out);
  return rc;
}

static mf_code luafunc_grad(mf_grad_ctx *gc) {
  const mf_op *op = gc->op;
  const mf_host *h = host_of(op, NULL);
  if (!h->grad) h = &gc->graph->host;
  if (!mf_attr_bool(&op->attrs, "has_grad", false) || !h->grad) {
    mf_status_set(gc->status, MF_UNIMPLEMENTED,
                  "No gradient defined for operation '%s' (op type: %s): pass a gradient function to "
                  "tf.lua_func (its `grad` option), or wrap its inputs in tf.stop_gradient",
                  op->name, op->def->name);
    mf_status_append_origin(gc->status, op);
    return gc->status->code;
  }
  int n = op->num_outputs;
  mf_output *grads = mf_calloc((size_t)(n > 0 ? n : 1), sizeof *grads);
  if (!grads) return mf_status_set(gc->status, MF_RESOURCE_EXHAUSTED, "out of memory building a gradient");
  for (int i = 0; i < n && mf_ok(gc->status); i++) grads[i] = mf_grad_output_or_zeros(gc, i);
  if (mf_ok(gc->status)) {
    mf_code rc = h->grad(h->ud, gc->graph, op, mf_attr_int(&op->attrs, "fn_id", -1), grads, n, gc->input_grads,
                         op->num_inputs, gc->status);
    if (rc != MF_OK && mf_ok(gc->status))
      mf_status_set(gc->status, rc, "%s: the host's gradient function failed", op->name);
  }
  mf_free(grads);
  for (int k = 0; k < op->num_inputs && mf_ok(gc->status); k++) {
    mf_output g = gc->input_grads[k];
    if (!g.op) continue;
    mf_dtype want = op->inputs[k].op->out_dtypes[op->inputs[k].index];
    if (g.op->graph != gc->graph || g.index < 0 || g.index >= g.op->num_outputs)
      MF_INVALID(gc->status,
                 "%s: the gradient function gave input %d a gradient that is not a tensor of the graph",
                 op->name, k);
    else if (g.op->out_dtypes[g.index] != want)
      MF_INVALID(gc->status,
                 "%s: the gradient function gave input %d a %s gradient; the input is %s (use tf.cast)",
                 op->name, k, mf_dtype_name(g.op->out_dtypes[g.index]), mf_dtype_name(want));
  }
  if (!mf_ok(gc->status))
    for (int k = 0; k < op->num_inputs; k++) gc->input_grads[k] = (mf_output){NULL, 0};
  return gc->status->code;
}

static const mf_op_def defs[] = {
    {.name = "Print", .num_inputs = 1, .num_outputs = 1,
     .flags = MF_OP_STATEFUL | MF_OP_SETS_OUTPUTS | MF_OP_VARIADIC_INPUTS,
     .infer = print_infer, .kernel = {[MF_CPU] = print_kernel}, .grad = print_grad},
    {.name = "Assert", .num_inputs = 1, .num_outputs = 0,
     .flags = MF_OP_STATEFUL | MF_OP_VARIADIC_INPUTS | MF_OP_NOT_DIFFERENTIABLE,
     .infer = assert_infer, .kernel = {[MF_CPU] = assert_kernel}},
    {.name = "CheckNumerics", .num_inputs = 1, .num_outputs = 1, .flags = MF_OP_SETS_OUTPUTS,
     .infer = check_numerics_infer, .kernel = {[MF_CPU] = check_numerics_kernel}, .grad = check_numerics_grad},
    {.name = "LuaFunc", .num_inputs = 0, .num_outputs = -1,
     .flags = MF_OP_STATEFUL | MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_VARIADIC_INPUTS,
     .infer = luafunc_infer, .kernel = {[MF_CPU] = luafunc_kernel}, .grad = luafunc_grad},
    {.name = "LuaFuncStateless", .num_inputs = 0, .num_outputs = -1,
     .flags = MF_OP_SETS_OUTPUTS | MF_OP_DYNAMIC_OUTPUTS | MF_OP_VARIADIC_INPUTS,
     .infer = luafunc_infer, .kernel = {[MF_CPU] = luafunc_kernel}, .grad = luafunc_grad},
};
MF_OP_TABLE(mf_ops_debug, defs);
