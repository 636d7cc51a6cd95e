// compare: train several methods on the same data, config, token budget and
// seed, then print (and save) one table: validation loss, training FLOPs,
// inference FLOPs per token and the other (non-matmul) ops per token beside
// them, passes per token, measured inference time per token, training
// tokens/s.
//
//   ./compare --methods standard,looped,ponder,pause --steps 400
//   ./compare --methods ponder,adaponder,adaponder:policy=uniform:policy-passes=auto
//
// A method spec is `name[:flag=value]...` with any flag of train_cpu
// (without the leading dashes): method options (tau=1e-3), and the run's own
// (embed-scale=latent_cot, init-from=runs/std, steps=300) for the controls. `policy-passes=auto` takes the
// average passes per token that the last learned-gate adaponder run of the
// same comparison measured on validation data: the fixed pruning policies are
// then compared with it at equal FLOPs. `policy-hist=auto` likewise takes
// that run's per-pass exit histogram (adaponder:policy=matched:policy-hist=auto:
// random tokens exit when the learned gates' tokens did).
//
// --reuse: a method whose output directory already holds a finished run (its
// `latest` checkpoint at step --steps) is not trained again; its parameters
// are loaded, validation loss and inference cost are measured again, and the
// training FLOPs and wall time come from the checkpoint's training state. A
// comparison can then be run in pieces (several processes, or after an
// interruption) and tabulated at the end.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "train/cpu_instances.h"
#include "train/svg_plot.h"
#include "train/trainer.h"

using namespace ada;
using Bk = CpuBackend<float>;

namespace {

struct Row {
  std::string label;
  double val_loss = NAN, train_flops = 0, infer_flops = 0, infer_other = 0, passes = 0, tok_s = 0, seconds = 0;
  double infer_us = NAN;  // measured forward time per token (median of 3)
  std::vector<std::pair<std::string, double>> halting;  // token-weighted halting statistics on validation
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string p; std::getline(ss, p, sep);)
    if (!p.empty()) out.push_back(p);
  return out;
}

// Applies "name:flag=value:..." to a copy of the options.
TrainOptions options_for(const TrainOptions& base, const std::string& spec, double auto_passes,
                         const std::string& auto_hist) {
  TrainOptions o = base;
  auto parts = split(spec, ':');
  check(!parts.empty(), "empty method spec in --methods");
  o.method = parts[0];
  std::vector<std::string> args = {"compare"};
  for (size_t i = 1; i < parts.size(); i++) {
    std::string a = parts[i];
    if (a == "policy-passes=auto") {
      check(auto_passes > 0, "policy-passes=auto needs a learned adaponder run earlier in --methods");
      a = "policy-passes=" + std::to_string(auto_passes);
    }
    if (a == "policy-hist=auto") {
      check(!auto_hist.empty(), "policy-hist=auto needs a learned adaponder run earlier in --methods");
      a = "policy-hist=" + auto_hist;
    }
    check(a.find('=') != std::string::npos, "method spec '" + spec + "': '" + a + "' needs the form flag=value");
    args.push_back("--" + a);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  Flags f("compare", "");
  add_train_flags(f, o);
  f.parse((int)argv.size(), argv.data());
  check(f.positional().empty(), "bad method spec '" + spec + "'");
  o.validate();
  return o;
}

// What inference costs a trained method on the fixed validation batches:
// forward FLOPs, other (non-matmul) ops and passes per token, counted; and
// the forward's wall time per token, measured: one warm-up batch, then the
// median of 3 timings of all the batches (steady clock, forward only, on the
// run's --threads).
void inference_cost(Trainer<Bk>& tr, const TokenSource& val, const TrainOptions& o, Row* r) {
  double f = 0, other = 0, tok = 0, p = 0;
  std::vector<Batch> batches;
  for (int i = 0; i < o.eval_batches; i++) {
    tr.model().arena.reset();
    batches.push_back(eval_batch(val, o.batch, o.seq, i, o.eval_batches));
    const Batch& b = batches.back();
    tr.method().forward(tr.model(), b, false);
    StepStats s = tr.method().stats(tr.model());
    f += s.inference_flops();  // what generation costs (PonderLM-2: the sequential decode)
    other += s.fwd_other_flops;
    tok += (double)b.B * b.T;
    for (size_t k = 0; k < s.halting.size(); k++) {
      if (r->halting.size() <= k) r->halting.push_back({s.halting[k].first, 0.0});
      r->halting[k].second += s.halting[k].second * b.B * b.T;
      if (s.halting[k].first == "passes") p += s.halting[k].second * b.B * b.T;
    }
  }
  for (auto& kv : r->halting) kv.second /= tok;
  r->infer_flops = f / tok;
  r->infer_other = other / tok;
  r->passes = p / tok;
  using Clock = std::chrono::steady_clock;
  tr.model().arena.reset();
  tr.method().forward(tr.model(), batches[0], false);  // warm-up (the loop above warmed the arena too)
  std::vector<double> us;
  for (int rep = 0; rep < 3; rep++) {
    const auto t0 = Clock::now();
    for (const Batch& b : batches) {
      tr.model().arena.reset();
      tr.method().forward(tr.model(), b, false);
    }
    tr.model().be.sync();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / tok);
  }
  std::sort(us.begin(), us.end());
  r->infer_us = us[1];
}

