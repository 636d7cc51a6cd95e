// The row-chunked readout of a pass whose loss is known only after the
// forward (the pondering passes of PonderLM, every pass of AdaPonderLM, CYB's
// answer-or-wait steps, every step of latent CoT and TaH2): final norm, head,
// and from the logits, one chunk of rows at a time, what the method reads off
// them:
//
//   hn = RMSNorm(x) * w_final                     (n, D)   kept
//   for each chunk c of C rows:
//     z_c = hn_c W^T                              (C, V)
//     lse, logp = LSE(z_n), z_n[y_n] - lse_n      (n)      rows with a target (y >= 0) only; kept
//     top_n = argmax z_n                          (n)      kept, when asked (want_argmax)
//     p_c = softmax(z_c)                          (C, V)   scratch, when phi or qtop needs it
//     phi_c = s p_c E                             (C, D)   kept: the soft embedding (soft_embedding.h),
//                                                          when the pass ponders (s > 0)
//     qtop_n, qidx_n = top_K(p_n)                 (n, K)   kept: the K largest probabilities, descending,
//                                                          and their columns (TaH's decider; K = top_probs)
// backward, given any of g.logp = dL/dlogp and g.lse = dL/dlse (n),
// g.phi = dL/dphi (n, D), g.qtop = dL/dqtop (n, K), and g.hn (n, D: a gate or
// a later step that read hn), for each chunk:
//   dz  = g.logp (onehot(y) - p) + g.lse p        the cross-entropy (in place over z_c)
//   dp  = s g.phi E^T;   dE += s p^T g.phi        the soft embedding's product
//   dp[qidx] += g.qtop                            the top-K selection
//   dz += p (dp - <p, dp>)                        the softmax Jacobian
//   dhn_c = dz W;   dW += dz^T hn_c
// then dx += RMSNorm'^T (dhn + g.hn) (and dw_final).
//
// Where z_c comes from in the backward: the logits are kept from a training
// forward (the fast way, one (n, V) buffer per pass), unless
// Model::recompute_logits (--recompute-logits 1) is set and the pass has more
// rows than one chunk: then each chunk's logits are scratch and the backward
// recomputes them from hn, one head GEMM more per pass (2 n D V FLOPs, like
// activation recomputation not in the model FLOP count) for no (n, V) buffer
// at all: 197 MiB less per pass and 1024-token sequence at V = 50304
// (docs/benchmarks.md, "Device memory"). Either way the arithmetic is the
// same, chunk for chunk, and the probabilities are never kept: the backward
// recomputes p from z_c.
//
// Unlike the fused classifier (fused_classifier.h), the gradient cannot be
// formed in the forward: what reaches logp, phi, qtop and hn is known only
// when the method's loss has been formed over all passes (and, for phi and
// hn, when the later passes have run their backward).
#pragma once
#include <algorithm>
#include <vector>

#include "methods/method.h"
#include "methods/next_token_loss.h"

namespace ada {

template <class Bk>
struct ChunkedReadout {
  using T = typename Bk::Real;
  // What the forward reads off the logits besides lse/logp; set before norm().
  bool want_argmax = true;    // top: each row's argmax
  int top_probs = 0;          // K: qtop/qidx, each row's K largest probabilities (0: none)

  int n = 0, D = 0, V = 0, C = 1;
  T s = 0;                    // soft-embedding scale (0: the pass does not ponder, no phi)
  bool keep = true;           // the logits are kept (else recomputed in the backward)
  const T* x = nullptr;       // (n, D) input: the final norm's backward
  T* hn = nullptr;            // (n, D)
  T* rstd = nullptr;          // (n)
  const int* y = nullptr;     // (n) targets on the backend (-1 = none), or none at all
  T* lse = nullptr;           // (n) when y
  T* logp = nullptr;          // (n) when y
  int* top = nullptr;         // (n) argmax of each row's logits, when want_argmax
  T* phi = nullptr;           // (n, D) s softmax(z) E, when s > 0
  T* qtop = nullptr;          // (n, K) the K largest probabilities of each row, descending, when K > 0
  int* qidx = nullptr;        // (n, K) their columns
  T* z = nullptr;             // (n, V) the kept logits (keep)
  bool consumed = false;      // the backward ran (the kept logits are gradients now)
  bool training_ = false;     // the forward was a training one (a backward may follow)

