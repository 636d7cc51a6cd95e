// Flash attention on tensor cores: the forward and backward of
// cuda/attention.cu (same mask, same shapes, same outputs; read that file
// first, it is the readable reference) with the matrix products on mma.sync
// m16n8k16 (bf16 in, fp32 accumulate) through the primitives of warp_mma.h.
//
// Shapes: q (N, ldq) and dq (N, dq_ld()), head h in columns [h hs, (h+1) hs); K, V (B S, D),
// D = H hs; out (N, D); lse (N, H). Sequence b's query rows are
// qstart[b] .. qstart[b+1]-1; row r is the query of slot qslot[r]. hs = HS, a
// template parameter: a multiple of 16 up to 128.
//
// Staging: tiles of Q, K, V (and dO) are read from fp32 global memory,
// rounded to bf16 (round to nearest even, as gemm_mma's operands) and stored
// in shared memory as [row][HS + 8] bf16. A row is then HS/8 + 1 chunks of 16
// bytes, an odd number, so the 8 row addresses of one ldmatrix fall into 8
// different 16-byte bank groups: conflict-free for every HS. No cp.async: the
// conversion needs the values in registers on the way.
//
// Fragments (warp_mma.h, g = lane / 4, t = lane % 4): an mma C tile of 16 x 8
// holds c[e] = C[g + 8 (e >> 1)][2t + (e & 1)], so a thread owns two rows
// (g and g + 8) and two adjacent columns of each n8 tile. The C fragments of
// two adjacent n8 tiles, packed to bf16 pairs, are exactly the A fragment of
// the 16-wide k step they cover -- P (or dS) goes from one mma to the next
// without touching shared memory:
//     a[0] = (c_j[0], c_j[1])  a[1] = (c_j[2], c_j[3])      j = 2 kk
//     a[2] = (c_j'[0], c_j'[1]) a[3] = (c_j'[2], c_j'[3])   j' = 2 kk + 1
// Operands stored with k contiguous (Q and K rows for Q K^T) are loaded with
// plain ldmatrix; operands stored k-major (V rows for P V: k = key) with
// ldmatrix .trans.
//
// Mask: the score of (query i, key j) is kept iff km.visible(qslot_i, slot_j)
// (the one definition, src/ops/attention_mask.h), evaluated per element of
// the C fragment: each thread tests its own (row, column) pairs. Rows past the
// tile's queries and keys past the store are invisible (their staged values
// are zero).
//
// Forward, one block of 4 warps per (64 queries, head, sequence); warp w owns
// queries 16w .. 16w + 15 of the tile. Per key tile of 64 (the visible prefix
// only, as in attention.cu):
//   S  = scale Q K^T           16 x 64 per warp, 8 n-tiles, HS/16 k steps
//   m' = max(m, rowmax S)      quad shuffles (the 4 lanes of a row)
//   P  = exp(S - m'), l = l exp(m - m') + rowsum P,  O = O exp(m - m') + P V
// and at the end out = O / l, lse = m + log l.
//
// Backward (FlashAttention-2 algebra), D_i = dO_i . O_i first (a small kernel
// that also zeroes dq), then one kernel, one block of 4 warps per (64 keys,
// head, sequence); warp w owns keys 16w .. 16w + 15 and keeps their dK, dV in
// registers. Per tile of 32 queries that can see the keys:
//   S^T  = K Q^T, dP^T = V dO^T     16 keys x 32 queries per warp
//   P^T  = exp(scale S^T - lse),  dS^T = P^T (dP^T - D)
//   dV  += P^T dO,  dK += dS^T Q     (P^T, dS^T as A fragments, as above)
//   dS^T -> shared memory (bf16); then the 4 warps split the 32 x HS block of
//   dQ = dS K (2 x 2: 16 queries x HS/2 each) and add it to dq with fp32
//   atomicAdd (scaled by `scale`).
// Working on S^T (keys as mma rows) keeps each warp's dK, dV rows its own, so
// they need no reduction across warps; P is computed once per (query, key).
// dq from several key tiles meets in global memory: atomics are the simplest
// way (the alternative, a dq buffer per key tile summed afterwards, costs
// S / 64 copies of dq in memory and traffic). Float atomics add in an
// unspecified order, so dq is not bit-reproducible: that, and bf16 inputs, is
// why this kernel is opt-in and the fp32 kernel stays the default and the
// --deterministic path.
//
// Tolerance: bf16 inputs carry 8 significant bits; the tests compare with the
// CPU reference at 2e-2 relative (cuda/agreement.h, bf16 paths).
#include <cmath>
#include <cstdint>
#include <string>

