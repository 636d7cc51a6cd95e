// ponderlm2: PonderLM-2, pretraining with latent thoughts (Zeng et al. 2025,
// arXiv 2509.23184; methods.md section 2). Every token thinks K latent
// thoughts before it predicts; a thought is the final-normed last-layer state
// of the step before it, fed back as the next input (no vocabulary
// projection):
//   S^0_t = sqrt(2.5 D) E[x_t]                         stage 0: the token
//   S^k_t = RMSNorm(H(S)_{t,k-1}) * norm.weight        stage k = 1..K: a latent thought
//   sequence [S^0_1, S^1_1, .., S^K_1, S^0_2, ..]     length (K+1) T, row j = t (K+1) + k
//   rotary position of row j: t                       (every stage shares its token's id)
//   attention: ordinary causal over the flattened rows (order j)
//   L = CE( W RMSNorm(H_{t,K}), y_t )                 read at stage K only
// The S^k depend on the outputs they feed, so training solves the system as
// a fixed point over whole passes, each with its own KV store:
//   K growing passes        pass p = 0..K-1 runs stages 0..p, refreshes S^1..S^{p+1}
//   n_J Jacobi passes       all K+1 stages, rewriting every S^k from stage k-1 of the pass before
//   one final pass          all stages; its stage-K logits give the loss
//   n_J: training  drawn from {2, 3} per step (seed and step: a resume is exact),
//                  or --jacobi-train when > 0;  evaluation: --jacobi-eval (3)
// Full backpropagation through every pass (no detach): the gradient of a pass's
// input rows of stage k >= 1 goes back through the final norm into stage k-1
// of the pass before, that of stage-0 rows into E.
// Inference is sequential and exact: a token's K+1 rows run one at a time
// through one KV cache (PonderLM2Decoder). A forward with n_J + 1 >= (K+1) T
// is the same function (every pass makes at least one more row exact); the
// paper's 3 passes approximate it (closely on a trained model, see the doc page).
// Cost: training runs K(K+1)/2 + (n_J+1)(K+1) rows per token; inference runs
// K+1 rows per token over a (K+1)x longer context, which is what
// StepStats::infer_flops reports (decode_flops below).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/rng.h"
#include "methods/method.h"
#include "methods/fused_classifier.h"
#include "methods/next_token_loss.h"

namespace ada {

struct PonderLM2Options {
  int K = 1;             // latent thoughts per token (the paper's Table-3 scripts: 1)
  int jacobi_train = 0;  // Jacobi passes in training; 0: drawn from {2, 3} each step (the paper)
  int jacobi_eval = 3;   // Jacobi passes in evaluation (the paper: 3)
};

constexpr int kPonderLM2MaxThoughts = 16;

template <class Bk>
class PonderLM2Method : public Method<Bk> {
 public:
  using T = typename Bk::Real;
  explicit PonderLM2Method(const PonderLM2Options& o) : o_(o) {
    check(o.K >= 1 && o.K <= kPonderLM2MaxThoughts, "--latent-thoughts must be in [1, " +
                                                        std::to_string(kPonderLM2MaxThoughts) + "] (got " +
                                                        std::to_string(o.K) + ")");
    check(o.jacobi_train >= 0, "--jacobi-train must be >= 0 (0: drawn from {2, 3}; got " +
                                   std::to_string(o.jacobi_train) + ")");
    check(o.jacobi_eval >= 0, "--jacobi-eval must be >= 0 (got " + std::to_string(o.jacobi_eval) + ")");
  }
  std::string name() const override { return "ponderlm2"; }
  bool graph_safe() const override { return true; }  // nothing read back mid-step: --cuda-graph 1 records it
  // The stack runs K+1 times in a row per token (token, then K thoughts).
  int max_passes() const override { return o_.K + 1; }
  // S^0 = sqrt(2.5 D) E[x], the paper's input scale (as latent_cot)
  double default_embed_scale(const ModelConfig& c) const override { return std::sqrt(2.5 * c.dim); }
  const PonderLM2Options& options() const { return o_; }

  void set_run_seed(uint64_t seed) override { seed_ = seed; }
  void set_step(long long step, long long) override { step_ = step; }

  // The training Jacobi count: 2 or 3 with equal odds, a function of the
  // run's seed and the step only.
  static int jacobi_draw(uint64_t seed, long long step) {
    Rng r(seed * 0x9E3779B97F4A7C15ull + (uint64_t)step);
    return 2 + (int)r.below(2);
  }
  // The Jacobi passes a forward in this mode runs.
  int jacobi_passes(bool training) const {
    if (!training) return o_.jacobi_eval;
    return o_.jacobi_train > 0 ? o_.jacobi_train : jacobi_draw(seed_, step_);
  }

