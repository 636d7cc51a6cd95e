// Shared by the method tests: random batches and random (larger than
// initialisation) parameters, so that every path of a model carries signal.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cpu_backend.h"
#include "core/config.h"
#include "core/rng.h"
#include "gradcheck.h"
#include "methods/method.h"
#include "model/model.h"

namespace ada::test {

inline Batch random_batch(int B, int T, int V, uint64_t seed) {
  Rng r(seed);
  Batch b;
  b.B = B, b.T = T;
  for (int i = 0; i < B * T; i++) b.inputs.push_back((int)r.below(V));
  for (int i = 0; i < B * T; i++) b.targets.push_back((int)r.below(V));
  return b;
}

// Every parameter ~ 0.3 N(0, 1) (norm weights around 1); `adjust(p, v)` may
// change the value drawn for a tensor (e.g. make a gate's weights larger).
template <class Bk>
void random_params(Model<Bk>& m, uint64_t seed,
                   const std::function<double(const ParamInfo&, double)>& adjust = nullptr) {
  Rng r(seed);
  std::vector<double> host(m.num_params());
  for (auto& p : m.layout.tensors())
    for (size_t i = 0; i < p.numel; i++) {
      double v = 0.3 * r.normal();
      if (p.init == Init::Ones) v += 1.0;
      host[p.offset + i] = adjust ? adjust(p, v) : v;
    }
  m.be.to_device(m.params.data(), host.data(), host.size());
}

// Every parameter tensor's gradient of the method's loss on batch b (double
// precision) against central differences (gradcheck.h). Tensors whose names
// start with `unused` must instead have an exactly zero gradient (e.g. the
// gates of a fixed pruning policy, which no path reads).
template <class Bk>
void check_param_grads(Method<Bk>& method, Model<Bk>& m, const Batch& b, const std::string& unused = "") {
  auto loss = [&]() {
    m.arena.reset();
    method.forward(m, b, false);
    return method.stats(m).loss;
  };
  m.zero_grads();
  m.arena.reset();
  method.forward(m, b, true);
  method.backward(m, 1.0);
  std::vector<double> grads(m.grads.data(), m.grads.data() + m.num_params());
  for (auto& p : m.layout.tensors()) {
    std::vector<double> a(grads.begin() + p.offset, grads.begin() + p.offset + p.numel);
    if (!unused.empty() && p.name.rfind(unused, 0) == 0) {
      for (double g : a) ASSERT_EQ(g, 0.0) << p.name;
      continue;
    }
    expect_grad_close(p.name, a, numeric_grad(m.params.data() + p.offset, p.numel, loss));
  }
}

// Feeds b's single sequence token by token through the method's decoder and
// returns the largest difference from the full forward's next-token
// distributions (and, in *max_p, the largest probability seen).
template <class Bk>
double decode_vs_forward(Method<Bk>& method, Model<Bk>& m, const Batch& b, double* max_p = nullptr) {
  const int V = m.cfg.vocab;
  m.arena.reset();
  method.forward(m, b, false);
  std::vector<double> full;
  method.probabilities(m, full);
  auto dec = method.decoder(m, b.T);
  double max_diff = 0, top = 0;
  for (int t = 0; t < b.T; t++) {
    const std::vector<double>& p = dec->step(b.inputs[t]);
    EXPECT_EQ((int)p.size(), V);
    for (int v = 0; v < V; v++) {
      max_diff = std::max(max_diff, std::abs(p[v] - full[(size_t)t * V + v]));
      top = std::max(top, p[v]);
    }
  }
  if (max_p) *max_p = top;
  return max_diff;
}

// The fixture the method test files build on: one method on the "test"
// config in double precision, a batch (set by the test) and its loss.
template <class Method>
struct MethodCase {
  using Bd = CpuBackend<double>;
  Bd be;
  std::unique_ptr<Method> method;
  std::unique_ptr<Model<Bd>> m;
  Batch b;
  template <class Options>
  explicit MethodCase(const Options& o)
      : method(std::make_unique<Method>(o)), m(make_model(be, preset_config("test"), *method)) {}
  double loss() {
    m->arena.reset();
    method->forward(*m, b, false);
    return method->stats(*m).loss;
  }
};

// The middle of the widest gap between consecutive sorted values that both
// lie in [lo, hi] (a threshold there is as far as can be from every value);
// *gap gets the gap's width (0 if none).
inline double middle_of_widest_gap(std::vector<double> v, double lo, double hi, double* gap) {
  std::sort(v.begin(), v.end());
  double best = 0, at = 0.5 * (lo + hi);
  for (size_t i = 1; i < v.size(); i++)
    if (v[i - 1] >= lo && v[i] <= hi && v[i] - v[i - 1] > best) best = v[i] - v[i - 1], at = 0.5 * (v[i] + v[i - 1]);
  *gap = best;
  return at;
}

// Checks that need a point away from every discrete decision (a threshold, a
// top-k selection, a label cut) draw seeds until a margin rule holds, instead
// of relying on one hand-picked seed: the first seed in [lo, hi) for which
// ok(seed) is true, or -1 (the test then fails: no such point was found).
inline long long first_seed(uint64_t lo, uint64_t hi, const std::function<bool(uint64_t)>& ok) {
  for (uint64_t s = lo; s < hi; s++)
    if (ok(s)) return (long long)s;
  return -1;
}

// TaH2's decider reads top_D(q), the D largest probabilities in descending
// order: a function of the logits that is smooth only while the selection and
// its order stay the same. tah_top_logprobs: for every decider row of the
// last forward (depths 1..M-1, in order), the logarithms of its D+1 largest
// probabilities, descending (recomputed in double from the rows' final-normed
// states). The order of q is the order of the logits, so margins and moves
// are measured on log q = logit - LSE: a small probability moves in
// proportion to its size, its logit does not.
template <class Meth, class Bk>
std::vector<double> tah_top_logprobs(const Meth& meth, Model<Bk>& m) {
  const int D = m.cfg.dim, V = m.cfg.vocab, L = std::min(D + 1, V);
  std::vector<double> head((size_t)V * D), out;
  m.be.to_host(head.data(), m.w.head, head.size());
  for (int k = 0; k + 1 < meth.options().M; k++) {
    const int n = (int)meth.step_rows(k).size();
    if (n == 0) continue;
    std::vector<double> h((size_t)n * D);
    m.be.to_host(h.data(), meth.step_states(k), h.size());
    for (int r = 0; r < n; r++) {
      std::vector<double> z(V);
      double mx = -1e300, sum = 0;
      for (int v = 0; v < V; v++) {
        double acc = 0;
        for (int d = 0; d < D; d++) acc += h[(size_t)r * D + d] * head[(size_t)v * D + d];
        z[v] = acc, mx = std::max(mx, acc);
      }
      for (double x : z) sum += std::exp(x - mx);
      const double lse = mx + std::log(sum);
      for (double& x : z) x -= lse;
      std::sort(z.begin(), z.end(), std::greater<double>());
      out.insert(out.end(), z.begin(), z.begin() + L);
    }
  }
  return out;
}
// The margin of the selection: the smallest gap between consecutive values of
// tah_top_logprobs inside one row (the order in the top D and the boundary to the
// first probability left out).
inline double tah_topk_gap(const std::vector<double>& top, int D) {
  double gap = 1e300;
  for (size_t i = 0; i + 1 < top.size(); i++)
    if ((i + 1) % (D + 1) != 0) gap = std::min(gap, top[i] - top[i + 1]);
  return gap;
}

}  // namespace ada::test
