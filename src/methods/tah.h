// tah: TaH2, an adaptive looped transformer (You et al. 2026; methods.md
// section 7, whose mechanics come from the official code -- the readings
// chosen here are listed in docs/methods/tah.md).
//
// The block stack runs up to M times per token, over one (position, depth) grid:
//   x^1_t = e_t = E[x_t]
//   for m = 1..M, over the tokens still active only:
//     h^m = F(x^m; duo-causal)       query (t,m) sees every executed (s,j), s <= t, j <= m;
//                                    h^m is the final-normed state, the same position t at every depth
//     q^m = softmax(W h^m)
//     if m < M:
//       g^m = Decider(e, h^m, q^m)   continue probability; the token continues iff g^m > tau_exit (hard)
//       x^{m+1} = Updater(e, h^m)    for the continuing tokens; replaces the input (no residual)
// Decider:  g = sigmoid(w_s . RMSNorm(MLP(P_d [RMSNorm(e); RMSNorm(h); RMSNorm(top_D(q))])))
//           top_D(q): the D largest probabilities, descending (ops/topk.h)
// Updater:  x' = RMSNorm(MLP(RMSNorm(P_u [RMSNorm(e); RMSNorm(h)])))
//   MLP: SwiGLU D -> F_d -> D. P_d (D x 3D) and P_u (D x 2D) are stored as their
//   D x D column blocks: P_d [a; b; c] = P_e a + P_h b + P_q c. Every RMSNorm has its own weight.
// Output mixture ("stop_prob_mix"; halting_chain.h with c_m = g^m):
//   omega^m = R^m (1 - g^m) for the depths a token continued past, R^m at its stopping depth
//   q_t = sum_m omega^m q^m_t;      L_CE = -(1/N) sum_t log q_t[y_t]
// Depth labels (constants: no gradient; methods.md 7.2):
//   l^m_t = -log q^m_t[y_t]; a token that stopped at m < M runs one lookahead
//   depth m+1 (input from the updater; its keys private: it sees the executed
//   keys and its own, nobody sees it) for l^{m+1}_t.   delta^m_t = l^m_t - l^{m+1}_t
//   C_1 = supervised tokens;  C_{m+1} = tokens of C_m labelled 1 that executed m+1
//   cut^m = the smallest positive gain such that the gains >= it hold rho of the
//           positive gain in C_m (no positive gain: every label 0, cut 0)
//   c = [delta >= cut],  w = clip(|delta - cut|, 1e-6, 1),  pw^m = clip(#neg / #pos, 0.02, 50)
//   L_dec = (1/N) sum_m sum_{t in C_m} w BCE_pw(u^m_t, c)      u = the decider's logit
// L = L_CE + alpha L_dec.
// --tah-policy fixed is the paper's fixed-depth baseline ("TaH2-fixed"): no
// decider, every token runs all M depths through the same updater, and the
// output is the even mixture q_t = (1/M) sum_m q^m_t -- the halting chain above
// with constant continue probabilities g^m = (M-m)/(M-m+1), which give
// omega^m = 1/M at every depth (so the same mixture code serves both).
// Gradients (methods.md 7.3): L_CE reaches every executed q^m and the g^m of the
// depths a token continued past (the stopping depth's g only gets L_dec):
//   dL_dec/du = w [pw c (sigmoid(u) - 1) + (1 - c) sigmoid(u)] / N
// and both flow through the decider into e, h^m and q^m; the updater carries
// dL/dx^{m+1} into e and h^m; the store carries later queries' gradient back to
// earlier keys (full backpropagation through the depths). The lookahead has none.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "core/hd_math.h"
#include "methods/chunked_readout.h"
#include "methods/halting_chain.h"
#include "methods/method.h"

namespace ada {

struct TahOptions {
  int M = 3;             // depths (the block stack runs at most M times per token)
  double exit = 0.5;     // tau_exit: a token continues iff g > exit
  double alpha = 0.05;   // weight of the decider loss L_dec
  double rho = 0.99;     // coverage of the positive gain that the "continue" labels hold
  int hidden = 0;        // decider and updater MLP width F_d (0: D)
  std::string policy = "decider";  // decider | fixed (every token runs M depths, even mixture)
};

// ---- per-token arithmetic (one thread per token / row on the GPU) ------------

// The mixture loss of token t and its derivatives (halting_chain.h).
// Arrays (M x N, depth-major): logp = log q^m[y], g = continue probability.
template <class T>
struct TahToken {
  int N, K;               // K = M - 1, the last depth index
  const int* kstar;       // (N) stopping depth (0-based)
  const int* supervised;  // (N)
  const T* logp;
  const T* g;
  T scale;                // 1 / supervised tokens
  T* loss;                // (N) -log q_t[y]
  T* g_logp;              // dL_CE/dlogp
  T* g_g;                 // dL_CE/dg
  HD void operator()(int t) const {
    if (!supervised[t]) {
      loss[t] = 0;
      for (int k = 0; k <= K; k++) g_logp[(size_t)k * N + t] = g_g[(size_t)k * N + t] = 0;
      return;
    }
    loss[t] = halting_mixture(t, N, K, kstar[t], logp, g, scale, g_logp, g_g);
  }
};

// g = sigmoid(u)
template <class T>
struct TahSigmoid {
  const T* u;
  T* g;
  HD void operator()(int r) const { g[r] = hd_sigmoid(u[r]); }
};

// L_dec of the decider output of row r (token rows[r]) of one depth:
//   w BCE_pw(u, c) = w [pw c softplus(-u) + (1 - c) softplus(u)]
//   d/du           = w [pw c (sigmoid(u) - 1) + (1 - c) sigmoid(u)]
// (both times scale = 1/N). target, weight (N) per token; weight 0 off C_m.
template <class T>
struct TahDeciderBce {
  const T* u;
  const int* rows;
  const T* target;
  const T* weight;
  T pw, scale;
  T* loss;
  T* du;
  HD void operator()(int r) const {
    const int t = rows[r];
    const T x = u[r], c = target[t], w = weight[t] * scale;
    const T sp = (x > 0 ? x : T(0)) + hd_log(T(1) + hd_exp(x > 0 ? -x : x));  // softplus(x)
    const T s = hd_sigmoid(x);
    loss[r] = w * (pw * c * (sp - x) + (T(1) - c) * sp);  // softplus(-x) = softplus(x) - x
    du[r] = w * (pw * c * (s - T(1)) + (T(1) - c) * s);
  }
};

// dL/du = (dL_CE/dg g (1 - g) + alpha dL_dec/du) * loss_scale
template <class T>
struct TahDeciderGrad {
  const T* g;
  const T* dg;    // dL_CE/dg of the row
  const T* ddec;  // dL_dec/du of the row (null: no decider loss)
  T alpha, loss_scale;
  T* du;
  HD void operator()(int r) const {
    du[r] = (dg[r] * g[r] * (T(1) - g[r]) + (ddec ? alpha * ddec[r] : T(0))) * loss_scale;
  }
};

// The coverage cut of methods.md 7.2: with the positive gains sorted
// descending, the first one at which their running sum reaches rho of the
// total. Returns false (no cut) when there is no positive gain.
inline bool coverage_cut(std::vector<double> pos, double rho, double* cut) {
  if (pos.empty()) return false;
  std::sort(pos.begin(), pos.end(), std::greater<double>());
  double total = 0;
  for (double p : pos) total += p;
  const double target = rho * total;
  double run = 0;
  size_t i = 0;
  for (; i + 1 < pos.size(); i++) {
    run += pos[i];
    if (run >= target) break;
  }
  *cut = pos[i];
  return true;
}

template <class Bk>
class TahMethod : public Method<Bk> {
 public:
  using T = typename Bk::Real;
  using PassActs = typename Model<Bk>::PassActs;