  // Forward FLOPs of the sequential decode of B sequences of T tokens (what
  // PonderLM2Decoder spends, counted as Model counts): (K+1) T rows per
  // sequence, row j seeing j + 1 keys, and the head on the T stage-K rows.
  static double decode_flops(const ModelConfig& c, int B, int T, int K) {
    const double R = (double)(K + 1) * T;
    const double per_seq = 2.0 * R * (double)c.num_block_matmul_params() +
                           4.0 * c.dim * c.layers * (R * (R + 1) / 2) + 2.0 * (double)T * c.dim * c.vocab;
    return B * per_seq;
  }

  void forward(Model<Bk>& m, const Batch& b, bool training) override {
    m.flops.reset();
    const int K = o_.K, W = K + 1, D = m.cfg.dim;
    B_ = b.B, T_ = b.T, N_ = b.B * b.T;
    nJ_ = jacobi_passes(training);
    const int npass = K + nJ_ + 1;
    T* S0 = m.embed(b.inputs, &ids_);  // S^0 = sqrt(2.5 D) E[x]   (N, D)  (default_embed_scale)
    passes_.assign(npass, Pass());
    for (int p = 0; p < npass; p++) {
      Pass& P = passes_[p];
      P.c = std::min(p + 1, W);  // stages this pass runs: growing passes 0..p, then all K+1
      const int c = P.c, cprev = p > 0 ? passes_[p - 1].c : 0;
      P.n = N_ * c;
      // rows (i, k) = i c + k for token i = b T + t; slot b T W + t W + k; position t
      PassPlan plan;
      plan.B = B_, plan.S = T_ * W;
      std::vector<int> stage0, dst, src;
      for (int i = 0; i < N_; i++)
        for (int k = 0; k < c; k++) {
          plan.slot.push_back((i / T_) * T_ * W + (i % T_) * W + k), plan.pos.push_back(i % T_);
          if (k == 0) stage0.push_back(i * c);
          else dst.push_back(i * c + k), src.push_back(i * cprev + k - 1);  // S^k <- stage k-1 of the pass before
        }
      plan.finish();
      P.d_stage0 = upload(m, stage0), P.d_dst = upload(m, dst), P.d_src = upload(m, src);
      P.nlat = (int)dst.size();

      // input rows x (n, D): S^0 at stage 0, RMSNorm(H^{p-1}_{t,k-1}) w at stage k
      T* x = m.alloc((size_t)P.n * D);
      m.be.scatter_rows(x, D, S0, D, P.d_stage0, N_, D);
      if (P.nlat > 0) {
        T* lat = m.alloc((size_t)P.nlat * D);
        m.be.gather_rows(lat, D, passes_[p - 1].hn, D, P.d_src, P.nlat, D);
        m.be.scatter_rows(x, D, lat, D, P.d_dst, P.nlat, D);
      }
      P.kv.init(m.be, m.arena, B_, T_ * W, m.cfg.layers, D, kAnyDepth, training);  // order = flattened index
      P.acts = m.forward_pass(plan, P.kv, x);
      if (p + 1 < npass) {  // the next pass's latent inputs: the final norm of every row (no head)
        P.hn = m.alloc((size_t)P.n * D), P.rstd = m.alloc(P.n);
        m.be.rmsnorm_forward(P.hn, P.rstd, P.acts.out(), m.w.final_norm, P.n, D, m.cfg.norm_eps);
        m.flops.other += op_cost::rmsnorm(P.n, D);
      }
    }
    // logits at stage K of every token of the final pass
    std::vector<int> read;
    for (int i = 0; i < N_; i++) read.push_back(i * W + K);
    d_read_ = upload(m, read);
    T* h = m.alloc((size_t)N_ * D);
    m.be.gather_rows(h, D, passes_.back().acts.out(), D, d_read_, N_, D);
    loss_.forward(m, h, b.targets, training);  // z = W RMSNorm(H_{t,K}), CE (chunks of rows)
  }

  void backward(Model<Bk>& m, double loss_scale) override {
    const int D = m.cfg.dim;
    T* dh = m.zeros((size_t)N_ * D);
    loss_.backward(m, loss_scale, dh);
    T* dx = m.zeros((size_t)passes_.back().n * D);  // dL/d(final pass output): only at stage-K rows
    m.be.scatter_rows(dx, D, dh, D, d_read_, N_, D);
    T* dS0 = m.zeros((size_t)N_ * D);
    T* tmp = m.alloc((size_t)N_ * o_.K * D);
    for (int p = (int)passes_.size() - 1; p >= 0; p--) {
      Pass& P = passes_[p];
      m.backward_pass(P.acts, P.kv, dx);  // dx: dL/dx of this pass's input rows
      // stage 0 rows are S^0
      m.be.gather_rows(tmp, D, dx, D, P.d_stage0, N_, D);
      m.be.axpy(dS0, T(1), tmp, (size_t)N_ * D);
      if (p == 0) break;
      // stage k rows are hn^{p-1} of (i, k-1): send their gradient there, then through the final norm
      const Pass& Q = passes_[p - 1];
      T* dhn = m.zeros((size_t)Q.n * D);
      m.be.gather_rows(tmp, D, dx, D, P.d_dst, P.nlat, D);
      m.be.scatter_rows(dhn, D, tmp, D, P.d_src, P.nlat, D);  // each source row feeds one row
      dx = m.zeros((size_t)Q.n * D);
      m.be.rmsnorm_backward(dx, m.g.final_norm, dhn, Q.acts.out(), m.w.final_norm, Q.rstd, Q.n, D);
    }
    m.embed_backward(ids_, dS0, N_);
  }

