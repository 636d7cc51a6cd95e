// The readout of a pondering pass (PonderLM's pondering passes, every pass of
// AdaPonderLM): final norm, head, and from the logits, one chunk of rows at a
// time, what the method reads off them:
//
//   hn = RMSNorm(x) * w_final                     (n, D)   kept
//   for each chunk c of C rows:
//     z_c = hn_c W^T                              (C, V)
//     lse, logp = LSE(z_n), z_n[y_n] - lse_n      (n)      rows with a target (y >= 0) only; kept
//     top_n = argmax z_n                          (n)      kept
//     phi_c = s softmax(z_c) E                    (C, D)   kept: the soft embedding (soft_embedding.h),
//                                                          when the pass ponders (s > 0)
// backward, given g = dL/dlogp (n, or none), dphi = dL/dphi (n, D, or none)
// and dhn_extra (n, D, or none: a gate that read hn), for each chunk:
//   p   = softmax(z_c)
//   dz  = g (onehot(y) - p)                       the cross-entropy (in place over z_c)
//   dp  = s dphi E^T;   dE += s p^T dphi          the soft embedding's product
//   dz += p (dp - <p, dp>)                        the softmax Jacobian
//   dhn_c = dz W;   dW += dz^T hn_c
// then dx += RMSNorm'^T (dhn + dhn_extra) (and dw_final).
//
// Where z_c comes from in the backward: the logits are kept from a training
// forward (the fast way, one (n, V) buffer per pass), unless
// Model::recompute_logits (--recompute-logits 1) is set and the pass has more
// rows than one chunk: then each chunk's logits
// are scratch and the backward recomputes them from hn, one head GEMM more
// per pass (2 n D V FLOPs, like activation recomputation not in the model
// FLOP count) for no (n, V) buffer at all: 197 MiB less per pass and
// 1024-token sequence at V = 50304 (docs/benchmarks.md, "Device memory").
// Either way the arithmetic is the same, chunk for chunk.
//
// Unlike the fused classifier (fused_classifier.h), the gradient cannot be
// formed in the forward: dphi is known only when the later passes have run
// their backward.
#pragma once
#include <algorithm>
#include <vector>

#include "methods/method.h"
#include "methods/next_token_loss.h"

namespace ada {

template <class Bk>
struct PonderingReadout {
  using T = typename Bk::Real;
  int n = 0, D = 0, V = 0, C = 1;
  T s = 0;                    // soft-embedding scale (0: the pass does not ponder, no phi)
  bool keep = true;           // the logits are kept (else recomputed in the backward)
  const T* x = nullptr;       // (n, D) input: the final norm's backward
  T* hn = nullptr;            // (n, D)
  T* rstd = nullptr;          // (n)
  const int* y = nullptr;     // (n) targets on the backend (-1 = none), or none at all
  T* lse = nullptr;           // (n) when y
  T* logp = nullptr;          // (n) when y
  int* top = nullptr;         // (n) argmax of each row's logits
  T* phi = nullptr;           // (n, D) s softmax(z) E, when s > 0
  T* z = nullptr;             // (n, V) the kept logits (keep)
  bool consumed = false;      // the backward ran (the kept logits are gradients now)
  bool training_ = false;     // the forward was a training one (a backward may follow)

  // The forward in two steps, since AdaPonderLM's gates read hn before the
  // pass knows which rows end in it (and so carry a target):
  // norm: x (n, D) -> hn. An evaluation forward (not training) keeps no
  // logits: nothing will read them.
  void norm(Model<Bk>& m, const T* x_in, int rows, bool training) {
    n = rows, D = m.cfg.dim, V = m.cfg.vocab;
    x = x_in;
    C = std::max(1, std::min(m.classifier_rows(), n));
    keep = training && (!m.recompute_logits || n <= C);
    training_ = training;
    consumed = false;
    hn = m.alloc((size_t)n * D), rstd = m.alloc(n);
    m.be.rmsnorm_forward(hn, rstd, x, m.w.final_norm, n, D, m.cfg.norm_eps);
    m.flops.other += op_cost::rmsnorm(n, D);
  }

