// adaponder: AdaPonderLM, gated pondering with token-wise adaptive depth
// (Song et al. 2026; methods.md section 9, whose equations are a
// reconstruction -- the readings chosen here are listed in docs/methods/adaponder.md).
//
// PonderLM (ponder.h) with K pondering passes, plus a gate per pass that
// scales the pondering update and lets a token stop:
//   e^0_t = s0 sqrt(D) E[x_t];   m^0_t = 1                              s0 = K
//   for i = 1..K+1, over the tokens still running (m^{i-1}_t = 1) only:
//     h^i = F(e^{i-1})                  blocks + final norm; halted tokens are not
//                                       recomputed, their keys/values are reused
//     z^i = W h^i,  p^i = softmax(z^i)
//     if i <= K:
//       s^i = sigmoid(MLP_i(h^i))       MLP_i: w2_i . silu(W1_i h) + b2_i, one per pass
//       m^i = m^{i-1} * [s^i >= tau]    monotonic: once stopped, stopped
//       e^i = e^{i-1} + m^i s^i sqrt(D) p^i E            gated PonderLM update
//   prediction of token t: z at its last executed pass
// Loss:
//   L = CE(final logits, y) + lambda * L_ponder
//   L_ponder = mean of the ceil(k |A|) smallest gate values of A = every gate
//              computed in the batch; k ramps 0 -> --ponder-k after a CE-only stage.
// Backward (methods.md 9.3): the gate gets m <dL/de^i, sqrt(D) p E> from the
// update and lambda / |S_k| if selected, times s (1 - s); the mask and the
// bottom-k selection are constants; reused keys/values send their gradient
// back to the pass that produced them.
//
// Passes compute only the active tokens' rows (gather, then scatter-add back),
// so pruning saves time as well as FLOPs. With --compaction 0 every pass
// computes all rows but halted rows neither write keys nor receive gradient:
// the masked reference the tests compare compaction against.
// --policy uniform|geometric replaces the gates by fixed, gate-free pruning
// schedules with the same average depth (--policy-passes): the iso-FLOPs
// baselines of the paper. --policy matched exits tokens at random with a given
// per-pass exit histogram (--policy-hist, e.g. the learned gates' histogram
// that `eval` reports as exit_1..exit_{K+1}): the control that isolates *which*
// tokens the gates stop from *when* they stop them. All three fixed policies
// update with coefficient 1 (PonderLM's), not the gates' s, so they also
// differ from the gates in the size of the pondering updates. --policy
// matched-gated removes that difference: exits drawn exactly as `matched`'s,
// but the gates are computed, scale every running token's update until its
// drawn exit (coef = s, tau not applied) and are trained by the update's
// gradient and the bottom-k ponder loss as under `gates`; only *which* tokens
// stop differs from the gated run.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "core/hd_math.h"
#include "methods/method.h"
#include "methods/next_token_loss.h"
#include "methods/chunked_readout.h"
#include "methods/soft_embedding.h"