  StepStats stats(Model<Bk>& m) override {
    StepStats s = loss_.stats(m, (double)(o_.K + 1));  // passes: rows per token of the decode
    s.infer_flops = decode_flops(m.cfg, B_, T_, o_.K);
    s.halting.push_back({"jacobi", (double)nJ_});
    return s;
  }

  void per_token(Model<Bk>& m, std::vector<double>& nll, std::vector<double>& passes) override {
    loss_.per_token(m, nll);
    passes.assign(N_, o_.K + 1.0);
  }
  void probabilities(Model<Bk>& m, std::vector<double>& probs) override {
    loss_.probabilities(m, probs);
  }
  void per_token_argmax(Model<Bk>& m, std::vector<int>& argmax) override { loss_.argmax(m, argmax); }
  std::unique_ptr<Decoder<Bk>> decoder(Model<Bk>& m, int max_len) override;

  // The passes of the last forward (K growing + n_J Jacobi + 1 final), for tests.
  int last_passes() const { return (int)passes_.size(); }

 private:
  struct Pass {
    int c = 0;     // stages run (rows per token)
    int n = 0;     // rows = N c
    int nlat = 0;  // latent input rows = N (c - 1)
    int *d_stage0 = nullptr, *d_dst = nullptr, *d_src = nullptr;  // stage-0 rows; latent rows and their sources
    KvStore<Bk> kv;
    typename Model<Bk>::PassActs acts;
    T *hn = nullptr, *rstd = nullptr;  // final norm of every row: the next pass's latent inputs
  };
  int* upload(Model<Bk>& m, const std::vector<int>& v) {
    int* d = m.arena.template alloc<int>(std::max<size_t>(v.size(), 1));
    m.be.to_device(d, v.data(), v.size());
    return d;
  }

  PonderLM2Options o_;
  uint64_t seed_ = 0;
  long long step_ = 0;
  int B_ = 0, T_ = 0, N_ = 0, nJ_ = 0;
  int *ids_ = nullptr, *d_read_ = nullptr;
  std::vector<Pass> passes_;
  FusedClassifier<Bk> loss_;
};

// Sequential, exact inference: one KV cache over the flattened rows; a new
// token t runs row t (K+1) + 0 with S^0 = sqrt(2.5 D) E[x_t], then its K
// thoughts one row at a time, each fed the final-normed output of the row
// before, and predicts from the head at stage K.
template <class Bk>
class PonderLM2Decoder : public Decoder<Bk> {
 public:
  using T = typename Bk::Real;
  PonderLM2Decoder(Model<Bk>& m, int max_len, int K) : Decoder<Bk>(m, max_len), K_(K) {
    kv_.init(m.be, this->cache_, 1, max_len * (K + 1), m.cfg.layers, m.cfg.dim, kAnyDepth, false);
    this->passes_ = K + 1;
  }

 protected:
  void run(int token, int t) override {
    Model<Bk>& m = this->m_;
    const int D = m.cfg.dim, W = K_ + 1;
    const T* x = m.embed({token});  // S^0_t
    for (int k = 0;; k++) {
      auto acts = m.forward_pass(this->one_row(kv_.S, t * W + k, t), kv_, x);
      if (k == K_) {
        auto ro = m.readout_forward(acts.out(), 1);  // predict at stage K
        return probabilities_to_host(m, ro.logits, 1, this->probs_);
      }
      T* hn = m.alloc(D);
      T* rstd = m.alloc(1);
      m.be.rmsnorm_forward(hn, rstd, acts.out(), m.w.final_norm, 1, D, m.cfg.norm_eps);
      m.flops.other += op_cost::rmsnorm(1, D);
      x = hn;  // S^{k+1}_t = RMSNorm(H_{t,k}) * norm.weight
    }
  }

 private:
  KvStore<Bk> kv_;
  int K_;
};

template <class Bk>
std::unique_ptr<Decoder<Bk>> PonderLM2Method<Bk>::decoder(Model<Bk>& m, int max_len) {
  return std::make_unique<PonderLM2Decoder<Bk>>(m, max_len, o_.K);
}

}  // namespace ada
