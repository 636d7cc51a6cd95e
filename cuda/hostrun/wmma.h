// nvcuda::wmma (tensor-core tile operations) for the host runner.
//
// Representation: CUDA leaves the mapping of fragment elements to lanes
// unspecified, so it is legal for every lane to hold the whole tile. Here a
// fragment is the full tile in row-major order (x[r * cols + c], num_elements =
// rows * cols) and every lane of the warp carries an identical copy. Kernel code
// that only uses the API, or applies the same elementwise operation to all
// frag.num_elements elements, behaves as on the GPU.
//
// The *_sync functions are warp-synchronous points, with these semantics:
//   load_matrix_sync   each lane reads the tile, then the warp meets and checks
//                      that all lanes read the same (so a missing
//                      __syncwarp/__syncthreads before the load is exposed);
//   store_matrix_sync  the warp meets, checks that all lanes hold the same
//                      fragment, then each lane writes its share of the
//                      elements (a missing sync after it is exposed);
//   mma_sync           the warp meets, checks the lanes agree, and the product
//                      is computed once and handed to every lane.
// All three need the full warp (32 existing, converged lanes); loads and stores
// also need a 256-bit aligned pointer and a leading dimension that is a
// multiple of 16 bytes. These are the documented CUDA requirements, and a
// launch that breaks them fails.
//
// Arithmetic: products are exact and the k-sum is formed in double, then
// rounded once to the accumulator type. Tensor cores accumulate in fp32 (with
// truncation), so the runner is slightly more accurate than the GPU; test
// tolerances must allow for the GPU. TF32: the hardware ignores the low 13
// significand bits of its float inputs, and so does mma_sync here;
// __float_to_tf32 rounds to nearest, ties away from zero (cvt.rna.tf32.f32).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "hostrun/device.h"
#include "hostrun/lowp.h"
#include "hostrun/scheduler.h"

namespace nvcuda {
namespace wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 {};
}  // namespace precision

// Round to TF32 (1 sign, 8 exponent, 10 significand bits, kept in a float):
// nearest, ties away from zero; NaN stays NaN, overflow rounds to infinity.
inline float __float_to_tf32(float in) {
  const uint32_t u = ada::hostrun::lowp::f32_bits(in);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ada::hostrun::lowp::bits_f32(0x7fffffffu);
  return ada::hostrun::lowp::bits_f32((u + 0x1000u) & 0xffffe000u);
}

namespace detail {

template <typename Use, int M, int N, int K> struct shape;
template <int M, int N, int K> struct shape<matrix_a, M, N, K> { static constexpr int rows = M, cols = K; };
template <int M, int N, int K> struct shape<matrix_b, M, N, K> { static constexpr int rows = K, cols = N; };
template <int M, int N, int K> struct shape<accumulator, M, N, K> { static constexpr int rows = M, cols = N; };

template <typename T> struct storage { using type = T; };
template <> struct storage<precision::tf32> { using type = float; };

template <typename T> constexpr bool is_layout = std::is_same_v<T, row_major> || std::is_same_v<T, col_major>;

// The shapes CUDA offers for these element types on sm_80/sm_90.
template <typename Use, int M, int N, int K, typename T>
constexpr bool legal() {
  if constexpr (std::is_same_v<Use, accumulator>) {
    return ((M == 16 && N == 16 && K == 16) || (M == 32 && N == 8 && K == 16) ||
            (M == 8 && N == 32 && K == 16) || (M == 16 && N == 16 && K == 8)) &&
           (std::is_same_v<T, float> || std::is_same_v<T, __half>);
  } else if constexpr (std::is_same_v<T, precision::tf32>) {
    return M == 16 && N == 16 && K == 8;
  } else {
    return ((M == 16 && N == 16 && K == 16) || (M == 32 && N == 8 && K == 16) ||
            (M == 8 && N == 32 && K == 16)) &&
           (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>);
  }
}

}  // namespace detail

template <typename Use, int m, int n, int k, typename T, typename Layout = void>
class fragment {
  static_assert(detail::legal<Use, m, n, k, T>(),
                "wmma: unsupported fragment (shapes: m16n16k16, m32n8k16, m8n32k16 with bf16/half, "
                "m16n16k8 with precision::tf32; accumulators float or half)");
  static_assert(std::is_same_v<Use, accumulator> ? std::is_void_v<Layout> : detail::is_layout<Layout>,
                "wmma: matrix_a/matrix_b fragments need row_major or col_major, accumulators none");

