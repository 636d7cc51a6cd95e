// Token embedding lookup and its backward (src/ops/embedding.h).
//   forward:  out[n, :] = scale * table[ids[n], :]        out (N, D), table (V, D)
//   backward: dtable[ids[n], :] += scale * dout[n, :]
// Forward: one thread per output element, consecutive threads on consecutive
// columns (coalesced reads of a table row and writes of an output row).
// Backward: rows with the same id add into the same table row. Each thread
// owns one column of a chunk of kRowsPerBlock consecutive rows and sums runs
// of equal consecutive ids in a register before one atomicAdd per run: a
// pause method's rows (all id 0) or a gate bias (D = 1, all id 0) cost one
// atomic per chunk instead of one per row. The order in which chunks add to a
// shared table row is not fixed on a GPU (float addition order; under the
// host runner blocks run in order).
#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kColThreads = 128;
constexpr int kRowsPerBlock = 32;

__global__ void __launch_bounds__(kThreads)
    embedding_forward_kernel(float* out, const int* ids, const float* table, int N, int D, float scale) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= static_cast<size_t>(N) * D) return;
  const size_t n = i / D, j = i % D;
  out[i] = scale * table[static_cast<size_t>(ids[n]) * D + j];
}

// grid (ceil(D / kColThreads), ceil(N / kRowsPerBlock))
__global__ void __launch_bounds__(kColThreads)
    embedding_backward_kernel(float* dtable, const int* ids, const float* dout, int N, int D, float scale) {
  const int j = static_cast<int>(blockIdx.x * kColThreads + threadIdx.x);
  if (j >= D) return;
  const int n0 = static_cast<int>(blockIdx.y) * kRowsPerBlock;
  const int n1 = min(N, n0 + kRowsPerBlock);
  int run_id = ids[n0];
  float acc = 0.0f;
  for (int n = n0; n < n1; n++) {
    const int id = ids[n];
    if (id != run_id) {
      atomicAdd(&dtable[static_cast<size_t>(run_id) * D + j], acc);
      run_id = id;
      acc = 0.0f;
    }
    acc += scale * dout[static_cast<size_t>(n) * D + j];
  }
  atomicAdd(&dtable[static_cast<size_t>(run_id) * D + j], acc);
}

}  // namespace

void embedding_forward(cudaStream_t s, float* out, const int* ids, const float* table, int N, int D, float scale) {
  if (N <= 0 || D <= 0) return;
  launch(embedding_forward_kernel, blocks_for(static_cast<size_t>(N) * D, kThreads), kThreads, 0, s, out, ids, table,
         N, D, scale);
}

void embedding_backward(cudaStream_t s, float* dtable, const int* ids, const float* dout, int N, int D, float scale) {
  if (N <= 0 || D <= 0) return;
  const dim3 grid(blocks_for(D, kColThreads), blocks_for(N, kRowsPerBlock));
  launch(embedding_backward_kernel, grid, kColThreads, 0, s, dtable, ids, dout, N, D, scale);
}

}  // namespace ada::cuda
