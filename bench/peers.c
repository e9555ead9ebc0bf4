/* peers.c — the plain C side of bench/run.lua's comparisons. run.lua compiles
 * it with the library's CC and CFLAGS, so both sides get the same compiler. */
#include <stdint.h>

/* y = x * 2 + 1, the loop a C programmer would write. */
void peer_axpb(const float *restrict x, float *restrict y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * 2.0f + 1.0f;
}
