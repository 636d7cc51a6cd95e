// Linear layer without bias, weights stored (out, in) as in PyTorch:
//   forward:  y = x W^T                 x (N, I), W (O, I), y (N, O)
//   backward: dx = dy W                 (N, I)   set, or += with accumulate
//             dW += dy^T x              (O, I)   always accumulates
// Eigen's GEMM does the work (multi-threaded through OpenMP); the maps below
// only describe the row-major layouts, with a row stride ("ld") so that a
// column block of a wider matrix (e.g. the q part of qkv) can be used in place.
#pragma once
#include <Eigen/Core>

namespace ada {

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
  auto Y = mat(y, N, O, O);
  auto X = cmat(x, N, I, I);
  auto Wm = cmat(W, O, I, I);
  if (accumulate)
    Y.noalias() += X * Wm.transpose();
  else
    Y.noalias() = X * Wm.transpose();
}

// dx may be null (input needs no gradient, e.g. a frozen input).
template <class T>
void matmul_backward(T* dx, T* dW, const T* dy, const T* x, const T* W, int N, int I, int O,
                     bool accumulate_dx = false) {
  if (N == 0) return;
  auto DY = cmat(dy, N, O, O);
  if (dx) {
    auto DX = mat(dx, N, I, I);
    auto Wm = cmat(W, O, I, I);
    if (accumulate_dx)
      DX.noalias() += DY * Wm;
    else
      DX.noalias() = DY * Wm;
  }
  auto DW = mat(dW, O, I, I);
  DW.noalias() += DY.transpose() * cmat(x, N, I, I);
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
  auto Y = mat(y, N, O, O);
  if (accumulate)
    Y.noalias() += cmat(x, N, I, I) * cmat(W, I, O, O);
  else
    Y.noalias() = cmat(x, N, I, I) * cmat(W, I, O, O);
}

template <class T>
void matmul_nn_backward(T* dx, T* dW, const T* dy, const T* x, const T* W, int N, int I, int O,
                        bool accumulate_dx = false) {
  if (N == 0) return;
  auto DY = cmat(dy, N, O, O);
  if (dx) {
    auto DX = mat(dx, N, I, I);
    if (accumulate_dx)
      DX.noalias() += DY * cmat(W, I, O, O).transpose();
    else
      DX.noalias() = DY * cmat(W, I, O, O).transpose();
  }
  mat(dW, I, O, O).noalias() += cmat(x, N, I, I).transpose() * DY;
}

}  // namespace ada