namespace ada {

struct AdaPonderOptions {
  int K = 3;                   // pondering passes (K+1 passes at most)
  double tau = 1e-4;           // stop when the gate falls below tau
  double ponder_k = 0.1;       // final fraction of gates in the bottom-k set
  double lambda = 0.1;         // weight of the ponder loss
  long long warmup_ce = -1;    // CE-only steps (-1: 10% of the run)
  long long k_warmup = -1;     // steps over which k ramps up (-1: 20% of the run)
  int gate_hidden = 0;         // D_g (0: D/4)
  double gate_bias = 0.0;      // initial gate bias: s ~ 0.5 (4: s ~ 0.98, start as PonderLM; docs/methods/adaponder.md)
  std::string policy = "gates";  // gates | uniform | geometric | matched | matched-gated
  double policy_passes = 0;    // uniform/geometric: target average passes per token
  std::string policy_hist;     // matched, matched-gated: fractions of tokens exiting after pass 1..K+1 (f1/f2/.../fK+1)
  bool compaction = true;      // compute only active rows
};

// ---- per-token halting arithmetic (one thread per row on the GPU) ---------

// s = sigmoid(logit + b);  coef = m^i s^i = (s >= tau ? s : 0)  for a running row.
template <class T>
struct GateForward {
  const T* logit;
  const T* bias;
  const int* running;  // row's token still runs this pass (0 only in the masked mode)
  T* s;
  T* coef;
  T tau;
  HD void operator()(int r) const {
    const T si = hd_sigmoid(logit[r] + bias[0]);
    s[r] = si;
    coef[r] = (running[r] && si >= tau) ? si : T(0);
  }
};

// dL/dlogit = (m <dL/de, phi> + dL_ponder/ds) * s (1 - s)
template <class T>
struct GateBackward {
  const T* s;
  const T* coef;
  const T* dot;     // <dL/de^i_t, phi_t>
  const T* dponder; // lambda / |S_k| for selected gates, else 0
  T* dlogit;
  HD void operator()(int r) const {
    const T m = coef[r] != T(0) ? T(1) : T(0);
    dlogit[r] = (m * dot[r] + dponder[r]) * s[r] * (T(1) - s[r]);
  }
};

// The policies whose exits are drawn at random with --policy-hist's histogram.
inline bool matched_policy(const std::string& policy) { return policy == "matched" || policy == "matched-gated"; }
// The policies that compute the gates and scale the updates by them.
inline bool gated_policy(const std::string& policy) { return policy == "gates" || policy == "matched-gated"; }

// Deterministic uniform in [0, 1) from a few integers (the fixed policies).
inline double hash_uniform(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^ c * 0x94D049BB133111EBull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (z >> 11) * (1.0 / 9007199254740992.0);
}

// Exit pass (1..K+1) of a token under a fixed policy with average `avg` passes.
//   uniform:   the same number of tokens exits after each pass 1..K (fraction f
//              each), the rest run all K+1:  avg = (K+1) - f K (K+1) / 2
//   geometric: after each pass i <= K a running token exits with probability q:
//              avg = sum_{j=0..K} (1-q)^j
//   matched, matched-gated: exit after pass i with probability f_i (cdf: the
//              cumulative f_1..f_{K+1}, from policy_hist_cdf); the same draws
//              for both, so their tokens exit at the same passes
inline int fixed_policy_exit(const std::string& policy, double avg, int K, uint64_t salt, uint64_t token,
                             const std::vector<double>* cdf = nullptr) {
  if (matched_policy(policy)) {
    const double u = hash_uniform(salt, token, 0);
    for (int i = 0; i < K; i++)
      if (u < (*cdf)[i]) return i + 1;
    return K + 1;
  }
  if (policy == "uniform") {
    const double f = std::clamp(((K + 1) - avg) * 2.0 / (K * (K + 1.0)), 0.0, 1.0 / K);
    const double u = hash_uniform(salt, token, 0);
    return u < K * f ? (int)(u / f) + 1 : K + 1;
  }
  double lo = 0, hi = 1;  // geometric: bisection for q
  for (int it = 0; it < 60; it++) {
    const double q = 0.5 * (lo + hi);
    double e = 0, r = 1;
    for (int j = 0; j <= K; j++) e += r, r *= 1 - q;
    (e > avg ? lo : hi) = q;
  }
  const double q = 0.5 * (lo + hi);
  for (int i = 1; i <= K; i++)
    if (hash_uniform(salt, token, (uint64_t)i) < q) return i;
  return K + 1;
}

// --policy-hist "f1/f2/.../f{K+1}" -> cumulative fractions (normalised to sum 1).
// Separated by '/' (not ',') so that a spec fits inside --method-overrides.
inline std::vector<double> policy_hist_cdf(const std::string& spec, int K) {
  std::vector<double> f;
  std::string cur;
  for (char ch : spec + "/") {
    if (ch != '/') {
      cur += ch;
      continue;
    }
    char* end = nullptr;
    const double v = std::strtod(cur.c_str(), &end);
    check(!cur.empty() && *end == 0 && std::isfinite(v) && v >= 0,
          "--policy-hist must be K+1 fractions >= 0 separated by '/' (got '" + spec + "')");
    f.push_back(v);
    cur.clear();
  }
  check((int)f.size() == K + 1, "--policy-hist needs K+1 = " + std::to_string(K + 1) + " fractions (one per pass), got " +
                                    std::to_string(f.size()) + " in '" + spec + "'");
  double total = 0;
  for (double v : f) total += v;
  check(total > 0, "--policy-hist fractions must not all be 0");
  std::vector<double> cdf(K + 1);
  double run = 0;
  for (int i = 0; i <= K; i++) cdf[i] = (run += f[i] / total);
  return cdf;
}

template <class Bk>
class AdaPonderMethod : public Method<Bk> {
 public:
  using T = typename Bk::Real;
  using PassActs = typename Model<Bk>::PassActs;

