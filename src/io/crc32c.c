/* crc32c.c — CRC-32C. Debian packages no C library for it (only Python's
 * crc32c), so: the SSE4.2 crc32 instruction, 8 bytes a step, when the CPU has
 * it; else one table lookup a byte (the reflected polynomial 0x82F63B78). */
#include "io/crc32c.h"

#include <pthread.h>
#include <string.h>

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
}

static uint32_t crc_by_table(uint32_t crc, const unsigned char *p, size_t n) {
  pthread_once(&table_once, make_table);
  for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
__attribute__((target("sse4.2"))) static uint32_t crc_by_instruction(uint32_t crc, const unsigned char *p,
                                                                      size_t n) {
  uint64_t c = crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  uint32_t c32 = (uint32_t)c;
  for (; n > 0; p++, n--) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}
static bool has_instruction(void) { return __builtin_cpu_supports("sse4.2"); }
#else
static uint32_t crc_by_instruction(uint32_t crc, const unsigned char *p, size_t n) { return crc_by_table(crc, p, n); }
static bool has_instruction(void) { return false; }
#endif

uint32_t mf_crc32c_extend(uint32_t crc, const void *data, size_t n) {
  const unsigned char *p = data;
  crc = ~crc;
  crc = has_instruction() ? crc_by_instruction(crc, p, n) : crc_by_table(crc, p, n);
  return ~crc;
}