#include "attention_mma.h"
#include "attention_slots.h"
#include "compat.h"
#include "device_util.h"
#include "launch.h"
#include "warp_mma.h"

namespace ada::cuda {
namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kFwdRows = 64;  // forward: queries per block (16 per warp)
constexpr int kFwdKeys = 64;  // forward: keys per tile
constexpr int kBwdKeys = 64;  // backward: keys per block (16 per warp)
constexpr int kBwdRows = 32;  // backward: queries per tile
constexpr int kBwdLdS = kBwdRows + 8;  // dS^T shared row (bf16): 5 chunks of 16 bytes, odd

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return pack_b16x2(__bfloat16_as_ushort(__float2bfloat16(lo)), __bfloat16_as_ushort(__float2bfloat16(hi)));
}

// Rows [r0, r0 + n) of a (rows, ld) fp32 matrix, columns [c0, c0 + HS), into
// `rows` shared rows of LD bf16 (rows past n are zero), two columns a thread.
template <int HS, int LD>
__device__ __forceinline__ void stage_bf16(uint16_t* dst, int rows, const float* src, size_t ld, int r0, int n,
                                           int c0) {
  constexpr int kPairs = HS / 2;
  for (int e = static_cast<int>(threadIdx.x); e < rows * kPairs; e += kThreads) {
    const int i = e / kPairs, c = 2 * (e % kPairs);
    uint32_t v = 0;
    if (i < n) {
      const float* p = src + static_cast<size_t>(r0 + i) * ld + c0 + c;
      v = pack_bf16(p[0], p[1]);
    }
    *reinterpret_cast<uint32_t*>(dst + i * LD + c) = v;
  }
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}

