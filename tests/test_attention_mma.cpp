// The tensor-core flash attention (cuda/attention_mma.cu) against the CPU
// reference (src/ops/attention.h, CpuBackend<float>): forward (out, lse) and
// backward (dq set, dK and dV accumulated onto random values) for the masks
// the fp32 kernel's tests cover (tests/test_cuda_kernels.cpp): causal,
// compacted queries, duo-causal depth grids (with TaH2's private keys),
// interleaved and own-group pause masks, at head sizes 16 to 128, with query
// and key counts off the kernels' tiles (64 queries / 64 keys forward, 64 keys
// / 32 queries backward) and a 70m-shaped case.
//
// Under the host runner (make test) every launch is race-checked on 4 blocks
// (docs/hostrun.md): each runs twice in different thread orders, the second
// with warp run-ahead, and must leave the same memory (dq, added with atomics,
// is left out of that comparison by the runner); shared memory starts as
// poison (NaN), so a fragment read from a row that was never staged shows up.
//
// Tolerance: 2e-2 of the largest reference value (cuda/agreement.h, bf16
// paths): Q, K, V, dO and P / dS are rounded to bf16 (8 significant bits).
// The forward is also checked against the CPU reference run on the same
// bf16-rounded inputs, tighter (kRoundedTol): only P's rounding and the fp32
// summation order remain, so a mask error of one key in a row of a few dozen
// (a change of a few percent in that row) cannot hide under it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agreement.h"
#include "attention_mma.h"
#include "backend/device_array.h"
#include "bf16_bits.h"
#include "core/rng.h"
#include "cuda_backend.h"
#include "race_checked.h"
#include "train/cpu_instances.h"

#if defined(ADA_HOSTRUN)
#include "hostrun/scheduler.h"
#endif

namespace {

using ada::AttnDims;
using ada::KeyMeta;
using Cpu = ada::CpuBackend<float>;
using Gpu = ada::CudaBackend;
using ada::cuda::AttnKernel;
using ada::cuda::GemmPrecision;
using Vec = std::vector<float>;
using IVec = std::vector<int>;

constexpr double kTol = ada::cuda::kAttentionMmaTol;  // 2e-2 against the fp32 inputs
constexpr double kRoundedTol = 5e-3;                  // against the same bf16-rounded inputs

Vec randn(size_t n, uint64_t seed) {
  ada::Rng r(seed);
  Vec v(n);
  for (auto& x : v) x = static_cast<float>(r.normal());
  return v;
}

Vec rounded(Vec v) {
  for (auto& x : v) x = ada::test::from_bf16(ada::test::bf16_rne(x));
  return v;
}

double rel_err(const Vec& got, const Vec& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, mag = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); i++) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    if (std::isnan(got[i])) diff = INFINITY;
    mag = std::max(mag, std::abs(static_cast<double>(want[i])));
  }
  return ada::cuda::agreement(diff, mag, 0).rel_err;
}

void expect_close(const std::string& what, const Vec& got, const Vec& want, double tol) {
  const double e = rel_err(got, want);
  if (std::getenv("ADA_VERBOSE")) std::printf("  %-56s rel err %.2e\n", what.c_str(), e);
  EXPECT_LE(e, tol) << what;
}

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

struct AttnCase {
  std::string name;
  int B, S, H, hs;
  IVec qslot, order, depth, valid;
  int rule;
};

// Every position of B sequences of S slots a key and a query, order = index:
// causal (standard) and the flattened interleaved sequences of pause / CYB.
AttnCase causal(const std::string& name, int B, int S, int H, int hs) {
  AttnCase a{name, B, S, H, hs, {}, {}, {}, {}, ada::kAnyDepth};
  for (int b = 0; b < B; b++)
    for (int s = 0; s < S; s++) a.qslot.push_back(b * S + s), a.order.push_back(s);
  a.depth.assign(B * S, 0), a.valid.assign(B * S, 1);
  return a;
}

