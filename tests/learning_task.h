// A synthetic task with easy and hard targets, and a short deterministic
// training of a method on it, for the learning tests (test_learning.cpp):
// can a halting mechanism learn to spend its passes where they are needed?
//
// The task: a two-hop pointer chase. With r = 4, tokens 0..3 are values,
// token 4 is '=', tokens 5..8 are the pointers P_0..P_3. A sequence is a run
// of blocks of r + 3 tokens
//     x_0 x_1 x_2 x_3  P_p  a  =        x_i, p uniform in 0..3;  a = x[x[p]]
// and two kinds of target carry a loss:
//   easy: the '=' after a. The blocks have a fixed length, so it is a
//         constant of the position, learned in a few dozen steps.
//   hard: a, predicted at P_p. It takes two dependent lookups: read x_p
//         (the pointer names the slot), then read the slot x_p names.
// Everything else (the values and the pointer, which are random) carries no
// loss: unpredictable targets would only add noise to the comparison.
//
// Why this task. The model is the "test" config with ONE layer, so a pass
// has one attention. Its query at P_p depends on P_p only, so one pass can
// fetch x_p but not x_{x_p}, whose address is known only after the first
// lookup; a second pass (step, depth) runs attention again on a state that
// holds x_p, which is exactly the sequential computation the hard targets
// need and the easy ones do not. (One pass is not helpless: attention with
// position-dependent weights mixes all four values into one vector, from
// which the MLP can partly decode the answer; measured, one pass reaches a
// NLL of 0.3-0.5 on the hard targets where two passes reach ~0, see
// Learning.PointerTaskNeedsASecondPass.) We first tried modular addition
// (a = (d_1 + d_2) mod n): every model sat on a plateau at ln n for
// 500-1000 steps, with or without extra passes, and a model that escaped it
// solved it in one pass, so extra passes never helped there.
#pragma once
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu_backend.h"
#include "backend/device_array.h"
#include "core/config.h"
#include "core/rng.h"
#include "methods/registry.h"
#include "ops/adamw.h"
#include "train/schedule.h"

namespace ada::test {

enum TargetKind : char { kNoLoss = 0, kEasy = 1, kHard = 2 };

struct PointerTask {
  int r = 4;  // value slots per block; values and pointers range over 0..r-1

  int block() const { return r + 3; }
  int eq() const { return r; }
  int pointer(int p) const { return r + 1 + p; }
  int vocab_needed() const { return 2 * r + 1; }

  // B sequences of `blocks` blocks each (T = blocks * (r + 3)); kind[i] says
  // what target i is.
  Batch batch(int B, int blocks, uint64_t seed, std::vector<char>* kind = nullptr) const {
    Rng rng(seed);
    Batch b;
    b.B = B, b.T = blocks * block();
    std::vector<char> k;
    for (int s = 0; s < B; s++) {
      std::vector<int> seq;
      for (int j = 0; j < blocks; j++) {
        std::vector<int> x(r);
        for (int i = 0; i < r; i++) x[i] = (int)rng.below(r), seq.push_back(x[i]);
        const int p = (int)rng.below(r);
        seq.push_back(pointer(p));
        seq.push_back(x[x[p]]);  // a: two hops
        seq.push_back(eq());
      }
      for (int t = 0; t < b.T; t++) {
        const int pos = t % block();  // 0..r-1 values, r the pointer, r+1 the answer, r+2 '='
        const char kd = t + 1 == b.T ? kNoLoss : pos == r ? kHard : pos == r + 1 ? kEasy : kNoLoss;
        b.inputs.push_back(seq[t]);
        b.targets.push_back(kd == kNoLoss ? -1 : seq[t + 1]);
        k.push_back(kd);
      }
    }
    if (kind) *kind = k;
    return b;
  }
};

// What a model does on a batch, per kind of target.
struct LearningResult {
  double passes_easy = 0, passes_hard = 0;  // mean passes (steps, depths) per target
  double nll_easy = 0, nll_hard = 0;        // mean -log q(y)
  double acc_easy = 0, acc_hard = 0;        // fraction with q(y) > 1/2
  std::string describe() const {
    char s[256];
    std::snprintf(s, sizeof s, "passes easy %.3f hard %.3f | nll easy %.4f hard %.4f | acc easy %.3f hard %.3f",
                  passes_easy, passes_hard, nll_easy, nll_hard, acc_easy, acc_hard);
    return s;
  }
};

// The per-kind means of the method's last forward over a batch with these kinds.
template <class Bk>
LearningResult measure(Method<Bk>& method, Model<Bk>& model, const std::vector<char>& kind) {
  std::vector<double> nll, passes;
  method.per_token(model, nll, passes);
  double cnt[3] = {0, 0, 0}, p[3] = {0, 0, 0}, l[3] = {0, 0, 0}, a[3] = {0, 0, 0};
  for (size_t i = 0; i < kind.size(); i++) {
    const int k = kind[i];
    if (k == kNoLoss) continue;
    cnt[k] += 1, p[k] += passes[i], l[k] += nll[i], a[k] += std::exp(-nll[i]) > 0.5;
  }
  LearningResult res;
  res.passes_easy = p[kEasy] / cnt[kEasy], res.passes_hard = p[kHard] / cnt[kHard];
  res.nll_easy = l[kEasy] / cnt[kEasy], res.nll_hard = l[kHard] / cnt[kHard];
  res.acc_easy = a[kEasy] / cnt[kEasy], res.acc_hard = a[kHard] / cnt[kHard];
  return res;
}

struct LearningSetup {
  std::string method;
  MethodOptions opts;
  ModelConfig cfg = one_layer_test_config();
  PointerTask task;
  int steps = 600, B = 16, blocks = 6;  // T = 6 blocks x 7 tokens = 42
  double lr = 1e-2, weight_decay = 0.0, clip = 1.0;
  long long warmup = 20;                // lr warmup steps, then cosine to 10%
  uint64_t seed = 1;
  // An optional first phase: the first `open_steps` steps run with the method
  // options changed by `open_overrides` ("flag=value,...", the form of eval's
  // --override), e.g. a threshold that lets every token run every pass. The
  // parameters and AdamW moments carry over to the method with the options
  // `opts` for the rest of the run (same parameter layout, same schedule).
  std::string open_overrides;
  int open_steps = 0;
  bool verbose = false;  // print the per-kind halting of the training batch every 50 steps

