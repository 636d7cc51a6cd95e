// bf16 encodings on the host for the kernel tests, under the host runner and
// in test_gpu alike (the runner's own conversions, cuda/hostrun/lowp.h, exist
// only under the runner).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ada::test {

// float -> bf16 bits, round to nearest even, as __float2bfloat16 (finite
// values and infinities; a NaN stays a quiet NaN).
inline uint16_t bf16_rne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// bf16 bits -> float (exact).
inline float from_bf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace ada::test