  explicit AdaPonderMethod(const AdaPonderOptions& o) : o_(o) {
    check(o.K >= 1, "--ponder-steps must be >= 1 (got " + std::to_string(o.K) + ")");
    check(o.tau >= 0 && o.tau < 1, "--tau must be in [0, 1)");
    check(o.ponder_k >= 0 && o.ponder_k <= 1, "--ponder-k must be in [0, 1]");
    check(o.lambda >= 0, "--ponder-lambda must be >= 0");
    check(gated_policy(o.policy) || matched_policy(o.policy) || o.policy == "uniform" || o.policy == "geometric",
          "--policy must be gates, uniform, geometric, matched or matched-gated (got '" + o.policy + "')");
    if (matched_policy(o.policy)) cdf_ = policy_hist_cdf(o.policy_hist, o.K);
    if (o.policy == "uniform" || o.policy == "geometric")
      check(o.policy_passes >= 1 && o.policy_passes <= o.K + 1,
            "--policy-passes must be in [1, K+1] for a fixed policy (got " + std::to_string(o.policy_passes) + ")");
  }
  std::string name() const override { return "adaponder"; }
  int max_passes() const override { return o_.K + 1; }
  // e^0 = s0 sqrt(D) E[x] with s0 = K, as PonderLM
  double default_embed_scale(const ModelConfig& c) const override { return o_.K * std::sqrt((double)c.dim); }
  const AdaPonderOptions& options() const { return o_; }
  const std::vector<double>& policy_cdf() const { return cdf_; }  // matched policies: cumulative exit fractions

  static std::string gate_name(int i, const char* what) { return "adaponder.gate." + std::to_string(i) + "." + what; }

  void add_params(ParamLayout& lay, const ModelConfig& c) override {
    const int Dg = gate_hidden(c);
    for (int i = 0; i < o_.K; i++) {  // one gate MLP per pondering pass
      lay.add(gate_name(i, "w1"), {Dg, c.dim}, Init::Normal, 0.02, true);
      lay.add(gate_name(i, "w2"), {1, Dg}, Init::Normal, 0.02, true);
      lay.add(gate_name(i, "b2"), {1}, Init::Constant, o_.gate_bias, false);
    }
  }

  void set_step(long long step, long long total) override {
    const long long warm = o_.warmup_ce >= 0 ? o_.warmup_ce : total / 10;
    const long long ramp = o_.k_warmup >= 0 ? o_.k_warmup : total / 5;
    k_now_ = step < warm ? 0.0 : ramp > 0 ? o_.ponder_k * std::min(1.0, (double)(step - warm) / ramp) : o_.ponder_k;
    salt_ = (uint64_t)step + 1;
  }
  void set_k(double k) { k_now_ = k; }  // tests

