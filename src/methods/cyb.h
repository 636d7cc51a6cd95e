// cyb: Catch Your Breath (Galashov et al. 2025; methods.md section 10):
// adaptive pause tokens. The model may answer "don't know" (DK, an extra
// output class) to get one more pause step before it must predict.
//
// Training runs every step in parallel. With W = --pauses + 1 steps per
// token, the sequence is [x_1 P..P x_2 P..P ...] (W-1 learned <PAUSE> inputs
// after every token, own positions); step i of token t is row t W + i - 1:
//   o_{t,i} = head(h) (V logits) and o_DK = w_DK . RMSNorm(h) + b_DK
//   d_i = softmax(o)[DK] = sigmoid(o_DK - LSE(o_V))     probability of abstaining
//   r_i = softmax(o_V)[y_t]                              target probability given an answer
// The model stops at the first step where it answers, or where the world
// forces an answer (deadline w ~ omega); with a per-step discount gamma_i:
//   D_0 = 1,  D_i = prod_{j<=i} d_j,  Omega_{>i} = sum_{w>i} omega_w
//   Pr(S = i) = D_{i-1} [ (1 - d_i) Omega_{>i} + omega_i ]
//   A = sum_i Pr(S = i) gamma_i r_i,      loss_t = -log A
// Backward (methods.md 10.3, in log space), a_i = [(1-d_i) Omega_{>i} + omega_i] gamma_i r_i:
//   Q_{W+1} = 0,  Q_i = a_i + d_i Q_{i+1}                    (A = Q_1)
//   dA/dd_i = D_{i-1} (Q_{i+1} - Omega_{>i} gamma_i r_i),    dA/dr_i = Pr(S=i) gamma_i
//   into logits: d depends on o_DK (+) and on LSE(o_V) (-): d(1-d) each; r on the softmax.
// The V logits are formed, read (LSE, log r, argmax) and differentiated one
// chunk of rows at a time (chunked_readout.h).
// Inference: at each step the model answers if d <= 1/2 (greedy) or at step W,
// emitting softmax(o_V) of that step; `ce` reports that prediction's loss.
//
// The DK bias b_DK (no weight decay) starts at logit(d_init) + log V: at
// initialisation the V logits are near zero, so LSE(o_V) ~ log V and
// d ~ sigmoid(b_DK - log V) = d_init (--cyb-dk-init). Without it d starts near
// 1/(V+1), where its gradient, carrying d (1 - d), is too small for pausing
// ever to be learned (docs/methods/cyb.md).
//
// Which earlier positions a step sees (methods.md 10.7, ambiguity 1):
//   --cyb-visibility all  (default, faithful): every earlier position,
//       including earlier tokens' pauses; decoding then inserts all W-1
//       pauses after every token to stay consistent with training (no saving);
//   --cyb-visibility own: pauses are visible only inside their own token's
//       window, so decoding can stop pausing as soon as the model answers and
//       still see exactly what training saw (the saving is real).
#pragma once
#include <cmath>

#include "core/hd_math.h"
#include "methods/chunked_readout.h"
#include "methods/method.h"

