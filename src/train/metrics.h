// Run logging: one JSON object per line (metrics.jsonl) and the human
// progress line (step, loss, val loss, tokens/s, ETA).
#pragma once
#include "core/json.h"
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace ada {

// Builds one flat JSON object: {"step": 10, "loss": 3.21, ...}.
class JsonLine {
 public:
  JsonLine& num(const std::string& key, double v);
  JsonLine& integer(const std::string& key, long long v);
  JsonLine& str(const std::string& key, const std::string& v);
  std::string text() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};


// Appends lines to a file, flushing each so a crash loses nothing.
class MetricsLog {
 public:
  MetricsLog() = default;
  void open(const std::string& path, bool append);
  void write(const JsonLine& line);
  ~MetricsLog();
  const std::string& path() const { return path_; }

 private:
  FILE* f_ = nullptr;
  std::string path_;
};

std::string format_duration(double seconds);  // "1h02m", "3m05s", "12s"
std::string format_count(double x);           // "12.3k", "4.56M"

}  // namespace ada