// Runs the mma forward and backward through attention_mma_* and compares them
// with the CPU reference on the fp32 inputs (kTol) and on bf16-rounded inputs
// (kRoundedTol). The backward gets the CPU's out and lse on both sides.
void check_mma(const AttnCase& a) {
  SCOPED_TRACE(a.name);
  RaceChecked rc;
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
  const Vec dq0 = randn(static_cast<size_t>(N) * ldq, 54), dK0 = randn(kv, 55), dV0 = randn(kv, 56);

  Dev<int> d_qslot(g, a.qslot), d_qstart(g, qstart), d_order(g, a.order), d_depth(g, a.depth), d_valid(g, a.valid);
  const KeyMeta dkm{d_order.p(), d_depth.p(), d_valid.p(), a.S, a.rule};
  Vec out(static_cast<size_t>(N) * D), lse(static_cast<size_t>(N) * a.H);
  Dev<float> d_q(g, q), d_K(g, K), d_V(g, V), d_dout(g, dout), d_out(g, out), d_lse(g, lse), d_dq(g, dq0),
      d_dK(g, dK0), d_dV(g, dV0);
  ada::cuda::attention_mma_forward(g.stream, d_out.p(), d_lse.p(), d_q.p(), d_K.p(), d_V.p(), d_qslot.p(),
                                   d_qstart.p(), dkm, d);
  const Vec got_out = d_out.get(), got_lse = d_lse.get();

  // the reference on the fp32 inputs and on the same inputs rounded to bf16
  for (bool round : {false, true}) {
    const std::string tag = a.name + (round ? " (bf16-rounded inputs)" : "");
    const double tol = round ? kRoundedTol : kTol;
    const Vec rq = round ? rounded(q) : q, rK = round ? rounded(K) : K, rV = round ? rounded(V) : V;
    const Vec rdout = round ? rounded(dout) : dout;
    c.attention_forward(out.data(), lse.data(), rq.data(), rK.data(), rV.data(), a.qslot.data(), qstart.data(), km,
                        d);
    expect_close(tag + " out", got_out, out, tol);
    expect_close(tag + " lse", got_lse, lse, tol);
    if (round) continue;
    Vec dq = dq0, dK = dK0, dV = dV0;
    c.attention_backward(dq.data(), dK.data(), dV.data(), rdout.data(), out.data(), lse.data(), rq.data(),
                         rK.data(), rV.data(), a.qslot.data(), qstart.data(), km, d);
    Dev<float> d_out_ref(g, out), d_lse_ref(g, lse);
    ada::DeviceArray<Gpu, char> work(g, ada::cuda::attention_mma_backward_work_bytes(d) + 1);
    ada::cuda::attention_mma_backward(g.stream, d_dq.p(), d_dK.p(), d_dV.p(), d_dout.p(), d_out_ref.p(),
                                      d_lse_ref.p(), d_q.p(), d_K.p(), d_V.p(), d_qslot.p(), d_qstart.p(), dkm, d,
                                      work.data());
    const Vec got_dq = d_dq.get();
    expect_close(tag + " dq (set, ld = 3D)", got_dq, dq, tol);
    // dK, dV: compare the increments (the random starting values would hide
    // errors), then check the sums
    Vec got_dK = d_dK.get(), got_dV = d_dV.get();
    Vec inc_dK(kv), inc_dV(kv), want_dK(kv), want_dV(kv);
    for (size_t i = 0; i < kv; i++) {
      inc_dK[i] = got_dK[i] - dK0[i], inc_dV[i] = got_dV[i] - dV0[i];
      want_dK[i] = dK[i] - dK0[i], want_dV[i] = dV[i] - dV0[i];
    }
    expect_close(tag + " dK increment", inc_dK, want_dK, tol);
    expect_close(tag + " dV increment", inc_dV, want_dV, tol);
    expect_close(tag + " dK (+=)", got_dK, dK, tol);
    expect_close(tag + " dV (+=)", got_dV, dV, tol);
    // dq's columns past D (the k and v parts of the qkv row) are left alone
    bool untouched = true;
    for (int r = 0; r < N; r++)
      for (int col = D; col < ldq; col++) untouched &= got_dq[static_cast<size_t>(r) * ldq + col] == dq0[static_cast<size_t>(r) * ldq + col];
    EXPECT_TRUE(untouched) << tag << ": dq columns outside the q part were written";
  }
}

TEST(AttentionMma, CausalHs16TwoQueryTiles) {
  // S = 77: 2 forward query tiles and 2 key tiles, 3 backward query tiles, all ragged
  check_mma(causal("causal hs=16", 2, 77, 2, 16));
}

