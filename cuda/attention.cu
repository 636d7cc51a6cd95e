// Fused multi-head attention against a KV store, forward and backward, in
// the flash-attention manner: scores are formed tile by tile in shared memory
// and registers, never as a (queries x keys) matrix in device memory. The
// mask comes from per-slot metadata (KeyMeta, src/ops/attention_mask.h), so
// causal, compacted-query, interleaved (pause) and duo-causal (depth) masks
// are all the same code. The CPU reference is src/ops/attention.h.
//
// Shapes: q (N, ldq) and dq (N, dq_ld()), head h in columns [h hs, (h+1) hs); K, V (B S, D),
// D = H hs; out (N, D); lse (N, H). Query rows of sequence b are
// qstart[b] .. qstart[b+1]-1, row r writes slot qslot[r] (increasing within a
// sequence, and slot orders are nondecreasing, so a query tile sees only a
// prefix of its sequence's slots and a key tile is seen only by a suffix of
// its sequence's queries). scale = 1 / sqrt(hs); head size up to kMaxHs.
//
// Forward, one block per (query tile of kTile rows, head, sequence):
//   Q tile in shared memory; for each key tile of the visible prefix: K, V
//   tiles in shared memory; each warp owns kRowsPerWarp queries, lane j scores
//   key j of the tile; online softmax per query (running max m, sum l; the
//   running output is rescaled by exp(m_old - m_new)); P goes through shared
//   memory and every lane accumulates its own head dimensions of O.
//   Saves lse = m + log l for the backward.
// Backward (FlashAttention-2 algebra, P recomputed from lse; no atomics):
//   D_i = dO_i . O_i                                     (small kernel)
//   dK/dV kernel, one block per (key tile, head, sequence), loops over the
//     query tiles that can see it:   dV_j += sum_i P_ij dO_i
//                                    dK_j += scale sum_i dS_ij q_i
//   dQ kernel, one block per (query tile, head, sequence), loops over the key
//     tiles it sees:                 dQ_i = scale sum_j dS_ij k_j      (set)
//   with P_ij = exp(scale q_i.k_j - lse_i), dP_ij = dO_i . v_j,
//   dS_ij = P_ij (dP_ij - D_i). dK and dV accumulate (+=): keys are shared by
//   the passes of a method and each pass adds the gradient of its queries.
//   Each (slot, head) of dK/dV is written by exactly one block.
//
// Shared-memory rows that a lane reads across the tile (the K rows in the
// forward, the Q/dO rows in the dK/dV kernel) are padded to hs + 1 floats so
// the 32 lanes hit 32 different banks.
#include <cmath>
#include <string>

#include "attention_slots.h"
#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kTile = 32;                          // queries per query tile = keys per key tile
constexpr int kWarps = 4;                          // warps per block
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = kTile / kWarps;       // 8 queries (or keys) per warp
constexpr int kMaxHs = 128;
constexpr int kDimsPerLane = kMaxHs / 32;          // lane owns dims lane, lane + 32, ...

// Copies rows [r0, r0 + n) of a (rows, ld) matrix, columns [c0, c0 + hs), into
// a shared tile of kTile rows x `lds` floats; rows past n are zero.
__device__ __forceinline__ void load_tile(float* dst, int lds, const float* src, size_t ld, int r0, int n, int c0,
                                          int hs) {
  for (int e = static_cast<int>(threadIdx.x); e < kTile * hs; e += kThreads) {
    const int i = e / hs, d = e % hs;
    dst[i * lds + d] = i < n ? src[static_cast<size_t>(r0 + i) * ld + c0 + d] : 0.0f;
  }
}

// Same, but the rows are the store slots slot0 + i (K or V of one sequence).
__device__ __forceinline__ float dot_rows(const float* a, const float* b, int hs) {
  float s = 0.0f;
  for (int d = 0; d < hs; d++) s += a[d] * b[d];
  return s;
}