  explicit TahMethod(const TahOptions& o) : o_(o) {
    check(o.M >= 1 && o.M <= kHaltingMaxSteps, "--tah-depths must be in [1, " + std::to_string(kHaltingMaxSteps) + "]");
    check(o.exit >= 0 && o.exit < 1, "--tah-exit must be in [0, 1)");
    check(o.alpha >= 0, "--tah-alpha must be >= 0");
    check(o.rho > 0 && o.rho <= 1, "--tah-rho must be in (0, 1]");
    check(o.hidden >= 0, "--tah-hidden must be >= 0");
    check(o.policy == "decider" || o.policy == "fixed", "--tah-policy must be decider or fixed (got '" + o.policy + "')");
  }
  bool fixed() const { return o_.policy == "fixed"; }
  // The fixed policy's continue probability at depth k + 1 (0-based k < M-1):
  // g = (M-k-1)/(M-k), so that omega = 1/M at every depth.
  double fixed_continue(int k) const { return (double)(o_.M - k - 1) / (o_.M - k); }
  std::string name() const override { return "tah"; }
  int max_passes() const override { return o_.M; }
  const TahOptions& options() const { return o_; }
  int mlp_hidden(const ModelConfig& c) const { return o_.hidden > 0 ? o_.hidden : c.dim; }

  void add_params(ParamLayout& lay, const ModelConfig& c) override {
    const int D = c.dim, F = mlp_hidden(c);
    auto norm = [&](const std::string& n) { lay.add(n, {D}, Init::Ones, 1.0, false); };
    auto mlp = [&](const std::string& p) {
      lay.add(p + ".w_gate_up.weight", {2 * F, D}, Init::Normal, 0.02, true);
      lay.add(p + ".w_down.weight", {D, F}, Init::Normal, 0.02, true);
    };
    if (!fixed()) {  // the fixed-depth baseline has no decider
      for (const char* n : {"norm_e", "norm_h", "norm_q", "norm_out"}) norm(std::string("tah.decider.") + n + ".weight");
      for (const char* n : {"proj_e", "proj_h", "proj_q"})
        lay.add(std::string("tah.decider.") + n + ".weight", {D, D}, Init::Normal, 0.02, true);
      mlp("tah.decider.mlp");
      lay.add("tah.decider.score.weight", {1, D}, Init::Normal, 0.01, true);  // w_s ~ N(0, 0.01^2)
    }
    for (const char* n : {"norm_e", "norm_h", "norm_in", "norm_out"}) norm(std::string("tah.updater.") + n + ".weight");
    for (const char* n : {"proj_e", "proj_h"})
      lay.add(std::string("tah.updater.") + n + ".weight", {D, D}, Init::Normal, 0.02, true);
    mlp("tah.updater.mlp");
  }

  // ---- building blocks: forward and backward side by side -----------------

  // y = RMSNorm(x) * w (n, D); the backward accumulates dL/dx into dx.
  struct Norm {
    const T* x = nullptr;
    T *y = nullptr, *rstd = nullptr;
  };
  Norm norm(Model<Bk>& m, const std::string& w, const T* x, int n) {
    const int D = m.cfg.dim;
    Norm a;
    a.x = x, a.y = m.alloc((size_t)n * D), a.rstd = m.alloc(n);
    m.be.rmsnorm_forward(a.y, a.rstd, x, m.param(w), n, D, m.cfg.norm_eps);
    m.flops.other += op_cost::rmsnorm(n, D);
    return a;
  }
  void norm_backward(Model<Bk>& m, const std::string& w, const Norm& a, const T* dy, T* dx, int n) {
    m.be.rmsnorm_backward(dx, m.grad(w), dy, a.x, m.param(w), a.rstd, n, m.cfg.dim);
  }

