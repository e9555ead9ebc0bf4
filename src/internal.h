/* internal.h — structures shared by the engine's files. Not installed. */
#ifndef MF_INTERNAL_H
#define MF_INTERNAL_H

#include "moonflow.h"

#include <stdarg.h>
#include <stdatomic.h>

#define MF_UNUSED(x) ((void)(x))
#define MF_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* --- status --- */
struct mf_status {
  mf_code code;
  char msg[1024];
};
#if defined(__GNUC__)
#define MF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MF_PRINTF(a, b)
#endif
/* Sets code and a printf-formatted message; returns code. */
mf_code mf_status_set(mf_status *s, mf_code code, const char *fmt, ...) MF_PRINTF(3, 4);
/* Appends to the message of an error status. */
void mf_status_append(mf_status *s, const char *fmt, ...) MF_PRINTF(2, 3);
static inline bool mf_ok(const mf_status *s) { return s->code == MF_OK; }

/* --- memory: the one allocator hook --- */
void *mf_malloc(size_t n);               /* NULL on failure */
void *mf_calloc(size_t count, size_t n);
void *mf_realloc(void *p, size_t n);
void mf_free(void *p);
char *mf_strdup(const char *s);
void *mf_aligned_alloc(size_t n);        /* MF_ALIGNMENT-aligned, uninitialized */
void mf_aligned_free(void *p);

/* --- values --- */
struct mf_tensor {
  atomic_int refcount;
  mf_dtype dtype;
  mf_device_type device;
  int rank;
  int64_t dims[MF_MAX_RANK];
  int64_t size;          /* number of elements */
  void *data;
  size_t capacity;       /* bytes at data when owned */
  bool owned;            /* data came from mf_aligned_alloc (not a view, not wrapped) */
  mf_tensor *base;       /* a view keeps its base alive */
  void (*release)(void *data, void *arg);
  void *release_arg;
};
/* Like mf_tensor_new but leaves the data uninitialized: for kernel outputs,
 * which write every element anyway. */
mf_tensor *mf_tensor_new_uninit(mf_dtype dtype, int rank, const int64_t *dims, mf_status *s);
/* A new header sharing t's data with another shape of the same size. */
mf_tensor *mf_tensor_view(mf_tensor *t, int rank, const int64_t *dims, mf_status *s);
/* Reshapes a buffer the caller owns alone (refcount 1) in place; false when
 * its capacity is too small for the new shape. Used for buffer reuse. */
bool mf_tensor_reshape_owned(mf_tensor *t, mf_dtype dtype, int rank, const int64_t *dims);
int64_t mf_shape_num_elements(int rank, const int64_t *dims); /* -1 if any dim unknown */

/* --- shapes --- */
static inline mf_shape mf_shape_unknown(void) { mf_shape s = {.rank = -1}; return s; }
static inline mf_shape mf_shape_scalar(void) { mf_shape s = {.rank = 0}; return s; }
mf_shape mf_shape_make(int rank, const int64_t *dims);
mf_shape mf_shape_of(const mf_tensor *t);
bool mf_shape_fully_defined(const mf_shape *s);
bool mf_shape_compatible(const mf_shape *a, const mf_shape *b);
/* Writes "[2,-1]" or "<unknown>" into buf; returns buf. */
char *mf_shape_str(const mf_shape *s, char *buf, size_t n);
/* Writes "(2, ?)" as TensorFlow prints shapes; returns buf. */
char *mf_shape_str_tf(const mf_shape *s, char *buf, size_t n);
/* NumPy broadcasting of static shapes; an error names the op. */
mf_code mf_broadcast_shape(const char *op, const mf_shape *a, const mf_shape *b,
                           mf_shape *out, mf_status *s);
/* Normalizes an axis in [-rank, rank) to [0, rank); error names op. */
mf_code mf_normalize_axis(const char *op, int64_t axis, int rank, int *out, mf_status *s);

