// The two searches over KV-slot orders that both attention kernels
// (attention.cu, attention_mma.cu) use to bound their tiles: slot orders
// are nondecreasing within a sequence, so a query tile sees only a prefix of
// its sequence's slots and a key tile only a suffix of its queries.
#pragma once
#include "compat.h"
#include "ops/attention_mask.h"

namespace ada::cuda {

// Number of leading slots of sequence b whose order is <= `order`.
__device__ __forceinline__ int prefix_with_order_le(const KeyMeta& km, int b, int order) {
  int lo = 0, hi = km.S;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (km.order[b * km.S + mid] <= order) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// First query row in [q0, q1) whose slot order is >= `order`.
__device__ __forceinline__ int first_query_with_order_ge(const KeyMeta& km, const int* qslot, int q0, int q1,
                                                         int order) {
  int lo = q0, hi = q1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (km.order[qslot[mid]] < order) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

}  // namespace ada::cuda
