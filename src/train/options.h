// Everything a training run is configured by, the flags that set it, and the
// checks that reject impossible values before any work starts. Shared by
// train_cpu and train_gpu so the two take exactly the same flags.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "methods/registry.h"
#include "train/flags.h"

namespace ada {

struct TrainOptions {
  std::string method = "standard";
  std::string config = "tiny";
  // model size overrides (0 / -1 = keep the preset's value)
  int vocab = 0, dim = 0, layers = 0, heads = 0, hidden = 0, max_seq = 0;
  int tied = -1;
  // input scale of the token embeddings: "method" (the method's own), a number,
  // or a method name whose scale to borrow ("latent_cot", "ponder", "standard")
  std::string embed_scale = "method";
  // data
  std::string data = "data/kjv.txt";
  std::string tokenizer = "auto";
  double val_fraction = 0.1;
  // optimisation
  long long steps = 600;
  int batch = 16, seq = 128, accum = 1;
  double lr = 3e-3, min_lr_frac = 0.1, weight_decay = 0.1, clip = 1.0, beta1 = 0.9, beta2 = 0.95;
  long long warmup = 30;
  long long seed = 1337;
  // evaluation and logging
  long long eval_every = 100;
  int eval_batches = 8;
  long long log_every = 10;
  std::string out;  // default runs/<method>-<config> (when resuming: the checkpoint's run directory)
  int threads = 0;  // 0 = OpenMP default
  int recompute_logits = 0;  // 1: the chunked readouts recompute their logits in the backward (less memory, one head GEMM more per pass)
  int bf16_acts = 0;         // 1: the blocks' saved q, attention output and gate|up stored in bf16 (Model::bf16_acts)
  // checkpoints
  long long save_every = 0;  // keep a checkpoint every N steps (0 = only at the end)
  std::string resume;        // output directory (its `latest`) or ckpt_<step> directory to continue
  std::string init_from;     // start from another run's backbone weights (any method; fresh optimizer)
  MethodOptions method_opts;

  ModelConfig model_config() const;  // preset + overrides, validated
  void validate() const;             // throws ada::Error on impossible values
};

void add_train_flags(Flags& f, TrainOptions& o);

// A program's own default sequence length (train_gpu: 1024), set in `o.seq`
// before the flags were parsed: when --seq was not given it is capped at the
// model's context (the test preset's 64), so a smaller --config still runs.
void cap_default_seq(TrainOptions& o, const Flags& given);

// --embed-scale text -> ModelConfig::embed_scale (0 = the method's own).
double resolve_embed_scale(const std::string& spec, const ModelConfig& c, const MethodOptions& mo);

// Every option as (flag name without "--", value as text), doubles printed so
// that they read back to the same bits: what a checkpoint records, so that
// a resumed run uses exactly the options of the run it continues.
std::vector<std::pair<std::string, std::string>> option_values(const TrainOptions& o);

// --resume: the options the user did not give on the command line take the
// checkpoint's values (`saved`, from option_values of the run that wrote it),
// so `train_cpu --resume DIR` alone continues the run as it was configured.
// Flags that were given override the checkpoint's (e.g. a larger --steps),
// except --method, --config and the method options, which must match it
// (ada::Error naming the difference; the model sizes are checked when the
// checkpoint is loaded). --resume, --out and --threads are never restored.
void resume_options(TrainOptions& o, Flags& given, const std::vector<std::pair<std::string, std::string>>& saved,
                    const std::string& ckpt);

}  // namespace ada
