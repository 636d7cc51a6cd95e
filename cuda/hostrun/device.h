// The CUDA device-side language for the host runner: the function and memory
// space keywords, the thread coordinates, barriers, warp intrinsics, atomics
// and the device math intrinsics, all mapped onto plain C++ and the scheduler.
#pragma once
#include <math.h>  // the C math functions in the global namespace, as kernels use them

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hostrun/lowp.h"
#include "hostrun/racecheck.h"
#include "hostrun/scheduler.h"
#include "hostrun/vector_types.h"

// ---------------------------------------------------------------------------
// Keywords. Functions are ordinary functions; every function may run "on the
// device". __CUDA_ARCH__ stays undefined, so `#if __CUDA_ARCH__ >= 800` code
// takes its host path; ADA_HOSTRUN tells kernel code it runs under the runner.
#define ADA_HOSTRUN 1
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// (__restrict__ is already a GCC/Clang keyword. __noinline__ is deliberately
// not defined: libstdc++ spells __attribute__((__noinline__)) in its own headers,
// which such a macro would break; write __attribute__((noinline)) if needed.)

// __shared__ memory is one copy per block and blocks run one after another, so a
// static variable is exactly right. The section lets the scheduler poison every
// __shared__ variable before each block (scheduler.h, Config::poison_shared).
// `extern __shared__` (dynamic shared memory) cannot work this way: use
// DYNAMIC_SHARED from compat.h instead.
#define __shared__ __attribute__((section("ada_hostrun_shared"))) static

// ---------------------------------------------------------------------------
// Thread coordinates: read-only views of the scheduler's globals, rewritten
// before every fiber resumes (they are only read between two scheduler calls,
// which the compiler must treat as possibly changing them).
inline const uint3& threadIdx = ada::hostrun::detail::thread_idx;
inline const uint3& blockIdx = ada::hostrun::detail::block_idx;
inline const dim3& blockDim = ada::hostrun::detail::block_dim;
inline const dim3& gridDim = ada::hostrun::detail::grid_dim;
constexpr int warpSize = 32;

// ---------------------------------------------------------------------------
// Block barriers. Macros so that the scheduler can check that all threads wait
// at the same call site.
#define __syncthreads() ((void)::ada::hostrun::block_barrier(__FILE__, __LINE__, 0))
#define __syncthreads_count(pred) ::ada::hostrun::block_barrier(__FILE__, __LINE__, (pred))
#define __syncthreads_or(pred) (::ada::hostrun::block_barrier(__FILE__, __LINE__, (pred)) != 0)
#define __syncthreads_and(pred)                                           \
  (::ada::hostrun::block_barrier(__FILE__, __LINE__, (pred)) ==           \
   static_cast<int>(blockDim.x * blockDim.y * blockDim.z))

// Memory fences: every fiber runs on one OS thread, so only the compiler must
// be kept from moving memory accesses across them.
inline void __threadfence() { std::atomic_signal_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_signal_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_signal_fence(std::memory_order_seq_cst); }

