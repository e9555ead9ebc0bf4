/* philox.h — the random ops' generator and its conversions (ops/random.c
 * documents the numbers), written once for the host kernels and the CUDA
 * backend's (src/cuda/random.cu), so both draw the same bits: plain C that
 * nvcc also compiles as device code (MF_PHILOX_FN). */
#ifndef MF_KERNELS_PHILOX_H
#define MF_KERNELS_PHILOX_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define MF_PHILOX_FN static inline __host__ __device__
#else
#define MF_PHILOX_FN static inline
#endif

enum {
  MF_PHILOX_M0 = 0xD2511F53u, MF_PHILOX_M1 = 0xCD9E8D57u, /* round multipliers */
  MF_PHILOX_W0 = 0x9E3779B9u, MF_PHILOX_W1 = 0xBB67AE85u, /* key schedule (Weyl) */
};

/* Philox4x32-10: ten rounds, the key bumped between rounds; c is replaced by
 * the output block. Locals rather than arrays keep the state in registers. */
MF_PHILOX_FN void mf_philox4x32_10(uint32_t c[4], const uint32_t key[2]) {
  uint32_t c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3], k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)MF_PHILOX_M0 * c0, p1 = (uint64_t)MF_PHILOX_M1 * c2;
    c0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    c2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    k0 += MF_PHILOX_W0;
    k1 += MF_PHILOX_W1;
  }
  c[0] = c0;
  c[1] = c1;
  c[2] = c2;
  c[3] = c3;
}

/* The output block for element block b of run `run`. */
MF_PHILOX_FN void mf_philox_block(uint32_t c[4], int64_t b, uint64_t run, const uint32_t key[2]) {
  c[0] = (uint32_t)b;
  c[1] = (uint32_t)((uint64_t)b >> 32);
  c[2] = (uint32_t)run;
  c[3] = (uint32_t)(run >> 32);
  mf_philox4x32_10(c, key);
}

/* Block -> values: each writes the values one block yields (MF_PER_BLOCK_*)
 * into out. */
enum { MF_PER_BLOCK_F32 = 4, MF_PER_BLOCK_F64 = 2 };
#define MF_U24(w) ((float)((w) >> 8) * 0x1p-24f)                   /* [0, 1) */
#define MF_U24_OPEN0(w) ((float)(((w) >> 8) + 1) * 0x1p-24f)       /* (0, 1] */
#define MF_U53(a, b) ((double)((((uint64_t)(a) << 32) | (b)) >> 11) * 0x1p-53)
#define MF_U53_OPEN0(a, b) ((double)(((((uint64_t)(a) << 32) | (b)) >> 11) + 1) * 0x1p-53)
#define MF_TWO_PI 6.283185307179586476925286766559

MF_PHILOX_FN void mf_uniform_f32(const uint32_t w[4], float *out) {
  for (int j = 0; j < 4; j++) out[j] = MF_U24(w[j]);
}
MF_PHILOX_FN void mf_uniform_f64(const uint32_t w[4], double *out) {
  out[0] = MF_U53(w[0], w[1]);
  out[1] = MF_U53(w[2], w[3]);
}
/* The normals use the math library of the side that runs them (glibc's or
 * CUDA's logf, cosf, sinf), whose last bits differ: the only place where the
 * two sides' numbers may part (by an ulp or so). */
MF_PHILOX_FN void mf_normal_f32(const uint32_t w[4], float *out) {
  for (int j = 0; j < 4; j += 2) {
    float r = sqrtf(-2.0f * logf(MF_U24_OPEN0(w[j])));
    float theta = (float)MF_TWO_PI * MF_U24(w[j + 1]);
    out[j] = r * cosf(theta);
    out[j + 1] = r * sinf(theta);
  }
}
MF_PHILOX_FN void mf_normal_f64(const uint32_t w[4], double *out) {
  double r = sqrt(-2.0 * log(MF_U53_OPEN0(w[0], w[1])));
  double theta = MF_TWO_PI * MF_U53(w[2], w[3]);
  out[0] = r * cos(theta);
  out[1] = r * sin(theta);
}

/* Retries (truncated normals, rejected integers) draw block b + k * 2^40:
 * block numbers of first draws stay below 2^40 (no value has 2^40 groups). */
#define MF_PHILOX_RETRY_SHIFT 40

/* RandomUniformInt's 64-bit word for element e, given c, the block e / 2
 * (word e % 2 of it), with its rejection of words below reject_below: the
 * same word of block e / 2 + k * 2^40 (k = 1, 2, ...) is drawn instead. */
MF_PHILOX_FN uint64_t mf_uniform_int_word(const uint32_t c[4], int64_t e, uint64_t reject_below, uint64_t run,
                                          const uint32_t key[2]) {
  const int j = (int)(e % 2) * 2;
  uint64_t r = (uint64_t)c[j] << 32 | c[j + 1];
  for (int64_t retry = 1; r < reject_below; retry++) {
    uint32_t d[4];
    mf_philox_block(d, e / 2 + (retry << MF_PHILOX_RETRY_SHIFT), run, key);
    r = (uint64_t)d[j] << 32 | d[j + 1];
  }
  return r;
}

/* TruncatedNormal's group b of n values, written to out[b * PER, ...): the
 * normals of block b in order, skipping those with |z| >= 2; when a block
 * runs short, blocks b + k * 2^40 (k = 1, 2, ...) continue the group. */
#define MF_DEFINE_TRUNCATED_GROUP(NAME, T, PER, CONVERT)                                   \
  MF_PHILOX_FN void NAME(T *out, int64_t b, int64_t n, uint64_t run, const uint32_t key[2]) { \
    uint32_t c[4];                                                                         \
    T z[PER];                                                                              \
    const int64_t per = (PER), base = b * per, want = n - base < per ? n - base : per;     \
    int64_t got = 0;                                                                       \
    for (int64_t retry = 0; got < want; retry++) {                                         \
      mf_philox_block(c, b + (retry << MF_PHILOX_RETRY_SHIFT), run, key);                  \
      CONVERT(c, z);                                                                       \
      for (int j = 0; j < (PER) && got < want; j++)                                        \
        if (z[j] > -2 && z[j] < 2) out[base + got++] = z[j];                               \
    }                                                                                      \
  }
MF_DEFINE_TRUNCATED_GROUP(mf_truncated_group_f32, float, MF_PER_BLOCK_F32, mf_normal_f32)
MF_DEFINE_TRUNCATED_GROUP(mf_truncated_group_f64, double, MF_PER_BLOCK_F64, mf_normal_f64)
#undef MF_DEFINE_TRUNCATED_GROUP

#endif
