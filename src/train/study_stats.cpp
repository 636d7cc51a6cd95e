// See study_stats.h.
#include "train/study_stats.h"

#include <algorithm>
#include <cmath>

#include "core/common.h"

namespace ada {

MeanStd mean_std(const std::vector<double>& x) {
  MeanStd r;
  if (x.empty()) return {NAN, NAN};
  for (double v : x) r.mean += v;
  r.mean /= x.size();
  if (x.size() < 2) return r;
  double ss = 0;
  for (double v : x) ss += (v - r.mean) * (v - r.mean);
  r.std = std::sqrt(ss / (x.size() - 1));
  return r;
}

PairedResult paired_difference(const std::vector<std::vector<double>>& nll_a,
                               const std::vector<std::vector<double>>& nll_b, const std::vector<long long>& seeds) {
  const size_t S = seeds.size();
  check(S > 0 && nll_a.size() == S && nll_b.size() == S, "paired difference: one NLL vector per seed and method needed");
  const size_t N = nll_a[0].size();
  check(N > 0, "paired difference: no tokens");
  for (size_t s = 0; s < S; s++)
    check(nll_a[s].size() == N && nll_b[s].size() == N,
          "paired difference: the runs evaluated different numbers of tokens (seed " + std::to_string(seeds[s]) + ")");
  PairedResult r;
  r.tokens = N;
  std::vector<double> D(N, 0.0), d_s(S, 0.0);
  for (size_t s = 0; s < S; s++) {
    std::vector<double> d(N);
    for (size_t i = 0; i < N; i++) {
      d[i] = nll_a[s][i] - nll_b[s][i];
      D[i] += d[i] / S;
    }
    const MeanStd m = mean_std(d);
    d_s[s] = m.mean;
    r.per_seed.push_back({seeds[s], m.mean, m.std / std::sqrt((double)N)});
  }
  const MeanStd md = mean_std(D);
  r.diff = md.mean;
  r.se_tokens = md.std / std::sqrt((double)N);
  r.se_seeds = S > 1 ? mean_std(d_s).std / std::sqrt((double)S) : 0.0;
  r.se = std::sqrt(r.se_tokens * r.se_tokens + r.se_seeds * r.se_seeds);
  return r;
}

std::vector<ClassStats> class_stats(const std::vector<double>& nll, const std::vector<double>& passes,
                                    const std::vector<uint8_t>& correct, const std::vector<int>& cls, int n_classes) {
  check(passes.size() == nll.size() && correct.size() == nll.size() && cls.size() == nll.size(),
        "class statistics: the per-token vectors differ in length");
  std::vector<ClassStats> r(n_classes);
  std::vector<double> acc(n_classes, 0.0), ns(n_classes, 0.0), ps(n_classes, 0.0);
  for (size_t i = 0; i < nll.size(); i++) {
    const int c = cls[i];
    if (c < 0 || c >= n_classes) continue;
    r[c].tokens++;
    acc[c] += correct[i], ns[c] += nll[i], ps[c] += passes[i];
  }
  for (int c = 0; c < n_classes; c++)
    if (r[c].tokens > 0) {
      const double n = (double)r[c].tokens;
      r[c].accuracy = acc[c] / n, r[c].nll = ns[c] / n, r[c].passes = ps[c] / n;
    }
  return r;
}

void depth_stats(DepthTable& cells, const std::vector<double>& nll, const std::vector<double>& passes,
                 const std::vector<uint8_t>& correct, const std::vector<int>& cls, int n_classes) {
  check(passes.size() == nll.size() && correct.size() == nll.size() && cls.size() == nll.size(),
        "depth statistics: the per-token vectors differ in length");
  cells.resize(std::max(n_classes, 1));
  for (size_t i = 0; i < nll.size(); i++) {
    const int c = n_classes > 0 ? cls[i] : 0;
    if (c < 0 || c >= (int)cells.size()) continue;
    DepthCell& d = cells[c][std::llround(passes[i])];
    d.tokens++, d.correct += correct[i], d.nll_sum += nll[i];
  }
}

std::vector<NllBin> nll_bins(double max_nll) {
  const std::vector<double> edges = {0, 0.25, 0.5, 1, 1.5, 2, 3, 4, 5, 6, 8};
  std::vector<NllBin> b;
  for (size_t k = 0; k + 1 < edges.size(); k++) b.push_back({edges[k], edges[k + 1], 0, NAN});
  if (max_nll > edges.back()) b.push_back({edges.back(), std::ceil(max_nll), 0, NAN});
  return b;
}

void add_to_bins(std::vector<NllBin>& bins, const std::vector<double>& nll, const std::vector<double>& passes) {
  check(nll.size() == passes.size(), "passes by NLL: the per-token vectors differ in length");
  for (size_t i = 0; i < nll.size(); i++) {
    size_t k = 0;
    while (k + 1 < bins.size() && nll[i] >= bins[k].hi) k++;
    if (nll[i] < bins[k].lo || nll[i] > bins[k].hi) continue;  // outside every bin
    NllBin& b = bins[k];
    b.tokens++;
    b.passes = b.tokens == 1 ? passes[i] : b.passes + (passes[i] - b.passes) / b.tokens;
  }
}

double fisher_greater(int k1, int n1, int k2, int n2) {
  check(n1 >= 0 && n2 >= 0 && k1 >= 0 && k1 <= n1 && k2 >= 0 && k2 <= n2,
        "fisher_greater: counts must satisfy 0 <= k <= n (got " + std::to_string(k1) + "/" + std::to_string(n1) + " and " +
            std::to_string(k2) + "/" + std::to_string(n2) + ")");
  auto log_choose = [](int n, int k) { return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0); };
  const int n = n1 + n2, k = k1 + k2;
  double p = 0;
  for (int x = k1; x <= std::min(n1, k); x++)
    if (k - x <= n2) p += std::exp(log_choose(n1, x) + log_choose(n2, k - x) - log_choose(n, k));
  return std::min(p, 1.0);
}

}  // namespace ada
