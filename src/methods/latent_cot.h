// latent_cot: pretraining with token-level adaptive latent chain of thought
// (Zeng et al. 2026; methods.md section 8, a reconstruction from the abstract
// and summaries -- the readings chosen are listed in docs/methods/latent_cot.md).
//
// Every token may think up to K latent steps before its prediction is final.
// Step k of token t is one cell of a 2-D (position, step) grid:
//   z^0_t = sqrt(2.5 D) E[x_t]                       (PonderLM-2's scaling)
//   for k = 0..K, over the cells whose reach P^k_t >= tau (P^0 = 1):
//     h^k = F(z^k; 2-D mask)   query (t,k) sees every executed cell (s,j), s <= t, j <= k
//     p^k = softmax(W h^k)                          each step can predict the next token
//     if k < K:
//       g^k = sigmoid(Router(h^k))                 continue probability (shared 2-layer MLP)
//       P^{k+1} = P^k g^k;  the cell (t, k+1) runs only if P^{k+1} >= tau
//       z^{k+1}_t = h^k_t                          the latent thought: the step's final-normed state
// Exit distribution with the residual mass on the last executed step k*:
//   pi^k = P^k (1 - g^k) for k < k*,   pi^{k*} = P^{k*}          (sum_k pi^k = 1)
// Loss:
//   L_LM  = -(1/N) sum_t log sum_k pi^k_t p^k_t[y_t]             (mixture of the steps' predictions)
//   L_ada = lambda (1/N) sum_t sum_{k <= k*, k < K} g^k_t sg(p^k_t[y_t])^beta
//           (charges continuing in proportion to how right step k already is)
// Gradients (methods.md 0.2, 8.3): with a_k = p^k[y], c_k = g^k (k < k*),
//   Q_{k*} = a_{k*},  Q_k = (1 - c_k) a_k + c_k Q_{k+1}           (A = Q_0 = q[y])
//   dL/dc_k = -P^k (Q_{k+1} - a_k) / A,   dL/dlog a_k = -pi^k a_k / A
//   L_ada: dL/dg^k = lambda sg(a_k)^beta / N; nothing into p.
// The latent chain z^{k+1} = h^k carries gradient from step k+1 back into step
// k's state, and the shared KV store carries it from later queries to earlier
// keys. Pruned cells are never computed (the passes hold only live cells).
#pragma once
#include <cmath>
#include <numeric>

#include "core/hd_math.h"
#include "methods/chunked_readout.h"
#include "methods/halting_chain.h"
#include "methods/method.h"
#include "methods/next_token_loss.h"