  // SwiGLU MLP D -> F -> D:  gu = x Wgu^T (n, 2F);  act = silu(gate) up (n, F);  y = act Wd^T (n, D)
  struct Mlp {
    const T* x = nullptr;
    T *gu = nullptr, *act = nullptr, *y = nullptr;
  };
  Mlp mlp(Model<Bk>& m, const std::string& p, const T* x, int n) {
    const int D = m.cfg.dim, F = mlp_hidden(m.cfg);
    Mlp a;
    a.x = x, a.gu = m.alloc((size_t)n * 2 * F), a.act = m.alloc((size_t)n * F), a.y = m.alloc((size_t)n * D);
    m.be.matmul_forward(a.gu, x, m.param(p + ".w_gate_up.weight"), n, D, 2 * F);
    m.be.swiglu_forward(a.act, a.gu, n, F);
    m.flops.other += op_cost::swiglu(n, F);
    m.be.matmul_forward(a.y, a.act, m.param(p + ".w_down.weight"), n, F, D);
    return a;
  }
  // dy (n, D) -> dL/dx (n, D), set
  T* mlp_backward(Model<Bk>& m, const std::string& p, const Mlp& a, const T* dy, int n) {
    const int D = m.cfg.dim, F = mlp_hidden(m.cfg);
    T* dact = m.alloc((size_t)n * F);
    m.be.matmul_backward(dact, m.grad(p + ".w_down.weight"), dy, a.act, m.param(p + ".w_down.weight"), n, F, D);
    T* dgu = m.alloc((size_t)n * 2 * F);
    m.be.swiglu_backward(dgu, dact, a.gu, n, F);
    T* dx = m.alloc((size_t)n * D);
    m.be.matmul_backward(dx, m.grad(p + ".w_gate_up.weight"), dgu, a.x, m.param(p + ".w_gate_up.weight"), n, D, 2 * F);
    return dx;
  }

  // The decider on n rows: e (n, D) embeddings, hn (n, D) final-normed states,
  // top (n, D) = top_D(q) of the same rows, which their readout read off the
  // logits chunk by chunk (ChunkedReadout::top_probs = D, chunked_readout.h).
  struct DeciderActs {
    Norm ne, nh, nq, nv;     // RMSNorm of e, h, top_D(q); of the MLP output
    T* f = nullptr;          // P_e ne + P_h nh + P_q nq (n, D)
    Mlp mlp;
    T *u = nullptr, *g = nullptr;  // logit w_s . nv and g = sigmoid(u) (n)
  };
  DeciderActs decider(Model<Bk>& m, const T* e, const T* hn, const T* top, int n) {
    const int D = m.cfg.dim, F = mlp_hidden(m.cfg);
    DeciderActs a;
    a.ne = norm(m, "tah.decider.norm_e.weight", e, n);
    a.nh = norm(m, "tah.decider.norm_h.weight", hn, n);
    a.nq = norm(m, "tah.decider.norm_q.weight", top, n);
    a.f = m.alloc((size_t)n * D);
    m.be.matmul_forward(a.f, a.ne.y, m.param("tah.decider.proj_e.weight"), n, D, D);
    m.be.matmul_forward(a.f, a.nh.y, m.param("tah.decider.proj_h.weight"), n, D, D, /*accumulate=*/true);
    m.be.matmul_forward(a.f, a.nq.y, m.param("tah.decider.proj_q.weight"), n, D, D, /*accumulate=*/true);
    a.mlp = mlp(m, "tah.decider.mlp", a.f, n);
    a.nv = norm(m, "tah.decider.norm_out.weight", a.mlp.y, n);
    a.u = m.alloc(n), a.g = m.alloc(n);
    m.be.matmul_forward(a.u, a.nv.y, m.param("tah.decider.score.weight"), n, D, 1);
    m.be.for_each(n, TahSigmoid<T>{a.u, a.g});
    m.flops.fwd += 2.0 * n * (3.0 * D * D + 3.0 * D * F + D);
    m.flops.other += op_cost::sigmoid(n);  // norms, MLP: above; the softmax and top-D: the readout's
    return a;
  }
  // du (n) = dL/du -> accumulates dL/de into de, dL/dh into dhn and dL/dtop_D(q) into dtop (n, D)
  // (which the readout's backward carries through the top-D and the softmax into the logits).
  void decider_backward(Model<Bk>& m, const DeciderActs& a, const T* du, T* de, T* dhn, T* dtop, int n) {
    const int D = m.cfg.dim;
    T* dv = m.alloc((size_t)n * D);
    m.be.matmul_backward(dv, m.grad("tah.decider.score.weight"), du, a.nv.y, m.param("tah.decider.score.weight"), n, D, 1);
    T* dy = m.zeros((size_t)n * D);
    norm_backward(m, "tah.decider.norm_out.weight", a.nv, dv, dy, n);
    const T* df = mlp_backward(m, "tah.decider.mlp", a.mlp, dy, n);
    T* dn = m.alloc((size_t)n * D);  // dL/d(normed input), one input at a time
    m.be.matmul_backward(dn, m.grad("tah.decider.proj_e.weight"), df, a.ne.y, m.param("tah.decider.proj_e.weight"), n, D, D);
    norm_backward(m, "tah.decider.norm_e.weight", a.ne, dn, de, n);
    m.be.matmul_backward(dn, m.grad("tah.decider.proj_h.weight"), df, a.nh.y, m.param("tah.decider.proj_h.weight"), n, D, D);
    norm_backward(m, "tah.decider.norm_h.weight", a.nh, dn, dhn, n);
    m.be.matmul_backward(dn, m.grad("tah.decider.proj_q.weight"), df, a.nq.y, m.param("tah.decider.proj_q.weight"), n, D, D);
    norm_backward(m, "tah.decider.norm_q.weight", a.nq, dn, dtop, n);
  }

