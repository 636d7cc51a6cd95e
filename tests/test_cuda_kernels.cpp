// Every CUDA kernel against its CPU twin: each CudaBackend op (cuda/*.cu)
// runs on random inputs, including ragged sizes that are not multiples of the
// kernels' tiles, and is compared with the same op of CpuBackend<float> (the
// reference, src/ops/*.h). In `make test` the kernels execute under the host
// runner (cuda/hostrun/, no GPU); `make test_gpu` builds this file with nvcc
// and runs it on a GPU.
//
// Error measure: max |got - want| / max |want| over the whole output.
// Tolerances (cuda/agreement.h, shared with bench_gpu's comparison with
// cuBLAS): fp32 kernels 1e-5; tensor-core GEMMs 2e-2 (bf16 inputs) and
// 5e-3 (tf32 inputs), both with fp32 accumulation (docs/cuda.md explains the
// numbers). ADA_VERBOSE=1 prints every measured error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "train/cpu_instances.h"
#include "backend/device_array.h"
#include "core/rng.h"
#include "agreement.h"
#include "cuda_backend.h"

namespace {

using ada::AttnDims;
using ada::KeyMeta;
using Cpu = ada::CpuBackend<float>;
using Gpu = ada::CudaBackend;
using ada::cuda::GemmPrecision;
using Vec = std::vector<float>;
using IVec = std::vector<int>;

using ada::cuda::kFp32Tol;

#if defined(__CUDACC__)
// test_gpu: without a usable GPU, one clear failure instead of one per test.
class RequireGpu : public ::testing::Environment {
 public:
  void SetUp() override {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
      FAIL() << "no usable CUDA GPU: " << (e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device found");
  }
};
[[maybe_unused]] ::testing::Environment* const kRequireGpu = ::testing::AddGlobalTestEnvironment(new RequireGpu);
#endif

Vec randn(size_t n, uint64_t seed, double scale = 1.0) {
  ada::Rng r(seed);
  Vec v(n);
  for (auto& x : v) x = static_cast<float>(scale * r.normal());
  return v;
}

IVec randint(size_t n, int below, uint64_t seed) {
  ada::Rng r(seed);
  IVec v(n);
  for (auto& x : v) x = static_cast<int>(r.below(static_cast<uint64_t>(below)));
  return v;
}

// max |got - want| / max |want|
double rel_err(const Vec& got, const Vec& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, mag = 1e-30;
  for (size_t i = 0; i < got.size() && i < want.size(); i++) {
    const double d = std::abs(static_cast<double>(got[i]) - want[i]);
    diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    mag = std::max(mag, std::abs(static_cast<double>(want[i])));
  }
  return diff / mag;
}

void expect_close(const std::string& what, const Vec& got, const Vec& want, double tol = kFp32Tol) {
  const double e = rel_err(got, want);
  if (std::getenv("ADA_VERBOSE")) std::printf("  %-52s rel err %.2e\n", what.c_str(), e);
  EXPECT_LE(e, tol) << what;
}

// A device copy of a host vector, read back with get().
template <class U>
class Dev {
 public:
  Dev(Gpu& g, const std::vector<U>& host) : g_(g), a_(g, std::max<size_t>(host.size(), 1)), n_(host.size()) {
    g.to_device(a_.data(), host.data(), n_);
  }
  U* p() const { return a_.data(); }
  std::vector<U> get() const {
    std::vector<U> out(n_);
    g_.to_host(out.data(), a_.data(), n_);
    return out;
  }

 private:
  Gpu& g_;
  ada::DeviceArray<Gpu, U> a_;
  size_t n_;
};

// ===========================================================================
TEST(CudaKernels, Embedding) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  const int N = 37, D = 29, V = 11;
  const float s = 1.7f;
  const IVec ids = randint(N, V, 1);
  const Vec table = randn(static_cast<size_t>(V) * D, 2), dout = randn(static_cast<size_t>(N) * D, 3);
  Vec out(static_cast<size_t>(N) * D), dtable = randn(table.size(), 4);
  Dev<int> d_ids(g, ids);
  Dev<float> d_table(g, table), d_dout(g, dout), d_out(g, out), d_dtable(g, dtable);
  c.embedding_forward(out.data(), ids.data(), table.data(), N, D, s);
  g.embedding_forward(d_out.p(), d_ids.p(), d_table.p(), N, D, s);
  expect_close("embedding forward", d_out.get(), out);
  c.embedding_backward(dtable.data(), ids.data(), dout.data(), N, D, s);
  g.embedding_backward(d_dtable.p(), d_ids.p(), d_dout.p(), N, D, s);
  expect_close("embedding backward (repeated ids, accumulate)", d_dtable.get(), dtable);
  // all ids equal, width 1 (a gate bias): the run-length path
  const int n1 = 300;
  const IVec zero(n1, 0);
  const Vec g1 = randn(n1, 5);
  Vec b1{0.5f};
  Dev<int> d_zero(g, zero);
  Dev<float> d_g1(g, g1), d_b1(g, b1);
  c.embedding_backward(b1.data(), zero.data(), g1.data(), n1, 1, 1.0f);
  g.embedding_backward(d_b1.p(), d_zero.p(), d_g1.p(), n1, 1, 1.0f);
  expect_close("embedding backward (one id, D = 1)", d_b1.get(), b1);
}

// The deterministic embedding backward (CudaBackend::set_deterministic,
// train_gpu --deterministic): no float atomics, every table element summed in
// row order from its old value, like the CPU twin. Shapes: a small ragged one;
// N > 2048 (three bitonic merge levels, global strides included) with D > 128
// (two column blocks) and repeated ids; the gate-bias shape (D = 1, every id 0).
bool same_bits(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CudaKernels, EmbeddingBackwardDeterministic) {
  struct Case {
    int N, D, V;
  };
  const float s = 0.7f;
  for (const Case k : {Case{37, 29, 11}, Case{2500, 130, 300}, Case{3000, 1, 1}}) {
    const IVec ids = k.V == 1 ? IVec(k.N, 0) : randint(k.N, k.V, 140 + k.N);
    const Vec dout = randn(static_cast<size_t>(k.N) * k.D, 141), init = randn(static_cast<size_t>(k.V) * k.D, 142);
    Vec want = init;
    Cpu c;
    c.embedding_backward(want.data(), ids.data(), dout.data(), k.N, k.D, s);
    auto run = [&] {
      Gpu g(GemmPrecision::Fp32);
      g.set_deterministic(true);
      Dev<int> d_ids(g, ids);
      Dev<float> d_dout(g, dout), d_table(g, init);
      g.embedding_backward(d_table.p(), d_ids.p(), d_dout.p(), k.N, k.D, s);
      return d_table.get();
    };
    const std::string tag = " N=" + std::to_string(k.N) + " D=" + std::to_string(k.D);
    const Vec first = run();
    expect_close("deterministic embedding backward" + tag, first, want);
#if defined(ADA_HOSTRUN)
    // Three more runs with the threads of every block resumed in other orders
    // (two other shuffle seeds, reverse): bit-identical.
    for (int variant = 0; variant < 3; variant++) {
      ada::hostrun::Config cfg = ada::hostrun::config();
      cfg.order = variant == 2 ? ada::hostrun::Order::Reverse : ada::hostrun::Order::Shuffle;
      cfg.seed = 1000 + variant;
      ada::hostrun::ScopedConfig scoped(cfg);
      EXPECT_TRUE(same_bits(run(), first)) << "resume order variant " << variant << tag;
    }
#else
    EXPECT_TRUE(same_bits(run(), first)) << "a second run on the GPU differs" << tag;
#endif
  }
}

TEST(CudaKernels, RMSNorm) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  for (auto [N, D] : {std::pair{45, 67}, std::pair{600, 16}}) {
    const size_t nd = static_cast<size_t>(N) * D;
    const Vec x = randn(nd, 10 + N), w = randn(D, 11), dy = randn(nd, 12);
    Vec y(nd), rstd(N), dx = randn(nd, 13), dw = randn(D, 14);
    Dev<float> d_x(g, x), d_w(g, w), d_dy(g, dy), d_y(g, y), d_rstd(g, rstd), d_dx(g, dx), d_dw(g, dw);
    c.rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, D, 1e-5);
    g.rmsnorm_forward(d_y.p(), d_rstd.p(), d_x.p(), d_w.p(), N, D, 1e-5);
    const std::string tag = " N=" + std::to_string(N) + " D=" + std::to_string(D);
    expect_close("rmsnorm forward y" + tag, d_y.get(), y);
    expect_close("rmsnorm forward rstd" + tag, d_rstd.get(), rstd);
    c.rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, D);
    g.rmsnorm_backward(d_dx.p(), d_dw.p(), d_dy.p(), d_x.p(), d_w.p(), d_rstd.p(), N, D);
    expect_close("rmsnorm backward dx (+=)" + tag, d_dx.get(), dx);
    expect_close("rmsnorm backward dw (+=)" + tag, d_dw.get(), dw);
  }
}

