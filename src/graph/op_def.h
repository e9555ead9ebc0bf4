/* op_def.h — what one op registration is: shape inference, kernels per
 * device, gradient rule and flags, and the contexts each of them gets
 * (registry.c lists the registrations). */
#ifndef MF_GRAPH_OP_DEF_H
#define MF_GRAPH_OP_DEF_H

#include "core/base.h"
#include "graph/attrs.h"

#include <stdatomic.h>

typedef struct mf_op_def mf_op_def;

/* Shape and dtype inference. Runs when the op is built (static shapes, some
 * dims unknown) and again at run time when any static output shape is not
 * fully defined (then every input shape is concrete). in_values[k] is set
 * only for the inputs the def's value_inputs names: at build time when the
 * input is constant, at run time always; else NULL. It checks inputs and
 * attributes and fills out_dtypes/out_shapes. */
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
 * the session, freed with `free` when it closes. Runs on several threads
 * share it: ptr is atomic, made once (mf_kernel_state), and a variable's
 * value changes only under its lock, which the executor holds around the
 * kernels of the variable and of the ops with ref inputs to it. */
typedef struct mf_state_slot { _Atomic(void *) ptr; void (*free)(void *); } mf_state_slot;

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
  mf_state_slot *const *ref_states; /* per input: the state a ref input names, else NULL */
  struct mf_run *run;        /* the run this kernel is part of (exec/): for the kernel API */
  struct mf_device *device;  /* where it runs (device/device.h): its inputs and outputs live
                                there, host-memory inputs (mf_def_host_input) on the host */
  /* Bit k: input k is read by no later op of the run and not fetched. When
   * its refcount is 1 as well (and no other input is the same value), the
   * kernel may take its buffer over: write it in place and forward it. */
  unsigned dying_inputs;
  const bool *outputs_read;  /* outputs_read[i]: some later op or a fetch reads output i */
} mf_kernel_ctx;
typedef mf_code (*mf_kernel_fn)(mf_kernel_ctx *ctx);

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
  MF_OP_CONSTANT = 1 << 6,           /* output 0 is the tensor attr "value", known when built:
                                        plans hold it in a slot with no step (Const) */
  MF_OP_VARIABLE = 1 << 7,           /* a variable: its per-session state is its value, which
                                        ref inputs name and a feed may replace (VariableV2) */
  MF_OP_INTERNAL = 1 << 8,           /* built only by the engine (gradient rules, control
                                        flow), never by a user: no Lua wrapper (ReluGrad) */
  MF_OP_STRINGS = 1 << 9,            /* takes or makes string values (core/tstring.h); an op
                                        without it given or making one is an error when built.
                                        Its kernel sets string outputs itself (with
                                        MF_OP_SETS_OUTPUTS): they are built whole */
  MF_OP_REPLACED_BY_FEED = 1 << 10,  /* fed, the op is not run at all: a control dependency on it
                                        is met by the feed, as TensorFlow rewires a fed
                                        Placeholder's control edges (Placeholder) */
  MF_OP_STARTS_EARLY = 1 << 11,      /* an asynchronous start (MpiAllreduceStart): scheduled right
                                        after the last step it needs, not in creation order, so
                                        that the steps after it overlap the work it started */
  MF_OP_COMPLEX = 1 << 12,           /* takes or makes complex values (complex64, complex128);
                                        an op without it given or making one is an error when
                                        built, as its kernels have no loops for them */
};

/* Build-time evaluation (TensorFlow's constant_value_as_shape): what output
 * `index` of op is known to hold before anything runs, read through ops that
 * compute shape vectors. depth bounds the recursion; the helpers below call
 * the hooks of the ops they read through. */
