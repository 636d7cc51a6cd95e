// standard: the plain language model, one pass of the block stack per token.
//   x_t = E[x_t];   h = F_theta(x) (causal);   z = W RMSNorm(h);   L = CE(z, y)
// The baseline every other method is measured against, and the simplest
// example of the method interface.
#pragma once
#include "methods/method.h"
#include "methods/fused_classifier.h"
#include "methods/next_token_loss.h"

namespace ada {

template <class Bk>
class StandardMethod : public Method<Bk> {
 public:
  using T = typename Bk::Real;
  std::string name() const override { return "standard"; }
  bool graph_safe() const override { return true; }  // nothing read back mid-step: --cuda-graph 1 records it

  void forward(Model<Bk>& m, const Batch& b, bool training) override {
    m.flops.reset();
    const int N = b.B * b.T;
    kv_.init(m.be, m.arena, b.B, b.T, m.cfg.layers, m.cfg.dim, kAnyDepth, training);
    x0_ = m.embed(b.inputs, &ids_);                         // (N, D)
    acts_ = m.forward_pass(PassPlan::dense(b.B, b.T, b.T), kv_, x0_);  // causal pass
    loss_.forward(m, acts_.out(), b.targets, training);            // z = W RMSNorm(h), CE (chunks of rows)
    n_ = N;
  }

  void backward(Model<Bk>& m, double loss_scale) override {
    const int D = m.cfg.dim;
    T* dx = m.zeros((size_t)n_ * D);
    loss_.backward(m, loss_scale, dx);
    m.backward_pass(acts_, kv_, dx);
    m.embed_backward(ids_, dx, n_);
  }

  StepStats stats(Model<Bk>& m) override { return loss_.stats(m, 1.0); }


  void per_token(Model<Bk>& m, std::vector<double>& nll, std::vector<double>& passes) override {
    loss_.per_token(m, nll);
    passes.assign(n_, 1.0);
  }

  void probabilities(Model<Bk>& m, std::vector<double>& probs) override {
    loss_.probabilities(m, probs);
  }
  void per_token_argmax(Model<Bk>& m, std::vector<int>& argmax) override { loss_.argmax(m, argmax); }

  std::unique_ptr<Decoder<Bk>> decoder(Model<Bk>& m, int max_len) override;

 private:
  KvStore<Bk> kv_;
  T* x0_ = nullptr;
  int* ids_ = nullptr;
  typename Model<Bk>::PassActs acts_;
  FusedClassifier<Bk> loss_;
  int n_ = 0;
};

// Decoding: one KV store of max_len slots is the cache; each step runs the
// stack on the single new row, which attends to every earlier slot.
template <class Bk>
class StandardDecoder : public Decoder<Bk> {
 public:
  using T = typename Bk::Real;
  StandardDecoder(Model<Bk>& m, int max_len) : Decoder<Bk>(m, max_len) {
    kv_.init(m.be, this->cache_, 1, max_len, m.cfg.layers, m.cfg.dim, kAnyDepth, false);
  }

 protected:
  void run(int token, int t) override {
    Model<Bk>& m = this->m_;
    auto acts = m.forward_pass(this->one_row(kv_.S, t, t), kv_, m.embed({token}));
    probabilities_to_host(m, m.readout_forward(acts.out(), 1).logits, 1, this->probs_);
  }

 private:
  KvStore<Bk> kv_;
};

template <class Bk>
std::unique_ptr<Decoder<Bk>> StandardMethod<Bk>::decoder(Model<Bk>& m, int max_len) {
  return std::make_unique<StandardDecoder<Bk>>(m, max_len);
}

}  // namespace ada