// ==== forward =================================================================
// grid (ceil(max query rows of a sequence / kTile), H, B)
// dynamic shared: Q [kTile][hs] | K [kTile][hs+1] | V [kTile][hs] | P [kTile][kTile]
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(float* out, float* lse, const float* q, const float* K, const float* V,
                             const int* qslot, const int* qstart, KeyMeta km, AttnDims d) {
  const int b = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int q0 = qstart[b], q1 = qstart[b + 1];
  const int r0 = q0 + static_cast<int>(blockIdx.x) * kTile;
  if (r0 >= q1) return;  // the whole block: no query rows here
  const int nq = min(kTile, q1 - r0), hs = d.hs, D = d.H * d.hs;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  DYNAMIC_SHARED(float, smem);
  float* Qs = smem;
  float* Ks = Qs + kTile * hs;
  float* Vs = Ks + kTile * (hs + 1);
  float* Ps = Vs + kTile * hs;
  __shared__ int qsl[kTile];
  __shared__ int kend;

  load_tile(Qs, hs, q, d.ldq, r0, nq, h * hs, hs);
  if (threadIdx.x < kTile) qsl[threadIdx.x] = static_cast<int>(threadIdx.x) < nq ? qslot[r0 + threadIdx.x] : -1;
  if (threadIdx.x == 0) kend = prefix_with_order_le(km, b, km.order[qslot[r0 + nq - 1]]);
  __syncthreads();

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDimsPerLane];
  ADA_UNROLL
  for (int qi = 0; qi < kRowsPerWarp; qi++) {
    m[qi] = -INFINITY;
    l[qi] = 0.0f;
    ADA_UNROLL for (int r = 0; r < kDimsPerLane; r++) acc[qi][r] = 0.0f;
  }
  const size_t kbase = static_cast<size_t>(b) * d.S;
  for (int k0 = 0; k0 < kend; k0 += kTile) {
    const int nk = min(kTile, kend - k0);
    load_tile(Ks, hs + 1, K, D, static_cast<int>(kbase) + k0, nk, h * hs, hs);
    load_tile(Vs, hs, V, D, static_cast<int>(kbase) + k0, nk, h * hs, hs);
    __syncthreads();
    ADA_UNROLL
    for (int qi = 0; qi < kRowsPerWarp; qi++) {
      const int i = warp * kRowsPerWarp + qi;
      const bool vis = i < nq && lane < nk && km.visible(qsl[i], static_cast<int>(kbase) + k0 + lane);
      const float s = vis ? dot_rows(&Qs[i * hs], &Ks[lane * (hs + 1)], hs) * scale : -INFINITY;
      const float m_new = fmaxf(m[qi], warp_max(s));
      const float p = vis ? expf(s - m_new) : 0.0f;
      const float alpha = m[qi] == -INFINITY ? 0.0f : expf(m[qi] - m_new);
      l[qi] = l[qi] * alpha + warp_sum(p);
      m[qi] = m_new;
      ADA_UNROLL for (int r = 0; r < kDimsPerLane; r++) acc[qi][r] *= alpha;
      Ps[i * kTile + lane] = p;
    }
    __syncwarp();
    ADA_UNROLL
    for (int qi = 0; qi < kRowsPerWarp; qi++) {
      const int i = warp * kRowsPerWarp + qi;
      for (int j = 0; j < nk; j++) {
        const float p = Ps[i * kTile + j];
        ADA_UNROLL for (int r = 0; r < kDimsPerLane; r++) {
          const int dd = lane + 32 * r;
          if (dd < hs) acc[qi][r] += p * Vs[j * hs + dd];
        }
      }
    }
    __syncthreads();  // K, V and P are overwritten by the next tile
  }
  ADA_UNROLL
  for (int qi = 0; qi < kRowsPerWarp; qi++) {
    const int i = warp * kRowsPerWarp + qi;
    if (i >= nq) continue;
    const size_t row = static_cast<size_t>(r0 + i);
    const float inv = 1.0f / l[qi];
    ADA_UNROLL for (int r = 0; r < kDimsPerLane; r++) {
      const int dd = lane + 32 * r;
      if (dd < hs) out[row * D + h * hs + dd] = acc[qi][r] * inv;
    }
    if (lane == 0) lse[row * d.H + h] = m[qi] + logf(l[qi]);
  }
}