namespace ada {

struct CybOptions {
  int pauses = 3;                   // W - 1
  double gamma0 = 0.95;             // gamma_i = gamma0^(i-1)
  std::string deadline = "uniform"; // omega: uniform (methods.md 10.5) | last (forced answer only at W)
  double dk_init = 0.05;            // initial DK probability d (sets the DK bias; docs/methods/cyb.md)
  std::string visibility = "all";   // all | own
  // First training steps with the anytime loss (every step's prediction
  // trained alike, the DK head untouched): docs/methods/cyb.md, "The pause
  // rows must be trained before the DK head can use them". 0 = none, -1 = half of --steps.
  long long warmup = 0;
};

constexpr int kCybMaxSteps = 16;

// log(e^a + e^b) with -inf allowed.
template <class T>
HD inline T log_add(T a, T b) {
  const T m = a > b ? a : b;
  if (m == -INFINITY) return m;
  return m + hd_log(hd_exp(a - m) + hd_exp(b - m));
}
// log sigmoid(x) = -softplus(-x), computed without overflow.
template <class T>
HD inline T log_sigmoid(T x) {
  return x >= 0 ? -hd_log(T(1) + hd_exp(-x)) : x - hd_log(T(1) + hd_exp(x));
}

// The per-token CYB loss and its gradient (one thread per real token on the
// GPU). Inputs per step i of token t (row t W + i): x = o_DK - LSE(o_V) and
// logp = log r. Outputs per row: dL/dlogp, dL/dLSE, dL/do_DK (times scale);
// per token: the loss, the greedy answering step and its -log r.
template <class T>
struct CybToken {
  int W;
  const T* x;
  const T* logp;
  const int* supervised;  // (tokens) 1 if the token has a target
  const T* log_omega;     // (W) log omega_i
  const T* log_omega_gt;  // (W) log Omega_{>i}
  const T* log_gamma;     // (W) log gamma_i
  T scale;                // d(loss)/d(loss_t): loss_scale / supervised tokens
  T* loss;                // (tokens) -log A
  T* greedy_nll;          // (tokens) -log r at the greedy answering step
  T* steps;               // (tokens) the greedy answering step (1..W)
  T* g_logp;              // (rows)
  T* g_lse;               // (rows)
  T* g_dk;                // (rows)
  int anytime;            // 1 during the warm-up: loss_t = -(1/W) sum_i log r_i, no gradient to the DK logit

  HD void operator()(int t) const {
    const T* xt = x + (size_t)t * W;
    const T* lr = logp + (size_t)t * W;
    int stop = W;
    for (int i = 0; i < W; i++)
      if (xt[i] <= T(0)) {  // d <= 1/2: answer here
        stop = i + 1;
        break;
      }
    steps[t] = T(stop);
    greedy_nll[t] = -lr[stop - 1];
    const size_t r0 = (size_t)t * W;
    if (!supervised[t]) {
      loss[t] = 0;
      for (int i = 0; i < W; i++) g_logp[r0 + i] = g_lse[r0 + i] = g_dk[r0 + i] = 0;
      return;
    }
    if (anytime) {  // warm-up: loss_t = -(1/W) sum_i log r_i; dl/dlog r_i = -1/W; d untouched
      T sum = 0;
      for (int i = 0; i < W; i++) {
        sum += lr[i];
        g_logp[r0 + i] = -scale / T(W);
        g_lse[r0 + i] = g_dk[r0 + i] = 0;
      }
      loss[t] = -sum / T(W);
      return;
    }
    T ld[kCybMaxSteps], l1d[kCybMaxSteps], lcoef[kCybMaxSteps], logD[kCybMaxSteps + 1], la[kCybMaxSteps];
    logD[0] = 0;
    T logA = -INFINITY;
    for (int i = 0; i < W; i++) {
      ld[i] = log_sigmoid(xt[i]);    // log d_i
      l1d[i] = log_sigmoid(-xt[i]);  // log (1 - d_i)
      lcoef[i] = log_add(l1d[i] + log_omega_gt[i], log_omega[i]);
      la[i] = lcoef[i] + log_gamma[i] + lr[i];
      logA = log_add(logA, logD[i] + la[i]);
      logD[i + 1] = logD[i] + ld[i];
    }
    loss[t] = -logA;
    T logQ = -INFINITY;  // log Q_{i+1}, walked down from Q_{W+1} = 0
    for (int i = W - 1; i >= 0; i--) {
      // dl/dlogp_i = -(1/A) dA/dr_i r_i = -Pr(S=i) gamma_i r_i / A
      const T w = hd_exp(logD[i] + la[i] - logA);
      // dl/dd_i = -(1/A) D_{i-1} (Q_{i+1} - Omega_{>i} gamma_i r_i)
      const T dd = -(hd_exp(logD[i] + logQ - logA) - hd_exp(logD[i] + log_omega_gt[i] + log_gamma[i] + lr[i] - logA));
      const T dx = dd * hd_exp(ld[i] + l1d[i]);  // d d/dx = d (1 - d)
      g_logp[r0 + i] = -w * scale;
      g_dk[r0 + i] = dx * scale;
      g_lse[r0 + i] = -dx * scale;
      logQ = log_add(la[i], ld[i] + logQ);  // Q_i = a_i + d_i Q_{i+1}
    }
  }
};

template <class Bk>
class CybMethod : public Method<Bk> {
 public:
  using T = typename Bk::Real;
  explicit CybMethod(const CybOptions& o) : o_(o), W_(o.pauses + 1) {
    check(o.pauses >= 0 && W_ <= kCybMaxSteps, "--pauses must be in [0, " + std::to_string(kCybMaxSteps - 1) + "] for cyb");
    check(o.gamma0 > 0 && o.gamma0 <= 1, "--cyb-gamma must be in (0, 1]");
    check(o.deadline == "last" || o.deadline == "uniform", "--cyb-deadline must be last or uniform");
    check(o.visibility == "all" || o.visibility == "own", "--cyb-visibility must be all or own");
    check(o.dk_init > 0 && o.dk_init < 1, "--cyb-dk-init must be in (0, 1) (got " + std::to_string(o.dk_init) + ")");
  }
  std::string name() const override { return "cyb"; }
  bool graph_safe() const override { return true; }  // nothing read back mid-step: --cuda-graph 1 records it
  // The warm-up (CybOptions::warmup): the anytime loss before step `warm`.
  void set_step(long long step, long long total) override {
    const long long warm = o_.warmup >= 0 ? o_.warmup : total / 2;
    anytime_ = step < warm;
  }
  int max_passes() const override { return 1; }
  const CybOptions& options() const { return o_; }
  int window() const { return W_; }
  void add_params(ParamLayout& lay, const ModelConfig& c) override {
    lay.add("pause.embedding", {1, c.dim}, Init::Normal, 0.02, false);
    lay.add("cyb.dk_head.weight", {1, c.dim}, Init::Normal, 0.02, true);  // the extra output row for DK
    // b_DK = logit(d_init) + log V, so that d = sigmoid(b_DK - LSE(o_V)) ~ d_init at step 0
    const double b = std::log(o_.dk_init / (1 - o_.dk_init)) + std::log((double)c.vocab);
    lay.add("cyb.dk_head.bias", {1}, Init::Constant, b, false);
  }

