// Op-level gradient checks in double precision: every op's backward against
// central differences of a random projection of its output
// (L = sum R * out), for every differentiable input.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "backend/cpu_backend.h"
#include "gradcheck.h"
#include "model/kv_store.h"
#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/rows.h"
#include "ops/softmax.h"
#include "ops/swiglu.h"
#include "ops/topk.h"

using namespace ada;
using namespace ada::test;
using Vec = std::vector<double>;

namespace {

// Runs the check for an op given:
//   inputs: named input tensors (perturbed in place by the numeric gradient)
//   fwd():  computes the output vector from the current inputs
//   bwd(dout): returns the analytic gradients, one per input name
void check_op(std::map<std::string, Vec*> inputs, const std::function<Vec()>& fwd,
              const std::function<std::map<std::string, Vec>(const Vec&)>& bwd, uint64_t seed = 99) {
  const Vec out0 = fwd();
  const Vec R = random_vec(out0.size(), seed);
  auto loss = [&]() {
    Vec o = fwd();
    double L = 0;
    for (size_t i = 0; i < o.size(); i++) L += R[i] * o[i];
    return L;
  };
  auto analytic = bwd(R);
  for (auto& [name, x] : inputs) {
    ASSERT_TRUE(analytic.count(name)) << name;
    expect_grad_close(name, analytic[name], numeric_grad(x->data(), x->size(), loss));
  }
}

}  // namespace

TEST(GradCheckOps, Embedding) {
  const int V = 7, D = 5, N = 9;
  Vec table = random_vec(V * D, 1);
  std::vector<int> ids = {0, 3, 3, 6, 1, 0, 2, 5, 3};  // repeated ids accumulate
  const double s = 1.7;
  check_op({{"table", &table}},
           [&] { Vec o(N * D); embedding_forward(o.data(), ids.data(), table.data(), N, D, s); return o; },
           [&](const Vec& g) {
             Vec dt(V * D, 0.0);
             embedding_backward(dt.data(), ids.data(), g.data(), N, D, s);
             return std::map<std::string, Vec>{{"table", dt}};
           });
}

TEST(GradCheckOps, RMSNorm) {
  const int N = 6, D = 11;
  Vec x = random_vec(N * D, 2), w = random_vec(D, 3);
  check_op({{"x", &x}, {"w", &w}},
           [&] { Vec y(N * D), r(N); rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, D, 1e-5); return y; },
           [&](const Vec& g) {
             Vec y(N * D), r(N), dx(N * D, 0.0), dw(D, 0.0);
             rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, D, 1e-5);
             rmsnorm_backward(dx.data(), dw.data(), g.data(), x.data(), w.data(), r.data(), N, D);
             return std::map<std::string, Vec>{{"x", dx}, {"w", dw}};
           });
}

TEST(GradCheckOps, Linear) {
  const int N = 5, I = 7, O = 4;
  Vec x = random_vec(N * I, 4), W = random_vec(O * I, 5);
  check_op({{"x", &x}, {"W", &W}},
           [&] { Vec y(N * O); matmul_forward(y.data(), x.data(), W.data(), N, I, O); return y; },
           [&](const Vec& g) {
             Vec dx(N * I), dW(O * I, 0.0);
             matmul_backward(dx.data(), dW.data(), g.data(), x.data(), W.data(), N, I, O);
             return std::map<std::string, Vec>{{"x", dx}, {"W", dW}};
           });
}

TEST(GradCheckOps, Rope) {
  const int N = 5, heads = 3, hs = 8, ld = heads * hs + 2;  // ld > width: extra columns untouched
  std::vector<double> c, s;
  rope_tables(c, s, 32, hs, 10000.0);
  std::vector<int> pos = {0, 3, 7, 31, 12};
  Vec x = random_vec(N * ld, 6);
  check_op({{"x", &x}},
           [&] { Vec y = x; rope_forward(y.data(), ld, heads, pos.data(), N, hs, c.data(), s.data()); return y; },
           [&](const Vec& g) {
             Vec d = g;
             rope_backward(d.data(), ld, heads, pos.data(), N, hs, c.data(), s.data());
             return std::map<std::string, Vec>{{"x", d}};
           });
}

