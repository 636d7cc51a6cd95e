// The study's statistics on hand-made numbers (the paired standard error,
// per-class aggregation), its results.json schema, and the study program
// run twice on a tiny quick study: the second run trains nothing, and a run
// interrupted part way is resumed to the same weights as an uninterrupted one;
// a spec's label= part, which keeps the records of a default that changed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/json.h"
#include "train/comparison.h"
#include "train/method_spec.h"
#include "train/study_results.h"
#include "train/study_stats.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;

namespace {

// Two seeds, four tokens. Differences a - b: seed 0 {-0.5, 1, -0.5, 1}
// (mean 0.25), seed 1 {1, -0.5, -0.5, 2} (mean 0.5).
const std::vector<std::vector<double>> kA = {{1, 2, 3, 4}, {2, 2, 1, 3}};
const std::vector<std::vector<double>> kB = {{1.5, 1, 3.5, 3}, {1, 2.5, 1.5, 1}};

TEST(StudyStats, PairedStandardErrorMatchesDirectComputation) {
  const PairedResult p = paired_difference(kA, kB, {1337, 1338});
  // D_i = {0.25, 0.25, -0.5, 1.5}: mean 0.375, sample variance 2.0625 / 3 = 0.6875
  EXPECT_EQ(p.tokens, 4u);
  EXPECT_NEAR(p.diff, 0.375, 1e-12);
  EXPECT_NEAR(p.se_tokens, std::sqrt(0.6875 / 4), 1e-12);
  // d_s = {0.25, 0.5}: sample std 0.25 / sqrt(2), over sqrt(2) seeds: 0.125
  EXPECT_NEAR(p.se_seeds, 0.125, 1e-12);
  EXPECT_NEAR(p.se, std::sqrt(0.6875 / 4 + 0.125 * 0.125), 1e-12);
  ASSERT_EQ(p.per_seed.size(), 2u);
  EXPECT_EQ(p.per_seed[0].seed, 1337);
  EXPECT_NEAR(p.per_seed[0].diff, 0.25, 1e-12);
  EXPECT_NEAR(p.per_seed[0].se, std::sqrt(0.75 / 4), 1e-12);  // squares 4 x 0.5625 over 3
  EXPECT_NEAR(p.per_seed[1].diff, 0.5, 1e-12);
  EXPECT_NEAR(p.per_seed[1].se, std::sqrt(1.5 / 4), 1e-12);   // squares 0.25 + 1 + 1 + 2.25 over 3
  // One seed: no spread over seeds, and the total is the per-seed figure.
  const PairedResult one = paired_difference({kA[0]}, {kB[0]}, {7});
  EXPECT_EQ(one.se_seeds, 0.0);
  EXPECT_NEAR(one.se, std::sqrt(0.75 / 4), 1e-12);
  // Shapes that do not match are an error.
  expect_error([] { paired_difference({kA[0]}, {{1, 2}}, {7}); }, {"different numbers of tokens"});
}

TEST(StudyStats, PerClassAggregation) {
  const std::vector<double> nll = {1, 2, 3, 4, 5}, passes = {1, 2, 3, 4, 1};
  const std::vector<uint8_t> correct = {1, 0, 1, 1, 0};
  const std::vector<int> cls = {0, 1, 1, -1, 0};  // token 3 has no class
  const std::vector<ClassStats> c = class_stats(nll, passes, correct, cls, 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].tokens, 2);
  EXPECT_DOUBLE_EQ(c[0].accuracy, 0.5);
  EXPECT_DOUBLE_EQ(c[0].nll, 3.0);
  EXPECT_DOUBLE_EQ(c[0].passes, 1.0);
  EXPECT_EQ(c[1].tokens, 2);
  EXPECT_DOUBLE_EQ(c[1].accuracy, 0.5);
  EXPECT_DOUBLE_EQ(c[1].nll, 2.5);
  EXPECT_DOUBLE_EQ(c[1].passes, 2.5);
  EXPECT_EQ(c[2].tokens, 0);
  EXPECT_TRUE(std::isnan(c[2].accuracy));
  // Passes by NLL bins: [1, 1.5) holds token 0, [2, 3) token 1, [3, 4) token 2, ...
  std::vector<NllBin> bins = nll_bins(5);
  add_to_bins(bins, nll, passes);
  long long total = 0;
  for (auto& b : bins) {
    total += b.tokens;
    if (b.lo == 4) {
      EXPECT_EQ(b.tokens, 1) << "NLL 4 falls in [4, 5)";
    }
    if (b.lo == 5) {
      EXPECT_DOUBLE_EQ(b.passes, 1.0);  // the last bin is closed: NLL 5 with 1 pass
    }
  }
  EXPECT_EQ(total, 5);
}