  // The updater on n rows: x' = RMSNorm_out(MLP(RMSNorm_in(P_e RMSNorm(e) + P_h RMSNorm(h)))).
  struct UpdaterActs {
    Norm ne, nh, nin, nout;
    T* u = nullptr;  // P_e ne + P_h nh (n, D)
    Mlp mlp;
    const T* out() const { return nout.y; }
  };
  UpdaterActs updater(Model<Bk>& m, const T* e, const T* hn, int n) {
    const int D = m.cfg.dim, F = mlp_hidden(m.cfg);
    UpdaterActs a;
    a.ne = norm(m, "tah.updater.norm_e.weight", e, n);
    a.nh = norm(m, "tah.updater.norm_h.weight", hn, n);
    a.u = m.alloc((size_t)n * D);
    m.be.matmul_forward(a.u, a.ne.y, m.param("tah.updater.proj_e.weight"), n, D, D);
    m.be.matmul_forward(a.u, a.nh.y, m.param("tah.updater.proj_h.weight"), n, D, D, /*accumulate=*/true);
    a.nin = norm(m, "tah.updater.norm_in.weight", a.u, n);
    a.mlp = mlp(m, "tah.updater.mlp", a.nin.y, n);
    a.nout = norm(m, "tah.updater.norm_out.weight", a.mlp.y, n);
    m.flops.fwd += 2.0 * n * (2.0 * D * D + 3.0 * D * F);
    return a;
  }
  // dx (n, D) = dL/dx' -> accumulates dL/de into de and dL/dh into dhn (n, D).
  void updater_backward(Model<Bk>& m, const UpdaterActs& a, const T* dx, T* de, T* dhn, int n) {
    const int D = m.cfg.dim;
    T* dy = m.zeros((size_t)n * D);
    norm_backward(m, "tah.updater.norm_out.weight", a.nout, dx, dy, n);
    const T* dnin = mlp_backward(m, "tah.updater.mlp", a.mlp, dy, n);
    T* du = m.zeros((size_t)n * D);
    norm_backward(m, "tah.updater.norm_in.weight", a.nin, dnin, du, n);
    T* dn = m.alloc((size_t)n * D);
    m.be.matmul_backward(dn, m.grad("tah.updater.proj_e.weight"), du, a.ne.y, m.param("tah.updater.proj_e.weight"), n, D, D);
    norm_backward(m, "tah.updater.norm_e.weight", a.ne, dn, de, n);
    m.be.matmul_backward(dn, m.grad("tah.updater.proj_h.weight"), du, a.nh.y, m.param("tah.updater.proj_h.weight"), n, D, D);
    norm_backward(m, "tah.updater.norm_h.weight", a.nh, dn, dhn, n);
  }

  // ---------------------------------------------------------------------
  void forward(Model<Bk>& m, const Batch& b, bool training) override {
    m.flops.reset();
    const int D = m.cfg.dim, V = m.cfg.vocab, M = o_.M;
    check(fixed() || V >= D, "tah: the decider reads the top-D probabilities, so --vocab (" + std::to_string(V) +
                      ") must be at least --dim (" + std::to_string(D) + ")");
    B_ = b.B, T_ = b.T, N_ = b.B * b.T;
    supervised_ = 0;
    sup_.assign(N_, 0);
    for (int t = 0; t < N_; t++) {
      check(b.targets[t] < V, "target token id " + std::to_string(b.targets[t]) + " is outside the vocabulary");
      supervised_ += (sup_[t] = b.targets[t] >= 0);
    }
    targets_ = b.targets;
    // one store for the whole grid: slot (b, t, depth k) = b*T*M + t*M + k, order t, depth k
    kv_.init(m.be, m.arena, B_, T_ * M, m.cfg.layers, D, kDepthLE, training);
    for (int s = 0; s < B_ * T_ * M; s++) kv_.order[s] = (s % (T_ * M)) / M, kv_.depth[s] = s % M;

    steps_.assign(M, Step());
    kstar_.assign(N_, 0);
    std::vector<int> live(N_);
    std::iota(live.begin(), live.end(), 0);
    e_ = m.embed(b.inputs, &ids_);  // e = E[x] (N, D)
    const T* x = e_;                      // x^1 = e
    logp_all_ = m.zeros((size_t)M * N_);
    g_all_ = m.zeros((size_t)M * N_);
    for (int k = 0; k < M; k++) {  // depth m = k + 1
      Step& s = steps_[k];
      s.rows = live;
      const int n = (int)live.size();
      s.d_rows = upload(m, s.rows);
      s.acts = m.forward_pass(plan(k, live), kv_, x);
      std::vector<int> tg(n);
      for (int r = 0; r < n; r++) tg[r] = b.targets[live[r]], kstar_[live[r]] = k;
      s.d_targets = upload(m, tg);
      // h^m, log q^m[y] and, for the decider, top_D(q^m), in row chunks (chunked_readout.h)
      s.ro.want_argmax = false;
      s.ro.top_probs = k + 1 < M && !fixed() ? D : 0;
      s.ro.forward(m, s.acts.out(), n, s.d_targets, T(0), training);
      m.be.scatter_rows(logp_all_ + (size_t)k * N_, 1, s.ro.logp, 1, s.d_rows, n, 1);
      if (k == M - 1) break;
      s.e = m.alloc((size_t)n * D);
      m.be.gather_rows(s.e, D, e_, D, s.d_rows, n, D);
      if (fixed()) {  // constant continue probabilities (every token is live: rows = all N)
        s.g_host.assign(n, fixed_continue(k));
        std::vector<T> gk(s.g_host.begin(), s.g_host.end());
        m.be.to_device(g_all_ + (size_t)k * N_, gk.data(), n);
      } else {
        s.dec = decider(m, s.e, s.ro.hn, s.ro.qtop, n);
        m.be.scatter_rows(g_all_ + (size_t)k * N_, 1, s.dec.g, 1, s.d_rows, n, 1);
        s.g_host.resize(n);
        m.be.to_host(s.g_host.data(), s.dec.g, n);
      }
      std::vector<int> next, keep;  // tokens that continue (g > tau_exit), and their rows here
      for (int r = 0; r < n; r++)
        if (fixed() || s.g_host[r] > o_.exit) next.push_back(live[r]), keep.push_back(r);
      s.d_keep = upload(m, keep);
      s.n_next = (int)keep.size();
      live = next;
      if (live.empty()) break;
      // x^{k+2} = Updater(e, h^{k+1}) of the continuing rows
      T* e_keep = m.alloc((size_t)s.n_next * D);
      T* h_keep = m.alloc((size_t)s.n_next * D);
      m.be.gather_rows(e_keep, D, s.e, D, s.d_keep, s.n_next, D);
      m.be.gather_rows(h_keep, D, s.ro.hn, D, s.d_keep, s.n_next, D);
      s.upd = updater(m, e_keep, h_keep, s.n_next);
      x = s.upd.out();
    }
    // the mixture loss and its derivatives, one thread per token
    d_kstar_ = upload(m, kstar_);
    d_sup_ = upload(m, sup_);
    loss_ce_ = m.alloc(N_);
    g_logp_all_ = m.alloc((size_t)M * N_), g_g_all_ = m.alloc((size_t)M * N_);
    m.be.for_each(N_, TahToken<T>{N_, M - 1, d_kstar_, d_sup_, logp_all_, g_all_,
                                  T(supervised_ ? 1.0 / supervised_ : 0.0), loss_ce_, g_logp_all_, g_g_all_});
    flops_main_ = m.flops.fwd, other_main_ = m.flops.other;
    // the depth labels (lookahead passes: training cost, not the model's forward) and L_dec
    has_labels_ = o_.alpha > 0 && M > 1 && !fixed();
    if (has_labels_) {
      make_labels(m, this->batch_comm(training));
      for (int k = 0; k + 1 < M; k++) {
        Step& s = steps_[k];
        const int n = (int)s.rows.size();
        if (n == 0) continue;
        s.dec_loss = m.alloc(n), s.ddec = m.alloc(n);
        m.be.for_each(n, TahDeciderBce<T>{s.dec.u, s.d_rows, d_lab_c_ + (size_t)k * N_, d_lab_w_ + (size_t)k * N_,
                                          T(pw_[k]), T(N_ && supervised_ ? 1.0 / supervised_ : 0.0), s.dec_loss,
                                          s.ddec});
      }
    }
    flops_lookahead_ = m.flops.fwd - flops_main_, other_lookahead_ = m.flops.other - other_main_;
  }