/* --- attributes --- */
typedef struct mf_attr {
  char *name;
  mf_attr_kind kind;
  union {
    int64_t i;
    double f;
    bool b;
    mf_dtype type;
    struct { int64_t *v; int n; } ints;
    mf_shape shape;
    char *s;
    mf_tensor *tensor;
    mf_graph *graph;     /* function-valued attribute: a subgraph */
  } v;
} mf_attr;

typedef struct mf_attrs { mf_attr *items; int n; } mf_attrs;
const mf_attr *mf_attrs_find(const mf_attrs *a, const char *name, mf_attr_kind kind);
/* Convenience getters with defaults, for shape functions and kernels. */
int64_t mf_attr_int(const mf_attrs *a, const char *name, int64_t dflt);
double mf_attr_float(const mf_attrs *a, const char *name, double dflt);
bool mf_attr_bool(const mf_attrs *a, const char *name, bool dflt);
mf_dtype mf_attr_type(const mf_attrs *a, const char *name, mf_dtype dflt);
/* Returns the count and sets *out, or -1 when absent. */
int mf_attr_ints(const mf_attrs *a, const char *name, const int64_t **out);

/* --- op registry --- */
typedef struct mf_op_def mf_op_def;

/* Shape and dtype inference. Runs when the op is built (static shapes, some
 * dims unknown; in_values holds the values of constant inputs, else NULL) and
 * again at run time when any static output shape is not fully defined (then
 * every input shape is concrete and every in_values entry is set). It checks
 * inputs and attributes and fills out_dtypes/out_shapes. */
typedef struct mf_infer_ctx {
  const char *op_name;
  const mf_op_def *def;
  const mf_attrs *attrs;
  int num_inputs;
  const mf_dtype *in_dtypes;
  const mf_shape *in_shapes;
  mf_tensor *const *in_values;
  const mf_output *in_ports; /* the inputs' producers at build time; NULL at run time */
  int num_outputs;           /* preset to def->num_outputs; set it for variadic outputs */
  mf_dtype *out_dtypes;      /* room for MF_MAX_OUTPUTS unless mf_infer_reserve grew it */
  mf_shape *out_shapes;
  mf_status *status;
  bool runtime;              /* true when called by the executor */
} mf_infer_ctx;
typedef mf_code (*mf_infer_fn)(mf_infer_ctx *ic);
/* The value of shape-vector input i as far as the graph tells before running
 * (TensorFlow's constant_value_as_shape): exact from a value; at build time it
 * also reads through Shape, Pack of scalars, and Unpack / StridedSlice picking
 * one dim of those. Unknown dims are -1; rank -1 when the length is unknown. */
mf_shape mf_infer_shape_value(const mf_infer_ctx *ic, int i);
/* Whether build-time inference could read (some of) the value of o: a
 * constant, or a shape vector it evaluates. A feed replacing such a value
 * voids what was inferred from it; a Placeholder's or a function argument's
 * never was. */
bool mf_port_value_read_at_build(mf_output o);
enum { MF_MAX_OUTPUTS_INLINE = 8 };
/* Makes room for n outputs (variadic ops such as Unstack); sets num_outputs. */
mf_code mf_infer_set_num_outputs(mf_infer_ctx *ic, int n);

/* Per-session state of one op (a variable's value, an RNG counter): owned by
 * the session, freed with `free` when it closes. */
typedef struct mf_state_slot { void *ptr; void (*free)(void *); } mf_state_slot;

typedef struct mf_kernel_ctx {
  const mf_op *op;
  const mf_attrs *attrs;
  int num_inputs;
  mf_tensor **inputs;
  int num_outputs;
  mf_tensor **outputs;       /* preallocated unless the def sets MF_OP_SETS_OUTPUTS */
  const mf_shape *out_shapes; /* concrete output shapes from shape inference, also for
                                 MF_OP_SETS_OUTPUTS kernels (e.g. a reshaping view) */
  mf_status *status;
  mf_session *session;
  mf_state_slot *state;      /* this op's per-session state */
  struct mf_plan *plan;      /* for mf_kernel_alloc_output */
  /* Bit k: input k is read by no later op of the run and not fetched. When
   * its refcount is 1 as well (and no other input is the same value), the
   * kernel may take its buffer over: write it in place and forward it. */
  unsigned dying_inputs;
  const bool *outputs_read;  /* outputs_read[i]: some later op or a fetch reads output i */
} mf_kernel_ctx;
typedef mf_code (*mf_kernel_fn)(mf_kernel_ctx *ctx);
/* For a ref input k (see mf_op_def.ref_inputs): the state of the op producing
 * it, e.g. the variable an Assign writes. */
