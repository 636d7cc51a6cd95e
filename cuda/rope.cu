// Rotary position embedding, rotate-half convention, in place (src/ops/rope.h).
// Within each head of size hs, element i pairs with i + hs/2 (h = hs/2):
//   y_i = x_i cos - x_{i+h} sin;   y_{i+h} = x_i sin + x_{i+h} cos       (sign = +1)
// and the inverse rotation (sin -> -sin) for the backward (sign = -1).
// x: N rows of stride ld; `nheads` consecutive heads from column 0 (q and k
// of qkv together). cos/sin tables (max_seq, h), row pos[n].
// One thread per (row, head, pair): it reads and writes both elements of its
// pair, so the in-place update has no hazards.
#include "compat.h"
#include "launch.h"
#include "device_util.h"
#include "kernels.h"

namespace ada::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) rope_kernel(float* x, int ld, int nheads, const int* pos, int N, int hs,
                                                        const float* cos_t, const float* sin_t, float sign) {
  const int h = hs / 2;
  const size_t t = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  const size_t per_row = static_cast<size_t>(nheads) * h;
  if (t >= static_cast<size_t>(N) * per_row) return;
  const int n = static_cast<int>(t / per_row);
  const int rest = static_cast<int>(t % per_row);
  const int head = rest / h, i = rest % h;
  const size_t tab = static_cast<size_t>(pos[n]) * h + i;
  const float c = cos_t[tab], sn = sign * sin_t[tab];
  float* v = x + static_cast<size_t>(n) * ld + static_cast<size_t>(head) * hs;
  const float a = v[i], b = v[i + h];
  v[i] = a * c - b * sn;
  v[i + h] = a * sn + b * c;
}

}  // namespace

void rope(cudaStream_t s, float* x, int ld, int nheads, const int* pos, int N, int hs, const float* cos_t,
          const float* sin_t, int sign) {
  const size_t total = static_cast<size_t>(N) * nheads * (hs / 2);
  if (total == 0) return;
  launch(rope_kernel, blocks_for(total, kThreads), kThreads, 0, s, x, ld, nheads, pos, N, hs, cos_t, sin_t,
         static_cast<float>(sign));
}

}  // namespace ada::cuda
