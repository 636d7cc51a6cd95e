// Mean next-token cross-entropy over the rows of a logits matrix: the loss
// of standard, looped, ponder and pause, and a building block of the others.
//   logp_n = log softmax(z_n)[y_n];   L = -(1/|S|) sum_{n in S} logp_n,
//   S = rows with a target (y >= 0).
//   backward: dL/dlogp_n = -1/|S| for n in S (then log-softmax backward).
// The classifier's backward works in place, as llm.c's fused classifier does:
// dlogits overwrite the logits (each element is read once, then written), so
// a step never holds a second (n, V) buffer for them. The logits are gone
// after backward(); argmax() refuses then, and so do argmax_to_host and
// probabilities_to_host for every method once its backward has reached the
// readout (Model::logits_consumed).
#pragma once
#include <cmath>
#include <limits>
#include <vector>

#include "methods/method.h"

namespace ada {

// The column of the largest logit of each row (the argmax of its softmax;
// the lowest column on ties), copied to the host: a top-1 selection on the
// backend, so only n ids travel.
template <class Bk>
void argmax_to_host(Model<Bk>& m, const typename Bk::Real* logits, int n, std::vector<int>& out) {
  check(!m.logits_consumed, "argmax of logits asked after the backward turned them into dlogits (ask before backward)");
  out.assign(n, 0);
  if (n == 0) return;
  auto* val = m.alloc(n);
  int* idx = m.arena.template alloc<int>(n);
  m.be.topk_values_forward(val, idx, logits, n, m.cfg.vocab, 1);
  m.be.to_host(out.data(), idx, n);
}

template <class Bk>
struct NextTokenLoss {
  using T = typename Bk::Real;
  int n = 0, V = 0, count = 0;
  int* y = nullptr;  // (n) targets, backend
  T* lse = nullptr;  // (n)
  T* logp = nullptr; // (n)
  T* logits = nullptr;  // (n, V): after backward(), dlogits
  bool consumed = false;
  std::vector<int> host_targets;

  void forward(Model<Bk>& m, T* z, const std::vector<int>& targets) {
    n = (int)targets.size();
    V = m.cfg.vocab;
    logits = z;
    consumed = false;
    host_targets = targets;
    count = 0;
    for (int t : targets) {
      check(t < V, "target token id " + std::to_string(t) + " is outside the vocabulary (" + std::to_string(V) + ")");
      count += t >= 0;
    }
    y = m.arena.template alloc<int>(n);
    m.be.to_device(y, targets.data(), n);
    lse = m.alloc(n);
    logp = m.alloc(n);
    m.be.logsoftmax_target_forward(lse, logp, z, y, n, V, V);
    m.flops.other += op_cost::log_softmax_target(n, V);
  }

  // Mean -log p(y) over supervised rows (host; synchronises).
  double mean(Model<Bk>& m) const { return count ? -m.be.sum(logp, n) / count : 0.0; }

  // dlogits (n, V) for d(scale * L), written over the logits.
  T* backward(Model<Bk>& m, double scale) {
    check(!consumed, "NextTokenLoss::backward: the logits were already turned into dlogits");
    T* g = m.alloc(n);
    m.be.fill(g, T(count ? -scale / count : 0.0), n);
    m.be.logsoftmax_target_backward(logits, logits, lse, y, g, nullptr, n, V, V);  // in place
    consumed = true;
    return logits;
  }

  // The summary of a method whose objective is exactly this loss.
  StepStats stats(Model<Bk>& m, double passes) const {
    StepStats s;
    s.ce = s.loss = mean(m);
    s.tokens = count;
    s.fwd_flops = m.flops.fwd;
    s.train_flops = 3 * m.flops.fwd;
    s.fwd_other_flops = m.flops.other;
    s.train_other_flops = 3 * m.flops.other;
    s.halting = {{"passes", passes}};
    return s;
  }

  // The argmax of every row's distribution (host, n).
  void argmax(Model<Bk>& m, std::vector<int>& out) const {
    check(!consumed, "NextTokenLoss::argmax after backward: the logits are now dlogits");
    argmax_to_host(m, logits, n, out);
  }

  void per_token(Model<Bk>& m, std::vector<double>& nll) const {
    std::vector<double> lp(n);
    m.be.to_host(lp.data(), logp, n);
    nll.assign(n, std::numeric_limits<double>::quiet_NaN());
    for (int i = 0; i < n; i++)
      if (host_targets[i] >= 0) nll[i] = -lp[i];
  }
};

// Softmax of logits rows copied to the host as doubles.
template <class Bk>
void probabilities_to_host(Model<Bk>& m, const typename Bk::Real* logits, int n, std::vector<double>& out) {
  check(!m.logits_consumed, "probabilities asked after the backward turned the logits into dlogits (ask before backward)");
  const int V = m.cfg.vocab;
  auto* p = m.alloc((size_t)n * V);
  m.be.softmax_forward(p, logits, n, V);
  out.resize((size_t)n * V);
  m.be.to_host(out.data(), p, (size_t)n * V);
}

}  // namespace ada