// A hand-made study of two methods x two seeds, written as results.json.
StudyResults hand_study() {
  StudyResults r;
  r.setup.command = "./study --quick";
  r.setup.seeds = {1337, 1338};
  r.setup.val_tokens = 4;
  r.classes = {"easy", "hard"};
  const std::vector<size_t> pos = {1, 2, 3, 4};
  for (int m = 0; m < 2; m++) {
    StudyMethod sm;
    sm.label = m == 0 ? "standard" : "adaponder";
    sm.spec = sm.method = sm.label;
    for (int s = 0; s < 2; s++) {
      StudyRun run;
      run.seed = 1337 + s;
      run.nll = m == 0 ? kB[s] : kA[s];
      run.tok_passes = {1, 2, 3, 4};
      run.correct = {1, (uint8_t)s, 0, 1};  // the hard tokens (1 and 3): seed 0 one right, seed 1 both
      run.position = pos;
      run.cls = {0, 1, 0, 1};
      run.val_loss = 1 + s, run.accuracy = 0.5, run.passes = 2.5;
      sm.runs.push_back(run);
    }
    r.methods.push_back(sm);
  }
  r.pairs = {{"adaponder", "standard"}};
  return r;
}

TEST(StudyResults, JsonHasTheSchemaAndTheFigures) {
  const Json j = parse_json(study_json(hand_study()), "results.json");
  for (const char* k : {"schema", "setup", "classes", "methods", "pairs", "passage"}) EXPECT_NE(j.find(k), nullptr) << k;
  EXPECT_EQ(j.find("schema")->number, 1);
  for (const char* k : {"command", "date", "machine", "data", "config", "steps", "batch", "seq", "tokens_per_run", "seeds",
                        "val_tokens"})
    EXPECT_NE(j.find("setup")->find(k), nullptr) << k;
  const Json& m = j.find("methods")->items.at(1);
  for (const char* k : {"label", "spec", "method", "runs", "mean", "std", "per_class", "passes_by_nll"})
    EXPECT_NE(m.find(k), nullptr) << k;
  for (const char* k : {"seed", "dir", "val_loss", "accuracy", "passes", "train_flops", "infer_flops", "infer_other",
                        "infer_us", "train_seconds", "pass_hist", "per_class"})
    EXPECT_NE(m.find("runs")->items.at(0).find(k), nullptr) << k;
  // mean and std over the seeds' val_loss 1 and 2
  EXPECT_DOUBLE_EQ(m.find("mean")->find("val_loss")->number, 1.5);
  EXPECT_NEAR(m.find("std")->find("val_loss")->number, std::sqrt(0.5), 1e-9);
  // per class: hard tokens (1 and 3) right in seed 0: {0, 1} -> 0.5, seed 1: {1, 1} -> 1; [mean, std]
  const Json* hard = m.find("per_class")->find("hard");
  ASSERT_NE(hard, nullptr);
  EXPECT_EQ(hard->find("tokens")->number, 2);
  EXPECT_DOUBLE_EQ(hard->find("accuracy")->items.at(0).number, 0.75);
  EXPECT_NEAR(hard->find("accuracy")->items.at(1).number, std::sqrt(0.125), 1e-9);
  EXPECT_DOUBLE_EQ(hard->find("passes")->items.at(0).number, 3.0);  // passes of tokens 1 and 3: 2 and 4
  // the pair: adaponder (kA) minus standard (kB), as computed above
  const Json& p = j.find("pairs")->items.at(0);
  EXPECT_EQ(p.find("a")->text, "adaponder");
  EXPECT_NEAR(p.find("diff")->number, 0.375, 1e-9);
  EXPECT_NEAR(p.find("se")->number, std::sqrt(0.6875 / 4 + 0.125 * 0.125), 1e-9);
  EXPECT_NEAR(p.find("se_seeds")->number, 0.125, 1e-9);
  EXPECT_EQ(p.find("per_seed")->items.size(), 2u);
  // no knob given: no knob member; a NaN figure is written as null
  EXPECT_EQ(m.find("knob"), nullptr);
  EXPECT_TRUE(m.find("runs")->items.at(0).find("infer_us")->is(Json::Type::Null));
}

