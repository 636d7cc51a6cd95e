// plot: the loss curves of one or more runs as an SVG, loss against training
// tokens and against training FLOPs (log scale), one colour per run.
//   ./plot runs/standard-tiny                          # writes runs/standard-tiny/loss.svg
//   ./plot --out compare.svg runs/standard-tiny runs/ponder-tiny "ponder P=3=runs/ponder3/metrics.jsonl"
// Each argument is a run directory (its metrics.jsonl), a metrics file, or
// LABEL=PATH to name the run in the legend (default: the run directory's name).
//   ./plot --field dk --title "CYB: mean DK probability" runs/cyb-tiny   # another per-step metric
#include <cstdio>
#include <filesystem>

#include "core/common.h"
#include "train/flags.h"
#include "train/svg_plot.h"

using namespace ada;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  try {
    std::string out, title = "loss", field = "loss";
    Flags flags("plot", "Plot the loss of runs (metrics.jsonl) against tokens and FLOPs as an SVG.\n"
                        "Arguments: run directories, metrics.jsonl files, or LABEL=PATH.");
    flags.add("--out", &out, "SVG to write (default: loss.svg next to the metrics of a single run, else loss_compare.svg)");
    flags.add("--title", &title, "title of the plot");
    flags.add("--field", &field,
              "the metrics.jsonl field to plot (default loss; e.g. a method's halting statistic: passes, dk, pauses, exit_1)");
    if (!flags.parse(argc, argv)) return 0;
    const auto& args = flags.positional();
    check(!args.empty(), "no runs given (pass run directories or metrics.jsonl files; see plot --help)");
    std::vector<RunCurves> runs;
    std::string first_dir;
    for (const std::string& a : args) {
      std::string label, path = a;
      const size_t eq = a.rfind('=');
      if (eq != std::string::npos && !fs::exists(a)) label = a.substr(0, eq), path = a.substr(eq + 1);
      std::error_code ec;
      if (fs::is_directory(path, ec)) path = (fs::path(path) / "metrics.jsonl").string();
      const fs::path dir = fs::path(path).parent_path();
      if (label.empty()) label = dir.empty() ? path : dir.lexically_normal().filename().string();
      if (first_dir.empty()) first_dir = dir.empty() ? "." : dir.string();
      runs.push_back(read_run_curves(path, label, field));
      check(!runs.back().loss.empty() || field == "loss",
            path + " has no numeric field '" + field + "' (see a line of the file for the fields it has)");
      std::printf("%-24s %zu steps, %zu evaluations\n", label.c_str(), runs.back().loss.size(), runs.back().val_loss.size());
    }
    if (out.empty()) out = runs.size() == 1 ? first_dir + "/loss.svg" : "loss_compare.svg";
    write_loss_plot(runs, title, out);
    std::printf("wrote %s\n", out.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