  // ---------------------------------------------------------------------
  void forward(Model<Bk>& m, const Batch& b, bool training) override {
    m.flops.reset();
    const int D = m.cfg.dim, K = o_.K;
    B_ = b.B, T_ = b.T, N_ = b.B * b.T;
    const T c = T(std::sqrt((double)D));
    const bool learned_exits = o_.policy == "gates";   // the gates decide the exits
    const bool gated = gated_policy(o_.policy);         // the gates scale the updates
    const uint64_t salt = training ? salt_ : 0;

    passes_.assign(K + 1, Pass());
    std::vector<char> running(N_, 1);  // m^{i-1}_t
    last_pass_.assign(N_, 0);
    supervised_ = 0;
    for (int y : b.targets) {
      check(y < m.cfg.vocab, "target token id " + std::to_string(y) + " is outside the vocabulary");
      supervised_ += y >= 0;
    }
    std::vector<int> exit_pass(N_, K + 1);  // drawn exits (every policy but gates)
    if (!learned_exits)
      for (int t = 0; t < N_; t++) exit_pass[t] = fixed_policy_exit(o_.policy, o_.policy_passes, K, salt, t, &cdf_);

    e0_ = m.embed(b.inputs, &ids_);  // e^0 = s0 sqrt(D) E[x] (default_embed_scale)
    T* e = e0_;
    for (int i = 0; i <= K; i++) {
      Pass& P = passes_[i];
      // rows of this pass: the running tokens (compaction), or all tokens (masked)
      PassPlan plan;
      plan.B = B_, plan.S = T_;
      for (int t = 0; t < N_; t++) {
        if (!running[t] && o_.compaction) continue;
        if (running[t]) plan.kv_rows.push_back((int)P.rows.size());
        P.rows.push_back(t);
        P.running.push_back(running[t]);
        plan.slot.push_back(t);
        plan.pos.push_back(t % T_);
        if (!running[t]) P.reused.push_back(t);
      }
      if (o_.compaction)
        for (int t = 0; t < N_; t++)
          if (!running[t]) P.reused.push_back(t);
      if ((int)plan.kv_rows.size() == plan.n()) plan.kv_rows.clear();
      plan.finish();
      const int n = plan.n();
      P.d_rows = upload(m, P.rows);
      P.d_running = upload(m, std::vector<int>(P.running.begin(), P.running.end()));

      P.kv.init(m.be, m.arena, B_, T_, m.cfg.layers, D, kAnyDepth, training);
      if (i > 0) kv_copy_slots(m.be, m.arena, passes_[i - 1].kv, P.kv, P.reused);  // KV reuse
      T* x = m.alloc((size_t)n * D);
      m.be.gather_rows(x, D, e, D, P.d_rows, n, D);
      P.acts = m.forward_pass(plan, P.kv, x);
      P.ro.norm(m, P.acts.out(), n, training);  // h^i = RMSNorm(...): what the gate reads

      std::vector<char> stop(n, 0);  // running rows whose last pass is this one
      if (i < K) {
        P.coef = m.alloc(n);
        if (!learned_exits)  // a drawn exit: the running rows whose exit pass is this one
          for (int r = 0; r < n; r++) stop[r] = P.running[r] && exit_pass[P.rows[r]] == i + 1;
        if (gated) {
          // gates: coef = s for the running rows with s >= tau, m^i = m^{i-1} [s^i >= tau];
          // matched-gated: coef = s for the rows that go on past their drawn exit
          const int* flag = P.d_running;
          T tau = T(o_.tau);
          if (!learned_exits) {
            std::vector<int> goes_on(n);
            for (int r = 0; r < n; r++) goes_on[r] = P.running[r] && !stop[r];
            flag = upload(m, goes_on), tau = T(0);
          }
          gate_forward(m, i, P, flag, tau);
          P.s_host.resize(n);
          m.be.to_host(P.s_host.data(), P.s, n);
          if (learned_exits)
            for (int r = 0; r < n; r++) stop[r] = P.running[r] && P.s_host[r] < o_.tau;
        } else {  // fixed policy: the update is PonderLM's (coef 1) until the token exits
          std::vector<double> coef(n);
          for (int r = 0; r < n; r++) coef[r] = P.running[r] && !stop[r];
          m.be.to_device(P.coef, coef.data(), n);
        }
      } else {
        for (int r = 0; r < n; r++) stop[r] = P.running[r];
      }
      // cross-entropy on the rows that end here
      std::vector<int> tg(n, -1);
      for (int r = 0; r < n; r++)
        if (stop[r]) {
          const int t = P.rows[r];
          tg[r] = b.targets[t];
          last_pass_[t] = i + 1;
          running[t] = 0;
        }
      P.d_targets = upload(m, tg);
      P.targets = std::move(tg);
      // z^i = W h^i: log q(y) of the rows that end here and, before the last
      // pass, phi = sqrt(D) p^i E (chunked_readout.h, chunks of rows)
      P.ro.logits(m, P.d_targets, i < K ? c : T(0));
      if (i < K) {
        P.upd = m.alloc((size_t)n * D);
        m.be.scale_rows(P.upd, P.ro.phi, P.coef, n, D);  // m s sqrt(D) p E
        T* next = m.alloc((size_t)N_ * D);
        m.be.copy(next, e, (size_t)N_ * D);
        m.be.scatter_add_rows(next, D, P.upd, D, P.d_rows, n, D);  // e^{i+1} = e^i + update
        m.flops.other += 2 * op_cost::elementwise((double)n * D);  // the scale by coef, the add
        e = next;
      }
    }
    select_bottom_k(this->batch_comm(training));
  }