TEST(CudaKernels, RoPE) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  const int N = 13, H = 3, hs = 6, D = H * hs, ld = 3 * D, max_seq = 20;
  std::vector<double> cd, sd;
  ada::rope_tables(cd, sd, max_seq, hs, 10000.0);
  const Vec ct(cd.begin(), cd.end()), st(sd.begin(), sd.end());
  const IVec pos = randint(N, max_seq, 20);
  Vec x = randn(static_cast<size_t>(N) * ld, 21);
  Dev<float> d_x(g, x), d_c(g, ct), d_s(g, st);
  Dev<int> d_pos(g, pos);
  c.rope_forward(x.data(), ld, 2 * H, pos.data(), N, hs, ct.data(), st.data());
  g.rope_forward(d_x.p(), ld, 2 * H, d_pos.p(), N, hs, d_c.p(), d_s.p());
  expect_close("rope forward (q and k heads of qkv)", d_x.get(), x);
  c.rope_backward(x.data(), ld, 2 * H, pos.data(), N, hs, ct.data(), st.data());
  g.rope_backward(d_x.p(), ld, 2 * H, d_pos.p(), N, hs, d_c.p(), d_s.p());
  expect_close("rope backward", d_x.get(), x);
}

// ---- GEMM ------------------------------------------------------------------
double gemm_tol(GemmPrecision p) { return ada::cuda::gemm_tolerance(p); }

// The four matmul ops of the backend (six GEMM shapes) on one size, writing
// and accumulating; big: only y = x W^T, dx = dy W and dW += dy^T x,
// accumulating (the shapes of the large layers, kept quick under the runner).
void check_matmuls(GemmPrecision p, int N, int I, int O, bool big = false) {
  Gpu g(p);
  Cpu c;
  const double tol = gemm_tol(p);
  const std::string tag = std::string(ada::cuda::gemm_precision_name(p)) + " N=" + std::to_string(N) +
                          " I=" + std::to_string(I) + " O=" + std::to_string(O);
  const size_t ni = static_cast<size_t>(N) * I, no = static_cast<size_t>(N) * O, io = static_cast<size_t>(I) * O;
  const Vec x = randn(ni, 30), W = randn(io, 31), dy = randn(no, 32);
  for (bool acc : {false, true}) {
    if (big && !acc) continue;
    const std::string t = tag + (acc ? " (+=)" : "");
    Vec y = randn(no, 33), dx = randn(ni, 34), dW = randn(io, 35);
    Dev<float> d_x(g, x), d_W(g, W), d_dy(g, dy), d_y(g, y), d_dx(g, dx), d_dW(g, dW);
    // y = x W^T  (W as (O, I))
    c.matmul_forward(y.data(), x.data(), W.data(), N, I, O, acc);
    g.matmul_forward(d_y.p(), d_x.p(), d_W.p(), N, I, O, acc);
    expect_close("gemm y = x W^T      " + t, d_y.get(), y, tol);
    // dx = dy W, dW += dy^T x
    c.matmul_backward(dx.data(), dW.data(), dy.data(), x.data(), W.data(), N, I, O, acc);
    g.matmul_backward(d_dx.p(), d_dW.p(), d_dy.p(), d_x.p(), d_W.p(), N, I, O, acc);
    expect_close("gemm dx = dy W      " + t, d_dx.get(), dx, tol);
    expect_close("gemm dW += dy^T x   " + t, d_dW.get(), dW, tol);
    if (big) continue;
    // y = x W  (W as (I, O)); dx = dy W^T, dW += x^T dy
    c.matmul_nn_forward(y.data(), x.data(), W.data(), N, I, O, acc);
    g.matmul_nn_forward(d_y.p(), d_x.p(), d_W.p(), N, I, O, acc);
    expect_close("gemm y = x W        " + t, d_y.get(), y, tol);
    c.matmul_nn_backward(dx.data(), dW.data(), dy.data(), x.data(), W.data(), N, I, O, acc);
    g.matmul_nn_backward(d_dx.p(), d_dW.p(), d_dy.p(), d_x.p(), d_W.p(), N, I, O, acc);
    expect_close("gemm dx = dy W^T    " + t, d_dx.get(), dx, tol);
    expect_close("gemm dW += x^T dy   " + t, d_dW.get(), dW, tol);
  }
}

class CudaGemm : public ::testing::TestWithParam<GemmPrecision> {};

TEST_P(CudaGemm, AllShapesRagged) {
  // (N, I, O): tiny, ragged (not multiples of 8, 16, 32 or 128), more than one
  // 128-row tile, and the test model's head (V = 23).
  for (auto [N, I, O] : {std::tuple{1, 1, 1}, std::tuple{37, 29, 45}, std::tuple{130, 70, 33}, std::tuple{14, 16, 23}})
    check_matmuls(GetParam(), N, I, O);
}