TEST(AttentionMma, CompactedQueriesHs32) {
  // a random subset of rows are queries (AdaPonderLM's active tokens), every
  // slot a key; the middle sequence has no query at all
  AttnCase a{"compacted hs=32", 3, 70, 2, 32, {}, {}, {}, {}, ada::kAnyDepth};
  ada::Rng r(60);
  for (int b = 0; b < a.B; b++)
    for (int s = 0; s < a.S; s++) {
      if (b != 1 && r.uniform() < 0.6) a.qslot.push_back(b * a.S + s);
      a.order.push_back(s);
    }
  a.depth.assign(a.B * a.S, 0), a.valid.assign(a.B * a.S, 1);
  check_mma(a);
}

TEST(AttentionMma, DuoCausalHs16) {
  // TaH / latent CoT grid: T = 17 positions x M = 4 depths, slot = t M + m,
  // order t, depth m, rule depth <= depth; random cells never executed
  const int T = 17, M = 4;
  AttnCase a{"duo-causal hs=16", 1, T * M, 2, 16, {}, {}, {}, {}, ada::kDepthLE};
  ada::Rng r(61);
  for (int t = 0; t < T; t++)
    for (int m = 0; m < M; m++) {
      const bool executed = m == 0 || r.uniform() < 0.7;
      a.order.push_back(t), a.depth.push_back(m), a.valid.push_back(executed ? 1 : 0);
      if (executed && r.uniform() < 0.7) a.qslot.push_back(t * M + m);
    }
  check_mma(a);
}

TEST(AttentionMma, DuoCausalPrivateKeysHs32) {
  // TaH2's lookahead rows: the cell after a token's last executed depth holds
  // a private key (valid = 2), visible to its own query only
  const int T = 23, M = 3;
  AttnCase a{"duo-causal private hs=32", 2, T * M, 2, 32, {}, {}, {}, {}, ada::kDepthLE};
  ada::Rng r(62);
  for (int b = 0; b < a.B; b++)
    for (int t = 0; t < T; t++) {
      int stop = 0;
      while (stop < M - 1 && r.uniform() < 0.6) stop++;
      for (int m = 0; m < M; m++) {
        const int v = m <= stop ? 1 : m == stop + 1 ? 2 : 0;
        a.order.push_back(t), a.depth.push_back(m), a.valid.push_back(v);
        if ((v == 1 && r.uniform() < 0.5) || v == 2) a.qslot.push_back(b * a.S + t * M + m);
      }
    }
  check_mma(a);
}

TEST(AttentionMma, InterleavedPausesHs64) {
  // pause: [x p p x p p ...] flattened, order = index (a causal mask over 3x the slots)
  check_mma(causal("interleaved hs=64", 2, 39, 2, 64));
}

TEST(AttentionMma, OwnGroupPausesHs32) {
  // CYB's consistent variant: real tokens (group -1) visible to every later
  // query, token g's two pauses (group g) only inside token g's window
  const int T = 24, P = 2;
  AttnCase a{"own-group hs=32", 1, T * (1 + P), 2, 32, {}, {}, {}, {}, ada::kOwnGroup};
  for (int t = 0; t < T; t++)
    for (int j = 0; j <= P; j++) {
      const int s = t * (1 + P) + j;
      a.order.push_back(s), a.depth.push_back(j == 0 ? -1 : t), a.valid.push_back(1), a.qslot.push_back(s);
    }
  check_mma(a);
}

TEST(AttentionMma, OtherHeadSizes) {
  check_mma(causal("causal hs=48", 1, 40, 1, 48));
  check_mma(causal("causal hs=128", 1, 70, 1, 128));
}

// The 70m config's attention (H = 8, hs = 64) over 1024 keys with a few query
// rows, spread so that the backward visits many key tiles and two query tiles.
TEST(AttentionMma, SeventyMShape) {
  AttnCase a{"70m: hs=64, 8 heads, 1024 keys", 1, 1024, 8, 64, {}, {}, {}, {}, ada::kAnyDepth};
  for (int s : {5, 300, 700, 1000, 1010, 1017, 1018, 1019, 1020, 1021, 1022, 1023}) a.qslot.push_back(s);
  for (int s = 0; s < a.S; s++) a.order.push_back(s);
  a.depth.assign(a.S, 0), a.valid.assign(a.S, 1);
  check_mma(a);
}

