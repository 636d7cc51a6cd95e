// report: a study folder's results.json as one self-contained HTML page
// (inline CSS and SVG; no script, nothing fetched), to open in any browser.
//   ./report --study runs/study                 # writes runs/study/report.html
//   ./report --study runs/study --out page.html
// The sections are described in train/html_report.h and docs/workflow.md.
#include <cstdio>

#include "core/common.h"
#include "train/atomic_file.h"
#include "train/flags.h"
#include "train/html_report.h"
#include "train/results_json.h"

using namespace ada;

int main(int argc, char** argv) {
  try {
    std::string study, out;
    Flags flags("report", "Turn a study folder (its results.json) into one self-contained HTML page.");
    flags.add("--study", &study, "the study folder (written by ./study), holding results.json");
    flags.add("--out", &out, "HTML file to write (default: STUDY/report.html)");
    if (!flags.parse(argc, argv)) return 0;
    check(flags.positional().empty(), "unexpected argument '" + (flags.positional().empty() ? "" : flags.positional()[0]) +
                                          "' (give the folder with --study DIR)");
    check(!study.empty(), "no study given (--study DIR, the folder of a study's results.json)");
    if (out.empty()) out = study + "/report.html";
    const report::Results results = report::read_results(study + "/results.json");
    const std::string html = report::render_html(results);
    write_file_atomic(out, html);
    std::printf("wrote %s (%zu methods, %zu pairs, %zu passage tokens, %.0f kB)\n", out.c_str(), results.methods.size(),
                results.pairs.size(), results.passage.tokens.size(), html.size() / 1e3);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
