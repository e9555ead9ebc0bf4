/* kernel_api.h — what kernels may ask of the executor that runs them:
 * ref inputs' state, output buffers, function plans, session state. */
#ifndef MF_EXEC_KERNEL_API_H
#define MF_EXEC_KERNEL_API_H

#include "graph/op_def.h"

/* For a ref input k (see mf_op_def.ref_inputs): the state of the op producing
 * it, e.g. the variable an Assign writes. */
mf_state_slot *mf_kernel_ref_state(mf_kernel_ctx *ctx, int k);
/* The op's per-session state, made by make(ctx) on its first use (once, also
 * when runs on several threads reach it together) and freed with free_fn
 * when the session closes. NULL with ctx->status set when make fails. */
void *mf_kernel_state(mf_kernel_ctx *ctx, void *(*make)(mf_kernel_ctx *ctx), void (*free_fn)(void *));
/* Scratch memory of at least `bytes` for this kernel call, owned by the run
 * (kept for later runs, so steady-state runs allocate nothing); NULL with
 * ctx->status set when out of memory. */
void *mf_kernel_scratch(mf_kernel_ctx *ctx, size_t bytes);
/* A new tensor (data uninitialized) from the memory of the kernel's device, for values
 * that outlive the run (a variable's copy-on-write value, a loop's
 * accumulator): it goes back to that memory when it dies. */
mf_tensor *mf_kernel_new_tensor(mf_kernel_ctx *ctx, mf_dtype dtype, int rank, const int64_t *dims);
/* Runs fn(arg, begin, end) over [0, n) split over the session's threads in
 * chunks of at least `grain` (chosen so a chunk is worth a thread's wake-up),
 * the calling thread included; returns when all are done. fn must not fail. */
void mf_kernel_parallel_for(mf_kernel_ctx *ctx, int64_t n, int64_t grain,
                            void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);
/* For MF_OP_SETS_OUTPUTS kernels: a buffer for output i on the kernel's device, recycled when possible. */
mf_tensor *mf_kernel_alloc_output(mf_kernel_ctx *ctx, int i, mf_dtype dtype, int rank,
                                  const int64_t *dims);

/* Functions: graphs that kernels run with their own session (the branches
 * and loop bodies of control flow). A plan over function graph `fn` feeds
 * `feeds`, fetches `fetches` and also runs `targets`; it is cached per session
 * and signature, owned by the session. NULL with ctx->status set on error. */
mf_callable *mf_function_plan(mf_kernel_ctx *ctx, mf_graph *fn, const mf_output *feeds, int nfeeds,
                              const mf_output *fetches, int nfetches, mf_op *const *targets,
                              int ntargets);
/* Runs it as part of the run of the calling kernel ctx (whose status it
 * sets). Takes over the references in feed_values (one per feed; the caller
 * gives them up, so a value nobody else holds may be updated in place) and
 * stores new references in fetch_values. An error names the failing op of
 * the function. Several threads may run one function plan at once. */
mf_code mf_function_run(mf_kernel_ctx *ctx, mf_callable *c, mf_tensor **feed_values, mf_tensor **fetch_values);
/* Gives a value back to the plan's buffer pool (a result the caller is done with). */
void mf_function_recycle(mf_callable *c, mf_tensor *t);

/* Scalar programs (exec/scalar.c): a function plan whose steps are all
 * elementwise ops (or Identity) over one-element values on the host, such as
 * a loop counter's arithmetic and a loop's condition, runs as a register
 * program: no buffers, no per-step bookkeeping, the ops' own element loops,
 * so values are bit for bit those of mf_function_run. A register holds one
 * element of any dtype but strings. Registers: an array of at least
 * MF_SCALAR_MAX_REGS, the caller's (a loop keeps its values there between runs). */
enum { MF_SCALAR_MAX_REGS = 64 };
typedef struct mf_scalar { _Alignas(16) unsigned char bytes[16]; } mf_scalar;
typedef struct mf_scalar_program mf_scalar_program;
/* c's program, owned by c; NULL when c is no such plan or the calling kernel
 * runs off the host. Read-only: several threads may run it at once, each on
 * its own registers. */
const mf_scalar_program *mf_function_scalar(const mf_kernel_ctx *ctx, const mf_callable *c);
/* Whether t can stand for feed i (fetch i when `fetch`): host memory of the
 * port's dtype and of the exact shape the plan was built for. */
bool mf_scalar_fits(const mf_scalar_program *sp, bool fetch, int i, const mf_tensor *t);
/* The registers of feed i and fetch i. */
int mf_scalar_feed_reg(const mf_scalar_program *sp, int i);
int mf_scalar_fetch_reg(const mf_scalar_program *sp, int i);
/* Sets the constants' registers: once, before the first run on regs. */
void mf_scalar_begin(const mf_scalar_program *sp, mf_scalar *regs);
/* Runs the program on regs (feeds set); an error (integer division by zero)
 * sets ctx->status as mf_function_run would, naming the op. */
mf_code mf_scalar_run(mf_kernel_ctx *ctx, const mf_scalar_program *sp, mf_scalar *regs);
/* Sets output k of the calling kernel to the value of fetch i (a new buffer,
 * recycled by the run); NULL with ctx->status set when out of memory. */
mf_tensor *mf_scalar_output(mf_kernel_ctx *ctx, const mf_scalar_program *sp, const mf_scalar *regs, int i, int k);

/* The per-session state of op, in the session's graph or in a function graph
 * the session has run, once the session's asynchronous runs are over; NULL
 * while it has none (ops/debug.c reads run counts). Not for kernels. */
mf_state_slot *mf_session_op_state(mf_session *sess, const mf_op *op);
/* The graph a session runs (its functions' ops fall back to its host). */
mf_graph *mf_session_graph(const mf_session *sess);

#endif