namespace ada {

struct LatentCotOptions {
  int K = 3;               // latent steps (K+1 cells per token at most)
  double tau = 1e-2;       // a cell runs only if its reach probability is >= tau
  double lambda = 0.1;     // weight of L_ada
  double beta = 1.0;       // sharpness of the correctness weight
  int router_hidden = 0;   // 0: D/4
  double router_bias = 2.2;  // g ~ 0.9 at the start
  long long warmup = -1;     // steps with lambda = 0 at the start of training (-1: half of the run)
};

constexpr int kLatentMaxSteps = kHaltingMaxSteps;

// Per token: the mixture loss over its executed steps (halting_chain.h), the
// halting loss, and every derivative. Arrays are (K+1) x N, step-major:
// x[k * N + t]; cells that did not run are ignored (k > kstar[t]).
template <class T>
struct LatentCotToken {
  int N, K;
  const int* kstar;     // (N) last executed step
  const int* supervised;
  const T* logp;        // log p^k[y]
  const T* sg_logp;     // log p^k[y] inside sg() of L_ada: logp itself (frozen copies in tests)
  const T* g;           // continue probability g^k (k < K)
  T lambda, beta, scale;  // scale = loss_scale / supervised tokens
  T* loss_lm;           // (N) -log q[y]
  T* loss_ada;          // (N) sum_k g^k a_k^beta
  T* g_logp;            // dL/dlogp
  T* g_g;               // dL/dg
  HD void operator()(int t) const {
    const int ks = kstar[t];
    if (!supervised[t]) {
      loss_lm[t] = loss_ada[t] = 0;
      for (int k = 0; k <= K; k++) g_logp[(size_t)k * N + t] = g_g[(size_t)k * N + t] = 0;
      return;
    }
    loss_lm[t] = halting_mixture(t, N, K, ks, logp, g, scale, g_logp, g_g);
    T ada = 0;
    for (int k = 0; k <= ks && k < K; k++) {  // L_ada on every computed router output
      const T ak_beta = hd_exp(beta * sg_logp[(size_t)k * N + t]);  // sg(a_k)^beta
      ada += g[(size_t)k * N + t] * ak_beta;
      g_g[(size_t)k * N + t] += lambda * ak_beta * scale;
    }
    loss_ada[t] = ada;
  }
};

template <class Bk>
class LatentCotMethod : public Method<Bk> {
 public:
  using T = typename Bk::Real;
  explicit LatentCotMethod(const LatentCotOptions& o) : o_(o), lambda_now_(o.lambda) {
    check(o.K >= 1 && o.K < kLatentMaxSteps, "--latent-steps must be in [1, " + std::to_string(kLatentMaxSteps - 1) + "]");
    check(o.tau >= 0 && o.tau < 1, "--reach-tau must be in [0, 1)");
    check(o.lambda >= 0 && o.beta > 0, "--latent-lambda must be >= 0 and --latent-beta > 0");
  }
  std::string name() const override { return "latent_cot"; }
  int max_passes() const override { return o_.K + 1; }
  // z^0 = sqrt(2.5 D) E[x], PonderLM-2's input scale
  double default_embed_scale(const ModelConfig& c) const override { return std::sqrt(2.5 * c.dim); }
  const LatentCotOptions& options() const { return o_; }

  // Halting-loss warm-up: for the first `warmup` steps L_ada is off (lambda =
  // 0) and the router learns only from the mixture loss, i.e. where a later
  // step predicts better. Without it the router stops every token after step
  // 0 before the latent steps have learned anything (the solved easy tokens'
  // L_ada drives the shared router down), and a pruned step never comes back
  // (docs/methods/latent_cot.md, "Halting-loss warm-up").
  void set_step(long long step, long long total) override {
    const long long warm = o_.warmup >= 0 ? o_.warmup : total / 2;
    lambda_now_ = step < warm ? 0.0 : o_.lambda;
  }

  int router_hidden(const ModelConfig& c) const { return o_.router_hidden > 0 ? o_.router_hidden : std::max(1, c.dim / 4); }
  void add_params(ParamLayout& lay, const ModelConfig& c) override {
    const int Dr = router_hidden(c);
    lay.add("latent_cot.router.w1", {Dr, c.dim}, Init::Normal, 0.02, true);
    lay.add("latent_cot.router.w2", {1, Dr}, Init::Normal, 0.02, true);
    lay.add("latent_cot.router.b2", {1}, Init::Constant, o_.router_bias, false);
  }

  // The router on n rows of normalised states: g = sigmoid(w2 . silu(W1 h) + b2).
  struct RouterActs {
    T *u = nullptr, *a = nullptr, *logit = nullptr, *g = nullptr;
  };
  RouterActs router(Model<Bk>& m, const T* hn, int n) {
    const int D = m.cfg.dim, Dr = router_hidden(m.cfg);
    RouterActs r;
    r.u = m.alloc((size_t)n * Dr), r.a = m.alloc((size_t)n * Dr), r.logit = m.alloc(n), r.g = m.alloc(n);
    m.be.matmul_forward(r.u, hn, m.param("latent_cot.router.w1"), n, D, Dr);
    m.be.silu_forward(r.a, r.u, (size_t)n * Dr);
    m.be.matmul_forward(r.logit, r.a, m.param("latent_cot.router.w2"), n, Dr, 1);
    m.be.for_each(n, RouterGate{r.logit, m.param("latent_cot.router.b2"), r.g});
    m.flops.fwd += 2.0 * n * (D * Dr + Dr);
    m.flops.other += op_cost::silu((double)n * Dr) + op_cost::sigmoid(n) + n;  // + b2
    return r;
  }