 public:
  using element_type = T;
  using storage_element_type = typename detail::storage<T>::type;
  static constexpr int rows = detail::shape<Use, m, n, k>::rows;
  static constexpr int cols = detail::shape<Use, m, n, k>::cols;
  enum : unsigned { num_elements = rows * cols, num_storage_elements = rows * cols };
  storage_element_type x[num_elements];
};

template <typename Use, int m, int n, int k, typename T, typename L>
void fill_fragment(fragment<Use, m, n, k, T, L>& f,
                   const typename fragment<Use, m, n, k, T, L>::storage_element_type& v) {
  for (unsigned i = 0; i < f.num_elements; ++i) f.x[i] = v;
}

namespace detail {

using ada::hostrun::WarpCall;

inline double to_double(float v) { return v; }
inline double to_double(__nv_bfloat16 v) { return static_cast<float>(v); }
inline double to_double(__half v) { return static_cast<float>(v); }

// What a tensor core sees of a TF32 input: the float with its low 13
// significand bits dropped (NaN kept NaN).
inline double tf32_input(float v) {
  const uint32_t u = ada::hostrun::lowp::f32_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<double>(v);
  return ada::hostrun::lowp::bits_f32(u & 0xffffe000u);
}

template <typename T> struct from_double;
template <> struct from_double<float> { static float get(double d) { return static_cast<float>(d); } };
template <> struct from_double<__half> { static __half get(double d) { return __half(d); } };

inline void check_pointer(const char* what, const void* p, unsigned ldm, size_t elem_bytes) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    ada::hostrun::kernel_fail(std::string(what) + ": pointer must be 256-bit (32-byte) aligned");
  if ((size_t(ldm) * elem_bytes) % 16 != 0)
    ada::hostrun::kernel_fail(std::string(what) + ": ldm must be a multiple of 16 bytes (" +
                              std::to_string(ldm) + " elements given)");
}

// The warp meeting. `frag` points to this lane's fragment (`bytes` long);
// `work` (may be null) runs once, in the last lane to arrive, with every lane's
// meeting record.
struct Meet : ada::hostrun::WarpCall {
  const void* frag = nullptr;
  size_t bytes = 0;
  const void* a = nullptr;  // mma operands of this lane
  const void* b = nullptr;
  void* d = nullptr;
};

inline void require_full_warp(const char* name, unsigned group) {
  if (group != 0xffffffffu)
    ada::hostrun::kernel_fail(std::string(name) +
                              " needs all 32 lanes of a warp (the block's last warp is partial, "
                              "or lanes are missing from the mask)");
}

constexpr const char* kLaneDependent =
    "elementwise fragment code must not depend on the lane (the element-to-lane mapping is "
    "unspecified)";
constexpr const char* kLoadDiffers =
    "the lanes loaded different tiles: the pointer or ldm differs between lanes, or the memory "
    "changed while the warp was loading (a missing __syncwarp()/__syncthreads() before the load?)";

// Under the runner every lane must hold the same fragment (see the top).
inline void require_same(const char* name, const char* why, WarpCall* const* lanes,
                         const void* Meet::*field, size_t bytes) {
  const auto* first = static_cast<const Meet*>(lanes[0]);
  for (int l = 1; l < 32; ++l)
    if (std::memcmp(static_cast<const Meet*>(lanes[l])->*field, first->*field, bytes) != 0)
      ada::hostrun::kernel_fail(std::string(name) + ": lanes 0 and " + std::to_string(l) +
                                " hold different fragments; " + why);
}

template <typename Tag>
void complete_check(WarpCall* const* lanes, unsigned group) {
  require_full_warp(Tag::name, group);
  require_same(Tag::name, Tag::why, lanes, &Meet::frag, static_cast<const Meet*>(lanes[0])->bytes);
}
struct LoadTag {
  static constexpr const char* name = "wmma::load_matrix_sync";
  static constexpr const char* why = kLoadDiffers;
};
struct StoreTag {
  static constexpr const char* name = "wmma::store_matrix_sync";
  static constexpr const char* why = kLaneDependent;
};

template <typename Frag>
void meet(Frag& f, void (*complete)(WarpCall* const*, unsigned), const char* name) {
  Meet c;
  c.complete = complete;
  c.name = name;
  c.frag = &f;
  c.bytes = sizeof f;
  ada::hostrun::warp_sync_point(0xffffffffu, &c);
}

template <typename Frag, typename P>
void load(Frag& f, const P* p, unsigned ldm, bool row_major_mem) {
  check_pointer(LoadTag::name, p, ldm, sizeof(P));
  for (int r = 0; r < Frag::rows; ++r)
    for (int c = 0; c < Frag::cols; ++c)
      f.x[r * Frag::cols + c] = row_major_mem ? p[size_t(r) * ldm + c] : p[size_t(c) * ldm + r];
  meet(f, complete_check<LoadTag>, LoadTag::name);
}

}  // namespace detail

