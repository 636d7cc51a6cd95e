#include "train/metrics.h"

#include <cmath>
#include <cstdio>

#include "core/common.h"

namespace ada {

void JsonLine::key(const std::string& k) {
  if (!body_.empty()) body_ += ", ";
  body_ += "\"" + json_escape(k) + "\": ";
}

JsonLine& JsonLine::num(const std::string& k, double v) {
  key(k);
  if (!std::isfinite(v)) {
    body_ += "null";  // JSON has no NaN/Inf
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    body_ += buf;
  }
  return *this;
}

JsonLine& JsonLine::integer(const std::string& k, long long v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}

JsonLine& JsonLine::str(const std::string& k, const std::string& v) {
  key(k);
  body_ += "\"" + json_escape(v) + "\"";
  return *this;
}

void MetricsLog::open(const std::string& path, bool append) {
  if (f_) std::fclose(f_);
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  check(f_ != nullptr, "cannot open metrics file " + path + " for writing");
  path_ = path;
}

void MetricsLog::write(const JsonLine& line) {
  if (!f_) return;
  std::fputs(line.text().c_str(), f_);
  std::fputc('\n', f_);
  std::fflush(f_);
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}

std::string format_duration(double s) {
  char buf[32];
  if (!std::isfinite(s) || s < 0) return "?";
  const long long t = (long long)(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%llds", t);
  return buf;
}

std::string format_count(double x) {
  char buf[32];
  const double a = std::fabs(x);
  if (a >= 1e12) std::snprintf(buf, sizeof buf, "%.3gT", x / 1e12);
  else if (a >= 1e9) std::snprintf(buf, sizeof buf, "%.3gG", x / 1e9);
  else if (a >= 1e6) std::snprintf(buf, sizeof buf, "%.3gM", x / 1e6);
  else if (a >= 1e3) std::snprintf(buf, sizeof buf, "%.3gk", x / 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

}  // namespace ada