  void forward(Model<Bk>& m, const Batch& b, bool training) override {
    m.flops.reset();
    const int D = m.cfg.dim, V = m.cfg.vocab, K = o_.K, M = K + 1;
    N_ = b.B * b.T;
    supervised_ = 0;
    std::vector<int> sup(N_);
    for (int t = 0; t < N_; t++) {
      check(b.targets[t] < V, "target token id " + std::to_string(b.targets[t]) + " is outside the vocabulary");
      supervised_ += (sup[t] = b.targets[t] >= 0);
    }
    // one store for the whole grid: slot (b, t, k) = b*T*M + t*M + k, order t, depth k
    kv_.init(m.be, m.arena, b.B, b.T * M, m.cfg.layers, D, kDepthLE, training);
    for (int s = 0; s < b.B * b.T * M; s++) kv_.order[s] = (s % (b.T * M)) / M, kv_.depth[s] = s % M;

    steps_.assign(M, Step());
    std::vector<double> reach(N_, 1.0);  // P^k
    kstar_.assign(N_, 0);
    reach_seen_.clear();
    std::vector<int> live(N_);
    std::iota(live.begin(), live.end(), 0);
    const T* z = m.embed(b.inputs, &ids_);  // rows = live tokens (all at k = 0)
    logp_all_ = m.zeros((size_t)M * N_);
    g_all_ = m.zeros((size_t)M * N_);
    for (int k = 0; k <= K; k++) {
      Step& s = steps_[k];
      s.rows = live;
      const int n = (int)live.size();
      PassPlan plan;
      plan.B = b.B, plan.S = b.T * M;
      for (int t : live) plan.slot.push_back((t / b.T) * b.T * M + (t % b.T) * M + k), plan.pos.push_back(t % b.T);
      plan.finish();
      s.d_rows = upload(m, s.rows);
      s.acts = m.forward_pass(plan, kv_, z);
      std::vector<int> tg(n);
      for (int r = 0; r < n; r++) tg[r] = b.targets[live[r]], kstar_[live[r]] = k;
      s.d_targets = upload(m, tg);
      s.ro.want_argmax = false;  // h^k, log p^k[y], in row chunks (chunked_readout.h)
      s.ro.forward(m, s.acts.out(), n, s.d_targets, T(0), training);
      m.be.scatter_rows(logp_all_ + (size_t)k * N_, 1, s.ro.logp, 1, s.d_rows, n, 1);
      if (k == K) break;
      s.router = router(m, s.ro.hn, n);
      m.be.scatter_rows(g_all_ + (size_t)k * N_, 1, s.router.g, 1, s.d_rows, n, 1);
      std::vector<double> gh(n);
      m.be.to_host(gh.data(), s.router.g, n);
      // the next step runs for the cells whose reach stays >= tau; its input is h^k of those rows
      std::vector<int> next, keep;
      for (int r = 0; r < n; r++) {
        reach[live[r]] *= gh[r];
        reach_seen_.push_back(reach[live[r]]);
        if (reach[live[r]] >= o_.tau) next.push_back(live[r]), keep.push_back(r);
      }
      s.d_keep = upload(m, keep);
      s.n_next = (int)keep.size();
      T* znext = m.alloc((size_t)s.n_next * D);
      m.be.gather_rows(znext, D, s.ro.hn, D, s.d_keep, s.n_next, D);  // z^{k+1} = h^k
      z = znext;
      live = next;
      if (live.empty()) break;
    }
    // the mixture loss and its derivatives, one thread per token
    d_kstar_ = upload(m, kstar_);
    d_sup_ = upload(m, sup);
    loss_lm_ = m.alloc(N_), loss_ada_ = m.alloc(N_);
    g_logp_all_ = m.alloc((size_t)M * N_), g_g_all_ = m.alloc((size_t)M * N_);
    const T* sg_logp = logp_all_;  // sg(log p^k[y]): the same values, no gradient taken through them
    if (freeze_sg_) {              // tests: the values of the first forward since freeze_stop_gradient(true)
      if (frozen_sg_.empty()) {
        frozen_sg_.resize((size_t)M * N_);
        m.be.to_host(frozen_sg_.data(), logp_all_, frozen_sg_.size());
      }
      check(frozen_sg_.size() == (size_t)M * N_, "latent_cot: frozen stop-gradient values are for another batch shape");
      T* f = m.alloc(frozen_sg_.size());
      m.be.to_device(f, frozen_sg_.data(), frozen_sg_.size());
      sg_logp = f;
    }
    m.be.for_each(N_, LatentCotToken<T>{N_, K, d_kstar_, d_sup_, logp_all_, sg_logp, g_all_, T(lambda_now_), T(o_.beta),
                                        T(supervised_ ? 1.0 / supervised_ : 0.0), loss_lm_, loss_ada_, g_logp_all_,
                                        g_g_all_});
  }

