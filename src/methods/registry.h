// Method options (every method's flags in one place) and the factory that
// builds a method by name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "methods/method.h"
#include "methods/adaponder.h"
#include "methods/cyb.h"
#include "methods/latent_cot.h"
#include "methods/looped.h"
#include "methods/pause.h"
#include "methods/ponder.h"
#include "methods/ponderlm2.h"
#include "methods/standard.h"
#include "methods/tah.h"
#include "train/flags.h"

namespace ada {

// The most passes, pauses, loops or latent steps any method option may ask
// for (each method checks its own, smaller limit where it has one).
constexpr int kMaxMethodSteps = 255;

struct MethodOptions {
  int iters = 3;         // looped: extra loops K (the stack runs K+1 times)
  int ponder_steps = 3;  // ponder / adaponder: pondering passes P (P+1 passes in all)
  int pauses = 3;        // pause: pause tokens after every real token
  std::string pause_positions = "shared";  // pause: rotary positions of pauses: shared (token's) | own
  AdaPonderOptions ada;  // adaponder (ada.K is taken from ponder_steps)
  CybOptions cyb;        // cyb (cyb.pauses is taken from pauses)
  LatentCotOptions latent;  // latent_cot
  TahOptions tah;           // tah
  PonderLM2Options plm2;    // ponderlm2
};

inline void add_method_flags(Flags& f, MethodOptions& o) {
  f.section("method options");
  f.add("--iters", &o.iters, "looped: extra loops K; the block stack runs K+1 times", 0, kMaxMethodSteps);
  f.add("--ponder-steps", &o.ponder_steps, "ponder/adaponder: pondering passes P (P+1 passes per token)", 1,
        kMaxMethodSteps);
  f.add("--pauses", &o.pauses, "pause/cyb: <PAUSE> tokens inserted after every real token", 0, kMaxMethodSteps);
  f.add("--pause-positions", &o.pause_positions,
        "pause: rotary positions of the pauses: shared (their token's, PausedLM) | own (Goyal et al.)");
  f.add("--tau", &o.ada.tau, "adaponder: a token stops when its gate falls below tau");
  f.add("--ponder-k", &o.ada.ponder_k, "adaponder: final fraction of gates in the bottom-k ponder loss");
  f.add("--ponder-lambda", &o.ada.lambda, "adaponder: weight of the ponder loss");
  f.add("--warmup-ce-steps", &o.ada.warmup_ce, "adaponder: cross-entropy-only steps (-1 = 10% of --steps)", -1, kMaxSteps);
  f.add("--ponder-k-warmup", &o.ada.k_warmup, "adaponder: steps over which k ramps up (-1 = 20% of --steps)", -1, kMaxSteps);
  f.add("--gate-hidden", &o.ada.gate_hidden, "adaponder: gate MLP hidden width (0 = D/4)", 0, kMaxHidden);
  f.add("--gate-bias", &o.ada.gate_bias, "adaponder: initial gate bias (0 -> s = 0.5; 4 -> s = 0.98, the spec's start as PonderLM)");
  f.add("--policy", &o.ada.policy, "adaponder: gates | uniform | geometric | matched (fixed pruning baselines) | matched-gated (matched's exits, gated updates)");
  f.add("--policy-passes", &o.ada.policy_passes, "adaponder uniform/geometric policies: average passes per token");
  f.add("--policy-hist", &o.ada.policy_hist,
        "adaponder matched and matched-gated policies: fractions of tokens exiting after pass 1..K+1, '/'-separated (e.g. eval's exit_i)");
  f.add("--compaction", &o.ada.compaction, "adaponder: compute only active rows (0 = masked reference)");
  f.add("--cyb-gamma", &o.cyb.gamma0, "cyb: per-step discount gamma_i = gamma^(i-1)");
  f.add("--cyb-deadline", &o.cyb.deadline, "cyb: world deadline distribution omega: uniform | last");
  f.add("--cyb-dk-init", &o.cyb.dk_init, "cyb: initial don't-know probability d, in (0, 1) (sets the DK bias)");
  f.add("--cyb-visibility", &o.cyb.visibility, "cyb: later tokens see earlier pauses (all) or not (own)");
  f.add("--cyb-warmup-steps", &o.cyb.warmup,
        "cyb: first steps with the anytime loss (every step's prediction trained alike, the DK head untouched; -1 = half of --steps)",
        -1, kMaxSteps);
  f.add("--latent-steps", &o.latent.K, "latent_cot: latent steps K (K+1 cells per token at most)", 1, kMaxMethodSteps);
  f.add("--reach-tau", &o.latent.tau, "latent_cot: a cell runs only if its reach probability is >= tau");
  f.add("--latent-lambda", &o.latent.lambda, "latent_cot: weight of the correctness-aware halting loss");
  f.add("--latent-beta", &o.latent.beta, "latent_cot: sharpness beta of that loss");
  f.add("--latent-warmup-steps", &o.latent.warmup,
        "latent_cot: first steps with lambda = 0, the router learning from the mixture loss only (-1 = half of --steps)", -1,
        kMaxSteps);
  f.add("--router-hidden", &o.latent.router_hidden, "latent_cot: router MLP hidden width (0 = D/4)", 0, kMaxHidden);
  f.add("--router-bias", &o.latent.router_bias, "latent_cot: initial router bias (2.2 -> continue 0.9)");
  f.add("--tah-depths", &o.tah.M, "tah: depths M (the block stack runs at most M times per token)", 1, kMaxMethodSteps);
  f.add("--tah-exit", &o.tah.exit, "tah: a token continues to the next depth iff its decider output g > this");
  f.add("--tah-alpha", &o.tah.alpha, "tah: weight of the decider loss L_dec");
  f.add("--tah-rho", &o.tah.rho, "tah: coverage of the positive loss gain that the 'continue' labels hold");
  f.add("--tah-hidden", &o.tah.hidden, "tah: decider and updater MLP width (0 = D)", 0, kMaxHidden);
  f.add("--tah-policy", &o.tah.policy, "tah: decider (adaptive depth) | fixed (every token runs all M depths, even mixture: the paper's fixed-depth baseline)");
  f.add("--latent-thoughts", &o.plm2.K, "ponderlm2: latent thoughts K per token (K+1 rows per token)", 1, kMaxMethodSteps);
  f.add("--jacobi-train", &o.plm2.jacobi_train,
        "ponderlm2: Jacobi passes in training (0 = drawn from {2,3} each step, from --seed and the step)", 0,
        kMaxSeq);
  f.add("--jacobi-eval", &o.plm2.jacobi_eval,
        "ponderlm2: Jacobi passes in evaluation (>= (K+1) x seq: the exact sequential solution)", 0, kMaxSeq);
}

// Applies "flag=value,flag=value" (method flags without their dashes, e.g.
// "tau=1e-3,compaction=0") to method options: how eval and compare change a
// method's behaviour without changing its parameters.
inline void apply_method_overrides(MethodOptions& o, const std::string& spec, char sep = ',') {
  std::vector<std::string> args = {"overrides"};
  std::string cur;
  for (char c : spec + sep) {
    if (c == sep) {
      if (!cur.empty()) args.push_back("--" + cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  for (size_t i = 1; i < args.size(); i++)
    check(args[i].find('=') != std::string::npos, "method override '" + args[i].substr(2) + "' needs the form flag=value");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  Flags f("method options", "");
  add_method_flags(f, o);
  f.parse((int)argv.size(), argv.data());
  check(f.positional().empty(), "bad method override '" + spec + "'");
}

inline std::vector<std::string> method_names() { return {"standard", "looped", "ponder", "pause", "adaponder", "cyb", "latent_cot", "tah", "ponderlm2"}; }

template <class Bk>
std::unique_ptr<Method<Bk>> make_method(const std::string& name, const MethodOptions& o) {
  if (name == "standard") return std::make_unique<StandardMethod<Bk>>();
  if (name == "looped") return std::make_unique<LoopedMethod<Bk>>(o.iters);
  if (name == "ponder") return std::make_unique<PonderMethod<Bk>>(o.ponder_steps);
  if (name == "pause") return std::make_unique<PauseMethod<Bk>>(o.pauses, o.pause_positions);
  if (name == "adaponder") {
    AdaPonderOptions a = o.ada;
    a.K = o.ponder_steps;
    return std::make_unique<AdaPonderMethod<Bk>>(a);
  }
  if (name == "cyb") {
    CybOptions c = o.cyb;
    c.pauses = o.pauses;
    return std::make_unique<CybMethod<Bk>>(c);
  }
  if (name == "latent_cot") return std::make_unique<LatentCotMethod<Bk>>(o.latent);
  if (name == "tah") return std::make_unique<TahMethod<Bk>>(o.tah);
  if (name == "ponderlm2") return std::make_unique<PonderLM2Method<Bk>>(o.plm2);
  std::string all;
  for (auto& n : method_names()) all += (all.empty() ? "" : ", ") + n;
  fail("unknown --method '" + name + "' (available: " + all + ")");
}

}  // namespace ada
