// Token embedding lookup.
//   forward:  out[n, :] = scale * table[ids[n], :]          out (N, D), table (V, D)
//   backward: dtable[ids[n], :] += scale * dout[n, :]
// Rows with the same id add into the same table row, so the backward splits
// the work over columns (every thread owns a slice of every row): no races,
// no atomics, deterministic.
#pragma once
#include "ops/parallel.h"

namespace ada {

template <class T>
void embedding_forward(T* out, const int* ids, const T* table, int N, int D, T scale) {
  ADA_PARALLEL_FOR((long long)N * D)
  for (int n = 0; n < N; n++) {
    const T* row = table + (size_t)ids[n] * D;
    T* o = out + (size_t)n * D;
    for (int j = 0; j < D; j++) o[j] = scale * row[j];
  }
}

template <class T>
void embedding_backward(T* dtable, const int* ids, const T* dout, int N, int D, T scale) {
  const int chunk = 16;
  const int nchunks = (D + chunk - 1) / chunk;
  ADA_PARALLEL_FOR((long long)N * D)
  for (int c = 0; c < nchunks; c++) {
    const int j0 = c * chunk, j1 = j0 + chunk < D ? j0 + chunk : D;
    for (int n = 0; n < N; n++) {
      T* drow = dtable + (size_t)ids[n] * D;
      const T* g = dout + (size_t)n * D;
      for (int j = j0; j < j1; j++) drow[j] += scale * g[j];
    }
  }
}

}  // namespace ada
