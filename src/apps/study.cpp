// study: a grid of method specs x seeds on one data set, config and token
// budget; every run evaluated on every validation token once; the results
// (means and spreads over seeds, per difficulty class, paired differences,
// iso-compute plots, knob curves, a decoded passage) written to one folder.
//
//   ./study --methods standard,ponder,adaponder --out runs/study         # 3 seeds: 1337,1338,1339
//   ./study --methods standard,adaponder --pairs adaponder/standard --knob adaponder:tau=1e-4/1e-3/1e-2
//   ./study --quick --out runs/study_quick                                # CI preset: the machinery, not the science
//
// Resumable in pieces: a run folder (DIR/runs/<label>_s<seed>) whose latest
// checkpoint is at --steps is not trained again (its parameters are loaded
// and evaluated); one that stopped part way is resumed from its checkpoint
// (study saves one every --save-every steps, default a quarter of --steps,
// and removes the intermediate ones when the run finishes). Method specs and
// labels are compare's (train/method_spec.h); the files are described in
// train/study_results.h and docs/workflow.md.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "core/format.h"
#include "text/chain_task.h"
#include "text/utf8.h"
#include "train/checkpoint.h"
#include "train/comparison.h"
#include "train/evaluation.h"
#include "train/study_record.h"
#include "train/study_results.h"

using namespace ada;
using Bk = CpuBackend<float>;

namespace {

struct Knob {
  std::string label, flag;
  std::vector<std::string> values;
};

// "LABEL:flag=v1/v2/v3,LABEL:flag=..."
std::vector<Knob> parse_knobs(const std::string& s) {
  std::vector<Knob> out;
  for (const std::string& item : split_list(s, ',')) {
    const size_t colon = item.find(':'), eq = item.find('=');
    check(colon != std::string::npos && eq != std::string::npos && colon < eq,
          "--knob '" + item + "' needs the form LABEL:flag=v1/v2/v3");
    Knob k{item.substr(0, colon), item.substr(colon + 1, eq - colon - 1), split_list(item.substr(eq + 1), '/')};
    check(!k.flag.empty() && !k.values.empty(), "--knob '" + item + "' needs the form LABEL:flag=v1/v2/v3");
    for (const std::string& v : k.values) {
      char* end = nullptr;
      std::strtod(v.c_str(), &end);
      check(end != v.c_str() && *end == 0, "--knob " + k.label + ": value '" + v + "' is not a number");
    }
    out.push_back(k);
  }
  return out;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      std::string v = line.substr(line.find(':') + 1);
      return v.substr(v.find_first_not_of(' '));
    }
  return "unknown";
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

// The command line as typed (arguments with shell-special characters quoted).
std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; i++) {
    std::string a = argv[i];
    if (a.find_first_of(" \t'\"$*?|&;<>()") != std::string::npos) a = "'" + a + "'";
    s += (i ? " " : "") + a;
  }
  return s;
}

// A token's bytes as valid UTF-8 (a BPE token may cut a character: each
// byte that does not start a well-formed character becomes U+FFFD).
std::string printable(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const Utf8Char c = utf8_decode(bytes, i);
    out += c.valid ? bytes.substr(i, c.len) : "\xEF\xBF\xBD";
    i += c.len;
  }
  return out;
}

// Removes the checkpoints of a finished run other than its latest.
void prune_checkpoints(const std::string& dir, const std::string& keep) {
  const std::string keep_name = std::filesystem::path(keep).filename().string();
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("ckpt_", 0) == 0 && n != keep_name) std::filesystem::remove_all(e.path());
  }
}

