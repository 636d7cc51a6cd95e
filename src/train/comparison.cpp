// See comparison.h.
#include "train/comparison.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "train/checkpoint.h"
#include "train/safetensors.h"

namespace ada {

TrainOptions options_for_spec(const TrainOptions& base, const std::string& spec, double auto_passes,
                              const std::string& auto_hist) {
  TrainOptions o = base;
  // labelled_spec refuses an empty spec; its label= part names the runs and is not an option
  auto parts = split_list(labelled_spec(spec).spec, ':');
  o.method = parts[0];
  std::vector<std::string> args = {"spec"};
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
  Flags f("method spec", "");
  add_train_flags(f, o);
  f.parse((int)argv.size(), argv.data());
  check(f.positional().empty(), "bad method spec '" + spec + "'");
  o.validate();
  return o;
}

RunProgress run_progress(const std::string& dir) {
  RunProgress p;
  std::error_code ec;
  if (!std::filesystem::exists(dir + "/latest", ec)) return p;
  p.ckpt = resolve_checkpoint(dir);
  SafetensorsFile f(p.ckpt + "/model.safetensors", "checkpoint");
  p.step = read_model_meta(f).step;
  return p;
}

TrainState load_finished(CpuTrainer& tr, const std::string& ckpt, long long steps) {
  SafetensorsFile f(ckpt + "/model.safetensors", "checkpoint");
  load_params(tr.model(), tr.model_meta(steps), f);
  std::vector<double> m, v;
  return read_train_state(ckpt, tr.model().num_params(), steps, m, v);
}

InferenceCost inference_cost(CpuTrainer& tr, const TokenSource& val, const TrainOptions& o, int threads) {
  InferenceCost c;
  double tok = 0;
  std::vector<Batch> batches;
  for (int i = 0; i < o.eval_batches; i++) {
    tr.model().arena.reset();
    batches.push_back(eval_batch(val, o.batch, o.seq, i, o.eval_batches));
    const Batch& b = batches.back();
    tr.method().forward(tr.model(), b, false);
    StepStats s = tr.method().stats(tr.model());
    c.flops += s.inference_flops();  // what generation costs (PonderLM-2: the sequential decode)
    c.other += s.fwd_other_flops;
    tok += (double)b.B * b.T;
    for (size_t k = 0; k < s.halting.size(); k++) {
      if (c.halting.size() <= k) c.halting.push_back({s.halting[k].first, 0.0});
      c.halting[k].second += s.halting[k].second * b.B * b.T;
      if (s.halting[k].first == "passes") c.passes += s.halting[k].second * b.B * b.T;
    }
  }
  for (auto& kv : c.halting) kv.second /= tok;
  c.flops /= tok, c.other /= tok, c.passes /= tok;
  using Clock = std::chrono::steady_clock;
  const int saved_threads = omp_get_max_threads();
  if (threads > 0) omp_set_num_threads(threads);
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
  omp_set_num_threads(saved_threads);
  std::sort(us.begin(), us.end());
  c.us = us[1];
  return c;
}

std::string exit_histogram(const std::vector<std::pair<std::string, double>>& halting, int K) {
  std::string s;
  for (int k = 1; k <= K + 1; k++) {
    double v = 0;
    for (auto& kv : halting)
      if (kv.first == "exit_" + std::to_string(k)) v = kv.second;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    s += (s.empty() ? "" : "/") + std::string(buf);
  }
  return s;
}

}  // namespace ada