  // ---------------------------------------------------------------------
  void backward(Model<Bk>& m, double loss_scale) override {
    const int D = m.cfg.dim, M = o_.M;
    T* de = m.zeros((size_t)N_ * D);  // dL/de from every path (depth-1 input, deciders, updaters)
    T* dx_next = nullptr;             // dL/dx^{k+2} of the rows that ran depth k+1 (n_next, D)
    for (int k = M - 1; k >= 0; k--) {
      Step& s = steps_[k];
      if (s.rows.empty()) continue;
      const int n = (int)s.rows.size();
      T* dx = m.zeros((size_t)n * D);  // dL/dx^{k+1} of these rows: carried to depth k-1
      auto scratch = m.scratch();      // the rest: this depth's temporaries
      T* glp = m.alloc(n);
      m.be.gather_rows(glp, 1, g_logp_all_ + (size_t)k * N_, 1, s.d_rows, n, 1);
      if (loss_scale != 1.0) m.be.scale(glp, T(loss_scale), n);
      T* dhn = m.zeros((size_t)n * D);
      T* dtop = nullptr;  // dL/dtop_D(q^m), from the decider
      if (k + 1 < M) {  // the depths with an updater (and, unless fixed, a decider)
        T* de_rows = m.zeros((size_t)n * D);
        if (dx_next && s.n_next > 0) {  // updater: x^{k+2} of the kept rows
          T* de_keep = m.zeros((size_t)s.n_next * D);
          T* dh_keep = m.zeros((size_t)s.n_next * D);
          updater_backward(m, s.upd, dx_next, de_keep, dh_keep, s.n_next);
          m.be.scatter_add_rows(de_rows, D, de_keep, D, s.d_keep, s.n_next, D);
          m.be.scatter_add_rows(dhn, D, dh_keep, D, s.d_keep, s.n_next, D);
        }
        if (s.dec.g) {  // the decider (fixed: the constant g has no gradient to take)
          T* dg = m.alloc(n);
          m.be.gather_rows(dg, 1, g_g_all_ + (size_t)k * N_, 1, s.d_rows, n, 1);
          T* du = m.alloc(n);
          m.be.for_each(n, TahDeciderGrad<T>{s.dec.g, dg, has_labels_ ? s.ddec : nullptr, T(o_.alpha), T(loss_scale), du});
          dtop = m.zeros((size_t)n * D);
          decider_backward(m, s.dec, du, de_rows, dhn, dtop, n);
        }
        m.be.scatter_add_rows(de, D, de_rows, D, s.d_rows, n, D);
      }
      typename ChunkedReadout<Bk>::Grad gr;  // the mixture's dL/dlog q^m[y]; the decider's and updater's
      gr.logp = glp, gr.qtop = dtop, gr.hn = dhn;
      s.ro.backward(m, gr, dx);
      m.backward_pass(s.acts, kv_, dx);  // dx: dL/dx^{k+1} of these rows
      dx_next = dx;
    }
    m.be.axpy(de, T(1), dx_next, (size_t)N_ * D);  // x^1 = e: depth 1 ran every token, in token order
    m.embed_backward(ids_, de, N_);
  }

