// The statistics of a study (apps/study.cpp), on plain vectors so that tests
// can check them on hand-made numbers:
//   mean_std          mean and sample standard deviation (n - 1) over seeds
//   paired_difference the per-token loss difference of two methods averaged
//                     over seeds, with its standard error (below)
//   class_stats       tokens, accuracy, NLL and passes per difficulty class
//   nll_bins          mean passes of the tokens in fixed NLL bins
//   depth_stats       per class and per number of passes: tokens, accuracy, NLL
//   fisher_greater    one-sided Fisher exact test on two counts of runs
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ada {

struct MeanStd {
  double mean = 0, std = 0;  // std = 0 for one value; NaN mean for none
};
MeanStd mean_std(const std::vector<double>& x);

// Method a against method b on the same N tokens under S seeds, with
// nll_a[s][i] the NLL of token i under a's run of seed s:
//   D_i       = mean over s of (nll_a[s][i] - nll_b[s][i])
//   diff      = mean over i of D_i
//   se_tokens = std_i(D_i) / sqrt(N)
//   d_s       = mean over i of (nll_a[s][i] - nll_b[s][i])   (seed s's difference)
//   se_seeds  = std_s(d_s) / sqrt(S)   (0 when S = 1)
//   se        = sqrt(se_tokens^2 + se_seeds^2)
// and per seed: d_s with se_s = std_i(nll_a[s][i] - nll_b[s][i]) / sqrt(N).
// std is the sample standard deviation (n - 1). Throws when the shapes differ.
struct PairedSeed {
  long long seed = 0;
  double diff = 0, se = 0;
};
struct PairedResult {
  double diff = 0, se = 0, se_tokens = 0, se_seeds = 0;
  size_t tokens = 0;
  std::vector<PairedSeed> per_seed;
};
PairedResult paired_difference(const std::vector<std::vector<double>>& nll_a,
                               const std::vector<std::vector<double>>& nll_b, const std::vector<long long>& seeds);

// Per difficulty class c = 0 .. n_classes - 1 over the tokens whose cls[i] ==
// c: their count, the fraction predicted correctly (argmax = target), mean
// NLL and mean passes (NaN for a class without tokens). Tokens with a class
// outside that range (-1: none) are not counted.
struct ClassStats {
  long long tokens = 0;
  double accuracy = NAN, nll = NAN, passes = NAN;
};
std::vector<ClassStats> class_stats(const std::vector<double>& nll, const std::vector<double>& passes,
                                    const std::vector<uint8_t>& correct, const std::vector<int>& cls, int n_classes);

// The tokens of one class split by the passes they used (rounded to an
// integer): for an adaptive method, where each class stops and whether the
// tokens that stop there are right. depth_stats adds runs (any number of
// seeds, pooled) into cells[c][p] for class c (or class 0 for every token
// when n_classes is 0: natural text) and passes p; accuracy and NLL are then
// correct / tokens and nll_sum / tokens of the cell.
struct DepthCell {
  long long tokens = 0, correct = 0;
  double nll_sum = 0;
};
using DepthTable = std::vector<std::map<long long, DepthCell>>;  // [class][passes]
void depth_stats(DepthTable& cells, const std::vector<double>& nll, const std::vector<double>& passes,
                 const std::vector<uint8_t>& correct, const std::vector<int>& cls, int n_classes);

// Passes against NLL: fixed bins [lo, hi) (the last one closed), the same for
// every method so that the curves line up. add_to_bins pools any number of
// runs: tokens counts them, passes is the running mean.
struct NllBin {
  double lo = 0, hi = 0;
  long long tokens = 0;
  double passes = NAN;
};
// Edges 0, 0.25, 0.5, 1, 1.5, 2, 3, 4, 5, 6, 8, then one last bin up to
// max_nll (rounded up) when it is above 8.
std::vector<NllBin> nll_bins(double max_nll);
void add_to_bins(std::vector<NllBin>& bins, const std::vector<double>& nll, const std::vector<double>& passes);

// One-sided Fisher exact test: k1 of n1 runs of one group and k2 of n2 of
// another crossed a line (learned a class); the probability, with the
// margins fixed (k = k1 + k2 successes among n = n1 + n2 runs), that the
// first group gets k1 or more of them by chance:
//   p = sum over x >= k1 of C(n1, x) C(n2, k - x) / C(n, k).
// Throws unless 0 <= k1 <= n1 and 0 <= k2 <= n2.
double fisher_greater(int k1, int n1, int k2, int n2);

}  // namespace ada
