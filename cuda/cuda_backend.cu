// Non-template members of CudaBackend (cuda_backend.h): memory, the staging
// ring, the GEMM dispatch of the four matmul ops, reductions and AdamW.
#include "cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ada {

namespace {
cuda::GemmPrecision precision_from_env() {
  const char* e = std::getenv("ADA_GEMM");
  return e && *e ? cuda::parse_gemm_precision(e) : cuda::GemmPrecision::Bf16;
}
cuda::AttnKernel attention_from_env() {
  const char* e = std::getenv("ADA_ATTN");
  return e && *e ? cuda::parse_attention_kernel(e) : cuda::AttnKernel::Fp32;
}
}  // namespace

CudaBackend::CudaBackend() : gemm_(precision_from_env()), attn_(attention_from_env()) { init(); }
CudaBackend::CudaBackend(cuda::GemmPrecision gemm) : gemm_(gemm), attn_(attention_from_env()) { init(); }

void CudaBackend::init() {
  CUDA_CHECK(cudaStreamCreate(&stream));
  CUDA_CHECK(cudaMalloc(&d_scalars_, kScalars * sizeof(double)));
  memset_async(d_scalars_, 0, kScalars * sizeof(double), stream);
  CUDA_CHECK(cudaMallocHost(&staging_, 2 * kStagingHalf));
  for (auto& e : half_done_) CUDA_CHECK(cudaEventCreate(&e));
}

CudaBackend::~CudaBackend() {
  // A destructor must not throw (it may run while an error unwinds), so the
  // first failing call is reported on stderr instead: a kernel fault that no
  // one synchronised on before is not lost.
  cudaError_t first = cudaSuccess;
  const char* where = "";
  auto note = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess && first == cudaSuccess) first = e, where = what;
  };
  graph_.reset();  // its graphs and pinned buffers (it synchronises first)
  note(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  for (auto& e : half_done_) note(cudaEventDestroy(e), "cudaEventDestroy");
  note(cudaFreeHost(staging_), "cudaFreeHost");
  if (work_) note(cudaFree(work_), "cudaFree");
  note(cudaFree(d_scalars_), "cudaFree");
  note(cudaStreamDestroy(stream), "cudaStreamDestroy");
  if (first != cudaSuccess)
    std::fprintf(stderr, "warning: CUDA error while releasing the GPU backend: %s (%s)\n", cudaGetErrorString(first),
                 where);
}

// ---- memory ------------------------------------------------------------------
void* CudaBackend::raw_alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
  if (e != cudaSuccess)
    fail("out of GPU memory allocating " + std::to_string(bytes) + " bytes (" + cudaGetErrorString(e) +
         "): halve --batch and double --accum (the same tokens per step), or lower --seq");
  return p;
}

void CudaBackend::raw_free(void* p) {
  if (graph_recording()) return graph_->defer_free(p);  // the recorded kernels have not run yet
  // Kernels queued on the stream may still use the memory (the arena frees
  // its blocks when it merges them at a reset): wait for them first. Frees
  // happen only while the arena grows, in the first steps.
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaFree(p));
}

void CudaBackend::memset_zero(void* p, size_t bytes) { memset_async(p, 0, bytes, stream); }

void CudaBackend::memset_bytes(void* p, int value, size_t bytes) { memset_async(p, value, bytes, stream); }

namespace {
[[noreturn]] void refuse_while_recording(const char* what) {
  fail(std::string("--cuda-graph 1: ") + what +
       " while a step was being recorded for a CUDA graph (nothing of the step has run yet); this step reads "
       "results back during its forward or backward and must run without --cuda-graph");
}
}  // namespace

