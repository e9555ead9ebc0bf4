/* random.h — what the random ops' kernels on other devices (ops/gpu/random.c)
 * share with random.c, so every device draws the same numbers. */
#ifndef MF_OPS_RANDOM_H
#define MF_OPS_RANDOM_H

#include "graph/op_def.h"

/* The key of the op's seeds (attrs seed, seed2; wider seeds fold their high
 * halves into the other word) and the number of this run: the op's runs in
 * the session, counted up (per-session state, whatever device runs it). */
mf_code mf_random_next_run(mf_kernel_ctx *ctx, uint32_t key[2], uint64_t *run);
/* RandomUniformInt's bounds from its host inputs minval, maxval: lo, the
 * range maxval - minval and the words below which a draw is rejected; an
 * error naming the op unless minval < maxval. */
mf_code mf_random_int_bounds(mf_kernel_ctx *ctx, int64_t *lo, uint64_t *range, uint64_t *reject_below);

#endif
