/* exec.h — the executor's own structures, shared by the files of exec/ only:
 * sessions (session.c) cache plans (plan.c) over a graph; the executor
 * (executor.c) runs a plan's steps with buffers from its pool (pool.c);
 * functions (function.c) are plans over the subgraphs of control flow.
 *
 * A plan is built once per (feeds, fetches, targets) signature: the ops the
 * fetches need in topological order (op ids are already topological, since an
 * op's inputs exist before it), one value slot per port, and for each slot the
 * step after which it is dead. Dead buffers go to the plan's pool and are
 * handed to later outputs, in this run and the next ones, so a steady-state
 * run allocates nothing.
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

typedef struct mf_step {
  mf_op *op;
  mf_kernel_fn kernel;
  int *in_slots;         /* one per input */
  int out_slot;          /* outputs use out_slot .. out_slot + num_outputs - 1 */
  int *dead;             /* slots whose last reader is this step */
  int num_dead;
  bool infer_at_runtime;
  unsigned forwardable;  /* bit k: input k dies here, so output 0 may take its buffer */
  unsigned dying;        /* bit k: input k's slot is read by no later step and not fetched */
  bool has_fed_output;
  struct mf_graph_states *state_holder; /* the op's state: state_holder->slots[state_index] */
  int state_index;
  bool stand_in;         /* a variable's stand-in in a function: reads a fed value of the variable */
} mf_step;

/* Per-op state of one graph in one session: the session's graph and each
 * function graph run by its kernels have one. */
typedef struct mf_graph_states {
  mf_graph *graph;
  mf_state_slot *slots;  /* per op id: variable values, RNG counters */
  int num;
} mf_graph_states;

typedef struct mf_plan {
  mf_session *sess;
  mf_graph *graph;       /* the session's graph, or a function graph */
  mf_graph_states *states; /* the state of graph's ops */
  uint64_t hash;
  mf_output *feeds;
  int nfeeds;
  bool feeds_variables;  /* some feed replaces a variable's value (set_var_feeds) */
  mf_output *fetches;
  int nfetches;
  mf_op **targets;
  int ntargets;
  int num_slots;
  mf_tensor **slots;
  bool *slot_fetched;
  bool *slot_read;       /* read by some step or fetched (mf_kernel_ctx.outputs_read) */
  bool *slot_const;      /* holds a Const's value from run to run: no step computes it */
  bool *fetch_moves;     /* mf_function_run hands fetch i over: no other fetch names its slot */
  int *feed_slots;
  int *fetch_slots;
  mf_step *steps;
  int num_steps;
  mf_tensor **pool;      /* idle buffers owned by the plan */
  int pool_len, pool_cap;
  mf_tensor **last_fetched; /* our reference to the last results, reclaimed when the caller drops them */
  mf_dtype *rt_dtypes;   /* runtime shape inference scratch */
  mf_shape *rt_in_shapes, *rt_out_shapes;
  mf_tensor **rt_values; /* the inputs whose values inference reads (value_inputs), else NULL */
  int rt_cap_in, rt_cap_out;
  mf_tensor **fed_keep;  /* per step: fed values of its outputs, set aside (rt_cap_out entries) */
} mf_plan;

struct mf_callable { mf_plan plan; };

struct mf_session {
  mf_graph *graph;
  bool closed;
  mf_callable **plans;
  int num_plans, cap_plans;
  mf_graph_states states;     /* of the session's graph */
  mf_graph_states **fn_states; /* of function graphs, made when first run */
  int num_fn_states, cap_fn_states;
  mf_callable **fn_plans;     /* plans over function graphs */
  int num_fn_plans, cap_fn_plans;
  uint64_t num_allocations;
  /* During a run, the values fed for variables (by op id; NULL when not fed),
   * which their stand-ins in functions read too. */
  mf_tensor **var_feeds;
  int num_var_feeds;
  /* The thread of mf_callable_run_async (async.c), NULL until its first job.
   * Every other use of the session first waits for its jobs (mf_worker_drain). */
  mf_worker *worker;
  unsigned options;           /* MF_ALLOW_SOFT_PLACEMENT | MF_LOG_DEVICE_PLACEMENT */
  /* Placement lines of plans built since the last mf_session_take_placement_log,
   * and the text that call last handed out. */
  char *log;
  size_t log_len, log_cap;
  char *log_taken;
};


/* calloc of count elements (at least one) into ptr; false when out of memory. */
#define PLAN_ALLOC(ptr, count) \
  ((ptr) = mf_calloc((size_t)((count) > 0 ? (count) : 1), sizeof *(ptr)), (ptr) != NULL)

/* A variable's stand-in in a function names the variable by "_var_id". */
static inline bool mf_var_id_of(const mf_op *op, int64_t *id) { return mf_op_attr_int(op, "_var_id", id); }

/* --- pool.c --- */
/* Gives t back to p's pool (or releases it when not reusable); NULL is fine. */
void mf_pool_put(mf_plan *p, mf_tensor *t);
/* A buffer from p's pool that fits, else a new one (counted in the session's allocations). */
mf_tensor *mf_pool_alloc(mf_plan *p, mf_dtype dtype, int rank, const int64_t *dims, mf_status *s);

/* --- plan.c --- */
/* Fills p's steps and slots from its graph, feeds, fetches and targets. */
mf_code mf_plan_build(mf_plan *p, mf_status *s);
void mf_plan_free(mf_plan *p);

/* --- executor.c --- */
/* Runs the steps over the fed slots; stops at the first error. */
void mf_plan_run_steps(mf_plan *p, mf_status *s);
/* After a run: every value but the constants goes back to the pool. */
void mf_plan_release_slots(mf_plan *p);
/* mf_callable_run without waiting for the session's worker: the worker's own entry. */
mf_code mf_callable_run_now(mf_callable *c, mf_tensor *const *feed_values, mf_tensor **fetch_values,
                            mf_status *s);

/* --- session.c --- */
/* The session's cached plan over states->graph for this signature, built on first use. */
mf_callable *mf_session_plan(mf_session *sess, mf_graph_states *states, const mf_output *feeds, int nfeeds,
                             const mf_output *fetches, int nfetches, mf_op *const *targets, int ntargets,
                             mf_status *s);
/* Appends a formatted line to the session's placement log; false when out of memory. */
bool mf_session_log_line(mf_session *sess, const char *fmt, ...) MF_PRINTF(2, 3);
mf_code mf_session_closed_error(mf_status *s);

#endif
