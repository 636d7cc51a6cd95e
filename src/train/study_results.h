// A study's results (apps/study.cpp) and the files made from them in the
// study folder: results.json (the schema of docs/workflow.md "Study", read by
// `report`), results.md (Markdown tables) and the SVG plots. The means,
// standard deviations, per-class aggregates, NLL bins and paired differences
// are computed here from the runs' per-token vectors (train/study_stats.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "train/study_stats.h"

namespace ada {

// One trained run (a method under one seed), evaluated on every validation token once.
struct StudyRun {
  long long seed = 0;
  std::string dir;
  // Where and when the run was finished (trained to its last step and evaluated):
  // the CPU model and the UTC date; empty for records written before they were kept.
  std::string machine, date;
  double val_loss = NAN, accuracy = NAN, passes = NAN, train_flops = NAN, infer_flops = NAN, infer_other = NAN,
         infer_us = NAN, train_seconds = NAN, train_tokens = NAN;
  std::map<long long, long long> pass_hist;  // passes (rounded) -> tokens
  std::vector<std::pair<std::string, double>> halting;  // EvalReport::halting (token-weighted means)
  // per evaluated token, in evaluation order (EvalReport's vectors)
  std::vector<double> nll, tok_passes;
  std::vector<uint8_t> correct;
  std::vector<size_t> position;
  std::vector<int> cls;
  std::vector<std::string> class_names;  // the difficulty classes cls indexes (empty for natural text)
};

// One value of a behaviour knob applied at evaluation to the first seed's model.
struct KnobPoint {
  double value = 0, val_loss = NAN, accuracy = NAN, infer_flops = NAN, passes = NAN;
};

struct StudyMethod {
  std::string label, spec, method;
  std::vector<StudyRun> runs;  // one per seed, in the order of setup.seeds
  std::string knob_name;       // empty: no knob curve
  std::vector<KnobPoint> knob;
};

struct StudySetup {
  std::string command, date, machine, data, config;
  long long steps = 0;
  int batch = 0, seq = 0;
  double tokens_per_run = 0;
  std::vector<long long> seeds;
  size_t val_tokens = 0;
  // A run learns a difficulty class when its accuracy on the class reaches
  // this (study's --learned-at): the line the "Runs that learn each class"
  // counts are drawn at.
  double learned_at = 0.8;
};

// ~256 consecutive validation target tokens, decoded, with each method's
// (first seed's) passes and NLL on them.
struct StudyPassage {
  std::vector<std::string> tokens;
  std::vector<int> classes;  // empty when the data has no classes
  std::vector<std::string> labels;
  std::vector<std::vector<double>> passes, nll;  // per method, in `labels` order
};

struct StudyResults {
  StudySetup setup;
  std::vector<std::string> classes;  // difficulty class names; empty for natural text
  std::vector<StudyMethod> methods;
  std::vector<std::pair<std::string, std::string>> pairs;  // (a, b) labels: a minus b
  StudyPassage passage;
};

// The method of that label; throws naming it when there is none.
const StudyMethod& study_method(const StudyResults& r, const std::string& label);

// The paired difference of two methods' per-token NLL over their common seeds.
PairedResult study_pair(const StudyMethod& a, const StudyMethod& b);

// Per difficulty class, how many of the method's runs learned it (accuracy on
// the class >= learned_at); n_classes values.
std::vector<int> learned_runs(const StudyMethod& m, int n_classes, double learned_at);

std::string study_json(const StudyResults& r);
std::string study_markdown(const StudyResults& r);
// results.json, results.md and the plots (iso_infer_loss.svg, iso_train_loss.svg,
// iso_infer_accuracy.svg, iso_train_accuracy.svg, knob_loss.svg, knob_accuracy.svg)
// into dir; returns the names of the files written.
std::vector<std::string> write_study(const StudyResults& r, const std::string& dir);

}  // namespace ada