  // What reaches the readout's outputs in the backward (any may be absent).
  struct Grad {
    const T* logp = nullptr;  // (n) dL/dlogp, rows with a target
    const T* lse = nullptr;   // (n) dL/dlse, only beside logp (CYB: d depends on LSE)
    const T* phi = nullptr;   // (n, D) dL/dphi
    const T* qtop = nullptr;  // (n, K) dL/dqtop
    const T* hn = nullptr;    // (n, D) dL/dhn by another path (a gate, the next step's input)
  };

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
    check(top_probs >= 0 && top_probs <= V, "ChunkedReadout: top_probs must be in [0, V]");
    hn = m.alloc((size_t)n * D), rstd = m.alloc(n);
    m.be.rmsnorm_forward(hn, rstd, x, m.w.final_norm, n, D, m.cfg.norm_eps);
    m.flops.other += op_cost::rmsnorm(n, D);
  }

  // logits: from hn, lse/logp for the targets d_targets (n on the backend,
  // or nullptr), the argmax, phi when scale > 0 and the top probabilities.
  void logits(Model<Bk>& m, const int* d_targets, T scale) {
    const int K = top_probs;
    y = d_targets, s = scale;
    lse = y ? m.alloc(n) : nullptr, logp = y ? m.alloc(n) : nullptr;
    top = want_argmax ? m.arena.template alloc<int>(std::max(n, 1)) : nullptr;
    phi = s > T(0) ? m.alloc((size_t)n * D) : nullptr;
    qtop = K ? m.alloc((size_t)n * K) : nullptr;
    qidx = K ? m.arena.template alloc<int>((size_t)n * K) : nullptr;
    z = keep ? m.alloc((size_t)n * V) : nullptr;
    auto tmp = m.scratch();  // a chunk's logits (unless kept) and probabilities
    T* zc_buf = keep ? nullptr : m.alloc((size_t)C * V);
    T* p = phi || K ? m.alloc((size_t)C * V) : nullptr;
    T* val = top ? m.alloc(C) : nullptr;
    for (int r0 = 0; r0 < n; r0 += C) {
      const int c = std::min(C, n - r0);
      T* zc = keep ? z + (size_t)r0 * V : zc_buf;
      m.be.matmul_forward(zc, hn + (size_t)r0 * D, m.w.head, c, D, V);                  // z_c = hn_c W^T
      if (y) m.be.logsoftmax_target_forward(lse + r0, logp + r0, zc, y + r0, c, V, V);  // lse, log p(y)
      if (top) m.be.topk_values_forward(val, top + r0, zc, c, V, 1);                    // argmax
      if (!p) continue;
      m.be.softmax_forward(p, zc, c, V);                                                // p = softmax(z_c)
      if (phi) m.be.matmul_nn_forward(phi + (size_t)r0 * D, p, m.w.embed, c, V, D);     // p E
      if (K) m.be.topk_values_forward(qtop + (size_t)r0 * K, qidx + (size_t)r0 * K, p, c, V, K);  // top_K(p)
    }
    if (phi && s != T(1)) m.be.scale(phi, s, (size_t)n * D);                            // phi = s p E
    m.flops.fwd += 2.0 * n * D * V + (phi ? 2.0 * n * V * D : 0.0);
    m.flops.other += (y ? op_cost::log_softmax_target(n, V) : 0.0) + (p ? op_cost::softmax(n, V) : 0.0) +
                     (phi && s != T(1) ? op_cost::elementwise((double)n * D) : 0.0) + (K ? op_cost::topk(n, V, K) : 0.0);
  }

  void forward(Model<Bk>& m, const T* x_in, int rows, const int* d_targets, T scale, bool training) {
    norm(m, x_in, rows, training);
    logits(m, d_targets, scale);
  }

