#include "train/memory_budget.h"

#include <sys/resource.h>
#include <unistd.h>

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
  // per layer and row: 2 norms, q|k|v, attention output, its projection, the
  // residual (D each but qkv 3D: 8D), gate|up and SwiGLU (3F), softmax sums (H)
  const double per_layer = 8.0 * c.dim + 3.0 * c.hidden + c.heads;
  const double layers = training ? c.layers : 1;
  return tokens * (passes * layers * per_layer + c.vocab) * real_bytes;
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
