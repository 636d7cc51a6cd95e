// The report page: reading results.json (numbers, nulls, missing optional
// parts, errors), the HTML (every section, escaping, determinism), the
// `report` program, and the page rendered by a real browser (headless
// Chromium: a screenshot that is not blank, the sections in the DOM).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <set>
#include <string>

#include "core/json.h"
#include "png_decode.h"
#include "train/html_report.h"
#include "train/results_json.h"
#include "workflow_util.h"


using namespace ada::report;
using ada::test::expect_error;
using ada::test::read_bytes;
using ada::test::scratch_dir;
using ada::test::write_bytes;

namespace {

// Two methods on a task with difficulty classes: adaptive ponder with a
// knob, standard without; a passage whose tokens need escaping; a null mean.
const char* const kStudy = R"({
  "schema": 1,
  "setup": {"command": "./study --quick", "date": "2026-12-01", "machine": "test cpu", "data": "task:hops",
            "config": "test", "steps": 20, "batch": 2, "seq": 16, "tokens_per_run": 640, "seeds": [1, 2], "val_tokens": 96,
            "extra_field": "kept"},
  "classes": ["easy", "hard"],
  "methods": [
    {"label": "adaponder", "spec": "adaponder:tau=1e-3", "method": "adaponder",
     "runs": [{"seed": 1, "dir": "r/a1", "machine": "test cpu", "date": "2026-12-01", "val_loss": 2.0, "accuracy": 0.5, "passes": 2.5, "train_flops": 1e9,
               "infer_flops": 3e5, "infer_other": 1e3, "infer_us": 10.0, "train_seconds": 3,
               "pass_hist": {"3": 30, "1": 10, "2": 20}, "per_class": {"easy": {"tokens": 60, "accuracy": 0.7, "nll": 1.0, "passes": 2.0}}},
              {"seed": 2, "dir": "r/a2", "val_loss": 2.2, "accuracy": 0.4, "passes": 2.7, "train_flops": 1e9,
               "infer_flops": 3.2e5, "infer_other": 1e3, "infer_us": 11.0, "train_seconds": 3,
               "pass_hist": {"1": 8, "2": 20, "3": 32}}],
     "mean": {"val_loss": 2.1, "accuracy": 0.45, "passes": 2.6, "train_flops": 1e9, "infer_flops": 3.1e5, "infer_other": 1e3, "infer_us": 10.5},
     "std": {"val_loss": 0.14, "accuracy": 0.07, "passes": 0.14, "train_flops": 0, "infer_flops": 1.4e4, "infer_other": 0, "infer_us": 0.7},
     "per_class": {"hard": {"tokens": 36, "accuracy": [0.2, 0.05], "nll": [2.9, 0.1], "passes": [2.9, 0.05]},
                   "easy": {"tokens": 60, "accuracy": [0.7, 0.02], "nll": [1.0, 0.1], "passes": [2.1, 0.1]}},
     "passes_by_nll": [{"nll_lo": 0, "nll_hi": 1, "tokens": 50, "passes": 2.0}, {"nll_lo": 1, "nll_hi": 2, "tokens": 40, "passes": 2.8},
                       {"nll_lo": 2, "nll_hi": null, "tokens": 0, "passes": null}],
     "by_depth": [{"class": "easy", "cells": [[1, 90, 0.9, 0.3], [3, 30, 0.4, 1.2]]},
                  {"class": "hard", "cells": [[3, 72, 0.2, 2.9], [2, 0, null, null]]}],
     "knob": {"name": "tau", "points": [{"value": 0.001, "val_loss": 2.1, "accuracy": 0.45, "infer_flops": 3.1e5, "passes": 2.6},
                                        {"value": 0.01, "val_loss": 2.3, "accuracy": 0.4, "infer_flops": 2.0e5, "passes": 1.7}]}},
    {"label": "standard", "spec": "standard", "method": "standard",
     "runs": [{"seed": 1, "dir": "r/s1", "val_loss": 2.3, "accuracy": 0.4, "passes": 1, "train_flops": 4e8,
               "infer_flops": 1e5, "infer_other": 1e3, "infer_us": 4.0, "pass_hist": {"1": 60}}],
     "mean": {"val_loss": 2.3, "accuracy": 0.4, "passes": 1, "train_flops": 4e8, "infer_flops": 1e5, "infer_other": 1e3, "infer_us": null},
     "std": {"val_loss": 0, "accuracy": 0, "passes": 0, "train_flops": 0, "infer_flops": 0, "infer_other": 0, "infer_us": null},
     "per_class": {"easy": {"tokens": 60, "accuracy": [0.6, 0], "nll": [1.2, 0], "passes": [1, 0]}},
     "passes_by_nll": [{"nll_lo": 0, "nll_hi": 1, "tokens": 45, "passes": 1}]}
  ],
  "pairs": [{"a": "adaponder", "b": "standard", "diff": -0.2, "se": 0.05, "se_tokens": 0.03, "se_seeds": 0.04, "tokens": 96,
             "per_seed": [{"seed": 1, "diff": -0.3, "se": 0.04, "machines_differ": true}]},
            {"a": "standard", "b": "adaponder", "diff": 0.05, "se": 0.05, "se_tokens": 0.03, "se_seeds": 0.04, "tokens": 96},
            {"a": "standard", "b": "adaponder", "diff": null, "se": null}],
  "passage": {"tokens": ["a<b", " &x", "\n", "\t", "\"q'"], "classes": [0, 1, 0, 0, 1],
              "methods": {"standard": {"passes": [1, 1, 1, 1, 1], "nll": [0.1, 2.0, 0.3, null, 1.0]},
                          "adaponder": {"passes": [2, 3.5, 1, null, 3], "nll": [0.2, 1.5, 0.2, 0.1, 0.9]}}}
})";