// Split-K (forced) and the transpose combinations directly on cuda::gemm,
// including op(A)^T op(B)^T which the backend does not use.
TEST_P(CudaGemm, SplitKAndTransposes) {
  const GemmPrecision p = GetParam();
  Gpu g(p);
  const int M = 40, Nc = 50, K = 300;
  for (int splits : {1, 3}) {
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        ada::cuda::GemmShape s;
        s.trans_a = ta, s.trans_b = tb, s.M = M, s.N = Nc, s.K = K;
        s.lda = ta ? M + 3 : K + 1;  // row strides wider than the matrices
        s.ldb = tb ? K + 2 : Nc + 5;
        s.ldc = Nc + 7;
        const Vec A = randn(static_cast<size_t>(ta ? K : M) * s.lda, 40);
        const Vec B = randn(static_cast<size_t>(tb ? Nc : K) * s.ldb, 41);
        const Vec C0 = randn(static_cast<size_t>(M) * s.ldc, 42);
        Vec want = C0;  // C += op(A) op(B), in double
        for (int m = 0; m < M; m++)
          for (int n = 0; n < Nc; n++) {
            double acc = 0;
            for (int k = 0; k < K; k++) {
              const double a = ta ? A[static_cast<size_t>(k) * s.lda + m] : A[static_cast<size_t>(m) * s.lda + k];
              const double b = tb ? B[static_cast<size_t>(n) * s.ldb + k] : B[static_cast<size_t>(k) * s.ldb + n];
              acc += a * b;
            }
            want[static_cast<size_t>(m) * s.ldc + n] += static_cast<float>(acc);
          }
        Dev<float> d_A(g, A), d_B(g, B), d_C(g, C0);
        ada::DeviceArray<Gpu, char> work(g, ada::cuda::gemm_work_bytes(p, s, splits) + 1);
        ada::cuda::gemm(g.stream, p, s, d_A.p(), d_B.p(), d_C.p(), true, work.data(), splits);
        expect_close(std::string("gemm ") + ada::cuda::gemm_precision_name(p) + (ta ? " A^T" : " A") +
                         (tb ? " B^T" : " B") + " splits=" + std::to_string(splits) + " (strided, +=)",
                     d_C.get(), want, gemm_tol(p));
      }
  }
}

// The addend in the epilogue (cuda::gemm_add, the residual add of a block):
// C = op(A) op(B) + R must be bit for bit the plain product P (no addend,
// the same tiles and sums) plus R in one float addition, r + P rounded once,
// computed here on the host; and the old accumulate (R copied into C, then
// C += op(A) op(B)) must give the same bits. For every transposition,
// split-K (forced 3, and the auto choice of a long K), R with its own stride
// (even and odd, so the float2 and the scalar stores) and at an address that
// is not 8-byte aligned, and R == C. C starts as NaN: it must never be read,
// and the columns between N and ldc must stay NaN.
TEST_P(CudaGemm, AddendIsOneAdditionBitForBit) {
  const GemmPrecision p = GetParam();
  Gpu g(p);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto same_bits = [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; };
  // (M, N, K): mma-eligible in every transposition; ragged (the Bf16 fallback
  // of bf16mma where N or M is not a multiple of 8); a long K (auto split-K).
  for (auto [M, Nc, K] : {std::tuple{40, 48, 300}, std::tuple{37, 45, 70}, std::tuple{24, 16, 1100}})
    for (int splits : {1, 3, 0}) {
      if ((splits == 0) != (K > 1000)) continue;  // the long K with its auto split only; the others forced
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
          for (int rlay = 0; rlay < 4; rlay++) {  // R: own even stride, odd stride, misaligned base, R == C
            ada::cuda::GemmShape s;
            s.trans_a = ta, s.trans_b = tb, s.M = M, s.N = Nc, s.K = K;
            s.lda = ta ? M : K, s.ldb = tb ? K : Nc, s.ldc = Nc + 6;
            const int ldr = rlay == 0 ? Nc + 2 : rlay == 1 ? Nc + 3 : rlay == 2 ? Nc : s.ldc;
            const size_t roff = rlay == 2 ? 1 : 0;
            const std::string tag = std::string(ada::cuda::gemm_precision_name(p)) + " " + std::to_string(M) + "x" +
                                    std::to_string(Nc) + "x" + std::to_string(K) + (ta ? " A^T" : " A") +
                                    (tb ? " B^T" : " B") + " splits " + std::to_string(splits) + " R layout " +
                                    std::to_string(rlay);
            const Vec A = randn(static_cast<size_t>(ta ? K : M) * s.lda, 50);
            const Vec B = randn(static_cast<size_t>(tb ? Nc : K) * s.ldb, 51);
            const Vec R = randn(roff + static_cast<size_t>(M) * ldr, 52, 4.0);
            auto r_at = [&](int m, int n) { return R[roff + static_cast<size_t>(m) * ldr + n]; };
            Vec C0(static_cast<size_t>(M) * s.ldc, nan);  // R's values in C's layout, NaN past N
            for (int m = 0; m < M; m++)
              for (int n = 0; n < Nc; n++) C0[static_cast<size_t>(m) * s.ldc + n] = r_at(m, n);
            const Vec nans(C0.size(), nan);
            Dev<float> d_A(g, A), d_B(g, B), d_R(g, R), d_P(g, nans), d_acc(g, C0), d_C(g, rlay == 3 ? C0 : nans);
            const int sized = splits > 0 ? splits : ada::cuda::gemm_auto_splits(p, s);  // 0: the auto choice
            if (splits == 0) EXPECT_GT(sized, 1) << "the long K must split " << tag;
            ada::DeviceArray<Gpu, char> work(g, ada::cuda::gemm_work_bytes(p, s, sized) + 1);
            ada::cuda::gemm(g.stream, p, s, d_A.p(), d_B.p(), d_P.p(), false, work.data(), splits);
            ada::cuda::gemm(g.stream, p, s, d_A.p(), d_B.p(), d_acc.p(), true, work.data(), splits);
            if (rlay == 3)
              ada::cuda::gemm_add(g.stream, p, s, d_A.p(), d_B.p(), d_C.p(), s.ldc, d_C.p(), work.data(), splits);
            else
              ada::cuda::gemm_add(g.stream, p, s, d_A.p(), d_B.p(), d_R.p() + roff, ldr, d_C.p(), work.data(), splits);
            const Vec P = d_P.get(), got = d_C.get(), acc = d_acc.get();
            Vec want(C0.size(), nan);
            for (int m = 0; m < M; m++)
              for (int n = 0; n < Nc; n++) {
                const size_t i = static_cast<size_t>(m) * s.ldc + n;
                want[i] = r_at(m, n) + P[i];
                if (std::isnan(want[i])) ADD_FAILURE() << "the plain product left NaN at " << i << " " << tag;
              }
            int bad = 0;
            for (size_t i = 0; i < want.size(); i++) {
              if (!same_bits(got[i], want[i]) && bad++ < 3)
                ADD_FAILURE() << tag << ": gemm_add C[" << i / s.ldc << "][" << i % s.ldc << "] = " << got[i]
                              << ", want " << want[i];
              if (!same_bits(acc[i], want[i]) && bad++ < 3)
                ADD_FAILURE() << tag << ": accumulate C[" << i / s.ldc << "][" << i % s.ldc << "] = " << acc[i]
                              << ", want " << want[i];
            }
            EXPECT_EQ(bad, 0) << tag;
          }
    }
}

