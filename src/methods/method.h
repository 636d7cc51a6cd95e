// The interface every method implements. A method decides how the backbone
// runs per token (how many passes, which tokens are still active, what is fed
// back, which positions attend to which) and how the per-pass predictions
// combine into the loss. It is written once as a template over the backend.
//
// The calls of one training micro-step, in order:
//   forward(model, batch, training)   loss and saved activations
//   backward(model, loss_scale)       accumulate d(loss * loss_scale) into model.grads
//   stats(model)                      host summary (loss, FLOPs, halting statistics)
// and for generation: decoder(model) gives a KV-cached incremental decoder.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "model/model.h"

namespace ada {

// One batch of training text: B sequences of T positions. targets[i] is the
// token that follows inputs[i]; -1 marks a position without loss.
struct Batch {
  int B = 0, T = 0;
  std::vector<int> inputs;   // (B*T)
  std::vector<int> targets;  // (B*T)
};

// Host summary of one forward.
struct StepStats {
  double loss = 0;         // the method's training objective
  double ce = 0;           // mean -log q(y) of the method's next-token prediction (comparable across methods)
  double tokens = 0;       // supervised positions
  double fwd_flops = 0;    // forward FLOPs actually spent on the batch
  double train_flops = 0;  // forward + backward FLOPs
  // Forward FLOPs of producing the same predictions with the method's
  // decoder (KV-cached generation), when that differs from the forward's:
  // PonderLM-2 trains with parallel Jacobi passes but decodes sequentially.
  // < 0: the same as fwd_flops (every other method).
  double infer_flops = -1;
  double inference_flops() const { return infer_flops >= 0 ? infer_flops : fwd_flops; }
  double fwd_other_flops = 0;    // forward non-matmul ops (softmax, norms, ...: model/flop_count.h)
  double train_other_flops = 0;  // forward + backward non-matmul ops
  std::vector<std::pair<std::string, double>> halting;  // method statistics, e.g. {"passes", 2.7}
};

// Incremental decoding: feed one token at a time, read the distribution of
// the next one. The method's KV caches live in the decoder's own arena
// across steps (the model's arena is reset at every step). A method
// implements run(): the work for one token at position `pos`, which fills
// probs_ (and passes_, the passes or steps it used).
template <class Bk>
class Decoder {
 public:
  Decoder(Model<Bk>& m, int max_len) : m_(m), cache_(m.be), max_len_(max_len) {
    check(max_len > 0 && max_len <= m.cfg.max_seq, "decoder length " + std::to_string(max_len) +
                                                       " must be in [1, the model context " +
                                                       std::to_string(m.cfg.max_seq) + "]");
  }
  virtual ~Decoder() = default;

  // Appends `token` at the next position and returns the next-token
  // probabilities (V, host).
  const std::vector<double>& step(int token) {
    check(len_ < max_len_, "decoder is full (" + std::to_string(max_len_) + " tokens)");
    m_.arena.reset();
    m_.flops.reset();
    run(token, len_);
    flops_ += m_.flops.fwd;
    other_flops_ += m_.flops.other;
    len_++;
    return probs_;
  }
  int length() const { return len_; }              // tokens fed so far
  double flops() const { return flops_; }          // forward FLOPs spent so far
  double other_flops() const { return other_flops_; }  // forward non-matmul ops so far
  double passes_last() const { return passes_; }   // passes (or steps) used for the last token

 protected:
  virtual void run(int token, int pos) = 0;

  // A pass over one row: slot `slot` of a cache with S slots, rotary position `pos`.
  static PassPlan one_row(int S, int slot, int pos) {
    PassPlan p;
    p.B = 1, p.S = S, p.slot = {slot}, p.pos = {pos};
    p.finish();
    return p;
  }

  Model<Bk>& m_;
  Arena<Bk> cache_;             // the KV caches
  std::vector<double> probs_;   // (V) the distribution of the next token
  double passes_ = 1;

 private:
  int max_len_, len_ = 0;
  double flops_ = 0, other_flops_ = 0;
};

template <class Bk>
class Method {
 public:
  using T = typename Bk::Real;
  virtual ~Method() = default;
  virtual std::string name() const = 0;
  // How many times the block stack runs per token at most (init depth
  // scaling, and the "x vanilla" figure of the reports).
  virtual int max_passes() const { return 1; }
  // Declares the method's own tensors (pause embedding, gates, ...).
  virtual void add_params(ParamLayout&, const ModelConfig&) {}
  // The scale of the token embeddings at the input, x = scale * E[x], that
  // the method's paper uses (--embed-scale overrides it for any method).
  virtual double default_embed_scale(const ModelConfig&) const { return 1.0; }

