// looped: the same L-block stack applied K+1 times to the hidden state, with
// shared weights, and the final norm once at the end (the LoopedLM baseline of
// the PonderLM-2 / latent-CoT papers, methods.md section 3):
//   x^0 = E[x];   x^{i+1} = Blocks(x^i)  for i = 0..K;   z = W RMSNorm(x^{K+1})
// Every loop is an ordinary causal pass with its own KV store, so loop i
// attends to loop-i keys only; generation keeps one KV cache per (loop, layer).
// Cost: (K+1) x standard per token.
#pragma once
#include "methods/method.h"
#include "methods/fused_classifier.h"
#include "methods/next_token_loss.h"

namespace ada {

template <class Bk>
class LoopedMethod : public Method<Bk> {
 public:
  using T = typename Bk::Real;
  explicit LoopedMethod(int extra_loops) : K_(extra_loops) {
    check(K_ >= 0, "--iters must be >= 0 (got " + std::to_string(K_) + ")");
  }
  std::string name() const override { return "looped"; }
  bool graph_safe() const override { return true; }  // nothing read back mid-step: --cuda-graph 1 records it
  int max_passes() const override { return K_ + 1; }

  void forward(Model<Bk>& m, const Batch& b, bool training) override {
    m.flops.reset();
    n_ = b.B * b.T;
    const PassPlan plan = PassPlan::dense(b.B, b.T, b.T);
    kv_.assign(K_ + 1, KvStore<Bk>());
    acts_.clear();
    const T* x = m.embed(b.inputs, &ids_);
    for (int i = 0; i <= K_; i++) {  // x^{i+1} = Blocks(x^i)
      kv_[i].init(m.be, m.arena, b.B, b.T, m.cfg.layers, m.cfg.dim, kAnyDepth, training);
      acts_.push_back(m.forward_pass(plan, kv_[i], x));
      x = acts_.back().out();
    }
    loss_.forward(m, x, b.targets, training);  // z = W RMSNorm(x^{K+1}), CE (chunks of rows)
  }

  void backward(Model<Bk>& m, double loss_scale) override {
    T* dx = m.zeros((size_t)n_ * m.cfg.dim);
    loss_.backward(m, loss_scale, dx);
    for (int i = K_; i >= 0; i--) m.backward_pass(acts_[i], kv_[i], dx);  // dx: d x^{i+1} -> d x^i
    m.embed_backward(ids_, dx, n_);
  }

  StepStats stats(Model<Bk>& m) override { return loss_.stats(m, (double)(K_ + 1)); }

  void per_token(Model<Bk>& m, std::vector<double>& nll, std::vector<double>& passes) override {
    loss_.per_token(m, nll);
    passes.assign(n_, K_ + 1.0);
  }
  void probabilities(Model<Bk>& m, std::vector<double>& probs) override {
    loss_.probabilities(m, probs);
  }
  void per_token_argmax(Model<Bk>& m, std::vector<int>& argmax) override { loss_.argmax(m, argmax); }
  std::unique_ptr<Decoder<Bk>> decoder(Model<Bk>& m, int max_len) override;

 private:
  int K_;
  int n_ = 0;
  int* ids_ = nullptr;
  std::vector<KvStore<Bk>> kv_;
  std::vector<typename Model<Bk>::PassActs> acts_;
  FusedClassifier<Bk> loss_;
};

// One cache per loop; each new token runs the K+1 loops on its single row.
template <class Bk>
class LoopedDecoder : public Decoder<Bk> {
 public:
  using T = typename Bk::Real;
  LoopedDecoder(Model<Bk>& m, int max_len, int loops) : Decoder<Bk>(m, max_len), kv_(loops) {
    for (auto& kv : kv_) kv.init(m.be, this->cache_, 1, max_len, m.cfg.layers, m.cfg.dim, kAnyDepth, false);
    this->passes_ = loops;
  }

 protected:
  void run(int token, int t) override {
    Model<Bk>& m = this->m_;
    const PassPlan plan = this->one_row(kv_[0].S, t, t);
    const T* x = m.embed({token});
    for (auto& kv : kv_) x = m.forward_pass(plan, kv, x).out();
    probabilities_to_host(m, m.readout_forward(x, 1).logits, 1, this->probs_);
  }

 private:
  std::vector<KvStore<Bk>> kv_;
};

template <class Bk>
std::unique_ptr<Decoder<Bk>> LoopedMethod<Bk>::decoder(Model<Bk>& m, int max_len) {
  return std::make_unique<LoopedDecoder<Bk>>(m, max_len, K_ + 1);
}

}  // namespace ada