// The backend's residual op against its CPU twin (copy, then accumulate),
// into another buffer and in place (y == r).
TEST_P(CudaGemm, MatmulResidualForward) {
  const GemmPrecision p = GetParam();
  Gpu g(p);
  Cpu c;
  for (auto [N, I, O] : {std::tuple{37, 29, 45}, std::tuple{130, 72, 64}, std::tuple{8, 1030, 16}}) {
    const std::string tag = std::string(ada::cuda::gemm_precision_name(p)) + " N=" + std::to_string(N) +
                            " I=" + std::to_string(I) + " O=" + std::to_string(O);
    const size_t no = static_cast<size_t>(N) * O;
    const Vec x = randn(static_cast<size_t>(N) * I, 60), W = randn(static_cast<size_t>(O) * I, 61);
    const Vec r = randn(no, 62, 3.0);
    Vec y(no, 0.0f), y_in = r;
    Dev<float> d_x(g, x), d_W(g, W), d_r(g, r), d_y(g, Vec(no, std::numeric_limits<float>::quiet_NaN())),
        d_in(g, r);
    c.matmul_residual_forward(y.data(), r.data(), x.data(), W.data(), N, I, O);
    g.matmul_residual_forward(d_y.p(), d_r.p(), d_x.p(), d_W.p(), N, I, O);
    expect_close("y = r + x W^T       " + tag, d_y.get(), y, gemm_tol(p));
    c.matmul_residual_forward(y_in.data(), y_in.data(), x.data(), W.data(), N, I, O);
    g.matmul_residual_forward(d_in.p(), d_in.p(), d_x.p(), d_W.p(), N, I, O);
    expect_close("y = y + x W^T       " + tag, d_in.get(), y_in, gemm_tol(p));
    EXPECT_EQ(y_in, y) << "in place and into another buffer give the same bits on the CPU";
    EXPECT_EQ(d_in.get(), d_y.get()) << "in place and into another buffer give the same bits on the device " << tag;
    EXPECT_EQ(d_r.get(), r) << "the addend is only read " << tag;
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaGemm,
                         ::testing::Values(GemmPrecision::Fp32, GemmPrecision::Bf16, GemmPrecision::Tf32,
                                           GemmPrecision::Bf16Mma),
                         [](const auto& info) { return std::string(ada::cuda::gemm_precision_name(info.param)); });

// ---- attention -----------------------------------------------------------------
struct AttnCase {
  std::string name;
  int B, S, H, hs;
  IVec qslot, order, depth, valid;
  int rule;
};

void check_attention(const AttnCase& a) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  const int D = a.H * a.hs, N = static_cast<int>(a.qslot.size()), ldq = 3 * D;
  IVec qstart(a.B + 1, 0);
  for (int s : a.qslot) qstart[s / a.S + 1]++;
  for (int b = 0; b < a.B; b++) qstart[b + 1] += qstart[b];
  const KeyMeta km{a.order.data(), a.depth.data(), a.valid.data(), a.S, a.rule};
  const AttnDims d{N, a.B, a.S, a.H, a.hs, ldq};
  const size_t kv = static_cast<size_t>(a.B) * a.S * D;
  const Vec q = randn(static_cast<size_t>(N) * ldq, 50), K = randn(kv, 51), V = randn(kv, 52);
  const Vec dout = randn(static_cast<size_t>(N) * D, 53);
  Vec out(static_cast<size_t>(N) * D), lse(static_cast<size_t>(N) * a.H);
  Vec dq = randn(static_cast<size_t>(N) * ldq, 54), dK = randn(kv, 55), dV = randn(kv, 56);

  Dev<int> d_qslot(g, a.qslot), d_qstart(g, qstart), d_order(g, a.order), d_depth(g, a.depth), d_valid(g, a.valid);
  const KeyMeta dkm{d_order.p(), d_depth.p(), d_valid.p(), a.S, a.rule};
  Dev<float> d_q(g, q), d_K(g, K), d_V(g, V), d_dout(g, dout), d_out(g, out), d_lse(g, lse), d_dq(g, dq),
      d_dK(g, dK), d_dV(g, dV);

  c.attention_forward(out.data(), lse.data(), q.data(), K.data(), V.data(), a.qslot.data(), qstart.data(), km, d);
  g.attention_forward(d_out.p(), d_lse.p(), d_q.p(), d_K.p(), d_V.p(), d_qslot.p(), d_qstart.p(), dkm, d);
  expect_close("attention " + a.name + " out", d_out.get(), out);
  expect_close("attention " + a.name + " lse", d_lse.get(), lse);
  // the backward uses the CPU's out and lse on both sides (isolates the backward)
  Dev<float> d_out_ref(g, out), d_lse_ref(g, lse);
  c.attention_backward(dq.data(), dK.data(), dV.data(), dout.data(), out.data(), lse.data(), q.data(), K.data(),
                       V.data(), a.qslot.data(), qstart.data(), km, d);
  g.attention_backward(d_dq.p(), d_dK.p(), d_dV.p(), d_dout.p(), d_out_ref.p(), d_lse_ref.p(), d_q.p(), d_K.p(),
                       d_V.p(), d_qslot.p(), d_qstart.p(), dkm, d);
  expect_close("attention " + a.name + " dq (set, ld = 3D)", d_dq.get(), dq);
  expect_close("attention " + a.name + " dK (+=)", d_dK.get(), dK);
  expect_close("attention " + a.name + " dV (+=)", d_dV.get(), dV);
}

TEST(CudaKernels, AttentionCausal) {
  // every position a query; S = 37: two key tiles, the second ragged; hs = 8
  AttnCase a{"causal", 2, 37, 2, 8, {}, {}, {}, {}, ada::kAnyDepth};
  for (int b = 0; b < a.B; b++)
    for (int s = 0; s < a.S; s++) a.qslot.push_back(b * a.S + s), a.order.push_back(s);
  a.depth.assign(a.B * a.S, 0), a.valid.assign(a.B * a.S, 1);
  check_attention(a);
}