  // ---------------------------------------------------------------------
  StepStats stats(Model<Bk>& m) override {
    StepStats s;
    // the cross-entropy sum and every depth's decider-loss sum, read with one wait
    std::vector<typename Bk::SumOf> parts = {{loss_ce_, (size_t)N_}};
    if (has_labels_)
      for (auto& st : steps_)
        if (st.dec_loss) parts.push_back({st.dec_loss, st.rows.size()});
    std::vector<double> part(parts.size());
    m.be.sums(parts, part.data());
    const double ce = part[0];
    double dec = 0;
    for (size_t i = 1; i < part.size(); i++) dec += part[i];
    s.ce = supervised_ ? ce / supervised_ : 0;
    s.loss = s.ce + o_.alpha * dec;
    s.tokens = supervised_;
    s.fwd_flops = flops_main_;
    s.train_flops = 3 * flops_main_ + flops_lookahead_;  // the lookahead runs forward only
    s.fwd_other_flops = other_main_;
    s.train_other_flops = 3 * other_main_ + other_lookahead_;
    double depths = 0;
    std::vector<double> hist(o_.M, 0.0);
    for (int k : kstar_) depths += k + 1, hist[k] += 1.0 / N_;
    s.halting = {{"passes", depths / N_},
                 {"l_dec", dec},
                 {"label_pos", label_candidates_ ? (double)label_pos_ / label_candidates_ : 0.0},
                 {"lookahead", (double)lookahead_rows_ / N_}};
    for (int k = 0; k < o_.M; k++) s.halting.push_back({"exit_" + std::to_string(k + 1), hist[k]});
    return s;
  }

  void per_token(Model<Bk>& m, std::vector<double>& nll, std::vector<double>& passes) override {
    std::vector<double> l(N_);
    m.be.to_host(l.data(), loss_ce_, N_);
    nll.assign(N_, std::nan(""));
    passes.assign(N_, 0);
    for (int t = 0; t < N_; t++) {
      if (sup_[t]) nll[t] = l[t];
      passes[t] = kstar_[t] + 1;
    }
  }

  // The mixture q_t = sum_m omega^m q^m_t (what the decoder emits).
  void probabilities(Model<Bk>& m, std::vector<double>& probs) override {
    const int V = m.cfg.vocab, M = o_.M;
    std::vector<double> g((size_t)M * N_);
    m.be.to_host(g.data(), g_all_, g.size());
    std::vector<double> reach(N_, 1.0);
    probs.assign((size_t)N_ * V, 0.0);
    for (int k = 0; k < M; k++) {
      const Step& s = steps_[k];
      if (s.rows.empty()) continue;
      std::vector<double> p;
      s.ro.probabilities(m, p);
      for (size_t r = 0; r < s.rows.size(); r++) {
        const int t = s.rows[r];
        const double gk = g[(size_t)k * N_ + t];
        const double w = k < kstar_[t] ? reach[t] * (1 - gk) : reach[t];
        for (int v = 0; v < V; v++) probs[(size_t)t * V + v] += w * p[r * V + v];
        reach[t] *= gk;
      }
    }
  }

  std::unique_ptr<Decoder<Bk>> decoder(Model<Bk>& m, int max_len) override;

  // ---- views of the last forward and hooks, for tests ---------------------
  const std::vector<int>& exit_depth() const { return kstar_; }  // stopping depth (0-based) per token
  // every decider output of the last forward: (depth k, token, g)
  std::vector<std::tuple<int, int, double>> decisions() const {
    std::vector<std::tuple<int, int, double>> d;
    for (int k = 0; k < (int)steps_.size(); k++)
      for (size_t r = 0; r < steps_[k].g_host.size(); r++) d.emplace_back(k, steps_[k].rows[r], steps_[k].g_host[r]);
    return d;
  }
  // labels per (depth k < M-1, token): candidate (in C_{k+1}), target c, weight w; pw per depth
  const std::vector<char>& label_candidates() const { return lab_cand_; }
  const std::vector<double>& label_targets() const { return lab_c_; }
  const std::vector<double>& label_weights() const { return lab_w_; }
  const std::vector<double>& label_pos_weights() const { return pw_; }
  // -log q^{k+1}_t[y] from the lookahead of each token that stopped at depth k
  // (NaN elsewhere), (M-1) x N
  const std::vector<double>& lookahead_nll() const { return look_nll_; }
  // The columns (in order) of every decider's top_D(q) in the last forward,
  // depth by depth: finite differences are valid only while they stay the same
  // (the sorted top-D values are differentiable between ties, not across them).
  std::vector<int> topk_columns(Model<Bk>& m) const {
    const int D = m.cfg.dim;
    std::vector<int> cols;
    for (const Step& s : steps_) {
      if (!s.ro.qidx) continue;
      std::vector<int> c(s.rows.size() * D);
      m.be.to_host(c.data(), s.ro.qidx, c.size());
      cols.insert(cols.end(), c.begin(), c.end());
    }
    return cols;
  }
  KvStore<Bk>& kv() { return kv_; }
  const T* step_embeddings(int k) const { return steps_[k].e; }  // e rows of depth k's rows
  const T* step_states(int k) const { return steps_[k].ro.hn; }  // h^{k+1} rows
  const std::vector<int>& step_rows(int k) const { return steps_[k].rows; }
  int slot(int t, int k) const { return (t / T_) * T_ * o_.M + (t % T_) * o_.M + k; }
  // Freezes the depth labels (targets, weights, candidate sets, pw) at the next
  // forward and reuses them afterwards, so that finite differences of the loss
  // hold the no-grad labels fixed. Each later forward still computes its own
  // labels; label_mismatches() counts those whose binary labels or candidate
  // sets differ from the frozen ones (the check would then be invalid).
  void freeze_labels(bool on) { freeze_ = on, frozen_ready_ = false, mismatches_ = 0; }
  int label_mismatches() const { return mismatches_; }
  // The mask's negative control: lookahead keys public (visible to every later query).
  void set_private_lookahead(bool on) { private_lookahead_ = on; }
  void set_alpha(double a) { o_.alpha = a; }
  void set_exit(double e) { o_.exit = e; }