TEST(AttentionMma, RefusesOtherHeadSizes) {
  for (int hs : {16, 32, 48, 64, 128}) EXPECT_TRUE(ada::cuda::attention_mma_supports(hs)) << hs;
  for (int hs : {1, 8, 12, 40, 144}) EXPECT_FALSE(ada::cuda::attention_mma_supports(hs)) << hs;
  Gpu g(GemmPrecision::Fp32);
  const AttnDims d{1, 1, 1, 1, 8, 24};
  const KeyMeta km{nullptr, nullptr, nullptr, 1, ada::kAnyDepth};
  try {
    ada::cuda::attention_mma_forward(g.stream, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, km, d);
    FAIL() << "head size 8 accepted";
  } catch (const ada::Error& e) {
    EXPECT_NE(std::string(e.what()).find("head size 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ada::cuda::attention_mma_backward(g.stream, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                 nullptr, nullptr, nullptr, nullptr, nullptr, km, d, nullptr),
               ada::Error);
}

TEST(AttentionMma, ParsesAdaAttn) {
  EXPECT_EQ(ada::cuda::parse_attention_kernel("mma"), AttnKernel::Mma);
  EXPECT_EQ(ada::cuda::parse_attention_kernel("fp32"), AttnKernel::Fp32);
  try {
    ada::cuda::parse_attention_kernel("flash");
    FAIL() << "unknown kernel accepted";
  } catch (const ada::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ADA_ATTN"), std::string::npos) << e.what();
  }
  // the backend reads it at construction; unset it is the fp32 kernel
  const char* saved = std::getenv("ADA_ATTN");
  const std::string keep = saved ? saved : "";
  setenv("ADA_ATTN", "mma", 1);
  EXPECT_EQ(Gpu(GemmPrecision::Fp32).attention(), AttnKernel::Mma);
  setenv("ADA_ATTN", "bogus", 1);
  EXPECT_THROW(
      {
        Gpu bad(GemmPrecision::Fp32);
        (void)bad;
      },
      ada::Error);
  unsetenv("ADA_ATTN");
  EXPECT_EQ(Gpu(GemmPrecision::Fp32).attention(), AttnKernel::Fp32);
  if (saved) setenv("ADA_ATTN", keep.c_str(), 1);
}

// Through CudaBackend with ADA_ATTN=mma: head size 16 takes the mma kernels
// (bf16 errors, visible against the fp32 kernel), head size 8 falls back to
// the fp32 kernel (the same bits as the default backend).
TEST(AttentionMma, BackendDispatch) {
  for (int hs : {16, 8}) {
    const AttnCase a = causal("dispatch", 1, 40, 2, hs);
    const int D = a.H * hs, N = a.S, ldq = 3 * D;
    IVec qstart{0, N};
    const AttnDims d{N, 1, a.S, a.H, hs, ldq};
    const Vec q = randn(static_cast<size_t>(N) * ldq, 70), K = randn(static_cast<size_t>(a.S) * D, 71),
              V = randn(static_cast<size_t>(a.S) * D, 72);
    Vec outs[2];
    for (int k = 0; k < 2; k++) {
      Gpu g(GemmPrecision::Fp32);
      g.set_attention(k == 0 ? AttnKernel::Fp32 : AttnKernel::Mma);
      Dev<int> d_qslot(g, a.qslot), d_qstart(g, qstart), d_order(g, a.order), d_depth(g, a.depth),
          d_valid(g, a.valid);
      const KeyMeta dkm{d_order.p(), d_depth.p(), d_valid.p(), a.S, a.rule};
      Dev<float> d_q(g, q), d_K(g, K), d_V(g, V), d_out(g, Vec(static_cast<size_t>(N) * D)),
          d_lse(g, Vec(static_cast<size_t>(N) * a.H));
      g.attention_forward(d_out.p(), d_lse.p(), d_q.p(), d_K.p(), d_V.p(), d_qslot.p(), d_qstart.p(), dkm, d);
      outs[k] = d_out.get();
    }
    const double e = rel_err(outs[1], outs[0]);
    if (hs == 8) {
      EXPECT_EQ(e, 0.0) << "hs 8 must fall back to the fp32 kernel";
    } else {
      EXPECT_GT(e, 0.0) << "hs 16 must run the mma kernel (bf16 rounding)";
      EXPECT_LE(e, kTol);
    }
  }
}

}  // namespace
