// pause: "think before you speak" pause tokens (Goyal et al. 2023;
// methods.md section 4): n learned <PAUSE> inputs after every real token,
//   [x_1, P, ..., P, x_2, P, ..., P, ...]      length (n+1) T,
// ordinary causal attention over the flattened sequence, and the prediction
// of y_t read at the last pause after x_t (cross-entropy only there):
//   row j = t (n+1) + k:  input E[x_t] (k = 0) or p (k > 0),  order j
//   rope position:  t   (--pause-positions shared: PausedLM of the PonderLM-2 papers)
//                   j   (--pause-positions own: Goyal et al., the TBYS baseline of CYB)
//   L = CE( W RMSNorm(H_{t(n+1)+n}), y_t )
// The pause embedding p (D) is a parameter of the method. Generation feeds
// each token followed by its n pauses (one pass over n+1 rows) and reads the
// last one. Cost: (n+1) rows per token and an (n+1)x longer attention context.
#pragma once
#include "methods/method.h"
#include "methods/fused_classifier.h"
#include "methods/next_token_loss.h"

namespace ada {

template <class Bk>
class PauseMethod : public Method<Bk> {
 public:
  using T = typename Bk::Real;
  explicit PauseMethod(int pauses, const std::string& positions = "shared")
      : n_pause_(pauses), own_(positions == "own") {
    check(n_pause_ >= 1, "--pauses must be >= 1 (got " + std::to_string(n_pause_) + ")");
    check(positions == "shared" || positions == "own",
          "--pause-positions must be shared or own (got '" + positions + "')");
  }
  std::string name() const override { return "pause"; }
  bool graph_safe() const override { return true; }  // nothing read back mid-step: --cuda-graph 1 records it
  int max_passes() const override { return 1; }
  bool own_positions() const { return own_; }
  void add_params(ParamLayout& lay, const ModelConfig& c) override {
    lay.add("pause.embedding", {1, c.dim}, Init::Normal, 0.02, false);
  }

  // Rows of the flattened sequence: real rows j = t W, read rows j = t W + n.
  void forward(Model<Bk>& m, const Batch& b, bool training) override {
    m.flops.reset();
    const int W = n_pause_ + 1, D = m.cfg.dim, S = b.T * W;
    if (own_)
      check(S <= m.cfg.max_seq, "pause --pause-positions own: --seq " + std::to_string(b.T) + " x " +
                                    std::to_string(W) + " rows per token exceeds the model context " +
                                    std::to_string(m.cfg.max_seq));
    B_ = b.B, T_ = b.T, n_ = b.B * b.T;
    nrows_ = b.B * S;
    std::vector<int> real, pause, read;
    for (int r = 0; r < nrows_; r++) {
      const int k = r % W;
      (k == 0 ? real : pause).push_back(r);
      if (k == n_pause_) read.push_back(r);
    }
    PassPlan plan = PassPlan::dense(b.B, S, S);
    if (!own_)  // shared: pauses take their token's position t; own: the flattened index j (as dense() set it)
      for (int r = 0; r < nrows_; r++) plan.pos[r] = (r % S) / W;
    d_real_ = upload(m, real), d_pause_ = upload(m, pause), d_read_ = upload(m, read);
    d_zero_ = m.arena.template zeros<int>(pause.size());
    npause_rows_ = (int)pause.size();

    // input rows: E[x_t] at real rows, the pause embedding at pause rows
    T* x = m.alloc((size_t)nrows_ * D);
    T* xr = m.embed(b.inputs, &ids_);
    m.be.scatter_rows(x, D, xr, D, d_real_, n_, D);
    T* xp = m.alloc((size_t)npause_rows_ * D);
    m.be.embedding_forward(xp, d_zero_, m.param("pause.embedding"), npause_rows_, D, T(1));
    m.be.scatter_rows(x, D, xp, D, d_pause_, npause_rows_, D);

    kv_.init(m.be, m.arena, b.B, S, m.cfg.layers, D, kAnyDepth, training);  // order = flattened index
    acts_ = m.forward_pass(plan, kv_, x);
    T* h = m.alloc((size_t)n_ * D);
    m.be.gather_rows(h, D, acts_.out(), D, d_read_, n_, D);  // the last pause after each token
    loss_.forward(m, h, b.targets, training);  // z = W RMSNorm(h), CE (chunks of rows)
  }

