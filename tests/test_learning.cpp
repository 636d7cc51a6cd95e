// Learning tests: after a short training on a task whose hard targets need a
// second pass and whose easy targets do not (tests/learning_task.h: a
// two-hop pointer chase on a one-layer model), each halting mechanism must
// spend more passes on the hard targets than on the easy ones, and the model
// must have learned the targets. The gradient checks say each method computes
// the derivative of its loss; these say that loss, trained, moves the halting
// the right way.
//
// Each training is deterministic (float CPU, one thread, fixed seeds) and
// runs seed 1. Each test's comment gives what the defaults did, why, the flags
// set instead, and the margin (hard minus easy passes) measured for seeds 1-5
// of the training seed; the asserted margin is about half the smallest of
// those (for AdaPonderLM, whose seed 4 gave 0.05, a fraction of seed 1's).
// Every figure is printed for the record. Set ADA_LEARNING_VERBOSE=1 to see
// the per-kind halting of the training batch every 50 steps.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "train/cpu_instances.h"
#include "learning_task.h"

using namespace ada;
using namespace ada::test;

namespace {

LearningResult run(LearningSetup s, const char* what) {
  s.verbose = std::getenv("ADA_LEARNING_VERBOSE") != nullptr;
  const LearningResult r = train_on_task(s);
  std::printf("[learning] %s: %s\n", what, r.describe().c_str());
  return r;
}

}  // namespace

// The premise of the task: one pass of the one-layer model cannot chase two
// pointers, two passes can. Measured (600 steps, lr 1e-2, seeds 1-5): standard
// hard NLL 0.45-0.53, looped with 2 passes 0.00-0.09; uniform is ln 4 = 1.39.
TEST(Learning, PointerTaskNeedsASecondPass) {
  LearningSetup s;
  s.method = "standard";
  const LearningResult one = run(s, "standard, 1 pass");
  s.method = "looped";
  s.opts.iters = 1;
  const LearningResult two = run(s, "looped, 2 passes");
  EXPECT_LT(one.nll_easy, 0.01);
  EXPECT_LT(two.nll_easy, 0.01);
  EXPECT_GT(one.nll_hard, 0.25);  // one pass: partly (see learning_task.h), far from solved
  EXPECT_LT(two.nll_hard, 0.1);   // two passes: solved
}

// AdaPonderLM. With the spec's gate bias 4 (the default until 2026-12-08),
// 10% CE-only warm-up and k = 0.1, the gates learn the opposite: after 600 steps the easy targets run all 4
// passes and the hard ones 3.06, and the hard targets are learned late (NLL
// 0.33). Why: until pondering has learned to help the hard targets, the CE
// gradient on their gates is noise or negative (the update feeds back a
// useless guess), so their gates are the smallest when the bottom-k loss
// starts, and the bottom-k loss pushes down exactly the smallest gates; the
// easy targets' CE gradient is ~0 once they are learned, so their gates stay
// at init and never enter S_k. The mechanism needs the CE signal on the gates
// to exist before the ponder loss starts. Settings here:
//   --warmup-ce-steps 300: CE only until the second hop is learned (~step 300-400);
//   --tau 0 for those 300 steps, then 1e-4: stage 1 still prunes at tau, and
//     for seed 5 the CE gradient alone pushed 90% of the tokens' gates below
//     1e-4 by step 300, before the ponder loss had started; pruned tokens get no
//     CE gradient and never came back (easy 1.52, hard 1.54 passes, hard NLL 0.56);
//   --gate-bias 0 (s = 0.5, now the default): the gates start where the sigmoid is steepest, so
//     the CE gradient can move them in a short run (at s = 0.98 the slope is 14x
//     smaller); with bias 4 and a 500-step warm-up: easy 4.00, hard 3.98 after 800 steps;
//   --ponder-k 0.3: 5 of every 7 tokens carry no loss here and their gates fill
//     the bottom 10%; with k = 0.1 the easy gates are reached slowly (margins
//     1.78, 0.25, 0.13 for seeds 1-3, vs 1.80, 0.76, 0.96 with k = 0.3);
//   lr 2e-2, 800 steps: at lr 1e-2 seeds 2 and 3 had not learned the second hop by step 800.
// Measured with these settings, hard minus easy passes for seeds 1-5: 1.85,
// 0.65, 0.96, 0.05, 1.00 (seed 4: easy 3.00, hard 3.05, both targets learned:
// the hard ones need only 2 of the 4 passes, and the easy ones' third gate had
// not reached tau by step 800). The right direction for every seed, a clear
// margin for four of five.
TEST(Learning, AdaPonderKeepsPonderingOnHardTokens) {
  LearningSetup s;
  s.method = "adaponder";
  s.opts.ponder_steps = 3;
  s.opts.ada.warmup_ce = 300;
  s.opts.ada.k_warmup = 100;
  s.opts.ada.gate_bias = 0;
  s.opts.ada.ponder_k = 0.3;
  s.open_overrides = "tau=0";
  s.open_steps = 300;
  s.steps = 800;
  s.lr = 2e-2;
  const LearningResult r = run(s, "adaponder");
  EXPECT_LT(r.nll_easy, 0.01);
  EXPECT_LT(r.nll_hard, 0.35);
  EXPECT_GT(r.passes_hard - r.passes_easy, 0.3);
}

