// eval: loss, perplexity, accuracy and bits per byte of a checkpoint on a dataset, with
// the method's forward FLOPs per token, its other (non-matmul) ops per token,
// its forward speed and its halting statistics.
//   ./eval --ckpt runs/standard-tiny                        # its validation split, as the trainer measured it
//   ./eval --ckpt runs/ponder-tiny/ckpt_200 --batches 0      # every validation token once
//   ./eval --ckpt runs/standard-tiny --data other.txt --split all --json eval.json
//   ./eval --ckpt runs/std --batches 0 --per-token std.csv            # every token's NLL and passes
//   ./eval --ckpt runs/latent --batches 0 --paired std.csv            # per-token NLL against that run,
//                                                                     # overall and by passes used
// An adaptive method's tokens are also split by the passes they used, per
// difficulty class ("by passes": tokens, share of the class, accuracy, NLL;
// --json "by_passes"): where each class stops, the table `study` writes for
// its runs, here for any checkpoint and --method-overrides (e.g. a raised tau).
// Defaults (data, tokenizer, batch, seq, number of batches, validation
// fraction) are the checkpoint's training options, so that by default the
// loss equals the run's last logged val_loss.
// Windows (docs/workflow.md, "Evaluate"): --batches K > 0 takes the trainer's
// K x B windows of T + 1 tokens, evenly spaced over the split; --batches 0
// takes consecutive windows of T + 1 tokens with stride T, so every token
// after the first is a target once (a last partial window is left out).
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "train/cpu_instances.h"
#include "text/dataset.h"
#include "train/atomic_file.h"
#include "train/checkpoint.h"
#include "train/evaluation.h"
#include "core/json.h"
#include "train/metrics.h"
#include "train/study_stats.h"

using namespace ada;