// Natural text: no classes, no knob, no pairs, nulls in the means, no passage NLL.
const char* const kPlainStudy = R"({
  "schema": 1,
  "setup": {"data": "data/kjv.txt", "config": "tiny"},
  "classes": [],
  "methods": [{"label": "ponder", "spec": "ponder", "method": "ponder",
               "runs": [{"seed": 1, "val_loss": null, "pass_hist": {}}],
               "mean": {"val_loss": null, "accuracy": null, "passes": 3, "train_flops": null, "infer_flops": null},
               "std": {}, "per_class": {}, "passes_by_nll": []}],
  "pairs": [],
  "passage": {"tokens": ["In", " the"], "classes": [], "methods": {"ponder": {"passes": [3, 3]}}}
})";

Results parse(const std::string& text) { return parse_results(ada::parse_json(text, "results.json"), "results.json"); }

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) n++;
  return n;
}

}  // namespace

TEST(ReportRead, ReadsEveryPart) {
  const Results r = parse(kStudy);
  EXPECT_EQ(r.setup_value("config"), "test");
  EXPECT_EQ(r.setup_value("seeds"), "1, 2");
  EXPECT_EQ(r.setup_value("extra_field"), "kept");
  ASSERT_EQ(r.classes, (std::vector<std::string>{"easy", "hard"}));
  ASSERT_EQ(r.methods.size(), 2u);
  const Method& a = r.methods[0];
  EXPECT_EQ(a.label, "adaponder");
  EXPECT_DOUBLE_EQ(a.mean.val_loss, 2.1);
  EXPECT_DOUBLE_EQ(a.std.infer_flops, 1.4e4);
  ASSERT_EQ(a.runs.size(), 2u);
  // The histogram in ascending passes whatever the key order in the file.
  ASSERT_EQ(a.runs[0].pass_hist.size(), 3u);
  EXPECT_EQ(a.runs[0].pass_hist[0], std::make_pair(1, 10.0));
  EXPECT_EQ(a.runs[0].pass_hist[2], std::make_pair(3, 30.0));
  // Each run's machine, date and figures per class (a run's own: plain numbers); a class it lacks reads NaN.
  EXPECT_EQ(a.runs[0].machine, "test cpu");
  EXPECT_EQ(a.runs[0].date, "2026-12-01");
  EXPECT_TRUE(a.runs[1].machine.empty());
  ASSERT_EQ(a.runs[0].per_class.size(), 2u);
  EXPECT_DOUBLE_EQ(a.runs[0].per_class[0].accuracy, 0.7);
  EXPECT_DOUBLE_EQ(a.runs[0].per_class[0].passes, 2.0);
  EXPECT_TRUE(std::isnan(a.runs[0].per_class[1].accuracy));
  ASSERT_EQ(a.runs[1].per_class.size(), 2u);
  EXPECT_TRUE(std::isnan(a.runs[1].per_class[0].accuracy));
  // Per class in the study's class order, [mean, std].
  ASSERT_EQ(a.per_class.size(), 2u);
  EXPECT_EQ(a.per_class[0].name, "easy");
  EXPECT_DOUBLE_EQ(a.per_class[1].passes, 2.9);
  EXPECT_DOUBLE_EQ(a.per_class[1].passes_std, 0.05);
  EXPECT_TRUE(std::isnan(a.passes_by_nll[2].passes));
  ASSERT_EQ(a.by_depth.size(), 2u);
  EXPECT_EQ(a.by_depth[1].name, "hard");
  EXPECT_DOUBLE_EQ(a.by_depth[0].cells[1].passes, 3);
  EXPECT_DOUBLE_EQ(a.by_depth[0].cells[1].accuracy, 0.4);
  EXPECT_TRUE(std::isnan(a.by_depth[1].cells[1].nll));
  EXPECT_EQ(a.knob.name, "tau");
  ASSERT_EQ(a.knob.points.size(), 2u);
  EXPECT_DOUBLE_EQ(a.knob.points[1].infer_flops, 2.0e5);
  // A class the method lacks reads as NaN; a null mean too.
  const Method& s = r.methods[1];
  EXPECT_TRUE(std::isnan(s.per_class[1].accuracy));
  EXPECT_TRUE(std::isnan(s.mean.infer_us));
  EXPECT_TRUE(s.knob.name.empty());
  // Pairs, and passage rows in the order of the methods.
  ASSERT_EQ(r.pairs.size(), 3u);
  EXPECT_DOUBLE_EQ(r.pairs[0].se_seeds, 0.04);
  ASSERT_EQ(r.pairs[0].per_seed.size(), 1u);
  EXPECT_TRUE(r.pairs[0].per_seed[0].machines_differ);
  ASSERT_EQ(r.passage.rows.size(), 2u);
  EXPECT_EQ(r.passage.rows[0].label, "adaponder");
  EXPECT_DOUBLE_EQ(r.passage.rows[0].passes[1], 3.5);
  EXPECT_TRUE(std::isnan(r.passage.rows[0].passes[3]));
  EXPECT_EQ(r.passage.classes, (std::vector<int>{0, 1, 0, 0, 1}));
}

