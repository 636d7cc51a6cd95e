#include "train/options.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/common.h"
#include "train/cpu_instances.h"
#include "train/memory_budget.h"

namespace ada {

// --config test is the model of the unit tests (vocabulary 23, context 64),
// too small for the defaults (--seq 128, a 4096-token tokenizer).
static const char* const kTestPresetHint =
    "; --config test is the tests' model (vocabulary 23, context 64): train it with e.g. "
    "--config test --seq 64 --vocab 256 --tokenizer bytes";

void cap_default_seq(TrainOptions& o, const Flags& given) {
  if (!given.was_set("--seq")) o.seq = std::min(o.seq, o.model_config().max_seq);
}

void add_train_flags(Flags& f, TrainOptions& o) {
  f.section("model");
  f.add("--method", &o.method, "standard | looped | ponder | pause | adaponder | cyb | latent_cot | tah | ponderlm2");
  f.add("--config", &o.config,
        "size preset: tiny | small | 70m | test (the tests' model, V 23, context 64: give it e.g. --seq 64 --vocab 256 "
        "--tokenizer bytes)");
  f.add("--vocab", &o.vocab, "override: vocabulary size V (0 = preset)", 0, kMaxVocab);
  f.add("--dim", &o.dim, "override: model width D", 0, kMaxDim);
  f.add("--layers", &o.layers, "override: layers L", 0, kMaxLayers);
  f.add("--heads", &o.heads, "override: attention heads H", 0, kMaxHeads);
  f.add("--hidden", &o.hidden, "override: SwiGLU hidden width F", 0, kMaxHidden);
  f.add("--max-seq", &o.max_seq, "override: context length the model supports", 0, kMaxSeq);
  f.add("--tied", &o.tied, "override: 1 ties the output head to the embedding, 0 unties (-1 = preset)", -1, 1);
  f.add("--embed-scale", &o.embed_scale,
        "input scale x = s E[x] of the token embeddings: method (its own: 1, ponder K sqrt(D), latent_cot "
        "sqrt(2.5 D)), a number, or a method name whose scale to use (standard | ponder | latent_cot)");
  f.section("data");
  f.add("--data", &o.data, "training text file, or token shards (file, glob or directory)");
  f.add("--tokenizer", &o.tokenizer, "auto | bytes | gpt2 | path to a BPE file (auto: GPT-2 for V >= 50257, else data/kjv_bpe4096.txt)");
  f.add("--val-fraction", &o.val_fraction, "fraction of a text file held out for validation (its end)");
  f.section("optimisation");
  f.add("--steps", &o.steps, "optimizer steps", 1, kMaxSteps);
  f.add("--batch", &o.batch, "sequences per micro-batch B (per rank under mpirun: docs/scaling.md)", 1, kMaxBatch);
  f.add("--seq", &o.seq, "tokens per sequence T", 1, kMaxSeq);
  f.add("--accum", &o.accum, "micro-batches accumulated per optimizer step", 1, kMaxBatch);
  f.add("--lr", &o.lr, "peak learning rate");
  f.add("--min-lr-frac", &o.min_lr_frac, "cosine decay ends at this fraction of --lr");
  f.add("--warmup", &o.warmup, "linear warmup steps", 0, kMaxSteps);
  f.add("--weight-decay", &o.weight_decay, "AdamW decoupled weight decay (matrices only)");
  f.add("--clip", &o.clip, "gradient global-norm clipping (0 = off)");
  f.add("--beta1", &o.beta1, "AdamW beta1");
  f.add("--beta2", &o.beta2, "AdamW beta2");
  f.add("--seed", &o.seed, "seed for initialisation and data order", 0, LLONG_MAX);
  f.section("evaluation and output");
  f.add("--eval-every", &o.eval_every, "evaluate on validation data every N steps (0 = only at the end)", 0, kMaxSteps);
  f.add("--eval-batches", &o.eval_batches, "validation batches per evaluation", 1, kMaxBatch);
  f.add("--log-every", &o.log_every, "print a progress line every N steps", 1, kMaxSteps);
  f.add("--out", &o.out, "output directory (metrics.jsonl, checkpoints); default runs/<method>-<config>");
  f.add("--recompute-logits", &o.recompute_logits,
        "1: the passes whose loss is known only after the forward (ponder's pondering passes, adaponder, cyb, latent_cot, tah) "
        "keep no (n, V) logits for the backward but recompute them chunk by chunk "
        "(less device memory, one head GEMM more per pass; the same arithmetic)",
        0, 1);
  f.add("--bf16-acts", &o.bf16_acts,
        "1: store the blocks' largest saved activations (q, attention output, gate|up) in bf16 for the backward, "
        "half their memory; the residual stream, norms' statistics and the methods' own values stay fp32 "
        "(the backward reads rounded values: not bit-identical to 0)",
        0, 1);
  f.add("--threads", &o.threads, "CPU threads (0 = all cores / OMP_NUM_THREADS)", 0, kMaxThreads);
  f.section("checkpoints");
  f.add("--save-every", &o.save_every, "keep a checkpoint <out>/ckpt_<step> every N steps (0 = only at the end)", 0,
        kMaxSteps);
  f.add("--resume", &o.resume, "continue a run: its output directory (latest checkpoint) or a ckpt_<step> directory");
  f.add("--init-from", &o.init_from,
        "start from the backbone weights of another run (its output or ckpt_<step> directory, any method); the "
        "method's own tensors and the optimizer start fresh");
  add_method_flags(f, o.method_opts);
}

ModelConfig TrainOptions::model_config() const {
  ModelConfig c = preset_config(config);
  if (vocab) c.vocab = vocab;
  if (dim) c.dim = dim;
  if (layers) c.layers = layers;
  if (heads) c.heads = heads;
  if (hidden) c.hidden = hidden;
  if (max_seq) c.max_seq = max_seq;
  if (tied >= 0) c.tied = tied != 0;
  c.embed_scale = resolve_embed_scale(embed_scale, c, method_opts);
  c.validate();
  return c;
}

double resolve_embed_scale(const std::string& spec, const ModelConfig& c, const MethodOptions& mo) {
  if (spec == "method" || spec.empty()) return 0;
  for (const std::string& name : method_names())  // a method's name: the scale that method uses by default
    if (spec == name) return make_method<CpuBackend<float>>(name, mo)->default_embed_scale(c);
  char* end = nullptr;
  const double v = std::strtod(spec.c_str(), &end);
  check(end != spec.c_str() && *end == 0 && std::isfinite(v) && v > 0,
        "--embed-scale must be 'method', a positive number or a method name (standard, ponder, latent_cot, ...); got '" +
            spec + "'");
  return v;
}

void TrainOptions::validate() const {
  bool known = false;
  std::string all;
  for (auto& n : method_names()) {
    known |= n == method;
    all += (all.empty() ? "" : ", ") + n;
  }
  check(known, "unknown --method '" + method + "' (available: " + all + ")");
  // Every integer within its flag's range, declared once in add_train_flags:
  // options set in code (tests, compare) get the same checks and messages.
  {
    TrainOptions scratch;
    Flags f("options", "");
    add_train_flags(f, scratch);
    std::vector<std::string> args = {"options"};
    for (auto& [name, value] : option_values(*this)) args.push_back("--" + name + "=" + value);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    f.parse((int)argv.size(), argv.data());
  }
  const ModelConfig c = model_config();
  check(seq <= c.max_seq, "--seq " + std::to_string(seq) + " is longer than the model context " +
                              std::to_string(c.max_seq) + " (pass --seq " + std::to_string(c.max_seq) +
                              " or less, or raise --max-seq)" + (config == "test" ? kTestPresetHint : ""));
  // Memory, estimated from the sizes before anything is allocated (float32, as on the CPU).
  const int passes = make_method<CpuBackend<float>>(method, method_opts)->max_passes();
  const double tokens = (double)batch * seq;
  check_memory(model_bytes(c, (double)c.num_params(), 4, true) + activation_bytes(c, tokens, passes, 4, true), "training",
               c.describe() + "; " + std::to_string(batch) + " x " + std::to_string(seq) + " tokens x " +
                   std::to_string(passes) + " passes per micro-batch");
  check(lr > 0 && lr < 10, "--lr must be in (0, 10) (got " + std::to_string(lr) + ")");
  check(min_lr_frac >= 0 && min_lr_frac <= 1, "--min-lr-frac must be in [0, 1]");
  check(weight_decay >= 0, "--weight-decay must be >= 0");
  check(clip >= 0, "--clip must be >= 0");
  check(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "--beta1 and --beta2 must be in [0, 1)");
  check(val_fraction > 0 && val_fraction < 1, "--val-fraction must be in (0, 1)");
  check(resume.empty() || init_from.empty(),
        "--resume and --init-from exclude each other (--resume continues a run with its optimizer state; "
        "--init-from starts a new run from another run's weights)");
}

namespace {
std::string exact(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}
}  // namespace

std::vector<std::pair<std::string, std::string>> option_values(const TrainOptions& o) {
  // Keep in step with add_train_flags (a test checks that every flag is here).
  std::vector<std::pair<std::string, std::string>> v = {
      {"method", o.method}, {"config", o.config},
      {"vocab", std::to_string(o.vocab)}, {"dim", std::to_string(o.dim)},
      {"layers", std::to_string(o.layers)}, {"heads", std::to_string(o.heads)},
      {"hidden", std::to_string(o.hidden)}, {"max-seq", std::to_string(o.max_seq)},
      {"tied", std::to_string(o.tied)}, {"embed-scale", o.embed_scale},
      {"data", o.data}, {"tokenizer", o.tokenizer}, {"val-fraction", exact(o.val_fraction)},
      {"steps", std::to_string(o.steps)}, {"batch", std::to_string(o.batch)},
      {"seq", std::to_string(o.seq)}, {"accum", std::to_string(o.accum)},
      {"lr", exact(o.lr)}, {"min-lr-frac", exact(o.min_lr_frac)},
      {"warmup", std::to_string(o.warmup)}, {"weight-decay", exact(o.weight_decay)},
      {"clip", exact(o.clip)}, {"beta1", exact(o.beta1)}, {"beta2", exact(o.beta2)},
      {"seed", std::to_string(o.seed)},
      {"eval-every", std::to_string(o.eval_every)}, {"eval-batches", std::to_string(o.eval_batches)},
      {"log-every", std::to_string(o.log_every)}, {"out", o.out}, {"threads", std::to_string(o.threads)},
      {"recompute-logits", std::to_string(o.recompute_logits)}, {"bf16-acts", std::to_string(o.bf16_acts)},
      {"save-every", std::to_string(o.save_every)}, {"resume", o.resume}, {"init-from", o.init_from},
  };
  // The method options, through the flags that declare them, so a new one is
  // recorded without a change here. (Flags::values() prints doubles with 6
  // significant digits: exact for the values people type.)
  MethodOptions mo = o.method_opts;
  Flags f("options", "");
  add_method_flags(f, mo);
  for (auto& kv : f.values()) v.push_back(kv);
  return v;
}

void resume_options(TrainOptions& o, Flags& given, const std::vector<std::pair<std::string, std::string>>& saved,
                    const std::string& ckpt) {
  const auto current = option_values(o);
  auto value_of = [&](const std::string& name) -> const std::string* {
    for (auto& kv : current)
      if (kv.first == name) return &kv.second;
    return nullptr;
  };
  MethodOptions mo;
  Flags method_flags("options", "");
  add_method_flags(method_flags, mo);
  std::vector<std::string> args = {"resume"};
  for (auto& [name, value] : saved) {
    const std::string* mine = value_of(name);
    if (!mine || name == "resume" || name == "init-from" || name == "out" || name == "threads")
      continue;  // unknown here, or per invocation (a resumed run starts from its checkpoint, not --init-from)
    if (!given.was_set("--" + name)) {
      args.push_back("--" + name + "=" + value);
      continue;
    }
    bool identity = name == "method" || name == "config";
    for (auto& kv : method_flags.values()) identity |= kv.first == name;
    check(!identity || *mine == value, "--" + name + " " + *mine + " does not match the checkpoint " + ckpt +
                                           ", which was trained with --" + name + " " + value);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  given.parse((int)argv.size(), argv.data());
}

}  // namespace ada