  // The world's deadline distribution and the discounts, as logs (host).
  void schedule(std::vector<double>& lw, std::vector<double>& lgt, std::vector<double>& lg) const {
    lw.assign(W_, -INFINITY), lgt.assign(W_, -INFINITY), lg.assign(W_, 0);
    std::vector<double> w(W_, 0.0);
    if (o_.deadline == "last") w[W_ - 1] = 1;
    else for (auto& v : w) v = 1.0 / W_;
    for (int i = 0; i < W_; i++) {
      double gt = 0;
      for (int j = i + 1; j < W_; j++) gt += w[j];
      lw[i] = w[i] > 0 ? std::log(w[i]) : -INFINITY;
      lgt[i] = gt > 0 ? std::log(gt) : -INFINITY;
      lg[i] = i * std::log(o_.gamma0);
    }
  }

  void forward(Model<Bk>& m, const Batch& b, bool training) override {
    m.flops.reset();
    const int D = m.cfg.dim, V = m.cfg.vocab, S = b.T * W_;
    check(S <= m.cfg.max_seq, "cyb: --seq " + std::to_string(b.T) + " x " + std::to_string(W_) +
                                  " steps exceeds the model context " + std::to_string(m.cfg.max_seq));
    n_ = b.B * b.T;
    rows_ = b.B * S;
    std::vector<int> real, pause, tg(rows_), sup(n_);
    for (int r = 0; r < rows_; r++) {
      (r % W_ == 0 ? real : pause).push_back(r);
      tg[r] = b.targets[r / W_];
      check(tg[r] < V, "target token id " + std::to_string(tg[r]) + " is outside the vocabulary");
    }
    supervised_ = 0;
    for (int t = 0; t < n_; t++) supervised_ += (sup[t] = b.targets[t] >= 0);
    d_real_ = upload(m, real), d_pause_ = upload(m, pause), d_tg_ = upload(m, tg), d_sup_ = upload(m, sup);
    d_zero_ = m.arena.template zeros<int>(rows_);  // the row index into the 1-row tables (pause embedding, DK bias)
    npause_ = (int)pause.size();

    T* x = m.alloc((size_t)rows_ * D);  // E[x_t] at real rows, the pause embedding at pause rows
    m.be.scatter_rows(x, D, m.embed(b.inputs, &ids_), D, d_real_, n_, D);
    T* xp = m.alloc((size_t)npause_ * D);
    m.be.embedding_forward(xp, d_zero_, m.param("pause.embedding"), npause_, D, T(1));
    m.be.scatter_rows(x, D, xp, D, d_pause_, npause_, D);

    // one pass over the flattened sequence; order = position = flattened index
    kv_.init(m.be, m.arena, b.B, S, m.cfg.layers, D, o_.visibility == "own" ? kOwnGroup : kAnyDepth, training);
    if (o_.visibility == "own")
      for (int r = 0; r < rows_; r++) kv_.depth[r] = (r % W_ == 0) ? -1 : (r % S) / W_;
    acts_ = m.forward_pass(PassPlan::dense(b.B, S, S), kv_, x);
    // o_V = head(hn), LSE(o_V), log r = o_V[y] - LSE and the argmax, in row chunks (chunked_readout.h)
    ro_ = ChunkedReadout<Bk>();
    ro_.forward(m, acts_.out(), rows_, d_tg_, T(0), training);
    lse_ = ro_.lse, logp_ = ro_.logp;
    dk_ = m.alloc(rows_);  // o_DK = b_DK + w_DK . hn   (rows)
    m.be.embedding_forward(dk_, d_zero_, m.param("cyb.dk_head.bias"), rows_, 1, T(1));
    m.be.matmul_forward(dk_, ro_.hn, m.param("cyb.dk_head.weight"), rows_, D, 1, true);
    m.flops.fwd += 2.0 * rows_ * D;
    xdk_ = m.alloc(rows_);
    m.flops.other += op_cost::elementwise(rows_);  // o_DK - LSE
    m.be.copy(xdk_, dk_, rows_);
    m.be.axpy(xdk_, T(-1), lse_, rows_);  // x = o_DK - LSE(o_V): d = sigmoid(x)

    std::vector<double> lw, lgt, lg;
    schedule(lw, lgt, lg);
    T* dsched = m.alloc(3 * W_);
    m.be.to_device(dsched, lw.data(), W_);
    m.be.to_device(dsched + W_, lgt.data(), W_);
    m.be.to_device(dsched + 2 * W_, lg.data(), W_);
    loss_ = m.alloc(n_), greedy_ = m.alloc(n_), steps_ = m.alloc(n_);
    g_logp_ = m.alloc(rows_), g_lse_ = m.alloc(rows_), g_dk_ = m.alloc(rows_);
    // the loss and its gradient for d(sum_t loss_t / supervised); backward rescales
    m.be.for_each(n_, CybToken<T>{W_, xdk_, logp_, d_sup_, dsched, dsched + W_, dsched + 2 * W_,
                                  T(supervised_ ? 1.0 / supervised_ : 0.0), loss_, greedy_, steps_, g_logp_, g_lse_,
                                  g_dk_, anytime_ && training ? 1 : 0});
  }

