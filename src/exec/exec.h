/* exec.h — the executor's own structures, shared by the files of exec/ only:
 * sessions (session.c) cache plans (plan.c) over a graph; the executor
 * (executor.c) runs a plan's steps in a run state (run.c) with buffers from
 * the run state's pool (pool.c); functions (function.c) are plans over the
 * subgraphs of control flow.
 *
 * A plan is built once per (feeds, fetches, targets) signature: the ops the
 * fetches need in topological order (op ids are already topological, since an
 * op's inputs exist before it), one value slot per port, and for each slot the
 * step after which it is dead. Values whose size the plan knows get bytes in
 * the run state's arena (assign.c); other dead buffers go to the run state's
 * pool and are handed to later outputs, in this run and the next ones, so a
 * steady-state run allocates nothing.
 *
 * Functions (the branches and loop bodies of control flow, see ops/control/call.c)
 * are graphs of their own that kernels run with the kernel's session: plans
 * over them are built and cached the same way (mf_function_plan), and their
 * ops keep their per-session state per (session, graph). A variable's
 * stand-in inside a function (a VariableV2 op with the int attr "_var_id")
 * has the state of the variable with that op id in the session's graph. */
#ifndef MF_EXEC_EXEC_H
#define MF_EXEC_EXEC_H

#include "core/base.h"
#include "exec/kernel_api.h"
#include "exec/worker.h"
#include "graph/graph.h"
#include "device/device.h"
#include "exec/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct mf_fused mf_fused; /* a fusion group's program (fuse.h) */

enum { MF_MAX_DEVICES = MF_MAX_CPU_DEVICES + 8 };

/* A step runs an op's kernel, or copies a value between devices (a copy
 * step: copy_from set, kernel NULL, one input). */
typedef struct mf_step {
  mf_op *op;             /* a copy step: the op whose value it copies (named in errors) */
  mf_kernel_fn kernel;
  mf_device *device;     /* where it runs and its outputs live; a copy's destination */
  mf_device *copy_from;  /* a copy step: the device of in_slots[0]; NULL for an op's step */
  int copy_in;           /* a copy step: its input slot (in_slots points here) */
  int copy_index;        /* a copy step: which output of op it copies */
  int *in_slots;         /* one per input */
  int out_slot;          /* outputs use out_slot .. out_slot + num_outputs - 1 */
  int *dead;             /* slots whose last reader is this step */
  int num_dead;
  bool infer_at_runtime;
  unsigned forwardable;  /* bit k: input k dies here, so output 0 may take its buffer */
  unsigned dying;        /* bit k: input k's slot is read by no later step and not fetched */
  int inplace_input;     /* the input whose arena bytes output 0 is planned over (assign.c), else -1 */
  bool has_fed_output;
  bool reads_variable;   /* a variable's own read, run as its kernel alone under locks[0] */
  mf_state_slot *state;  /* the op's per-session state */
  int var_id;            /* a variable's stand-in in a function: the variable's op id, whose
                            fed value it reads; else -1 */
  mf_state_slot **ref_states; /* per input: the state a ref input names; NULL without ref inputs */
  /* The locks of the variables this step reads or writes (its own state when
   * it is a variable, its ref inputs'), ascending and distinct, so that steps
   * taking several never deadlock; held around the kernel. */
  pthread_mutex_t **locks;
  int num_locks;
  /* The first step of a fusion group: the group's program, owned; the group's
   * other steps follow this one. NULL for every other step. */
  mf_fused *fused;
} mf_step;

/* Per-op state of one graph in one session: the session's graph and each
 * function graph run by its kernels have one. Slot i is
 * chunks[i / MF_STATE_CHUNK][i % MF_STATE_CHUNK]: slots never move, so steps
 * keep pointers to them while later plans add slots. */
enum { MF_STATE_CHUNK = 64, MF_STATE_LOCKS = 64 };
typedef struct mf_graph_states {
  mf_graph *graph;
  mf_state_slot **chunks;
  int num;               /* slots made: a multiple of MF_STATE_CHUNK */
} mf_graph_states;
static inline mf_state_slot *mf_state_at(const mf_graph_states *st, int i) {
  return &st->chunks[i / MF_STATE_CHUNK][i % MF_STATE_CHUNK];
}

/* A plan is read-only once built and may be run by several threads at once;
 * everything a run changes lives in its run state (mf_run). */