void CudaBackend::sync() {
  if (graph_recording()) refuse_while_recording("the host waited for the GPU");
  host_waits_++;
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

void* CudaBackend::stage_upload(size_t bytes) {
  if (graph_recording()) return graph_->stage(bytes);  // read when the graph runs
  const size_t need = (bytes + 255) & ~size_t(255);
  if (half_used_ + need > kStagingHalf) {  // switch halves
    CUDA_CHECK(cudaEventRecord(half_done_[half_], stream));
    half_pending_[half_] = true;
    half_ ^= 1;
    if (half_pending_[half_]) CUDA_CHECK(cudaEventSynchronize(half_done_[half_]));
    half_pending_[half_] = false;
    half_used_ = 0;
  }
  void* p = staging_ + half_ * kStagingHalf + half_used_;
  half_used_ += need;
  return p;
}

void CudaBackend::upload(void* dst, const void* staged, size_t bytes) {
  memcpy_async(dst, staged, bytes, cudaMemcpyHostToDevice, stream);
}

void CudaBackend::download(void* dst, const void* src, size_t bytes) const {
  if (graph_recording()) refuse_while_recording("a value was read back from the GPU");
  host_waits_++;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

void CudaBackend::copy_bytes(void* dst, const void* src, size_t bytes) {
  memcpy_async(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
}

void* CudaBackend::workspace(size_t bytes) {
  if (bytes > work_bytes_) {
    if (work_) raw_free(work_);  // waits for the kernels that used it
    work_bytes_ = bytes + bytes / 4;
    work_ = raw_alloc(work_bytes_);
  }
  return work_;
}

// ---- CUDA graphs -------------------------------------------------------------------
void CudaBackend::graph_begin() {
  if (!graph_) graph_ = std::make_unique<StepGraph>(stream);
  graph_->begin();
}

void CudaBackend::graph_end() {
  if (!graph_) fail("graph_end without graph_begin");
  graph_->end();
}

void CudaBackend::graph_abandon() {
  if (graph_) graph_->abandon();
}

// ---- matrix products -------------------------------------------------------------
void CudaBackend::gemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
                       int ldb, float* C, int ldc, bool accumulate) {
  gemm_add(trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate ? C : nullptr, ldc, C, ldc);
}

void CudaBackend::gemm_add(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda, const float* B,
                           int ldb, const float* R, int ldr, float* C, int ldc) {
  cuda::GemmShape g;
  g.trans_a = trans_a, g.trans_b = trans_b, g.M = M, g.N = N, g.K = K, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
  const int splits = cuda::gemm_auto_splits(gemm_, g);
  const size_t work_bytes = cuda::gemm_work_bytes(gemm_, g, splits);
  void* work = work_bytes > 0 ? workspace(work_bytes) : nullptr;
  cuda::gemm_add(stream, gemm_, g, A, B, R, ldr, C, work, splits);
}

void CudaBackend::matmul_forward(float* y, const float* x, const float* W, int N, int I, int O, bool accumulate) {
  gemm(false, true, N, O, I, x, I, W, I, y, O, accumulate);  // y = x W^T
}

void CudaBackend::matmul_residual_forward(float* y, const float* r, const float* x, const float* W, int N, int I,
                                          int O) {
  gemm_add(false, true, N, O, I, x, I, W, I, r, O, y, O);  // y = r + x W^T, r read in the epilogue
}

void CudaBackend::matmul_swiglu_forward(float* gu, float* act, const float* x, const float* W, int N, int D, int F) {
  const size_t work_bytes = cuda::gemm_swiglu_work_bytes(gemm_, N, D, F);
  void* work = work_bytes > 0 ? workspace(work_bytes) : nullptr;
  cuda::gemm_swiglu(stream, gemm_, gu, act, x, W, N, D, F, work);
}

void CudaBackend::matmul_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int N, int I,
                                  int O, bool accumulate_dx) {
  if (N == 0) return;
  if (dx) gemm(false, false, N, I, O, dy, O, W, I, dx, I, accumulate_dx);  // dx = dy W
  gemm(true, false, O, I, N, dy, O, x, I, dW, I, true);                     // dW += dy^T x
}

void CudaBackend::matmul_nn_forward(float* y, const float* x, const float* W, int N, int I, int O, bool accumulate) {
  gemm(false, false, N, O, I, x, I, W, O, y, O, accumulate);  // y = x W
}

void CudaBackend::matmul_nn_backward(float* dx, float* dW, const float* dy, const float* x, const float* W, int N,
                                     int I, int O, bool accumulate_dx) {
  if (N == 0) return;
  if (dx) gemm(false, true, N, I, O, dy, O, W, O, dx, I, accumulate_dx);  // dx = dy W^T
  gemm(true, false, I, O, N, x, I, dy, O, dW, O, true);                    // dW += x^T dy
}

// ---- reductions and the optimizer ------------------------------------------------------
double CudaBackend::sum(const float* x, size_t n) {
  double r = 0;
  sums({{x, n}}, &r);
  return r;
}

void CudaBackend::sums(const std::vector<SumOf>& xs, double* out) {
  // Slot 0 (the gradient's sum of squares) travels with the results; up to
  // kScalars - 1 sums per download.
  for (size_t i0 = 0; i0 < xs.size(); i0 += kScalars - 1) {
    const size_t k = std::min(xs.size() - i0, static_cast<size_t>(kScalars - 1));
    for (size_t i = 0; i < k; i++) {
      const SumOf& a = xs[i0 + i];
      cuda::reduce_sum(stream, d_scalars_ + 1 + i, a.x, a.n, false, workspace(cuda::reduce_work_bytes(a.n)));
    }
    double r[kScalars];
    download(r, d_scalars_, (k + 1) * sizeof(double));
    for (size_t i = 0; i < k; i++) out[i0 + i] = r[1 + i];
    if (norm_queued_) norm_ = std::sqrt(r[0]), norm_queued_ = false;
  }
}

double CudaBackend::sum_squares(const float* x, size_t n) {
  cuda::reduce_sum(stream, d_scalars_ + 1, x, n, true, workspace(cuda::reduce_work_bytes(n)));
  double r = 0;
  download(&r, d_scalars_ + 1, sizeof r);
  return r;
}

void CudaBackend::adamw_step(float* p, const float* g, float* m, float* v, size_t n, size_t n_decay,
                             const AdamWHyper& h, double clip) {
  cuda::reduce_sum(stream, d_scalars_, g, n, true, workspace(cuda::reduce_work_bytes(n)));
  cuda::AdamWArgs a;
  a.lr = static_cast<float>(h.lr);
  a.beta1 = static_cast<float>(h.beta1);
  a.beta2 = static_cast<float>(h.beta2);
  a.eps = static_cast<float>(h.eps);
  a.weight_decay = static_cast<float>(h.weight_decay);
  a.c1 = static_cast<float>(1.0 / (1.0 - std::pow(h.beta1, static_cast<double>(h.step))));
  a.c2 = static_cast<float>(1.0 / (1.0 - std::pow(h.beta2, static_cast<double>(h.step))));
  a.clip = clip;
  cuda::adamw(stream, p, g, m, v, n, n_decay, a, d_scalars_);
  norm_queued_ = true;
}

double CudaBackend::last_grad_norm() {
  if (norm_queued_) {
    double ss = 0;
    download(&ss, d_scalars_, sizeof ss);
    norm_ = std::sqrt(ss), norm_queued_ = false;
  }
  return norm_;
}

}  // namespace ada