// ---------------------------------------------------------------------------
// Warp-collective operations. Each lane deposits its operand in a record on its
// own stack and waits at a warp sync point; the last lane of the group computes
// every lane's result (scheduler.h, WarpCall).
namespace ada::hostrun {

enum class ShflMode { Idx, Up, Down, Xor };

struct ShflCall : WarpCall {
  uint64_t value = 0;  // this lane's operand, as raw bits
  ShflMode mode = ShflMode::Idx;
  int arg = 0;  // source lane, delta or xor mask
  int width = 32;
  uint64_t result = 0;
};

// The source lane CUDA defines for each mode; `lane` itself means "keep your
// own value" (the source is outside the lane's width-sized segment).
inline unsigned shfl_source(unsigned lane, ShflMode mode, int arg, int width) {
  const unsigned w = static_cast<unsigned>(width);
  const unsigned base = lane & ~(w - 1u);
  switch (mode) {
    case ShflMode::Idx:
      return base | (static_cast<unsigned>(arg) & (w - 1u));
    case ShflMode::Up: {
      const int src = static_cast<int>(lane) - arg;
      return src < static_cast<int>(base) ? lane : static_cast<unsigned>(src);
    }
    case ShflMode::Down: {
      const unsigned src = lane + static_cast<unsigned>(arg);
      return src >= base + w ? lane : src;
    }
    case ShflMode::Xor: {  // earlier segments may be read, later ones not
      const unsigned src = lane ^ static_cast<unsigned>(arg);
      return src >= base + w ? lane : src;
    }
  }
  return lane;
}

inline void complete_shfl(WarpCall* const* lanes, unsigned group) {
  for (unsigned g = group; g; g &= g - 1) {
    const unsigned lane = static_cast<unsigned>(__builtin_ctz(g));
    auto* me = static_cast<ShflCall*>(lanes[lane]);
    const unsigned src = shfl_source(lane, me->mode, me->arg, me->width);
    if (src == lane)
      me->result = me->value;
    else if (src < 32 && ((group >> src) & 1u))
      me->result = static_cast<ShflCall*>(lanes[src])->value;
    else
      me->result = ~uint64_t(0);  // source lane not taking part: undefined in CUDA; NaN / -1 here
  }
}

template <typename T>
T shfl(const char* name, unsigned mask, T var, ShflMode mode, int arg, int width) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "warp shuffles move values of at most 8 bytes");
  if (width < 1 || width > 32 || (width & (width - 1)))
    kernel_fail(std::string(name) + ": width must be a power of two in 1..32");
  ShflCall c;
  c.complete = complete_shfl;
  c.name = name;
  std::memcpy(&c.value, &var, sizeof(T));
  c.mode = mode;
  c.arg = arg;
  c.width = width;
  warp_sync_point(mask, &c);
  T out;
  std::memcpy(&out, &c.result, sizeof(T));
  return out;
}

enum class VoteMode { Ballot, Any, All, Sync };

struct VoteCall : WarpCall {
  int predicate = 0;
  VoteMode mode = VoteMode::Sync;
  unsigned result = 0;
};

inline void complete_vote(WarpCall* const* lanes, unsigned group) {
  unsigned ballot = 0;
  for (unsigned g = group; g; g &= g - 1) {
    const unsigned lane = static_cast<unsigned>(__builtin_ctz(g));
    if (static_cast<VoteCall*>(lanes[lane])->predicate) ballot |= 1u << lane;
  }
  for (unsigned g = group; g; g &= g - 1) {
    auto* me = static_cast<VoteCall*>(lanes[__builtin_ctz(g)]);
    switch (me->mode) {
      case VoteMode::Ballot: me->result = ballot; break;
      case VoteMode::Any: me->result = ballot != 0; break;
      case VoteMode::All: me->result = ballot == group; break;
      case VoteMode::Sync: me->result = 0; break;
    }
  }
}

inline unsigned vote(const char* name, unsigned mask, int predicate, VoteMode mode) {
  VoteCall c;
  c.complete = complete_vote;
  c.name = name;
  c.predicate = predicate;
  c.mode = mode;
  warp_sync_point(mask, &c);
  return c.result;
}

enum class ReduceOp { Add, Min, Max, And, Or, Xor, MatchAny };

struct ReduceCall : WarpCall {
  uint64_t value = 0;
  bool is_signed = false;
  ReduceOp op = ReduceOp::Add;
  uint64_t result = 0;
};