// Attention against a store with a mask: checks q, K and V.
static void attention_case(int B, int S, int H, int hs, std::vector<int> qslot, std::vector<int> order,
                           std::vector<int> depth, std::vector<int> valid, int rule) {
  const int D = H * hs, N = (int)qslot.size(), ldq = 3 * D;
  std::vector<int> qstart(B + 1, 0);
  for (int s : qslot) qstart[s / S + 1]++;
  for (int b = 0; b < B; b++) qstart[b + 1] += qstart[b];
  const KeyMeta km{order.data(), depth.data(), valid.data(), S, rule};
  const AttnDims d{N, B, S, H, hs, ldq};
  Vec q = random_vec(N * ldq, 7), K = random_vec(B * S * D, 8), V = random_vec(B * S * D, 9);
  auto fwd = [&] {
    Vec o(N * D), l(N * H);
    attention_forward(o.data(), l.data(), q.data(), K.data(), V.data(), qslot.data(), qstart.data(), km, d);
    return o;
  };
  check_op({{"q", &q}, {"K", &K}, {"V", &V}}, fwd, [&](const Vec& g) {
    Vec o(N * D), l(N * H), dq(N * ldq, 0.0), dK(B * S * D, 0.0), dV(B * S * D, 0.0);
    attention_forward(o.data(), l.data(), q.data(), K.data(), V.data(), qslot.data(), qstart.data(), km, d);
    attention_backward(dq.data(), dK.data(), dV.data(), g.data(), o.data(), l.data(), q.data(), K.data(), V.data(),
                       qslot.data(), qstart.data(), km, d);
    return std::map<std::string, Vec>{{"q", dq}, {"K", dK}, {"V", dV}};
  });
}

TEST(GradCheckOps, AttentionCausal) {
  // 2 sequences x 5 positions, every position a query (the standard pass).
  std::vector<int> slots, order, depth(10, 0), valid(10, 1);
  for (int i = 0; i < 10; i++) slots.push_back(i), order.push_back(i % 5);
  attention_case(2, 5, 2, 4, slots, order, depth, valid, kAnyDepth);
}

TEST(GradCheckOps, AttentionCausalAcrossQueryBlocks) {
  // 150 queries in one sequence: three query blocks (kQueryBlock = 64) with
  // different key prefixes.
  const int T = 150;
  std::vector<int> slots, order, depth(T, 0), valid(T, 1);
  for (int i = 0; i < T; i++) slots.push_back(i), order.push_back(i);
  attention_case(1, T, 1, 2, slots, order, depth, valid, kAnyDepth);
}

TEST(GradCheckOps, AttentionCompactedQueriesSeeAllKeys) {
  // Only some rows are queries (active tokens), but every valid slot is a key
  // (halted tokens' reused keys): AdaPonderLM's pass.
  std::vector<int> order, depth(12, 0), valid(12, 1);
  for (int i = 0; i < 12; i++) order.push_back(i % 6);
  attention_case(2, 6, 2, 4, {1, 4, 5, 6, 9}, order, depth, valid, kAnyDepth);
}

TEST(GradCheckOps, AttentionDuoCausalGrid) {
  // One sequence, T = 4 positions x M = 3 depths, slot = t*M + m; some cells
  // never executed (invalid); queries at depth 2 see depths <= 2.
  const int T = 4, M = 3, S = T * M;
  std::vector<int> order(S), depth(S), valid(S, 1);
  for (int t = 0; t < T; t++)
    for (int m = 0; m < M; m++) order[t * M + m] = t, depth[t * M + m] = m;
  valid[0 * M + 2] = 0;  // token 0 stopped after depth 1
  valid[2 * M + 1] = valid[2 * M + 2] = 0;  // token 2 stopped after depth 0
  attention_case(1, S, 2, 4, {1 * M + 2, 3 * M + 1, 3 * M + 2}, order, depth, valid, kDepthLE);
}

