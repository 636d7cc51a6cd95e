// Row and elementwise helpers: gather/scatter of rows (active-token
// compaction, KV slots), residual adds, scaled adds, reductions.
//   gather_rows:      dst[i, :] = src[idx[i], :]          dst (n, D)
//   scatter_rows:     dst[idx[i], :] = src[i, :]
//   scatter_add_rows: dst[idx[i], :] += src[i, :]   (idx must be distinct: no races)
// Every op's backward is another op of this file (gather <-> scatter_add).
#pragma once
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/parallel.h"

namespace ada {

// ld_dst / ld_src are row strides; `width` columns are moved per row.
template <class T>
void gather_rows(T* dst, int ld_dst, const T* src, int ld_src, const int* idx, int n, int width) {
  ADA_PARALLEL_FOR((long long)n * width)
  for (int i = 0; i < n; i++)
    std::memcpy(dst + (size_t)i * ld_dst, src + (size_t)idx[i] * ld_src, sizeof(T) * width);
}

template <class T>
void scatter_rows(T* dst, int ld_dst, const T* src, int ld_src, const int* idx, int n, int width) {
  ADA_PARALLEL_FOR((long long)n * width)
  for (int i = 0; i < n; i++)
    std::memcpy(dst + (size_t)idx[i] * ld_dst, src + (size_t)i * ld_src, sizeof(T) * width);
}

template <class T>
void scatter_add_rows(T* dst, int ld_dst, const T* src, int ld_src, const int* idx, int n, int width) {
  ADA_PARALLEL_FOR((long long)n * width)
  for (int i = 0; i < n; i++) {
    T* d = dst + (size_t)idx[i] * ld_dst;
    const T* s = src + (size_t)i * ld_src;
    for (int j = 0; j < width; j++) d[j] += s[j];
  }
}

// Per-row scaling (a gate times an update):
//   forward:  y[i, :] = s[i] * x[i, :]                  x, y (n, D); s (n)
//   backward: dx[i, :] = s[i] * dy[i, :]  (the same op),  ds[i] = <dy[i, :], x[i, :]>  (row_dot)
template <class T>
void scale_rows(T* y, const T* x, const T* s, int n, int D) {
  ADA_PARALLEL_FOR((long long)n * D)
  for (int i = 0; i < n; i++)
    for (int j = 0; j < D; j++) y[(size_t)i * D + j] = s[i] * x[(size_t)i * D + j];
}

// out[i] = <a[i, :], b[i, :]>   (set)
template <class T>
void row_dot(T* out, const T* a, const T* b, int n, int D) {
  ADA_PARALLEL_FOR((long long)n * D)
  for (int i = 0; i < n; i++) {
    T acc = 0;
    for (int j = 0; j < D; j++) acc += a[(size_t)i * D + j] * b[(size_t)i * D + j];
    out[i] = acc;
  }
}

// y = a + b
template <class T>
void add(T* y, const T* a, const T* b, size_t n) {
  ADA_PARALLEL_FOR(n)
  for (long long i = 0; i < (long long)n; i++) y[i] = a[i] + b[i];
}

// y += alpha * x
template <class T>
void axpy(T* y, T alpha, const T* x, size_t n) {
  ADA_PARALLEL_FOR(n)
  for (long long i = 0; i < (long long)n; i++) y[i] += alpha * x[i];
}

template <class T>
void scale(T* y, T alpha, size_t n) {
  ADA_PARALLEL_FOR(n)
  for (long long i = 0; i < (long long)n; i++) y[i] *= alpha;
}

// Sum and sum of squares accumulate in double whatever T is, in a fixed
// order (fixed chunks, partial sums added in chunk order), so the result does
// not depend on thread timing: needed for bit-exact resume.
template <class T, class F>
double reduce_fixed_order(const T* x, size_t n, F f) {
  const size_t chunk = 1 << 14;
  const long long nchunks = (long long)((n + chunk - 1) / chunk);
  if (nchunks <= 1) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += f((double)x[i]);
    return s;
  }
  std::vector<double> part((size_t)nchunks, 0.0);
#pragma omp parallel for schedule(static)
  for (long long c = 0; c < nchunks; c++) {
    const size_t i0 = (size_t)c * chunk, i1 = i0 + chunk < n ? i0 + chunk : n;
    double s = 0;
    for (size_t i = i0; i < i1; i++) s += f((double)x[i]);
    part[(size_t)c] = s;
  }
  double s = 0;
  for (double p : part) s += p;
  return s;
}

template <class T>
double sum(const T* x, size_t n) {
  return reduce_fixed_order(x, n, [](double v) { return v; });
}

template <class T>
double sum_squares(const T* x, size_t n) {
  return reduce_fixed_order(x, n, [](double v) { return v * v; });
}

}  // namespace ada