namespace {

struct EvalOptions {
  std::string ckpt, data, split = "val", tokenizer, json, overrides, per_token, paired;
  int batch = 16, seq = 128, batches = 8, threads = 0;
  double val_fraction = 0.1;
};

// The checkpoint's value of a training option, if it recorded one.
const std::string* saved_option(const std::vector<std::pair<std::string, std::string>>& saved, const std::string& name) {
  for (auto& kv : saved)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

bool is_text_spec(const std::string& spec) {
  std::error_code ec;
  const bool bin = spec.size() >= 4 && spec.compare(spec.size() - 4, 4, ".bin") == 0;
  return !std::filesystem::is_directory(spec, ec) && spec.find_first_of("*?[") == std::string::npos && !bin;
}

// --per-token file: one line per evaluated token, "nll,passes,correct,
// position,cls" (correct: 1 when the argmax is the target; position: the
// target's index in the evaluated split; cls: its difficulty class id, -1
// when the data has none), in evaluation order (the same for every
// checkpoint evaluated with the same data, split, --seq, --batch and
// --batches). The NLL is written with 17 significant digits, so that it reads
// back as the same double and pairing a run with its own file gives exactly 0.
void write_per_token(const std::string& path, const EvalReport& r) {
  std::string s = "nll,passes,correct,position,cls\n";
  char buf[128];
  for (size_t i = 0; i < r.nll.size(); i++) {
    std::snprintf(buf, sizeof buf, "%.17g,%.6g,%d,%zu,%d\n", r.nll[i], r.passes[i], (int)r.correct[i], r.position[i],
                  r.cls.empty() ? -1 : r.cls[i]);
    s += buf;
  }
  write_file_atomic(path, s);
}

// The NLL column of a --per-token file: the current format or the older
// two-column "nll,passes".
std::vector<double> read_per_token_nll(const std::string& path, size_t expect) {
  std::ifstream f(path);
  check(f.good(), "--paired: cannot read " + path);
  std::string line;
  check(std::getline(f, line) && (line == "nll,passes,correct,position,cls" || line == "nll,passes"),
        "--paired: " + path + " is not a per-token file of eval --per-token");
  std::vector<double> v;
  while (std::getline(f, line)) {
    char* end = nullptr;
    const double x = std::strtod(line.c_str(), &end);
    check(end != line.c_str() && *end == ',' && std::isfinite(x),
          "--paired: " + path + " line " + std::to_string(v.size() + 2) + " does not start with a finite NLL and a comma");
    v.push_back(x);
  }
  check(v.size() == expect, "--paired: " + path + " has " + std::to_string(v.size()) + " tokens but this evaluation has " +
                                std::to_string(expect) + " (evaluate both with the same data, --seq, --batch and --batches)");
  return v;
}

// Mean and standard error of the per-token difference a - b over the tokens in `sel`.
struct PairedStat {
  long long n = 0;
  double mean_a = 0, mean_b = 0, diff = 0, se = 0;
};
PairedStat paired(const std::vector<double>& a, const std::vector<double>& b, const std::vector<size_t>& sel) {
  PairedStat p;
  p.n = (long long)sel.size();
  if (sel.empty()) return p;
  double sd = 0, sd2 = 0;
  for (size_t i : sel) {
    const double d = a[i] - b[i];
    p.mean_a += a[i], p.mean_b += b[i], sd += d, sd2 += d * d;
  }
  p.mean_a /= p.n, p.mean_b /= p.n, p.diff = sd / p.n;
  const double var = p.n > 1 ? (sd2 - sd * sd / p.n) / (p.n - 1) : 0;
  p.se = std::sqrt(std::max(var, 0.0) / p.n);
  return p;
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return std::isfinite(x) ? buf : "null";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    EvalOptions o;
    Flags flags("eval", "Loss, perplexity, bits per byte and halting statistics of a checkpoint on a dataset.");
    flags.add("--ckpt", &o.ckpt, "checkpoint: a run's output directory (its latest) or a ckpt_<step> directory");
    flags.add("--data", &o.data, "text file or token shards (default: the checkpoint's training data)");
    flags.add("--split", &o.split, "val | train | all (all: the whole text file)");
    flags.add("--tokenizer", &o.tokenizer, "tokenizer (default: the checkpoint's)");
    flags.add("--val-fraction", &o.val_fraction, "fraction of a text file that is validation (default: the checkpoint's)");
    flags.add("--batch", &o.batch, "sequences per batch (default: the checkpoint's)", 1, kMaxBatch);
    flags.add("--seq", &o.seq, "tokens per sequence (default: the checkpoint's)", 1, kMaxSeq);
    flags.add("--batches", &o.batches, "batches of --batch windows of --seq + 1 tokens, evenly spaced over the split (the trainer's); 0 = "
              "consecutive windows with stride --seq, every token once (default: the checkpoint's --eval-batches)",
              0, kMaxBatch);
    flags.add("--json", &o.json, "also write the report as JSON to this file");
    flags.add("--method-overrides", &o.overrides,
              "change the method's behaviour, not its parameters, e.g. tau=1e-3,compaction=0 (method flags without --)");
    flags.add("--threads", &o.threads, "CPU threads (0 = all cores / OMP_NUM_THREADS)", 0, kMaxThreads);
    flags.add("--per-token", &o.per_token,
              "write every evaluated token's NLL, passes, correctness, position and class to this CSV file");
    flags.add("--paired", &o.paired,
              "a --per-token file of another run on the same tokens: report the per-token NLL difference (this - that) "
              "with its standard error, overall and by the passes this run used");
    if (!flags.parse(argc, argv)) return 0;
    check(flags.positional().empty(), "unexpected argument '" + (flags.positional().empty() ? std::string() : flags.positional()[0]) + "'");
    check(!o.ckpt.empty(), "--ckpt is required (a run's output directory or a ckpt_<step> directory)");
    check(o.split == "val" || o.split == "train" || o.split == "all", "--split must be val, train or all (got '" + o.split + "')");
    if (o.threads > 0) omp_set_num_threads(o.threads);

    CpuBackend<float> be;
    auto ck = load_checkpoint_model(be, o.ckpt, o.overrides);
    // Unset flags take the checkpoint's training options.
    std::vector<std::pair<std::string, std::string>> saved;
    if (std::filesystem::exists(ck.dir + "/state.safetensors")) saved = read_train_options(ck.dir);
    // Through the same flags, so a value read back gets the same checks as one typed.
    auto fill = [&](const char* flag, const char* name) {
      const std::string* v = saved_option(saved, name);
      if (flags.was_set(flag) || !v) return;
      std::vector<std::string> args = {"eval", std::string(flag) + "=" + *v};
      std::vector<char*> av = {args[0].data(), args[1].data()};
      try {
        flags.parse(2, av.data());
      } catch (const Error& e) {
        fail("checkpoint " + ck.dir + " records training option " + name + ", which eval cannot use: " + e.what());
      }
    };
    fill("--data", "data");
    fill("--batch", "batch");
    fill("--seq", "seq");
    fill("--batches", "eval-batches");
    fill("--val-fraction", "val-fraction");
    if (!flags.was_set("--tokenizer")) o.tokenizer = ck.meta.tokenizer;
    check(!o.data.empty(), "--data is required (the checkpoint does not record its training data)");
    check(o.batch > 0, "--batch must be positive (got " + std::to_string(o.batch) + ")");
    check(o.seq > 0, "--seq must be positive (got " + std::to_string(o.seq) + ")");
    check(o.seq <= ck.meta.cfg.max_seq, "--seq " + std::to_string(o.seq) + " is longer than the model context " +
                                            std::to_string(ck.meta.cfg.max_seq));
    check(o.batches >= 0, "--batches must be >= 0 (0 = every token once)");
    check_memory(activation_bytes(ck.meta.cfg, (double)o.batch * o.seq, ck.method->max_passes(), 4, false),
                 "evaluation", std::to_string(o.batch) + " x " + std::to_string(o.seq) + " tokens per batch");

    auto tok = load_tokenizer(o.tokenizer);
    check(tok->vocab_size() <= (uint32_t)ck.meta.cfg.vocab,
          "tokenizer " + o.tokenizer + " has " + std::to_string(tok->vocab_size()) +
              " tokens but the checkpoint's vocabulary is " + std::to_string(ck.meta.cfg.vocab));
    std::shared_ptr<TokenSource> src;
    std::string what;
    if (o.split == "all") {
      check(is_text_spec(o.data), "--split all needs a text file (for shards, use --split val or train)");
      src = std::make_shared<VectorTokens>(tokenize_document(read_text_file(o.data), *tok), "the tokens of " + o.data);
      what = "all of " + o.data;
    } else {
      Dataset ds = open_dataset(o.data, tok.get(), o.val_fraction);
      src = o.split == "val" ? ds.val : ds.train;
      what = o.split + " split of " + o.data;
    }
    check_vocab(*src, (uint32_t)ck.meta.cfg.vocab, "evaluation data " + o.data);

    const EvalReport r = evaluate_model(*ck.model, *ck.method, *src, tok.get(), o.batch, o.seq, o.batches);
    const double plain = standard_flops_per_token(ck.meta.cfg, o.seq);
    std::printf("checkpoint  %s (step %lld)\n", ck.dir.c_str(), ck.meta.step);
    std::printf("model       %s\n", ck.meta.cfg.describe().c_str());
    std::printf("method      %s (max %d passes per token)\n", ck.method->name().c_str(), ck.method->max_passes());
    std::printf("data        %s, tokenizer %s: %.0f tokens (%s)\n", what.c_str(), tok->name().c_str(), r.tokens,
                o.batches > 0 ? (std::to_string(o.batches) + " batches of " + std::to_string(o.batch) + " x " +
                                 std::to_string(o.seq)).c_str()
                              : ("every token once, windows of " + std::to_string(o.seq)).c_str());
    std::printf("loss        %.4f nats/token\n", r.loss());
    std::printf("perplexity  %.3f\n", r.perplexity());
    std::printf("accuracy    %.4f (argmax = target)\n", r.accuracy());
    std::printf("bits/byte   %.4f (%.0f bytes of text)\n", r.bits_per_byte(), r.bytes);
    std::printf("FLOPs/token %s forward (%.2fx a standard forward at seq %d)\n", format_count(r.flops_per_token()).c_str(),
                r.flops_per_token() / plain, o.seq);
    std::printf("other ops   %s/token forward (softmaxes, norms, RoPE, SwiGLU, gates: model/flop_count.h)\n",
                format_count(r.other_per_token()).c_str());
    std::printf("speed       %.0f tokens/s forward (%.3f s in the method's forward and statistics)\n",
                r.tokens / r.forward_seconds, r.forward_seconds);
    std::printf("halting    ");
    for (auto& kv : r.halting) std::printf(" %s %.4g", kv.first.c_str(), kv.second);
    std::printf("\npasses      mean %.4f; histogram (passes: tokens)", r.mean_passes());
    for (auto& kv : r.pass_histogram())
      std::printf(" %lld: %lld (%.1f%%)", kv.first, kv.second, 100.0 * kv.second / r.tokens);
    const double corr = r.passes_nll_correlation();
    if (std::isnan(corr))
      std::printf("\ncorr(passes, NLL)  n/a (every token used the same number of passes)\n");
    else
      std::printf("\ncorr(passes, NLL)  %.4f (Pearson, over tokens)\n", corr);

    const std::vector<EvalReport::ClassSummary> classes = r.per_class();
    if (!classes.empty()) {
      std::printf("per class   %-10s %9s %9s %9s %9s\n", "class", "tokens", "accuracy", "NLL", "passes");
      for (auto& c : classes)
        std::printf("            %-10s %9.0f %9.4f %9.4f %9.4f\n", c.name.c_str(), c.tokens, c.accuracy(), c.nll(),
                    c.passes());
    }

    // Where each class stops: per class (or all tokens) and passes used.
    const int n_classes = (int)r.class_names.size();
    const std::vector<int> cls = n_classes > 0 ? r.cls : std::vector<int>(r.nll.size(), 0);
    DepthTable by_passes;
    depth_stats(by_passes, r.nll, r.passes, r.correct, cls, n_classes);
    std::vector<long long> class_tokens(by_passes.size(), 0);
    for (size_t c = 0; c < by_passes.size(); c++)
      for (auto& kv : by_passes[c]) class_tokens[c] += kv.second.tokens;
    if (r.pass_histogram().size() > 1) {
      std::printf("by passes   %-10s %6s %9s %7s %9s %9s\n", "class", "passes", "tokens", "share", "accuracy", "NLL");
      for (size_t c = 0; c < by_passes.size(); c++)
        for (auto& [p, d] : by_passes[c])
          std::printf("            %-10s %6lld %9lld %6.2f%% %9.4f %9.4f\n",
                      n_classes > 0 ? r.class_names[c].c_str() : "all", p, d.tokens, 100.0 * d.tokens / class_tokens[c],
                      (double)d.correct / d.tokens, d.nll_sum / d.tokens);
    }

    if (!o.per_token.empty()) {
      write_per_token(o.per_token, r);
      std::printf("per-token   %s (%zu tokens)\n", o.per_token.c_str(), r.nll.size());
    }
    if (!o.paired.empty()) {
      const std::vector<double> other = read_per_token_nll(o.paired, r.nll.size());
      std::vector<size_t> all(r.nll.size());
      for (size_t i = 0; i < all.size(); i++) all[i] = i;
      auto line = [&](const std::string& what, const std::vector<size_t>& sel) {
        const PairedStat p = paired(r.nll, other, sel);
        std::printf("  %-14s %9lld tokens  this %.4f  that %.4f  diff %+.4f +- %.4f (s.e.)\n", what.c_str(), p.n,
                    p.mean_a, p.mean_b, p.diff, p.se);
      };
      std::printf("paired with %s (per-token NLL, this run minus that one):\n", o.paired.c_str());
      line("all tokens", all);
      std::map<long long, std::vector<size_t>> by;
      for (size_t i = 0; i < r.passes.size(); i++) by[std::llround(r.passes[i])].push_back(i);
      for (auto& kv : by) line(std::to_string(kv.first) + " passes", kv.second);
    }

    if (!o.json.empty()) {
      std::string j = "{\"checkpoint\": " + json_quote(ck.dir) + ", \"step\": " + std::to_string(ck.meta.step) +
                      ", \"method\": " + json_quote(ck.method->name()) + ", \"data\": " + json_quote(o.data) +
                      ", \"split\": " + json_quote(o.split) + ", \"tokens\": " + num(r.tokens) +
                      ", \"loss\": " + num(r.loss()) + ", \"perplexity\": " + num(r.perplexity()) +
                      ", \"accuracy\": " + num(r.accuracy()) +
                      ", \"bits_per_byte\": " + num(r.bits_per_byte()) + ", \"bytes\": " + num(r.bytes) +
                      ", \"fwd_flops_per_token\": " + num(r.flops_per_token()) +
                      ", \"fwd_other_ops_per_token\": " + num(r.other_per_token()) +
                      ", \"tokens_per_second\": " + num(r.tokens / r.forward_seconds) +
                      ", \"standard_fwd_flops_per_token\": " + num(plain) + ", \"halting\": {";
      for (size_t i = 0; i < r.halting.size(); i++)
        j += (i ? ", " : "") + json_quote(r.halting[i].first) + ": " + num(r.halting[i].second);
      j += "}, \"mean_passes\": " + num(r.mean_passes()) + ", \"passes_histogram\": {";
      bool first = true;
      for (auto& kv : r.pass_histogram()) {
        j += (first ? "" : ", ") + json_quote(std::to_string(kv.first)) + ": " + std::to_string(kv.second);
        first = false;
      }
      j += "}, \"passes_nll_correlation\": " + num(corr);
      if (!classes.empty()) {
        j += ", \"classes\": [";
        for (size_t c = 0; c < classes.size(); c++) j += (c ? ", " : "") + json_quote(classes[c].name);
        j += "], \"per_class\": {";
        for (size_t c = 0; c < classes.size(); c++)
          j += (c ? ", " : "") + json_quote(classes[c].name) + ": {\"tokens\": " + num(classes[c].tokens) +
               ", \"accuracy\": " + num(classes[c].accuracy()) + ", \"nll\": " + num(classes[c].nll()) +
               ", \"passes\": " + num(classes[c].passes()) + "}";
        j += "}";
      }
      j += ", \"by_passes\": [";
      bool first_cell = true;
      for (size_t c = 0; c < by_passes.size(); c++)
        for (auto& [p, d] : by_passes[c]) {
          j += std::string(first_cell ? "" : ", ") + "{\"class\": " +
               json_quote(n_classes > 0 ? r.class_names[c] : std::string("all")) + ", \"passes\": " +
               std::to_string(p) + ", \"tokens\": " + std::to_string(d.tokens) +
               ", \"share\": " + num((double)d.tokens / class_tokens[c]) +
               ", \"accuracy\": " + num((double)d.correct / d.tokens) + ", \"nll\": " + num(d.nll_sum / d.tokens) + "}";
          first_cell = false;
        }
      j += "]}\n";
      write_file_atomic(o.json, j);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
