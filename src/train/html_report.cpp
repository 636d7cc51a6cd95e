// The report page; see html_report.h. One function per section; the plots
// are hand-written SVG on the panels and axes of train/svg_plot.h. Methods
// keep one colour (svg::color of their index) in every figure.
#include "train/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "core/common.h"
#include "train/svg_plot.h"

namespace ada::report {

namespace {

using svg::fmt;

std::string esc(const std::string& s) { return svg::xml_escape(s); }

// A number with an SI suffix (1.23M, 4.56P); a dash for NaN.
std::string si(double x) {
  if (!std::isfinite(x)) return "&ndash;";
  static const char* const suffix[] = {"", "k", "M", "G", "T", "P", "E"};
  int k = 0;
  double a = std::fabs(x);
  while (a >= 1000 && k < 6) a /= 1000, x /= 1000, k++;
  return fmt("%.3g", x) + suffix[k];
}

// "mean ± std" with printf format f for both; the std is left out when NaN.
std::string pm(const char* f, double mean, double sd) {
  if (!std::isfinite(mean)) return "&ndash;";
  std::string s = fmt(f, mean);
  if (std::isfinite(sd)) s += " <span class='sd'>&plusmn;&nbsp;" + fmt(f, sd) + "</span>";
  return s;
}
std::string pm_si(double mean, double sd) {
  if (!std::isfinite(mean)) return "&ndash;";
  return si(mean) + (std::isfinite(sd) ? " <span class='sd'>&plusmn;&nbsp;" + si(sd) + "</span>" : "");
}
std::string num(const char* f, double x) { return std::isfinite(x) ? fmt(f, x) : "&ndash;"; }

// A coloured square and the label of method i.
std::string swatch(size_t i) { return "<span class='sw' style='background:" + std::string(svg::color(i)) + "'></span>"; }

std::string svg_open(double w, double h) {
  return "<svg xmlns='http://www.w3.org/2000/svg' width='" + fmt("%g", w) + "' height='" + fmt("%g", h) +
         "' viewBox='0 0 " + fmt("%g", w) + " " + fmt("%g", h) + "' font-family='sans-serif' font-size='12'>\n";
}
std::string line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1) {
  return "<line x1='" + fmt("%.1f", x1) + "' y1='" + fmt("%.1f", y1) + "' x2='" + fmt("%.1f", x2) + "' y2='" +
         fmt("%.1f", y2) + "' stroke='" + stroke + "' stroke-width='" + fmt("%g", width) + "'/>\n";
}
std::string text(double x, double y, const std::string& s, const std::string& attrs = "") {
  return "<text x='" + fmt("%.1f", x) + "' y='" + fmt("%.1f", y) + "'" + (attrs.empty() ? "" : " " + attrs) + ">" + s +
         "</text>\n";
}

// --- the passes colour scale ------------------------------------------------

// Pale yellow to dark brown (ColorBrewer's YlOrBr anchors), interpolated in RGB.
const int kScale[][3] = {{255, 255, 229}, {254, 227, 145}, {254, 153, 41}, {204, 76, 2}, {102, 37, 6}};

double scale_t(double passes, double lo, double hi) {
  return hi > lo ? std::clamp((passes - lo) / (hi - lo), 0.0, 1.0) : 0.0;
}

// Dark text on the pale half of the scale, white on the dark half.
std::string ink_for(double passes, double lo, double hi) {
  return std::isfinite(passes) && scale_t(passes, lo, hi) > 0.6 ? "#fff" : "#111";
}

// The range of the colour scale: 1 pass to the largest count seen (at least 2).
std::pair<double, double> passes_range(const Results& r) {
  double hi = 2;
  for (const PassageRow& row : r.passage.rows)
    for (double p : row.passes)
      if (std::isfinite(p)) hi = std::max(hi, p);
  for (const Method& m : r.methods)
    for (const Run& run : m.runs)
      for (auto [p, n] : run.pass_hist)
        if (n > 0) hi = std::max(hi, double(p));
  return {1.0, std::ceil(hi)};
}

// A table cell's style attribute shading it green by an accuracy in [0, 1]
// (empty when the accuracy is not a number).
std::string accuracy_bg(double acc) {
  if (!std::isfinite(acc)) return "";
  return " style='background:rgba(44,160,44," + fmt("%.2f", 0.08 + 0.5 * std::clamp(acc, 0.0, 1.0)) + ")'";
}

// --- the sections -----------------------------------------------------------

std::string section(const std::string& id, const std::string& title, const std::string& intro,
                    const std::string& body) {
  return "<section id='" + id + "'>\n<h2>" + title + "</h2>\n" + (intro.empty() ? "" : "<p class='intro'>" + intro + "</p>\n") +
         body + "</section>\n";
}

std::string note(const std::string& s) { return "<p class='note'>" + s + "</p>\n"; }

std::string setup_section(const Results& r) {
  static const char* const order[] = {"command", "date", "machine", "data", "config", "steps", "batch",
                                      "seq", "tokens_per_run", "seeds", "val_tokens"};
  std::vector<std::pair<std::string, std::string>> rows;
  for (const char* k : order)
    if (!r.setup_value(k).empty()) rows.emplace_back(k, r.setup_value(k));
  for (const auto& [k, v] : r.setup)
    if (std::find(std::begin(order), std::end(order), k) == std::end(order) && !v.empty()) rows.emplace_back(k, v);
  std::string s;
  if (!r.setup_value("command").empty()) s += "<p><code>" + esc(r.setup_value("command")) + "</code></p>\n";
  s += "<dl class='setup'>\n";
  for (const auto& [k, v] : rows) {
    if (k == "command") continue;
    std::string shown = esc(v);
    if (k == "tokens_per_run" || k == "val_tokens") {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (end && *end == '\0' && !v.empty()) shown += " <span class='sd'>(" + si(x) + ")</span>";
    }
    s += "<dt>" + esc(k) + "</dt><dd>" + shown + "</dd>\n";
  }
  s += "</dl>\n";
  if (rows.empty()) s = note("results.json has no setup.");
  if (!r.classes.empty()) {
    s += "<p>Difficulty classes: ";
    for (size_t i = 0; i < r.classes.size(); i++) s += (i ? ", " : "") + std::string("<b>") + esc(r.classes[i]) + "</b>";
    s += ".</p>\n";
  }
  return section("setup", "Setup", "", s);
}

std::string results_section(const Results& r) {
  if (r.methods.empty()) return section("results", "Results", "", note("The study has no methods."));
  // The lowest mean validation loss is set in bold.
  double best = INFINITY;
  for (const Method& m : r.methods)
    if (std::isfinite(m.mean.val_loss)) best = std::min(best, m.mean.val_loss);
  std::string s =
      "<table class='num'>\n<tr><th class='l'>method</th><th class='l'>spec</th><th>seeds</th><th>val loss</th>"
      "<th>accuracy</th><th>passes / token</th><th>train FLOPs</th><th>inference FLOPs / token</th>"
      "<th>inference &micro;s / token</th></tr>\n";
  for (size_t i = 0; i < r.methods.size(); i++) {
    const Method& m = r.methods[i];
    const Figures &a = m.mean, &d = m.std;
    const bool is_best = std::isfinite(a.val_loss) && a.val_loss == best;
    s += "<tr><td class='l'>" + swatch(i) + esc(m.label) + "</td><td class='l spec'><code>" + esc(m.spec) + "</code></td><td>" +
         std::to_string(m.runs.size()) + "</td><td" + (is_best ? " class='best'" : "") + ">" +
         pm("%.4f", a.val_loss, d.val_loss) + "</td><td>" + pm("%.4f", a.accuracy, d.accuracy) + "</td><td>" +
         pm("%.2f", a.passes, d.passes) + "</td><td>" + pm_si(a.train_flops, d.train_flops) + "</td><td>" +
         pm_si(a.infer_flops, d.infer_flops) + "</td><td>" + pm("%.1f", a.infer_us, d.infer_us) + "</td></tr>\n";
  }
  s += "</table>\n";
  return section("results", "Results",
                 "Mean &plusmn; standard deviation over seeds, on the whole validation split. "
                 "Inference FLOPs count the matrix products of one forward per token.",
                 s);
}

std::string claims_section(const Results& r) {
  if (r.pairs.empty()) return section("claims", "Paired comparisons", "", note("The study compared no pairs."));
  std::string s =
      "<table class='num'>\n<tr><th class='l'>a</th><th class='l'>b</th><th>diff = loss(a) &minus; loss(b)</th>"
      "<th>se (tokens)</th><th>se (seeds)</th><th>tokens</th><th class='l'>per seed</th><th class='l'>verdict</th></tr>\n";
  for (const Pair& p : r.pairs) {
    const std::string v = verdict(p);
    std::string seeds;
    for (const SeedDiff& d : p.per_seed)
      seeds += (seeds.empty() ? "" : "; ") + num("%.0f", d.seed) + ": " + pm("%+.4f", d.diff, d.se) +
               (d.machines_differ ? "<span title='the two runs were finished on different machines'>&dagger;</span>" : "");
    const std::string cls = v == "level" ? "level" : v.empty() ? "" : "win";
    s += "<tr><td class='l" + std::string(v == "a better" ? " winner" : "") + "'>" + esc(p.a) + "</td><td class='l" +
         (v == "b better" ? " winner" : "") + "'>" + esc(p.b) + "</td><td>" + pm("%+.4f", p.diff, p.se) + "</td><td>" +
         num("%.4f", p.se_tokens) + "</td><td>" + num("%.4f", p.se_seeds) + "</td><td>" + si(p.tokens) +
         "</td><td class='l small'>" + seeds + "</td><td class='l'>" +
         (v.empty() ? "&ndash;" : "<span class='verdict " + cls + "'>" + v + "</span>") + "</td></tr>\n";
  }
  s += "</table>\n";
  return section("claims", "Paired comparisons",
                 "Per-token loss difference on the same validation tokens, averaged over seeds, with its standard error "
                 "(se combines the spread over tokens and over seeds). A verdict names a winner when |diff| &gt; 2 se.",
                 s);
}

// The methods' colours with their labels, above the figures that use them.
std::string method_legend(const Results& r) {
  std::string s = "<div class='legend'>";
  for (size_t i = 0; i < r.methods.size(); i++) s += "<span>" + swatch(i) + esc(r.methods[i].label) + "</span>";
  return s + "</div>\n";
}

// Data range of a log axis (log10 units) with a margin; at least 0.6 decades.
std::pair<double, double> log_range(double lo, double hi) {
  double a = std::log10(lo), b = std::log10(hi);
  const double pad = std::max(0.08 * (b - a), 0.05);
  a -= pad, b += pad;
  if (b - a < 0.6) {
    const double c = (a + b) / 2;
    a = c - 0.3, b = c + 0.3;
  }
  return {a, b};
}
std::pair<double, double> lin_range(double lo, double hi, bool from_zero = false) {
  if (!(hi >= lo)) lo = 0, hi = 1;
  if (hi - lo < 1e-9) lo -= 0.5, hi += 0.5;
  const double pad = 0.08 * (hi - lo);
  return {from_zero ? 0.0 : lo - pad, hi + pad};
}

// A label's box on the page (pixels).
struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

// The label of a point, above it to the right (or left), moved down a line
// at a time while it would cover a label already drawn.
std::string point_label(std::vector<Box>& placed, double X, double Y, const std::string& label, const std::string& color,
                        bool right) {
  const double w = 7.0 * label.size(), h = 13;
  double y = Y - 7;
  for (int tries = 0; tries < 6; tries++) {
    const Box b{right ? X + 8 : X - 8 - w, y - h + 2, right ? X + 8 + w : X - 8, y + 2};
    bool clash = false;
    for (const Box& o : placed) clash = clash || b.overlaps(o);
    if (!clash) break;
    y += h;
    if (tries == 0) y = Y + 18;  // the first move: below the point
  }
  placed.push_back({right ? X + 8 : X - 8 - w, y - h + 2, right ? X + 8 + w : X - 8, y + 2});
  return text(right ? X + 8 : X - 8, y, esc(label), "fill='" + color + "'" + (right ? "" : " text-anchor='end'"));
}

// Validation loss against FLOPs (inference per token, or training in all):
// one point per method at its mean, error bars of one std over seeds both
// ways, faint dots for the single runs, and knob curves on the inference plot.
std::string loss_flops_svg(const Results& r, bool inference) {
  auto x_of = [&](const Figures& f) { return inference ? f.infer_flops : f.train_flops; };
  const double W = 600, H = 400;
  double xlo = INFINITY, xhi = 0, ylo = INFINITY, yhi = -INFINITY;
  auto extend = [&](double x, double y) {
    if (!(x > 0) || !std::isfinite(x) || !std::isfinite(y)) return;
    xlo = std::min(xlo, x), xhi = std::max(xhi, x), ylo = std::min(ylo, y), yhi = std::max(yhi, y);
  };
  for (const Method& m : r.methods) {
    const double x = x_of(m.mean), y = m.mean.val_loss;
    const double sx = std::isfinite(x_of(m.std)) ? x_of(m.std) : 0, sy = std::isfinite(m.std.val_loss) ? m.std.val_loss : 0;
    extend(x + sx, y + sy), extend(x - sx > 0 ? x - sx : x, y - sy);
    for (const Run& run : m.runs) extend(x_of(run.figures), run.figures.val_loss);
    if (inference)
      for (const KnobPoint& k : m.knob.points) extend(k.infer_flops, k.val_loss);
  }
  std::string s = svg_open(W, H) + "<rect width='100%' height='100%' fill='white'/>\n";
  const std::string title = inference ? "loss against inference FLOPs per token" : "loss against training FLOPs";
  s += text(W / 2, 18, title, "text-anchor='middle' font-size='14'");
  if (!(xhi > 0)) {
    xlo = 1, xhi = 10, ylo = 0, yhi = 1;
    s += text(W / 2, H / 2, "no method has both numbers", "text-anchor='middle' fill='#888'");
  }
  const auto [lx0, lx1] = log_range(xlo, xhi);
  const auto [ly0, ly1] = lin_range(ylo, yhi);
  const svg::Panel p{70, 32, W - 100, H - 92, lx0, lx1, ly0, ly1, true};
  svg::axes(s, p, inference ? "inference FLOPs per token (log scale)" : "training FLOPs (log scale)",
            "validation loss (nats/token)");
  auto ok = [&](double x, double y) { return x > 0 && std::isfinite(x) && std::isfinite(y); };
  std::vector<Box> placed;  // labels drawn so far
  for (size_t i = 0; i < r.methods.size(); i++) {
    const Method& m = r.methods[i];
    const std::string c = svg::color(i);
    for (const Run& run : m.runs)
      if (ok(x_of(run.figures), run.figures.val_loss))
        s += "<circle cx='" + fmt("%.1f", p.px(x_of(run.figures))) + "' cy='" + fmt("%.1f", p.py(run.figures.val_loss)) +
             "' r='2.5' fill='" + c + "' fill-opacity='0.35'><title>" + esc(m.label) + " seed " + num("%.0f", run.seed) +
             ": loss " + num("%.4f", run.figures.val_loss) + "</title></circle>\n";
    if (inference && !m.knob.points.empty()) {
      std::vector<KnobPoint> pts;
      for (const KnobPoint& k : m.knob.points)
        if (ok(k.infer_flops, k.val_loss)) pts.push_back(k);
      std::sort(pts.begin(), pts.end(), [](const KnobPoint& a, const KnobPoint& b) { return a.infer_flops < b.infer_flops; });
      std::string poly;
      for (const KnobPoint& k : pts) poly += fmt("%.1f", p.px(k.infer_flops)) + "," + fmt("%.1f", p.py(k.val_loss)) + " ";
      if (pts.size() > 1)
        s += "<polyline fill='none' stroke='" + c + "' stroke-width='1.5' stroke-dasharray='5,3' points='" + poly + "'/>\n";
      for (const KnobPoint& k : pts)
        s += "<circle cx='" + fmt("%.1f", p.px(k.infer_flops)) + "' cy='" + fmt("%.1f", p.py(k.val_loss)) + "' r='3' fill='white' stroke='" +
             c + "'><title>" + esc(m.label) + " " + esc(m.knob.name) + "=" + fmt("%g", k.value) + ": loss " +
             num("%.4f", k.val_loss) + ", " + si(k.infer_flops) + " FLOPs/token, " + num("%.2f", k.passes) +
             " passes</title></circle>\n";
    }
    const double x = x_of(m.mean), y = m.mean.val_loss;
    if (!ok(x, y)) continue;
    const double X = p.px(x), Y = p.py(y);
    const double sx = x_of(m.std), sy = m.std.val_loss;
    if (std::isfinite(sy) && sy > 0)
      s += line(X, p.py(y - sy), X, p.py(y + sy), c, 1.5) + line(X - 4, p.py(y - sy), X + 4, p.py(y - sy), c, 1.5) +
           line(X - 4, p.py(y + sy), X + 4, p.py(y + sy), c, 1.5);
    if (std::isfinite(sx) && sx > 0) {
      const double a = p.px(x - sx > 0 ? x - sx : x), b = p.px(x + sx);
      s += line(a, Y, b, Y, c, 1.5) + line(a, Y - 4, a, Y + 4, c, 1.5) + line(b, Y - 4, b, Y + 4, c, 1.5);
    }
    s += "<circle cx='" + fmt("%.1f", X) + "' cy='" + fmt("%.1f", Y) + "' r='5' fill='" + c + "' stroke='white'><title>" +
         esc(m.label) + ": loss " + num("%.4f", y) + (std::isfinite(sy) ? " &#177; " + num("%.4f", sy) : "") + ", " + si(x) +
         (inference ? " FLOPs/token" : " training FLOPs") + "</title></circle>\n";
    s += point_label(placed, X, Y, m.label, c, X < p.x0 + p.w - 90);
  }
  return s + "</svg>\n";
}

std::string compute_section(const Results& r) {
  bool knobs = false;
  for (const Method& m : r.methods) knobs = knobs || !m.knob.points.empty();
  const std::string body = method_legend(r) + "<div class='plots'>\n" + loss_flops_svg(r, true) + loss_flops_svg(r, false) +
                           "</div>\n";
  return section("compute", "Loss against compute",
                 "One point per method at its mean over seeds, error bars one standard deviation over seeds, faint "
                 "dots the single runs; lower and further left is better." +
                     std::string(knobs ? " Dashed lines: a behaviour knob swept at inference on one trained model (hover "
                                         "a point for its value)."
                                       : ""),
                 body);
}

// Sum of the runs' histograms: tokens per whole pass count.
std::map<int, double> pooled_hist(const Method& m) {
  std::map<int, double> h;
  for (const Run& run : m.runs)
    for (auto [p, n] : run.pass_hist)
      if (std::isfinite(n)) h[p] += n;
  return h;
}

// One small bar chart per method: the share of tokens at each pass count,
// bars in the colour the passage uses for that count; shared axes.
std::string passes_section(const Results& r) {
  const auto [clo, chi] = passes_range(r);
  int pmin = 1 << 30, pmax = 0;
  double fmax = 0;
  std::vector<std::map<int, double>> hists;
  for (const Method& m : r.methods) {
    hists.push_back(pooled_hist(m));
    double total = 0;
    for (auto [p, n] : hists.back()) total += n;
    for (auto [p, n] : hists.back())
      if (n > 0 && total > 0) pmin = std::min(pmin, p), pmax = std::max(pmax, p), fmax = std::max(fmax, n / total);
  }
  if (pmax == 0) return section("passes", "Passes per token", "", note("No method has a passes histogram."));
  pmin = std::min(pmin, 1);
  const double W = 230, H = 160, x0 = 34, y0 = 28, w = W - 44, h = H - 60;
  const int nb = pmax - pmin + 1;
  const double bw = w / nb;
  std::string s = "<div class='plots'>\n";
  for (size_t i = 0; i < r.methods.size(); i++) {
    const Method& m = r.methods[i];
    double total = 0;
    for (auto [p, n] : hists[i]) total += n;
    std::string g = svg_open(W, H);
    g += "<rect x='" + fmt("%g", x0 - 26) + "' y='7' width='10' height='10' fill='" + svg::color(i) + "'/>\n";
    g += text(x0 - 12, 16, esc(m.label) + " <tspan fill='#666' font-weight='normal'>mean " + num("%.2f", m.mean.passes) +
                               "</tspan>",
              "font-weight='bold'");
    g += line(x0, y0 + h, x0 + w, y0 + h, "#333");
    for (double t : svg::nice_ticks(0, fmax * 100, 3)) {
      const double Y = y0 + h - t / (fmax * 100) * h;
      if (Y < y0 - 1) continue;
      g += line(x0, Y, x0 + w, Y, "#e4e4e4") + text(x0 - 4, Y + 4, fmt("%g", t) + "%", "text-anchor='end' font-size='10'");
    }
    for (int p = pmin; p <= pmax; p++) {
      const double X = x0 + (p - pmin) * bw;
      const auto it = hists[i].find(p);
      const double n = it == hists[i].end() ? 0 : it->second, f = total > 0 ? n / total : 0;
      if (f > 0)
        g += "<rect x='" + fmt("%.1f", X + 1) + "' y='" + fmt("%.1f", y0 + h - f / fmax * h) + "' width='" +
             fmt("%.1f", std::max(bw - 2, 1.0)) + "' height='" + fmt("%.1f", f / fmax * h) + "' fill='" +
             passes_color(p, clo, chi) + "' stroke='#777' stroke-width='0.5'><title>" + esc(m.label) + ": " +
             std::to_string(p) + " passes, " + si(n) + " tokens (" + fmt("%.1f", 100 * f) + "%)</title></rect>\n";
      if (nb <= 12 || (p - pmin) % ((nb + 11) / 12) == 0)
        g += text(X + bw / 2, y0 + h + 13, std::to_string(p), "text-anchor='middle' font-size='10'");
    }
    if (total <= 0) g += text(x0 + w / 2, y0 + h / 2, "no histogram", "text-anchor='middle' fill='#888'");
    g += text(x0 + w / 2, H - 6, "passes", "text-anchor='middle' font-size='10' fill='#555'");
    s += g + "</svg>\n";
  }
  s += "</div>\n";
  return section("passes", "Passes per token",
                 "Share of validation tokens (all seeds pooled) by the number of passes spent on them, fractional passes "
                 "rounded. Bars use the colours of the passage below.",
                 s);
}

// A y axis with nice ticks and grid lines from 0 to ymax over the box.
std::string y_axis(double x0, double y0, double w, double h, double ymax, const std::string& label) {
  std::string s;
  for (double t : svg::nice_ticks(0, ymax, 5)) {
    const double Y = y0 + h - t / ymax * h;
    s += line(x0, Y, x0 + w, Y, "#e4e4e4") + text(x0 - 5, Y + 4, fmt("%g", t), "text-anchor='end'");
  }
  s += line(x0, y0 + h, x0 + w, y0 + h, "#333") + line(x0, y0, x0, y0 + h, "#333");
  s += "<text transform='translate(" + fmt("%.1f", x0 - 38) + "," + fmt("%.1f", y0 + h / 2) +
       ") rotate(-90)' text-anchor='middle'>" + esc(label) + "</text>\n";
  return s;
}

// Grouped bars: one group per difficulty class, one bar per method (mean
// passes over seeds, error bar one std).
std::string by_class_section(const Results& r) {
  const std::string intro =
      "Mean passes per token in each difficulty class (error bars: one standard deviation over seeds). A method that "
      "thinks where it helps spends more on the harder classes.";
  if (r.classes.empty()) return section("by-class", "Passes by difficulty class", "", note("The data has no difficulty classes (natural text)."));
  double ymax = 0;
  for (const Method& m : r.methods)
    for (const ClassFigures& c : m.per_class)
      if (std::isfinite(c.passes)) ymax = std::max(ymax, c.passes + (std::isfinite(c.passes_std) ? c.passes_std : 0));
  if (!(ymax > 0)) return section("by-class", "Passes by difficulty class", "", note("No method reports passes per class."));
  ymax *= 1.1;
  const size_t nc = r.classes.size(), nm = std::max<size_t>(r.methods.size(), 1);
  const double gw = std::max(60.0, std::min(160.0, 14.0 * nm + 30)), x0 = 60, y0 = 20, h = 240;
  const double W = x0 + gw * nc + 20, H = y0 + h + 40, bw = (gw - 20) / nm;
  std::string s = svg_open(W, H) + "<rect width='100%' height='100%' fill='white'/>\n";
  s += y_axis(x0, y0, gw * nc, h, ymax, "passes per token");
  for (size_t k = 0; k < nc; k++) {
    const double gx = x0 + k * gw + 10;
    s += text(gx + (gw - 20) / 2, y0 + h + 18, esc(r.classes[k]), "text-anchor='middle'");
    for (size_t i = 0; i < r.methods.size(); i++) {
      const ClassFigures& c = r.methods[i].per_class[k];
      if (!std::isfinite(c.passes)) continue;
      const double X = gx + i * bw, Y = y0 + h - c.passes / ymax * h;
      s += "<rect x='" + fmt("%.1f", X) + "' y='" + fmt("%.1f", Y) + "' width='" + fmt("%.1f", bw - 1) + "' height='" +
           fmt("%.1f", y0 + h - Y) + "' fill='" + svg::color(i) + "'><title>" + esc(r.methods[i].label) + ", " +
           esc(c.name) + ": " + num("%.2f", c.passes) + " &#177; " + num("%.2f", c.passes_std) + " passes, accuracy " +
           num("%.3f", c.accuracy) + ", NLL " + num("%.3f", c.nll) + ", " + si(c.tokens) + " tokens</title></rect>\n";
      if (std::isfinite(c.passes_std) && c.passes_std > 0) {
        const double xc = X + (bw - 1) / 2, a = y0 + h - (c.passes - c.passes_std) / ymax * h,
                     b = y0 + h - (c.passes + c.passes_std) / ymax * h;
        s += line(xc, a, xc, b, "#222") + line(xc - 3, a, xc + 3, a, "#222") + line(xc - 3, b, xc + 3, b, "#222");
      }
    }
  }
  return section("by-class", "Passes by difficulty class", intro, method_legend(r) + s + "</svg>\n");
}

// Passes against the token's NLL under the method (binned; a line per method).
std::string by_nll_section(const Results& r) {
  double xlo = INFINITY, xhi = -INFINITY, ymax = 0;
  auto mid = [](const NllBin& b) { return std::isfinite(b.nll_hi) ? (b.nll_lo + b.nll_hi) / 2 : b.nll_lo; };
  auto usable = [&](const NllBin& b) { return std::isfinite(mid(b)) && std::isfinite(b.passes) && !(b.tokens <= 0); };
  for (const Method& m : r.methods)
    for (const NllBin& b : m.passes_by_nll)
      if (usable(b)) xlo = std::min(xlo, mid(b)), xhi = std::max(xhi, mid(b)), ymax = std::max(ymax, b.passes);
  if (!(ymax > 0)) return section("by-nll", "Passes against token NLL", "", note("No method reports passes by NLL."));
  const double W = 640, H = 360;
  const auto [x0, x1] = lin_range(xlo, xhi);
  const svg::Panel p{70, 20, W - 100, H - 80, x0, x1, 0, ymax * 1.1, false};
  std::string s = svg_open(W, H) + "<rect width='100%' height='100%' fill='white'/>\n";
  svg::axes(s, p, "NLL of the token (nats), bin centre", "passes per token");
  for (size_t i = 0; i < r.methods.size(); i++) {
    const Method& m = r.methods[i];
    std::string poly, dots;
    for (const NllBin& b : m.passes_by_nll) {
      if (!usable(b)) continue;
      const double X = p.px(mid(b)), Y = p.py(b.passes);
      poly += fmt("%.1f", X) + "," + fmt("%.1f", Y) + " ";
      dots += "<circle cx='" + fmt("%.1f", X) + "' cy='" + fmt("%.1f", Y) + "' r='3' fill='" + svg::color(i) + "'><title>" +
              esc(m.label) + ", NLL " + num("%.2f", b.nll_lo) + "&#8211;" + num("%.2f", b.nll_hi) + ": " +
              num("%.2f", b.passes) + " passes over " + si(b.tokens) + " tokens</title></circle>\n";
    }
    if (!poly.empty())
      s += "<polyline fill='none' stroke='" + std::string(svg::color(i)) + "' stroke-width='2' points='" + poly + "'/>\n" + dots;
  }
  return section("by-nll", "Passes against token NLL",
                 "Validation tokens binned by their loss (all seeds pooled); the mean passes spent in each bin. A rising "
                 "line: the method thinks longer on the tokens it finds hard.",
                 method_legend(r) + s + "</svg>\n");
}

std::string class_accuracy_section(const Results& r) {
  if (r.classes.empty()) return section("class-accuracy", "Accuracy by difficulty class", "", note("The data has no difficulty classes (natural text)."));
  std::string s = "<table class='num'>\n<tr><th class='l'>method</th>";
  for (const std::string& c : r.classes) s += "<th>" + esc(c) + "</th>";
  s += "</tr>\n";
  for (size_t i = 0; i < r.methods.size(); i++) {
    const Method& m = r.methods[i];
    s += "<tr><td class='l'>" + swatch(i) + esc(m.label) + "</td>";
    for (const ClassFigures& c : m.per_class) {
      // Cell shaded green by accuracy.
      const std::string bg = accuracy_bg(c.accuracy);
      s += "<td" + bg + " title='" + esc(m.label + ", " + c.name) + ": NLL " + num("%.3f", c.nll) + ", passes " +
           num("%.2f", c.passes) + ", " + si(c.tokens) + " tokens'>" + pm("%.3f", c.accuracy, c.accuracy_std) + "</td>";
    }
    s += "</tr>\n";
  }
  s += "</table>\n";
  return section("class-accuracy", "Accuracy by difficulty class",
                 "Share of the class's tokens whose most likely prediction is the target (mean &plusmn; std over seeds; "
                 "hover a cell for NLL and passes).",
                 s);
}

// Every run on its own row: seed, where and when it was finished, loss,
// passes and (with classes) each class's accuracy, shaded like the class
// table. On a task with phase changes a run learns a class or does not; the
// means over seeds above hide which, this table shows it.
std::string runs_section(const Results& r) {
  size_t n = 0;
  for (const Method& m : r.methods) n += m.runs.size();
  if (n == 0) return section("runs", "Every run", "", note("The study has no runs."));
  std::string s = "<table class='num'>\n<tr><th class='l'>method</th><th>seed</th><th class='l'>finished on</th>"
                  "<th>val loss</th><th>accuracy</th><th>passes / token</th>";
  for (const std::string& c : r.classes) s += "<th>" + esc(c) + "</th>";
  s += "</tr>\n";
  for (size_t i = 0; i < r.methods.size(); i++) {
    const Method& m = r.methods[i];
    for (const Run& run : m.runs) {
      const std::string where = run.machine.empty() && run.date.empty()
                                    ? std::string("<span class='sd'>not recorded</span>")
                                    : esc(run.machine) + (run.date.empty() ? "" : " <span class='sd'>" + esc(run.date) + "</span>");
      s += "<tr><td class='l'>" + swatch(i) + esc(m.label) + "</td><td>" + num("%.0f", run.seed) + "</td><td class='l'>" +
           where + "</td><td>" + num("%.4f", run.figures.val_loss) + "</td><td>" + num("%.4f", run.figures.accuracy) +
           "</td><td>" + num("%.2f", run.figures.passes) + "</td>";
      for (size_t c = 0; c < r.classes.size(); c++) {
        const ClassFigures* cf = c < run.per_class.size() ? &run.per_class[c] : nullptr;
        const double acc = cf ? cf->accuracy : NAN;
        const std::string bg = accuracy_bg(acc);
        s += "<td" + bg + " title='" + esc(m.label + " seed " + num("%.0f", run.seed) + ", " + r.classes[c]) + ": NLL " +
             num("%.3f", cf ? cf->nll : NAN) + ", passes " + num("%.2f", cf ? cf->passes : NAN) + "'>" + num("%.3f", acc) + "</td>";
      }
      s += "</tr>\n";
    }
  }
  s += "</table>\n";
  // Those counts, when the study drew its line (setup.learned_at, study's
  // --learned-at; studies written before it have none): per method and
  // class, the runs whose accuracy on the class reaches it.
  char* end = nullptr;
  const std::string la = r.setup_value("learned_at");
  const double learned_at = la.empty() ? NAN : std::strtod(la.c_str(), &end);
  if (!r.classes.empty() && std::isfinite(learned_at) && end && *end == '\0') {
    std::string t = "<p>Runs that learn each class (accuracy at least " + num("%g", learned_at) +
                    "), of the method's runs:</p>\n<table class='num'>\n<tr><th class='l'>method</th>";
    for (const std::string& c : r.classes) t += "<th>" + esc(c) + "</th>";
    t += "</tr>\n";
    for (size_t i = 0; i < r.methods.size(); i++) {
      const Method& m = r.methods[i];
      t += "<tr><td class='l'>" + swatch(i) + esc(m.label) + "</td>";
      for (size_t c = 0; c < r.classes.size(); c++) {
        size_t k = 0;
        for (const Run& run : m.runs) k += c < run.per_class.size() && run.per_class[c].accuracy >= learned_at;
        t += "<td>" + std::to_string(k) + "/" + std::to_string(m.runs.size()) + "</td>";
      }
      t += "</tr>\n";
    }
    s += t + "</table>\n";
  }
  return section("runs", "Every run",
                 "One row per trained run, with the machine and date that finished it. With difficulty classes, each "
                 "class's accuracy in that run (hover for NLL and passes): where a class is learned in some runs and "
                 "not in others, the mean over seeds above is a count of those runs, not a typical value.",
                 s);
}

// Where each class stops: for every method whose tokens use different
// numbers of passes, a table of class x passes (every seed pooled); a cell
// gives the share of the class's tokens that stopped there, shaded green by
// how often those tokens are right (hover: accuracy, NLL, tokens). It shows
// whether an adaptive method stops early on the tokens it gets right.
std::string stops_section(const Results& r) {
  const std::string title = "Where each class stops";
  std::string s;
  size_t shown = 0;
  for (size_t i = 0; i < r.methods.size(); i++) {
    const Method& m = r.methods[i];
    std::set<int> depths;
    for (const ClassDepths& cd : m.by_depth)
      for (const DepthCell& c : cd.cells)
        if (c.tokens > 0) depths.insert((int)std::lround(c.passes));
    if (depths.size() < 2) continue;
    shown++;
    s += "<h3>" + swatch(i) + esc(m.label) + "</h3>\n<table class='num'>\n<tr><th class='l'>class</th>";
    for (int d : depths) s += "<th>" + std::to_string(d) + (d == 1 ? " pass" : " passes") + "</th>";
    s += "</tr>\n";
    for (const ClassDepths& cd : m.by_depth) {
      double total = 0;
      for (const DepthCell& c : cd.cells) total += c.tokens;
      if (!(total > 0)) continue;
      s += "<tr><td class='l'>" + esc(cd.name) + "</td>";
      for (int d : depths) {
        const DepthCell* cell = nullptr;
        for (const DepthCell& c : cd.cells)
          if ((int)std::lround(c.passes) == d && c.tokens > 0) cell = &c;
        if (!cell) {
          s += "<td class='none'>&ndash;</td>";
          continue;
        }
        const double share = cell->tokens / total;
        const std::string bg = accuracy_bg(cell->accuracy);
        s += "<td" + bg + " title='" + esc(m.label + ", " + cd.name) + ", " + std::to_string(d) + " passes: accuracy " +
             num("%.3f", cell->accuracy) + ", NLL " + num("%.3f", cell->nll) + ", " + si(cell->tokens) + " tokens'>" +
             (share >= 0.0005 ? fmt("%.1f%%", 100 * share) : std::string("&lt;0.1%")) + "<span class='sd'> " +
             num("%.3f", cell->accuracy) + "</span></td>";
      }
      s += "</tr>\n";
    }
    s += "</table>\n";
  }
  if (shown == 0) return section("stops", title, "", note("No method uses different numbers of passes for different tokens."));
  return section("stops", title,
                 "For each adaptive method, the share of each class's tokens that used 1, 2, ... passes (every seed "
                 "pooled), and in small print how often those tokens are right; a cell's green deepens with that "
                 "accuracy (hover for NLL and the number of tokens). A method that thinks longer where it must shows "
                 "its hard classes in the right-hand columns, and green there.",
                 s);
}

// The passage broken into lines: a line ends before it would pass `width`
// characters, or after a newline token once it is 85% full (short lines of
// text waste the page). Returns [begin, end) token ranges.
std::vector<std::pair<size_t, size_t>> passage_lines(const std::vector<std::string>& tokens, size_t width) {
  std::vector<std::pair<size_t, size_t>> lines;
  size_t begin = 0, chars = 0;
  for (size_t i = 0; i < tokens.size(); i++) {
    size_t n = 0;  // code points shown
    for (unsigned char c : tokens[i]) n += (c & 0xC0) != 0x80;
    if (chars > 0 && chars + n > width) lines.emplace_back(begin, i), begin = i, chars = 0;
    chars += std::max<size_t>(n, 1);
    if (tokens[i].find('\n') != std::string::npos && chars * 20 >= width * 17)
      lines.emplace_back(begin, i + 1), begin = i + 1, chars = 0;
  }
  if (begin < tokens.size()) lines.emplace_back(begin, tokens.size());
  return lines;
}

// Categorical colours of the difficulty classes (pale, so the text reads).
const char* class_color(int k) {
  static const char* const c[] = {"#e8e8e8", "#c6dbef", "#c7e9c0", "#fdd0a2", "#dadaeb", "#fcbba1", "#d9f0a3", "#f2f0f7"};
  return c[k % 8];
}

// The colour legend of the passes scale: one box per whole pass count (or
// about eight steps when the range is wide).
std::string passes_legend(double lo, double hi) {
  std::string s = "<div class='legend'>passes per token: ";
  const double step = std::max(1.0, std::ceil((hi - lo) / 8));
  for (double p = lo; p <= hi + 1e-9; p += step)
    s += "<span class='tok' style='background:" + passes_color(p, lo, hi) + ";color:" + ink_for(p, lo, hi) + "'>&nbsp;" +
         fmt("%g", p) + "&nbsp;</span>";
  return s + " <span class='tok' style='background:" + passes_color(NAN, lo, hi) + "'>&nbsp;n/a&nbsp;</span></div>\n";
}

std::string passage_section(const Results& r) {
  const Passage& ps = r.passage;
  if (ps.tokens.empty() || ps.rows.empty())
    return section("passage", "Where each method thinks", "", note("results.json has no passage."));
  const auto [lo, hi] = passes_range(r);
  const bool classes = !ps.classes.empty();
  std::string s = passes_legend(lo, hi);
  if (classes) {
    s += "<div class='legend'>difficulty class: ";
    for (size_t k = 0; k < r.classes.size(); k++)
      s += "<span class='tok' style='background:" + std::string(class_color(int(k))) + "'>&nbsp;" + esc(r.classes[k]) + "&nbsp;</span>";
    s += "</div>\n";
  }
  s += "<div class='passage'>\n";
  for (const auto& [b, e] : passage_lines(ps.tokens, 130)) {
    s += "<div class='pline'>\n";
    if (classes) {
      s += "<div class='prow'><span class='plabel'>class</span><span class='ptoks'>";
      for (size_t t = b; t < e; t++)
        s += "<span class='tok' style='background:" + std::string(class_color(ps.classes[t])) + "' title='" +
             esc(r.classes[size_t(ps.classes[t])]) + "'>" + token_html(ps.tokens[t]) + "</span>";
      s += "</span></div>\n";
    }
    for (const PassageRow& row : ps.rows) {
      s += "<div class='prow'><span class='plabel' title='" + esc(row.label) + "'>" + esc(row.label) +
           "</span><span class='ptoks'>";
      for (size_t t = b; t < e; t++) {
        const double p = row.passes[t];
        std::string tip = "passes " + num("%.2f", p) + ", NLL " + num("%.2f", row.nll[t]);
        if (classes) tip += ", class " + esc(r.classes[size_t(ps.classes[t])]);
        s += "<span class='tok' style='background:" + passes_color(p, lo, hi) + ";color:" + ink_for(p, lo, hi) +
             "' title='" + tip + "'>" + token_html(ps.tokens[t]) + "</span>";
      }
      s += "</span></div>\n";
    }
    s += "</div>\n";
  }
  s += "</div>\n";
  return section("passage", "Where each method thinks",
                 std::to_string(ps.tokens.size()) +
                     " consecutive validation tokens, one row per method, each token coloured by the passes that method "
                     "spent predicting it (the same scale for every method). Hover a token for its passes, NLL" +
                     (classes ? std::string(" and difficulty class") : std::string("")) + ".",
                 s);
}

const char* const kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;max-width:1240px;margin:0 auto;padding:12px 20px 40px;background:#fff}
h1{font-size:24px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:2px solid #eee;padding-bottom:3px}
p.intro{color:#555;margin:2px 0 10px;max-width:900px}p.note{color:#888;font-style:italic}
dl.setup{display:grid;grid-template-columns:repeat(3,max-content minmax(120px,1fr));gap:2px 14px;margin:6px 0}dl.setup dt{color:#666}dl.setup dd{margin:0}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px;background:#f4f4f4;padding:0 3px;border-radius:3px}
table.num{border-collapse:collapse;font-variant-numeric:tabular-nums}
table.num th,table.num td{padding:4px 10px;border-bottom:1px solid #e4e4e4;text-align:right;white-space:nowrap}
table.num th{background:#f6f6f6;font-weight:600}table.num .l{text-align:left}table.num td.small{font-size:12px;color:#555;white-space:normal}
td.best{font-weight:700}td.winner{font-weight:700}.sd{color:#777;font-size:12px}td.none{color:#bbb}h3{font-size:15px;margin:14px 0 4px}
.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
.verdict{padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600}.verdict.win{background:#d4f0d4;color:#14601a}.verdict.level{background:#eee;color:#555}
.legend{margin:4px 0 8px;font-size:13px}.legend>span{margin-right:14px}
.pair{display:flex;flex-wrap:wrap;gap:0 36px}.pair>section{flex:1 1 520px;min-width:0}
.plots{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}svg{background:#fff;max-width:100%;height:auto}
.passage{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px;line-height:1.25}
.pline{margin:0 0 9px;padding-bottom:6px;border-bottom:1px dashed #e6e6e6}.prow{display:flex;white-space:pre}
.plabel{flex:none;width:120px;padding-right:8px;text-align:right;font:11px/1.6 system-ui,sans-serif;color:#555;overflow:hidden;text-overflow:ellipsis}
.tok{white-space:pre;box-shadow:inset -1px 0 rgba(255,255,255,.7)}.tok:hover{outline:1.5px solid #000;position:relative;z-index:1}
.ws{opacity:.55}
section{overflow-x:auto}td.spec{white-space:normal;max-width:230px}td.spec code{word-break:break-all}
)";

}  // namespace

const std::vector<std::string>& section_ids() {
  static const std::vector<std::string> ids = {"setup",          "results", "claims", "compute", "passes", "by-class",
                                               "by-nll",         "class-accuracy", "runs", "stops", "passage"};
  return ids;
}

std::string verdict(const Pair& p) {
  if (!std::isfinite(p.diff) || !std::isfinite(p.se)) return "";
  if (std::fabs(p.diff) > 2 * p.se) return p.diff < 0 ? "a better" : "b better";
  return "level";
}

std::string passes_color(double passes, double lo, double hi) {
  if (!std::isfinite(passes)) return "#eeeeee";
  const double t = scale_t(passes, lo, hi) * 4;
  const int k = std::min(int(t), 3);
  const double f = t - k;
  int c[3];
  for (int j = 0; j < 3; j++) c[j] = int(std::lround(kScale[k][j] + f * (kScale[k + 1][j] - kScale[k][j])));
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c[0], c[1], c[2]);
  return buf;
}

std::string token_html(const std::string& tok) {
  std::string o;
  for (unsigned char c : tok) {
    if (c == '\n') o += "<span class='ws'>&#8629;</span>";
    else if (c == '\t') o += "<span class='ws'>&#8594;</span>";
    else if (c < 0x20 || c == 0x7f) o += "<span class='ws'>&#" + std::to_string(c == 0x7f ? 0x2421 : 0x2400 + c) + ";</span>";
    else if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '"') o += "&quot;";
    else if (c == '\'') o += "&#39;";
    else o += char(c);
  }
  return o;
}

std::string render_html(const Results& r) {
  const std::string config = r.setup_value("config"), data = r.setup_value("data");
  std::string title = "Study report";
  if (!config.empty() || !data.empty()) title += ": " + config + (config.empty() || data.empty() ? "" : " on ") + data;
  std::string h = "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n<title>" + esc(title) +
                  "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<h1>" + esc(title) + "</h1>\n";
  h += setup_section(r) + results_section(r) + claims_section(r) + compute_section(r) + passes_section(r) +
       "<div class='pair'>\n" + by_class_section(r) + by_nll_section(r) + "</div>\n" + class_accuracy_section(r) +
       runs_section(r) + stops_section(r) + passage_section(r);
  return h + "</body>\n</html>\n";
}

}  // namespace ada::report