inline void complete_reduce(WarpCall* const* lanes, unsigned group) {
  const auto* first = static_cast<ReduceCall*>(lanes[__builtin_ctz(group)]);
  if (first->op == ReduceOp::MatchAny) {  // per lane: the lanes holding the same value
    for (unsigned g = group; g; g &= g - 1) {
      auto* me = static_cast<ReduceCall*>(lanes[__builtin_ctz(g)]);
      unsigned same = 0;
      for (unsigned h = group; h; h &= h - 1) {
        const unsigned lane = static_cast<unsigned>(__builtin_ctz(h));
        if (static_cast<ReduceCall*>(lanes[lane])->value == me->value) same |= 1u << lane;
      }
      me->result = same;
    }
    return;
  }
  uint64_t acc = first->value;
  for (unsigned g = group & (group - 1); g; g &= g - 1) {
    const uint64_t v = static_cast<ReduceCall*>(lanes[__builtin_ctz(g)])->value;
    const auto sv = static_cast<int32_t>(v), sacc = static_cast<int32_t>(acc);
    switch (first->op) {
      case ReduceOp::Add: acc = static_cast<uint32_t>(acc + v); break;
      case ReduceOp::Min:
        acc = first->is_signed ? static_cast<uint32_t>(sv < sacc ? sv : sacc) : (v < acc ? v : acc);
        break;
      case ReduceOp::Max:
        acc = first->is_signed ? static_cast<uint32_t>(sv > sacc ? sv : sacc) : (v > acc ? v : acc);
        break;
      case ReduceOp::And: acc &= v; break;
      case ReduceOp::Or: acc |= v; break;
      case ReduceOp::Xor: acc ^= v; break;
      case ReduceOp::MatchAny: break;
    }
  }
  for (unsigned g = group; g; g &= g - 1) static_cast<ReduceCall*>(lanes[__builtin_ctz(g)])->result = acc;
}

inline uint64_t reduce(const char* name, unsigned mask, uint64_t value, bool is_signed, ReduceOp op) {
  ReduceCall c;
  c.complete = complete_reduce;
  c.name = name;
  c.value = value;
  c.is_signed = is_signed;
  c.op = op;
  warp_sync_point(mask, &c);
  return c.result;
}

}  // namespace ada::hostrun