TEST(GradCheckOps, AttentionDuoCausalWithPrivateKeys) {
  // The grid of AttentionDuoCausalGrid plus TaH2's lookahead rows: token 0
  // (stopped after depth 1) looks ahead at depth 2, token 2 (stopped after
  // depth 0) at depth 1. Their keys are private (valid = 2): each lookahead
  // query sees the executed keys and its own key, no other query sees them.
  const int T = 4, M = 3, S = T * M;
  std::vector<int> order(S), depth(S), valid(S, 1);
  for (int t = 0; t < T; t++)
    for (int m = 0; m < M; m++) order[t * M + m] = t, depth[t * M + m] = m;
  valid[0 * M + 2] = 2;                     // lookahead of token 0
  valid[2 * M + 1] = 2, valid[2 * M + 2] = 0;  // lookahead of token 2
  const KeyMeta km{order.data(), depth.data(), valid.data(), S, kDepthLE};
  EXPECT_TRUE(km.visible(0 * M + 2, 0 * M + 2));   // own private key
  EXPECT_TRUE(km.visible(2 * M + 1, 1 * M + 1));   // an executed key
  EXPECT_FALSE(km.visible(2 * M + 1, 0 * M + 2));  // another lookahead's key
  EXPECT_FALSE(km.visible(3 * M + 2, 0 * M + 2));  // real queries never see lookahead keys
  EXPECT_FALSE(km.visible(3 * M + 1, 2 * M + 1));
  attention_case(1, S, 2, 4, {0 * M + 2, 1 * M + 2, 2 * M + 1, 3 * M + 1, 3 * M + 2}, order, depth, valid, kDepthLE);
}

TEST(GradCheckOps, AttentionInterleavedPauses) {
  // Flattened [x0 p p x1 p p x2 p p]: order = index, plain causal.
  std::vector<int> slots, order, depth(9, 0), valid(9, 1);
  for (int i = 0; i < 9; i++) slots.push_back(i), order.push_back(i);
  attention_case(1, 9, 3, 2, slots, order, depth, valid, kAnyDepth);
}

TEST(GradCheckOps, AttentionPausesVisibleInTheirOwnWindow) {
  // [x0 p p x1 p p x2 p p] where later tokens see earlier real tokens but not
  // their pauses (rule OwnGroup: real slots group -1, pauses group = token).
  std::vector<int> slots, order, depth, valid(9, 1);
  for (int i = 0; i < 9; i++) slots.push_back(i), order.push_back(i), depth.push_back(i % 3 == 0 ? -1 : i / 3);
  attention_case(1, 9, 2, 3, slots, order, depth, valid, kOwnGroup);
}

TEST(GradCheckOps, TopKValues) {
  // 4 rows of 13 distinct values (the selection does not change under the
  // finite-difference steps), the 5 largest of each.
  const int N = 4, V = 13, K = 5;
  Vec x = random_vec(N * V, 12);
  check_op({{"x", &x}},
           [&] {
             Vec v(N * K);
             std::vector<int> idx(N * K);
             topk_values_forward(v.data(), idx.data(), x.data(), N, V, K);
             return v;
           },
           [&](const Vec& g) {
             Vec v(N * K), dx(N * V, 0.0);
             std::vector<int> idx(N * K);
             topk_values_forward(v.data(), idx.data(), x.data(), N, V, K);
             topk_values_backward(dx.data(), g.data(), idx.data(), N, V, K);
             return std::map<std::string, Vec>{{"x", dx}};
           });
}

TEST(Ops, TopKValuesSortedTiesByLowerIndex) {
  const int V = 8, K = 6;
  const Vec x = {0.1, 0.3, 0.0, 0.3, 0.2, 0.0, 0.3, 0.0};
  Vec v(K);
  std::vector<int> idx(K);
  topk_values_forward(v.data(), idx.data(), x.data(), 1, V, K);
  EXPECT_EQ(idx, (std::vector<int>{1, 3, 6, 4, 0, 2}));  // three 0.3 in column order, then 0.2, 0.1, the first 0
  EXPECT_EQ(v, (Vec{0.3, 0.3, 0.3, 0.2, 0.1, 0.0}));
  topk_values_forward(v.data(), idx.data(), x.data(), 1, V, 1);  // K = 1, the argmax scan: the first of the three 0.3
  EXPECT_EQ(idx[0], 1);
  EXPECT_EQ(v[0], 0.3);
  // the scan against the sort's first place, on rows with many ties
  const int N = 40, W = 97;
  Vec r = random_vec(N * W, 13);
  for (double& e : r) e = std::round(3 * e);
  Vec v1(N), v2(N * 2);
  std::vector<int> i1(N), i2(N * 2);
  topk_values_forward(v1.data(), i1.data(), r.data(), N, W, 1);
  topk_values_forward(v2.data(), i2.data(), r.data(), N, W, 2);
  for (int n = 0; n < N; n++) {
    EXPECT_EQ(i1[n], i2[2 * n]) << "row " << n;
    EXPECT_EQ(v1[n], v2[2 * n]) << "row " << n;
  }
}