typedef struct mf_plan {
  mf_session *sess;
  mf_graph *graph;       /* the session's graph, or a function graph */
  mf_graph_states *states; /* the state of graph's ops */
  uint64_t hash;
  mf_output *feeds;
  int nfeeds;
  bool feeds_variables;  /* some feed replaces a variable's value (run_var_feeds) */
  int num_var_ids;       /* then: the session graph's op count when the plan was built */
  mf_output *fetches;
  int nfetches;
  mf_op **targets;
  int ntargets;
  int num_slots;
  bool off_host;         /* some step runs off CPU:0: a run ends by syncing the session's devices */
  mf_device **slot_devices; /* per slot: the device whose memory holds its value */
  mf_tensor **const_values; /* per slot: a Const's value, held for the plan's life; else NULL */
  bool *slot_fetched;
  bool *slot_read;       /* read by some step or fetched (mf_kernel_ctx.outputs_read) */
  bool *slot_const;      /* holds a Const's value from run to run: no step computes it */
  bool *fetch_moves;     /* mf_function_run hands fetch i over: no other fetch names its slot */
  bool *fetch_direct;    /* a caller's buffer for fetch i can be its producer's output:
                            the first fetch of a slot a step allocates (mf_callable_run_into) */
  int64_t *slot_offset;  /* per slot: its offset in a run state's arena, or -1 (assign.c) */
  size_t arena_bytes;
  int *feed_slots;
  mf_device **feed_devices; /* per feed: where its slot's value lives (a session's plans: CPU:0) */
  int *fetch_slots;      /* on CPU:0 (a function's: anywhere): a copy's slot when computed elsewhere */
  mf_step *steps;
  int num_steps;
  mf_scalar_program *scalar; /* a function plan over one-element values: its program (scalar.c), owned */
  int rt_cap_in, rt_cap_out; /* sizes of the run states' scratch arrays */
  /* Idle run states: `spare` is taken and given back without a lock (the
   * common case, one run at a time); more wait in `idle` under `idle_lock`. */
  _Atomic(struct mf_run *) spare;
  struct mf_run *idle;
  pthread_mutex_t idle_lock;
} mf_plan;

/* What one run of a plan changes: its value slots, its buffer pool (dead
 * values handed to later outputs, in this run and the next ones that take
 * this state) and scratch. One thread uses a run state at a time. */
typedef struct mf_run {
  mf_plan *plan;
  struct mf_run *next_idle;
  mf_tensor **slots;
  mf_tensor **pool;      /* idle buffers owned by the run state */
  int pool_len, pool_cap;
  /* The plan's arena (arena_bytes), made on first use, and per arena slot
   * the header viewing its bytes; the run state holds one reference to each.
   * A header some op kept past its value's life pins its bytes (pins:
   * [lo, hi) byte ranges of the arena) for the rest of the run, and at the
   * next run the arena is left to its holders and a new one made. */
  mf_tensor *arena;
  mf_tensor **views;
  size_t (*pins)[2];
  int num_pins;
  mf_tensor **last_fetched; /* our reference to the last results, reclaimed when the caller drops them */
  mf_dtype *rt_dtypes;   /* runtime shape inference scratch */
  mf_shape *rt_in_shapes, *rt_out_shapes;
  mf_tensor **rt_values; /* the inputs whose values inference reads (value_inputs), else NULL */
  mf_tensor **fed_keep;  /* per step: fed values of its outputs, set aside (rt_cap_out entries) */
  /* The values fed for variables in the run this one belongs to (by op id of
   * the session's graph; NULL when none), which their stand-ins in functions
   * read: var_feeds_by_id when this plan feeds variables, a function's caller's otherwise. */
  mf_tensor *const *var_feeds;
  int num_var_feeds;
  mf_tensor **var_feeds_by_id; /* num_var_ids entries when the plan feeds variables */
  void *scratch;         /* mf_kernel_scratch's memory */
  size_t scratch_bytes;
} mf_run;

struct mf_callable { mf_plan plan; };

struct mf_session {
  mf_graph *graph;
  _Atomic bool closed;
  /* Guards the plan caches, the function states list, the placement log and
   * making op state (mf_kernel_state). Plans are built under it. */
  pthread_mutex_t lock;
  pthread_mutex_t state_locks[MF_STATE_LOCKS]; /* variables' values, striped (mf_state_lock) */
  mf_callable **plans;
  int num_plans, cap_plans;
  mf_graph_states states;     /* of the session's graph */
  mf_graph_states **fn_states; /* of function graphs, made when first run */
  int num_fn_states, cap_fn_states;
  mf_callable **fn_plans;     /* plans over function graphs */
  int num_fn_plans, cap_fn_plans;
  mf_device *devices[MF_MAX_DEVICES]; /* owned: CPU:0 (the host) first, then the other CPUs */
  int num_devices;
  int num_threads;         /* of its thread pool, started by the first large kernel */
  _Atomic(mf_threadpool *) threads;
  /* The thread of mf_callable_run_async (async.c), NULL until its first job
   * (started under `lock`). Every other use of the session first waits for
   * its jobs (mf_worker_drain), so they stay in order with the caller's runs. */
  _Atomic(mf_worker *) worker;
  unsigned options;           /* MF_ALLOW_SOFT_PLACEMENT | MF_LOG_DEVICE_PLACEMENT */
  bool fuse_elementwise;      /* plans fuse elementwise ops (fuse.h); else each op is a step */
  /* Placement lines of plans built since the last mf_session_take_placement_log,
   * and the text that call last handed out. */
  char *log;
  size_t log_len, log_cap;
  char *log_taken;
};


