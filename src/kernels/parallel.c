/* parallel.c — kernels' split of their work over the session's threads. */
#include "kernels/parallel.h"
#include "exec/kernel_api.h"

/* Elements per block of a split fold: a chunk's worth of work, and long
 * enough that combining the blocks' partials costs nothing beside them. */
enum { FOLD_BLOCK = 1 << 16 };

void mf_parallel_for(mf_kernel_ctx *ctx, int64_t n, int64_t cost, mf_parallel_fn fn, void *arg) {
  if (n <= 0) return;
  if (cost < 1) cost = 1;
  int64_t grain = cost >= MF_PARALLEL_GRAIN ? 1 : (MF_PARALLEL_GRAIN + cost - 1) / cost;
  mf_kernel_parallel_for(ctx, n, grain, fn, arg);
}

int64_t mf_parallel_block_len(int64_t n) { return n >= 2 * FOLD_BLOCK ? FOLD_BLOCK : n; }