// ==== backward ================================================================
// Dvec (N, H): D_i = dO_i . O_i, one warp per (row, head).
__global__ void __launch_bounds__(256)
    attention_delta_kernel(float* Dvec, const float* dout, const float* out, int N, int H, int hs) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const size_t w = static_cast<size_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (w >= static_cast<size_t>(N) * H) return;
  const size_t row = w / H, h = w % H, D = static_cast<size_t>(H) * hs;
  float s = 0.0f;
  for (int dd = lane; dd < hs; dd += 32) s += dout[row * D + h * hs + dd] * out[row * D + h * hs + dd];
  s = warp_sum(s);
  if (lane == 0) Dvec[w] = s;
}

// dK, dV. grid (ceil(S / kTile), H, B)
// dynamic shared: K, V, Q, dO [kTile][hs+1] each | P, dS [kTile][kTile] each
__global__ void __launch_bounds__(kThreads)
    attention_dkdv_kernel(float* dK, float* dV, const float* dout, const float* lse, const float* Dvec,
                          const float* q, const float* K, const float* V, const int* qslot, const int* qstart,
                          KeyMeta km, AttnDims d) {
  const int b = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int q0 = qstart[b], q1 = qstart[b + 1];
  const int k0 = static_cast<int>(blockIdx.x) * kTile;
  if (q0 >= q1) return;  // the whole block: no queries in this sequence
  const int nk = min(kTile, d.S - k0), hs = d.hs, D = d.H * d.hs, ld = hs + 1;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  const int kbase = b * d.S;
  DYNAMIC_SHARED(float, smem);
  float* Ks = smem;
  float* Vs = Ks + kTile * ld;
  float* Qs = Vs + kTile * ld;
  float* dOs = Qs + kTile * ld;
  float* Ps = dOs + kTile * ld;
  float* dSs = Ps + kTile * kTile;
  __shared__ int qsl[kTile];
  __shared__ float lse_s[kTile], D_s[kTile];
  __shared__ int first_row;

  load_tile(Ks, ld, K, D, kbase + k0, nk, h * hs, hs);
  load_tile(Vs, ld, V, D, kbase + k0, nk, h * hs, hs);
  if (threadIdx.x == 0) first_row = first_query_with_order_ge(km, qslot, q0, q1, km.order[kbase + k0]);
  __syncthreads();
  const int rs = first_row;
  if (rs >= q1) return;  // the whole block: no query sees these keys

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  float dk[kRowsPerWarp][kDimsPerLane], dv[kRowsPerWarp][kDimsPerLane];
  ADA_UNROLL
  for (int ki = 0; ki < kRowsPerWarp; ki++)
    ADA_UNROLL for (int r = 0; r < kDimsPerLane; r++) dk[ki][r] = dv[ki][r] = 0.0f;

  for (int r0 = rs; r0 < q1; r0 += kTile) {
    const int nq = min(kTile, q1 - r0);
    load_tile(Qs, ld, q, d.ldq, r0, nq, h * hs, hs);
    load_tile(dOs, ld, dout, D, r0, nq, h * hs, hs);
    if (threadIdx.x < kTile) {
      const int i = static_cast<int>(threadIdx.x);
      qsl[i] = i < nq ? qslot[r0 + i] : -1;
      lse_s[i] = i < nq ? lse[static_cast<size_t>(r0 + i) * d.H + h] : 0.0f;
      D_s[i] = i < nq ? Dvec[static_cast<size_t>(r0 + i) * d.H + h] : 0.0f;
    }
    __syncthreads();
    // lane = query i of the tile; the warp's keys one after another
    ADA_UNROLL
    for (int ki = 0; ki < kRowsPerWarp; ki++) {
      const int j = warp * kRowsPerWarp + ki, i = lane;
      const bool vis = j < nk && i < nq && km.visible(qsl[i], kbase + k0 + j);
      float p = 0.0f, ds = 0.0f;
      if (vis) {
        p = expf(dot_rows(&Qs[i * ld], &Ks[j * ld], hs) * scale - lse_s[i]);
        const float dp = dot_rows(&dOs[i * ld], &Vs[j * ld], hs);
        ds = p * (dp - D_s[i]);
      }
      Ps[j * kTile + i] = p;
      dSs[j * kTile + i] = ds;
    }
    __syncwarp();
    ADA_UNROLL
    for (int ki = 0; ki < kRowsPerWarp; ki++) {
      const int j = warp * kRowsPerWarp + ki;
      for (int i = 0; i < nq; i++) {
        const float p = Ps[j * kTile + i], ds = dSs[j * kTile + i];
        ADA_UNROLL for (int r = 0; r < kDimsPerLane; r++) {
          const int dd = lane + 32 * r;
          if (dd < hs) {
            dv[ki][r] += p * dOs[i * ld + dd];
            dk[ki][r] += ds * Qs[i * ld + dd];
          }
        }
      }
    }
    __syncthreads();  // Q, dO, P, dS are overwritten by the next query tile
  }
  ADA_UNROLL
  for (int ki = 0; ki < kRowsPerWarp; ki++) {
    const int j = warp * kRowsPerWarp + ki;
    if (j >= nk) continue;
    const size_t row = static_cast<size_t>(kbase + k0 + j) * D + h * hs;
    ADA_UNROLL for (int r = 0; r < kDimsPerLane; r++) {
      const int dd = lane + 32 * r;
      if (dd < hs) {
        dK[row + dd] += dk[ki][r] * scale;
        dV[row + dd] += dv[ki][r];
      }
    }
  }
}