// ==== forward =================================================================
// grid (ceil(max query rows of a sequence / 64), H, B), 128 threads
// dynamic shared (bf16): Q [64][HS+8] | K [64][HS+8] | V [64][HS+8]
template <int HS>
__global__ void __launch_bounds__(kThreads)
    attention_mma_forward_kernel(float* out, float* lse, const float* q, const float* K, const float* V,
                                 const int* qslot, const int* qstart, KeyMeta km, AttnDims d) {
  constexpr int LD = HS + 8;
  constexpr int kNT = HS / 8;  // n8 tiles of O per warp
  const int b = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int q0 = qstart[b], q1 = qstart[b + 1];
  const int r0 = q0 + static_cast<int>(blockIdx.x) * kFwdRows;
  if (r0 >= q1) return;  // the whole block: no query rows here
  const int nq = min(kFwdRows, q1 - r0), D = d.H * HS;
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* Qs = smem;
  uint16_t* Ks = Qs + kFwdRows * LD;
  uint16_t* Vs = Ks + kFwdKeys * LD;
  __shared__ int qsl[kFwdRows];
  __shared__ int kend;

  stage_bf16<HS, LD>(Qs, kFwdRows, q, d.ldq, r0, nq, h * HS);
  if (threadIdx.x < kFwdRows) qsl[threadIdx.x] = static_cast<int>(threadIdx.x) < nq ? qslot[r0 + threadIdx.x] : -1;
  if (threadIdx.x == 0) kend = prefix_with_order_le(km, b, km.order[qslot[r0 + nq - 1]]);
  __syncthreads();

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4, w0 = 16 * warp;  // w0: the warp's first query of the tile
  const int qs[2] = {qsl[w0 + g], qsl[w0 + g + 8]};       // slots of this thread's rows (-1: none)
  float o[kNT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  ADA_UNROLL
  for (int j = 0; j < kNT; j++) ADA_UNROLL for (int e = 0; e < 4; e++) o[j][e] = 0.0f;

  const int kbase = b * d.S;
  for (int k0 = 0; k0 < kend; k0 += kFwdKeys) {
    const int nk = min(kFwdKeys, kend - k0);
    stage_bf16<HS, LD>(Ks, kFwdKeys, K, D, kbase + k0, nk, h * HS);
    stage_bf16<HS, LD>(Vs, kFwdKeys, V, D, kbase + k0, nk, h * HS);
    __syncthreads();

    // S = Q K^T: A = Q rows (plain), B = K rows (n-major: plain)
    float s[kFwdKeys / 8][4];
    ADA_UNROLL
    for (int j = 0; j < kFwdKeys / 8; j++) ADA_UNROLL for (int e = 0; e < 4; e++) s[j][e] = 0.0f;
    ADA_UNROLL
    for (int kk = 0; kk < HS; kk += 16) {
      uint32_t a[4];
      ldmatrix_x4(a, Qs + (w0 + (lane & 15)) * LD + kk + 8 * (lane >> 4));
      ADA_UNROLL
      for (int p = 0; p < kFwdKeys / 16; p++) {
        uint32_t r[4];
        ldmatrix_x4(r, Ks + (16 * p + (lane & 7) + 8 * (lane >> 4)) * LD + kk + 8 * ((lane >> 3) & 1));
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        mma_m16n8k16_bf16(s[2 * p], a, b0, s[2 * p]);
        mma_m16n8k16_bf16(s[2 * p + 1], a, b1, s[2 * p + 1]);
      }
    }
    // mask and scale: s[j][e] is (row g + 8 (e >> 1), key 8j + 2t + (e & 1))
    float mx[2] = {-INFINITY, -INFINITY};
    ADA_UNROLL
    for (int j = 0; j < kFwdKeys / 8; j++)
      ADA_UNROLL
      for (int e = 0; e < 4; e++) {
        const int key = 8 * j + 2 * t + (e & 1), slot = qs[e >> 1];
        const bool vis = slot >= 0 && key < nk && km.visible(slot, kbase + k0 + key);
        s[j][e] = vis ? s[j][e] * scale : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
      }
    // online softmax: m' = max(m, rowmax), alpha = exp(m - m'), P = exp(S - m')
    float alpha[2], rowsum[2] = {0.0f, 0.0f};
    ADA_UNROLL
    for (int r = 0; r < 2; r++) {
      const float m_new = fmaxf(m[r], quad_max(mx[r]));
      alpha[r] = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
      m[r] = m_new;
    }
    ADA_UNROLL
    for (int j = 0; j < kFwdKeys / 8; j++)
      ADA_UNROLL
      for (int e = 0; e < 4; e++) {
        const float p = s[j][e] == -INFINITY ? 0.0f : expf(s[j][e] - m[e >> 1]);
        s[j][e] = p;
        rowsum[e >> 1] += p;  // this thread's columns; the quad's are summed at the end
      }
    ADA_UNROLL
    for (int r = 0; r < 2; r++) l[r] = l[r] * alpha[r] + rowsum[r];
    ADA_UNROLL
    for (int j = 0; j < kNT; j++) ADA_UNROLL for (int e = 0; e < 4; e++) o[j][e] *= alpha[e >> 1];

    // O += P V: A = P from the S fragments, B = V rows (k-major: .trans)
    ADA_UNROLL
    for (int kk = 0; kk < kFwdKeys / 16; kk++) {
      const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      ADA_UNROLL
      for (int p = 0; p < HS / 16; p++) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, Vs + (16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1)) * LD + 16 * p + 8 * (lane >> 4));
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        mma_m16n8k16_bf16(o[2 * p], a, b0, o[2 * p]);
        mma_m16n8k16_bf16(o[2 * p + 1], a, b1, o[2 * p + 1]);
      }
    }
    __syncthreads();  // K and V are overwritten by the next tile
  }

  // out = O / l, lse = m + log l; o[j][e] is (row g + 8 (e >> 1), dim 8j + 2t + (e & 1))
  ADA_UNROLL
  for (int r = 0; r < 2; r++) {
    const float lr = quad_sum(l[r]);
    const int i = w0 + g + 8 * r;
    if (i >= nq) continue;
    const size_t row = static_cast<size_t>(r0 + i);
    const float inv = 1.0f / lr;
    ADA_UNROLL
    for (int j = 0; j < kNT; j++) {
      float* dst = out + row * D + h * HS + 8 * j + 2 * t;
      dst[0] = o[j][2 * r] * inv;
      dst[1] = o[j][2 * r + 1] * inv;
    }
    if (t == 0) lse[row * d.H + h] = m[r] + logf(lr);
  }
}

