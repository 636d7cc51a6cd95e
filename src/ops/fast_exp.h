// exp() that the compiler can vectorise, for the float training path.
// libm's expf is a function call per element (and cannot be vectorised
// without -ffast-math, which would also break the infinities the attention
// mask relies on). This is the classic range reduction
//   x = k ln2 + r,  |r| <= ln2/2,   e^x = 2^k e^r
// with e^r from a degree-6 polynomial (Cephes' expf coefficients): about one
// ulp of error, far below what the float path needs. Double keeps std::exp,
// so the gradient checks are unaffected.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ada {

inline float exp_fast(float x) {
  x = x < -87.33654f ? -87.33654f : (x > 88.72283f ? 88.72283f : x);
  const float k = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - k * 0.693359375f + k * 2.12194440e-4f;  // ln2 split in two for precision
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  const int32_t bits = ((int32_t)k + 127) << 23;  // 2^k
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return er * scale;
}

inline float exp_t(float x) { return exp_fast(x); }
inline double exp_t(double x) { return std::exp(x); }

}  // namespace ada