// One evaluation of every validation token into the run's record.
void fill_from_eval(StudyRun& run, const EvalReport& e) {
  run.val_loss = e.loss();
  run.passes = e.mean_passes();
  run.infer_flops = e.flops_per_token();
  run.infer_other = e.other_per_token();
  run.halting = e.halting;
  run.class_names = e.class_names;
  run.pass_hist.clear();
  for (auto& kv : e.pass_histogram()) run.pass_hist[kv.first] = kv.second;
  run.nll = e.nll, run.tok_passes = e.passes, run.correct = e.correct, run.position = e.position;
  run.cls = e.cls.empty() ? std::vector<int>(e.nll.size(), -1) : e.cls;
  double c = 0;
  for (uint8_t x : e.correct) c += x;
  run.accuracy = e.correct.empty() ? NAN : c / e.correct.size();
}

// Trains (or resumes, or reuses the finished checkpoint of) the run of
// options o in o.out, then evaluates it on every validation token and
// measures its inference time. pre: the run it was post-trained from (its
// training is added to this run's), or null. A checkpoint already there is
// used only if it was trained with the options of key.
StudyRun train_and_evaluate(TrainOptions o, const StudyRecordKey& key, const StudyRun* pre, const Dataset& data,
                            const Tokenizer* tok, int infer_threads) {
  const RunProgress prog = run_progress(o.out);
  check(prog.step <= o.steps, o.out + " holds a run at step " + std::to_string(prog.step) + ", past --steps " +
                                  std::to_string(o.steps) + " (another study's folder?)");
  if (prog.step > 0) check_made_with("checkpoint " + prog.ckpt, read_train_options(prog.ckpt), key, false);
  if (prog.step > 0 && prog.step < o.steps) o.resume = prog.ckpt, o.init_from.clear();  // resume wins
  if (prog.step == 0 && pre)
    check(run_progress(pre->dir).step > 0, o.out + " is post-trained from " + pre->dir +
                                                ", which holds no checkpoint (only its record): remove " + pre->dir +
                                                "/record.json so that it is trained again");
  Bk be;
  CpuTrainer tr(be, o);
  if (prog.step == o.steps) {
    std::printf("reusing the finished run %s\n", prog.ckpt.c_str());
  } else {
    if (prog.step > 0) std::printf("resuming %s at step %lld\n", prog.ckpt.c_str(), prog.step);
    tr.run(data, true);
  }
  const RunProgress done = run_progress(o.out);
  check(done.step == o.steps, "run " + o.out + " did not reach --steps");
  const TrainState st = load_finished(tr, done.ckpt, o.steps);
  if (prog.step < o.steps) prune_checkpoints(o.out, done.ckpt);
  StudyRun run;
  run.seed = o.seed, run.dir = o.out;
  run.machine = cpu_model(), run.date = today();
  run.train_flops = st.flops, run.train_seconds = st.seconds, run.train_tokens = st.tokens;
  if (pre) run.train_flops += pre->train_flops, run.train_seconds += pre->train_seconds, run.train_tokens += pre->train_tokens;
  const EvalReport e = evaluate_model(tr.model(), tr.method(), *data.val, tok, o.batch, o.seq, 0);
  fill_from_eval(run, e);
  run.infer_us = inference_cost(tr, *data.val, o, infer_threads).us;
  std::printf("validation (all %zu tokens): loss %.4f, accuracy %.4f, passes %.3f, %s FLOPs/token, %.2f us/token\n",
              run.nll.size(), run.val_loss, run.accuracy, run.passes, format_count(run.infer_flops).c_str(),
              run.infer_us);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    TrainOptions base;
    std::string methods = "standard,ponder,adaponder", seeds_flag = "1337,1338,1339", pairs_flag, knob_flag;
    bool quick = false;
    int infer_threads = 2, passage_tokens = 256;
    long long passage_at = 0;
    double learned_at = 0.8;
    Flags flags("study", "Train a grid of methods x seeds on the same data and budget; write results.json, "
                         "results.md and plots into --out.");
    flags.add("--methods", &methods, "comma-separated method specs, as compare's (e.g. standard,adaponder:tau=1e-3)");
    flags.add("--seeds", &seeds_flag, "comma-separated seeds; each method is trained once per seed");
    flags.add("--pairs", &pairs_flag, "paired comparisons a/b,c/d by method label (default: every method against the first)");
    flags.add("--knob", &knob_flag,
              "LABEL:flag=v1/v2/v3[,...]: evaluate the first seed's model of that method at each value of a method "
              "flag that changes behaviour only (e.g. adaponder:tau=1e-4/1e-3/1e-2)");
    flags.add("--quick", &quick, "CI preset: test config, bytes, few steps, one seed, standard and adaponder (flags given override it)");
    flags.add("--infer-threads", &infer_threads, "threads for the measured inference time per token");
    flags.add("--passage-tokens", &passage_tokens, "validation target tokens in the decoded passage");
    flags.add("--passage-at", &passage_at, "index of the passage's first token among the evaluated validation tokens");
    flags.add("--learned-at", &learned_at,
              "a run learns a difficulty class when its accuracy on it reaches this (results.md counts such runs)");
    add_train_flags(flags, base);
    if (!flags.parse(argc, argv)) return 0;
    check(flags.positional().empty(), "unexpected argument '" + (flags.positional().empty() ? std::string() : flags.positional()[0]) + "'");
    if (quick) {  // each only where the flag was not given
      auto set = [&](const char* flag, auto* dst, auto v) {
        if (!flags.was_set(flag)) *dst = v;
      };
      set("--methods", &methods, std::string("standard,adaponder"));
      set("--seeds", &seeds_flag, std::string("1337"));
      if (!flags.was_set("--methods")) set("--knob", &knob_flag, std::string("adaponder:tau=1e-3/0.9/0.98/0.999"));
      set("--config", &base.config, std::string("test"));
      set("--vocab", &base.vocab, 256);
      set("--tokenizer", &base.tokenizer, std::string("bytes"));
      set("--val-fraction", &base.val_fraction, 0.01);
      set("--steps", &base.steps, 40LL);
      set("--warmup", &base.warmup, 4LL);
      set("--batch", &base.batch, 4);
      set("--seq", &base.seq, 32);
      set("--eval-every", &base.eval_every, 0LL);
      set("--eval-batches", &base.eval_batches, 2);
      set("--ponder-steps", &base.method_opts.ponder_steps, 2);
    }
    if (!flags.was_set("--save-every")) base.save_every = std::max(1LL, base.steps / 4);
    if (!flags.was_set("--out")) base.out = quick ? "runs/study_quick" : "runs/study";
    if (!flags.was_set("--log-every")) base.log_every = std::max(1LL, base.steps / 10);
    if (base.threads > 0) omp_set_num_threads(base.threads);
    check(infer_threads > 0, "--infer-threads must be positive");
    check(passage_tokens >= 0 && passage_at >= 0, "--passage-tokens and --passage-at must be >= 0");
    const std::string dir = base.out;
    std::filesystem::create_directories(dir + "/runs");

    std::vector<long long> seeds;
    for (const std::string& s : split_list(seeds_flag, ',')) {
      char* end = nullptr;
      const long long v = std::strtoll(s.c_str(), &end, 10);
      check(end != s.c_str() && *end == 0, "--seeds: '" + s + "' is not an integer");
      seeds.push_back(v);
    }
    check(!seeds.empty(), "--seeds is empty");
    const std::vector<std::string> specs = split_list(methods, ',');
    check(!specs.empty(), "--methods is empty");
    const std::vector<Knob> knobs = parse_knobs(knob_flag);

    auto tok = run_tokenizer(base.tokenizer, base.model_config());
    Dataset data = load_data(base, *tok);

    StudyResults res;
    StudySetup& su = res.setup;
    su.command = command_line(argc, argv), su.date = today(), su.machine = cpu_model();
    su.data = base.data, su.config = base.config, su.steps = base.steps, su.batch = base.batch, su.seq = base.seq;
    su.tokens_per_run = (double)base.steps * base.accum * base.batch * base.seq;
    su.seeds = seeds;
    check(learned_at > 0 && learned_at <= 1, "--learned-at must be in (0, 1] (an accuracy), got " + shortest_double(learned_at));
    su.learned_at = learned_at;

    // Labels, pairs (a/b; default every method against the first) and knobs, checked before any training.
    std::vector<std::string> labels;
    for (const std::string& spec : specs) {
      const std::string label = labelled_spec(spec).label;
      for (auto& l : labels)
        check(l != label, "--methods lists '" + spec + "' twice" + (label == spec ? "" : " (label " + label + ")"));
      labels.push_back(label);
    }
    auto known = [&](const std::string& label, const std::string& flag) {
      std::string all;
      for (auto& l : labels) all += (all.empty() ? "" : ", ") + l;
      check(std::find(labels.begin(), labels.end(), label) != labels.end(),
            flag + " names the method '" + label + "', which is not among the studied labels (" + all +
                "; a spec's label is its label= part, or the spec with ':', '=' and '/' replaced by '_')");
    };
    if (pairs_flag.empty()) {
      for (size_t i = 1; i < labels.size(); i++) res.pairs.push_back({labels[i], labels[0]});
    } else {
      for (const std::string& p : split_list(pairs_flag, ',')) {
        const size_t slash = p.find('/');
        check(slash != std::string::npos && slash > 0 && slash + 1 < p.size(), "--pairs: '" + p + "' needs the form a/b");
        res.pairs.push_back({p.substr(0, slash), p.substr(slash + 1)});
        known(res.pairs.back().first, "--pairs"), known(res.pairs.back().second, "--pairs");
      }
    }
    for (const Knob& k : knobs) known(k.label, "--knob");
    const std::string from_tag = "init-from=@";  // init-from=@LABEL names a method trained before it
    for (size_t i = 0; i < specs.size(); i++)
      for (const std::string& part : split_list(specs[i], ':')) {
        if (part.rfind(from_tag, 0) != 0) continue;
        const std::string from = part.substr(from_tag.size());
        check(std::find(labels.begin(), labels.begin() + i, from) != labels.begin() + i,
              "method spec '" + specs[i] + "': init-from=@" + from + " needs the method labelled '" + from +
                  "' earlier in --methods");
      }

    std::vector<TrainOptions> method_opts;  // per method, first seed's (for the knobs)
    std::map<long long, double> learned_passes;     // per seed: the last learned adaponder's, for policy-passes=auto
    std::map<long long, std::string> learned_hist;  // and its exit histogram, for policy-hist=auto
    for (const std::string& spec : specs) {
      StudyMethod m;
      m.spec = spec, m.label = labelled_spec(spec).label;
      for (long long seed : seeds) {
        TrainOptions o = options_for_spec(base, spec, learned_passes[seed], learned_hist[seed]);
        o.seed = seed;
        o.out = dir + "/runs/" + m.label + "_s" + std::to_string(seed);
        // init-from=@LABEL: post-train from LABEL's finished run of the same
        // seed (TaH2's regime); that run's training is added to this run's.
        const StudyRun* pre = nullptr;
        if (!o.init_from.empty() && o.init_from[0] == '@') {
          const std::string from = o.init_from.substr(1);
          for (const StudyMethod& done : res.methods)
            if (done.label == from) pre = &done.runs[m.runs.size()];  // runs are in seed order
          check(pre != nullptr, "method spec '" + spec + "': init-from=@" + from +
                                    " needs the method labelled '" + from + "' earlier in --methods");
          o.init_from = pre->dir;
        }
        m.method = o.method;
        if (method_opts.size() < res.methods.size() + 1) method_opts.push_back(o);
        std::printf("\n=== %s, seed %lld ===\n", spec.c_str(), seed);
        const StudyRecordKey key = study_record_key(spec, o);
        StudyRun run;
        if (has_study_record(o.out)) {
          // A finished run kept as its record (study_record.h): nothing to train or evaluate.
          load_study_record(o.out, key, &run);
          std::printf("reusing the record of %s (%zu validation tokens, loss %.4f)\n", o.out.c_str(), run.nll.size(),
                      run.val_loss);
        } else {
          run = train_and_evaluate(o, key, pre, data, tok.get(), infer_threads);
          save_study_record(o.out, key, run);
        }
        if (res.methods.empty() && m.runs.empty()) res.classes = run.class_names;
        check(run.class_names == res.classes, "run " + o.out + " sees other difficulty classes than the first run");
        if (o.method == "adaponder" && o.method_opts.ada.policy == "gates") {
          learned_passes[seed] = run.passes;
          learned_hist[seed] = exit_histogram(run.halting, o.method_opts.ponder_steps);
        }
        su.val_tokens = run.nll.size();
        m.runs.push_back(std::move(run));
      }
      res.methods.push_back(std::move(m));
    }

    // Knob curves: the first seed's model of the method at each value.
    for (const Knob& k : knobs) {
      size_t mi = 0;
      while (mi < res.methods.size() && res.methods[mi].label != k.label) mi++;
      StudyMethod& m = res.methods[mi];
      const TrainOptions& o = method_opts[mi];
      m.knob_name = k.flag;
      check(run_progress(m.runs[0].dir).step > 0,
            "--knob " + k.label + " evaluates the model of " + m.runs[0].dir + ", which holds no checkpoint (only its "
            "record): remove its record.json so that it is trained again, or leave out the --knob");
      for (const std::string& v : k.values) {
        const double x = std::strtod(v.c_str(), nullptr);  // a number: parse_knobs checked it
        Bk be;
        auto ck = load_checkpoint_model(be, m.runs[0].dir, k.flag + "=" + v);
        const EvalReport e = evaluate_model(*ck.model, *ck.method, *data.val, tok.get(), o.batch, o.seq, 0);
        StudyRun tmp;
        fill_from_eval(tmp, e);
        m.knob.push_back({x, tmp.val_loss, tmp.accuracy, tmp.infer_flops, tmp.passes});
        std::printf("knob %s %s=%s: loss %.4f, accuracy %.4f, passes %.3f, %s FLOPs/token\n", k.label.c_str(),
                    k.flag.c_str(), v.c_str(), tmp.val_loss, tmp.accuracy, tmp.passes, format_count(tmp.infer_flops).c_str());
      }
    }

    for (auto& p : res.pairs) study_pair(study_method(res, p.first), study_method(res, p.second));  // same tokens and seeds

    // The passage: consecutive evaluated tokens from --passage-at, first seed of each method.
    const StudyRun& r0 = res.methods[0].runs[0];
    const size_t n = r0.nll.size();
    const size_t a = std::min<size_t>((size_t)passage_at, n), b = std::min<size_t>(a + passage_tokens, n);
    const bool chain_text = is_chain_task_classes(res.classes);
    for (size_t i = a; i < b; i++) {
      int32_t id = 0;
      data.val->read(r0.position[i], 1, &id);
      // the chain task's fused tokens are bytes above ASCII: shown as "v=x"
      res.passage.tokens.push_back(chain_text ? chain_token_text(id) : printable(tok->decode_token(id)));
      if (!res.classes.empty()) res.passage.classes.push_back(r0.cls[i]);
    }
    for (auto& m : res.methods) {
      const StudyRun& r = m.runs[0];
      check(r.position == r0.position, "method " + m.label + " was evaluated on other tokens than " +
                                           res.methods[0].label + " (a different --seq?)");
      res.passage.labels.push_back(m.label);
      res.passage.passes.emplace_back(r.tok_passes.begin() + a, r.tok_passes.begin() + b);
      res.passage.nll.emplace_back(r.nll.begin() + a, r.nll.begin() + b);
    }

    const std::vector<std::string> files = write_study(res, dir);
    std::printf("\n%s", study_markdown(res).c_str());
    std::printf("\nwritten to %s:", dir.c_str());
    for (auto& f : files) std::printf(" %s", f.c_str());
    std::printf("\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