// ==== backward ================================================================
// Dvec (N, H): D_i = dO_i . O_i, one warp per (row, head); the same warp
// zeroes that row's dq columns (the main kernel adds into them).
__global__ void __launch_bounds__(256)
    attention_mma_delta_kernel(float* Dvec, float* dq, const float* dout, const float* out, int N, int H, int hs,
                               int ldq) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const size_t w = static_cast<size_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (w >= static_cast<size_t>(N) * H) return;
  const size_t row = w / H, h = w % H, D = static_cast<size_t>(H) * hs;
  float s = 0.0f;
  for (int dd = lane; dd < hs; dd += 32) {
    s += dout[row * D + h * hs + dd] * out[row * D + h * hs + dd];
    dq[row * ldq + h * hs + dd] = 0.0f;
  }
  s = warp_sum(s);
  if (lane == 0) Dvec[w] = s;
}

// dK, dV (+=) and dq (atomic +=). grid (ceil(S / 64), H, B), 128 threads
// dynamic shared (bf16): K, V [64][HS+8] | Q, dO [32][HS+8] | dS^T [64][40]
template <int HS>
__global__ void __launch_bounds__(kThreads)
    attention_mma_backward_kernel(float* dq, float* dK, float* dV, const float* dout, const float* lse,
                                  const float* Dvec, const float* q, const float* K, const float* V,
                                  const int* qslot, const int* qstart, KeyMeta km, AttnDims d) {
  constexpr int LD = HS + 8;
  constexpr int kNT = HS / 8;       // n8 tiles of dK, dV per warp
  constexpr int kNTq = HS / 16;     // n8 tiles of the warp's half of dQ
  const int b = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int q0 = qstart[b], q1 = qstart[b + 1];
  const int k0 = static_cast<int>(blockIdx.x) * kBwdKeys;
  if (q0 >= q1) return;  // the whole block: no queries in this sequence
  const int nk = min(kBwdKeys, d.S - k0), D = d.H * HS, kbase = b * d.S;
  const float scale = 1.0f / sqrtf(static_cast<float>(HS));
  DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* Ks = smem;
  uint16_t* Vs = Ks + kBwdKeys * LD;
  uint16_t* Qs = Vs + kBwdKeys * LD;
  uint16_t* dOs = Qs + kBwdRows * LD;
  uint16_t* dSs = dOs + kBwdRows * LD;  // dS^T [key][query]
  __shared__ int qsl[kBwdRows];
  __shared__ float lse_s[kBwdRows], D_s[kBwdRows];
  __shared__ int first_row;

  stage_bf16<HS, LD>(Ks, kBwdKeys, K, D, kbase + k0, nk, h * HS);
  stage_bf16<HS, LD>(Vs, kBwdKeys, V, D, kbase + k0, nk, h * HS);
  if (threadIdx.x == 0) first_row = first_query_with_order_ge(km, qslot, q0, q1, km.order[kbase + k0]);
  __syncthreads();
  const int rs = first_row;
  if (rs >= q1) return;  // the whole block: no query sees these keys

  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4, w0 = 16 * warp;  // w0: the warp's first key of the tile
  const int wm = warp & 1, wn = warp >> 1;              // the warp's quarter of dQ: rows 16 wm, dims HS/2 wn
  float dk[kNT][4], dv[kNT][4];
  ADA_UNROLL
  for (int j = 0; j < kNT; j++) ADA_UNROLL for (int e = 0; e < 4; e++) dk[j][e] = dv[j][e] = 0.0f;

  for (int r0 = rs; r0 < q1; r0 += kBwdRows) {
    const int nq = min(kBwdRows, q1 - r0);
    stage_bf16<HS, LD>(Qs, kBwdRows, q, d.ldq, r0, nq, h * HS);
    stage_bf16<HS, LD>(dOs, kBwdRows, dout, D, r0, nq, h * HS);
    if (threadIdx.x < kBwdRows) {
      const int i = static_cast<int>(threadIdx.x);
      qsl[i] = i < nq ? qslot[r0 + i] : -1;
      lse_s[i] = i < nq ? lse[static_cast<size_t>(r0 + i) * d.H + h] : 0.0f;
      D_s[i] = i < nq ? Dvec[static_cast<size_t>(r0 + i) * d.H + h] : 0.0f;
    }
    __syncthreads();

    // S^T = K Q^T and dP^T = V dO^T: A = the warp's K / V rows, B = Q / dO rows (n-major: plain)
    float s[kBwdRows / 8][4], dp[kBwdRows / 8][4];
    ADA_UNROLL
    for (int j = 0; j < kBwdRows / 8; j++) ADA_UNROLL for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.0f;
    ADA_UNROLL
    for (int kk = 0; kk < HS; kk += 16) {
      uint32_t ak[4], av[4];
      ldmatrix_x4(ak, Ks + (w0 + (lane & 15)) * LD + kk + 8 * (lane >> 4));
      ldmatrix_x4(av, Vs + (w0 + (lane & 15)) * LD + kk + 8 * (lane >> 4));
      ADA_UNROLL
      for (int p = 0; p < kBwdRows / 16; p++) {
        const int off = (16 * p + (lane & 7) + 8 * (lane >> 4)) * LD + kk + 8 * ((lane >> 3) & 1);
        uint32_t rq[4], ro[4];
        ldmatrix_x4(rq, Qs + off);
        ldmatrix_x4(ro, dOs + off);
        const uint32_t bq0[2] = {rq[0], rq[1]}, bq1[2] = {rq[2], rq[3]};
        const uint32_t bo0[2] = {ro[0], ro[1]}, bo1[2] = {ro[2], ro[3]};
        mma_m16n8k16_bf16(s[2 * p], ak, bq0, s[2 * p]);
        mma_m16n8k16_bf16(s[2 * p + 1], ak, bq1, s[2 * p + 1]);
        mma_m16n8k16_bf16(dp[2 * p], av, bo0, dp[2 * p]);
        mma_m16n8k16_bf16(dp[2 * p + 1], av, bo1, dp[2 * p + 1]);
      }
    }
    // P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - D): s[j][e] is
    // (key g + 8 (e >> 1), query 8j + 2t + (e & 1)); s becomes P^T, dp dS^T
    ADA_UNROLL
    for (int j = 0; j < kBwdRows / 8; j++)
      ADA_UNROLL
      for (int e = 0; e < 4; e++) {
        const int key = w0 + g + 8 * (e >> 1), i = 8 * j + 2 * t + (e & 1);
        const bool vis = key < nk && i < nq && km.visible(qsl[i], kbase + k0 + key);
        const float p = vis ? expf(s[j][e] * scale - lse_s[i]) : 0.0f;
        s[j][e] = p;
        dp[j][e] = p * (dp[j][e] - D_s[i]);
      }
    // dV += P^T dO, dK += dS^T Q: A from the fragments, B = dO / Q rows (k-major: .trans)
    ADA_UNROLL
    for (int kq = 0; kq < kBwdRows / 16; kq++) {
      const uint32_t ap[4] = {pack_bf16(s[2 * kq][0], s[2 * kq][1]), pack_bf16(s[2 * kq][2], s[2 * kq][3]),
                              pack_bf16(s[2 * kq + 1][0], s[2 * kq + 1][1]),
                              pack_bf16(s[2 * kq + 1][2], s[2 * kq + 1][3])};
      const uint32_t as[4] = {pack_bf16(dp[2 * kq][0], dp[2 * kq][1]), pack_bf16(dp[2 * kq][2], dp[2 * kq][3]),
                              pack_bf16(dp[2 * kq + 1][0], dp[2 * kq + 1][1]),
                              pack_bf16(dp[2 * kq + 1][2], dp[2 * kq + 1][3])};
      ADA_UNROLL
      for (int p = 0; p < HS / 16; p++) {
        const int off = (16 * kq + (lane & 7) + 8 * ((lane >> 3) & 1)) * LD + 16 * p + 8 * (lane >> 4);
        uint32_t ro[4], rq[4];
        ldmatrix_x4_trans(ro, dOs + off);
        ldmatrix_x4_trans(rq, Qs + off);
        const uint32_t bo0[2] = {ro[0], ro[1]}, bo1[2] = {ro[2], ro[3]};
        const uint32_t bq0[2] = {rq[0], rq[1]}, bq1[2] = {rq[2], rq[3]};
        mma_m16n8k16_bf16(dv[2 * p], ap, bo0, dv[2 * p]);
        mma_m16n8k16_bf16(dv[2 * p + 1], ap, bo1, dv[2 * p + 1]);
        mma_m16n8k16_bf16(dk[2 * p], as, bq0, dk[2 * p]);
        mma_m16n8k16_bf16(dk[2 * p + 1], as, bq1, dk[2 * p + 1]);
      }
    }
    // dS^T to shared memory: row = key, (query 8j + 2t, 8j + 2t + 1) as one bf16 pair
    ADA_UNROLL
    for (int j = 0; j < kBwdRows / 8; j++)
      ADA_UNROLL
      for (int r = 0; r < 2; r++)
        *reinterpret_cast<uint32_t*>(dSs + (w0 + g + 8 * r) * kBwdLdS + 8 * j + 2 * t) =
            pack_bf16(dp[j][2 * r], dp[j][2 * r + 1]);
    __syncthreads();

    // dQ (32 x HS) += scale dS K, the warp's 16 queries x HS/2 dims: A = dS stored
    // as dS^T [key][query] (k-major: .trans), B = K rows (k-major: .trans)
    float acc[kNTq][4];
    ADA_UNROLL
    for (int j = 0; j < kNTq; j++) ADA_UNROLL for (int e = 0; e < 4; e++) acc[j][e] = 0.0f;
    ADA_UNROLL
    for (int kk = 0; kk < kBwdKeys; kk += 16) {
      uint32_t a[4];
      ldmatrix_x4_trans(a, dSs + (kk + (lane & 7) + 8 * (lane >> 4)) * kBwdLdS + 16 * wm + 8 * ((lane >> 3) & 1));
      ADA_UNROLL
      for (int j = 0; j < kNTq; j++) {
        uint32_t bk[2];
        ldmatrix_x2_trans(bk, Ks + (kk + (lane & 7) + 8 * ((lane >> 3) & 1)) * LD + (HS / 2) * wn + 8 * j);
        mma_m16n8k16_bf16(acc[j], a, bk, acc[j]);
      }
    }
    ADA_UNROLL
    for (int e = 0; e < 4; e++) {
      const int i = 16 * wm + g + 8 * (e >> 1);
      if (i >= nq) continue;
      float* row = dq + static_cast<size_t>(r0 + i) * d.dq_ld() + h * HS + (HS / 2) * wn + 2 * t + (e & 1);
      ADA_UNROLL
      for (int j = 0; j < kNTq; j++) atomicAdd(row + 8 * j, acc[j][e] * scale);
    }
    __syncthreads();  // Q, dO and dS^T are overwritten by the next query tile
  }

  // dK += scale dS^T Q, dV += P^T dO; dk[j][e] is (key g + 8 (e >> 1), dim 8j + 2t + (e & 1))
  ADA_UNROLL
  for (int r = 0; r < 2; r++) {
    const int key = w0 + g + 8 * r;
    if (key >= nk) continue;
    const size_t row = static_cast<size_t>(kbase + k0 + key) * D + h * HS;
    ADA_UNROLL
    for (int j = 0; j < kNT; j++) {
      const int c = 8 * j + 2 * t;
      dK[row + c] += dk[j][2 * r] * scale;
      dK[row + c + 1] += dk[j][2 * r + 1] * scale;
      dV[row + c] += dv[j][2 * r];
      dV[row + c + 1] += dv[j][2 * r + 1];
    }
  }
}

