// Low-precision floating-point types for the host runner: __nv_bfloat16 and
// __half with the conversions of cuda_bf16.h / cuda_fp16.h.
//
// The conversions are written from the IEEE definitions and reproduce CUDA bit
// for bit: float -> bf16/half rounds to nearest, ties to even; overflow gives
// infinity; every NaN becomes the canonical NaN (0x7fff), as CUDA's own
// conversions do. The CPU reference and the kernels under test must round the
// same way, or bf16 comparisons would need tolerances that hide real bugs.
//
// Arithmetic between two bf16 (or two half) values gives the correctly rounded
// result, like the sm_90 instructions: with 8- and 11-bit significands a float
// product is exact, and a float sum is either exact or off by far less than the
// distance to the nearest rounding midpoint, so "compute in float, then round"
// rounds like the exact result would. Division goes through double. Mixed
// bf16/float expressions are ambiguous, exactly as they are under nvcc.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hostrun/vector_types.h"

namespace ada::hostrun::lowp {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// float -> bf16 bits, round to nearest even. Adding 0x7fff (plus the lowest kept
// bit, to break ties towards even) to the 32-bit pattern carries into the kept
// half exactly when the dropped half is above the midpoint; a carry out of the
// significand bumps the exponent, which is the correct rounding too (up to inf).
inline uint16_t f32_to_bf16_rne(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;  // NaN -> canonical NaN
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

inline uint16_t f32_to_bf16_rz(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_f32(uint16_t b) { return bits_f32(uint32_t(b) << 16); }

// float -> half bits, round to nearest even.
inline uint16_t f32_to_f16_rne(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fffu;         // NaN -> canonical NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (midpoint above 65504, tie to even): inf
  if (a >= 0x38800000u) {                       // normal half: >= 2^-14
    // Re-bias the exponent (127 -> 15) in place, then drop 13 significand bits
    // with the same carry trick as bf16.
    const uint32_t v = a - 0x38000000u;
    const uint32_t lsb = (v >> 13) & 1u;
    return static_cast<uint16_t>(sign | ((v + 0xfffu + lsb) >> 13));
  }
  if (a <= 0x33000000u) return sign;  // <= 2^-25: rounds to zero (2^-25 is a tie, to even)
  // Subnormal half: the result counts units of 2^-24. With the implicit bit
  // restored the float is m * 2^(e-150), so the count is m >> (126 - e).
  const int e = static_cast<int>(a >> 23);
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const int shift = 126 - e;  // 14..24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;  // may carry into the smallest normal: right
  return static_cast<uint16_t>(sign | q);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);  // exact
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

// double -> float rounded to odd: truncate, and if anything was dropped set the
// last bit. Rounding that to a format with at least two fewer bits (bf16, half)
// gives the correctly rounded result with no double-rounding error.
inline float f64_to_f32_round_odd(double d) {
  const float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  uint32_t u = f32_bits(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) --u;  // step towards zero
  return bits_f32(u | 1u);
}

}  // namespace ada::hostrun::lowp

// ---------------------------------------------------------------------------
// __nv_bfloat16: 1 sign, 8 exponent, 7 significand bits; the top half of a float.
struct __nv_bfloat16 {
  unsigned short __x;

  __nv_bfloat16() = default;  // trivial, as CUDA's (allowed in __shared__ arrays)
  __nv_bfloat16(float f) : __x(ada::hostrun::lowp::f32_to_bf16_rne(f)) {}
  __nv_bfloat16(double d)
      : __x(ada::hostrun::lowp::f32_to_bf16_rne(ada::hostrun::lowp::f64_to_f32_round_odd(d))) {}
  template <typename I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  __nv_bfloat16(I v) : __nv_bfloat16(static_cast<double>(v)) {}
  operator float() const { return ada::hostrun::lowp::bf16_to_f32(__x); }
};

struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) {
  __nv_bfloat16 r;
  r.__x = b;
  return r;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __float2bfloat16(float f) {
  return __ushort_as_bfloat16(ada::hostrun::lowp::f32_to_bf16_rne(f));
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rz(float f) {
  return __ushort_as_bfloat16(ada::hostrun::lowp::f32_to_bf16_rz(f));
}
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline float __bfloat162float(__nv_bfloat16 h) { return ada::hostrun::lowp::bf16_to_f32(h.__x); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__float2bfloat16(a), __float2bfloat16(b)};
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 v) { return __floats2bfloat162_rn(v.x, v.y); }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat162{a, b};
}
inline float2 __bfloat1622float2(__nv_bfloat162 v) {
  return float2{__bfloat162float(v.x), __bfloat162float(v.y)};
}
inline float __low2float(__nv_bfloat162 v) { return __bfloat162float(v.x); }
inline float __high2float(__nv_bfloat162 v) { return __bfloat162float(v.y); }

inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16(float(a) + float(b)); }
inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16(float(a) - float(b)); }
inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __float2bfloat16(float(a) * float(b)); }
inline __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(double(float(a)) / double(float(b)));
}
inline __nv_bfloat16 operator-(__nv_bfloat16 a) { return __ushort_as_bfloat16(a.__x ^ 0x8000u); }
inline __nv_bfloat16& operator+=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a + b; }
inline __nv_bfloat16& operator-=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a - b; }
inline __nv_bfloat16& operator*=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a * b; }
inline __nv_bfloat16& operator/=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a / b; }
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return a + b; }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return a - b; }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return a * b; }

// ---------------------------------------------------------------------------
// __half: 1 sign, 5 exponent, 10 significand bits (IEEE binary16).
struct __half {
  unsigned short __x;

  __half() = default;
  __half(float f) : __x(ada::hostrun::lowp::f32_to_f16_rne(f)) {}
  __half(double d)
      : __x(ada::hostrun::lowp::f32_to_f16_rne(ada::hostrun::lowp::f64_to_f32_round_odd(d))) {}
  template <typename I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  __half(I v) : __half(static_cast<double>(v)) {}
  operator float() const { return ada::hostrun::lowp::f16_to_f32(__x); }
};
using half = __half;

inline __half __ushort_as_half(unsigned short b) {
  __half r;
  r.__x = b;
  return r;
}
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __float2half(float f) { return __ushort_as_half(ada::hostrun::lowp::f32_to_f16_rne(f)); }
inline __half __float2half_rn(float f) { return __float2half(f); }
inline float __half2float(__half h) { return ada::hostrun::lowp::f16_to_f32(h.__x); }

inline __half operator+(__half a, __half b) { return __float2half(float(a) + float(b)); }
inline __half operator-(__half a, __half b) { return __float2half(float(a) - float(b)); }
inline __half operator*(__half a, __half b) { return __float2half(float(a) * float(b)); }
inline __half operator/(__half a, __half b) { return __half(double(float(a)) / double(float(b))); }
inline __half operator-(__half a) { return __ushort_as_half(a.__x ^ 0x8000u); }
inline __half& operator+=(__half& a, __half b) { return a = a + b; }
inline __half& operator-=(__half& a, __half b) { return a = a - b; }
inline __half& operator*=(__half& a, __half b) { return a = a * b; }
inline __half& operator/=(__half& a, __half b) { return a = a / b; }
