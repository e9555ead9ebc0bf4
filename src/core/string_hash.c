/* string_hash.c — Fingerprint64 and SipHash-2-4, written from their
 * published definitions (FarmHash by Geoff Pike, MIT licence; SipHash by
 * Aumasson and Bernstein). Words are read little-endian whatever the host. */
#include "core/string_hash.h"

static const uint64_t K0 = 0xc3a5c85c97cb3127ULL, K1 = 0xb492b66fbe98f273ULL, K2 = 0x9ae16a3b2f90404fULL;

static uint64_t load64(const char *p) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

static uint32_t load32(const char *p) {
  const unsigned char *b = (const unsigned char *)p;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t rotr(uint64_t v, int shift) { return shift == 0 ? v : v >> shift | v << (64 - shift); }
static uint64_t rotl(uint64_t v, int shift) { return v << shift | v >> (64 - shift); }
static uint64_t shift_mix(uint64_t v) { return v ^ (v >> 47); }

static uint64_t hash_len16(uint64_t u, uint64_t v, uint64_t mul) {
  uint64_t a = (u ^ v) * mul;
  a ^= a >> 47;
  uint64_t b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}

static uint64_t hash_len0to16(const char *s, size_t n) {
  if (n >= 8) {
    uint64_t mul = K2 + n * 2, a = load64(s) + K2, b = load64(s + n - 8);
    uint64_t c = rotr(b, 37) * mul + a, d = (rotr(a, 25) + b) * mul;
    return hash_len16(c, d, mul);
  }
  if (n >= 4) {
    uint64_t mul = K2 + n * 2, a = load32(s);
    return hash_len16(n + (a << 3), load32(s + n - 4), mul);
  }
  if (n > 0) {
    unsigned char a = (unsigned char)s[0], b = (unsigned char)s[n >> 1], c = (unsigned char)s[n - 1];
    uint32_t y = (uint32_t)a + ((uint32_t)b << 8), z = (uint32_t)n + ((uint32_t)c << 2);
    return shift_mix(y * K2 ^ z * K0) * K2;
  }
  return K2;
}

static uint64_t hash_len17to32(const char *s, size_t n) {
  uint64_t mul = K2 + n * 2, a = load64(s) * K1, b = load64(s + 8);
  uint64_t c = load64(s + n - 8) * mul, d = load64(s + n - 16) * K2;
  return hash_len16(rotr(a + b, 43) + rotr(c, 30) + d, a + rotr(b + K2, 18) + c, mul);
}

static uint64_t hash_len33to64(const char *s, size_t n) {
  uint64_t mul = K2 + n * 2, a = load64(s) * K2, b = load64(s + 8);
  uint64_t c = load64(s + n - 8) * mul, d = load64(s + n - 16) * K2;
  uint64_t y = rotr(a + b, 43) + rotr(c, 30) + d;
  uint64_t z = hash_len16(y, a + rotr(b + K2, 18) + c, mul);
  uint64_t e = load64(s + 16) * mul, f = load64(s + 24);
  uint64_t g = (y + load64(s + n - 32)) * mul, h = (z + load64(s + n - 24)) * mul;
  return hash_len16(rotr(e + f, 43) + rotr(g, 30) + h, e + rotr(f + a, 18) + g, mul);
}

typedef struct pair64 { uint64_t first, second; } pair64;

/* FarmHash's WeakHashLen32WithSeeds over s[0..32) and seeds a, b. */
static pair64 weak_hash32(const char *s, uint64_t a, uint64_t b) {
  uint64_t w = load64(s), x = load64(s + 8), y = load64(s + 16), z = load64(s + 24);
  a += w;
  b = rotr(b + a + z, 21);
  uint64_t c = a;
  a += x;
  a += y;
  b += rotr(a, 44);
  return (pair64){a + z, b + c};
}

uint64_t mf_fingerprint64(const char *s, size_t n) {
  if (n <= 16) return hash_len0to16(s, n);
  if (n <= 32) return hash_len17to32(s, n);
  if (n <= 64) return hash_len33to64(s, n);
  /* 64-byte blocks; the last 1 to 64 bytes are taken as the final 64 of s. */
  const uint64_t seed = 81;
  uint64_t x = seed, y = seed * K1 + 113, z = shift_mix(y * K2 + 113) * K2, t;
  pair64 v = {0, 0}, w = {0, 0};
  x = x * K2 + load64(s);
  const char *end = s + ((n - 1) / 64) * 64, *last64 = s + n - 64;
  do {
    x = rotr(x + y + v.first + load64(s + 8), 37) * K1;
    y = rotr(y + v.second + load64(s + 48), 42) * K1;
    x ^= w.second;
    y += v.first + load64(s + 40);
    z = rotr(z + w.first, 33) * K1;
    v = weak_hash32(s, v.second * K1, x + w.first);
    w = weak_hash32(s + 32, z + w.second, y + load64(s + 16));
    t = z, z = x, x = t;
    s += 64;
  } while (s != end);
  uint64_t mul = K1 + ((z & 0xff) << 1);
  s = last64;
  w.first += (n - 1) & 63;
  v.first += w.first;
  w.first += v.first;
  x = rotr(x + y + v.first + load64(s + 8), 37) * mul;
  y = rotr(y + v.second + load64(s + 48), 42) * mul;
  x ^= w.second * 9;
  y += v.first * 9 + load64(s + 40);
  z = rotr(z + w.first, 33) * mul;
  v = weak_hash32(s, v.second * mul, x + w.first);
  w = weak_hash32(s + 32, z + w.second, y + load64(s + 16));
  t = z, z = x, x = t;
  return hash_len16(hash_len16(v.first, w.first, mul) + shift_mix(y) * K0 + z,
                    hash_len16(v.second, w.second, mul) + x, mul);
}

/* One SipRound on v[0..4). */
static void sip_round(uint64_t v[4]) {
  v[0] += v[1], v[1] = rotl(v[1], 13), v[1] ^= v[0], v[0] = rotl(v[0], 32);
  v[2] += v[3], v[3] = rotl(v[3], 16), v[3] ^= v[2];
  v[0] += v[3], v[3] = rotl(v[3], 21), v[3] ^= v[0];
  v[2] += v[1], v[1] = rotl(v[1], 17), v[1] ^= v[2], v[2] = rotl(v[2], 32);
}

static void sip_compress(uint64_t v[4], uint64_t m) {
  v[3] ^= m;
  sip_round(v);
  sip_round(v);
  v[0] ^= m;
}

uint64_t mf_siphash24(const uint64_t key[2], const char *s, size_t n) {
  uint64_t v[4] = {key[0] ^ 0x736f6d6570736575ULL, key[1] ^ 0x646f72616e646f6dULL,
                   key[0] ^ 0x6c7967656e657261ULL, key[1] ^ 0x7465646279746573ULL};
  size_t whole = n & ~(size_t)7;
  for (size_t i = 0; i < whole; i += 8) sip_compress(v, load64(s + i));
  uint64_t last = (uint64_t)(n & 0xff) << 56;
  for (size_t i = whole; i < n; i++) last |= (uint64_t)(unsigned char)s[i] << (8 * (i - whole));
  sip_compress(v, last);
  v[2] ^= 0xff;
  for (int r = 0; r < 4; r++) sip_round(v);
  return v[0] ^ v[1] ^ v[2] ^ v[3];
}