  // ---------------------------------------------------------------------
  void backward(Model<Bk>& m, double loss_scale) override {
    const int D = m.cfg.dim, K = o_.K;
    const bool gated = gated_policy(o_.policy);
    T* de = m.zeros((size_t)N_ * D);  // dL/de^{i}, walked down from i = K+1
    for (int i = K; i >= 0; i--) {
      Pass& P = passes_[i];
      const int n = (int)P.rows.size();
      auto scratch = m.scratch();  // this pass's temporaries, one pass at a time
      T* dhn = nullptr;   // dL/dh^i through the gate
      T* dphi = nullptr;  // dL/dphi = m s dL/de^{i+1}
      if (i < K) {
        T* dupd = m.alloc((size_t)n * D);
        m.be.gather_rows(dupd, D, de, D, P.d_rows, n, D);  // dL/d(update) = dL/de^{i+1} rows
        if (gated) dhn = gate_backward(m, i, P, dupd, loss_scale);
        dphi = m.alloc((size_t)n * D);
        m.be.scale_rows(dphi, dupd, P.coef, n, D);
      }
      // CE of the rows that end in this pass, dL/dlogp = -scale / (supervised tokens), and the
      // soft embedding's gradient, through the logits into h^i (chunked_readout.h)
      T* g = m.alloc(n);
      m.be.fill(g, T(supervised_ ? -loss_scale / supervised_ : 0.0), n);
      T* dx = m.zeros((size_t)n * D);
      typename ChunkedReadout<Bk>::Grad gr;
      gr.logp = g, gr.phi = dphi, gr.hn = dhn;
      P.ro.backward(m, gr, dx);
      m.backward_pass(P.acts, P.kv, dx);
      if (i > 0) kv_copy_slots_backward(m.be, m.arena, passes_[i - 1].kv, P.kv, P.reused);
      m.be.scatter_add_rows(de, D, dx, D, P.d_rows, n, D);  // de is now dL/de^{i}
    }
    m.embed_backward(ids_, de, N_);
  }

  // ---------------------------------------------------------------------
  StepStats stats(Model<Bk>& m) override {
    StepStats s;
    // every pass's sum of log q(y), read with one wait
    std::vector<typename Bk::SumOf> parts;
    for (auto& P : passes_) parts.push_back({P.ro.logp, P.rows.size()});
    std::vector<double> part(parts.size());
    m.be.sums(parts, part.data());
    double logp = 0;
    for (double v : part) logp += v;
    s.ce = supervised_ ? -logp / supervised_ : 0;
    s.loss = s.ce + o_.lambda * ponder_loss_;
    s.tokens = supervised_;
    s.fwd_flops = m.flops.fwd;
    s.train_flops = 3 * m.flops.fwd;
    s.fwd_other_flops = m.flops.other;
    s.train_other_flops = 3 * m.flops.other;
    double passes = 0;
    for (int p : last_pass_) passes += p;
    s.halting = {{"passes", passes / N_}, {"ponder_loss", ponder_loss_}, {"k", k_now_}, {"gate_mean", gate_mean_}};
    for (int i = 1; i <= o_.K + 1; i++) {
      double frac = 0;
      for (int p : last_pass_) frac += p == i;
      s.halting.push_back({"exit_" + std::to_string(i), frac / N_});
    }
    return s;
  }

  void per_token(Model<Bk>& m, std::vector<double>& nll, std::vector<double>& passes) override {
    nll.assign(N_, std::nan(""));
    passes.assign(N_, 0);
    for (auto& P : passes_) {
      std::vector<double> lp(P.rows.size());
      m.be.to_host(lp.data(), P.ro.logp, lp.size());
      for (size_t r = 0; r < P.rows.size(); r++)
        if (P.targets[r] >= 0) nll[P.rows[r]] = -lp[r];
    }
    for (int t = 0; t < N_; t++) passes[t] = last_pass_[t];
  }

