#include "train/run_plan.h"

#include <cstdio>

#include "train/metrics.h"

namespace ada {
namespace {

// "1.14", "10", "1440": three significant digits, whole numbers from 100 on.
std::string times(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, x >= 100 ? "%.0f" : "%.3g", x);
  return buf;
}

}  // namespace

RunPlan plan_run(long long steps, int accum, int batch, int seq, size_t train_tokens) {
  RunPlan p;
  p.tokens_per_step = (double)accum * batch * seq;
  p.total_tokens = (double)steps * p.tokens_per_step;
  p.train_tokens = (double)train_tokens;
  p.epochs = train_tokens > 0 ? p.total_tokens / p.train_tokens : 0;
  return p;
}

std::string describe_plan(const RunPlan& p, long long steps, int accum, int batch, int seq) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "tokens  %s per step (--accum %d x --batch %d x --seq %d), %s in %lld steps: %s epochs of the %s "
                "training tokens",
                format_count(p.tokens_per_step).c_str(), accum, batch, seq, format_count(p.total_tokens).c_str(), steps,
                times(p.epochs).c_str(), format_count(p.train_tokens).c_str());
  return buf;
}

std::string epoch_warning(const RunPlan& p) {
  if (p.epochs <= 1) return "";
  char buf[128];
  std::snprintf(buf, sizeof buf, "warning: this run sees its data %s times: a smoke run; see docs/recipes.md",
                times(p.epochs).c_str());
  return buf;
}

double eta_seconds(double first_s, double later_s, long long done, long long left) {
  const double per_step = done > 1 ? later_s / (double)(done - 1) : first_s;
  return per_step * (double)left;
}

}  // namespace ada
