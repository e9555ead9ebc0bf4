/* peers.c — the plain C side of the benchmarks' comparisons. bench/harness.lua
 * compiles it with the library's CC and CFLAGS plus -fopenmp, so both sides
 * get the same compiler. */
#include <math.h>
#include <stdint.h>

/* y = x * 2 + 1, the loop a C programmer would write. */
void peer_axpb(const float *restrict x, float *restrict y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * 2.0f + 1.0f;
}

/* The same loop split over `threads` OpenMP threads (issue 13's reference:
 * moonflow should reach 0.8x of it with 2 threads). */
void peer_axpb_omp(const float *restrict x, float *restrict y, int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * 2.0f + 1.0f;
}

/* y = tanh(x * a + b) * c, the fusion bench's second chain, as one loop. */
void peer_tanh_chain(const float *restrict x, float *restrict y, int64_t n, float a, float b, float c) {
  for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i] * a + b) * c;
}

void peer_tanh_chain_omp(const float *restrict x, float *restrict y, int64_t n, float a, float b, float c,
                         int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i] * a + b) * c;
}