  void probabilities(Model<Bk>& m, std::vector<double>& probs) override {
    const int V = m.cfg.vocab;
    probs.assign((size_t)N_ * V, 0);
    for (int i = 0; i <= o_.K; i++) {
      Pass& P = passes_[i];
      std::vector<double> p;
      P.ro.probabilities(m, p);
      for (size_t r = 0; r < P.rows.size(); r++)
        if (last_pass_[P.rows[r]] == i + 1)
          std::copy(p.begin() + r * V, p.begin() + (r + 1) * V, probs.begin() + (size_t)P.rows[r] * V);
    }
  }
  // The argmax of the pass each token ended in.
  void per_token_argmax(Model<Bk>& m, std::vector<int>& argmax) override {
    argmax.assign(N_, 0);
    for (int i = 0; i <= o_.K; i++) {
      Pass& P = passes_[i];
      std::vector<int> a;
      P.ro.argmax(m, a);
      for (size_t r = 0; r < P.rows.size(); r++)
        if (last_pass_[P.rows[r]] == i + 1) argmax[P.rows[r]] = a[r];
    }
  }

  // Views of the last forward, for tests and analysis: the pass each token
  // ended in (1-based), every computed gate of a running token as
  // (pass, token, s), and the KV store of a pass.
  const std::vector<int>& last_pass() const { return last_pass_; }
  std::vector<std::tuple<int, int, double>> gate_values() const {
    std::vector<std::tuple<int, int, double>> g;
    for (int i = 0; i < o_.K; i++)
      for (size_t r = 0; r < passes_[i].s_host.size(); r++)
        if (passes_[i].running[r]) g.emplace_back(i, passes_[i].rows[r], passes_[i].s_host[r]);
    return g;
  }
  const KvStore<Bk>& pass_kv(int i) const { return passes_[i].kv; }
  void set_tau(double tau) { o_.tau = tau; }

  std::unique_ptr<Decoder<Bk>> decoder(Model<Bk>& m, int max_len) override;

  // The gate MLP of pass i on n rows of hn: s, coef (shared with the decoder).
  // u = W1 hn (n, Dg);  a = silu(u);  logit = a w2^T (n, 1)
  struct GateActs {
    T *u = nullptr, *a = nullptr, *logit = nullptr, *s = nullptr;
  };
  // coef = s for a row with d_running set and s >= tau, else 0.
  GateActs gate_mlp(Model<Bk>& m, int i, const T* hn, int n, const int* d_running, T* coef, T tau) {
    const int D = m.cfg.dim, Dg = gate_hidden(m.cfg);
    GateActs g;
    g.u = m.alloc((size_t)n * Dg), g.a = m.alloc((size_t)n * Dg), g.logit = m.alloc(n), g.s = m.alloc(n);
    m.be.matmul_forward(g.u, hn, m.param(gate_name(i, "w1")), n, D, Dg);
    m.be.silu_forward(g.a, g.u, (size_t)n * Dg);
    m.be.matmul_forward(g.logit, g.a, m.param(gate_name(i, "w2")), n, Dg, 1);
    m.be.for_each(n, GateForward<T>{g.logit, m.param(gate_name(i, "b2")), d_running, g.s, coef, tau});
    m.flops.fwd += 2.0 * n * (D * Dg + Dg);
    m.flops.other += op_cost::silu((double)n * Dg) + op_cost::sigmoid(n) + 2.0 * n;  // + b2, the tau test
    return g;
  }

 private:
  struct Pass {
    std::vector<int> rows;      // token (b*T + t) of each computed row
    std::vector<char> running;  // the row's token runs this pass (all 1 with compaction)
    std::vector<int> reused;    // slots whose K/V come from the previous pass (halted tokens)
    int *d_rows = nullptr, *d_running = nullptr, *d_targets = nullptr;
    std::vector<int> targets;   // y for rows ending here, else -1
    std::vector<int> selected;  // rows whose gate is in the bottom-k set S_k
    KvStore<Bk> kv;
    PassActs acts;
    ChunkedReadout<Bk> ro;      // h^i, z^i's log q(y), argmax and soft embedding phi
    GateActs gate;
    T *s = nullptr, *coef = nullptr, *upd = nullptr;
    std::vector<double> s_host;
  };

  int gate_hidden(const ModelConfig& c) const { return o_.gate_hidden > 0 ? o_.gate_hidden : std::max(1, c.dim / 4); }

  int* upload(Model<Bk>& m, const std::vector<int>& v) {
    int* d = m.arena.template alloc<int>(std::max<size_t>(v.size(), 1));
    m.be.to_device(d, v.data(), v.size());
    return d;
  }

  void gate_forward(Model<Bk>& m, int i, Pass& P, const int* d_running, T tau) {
    P.gate = gate_mlp(m, i, P.ro.hn, (int)P.rows.size(), d_running, P.coef, tau);
    P.s = P.gate.s;
  }