// Adaptive latent CoT, with its defaults. Without the halting-loss warm-up
// (--latent-warmup-steps 0, the default before it existed) every token stops
// after step 0 within 100 steps and the hard targets stay at the one-pass
// level (NLL 0.52 after 600 steps, 1.00 steps on hard targets). Why: L_ada
// charges continuing with sg(p[y])^beta; once the easy targets are solved
// their charge drives the shared router down before the latent steps have
// learned the second hop, and once the reach falls below tau the pruned steps
// get no gradient and cannot come back. The default warm-up (lambda = 0 for
// the first half of the run: the router learns only where a later step
// predicts better) fixes it: hard minus easy steps for seeds 1-5 measured
// 2.39, 1.02, 1.85, 1.84, 1.24 (easy 1.00 every time, hard NLL <= 0.006).
// Shorter warm-ups: 25% of the run, 4 of 5 seeds right (seed 1: easy 3.00,
// hard 3.72); 10%, 2 of 5. Without the warm-up, --latent-beta 4 (charging
// the hard targets' p ~ 0.3 only 0.3^4) also works: easy 1.00, hard 1.96,
// 1.67, 2.93, 2.31, 2.21 steps for seeds 1-5; a router bias of 4.6 does not.
TEST(Learning, LatentCotThinksLongerOnHardTokens) {
  LearningSetup s;
  s.method = "latent_cot";
  s.opts.latent.K = 3;
  const LearningResult r = run(s, "latent_cot");
  EXPECT_LT(r.nll_easy, 0.01);
  EXPECT_LT(r.nll_hard, 0.1);
  EXPECT_GT(r.passes_hard - r.passes_easy, 0.5);
}

// The same without the warm-up collapses: the test that would have caught it.
TEST(Learning, LatentCotWithoutWarmupStopsEveryTokenAfterStepZero) {
  LearningSetup s;
  s.method = "latent_cot";
  s.opts.latent.K = 3;
  s.opts.latent.warmup = 0;
  const LearningResult r = run(s, "latent_cot, no warm-up");
  EXPECT_LT(r.passes_hard, 1.05);
  EXPECT_GT(r.nll_hard, 0.3);
}

// TaH2. With the defaults from the first step it works for seed 1 (easy 1.00,
// hard 1.84 depths, hard NLL 0.08) but not for seeds 2 and 3 (hard 1.00 and
// 1.47 depths, hard NLL 0.64 and 0.53, i.e. the second hop never learned). Why:
// a depth is trained only on the tokens that run it, and its lookahead labels
// ask "does depth 2 predict better than depth 1 now?": while depth 2 is
// untrained the answer is no, the tokens stop, and depth 2 stays untrained.
// So, as methods.md 7.7.4 recommends (post-train TaH2 on a trained model), the
// first 300 of the 600 steps run with --tah-exit 0 (every token continues to
// depth M, the decider still trains on its labels), the rest with the default
// 0.5. That alone gave hard minus easy depths 0.81, 0.79, 0.66, 1.70 for seeds
// 1-4 but -1.32 for seed 5: its easy targets stayed at depth 3. Their gains are
// ~0, so their "stop" labels weigh w = |delta - cut| ~ cut, small, and with
// alpha 0.05 the decider, shared with the hard targets and also driven by the
// mixture's CE gradient, did not follow them. --tah-alpha 0.5 (as in the
// whole-model gradient check): 0.56, 0.53, 0.62, 0.59, 1.10 for seeds 1-5, easy
// targets at depth 1.00 every time, hard NLL 0.02-0.34. (--tah-rho 0.9
// instead: 1.10, 0.32, 0.59, 0.63, 0.24.)
TEST(Learning, TahGoesDeeperOnHardTokens) {
  LearningSetup s;
  s.method = "tah";
  s.opts.tah.M = 3;
  s.opts.tah.alpha = 0.5;
  s.open_overrides = "tah-exit=0";
  s.open_steps = 300;
  const LearningResult r = run(s, "tah");
  EXPECT_LT(r.nll_easy, 0.01);
  EXPECT_LT(r.nll_hard, 0.35);
  EXPECT_GT(r.passes_hard - r.passes_easy, 0.25);
}
