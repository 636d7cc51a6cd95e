// exp() that the compiler can vectorise, for the float training path.
// libm's expf is a function call per element (and cannot be vectorised
// without -ffast-math, which would also break the infinities the attention
// mask relies on). This is the classic range reduction
//   x = k ln2 + r,  |r| <= ln2/2,   e^x = 2^k e^r
// with e^r from a degree-6 polynomial (Cephes' expf coefficients): about one
// ulp of error, far below what the float path needs. Double keeps std::exp,
// so the gradient checks are unaffected.
//
// Special inputs: NaN -> NaN; +inf (and x > 88.72) -> +inf; -inf (and
// x < -87.68, where e^x is below the smallest normal float) -> exactly 0, so
// that a masked attention score contributes nothing. The exponent k is
// turned into 2^k with float and unsigned bit arithmetic only, which is
// defined for every input (converting a NaN to int is not), at no cost.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ada {

inline float exp_fast(float x) {
  x = x < -88.0f ? -88.0f : (x > 88.72283f ? 88.72283f : x);  // NaN stays NaN
  const float k = std::floor(x * 1.44269504088896341f + 0.5f);   // in [-127, 128], or NaN
  const float r = x - k * 0.693359375f + k * 2.12194440e-4f;  // ln2 split in two for precision
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  // 2^k built from k's bits, not by converting k to int (undefined for NaN):
  // adding 1.5 * 2^23 puts the integer k in the low mantissa bits, read as
  // u = 0x4B400000 + k; then (u - 0x4B400000 + 127) << 23 is 2^k's bit
  // pattern (k = -127 gives the bits of 0.0f). Unsigned, so every input,
  // NaN too, is defined; a NaN's e^r above makes the product NaN anyway.
  const float kb = k + 12582912.0f;
  uint32_t u;
  std::memcpy(&u, &kb, sizeof u);
  const uint32_t bits = (u - 0x4B400000u + 127u) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return er * scale;
}

inline float exp_t(float x) { return exp_fast(x); }
inline double exp_t(double x) { return std::exp(x); }

}  // namespace ada