 private:
  struct Step {
    std::vector<int> rows;  // tokens that ran this depth
    int* d_rows = nullptr;
    int* d_targets = nullptr;
    int* d_keep = nullptr;  // rows of this depth whose token runs the next one
    int n_next = 0;
    PassActs acts;
    ChunkedReadout<Bk> ro;  // h^m, log q^m[y], top_D(q^m) (the logits, unless recomputed)
    T* e = nullptr;  // e rows (n, D): decider and updater input
    DeciderActs dec;
    UpdaterActs upd;
    std::vector<double> g_host;
    T *dec_loss = nullptr, *ddec = nullptr;  // L_dec per row (scaled 1/N) and dL_dec/du
  };

  // A pass at depth k over `tokens` (sorted): slot (t, k), rotary position t.
  PassPlan plan(int k, const std::vector<int>& tokens) const {
    PassPlan p;
    p.B = B_, p.S = T_ * o_.M;
    for (int t : tokens) p.slot.push_back(slot(t, k)), p.pos.push_back(t % T_);
    p.finish();
    return p;
  }

  int* upload(Model<Bk>& m, const std::vector<int>& v) {
    int* d = m.arena.template alloc<int>(std::max<size_t>(v.size(), 1));
    m.be.to_device(d, v.data(), v.size());
    return d;
  }

  // The lookahead: one no-grad depth k+1 for `tokens` (sorted) that stopped
  // at depth k. Input from the updater; the keys are private (each query sees
  // the executed keys and its own key, no query sees another's), and the
  // slots are cleared afterwards, so the store is as before. Returns -log q^{k+1}[y].
  std::vector<double> lookahead(Model<Bk>& m, int k, const std::vector<int>& tokens) {
    const Step& s = steps_[k];
    const int n = (int)tokens.size(), D = m.cfg.dim;
    std::vector<int> r_idx(n), tg(n);
    for (int i = 0; i < n; i++) {
      r_idx[i] = (int)(std::lower_bound(s.rows.begin(), s.rows.end(), tokens[i]) - s.rows.begin());
      tg[i] = targets_[tokens[i]];
    }
    int* d_r = upload(m, r_idx);
    T* e_l = m.alloc((size_t)n * D);
    T* h_l = m.alloc((size_t)n * D);
    m.be.gather_rows(e_l, D, s.e, D, d_r, n, D);
    m.be.gather_rows(h_l, D, s.ro.hn, D, d_r, n, D);
    const UpdaterActs up = updater(m, e_l, h_l, n);
    PassPlan p = plan(k + 1, tokens);
    p.private_keys = private_lookahead_;
    const PassActs acts = m.forward_pass(p, kv_, up.out());
    ChunkedReadout<Bk> ro;  // no gradient: log q^{k+1}[y] only, no logits kept
    ro.want_argmax = false;
    ro.forward(m, acts.out(), n, upload(m, tg), T(0), /*training=*/false);
    std::vector<double> l(n);
    m.be.to_host(l.data(), ro.logp, n);
    for (double& v : l) v = -v;
    for (int sl : p.slot) kv_.valid[sl] = 0;  // the lookahead leaves no key behind
    kv_.upload_meta(m.be);
    lookahead_rows_ += n;
    return l;
  }

  // Depth labels, weights and positive weights (host, methods.md 7.2), then
  // uploaded per token for the TahDeciderBce functor. The cut and pw^m are
  // statistics of the global batch: in a data-parallel training step, of the
  // candidates of every rank (docs/methods/tah.md, "Data parallelism"); the
  // gains themselves are per token, from this rank's own lookahead.
  void make_labels(Model<Bk>& m, Communicator& comm) {
    const int M = o_.M, N = N_;
    std::vector<double> lp((size_t)M * N);
    m.be.to_host(lp.data(), logp_all_, lp.size());
    std::vector<char> cand((size_t)(M - 1) * N, 0);
    std::vector<double> c((size_t)(M - 1) * N, 0.0), w((size_t)(M - 1) * N, 0.0), pw(M - 1, 1.0);
    look_nll_.assign((size_t)(M - 1) * N, std::nan(""));
    lookahead_rows_ = 0;
    std::vector<char> in(sup_.begin(), sup_.end());  // C_1: the supervised tokens (all executed depth 1)
    for (int k = 0; k + 1 < M; k++) {
      std::vector<int> stopped;  // candidates that stopped here: l^{k+2} from the lookahead
      for (int t = 0; t < N; t++)
        if (in[t] && kstar_[t] == k) stopped.push_back(t);
      std::vector<double> lnext(N, 0.0);
      for (int t = 0; t < N; t++)
        if (in[t] && kstar_[t] > k) lnext[t] = -lp[(size_t)(k + 1) * N + t];
      if (!stopped.empty()) {
        const std::vector<double> l = lookahead(m, k, stopped);
        for (size_t i = 0; i < stopped.size(); i++)
          lnext[stopped[i]] = look_nll_[(size_t)k * N + stopped[i]] = l[i];
      }
      std::vector<double> gain(N, 0.0), pos;
      for (int t = 0; t < N; t++)
        if (in[t]) {
          gain[t] = -lp[(size_t)k * N + t] - lnext[t];  // delta = l^{k+1} - l^{k+2} (1-based depths)
          if (gain[t] > 0) pos.push_back(gain[t]);
        }
      double cut = 0;
      const bool any = coverage_cut(comm.gather_host(pos), o_.rho, &cut);
      int npos = 0, nneg = 0;
      for (int t = 0; t < N; t++) {
        if (!in[t]) continue;
        const size_t i = (size_t)k * N + t;
        cand[i] = 1;
        c[i] = any && gain[t] >= cut ? 1.0 : 0.0;
        w[i] = std::clamp(std::abs(gain[t] - cut), 1e-6, 1.0);
        (c[i] > 0 ? npos : nneg)++;
        in[t] = c[i] > 0 && kstar_[t] > k;  // C_{k+2}: labelled continue and executed the next depth
      }
      double counts[2] = {(double)npos, (double)nneg};
      comm.sum_host(counts, 2);
      pw[k] = counts[0] > 0 && counts[1] > 0 ? std::clamp(counts[1] / counts[0], 0.02, 50.0) : 1.0;
    }
    if (freeze_ && frozen_ready_) {  // tests: keep the frozen labels, count disagreements
      for (size_t i = 0; i < cand.size(); i++)
        if (cand[i] != lab_cand_[i] || c[i] != lab_c_[i]) {
          mismatches_++;
          break;
        }
    } else {
      lab_cand_ = cand, lab_c_ = c, lab_w_ = w, pw_ = pw;
      frozen_ready_ = freeze_;
    }
    double labels[2] = {0, 0};  // candidates, labelled "continue" (over every rank)
    for (size_t i = 0; i < lab_cand_.size(); i++) labels[0] += lab_cand_[i], labels[1] += lab_cand_[i] && lab_c_[i] > 0;
    comm.sum_host(labels, 2);
    label_candidates_ = (long long)labels[0], label_pos_ = (long long)labels[1];
    d_lab_c_ = m.alloc(lab_c_.size());
    d_lab_w_ = m.alloc(lab_w_.size());
    std::vector<double> wc(lab_w_.size());
    for (size_t i = 0; i < wc.size(); i++) wc[i] = lab_cand_[i] ? lab_w_[i] : 0.0;  // weight 0 off C_m
    m.be.to_device(d_lab_c_, lab_c_.data(), lab_c_.size());
    m.be.to_device(d_lab_w_, wc.data(), wc.size());
  }