  void backward(Model<Bk>& m, double loss_scale) override {
    const int D = m.cfg.dim, Dr = router_hidden(m.cfg);
    T* dz_next = nullptr;  // dL/dz^{k+1} for the rows that ran step k+1 (n_next, D)
    for (int k = (int)steps_.size() - 1; k >= 0; k--) {
      Step& s = steps_[k];
      if (s.rows.empty()) continue;
      const int n = (int)s.rows.size();
      T* dx = m.zeros((size_t)n * D);  // dL/dz^k of these rows: carried to step k-1
      auto scratch = m.scratch();      // the rest: this step's temporaries
      T* glp = m.alloc(n);
      m.be.gather_rows(glp, 1, g_logp_all_ + (size_t)k * N_, 1, s.d_rows, n, 1);
      if (loss_scale != 1.0) m.be.scale(glp, T(loss_scale), n);
      T* dhn = m.zeros((size_t)n * D);
      if (s.router.g) {  // router: dlogit = dL/dg g (1 - g)
        T* gg = m.alloc(n);
        m.be.gather_rows(gg, 1, g_g_all_ + (size_t)k * N_, 1, s.d_rows, n, 1);
        if (loss_scale != 1.0) m.be.scale(gg, T(loss_scale), n);
        T* dlogit = m.alloc(n);
        m.be.for_each(n, RouterGateBackward{s.router.g, gg, dlogit});
        int* zero = m.arena.template zeros<int>(n);
        m.be.embedding_backward(m.grad("latent_cot.router.b2"), zero, dlogit, n, 1, T(1));
        T* da = m.alloc((size_t)n * Dr);
        m.be.matmul_backward(da, m.grad("latent_cot.router.w2"), dlogit, s.router.a, m.param("latent_cot.router.w2"), n,
                             Dr, 1);
        T* du = m.alloc((size_t)n * Dr);
        m.be.silu_backward(du, da, s.router.u, (size_t)n * Dr);
        m.be.matmul_backward(dhn, m.grad("latent_cot.router.w1"), du, s.ro.hn, m.param("latent_cot.router.w1"), n, D, Dr);
      }
      if (dz_next && s.n_next > 0)  // z^{k+1} = h^k: the next step's input gradient lands on these rows' hn
        m.be.scatter_add_rows(dhn, D, dz_next, D, s.d_keep, s.n_next, D);
      typename ChunkedReadout<Bk>::Grad gr;  // the mixture's dL/dlog p^k[y], the router's and z^{k+1}'s dL/dh^k
      gr.logp = glp, gr.hn = dhn;
      s.ro.backward(m, gr, dx);
      m.backward_pass(s.acts, kv_, dx);  // dx: dL/dz^k of these rows
      dz_next = dx;
    }
    m.embed_backward(ids_, dz_next, N_);
  }

