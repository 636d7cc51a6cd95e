// SVG loss plots; see svg_plot.h. Coordinates: each panel maps data (x, y)
// to pixels with a linear or log10 scale; ticks are "nice" numbers (1, 2, 5
// x 10^k) on linear axes and powers of ten on the log axis.
#include "train/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sys/stat.h>

#include "core/common.h"
#include "train/atomic_file.h"
#include "core/json.h"
#include "train/metrics.h"

namespace ada {

RunCurves read_run_curves(const std::string& path, const std::string& label, const std::string& field) {
  struct stat st;
  check(::stat(path.c_str(), &st) == 0, "metrics file not found: " + path);
  RunCurves r;
  r.label = label;
  r.field = field;
  for (const Json& j : read_json_lines(path)) {
    const Json *tok = j.find("tokens"), *fl = j.find("flops"), *loss = j.find(field),
               *val = field == "loss" ? j.find("val_loss") : nullptr;
    auto num = [](const Json* v) { return v && v->is(Json::Type::Number); };
    if (!num(tok) || !num(fl)) continue;
    if (num(loss)) r.tokens.push_back(tok->number), r.flops.push_back(fl->number), r.loss.push_back(loss->number);
    if (num(val)) r.val_tokens.push_back(tok->number), r.val_flops.push_back(fl->number), r.val_loss.push_back(val->number);
  }
  return r;
}

namespace svg {

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

// Multiples of a nice step (1, 2 or 5 x 10^k) covering [lo, hi] with about n ticks.
std::vector<double> nice_ticks(double lo, double hi, int n) {
  const double raw = (hi - lo) / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  const double step = (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

void axes(std::string& s, const Panel& p, const std::string& xlabel, const std::string& ylabel) {
  s += "<rect x='" + fmt("%.1f", p.x0) + "' y='" + fmt("%.1f", p.y0) + "' width='" + fmt("%.1f", p.w) + "' height='" +
       fmt("%.1f", p.h) + "' fill='none' stroke='#333'/>\n";
  for (double y : nice_ticks(p.ylo, p.yhi, 6)) {
    const double Y = p.py(y);
    s += "<line x1='" + fmt("%.1f", p.x0) + "' x2='" + fmt("%.1f", p.x0 + p.w) + "' y1='" + fmt("%.1f", Y) + "' y2='" +
         fmt("%.1f", Y) + "' stroke='#ddd'/>\n";
    s += "<text x='" + fmt("%.1f", p.x0 - 6) + "' y='" + fmt("%.1f", Y + 4) + "' text-anchor='end'>" + fmt("%g", y) + "</text>\n";
  }
  std::vector<double> xt;
  if (p.logx) {
    for (double e = std::ceil(p.xlo); e <= p.xhi + 1e-9; e += 1) xt.push_back(std::pow(10.0, e));
    if (xt.size() < 2)  // less than a decade: label 2x and 5x too
      for (double e = std::floor(p.xlo); e <= p.xhi; e += 1)
        for (double m : {2.0, 5.0})
          if (std::log10(m) + e >= p.xlo && std::log10(m) + e <= p.xhi) xt.push_back(m * std::pow(10.0, e));
  } else {
    xt = nice_ticks(p.xlo, p.xhi, 6);
  }
  for (double x : xt) {
    const double X = p.px(x);
    s += "<line x1='" + fmt("%.1f", X) + "' x2='" + fmt("%.1f", X) + "' y1='" + fmt("%.1f", p.y0) + "' y2='" +
         fmt("%.1f", p.y0 + p.h) + "' stroke='#ddd'/>\n";
    s += "<text x='" + fmt("%.1f", X) + "' y='" + fmt("%.1f", p.y0 + p.h + 16) + "' text-anchor='middle'>" +
         format_count(x) + "</text>\n";
  }
  s += "<text x='" + fmt("%.1f", p.x0 + p.w / 2) + "' y='" + fmt("%.1f", p.y0 + p.h + 36) + "' text-anchor='middle'>" +
       xml_escape(xlabel) + "</text>\n";
  s += "<text transform='translate(" + fmt("%.1f", p.x0 - 44) + "," + fmt("%.1f", p.y0 + p.h / 2) +
       ") rotate(-90)' text-anchor='middle'>" + xml_escape(ylabel) + "</text>\n";
}

}  // namespace svg

namespace {
using svg::axes;
using svg::fmt;
using svg::kColors;
using svg::Panel;
using svg::xml_escape;

void curves(std::string& s, const Panel& p, const std::vector<double>& x, const std::vector<double>& y,
            const std::vector<double>& vx, const std::vector<double>& vy, const char* color) {
  // At most ~1500 points per line: a long run would otherwise make a huge file.
  const size_t stride = std::max<size_t>(1, x.size() / 1500);
  std::string pts;
  for (size_t i = 0; i < x.size(); i += stride) {
    if (p.logx && x[i] <= 0) continue;
    pts += fmt("%.1f", p.px(x[i])) + "," + fmt("%.1f", p.py(y[i])) + " ";
  }
  if (!pts.empty())
    s += "<polyline fill='none' stroke='" + std::string(color) + "' stroke-width='1.2' stroke-opacity='0.8' points='" +
         pts + "'/>\n";
  for (size_t i = 0; i < vx.size(); i++) {
    if (p.logx && vx[i] <= 0) continue;
    s += "<circle cx='" + fmt("%.1f", p.px(vx[i])) + "' cy='" + fmt("%.1f", p.py(vy[i])) + "' r='3.5' fill='" +
         color + "' stroke='white'/>\n";
  }
}

}  // namespace

std::string loss_plot_svg(const std::vector<RunCurves>& runs, const std::string& title) {
  const double W = 1000, H = 440;
  // Data ranges over every run (train and val together).
  double tmax = 0, fmin = INFINITY, fmax = 0, lmin = INFINITY, lmax = -INFINITY;
  for (auto& r : runs) {
    for (double t : r.tokens) tmax = std::max(tmax, t);
    for (double t : r.val_tokens) tmax = std::max(tmax, t);
    for (auto* v : {&r.flops, &r.val_flops})
      for (double f : *v)
        if (f > 0) fmin = std::min(fmin, f), fmax = std::max(fmax, f);
    for (auto* v : {&r.loss, &r.val_loss})
      for (double l : *v) lmin = std::min(lmin, l), lmax = std::max(lmax, l);
  }
  const bool empty = !(lmax >= lmin) || tmax <= 0 || !(fmax > 0);
  if (empty) tmax = 1, fmin = 1, fmax = 10, lmin = 0, lmax = 1;
  if (lmax - lmin < 1e-9) lmin -= 0.5, lmax += 0.5;
  const double pad = 0.05 * (lmax - lmin);
  double flo = std::log10(fmin), fhi = std::log10(fmax);
  if (fhi - flo < 0.3) flo -= 0.15, fhi += 0.15;
  const Panel a{70, 50, 390, 300, 0, tmax, lmin - pad, lmax + pad, false};
  const Panel b{570, 50, 390, 300, flo, fhi, lmin - pad, lmax + pad, true};

  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='" + fmt("%g", W) + "' height='" + fmt("%g", H) +
                  "' viewBox='0 0 " + fmt("%g", W) + " " + fmt("%g", H) +
                  "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n";
  s += "<text x='" + fmt("%g", W / 2) + "' y='24' text-anchor='middle' font-size='15'>" + xml_escape(title) + "</text>\n";
  const std::string field = runs.empty() ? "loss" : runs[0].field;
  const std::string ylabel = field == "loss" ? "loss (nats/token)" : field;
  axes(s, a, "training tokens", ylabel);
  axes(s, b, "training FLOPs (log scale)", ylabel);
  if (empty) s += "<text x='265' y='200' text-anchor='middle'>no data yet</text>\n";
  for (size_t i = 0; i < runs.size(); i++) {
    const char* c = kColors[i % (sizeof kColors / sizeof kColors[0])];
    curves(s, a, runs[i].tokens, runs[i].loss, runs[i].val_tokens, runs[i].val_loss, c);
    curves(s, b, runs[i].flops, runs[i].loss, runs[i].val_flops, runs[i].val_loss, c);
  }
  // Legend in the top-right corner of the tokens panel, where a falling loss
  // curve leaves room; about 7 px per character of the longest line.
  const std::string note = field == "loss" ? "line: train loss, dots: validation" : "line: " + field + " of each training step";
  size_t chars = note.size();
  for (auto& r : runs) chars = std::max(chars, r.label.size() + 5);
  const double lw = 7.0 * chars + 16, lx = a.x0 + a.w - lw - 8, ly = a.y0 + 8, lh = 18.0 * (runs.size() + 1) + 8;
  s += "<rect x='" + fmt("%.1f", lx) + "' y='" + fmt("%.1f", ly) + "' width='" + fmt("%.1f", lw) + "' height='" +
       fmt("%.1f", lh) + "' fill='white' fill-opacity='0.85' stroke='#999'/>\n";
  for (size_t i = 0; i < runs.size(); i++) {
    const char* c = kColors[i % (sizeof kColors / sizeof kColors[0])];
    const double y = ly + 16 + 18.0 * i;
    s += "<line x1='" + fmt("%.1f", lx + 8) + "' x2='" + fmt("%.1f", lx + 30) + "' y1='" + fmt("%.1f", y - 4) + "' y2='" +
         fmt("%.1f", y - 4) + "' stroke='" + c + "' stroke-width='2'/>\n";
    s += "<text x='" + fmt("%.1f", lx + 36) + "' y='" + fmt("%.1f", y) + "'>" + xml_escape(runs[i].label) + "</text>\n";
  }
  s += "<text x='" + fmt("%.1f", lx + 8) + "' y='" + fmt("%.1f", ly + 16 + 18.0 * runs.size()) + "' fill='#555'>" + note +
       "</text>\n";
  s += "</svg>\n";
  return s;
}

void write_loss_plot(const std::vector<RunCurves>& runs, const std::string& title, const std::string& path) {
  write_file_atomic(path, loss_plot_svg(runs, title));
}

}  // namespace ada
