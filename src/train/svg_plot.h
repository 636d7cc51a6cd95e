// The loss plot of one or more runs, as a hand-written SVG: two panels,
// loss against training tokens (linear) and against training FLOPs (log
// scale, the axis on which methods that spend different compute per token are
// compared). Each run is one colour: a line for the training loss of every
// step and dots for the validation loss of the evaluation steps.
#pragma once
#include <cmath>
#include <cstddef>
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

// Writes the SVG to path atomically.
void write_loss_plot(const std::vector<RunCurves>& runs, const std::string& title, const std::string& path);

// The pieces the plots are drawn with, shared with the report page
// (train/html_report.h).
namespace svg {

// The run palette; the i-th run gets color(i) (it repeats after 8).
inline constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                          "#9467bd", "#8c564b", "#e377c2", "#17becf"};
inline const char* color(size_t i) { return kColors[i % (sizeof kColors / sizeof kColors[0])]; }
// s with & < > " ' as XML entities.
std::string xml_escape(const std::string& s);
// printf of one number.
std::string fmt(const char* f, double x);
// Multiples of a nice step (1, 2 or 5 x 10^k) covering [lo, hi] with about n ticks.
std::vector<double> nice_ticks(double lo, double hi, int n);

// A plotting area: data (x, y) to pixels, x on a log10 scale when logx.
struct Panel {
  double x0, y0, w, h;        // pixel box of the plotting area
  double xlo, xhi, ylo, yhi;  // data range (x in log10 when logx)
  bool logx;
  double px(double x) const {
    const double v = logx ? std::log10(x) : x;
    return x0 + (v - xlo) / (xhi - xlo) * w;
  }
  double py(double y) const { return y0 + h - (y - ylo) / (yhi - ylo) * h; }
};

// The frame, grid lines, tick labels (powers of ten on a log axis) and the
// axis titles of a panel, appended to s.
void axes(std::string& s, const Panel& p, const std::string& xlabel, const std::string& ylabel);

}  // namespace svg

}  // namespace ada