  // Training progress, for methods with schedules (AdaPonderLM's two stages
  // and k ramp). The trainer calls it before every step; 0-based.
  virtual void set_step(long long step, long long total_steps) {}
  // The run's --seed, for methods whose random choices must be a function of
  // the seed and the step (PonderLM-2's Jacobi count), so a resume is exact.
  // The trainer calls it once, after building the method.
  virtual void set_run_seed(uint64_t seed) {}
  // The processes of a data-parallel run (dist/communicator.h; docs/scaling.md).
  // The trainer sets it once. Each rank's forward sees its own part of the
  // step's batch; a method whose training forward selects or labels over the
  // whole batch (AdaPonderLM's bottom-k, TaH2's depth labels) does it over the
  // global batch of every rank through batch_comm(training).
  void set_communicator(Communicator* c) { comm_ = c; }

  // True when a training forward and backward never read a device value
  // back to the host (to size a later launch, or to decide anything), so
  // train_gpu --cuda-graph 1 can record them and launch them as one CUDA
  // graph (cuda/step_graph.h). The launches may still differ between steps
  // (PonderLM-2's Jacobi count): each shape gets its own graph. False for
  // the methods that decide on the host mid-step (AdaPonderLM's gates and
  // compaction, latent CoT's router, TaH2's decider); recording those fails
  // at the first read (tests/test_step_graph.cpp checks both directions).
  virtual bool graph_safe() const { return false; }

  virtual void forward(Model<Bk>& m, const Batch& batch, bool training) = 0;
  // The backward leaves what the forward kept for the read-outs: every
  // method's training readout (fused_classifier.h, chunked_readout.h)
  // recomputes its probabilities from the normalised state and keeps its
  // argmax, so probabilities(), per_token_argmax(), stats() and per_token()
  // work before and after it alike (Readout.* tests).
  virtual void backward(Model<Bk>& m, double loss_scale) = 0;
  virtual StepStats stats(Model<Bk>& m) = 0;

  // Per position of the last forward (host, B*T): -log q(y) (NaN where there
  // is no target) and the passes/steps that position used.
  virtual void per_token(Model<Bk>& m, std::vector<double>& nll, std::vector<double>& passes) = 0;
  // The next-token distribution of every position of the last forward
  // (host, B*T x V probabilities): the reference the decoder must match.
  virtual void probabilities(Model<Bk>& m, std::vector<double>& probs) = 0;
  // Per position of the last forward (host, B*T): the most probable next
  // token of the distribution whose -log q(y) per_token reports (the lowest
  // id on ties), for accuracy (argmax == target). By default from
  // probabilities(); methods whose distribution is one softmax of logits
  // take the argmax of the logits instead (no B*T x V copy to the host).
  virtual void per_token_argmax(Model<Bk>& m, std::vector<int>& argmax) {
    std::vector<double> p;
    probabilities(m, p);
    const size_t V = (size_t)m.cfg.vocab, n = p.size() / V;
    argmax.assign(n, 0);
    for (size_t t = 0; t < n; t++)
      for (size_t v = 1; v < V; v++)
        if (p[t * V + v] > p[t * V + argmax[t]]) argmax[t] = (int)v;
  }

  virtual std::unique_ptr<Decoder<Bk>> decoder(Model<Bk>& m, int max_len) = 0;

 protected:
  // The communicator a forward's batch-wide selections use: the run's in a
  // training forward (every rank runs the same number: steps x --accum, so
  // their collectives pair up), one process otherwise: an evaluation forward
  // needs no batch-wide statistic (it reports the cross-entropy), and eval,
  // generate and the tests run one process.
  Communicator& batch_comm(bool training) const { return training && comm_ ? *comm_ : single_process(); }

 private:
  Communicator* comm_ = nullptr;
};

// The parameter layout of backbone + method: what make_model allocates, and
// what a checkpoint is checked against before that.
template <class Bk>
ParamLayout model_layout(const ModelConfig& cfg, Method<Bk>& method) {
  cfg.validate();
  ParamLayout lay;
  add_backbone_params(lay, cfg, method.max_passes());
  method.add_params(lay, cfg);
  lay.finalize();
  return lay;
}

// Builds the parameter layout of backbone + method and the model.
template <class Bk>
std::unique_ptr<Model<Bk>> make_model(Bk& be, const ModelConfig& cfg, Method<Bk>& method) {
  auto m = std::make_unique<Model<Bk>>(be, cfg, model_layout(cfg, method));
  m->embed_scale = cfg.embed_scale > 0 ? cfg.embed_scale : method.default_embed_scale(cfg);
  return m;
}

}  // namespace ada