  // Gate backward of pass i; returns dL/dhn (n, D) for the readout backward.
  T* gate_backward(Model<Bk>& m, int i, Pass& P, const T* dupd, double scale) {
    const int n = (int)P.rows.size(), D = m.cfg.dim, Dg = gate_hidden(m.cfg);
    T* dot = m.alloc(n);
    m.be.row_dot(dot, dupd, P.ro.phi, n, D);  // <dL/de^{i+1}, sqrt(D) p E>
    std::vector<double> dp(n, 0.0);
    // n_selected_ counts the selected gates of every rank; the trainer averages
    // the ranks' gradients, so this rank's part of a mean over the global
    // batch enters with the factor world_ (1 in one process).
    for (int r : P.selected) dp[r] = scale * o_.lambda * world_ / n_selected_;
    T* dponder = m.alloc(n);
    m.be.to_device(dponder, dp.data(), n);
    T* dlogit = m.alloc(n);
    m.be.for_each(n, GateBackward<T>{P.s, P.coef, dot, dponder, dlogit});
    // logit = a w2^T + b2;  a = silu(u);  u = W1 hn
    int* zero = m.arena.template zeros<int>(n);
    m.be.embedding_backward(m.grad(gate_name(i, "b2")), zero, dlogit, n, 1, T(1));  // db2 = sum_r dlogit
    T* da = m.alloc((size_t)n * Dg);
    m.be.matmul_backward(da, m.grad(gate_name(i, "w2")), dlogit, P.gate.a, m.param(gate_name(i, "w2")), n, Dg, 1);
    T* du = m.alloc((size_t)n * Dg);
    m.be.silu_backward(du, da, P.gate.u, (size_t)n * Dg);
    T* dhn = m.alloc((size_t)n * D);
    m.be.matmul_backward(dhn, m.grad(gate_name(i, "w1")), du, P.ro.hn, m.param(gate_name(i, "w1")), n, D, Dg);
    return dhn;
  }

  // S_k: the ceil(k |A|) smallest of all gates computed for running rows,
  // A over the global batch: the gates of every rank of a data-parallel
  // training step (docs/methods/adaponder.md, "Data parallelism"). Ties are
  // broken by (pass, token), tokens numbered across the ranks in the order of
  // the global batch, so S_k does not depend on how the batch is split.
  void select_bottom_k(Communicator& comm) {
    ponder_loss_ = 0, gate_mean_ = 0, n_selected_ = 0;
    world_ = comm.size();
    std::vector<double> mine;               // (s, pass, global token) of each gate of a running row
    std::vector<std::pair<int, int>> where;  // its (pass, row) here
    const double first_token = (double)comm.rank() * N_;  // every rank holds N_ tokens in training
    for (int i = 0; i < o_.K; i++) {
      passes_[i].selected.clear();
      for (size_t r = 0; r < passes_[i].s_host.size(); r++)
        if (passes_[i].running[r]) {
          mine.insert(mine.end(), {passes_[i].s_host[r], (double)i, first_token + passes_[i].rows[r]});
          where.push_back({i, (int)r});
        }
    }
    std::vector<int> counts;
    const std::vector<double> all = comm.gather_host(mine, &counts);
    const size_t n_all = all.size() / 3;
    size_t first = 0;  // this rank's first gate in `all`
    for (int r = 0; r < comm.rank(); r++) first += (size_t)counts[r] / 3;
    for (size_t j = 0; j < n_all; j++) gate_mean_ += all[3 * j] / n_all;
    const size_t n = (size_t)std::ceil(k_now_ * (double)n_all - 1e-9);
    if (n == 0 || o_.lambda == 0) return;
    std::vector<size_t> order(n_all);
    std::iota(order.begin(), order.end(), size_t(0));
    auto less = [&](size_t a, size_t b) {
      return std::tie(all[3 * a], all[3 * a + 1], all[3 * a + 2]) < std::tie(all[3 * b], all[3 * b + 1], all[3 * b + 2]);
    };
    std::nth_element(order.begin(), order.begin() + (n - 1), order.end(), less);
    std::sort(order.begin(), order.begin() + n, less);  // the loss sums in one order, whatever the split
    for (size_t j = 0; j < n; j++) {
      const size_t g = order[j];
      if (g >= first && g - first < where.size())
        passes_[where[g - first].first].selected.push_back(where[g - first].second);
      ponder_loss_ += all[3 * g] / n;
    }
    n_selected_ = (double)n;
  }