  void backward(Model<Bk>& m, double loss_scale) override {
    const int D = m.cfg.dim;
    if (loss_scale != 1.0) {
      m.be.scale(g_logp_, T(loss_scale), rows_);
      m.be.scale(g_lse_, T(loss_scale), rows_);
      m.be.scale(g_dk_, T(loss_scale), rows_);
    }
    T* dx = m.zeros((size_t)rows_ * D);
    {
      auto scratch = m.scratch();  // dhn: dead after the readout's backward
      T* dhn = m.alloc((size_t)rows_ * D);  // from the DK logit o_DK = w_DK . hn
      m.be.matmul_backward(dhn, m.grad("cyb.dk_head.weight"), g_dk_, ro_.hn, m.param("cyb.dk_head.weight"), rows_, D, 1);
      m.be.embedding_backward(m.grad("cyb.dk_head.bias"), d_zero_, g_dk_, rows_, 1, T(1));  // db_DK = sum_rows dl/do_DK
      // the V logits: dz = dl/dlog r (onehot(y) - p) + dl/dLSE p, chunk by chunk (chunked_readout.h)
      typename ChunkedReadout<Bk>::Grad gr;
      gr.logp = g_logp_, gr.lse = g_lse_, gr.hn = dhn;
      ro_.backward(m, gr, dx);
    }
    m.backward_pass(acts_, kv_, dx);
    T* g = m.alloc((size_t)rows_ * D);
    m.be.gather_rows(g, D, dx, D, d_real_, n_, D);
    m.embed_backward(ids_, g, n_);
    m.be.gather_rows(g, D, dx, D, d_pause_, npause_, D);
    m.be.embedding_backward(m.grad("pause.embedding"), d_zero_, g, npause_, D, T(1));
  }

