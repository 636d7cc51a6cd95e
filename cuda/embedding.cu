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
// Deterministic backward (CudaBackend::set_deterministic, train_gpu
// --deterministic): no float atomics. The rows are sorted by (id, row) with
// a bitonic sort of 64-bit keys (unique keys, so the sorted order is unique);
// then the first row of each id owns that table row and adds its rows'
// gradients in row order, starting from the table's value: the CPU twin's
// order of additions, whatever the order of threads and blocks.
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

// ---- deterministic backward ----------------------------------------------
constexpr int kSortBlock = 1024;  // keys one block sorts in shared memory (two per thread)
constexpr int kSortThreads = kSortBlock / 2;

// keys[i] = (ids[i] << 32) | i for the N rows, then the largest key as padding to P.
__global__ void sort_keys_init(unsigned long long* keys, const int* ids, int N, int P) {
  const int i = static_cast<int>(blockIdx.x * kThreads + threadIdx.x);
  if (i >= P) return;
  keys[i] = i < N ? (static_cast<unsigned long long>(static_cast<unsigned>(ids[i])) << 32) | static_cast<unsigned>(i)
                  : ~0ull;
}

// The compare-exchange of bitonic sorting: key i (its bit `stride` clear) and
// key i + stride, in ascending order where bit `k` of i is clear.
__device__ inline void bitonic_pair(unsigned long long* a, unsigned long long* b, bool ascending) {
  const unsigned long long x = *a, y = *b;
  if ((x > y) == ascending) {
    *a = y;
    *b = x;
  }
}

// The steps of stride < kSortBlock, for bitonic sequence lengths k_first ..
// k_last, on each chunk of kSortBlock keys in shared memory.
__global__ void __launch_bounds__(kSortThreads)
    bitonic_local(unsigned long long* keys, int k_first, int k_last) {
  __shared__ unsigned long long s[kSortBlock];
  const int t = static_cast<int>(threadIdx.x), base = static_cast<int>(blockIdx.x) * kSortBlock;
  s[t] = keys[base + t];
  s[t + kSortThreads] = keys[base + t + kSortThreads];
  __syncthreads();
  for (int k = k_first; k <= k_last; k <<= 1)
    for (int stride = min(k, kSortBlock) / 2; stride > 0; stride >>= 1) {
      const int i = 2 * t - (t & (stride - 1));
      bitonic_pair(&s[i], &s[i + stride], ((base + i) & k) == 0);
      __syncthreads();
    }
  keys[base + t] = s[t];
  keys[base + t + kSortThreads] = s[t + kSortThreads];
}

// One step of stride >= kSortBlock over all P keys (P / 2 threads).
__global__ void __launch_bounds__(kThreads) bitonic_global(unsigned long long* keys, int stride, int k) {
  const int t = static_cast<int>(blockIdx.x * kThreads + threadIdx.x);
  const int i = 2 * t - (t & (stride - 1));
  bitonic_pair(&keys[i], &keys[i + stride], (i & k) == 0);
}

// grid (N, ceil(D / kColThreads)): block p is sorted row p; the first sorted
// row of an id sums all rows of that id, in row order, into the table row.
__global__ void __launch_bounds__(kColThreads)
    embedding_backward_sorted(float* dtable, const unsigned long long* keys, const float* dout, int N, int D,
                              float scale) {
  const int p = static_cast<int>(blockIdx.x);
  const int j = static_cast<int>(blockIdx.y * kColThreads + threadIdx.x);
  const unsigned long long id = keys[p] >> 32;
  if (j >= D || (p > 0 && keys[p - 1] >> 32 == id)) return;
  float* cell = &dtable[id * static_cast<unsigned long long>(D) + j];
  float acc = *cell;
  for (int q = p; q < N && keys[q] >> 32 == id; q++)
    acc += scale * dout[static_cast<size_t>(keys[q] & 0xffffffffull) * D + j];
  *cell = acc;
}

// Keys padded to a power of two, at least one shared-memory chunk.
size_t sort_size(int N) {
  size_t P = kSortBlock;
  while (P < static_cast<size_t>(N)) P *= 2;
  return P;
}

}  // namespace

size_t embedding_backward_deterministic_work_bytes(int N) { return sort_size(N) * sizeof(unsigned long long); }

void embedding_backward_deterministic(cudaStream_t s, float* dtable, const int* ids, const float* dout, int N, int D,
                                      float scale, void* work) {
  if (N <= 0 || D <= 0) return;
  auto* keys = static_cast<unsigned long long*>(work);
  const int P = static_cast<int>(sort_size(N));
  launch(sort_keys_init, blocks_for(P, kThreads), kThreads, 0, s, keys, ids, N, P);
  const unsigned chunks = static_cast<unsigned>(P / kSortBlock);
  launch(bitonic_local, chunks, kSortThreads, 0, s, keys, 2, kSortBlock);  // each chunk sorted
  for (int k = 2 * kSortBlock; k <= P; k *= 2) {  // merge: long strides globally, the rest per chunk
    for (int stride = k / 2; stride >= kSortBlock; stride /= 2)
      launch(bitonic_global, blocks_for(P / 2, kThreads), kThreads, 0, s, keys, stride, k);
    launch(bitonic_local, chunks, kSortThreads, 0, s, keys, k, k);
  }
  launch(embedding_backward_sorted, dim3(static_cast<unsigned>(N), blocks_for(D, kColThreads)), kColThreads, 0, s,
         dtable, keys, dout, N, D, scale);
}

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