/* The number of inputs a step reads: an op's, or a copy's one. */
static inline int mf_step_num_inputs(const mf_step *st) { return st->copy_from ? 1 : st->op->num_inputs; }
/* Outputs a step writes: an op's, or a copy's one. */
static inline int mf_step_num_outputs(const mf_step *st) { return st->copy_from ? 1 : st->op->num_outputs; }

/* calloc of count elements (at least one) into ptr; false when out of memory. */
#define PLAN_ALLOC(ptr, count) \
  ((ptr) = mf_calloc((size_t)((count) > 0 ? (count) : 1), sizeof *(ptr)), (ptr) != NULL)

/* A variable's stand-in in a function names the variable by "_var_id". */
static inline bool mf_var_id_of(const mf_op *op, int64_t *id) { return mf_op_attr_int(op, "_var_id", id); }

/* --- state.c --- */
/* Makes the slots of every op states->graph has now. */
mf_code mf_states_grow(mf_graph_states *states, mf_status *s);
/* Frees every op's state and the slots. */
void mf_states_clear(mf_graph_states *states);
/* The lock guarding the value in slot (a variable's). */
pthread_mutex_t *mf_state_lock(mf_session *sess, const mf_state_slot *slot);

/* --- run.c --- */
/* A run state of p: an idle one, else a new one (NULL with s set when out of memory). */
mf_run *mf_run_acquire(mf_plan *p, mf_status *s);
/* Gives r back to its plan for a later run; its slots must be released. */
void mf_run_return(mf_run *r);
/* Frees r with its buffers. */
void mf_run_free(mf_run *r);
/* Frees the plan's idle run states: all of its buffers (session close, plan free). */
void mf_plan_drop_runs(mf_plan *p);

/* --- assign.c --- */
/* Arena offsets for p's slots and p's arena size, from each slot's last
 * reading step (last_use), which it extends to the last reader of any op
 * output that may hand the value on; sets the steps' inplace_input. */
mf_code mf_plan_assign_buffers(mf_plan *p, int *last_use, mf_status *s);

/* --- pool.c --- */
/* Gives t back to r's pool (or releases it when not reusable); NULL is fine. */
void mf_pool_put(mf_run *r, mf_tensor *t);
/* Pins the arena bytes of t (when it views r's arena) for the rest of the
 * run if more than `references` references hold it: some op kept it. */
void mf_pool_pin_if_held(mf_run *r, const mf_tensor *t, int references);
/* Slot's arena header, shaped as asked and with a new reference, when the
 * plan gave the slot arena bytes that fit and are free; else NULL. */
mf_tensor *mf_pool_arena_output(mf_run *r, int slot, mf_dtype dtype, int rank, const int64_t *dims);
/* A buffer on device d from r's pool that fits, else one from d's allocator. */
mf_tensor *mf_pool_alloc(mf_run *r, mf_device *d, mf_dtype dtype, int rank, const int64_t *dims, mf_status *s);

/* --- scalar.c --- */
/* Sets p->scalar when p (built, fused, with liveness) qualifies; errors only when out of memory. */
mf_code mf_plan_scalar(mf_plan *p, mf_status *s);
void mf_scalar_program_free(mf_scalar_program *sp);

/* --- plan.c --- */
/* Fills p's steps and slots from its graph, feeds, fetches and targets. */
mf_code mf_plan_build(mf_plan *p, mf_status *s);
void mf_plan_free(mf_plan *p);

/* --- executor.c --- */
/* Appends the op's name and the line that created it to an error about it; returns s->code. */
mf_code mf_node_context(mf_status *s, const mf_op *op);
/* Runs the steps over the fed slots of r; stops at the first error. */
void mf_run_steps(mf_run *r, mf_status *s);
/* After a run: every value but the constants goes back to the pool. */
void mf_run_release_slots(mf_run *r);
/* mf_callable_run without waiting for the session's worker: the worker's own entry. */
mf_code mf_callable_run_now(mf_callable *c, mf_tensor *const *feed_values, mf_tensor **fetch_values,
                            mf_status *s);

/* --- session.c --- */
/* The session's cached plan over g (its graph or a function graph) for this
 * signature, built on first use; safe from several threads. */
mf_callable *mf_session_plan(mf_session *sess, mf_graph *g, const mf_output *feeds, int nfeeds,
                             const mf_output *fetches, int nfetches, mf_op *const *targets, int ntargets,
                             mf_status *s);
/* The session's thread pool, started on first use; NULL when it has one thread. */
mf_threadpool *mf_session_threads(mf_session *sess);
/* Appends a formatted line to the session's placement log; false when out of memory. */
bool mf_session_log_line(mf_session *sess, const char *fmt, ...) MF_PRINTF(2, 3);
mf_code mf_session_closed_error(mf_status *s);
/* The device of sess whose memory holds t (CPU:0 for host memory). */
mf_device *mf_session_device_of(mf_session *sess, const mf_tensor *t);

#endif