// The per-pass exit histogram "f1/f2/.../f{K+1}" of a trained adaponder: its
// exit_i statistics on the validation batches (measured by inference_cost).
std::string exit_histogram(const Row& r, int K) {
  std::string s;
  for (int k = 1; k <= K + 1; k++) {
    double v = 0;
    for (auto& kv : r.halting)
      if (kv.first == "exit_" + std::to_string(k)) v = kv.second;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    s += (s.empty() ? "" : "/") + std::string(buf);
  }
  return s;
}

// The checkpoint of a finished run in `dir` (step == steps), or "".
std::string finished_checkpoint(const std::string& dir, long long steps) {
  std::error_code ec;
  if (!std::filesystem::exists(dir + "/latest", ec)) return "";
  const std::string ckpt = resolve_checkpoint(dir);
  SafetensorsFile f(ckpt + "/model.safetensors", "checkpoint");
  return read_model_meta(f).step == steps ? ckpt : "";
}

// Loads a finished run into the trainer's model; returns its training state.
TrainState load_finished(Trainer<Bk>& tr, const std::string& ckpt, long long steps) {
  SafetensorsFile f(ckpt + "/model.safetensors", "checkpoint");
  load_params(tr.model(), tr.model_meta(steps), f);
  std::vector<double> m, v;
  return read_train_state(ckpt, tr.model().num_params(), steps, m, v);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    TrainOptions base;
    std::string methods = "standard,looped,ponder,pause";
    bool reuse = false;
    Flags flags("compare", "Train several methods on the same data and budget and tabulate the results.");
    flags.add("--methods", &methods, "comma-separated method specs, e.g. standard,ponder,adaponder:tau=1e-3");
    flags.add("--reuse", &reuse, "do not train again a method whose output directory holds a finished run");
    add_train_flags(flags, base);
    if (!flags.parse(argc, argv)) return 0;
    if (base.threads > 0) omp_set_num_threads(base.threads);
    if (!flags.was_set("--out")) base.out = "runs/compare";
    const std::string out_dir = base.out;
    std::filesystem::create_directories(out_dir);
    auto tok = run_tokenizer(base.tokenizer, base.model_config());
    Dataset data = load_data(base, *tok);

    std::vector<Row> rows;
    std::vector<RunCurves> curves;
    double learned_passes = 0;
    std::string learned_hist;
    for (const std::string& spec : split(methods, ',')) {
      TrainOptions o = options_for(base, spec, learned_passes, learned_hist);
      std::string label = spec;
      for (char& c : label)
        if (c == ':' || c == '=' || c == '/') c = '_';
      o.out = out_dir + "/" + label;
      std::printf("\n=== %s ===\n", spec.c_str());
      Bk be;
      Trainer<Bk> tr(be, o);
      Row r;
      r.label = spec;
      const std::string done = reuse ? finished_checkpoint(o.out, o.steps) : "";
      if (!done.empty()) {
        TrainState st = load_finished(tr, done, o.steps);
        std::printf("reusing the finished run %s\n", done.c_str());
        r.val_loss = tr.evaluate(*data.val);
        r.train_flops = st.flops, r.seconds = st.seconds, r.tok_s = st.tokens / st.seconds;
      } else {
        TrainResult res = tr.run(data, true);
        r.val_loss = res.final_val_loss;
        r.train_flops = res.train_flops, r.seconds = res.seconds, r.tok_s = res.tokens / res.seconds;
      }
      inference_cost(tr, *data.val, o, &r);
      if (o.method == "adaponder" && o.method_opts.ada.policy == "gates") {
        learned_passes = r.passes;
        learned_hist = exit_histogram(r, o.method_opts.ponder_steps);
        std::printf("learned exit histogram (passes 1..K+1): %s\n", learned_hist.c_str());
      }
      rows.push_back(r);
      curves.push_back(read_run_curves(o.out + "/metrics.jsonl", spec));
    }

    std::ostringstream t;
    const ModelConfig cfg = base.model_config();
    t << "config " << cfg.describe() << "; " << base.steps << " steps x " << base.accum * base.batch << " x "
      << base.seq << " tokens = " << format_count((double)base.steps * base.accum * base.batch * base.seq)
      << " training tokens, seed " << base.seed << ", data " << base.data << "\n\n";
    t << "| method | val loss | train FLOPs | inference FLOPs/token | other ops/token | passes/token | inference "
         "us/token | tokens/s | wall |\n";
    t << "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (auto& r : rows) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "| %s | %.4f | %s | %s | %s | %.2f | %.2f | %.0f | %s |\n", r.label.c_str(),
                    r.val_loss, format_count(r.train_flops).c_str(), format_count(r.infer_flops).c_str(),
                    format_count(r.infer_other).c_str(), r.passes, r.infer_us, r.tok_s,
                    format_duration(r.seconds).c_str());
      t << buf;
    }
    t << "\nother ops: softmaxes, norms, RoPE, SwiGLU, gates (one op per scalar add, multiply, exp, ...: "
         "model/flop_count.h); inference us/token: forward only on the " << base.eval_batches
      << " validation batches, median of 3, --threads " << omp_get_max_threads() << "\n";
    std::printf("\n%s", t.str().c_str());
    std::ofstream(out_dir + "/compare.md") << t.str();
    write_loss_plot(curves, "loss vs tokens and vs training FLOPs (" + cfg.name + ")", out_dir + "/compare.svg");
    std::printf("\ntable: %s/compare.md   plot: %s/compare.svg\n", out_dir.c_str(), out_dir.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
