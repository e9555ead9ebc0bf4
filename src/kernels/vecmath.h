/* vecmath.h — float32 exp, log, log1p, expm1 and tanh written so that gcc
 * and clang vectorize the element loops calling them (libm's are calls the
 * compilers cannot vectorize, and glibc's vector variants, libmvec, are
 * declared only under -ffast-math). Each is straight-line IEEE arithmetic on
 * floats and int32 lanes: range reduction through the exponent bits, a
 * Cephes polynomial, special cases by selects. The same operations run
 * whether a lane is in a vector or in a loop's scalar tail (the build does
 * not contract a*b+c into fma: -std=c11 sets -ffp-contract=off), so a result
 * never depends on where a thread's chunk or a fused tile starts.
 *
 * Accuracy against double-precision results, over every 1009th float
 * (spec/vecmath_spec.lua checks it through the ops): exp 0.93 ulp, log 0.78,
 * tanh 1.26, log1p 2.39, expm1 2.38 at most; subnormal arguments and results,
 * infinities and NaN as libm gives them. float64 loops keep libm (MF_VMATH). */
#ifndef MF_KERNELS_VECMATH_H
#define MF_KERNELS_VECMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t mf_float_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static inline float mf_bits_float(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in two parts
 * (ln 2's high part has 9 bits, so n * it is exact). 2^n is applied as two
 * factors so that results near overflow and subnormal ones are rounded once. */
static inline float mf_exp_f32(float x) {
  float xc = x < -104.0f ? -104.0f : x;   /* below: 0 */
  xc = xc > 89.0f ? 89.0f : xc;           /* above: inf */
  const float shifter = 0x1.8p23f;        /* adding it rounds to an integer in the low bits */
  float k = xc * 1.44269504088896341f + shifter;
  int32_t n = (int32_t)(mf_float_bits(k) - mf_float_bits(shifter));
  k -= shifter;
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  int32_t n1 = n / 2, n2 = n - n1;        /* each in [-75, 64]: normal powers of two */
  float y = p * mf_bits_float((uint32_t)(n1 + 127) << 23) * mf_bits_float((uint32_t)(n2 + 127) << 23);
  return x != x ? x : y;
}

/* log(x) = e ln 2 + log(m), x = m 2^e with m in [sqrt(1/2), sqrt(2)); subnormal
 * x is scaled by 2^23 first. */
static inline float mf_log_f32(float x) {
  int tiny = x < 0x1p-126f;
  float xs = tiny ? x * 0x1p23f : x;
  const uint32_t sqrt_half = 0x3f3504f3;
  uint32_t t = mf_float_bits(xs) - sqrt_half;
  float e = (float)((int32_t)t >> 23) - (tiny ? 23.0f : 0.0f);
  float f = mf_bits_float((t & 0x007fffff) + sqrt_half) - 1.0f;
  float z = f * f;
  float y = 7.0376836292e-2f;
  y = y * f - 1.1514610310e-1f;
  y = y * f + 1.1676998740e-1f;
  y = y * f - 1.2420140846e-1f;
  y = y * f + 1.4249322787e-1f;
  y = y * f - 1.6668057665e-1f;
  y = y * f + 2.0000714765e-1f;
  y = y * f - 2.4999993993e-1f;
  y = y * f + 3.3333331174e-1f;
  y = y * f * z;
  y += e * -2.12194440e-4f;
  y += -0.5f * z;
  float r = f + y + e * 0.693359375f;
  r = x == INFINITY ? x : r;
  r = x < 0 ? NAN : r;
  r = x == 0 ? -INFINITY : r;
  return x != x ? x : r;
}

/* log1p(x) = log(u) * x / (u - 1) with u = 1 + x rounded: the quotient
 * corrects for the rounding of u (Goldberg, "What every computer scientist
 * should know about floating-point arithmetic", theorem 4). */
static inline float mf_log1p_f32(float x) {
  float u = 1.0f + x;
  float d = u - 1.0f;
  float r = mf_log_f32(u) * (x / (d == 0 ? 1.0f : d));
  r = d == 0 ? x : r;
  return x == INFINITY ? x : r;
}

/* expm1(x) = (u - 1) * x / log(u) with u = exp(x) (Kahan's correction of u's
 * rounding, as log1p's). */
static inline float mf_expm1_f32(float x) {
  float u = mf_exp_f32(x);
  float d = u - 1.0f;
  float l = mf_log_f32(u);
  float r = d * (x / (l == 0 ? 1.0f : l));
  r = u == 1.0f ? x : r;
  r = d == -1.0f ? -1.0f : r;
  return u == INFINITY ? u : r;
}

/* tanh: Cephes' odd polynomial for |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1)
 * with x's sign (exp overflowing gives 1). */
static inline float mf_tanh_f32(float x) {
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = x + x * z * p;
  float a = fabsf(x);
  float large = 1.0f - 2.0f / (mf_exp_f32(a + a) + 1.0f);
  large = x < 0 ? -large : large;
  return a < 0.625f ? small : large;
}

/* A math function over float or double elements: the one above for float,
 * libm's for double. MF_VMATH(exp, x)(x). */
#define MF_VMATH(fn, x) _Generic((x), float: mf_##fn##_f32, default: fn)

#endif
