// See study_results.h.
#include "train/study_results.h"

#include <cmath>
#include <cstdio>

#include "core/common.h"
#include "core/json.h"
#include "train/atomic_file.h"
#include "train/metrics.h"
#include "train/svg_plot.h"

namespace ada {

namespace {

// A JSON number; NaN and infinities as null.
std::string num(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

std::string q(const std::string& s) { return json_quote(s); }

// The seven headline metrics of a run, in schema order.
const char* const kMetrics[] = {"val_loss", "accuracy", "passes", "train_flops", "infer_flops", "infer_other", "infer_us"};

double metric(const StudyRun& r, const std::string& k) {
  if (k == "val_loss") return r.val_loss;
  if (k == "accuracy") return r.accuracy;
  if (k == "passes") return r.passes;
  if (k == "train_flops") return r.train_flops;
  if (k == "infer_flops") return r.infer_flops;
  if (k == "infer_other") return r.infer_other;
  if (k == "infer_us") return r.infer_us;
  fail("unknown study metric " + k);
}

MeanStd over_seeds(const StudyMethod& m, const std::string& k) {
  std::vector<double> v;
  for (auto& r : m.runs) v.push_back(metric(r, k));
  return mean_std(v);
}

// Per class of each run, then [mean, std] over seeds.
struct ClassSummary {
  long long tokens = 0;  // of the first seed (every seed evaluates the same tokens)
  MeanStd accuracy, nll, passes;
};
std::vector<std::vector<ClassStats>> run_classes(const StudyMethod& m, int n_classes) {
  std::vector<std::vector<ClassStats>> out;
  for (auto& r : m.runs) out.push_back(class_stats(r.nll, r.tok_passes, r.correct, r.cls, n_classes));
  return out;
}
std::vector<ClassSummary> class_summary(const std::vector<std::vector<ClassStats>>& per_run, int n_classes) {
  std::vector<ClassSummary> s(n_classes);
  for (int c = 0; c < n_classes; c++) {
    std::vector<double> a, n, p;
    for (auto& rc : per_run) a.push_back(rc[c].accuracy), n.push_back(rc[c].nll), p.push_back(rc[c].passes);
    s[c].tokens = per_run.empty() ? 0 : per_run[0][c].tokens;
    s[c].accuracy = mean_std(a), s[c].nll = mean_std(n), s[c].passes = mean_std(p);
  }
  return s;
}

// The NLL bins shared by every method: up to the largest NLL of any run.
std::vector<NllBin> shared_bins(const StudyResults& r) {
  double mx = 0;
  for (auto& m : r.methods)
    for (auto& run : m.runs)
      for (double x : run.nll) mx = std::max(mx, x);
  return nll_bins(mx);
}

std::string pm(const MeanStd& m, const char* f) {
  char a[48], b[48];
  std::snprintf(a, sizeof a, f, m.mean);
  std::snprintf(b, sizeof b, f, m.std);
  return std::string(a) + " ± " + b;
}
std::string pm_count(const MeanStd& m) { return format_count(m.mean) + " ± " + format_count(m.std); }

// "Where each class stops": for every method whose tokens use different
// numbers of passes, a table of class x passes (every seed pooled), each cell
// the share of the class's tokens that used that many passes, their accuracy
// and their mean NLL ("-" where none did).
std::string depth_section(const StudyResults& r) {
  const int nc = (int)r.classes.size();
  std::string t;
  for (auto& m : r.methods) {
    DepthTable cells;
    for (auto& run : m.runs) depth_stats(cells, run.nll, run.tok_passes, run.correct, run.cls, nc);
    std::map<long long, long long> depths;  // passes -> tokens, over every class
    for (auto& row : cells)
      for (auto& kv : row) depths[kv.first] += kv.second.tokens;
    if (depths.size() < 2) continue;  // one depth for every token: nothing to split
    if (t.empty())
      t = "\n## Where each class stops\n\nmethods whose tokens use different numbers of passes, every seed's tokens "
          "pooled: the share of the class's tokens that used that many passes / their accuracy / their mean NLL\n";
    t += "\n" + m.label + "\n\n| class |";
    for (auto& d : depths) t += " " + std::to_string(d.first) + (d.first == 1 ? " pass |" : " passes |");
    t += "\n| --- |";
    for (size_t i = 0; i < depths.size(); i++) t += " ---: |";
    t += "\n";
    for (size_t c = 0; c < cells.size(); c++) {
      long long total = 0;
      for (auto& kv : cells[c]) total += kv.second.tokens;
      if (total == 0) continue;
      t += "| " + (nc > 0 ? r.classes[c] : std::string("all")) + " |";
      for (auto& d : depths) {
        auto it = cells[c].find(d.first);
        if (it == cells[c].end() || it->second.tokens == 0) {
          t += " - |";
          continue;
        }
        const DepthCell& x = it->second;
        const double share = 100.0 * x.tokens / total;
        char pct[16], buf[96];
        if (share >= 0.05) std::snprintf(pct, sizeof pct, "%.1f%%", share);
        else std::snprintf(pct, sizeof pct, "<0.1%%");
        std::snprintf(buf, sizeof buf, " %s / %.3f / %.3f |", pct, (double)x.correct / x.tokens, x.nll_sum / x.tokens);
        t += buf;
      }
      t += "\n";
    }
  }
  return t;
}

}  // namespace

const StudyMethod& study_method(const StudyResults& r, const std::string& label) {
  for (auto& m : r.methods)
    if (m.label == label) return m;
  fail("--pairs names the method '" + label + "', which is not among the studied methods' labels");
}

PairedResult study_pair(const StudyMethod& a, const StudyMethod& b) {
  check(a.runs.size() == b.runs.size(), "pair " + a.label + "/" + b.label + ": the methods have different seeds");
  std::vector<std::vector<double>> na, nb;
  std::vector<long long> seeds;
  for (size_t s = 0; s < a.runs.size(); s++) {
    check(a.runs[s].seed == b.runs[s].seed, "pair " + a.label + "/" + b.label + ": the methods have different seeds");
    check(a.runs[s].position == b.runs[s].position,
          "pair " + a.label + "/" + b.label + ": the runs were evaluated on different tokens (a different --seq?)");
    na.push_back(a.runs[s].nll), nb.push_back(b.runs[s].nll), seeds.push_back(a.runs[s].seed);
  }
  return paired_difference(na, nb, seeds);
}

// True when both methods' runs of `seed` name their machines and the two
// differ: a paired difference then also measures the machines (a run on a
// task with phase changes can land on either side of one on two CPUs).
static bool machines_differ(const StudyMethod& a, const StudyMethod& b, long long seed) {
  const StudyRun *ra = nullptr, *rb = nullptr;
  for (auto& run : a.runs)
    if (run.seed == seed) ra = &run;
  for (auto& run : b.runs)
    if (run.seed == seed) rb = &run;
  return ra && rb && !ra->machine.empty() && !rb->machine.empty() && ra->machine != rb->machine;
}

std::vector<int> learned_runs(const StudyMethod& m, int n_classes, double learned_at) {
  std::vector<int> k(n_classes, 0);
  for (auto& run : run_classes(m, n_classes))
    for (int c = 0; c < n_classes; c++) k[c] += run[c].accuracy >= learned_at;  // NaN (no tokens): not learned
  return k;
}

std::string study_json(const StudyResults& r) {
  const StudySetup& su = r.setup;
  const int nc = (int)r.classes.size();
  std::string j = "{\n\"schema\": 1,\n\"setup\": {\"command\": " + q(su.command) + ", \"date\": " + q(su.date) +
                  ", \"machine\": " + q(su.machine) + ", \"data\": " + q(su.data) + ", \"config\": " + q(su.config) +
                  ", \"steps\": " + std::to_string(su.steps) + ", \"batch\": " + std::to_string(su.batch) +
                  ", \"seq\": " + std::to_string(su.seq) + ", \"tokens_per_run\": " + num(su.tokens_per_run) +
                  ", \"seeds\": [";
  for (size_t i = 0; i < su.seeds.size(); i++) j += (i ? ", " : "") + std::to_string(su.seeds[i]);
  j += "], \"val_tokens\": " + std::to_string(su.val_tokens) + ", \"learned_at\": " + num(su.learned_at) +
       "},\n\"classes\": [";
  for (int c = 0; c < nc; c++) j += (c ? ", " : "") + q(r.classes[c]);
  j += "],\n\"methods\": [";
  const std::vector<NllBin> bins0 = shared_bins(r);
  for (size_t mi = 0; mi < r.methods.size(); mi++) {
    const StudyMethod& m = r.methods[mi];
    j += std::string(mi ? "," : "") + "\n{\"label\": " + q(m.label) + ", \"spec\": " + q(m.spec) +
         ", \"method\": " + q(m.method) + ",\n \"runs\": [";
    const auto per_run = run_classes(m, nc);
    for (size_t ri = 0; ri < m.runs.size(); ri++) {
      const StudyRun& run = m.runs[ri];
      j += std::string(ri ? ",\n  " : "\n  ") + "{\"seed\": " + std::to_string(run.seed) + ", \"dir\": " + q(run.dir) +
           ", \"machine\": " + q(run.machine) + ", \"date\": " + q(run.date);
      for (const char* k : kMetrics) j += ", \"" + std::string(k) + "\": " + num(metric(run, k));
      j += ", \"train_seconds\": " + num(run.train_seconds) + ", \"train_tokens\": " + num(run.train_tokens) +
           ", \"pass_hist\": {";
      bool first = true;
      for (auto& kv : run.pass_hist) {
        j += (first ? "" : ", ") + q(std::to_string(kv.first)) + ": " + std::to_string(kv.second);
        first = false;
      }
      j += "}, \"per_class\": {";
      for (int c = 0; c < nc; c++) {
        const ClassStats& cs = per_run[ri][c];
        j += (c ? ", " : "") + q(r.classes[c]) + ": {\"tokens\": " + std::to_string(cs.tokens) +
             ", \"accuracy\": " + num(cs.accuracy) + ", \"nll\": " + num(cs.nll) + ", \"passes\": " + num(cs.passes) + "}";
      }
      j += "}}";
    }
    j += "],\n \"mean\": {";
    for (size_t k = 0; k < std::size(kMetrics); k++) j += (k ? ", \"" : "\"") + std::string(kMetrics[k]) + "\": " + num(over_seeds(m, kMetrics[k]).mean);
    j += "},\n \"std\": {";
    for (size_t k = 0; k < std::size(kMetrics); k++) j += (k ? ", \"" : "\"") + std::string(kMetrics[k]) + "\": " + num(over_seeds(m, kMetrics[k]).std);
    j += "},\n \"per_class\": {";
    const auto cls = class_summary(per_run, nc);
    for (int c = 0; c < nc; c++)
      j += (c ? ", " : "") + q(r.classes[c]) + ": {\"tokens\": " + std::to_string(cls[c].tokens) + ", \"accuracy\": [" +
           num(cls[c].accuracy.mean) + ", " + num(cls[c].accuracy.std) + "], \"nll\": [" + num(cls[c].nll.mean) + ", " +
           num(cls[c].nll.std) + "], \"passes\": [" + num(cls[c].passes.mean) + ", " + num(cls[c].passes.std) + "]}";
    j += "},\n \"learned_runs\": {";
    const std::vector<int> learned = learned_runs(m, nc, su.learned_at);
    for (int c = 0; c < nc; c++) j += (c ? ", " : "") + q(r.classes[c]) + ": " + std::to_string(learned[c]);
    j += "},\n \"passes_by_nll\": [";
    std::vector<NllBin> bins = bins0;
    for (auto& run : m.runs) add_to_bins(bins, run.nll, run.tok_passes);
    for (size_t b = 0; b < bins.size(); b++)
      j += (b ? ", " : "") + std::string("{\"nll_lo\": ") + num(bins[b].lo) + ", \"nll_hi\": " + num(bins[b].hi) +
           ", \"tokens\": " + std::to_string(bins[b].tokens) + ", \"passes\": " + num(bins[b].passes) + "}";
    j += "],\n \"by_depth\": [";
    // Every seed's tokens pooled, per class (one row "all" for natural text)
    // and per number of passes: [passes, tokens, accuracy, mean NLL].
    DepthTable cells;
    for (auto& run : m.runs) depth_stats(cells, run.nll, run.tok_passes, run.correct, run.cls, nc);
    for (size_t c = 0; c < cells.size(); c++) {
      j += std::string(c ? ", " : "") + "{\"class\": " + q(nc > 0 ? r.classes[c] : std::string("all")) + ", \"cells\": [";
      bool first = true;
      for (auto& kv : cells[c]) {
        const DepthCell& d = kv.second;
        j += std::string(first ? "" : ", ") + "[" + std::to_string(kv.first) + ", " + std::to_string(d.tokens) + ", " +
             num((double)d.correct / d.tokens) + ", " + num(d.nll_sum / d.tokens) + "]";
        first = false;
      }
      j += "]}";
    }
    j += "]";
    if (!m.knob_name.empty()) {
      j += ",\n \"knob\": {\"name\": " + q(m.knob_name) + ", \"points\": [";
      for (size_t k = 0; k < m.knob.size(); k++) {
        const KnobPoint& p = m.knob[k];
        j += (k ? ", " : "") + std::string("{\"value\": ") + num(p.value) + ", \"val_loss\": " + num(p.val_loss) +
             ", \"accuracy\": " + num(p.accuracy) + ", \"infer_flops\": " + num(p.infer_flops) +
             ", \"passes\": " + num(p.passes) + "}";
      }
      j += "]}";
    }
    j += "}";
  }
  j += "\n],\n\"pairs\": [";
  for (size_t pi = 0; pi < r.pairs.size(); pi++) {
    const StudyMethod &ma = study_method(r, r.pairs[pi].first), &mb = study_method(r, r.pairs[pi].second);
    const PairedResult p = study_pair(ma, mb);
    j += std::string(pi ? ",\n " : "\n ") + "{\"a\": " + q(r.pairs[pi].first) + ", \"b\": " + q(r.pairs[pi].second) +
         ", \"diff\": " + num(p.diff) + ", \"se\": " + num(p.se) + ", \"se_tokens\": " + num(p.se_tokens) +
         ", \"se_seeds\": " + num(p.se_seeds) + ", \"tokens\": " + std::to_string(p.tokens) + ", \"per_seed\": [";
    for (size_t s = 0; s < p.per_seed.size(); s++)
      j += (s ? ", " : "") + std::string("{\"seed\": ") + std::to_string(p.per_seed[s].seed) + ", \"diff\": " +
           num(p.per_seed[s].diff) + ", \"se\": " + num(p.per_seed[s].se) +
           ", \"machines_differ\": " + (machines_differ(ma, mb, p.per_seed[s].seed) ? "true" : "false") + "}";
    j += "]}";
  }
  const StudyPassage& ps = r.passage;
  j += "\n],\n\"passage\": {\"tokens\": [";
  for (size_t i = 0; i < ps.tokens.size(); i++) j += (i ? ", " : "") + q(ps.tokens[i]);
  j += "], \"classes\": [";
  for (size_t i = 0; i < ps.classes.size(); i++) j += (i ? ", " : "") + std::to_string(ps.classes[i]);
  j += "],\n  \"methods\": {";
  for (size_t mi = 0; mi < ps.labels.size(); mi++) {
    j += std::string(mi ? ",\n   " : "\n   ") + q(ps.labels[mi]) + ": {\"passes\": [";
    for (size_t i = 0; i < ps.passes[mi].size(); i++) j += (i ? ", " : "") + num(ps.passes[mi][i]);
    j += "], \"nll\": [";
    for (size_t i = 0; i < ps.nll[mi].size(); i++) j += (i ? ", " : "") + num(ps.nll[mi][i]);
    j += "]}";
  }
  j += "}}\n}\n";
  return j;
}

// The Markdown header cells of one column per difficulty class, and their alignment rules.
static std::string class_columns(const std::vector<std::string>& classes) {
  std::string t;
  for (auto& c : classes) t += " " + c + " |";
  return t;
}
static std::string class_rules(int n) {
  std::string t;
  for (int c = 0; c < n; c++) t += " ---: |";
  return t;
}

// On a task whose classes are learned in phase changes a run either crosses
// one or does not, and a mean over a few seeds counts crossings: so count
// them. Per method, the runs whose accuracy on each class reaches
// learned_at; per pair, both counts and the one-sided Fisher p that a learns
// the class more often than b (study_stats.h).
static std::string learned_section(const StudyResults& r) {
  const int nc = (int)r.classes.size();
  char buf[160];
  std::snprintf(buf, sizeof buf, "%g", r.setup.learned_at);
  std::string t = "\n## Which runs learn each class\n\nruns whose accuracy on the class is at least " + std::string(buf) +
                  " (--learned-at), of the method's runs\n\n| method |";
  for (auto& c : r.classes) t += " " + c + " |";
  t += "\n| --- |" + class_rules(nc) + "\n";
  for (auto& m : r.methods) {
    const std::vector<int> k = learned_runs(m, nc, r.setup.learned_at);
    t += "| " + m.label + " |";
    for (int c = 0; c < nc; c++) t += " " + std::to_string(k[c]) + "/" + std::to_string(m.runs.size()) + " |";
    t += "\n";
  }
  if (r.pairs.empty()) return t;
  t += "\nPairs: runs of a and of b that learn the class, and the one-sided Fisher exact p that a learns it more "
       "often than b by chance (— where neither or both learn it in every run)\n\n| a | b |";
  for (auto& c : r.classes) t += " " + c + " |";
  t += "\n| --- | --- |" + class_rules(nc) + "\n";
  for (auto& pr : r.pairs) {
    const StudyMethod &ma = study_method(r, pr.first), &mb = study_method(r, pr.second);
    const std::vector<int> ka = learned_runs(ma, nc, r.setup.learned_at), kb = learned_runs(mb, nc, r.setup.learned_at);
    const int na = (int)ma.runs.size(), nb = (int)mb.runs.size();
    t += "| " + pr.first + " | " + pr.second + " |";
    for (int c = 0; c < nc; c++) {
      const bool same_all = (ka[c] == 0 && kb[c] == 0) || (ka[c] == na && kb[c] == nb);
      if (same_all)
        std::snprintf(buf, sizeof buf, " %d/%d vs %d/%d, — |", ka[c], na, kb[c], nb);
      else
        std::snprintf(buf, sizeof buf, " %d/%d vs %d/%d, p %.3f |", ka[c], na, kb[c], nb, fisher_greater(ka[c], na, kb[c], nb));
      t += buf;
    }
    t += "\n";
  }
  return t;
}

std::string study_markdown(const StudyResults& r) {
  const StudySetup& su = r.setup;
  std::string t = "# Study\n\n";
  t += "- command: `" + su.command + "`\n- date: " + su.date + "; machine: " + su.machine +
       " (this table's; each run's own under Runs)\n";
  t += "- data " + su.data + ", config " + su.config + ", " + std::to_string(su.steps) + " steps x " +
       std::to_string(su.batch) + " x " + std::to_string(su.seq) + " = " + format_count(su.tokens_per_run) +
       " training tokens per run; seeds";
  for (long long s : su.seeds) t += " " + std::to_string(s);
  t += "; validation: every token of the split once (" + std::to_string(su.val_tokens) + " tokens)\n\n";
  t += "Mean ± standard deviation over seeds.\n\n";
  t += "| method | val loss | accuracy | passes/token | train FLOPs | inference FLOPs/token | other ops/token | "
       "inference us/token |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (auto& m : r.methods)
    t += "| " + m.label + " | " + pm(over_seeds(m, "val_loss"), "%.4f") + " | " + pm(over_seeds(m, "accuracy"), "%.4f") +
         " | " + pm(over_seeds(m, "passes"), "%.3f") + " | " + pm_count(over_seeds(m, "train_flops")) + " | " +
         pm_count(over_seeds(m, "infer_flops")) + " | " + pm_count(over_seeds(m, "infer_other")) + " | " +
         pm(over_seeds(m, "infer_us"), "%.2f") + " |\n";
  const int nc = (int)r.classes.size();
  if (nc > 0) {
    t += "\n## Per difficulty class\n\naccuracy / NLL / passes, mean ± std over seeds\n\n| method |" +
         class_columns(r.classes) + "\n| --- |" + class_rules(nc) + "\n";
    for (auto& m : r.methods) {
      const auto cls = class_summary(run_classes(m, nc), nc);
      t += "| " + m.label + " |";
      for (int c = 0; c < nc; c++)
        t += " " + pm(cls[c].accuracy, "%.3f") + " / " + pm(cls[c].nll, "%.3f") + " / " + pm(cls[c].passes, "%.2f") + " |";
      t += "\n";
    }
    t += "\ntokens per class:";
    const auto cls0 = class_summary(run_classes(r.methods[0], nc), nc);
    for (int c = 0; c < nc; c++) t += " " + r.classes[c] + " " + std::to_string(cls0[c].tokens);
    t += "\n";
    t += learned_section(r);
  }
  t += depth_section(r);
  if (!r.pairs.empty()) {
    bool any_other = false;
    t += "\n## Paired differences\n\nper-token NLL of a minus b, averaged over seeds; standard error from the tokens "
         "and from the seeds\n\n| a | b | diff | s.e. | s.e. tokens | s.e. seeds | per seed |\n"
         "| --- | --- | ---: | ---: | ---: | ---: | --- |\n";
    for (auto& pr : r.pairs) {
      const StudyMethod &ma = study_method(r, pr.first), &mb = study_method(r, pr.second);
      const PairedResult p = study_pair(ma, mb);
      char buf[160];
      std::snprintf(buf, sizeof buf, "| %s | %s | %+.4f | %.4f | %.4f | %.4f |", pr.first.c_str(), pr.second.c_str(),
                    p.diff, p.se, p.se_tokens, p.se_seeds);
      t += buf;
      for (auto& s : p.per_seed) {
        const bool other = machines_differ(ma, mb, s.seed);
        std::snprintf(buf, sizeof buf, " %lld: %+.4f ± %.4f%s;", s.seed, s.diff, s.se, other ? "†" : "");
        t += buf;
        any_other |= other;
      }
      t += " |\n";
    }
    if (any_other) t += "\n† the two runs of that seed were finished on different machines (see Runs)\n";
  }
  for (auto& m : r.methods) {
    if (m.knob_name.empty()) continue;
    t += "\n## Knob: " + m.label + " " + m.knob_name + " (first seed's model)\n\n| " + m.knob_name +
         " | val loss | accuracy | passes/token | inference FLOPs/token |\n| ---: | ---: | ---: | ---: | ---: |\n";
    for (auto& p : m.knob) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "| %g | %.4f | %.4f | %.3f | %s |\n", p.value, p.val_loss, p.accuracy, p.passes,
                    format_count(p.infer_flops).c_str());
      t += buf;
    }
  }
  // Every run with the machine and date that finished it: records from several
  // sessions and machines meet in one study, and the machine alone can move a run.
  // Each class's accuracy per run too: on a task with phase changes a run
  // either learns a class or does not, and the mean over seeds hides which.
  t += "\n## Runs\n\n| method | seed | val loss | accuracy | passes/token |" + class_columns(r.classes) +
       " finished on | date |\n| --- | ---: | ---: | ---: | ---: |" + class_rules(nc) + " --- | --- |\n";
  for (auto& m : r.methods) {
    const auto per_run = run_classes(m, nc);
    for (size_t ri = 0; ri < m.runs.size(); ri++) {
      const StudyRun& run = m.runs[ri];
      char buf[96];
      std::snprintf(buf, sizeof buf, " | %lld | %.4f | %.4f | %.3f |", run.seed, run.val_loss, run.accuracy, run.passes);
      t += "| " + m.label + buf;
      for (int c = 0; c < nc; c++) {
        std::snprintf(buf, sizeof buf, " %.3f |", per_run[ri][c].accuracy);
        t += buf;
      }
      t += " " + (run.machine.empty() ? std::string("not recorded") : run.machine) + " | " +
           (run.date.empty() ? "not recorded" : run.date) + " |\n";
    }
  }
  t += "\nplots: iso_infer_loss.svg, iso_train_loss.svg";
  if (nc > 0) t += ", iso_infer_accuracy.svg, iso_train_accuracy.svg";
  for (auto& m : r.methods)
    if (!m.knob_name.empty()) {
      t += ", knob_loss.svg, knob_accuracy.svg";
      break;
    }
  t += "\n";
  return t;
}