  void backward(Model<Bk>& m, double loss_scale) override {
    const int D = m.cfg.dim;
    T* dh = m.zeros((size_t)n_ * D);
    loss_.backward(m, loss_scale, dh);
    T* dx = m.zeros((size_t)nrows_ * D);
    m.be.scatter_rows(dx, D, dh, D, d_read_, n_, D);
    m.backward_pass(acts_, kv_, dx);
    T* g = m.alloc((size_t)nrows_ * D);
    m.be.gather_rows(g, D, dx, D, d_real_, n_, D);
    m.embed_backward(ids_, g, n_);
    m.be.gather_rows(g, D, dx, D, d_pause_, npause_rows_, D);
    m.be.embedding_backward(m.grad("pause.embedding"), d_zero_, g, npause_rows_, D, T(1));  // sum over pauses
  }

  // passes: token forwards per real token
  StepStats stats(Model<Bk>& m) override { return loss_.stats(m, (double)(n_pause_ + 1)); }

  void per_token(Model<Bk>& m, std::vector<double>& nll, std::vector<double>& passes) override {
    loss_.per_token(m, nll);
    passes.assign(n_, n_pause_ + 1.0);
  }
  void probabilities(Model<Bk>& m, std::vector<double>& probs) override {
    loss_.probabilities(m, probs);
  }
  void per_token_argmax(Model<Bk>& m, std::vector<int>& argmax) override { loss_.argmax(m, argmax); }
  std::unique_ptr<Decoder<Bk>> decoder(Model<Bk>& m, int max_len) override;

 private:
  int* upload(Model<Bk>& m, const std::vector<int>& v) {
    int* d = m.arena.template alloc<int>(v.size());
    m.be.to_device(d, v.data(), v.size());
    return d;
  }
  int n_pause_;
  bool own_;
  int B_ = 0, T_ = 0, n_ = 0, nrows_ = 0, npause_rows_ = 0;
  int *ids_ = nullptr, *d_real_ = nullptr, *d_pause_ = nullptr, *d_read_ = nullptr, *d_zero_ = nullptr;
  KvStore<Bk> kv_;
  typename Model<Bk>::PassActs acts_;
  FusedClassifier<Bk> loss_;
};

// Each real token is fed with its n pauses as n+1 rows of one pass; the
// cache holds every pause position, exactly as in training.
template <class Bk>
class PauseDecoder : public Decoder<Bk> {
 public:
  using T = typename Bk::Real;
  PauseDecoder(Model<Bk>& m, int max_len, int pauses, bool own)
      : Decoder<Bk>(m, max_len), W_(pauses + 1), own_(own) {
    if (own_)
      check(max_len * W_ <= m.cfg.max_seq, "pause decoder: " + std::to_string(max_len) + " tokens x " +
                                               std::to_string(W_) + " rows exceed the model context " +
                                               std::to_string(m.cfg.max_seq));
    kv_.init(m.be, this->cache_, 1, max_len * W_, m.cfg.layers, m.cfg.dim, kAnyDepth, false);
    this->passes_ = W_;
  }

 protected:
  void run(int token, int t) override {
    Model<Bk>& m = this->m_;
    const int D = m.cfg.dim;
    PassPlan plan;
    plan.B = 1, plan.S = kv_.S;
    for (int k = 0; k < W_; k++) plan.slot.push_back(t * W_ + k), plan.pos.push_back(own_ ? t * W_ + k : t);
    plan.finish();
    T* x = m.alloc((size_t)W_ * D);
    m.be.copy(x, m.embed({token}), D);
    for (int k = 1; k < W_; k++) m.be.copy(x + (size_t)k * D, m.param("pause.embedding"), D);
    auto acts = m.forward_pass(plan, kv_, x);
    auto ro = m.readout_forward(acts.out() + (size_t)(W_ - 1) * D, 1);
    probabilities_to_host(m, ro.logits, 1, this->probs_);
  }

 private:
  KvStore<Bk> kv_;
  int W_;
  bool own_;
};

template <class Bk>
std::unique_ptr<Decoder<Bk>> PauseMethod<Bk>::decoder(Model<Bk>& m, int max_len) {
  return std::make_unique<PauseDecoder<Bk>>(m, max_len, n_pause_, own_);
}

}  // namespace ada