// depth_stats on hand-made tokens, and the markdown section built from it.
TEST(StudyStats, ClassesSplitByPasses) {
  DepthTable cells;
  // class 0: passes 1 (right, NLL 0.5), 1 (wrong, 1.5), 4 (right, 2); class 1: 3.9 rounds to 4 (wrong, 3);
  // a token of class -1 is not counted
  depth_stats(cells, {0.5, 1.5, 2, 3, 9}, {1, 1, 4, 3.9, 2}, {1, 0, 1, 0, 1}, {0, 0, 0, 1, -1}, 2);
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].size(), 2u);
  EXPECT_EQ(cells[0][1].tokens, 2);
  EXPECT_EQ(cells[0][1].correct, 1);
  EXPECT_DOUBLE_EQ(cells[0][1].nll_sum, 2.0);
  EXPECT_EQ(cells[0][4].tokens, 1);
  EXPECT_EQ(cells[1].size(), 1u);
  EXPECT_EQ(cells[1][4].tokens, 1);
  EXPECT_EQ(cells[1][4].correct, 0);
  // a second run pools into the same cells; natural text (no classes) is one row
  depth_stats(cells, {1.0}, {1}, {1}, {1}, 2);
  EXPECT_EQ(cells[1][1].tokens, 1);
  DepthTable text;
  depth_stats(text, {1, 2}, {1, 2}, {1, 0}, {-1, -1}, 0);
  ASSERT_EQ(text.size(), 1u);
  EXPECT_EQ(text[0][1].tokens + text[0][2].tokens, 2);
  EXPECT_THROW(depth_stats(text, {1, 2}, {1}, {1, 0}, {-1, -1}, 0), Error);
}

TEST(StudyResults, MarkdownSplitsAdaptiveMethodsByPasses) {
  StudyResults r = hand_study();
  r.methods[0].label = "standard";
  for (auto& run : r.methods[0].runs) run.tok_passes = {1, 1, 1, 1};  // one depth: no table
  const std::string md = study_markdown(r);
  const size_t at = md.find("## Where each class stops");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string sec = md.substr(at, md.find("## Paired") - at);
  EXPECT_EQ(sec.find("\nstandard\n"), std::string::npos) << sec;
  EXPECT_NE(sec.find("\nadaponder\n"), std::string::npos) << sec;
  // adaponder, both seeds pooled: easy tokens (0 and 2) used 1 and 3 passes (token 0 right, token 2
  // wrong, in both seeds); hard tokens (1 and 3) used 2 and 4 passes (token 1 right in seed 1338 only).
  EXPECT_NE(sec.find("| 1 pass | 2 passes | 3 passes | 4 passes |"), std::string::npos) << sec;
  EXPECT_NE(sec.find("| easy | 50.0% / 1.000 /"), std::string::npos) << sec;
  EXPECT_NE(sec.find("| hard | - | 50.0% / 0.500 /"), std::string::npos) << sec;
}

// The Runs table: one row per run, each class's accuracy of that run, and where it was finished.
TEST(StudyResults, MarkdownListsEveryRunWithItsClasses) {
  StudyResults r = hand_study();
  r.methods[1].runs[0].machine = "Test CPU", r.methods[1].runs[0].date = "2026-12-03";
  const std::string md = study_markdown(r);
  const size_t at = md.find("## Runs");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string sec = md.substr(at);
  EXPECT_NE(sec.find("| method | seed | val loss | accuracy | passes/token | easy | hard | finished on | date |"),
            std::string::npos) << sec;
  // adaponder seed 1337: easy tokens 0 and 2 (right, wrong), hard tokens 1 and 3 (wrong, right);
  // seed 1338: easy the same, hard both right.
  EXPECT_NE(sec.find("| adaponder | 1337 | 1.0000 | 0.5000 | 2.500 | 0.500 | 0.500 | Test CPU | 2026-12-03 |"),
            std::string::npos) << sec;
  EXPECT_NE(sec.find("| adaponder | 1338 | 2.0000 | 0.5000 | 2.500 | 0.500 | 1.000 | not recorded | not recorded |"),
            std::string::npos) << sec;
  // No pair mixes machines here (standard's runs name none): no mark.
  EXPECT_EQ(md.find("†"), std::string::npos) << md;
  size_t rows = 0;
  for (size_t p = sec.find("\n| standard | "); p != std::string::npos; p = sec.find("\n| standard | ", p + 1)) rows++;
  EXPECT_EQ(rows, 2u) << sec;
}

// The one-sided Fisher exact test against the hypergeometric sums written out.
TEST(StudyStats, FisherExactAgainstDirectSums) {
  // 3 of 6 against 0 of 18: only x = 3 is as extreme; C(6,3) C(18,0) / C(24,3) = 20 / 2024.
  EXPECT_NEAR(fisher_greater(3, 6, 0, 18), 20.0 / 2024.0, 1e-12);
  // 2 of 3 against 1 of 3: x = 2 or 3 of the k = 3 in the first group of 3 among 6:
  // (C(3,2) C(3,1) + C(3,3) C(3,0)) / C(6,3) = (9 + 1) / 20.
  EXPECT_NEAR(fisher_greater(2, 3, 1, 3), 0.5, 1e-12);
  // 2 of 2 against 0 of 2: 1 / C(4,2).
  EXPECT_NEAR(fisher_greater(2, 2, 0, 2), 1.0 / 6.0, 1e-12);
  // the first group no better than the second: every outcome is as extreme
  EXPECT_NEAR(fisher_greater(0, 3, 3, 3), 1.0, 1e-12);
  // P(X >= k1) + P(X <= k1 - 1) = 1, and X <= k1 - 1 is the second group getting k2 + 1 or more.
  EXPECT_NEAR(fisher_greater(2, 5, 3, 7) + fisher_greater(4, 7, 1, 5), 1.0, 1e-12);
  EXPECT_THROW(fisher_greater(4, 3, 0, 3), std::exception);
}

