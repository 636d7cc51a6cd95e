// Warp-level tensor-core primitives (sm_80+): mma.sync m16n8k16 with bf16 or
// fp16 inputs and fp32 accumulators, ldmatrix, and cp.async with commit/wait
// groups. The building blocks of tensor-core GEMM and attention kernels.
//
// On the GPU each function is one inline PTX instruction. Under the host
// runner each is an exact emulation (cuda/hostrun/mma.h, async_copy.h) that
// follows the PTX ISA's fragment layouts, so a kernel that indexes fragments
// by lane computes the same thing on both sides; docs/hostrun.md, "Warp-level
// MMA", describes the layouts and what the runner checks.
//
// Fragment layouts, with g = lane >> 2 and t = lane % 4. A uint32_t register
// holds two 16-bit values, the lower-indexed one in bits 0-15 (pack_bf16x2).
//   mma A (16x16, row-major):  a[j] = A[g + 8 (j & 1)][2t + 8 (j >> 1) + {0,1}]
//   mma B (16x8, "col"):       b[j] = B[2t + 8 j + {0,1}][g]
//                              (two consecutive k of one column n: B^T rows)
//   mma C/D (16x8, fp32):      c[i] = C[g + 8 (i >> 1)][2t + (i & 1)]
//   ldmatrix m8n8 .b16:        lanes 8m..8m+7 pass the addresses of rows 0..7
//                              of matrix m (16 bytes each, 16-byte aligned, in
//                              shared memory); every lane gets r[m] =
//                              M_m[g][2t + {0,1}], or with _trans
//                              M_m[2t + {0,1}][g]. Lanes >= 8 x count pass any
//                              address (ignored).
// So an ldmatrix_x4 of the four 8x8 quarters of a row-major 16x16 tile, in the
// order (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15),
// (rows 8-15, cols 8-15), gives exactly mma's A registers; an ldmatrix_x2 of B
// stored n-major (B^T row-major, as in y = x W^T) gives its B registers, and
// ldmatrix_x2_trans of B stored k-major gives them too.
//
// cp.async: cp_async_16 copies 16 bytes global -> shared without passing
// through registers; cp_async_commit closes the calling thread's group of
// copies issued so far; cp_async_wait<N>() returns when at most the N most
// recent of its groups are still in flight. The copies of other threads become
// visible after their waits and a __syncthreads().
#pragma once
#include <cstdint>

#include "compat.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "warp_mma.h: mma.sync with bf16, ldmatrix and cp.async need sm_80 or newer; build with CUDA_ARCHS of 80 and above"
#endif

#if defined(ADA_HOSTRUN)
#include "hostrun/async_copy.h"
#include "hostrun/mma.h"
#endif

namespace ada::cuda {

// Two 16-bit values in one register: lo in bits 0-15, hi in bits 16-31 (the
// element with the lower column or row index goes in lo).
__host__ __device__ __forceinline__ uint32_t pack_b16x2(uint16_t lo, uint16_t hi) {
  return uint32_t(lo) | (uint32_t(hi) << 16);
}

// D = A B + C, A 16x16 and B 16x8 in bf16, C and D 16x8 fp32 (d may be c).
// All 32 lanes of the warp must call it together.
__device__ __forceinline__ void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                  const float c[4]) {
#if defined(ADA_HOSTRUN)
  ada::hostrun::mma::mma_m16n8k16<ada::hostrun::mma::Input::Bf16>(d, a, b, c);
#elif defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
#endif
}

// The same with fp16 inputs (same layouts).
__device__ __forceinline__ void mma_m16n8k16_f16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                 const float c[4]) {
#if defined(ADA_HOSTRUN)
  ada::hostrun::mma::mma_m16n8k16<ada::hostrun::mma::Input::F16>(d, a, b, c);
#elif defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
#endif
}

#if defined(__CUDA_ARCH__)
// The 32-bit shared-memory address PTX's .shared instructions take.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
#endif

// ldmatrix m8n8 .b16: `row` is this lane's row address (see the top).
__device__ __forceinline__ void ldmatrix_x1(uint32_t r[1], const void* row) {
#if defined(ADA_HOSTRUN)
  ada::hostrun::mma::ldmatrix<1, false>(r, row);
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(shared_address(row)));
#endif
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t r[2], const void* row) {
#if defined(ADA_HOSTRUN)
  ada::hostrun::mma::ldmatrix<2, false>(r, row);
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row)));
#endif
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* row) {
#if defined(ADA_HOSTRUN)
  ada::hostrun::mma::ldmatrix<4, false>(r, row);
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
#endif
}

__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t r[1], const void* row) {
#if defined(ADA_HOSTRUN)
  ada::hostrun::mma::ldmatrix<1, true>(r, row);
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(row)));
#endif
}

__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t r[2], const void* row) {
#if defined(ADA_HOSTRUN)
  ada::hostrun::mma::ldmatrix<2, true>(r, row);
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row)));
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* row) {
#if defined(ADA_HOSTRUN)
  ada::hostrun::mma::ldmatrix<4, true>(r, row);
#elif defined(__CUDA_ARCH__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
#endif
}

// cp.async.cg.shared.global, 16 bytes (cached in L2 only: streamed operands).
// Both addresses 16-byte aligned; smem in shared memory, gmem in global memory.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
#if defined(ADA_HOSTRUN)
  ada::hostrun::async_copy::issue(smem, gmem, 16);
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(smem)), "l"(gmem) : "memory");
#endif
}

// The same, but when `valid` is false nothing is read and the 16 bytes are
// zero-filled (src-size 0): out-of-range rows of a tile. gmem must still be an
// aligned address (any in-range one will do).
__device__ __forceinline__ void cp_async_16_zfill(void* smem, const void* gmem, bool valid) {
  const unsigned src_bytes = valid ? 16u : 0u;
#if defined(ADA_HOSTRUN)
  ada::hostrun::async_copy::issue(smem, gmem, src_bytes);
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
#endif
}

// Closes the calling thread's current group of cp.async copies.
__device__ __forceinline__ void cp_async_commit() {
#if defined(ADA_HOSTRUN)
  ada::hostrun::async_copy::commit();
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most N of the calling thread's committed groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  static_assert(N >= 0 && N <= 7, "cp_async_wait<N>: N is a small immediate (0..7)");
#if defined(ADA_HOSTRUN)
  ada::hostrun::async_copy::wait(N);
#elif defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace ada::cuda
