// gemm_mma_tile (gemm_mma.h): one warp computes one 16 x 8 tile of C = A B^T
// with cp.async, ldmatrix and mma.sync, the structure the full tensor-core GEMM
// will scale up (more warps and tiles per block, more stages, swizzling).
//
// K advances in slices of 16 through a two-stage pipeline in shared memory:
// while slice s is multiplied, slice s + 1 is in flight. A slice of A is
// 16 x 16 bf16 = 32 chunks of 16 bytes (one per lane), a slice of B 8 x 16 =
// 16 chunks (lanes 0-15). Rows are padded to 24 elements (48 bytes): the 8 row
// addresses of one ldmatrix matrix then fall in 8 disjoint groups of 4 banks
// (48 r mod 128 bytes), so the loads are conflict-free.
#include <string>

#include "compat.h"
#include "launch.h"
#include "gemm_mma.h"
#include "warp_mma.h"

namespace ada::cuda {
namespace {

constexpr int kRowPad = 24;  // elements per shared row: 16 + 8

__global__ void __launch_bounds__(32) gemm_mma_tile_kernel(float* C, const __nv_bfloat16* A,
                                                           const __nv_bfloat16* B, int N, int K) {
  __shared__ __align__(16) __nv_bfloat16 As[2][16][kRowPad];
  __shared__ __align__(16) __nv_bfloat16 Bs[2][8][kRowPad];
  const int lane = static_cast<int>(threadIdx.x);
  const int m0 = static_cast<int>(blockIdx.y) * 16, n0 = static_cast<int>(blockIdx.x) * 8;
  const int row = lane / 2, half = 8 * (lane % 2);  // this lane's chunk of a slice

  auto load_slice = [&](int slice, int stage) {
    const int k = slice * 16 + half;
    ada::cuda::cp_async_16(&As[stage][row][half], A + size_t(m0 + row) * K + k);
    if (lane < 16) ada::cuda::cp_async_16(&Bs[stage][row][half], B + size_t(n0 + row) * K + k);
  };

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int slices = K / 16;
  load_slice(0, 0);
  ada::cuda::cp_async_commit();
  for (int s = 0; s < slices; ++s) {
    if (s + 1 < slices) load_slice(s + 1, (s + 1) % 2);
    ada::cuda::cp_async_commit();  // possibly empty: wait<1> below then always means "slice s"
    ada::cuda::cp_async_wait<1>();
    __syncwarp();  // the other lanes' chunks of slice s have landed
    const int st = s % 2;
    uint32_t a[4], b[2];
    // A quarters (rows 0-7 | 8-15) x (k 0-7 | 8-15) in mma's register order.
    ada::cuda::ldmatrix_x4(a, &As[st][lane % 8 + 8 * ((lane / 8) % 2)][8 * (lane / 16)]);
    // B rows n 0-7, k 0-7 and k 8-15 (lanes 16-31 repeat valid addresses, ignored).
    ada::cuda::ldmatrix_x2(b, &Bs[st][lane % 8][8 * ((lane / 8) % 2)]);
    ada::cuda::mma_m16n8k16_bf16(acc, a, b, acc);
    __syncwarp();  // everyone has read stage st before the next iteration refills it
  }
  // c[i] is C[g + 8 (i >> 1)][2t + (i & 1)].
  const int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) C[size_t(m0 + g + 8 * (i / 2)) * N + n0 + 2 * t + (i % 2)] = acc[i];
}

}  // namespace

void gemm_mma_tile(cudaStream_t s, float* C, const __nv_bfloat16* A, const __nv_bfloat16* B, int M, int N, int K) {
  check(M > 0 && N > 0 && K > 0 && M % 16 == 0 && N % 8 == 0 && K % 16 == 0,
        "gemm_mma_tile: M must be a multiple of 16, N of 8 and K of 16 (got " + std::to_string(M) + " x " +
            std::to_string(N) + " x " + std::to_string(K) + ")");
  ada::launch(gemm_mma_tile_kernel, dim3(N / 8, M / 16), 32, 0, s, C, A, B, N, K);
}

}  // namespace ada::cuda