// The counts of runs that cross --learned-at on each class, per method and for the pairs.
TEST(StudyResults, MarkdownCountsRunsThatLearnEachClass) {
  StudyResults r = hand_study();
  for (auto& run : r.methods[0].runs) run.correct = {1, 0, 0, 0};  // standard: hard 0.0, easy 0.5
  for (auto& run : r.methods[1].runs) run.correct = {1, 1, 0, 1};  // adaponder: hard 1.0, easy 0.5
  const std::string md = study_markdown(r);
  const size_t at = md.find("## Which runs learn each class");
  ASSERT_NE(at, std::string::npos) << md;
  const std::string sec = md.substr(at, md.find("\n## ", at + 1) - at);
  EXPECT_NE(sec.find("at least 0.8"), std::string::npos) << sec;
  EXPECT_NE(sec.find("| standard | 0/2 | 0/2 |"), std::string::npos) << sec;
  EXPECT_NE(sec.find("| adaponder | 0/2 | 2/2 |"), std::string::npos) << sec;
  EXPECT_NE(sec.find("| adaponder | standard | 0/2 vs 0/2, — | 2/2 vs 0/2, p 0.167 |"), std::string::npos) << sec;
  r.setup.learned_at = 0.5;  // now the easy class (0.5 in every run) counts as learned too
  const std::string md2 = study_markdown(r);
  EXPECT_NE(md2.find("| adaponder | standard | 2/2 vs 2/2, — | 2/2 vs 0/2, p 0.167 |"), std::string::npos) << md2;
  const Json j = parse_json(study_json(r), "results.json");
  EXPECT_DOUBLE_EQ(j.find("setup")->find("learned_at")->number, 0.5);
  const Json& learned = *j.find("methods")->items.at(0).find("learned_runs");
  EXPECT_DOUBLE_EQ(learned.find("easy")->number, 2);
  EXPECT_DOUBLE_EQ(learned.find("hard")->number, 0);
}

// A pair whose two runs of a seed were finished on different machines is marked, per seed.
TEST(StudyResults, PairsMarkSeedsWhoseRunsRanOnDifferentMachines) {
  StudyResults r = hand_study();
  for (int m = 0; m < 2; m++)
    for (auto& run : r.methods[m].runs) run.machine = "CPU A";
  r.methods[0].runs[1].machine = "CPU B";  // standard, seed 1338
  const std::string md = study_markdown(r);
  const size_t at = md.find("## Paired differences");
  ASSERT_NE(at, std::string::npos);
  const std::string sec = md.substr(at, md.find("## Runs") - at);
  // seed 1337 (both on CPU A): no mark; seed 1338 (CPU A against CPU B): marked
  auto entry = [&](const std::string& head) {
    const size_t b = sec.find(head);
    return b == std::string::npos ? std::string() : sec.substr(b, sec.find(';', b) - b);
  };
  ASSERT_FALSE(entry("1337: +0.2500 ± ").empty()) << sec;
  EXPECT_EQ(entry("1337: +0.2500 ± ").find("†"), std::string::npos) << sec;
  ASSERT_FALSE(entry("1338: +0.5000 ± ").empty()) << sec;
  EXPECT_NE(entry("1338: +0.5000 ± ").find("†"), std::string::npos) << sec;
  EXPECT_NE(sec.find("† the two runs of that seed were finished on different machines"), std::string::npos) << sec;
  const Json j = parse_json(study_json(r), "results.json");
  const Json& per_seed = *j.find("pairs")->items.at(0).find("per_seed");
  EXPECT_FALSE(per_seed.items.at(0).find("machines_differ")->boolean);
  EXPECT_TRUE(per_seed.items.at(1).find("machines_differ")->boolean);
}

