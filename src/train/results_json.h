// The study's results.json (written by `study`, read by `report`) as plain
// structs: schema 1, what `report` reads of it is listed in docs/workflow.md
// ("The report page").
// Every number may be null (NaN in the file) or absent: it reads as NaN and
// the report shows a dash. Fields the reader does not know are ignored, so
// the study may add fields without breaking the report.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace ada::report {

// The per-run (and per-method mean/std) figures.
struct Figures {
  double val_loss, accuracy, passes, train_flops, infer_flops, infer_other, infer_us;
};
Figures nan_figures();

// One difficulty class of one method: [mean, std] over seeds (of one run:
// the run's figures, std NaN).
struct ClassFigures {
  std::string name;
  double tokens;
  double accuracy, accuracy_std, nll, nll_std, passes, passes_std;
};

struct Run {
  double seed;
  std::string dir;
  std::string machine, date;  // where and when it was finished; empty when not recorded
  Figures figures;
  std::vector<std::pair<int, double>> pass_hist;  // (passes, tokens), ascending passes
  std::vector<ClassFigures> per_class;            // in the order of the study's classes
};

struct NllBin {
  double nll_lo, nll_hi, tokens, passes;
};

// The tokens of one class that used `passes` passes, every seed pooled
// (study's "Where each class stops").
struct DepthCell {
  double passes, tokens, accuracy, nll;
};
struct ClassDepths {
  std::string name;  // a difficulty class, or "all" for natural text
  std::vector<DepthCell> cells;  // ascending passes
};

// A behaviour knob swept at inference on one trained model.
struct KnobPoint {
  double value, val_loss, accuracy, infer_flops, passes;
};
struct Knob {
  std::string name;  // empty: the method has no knob
  std::vector<KnobPoint> points;
};

struct Method {
  std::string label, spec, method;
  std::vector<Run> runs;
  Figures mean, std;
  std::vector<ClassFigures> per_class;  // in the order of the study's classes
  std::vector<NllBin> passes_by_nll;
  std::vector<ClassDepths> by_depth;  // empty in files written before the study kept it
  Knob knob;
};

// A paired comparison: diff = loss(a) - loss(b) per token, averaged.
struct SeedDiff {
  double seed, diff, se;
  bool machines_differ = false;  // the two runs were finished on different machines
};
struct Pair {
  std::string a, b;
  double diff, se, se_tokens, se_seeds, tokens;
  std::vector<SeedDiff> per_seed;
};

// A stretch of validation text with what each method spent on every token.
struct PassageRow {
  std::string label;
  std::vector<double> passes, nll;  // one per token (NaN where missing)
};
struct Passage {
  std::vector<std::string> tokens;
  std::vector<int> classes;  // index into Results::classes per token; empty when none
  std::vector<PassageRow> rows;  // in the order of the methods
};

struct Results {
  // The setup as (key, text) in document order: strings as they are,
  // numbers as written, arrays joined with ", ".
  std::vector<std::pair<std::string, std::string>> setup;
  std::vector<std::string> classes;  // difficulty classes; empty for natural text
  std::vector<Method> methods;
  std::vector<Pair> pairs;
  Passage passage;

  // The setup's value for key, or "" when absent.
  std::string setup_value(const std::string& key) const;
};

// Reads a parsed results.json; `source` names it in errors. Throws ada::Error
// on a wrong schema version or a field of the wrong type.
Results parse_results(const Json& doc, const std::string& source);

// Reads and parses the file (one clear error when it is missing or not JSON).
Results read_results(const std::string& path);

}  // namespace ada::report
