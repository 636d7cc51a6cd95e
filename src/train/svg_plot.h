// The loss plot of one or more runs, as a hand-written SVG: two panels,
// loss against training tokens (linear) and against training FLOPs (log
// scale, the axis on which methods that spend different compute per token are
// compared). Each run is one colour: a line for the training loss of every
// step and dots for the validation loss of the evaluation steps.
#pragma once
#include <string>
#include <vector>

namespace ada {

struct RunCurves {
  std::string label;
  std::string field = "loss";                           // the metric in `loss` (plot --field)
  std::vector<double> tokens, flops, loss;              // every step with a finite loss
  std::vector<double> val_tokens, val_flops, val_loss;  // evaluation steps
};

// Reads a metrics.jsonl written by the trainer (fields "tokens", "flops",
// "loss", "val_loss"). Throws ada::Error if the file is missing or a line is
// not valid JSON.
// `field` selects another per-step metric for the line (e.g. a method's
// halting statistic "dk" or "passes"); validation dots only for "loss".
RunCurves read_run_curves(const std::string& metrics_path, const std::string& label,
                          const std::string& field = "loss");

// The SVG document.
std::string loss_plot_svg(const std::vector<RunCurves>& runs, const std::string& title);

// Points with error bars in one panel (study's iso-compute views and knob
// curves): each series one colour, a dot per point with a horizontal bar of
// +- xerr and a vertical bar of +- yerr (empty vectors: no bars), joined by a
// line when `line` is set, each point tagged with its entry of `tags` when
// given (a knob's values). The x axis is log10 when logx.
struct PlotSeries {
  std::string label;
  std::vector<double> x, y, xerr, yerr;
  bool line = false;
  std::vector<std::string> tags;
};
std::string xy_plot_svg(const std::vector<PlotSeries>& series, const std::string& title, const std::string& xlabel,
                        const std::string& ylabel, bool logx);

// Writes the SVG to path atomically.
void write_loss_plot(const std::vector<RunCurves>& runs, const std::string& title, const std::string& path);

}  // namespace ada