  StepStats stats(Model<Bk>& m) override {
    StepStats s;
    double l[2];  // sum of the LM loss, of the halting loss: one wait
    m.be.sums({{loss_lm_, (size_t)N_}, {loss_ada_, (size_t)N_}}, l);
    const double lm = l[0], ada = l[1];
    s.ce = supervised_ ? lm / supervised_ : 0;
    s.loss = supervised_ ? (lm + lambda_now_ * ada) / supervised_ : 0;
    s.tokens = supervised_;
    s.fwd_flops = m.flops.fwd;
    s.train_flops = 3 * m.flops.fwd;
    s.fwd_other_flops = m.flops.other;
    s.train_other_flops = 3 * m.flops.other;
    double steps = 0;
    std::vector<double> hist(o_.K + 1, 0.0);
    for (int k : kstar_) steps += k + 1, hist[k] += 1.0 / N_;
    s.halting = {{"passes", steps / N_}, {"l_ada", supervised_ ? ada / supervised_ : 0}, {"lambda", lambda_now_}};
    for (int k = 0; k <= o_.K; k++) s.halting.push_back({"exit_" + std::to_string(k + 1), hist[k]});
    return s;
  }

  void per_token(Model<Bk>& m, std::vector<double>& nll, std::vector<double>& passes) override {
    std::vector<double> l(N_);
    std::vector<int> sup(N_);
    m.be.to_host(l.data(), loss_lm_, N_);
    m.be.to_host(sup.data(), d_sup_, N_);
    nll.assign(N_, std::nan(""));
    passes.assign(N_, 0);
    for (int t = 0; t < N_; t++) {
      if (sup[t]) nll[t] = l[t];
      passes[t] = kstar_[t] + 1;
    }
  }

  // The mixture q_t = sum_k pi^k p^k (what the decoder emits).
  void probabilities(Model<Bk>& m, std::vector<double>& probs) override {
    const int V = m.cfg.vocab, M = o_.K + 1;
    std::vector<double> g((size_t)M * N_);
    m.be.to_host(g.data(), g_all_, g.size());
    std::vector<double> reach(N_, 1.0);
    probs.assign((size_t)N_ * V, 0.0);
    for (int k = 0; k < (int)steps_.size(); k++) {
      const Step& s = steps_[k];
      if (s.rows.empty()) continue;
      std::vector<double> p;
      s.ro.probabilities(m, p);
      for (size_t r = 0; r < s.rows.size(); r++) {
        const int t = s.rows[r];
        const double gk = g[(size_t)k * N_ + t];
        const double pi = k < kstar_[t] ? reach[t] * (1 - gk) : reach[t];
        for (int v = 0; v < V; v++) probs[(size_t)t * V + v] += pi * p[r * V + v];
        reach[t] *= gk;
      }
    }
  }

  // Views of the last forward for tests: k* per token (0-based), and every
  // reach probability P^{k+1} that was compared with tau.
  const std::vector<int>& last_step() const { return kstar_; }
  const std::vector<double>& reach_seen() const { return reach_seen_; }
  void set_tau(double tau) { o_.tau = tau; }
  void set_lambda(double lambda) { o_.lambda = lambda_now_ = lambda; }
  // Test hook: L_ada multiplies by sg(p^k[y])^beta, which the analytic gradient
  // holds constant but finite differences of the loss would move. While frozen,
  // the values inside sg() are those of the first forward after
  // freeze_stop_gradient(true), so the loss's finite differences hold them
  // constant too (valid while the same cells run: the tests check last_step()).
  void freeze_stop_gradient(bool on) { freeze_sg_ = on, frozen_sg_.clear(); }

  std::unique_ptr<Decoder<Bk>> decoder(Model<Bk>& m, int max_len) override;

  // sigmoid of the router logit plus its bias.
  struct RouterGate {
    const T* logit;
    const T* bias;
    T* g;
    HD void operator()(int r) const { g[r] = hd_sigmoid(logit[r] + bias[0]); }
  };
  struct RouterGateBackward {
    const T* g;
    const T* dg;
    T* dlogit;
    HD void operator()(int r) const { dlogit[r] = dg[r] * g[r] * (T(1) - g[r]); }
  };