// ---- launch helpers ----------------------------------------------------------
constexpr size_t forward_smem(int hs) { return sizeof(uint16_t) * (kFwdRows + 2 * kFwdKeys) * (hs + 8); }
constexpr size_t backward_smem(int hs) {
  return sizeof(uint16_t) * ((2 * kBwdKeys + 2 * kBwdRows) * (hs + 8) + kBwdKeys * kBwdLdS);
}

template <int HS>
void forward_hs(cudaStream_t s, float* out, float* lse, const float* q, const float* K, const float* V,
                const int* qslot, const int* qstart, const KeyMeta& km, const AttnDims& d) {
  static bool smem_set = false;  // raise the dynamic shared limit once (HS = 128 needs 52 KiB)
  if (!smem_set) {
    CUDA_CHECK(cudaFuncSetAttribute(attention_mma_forward_kernel<HS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(forward_smem(HS))));
    smem_set = true;
  }
  const unsigned tiles = blocks_for(d.N < d.S ? d.N : d.S, kFwdRows);  // a sequence has <= min(N, S) queries
  launch(attention_mma_forward_kernel<HS>, dim3(tiles, d.H, d.B), kThreads, forward_smem(HS), s, out, lse, q, K, V,
         qslot, qstart, km, d);
}

template <int HS>
void backward_hs(cudaStream_t s, float* dq, float* dK, float* dV, const float* dout, const float* lse,
                 const float* Dvec, const float* q, const float* K, const float* V, const int* qslot,
                 const int* qstart, const KeyMeta& km, const AttnDims& d) {
  static bool smem_set = false;
  if (!smem_set) {
    CUDA_CHECK(cudaFuncSetAttribute(attention_mma_backward_kernel<HS>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(backward_smem(HS))));
    smem_set = true;
  }
  launch(attention_mma_backward_kernel<HS>, dim3(blocks_for(d.S, kBwdKeys), d.H, d.B), kThreads, backward_smem(HS),
         s, dq, dK, dV, dout, lse, Dvec, q, K, V, qslot, qstart, km, d);
}

