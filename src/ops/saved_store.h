// How the backward's saved activations are stored: a column block copied out
// of a wider buffer (q out of q | k | v), and bf16 storage (--bf16-acts 1:
// round to bfloat16 when saved, widen when the backward reads it back).
//   copy_block: dst[i, :w] = src[i, :w]                 row strides ldd, lds
//   to_bf16:    dst[i, :w] = bf16(src[i, :w])           round to nearest even
//   from_bf16:  dst[i, :w] = float(src[i, :w])          exact
// bf16 is the top half of an IEEE float: 8 exponent bits (the float range)
// and 7 stored significand bits (relative error at most 2^-8 after rounding). The
// CUDA twins (cuda/saved_store.cu) use __float2bfloat16_rn, the same rounding,
// so the two backends store the same bits. A double is first rounded to float.
#pragma once
#include <cstdint>
#include <cstring>

#include "ops/parallel.h"

namespace ada {

// Round to nearest, ties to even; a NaN stays a (quiet) NaN.
inline uint16_t bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
inline float bf16_widen(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class T>
void copy_block(T* dst, int ld_dst, const T* src, int ld_src, int n, int width) {
  ADA_PARALLEL_FOR((long long)n * width)
  for (int i = 0; i < n; i++) std::memcpy(dst + (size_t)i * ld_dst, src + (size_t)i * ld_src, sizeof(T) * width);
}

template <class T>
void to_bf16(uint16_t* dst, int ld_dst, const T* src, int ld_src, int n, int width) {
  ADA_PARALLEL_FOR((long long)n * width)
  for (int i = 0; i < n; i++)
    for (int j = 0; j < width; j++) dst[(size_t)i * ld_dst + j] = bf16_round((float)src[(size_t)i * ld_src + j]);
}

template <class T>
void from_bf16(T* dst, int ld_dst, const uint16_t* src, int ld_src, int n, int width) {
  ADA_PARALLEL_FOR((long long)n * width)
  for (int i = 0; i < n; i++)
    for (int j = 0; j < width; j++) dst[(size_t)i * ld_dst + j] = (T)bf16_widen(src[(size_t)i * ld_src + j]);
}

}  // namespace ada
