// What compare and study share: method specs ("name[:flag=value]..."), their
// file-safe labels, finding a run that is already finished (or half done, to
// resume), and measuring what inference costs a trained method.
//
// A method spec is `name[:flag=value]...` with any flag of train_cpu
// (without the leading dashes): method options (tau=1e-3) and the run's own
// (embed-scale=latent_cot, init-from=runs/std, steps=300). `policy-passes=auto`
// and `policy-hist=auto` take the passes per token and the per-pass exit
// histogram of the last learned-gate adaponder run measured before it.
// Labels, and the `label=NAME` part that chooses one: train/method_spec.h.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "train/cpu_instances.h"
#include "train/method_spec.h"
#include "train/options.h"

namespace ada {

using CpuTrainer = Trainer<CpuBackend<float>>;

// The options of one spec: `base` with the spec's method and flags applied.
// auto_passes / auto_hist stand in for policy-passes=auto / policy-hist=auto
// (<= 0 / empty: none measured yet, and such a spec is an error).
TrainOptions options_for_spec(const TrainOptions& base, const std::string& spec, double auto_passes,
                              const std::string& auto_hist);

// Where a run folder stands: no checkpoint (step 0, ckpt ""), part way
// (0 < step < steps: resume from ckpt) or finished (step == steps).
struct RunProgress {
  std::string ckpt;
  long long step = 0;
};
RunProgress run_progress(const std::string& dir);

// Loads a finished checkpoint's parameters into the trainer's model and
// returns its training state (FLOPs, seconds, tokens of the whole run).
TrainState load_finished(CpuTrainer& tr, const std::string& ckpt, long long steps);

// What inference costs a trained method on the fixed validation batches
// (--eval-batches windows): FLOPs, other ops and passes per token, counted,
// token-weighted halting statistics, and the forward's wall time per token,
// measured: one warm-up batch, then the median of 3 timings of all the
// batches (steady clock, forward only, on `threads` OpenMP threads; 0 = the
// current setting).
struct InferenceCost {
  double flops = 0, other = 0, passes = 0, us = NAN;
  std::vector<std::pair<std::string, double>> halting;
};
InferenceCost inference_cost(CpuTrainer& tr, const TokenSource& val, const TrainOptions& o, int threads = 0);

// The per-pass exit histogram "f1/f2/.../f{K+1}" of a trained adaponder
// from its exit_i halting statistics (what policy-hist=auto takes).
std::string exit_histogram(const std::vector<std::pair<std::string, double>>& halting, int K);

}  // namespace ada