void check_hs(const AttnDims& d) {
  check(attention_mma_supports(d.hs), "attention (ADA_ATTN=mma): head size " + std::to_string(d.hs) +
                                          " is not a multiple of 16 in [16, 128]; use the fp32 kernel");
}

}  // namespace

const char* attention_kernel_name(AttnKernel k) { return k == AttnKernel::Mma ? "mma" : "fp32"; }

AttnKernel parse_attention_kernel(const std::string& name) {
  if (name == "fp32") return AttnKernel::Fp32;
  if (name == "mma") return AttnKernel::Mma;
  fail("unknown attention kernel '" + name + "' (ADA_ATTN must be fp32 or mma)");
}

bool attention_mma_supports(int hs) { return hs >= 16 && hs <= 128 && hs % 16 == 0; }

// One instantiation per supported head size.
#define ADA_ATTN_MMA_HS(X) X(16) X(32) X(48) X(64) X(80) X(96) X(112) X(128)

void attention_mma_forward(cudaStream_t s, float* out, float* lse, const float* q, const float* K, const float* V,
                           const int* qslot, const int* qstart, const KeyMeta& km, const AttnDims& d) {
  check_hs(d);
  if (d.N <= 0) return;
  switch (d.hs) {
#define ADA_CASE(n) \
  case n: forward_hs<n>(s, out, lse, q, K, V, qslot, qstart, km, d); break;
    ADA_ATTN_MMA_HS(ADA_CASE)
#undef ADA_CASE
  }
}

size_t attention_mma_backward_work_bytes(const AttnDims& d) { return static_cast<size_t>(d.N) * d.H * sizeof(float); }

void attention_mma_backward(cudaStream_t s, float* dq, float* dK, float* dV, const float* dout, const float* out,
                            const float* lse, const float* q, const float* K, const float* V, const int* qslot,
                            const int* qstart, const KeyMeta& km, const AttnDims& d, void* work) {
  check_hs(d);
  if (d.N <= 0) return;
  check(work != nullptr, "attention_mma_backward: needs a workspace (attention_mma_backward_work_bytes)");
  float* Dvec = static_cast<float*>(work);
  launch(attention_mma_delta_kernel, blocks_for(static_cast<size_t>(d.N) * d.H, 8), 256, 0, s, Dvec, dq, dout, out,
         d.N, d.H, d.hs, d.dq_ld());
  switch (d.hs) {
#define ADA_CASE(n) \
  case n: backward_hs<n>(s, dq, dK, dV, dout, lse, Dvec, q, K, V, qslot, qstart, km, d); break;
    ADA_ATTN_MMA_HS(ADA_CASE)
#undef ADA_CASE
  }
}

}  // namespace ada::cuda
