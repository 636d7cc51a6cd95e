// The fused classifier: final norm, head, log-softmax, mean next-token loss
// and (when training) its gradient, one chunk of rows at a time, so that a
// step never holds the (n, V) logits. The loss of standard, looped, pause,
// PonderLM-2 and PonderLM's last pass: the methods whose objective is exactly
// the cross-entropy of one readout. (The passes whose loss is known only
// after the forward use chunked_readout.h instead: PonderLM's pondering
// passes and AdaPonderLM, whose soft embedding needs a gradient known only in
// the backward; CYB, whose DK probability reads LSE(o_V); latent CoT and
// TaH, whose mixtures weigh each step's log p[y] by gates formed later.)
//
//   hn = RMSNorm(x) * w_final                     (n, D)   kept
//   for each chunk c of C rows:
//     z_c = hn_c W^T                              (C, V)   scratch, released after the chunk
//     lse_n = LSE(z_n),  logp_n = z_n[y_n] - lse_n,  argmax_n          (kept, n each)
//     training: dz_c = dL/dz_c = -(1/|S|)(onehot(y_n) - softmax(z_n))  for n in S (in place of z_c)
//               dhn_c = dz_c W                    (C, D)   kept
//               dW_tmp += dz_c^T hn_c             (V, D)   kept
//   L = -(1/|S|) sum_{n in S} logp_n,   S = rows with a target (y >= 0)
// backward(scale): the gradients above are for scale 1 and linear in it:
//   dW_head += scale dW_tmp,   dx += RMSNorm'^T(scale dhn)   (and dw_final)
//
// This is llm.c's fused classifier (loss and dlogits in one pass over V per
// row), with the rows chunked: the gradient of the cross-entropy is known in
// the forward, so it is computed there, while the chunk's logits are at hand,
// rather than keeping them for the backward. It costs (n + V) D floats kept
// (dhn and dW_tmp) and C V of scratch, against n V: at the 70m shapes (V
// 50304, D 512) one 1024-token sequence needs 2 MiB of dhn instead of 197 MiB
// of logits, plus 98 MiB of dW_tmp per step. No FLOPs are added: the two
// products of the backward run in the forward instead.
//
// The chunk: Model::classifier_rows (the rows whose logits fill
// kClassifierChunkElems floats, or ADA_CLASSIFIER_CHUNK_ROWS), so every
// chunk's GEMM is still large.
#pragma once
#include <cmath>
#include <limits>
#include <vector>

#include "methods/method.h"
#include "methods/next_token_loss.h"

namespace ada {

template <class Bk>
struct FusedClassifier {
  using T = typename Bk::Real;
  int n = 0, D = 0, V = 0, count = 0;
  bool has_grad = false;     // the forward computed dhn and dW_tmp (training)
  bool grad_used = false;    // backward() has added them
  const T* x = nullptr;      // (n, D) input: the final norm's backward
  T* hn = nullptr;           // (n, D) normalised input
  T* rstd = nullptr;         // (n)
  int* y = nullptr;          // (n) targets, backend
  T* lse = nullptr;          // (n)
  T* logp = nullptr;         // (n)
  int* top = nullptr;        // (n) argmax of each row's logits
  T* dhn = nullptr;          // (n, D) dL/dhn for scale 1 (training)
  T* dW = nullptr;           // (V, D) dL/dW_head for scale 1 (training)
  std::vector<int> host_targets;

