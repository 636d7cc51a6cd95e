#include "train/memory_budget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/common.h"

namespace ada {

namespace {
std::string gigabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g GB", bytes / 1e9);
  return buf;
}
}  // namespace

double model_bytes(const ModelConfig& c, double n_params, int real_bytes, bool training) {
  const double rope = 2.0 * c.max_seq * (c.head_dim() / 2) * real_bytes;  // cos and sin tables
  return (training ? training_state_bytes(n_params, real_bytes) : n_params * real_bytes) + rope;
}

double activation_bytes(const ModelConfig& c, double tokens, int passes, int real_bytes, bool training) {
  // per layer and row, what a training pass saves for the backward (Model::
  // LayerActs; Arena.PassSavesOnlyWhatTheBackwardCannotRecompute pins it):
  // x_in, q|k|v, the attention output and x_mid (6D), gate|up (2F), the
  // softmax statistics (H) and the two norms' rstd (2)
  const double per_layer = 6.0 * c.dim + 2.0 * c.hidden + c.heads + 2;
  const double layers = training ? c.layers : 1;
  // the logits: at least one chunk of the fused classifier (whose methods
  // hold no more), kClassifierChunkElems values or all rows if fewer
  const double logits = std::min(tokens * c.vocab, (double)kClassifierChunkElems);
  return (tokens * passes * layers * per_layer + logits) * real_bytes;
}

double available_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  double avail = pages > 0 && page > 0 ? (double)pages * (double)page : 1e18;
  struct rlimit lim;
  if (::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && (double)lim.rlim_cur < avail)
    avail = (double)lim.rlim_cur;
  return avail;
}

namespace {
double g_device_bytes = 0;
std::string g_device_name;
}  // namespace

void set_device_memory(double bytes, const std::string& where) {
  g_device_bytes = bytes > 0 ? bytes : 0;
  g_device_name = where;
}

void check_memory(double bytes, const std::string& what, const std::string& detail) {
  if (g_device_bytes > 0) {
    check(bytes <= g_device_bytes, what + " needs about " + gigabytes(bytes) + " (" + detail + "), more than the " +
                                       gigabytes(g_device_bytes) + " of " + g_device_name);
    return;
  }
  const double avail = available_memory_bytes();
  check(bytes <= avail, what + " needs about " + gigabytes(bytes) + " (" + detail + "), more than the " +
                            gigabytes(avail) + " this machine has");
}

}  // namespace ada
