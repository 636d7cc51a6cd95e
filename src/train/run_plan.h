// What a run will do with its data and how long it will take, as train_cpu
// and train_gpu print it: the tokens of one optimizer step, how many times the
// run goes over its training tokens (a run that sees them more than once is a
// smoke run, not a way to train a model: docs/recipes.md), and the time
// estimate of the progress lines.
#pragma once
#include <cstddef>
#include <string>

namespace ada {

struct RunPlan {
  double tokens_per_step = 0;  // --accum x --batch x --seq
  double total_tokens = 0;     // --steps x tokens_per_step
  double train_tokens = 0;     // the training data's size
  // total_tokens / train_tokens: the expected number of times each training
  // token is drawn (batches are windows at uniformly random offsets).
  double epochs = 0;
};

RunPlan plan_run(long long steps, int accum, int batch, int seq, size_t train_tokens);

// "tokens  2.05k per step (--accum 1 x --batch 16 x --seq 128), 1.23M in 600
// steps: 1.14 epochs of the 1.08M training tokens"
std::string describe_plan(const RunPlan& p, long long steps, int accum, int batch, int seq);

// "" for at most one epoch, else "warning: this run sees its data 9.1 times: a smoke run; see docs/recipes.md".
std::string epoch_warning(const RunPlan& p);

// Seconds for the `left` steps still to run, after `done` >= 1 steps of this
// run. The first step is slower (allocation; on the GPU the kernels' first
// launches), so once later steps exist only they are used: `first_s` is the
// first step's time, `later_s` the time of the `done - 1` steps after it.
double eta_seconds(double first_s, double later_s, long long done, long long left);

}  // namespace ada
