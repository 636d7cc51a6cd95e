// Top-K values of each row (src/ops/topk.h): TaH2's decider input.
//   x (N, V);  vals, idx (N, K), K <= min(V, kMaxK)
//   forward:  idx[n, :] = the columns of the K largest x[n, :], descending,
//             ties by the lower column;  vals[n, j] = x[n, idx[n, j]]
//   backward: dx[n, idx[n, j]] += dvals[n, j]
// Forward: one block of kThreads per row, three phases.
//   1. Radix select of the K-th largest value: the floats are mapped to
//      order-preserving 32-bit keys (larger float, larger key; -0 as +0) and
//      the key of the K-th largest is found 8 bits at a time, from the top:
//      a 256-bin histogram of the keys that match the digits found so far,
//      then the bin in which the K-th largest falls. After 4 passes over the
//      row: the K-th key kth and `need`, how many of the keys equal to kth
//      belong to the top K (the others above kth all do).
//   2. Gather the survivors into shared memory: every key > kth, and the
//      `need` lowest columns whose key == kth (a block-wide count in column
//      order: warp ballots, then per-warp totals), so ties are broken exactly
//      as the CPU does.
//   3. Bitonic sort of the K survivors (padded to a power of two P) by
//      (key descending, column ascending); write them out.
// Backward: one thread per (row, j), a scatter-add (the columns of a row are
// distinct).
#include <climits>

#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxK = kTopKMax;
constexpr int kThreadsBwd = 256;

// Larger float -> larger unsigned key; -0 and +0 get the same key.
__device__ __forceinline__ unsigned order_key(float f) {
  const unsigned u = f == 0.0f ? 0u : __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// (ka, ia) comes before (kb, ib): larger key, or the same key and the lower column.
__device__ __forceinline__ bool before(unsigned ka, int ia, unsigned kb, int ib) {
  return ka > kb || (ka == kb && ia < ib);
}

__global__ void __launch_bounds__(kThreads)
    topk_forward_kernel(float* vals, int* idx, const float* x, int V, int K, int P) {
  __shared__ unsigned hist[256];
  __shared__ unsigned skey[kMaxK];
  __shared__ int sidx[kMaxK];
  __shared__ int warp_cnt[kWarps];
  __shared__ unsigned s_prefix;
  __shared__ int s_need, s_above;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const size_t row = blockIdx.x;
  const float* xn = x + row * V;

  // 1. radix select
  if (tid == 0) s_prefix = 0u, s_need = K, s_above = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += kThreads) hist[i] = 0u;
    __syncthreads();  // the histogram is clear; s_prefix is the digits found so far
    const unsigned prefix = s_prefix;
    const unsigned mask = shift == 24 ? 0u : 0xffffffffu << (shift + 8);  // the digits found so far
    for (int v = tid; v < V; v += kThreads) {
      const unsigned k = order_key(xn[v]);
      if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid == 0) {  // from the top bin down, the bin that holds the need-th largest
      int need = s_need, d = 255;
      while (static_cast<int>(hist[d]) < need) need -= static_cast<int>(hist[d--]);
      s_need = need;
      s_prefix = prefix | (static_cast<unsigned>(d) << shift);
    }
    __syncthreads();  // thread 0 is done with the histogram before the next pass clears it
  }
  const unsigned kth = s_prefix;
  const int need = s_need;  // keys == kth that belong to the top K; the K - need above kth all do

  // 2. gather: keys above kth anywhere in [0, K - need); the first `need`
  // columns with key == kth, in column order, in [K - need, K)
  int eq_base = 0;  // keys == kth in earlier chunks (the same in every thread)
  for (int base = 0; base < V; base += kThreads) {
    const int v = base + tid;
    const unsigned k = v < V ? order_key(xn[v]) : 0u;
    const bool above = v < V && k > kth, equal = v < V && k == kth;
    if (above) {
      const int p = atomicAdd(&s_above, 1);
      skey[p] = k, sidx[p] = v;
    }
    const unsigned ballot = __ballot_sync(kFullMask, equal);
    if (lane == 0) warp_cnt[warp] = __popc(ballot);
    __syncthreads();
    int earlier = 0, total = 0;  // equal keys of this chunk in lower warps, and in all
    for (int w = 0; w < kWarps; w++) {
      earlier += w < warp ? warp_cnt[w] : 0;
      total += warp_cnt[w];
    }
    if (equal) {
      const int r = eq_base + earlier + __popc(ballot & ((1u << lane) - 1u));
      if (r < need) skey[K - need + r] = k, sidx[K - need + r] = v;
    }
    eq_base += total;
    __syncthreads();  // warp_cnt is read before the next chunk overwrites it
  }

  // 3. bitonic sort of P entries (the padding sorts last)
  for (int i = K + tid; i < P; i += kThreads) skey[i] = 0u, sidx[i] = INT_MAX;
  __syncthreads();
  for (int size = 2; size <= P; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = tid; i < P; i += kThreads) {
        const int j = i ^ stride;
        if (j > i) {  // each pair is handled once, by its lower element's thread
          const bool up = (i & size) == 0;  // this run ends in "before" order, or reversed
          const bool swap = up ? before(skey[j], sidx[j], skey[i], sidx[i]) : before(skey[i], sidx[i], skey[j], sidx[j]);
          if (swap) {
            const unsigned tk = skey[i];
            const int ti = sidx[i];
            skey[i] = skey[j], sidx[i] = sidx[j];
            skey[j] = tk, sidx[j] = ti;
          }
        }
      }
      __syncthreads();
    }
  for (int j = tid; j < K; j += kThreads) {
    idx[row * K + j] = sidx[j];
    vals[row * K + j] = xn[sidx[j]];
  }
}

__global__ void __launch_bounds__(kThreadsBwd)
    topk_backward_kernel(float* dx, const float* dvals, const int* idx, int N, int V, int K) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kThreadsBwd + threadIdx.x;
  if (i >= static_cast<size_t>(N) * K) return;
  const size_t n = i / K;
  dx[n * V + idx[i]] += dvals[i];
}

}  // namespace

void topk_values_forward(cudaStream_t s, float* vals, int* idx, const float* x, int N, int V, int K) {
  check(K >= 1 && K <= V && K <= kMaxK, "top-k: K = " + std::to_string(K) + " must be in [1, min(V = " +
                                            std::to_string(V) + ", " + std::to_string(kMaxK) + ")]");
  int P = 1;
  while (P < K) P <<= 1;
  if (N > 0) launch(topk_forward_kernel, N, kThreads, 0, s, vals, idx, x, V, K, P);
}

void topk_values_backward(cudaStream_t s, float* dx, const float* dvals, const int* idx, int N, int V, int K) {
  const size_t total = static_cast<size_t>(N) * K;
  if (total) launch(topk_backward_kernel, blocks_for(total, kThreadsBwd), kThreadsBwd, 0, s, dx, dvals, idx, N, V, K);
}

}  // namespace ada::cuda
