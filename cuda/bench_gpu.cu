// bench_gpu: GPU throughput of the hand-written kernels and of whole training
// steps, on the shapes of the 70m config (B = 16, T = 1024: N = 16384 rows,
// D = 512, F = 1408, V = 50304, H = 8, hs = 64).
//   make bench_gpu                     (or: build/bench_gpu --help)
// Prints, per kernel: time, achieved TFLOP/s (GEMM, attention) or GB/s
// (memory-bound kernels); for every GEMM shape of a training step (forward
// y = x W^T, backward dx = dy W and dW = dy^T x) the ratio to cuBLAS on the
// same shape and precision (SGEMM for fp32; GemmEx with bf16 inputs, or with
// TF32 compute, for the tensor-core paths); then whole training steps of
// `standard` and `adaponder` (forward + backward + AdamW): tokens/s and MFU
// against the dense bf16 peak (989 TFLOP/s for an H100/H200 SXM; --peak),
// and the device memory a step held (state, activations' arena peak).
// cuBLAS is linked here only, as the yardstick.
//
// Every GEMM it times is also checked: our output against cuBLAS's on the
// same inputs, max |ours - cuBLAS| / max |cuBLAS| (column "rel err"), with
// the kernel tests' tolerance for the precision (agreement.h: 1e-5 fp32,
// 5e-3 tf32, 2e-2 bf16). A line over it ends in FAIL, and bench_gpu then
// exits with status 1 after everything else has run, its last line naming
// the failed shapes (gpu_check.sh shows a failed stage's last lines).
// The "bf16mma" lines time gemm_mma_pipelined (cuda/gemm_mma.h, the
// cp.async / ldmatrix / mma.sync GEMM of issue 13) on bf16 operands against
// cuBLAS GemmEx on the same bf16 inputs (tolerance kBf16OperandTol, 1e-3).
// Attention is timed per kernel, "[fp32]" (cuda/attention.cu, the default)
// and "[mma]" (cuda/attention_mma.cu, ADA_ATTN=mma), and the mma outputs are
// checked against the fp32 ones (kAttentionMmaTol, 2e-2; FAIL as above).
#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "agreement.h"
#include "core/rng.h"
#include "cuda_backend.h"
#include "gemm_mma.h"
#include "open_gpu.h"
#include "methods/registry.h"
#include "train/flags.h"
#include "train/memory_budget.h"

using namespace ada;
using cuda::GemmPrecision;

namespace {

#define CUBLAS_CHECK(expr)                                                                        \
  do {                                                                                            \
    const cublasStatus_t st_ = (expr);                                                            \
    if (st_ != CUBLAS_STATUS_SUCCESS) fail(std::string("cuBLAS error ") + std::to_string(st_) + " in " #expr); \
  } while (0)

// ---- device data ------------------------------------------------------------
__global__ void fill_random_kernel(float* x, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    x[i] = scale * ((float)(h & 0xffffff) / 16777216.0f - 0.5f);
  }
}
__global__ void to_bf16_kernel(__nv_bfloat16* y, const float* x, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = __float2bfloat16(x[i]);
}

void fill_random(CudaBackend& be, float* x, size_t n, uint32_t seed, float scale = 1.0f) {
  launch(fill_random_kernel, 1024, 256, 0, be.stream, x, n, seed, scale);
}

// Milliseconds per call of f (after one warm-up call), timed with events.
double time_ms(CudaBackend& be, const std::function<void()>& f, int reps) {
  f();
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  CUDA_CHECK(cudaEventRecord(a, be.stream));
  for (int i = 0; i < reps; i++) f();
  CUDA_CHECK(cudaEventRecord(b, be.stream));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

struct Buffer {
  float* p = nullptr;
  explicit Buffer(size_t n) { CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(float))); }
  ~Buffer() { cudaFree(p); }
};

// ---- GEMMs vs cuBLAS ----------------------------------------------------------
struct GemmCase {
  std::string name;
  cuda::GemmShape g;
};

cuda::GemmShape shape(bool ta, bool tb, int M, int N, int K) {
  cuda::GemmShape g;
  g.trans_a = ta, g.trans_b = tb, g.M = M, g.N = N, g.K = K;
  g.lda = ta ? M : K;
  g.ldb = tb ? K : N;
  g.ldc = N;
  return g;
}