// dQ. grid (ceil(max query rows of a sequence / kTile), H, B)
// dynamic shared: Q, dO [kTile][hs] | K, V [kTile][hs+1] | dS [kTile][kTile]
__global__ void __launch_bounds__(kThreads)
    attention_dq_kernel(float* dq, const float* dout, const float* lse, const float* Dvec, const float* q,
                        const float* K, const float* V, const int* qslot, const int* qstart, KeyMeta km, AttnDims d) {
  const int b = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int q0 = qstart[b], q1 = qstart[b + 1];
  const int r0 = q0 + static_cast<int>(blockIdx.x) * kTile;
  if (r0 >= q1) return;
  const int nq = min(kTile, q1 - r0), hs = d.hs, D = d.H * d.hs, ld = hs + 1;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  DYNAMIC_SHARED(float, smem);
  float* Qs = smem;
  float* dOs = Qs + kTile * hs;
  float* Ks = dOs + kTile * hs;
  float* Vs = Ks + kTile * ld;
  float* dSs = Vs + kTile * ld;
  __shared__ int qsl[kTile];
  __shared__ float lse_s[kTile], D_s[kTile];
  __shared__ int kend;

  load_tile(Qs, hs, q, d.ldq, r0, nq, h * hs, hs);
  load_tile(dOs, hs, dout, D, r0, nq, h * hs, hs);
  if (threadIdx.x < kTile) {
    const int i = static_cast<int>(threadIdx.x);
    qsl[i] = i < nq ? qslot[r0 + i] : -1;
    lse_s[i] = i < nq ? lse[static_cast<size_t>(r0 + i) * d.H + h] : 0.0f;
    D_s[i] = i < nq ? Dvec[static_cast<size_t>(r0 + i) * d.H + h] : 0.0f;
  }
  if (threadIdx.x == 0) kend = prefix_with_order_le(km, b, km.order[qslot[r0 + nq - 1]]);
  __syncthreads();

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  float acc[kRowsPerWarp][kDimsPerLane];
  ADA_UNROLL
  for (int qi = 0; qi < kRowsPerWarp; qi++)
    ADA_UNROLL for (int r = 0; r < kDimsPerLane; r++) acc[qi][r] = 0.0f;
  const int kbase = b * d.S;
  for (int k0 = 0; k0 < kend; k0 += kTile) {
    const int nk = min(kTile, kend - k0);
    load_tile(Ks, ld, K, D, kbase + k0, nk, h * hs, hs);
    load_tile(Vs, ld, V, D, kbase + k0, nk, h * hs, hs);
    __syncthreads();
    // lane = key j of the tile; the warp's queries one after another
    ADA_UNROLL
    for (int qi = 0; qi < kRowsPerWarp; qi++) {
      const int i = warp * kRowsPerWarp + qi, j = lane;
      const bool vis = i < nq && j < nk && km.visible(qsl[i], kbase + k0 + j);
      float ds = 0.0f;
      if (vis) {
        const float p = expf(dot_rows(&Qs[i * hs], &Ks[j * ld], hs) * scale - lse_s[i]);
        const float dp = dot_rows(&dOs[i * hs], &Vs[j * ld], hs);
        ds = p * (dp - D_s[i]);
      }
      dSs[i * kTile + j] = ds;
    }
    __syncwarp();
    ADA_UNROLL
    for (int qi = 0; qi < kRowsPerWarp; qi++) {
      const int i = warp * kRowsPerWarp + qi;
      for (int j = 0; j < nk; j++) {
        const float ds = dSs[i * kTile + j];
        ADA_UNROLL for (int r = 0; r < kDimsPerLane; r++) {
          const int dd = lane + 32 * r;
          if (dd < hs) acc[qi][r] += ds * Ks[j * ld + dd];
        }
      }
    }
    __syncthreads();
  }
  ADA_UNROLL
  for (int qi = 0; qi < kRowsPerWarp; qi++) {
    const int i = warp * kRowsPerWarp + qi;
    if (i >= nq) continue;
    ADA_UNROLL for (int r = 0; r < kDimsPerLane; r++) {
      const int dd = lane + 32 * r;
      if (dd < hs) dq[static_cast<size_t>(r0 + i) * d.dq_ld() + h * hs + dd] = acc[qi][r] * scale;
    }
  }
}