  static ModelConfig one_layer_test_config() {
    ModelConfig c = preset_config("test");  // V 23, D 16, 2 heads, F 24
    c.layers = 1;
    return c;
  }
};

// Runs the enclosing scope on one OpenMP thread. The learning tests train a
// model of ~3k parameters on ~700 rows: every op is far smaller than the cost
// of waking a second thread, and on a loaded 2-core machine the fork/join of
// two threads made a training 8x slower in wall time (6 s -> 48 s measured)
// without changing a single figure it printed.
struct OneThread {
  int before = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(before); }
};

// Trains `s.method` in float with AdamW on fresh batches of the task (the
// batch of step i has seed s.seed * 1000003 + i), then measures it on a
// batch of 4B sequences it never saw (forward with training = false).
// Deterministic (one thread).
inline LearningResult train_on_task(const LearningSetup& s) {
  using Bk = CpuBackend<float>;
  OneThread one_thread;
  check(s.cfg.vocab >= s.task.vocab_needed(), "learning test: the vocabulary is too small for the task");
  Bk be;
  MethodOptions first = s.opts;
  if (s.open_steps > 0) apply_method_overrides(first, s.open_overrides);
  auto method = make_method<Bk>(s.method, first);
  auto model = make_model(be, s.cfg, *method);
  model->init_params(s.seed);
  const size_t n = model->num_params();
  DeviceArray<Bk, float> mom(be, n), var(be, n);
  be.memset_zero(mom.data(), n * sizeof(float));
  be.memset_zero(var.data(), n * sizeof(float));
  CosineSchedule sched{s.lr, 0.1, s.warmup, s.steps};

  for (int step = 0; step < s.steps; step++) {
    if (s.open_steps > 0 && step == s.open_steps) {  // second phase: the same parameters, the options `opts`
      auto method2 = make_method<Bk>(s.method, s.opts);
      auto model2 = make_model(be, s.cfg, *method2);
      check(model2->num_params() == n, "learning test: the two phases have different parameter layouts");
      be.copy(model2->params.data(), model->params.data(), n);
      method = std::move(method2), model = std::move(model2);
    }
    method->set_step(step, s.steps);
    std::vector<char> kind;
    const Batch b = s.task.batch(s.B, s.blocks, s.seed * 1000003 + (uint64_t)step, &kind);
    model->zero_grads();
    model->arena.reset();
    method->forward(*model, b, true);
    method->backward(*model, 1.0);
    const StepStats st = method->stats(*model);
    check(std::isfinite(st.loss), "learning test: the loss became non-finite at step " + std::to_string(step));
    if (s.verbose && (step % 50 == 0 || step + 1 == s.steps)) {
      std::printf("  step %4d loss %.4f | %s |", step, st.loss, measure(*method, *model, kind).describe().c_str());
      for (auto& kv : st.halting) std::printf(" %s %.3f", kv.first.c_str(), kv.second);
      std::printf("\n");
    }
    AdamWHyper h;
    h.lr = sched.at(step), h.weight_decay = s.weight_decay, h.step = step + 1;
    be.adamw_step(model->params.data(), model->grads.data(), mom.data(), var.data(), n, model->layout.decay_count(), h,
                  s.clip);
  }

  std::vector<char> kind;
  const Batch b = s.task.batch(4 * s.B, s.blocks, s.seed * 1000003 + 999999937ull, &kind);
  model->arena.reset();
  method->forward(*model, b, false);
  return measure(*method, *model, kind);
}

}  // namespace ada::test