TEST(CudaKernels, AttentionCompactedQueries) {
  // a random subset of rows are queries (AdaPonderLM's active tokens), every
  // slot a key; the middle sequence has no query at all; hs = 16
  AttnCase a{"compacted", 3, 40, 3, 16, {}, {}, {}, {}, ada::kAnyDepth};
  ada::Rng r(60);
  for (int b = 0; b < a.B; b++)
    for (int s = 0; s < a.S; s++) {
      if (b != 1 && r.uniform() < 0.6) a.qslot.push_back(b * a.S + s);
      a.order.push_back(s);
    }
  a.depth.assign(a.B * a.S, 0), a.valid.assign(a.B * a.S, 1);
  check_attention(a);
}

TEST(CudaKernels, AttentionDuoCausal) {
  // TaH / latent CoT grid: T = 9 positions x M = 4 depths, slot = t M + m,
  // order t, depth m, rule depth <= depth; random cells never executed
  // (invalid); the queries are a subset of the executed cells; hs = 12
  const int T = 9, M = 4;
  AttnCase a{"duo-causal", 1, T * M, 2, 12, {}, {}, {}, {}, ada::kDepthLE};
  ada::Rng r(61);
  for (int t = 0; t < T; t++)
    for (int m = 0; m < M; m++) {
      const bool executed = m == 0 || r.uniform() < 0.7;
      a.order.push_back(t), a.depth.push_back(m), a.valid.push_back(executed ? 1 : 0);
      if (executed && r.uniform() < 0.7) a.qslot.push_back(t * M + m);
    }
  check_attention(a);
}

TEST(CudaKernels, AttentionDuoCausalPrivateKeys) {
  // The grid of AttentionDuoCausal with TaH2's lookahead rows: for tokens that
  // stopped early, the next depth's cell holds a private key (valid = 2),
  // visible to its own query only; the queries mix executed and lookahead
  // cells, in two sequences; hs = 8
  const int T = 11, M = 3;
  AttnCase a{"duo-causal private", 2, T * M, 2, 8, {}, {}, {}, {}, ada::kDepthLE};
  ada::Rng r(62);
  for (int b = 0; b < a.B; b++)
    for (int t = 0; t < T; t++) {
      int stop = 0;  // last executed depth
      while (stop < M - 1 && r.uniform() < 0.6) stop++;
      for (int m = 0; m < M; m++) {
        const int v = m <= stop ? 1 : m == stop + 1 ? 2 : 0;
        a.order.push_back(t), a.depth.push_back(m), a.valid.push_back(v);
        if ((v == 1 && r.uniform() < 0.5) || v == 2) a.qslot.push_back(b * a.S + t * M + m);
      }
    }
  check_attention(a);
}

TEST(CudaKernels, AttentionInterleaved) {
  // pause: [x p p x p p ...] flattened, order = index; hs = 40 (lanes own
  // 1 or 2 head dimensions)
  AttnCase a{"interleaved", 2, 39, 2, 40, {}, {}, {}, {}, ada::kAnyDepth};
  for (int b = 0; b < a.B; b++)
    for (int s = 0; s < a.S; s++) a.qslot.push_back(b * a.S + s), a.order.push_back(s);
  a.depth.assign(a.B * a.S, 0), a.valid.assign(a.B * a.S, 1);
  check_attention(a);
}

TEST(CudaKernels, AttentionHeadSize128) {
  // the largest head size: more than 48 KiB of dynamic shared memory
  AttnCase a{"hs=128", 1, 33, 1, 128, {}, {}, {}, {}, ada::kAnyDepth};
  for (int s = 0; s < a.S; s++) a.qslot.push_back(s), a.order.push_back(s);
  a.depth.assign(a.S, 0), a.valid.assign(a.S, 1);
  check_attention(a);
}

// The 70m config's shapes (D = 512, F = 1408, V = 50304, H = 8, hs = 64, up
// to 1024 keys) with few rows, so they stay quick under the runner. The
// head's dx GEMM (K = V, 4 output tiles) takes the automatic split-K path, and
// its forward (393 column tiles) is more than one wave of blocks on an H100.
TEST(CudaKernels, SeventyMShapes) {
#if defined(ADA_HOSTRUN)
  // Under the runner, race-checked (docs/hostrun.md, Race check): the whole
  // test would take hours checked block by block (the check copies all live
  // device memory, here ~200 MB, per block), so 4 blocks of each launch:
  // the first, the last and two between.
  ada::hostrun::Config rc = ada::hostrun::config();
  rc.race_check = true;
  rc.race_check_blocks = 4;
  ada::hostrun::ScopedConfig race_checked(rc);
#endif
  const int rows = 2, D = 512, F = 1408, V = 50304;
  ada::cuda::GemmShape head_dx;
  head_dx.M = rows, head_dx.N = D, head_dx.K = V;
  EXPECT_GT(ada::cuda::gemm_auto_splits(GemmPrecision::Bf16, head_dx), 1);
  for (GemmPrecision p : {GemmPrecision::Fp32, GemmPrecision::Bf16}) {
    check_matmuls(p, rows, D, V, true);  // the untied head
    check_matmuls(p, rows, F, D, true);  // down (K = F)
  }
  // Attention with head size 64 over 1024 keys: the last 6 positions query.
  AttnCase a{"70m: hs=64, 8 heads, 1024 keys", 1, 1024, 8, 64, {}, {}, {}, {}, ada::kAnyDepth};
  for (int s = 1018; s < a.S; s++) a.qslot.push_back(s);
  for (int s = 0; s < a.S; s++) a.order.push_back(s);
  a.depth.assign(a.S, 0), a.valid.assign(a.S, 1);
  check_attention(a);
}

// ---- activations and losses --------------------------------------------------------
TEST(CudaKernels, SwiGLUAndSiLU) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  const int N = 7, F = 45;
  const Vec gu = randn(static_cast<size_t>(N) * 2 * F, 70, 2.0), dy = randn(static_cast<size_t>(N) * F, 71);
  Vec y(static_cast<size_t>(N) * F), dgu(gu.size());
  Dev<float> d_gu(g, gu), d_dy(g, dy), d_y(g, y), d_dgu(g, dgu);
  c.swiglu_forward(y.data(), gu.data(), N, F);
  g.swiglu_forward(d_y.p(), d_gu.p(), N, F);
  expect_close("swiglu forward", d_y.get(), y);
  c.swiglu_backward(dgu.data(), dy.data(), gu.data(), N, F);
  g.swiglu_backward(d_dgu.p(), d_dy.p(), d_gu.p(), N, F);
  expect_close("swiglu backward", d_dgu.get(), dgu);
  const size_t n = 1001;
  const Vec u = randn(n, 72, 3.0), du_in = randn(n, 73);
  Vec s(n), du(n);
  Dev<float> d_u(g, u), d_duin(g, du_in), d_s(g, s), d_du(g, du);
  c.silu_forward(s.data(), u.data(), n);
  g.silu_forward(d_s.p(), d_u.p(), n);
  expect_close("silu forward", d_s.get(), s);
  c.silu_backward(du.data(), du_in.data(), u.data(), n);
  g.silu_backward(d_du.p(), d_duin.p(), d_u.p(), n);
  expect_close("silu backward", d_du.get(), du);
}

