// The classifier helpers: the argmax and the softmax of logits rows, copied
// to the host (the decoders, which run the unfused readout on one row,
// Model::readout_forward); and the softmax of rows whose logits were not
// kept, recomputed from hn (the training readouts: the fused classifier,
// fused_classifier.h, for the methods whose objective is one readout's
// cross-entropy; the chunked readout, chunked_readout.h, for the passes whose
// loss is known only after the forward). Neither hands its kept logits out
// or overwrites them where a read-out could see them; a caller that
// differentiates the unfused readout in place (dlogits over the logits, as
// llm.c's classifier does) makes
// argmax_to_host and probabilities_to_host refuse those logits until the next
// readout forward (Model::logits_consumed).
#pragma once
#include <algorithm>
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

// softmax(hn W_head^T) of n rows copied to the host as doubles, the logits
// recomputed chunk by chunk, rows [0, C), [C, 2C), ...: the chunks a row-chunked
// readout computed in its forward, so the same values bit for bit. Works after
// the backward too (hn is kept; the logits, if any, are gradients by then).
template <class Bk>
void head_probabilities_to_host(Model<Bk>& m, const typename Bk::Real* hn, int n, int C, std::vector<double>& out) {
  const int D = m.cfg.dim, V = m.cfg.vocab;
  out.resize((size_t)n * V);
  const int rows = std::min(C, std::max(n, 1));
  auto s = m.scratch();
  auto* z = m.alloc((size_t)rows * V);
  auto* p = m.alloc((size_t)rows * V);
  for (int r0 = 0; r0 < n; r0 += C) {
    const int c = std::min(C, n - r0);
    m.be.matmul_forward(z, hn + (size_t)r0 * D, m.w.head, c, D, V);
    m.be.softmax_forward(p, z, c, V);
    m.be.to_host(out.data() + (size_t)r0 * V, p, (size_t)c * V);
  }
}

}  // namespace ada