 private:
  struct Step {
    std::vector<int> rows;  // tokens whose cell (t, k) ran
    int* d_rows = nullptr;
    int* d_targets = nullptr;
    int* d_keep = nullptr;  // rows of this step whose token runs step k+1
    int n_next = 0;
    typename Model<Bk>::PassActs acts;
    ChunkedReadout<Bk> ro;  // h^k and log p^k[y] (the logits, unless recomputed)
    RouterActs router;
  };
  int* upload(Model<Bk>& m, const std::vector<int>& v) {
    int* d = m.arena.template alloc<int>(std::max<size_t>(v.size(), 1));
    m.be.to_device(d, v.data(), v.size());
    return d;
  }

  LatentCotOptions o_;
  double lambda_now_;  // lambda, or 0 during the warm-up (set_step)
  int N_ = 0, supervised_ = 0;
  int *ids_ = nullptr, *d_kstar_ = nullptr, *d_sup_ = nullptr;
  KvStore<Bk> kv_;
  std::vector<Step> steps_;
  std::vector<int> kstar_;
  std::vector<double> reach_seen_;
  bool freeze_sg_ = false;         // test hook: see freeze_stop_gradient
  std::vector<double> frozen_sg_;  // (K+1) x N frozen log p^k[y]
  T *logp_all_ = nullptr, *g_all_ = nullptr, *loss_lm_ = nullptr, *loss_ada_ = nullptr, *g_logp_all_ = nullptr,
    *g_g_all_ = nullptr;
};

// Decoding: one KV store over the (position, step) grid is the cache. A new
// token runs its steps while its reach stays >= tau and emits the mixture of
// its steps' distributions.
template <class Bk>
class LatentCotDecoder : public Decoder<Bk> {
 public:
  using T = typename Bk::Real;
  LatentCotDecoder(LatentCotMethod<Bk>& meth, Model<Bk>& m, int max_len) : Decoder<Bk>(m, max_len), meth_(meth) {
    M_ = meth.options().K + 1;
    kv_.init(m.be, this->cache_, 1, max_len * M_, m.cfg.layers, m.cfg.dim, kDepthLE, false);
    for (int s = 0; s < kv_.S; s++) kv_.order[s] = s / M_, kv_.depth[s] = s % M_;
  }

 protected:
  void run(int token, int t) override {
    Model<Bk>& m = this->m_;
    const int V = m.cfg.vocab;
    const T* z = m.embed({token});
    this->probs_.assign(V, 0.0);
    double reach = 1;
    for (int k = 0; k < M_; k++) {
      const PassPlan plan = this->one_row(kv_.S, t * M_ + k, t);
      auto ro = m.readout_forward(m.forward_pass(plan, kv_, z).out(), 1);
      std::vector<double> p;
      probabilities_to_host(m, ro.logits, 1, p);
      double g = 0;
      bool last = k == M_ - 1;
      if (!last) {
        auto r = meth_.router(m, ro.hn, 1);
        T gh;
        m.be.to_host(&gh, r.g, 1);
        g = gh;
        last = reach * g < meth_.options().tau;
      }
      const double pi = last ? reach : reach * (1 - g);
      for (int v = 0; v < V; v++) this->probs_[v] += pi * p[v];
      this->passes_ = k + 1;
      if (last) break;
      reach *= g;
      z = ro.hn;  // z^{k+1} = h^k
    }
  }

 private:
  LatentCotMethod<Bk>& meth_;
  KvStore<Bk> kv_;
  int M_ = 0;
};

template <class Bk>
std::unique_ptr<Decoder<Bk>> LatentCotMethod<Bk>::decoder(Model<Bk>& m, int max_len) {
  return std::make_unique<LatentCotDecoder<Bk>>(*this, m, max_len);
}

}  // namespace ada
