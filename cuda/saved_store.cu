// How the backward's saved activations are stored, on the GPU: a column
// block copied out of a wider buffer, and bf16 storage (--bf16-acts 1). The
// CPU twins and the meaning are in src/ops/saved_store.h; the rounding is
// __float2bfloat16_rn (nearest, ties to even), the CPU's bf16_round, so both
// backends store the same bits.
//   copy_block: dst[i, :w] = src[i, :w]
//   to_bf16:    dst[i, :w] = bf16(src[i, :w])
//   from_bf16:  dst[i, :w] = float(src[i, :w])
// One block (kRowThreads threads) per row, consecutive threads on
// consecutive columns, as the row moves of rows.cu.
#include "compat.h"
#include "launch.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kRowThreads = 128;

__global__ void __launch_bounds__(kRowThreads)
    copy_block_kernel(float* dst, int ldd, const float* src, int lds, int w) {
  const size_t d = static_cast<size_t>(blockIdx.x) * ldd, s = static_cast<size_t>(blockIdx.x) * lds;
  for (int j = static_cast<int>(threadIdx.x); j < w; j += kRowThreads) dst[d + j] = src[s + j];
}

__global__ void __launch_bounds__(kRowThreads)
    to_bf16_kernel(uint16_t* dst, int ldd, const float* src, int lds, int w) {
  const size_t d = static_cast<size_t>(blockIdx.x) * ldd, s = static_cast<size_t>(blockIdx.x) * lds;
  for (int j = static_cast<int>(threadIdx.x); j < w; j += kRowThreads)
    dst[d + j] = __bfloat16_as_ushort(__float2bfloat16_rn(src[s + j]));
}

__global__ void __launch_bounds__(kRowThreads)
    from_bf16_kernel(float* dst, int ldd, const uint16_t* src, int lds, int w) {
  const size_t d = static_cast<size_t>(blockIdx.x) * ldd, s = static_cast<size_t>(blockIdx.x) * lds;
  for (int j = static_cast<int>(threadIdx.x); j < w; j += kRowThreads)
    dst[d + j] = __bfloat162float(__ushort_as_bfloat16(src[s + j]));
}

}  // namespace

void copy_block(cudaStream_t s, float* dst, int ldd, const float* src, int lds, int n, int w) {
  if (n > 0 && w > 0) launch(copy_block_kernel, n, kRowThreads, 0, s, dst, ldd, src, lds, w);
}
void to_bf16(cudaStream_t s, uint16_t* dst, int ldd, const float* src, int lds, int n, int w) {
  if (n > 0 && w > 0) launch(to_bf16_kernel, n, kRowThreads, 0, s, dst, ldd, src, lds, w);
}
void from_bf16(cudaStream_t s, float* dst, int ldd, const uint16_t* src, int lds, int n, int w) {
  if (n > 0 && w > 0) launch(from_bf16_kernel, n, kRowThreads, 0, s, dst, ldd, src, lds, w);
}

}  // namespace ada::cuda