typedef struct mf_build_value {
  /* Output index read as a shape vector: unknown dims -1; rank -1 when unknown. */
  mf_shape (*shape)(const mf_op *op, int index, int depth);
  /* Output index read as an integer scalar (one dim of a shape vector); -1 when unknown. */
  int64_t (*scalar)(const mf_op *op, int index, int depth);
} mf_build_value;
mf_shape mf_port_shape_value(mf_output o, int depth);
int64_t mf_port_scalar_value(mf_output o, int depth);

/* Elementwise ops: output element i is a function of input element i (of
 * each input, broadcast NumPy's way), computed by one element loop. The
 * loops (kernels/elementwise.h writes them) take a scalar parameter alpha.
 * mf_map_fn: y[i] = f(x[i]) over n elements. mf_zip_fn: y[i] = f(a[i], b[i]),
 * an operand that does not step repeating its first element; returns whether
 * some element has no result (integer division by zero). */
typedef void (*mf_map_fn)(const void *x, void *y, int64_t n, double alpha);
typedef bool (*mf_zip_fn)(const void *a, bool a_steps, const void *b, bool b_steps, void *y, int64_t n,
                          double alpha);
/* The loop an elementwise op's kernel runs, for the executor to run it on
 * pieces of its elements, fused with its neighbours into one pass over the
 * data (exec/fuse.c). */
typedef struct mf_element_loop {
  mf_map_fn map;         /* an op of one input, or */
  mf_zip_fn zip;         /* an op of two inputs (broadcasting) */
  double alpha;
  const char *fail_msg;  /* zip: what an element with no result means (static text), else NULL */
} mf_element_loop;
/* Fills *loop for an op with these attrs whose input 0 has dtype x_dtype; false when the
 * op's kernel would not run one such loop (then it is no elementwise op for the executor). */
typedef bool (*mf_element_loop_fn)(const mf_attrs *attrs, mf_dtype x_dtype, mf_element_loop *loop);

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
  /* Bit k: shape inference reads input k's value (Reshape's shape, Fill's
   * dims, OneHot's depth): in_values[k] and mf_infer_shape_value(ic, k) give
   * it, at build time when the graph knows it and at run time always; for
   * other inputs they give nothing. The executor keeps these inputs in host
   * memory, where inference and the kernel read them (TensorFlow's HostMemory). */
  unsigned value_inputs;
  /* Bit k: the kernel reads input k on the host as a parameter (If's
   * predicate, a TensorArray's index and metadata) though inference does not:
   * kept in host memory like value_inputs. */
  unsigned host_inputs;
  mf_infer_fn infer;
  mf_kernel_fn kernel[MF_NUM_DEVICE_TYPES];
  /* The dtypes kernel[MF_CUDA] runs for (bit 1u << dtype): placement puts
   * the op on a GPU only when every input and output dtype (host-memory
   * inputs excepted) is in it. 0 with a GPU kernel: no dtype restriction
   * (ops that never read their data, such as Identity). */
  unsigned cuda_dtypes;
  mf_grad_fn grad;
  mf_build_value build_value; /* optional: ops that shape vectors are computed with */
  /* Optional: an elementwise op's loop. Its kernel must compute exactly what
   * the loop computes over the whole (broadcast) output, and its inference
   * give the output the broadcast shape of its inputs. */
  mf_element_loop_fn element_loop;
};

static inline bool mf_def_reads_value(const mf_op_def *def, int k) {
  return k < 32 && (def->value_inputs >> k & 1u);
}
/* Inputs kept in host memory: those whose values inference or the kernel read. */
static inline bool mf_def_host_input(const mf_op_def *def, int k) {
  return k < 32 && ((def->value_inputs | def->host_inputs) >> k & 1u);
}

const mf_op_def *mf_registry_lookup(const char *name);

/* Each op family file of ops/ exports one table; ops/registry.c lists the tables. */
typedef struct mf_op_table { const mf_op_def *defs; size_t count; } mf_op_table;
#define MF_OP_TABLE(ident, arr) const mf_op_table ident = {arr, MF_ARRAY_LEN(arr)}

#endif