  StepStats stats(Model<Bk>& m) override {
    StepStats s;
    std::vector<double> nll, steps;
    per_token(m, nll, steps);
    double ce = 0, st = 0;
    for (int t = 0; t < n_; t++) {
      if (!std::isnan(nll[t])) ce += nll[t];
      st += steps[t];
    }
    s.loss = supervised_ ? m.be.sum(loss_, n_) / supervised_ : 0;
    s.ce = supervised_ ? ce / supervised_ : 0;
    s.tokens = supervised_;
    s.fwd_flops = m.flops.fwd;
    s.train_flops = 3 * m.flops.fwd;
    s.fwd_other_flops = m.flops.other;
    s.train_other_flops = 3 * m.flops.other;
    // compute per token at inference: all W steps when earlier pauses stay visible, the used ones otherwise
    // pauses: greedy pauses per token (steps - 1); dk: mean DK probability d over the steps
    // 1..W-1 where abstaining is possible (the one step when W = 1)
    std::vector<double> d;
    dk_probabilities(m, d);
    double dk = 0;
    const int Wd = std::max(W_ - 1, 1);
    for (int t = 0; t < n_; t++)
      for (int i = 0; i < Wd; i++) dk += d[(size_t)t * W_ + i];
    s.halting = {{"passes", o_.visibility == "own" ? st / n_ : (double)W_},
                 {"steps", st / n_},
                 {"pauses", st / n_ - 1},
                 {"dk", n_ ? dk / ((double)n_ * Wd) : 0.0}};
    // Whether waiting could pay at all (docs/methods/cyb.md, "Does waiting
    // pay?"): nll_step<i> is the mean -log r_i of the supervised tokens had
    // they answered at step i (i = 1 the token's own row, i > 1 its pauses),
    // and wait_pays the fraction of them for which some later step's
    // discounted target probability beats answering now: max_{i>1} gamma_i r_i > r_1.
    std::vector<double> logr;
    target_log_probs(m, logr);
    std::vector<double> nll_at(W_, 0.0);
    double pays = 0;
    const double log_gamma0 = std::log(o_.gamma0);
    for (int t = 0; t < n_; t++) {
      if (std::isnan(nll[t])) continue;  // not supervised (per_token above)
      const double* lr = &logr[(size_t)t * W_];
      bool better = false;
      for (int i = 0; i < W_; i++) {
        nll_at[i] -= lr[i];
        if (i > 0 && i * log_gamma0 + lr[i] > lr[0]) better = true;
      }
      pays += better;
    }
    for (int i = 0; i < W_; i++)
      s.halting.push_back({"nll_step" + std::to_string(i + 1), supervised_ ? nll_at[i] / supervised_ : 0.0});
    s.halting.push_back({"wait_pays", supervised_ ? pays / supervised_ : 0.0});
    return s;
  }