mf_state_slot *mf_kernel_ref_state(mf_kernel_ctx *ctx, int k);
/* For a ref input k naming a variable that the kernel updates in place: the
 * variable's value, writable (copied first when shared: the copy-on-write rule
 * of ops_state.c). NULL with the status set when the variable has no value
 * ("Attempting to use uninitialized value ...") or memory runs out. */
mf_tensor *mf_kernel_ref_writable(mf_kernel_ctx *ctx, int k);
/* For MF_OP_SETS_OUTPUTS kernels: a buffer for output i, recycled when possible. */
mf_tensor *mf_kernel_alloc_output(mf_kernel_ctx *ctx, int i, mf_dtype dtype, int rank,
                                  const int64_t *dims);

/* Functions: graphs that kernels run with their own session (the branches
 * and loop bodies of control flow). A plan over function graph `fn` feeds
 * `feeds`, fetches `fetches` and also runs `targets`; it is cached per session
 * and signature, owned by the session. NULL with ctx->status set on error. */
mf_callable *mf_function_plan(mf_kernel_ctx *ctx, mf_graph *fn, const mf_output *feeds, int nfeeds,
                              const mf_output *fetches, int nfetches, mf_op *const *targets,
                              int ntargets);
/* Runs it. Takes over the references in feed_values (one per feed; the
 * caller gives them up, so a value nobody else holds may be updated in
 * place) and stores new references in fetch_values. An error names the
 * failing op of the function. */
mf_code mf_function_run(mf_callable *c, mf_tensor **feed_values, mf_tensor **fetch_values, mf_status *s);
/* Gives a value back to the plan's buffer pool (a result the caller is done with). */
void mf_function_recycle(mf_callable *c, mf_tensor *t);

/* Gradient rules build graph ops. A rule reads the op and the gradients of its
 * outputs and sets the gradients of its inputs; it may leave an input's
 * gradient unset (no gradient flows there). Broadcasting is undone by the
 * driver: a rule may return a gradient of the output's shape for an input
 * that was broadcast. Integer inputs are never asked for. */
typedef struct mf_grad_ctx {
  mf_graph *graph;
  const mf_op *op;
  const mf_output *grads;     /* d/d(output i); .op NULL when output i got none */
  mf_output *input_grads;     /* set by the rule, one per input */
  const char *origin;
  mf_status *status;          /* the first failure sticks; later builder calls do nothing */
} mf_grad_ctx;
typedef mf_code (*mf_grad_fn)(mf_grad_ctx *gc);


enum mf_op_flags {
  MF_OP_STATEFUL = 1 << 0,           /* never pruned as a duplicate, runs once per run */
  MF_OP_SETS_OUTPUTS = 1 << 1,       /* kernel sets ctx->outputs itself (forwarding, views) */
  MF_OP_NOT_DIFFERENTIABLE = 1 << 2, /* declared so on purpose: gradients stop here */
  MF_OP_VARIADIC_INPUTS = 1 << 3,    /* num_inputs is a minimum */
  MF_OP_FORWARDS_INPUT = 1 << 4,     /* elementwise: output 0 may take over the buffer of an
                                        input of its shape and dtype that dies at this op */
  MF_OP_DYNAMIC_OUTPUTS = 1 << 5,    /* only the kernel knows its output shapes (If, While,
                                        Where): no run-time inference; with SETS_OUTPUTS */
};