template <typename Use, int m, int n, int k, typename T, typename L>
void load_matrix_sync(fragment<Use, m, n, k, T, L>& f,
                      const typename fragment<Use, m, n, k, T, L>::storage_element_type* p, unsigned ldm) {
  static_assert(!std::is_same_v<Use, accumulator>, "wmma: accumulator loads take a layout_t");
  detail::load(f, p, ldm, std::is_same_v<L, row_major>);
}

template <int m, int n, int k, typename T>
void load_matrix_sync(fragment<accumulator, m, n, k, T>& f, const T* p, unsigned ldm, layout_t layout) {
  detail::load(f, p, ldm, layout == mem_row_major);
}

template <int m, int n, int k, typename T>
void store_matrix_sync(T* p, const fragment<accumulator, m, n, k, T>& f, unsigned ldm, layout_t layout) {
  using Frag = fragment<accumulator, m, n, k, T>;
  detail::check_pointer(detail::StoreTag::name, p, ldm, sizeof(T));
  detail::meet(f, detail::complete_check<detail::StoreTag>, detail::StoreTag::name);
  // This lane's share: elements lane, lane + 32, ... (any mapping is legal).
  for (unsigned e = ada::hostrun::current_lane(); e < Frag::num_elements; e += 32) {
    const unsigned r = e / Frag::cols, c = e % Frag::cols;
    if (layout == mem_row_major) p[size_t(r) * ldm + c] = f.x[e];
    else p[size_t(c) * ldm + r] = f.x[e];
  }
}

namespace detail {

template <typename FD, typename FA, typename FB, typename FC>
void complete_mma(WarpCall* const* lanes, unsigned group) {
  constexpr const char* name = "wmma::mma_sync";
  require_full_warp(name, group);
  require_same(name, kLaneDependent, lanes, &Meet::frag, sizeof(FC));
  require_same(name, kLaneDependent, lanes, &Meet::a, sizeof(FA));
  require_same(name, kLaneDependent, lanes, &Meet::b, sizeof(FB));
  const auto* lane0 = static_cast<const Meet*>(lanes[0]);
  const FA& a = *static_cast<const FA*>(lane0->a);
  const FB& b = *static_cast<const FB*>(lane0->b);
  const FC& c = *static_cast<const FC*>(lane0->frag);
  constexpr int M = FC::rows, N = FC::cols, K = FA::cols;
  constexpr bool tf32 = std::is_same_v<typename FA::element_type, precision::tf32>;
  typename FD::storage_element_type out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int kk = 0; kk < K; ++kk) {
        if constexpr (tf32)
          acc += tf32_input(a.x[i * K + kk]) * tf32_input(b.x[kk * N + j]);
        else
          acc += to_double(a.x[i * K + kk]) * to_double(b.x[kk * N + j]);
      }
      out[i * N + j] = from_double<typename FD::storage_element_type>::get(acc + to_double(c.x[i * N + j]));
    }
  for (int l = 0; l < 32; ++l)
    std::memcpy(static_cast<const Meet*>(lanes[l])->d, out, sizeof out);
}

}  // namespace detail

template <int m, int n, int k, typename TD, typename TA, typename LA, typename TB, typename LB, typename TC>
void mma_sync(fragment<accumulator, m, n, k, TD>& d, const fragment<matrix_a, m, n, k, TA, LA>& a,
              const fragment<matrix_b, m, n, k, TB, LB>& b, const fragment<accumulator, m, n, k, TC>& c,
              bool satf = false) {
  static_assert(std::is_same_v<TA, TB>, "wmma::mma_sync: matrix_a and matrix_b element types differ");
  using FD = fragment<accumulator, m, n, k, TD>;
  using FA = fragment<matrix_a, m, n, k, TA, LA>;
  using FB = fragment<matrix_b, m, n, k, TB, LB>;
  using FC = fragment<accumulator, m, n, k, TC>;
  if (satf) ada::hostrun::kernel_fail("wmma::mma_sync: satf=true is not supported by the host runner");
  detail::Meet call;
  call.complete = detail::complete_mma<FD, FA, FB, FC>;
  call.name = "wmma::mma_sync";
  call.frag = &c;
  call.bytes = sizeof c;
  call.a = &a;
  call.b = &b;
  call.d = &d;
  ada::hostrun::warp_sync_point(0xffffffffu, &call);
}

}  // namespace wmma
}  // namespace nvcuda
