// The CUDA backend: the same member functions as CpuBackend<float>
// (src/backend/cpu_backend.h, the reference, whose conventions apply here:
// outputs first, "set" outputs overwritten, parameter gradients accumulate)
// implemented with the hand-written kernels of cuda/*.cu. The model, every
// method and the trainer are templates over the backend, so they run on the
// GPU unchanged.
//
// Parameters, gradients, optimizer state and activations live in device
// memory, in fp32. All work goes to one stream, in order; the host waits for
// the GPU only where a value must reach the host (to_host, sum, sum_squares,
// last_grad_norm: logging, and the halting decisions a method makes on the
// host). Host-to-device uploads (pass plans, KV-slot metadata, targets) go
// through a pinned staging ring, so they do not wait for the GPU either.
//
// Matrix products run on tensor cores (bf16 inputs, fp32 accumulation) by
// default; ADA_GEMM=fp32|bf16|tf32|bf16mma in the environment, or set_gemm(), picks
// the path (cuda/gemm.cu). Attention runs the fp32 flash kernel
// (cuda/attention.cu) by default; ADA_ATTN=mma, or set_attention(), picks the
// tensor-core one (cuda/attention_mma.cu) for head sizes it takes (multiples
// of 16 up to 128; others stay on fp32). Its backward adds dq with float
// atomics, so deterministic mode keeps the fp32 backward.
//
// Under the host runner (tests, no GPU) the same code runs on the CPU:
// cuda/hostrun/ stands in for the CUDA runtime and executes the kernels.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "compat.h"
#include "launch.h"
#include "attention_mma.h"
#include "kernels.h"
#include "step_graph.h"
#include "ops/adamw.h"
#include "ops/attention_mask.h"

namespace ada {

// The per-token map: f(i) for i in [0, n), one thread per index. A template
// in the header so that every method can instantiate it with its own HD
// functor (the halting arithmetic written in the method's file).
template <class F>
__global__ void map_kernel(int n, F f) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) f(i);
}

class CudaBackend {
 public:
  using Real = float;
  static constexpr bool kDevice = true;
  static const char* name() { return "cuda"; }

  // The GEMM path comes from ADA_GEMM (default bf16 tensor cores).
  CudaBackend();
  explicit CudaBackend(cuda::GemmPrecision gemm);
  ~CudaBackend();
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  void set_gemm(cuda::GemmPrecision p) { gemm_ = p; }
  cuda::GemmPrecision gemm() const { return gemm_; }
  // The attention kernel comes from ADA_ATTN (default fp32).
  void set_attention(cuda::AttnKernel k) { attn_ = k; }
  cuda::AttnKernel attention() const { return attn_; }
  // Deterministic mode (train_gpu --deterministic): ops that would add floats
  // with atomics in an unspecified order (the embedding backward, through it
  // the gate biases and pause embeddings) take a fixed-order path instead, so
  // two runs give bit-identical gradients. Slower; off by default.
  void set_deterministic(bool on) { deterministic_ = on; }
  bool deterministic() const { return deterministic_; }

  // ---- memory ----------------------------------------------------------
  void* raw_alloc(size_t bytes);
  void raw_free(void* p);
  void memset_zero(void* p, size_t bytes);
  void memset_bytes(void* p, int value, size_t bytes);
  // Host -> device: converted to U on the host, into pinned staging memory,
  // then one asynchronous copy per chunk. Returns without waiting.
  template <class U, class V>
  void to_device(U* dst, const V* src, size_t n) {
    const size_t chunk = staging_chunk_bytes() / sizeof(U);
    for (size_t i0 = 0; i0 < n; i0 += chunk) {
      const size_t m = n - i0 < chunk ? n - i0 : chunk;
      U* stage = static_cast<U*>(stage_upload(m * sizeof(U)));
      for (size_t i = 0; i < m; i++) stage[i] = static_cast<U>(src[i0 + i]);
      upload(dst + i0, stage, m * sizeof(U));
    }
  }
  // Device -> host: waits for the stream (the only way a value reaches the host).
  template <class U, class V>
  void to_host(U* dst, const V* src, size_t n) {
    if (n == 0) return;
    std::vector<V> tmp(n);
    download(tmp.data(), src, n * sizeof(V));
    for (size_t i = 0; i < n; i++) dst[i] = static_cast<U>(tmp[i]);
  }
  template <class U>
  void copy(U* dst, const U* src, size_t n) {
    copy_bytes(dst, src, n * sizeof(U));
  }
  void sync();