// Every member of a JSON value except those named in `skip` (timing fields), as text.
std::string without(const Json& j, const std::set<std::string>& skip) {
  switch (j.type) {
    case Json::Type::Object: {
      std::string s = "{";
      for (auto& kv : j.members)
        if (!skip.count(kv.first)) s += kv.first + ":" + without(kv.second, skip) + ",";
      return s + "}";
    }
    case Json::Type::Array: {
      std::string s = "[";
      for (auto& x : j.items) s += without(x, skip) + ",";
      return s + "]";
    }
    case Json::Type::String: return "\"" + j.text + "\"";
    case Json::Type::Number: return j.text;
    case Json::Type::Bool: return j.boolean ? "true" : "false";
    default: return "null";
  }
}

std::string small_text(const std::string& dir) {
  std::string t;
  for (int i = 0; i < 60; i++) t += "In the beginning God created the heaven and the earth. " + std::to_string(i) + "\n";
  write_bytes(dir + "/text.txt", t);
  return dir + "/text.txt";
}

// A quick study run twice: the second run trains nothing (the checkpoints'
// bytes are untouched) and writes the same results.json apart from timing.
TEST(StudyProgram, SecondRunReusesFinishedRuns) {
  const std::string study = program("study");
  if (study.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("study_reuse"), text = small_text(dir);
  const std::string cmd = study + " --quick --data " + text + " --val-fraction 0.1 --steps 12 --out " + dir + "/s";
  ProgramResult r = run_program(cmd, dir);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const std::string first_json = read_bytes(dir + "/s/results.json");
  const Json j = parse_json(first_json, "results.json");
  ASSERT_EQ(j.find("methods")->items.size(), 2u);
  EXPECT_EQ(j.find("methods")->items[1].find("label")->text, "adaponder");
  EXPECT_EQ(j.find("setup")->find("tokens_per_run")->number, 12 * 4 * 32);
  EXPECT_EQ(j.find("pairs")->items.at(0).find("b")->text, "standard");
  EXPECT_EQ(j.find("passage")->find("tokens")->items.size(), 256u);
  EXPECT_EQ(j.find("methods")->items[1].find("knob")->find("points")->items.size(), 4u);
  for (const char* f : {"results.md", "iso_infer_loss.svg", "iso_train_loss.svg", "knob_loss.svg"})
    EXPECT_TRUE(exists(dir + "/s/" + f)) << f;
  std::vector<std::string> ckpt_files;
  for (const char* run : {"standard_s1337", "adaponder_s1337"})
    for (const char* f : {"/ckpt_12/model.safetensors", "/ckpt_12/state.safetensors", "/latest", "/metrics.jsonl"})
      ckpt_files.push_back(dir + "/s/runs/" + run + f);
  std::vector<std::string> before;
  for (auto& f : ckpt_files) before.push_back(read_bytes(f));
  for (auto& b : before) EXPECT_FALSE(b.empty());
  EXPECT_FALSE(exists(dir + "/s/runs/standard_s1337/ckpt_3")) << "intermediate checkpoints are removed";

  // The second run reads each run's record (record.json, record.bin), not its checkpoint.
  for (const char* run : {"standard_s1337", "adaponder_s1337"})
    for (const char* f : {"/record.json", "/record.bin"}) EXPECT_TRUE(exists(dir + "/s/runs/" + run + f)) << run << f;
  r = run_program(cmd, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find("step "), std::string::npos) << "trained again:\n" << r.out;
  EXPECT_NE(r.out.find("reusing the record of " + dir + "/s/runs/standard_s1337"), std::string::npos) << r.out;
  for (size_t i = 0; i < ckpt_files.size(); i++) EXPECT_EQ(read_bytes(ckpt_files[i]), before[i]) << ckpt_files[i];
  const std::set<std::string> timing = {"date"};  // the record keeps the measured inference time
  EXPECT_EQ(without(parse_json(read_bytes(dir + "/s/results.json"), "second"), timing), without(j, timing));

  // Without a record the finished checkpoint is evaluated again (and the record rewritten).
  std::filesystem::remove(dir + "/s/runs/standard_s1337/record.json");
  r = run_program(cmd, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("reusing the finished run " + dir + "/s/runs/standard_s1337/ckpt_12"), std::string::npos) << r.out;
  EXPECT_TRUE(exists(dir + "/s/runs/standard_s1337/record.json"));
}

// A study continued in another session from its records alone (the
// checkpoints are not committed): the same figures, nothing trained; a record
// of other options, or a damaged one, is one clear error.
TEST(StudyProgram, ContinuesFromRecordsWithoutCheckpoints) {
  const std::string study = program("study");
  if (study.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("study_records"), text = small_text(dir);
  const std::string cmd =
      study + " --quick --data " + text + " --val-fraction 0.1 --steps 12 --knob '' --out " + dir + "/s";
  ProgramResult r = run_program(cmd, dir);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const Json first = parse_json(read_bytes(dir + "/s/results.json"), "first");
  // What a fresh clone holds: the records (and the logs), no checkpoint.
  for (const char* run : {"standard_s1337", "adaponder_s1337"}) {
    const std::string rd = dir + "/s/runs/" + run;
    std::filesystem::remove_all(rd + "/ckpt_12");
    std::filesystem::remove(rd + "/latest");
  }
  r = run_program(cmd, dir);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_EQ(r.out.find("step "), std::string::npos) << "trained again:\n" << r.out;
  EXPECT_NE(r.out.find("reusing the record of " + dir + "/s/runs/adaponder_s1337"), std::string::npos) << r.out;
  const Json second = parse_json(read_bytes(dir + "/s/results.json"), "second");
  EXPECT_EQ(without(second, {"date"}), without(first, {"date"}));
  EXPECT_FALSE(exists(dir + "/s/runs/standard_s1337/latest")) << "nothing trained";

  // Each record keeps the machine and the date that finished it, and results.md lists them per run.
  const std::string rj = dir + "/s/runs/adaponder_s1337/record.json";
  const Json rec = parse_json(read_bytes(rj), rj);
  ASSERT_NE(rec.find("machine"), nullptr);
  ASSERT_NE(rec.find("date"), nullptr);
  EXPECT_FALSE(rec.find("machine")->text.empty());
  EXPECT_EQ(rec.find("date")->text.size(), 10u) << "YYYY-MM-DD";
  const Json& run0 = second.find("methods")->items.at(1).find("runs")->items.at(0);
  EXPECT_EQ(run0.find("machine")->text, rec.find("machine")->text);
  const std::string md = read_bytes(dir + "/s/results.md");
  EXPECT_NE(md.find("## Runs"), std::string::npos) << md;
  EXPECT_NE(md.find("| adaponder | 1337 | "), std::string::npos) << md;
  EXPECT_NE(md.find(rec.find("machine")->text + " | " + rec.find("date")->text + " |"), std::string::npos) << md;
  // A record written before machine and date were kept still loads: they read "not recorded".
  std::string old = read_bytes(rj);
  const size_t from = old.find(" \"machine\""), to = old.find(" \"options\"");
  ASSERT_TRUE(from != std::string::npos && to != std::string::npos && from < to);
  old.erase(from, to - from);
  write_bytes(rj, old);
  r = run_program(cmd, dir);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_EQ(r.out.find("step "), std::string::npos) << "trained again:\n" << r.out;
  const std::string md2 = read_bytes(dir + "/s/results.md");
  EXPECT_NE(md2.find("| not recorded | not recorded |"), std::string::npos) << md2;

  // A knob needs the model itself.
  expect_program_error(run_program(study + " --quick --data " + text + " --val-fraction 0.1 --steps 12 --out " + dir + "/s", dir),
                       "holds no checkpoint (only its record)");
  // A record of another training option is not reused, and the error names the option.
  expect_program_error(run_program(cmd + " --lr 1e-3", dir), "was made with --lr 0.0030000000000000001, this study has 0.001");
  // A truncated per-token file.
  const std::string bin = dir + "/s/runs/standard_s1337/record.bin";
  const std::string bytes = read_bytes(bin);
  write_bytes(bin, bytes.substr(0, bytes.size() - 3));
  expect_program_error(run_program(cmd, dir), "record.bin: " + std::to_string(bytes.size() - 3) + " bytes, " +
                                                  std::to_string(bytes.size()) + " expected");
  // A corrupt value.
  std::string bad = bytes;
  const double nan = std::nan("");
  std::memcpy(&bad[16], &nan, 8);  // the first token's NLL
  write_bytes(bin, bad);
  expect_program_error(run_program(cmd, dir), "record.bin: token 0 has NLL nan (corrupt)");
}

// Bad flags: one line naming the problem, before any training.
TEST(StudyProgram, RejectsBadFlags) {
  const std::string study = program("study");
  if (study.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("study_errors"), text = small_text(dir);
  const std::string base = study + " --quick --data " + text + " --val-fraction 0.1 --out " + dir + "/s";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --pairs nope/standard", "--pairs names the method 'nope', which is not among the studied labels"},
      {" --pairs standard", "--pairs: 'standard' needs the form a/b"},
      {" --knob adaponder", "--knob 'adaponder' needs the form LABEL:flag=v1/v2/v3"},
      {" --knob adaponder:tau=x", "--knob adaponder: value 'x' is not a number"},
      {" --knob ponder:tau=1", "--knob names the method 'ponder'"},
      {" --seeds 13x", "--seeds: '13x' is not an integer"},
      {" --methods standard,standard", "--methods lists 'standard' twice"},
      {" --methods standard,ponder:label=standard", "--methods lists 'ponder:label=standard' twice (label standard)"},
      {" --learned-at 1.5", "--learned-at must be in (0, 1] (an accuracy), got 1.5"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.first);
    expect_program_error(run_program(base + c.first, dir), c.second);
  }
  EXPECT_FALSE(exists(dir + "/s/runs/standard_s1337")) << "nothing trained";
}

// init-from=@LABEL post-trains from LABEL's run of the same seed (TaH2's
// regime: pretrain standard, post-train tah), and that run's training counts
// in the post-trained run's tokens and FLOPs.
TEST(StudyProgram, PostTrainsFromTheSameSeedsRunOfAnEarlierMethod) {
  const std::string study = program("study");
  if (study.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("study_init_from"), text = small_text(dir);
  const std::string base = study + " --quick --data " + text + " --val-fraction 0.1 --steps 6 --seeds 1337,1338 --out " +
                           dir + "/s --methods standard,";
  ProgramResult r = run_program(base + "tah:init-from=@standard", dir);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  for (const char* seed : {"1337", "1338"})
    EXPECT_NE(r.out.find("backbone initialised from " + dir + "/s/runs/standard_s" + seed + "/ckpt_6 (method standard"),
              std::string::npos)
        << seed << "\n" << r.out;
  const Json j = parse_json(read_bytes(dir + "/s/results.json"), "results.json");
  const auto& methods = j.find("methods")->items;
  ASSERT_EQ(methods.size(), 2u);
  EXPECT_EQ(methods[1].find("label")->text, "tah_init-from_@standard");
  for (size_t s = 0; s < 2; s++) {
    const Json& pre = methods[0].find("runs")->items.at(s);
    const Json& post = methods[1].find("runs")->items.at(s);
    EXPECT_EQ(post.find("train_tokens")->number, 2 * pre.find("train_tokens")->number);
    EXPECT_GT(post.find("train_flops")->number, pre.find("train_flops")->number);
  }
  // the label must be trained before it, and exist
  expect_program_error(run_program(base + "tah:init-from=@ponder", dir),
                       "init-from=@ponder needs the method labelled 'ponder' earlier in --methods");
  expect_program_error(run_program(study + " --quick --data " + text + " --out " + dir + "/t --methods tah:init-from=@standard,standard", dir),
                       "init-from=@standard needs the method labelled 'standard' earlier in --methods");
}

// A spec's label= part names its runs; it is not an option.
TEST(MethodSpec, LabelPartNamesTheRunsAndIsNoOption) {
  LabelledSpec l = labelled_spec("adaponder:gate-bias=4:label=adaponder");
  EXPECT_EQ(l.spec, "adaponder:gate-bias=4");
  EXPECT_EQ(l.label, "adaponder");
  EXPECT_TRUE(l.relabelled);
  l = labelled_spec("adaponder:tau=1e-3:policy-hist=0.5/0.5");
  EXPECT_EQ(l.spec, "adaponder:tau=1e-3:policy-hist=0.5/0.5");
  EXPECT_EQ(l.label, "adaponder_tau_1e-3_policy-hist_0.5_0.5");
  EXPECT_FALSE(l.relabelled);
  EXPECT_EQ(labelled_spec("tah:label=tah_init-from_@standard").label, "tah_init-from_@standard");
  for (auto& [bad, msg] : std::vector<std::pair<std::string, std::string>>{
           {"adaponder:label=a:label=b", "gives label= twice"},
           {"adaponder:label=", "must be a plain file name"},
           {"adaponder:label=..", "must be a plain file name"},
           {"adaponder:label=a/b", "must be a plain file name"},
           {"adaponder:label=a b", "must be a plain file name"},
           {"label=x", "names no method"}}) {
    try {
      labelled_spec(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << bad << ": " << e.what();
    }
  }
  TrainOptions base;
  const TrainOptions o = options_for_spec(base, "adaponder:gate-bias=4:label=adaponder", 0, "");
  EXPECT_EQ(o.method, "adaponder");
  EXPECT_EQ(o.method_opts.ada.gate_bias, 4.0);
  EXPECT_EQ(options_for_spec(base, "adaponder", 0, "").method_opts.ada.gate_bias, 0.0) << "the default since 2026-12-08";
}

// When a default changes, the records made under the old one stay where they
// are: a spec that spells out the old value and gives the old label reuses
// them, every option still compared. Without the old value the record (or a
// finished checkpoint) is refused with the way to reuse it; the other
// methods' records, which also list --gate-bias, are not affected by it.
TEST(StudyProgram, RelabelledSpecReusesTheRecordsOfItsLabel) {
  const std::string study = program("study");
  if (study.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("study_label"), text = small_text(dir);
  const std::string base =
      study + " --quick --data " + text + " --val-fraction 0.1 --steps 6 --knob '' --out " + dir + "/s --methods standard,";
  ProgramResult r = run_program(base + "adaponder:gate-bias=4", dir);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const std::string runs = dir + "/s/runs/";
  const Json first = parse_json(read_bytes(dir + "/s/results.json"), "first");
  const double loss = first.find("methods")->items.at(1).find("runs")->items.at(0).find("val_loss")->number;

  // The standard run's record as the committed ones are: they also list gate bias 4, the
  // default then (a record made now leaves out the options of other methods).
  const std::string std_rec = runs + "standard_s1337/record.json";
  std::string rec = read_bytes(std_rec);
  EXPECT_EQ(rec.find("gate-bias"), std::string::npos) << rec;
  const size_t at = rec.find("\"gate-hidden\": \"0\", ");
  ASSERT_NE(at, std::string::npos) << rec;
  rec.insert(at, "\"gate-bias\": \"4\", ");
  write_bytes(std_rec, rec);

  r = run_program(base + "adaponder:gate-bias=4:label=adaponder_gate-bias_4", dir);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_EQ(r.out.find("step "), std::string::npos) << "trained again:\n" << r.out;
  EXPECT_NE(r.out.find("reusing the record of " + runs + "adaponder_gate-bias_4_s1337"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reusing the record of " + runs + "standard_s1337"), std::string::npos) << r.out;
  const Json second = parse_json(read_bytes(dir + "/s/results.json"), "second");
  const Json& m = second.find("methods")->items.at(1);
  EXPECT_EQ(m.find("label")->text, "adaponder_gate-bias_4");
  EXPECT_EQ(m.find("runs")->items.at(0).find("val_loss")->number, loss);

  // The label alone is not enough: the gate bias is compared, and the error says how to reuse the record.
  expect_program_error(run_program(base + "adaponder:label=adaponder_gate-bias_4", dir),
                       "was made with --gate-bias 4, the default until 2026-12-08, and this study has 0: to reuse it, add "
                       ":gate-bias=4:label=adaponder_gate-bias_4 to the spec");
  // A record made under another label is not taken for this one.
  std::filesystem::copy(runs + "adaponder_gate-bias_4_s1337", runs + "other_s1337", std::filesystem::copy_options::recursive);
  expect_program_error(run_program(base + "adaponder:gate-bias=4:label=other", dir),
                       "was made with spec adaponder:gate-bias=4 (label adaponder_gate-bias_4), this study has "
                       "adaponder:gate-bias=4:label=other (label other");
  // A finished checkpoint without its record is checked the same way before it is evaluated.
  std::filesystem::remove(runs + "adaponder_gate-bias_4_s1337/record.json");
  expect_program_error(run_program(base + "adaponder:label=adaponder_gate-bias_4", dir),
                       "checkpoint " + runs + "adaponder_gate-bias_4_s1337/ckpt_6 was made with --gate-bias 4, the default until");
  expect_program_error(run_program(base + "adaponder:gate-bias=4:tau=0.5:label=adaponder_gate-bias_4", dir),
                       "ckpt_6 was made with --tau 0.0001, this study has 0.5");
  r = run_program(base + "adaponder:gate-bias=4:label=adaponder_gate-bias_4", dir);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("reusing the finished run " + runs + "adaponder_gate-bias_4_s1337/ckpt_6"), std::string::npos) << r.out;
}

// A run stopped part way (its latest checkpoint before --steps) is resumed,
// to the same weights as the uninterrupted run.
TEST(StudyProgram, ResumesARunStoppedPartWay) {
  const std::string study = program("study"), train = program("train_cpu");
  if (study.empty() || train.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("study_resume"), text = small_text(dir);
  const std::string opts = " --data " + text + " --val-fraction 0.1 --steps 12";
  ProgramResult r = run_program(study + " --quick --methods standard" + opts + " --out " + dir + "/whole", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  // The same run trained to step 8 of 12 by train_cpu, as if the study had been stopped there.
  const std::string part = dir + "/part/runs/standard_s1337";
  r = run_program(train + " --method standard --config test --vocab 256 --tokenizer bytes --batch 4 --seq 32 --warmup 4"
                  " --eval-every 0 --eval-batches 2 --ponder-steps 2 --seed 1337 --save-every 4" + opts + " --out " + part, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  std::filesystem::remove_all(part + "/ckpt_12");
  write_bytes(part + "/latest", "ckpt_8\n");
  r = run_program(study + " --quick --methods standard" + opts + " --out " + dir + "/part", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("resuming " + part + "/ckpt_8 at step 8"), std::string::npos) << r.out;
  EXPECT_EQ(read_bytes(part + "/ckpt_12/model.safetensors"),
            read_bytes(dir + "/whole/runs/standard_s1337/ckpt_12/model.safetensors"));
}

}  // namespace