TEST(CudaKernels, CrossEntropy) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  // (N, V, ld): the test head, a ragged V with an extra column (CYB's "don't
  // know" class, which the kernels must leave alone), and GPT-2's V.
  for (auto [N, V, ld] : {std::tuple{14, 23, 23}, std::tuple{9, 1000, 1001}, std::tuple{3, 50304, 50304}}) {
    const std::string tag = " V=" + std::to_string(V) + " ld=" + std::to_string(ld);
    const size_t nz = static_cast<size_t>(N) * ld;
    const Vec z = randn(nz, 80 + V, 3.0), gl = randn(N, 81), gs = randn(N, 82);
    IVec y = randint(N, V, 83);
    y[1] = -1;  // a row without a target
    Vec lse(N), logp(N);
    Dev<float> d_z(g, z), d_gl(g, gl), d_gs(g, gs), d_lse(g, lse), d_logp(g, logp);
    Dev<int> d_y(g, y);
    c.logsoftmax_target_forward(lse.data(), logp.data(), z.data(), y.data(), N, V, ld);
    g.logsoftmax_target_forward(d_lse.p(), d_logp.p(), d_z.p(), d_y.p(), N, V, ld);
    expect_close("logsoftmax_target forward lse" + tag, d_lse.get(), lse);
    expect_close("logsoftmax_target forward logp" + tag, d_logp.get(), logp);
    for (bool with_lse_grad : {false, true}) {
      Vec dz = randn(nz, 84);
      Dev<float> d_dz(g, dz);
      c.logsoftmax_target_backward(dz.data(), z.data(), lse.data(), y.data(), gl.data(),
                                   with_lse_grad ? gs.data() : nullptr, N, V, ld);
      g.logsoftmax_target_backward(d_dz.p(), d_z.p(), d_lse.p(), d_y.p(), d_gl.p(),
                                   with_lse_grad ? d_gs.p() : nullptr, N, V, ld);
      expect_close("logsoftmax_target backward" + tag + (with_lse_grad ? " g_lse" : ""), d_dz.get(), dz);
    }
  }
}

TEST(CudaKernels, Softmax) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  const int N = 5, V = 777;
  const Vec z = randn(static_cast<size_t>(N) * V, 90, 3.0), dp = randn(z.size(), 91);
  Vec p(z.size()), dz(z.size());
  Dev<float> d_z(g, z), d_dp(g, dp), d_p(g, p), d_dz(g, dz);
  c.softmax_forward(p.data(), z.data(), N, V);
  g.softmax_forward(d_p.p(), d_z.p(), N, V);
  expect_close("softmax forward", d_p.get(), p);
  c.softmax_backward(dz.data(), p.data(), dp.data(), N, V);
  g.softmax_backward(d_dz.p(), d_p.p(), d_dp.p(), N, V);
  expect_close("softmax backward", d_dz.get(), dz);
}

// Top-K values: the selection must be identical (exact values and columns),
// including ties across the K-th place, which both sides break by the lower
// column; the backward scatter-adds onto a random dx.
void check_topk(const std::string& what, const Vec& x, int N, int V, int K) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  Vec vals(static_cast<size_t>(N) * K), dx = randn(x.size(), 93);
  IVec idx(vals.size());
  const Vec dvals = randn(vals.size(), 94);
  Dev<float> d_x(g, x), d_vals(g, vals), d_dvals(g, dvals), d_dx(g, dx);
  Dev<int> d_idx(g, idx);
  c.topk_values_forward(vals.data(), idx.data(), x.data(), N, V, K);
  g.topk_values_forward(d_vals.p(), d_idx.p(), d_x.p(), N, V, K);
  const IVec got_idx = d_idx.get();
  const Vec got_vals = d_vals.get();
  int bad = 0;
  for (size_t i = 0; i < idx.size(); i++) bad += got_idx[i] != idx[i] || got_vals[i] != vals[i];
  if (std::getenv("ADA_VERBOSE")) std::printf("  top-k %-46s %d of %zu entries differ\n", what.c_str(), bad, idx.size());
  EXPECT_EQ(bad, 0) << "top-k " << what;
  c.topk_values_backward(dx.data(), dvals.data(), idx.data(), N, V, K);
  g.topk_values_backward(d_dx.p(), d_dvals.p(), d_idx.p(), N, V, K);
  expect_close("top-k " + what + " backward (+=)", d_dx.get(), dx, 0.0);
}

TEST(CudaKernels, TopKValues) {
  {  // GPT-2's vocabulary, K = the 70m width: probabilities (softmax of random
     // logits), a row of quantised values (many ties at the K-th place) and a
     // row with only 300 nonzero values (K-th place inside the zeros)
    const int N = 3, V = 50304, K = 512;
    Vec z = randn(static_cast<size_t>(N) * V, 92, 3.0), x(z.size());
    Cpu().softmax_forward(x.data(), z.data(), N, V);
    for (int v = 0; v < V; v++) x[V + v] = std::round(z[V + v] * 2.0f) / 2.0f;
    for (int v = 0; v < V; v++) x[2 * V + v] = v % 167 == 3 ? x[2 * V + v] : (v % 2 ? 0.0f : -0.0f);
    check_topk("V=50304 K=512 (probabilities, ties, zeros)", x, N, V, K);
  }
  {  // the largest K (P = 1024), negative values, ragged V
    const int N = 5, V = 1500, K = 1024;
    check_topk("V=1500 K=1024", randn(static_cast<size_t>(N) * V, 95), N, V, K);
  }
  {  // the test model (V = 23, K = D = 16), K = V, K = 1, K not a power of two
    check_topk("V=23 K=16", randn(7 * 23, 96), 7, 23, 16);
    check_topk("V=37 K=37 (all)", randn(4 * 37, 97), 4, 37, 37);
    check_topk("V=300 K=1", randn(2 * 300, 98), 2, 300, 1);
    Vec t = randn(6 * 301, 99);
    for (auto& v : t) v = std::round(v);  // few distinct values: ties everywhere
    check_topk("V=301 K=100 (integers)", t, 6, 301, 100);
    check_topk("V=301 K=1 (integers: the first of tied maxima)", t, 6, 301, 1);
  }
}