  AdaPonderOptions o_;
  std::vector<double> cdf_;  // --policy matched
  double k_now_ = 0;
  uint64_t salt_ = 0;
  int B_ = 0, T_ = 0, N_ = 0, supervised_ = 0;
  int* ids_ = nullptr;
  T* e0_ = nullptr;
  std::vector<Pass> passes_;
  std::vector<int> last_pass_;  // 1-based pass each token ended in
  double ponder_loss_ = 0, gate_mean_ = 0, n_selected_ = 0;  // over the global batch
  int world_ = 1;  // ranks that shared the last training forward's bottom-k
};

// Decoding: one KV cache per pass. A new token runs passes until its gate
// stops it (or the fixed policy's exit pass); for the passes it skips, its
// last executed keys/values are copied into those passes' caches, so later
// tokens see exactly the keys they would see in training.
template <class Bk>
class AdaPonderDecoder : public Decoder<Bk> {
 public:
  using T = typename Bk::Real;
  AdaPonderDecoder(AdaPonderMethod<Bk>& method, Model<Bk>& m, int max_len)
      : Decoder<Bk>(m, max_len), meth_(method), kv_(method.options().K + 1) {
    for (auto& kv : kv_) kv.init(m.be, this->cache_, 1, max_len, m.cfg.layers, m.cfg.dim, kAnyDepth, false);
  }

 protected:
  void run(int token, int t) override {
    Model<Bk>& m = this->m_;
    const AdaPonderOptions& o = meth_.options();
    const int K = o.K, D = m.cfg.dim;
    const T c = T(std::sqrt((double)D));
    const int exit_drawn = o.policy == "gates" ? 0 : fixed_policy_exit(o.policy, o.policy_passes, K, 0, (uint64_t)t, &meth_.policy_cdf());
    const PassPlan plan = this->one_row(kv_[0].S, t, t);
    T* e = m.embed({token});
    int* flag = m.arena.template alloc<int>(2);  // device 1 and 0: the gate's running flag
    const int flag_h[2] = {1, 0};
    m.be.to_device(flag, flag_h, 2);
    const T* final_logits = nullptr;
    for (int i = 0; i <= K; i++) {
      if (final_logits) {  // halted: reuse the keys/values of the previous pass
        kv_copy_slots(m.be, m.arena, kv_[i - 1], kv_[i], {t});
        continue;
      }
      auto ro = m.readout_forward(m.forward_pass(plan, kv_[i], e).out(), 1);
      this->passes_ = i + 1;
      if (i == K) {
        final_logits = ro.logits;
        break;
      }
      T* coef = m.alloc(1);
      bool stop = exit_drawn == i + 1;  // every policy but gates
      if (o.policy == "gates") {
        auto g = meth_.gate_mlp(m, i, ro.hn, 1, flag, coef, T(o.tau));
        T s;
        m.be.to_host(&s, g.s, 1);
        stop = s < T(o.tau);
      } else if (gated_policy(o.policy)) {  // matched-gated: coef = s until the drawn exit
        meth_.gate_mlp(m, i, ro.hn, 1, stop ? flag + 1 : flag, coef, T(0));
      } else {
        const double cf = stop ? 0.0 : 1.0;
        m.be.to_device(coef, &cf, 1);
      }
      if (stop) {
        final_logits = ro.logits;
        continue;
      }
      SoftEmbedding<Bk> se;
      T* upd = m.alloc(D);
      m.be.scale_rows(upd, se.forward(m, ro.logits, 1, c), coef, 1, D);
      m.be.axpy(e, T(1), upd, D);  // e^{i+1} = e^i + m s sqrt(D) p E
    }
    probabilities_to_host(m, final_logits, 1, this->probs_);
  }

 private:
  AdaPonderMethod<Bk>& meth_;
  std::vector<KvStore<Bk>> kv_;
};

template <class Bk>
std::unique_ptr<Decoder<Bk>> AdaPonderMethod<Bk>::decoder(Model<Bk>& m, int max_len) {
  return std::make_unique<AdaPonderDecoder<Bk>>(*this, m, max_len);
}

}  // namespace ada