  TahOptions o_;
  int B_ = 0, T_ = 0, N_ = 0, supervised_ = 0;
  std::vector<int> sup_, targets_, kstar_;
  int *ids_ = nullptr, *d_kstar_ = nullptr, *d_sup_ = nullptr;
  T* e_ = nullptr;
  KvStore<Bk> kv_;
  std::vector<Step> steps_;
  T *logp_all_ = nullptr, *g_all_ = nullptr, *loss_ce_ = nullptr, *g_logp_all_ = nullptr, *g_g_all_ = nullptr;
  double flops_main_ = 0, flops_lookahead_ = 0, other_main_ = 0, other_lookahead_ = 0;
  // labels
  bool has_labels_ = false, freeze_ = false, frozen_ready_ = false, private_lookahead_ = true;
  int mismatches_ = 0;
  long long label_candidates_ = 0, label_pos_ = 0, lookahead_rows_ = 0;
  std::vector<char> lab_cand_;
  std::vector<double> lab_c_, lab_w_, pw_, look_nll_;
  T *d_lab_c_ = nullptr, *d_lab_w_ = nullptr;
};

// Decoding: the grid store is the KV cache. Each new token runs depth 1, then
// continues while g > tau_exit and m < M, writing its key at every executed
// depth, and emits the mixture q_t. Prefill is the same cascade, token by token.
template <class Bk>
class TahDecoder : public Decoder<Bk> {
 public:
  using T = typename Bk::Real;
  TahDecoder(TahMethod<Bk>& meth, Model<Bk>& m, int max_len) : Decoder<Bk>(m, max_len), meth_(meth) {
    M_ = meth.options().M;
    kv_.init(m.be, this->cache_, 1, max_len * M_, m.cfg.layers, m.cfg.dim, kDepthLE, false);
    for (int s = 0; s < kv_.S; s++) kv_.order[s] = s / M_, kv_.depth[s] = s % M_;
  }

 protected:
  void run(int token, int t) override {
    Model<Bk>& m = this->m_;
    const int V = m.cfg.vocab;
    const T* e = m.embed({token});
    const T* x = e;
    this->probs_.assign(V, 0.0);
    double reach = 1;
    for (int k = 0; k < M_; k++) {
      const PassPlan plan = this->one_row(kv_.S, t * M_ + k, t);
      bool last = k == M_ - 1;
      // one row: the unfused readout, its logits computed once (the chunked
      // readout would compute them again for the probabilities)
      const auto ro = m.readout_forward(m.forward_pass(plan, kv_, x).out(), 1);
      T* q = m.alloc(V);
      m.be.softmax_forward(q, ro.logits, 1, V);  // q^m
      std::vector<double> p(V);
      m.be.to_host(p.data(), q, V);
      double g = 0;
      if (!last && meth_.fixed()) {
        g = meth_.fixed_continue(k);
      } else if (!last) {
        const int D = m.cfg.dim;  // the decider reads top_D(q^m), as the training readout gives it
        T* top = m.alloc(D);
        int* idx = m.arena.template alloc<int>(D);
        m.be.topk_values_forward(top, idx, q, 1, V, D);
        m.flops.other += op_cost::softmax(1, V) + op_cost::topk(1, V, D);
        auto d = meth_.decider(m, e, ro.hn, top, 1);
        T gh;
        m.be.to_host(&gh, d.g, 1);
        g = gh;
        last = !(g > meth_.options().exit);
      }
      const double w = last ? reach : reach * (1 - g);  // omega^m
      for (int v = 0; v < V; v++) this->probs_[v] += w * p[v];
      this->passes_ = k + 1;
      if (last) break;
      reach *= g;
      x = meth_.updater(m, e, ro.hn, 1).out();
    }
  }

 private:
  TahMethod<Bk>& meth_;
  KvStore<Bk> kv_;
  int M_ = 0;
};

template <class Bk>
std::unique_ptr<Decoder<Bk>> TahMethod<Bk>::decoder(Model<Bk>& m, int max_len) {
  return std::make_unique<TahDecoder<Bk>>(*this, m, max_len);
}

}  // namespace ada
