/* parallel.h — splitting a kernel's work over the session's threads
 * (parallel.c), the one place where kernels choose how finely to split.
 *
 * Kernels split over independent items (output elements, rows, images,
 * segments), each computed start to end by one thread exactly as one thread
 * would, so results never depend on the thread count. A kernel that folds
 * many elements into few outputs (a sum of everything) splits each fold into
 * blocks whose length follows from the shape alone (mf_parallel_blocks) and
 * combines the blocks' partial results in block order: the same additions
 * for 1 thread as for 16. */
#ifndef MF_KERNELS_PARALLEL_H
#define MF_KERNELS_PARALLEL_H

#include "graph/op_def.h"

/* Elements of work per chunk at the least: below this, waking a thread costs
 * more than the work (a few microseconds), so small tensors stay on the
 * calling thread. */
enum { MF_PARALLEL_GRAIN = 1 << 15 };

typedef void (*mf_parallel_fn)(void *arg, int64_t begin, int64_t end);

/* Runs fn(arg, begin, end) over items [0, n), each costing about `cost`
 * element operations, split over the session's threads in chunks of at
 * least MF_PARALLEL_GRAIN elements of work; returns when all are done. fn
 * must not fail (it records failures in arg). */
void mf_parallel_for(mf_kernel_ctx *ctx, int64_t n, int64_t cost, mf_parallel_fn fn, void *arg);

/* Blocks of a fold of n elements, for folds worth splitting: the block
 * length (a function of n alone), or n (one block) when n is too short to
 * split. */
int64_t mf_parallel_block_len(int64_t n);

#endif