// ---- launch helpers ----------------------------------------------------------
size_t forward_smem(int hs) { return sizeof(float) * (kTile * hs + kTile * (hs + 1) + kTile * hs + kTile * kTile); }
size_t dkdv_smem(int hs) { return sizeof(float) * (4 * kTile * (hs + 1) + 2 * kTile * kTile); }
size_t dq_smem(int hs) { return sizeof(float) * (2 * kTile * hs + 2 * kTile * (hs + 1) + kTile * kTile); }

// Raises a kernel's dynamic shared-memory limit once, to what hs = kMaxHs needs.
template <class Kernel>
void allow_smem(Kernel k, size_t bytes, bool& done) {
  if (done) return;
  CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  done = true;
}

void check_dims(const AttnDims& d) {
  check(d.hs >= 1 && d.hs <= kMaxHs, "attention: head size " + std::to_string(d.hs) + " is not in [1, " +
                                         std::to_string(kMaxHs) + "]");
}

// Query tiles per sequence: a sequence has at most min(N, S) query rows.
unsigned query_tiles(const AttnDims& d) { return blocks_for(d.N < d.S ? d.N : d.S, kTile); }

}  // namespace

void attention_forward(cudaStream_t s, float* out, float* lse, const float* q, const float* K, const float* V,
                       const int* qslot, const int* qstart, const KeyMeta& km, const AttnDims& d) {
  if (d.N <= 0) return;
  check_dims(d);
  static bool smem_set = false;
  allow_smem(attention_forward_kernel, forward_smem(kMaxHs), smem_set);
  launch(attention_forward_kernel, dim3(query_tiles(d), d.H, d.B), kThreads, forward_smem(d.hs), s, out, lse, q, K,
         V, qslot, qstart, km, d);
}

size_t attention_backward_work_bytes(const AttnDims& d) { return static_cast<size_t>(d.N) * d.H * sizeof(float); }

void attention_backward(cudaStream_t s, float* dq, float* dK, float* dV, const float* dout, const float* out,
                        const float* lse, const float* q, const float* K, const float* V, const int* qslot,
                        const int* qstart, const KeyMeta& km, const AttnDims& d, void* work) {
  if (d.N <= 0) return;
  check_dims(d);
  static bool dkdv_set = false, dq_set = false;
  allow_smem(attention_dkdv_kernel, dkdv_smem(kMaxHs), dkdv_set);
  allow_smem(attention_dq_kernel, dq_smem(kMaxHs), dq_set);
  float* Dvec = static_cast<float*>(work);
  launch(attention_delta_kernel, blocks_for(static_cast<size_t>(d.N) * d.H, 8), 256, 0, s, Dvec, dout, out, d.N, d.H,
         d.hs);
  launch(attention_dkdv_kernel, dim3(blocks_for(d.S, kTile), d.H, d.B), kThreads, dkdv_smem(d.hs), s, dK, dV, dout,
         lse, Dvec, q, K, V, qslot, qstart, km, d);
  launch(attention_dq_kernel, dim3(query_tiles(d), d.H, d.B), kThreads, dq_smem(d.hs), s, dq, dout, lse, Dvec, q, K,
         V, qslot, qstart, km, d);
}

}  // namespace ada::cuda