TEST(GradCheckOps, SwiGLU) {
  const int N = 4, F = 6;
  Vec gu = random_vec(N * 2 * F, 10);
  check_op({{"gu", &gu}}, [&] { Vec y(N * F); swiglu_forward(y.data(), gu.data(), N, F); return y; },
           [&](const Vec& g) {
             Vec d(N * 2 * F);
             swiglu_backward(d.data(), g.data(), gu.data(), N, F);
             return std::map<std::string, Vec>{{"gu", d}};
           });
}

TEST(GradCheckOps, LogSoftmaxTargetWithLseTerm) {
  // Output: [logp_n ; lse_n] so both g_logp and g_lse paths are exercised. The
  // row stride is V + 1 (an extra column, as CYB's "don't know" class), which
  // the op must leave alone; row 2 has no target.
  const int N = 4, V = 9, ld = V + 1;
  Vec z = random_vec(N * ld, 11, 2.0);
  std::vector<int> y = {3, 0, -1, 8};
  check_op({{"z", &z}},
           [&] {
             Vec l(N), lp(N);
             logsoftmax_target_forward(l.data(), lp.data(), z.data(), y.data(), N, V, ld);
             Vec o = lp;
             o.insert(o.end(), l.begin(), l.end());
             return o;
           },
           [&](const Vec& g) {
             Vec l(N), lp(N), dz(N * ld, 0.0);
             logsoftmax_target_forward(l.data(), lp.data(), z.data(), y.data(), N, V, ld);
             Vec glp(g.begin(), g.begin() + N), gl(g.begin() + N, g.end());
             logsoftmax_target_backward(dz.data(), z.data(), l.data(), y.data(), glp.data(), gl.data(), N, V, ld);
             return std::map<std::string, Vec>{{"z", dz}};
           });
}

TEST(GradCheckOps, Softmax) {
  const int N = 3, V = 8;
  Vec z = random_vec(N * V, 12, 2.0);
  check_op({{"z", &z}}, [&] { Vec p(N * V); softmax_forward(p.data(), z.data(), N, V); return p; },
           [&](const Vec& g) {
             Vec p(N * V), dz(N * V);
             softmax_forward(p.data(), z.data(), N, V);
             softmax_backward(dz.data(), p.data(), g.data(), N, V);
             return std::map<std::string, Vec>{{"z", dz}};
           });
}

TEST(GradCheckOps, GatherScatterRows) {
  const int n = 4, D = 3, ld = 5, rows = 6;
  std::vector<int> idx = {5, 0, 3, 2};
  Vec src = random_vec(rows * ld, 13);
  // gather: out[i] = src[idx[i]] (columns 1..3 of a stride-5 matrix)
  check_op({{"src", &src}},
           [&] { Vec o(n * D); gather_rows(o.data(), D, src.data() + 1, ld, idx.data(), n, D); return o; },
           [&](const Vec& g) {
             Vec d(rows * ld, 0.0);
             scatter_add_rows(d.data() + 1, ld, g.data(), D, idx.data(), n, D);
             return std::map<std::string, Vec>{{"src", d}};
           });
  // scatter: out = base with rows idx replaced by x -> d x = gather(d out)
  Vec x = random_vec(n * D, 14);
  const Vec base = random_vec(rows * D, 15);
  check_op({{"x", &x}}, [&] { Vec o = base; scatter_rows(o.data(), D, x.data(), D, idx.data(), n, D); return o; },
           [&](const Vec& g) {
             Vec d(n * D);
             gather_rows(d.data(), D, g.data(), D, idx.data(), n, D);
             return std::map<std::string, Vec>{{"x", d}};
           });
}

TEST(GradCheckOps, SiLU) {
  const int n = 17;
  Vec u = random_vec(n, 16, 2.0);
  check_op({{"u", &u}}, [&] { Vec y(n); silu_forward(y.data(), u.data(), n); return y; },
           [&](const Vec& g) {
             Vec d(n);
             silu_backward(d.data(), g.data(), u.data(), n);
             return std::map<std::string, Vec>{{"u", d}};
           });
}