// The 15 GEMMs of one layer's training step plus the head, N rows.
std::vector<GemmCase> gemm_cases(int N, int D, int F, int V) {
  struct W {
    const char* name;
    int out, in;
  };
  const W ws[] = {{"qkv", 3 * D, D}, {"wo", D, D}, {"gate_up", 2 * F, D}, {"down", D, F}, {"head", V, D}};
  std::vector<GemmCase> c;
  for (const W& w : ws) {
    c.push_back({std::string(w.name) + " y=xW^T", shape(false, true, N, w.out, w.in)});
    c.push_back({std::string(w.name) + " dx=dyW", shape(false, false, N, w.in, w.out)});
    c.push_back({std::string(w.name) + " dW=dy^Tx", shape(true, false, w.out, w.in, N)});
  }
  return c;
}

// Row-major C = op(A) op(B) through column-major cuBLAS: C^T = op(B)^T op(A)^T.
void cublas_gemm(cublasHandle_t h, GemmPrecision p, const cuda::GemmShape& g, const void* A, const void* B, float* C) {
  const float one = 1.0f, zero = 0.0f;
  const cublasOperation_t opb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, opa = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (p == GemmPrecision::Fp32) {
    CUBLAS_CHECK(cublasSgemm(h, opb, opa, g.N, g.M, g.K, &one, static_cast<const float*>(B), g.ldb,
                             static_cast<const float*>(A), g.lda, &zero, C, g.ldc));
  } else if (p == GemmPrecision::Bf16) {
    CUBLAS_CHECK(cublasGemmEx(h, opb, opa, g.N, g.M, g.K, &one, B, CUDA_R_16BF, g.ldb, A, CUDA_R_16BF, g.lda, &zero, C,
                              CUDA_R_32F, g.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    CUBLAS_CHECK(cublasGemmEx(h, opb, opa, g.N, g.M, g.K, &one, B, CUDA_R_32F, g.ldb, A, CUDA_R_32F, g.lda, &zero, C,
                              CUDA_R_32F, g.ldc, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
  }
}

// Our output C against cuBLAS's Cref (M rows of ldc floats): the relative
// error and the verdict for precision p (agreement.h).
cuda::Agreement compare_with_cublas(CudaBackend& be, GemmPrecision p, const cuda::GemmShape& g, const float* C,
                                    const float* Cref, float* maxima, void* work) {
  const size_t n = (size_t)g.M * g.ldc;
  cuda::max_abs_diff(be.stream, maxima, C, Cref, n, work);
  float h[2];
  be.to_host(h, maxima, 2);
  return cuda::agreement(h[0], h[1], cuda::gemm_tolerance(p));
}

// Whether the comma-separated `list` names `name` ("bf16" is not in "bf16mma").
bool listed(const std::string& list, const std::string& name) {
  size_t b = 0;
  while (b <= list.size()) {
    const size_t e = std::min(list.find(',', b), list.size());
    if (list.compare(b, e - b, name) == 0) return true;
    b = e + 1;
  }
  return false;
}

// Returns the GEMMs whose output disagreed with cuBLAS's ("bf16 head y=xW^T").
std::vector<std::string> bench_gemms(CudaBackend& be, int N, int D, int F, int V, int reps,
                                     const std::string& precisions) {
  const std::vector<GemmCase> cases = gemm_cases(N, D, F, V);
  size_t na = 0, nb = 0, nc = 0, nw = 0;
  for (auto& c : cases) {
    na = std::max(na, (size_t)(c.g.trans_a ? c.g.K : c.g.M) * c.g.lda);
    nb = std::max(nb, (size_t)(c.g.trans_b ? c.g.N : c.g.K) * c.g.ldb);
    nc = std::max(nc, (size_t)c.g.M * c.g.ldc);
    for (GemmPrecision p : {GemmPrecision::Fp32, GemmPrecision::Tf32, GemmPrecision::Bf16})
      nw = std::max(nw, cuda::gemm_work_bytes(c.g, cuda::gemm_auto_splits(p, c.g)) / sizeof(float));
    nw = std::max(nw, cuda::gemm_mma_pipelined_work_bytes(c.g, cuda::gemm_mma_pipelined_auto_splits(c.g)) / sizeof(float));
  }
  nw = std::max(nw, cuda::max_abs_diff_work_bytes(nc) / sizeof(float) + 1);
  Buffer A(na), B(nb), C(nc), Cref(nc), work(nw), maxima(2);
  __nv_bfloat16 *A16 = nullptr, *B16 = nullptr;
  CUDA_CHECK(cudaMalloc(&A16, na * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaMalloc(&B16, nb * sizeof(__nv_bfloat16)));
  fill_random(be, A.p, na, 1);
  fill_random(be, B.p, nb, 2);
  launch(to_bf16_kernel, 1024, 256, 0, be.stream, A16, A.p, na);
  launch(to_bf16_kernel, 1024, 256, 0, be.stream, B16, B.p, nb);
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, be.stream));

  std::printf("\nGEMM (N = %d rows: D = %d, F = %d, V = %d); TFLOP/s = 2 M N K / time\n", N, D, F, V);
  std::printf("  rel err = max |ours - cuBLAS| / max |cuBLAS|; FAIL over the tests' tolerance (fp32 %.0e, tf32 %.0e, "
              "bf16 %.0e)\n",
              cuda::gemm_tolerance(GemmPrecision::Fp32), cuda::gemm_tolerance(GemmPrecision::Tf32),
              cuda::gemm_tolerance(GemmPrecision::Bf16));
  std::printf("%-5s %-18s %6s %6s %6s %4s %9s %9s %9s %9s %7s %9s\n", "prec", "shape", "M", "N", "K", "spl", "ms",
              "TFLOP/s", "cuBLAS ms", "cuBLAS TF", "ratio", "rel err");
  std::vector<std::string> failed;
  for (GemmPrecision p : {GemmPrecision::Fp32, GemmPrecision::Tf32, GemmPrecision::Bf16}) {
    if (!listed(precisions, cuda::gemm_precision_name(p))) continue;
    double ours_total = 0, ref_total = 0;
    for (auto& c : cases) {
      const int splits = cuda::gemm_auto_splits(p, c.g);
      const double flop = 2.0 * c.g.M * c.g.N * (double)c.g.K;
      const double ms = time_ms(be, [&] { cuda::gemm(be.stream, p, c.g, A.p, B.p, C.p, false, work.p, splits); }, reps);
      const void* a = p == GemmPrecision::Bf16 ? (const void*)A16 : (const void*)A.p;
      const void* b = p == GemmPrecision::Bf16 ? (const void*)B16 : (const void*)B.p;
      const double ref = time_ms(be, [&] { cublas_gemm(h, p, c.g, a, b, Cref.p); }, reps);
      ours_total += ms, ref_total += ref;
      const cuda::Agreement ag = compare_with_cublas(be, p, c.g, C.p, Cref.p, maxima.p, work.p);
      if (!ag.ok) failed.push_back(std::string(cuda::gemm_precision_name(p)) + " " + c.name);
      std::printf("%-5s %-18s %6d %6d %6d %4d %9.3f %9.1f %9.3f %9.1f %6.2fx %9.2e%s\n", cuda::gemm_precision_name(p),
                  c.name.c_str(), c.g.M, c.g.N, c.g.K, splits, ms, flop / ms / 1e9, ref, flop / ref / 1e9, ref / ms,
                  ag.rel_err, ag.ok ? "" : " FAIL");
      std::fflush(stdout);
    }
    std::printf("%-5s %-18s %35.3f %9s %9.3f %9s %6.2fx   (all shapes)\n", cuda::gemm_precision_name(p), "total",
                ours_total, "", ref_total, "", ref_total / ours_total);
  }
  // gemm_mma_pipelined (cuda/gemm_mma.h): bf16 operands already in memory (no
  // conversion inside), the same shapes against cuBLAS GemmEx on the same bf16
  // inputs. Only the fp32 summation order differs, so the tolerance is
  // agreement.h's kBf16OperandTol, not the bf16-rounding one.
  if (listed(precisions, "bf16mma")) {
    double ours_total = 0, ref_total = 0;
    for (auto& c : cases) {
      const int splits = cuda::gemm_mma_pipelined_auto_splits(c.g);
      const double flop = 2.0 * c.g.M * c.g.N * (double)c.g.K;
      const double ms =
          time_ms(be, [&] { cuda::gemm_mma_pipelined(be.stream, c.g, A16, B16, C.p, false, work.p, splits); }, reps);
      const double ref = time_ms(be, [&] { cublas_gemm(h, GemmPrecision::Bf16, c.g, A16, B16, Cref.p); }, reps);
      ours_total += ms, ref_total += ref;
      const size_t n = (size_t)c.g.M * c.g.ldc;
      cuda::max_abs_diff(be.stream, maxima.p, C.p, Cref.p, n, work.p);
      float mx[2];
      be.to_host(mx, maxima.p, 2);
      const cuda::Agreement ag = cuda::agreement(mx[0], mx[1], cuda::kBf16OperandTol);
      if (!ag.ok) failed.push_back("bf16mma " + c.name);
      std::printf("%-7s %-16s %6d %6d %6d %4d %9.3f %9.1f %9.3f %9.1f %6.2fx %9.2e%s\n", "bf16mma", c.name.c_str(),
                  c.g.M, c.g.N, c.g.K, splits, ms, flop / ms / 1e9, ref, flop / ref / 1e9, ref / ms, ag.rel_err,
                  ag.ok ? "" : " FAIL");
      std::fflush(stdout);
    }
    std::printf("%-7s %-16s %35.3f %9s %9.3f %9s %6.2fx   (all shapes)\n", "bf16mma", "total", ours_total, "", ref_total,
                "", ref_total / ours_total);

    // The MLP's up-projection with SwiGLU in the epilogue (gemm_mma_swiglu)
    // against the same GEMM followed by swiglu_forward, and against cuBLAS
    // followed by swiglu_forward; rel err: the fused activation against the
    // unfused one (the same sums, so about 0).
    const cuda::GemmShape gu = shape(false, true, N, 2 * F, D);
    Buffer act(size_t(N) * F), act_ref(size_t(N) * F);
    const double flop = 2.0 * N * 2.0 * F * D;
    const double fused = time_ms(
        be, [&] { cuda::gemm_mma_swiglu(be.stream, A16, D, B16, D, N, D, F, C.p, act.p); }, reps);
    const double unfused = time_ms(be, [&] {
      cuda::gemm_mma_pipelined(be.stream, gu, A16, B16, Cref.p, false, work.p, 1);
      cuda::swiglu_forward(be.stream, act_ref.p, Cref.p, N, F);
    }, reps);
    const double ref = time_ms(be, [&] {
      cublas_gemm(h, GemmPrecision::Bf16, gu, A16, B16, Cref.p);
      cuda::swiglu_forward(be.stream, act_ref.p, Cref.p, N, F);
    }, reps);
    cuda::gemm_mma_pipelined(be.stream, gu, A16, B16, Cref.p, false, work.p, 1);
    cuda::swiglu_forward(be.stream, act_ref.p, Cref.p, N, F);
    cuda::max_abs_diff(be.stream, maxima.p, act.p, act_ref.p, size_t(N) * F, work.p);
    float mx[2];
    be.to_host(mx, maxima.p, 2);
    const cuda::Agreement ag = cuda::agreement(mx[0], mx[1], cuda::kBf16OperandTol);
    if (!ag.ok) failed.push_back("bf16mma gate_up+swiglu fused");
    std::printf("%-7s %-16s %6d %6d %6d %4d %9.3f %9.1f %9.3f %9.1f %6.2fx %9.2e%s   (unfused: %.3f ms, %.2fx)\n",
                "bf16mma", "gate_up+swiglu", N, 2 * F, D, 1, fused, flop / fused / 1e9, ref, flop / ref / 1e9,
                ref / fused, ag.rel_err, ag.ok ? "" : " FAIL", unfused, unfused / fused);

    // The MLP's down-projection with the residual add in the epilogue
    // (gemm_mma_pipelined_add: x_out = x_mid + act Wd^T, what a block runs)
    // against the copy and accumulating GEMM it replaced; rel err: fused
    // against unfused (the same sums, so 0).
    const cuda::GemmShape dn = shape(false, true, N, D, F);
    const int dn_splits = cuda::gemm_mma_pipelined_auto_splits(dn);
    Buffer R(size_t(N) * D);
    fill_random(be, R.p, size_t(N) * D, 7);
    const double dflop = 2.0 * N * D * (double)F;
    const double dfused =
        time_ms(be, [&] { cuda::gemm_mma_pipelined_add(be.stream, dn, A16, B16, R.p, D, C.p, work.p, dn_splits); },
                reps);
    const double dunfused = time_ms(be, [&] {
      be.copy(Cref.p, R.p, size_t(N) * D);
      cuda::gemm_mma_pipelined(be.stream, dn, A16, B16, Cref.p, true, work.p, dn_splits);
    }, reps);
    cuda::max_abs_diff(be.stream, maxima.p, C.p, Cref.p, size_t(N) * D, work.p);
    be.to_host(mx, maxima.p, 2);
    const cuda::Agreement dag = cuda::agreement(mx[0], mx[1], cuda::kBf16OperandTol);
    if (!dag.ok) failed.push_back("bf16mma down+residual fused");
    std::printf("%-7s %-16s %6d %6d %6d %4d %9.3f %9.1f %9s %9s %7s %9.2e%s   (copy + accumulate: %.3f ms, %.2fx)\n",
                "bf16mma", "down+residual", N, D, F, dn_splits, dfused, dflop / dfused / 1e9, "", "", "", dag.rel_err,
                dag.ok ? "" : " FAIL", dunfused, dunfused / dfused);
  }
  cublasDestroy(h);
  CUDA_CHECK(cudaFree(A16));
  CUDA_CHECK(cudaFree(B16));
  return failed;
}

// ---- the other kernels ------------------------------------------------------------
void row(const char* name, double ms, double bytes, double flop = 0) {
  if (flop > 0)
    std::printf("%-34s %9.3f ms %9.1f TFLOP/s\n", name, ms, flop / ms / 1e9);
  else
    std::printf("%-34s %9.3f ms %9.1f GB/s\n", name, ms, bytes / ms / 1e6);
}

// Returns false when the mma attention disagrees with the fp32 one.
bool bench_kernels(CudaBackend& be, int B, int T, const ModelConfig& c, size_t n_params, int reps) {
  bool attention_failed = false;
  const int N = B * T, D = c.dim, F = c.hidden, V = c.vocab, H = c.heads, hs = c.head_dim();
  const double f4 = 4.0;
  std::printf("\nkernels (B = %d, T = %d: N = %d rows); GB/s counts each tensor read or written once\n", B, T, N);
  Buffer x((size_t)N * 3 * D), y((size_t)N * 3 * D), dy((size_t)N * 3 * D), w(D), dw(D), rstd(N);
  fill_random(be, x.p, (size_t)N * 3 * D, 3);
  fill_random(be, dy.p, (size_t)N * 3 * D, 4);
  fill_random(be, w.p, D, 5);
  row("rmsnorm forward", time_ms(be, [&] { be.rmsnorm_forward(y.p, rstd.p, x.p, w.p, N, D, 1e-5); }, reps),
      f4 * 2 * N * D);
  row("rmsnorm backward (dx +=, dw +=)",
      time_ms(be, [&] { be.rmsnorm_backward(y.p, dw.p, dy.p, x.p, w.p, rstd.p, N, D); }, reps), f4 * 4 * N * D);

  // rope on q and k of qkv
  std::vector<int> pos(N);
  for (int i = 0; i < N; i++) pos[i] = i % T;
  int* d_pos = nullptr;
  CUDA_CHECK(cudaMalloc(&d_pos, N * sizeof(int)));
  be.to_device(d_pos, pos.data(), N);
  Buffer cs((size_t)c.max_seq * hs / 2), sn((size_t)c.max_seq * hs / 2);
  fill_random(be, cs.p, (size_t)c.max_seq * hs / 2, 6);
  fill_random(be, sn.p, (size_t)c.max_seq * hs / 2, 7);
  row("rope forward (q, k of qkv)",
      time_ms(be, [&] { be.rope_forward(x.p, 3 * D, 2 * H, d_pos, N, hs, cs.p, sn.p); }, reps), f4 * 4 * N * D);

  // attention, causal, one store of T slots per sequence
  {
    std::vector<int> qslot(N), qstart(B + 1), order(N), depth(N, 0), valid(N, 1);
    for (int i = 0; i < N; i++) qslot[i] = i, order[i] = i % T;
    for (int b = 0; b <= B; b++) qstart[b] = b * T;
    int *d_qslot, *d_qstart, *d_order, *d_depth, *d_valid;
    for (auto* p : {&d_qslot, &d_order, &d_depth, &d_valid}) CUDA_CHECK(cudaMalloc(p, N * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&d_qstart, (B + 1) * sizeof(int)));
    be.to_device(d_qslot, qslot.data(), N), be.to_device(d_qstart, qstart.data(), B + 1);
    be.to_device(d_order, order.data(), N), be.to_device(d_depth, depth.data(), N);
    be.to_device(d_valid, valid.data(), N);
    const KeyMeta km{d_order, d_depth, d_valid, T, kAnyDepth};
    const AttnDims d{N, B, T, H, hs, 3 * D};
    Buffer K((size_t)N * D), Vv((size_t)N * D), out((size_t)N * D), lse((size_t)N * H), dout((size_t)N * D),
        dq((size_t)N * 3 * D), dK((size_t)N * D), dV((size_t)N * D);
    fill_random(be, K.p, (size_t)N * D, 8), fill_random(be, Vv.p, (size_t)N * D, 9);
    fill_random(be, dout.p, (size_t)N * D, 10);
    const double pairs = (double)B * H * T * (T + 1) / 2;  // visible (query, key) pairs
    // Each attention kernel: fp32 (cuda/attention.cu, the default) and mma
    // (cuda/attention_mma.cu, ADA_ATTN=mma; bf16 operands on tensor cores).
    // One untimed run of each from dK = dV = 0 gives the outputs that are
    // compared: mma against fp32, max |diff| / max |fp32| of out, dq, dK, dV
    // (tolerance kAttentionMmaTol, 2e-2), FAIL over it.
    const cuda::AttnKernel saved = be.attention();
    const size_t nout = (size_t)N * D, nq = (size_t)N * 3 * D;
    Buffer ref_out(nout), ref_dq(nq), ref_dK(nout), ref_dV(nout), maxima(2),
        cmp_work(cuda::max_abs_diff_work_bytes(nq) / sizeof(float) + 1);
    for (cuda::AttnKernel k : {cuda::AttnKernel::Fp32, cuda::AttnKernel::Mma}) {
      be.set_attention(k);
      const std::string tag = std::string(" [") + cuda::attention_kernel_name(k) + "]";
      be.memset_zero(dK.p, nout * 4), be.memset_zero(dV.p, nout * 4), be.memset_zero(dq.p, nq * 4);
      be.attention_forward(out.p, lse.p, x.p, K.p, Vv.p, d_qslot, d_qstart, km, d);
      be.attention_backward(dq.p, dK.p, dV.p, dout.p, out.p, lse.p, x.p, K.p, Vv.p, d_qslot, d_qstart, km, d);
      if (k == cuda::AttnKernel::Fp32) {
        be.copy(ref_out.p, out.p, nout), be.copy(ref_dq.p, dq.p, nq), be.copy(ref_dK.p, dK.p, nout),
            be.copy(ref_dV.p, dV.p, nout);
      } else {
        std::string line = "  mma vs fp32 rel err:";
        bool ok = true;
        struct Output {
          const char* name;
          const float *got, *want;
          size_t n;
        };
        const Output outs[] = {{"out", out.p, ref_out.p, nout},
                               {"dq", dq.p, ref_dq.p, nq},
                               {"dK", dK.p, ref_dK.p, nout},
                               {"dV", dV.p, ref_dV.p, nout}};
        for (const Output& o : outs) {
          cuda::max_abs_diff(be.stream, maxima.p, o.got, o.want, o.n, cmp_work.p);
          float h[2];
          be.to_host(h, maxima.p, 2);
          const cuda::Agreement ag = cuda::agreement(h[0], h[1], cuda::kAttentionMmaTol);
          char buf[64];
          std::snprintf(buf, sizeof buf, " %s %.2e", o.name, ag.rel_err);
          line += buf;
          ok = ok && ag.ok;
        }
        std::printf("%s%s\n", line.c_str(), ok ? "" : "  FAIL");
        if (!ok) attention_failed = true;
      }
      row(("attention forward (causal)" + tag).c_str(),
          time_ms(be, [&] { be.attention_forward(out.p, lse.p, x.p, K.p, Vv.p, d_qslot, d_qstart, km, d); }, reps),
          0, 4.0 * hs * pairs);
      row(("attention backward (2.5x fwd)" + tag).c_str(),
          time_ms(be,
                  [&] {
                    be.attention_backward(dq.p, dK.p, dV.p, dout.p, out.p, lse.p, x.p, K.p, Vv.p, d_qslot, d_qstart,
                                          km, d);
                  },
                  reps),
          0, 10.0 * hs * pairs);
    }
    be.set_attention(saved);
    for (auto* p : {d_qslot, d_qstart, d_order, d_depth, d_valid}) CUDA_CHECK(cudaFree(p));
  }
  {
    Buffer gu((size_t)N * 2 * F), act((size_t)N * F), dgu((size_t)N * 2 * F);
    fill_random(be, gu.p, (size_t)N * 2 * F, 11);
    row("swiglu forward", time_ms(be, [&] { be.swiglu_forward(act.p, gu.p, N, F); }, reps), f4 * 3 * N * F);
    row("swiglu backward", time_ms(be, [&] { be.swiglu_backward(dgu.p, act.p, gu.p, N, F); }, reps), f4 * 5 * N * F);
  }
  {
    Buffer z((size_t)N * V), dz((size_t)N * V), l(N), lp(N), g(N);
    fill_random(be, z.p, (size_t)N * V, 12, 8.0f);
    fill_random(be, g.p, N, 13);
    std::vector<int> tg(N);
    Rng r(1);
    for (auto& t : tg) t = (int)r.below(V);
    int* d_y = nullptr;
    CUDA_CHECK(cudaMalloc(&d_y, N * sizeof(int)));
    be.to_device(d_y, tg.data(), N);
    row("cross-entropy forward (lse, logp)",
        time_ms(be, [&] { be.logsoftmax_target_forward(l.p, lp.p, z.p, d_y, N, V, V); }, reps), f4 * N * V);
    row("cross-entropy backward (dlogits)",
        time_ms(be, [&] { be.logsoftmax_target_backward(dz.p, z.p, l.p, d_y, g.p, nullptr, N, V, V); }, reps),
        f4 * 2 * N * V);
    row("softmax forward", time_ms(be, [&] { be.softmax_forward(dz.p, z.p, N, V); }, reps), f4 * 2 * N * V);
    row("softmax backward", time_ms(be, [&] { be.softmax_backward(z.p, dz.p, dz.p, N, V); }, reps), f4 * 3 * N * V);
    // embedding: token rows of a (V, D) table
    Buffer table((size_t)V * D), e((size_t)N * D);
    fill_random(be, table.p, (size_t)V * D, 16);
    row("embedding forward", time_ms(be, [&] { be.embedding_forward(e.p, d_y, table.p, N, D, 1.0f); }, reps),
        f4 * 2 * N * D);
    row("embedding backward (atomic runs)",
        time_ms(be, [&] { be.embedding_backward(table.p, d_y, e.p, N, D, 1.0f); }, reps), f4 * 3 * N * D);
    CUDA_CHECK(cudaFree(d_y));
  }
  {
    Buffer p(n_params), g(n_params), m(n_params), v(n_params);
    fill_random(be, p.p, n_params, 14), fill_random(be, g.p, n_params, 15);
    be.memset_zero(m.p, n_params * 4), be.memset_zero(v.p, n_params * 4);
    AdamWHyper h;
    row("adamw step (norm + clip + update)",
        time_ms(be, [&] { be.adamw_step(p.p, g.p, m.p, v.p, n_params, n_params / 2, h, 1.0); }, reps),
        f4 * 8 * n_params);
  }
  CUDA_CHECK(cudaFree(d_pos));
  return !attention_failed;
}

// ---- whole training steps ------------------------------------------------------------
void bench_steps(CudaBackend& be, const std::string& methods, int B, int T, int steps, double peak) {
  std::printf("\nwhole training steps (70m, B = %d, T = %d, forward + backward + AdamW; MFU vs %.0f TFLOP/s)\n", B, T,
              peak);
  std::printf("  memory (MiB): state = parameters, gradients, AdamW m and v; act = the activations' arena at its peak, used\n"
              "  and reserved (as train_gpu's end-of-run memory line); device = cudaMemGetInfo's used memory after the steps\n");
  std::printf("  waits = the host's waits for the GPU per step (gate reads that size launches, the statistics, the step's end)\n");
  std::printf("  method+graph: its forward and backward launched as one CUDA graph (train_gpu --cuda-graph 1)\n");
  std::printf("  method+bf16acts: the blocks' saved q, attention output and gate|up in bf16 (train_gpu --bf16-acts 1)\n");
  std::printf("%-20s %-5s %10s %10s %9s %7s %8s %6s %8s %8s %8s %8s\n", "method", "gemm", "ms/step", "tok/s", "TFLOP/s", "MFU",
              "passes", "waits", "state", "act", "act resv", "device");
  size_t start = 0;
  while (start <= methods.size()) {
    size_t end = methods.find(',', start);
    if (end == std::string::npos) end = methods.size();
    std::string name = methods.substr(start, end - start);
    start = end + 1;
    if (name.empty()) continue;
    // "standard+graph": the forward and backward launched as one CUDA graph (train_gpu --cuda-graph 1);
    // "adaponder+bf16acts": bf16 storage of the blocks' largest saved activations (train_gpu --bf16-acts 1)
    const std::string label = name;
    auto strip = [&name](const std::string& suffix) {
      const bool has = name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      if (has) name.resize(name.size() - suffix.size());
      return has;
    };
    const bool bf16_acts = strip("+bf16acts");
    const bool graphs = strip("+graph");
    MethodOptions mo;
    auto meth = make_method<CudaBackend>(name, mo);
    if (graphs && !meth->graph_safe()) {
      std::printf("%-20s (skipped: the method reads values back mid-step, no CUDA graph)\n", label.c_str());
      continue;
    }
    auto model = make_model(be, preset_config("70m"), *meth);
    model->bf16_acts = bf16_acts;
    model->init_params(1);
    const size_t n = model->num_params();
    Buffer m(n), v(n);
    be.memset_zero(m.p, n * 4), be.memset_zero(v.p, n * 4);
    Rng rng(2);
    Batch b;
    b.B = B, b.T = T;
    for (int i = 0; i < B * T; i++) b.inputs.push_back((int)rng.below(model->cfg.vocab));
    for (int i = 0; i < B * T; i++) b.targets.push_back((int)rng.below(model->cfg.vocab));
    double flops = 0, secs = 0, passes = 0, waits = 0;
    for (int it = 0; it < steps + 2; it++) {
      be.sync();
      const long long waits0 = be.host_waits();
      const auto t0 = std::chrono::steady_clock::now();
      meth->set_step(it + 1000, 10000);
      model->arena.reset();
      model->zero_grads();
      if (graphs) be.graph_begin();
      meth->forward(*model, b, true);
      meth->backward(*model, 1.0);
      if (graphs) be.graph_end();
      AdamWHyper h;
      h.step = it + 1;
      be.adamw_step(model->params.data(), model->grads.data(), m.p, v.p, n, model->layout.decay_count(), h, 1.0);
      const StepStats st = meth->stats(*model);
      const double gn = be.last_grad_norm();  // as the trainer does: one value back per step
      (void)gn;
      be.sync();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (it >= 2) {
        secs += dt, flops += st.train_flops, waits += (double)(be.host_waits() - waits0);
        for (auto& kv : st.halting)
          if (kv.first == "passes") passes += kv.second;
      }
    }
    const double tok_s = (double)B * T * steps / secs, tflops = flops / secs / 1e12;
    const double mib = 1024.0 * 1024.0, state = training_state_bytes((double)n, sizeof(float));
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    std::printf("%-20s %-5s %10.1f %10.0f %9.1f %6.1f%% %8.2f %6.1f %8.1f %8.1f %8.1f %8.0f\n", label.c_str(),
                cuda::gemm_precision_name(be.gemm()), secs / steps * 1e3, tok_s, tflops, 100 * tflops / peak,
                passes / steps, waits / steps, state / mib, model->arena.peak_used() / mib, model->arena.peak_capacity() / mib,
                (double)(total_b - free_b) / mib);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int batch = 16, seq = 1024, steps = 5, reps = 10;
    double peak = 989;
    std::string methods = "standard,standard+graph,adaponder,adaponder+bf16acts", gemms = "fp32,tf32,bf16,bf16mma", parts = "gemm,kernels,steps";
    Flags f("bench_gpu", "GPU kernel and training-step throughput on the 70m shapes, with cuBLAS as the yardstick.");
    f.add("--batch", &batch, "sequences per step (B)");
    f.add("--seq", &seq, "sequence length (T)");
    f.add("--steps", &steps, "timed training steps per method (after 2 warm-up steps)");
    f.add("--reps", &reps, "timed repetitions per kernel (after 1 warm-up)");
    f.add("--methods", &methods,
          "comma-separated methods for the whole-step benchmark; NAME+graph launches its step as a CUDA graph, NAME+bf16acts stores its saved activations in bf16");
    f.add("--gemms", &gemms, "GEMMs to benchmark: fp32, tf32, bf16 (gemm() at that precision), bf16mma (gemm_mma_pipelined on bf16 operands); the steps use ADA_GEMM, default bf16");
    f.add("--parts", &parts, "what to run: gemm, kernels, steps");
    f.add("--peak", &peak, "dense bf16 peak of the GPU in TFLOP/s, for MFU");
    if (!f.parse(argc, argv)) return 0;
    cudaDeviceProp prop;
    cuda::open_gpu(0, &prop);
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    std::printf("gpu %s, sm_%d%d, %d SMs, %.0f GiB; driver %d, runtime %d\n", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, driver, runtime);
    const ModelConfig c = preset_config("70m");
    CudaBackend be;
    std::vector<std::string> failed;
    if (parts.find("gemm") != std::string::npos)
      failed = bench_gemms(be, batch * seq, c.dim, c.hidden, c.vocab, reps, gemms);
    if (parts.find("kernels") != std::string::npos && !bench_kernels(be, batch, seq, c, (size_t)c.num_params(), reps))
      failed.push_back("attention mma vs fp32");
    if (parts.find("steps") != std::string::npos) bench_steps(be, methods, batch, seq, steps, peak);
    if (!failed.empty()) {  // last, so that it is what gpu_check.sh quotes
      std::string list;
      for (const auto& f : failed) list += (list.empty() ? "" : ", ") + f;
      std::fflush(stdout);
      std::fprintf(stderr, "error: %zu check(s) beyond the tolerance (GEMMs vs cuBLAS, attention mma vs fp32): %s\n", failed.size(),
                   list.c_str());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