  // d = sigmoid(o_DK - LSE(o_V)) of every row (step i of token t at t W + i - 1), on the host.
  void dk_probabilities(Model<Bk>& m, std::vector<double>& d) {
    d.resize(rows_);
    m.be.to_host(d.data(), xdk_, rows_);
    for (auto& v : d) v = 1 / (1 + std::exp(-v));
  }
  // log r = log softmax(o_V)[y_t] of every row, on the host.
  void target_log_probs(Model<Bk>& m, std::vector<double>& logr) {
    logr.resize(rows_);
    m.be.to_host(logr.data(), logp_, rows_);
  }

  void per_token(Model<Bk>& m, std::vector<double>& nll, std::vector<double>& steps) override {
    std::vector<double> g(n_), sp(n_);
    std::vector<int> sup(n_);
    m.be.to_host(g.data(), greedy_, n_);
    m.be.to_host(sp.data(), steps_, n_);
    m.be.to_host(sup.data(), d_sup_, n_);
    nll.assign(n_, std::nan(""));
    for (int t = 0; t < n_; t++)
      if (sup[t]) nll[t] = g[t];
    steps = sp;
  }

  // The distribution inference emits: softmax(o_V) of the greedy answering step.
  void probabilities(Model<Bk>& m, std::vector<double>& probs) override {
    const int V = m.cfg.vocab;
    std::vector<double> sp(n_), all;
    m.be.to_host(sp.data(), steps_, n_);
    ro_.probabilities(m, all);
    probs.resize((size_t)n_ * V);
    for (int t = 0; t < n_; t++) {
      const size_t r = (size_t)t * W_ + (size_t)sp[t] - 1;
      std::copy(all.begin() + r * V, all.begin() + (r + 1) * V, probs.begin() + (size_t)t * V);
    }
  }
  // The argmax of o_V at the greedy answering step.
  void per_token_argmax(Model<Bk>& m, std::vector<int>& argmax) override {
    std::vector<double> sp(n_);
    std::vector<int> all;
    m.be.to_host(sp.data(), steps_, n_);
    ro_.argmax(m, all);
    argmax.resize(n_);
    for (int t = 0; t < n_; t++) argmax[t] = all[(size_t)t * W_ + (size_t)sp[t] - 1];
  }

  std::unique_ptr<Decoder<Bk>> decoder(Model<Bk>& m, int max_len) override;

  // View of the last forward, for tests: x = o_DK - LSE(o_V) of every step,
  // row t W + i - 1 (the greedy rule answers at the first step with x <= 0).
  void abstain_logits(Model<Bk>& m, std::vector<double>& x) const {
    x.resize(rows_);
    m.be.to_host(x.data(), xdk_, rows_);
  }

