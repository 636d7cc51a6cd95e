// Top-K values of each row: what TaH2's decider reads of a next-token
// distribution (its K largest probabilities, sorted).
//   x (N, V);  vals, idx (N, K),  K <= V
//   forward:  idx[n, :] = the columns of the K largest x[n, :], in descending
//             order of value, ties broken by the lower column;
//             vals[n, j] = x[n, idx[n, j]]
//   backward: dx[n, idx[n, j]] += dvals[n, j]      (accumulates; the columns of
//             a row are distinct, so there is no conflict)
// The selection is a constant of the backward (like a max-pool's argmax): the
// derivative holds wherever no two values tie across the K-th place.
// cuda/topk.cu computes the same selection with a radix select.
#pragma once
#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/parallel.h"

namespace ada {

template <class T>
void topk_values_forward(T* vals, int* idx, const T* x, int N, int V, int K) {
  ADA_PARALLEL_FOR((long long)N * V)
  for (int n = 0; n < N; n++) {
    const T* xn = x + (size_t)n * V;
    if (K == 1) {  // the argmax (every readout's): one scan, the first of equal maxima
      int best = 0;
      for (int v = 1; v < V; v++)
        if (xn[v] > xn[best]) best = v;
      idx[n] = best, vals[n] = xn[best];
      continue;
    }
    std::vector<int> order(V);
    std::iota(order.begin(), order.end(), 0);
    // "a before b": larger value, or the same value and the lower column
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [xn](int a, int b) { return xn[a] > xn[b] || (xn[a] == xn[b] && a < b); });
    for (int j = 0; j < K; j++) {
      idx[(size_t)n * K + j] = order[j];
      vals[(size_t)n * K + j] = xn[order[j]];
    }
  }
}

template <class T>
void topk_values_backward(T* dx, const T* dvals, const int* idx, int N, int V, int K) {
  ADA_PARALLEL_FOR((long long)N * K)
  for (int n = 0; n < N; n++)
    for (int j = 0; j < K; j++) dx[(size_t)n * V + idx[(size_t)n * K + j]] += dvals[(size_t)n * K + j];
}

}  // namespace ada
