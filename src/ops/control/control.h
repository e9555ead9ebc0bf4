/* control.h — what the control-flow op files share: function attributes,
 * effects, calling functions and stashes (call.c; function attributes are
 * described there, stashes in function_grad.c), the gradient rules of If and
 * While (function_grad.c) and a row sum of TensorArray gradients
 * (tensor_array.c). Included by call.c, cond.c, while.c, function_grad.c and
 * tensor_array.c. */
#ifndef MF_OPS_CONTROL_H
#define MF_OPS_CONTROL_H

#include "graph/op_def.h"
#include "exec/kernel_api.h"

/* ---------- call.c: function attributes ---------- */

typedef struct fn_attr {
  mf_graph *g;
  const int64_t *in;   /* per calling input: op id in g, or -1 */
  int nin;
  const int64_t *out;  /* pairs: the results */
  int nout;
  const int64_t *stash; /* pairs: the ports kept for gradients */
  int nstash;
} fn_attr;

/* Reads function attribute `f` ("then", "body", ...); false when missing. */
bool mf_fn_get(const mf_attrs *a, const char *f, fn_attr *fa);
/* Op `id` of function f's graph. */
mf_op *mf_fn_op(const fn_attr *f, int64_t id);
/* Result i of function f. */
mf_output mf_fn_result(const fn_attr *f, int i);
/* Whether op is of type `type`. */
bool mf_is_type(const mf_op *op, const char *type);
/* Whether op is an _Arg. */
bool mf_is_arg(const mf_op *op);
/* Checks a function attribute at build time: `nin` inputs, the ids and ports in range. */
mf_code mf_fn_check(mf_infer_ctx *ic, const char *f, fn_attr *fa, int nin);

/* ---------- call.c: effects ---------- */

/* Whether running op twice may give other values (or effects); depth: nesting, 0 at the top. */
bool mf_is_stateful(const mf_op *op, int depth);

/* ---------- call.c: calling functions ---------- */

/* How deep this thread is in runs of gradient functions (WhileGrad, a gradient If). */
extern _Thread_local int mf_gradient_depth;

/* A prepared call of a function: its plan and where each feed comes from.
 * Never changed once made: runs on other threads may be using it. */
typedef struct fn_call {
  mf_callable *plan;
  int nargs;
  int *arg_src;    /* feed j < nargs takes calling input arg_src[j] */
  int nextra;      /* then `nextra` feeds of given ports (a gradient's kept values) */
  int nstash;      /* stash ports fetched after the results */
  struct fn_call *replaced; /* the call this one replaced, freed with the op's state */
} fn_call;

/* The call of function f in slot `which` of the op's session state, prepared
 * once (again when nstash changes; see call.c). Owned by the op's state. */
fn_call *mf_prepare_call(mf_kernel_ctx *ctx, int which, const fn_attr *f, int nstash,
                         const int64_t *extra, int nextra, bool pure);
/* Runs a prepared call: args from the calling inputs `in`, results into `out` (see call.c for moves). */
mf_code mf_run_call(mf_kernel_ctx *ctx, fn_call *c, mf_tensor **in, const bool *move,
                    mf_tensor **extra, bool move_extra, mf_tensor **out);
/* Reads a scalar bool (a predicate a function returned) into *v; false when t is not one. */
bool mf_scalar_bool(const mf_tensor *t, bool *v);

/* ---------- call.c: stashes ---------- */

/* The values a forward op keeps for its gradient: per iteration (one for If),
 * the values of `ports` of function graph `g`. */
typedef struct stash {
  int64_t bytes;        /* the handle's value: bytes held */
  mf_graph *g;
  int nports;
  int64_t *ports;       /* pairs */
  int branch;           /* If: the branch taken */
  int niter, cap_iter;
  mf_tensor **values;   /* niter rows of nports */
} stash;

/* A new empty stash of function f's stash ports (`branch`: the If branch taken); NULL on OOM. */
stash *mf_stash_new(mf_kernel_ctx *ctx, const fn_attr *f, int branch);
/* Frees st and the values it keeps (NULL: nothing). */
void mf_stash_free(stash *st);
/* Keeps one iteration's values (new references taken). */
mf_code mf_stash_push(mf_kernel_ctx *ctx, stash *st, mf_tensor *const *values);
/* Sets output i to the handle of st (NULL: an empty handle). Consumes st. */
mf_code mf_set_stash_output(mf_kernel_ctx *ctx, int i, stash *st);
/* The stash behind a handle input, or NULL (an empty handle); an error for a non-handle. */
mf_code mf_stash_of(mf_kernel_ctx *ctx, const mf_tensor *h, stash **out);
/* Column of port (id, index) in the stash, or -1. */
int mf_stash_column(const stash *st, const int64_t *pair);

/* ---------- function_grad.c ---------- */

/* If's gradient rule: an If over the branches' gradient functions. */
mf_code mf_if_grad(mf_grad_ctx *gc);
/* While's gradient rule: WhileGrad over the body's gradient function. */
mf_code mf_while_grad(mf_grad_ctx *gc);

/* ---------- tensor_array.c ---------- */

/* o[idx[j]] += u[j] for each row j (o float, of u's dtype); WhileGrad sums TensorArray reads' rows with it. */
mf_code mf_add_rows(mf_kernel_ctx *ctx, mf_tensor *o, const mf_tensor *idx, const mf_tensor *u);

#endif