  // dx (n, D) += the gradient reaching x; accumulates dW_head, dE, dw_final.
  void backward(Model<Bk>& m, const Grad& g, T* dx) {
    const int K = top_probs;
    check(training_, "ChunkedReadout::backward needs a training forward");
    check(!consumed, "ChunkedReadout::backward: this forward's backward already ran");
    check(!g.phi || phi, "ChunkedReadout::backward: dL/dphi given for a pass that does not ponder");
    check(!g.qtop || qtop, "ChunkedReadout::backward: dL/dqtop given for a pass that read no top probabilities");
    check(!g.lse || g.logp, "ChunkedReadout::backward: dL/dlse is given only beside dL/dlogp");
    const bool ce = y && g.logp;
    const bool soft = g.phi || g.qtop;  // a gradient through the probabilities p
    const bool head = ce || soft;       // else only g.hn: the head carries nothing
    check(head || g.hn, "ChunkedReadout::backward: no gradient given");
    consumed = true;
    auto tmp = m.scratch();
    T* dhn = m.alloc((size_t)n * D);
    T* zc_buf = keep ? nullptr : m.alloc((size_t)C * V);
    T* p = soft ? m.alloc((size_t)C * V) : nullptr;
    T* dp = soft ? m.alloc((size_t)C * V) : nullptr;
    T* gs = g.phi ? m.alloc((size_t)C * D) : nullptr;
    for (int r0 = 0; head && r0 < n; r0 += C) {
      const int c = std::min(C, n - r0);
      T* zc = keep ? z + (size_t)r0 * V : zc_buf;
      if (!keep) m.be.matmul_forward(zc, hn + (size_t)r0 * D, m.w.head, c, D, V);  // z_c again
      if (soft) m.be.softmax_forward(p, zc, c, V);                                  // p (not kept: recomputed)
      if (ce)  // dz = g.logp (onehot - p) + g.lse p, in place
        m.be.logsoftmax_target_backward(zc, zc, lse + r0, y + r0, g.logp + r0, g.lse ? g.lse + r0 : nullptr, c, V, V);
      T* dz = ce ? zc : dp;
      if (soft) {
        if (g.phi) {
          m.be.copy(gs, g.phi + (size_t)r0 * D, (size_t)c * D);
          if (s != T(1)) m.be.scale(gs, s, (size_t)c * D);                         // s dphi
          m.be.matmul_nn_backward(dp, m.g.embed, gs, p, m.w.embed, c, V, D);        // dp = s dphi E^T, dE += s p^T dphi
        } else {
          m.be.fill(dp, T(0), (size_t)c * V);
        }
        if (g.qtop) m.be.topk_values_backward(dp, g.qtop + (size_t)r0 * K, qidx + (size_t)r0 * K, c, V, K);  // dp[idx] += dqtop
        m.be.softmax_backward(dp, p, dp, c, V);                                     // p (dp - <p, dp>), in place
        if (ce) m.be.axpy(dz, T(1), dp, (size_t)c * V);
      }
      m.be.matmul_backward(dhn + (size_t)r0 * D, m.g.head, dz, hn + (size_t)r0 * D, m.w.head, c, D, V);  // dhn_c = dz W; dW += dz^T hn_c
    }
    if (!head) m.be.fill(dhn, T(0), (size_t)n * D);
    if (g.hn) m.be.axpy(dhn, T(1), g.hn, (size_t)n * D);
    m.be.rmsnorm_backward(dx, m.g.final_norm, dhn, x, m.w.final_norm, rstd, n, D);
  }

  // softmax(z) of every row to the host (n x V doubles), the logits
  // recomputed from hn (which the backward leaves as it found it), chunk by
  // chunk as the forward computed them, so bit for bit the same.
  void probabilities(Model<Bk>& m, std::vector<double>& out) const { head_probabilities_to_host(m, hn, n, C, out); }

  // The argmax of every row (host, n), kept from the forward.
  void argmax(Model<Bk>& m, std::vector<int>& out) const {
    check(top != nullptr, "ChunkedReadout::argmax: the forward was not asked for it (want_argmax)");
    out.assign(n, 0);
    if (n) m.be.to_host(out.data(), top, n);
  }
};

}  // namespace ada
