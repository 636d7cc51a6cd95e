// ponder: PonderLM (Zeng et al. 2025; methods.md section 1). P pondering
// passes, each feeding back the probability-weighted embedding of its own
// prediction, then a final pass that predicts:
//   e^0_t = s0 * sqrt(D) * E[x_t]                 s0 = P (the official scripts' multiply_pondering_steps)
//   for i = 1..P:
//     H^i = F(e^{i-1})                            full causal pass (blocks + final norm)
//     e^i = e^{i-1} + sqrt(D) * softmax(W H^i) E  soft embedding map (soft_embedding.h)
//   logits = W F(e^P);   L = CE(logits, y)        loss on the last pass only
// Full backpropagation through every pass and every soft embedding (no
// stop-gradient). Each pass has its own KV store (pass i attends to pass-i
// keys), so decoding keeps one KV cache per pass. Cost: (P+1) passes plus P
// soft embeddings (2 V x D products each) per token. A pondering pass's
// readout and soft embedding run chunk by chunk (chunked_readout.h); the
// last pass's loss is the fused classifier (fused_classifier.h).
#pragma once
#include <cmath>

#include "methods/method.h"
#include "methods/fused_classifier.h"
#include "methods/next_token_loss.h"
#include "methods/chunked_readout.h"
#include "methods/soft_embedding.h"

namespace ada {

template <class Bk>
class PonderMethod : public Method<Bk> {
 public:
  using T = typename Bk::Real;
  explicit PonderMethod(int ponder_steps) : P_(ponder_steps) {
    check(P_ >= 1, "--ponder-steps must be >= 1 (got " + std::to_string(P_) + ")");
  }
  std::string name() const override { return "ponder"; }
  bool graph_safe() const override { return true; }  // nothing read back mid-step: --cuda-graph 1 records it
  int max_passes() const override { return P_ + 1; }
  // e^0 = s0 sqrt(D) E[x] with s0 = P
  double default_embed_scale(const ModelConfig& c) const override { return P_ * std::sqrt((double)c.dim); }

  void forward(Model<Bk>& m, const Batch& b, bool training) override {
    m.flops.reset();
    n_ = b.B * b.T;
    const T c = T(std::sqrt((double)m.cfg.dim));
    const PassPlan plan = PassPlan::dense(b.B, b.T, b.T);
    kv_.assign(P_ + 1, KvStore<Bk>());
    acts_.clear(), ro_.assign(P_, ChunkedReadout<Bk>());
    T* e = m.embed(b.inputs, &ids_);  // e^0 = s0 sqrt(D) E[x] (default_embed_scale)
    for (int i = 0; i <= P_; i++) {
      kv_[i].init(m.be, m.arena, b.B, b.T, m.cfg.layers, m.cfg.dim, kAnyDepth, training);
      acts_.push_back(m.forward_pass(plan, kv_[i], e));         // H^{i+1} = F(e^i)
      if (i == P_) break;
      ro_[i].want_argmax = false;                                // the prediction is the last pass's
      ro_[i].forward(m, acts_.back().out(), n_, nullptr, c, training);    // phi = sqrt(D) softmax(W H^{i+1}) E
      T* next = m.alloc((size_t)n_ * m.cfg.dim);
      m.be.add(next, e, ro_[i].phi, (size_t)n_ * m.cfg.dim);     // e^{i+1} = e^i + phi
      m.flops.other += op_cost::elementwise((double)n_ * m.cfg.dim);
      e = next;
    }
    loss_.forward(m, acts_.back().out(), b.targets, training);  // the last pass's W H^{P+1}, CE (chunks of rows)
  }

  void backward(Model<Bk>& m, double loss_scale) override {
    const int D = m.cfg.dim;
    const size_t nd = (size_t)n_ * D;
    T* de = m.zeros(nd);  // dL/de^P
    loss_.backward(m, loss_scale, de);
    m.backward_pass(acts_[P_], kv_[P_], de);
    T* dh = m.alloc(nd);
    for (int i = P_ - 1; i >= 0; i--) {
      auto scratch = m.scratch();  // one pass's temporaries at a time
      // e^{i+1} = e^i + phi(F(e^i)): the residual passes de through; the pondering path adds to it.
      m.be.fill(dh, T(0), nd);
      typename ChunkedReadout<Bk>::Grad g;
      g.phi = de;                    // dphi = dL/de^{i+1}
      ro_[i].backward(m, g, dh);
      m.backward_pass(acts_[i], kv_[i], dh);
      m.be.axpy(de, T(1), dh, nd);  // de = dL/de^i
    }
    m.embed_backward(ids_, de, n_);
  }

  StepStats stats(Model<Bk>& m) override { return loss_.stats(m, (double)(P_ + 1)); }

  void per_token(Model<Bk>& m, std::vector<double>& nll, std::vector<double>& passes) override {
    loss_.per_token(m, nll);
    passes.assign(n_, P_ + 1.0);
  }
  void probabilities(Model<Bk>& m, std::vector<double>& probs) override {
    loss_.probabilities(m, probs);
  }
  void per_token_argmax(Model<Bk>& m, std::vector<int>& argmax) override { loss_.argmax(m, argmax); }
  std::unique_ptr<Decoder<Bk>> decoder(Model<Bk>& m, int max_len) override;

 private:
  int P_;
  int n_ = 0;
  int* ids_ = nullptr;
  std::vector<KvStore<Bk>> kv_;
  std::vector<typename Model<Bk>::PassActs> acts_;
  std::vector<ChunkedReadout<Bk>> ro_;  // the pondering passes' readouts and soft embeddings
  FusedClassifier<Bk> loss_;
};

// One KV cache per pass; a new token runs the P+1 passes on its single row.
template <class Bk>
class PonderDecoder : public Decoder<Bk> {
 public:
  using T = typename Bk::Real;
  PonderDecoder(Model<Bk>& m, int max_len, int P) : Decoder<Bk>(m, max_len), kv_(P + 1), P_(P) {
    for (auto& kv : kv_) kv.init(m.be, this->cache_, 1, max_len, m.cfg.layers, m.cfg.dim, kAnyDepth, false);
    this->passes_ = P + 1;
  }

 protected:
  void run(int token, int t) override {
    Model<Bk>& m = this->m_;
    const T c = T(std::sqrt((double)m.cfg.dim));
    const PassPlan plan = this->one_row(kv_[0].S, t, t);
    T* e = m.embed({token});
    for (int i = 0;; i++) {
      auto ro = m.readout_forward(m.forward_pass(plan, kv_[i], e).out(), 1);
      if (i == P_) return probabilities_to_host(m, ro.logits, 1, this->probs_);
      SoftEmbedding<Bk> se;
      m.be.axpy(e, T(1), se.forward(m, ro.logits, 1, c), m.cfg.dim);  // e += sqrt(D) softmax(z) E
    }
  }

 private:
  std::vector<KvStore<Bk>> kv_;
  int P_;
};

template <class Bk>
std::unique_ptr<Decoder<Bk>> PonderMethod<Bk>::decoder(Model<Bk>& m, int max_len) {
  return std::make_unique<PonderDecoder<Bk>>(m, max_len, P_);
}

}  // namespace ada