template <typename T>
T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize) {
  return ada::hostrun::shfl("__shfl_sync", mask, var, ada::hostrun::ShflMode::Idx, srcLane, width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize) {
  return ada::hostrun::shfl("__shfl_up_sync", mask, var, ada::hostrun::ShflMode::Up,
                            static_cast<int>(delta), width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize) {
  return ada::hostrun::shfl("__shfl_down_sync", mask, var, ada::hostrun::ShflMode::Down,
                            static_cast<int>(delta), width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize) {
  return ada::hostrun::shfl("__shfl_xor_sync", mask, var, ada::hostrun::ShflMode::Xor, laneMask,
                            width);
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ada::hostrun::vote("__ballot_sync", mask, predicate, ada::hostrun::VoteMode::Ballot);
}
inline int __any_sync(unsigned mask, int predicate) {
  return static_cast<int>(
      ada::hostrun::vote("__any_sync", mask, predicate, ada::hostrun::VoteMode::Any));
}
inline int __all_sync(unsigned mask, int predicate) {
  return static_cast<int>(
      ada::hostrun::vote("__all_sync", mask, predicate, ada::hostrun::VoteMode::All));
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ada::hostrun::vote("__syncwarp", mask, 0, ada::hostrun::VoteMode::Sync);
}
// __activemask() reports which lanes happen to be converged, which the runner
// cannot know (its lanes never run together). Using it is a compile error here;
// build masks with __ballot_sync instead, which is also the portable way.
template <typename Unsupported = void>
unsigned __activemask() {
  static_assert(sizeof(Unsupported) == 0,
                "__activemask() is not supported by the host runner; derive masks with __ballot_sync");
  return 0;
}

inline unsigned __reduce_add_sync(unsigned mask, unsigned v) {
  return static_cast<unsigned>(ada::hostrun::reduce("__reduce_add_sync", mask, v, false, ada::hostrun::ReduceOp::Add));
}
inline int __reduce_add_sync(unsigned mask, int v) {
  return static_cast<int>(ada::hostrun::reduce("__reduce_add_sync", mask, static_cast<uint32_t>(v), true, ada::hostrun::ReduceOp::Add));
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned v) {
  return static_cast<unsigned>(ada::hostrun::reduce("__reduce_min_sync", mask, v, false, ada::hostrun::ReduceOp::Min));
}
inline int __reduce_min_sync(unsigned mask, int v) {
  return static_cast<int>(ada::hostrun::reduce("__reduce_min_sync", mask, static_cast<uint32_t>(v), true, ada::hostrun::ReduceOp::Min));
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) {
  return static_cast<unsigned>(ada::hostrun::reduce("__reduce_max_sync", mask, v, false, ada::hostrun::ReduceOp::Max));
}
inline int __reduce_max_sync(unsigned mask, int v) {
  return static_cast<int>(ada::hostrun::reduce("__reduce_max_sync", mask, static_cast<uint32_t>(v), true, ada::hostrun::ReduceOp::Max));
}
inline unsigned __reduce_and_sync(unsigned mask, unsigned v) {
  return static_cast<unsigned>(ada::hostrun::reduce("__reduce_and_sync", mask, v, false, ada::hostrun::ReduceOp::And));
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned v) {
  return static_cast<unsigned>(ada::hostrun::reduce("__reduce_or_sync", mask, v, false, ada::hostrun::ReduceOp::Or));
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned v) {
  return static_cast<unsigned>(ada::hostrun::reduce("__reduce_xor_sync", mask, v, false, ada::hostrun::ReduceOp::Xor));
}
template <typename T>
unsigned __match_any_sync(unsigned mask, T value) {
  static_assert(std::is_integral_v<T> || std::is_floating_point_v<T>, "__match_any_sync: scalar");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return static_cast<unsigned>(ada::hostrun::reduce("__match_any_sync", mask, bits, false, ada::hostrun::ReduceOp::MatchAny));
}

// ---------------------------------------------------------------------------
// Atomics. Only one kernel thread runs at any moment and it is never
// interrupted between two scheduler calls, so a plain read-modify-write is
// atomic here. Each returns the old value, as in CUDA. The race check leaves
// atomically updated words out of its comparison (racecheck.h).
namespace ada::hostrun {
template <typename T, typename F>
T atomic_rmw(T* address, F f) {
  if (detail::race_check_atomics) note_atomic(address, sizeof(T));
  const T old = *address;
  *address = f(old);
  return old;
}
}  // namespace ada::hostrun

#define ADA_HOSTRUN_ATOMIC(name, T, expr) \
  inline T name(T* address, T val) {      \
    return ada::hostrun::atomic_rmw(address, [val]([[maybe_unused]] T old) { return static_cast<T>(expr); }); \
  }
ADA_HOSTRUN_ATOMIC(atomicAdd, int, old + val)
ADA_HOSTRUN_ATOMIC(atomicAdd, unsigned int, old + val)
ADA_HOSTRUN_ATOMIC(atomicAdd, unsigned long long, old + val)
ADA_HOSTRUN_ATOMIC(atomicAdd, float, old + val)
ADA_HOSTRUN_ATOMIC(atomicAdd, double, old + val)
ADA_HOSTRUN_ATOMIC(atomicAdd, __nv_bfloat16, old + val)
ADA_HOSTRUN_ATOMIC(atomicAdd, __half, old + val)
ADA_HOSTRUN_ATOMIC(atomicSub, int, old - val)
ADA_HOSTRUN_ATOMIC(atomicSub, unsigned int, old - val)
ADA_HOSTRUN_ATOMIC(atomicExch, int, val)
ADA_HOSTRUN_ATOMIC(atomicExch, unsigned int, val)
ADA_HOSTRUN_ATOMIC(atomicExch, unsigned long long, val)
ADA_HOSTRUN_ATOMIC(atomicExch, float, val)
ADA_HOSTRUN_ATOMIC(atomicMax, int, old > val ? old : val)
ADA_HOSTRUN_ATOMIC(atomicMax, unsigned int, old > val ? old : val)
ADA_HOSTRUN_ATOMIC(atomicMax, long long, old > val ? old : val)
ADA_HOSTRUN_ATOMIC(atomicMax, unsigned long long, old > val ? old : val)
ADA_HOSTRUN_ATOMIC(atomicMin, int, old < val ? old : val)
ADA_HOSTRUN_ATOMIC(atomicMin, unsigned int, old < val ? old : val)
ADA_HOSTRUN_ATOMIC(atomicMin, long long, old < val ? old : val)
ADA_HOSTRUN_ATOMIC(atomicMin, unsigned long long, old < val ? old : val)
ADA_HOSTRUN_ATOMIC(atomicAnd, int, old & val)
ADA_HOSTRUN_ATOMIC(atomicAnd, unsigned int, old & val)
ADA_HOSTRUN_ATOMIC(atomicAnd, unsigned long long, old & val)
ADA_HOSTRUN_ATOMIC(atomicOr, int, old | val)
ADA_HOSTRUN_ATOMIC(atomicOr, unsigned int, old | val)
ADA_HOSTRUN_ATOMIC(atomicOr, unsigned long long, old | val)
ADA_HOSTRUN_ATOMIC(atomicXor, int, old ^ val)
ADA_HOSTRUN_ATOMIC(atomicXor, unsigned int, old ^ val)
ADA_HOSTRUN_ATOMIC(atomicXor, unsigned long long, old ^ val)
// CUDA's wrapping counters: inc wraps to 0 past val, dec wraps to val below 1.
ADA_HOSTRUN_ATOMIC(atomicInc, unsigned int, old >= val ? 0u : old + 1u)
ADA_HOSTRUN_ATOMIC(atomicDec, unsigned int, (old == 0u || old > val) ? val : old - 1u)
#undef ADA_HOSTRUN_ATOMIC

inline int atomicCAS(int* address, int compare, int val) {
  const int old = *address;
  if (old == compare) *address = val;
  return old;
}
inline unsigned int atomicCAS(unsigned int* address, unsigned int compare, unsigned int val) {
  const unsigned int old = *address;
  if (old == compare) *address = val;
  return old;
}
inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare,
                                    unsigned long long val) {
  const unsigned long long old = *address;
  if (old == compare) *address = val;
  return old;
}
inline unsigned short atomicCAS(unsigned short* address, unsigned short compare,
                                unsigned short val) {
  const unsigned short old = *address;
  if (old == compare) *address = val;
  return old;
}

// ---------------------------------------------------------------------------
// Math and bit intrinsics. The fast-math versions (__expf, __logf, ...) are the
// accurate library functions here: the runner is at least as accurate as the
// GPU, so tolerances must come from the GPU side.
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline void __sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return x != x ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }

inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; std::memcpy(&x, &i, 4); return x; }
inline unsigned int __float_as_uint(float x) { unsigned u; std::memcpy(&u, &x, 4); return u; }
inline float __uint_as_float(unsigned int u) { float x; std::memcpy(&x, &u, 4); return x; }
inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
inline double __longlong_as_double(long long i) { double x; std::memcpy(&x, &i, 8); return x; }