std::vector<std::string> write_study(const StudyResults& r, const std::string& dir) {
  std::vector<std::string> files = {"results.json", "results.md"};
  write_file_atomic(dir + "/results.json", study_json(r));
  write_file_atomic(dir + "/results.md", study_markdown(r));
  // Iso-compute views: one point per method (mean over seeds), error bars the std over seeds.
  auto iso = [&](const std::string& x, const std::string& y, const std::string& name, const std::string& xlabel,
                 const std::string& ylabel) {
    std::vector<PlotSeries> s;
    for (auto& m : r.methods) {
      const MeanStd mx = over_seeds(m, x), my = over_seeds(m, y);
      s.push_back({m.label, {mx.mean}, {my.mean}, {mx.std}, {my.std}, false, {}});
    }
    write_file_atomic(dir + "/" + name, xy_plot_svg(s, ylabel + " against " + xlabel, xlabel + " (log scale)", ylabel, true));
    files.push_back(name);
  };
  iso("infer_flops", "val_loss", "iso_infer_loss.svg", "inference FLOPs per token", "validation loss");
  iso("train_flops", "val_loss", "iso_train_loss.svg", "training FLOPs", "validation loss");
  if (!r.classes.empty()) {
    iso("infer_flops", "accuracy", "iso_infer_accuracy.svg", "inference FLOPs per token", "accuracy");
    iso("train_flops", "accuracy", "iso_train_accuracy.svg", "training FLOPs", "accuracy");
  }
  // Knob curves: one line per method with a knob, over its values.
  std::vector<PlotSeries> kl, ka;
  for (auto& m : r.methods) {
    if (m.knob_name.empty()) continue;
    PlotSeries l{m.label + " (" + m.knob_name + ")", {}, {}, {}, {}, true, {}}, a = l;
    for (auto& p : m.knob) {
      char tag[32];
      std::snprintf(tag, sizeof tag, "%g", p.value);
      l.tags.push_back(tag), a.tags.push_back(tag);
      l.x.push_back(p.infer_flops), l.y.push_back(p.val_loss);
      a.x.push_back(p.infer_flops), a.y.push_back(p.accuracy);
    }
    kl.push_back(l), ka.push_back(a);
  }
  if (!kl.empty()) {
    write_file_atomic(dir + "/knob_loss.svg", xy_plot_svg(kl, "loss over a behaviour knob (one trained model)",
                                                          "inference FLOPs per token (log scale)", "validation loss", true));
    write_file_atomic(dir + "/knob_accuracy.svg", xy_plot_svg(ka, "accuracy over a behaviour knob (one trained model)",
                                                              "inference FLOPs per token (log scale)", "accuracy", true));
    files.push_back("knob_loss.svg");
    files.push_back("knob_accuracy.svg");
  }
  return files;
}

}  // namespace ada
