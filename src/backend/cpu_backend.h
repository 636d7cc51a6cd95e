// The CPU backend: the reference implementation of every backend operation,
// generic over the scalar type (float to train, double for gradient checks).
// Each method forwards to the op of the same name in src/ops/, where the math
// and its derivative are written out. The CUDA backend (cuda/cuda_backend.h)
// has the same methods with the same meaning, so the model and every method
// are written once as templates over the backend.
//
// Conventions: all pointers are backend memory; "set" outputs are overwritten,
// parameter gradients always accumulate (+=).
#pragma once
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/common.h"
#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/rows.h"
#include "ops/saved_store.h"
#include "ops/softmax.h"
#include "ops/swiglu.h"
#include "ops/topk.h"

namespace ada {

template <class T>
class CpuBackend {
 public:
  using Real = T;
  static constexpr bool kDevice = false;
  static const char* name() { return sizeof(T) == 8 ? "cpu-double" : "cpu-float"; }
  // Eigen runs single-threaded; the ops split their work over OpenMP threads.
  CpuBackend() { Eigen::setNbThreads(1); }

  // ---- memory ----------------------------------------------------------
  void* raw_alloc(size_t bytes) {
    void* p = std::aligned_alloc(64, (bytes + 63) & ~size_t(63));
    check(p != nullptr, "out of host memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void raw_free(void* p) { std::free(p); }
  void memset_zero(void* p, size_t bytes) { std::memset(p, 0, bytes); }
  void memset_bytes(void* p, int value, size_t bytes) { std::memset(p, value, bytes); }
  // Host -> backend and backend -> host copies, converting element types.
  template <class U, class V>
  void to_device(U* dst, const V* src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (U)src[i];
  }
  template <class U, class V>
  void to_host(U* dst, const V* src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (U)src[i];
  }
  template <class U>
  void copy(U* dst, const U* src, size_t n) {
    std::memcpy(dst, src, n * sizeof(U));
  }
  void sync() {}
  // Whether launched work runs later than the call (CudaBackend: while a CUDA
  // graph records); the CPU runs every op as it is called.
  bool defers_execution() const { return false; }

  // ---- per-token map ---------------------------------------------------
  // Runs f(i) for i in [0, n): the methods' halting arithmetic (HD functions).
  template <class F>
  void for_each(int n, const F& f) {
    ADA_PARALLEL_FOR((long long)n * 64)
    for (int i = 0; i < n; i++) f(i);
  }

  // ---- ops (see src/ops/<name>.h for the math) ------------------------------
  void embedding_forward(T* out, const int* ids, const T* table, int N, int D, T s) {
    ada::embedding_forward(out, ids, table, N, D, s);
  }
  void embedding_backward(T* dtable, const int* ids, const T* dout, int N, int D, T s) {
    ada::embedding_backward(dtable, ids, dout, N, D, s);
  }
  void rmsnorm_forward(T* y, T* rstd, const T* x, const T* w, int N, int D, double eps) {
    ada::rmsnorm_forward(y, rstd, x, w, N, D, eps);
  }
  void rmsnorm_backward(T* dx, T* dw, const T* dy, const T* x, const T* w, const T* rstd, int N, int D) {
    ada::rmsnorm_backward(dx, dw, dy, x, w, rstd, N, D);
  }
  void matmul_forward(T* y, const T* x, const T* W, int N, int I, int O, bool accumulate = false) {
    ada::matmul_forward(y, x, W, N, I, O, accumulate);
  }
  // A block's residual add: y (N, O) = r + x (N, I) W^T (y == r or disjoint).
  // A copy and an accumulating product here; on the GPU r is read in the
  // GEMM's epilogue (cuda::gemm_add), the same sum rounded the same way.
  void matmul_residual_forward(T* y, const T* r, const T* x, const T* W, int N, int I, int O) {
    if (y != r) copy(y, r, (size_t)N * O);
    ada::matmul_forward(y, x, W, N, I, O, /*accumulate=*/true);
  }
  // The MLP's up-projection and activation: gu (N, 2F) = x (N, D) W^T, act (N, F) = SwiGLU(gu).
  // Two ops here; one fused kernel on the GPU (cuda/gemm_mma.cu, gemm_mma_swiglu).
  void matmul_swiglu_forward(T* gu, T* act, const T* x, const T* W, int N, int D, int F) {
    ada::matmul_forward(gu, x, W, N, D, 2 * F, false);
    ada::swiglu_forward(act, gu, N, F);
  }
  void matmul_backward(T* dx, T* dW, const T* dy, const T* x, const T* W, int N, int I, int O,
                       bool accumulate_dx = false) {
    ada::matmul_backward(dx, dW, dy, x, W, N, I, O, accumulate_dx);
  }
  void matmul_nn_forward(T* y, const T* x, const T* W, int N, int I, int O, bool accumulate = false) {
    ada::matmul_nn_forward(y, x, W, N, I, O, accumulate);
  }
  void matmul_nn_backward(T* dx, T* dW, const T* dy, const T* x, const T* W, int N, int I, int O,
                          bool accumulate_dx = false) {
    ada::matmul_nn_backward(dx, dW, dy, x, W, N, I, O, accumulate_dx);
  }
  void rope_forward(T* x, int ld, int nheads, const int* pos, int N, int hs, const T* c, const T* s) {
    ada::rope_forward(x, ld, nheads, pos, N, hs, c, s);
  }
  void rope_backward(T* dx, int ld, int nheads, const int* pos, int N, int hs, const T* c, const T* s) {
    ada::rope_backward(dx, ld, nheads, pos, N, hs, c, s);
  }
  void attention_forward(T* out, T* lse, const T* q, const T* K, const T* V, const int* qslot,
                         const int* qstart, const KeyMeta& km, const AttnDims& d) {
    ada::attention_forward(out, lse, q, K, V, qslot, qstart, km, d);
  }
  void attention_backward(T* dq, T* dK, T* dV, const T* dout, const T* out, const T* lse, const T* q,
                          const T* K, const T* V, const int* qslot, const int* qstart, const KeyMeta& km,
                          const AttnDims& d) {
    ada::attention_backward(dq, dK, dV, dout, out, lse, q, K, V, qslot, qstart, km, d);
  }
  void swiglu_forward(T* y, const T* gu, int N, int F) { ada::swiglu_forward(y, gu, N, F); }
  void swiglu_backward(T* dgu, const T* dy, const T* gu, int N, int F) { ada::swiglu_backward(dgu, dy, gu, N, F); }
  void silu_forward(T* y, const T* u, size_t n) { ada::silu_forward(y, u, n); }
  void silu_backward(T* du, const T* dy, const T* u, size_t n) { ada::silu_backward(du, dy, u, n); }
  void logsoftmax_target_forward(T* lse, T* logp, const T* z, const int* y, int N, int V, int ld) {
    ada::logsoftmax_target_forward(lse, logp, z, y, N, V, ld);
  }
  void logsoftmax_target_backward(T* dz, const T* z, const T* lse, const int* y, const T* g_logp,
                                  const T* g_lse, int N, int V, int ld) {
    ada::logsoftmax_target_backward(dz, z, lse, y, g_logp, g_lse, N, V, ld);
  }
  void softmax_forward(T* p, const T* z, int N, int V) { ada::softmax_forward(p, z, N, V); }
  void softmax_backward(T* dz, const T* p, const T* dp, int N, int V) { ada::softmax_backward(dz, p, dp, N, V); }
  void topk_values_forward(T* vals, int* idx, const T* x, int N, int V, int K) {
    ada::topk_values_forward(vals, idx, x, N, V, K);
  }
  void topk_values_backward(T* dx, const T* dvals, const int* idx, int N, int V, int K) {
    ada::topk_values_backward(dx, dvals, idx, N, V, K);
  }
  void gather_rows(T* dst, int ldd, const T* src, int lds, const int* idx, int n, int w) {
    ada::gather_rows(dst, ldd, src, lds, idx, n, w);
  }
  void scatter_rows(T* dst, int ldd, const T* src, int lds, const int* idx, int n, int w) {
    ada::scatter_rows(dst, ldd, src, lds, idx, n, w);
  }
  void scatter_add_rows(T* dst, int ldd, const T* src, int lds, const int* idx, int n, int w) {
    ada::scatter_add_rows(dst, ldd, src, lds, idx, n, w);
  }
  void copy_block(T* dst, int ldd, const T* src, int lds, int n, int w) { ada::copy_block(dst, ldd, src, lds, n, w); }
  void to_bf16(uint16_t* dst, int ldd, const T* src, int lds, int n, int w) { ada::to_bf16(dst, ldd, src, lds, n, w); }
  void from_bf16(T* dst, int ldd, const uint16_t* src, int lds, int n, int w) {
    ada::from_bf16(dst, ldd, src, lds, n, w);
  }
  void scale_rows(T* y, const T* x, const T* s, int n, int D) { ada::scale_rows(y, x, s, n, D); }
  void row_dot(T* out, const T* a, const T* b, int n, int D) { ada::row_dot(out, a, b, n, D); }
  void add(T* y, const T* a, const T* b, size_t n) { ada::add(y, a, b, n); }
  void axpy(T* y, T alpha, const T* x, size_t n) { ada::axpy(y, alpha, x, n); }
  void scale(T* y, T alpha, size_t n) { ada::scale(y, alpha, n); }
  void fill(T* y, T v, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = v;
  }
  double sum(const T* x, size_t n) { return ada::sum(x, n); }
  // out[i] = sum of xs[i] (on the GPU: one wait for all of them).
  struct SumOf {
    const T* x;
    size_t n;
  };
  void sums(const std::vector<SumOf>& xs, double* out) {
    for (size_t i = 0; i < xs.size(); i++) out[i] = ada::sum(xs[i].x, xs[i].n);
  }
  double sum_squares(const T* x, size_t n) { return ada::sum_squares(x, n); }
  // One optimizer step over the whole parameter buffer: the global gradient
  // norm, clipping to `clip` (<= 0: off), then AdamW with weight decay on
  // elements [0, n_decay) and none on the rest. The norm is kept for logging
  // (on the GPU it stays on the device until last_grad_norm() asks for it).
  void adamw_step(T* p, const T* g, T* m, T* v, size_t n, size_t n_decay, const AdamWHyper& h, double clip) {
    const double norm = std::sqrt(ada::sum_squares(g, n));
    last_norm_ = norm;
    const T gs = (clip > 0 && norm > clip) ? T(clip / (norm + 1e-6)) : T(1);
    ada::adamw_update(p, g, m, v, n_decay, h, h.weight_decay, gs);
    ada::adamw_update(p + n_decay, g + n_decay, m + n_decay, v + n_decay, n - n_decay, h, 0.0, gs);
  }
  double last_grad_norm() const { return last_norm_; }

 private:
  double last_norm_ = 0;
};

}  // namespace ada