// ---- rows, reductions, optimizer, per-token map ------------------------------------------
TEST(CudaKernels, Rows) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  const int n = 9, w = 150, lds = 161, ldd = 157, rows = 20;
  const IVec idx = {3, 17, 0, 8, 19, 5, 11, 2, 14};  // distinct
  const Vec src = randn(static_cast<size_t>(rows) * lds, 100);
  Dev<int> d_idx(g, idx);
  {
    Vec dst = randn(static_cast<size_t>(n) * ldd, 101);
    Dev<float> d_src(g, src), d_dst(g, dst);
    c.gather_rows(dst.data(), ldd, src.data(), lds, idx.data(), n, w);
    g.gather_rows(d_dst.p(), ldd, d_src.p(), lds, d_idx.p(), n, w);
    expect_close("gather_rows (strided, partial width)", d_dst.get(), dst);
  }
  {
    Vec dst = randn(static_cast<size_t>(rows) * ldd, 102);
    Dev<float> d_src(g, src), d_dst(g, dst);
    c.scatter_rows(dst.data(), ldd, src.data(), lds, idx.data(), n, w);
    g.scatter_rows(d_dst.p(), ldd, d_src.p(), lds, d_idx.p(), n, w);
    expect_close("scatter_rows", d_dst.get(), dst);
    c.scatter_add_rows(dst.data(), ldd, src.data(), lds, idx.data(), n, w);
    g.scatter_add_rows(d_dst.p(), ldd, d_src.p(), lds, d_idx.p(), n, w);
    expect_close("scatter_add_rows", d_dst.get(), dst);
  }
#if !defined(__CUDACC__) || defined(ADA_CUDA_DEBUG)
  {  // a destination named twice would race on a GPU: refused, naming both entries
    const IVec twice = {3, 17, 0, 8, 17, 5, 11, 2, 14};
    Dev<int> d_twice(g, twice);
    Vec dst = randn(static_cast<size_t>(rows) * ldd, 106);
    Dev<float> d_src(g, src), d_dst(g, dst);
    for (bool add : {false, true}) {
      try {
        if (add) g.scatter_add_rows(d_dst.p(), ldd, d_src.p(), lds, d_twice.p(), n, w);
        else g.scatter_rows(d_dst.p(), ldd, d_src.p(), lds, d_twice.p(), n, w);
        ADD_FAILURE() << "a repeated destination row was accepted (add " << add << ")";
      } catch (const ada::Error& e) {
        EXPECT_NE(std::string(e.what()).find("destination row 17 is named twice (entries 1 and 4)"), std::string::npos)
            << e.what();
      }
    }
  }
#endif
  const int D = 70;
  const Vec x = randn(static_cast<size_t>(n) * D, 103), x2 = randn(x.size(), 104), s = randn(n, 105);
  Vec y(x.size()), dots(n);
  Dev<float> d_x(g, x), d_x2(g, x2), d_s(g, s), d_y(g, y), d_dots(g, dots);
  c.scale_rows(y.data(), x.data(), s.data(), n, D);
  g.scale_rows(d_y.p(), d_x.p(), d_s.p(), n, D);
  expect_close("scale_rows", d_y.get(), y);
  c.row_dot(dots.data(), x.data(), x2.data(), n, D);
  g.row_dot(d_dots.p(), d_x.p(), d_x2.p(), n, D);
  expect_close("row_dot", d_dots.get(), dots);
  const size_t m = x.size();
  c.add(y.data(), x.data(), x2.data(), m);
  g.add(d_y.p(), d_x.p(), d_x2.p(), m);
  expect_close("add", d_y.get(), y);
  c.axpy(y.data(), -0.7f, x.data(), m);
  g.axpy(d_y.p(), -0.7f, d_x.p(), m);
  expect_close("axpy", d_y.get(), y);
  c.scale(y.data(), 1.3f, m);
  g.scale(d_y.p(), 1.3f, m);
  expect_close("scale", d_y.get(), y);
  c.fill(y.data(), 0.25f, m - 3);
  g.fill(d_y.p(), 0.25f, m - 3);
  expect_close("fill", d_y.get(), y);
  Vec z(m);
  Dev<float> d_z(g, z);
  c.copy(z.data(), x.data(), m);
  g.copy(d_z.p(), d_x.p(), m);
  expect_close("copy", d_z.get(), z);
}

// The saved-activation stores (cuda/saved_store.cu): the same bits as the CPU
// twins (the copy is a copy; the rounding is round-to-nearest-even on both),
// on a strided, partial-width block of values of every size: normal, tiny,
// subnormal, huge (rounding to infinity), ties, zeros of both signs.
TEST(CudaKernels, SavedStore) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  const int n = 37, w = 150, lds = 161, ldd = 157;
  Vec src = randn(static_cast<size_t>(n) * lds, 110);
  ada::Rng r(111);
  for (size_t i = 0; i < src.size(); i += 3) {
    const uint32_t u = static_cast<uint32_t>(r.next_u64());  // any bit pattern but NaN
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) src[i] = f;
  }
  src[0] = 1.0f + 0x1p-8f, src[1] = 1.0f + 3 * 0x1p-8f, src[2] = -0.0f, src[4] = 3.4e38f, src[5] = 1e-42f;
  const Vec src_back = src;
  Dev<float> d_src(g, src);
  {
    Vec dst = randn(static_cast<size_t>(n) * ldd, 112);
    Dev<float> d_dst(g, dst);
    c.copy_block(dst.data(), ldd, src.data() + 3, lds, n, w);
    g.copy_block(d_dst.p(), ldd, d_src.p() + 3, lds, n, w);
    EXPECT_EQ(d_dst.get(), dst) << "copy_block";
  }
  std::vector<uint16_t> h(static_cast<size_t>(n) * ldd, 0x1234);
  Dev<uint16_t> d_h(g, h);
  c.to_bf16(h.data(), ldd, src.data() + 3, lds, n, w);
  g.to_bf16(d_h.p(), ldd, d_src.p() + 3, lds, n, w);
  EXPECT_EQ(d_h.get(), h) << "to_bf16: the same bits as the CPU's rounding";
  Vec back = randn(static_cast<size_t>(n) * lds, 113);
  Dev<float> d_back(g, back);
  c.from_bf16(back.data() + 1, lds, h.data(), ldd, n, w);
  g.from_bf16(d_back.p() + 1, lds, d_h.p(), ldd, n, w);
  const Vec got = d_back.get();
  ASSERT_EQ(got.size(), back.size());
  size_t same = 0;
  for (size_t i = 0; i < got.size(); i++) same += std::memcmp(&got[i], &back[i], 4) == 0;
  EXPECT_EQ(same, got.size()) << "from_bf16: the same bits";
  EXPECT_EQ(d_src.get(), src_back) << "the source is read, not written";
}

TEST(CudaKernels, SumAndSumSquares) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  for (size_t n : {size_t(1), size_t(1000), size_t(100003)}) {
    const Vec x = randn(n, 110 + n);
    Dev<float> d_x(g, x);
    double mag = 0, mag2 = 0;
    for (float v : x) mag += std::abs(v), mag2 += double(v) * v;
    const double s = g.sum(d_x.p(), n), ss = g.sum_squares(d_x.p(), n);
    EXPECT_LE(std::abs(s - c.sum(x.data(), n)), 1e-12 * mag) << n;
    EXPECT_LE(std::abs(ss - c.sum_squares(x.data(), n)), 1e-12 * mag2) << n;
    EXPECT_EQ(s, g.sum(d_x.p(), n)) << "not reproducible";
  }
  EXPECT_EQ(g.sum(nullptr, 0), 0.0);
}

