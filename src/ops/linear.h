// Linear layer without bias, weights stored (out, in) as in PyTorch:
//   forward:  y = x W^T                 x (N, I), W (O, I), y (N, O)
//   backward: dx = dy W                 (N, I)   set, or += with accumulate
//             dW += dy^T x              (O, I)   always accumulates
// Eigen's single-threaded GEMM does the arithmetic; the threads split the
// OUTPUT into row blocks (rows of y and dx, rows of dW), so no two threads
// write the same element and there is no synchronisation inside a product
// (Eigen's own multi-threaded GEMM spin-waits between panels, which costs a
// third of the time at these sizes). The maps only describe row-major
// layouts, with a row stride ("ld") so that a column block of a wider matrix
// (e.g. the q part of qkv) can be used in place.
#pragma once
#include <omp.h>

#include <Eigen/Core>

#include "ops/parallel.h"

namespace ada {

// Runs f(r0, r1) on contiguous blocks of [0, rows), one per thread, when the
// product has enough work (flops = multiply-adds); otherwise on one thread.
template <class F>
void split_rows(int rows, double flops, F f) {
  const int nt = omp_get_max_threads();
  if (nt <= 1 || rows < 2 * nt || flops < 1e6 || omp_in_parallel()) return f(0, rows);
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    const int r0 = (int)((long long)rows * t / n), r1 = (int)((long long)rows * (t + 1) / n);
    if (r1 > r0) f(r0, r1);
  }
}

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MapMat = Eigen::Map<RowMat<T>, 0, Eigen::OuterStride<>>;
template <class T>
using CMapMat = Eigen::Map<const RowMat<T>, 0, Eigen::OuterStride<>>;

template <class T>
inline MapMat<T> mat(T* p, int rows, int cols, int ld) {
  return MapMat<T>(p, rows, cols, Eigen::OuterStride<>(ld));
}
template <class T>
inline CMapMat<T> cmat(const T* p, int rows, int cols, int ld) {
  return CMapMat<T>(p, rows, cols, Eigen::OuterStride<>(ld));
}

template <class T>
void matmul_forward(T* y, const T* x, const T* W, int N, int I, int O, bool accumulate = false) {
  if (N == 0) return;
  split_rows(N, (double)N * I * O, [&](int r0, int r1) {
    auto Y = mat(y + (size_t)r0 * O, r1 - r0, O, O);
    auto X = cmat(x + (size_t)r0 * I, r1 - r0, I, I);
    auto Wm = cmat(W, O, I, I);
    if (accumulate)
      Y.noalias() += X * Wm.transpose();
    else
      Y.noalias() = X * Wm.transpose();
  });
}

// dx may be null (input needs no gradient, e.g. a frozen input).
template <class T>
void matmul_backward(T* dx, T* dW, const T* dy, const T* x, const T* W, int N, int I, int O,
                     bool accumulate_dx = false) {
  if (N == 0) return;
  if (dx)
    split_rows(N, (double)N * I * O, [&](int r0, int r1) {
      auto DX = mat(dx + (size_t)r0 * I, r1 - r0, I, I);
      auto DY = cmat(dy + (size_t)r0 * O, r1 - r0, O, O);
      auto Wm = cmat(W, O, I, I);
      if (accumulate_dx)
        DX.noalias() += DY * Wm;
      else
        DX.noalias() = DY * Wm;
    });
  // dW[o0:o1, :] += dy[:, o0:o1]^T x
  split_rows(O, (double)N * I * O, [&](int o0, int o1) {
    mat(dW + (size_t)o0 * I, o1 - o0, I, I).noalias() += cmat(dy + o0, N, o1 - o0, O).transpose() * cmat(x, N, I, I);
  });
}

// The same with the weight used as stored, (in, out): y = x W.
// (PonderLM's soft embedding p E multiplies probabilities (N, V) by the
// embedding table (V, D) as it is.)
//   forward:  y = x W          x (N, I), W (I, O), y (N, O)
//   backward: dx = dy W^T      (set, or += with accumulate_dx)
//             dW += x^T dy
template <class T>
void matmul_nn_forward(T* y, const T* x, const T* W, int N, int I, int O, bool accumulate = false) {
  if (N == 0) return;
  split_rows(N, (double)N * I * O, [&](int r0, int r1) {
    auto Y = mat(y + (size_t)r0 * O, r1 - r0, O, O);
    auto X = cmat(x + (size_t)r0 * I, r1 - r0, I, I);
    if (accumulate)
      Y.noalias() += X * cmat(W, I, O, O);
    else
      Y.noalias() = X * cmat(W, I, O, O);
  });
}

template <class T>
void matmul_nn_backward(T* dx, T* dW, const T* dy, const T* x, const T* W, int N, int I, int O,
                        bool accumulate_dx = false) {
  if (N == 0) return;
  if (dx)
    split_rows(N, (double)N * I * O, [&](int r0, int r1) {
      auto DX = mat(dx + (size_t)r0 * I, r1 - r0, I, I);
      auto DY = cmat(dy + (size_t)r0 * O, r1 - r0, O, O);
      if (accumulate_dx)
        DX.noalias() += DY * cmat(W, I, O, O).transpose();
      else
        DX.noalias() = DY * cmat(W, I, O, O).transpose();
    });
  // dW[i0:i1, :] += x[:, i0:i1]^T dy
  split_rows(I, (double)N * I * O, [&](int i0, int i1) {
    mat(dW + (size_t)i0 * O, i1 - i0, O, O).noalias() += cmat(x + i0, N, i1 - i0, I).transpose() * cmat(dy, N, O, O);
  });
}

}  // namespace ada