TEST(ReportRead, ToleratesMissingAndNull) {
  const Results r = parse(kPlainStudy);
  EXPECT_TRUE(r.classes.empty());
  ASSERT_EQ(r.methods.size(), 1u);
  EXPECT_TRUE(std::isnan(r.methods[0].mean.val_loss));
  EXPECT_TRUE(std::isnan(r.methods[0].std.passes));
  EXPECT_DOUBLE_EQ(r.methods[0].mean.passes, 3);
  EXPECT_TRUE(r.methods[0].knob.points.empty());
  ASSERT_EQ(r.passage.rows.size(), 1u);
  EXPECT_TRUE(std::isnan(r.passage.rows[0].nll[1]));  // no "nll": NaN per token
  // The smallest document the reader takes.
  EXPECT_TRUE(parse(R"({"schema": 1, "methods": []})").methods.empty());
}

TEST(ReportRead, BadInputIsOneClearError) {
  expect_error([] { parse(R"({"schema": 2, "methods": []})"); }, {"results.json", "schema 2", "not supported"});
  expect_error([] { parse(R"({"methods": []})"); }, {"no \"schema\""});
  expect_error([] { parse(R"({"schema": 1})"); }, {"no \"methods\" array"});
  expect_error([] { parse(R"({"schema": 1, "methods": [{"label": "x", "mean": {"val_loss": "low"}}]})"); },
               {"methods[0].mean.val_loss is not a number"});
  expect_error([] { parse(R"({"schema": 1, "methods": [{"spec": "x"}]})"); }, {"methods[0] has no label"});
  expect_error([] { parse(R"({"schema": 1, "methods": [{"label": "x", "runs": [{"pass_hist": {"two": 3}}]}]})"); },
               {"methods[0].runs[0].pass_hist.\"two\"", "whole number"});
  expect_error(
      [] {
        parse(R"({"schema": 1, "methods": [{"label": "x"}],
                  "passage": {"tokens": ["a", "b"], "methods": {"x": {"passes": [1]}}}})");
      },
      {"passage.methods.x.passes has 1 entries for 2 tokens"});
  expect_error([] { parse(R"({"schema": 1, "classes": ["c"], "methods": [], "passage": {"tokens": ["a"], "classes": [3]}})"); },
               {"passage.classes", "not the index"});
  expect_error([] { parse(R"({"schema": 1, "methods": [{"label": "x", "by_depth": [{"class": "c", "cells": [[1, 2]]}]}]})"); },
               {"methods[0].by_depth[0].cells[0] is not [passes, tokens, accuracy, nll]"});
  expect_error([] { parse(R"({"schema": 1, "methods": [], "pairs": [{"a": "x", "b": "y", "per_seed": [{"seed": 1, "machines_differ": 3}]}]})"); },
               {"pairs[0].per_seed[0].machines_differ is not true or false"});
  expect_error([] { read_results("/nonexistent/results.json"); }, {"cannot read /nonexistent/results.json"});
  expect_error([] { ada::parse_json("{\"schema\": 1,", "results.json"); }, {"results.json"});
}