  // ---- per-token map ---------------------------------------------------
  template <class F>
  void for_each(int n, const F& f) {
    if (n <= 0) return;
    constexpr int kThreads = 128;
    launch(map_kernel<F>, (n + kThreads - 1) / kThreads, kThreads, 0, stream, n, f);
  }

  // ---- ops (math in src/ops/<name>.h, kernels in cuda/<family>.cu) -------
  void embedding_forward(float* out, const int* ids, const float* table, int N, int D, float s) {
    cuda::embedding_forward(stream, out, ids, table, N, D, s);
  }
  void embedding_backward(float* dtable, const int* ids, const float* dout, int N, int D, float s) {
    if (deterministic_)
      cuda::embedding_backward_deterministic(stream, dtable, ids, dout, N, D, s,
                                             workspace(cuda::embedding_backward_deterministic_work_bytes(N)));
    else
      cuda::embedding_backward(stream, dtable, ids, dout, N, D, s);
  }
  void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int N, int D, double eps) {
    cuda::rmsnorm_forward(stream, y, rstd, x, w, N, D, static_cast<float>(eps));
  }
  void rmsnorm_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, const float* rstd,
                        int N, int D) {
    cuda::rmsnorm_backward(stream, dx, dw, dy, x, w, rstd, N, D, workspace(cuda::rmsnorm_backward_work_bytes(N, D)));
  }
  // y (N, O) = x (N, I) W^T, W (O, I)
  void matmul_forward(float* y, const float* x, const float* W, int N, int I, int O, bool accumulate = false);
  // y (N, O) = r + x W^T: a block's residual add, r read in the GEMM's
  // epilogue (cuda::gemm_add) instead of copied into y first. y == r or
  // disjoint.
  void matmul_residual_forward(float* y, const float* r, const float* x, const float* W, int N, int I, int O);
  // gu (N, 2F) = x W^T and act (N, F) = SwiGLU(gu); with ADA_GEMM=bf16mma one
  // kernel (the activation in the GEMM's epilogue, cuda::gemm_swiglu).
  void matmul_swiglu_forward(float* gu, float* act, const float* x, const float* W, int N, int D, int F);
  // dx (N, I) = dy W (set or +=; skipped when dx is null);  dW (O, I) += dy^T x
  void matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int N, int I, int O,
                       bool accumulate_dx = false);
  // y (N, O) = x (N, I) W, W (I, O)
  void matmul_nn_forward(float* y, const float* x, const float* W, int N, int I, int O, bool accumulate = false);
  // dx (N, I) = dy W^T;  dW (I, O) += x^T dy
  void matmul_nn_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int N, int I, int O,
                          bool accumulate_dx = false);
  void rope_forward(float* x, int ld, int nheads, const int* pos, int N, int hs, const float* c, const float* s) {
    cuda::rope(stream, x, ld, nheads, pos, N, hs, c, s, +1);
  }
  void rope_backward(float* dx, int ld, int nheads, const int* pos, int N, int hs, const float* c, const float* s) {
    cuda::rope(stream, dx, ld, nheads, pos, N, hs, c, s, -1);
  }
  void attention_forward(float* out, float* lse, const float* q, const float* K, const float* V, const int* qslot,
                         const int* qstart, const KeyMeta& km, const AttnDims& d) {
    if (attn_ == cuda::AttnKernel::Mma && cuda::attention_mma_supports(d.hs))
      cuda::attention_mma_forward(stream, out, lse, q, K, V, qslot, qstart, km, d);
    else
      cuda::attention_forward(stream, out, lse, q, K, V, qslot, qstart, km, d);
  }
  void attention_backward(float* dq, float* dK, float* dV, const float* dout, const float* out, const float* lse,
                          const float* q, const float* K, const float* V, const int* qslot, const int* qstart,
                          const KeyMeta& km, const AttnDims& d) {
    if (attn_ == cuda::AttnKernel::Mma && cuda::attention_mma_supports(d.hs) && !deterministic_)
      cuda::attention_mma_backward(stream, dq, dK, dV, dout, out, lse, q, K, V, qslot, qstart, km, d,
                                   workspace(cuda::attention_mma_backward_work_bytes(d)));
    else
      cuda::attention_backward(stream, dq, dK, dV, dout, out, lse, q, K, V, qslot, qstart, km, d,
                               workspace(cuda::attention_backward_work_bytes(d)));
  }
  void swiglu_forward(float* y, const float* gu, int N, int F) { cuda::swiglu_forward(stream, y, gu, N, F); }
  void swiglu_backward(float* dgu, const float* dy, const float* gu, int N, int F) {
    cuda::swiglu_backward(stream, dgu, dy, gu, N, F);
  }
  void silu_forward(float* y, const float* u, size_t n) { cuda::silu_forward(stream, y, u, n); }
  void silu_backward(float* du, const float* dy, const float* u, size_t n) {
    cuda::silu_backward(stream, du, dy, u, n);
  }
  void logsoftmax_target_forward(float* lse, float* logp, const float* z, const int* y, int N, int V, int ld) {
    cuda::logsoftmax_target_forward(stream, lse, logp, z, y, N, V, ld);
  }
  void logsoftmax_target_backward(float* dz, const float* z, const float* lse, const int* y, const float* g_logp,
                                  const float* g_lse, int N, int V, int ld) {
    cuda::logsoftmax_target_backward(stream, dz, z, lse, y, g_logp, g_lse, N, V, ld);
  }
  void softmax_forward(float* p, const float* z, int N, int V) { cuda::softmax_forward(stream, p, z, N, V); }
  void softmax_backward(float* dz, const float* p, const float* dp, int N, int V) {
    cuda::softmax_backward(stream, dz, p, dp, N, V);
  }
  void topk_values_forward(float* vals, int* idx, const float* x, int N, int V, int K) {
    cuda::topk_values_forward(stream, vals, idx, x, N, V, K);
  }
  void topk_values_backward(float* dx, const float* dvals, const int* idx, int N, int V, int K) {
    cuda::topk_values_backward(stream, dx, dvals, idx, N, V, K);
  }
  void gather_rows(float* dst, int ldd, const float* src, int lds, const int* idx, int n, int w) {
    cuda::gather_rows(stream, dst, ldd, src, lds, idx, n, w);
  }
  void scatter_rows(float* dst, int ldd, const float* src, int lds, const int* idx, int n, int w) {
    cuda::scatter_rows(stream, dst, ldd, src, lds, idx, n, w);
  }
  void copy_block(float* dst, int ldd, const float* src, int lds, int n, int w) {
    cuda::copy_block(stream, dst, ldd, src, lds, n, w);
  }
  void to_bf16(uint16_t* dst, int ldd, const float* src, int lds, int n, int w) {
    cuda::to_bf16(stream, dst, ldd, src, lds, n, w);
  }
  void from_bf16(float* dst, int ldd, const uint16_t* src, int lds, int n, int w) {
    cuda::from_bf16(stream, dst, ldd, src, lds, n, w);
  }
  void scatter_add_rows(float* dst, int ldd, const float* src, int lds, const int* idx, int n, int w) {
    cuda::scatter_add_rows(stream, dst, ldd, src, lds, idx, n, w);
  }
  void scale_rows(float* y, const float* x, const float* s, int n, int D) { cuda::scale_rows(stream, y, x, s, n, D); }
  void row_dot(float* out, const float* a, const float* b, int n, int D) { cuda::row_dot(stream, out, a, b, n, D); }
  void add(float* y, const float* a, const float* b, size_t n) { cuda::add(stream, y, a, b, n); }
  void axpy(float* y, float alpha, const float* x, size_t n) { cuda::axpy(stream, y, alpha, x, n); }
  void scale(float* y, float alpha, size_t n) { cuda::scale(stream, y, alpha, n); }
  void fill(float* y, float v, size_t n) { cuda::fill(stream, y, v, n); }
  // Reductions in double on the device; the result is copied to the host
  // (these wait for the stream: logging and statistics only).
  double sum(const float* x, size_t n);
  double sum_squares(const float* x, size_t n);
  // out[i] = sum of xs[i]: every reduction is queued into its own device
  // slot, then one download brings them all back, so a method's statistics
  // cost the host one wait however many losses it sums. The same download
  // brings the squared gradient norm of an adamw_step queued before it, so
  // last_grad_norm() then needs no wait of its own.
  struct SumOf {
    const float* x;
    size_t n;
  };
  void sums(const std::vector<SumOf>& xs, double* out);
  // Times the host has waited for the stream (downloads and sync()): what a
  // step costs in round trips, reported by bench_gpu and tested per method.
  long long host_waits() const { return host_waits_; }
  // Global gradient norm (into device memory), clipping factor and AdamW in
  // two kernels without a host round trip; last_grad_norm() fetches the norm.
  void adamw_step(float* p, const float* g, float* m, float* v, size_t n, size_t n_decay, const AdamWHyper& h,
                  double clip);
  double last_grad_norm();

  // ---- CUDA graphs (train_gpu --cuda-graph 1; cuda/step_graph.h) ---------
  // Between graph_begin() and graph_end() the stream's work is recorded, not
  // started; graph_end() launches it as one graph (built the first time a
  // step of this shape is seen, its parameters updated after that). While
  // recording, reading a result back (to_host, sum, sync) is an error.
  // set_step_graphs(true) (train_gpu --cuda-graph 1) asks the trainer to
  // record every micro-batch's forward and backward this way.
  void set_step_graphs(bool on) { step_graphs_ = on; }
  bool step_graphs() const { return step_graphs_; }
  void graph_begin();
  void graph_end();
  void graph_abandon();  // drop a recording an error interrupted
  bool graph_recording() const { return graph_ && graph_->recording(); }
  // Whether launched work runs later than the call: while a graph records, its
  // kernels run when it is launched (the arena then does not ASan-poison the
  // bytes it releases, src/backend/arena.h).
  bool defers_execution() const { return graph_recording(); }
  size_t graph_recorded() const { return graph_ ? graph_->recorded() : 0; }  // nodes so far
  // Null until the first graph_begin().
  const StepGraph::Stats* graph_stats() const { return graph_ ? &graph_->stats() : nullptr; }

  cudaStream_t stream = nullptr;

 private:
  void init();
  // A device buffer of at least `bytes` for one op's temporaries, valid until
  // the next call (ops on the one stream run in order). Grows, never shrinks.
  void* workspace(size_t bytes);
  void gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
            float* C, int ldc, bool accumulate);
  void gemm_add(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
                const float* R, int ldr, float* C, int ldc);
  size_t staging_chunk_bytes() const { return kStagingHalf; }
  void* stage_upload(size_t bytes);
  void upload(void* dst, const void* staged, size_t bytes);
  void download(void* dst, const void* src, size_t bytes) const;
  void copy_bytes(void* dst, const void* src, size_t bytes);

  static constexpr size_t kStagingHalf = 8 << 20;  // bytes per half of the pinned upload ring
  cuda::GemmPrecision gemm_ = cuda::GemmPrecision::Bf16;
  cuda::AttnKernel attn_ = cuda::AttnKernel::Fp32;
  bool deterministic_ = false;
  void* work_ = nullptr;
  size_t work_bytes_ = 0;
  // [0] gradient sum of squares (adamw_step), [1, kScalars) the results of sums()
  static constexpr int kScalars = 64;
  double* d_scalars_ = nullptr;
  bool norm_queued_ = false;  // an adamw_step's norm is on the device, not yet read
  double norm_ = 0;           // the last norm read
  mutable long long host_waits_ = 0;
  // Pinned upload ring: two halves used alternately; before the host writes
  // into a half again it waits for the event recorded when it last left it
  // (normally long complete).
  unsigned char* staging_ = nullptr;
  cudaEvent_t half_done_[2] = {nullptr, nullptr};
  bool half_pending_[2] = {false, false};
  int half_ = 0;
  size_t half_used_ = 0;
  std::unique_ptr<StepGraph> graph_;
  bool step_graphs_ = false;
};

}  // namespace ada
