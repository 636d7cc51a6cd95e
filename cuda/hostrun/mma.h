// mma.sync m16n8k16 and ldmatrix m8n8 for the host runner: the warp-level
// tensor-core instructions that cuda/warp_mma.h issues as inline PTX on the
// GPU, emulated exactly with the PTX ISA's fragment layouts.
//
// Unlike WMMA (wmma.h), the PTX instructions define which lane holds which
// element, and kernels rely on it (epilogues index the accumulator by lane).
// So each lane here holds exactly its own registers, and every operation is a
// warp meeting: each lane leaves pointers to its registers in a record on its
// own stack, the last lane to arrive gathers all 32 lanes' operands, computes,
// and writes each lane's results into that lane's registers.
//
// Layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
// type" and "ldmatrix"), with g = lane >> 2 (groupID) and t = lane % 4
// (threadID_in_group). A 32-bit register holds two 16-bit elements, the first
// (lower index) in bits 0-15.
//   A 16x16, row:  reg j holds A[g + 8 (j & 1)][2t + 8 (j >> 1) + {0, 1}]
//   B 16x8, col:   reg j holds B[2t + 8 j + {0, 1}][g]
//   C/D 16x8 f32:  c[i]  is   C[g + 8 (i >> 1)][2t + (i & 1)]
//   ldmatrix:      lanes 8m..8m+7 give the row addresses of matrix m (16 bytes
//                  each); reg m of every lane holds M_m[g][2t + {0, 1}], with
//                  .trans M_m[2t + {0, 1}][g].
//
// Arithmetic: the products of 16-bit inputs are exact in double, the 16-term
// sum plus the accumulator is formed in double and rounded once to fp32. A
// tensor core accumulates in fp32 (truncating), so the runner is at least as
// accurate as the GPU; when every partial sum is exact in fp32 (small-integer
// test data) both give the same bits.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "hostrun/lowp.h"
#include "hostrun/runtime.h"
#include "hostrun/scheduler.h"

namespace ada::hostrun::mma {

inline void require_full_warp(const char* name, unsigned group) {
  if (group != 0xffffffffu)
    kernel_fail(std::string(name) +
                " needs all 32 lanes of a warp (the block's last warp is partial, or lanes are "
                "missing from the mask)");
}

// ---------------------------------------------------------------------------
// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32

enum class Input { Bf16, F16 };

struct MmaCall : WarpCall {
  const uint32_t* a = nullptr;  // this lane's 4 A registers
  const uint32_t* b = nullptr;  // 2 B registers
  const float* c = nullptr;     // 4 accumulators in
  float* d = nullptr;           // 4 accumulators out (may be c)
};

template <Input In>
double element(uint32_t reg, int half) {
  const uint16_t bits = static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffffu);
  return In == Input::Bf16 ? lowp::bf16_to_f32(bits) : lowp::f16_to_f32(bits);
}

template <Input In>
void complete_mma(WarpCall* const* lanes, unsigned group) {
  require_full_warp(In == Input::Bf16 ? "mma_m16n8k16_bf16" : "mma_m16n8k16_f16", group);
  double A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const auto* me = static_cast<const MmaCall*>(lanes[lane]);
    const int g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) A[g + 8 * (j & 1)][2 * t + 8 * (j >> 1) + h] = element<In>(me->a[j], h);
    for (int j = 0; j < 2; ++j)
      for (int h = 0; h < 2; ++h) B[2 * t + 8 * j + h][g] = element<In>(me->b[j], h);
    for (int i = 0; i < 4; ++i) C[g + 8 * (i >> 1)][2 * t + (i & 1)] = me->c[i];
  }
  // Every operand has been read: d may alias c.
  for (int lane = 0; lane < 32; ++lane) {
    const auto* me = static_cast<const MmaCall*>(lanes[lane]);
    const int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; ++i) {
      const int r = g + 8 * (i >> 1), n = 2 * t + (i & 1);
      double acc = C[r][n];
      for (int k = 0; k < 16; ++k) acc += A[r][k] * B[k][n];
      me->d[i] = static_cast<float>(acc);
    }
  }
}

template <Input In>
void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
  MmaCall call;
  call.complete = complete_mma<In>;
  call.name = In == Input::Bf16 ? "mma_m16n8k16_bf16" : "mma_m16n8k16_f16";
  call.a = a;
  call.b = b;
  call.c = c;
  call.d = d;
  warp_sync_point(0xffffffffu, &call);
}

// ---------------------------------------------------------------------------
// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16

struct LdmatrixCall : WarpCall {
  const void* row = nullptr;  // this lane's row address (used by lanes < 8 * count)
  uint32_t* r = nullptr;      // this lane's `count` destination registers
};

template <int Count, bool Trans>
constexpr const char* ldmatrix_name() {
  if constexpr (Trans) return Count == 1 ? "ldmatrix_x1_trans" : Count == 2 ? "ldmatrix_x2_trans" : "ldmatrix_x4_trans";
  else return Count == 1 ? "ldmatrix_x1" : Count == 2 ? "ldmatrix_x2" : "ldmatrix_x4";
}

template <int Count, bool Trans>
void complete_ldmatrix(WarpCall* const* lanes, unsigned group) {
  constexpr const char* name = ldmatrix_name<Count, Trans>();
  require_full_warp(name, group);
  uint16_t M[Count][8][8];
  for (int m = 0; m < Count; ++m)
    for (int row = 0; row < 8; ++row) {
      const int lane = 8 * m + row;
      const void* p = static_cast<const LdmatrixCall*>(lanes[lane])->row;
      if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
        kernel_fail(std::string(name) + ": lane " + std::to_string(lane) +
                    "'s row address is not 16-byte aligned");
      if (in_device_memory(p, 16))
        kernel_fail(std::string(name) + ": lane " + std::to_string(lane) +
                    "'s row address is global (cudaMalloc) memory; ldmatrix reads shared memory");
      std::memcpy(M[m][row], p, 16);
    }
  for (int lane = 0; lane < 32; ++lane) {
    uint32_t* r = static_cast<const LdmatrixCall*>(lanes[lane])->r;
    const int g = lane >> 2, t = lane & 3;
    for (int m = 0; m < Count; ++m) {
      const uint16_t lo = Trans ? M[m][2 * t][g] : M[m][g][2 * t];
      const uint16_t hi = Trans ? M[m][2 * t + 1][g] : M[m][g][2 * t + 1];
      r[m] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
  }
}

template <int Count, bool Trans>
void ldmatrix(uint32_t* r, const void* row) {
  LdmatrixCall call;
  call.complete = complete_ldmatrix<Count, Trans>;
  call.name = ldmatrix_name<Count, Trans>();
  call.row = row;
  call.r = r;
  warp_sync_point(0xffffffffu, &call);
}

}  // namespace ada::hostrun::mma