TEST(ReportHtml, HasEverySectionOnce) {
  for (const char* doc : {kStudy, kPlainStudy}) {
    const std::string html = render_html(parse(doc));
    for (const std::string& id : section_ids()) EXPECT_EQ(count(html, "<section id='" + id + "'>"), 1u) << id;
    EXPECT_EQ(count(html, "<section "), section_ids().size());
    EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
    EXPECT_NE(html.find("</html>"), std::string::npos);
    // Self-contained: nothing is fetched, no script.
    EXPECT_EQ(html.find("<script"), std::string::npos);
    EXPECT_EQ(count(html, "http://"), count(html, "http://www.w3.org/2000/svg"));  // the SVG namespace only
    EXPECT_EQ(html.find("https://"), std::string::npos);
    EXPECT_EQ(html.find("src="), std::string::npos);
  }
}

TEST(ReportHtml, ShowsTheData) {
  const std::string html = render_html(parse(kStudy));
  // Results: mean ± std; the knob's curve and a point per method on both plots.
  EXPECT_NE(html.find("2.1000 <span class='sd'>&plusmn;&nbsp;0.1400</span>"), std::string::npos);
  EXPECT_NE(html.find("adaponder tau=0.01: loss 2.3000"), std::string::npos);
  EXPECT_EQ(count(html, "stroke-dasharray='5,3'"), 1u);
  EXPECT_EQ(count(html, "r='5' fill="), 4u);  // 2 methods x 2 plots
  // Claims: the verdicts; the seed whose two runs ran on different machines is marked.
  EXPECT_EQ(count(html, "&dagger;</span>"), 1u);
  EXPECT_NE(html.find("1: -0.3000 <span class='sd'>&plusmn;&nbsp;+0.0400</span><span title='the two runs were finished on different machines'>&dagger;</span>"),
            std::string::npos);
  EXPECT_NE(html.find(">a better</span>"), std::string::npos);
  EXPECT_NE(html.find(">level</span>"), std::string::npos);
  // Histogram bars for 1..3 passes of adaponder (pooled: 18, 40, 62 tokens).
  EXPECT_NE(html.find("adaponder: 3 passes, 62 tokens (51.7%)"), std::string::npos);
  // Passes by class with the class names; the passage: 5 tokens x (2 methods + class row).
  EXPECT_NE(html.find("adaponder, hard: 2.90 &#177; 0.05 passes"), std::string::npos);
  // where each class stops: adaponder only (standard has no by_depth), easy 75% at 1 pass, 25% at 3; the
  // empty hard cell at 2 passes is a dash
  const std::string stops = html.substr(html.find("<section id='stops'>"));
  EXPECT_NE(stops.find("<th>1 pass</th><th>3 passes</th></tr>"), std::string::npos) << stops.substr(0, 2000);
  EXPECT_NE(stops.find(">75.0%<span class='sd'> 0.900</span>"), std::string::npos);
  EXPECT_NE(stops.find("title='adaponder, hard, 3 passes: accuracy 0.200, NLL 2.900, 72 tokens'>100.0%"), std::string::npos);
  EXPECT_NE(stops.find("<td class='none'>&ndash;</td>"), std::string::npos);
  EXPECT_EQ(stops.find("standard</h3>"), std::string::npos);
  // every run: three rows (adaponder 1 and 2, standard 1), the class columns, the first run's machine and date,
  // its easy accuracy shaded (0.08 + 0.5 x 0.7), a dash where a run has no figure for a class
  const size_t runs_at = html.find("<section id='runs'>");
  ASSERT_NE(runs_at, std::string::npos);
  const std::string runs = html.substr(runs_at, html.find("</section>", runs_at) - runs_at);
  EXPECT_EQ(count(runs, "<tr><td class='l'>"), 3u) << runs;
  EXPECT_NE(runs.find("<th>easy</th><th>hard</th></tr>"), std::string::npos) << runs;
  EXPECT_NE(runs.find("adaponder</td><td>1</td><td class='l'>test cpu <span class='sd'>2026-12-01</span></td><td>2.0000</td>"),
            std::string::npos) << runs;
  EXPECT_NE(runs.find("<td style='background:rgba(44,160,44,0.43)' title='adaponder seed 1, easy: NLL 1.000, passes 2.00'>0.700</td>"),
            std::string::npos) << runs;
  EXPECT_EQ(count(runs, "<span class='sd'>not recorded</span>"), 2u) << runs;
  EXPECT_NE(runs.find("title='standard seed 1, hard: NLL &ndash;, passes &ndash;'>&ndash;</td>"), std::string::npos) << runs;
  const size_t passage = html.find("<section id='passage'>");
  ASSERT_NE(passage, std::string::npos);
  EXPECT_EQ(count(html.substr(passage), "' title='passes "), 10u);
  EXPECT_EQ(count(html.substr(passage), "' title='hard'>"), 2u);
  EXPECT_NE(html.find("title='passes 3.50, NLL 1.50, class hard'"), std::string::npos);
  EXPECT_NE(html.find("title='passes &ndash;, NLL 0.10, class easy'"), std::string::npos);  // a null
}