  // logits: from hn, lse/logp for the targets d_targets (n on the backend,
  // or nullptr), the argmax, and phi when scale > 0.
  void logits(Model<Bk>& m, const int* d_targets, T scale) {
    y = d_targets, s = scale;
    lse = y ? m.alloc(n) : nullptr, logp = y ? m.alloc(n) : nullptr;
    top = m.arena.template alloc<int>(std::max(n, 1));
    phi = s > T(0) ? m.alloc((size_t)n * D) : nullptr;
    z = keep ? m.alloc((size_t)n * V) : nullptr;
    auto tmp = m.scratch();  // a chunk's logits (unless kept) and probabilities
    T* zc_buf = keep ? nullptr : m.alloc((size_t)C * V);
    T* p = phi ? m.alloc((size_t)C * V) : nullptr;
    T* val = m.alloc(C);
    for (int r0 = 0; r0 < n; r0 += C) {
      const int c = std::min(C, n - r0);
      T* zc = keep ? z + (size_t)r0 * V : zc_buf;
      m.be.matmul_forward(zc, hn + (size_t)r0 * D, m.w.head, c, D, V);                  // z_c = hn_c W^T
      if (y) m.be.logsoftmax_target_forward(lse + r0, logp + r0, zc, y + r0, c, V, V);  // lse, log p(y)
      m.be.topk_values_forward(val, top + r0, zc, c, V, 1);                             // argmax
      if (!phi) continue;
      m.be.softmax_forward(p, zc, c, V);                                                // p = softmax(z_c)
      m.be.matmul_nn_forward(phi + (size_t)r0 * D, p, m.w.embed, c, V, D);              // p E
    }
    if (phi && s != T(1)) m.be.scale(phi, s, (size_t)n * D);                            // phi = s p E
    m.flops.fwd += 2.0 * n * D * V + (phi ? 2.0 * n * V * D : 0.0);
    m.flops.other += (y ? op_cost::log_softmax_target(n, V) : 0.0) +
                     (phi ? op_cost::softmax(n, V) + (s != T(1) ? op_cost::elementwise((double)n * D) : 0.0) : 0.0);
  }

  void forward(Model<Bk>& m, const T* x_in, int rows, const int* d_targets, T scale, bool training) {
    norm(m, x_in, rows, training);
    logits(m, d_targets, scale);
  }

  // dx (n, D) += the gradient reaching x; accumulates dW_head, dE, dw_final.
  void backward(Model<Bk>& m, const T* g, const T* dphi, const T* dhn_extra, T* dx) {
    check(training_, "PonderingReadout::backward needs a training forward");
    check(!consumed, "PonderingReadout::backward: this forward's backward already ran");
    check(!dphi || phi, "PonderingReadout::backward: dphi given for a pass that does not ponder");
    const bool ce = y && g;
    check(ce || dphi, "PonderingReadout::backward: no gradient given (neither dL/dlogp for targets nor dphi)");
    consumed = true;
    auto tmp = m.scratch();
    T* dhn = m.alloc((size_t)n * D);
    T* zc_buf = keep ? nullptr : m.alloc((size_t)C * V);
    T* p = dphi ? m.alloc((size_t)C * V) : nullptr;
    T* dp = dphi ? m.alloc((size_t)C * V) : nullptr;
    T* gs = dphi ? m.alloc((size_t)C * D) : nullptr;
    for (int r0 = 0; r0 < n; r0 += C) {
      const int c = std::min(C, n - r0);
      T* zc = keep ? z + (size_t)r0 * V : zc_buf;
      if (!keep) m.be.matmul_forward(zc, hn + (size_t)r0 * D, m.w.head, c, D, V);  // z_c again
      if (dphi) m.be.softmax_forward(p, zc, c, V);                                  // p (not kept: recomputed)
      if (ce) m.be.logsoftmax_target_backward(zc, zc, lse + r0, y + r0, g + r0, nullptr, c, V, V);  // dz = g (onehot - p), in place
      T* dz = ce ? zc : dp;
      if (dphi) {
        m.be.copy(gs, dphi + (size_t)r0 * D, (size_t)c * D);
        if (s != T(1)) m.be.scale(gs, s, (size_t)c * D);                           // s dphi
        m.be.matmul_nn_backward(dp, m.g.embed, gs, p, m.w.embed, c, V, D);          // dp = s dphi E^T, dE += s p^T dphi
        m.be.softmax_backward(dp, p, dp, c, V);                                     // p (dp - <p, dp>), in place
        if (ce) m.be.axpy(dz, T(1), dp, (size_t)c * V);
      }
      m.be.matmul_backward(dhn + (size_t)r0 * D, m.g.head, dz, hn + (size_t)r0 * D, m.w.head, c, D, V);  // dhn_c = dz W; dW += dz^T hn_c
    }
    if (dhn_extra) m.be.axpy(dhn, T(1), dhn_extra, (size_t)n * D);
    m.be.rmsnorm_backward(dx, m.g.final_norm, dhn, x, m.w.final_norm, rstd, n, D);
  }

  // softmax(z) of every row to the host (n x V doubles), the logits
  // recomputed from hn (which the backward leaves as it found it), chunk by
  // chunk as the forward computed them, so bit for bit the same.
  void probabilities(Model<Bk>& m, std::vector<double>& out) const { head_probabilities_to_host(m, hn, n, C, out); }

  // The argmax of every row (host, n), kept from the forward.
  void argmax(Model<Bk>& m, std::vector<int>& out) const {
    out.assign(n, 0);
    if (n) m.be.to_host(out.data(), top, n);
  }
};

}  // namespace ada