inline int __float2int_rn(float x) { return static_cast<int>(nearbyintf(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(floorf(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(ceilf(x)); }
inline unsigned int __float2uint_rn(float x) { return static_cast<unsigned>(nearbyintf(x)); }
inline float __int2float_rn(int i) { return static_cast<float>(i); }
inline float __uint2float_rn(unsigned int u) { return static_cast<float>(u); }

inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
inline int __mul24(int a, int b) { return (a << 8 >> 8) * (b << 8 >> 8); }
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
inline int __mulhi(int a, int b) { return static_cast<int>((int64_t(a) * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((uint64_t(a) * b) >> 32); }

// min/max as CUDA provides them for device code (integers and floats).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline unsigned int min(int a, unsigned int b) { return min(static_cast<unsigned>(a), b); }
inline unsigned int min(unsigned int a, int b) { return min(a, static_cast<unsigned>(b)); }
inline unsigned int max(int a, unsigned int b) { return max(static_cast<unsigned>(a), b); }
inline unsigned int max(unsigned int a, int b) { return max(a, static_cast<unsigned>(b)); }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(float a, double b) { return fmin(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double max(double a, float b) { return fmax(a, b); }

template <typename T>
T __ldg(const T* p) { return *p; }

inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline void __nanosleep(unsigned) {}
[[noreturn]] inline void __trap() { ada::hostrun::kernel_fail("__trap() called"); }