// With the study's learned_at, the runs section counts per method and class
// the runs whose accuracy reaches it (adaponder seed 1: easy 0.7; seed 2 and
// standard: no class figures, so not learned); without it, no such table.
TEST(ReportHtml, CountsTheRunsThatLearnEachClass) {
  std::string study = kStudy;
  const std::string extra = "\"extra_field\": \"kept\"";
  study.replace(study.find(extra), extra.size(), extra + ", \"learned_at\": 0.6");
  const std::string html = render_html(parse(study));
  const size_t at = html.find("<section id='runs'>");
  ASSERT_NE(at, std::string::npos);
  const std::string runs = html.substr(at, html.find("</section>", at) - at);
  EXPECT_NE(runs.find("Runs that learn each class (accuracy at least 0.6)"), std::string::npos) << runs;
  EXPECT_NE(runs.find("adaponder</td><td>1/2</td><td>0/2</td></tr>"), std::string::npos) << runs;
  EXPECT_NE(runs.find("standard</td><td>0/1</td><td>0/1</td></tr>"), std::string::npos) << runs;
  EXPECT_EQ(render_html(parse(kStudy)).find("Runs that learn each class"), std::string::npos);
}

TEST(ReportHtml, EscapesTokensAndLabels) {
  const std::string html = render_html(parse(kStudy));
  EXPECT_NE(html.find(">a&lt;b</span>"), std::string::npos);
  EXPECT_NE(html.find("> &amp;x</span>"), std::string::npos);
  EXPECT_NE(html.find(">&quot;q&#39;</span>"), std::string::npos);
  EXPECT_EQ(html.find("a<b"), std::string::npos);
  EXPECT_EQ(html.find(" &x"), std::string::npos);
  // Whitespace tokens are visible glyphs.
  EXPECT_EQ(token_html("\n"), "<span class='ws'>&#8629;</span>");
  EXPECT_EQ(token_html("\t"), "<span class='ws'>&#8594;</span>");
  EXPECT_EQ(token_html(std::string(1, '\x01')), "<span class='ws'>&#9217;</span>");
  EXPECT_EQ(token_html("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes through
  EXPECT_EQ(html.find("\t"), std::string::npos);
  // A label with markup in it.
  std::string doc = kPlainStudy;
  doc.replace(doc.find("\"label\": \"ponder\""), 17, "\"label\": \"<i>p&q\"");
  doc.replace(doc.find("{\"ponder\":"), 10, "{\"<i>p&q\":");
  const std::string h2 = render_html(parse(doc));
  EXPECT_EQ(h2.find("<i>"), std::string::npos);
  EXPECT_NE(h2.find("&lt;i&gt;p&amp;q"), std::string::npos);
}

TEST(ReportHtml, IsDeterministic) {
  EXPECT_EQ(render_html(parse(kStudy)), render_html(parse(kStudy)));
  EXPECT_EQ(render_html(parse(kPlainStudy)), render_html(parse(kPlainStudy)));
}

TEST(ReportHtml, NotesWhatIsMissing) {
  const std::string html = render_html(parse(kPlainStudy));
  EXPECT_NE(html.find("The data has no difficulty classes (natural text)."), std::string::npos);
  EXPECT_NE(html.find("The study compared no pairs."), std::string::npos);
  EXPECT_NE(html.find("No method has a passes histogram."), std::string::npos);
  // No NaN or infinity printed as a number ("inf" only in "inference").
  EXPECT_EQ(html.find("nan"), std::string::npos);
  EXPECT_EQ(count(html, "inf"), count(html, "infer"));
}

TEST(ReportHtml, VerdictNeedsTwoStandardErrors) {
  EXPECT_EQ(verdict({"a", "b", -0.11, 0.05, NAN, NAN, NAN, {}}), "a better");
  EXPECT_EQ(verdict({"a", "b", 0.11, 0.05, NAN, NAN, NAN, {}}), "b better");
  EXPECT_EQ(verdict({"a", "b", 0.09, 0.05, NAN, NAN, NAN, {}}), "level");
  EXPECT_EQ(verdict({"a", "b", -0.10, 0.05, NAN, NAN, NAN, {}}), "level");  // exactly 2 se: not more
  EXPECT_EQ(verdict({"a", "b", 0.5, NAN, NAN, NAN, NAN, {}}), "");
}

TEST(ReportHtml, PassesColourScale) {
  EXPECT_EQ(passes_color(1, 1, 5), "#ffffe5");
  EXPECT_EQ(passes_color(5, 1, 5), "#662506");
  EXPECT_EQ(passes_color(9, 1, 5), "#662506");  // clamped
  EXPECT_EQ(passes_color(NAN, 1, 5), "#eeeeee");
  // Darker (less green) as the passes grow, fractional passes in between.
  int last = 256;
  for (double p = 1; p <= 5; p += 0.25) {
    const int green = std::stoi(passes_color(p, 1, 5).substr(3, 2), nullptr, 16);
    EXPECT_LT(green, last) << p;
    last = green;
  }
}

TEST(ReportProgram, WritesThePageAndRefusesBadInput) {
  const std::string report = ada::test::program("report");
  if (report.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("report_prog");
  write_bytes(dir + "/results.json", kStudy);
  auto r = ada::test::run_program(report + " --study " + dir, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + dir + "/report.html"), std::string::npos) << r.out;
  EXPECT_EQ(read_bytes(dir + "/report.html"), render_html(parse(kStudy)));
  r = ada::test::run_program(report + " --study " + dir + " --out " + dir + "/other.html", dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(ada::test::exists(dir + "/other.html"));
  ada::test::expect_program_error(ada::test::run_program(report + " --study " + dir + "/none", dir), "cannot read");
  write_bytes(dir + "/results.json", R"({"schema": 7, "methods": []})");
  ada::test::expect_program_error(ada::test::run_program(report + " --study " + dir, dir), "schema 7 is not supported");
  ada::test::expect_program_error(ada::test::run_program(report, dir), "no study given");
}

// The page in a real browser. Skips only when Chromium is not installed.
TEST(ReportBrowser, RendersInHeadlessChromium) {
  std::string chromium;
  for (const char* name : {"chromium", "chromium-browser"}) {
    const std::string probe = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) {
      chromium = name;
      break;
    }
  }
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (Debian: apt-get install chromium); browser test skipped";
  const std::string dir = scratch_dir("report_browser");
  write_bytes(dir + "/report.html", render_html(parse(kStudy)));
  write_bytes(dir + "/blank.html", "<!DOCTYPE html>\n<html><body></body></html>\n");
  const std::string flags = " --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir=" + dir + "/profile ";
  const std::string url = " file://" + dir + "/report.html";
  // The distinct colours of a screenshot of `page` and its share of pixels that are not white.
  auto screenshot = [&](const std::string& page, std::set<uint32_t>* colours, double* inked) {
    auto r = ada::test::run_program("timeout 60 " + chromium + flags + "--screenshot=" + dir + "/shot.png --window-size=1280,2000 file://" +
                                        dir + "/" + page, dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const ada::test::Image img = ada::test::decode_png(read_bytes(dir + "/shot.png"));
    EXPECT_EQ(img.width, 1280u);
    EXPECT_EQ(img.height, 2000u);
    size_t n = 0;
    for (size_t i = 0; i < img.rgb.size(); i += 3) {
      colours->insert(uint32_t(img.rgb[i]) << 16 | uint32_t(img.rgb[i + 1]) << 8 | img.rgb[i + 2]);
      n += img.rgb[i] < 240 || img.rgb[i + 1] < 240 || img.rgb[i + 2] < 240;
    }
    *inked = double(n) / (double(img.width) * img.height);
  };
  // The control: an empty page is one colour, nothing inked.
  std::set<uint32_t> colours;
  double inked = 0;
  screenshot("blank.html", &colours, &inked);
  EXPECT_LE(colours.size(), 2u);
  EXPECT_LT(inked, 0.001);
  // The report is not blank: many colours (the method palette, the passes
  // scale, text anti-aliasing) and a good share of pixels that are not white.
  colours.clear();
  screenshot("report.html", &colours, &inked);
  if (HasFatalFailure()) return;
  EXPECT_GT(colours.size(), 100u);
  EXPECT_GT(inked, 0.03);
  // The method colours are drawn (the plots' points and the tables' swatches).
  for (const std::array<int, 3> c : {std::array<int, 3>{0x1f, 0x77, 0xb4}, std::array<int, 3>{0xd6, 0x27, 0x28}})
    EXPECT_TRUE(colours.count(uint32_t(c[0]) << 16 | uint32_t(c[1]) << 8 | uint32_t(c[2]))) << c[0];
  auto r = ada::test::run_program("timeout 60 " + chromium + flags + "--dump-dom" + url, dir);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string& id : section_ids()) EXPECT_NE(r.out.find("<section id=\"" + id + "\">"), std::string::npos) << id;
  EXPECT_NE(r.out.find("a&lt;b"), std::string::npos);  // the token stays text in the DOM
  EXPECT_EQ(count(r.out, "<svg "), 6u);  // 2 compute plots, 2 histograms, by class, by NLL
}