TEST(GradCheckOps, ScaleRowsAndRowDot) {
  const int n = 4, D = 5;
  Vec x = random_vec(n * D, 17), s = random_vec(n, 18);
  // y = s * x (rows): dx by scale_rows, ds by row_dot
  check_op({{"x", &x}, {"s", &s}}, [&] { Vec y(n * D); scale_rows(y.data(), x.data(), s.data(), n, D); return y; },
           [&](const Vec& g) {
             Vec dx(n * D), ds(n);
             scale_rows(dx.data(), g.data(), s.data(), n, D);
             row_dot(ds.data(), g.data(), x.data(), n, D);
             return std::map<std::string, Vec>{{"x", dx}, {"s", ds}};
           });
}

TEST(Ops, AdamWMatchesHandComputedStep) {
  // One parameter, two steps, values worked out by hand from the formula.
  double p = 1.0, m = 0, v = 0;
  const double g = 0.5;
  AdamWHyper h;
  h.lr = 0.1, h.beta1 = 0.9, h.beta2 = 0.99, h.eps = 1e-8;
  h.step = 1;
  adamw_update(&p, &g, &m, &v, 1, h, 0.01, 1.0);
  // m = 0.05, v = 0.0025, mh = 0.5, vh = 0.25 -> p = 1 - 0.1*(0.5/(0.5 + eps) + 0.01*1) ~ 0.899
  EXPECT_NEAR(m, 0.05, 1e-15);
  EXPECT_NEAR(v, 0.0025, 1e-15);
  const double p1 = 1.0 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.01);
  EXPECT_NEAR(p, p1, 1e-15);
  h.step = 2;
  adamw_update(&p, &g, &m, &v, 1, h, 0.0, 2.0);  // gradient scaled by 2 (clip factor) -> g = 1
  const double m2 = 0.9 * 0.05 + 0.1 * 1.0, v2 = 0.99 * 0.0025 + 0.01 * 1.0;
  const double mh = m2 / (1 - 0.81), vh = v2 / (1 - 0.9801);
  EXPECT_NEAR(p, p1 - 0.1 * mh / (std::sqrt(vh) + 1e-8), 1e-15);
}

// The FLOP counter's fast count of visible keys equals a direct count with
// the mask, for every rule, with invalid slots and with private ones (valid
// = 2: seen by their own query only).
TEST(Ops, VisibleKeyCountMatchesTheMask) {
  CpuBackend<double> be;
  Arena<CpuBackend<double>> arena(be);
  for (int rule : {(int)kAnyDepth, (int)kDepthLE, (int)kOwnGroup}) {
    KvStore<CpuBackend<double>> kv;
    const int B = 2, T = 5, M = 3, S = T * M;
    kv.init(be, arena, B, S, 1, 4, rule, false);
    Rng r(3 + rule);
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++)
        for (int m = 0; m < M; m++) {
          const int s = b * S + t * M + m;
          const double u = r.uniform();
          kv.order[s] = t, kv.depth[s] = m, kv.valid[s] = u < 0.6 ? 1 : u < 0.75 ? 2 : 0;
        }
    std::vector<int> q = {1, 4, 5, 9, 14, S + 2, S + 7, S + 13};
    for (int s : q) kv.valid[s] = 1;  // a query's own slot holds its key: public, or private for two of them
    kv.valid[5] = kv.valid[S + 7] = 2;
    long long direct = 0;
    for (int s : q) direct += kv.visible_keys(s);
    EXPECT_EQ(kv.total_visible_keys(q), direct);
    EXPECT_GT(direct, 0);
  }
}

// The two error measures of gradcheck.h on hand-made vectors: an entry 500x
// smaller than the largest, wrong by 2e-4 of itself, passes the per-tensor
// check and fails the element-wise one; noise far below the floor (an exact
// zero against 1e-12) passes both.
TEST(GradCheckHelpers, ElementwiseErrorSeesSmallEntries) {
  const std::vector<double> n = {1.0, -0.4, 2e-3, 0.0};
  std::vector<double> a = n;
  a[2] *= 1 + 2e-4;
  EXPECT_LT(grad_error(a, n), kGradTol);
  size_t at = 99;
  EXPECT_NEAR(grad_error_elementwise(a, n, kElemFloor, &at), 2e-4 / (1 + 2e-4), 1e-12);
  EXPECT_EQ(at, 2u);
  EXPECT_GT(grad_error_elementwise(a, n), kElemTol);
  a = n;
  a[3] = 1e-12;
  EXPECT_LT(grad_error(a, n), kGradTol);
  EXPECT_NEAR(grad_error_elementwise(a, n), 1e-12 / 1e-3, 1e-20);  // judged against the floor 1e-3 max|n|
}