 private:
  int* upload(Model<Bk>& m, const std::vector<int>& v) {
    int* d = m.arena.template alloc<int>(std::max<size_t>(v.size(), 1));
    m.be.to_device(d, v.data(), v.size());
    return d;
  }
  CybOptions o_;
  int W_;
  bool anytime_ = false;  // in the warm-up (set_step)
  int n_ = 0, rows_ = 0, npause_ = 0, supervised_ = 0;
  int *ids_ = nullptr, *d_real_ = nullptr, *d_pause_ = nullptr, *d_tg_ = nullptr, *d_sup_ = nullptr, *d_zero_ = nullptr;
  KvStore<Bk> kv_;
  typename Model<Bk>::PassActs acts_;
  ChunkedReadout<Bk> ro_;  // hn, o_V's LSE and log r, the argmax (the logits, unless recomputed)
  T *dk_ = nullptr, *lse_ = nullptr, *logp_ = nullptr, *xdk_ = nullptr, *loss_ = nullptr, *greedy_ = nullptr,
    *steps_ = nullptr, *g_logp_ = nullptr, *g_lse_ = nullptr, *g_dk_ = nullptr;
};

// Decoding. Step i of token t is position t W + i - 1 (as in training). With
// visibility "own" the decoder runs one row at a time and stops at the first
// step whose d <= 1/2: later tokens never see these pauses, so the cache needs
// no more. With "all", later tokens see every pause, so all W rows of a token
// are run (one pass), and the emitted step is still the greedy one.
template <class Bk>
class CybDecoder : public Decoder<Bk> {
 public:
  using T = typename Bk::Real;
  CybDecoder(CybMethod<Bk>& meth, Model<Bk>& m, int max_len) : Decoder<Bk>(m, max_len), W_(meth.window()) {
    check(max_len * W_ <= m.cfg.max_seq, "cyb decoder: " + std::to_string(max_len) + " tokens x " + std::to_string(W_) +
                                             " steps exceed the model context " + std::to_string(m.cfg.max_seq));
    own_ = meth.options().visibility == "own";
    kv_.init(m.be, this->cache_, 1, max_len * W_, m.cfg.layers, m.cfg.dim, own_ ? kOwnGroup : kAnyDepth, false);
    zero_ = this->cache_.template zeros<int>(W_);
  }

 protected:
  void run(int token, int t) override {
    Model<Bk>& m = this->m_;
    const int D = m.cfg.dim, V = m.cfg.vocab;
    const int rows = own_ ? 1 : W_;
    steps_ = 0;
    for (int i = 0; i < W_;) {
      PassPlan plan;
      plan.B = 1, plan.S = kv_.S;
      for (int k = 0; k < rows; k++) {
        const int slot = t * W_ + i + k;
        plan.slot.push_back(slot), plan.pos.push_back(slot);
        if (own_) kv_.depth[slot] = (i + k == 0) ? -1 : t;
      }
      plan.finish();
      T* x = m.alloc((size_t)rows * D);
      for (int k = 0; k < rows; k++)
        m.be.copy(x + (size_t)k * D, i + k == 0 ? m.embed({token}) : m.param("pause.embedding"), D);
      auto ro = m.readout_forward(m.forward_pass(plan, kv_, x).out(), rows);
      T* dk = m.alloc(rows);  // o_DK = b_DK + w_DK . hn
      m.be.embedding_forward(dk, zero_, m.param("cyb.dk_head.bias"), rows, 1, T(1));
      m.be.matmul_forward(dk, ro.hn, m.param("cyb.dk_head.weight"), rows, D, 1, true);
      m.flops.fwd += 2.0 * rows * D;
      std::vector<double> z((size_t)rows * V), o(rows);
      m.be.to_host(z.data(), ro.logits, z.size());
      m.be.to_host(o.data(), dk, rows);
      for (int k = 0; k < rows; k++) {  // answer at the first step with d <= 1/2, or at step W
        double mx = z[(size_t)k * V];
        for (int v = 1; v < V; v++) mx = std::max(mx, z[(size_t)k * V + v]);
        double sum = 0;
        for (int v = 0; v < V; v++) sum += std::exp(z[(size_t)k * V + v] - mx);
        const double lse = mx + std::log(sum);
        if (!steps_ && (o[k] - lse <= 0 || i + k == W_ - 1)) {
          steps_ = i + k + 1;
          this->probs_.resize(V);
          for (int v = 0; v < V; v++) this->probs_[v] = std::exp(z[(size_t)k * V + v] - lse);
        }
      }
      i += rows;
      if (steps_) break;
    }
    this->passes_ = own_ ? steps_ : W_;
  }

 private:
  KvStore<Bk> kv_;
  int W_;
  bool own_ = false;
  int steps_ = 0;
  int* zero_ = nullptr;  // W zeros: row indices into the 1-row DK bias table
};

template <class Bk>
std::unique_ptr<Decoder<Bk>> CybMethod<Bk>::decoder(Model<Bk>& m, int max_len) {
  return std::make_unique<CybDecoder<Bk>>(*this, m, max_len);
}

}  // namespace ada