struct mf_op_def {
  const char *name;
  int num_inputs;
  int num_outputs;           /* -1: set by infer */
  unsigned flags;
  /* Bit k: input k is a reference to its producer's state (the variable an
   * Assign writes), not a value. The producer does not run for it and the
   * kernel's inputs[k] is NULL; mf_kernel_ref_state reaches the state, which
   * holds the variable's value (an mf_tensor*, NULL until initialized). */
  unsigned ref_inputs;
  mf_infer_fn infer;
  mf_kernel_fn kernel[MF_NUM_DEVICE_TYPES];
  mf_grad_fn grad;
};

const mf_op_def *mf_registry_lookup(const char *name);

/* Each ops_*.c file exports one table; registry.c lists the tables. */
typedef struct mf_op_table { const mf_op_def *defs; size_t count; } mf_op_table;
#define MF_OP_TABLE(ident, arr) const mf_op_table ident = {arr, MF_ARRAY_LEN(arr)}

/* The per-session state of op, in the session's graph or in a function graph
 * the session has run; NULL while it has none (ops_debug.c reads run counts). */
mf_state_slot *mf_session_op_state(mf_session *sess, const mf_op *op);
/* The graph a session runs (its functions' ops fall back to its host). */
mf_graph *mf_session_graph(const mf_session *sess);

/* --- asynchronous runs (async.c) --- */
/* A session's worker thread and its queue of jobs (mf_async). */
typedef struct mf_worker mf_worker;
/* Returns once w has no job queued or running; NULL is fine. */
void mf_worker_drain(mf_worker *w);
/* Cancels the jobs not started yet (they fail with CANCELLED), waits for the
 * running one, ends the thread and frees w; NULL is fine. */
void mf_worker_free(mf_worker *w);
/* What async.c needs of session.c. */
mf_session *mf_callable_session(const mf_callable *c);
int mf_callable_num_feeds(const mf_callable *c);
int mf_callable_num_fetches(const mf_callable *c);
bool mf_session_is_closed(const mf_session *sess);
mf_worker **mf_session_worker(mf_session *sess);  /* the session's worker slot (NULL until started) */
/* mf_callable_run without waiting for the session's worker: the worker's own entry. */
mf_code mf_callable_run_now(mf_callable *c, mf_tensor *const *feed_values, mf_tensor **fetch_values,
                            mf_status *s);

/* Frees an op description without building it. */
void mf_op_desc_discard(mf_op_desc *d);

/* --- graphs and ops --- */
typedef struct mf_strmap mf_strmap;  /* string -> pointer/int hash map */
mf_strmap *mf_strmap_new(void);
void mf_strmap_free(mf_strmap *m);
void **mf_strmap_slot(mf_strmap *m, const char *key, bool create); /* NULL if absent and !create */

struct mf_op {
  mf_graph *graph;
  int id;
  char *name;
  char *origin;
  char *device;
  const mf_op_def *def;
  mf_attrs attrs;
  int num_inputs;
  mf_output *inputs;
  int num_control;
  mf_op **control_inputs;
  int num_outputs;
  mf_dtype *out_dtypes;
  mf_shape *out_shapes;
  bool outputs_fully_defined; /* inference gave every output a fully defined shape */
  /* Per-op ref inputs, from the ints attr "_ref_inputs" (control flow takes
   * the variables its functions use as refs); NULL: the def's ref_inputs. */
  bool *ref_mask;
};

struct mf_graph {
  atomic_int refcount;
  mf_op **ops;
  int num_ops, cap_ops;
  mf_strmap *names;          /* op name -> op */
  mf_strmap *name_counts;    /* base name -> next suffix (TensorFlow's unique_name) */
  char **scopes;             /* name scope stack; each entry "a/b/" */
  int num_scopes, cap_scopes;
  bool finalized;
  int64_t seed;
  mf_host host;              /* callbacks of LuaFunc and Print ops (ops_debug.c) */
};

/* Builders for rules. They take and return ports; a port whose .op is NULL
 * (an earlier failure) makes them return one too. */