// bench_gpu's comparison of our GEMM output with cuBLAS's: the device maxima
// (cuda::max_abs_diff) against the same maxima on the host, on a size that
// spans several blocks; a NaN in either input must read as infinity.
TEST(CudaKernels, MaxAbsDiff) {
  Gpu g(GemmPrecision::Fp32);
  for (size_t n : {size_t(1), size_t(1000), size_t(100003)}) {
    const Vec want = randn(n, 120 + n, 3.0);
    Vec got = want;
    ada::Rng r(7);
    for (auto& v : got) v += static_cast<float>(1e-3 * r.normal());
    double diff = 0, mag = 0;
    for (size_t i = 0; i < n; i++)
      diff = std::max(diff, (double)std::abs(got[i] - want[i])), mag = std::max(mag, (double)std::abs(want[i]));
    Dev<float> d_got(g, got), d_want(g, want), d_out(g, Vec(2));
    ada::DeviceArray<Gpu, char> work(g, ada::cuda::max_abs_diff_work_bytes(n));
    ada::cuda::max_abs_diff(g.stream, d_out.p(), d_got.p(), d_want.p(), n, work.data());
    const Vec out = d_out.get();
    EXPECT_EQ(out[0], static_cast<float>(diff)) << n;  // a maximum is exact
    EXPECT_EQ(out[1], static_cast<float>(mag)) << n;
    for (bool in_got : {true, false}) {
      Vec gg = got, ww = want;
      (in_got ? gg : ww)[n / 2] = NAN;
      Dev<float> d_g2(g, gg), d_w2(g, ww);
      ada::cuda::max_abs_diff(g.stream, d_out.p(), d_g2.p(), d_w2.p(), n, work.data());
      EXPECT_EQ(d_out.get()[0], INFINITY) << n << (in_got ? " NaN in got" : " NaN in want");
    }
  }
}

// The verdict bench_gpu prints beside each GEMM (agreement.h).
TEST(CudaKernels, AgreementVerdict) {
  using ada::cuda::agreement;
  EXPECT_EQ(agreement(0.5, 512.0, 1.0 / 1024).rel_err, 1.0 / 1024);
  EXPECT_TRUE(agreement(0.5, 512.0, 1.0 / 1024).ok);  // exactly at the tolerance passes
  EXPECT_FALSE(agreement(0.51, 512.0, 1.0 / 1024).ok);
  EXPECT_TRUE(agreement(0.0, 0.0, 1e-5).ok);  // both outputs zero
  EXPECT_FALSE(agreement(1e-3, 0.0, 1e-5).ok);
  EXPECT_FALSE(agreement(INFINITY, 1.0, 2e-2).ok);  // a NaN became infinity
  EXPECT_FALSE(agreement(NAN, 1.0, 2e-2).ok);
  EXPECT_FALSE(agreement(0.0, NAN, 2e-2).ok);
  EXPECT_TRUE(std::isinf(agreement(NAN, 1.0, 2e-2).rel_err));
  // The tolerances are the tests' own.
  EXPECT_EQ(ada::cuda::gemm_tolerance(GemmPrecision::Fp32), 1e-5);
  EXPECT_EQ(ada::cuda::gemm_tolerance(GemmPrecision::Tf32), 5e-3);
  EXPECT_EQ(ada::cuda::gemm_tolerance(GemmPrecision::Bf16), 2e-2);
}

TEST(CudaKernels, AdamWWithDeviceClipping) {
  const size_t n = 5000, n_decay = 3000;
  for (double clip : {0.0, 1e9, 5.0}) {  // off, not reached, active
    Gpu g(GemmPrecision::Fp32);
    Cpu c;
    Vec p = randn(n, 120), grad = randn(n, 121), m = randn(n, 122, 0.1), v = randn(n, 123, 0.1);
    for (auto& x : v) x = x * x;
    Dev<float> d_p(g, p), d_g(g, grad), d_m(g, m), d_v(g, v);
    ada::AdamWHyper h;
    h.lr = 1e-2, h.step = 7;
    c.adamw_step(p.data(), grad.data(), m.data(), v.data(), n, n_decay, h, clip);
    g.adamw_step(d_p.p(), d_g.p(), d_m.p(), d_v.p(), n, n_decay, h, clip);
    const std::string tag = " clip=" + std::to_string(clip);
    expect_close("adamw p" + tag, d_p.get(), p);
    expect_close("adamw m" + tag, d_m.get(), m);
    expect_close("adamw v" + tag, d_v.get(), v);
    EXPECT_NEAR(g.last_grad_norm(), c.last_grad_norm(), 1e-12 * c.last_grad_norm());
  }
}

struct AffineMap {  // an HD functor, like the methods' halting arithmetic
  const float* x;
  float* y;
  float a;
  HD void operator()(int i) const { y[i] = a * x[i] + static_cast<float>(i); }
};

TEST(CudaKernels, PerTokenMap) {
  Gpu g(GemmPrecision::Fp32);
  Cpu c;
  const int n = 300;
  const Vec x = randn(n, 130);
  Vec y(n);
  Dev<float> d_x(g, x), d_y(g, y);
  c.for_each(n, AffineMap{x.data(), y.data(), 2.5f});
  g.for_each(n, AffineMap{d_x.p(), d_y.p(), 2.5f});
  expect_close("for_each (one thread per index)", d_y.get(), y);
}

// Uploads of more than one staging chunk, and many small ones (ring wrap).
TEST(CudaKernels, StagingRing) {
  Gpu g(GemmPrecision::Fp32);
  const size_t n = (8u << 20) / sizeof(double) + 12345;  // > one half of the ring as doubles, converted to float
  std::vector<double> big(n);
  for (size_t i = 0; i < n; i++) big[i] = static_cast<double>(i % 1000) * 0.5;
  ada::DeviceArray<Gpu, float> d(g, n);
  g.to_device(d.data(), big.data(), n);
  std::vector<float> back(n);
  g.to_host(back.data(), d.data(), n);
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(back[i], static_cast<float>(big[i])) << i;
  ada::DeviceArray<Gpu, int> small(g, 1000);
  for (int rep = 0; rep < 3000; rep++) {  // 3000 x 4 KiB staged: wraps the 2 x 8 MiB ring
    IVec v(1000, rep);
    g.to_device(small.data(), v.data(), v.size());
  }
  IVec last(1000);
  g.to_host(last.data(), small.data(), last.size());
  EXPECT_EQ(last[0], 2999);
  EXPECT_EQ(last[999], 2999);
}

}  // namespace
