// The classifier helpers of the methods that keep their (n, V) logits
// (cyb, latent_cot, tah, and every decoder): the argmax and the softmax of logits rows, copied to the host.
// The methods whose objective is exactly one readout's cross-entropy use the
// fused classifier instead (fused_classifier.h), which never holds them.
// The per-pass losses of the others write dlogits over the logits in their
// backward, as llm.c's fused classifier does, so a step never holds a second
// (n, V) buffer for them; the logits are gone after that backward, and
// argmax_to_host and probabilities_to_host refuse then
// (Model::logits_consumed).
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