mf_op_desc *mf_grad_begin(mf_grad_ctx *gc, const char *type);  /* NULL after a failure */
mf_output mf_grad_finish(mf_grad_ctx *gc, mf_op_desc *d);      /* output 0; discards d after a failure */
mf_output mf_grad_op1(mf_grad_ctx *gc, const char *type, mf_output a);
mf_output mf_grad_op2(mf_grad_ctx *gc, const char *type, mf_output a, mf_output b);
mf_output mf_grad_scalar(mf_grad_ctx *gc, mf_dtype dtype, double v);   /* a Const */
mf_output mf_grad_cast(mf_grad_ctx *gc, mf_output v, mf_dtype dtype);  /* v cast to dtype */
mf_output mf_grad_output_or_zeros(mf_grad_ctx *gc, int i);  /* grads[i], or zeros like output i */
static inline mf_output mf_op_in(const mf_op *op, int i) { return op->inputs[i]; }
static inline bool mf_op_is_ref_input(const mf_op *op, int k) {
  if (op->ref_mask) return op->ref_mask[k];
  return k < 32 && (op->def->ref_inputs >> k & 1u);
}
/* Sets an ints attribute of an existing op (control flow records there what
 * its gradient needs kept). Attributes may change after plans were built:
 * kernels read them when they run. */
mf_code mf_op_set_attr_ints(mf_op *op, const char *name, const int64_t *v, int n, mf_status *s);
static inline mf_output mf_op_out(const mf_op *op, int i) { mf_output o = {(mf_op *)op, i}; return o; }

/* Sets the error "<op>: ... (created at <origin>)" style suffix. */
void mf_status_append_origin(mf_status *s, const mf_op *op);

/* --- devices (device.c) --- */
enum { MF_DEVICE_NAME_MAX = 256 };
/* A parsed device string: "" or -1 for fields it does not name. */
typedef struct mf_device_spec {
  char job[64];
  int replica, task;
  char type[32];         /* upper case: "CPU", "GPU" */
  int index;
} mf_device_spec;
/* Parses a TensorFlow device string (NULL or "": names nothing). */
mf_code mf_device_spec_parse(const char *str, mf_device_spec *d, mf_status *s);
/* Sets in outer every field that inner names. */
void mf_device_spec_merge(mf_device_spec *outer, const mf_device_spec *inner);
/* The normal form ("/job:localhost/device:GPU:1") into buf; returns its length. */
size_t mf_device_spec_str(const mf_device_spec *d, char *buf, size_t cap);
/* Where an op runs. */
typedef struct mf_placement {
  mf_device_type type;
  int index;
  bool soft;             /* the requested device was unavailable: soft placement chose CPU:0 */
  char requested[MF_DEVICE_NAME_MAX]; /* the op's device in normal form; "" when it names none */
} mf_placement;
/* Places op by its device string: the named device when present with a kernel
 * for the op, else CPU:0 when allow_soft, else an error in TensorFlow's words. */
mf_code mf_device_place(const mf_op *op, bool allow_soft, mf_placement *out, mf_status *s);
/* "/device:CPU:0" for a placement. */
void mf_device_placement_name(const mf_placement *p, char *buf, size_t cap);

/* --- helpers for kernels --- */
/* Element loops dispatch on dtype with these X-macros. */
#define MF_FOR_NUMERIC_TYPES(X) \
  X(MF_FLOAT32, float) X(MF_FLOAT64, double) X(MF_INT32, int32_t) \
  X(MF_INT64, int64_t) X(MF_UINT8, uint8_t)
#define MF_FOR_ALL_TYPES(X) MF_FOR_NUMERIC_TYPES(X) X(MF_BOOL, bool)

static inline bool mf_dtype_is_float(mf_dtype t) { return t == MF_FLOAT32 || t == MF_FLOAT64; }
static inline bool mf_dtype_is_integer(mf_dtype t) {
  return t == MF_INT32 || t == MF_INT64 || t == MF_UINT8;
}
/* Reads element i of any dtype as double / writes a double into any dtype. */
double mf_load_double(const void *data, mf_dtype t, int64_t i);
int64_t mf_load_int64(const void *data, mf_dtype t, int64_t i);
void mf_store_double(void *data, mf_dtype t, int64_t i, double v);

#endif