  // The loss of rows x (n, D) against targets (n host ids, -1 = none).
  void forward(Model<Bk>& m, const T* x_in, const std::vector<int>& targets, bool training) {
    n = (int)targets.size(), D = m.cfg.dim, V = m.cfg.vocab;
    x = x_in;
    host_targets = targets;
    count = 0;
    for (int t : targets) {
      check(t < V, "target token id " + std::to_string(t) + " is outside the vocabulary (" + std::to_string(V) + ")");
      count += t >= 0;
    }
    y = m.arena.template alloc<int>(std::max(n, 1));
    m.be.to_device(y, targets.data(), n);
    hn = m.alloc((size_t)n * D), rstd = m.alloc(n);
    lse = m.alloc(n), logp = m.alloc(n);
    top = m.arena.template alloc<int>(std::max(n, 1));
    has_grad = training, grad_used = false;
    dhn = training ? m.alloc((size_t)n * D) : nullptr;
    dW = training ? m.zeros((size_t)V * D) : nullptr;
    m.be.rmsnorm_forward(hn, rstd, x, m.w.final_norm, n, D, m.cfg.norm_eps);
    m.flops.other += op_cost::rmsnorm(n, D);
    const int C = m.classifier_rows();
    auto s = m.scratch();  // the chunk's logits and loss weights, released on return
    T* z = m.alloc((size_t)std::min(C, std::max(n, 1)) * V);
    T* g = training ? m.alloc(std::min(C, std::max(n, 1))) : nullptr;
    T* val = m.alloc(std::min(C, std::max(n, 1)));
    if (g) m.be.fill(g, T(count ? -1.0 / count : 0.0), std::min(C, std::max(n, 1)));  // dL/dlogp_n (rows without a target get none)
    for (int r0 = 0; r0 < n; r0 += C) {
      const int c = std::min(C, n - r0);
      const T* hc = hn + (size_t)r0 * D;
      m.be.matmul_forward(z, hc, m.w.head, c, D, V);                                      // z_c = hn_c W^T
      m.be.logsoftmax_target_forward(lse + r0, logp + r0, z, y + r0, c, V, V);            // lse, log p(y)
      m.be.topk_values_forward(val, top + r0, z, c, V, 1);                                 // argmax
      if (!training) continue;
      m.be.logsoftmax_target_backward(z, z, lse + r0, y + r0, g, nullptr, c, V, V);       // dz_c, in place
      m.be.matmul_backward(dhn + (size_t)r0 * D, dW, z, hc, m.w.head, c, D, V);           // dhn_c = dz_c W; dW += dz_c^T hn_c
    }
    m.flops.fwd += 2.0 * n * D * V;
    m.flops.other += op_cost::log_softmax_target(n, V);
  }

  // dx (n, D) += the gradient of scale * L; the head's and the final norm's
  // weight gradients are accumulated. Once per training forward.
  void backward(Model<Bk>& m, double scale, T* dx) {
    check(has_grad, "FusedClassifier::backward needs a training forward (the gradient is computed there)");
    check(!grad_used, "FusedClassifier::backward: this forward's gradient was already added");
    grad_used = true;
    m.be.axpy(m.g.head, T(scale), dW, (size_t)V * D);
    m.be.scale(dhn, T(scale), (size_t)n * D);
    m.be.rmsnorm_backward(dx, m.g.final_norm, dhn, x, m.w.final_norm, rstd, n, D);
  }

  // Mean -log p(y) over supervised rows (host; synchronises).
  double mean(Model<Bk>& m) const { return count ? -m.be.sum(logp, n) / count : 0.0; }

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

  // The argmax of every row's distribution (host, n); kept from the forward.
  void argmax(Model<Bk>& m, std::vector<int>& out) const {
    out.assign(n, 0);
    m.be.to_host(out.data(), top, n);
  }

  void per_token(Model<Bk>& m, std::vector<double>& nll) const {
    std::vector<double> lp(n);
    m.be.to_host(lp.data(), logp, n);
    nll.assign(n, std::numeric_limits<double>::quiet_NaN());
    for (int i = 0; i < n; i++)
      if (host_targets[i] >= 0) nll[i] = -lp[i];
  }

  // softmax(z) of every row (host, n x V), the logits recomputed chunk by
  // chunk from hn (still there after the backward, unlike the logits).
  void probabilities(Model<Bk>& m, std::vector<double>& out) const {
    head_probabilities_to_host(m, hn, n, m.classifier_rows(), out);
  }
};

}  // namespace ada
