// Finite-difference gradient checking in double precision (the project's
// standard, DESIGN "Numbers everyone uses"):
//   numeric  g_i = (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)     central differences
//   per-tensor error    max_i |a_i - n_i| / max(max_i |a_i|, max_i |n_i|, 1e-8)      below 1e-6
//   element-wise error  max_i |a_i - n_i| / max(|a_i|, |n_i|, floor)               below 3e-5
//                       floor = 1e-3 max_i |n_i|
// (a = analytic, n = numeric). The per-tensor error is scaled by the largest
// entry, so an entry 1000x smaller than the largest could be wrong by 100%
// and still pass; the element-wise error compares every entry with its own
// size, down to the floor. Non-scalar outputs are turned into a loss by a
// fixed random projection L = sum(R * out).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"

namespace ada::test {

constexpr double kGradTol = 1e-6;
constexpr double kEps = 1e-5;

// The element-wise check. Why a floor, and why 1e-3 of the tensor's scale:
// the numeric gradient's error is absolute, not relative. Central differences
// with step eps carry a truncation error ~ eps^2 |L'''| / 6 and a rounding
// error ~ 1e-16 |L| / eps per entry, both about the same for every entry of a
// tensor (they depend on the loss, not on the entry's size), so an entry that
// is exactly zero, or 1e-9 of the largest, has a relative error of order 1 in
// the numeric gradient however right the analytic one is. Below the floor an
// entry is judged by its absolute error against floor = 1e-3 max|n|; above
// it, by its own relative error. So any entry within a factor 1000 of the
// tensor's largest is checked to kElemTol of its own size -- the per-tensor
// check alone lets such an entry be 100% wrong -- while the smallest entries
// are still held to kElemTol x 1e-3 max|n| in absolute terms.
// Threshold, measured (ADA_VERBOSE=1 prints both errors of every tensor): the
// worst element-wise errors over the suite's checks are 6e-8 (GradCheckOps),
// 3.9e-6 (GradCheckModel, adaponder's gate), 2.2e-6 (AdaPonder), 1.4e-6 (Tah),
// 7e-7 (LatentCot), 3e-7 (Cyb). kElemTol = 3e-5 leaves a margin of 7.7x over
// the worst.
constexpr double kElemFloor = 1e-3;
constexpr double kElemTol = 3e-5;

inline double grad_error(const std::vector<double>& a, const std::vector<double>& n) {
  double diff = 0, mag = 1e-8;
  for (size_t i = 0; i < a.size(); i++) {
    diff = std::max(diff, std::abs(a[i] - n[i]));
    mag = std::max({mag, std::abs(a[i]), std::abs(n[i])});
  }
  return diff / mag;
}

// max_i |a_i - n_i| / max(|a_i|, |n_i|, floor_frac * max_i |n_i|); *worst gets the
// index of the worst entry.
inline double grad_error_elementwise(const std::vector<double>& a, const std::vector<double>& n,
                                     double floor_frac = kElemFloor, size_t* worst = nullptr) {
  double scale = 0;
  for (double v : n) scale = std::max(scale, std::abs(v));
  const double floor = std::max(floor_frac * scale, 1e-300);
  double err = 0;
  for (size_t i = 0; i < a.size(); i++) {
    const double e = std::abs(a[i] - n[i]) / std::max({std::abs(a[i]), std::abs(n[i]), floor});
    if (e > err) {
      err = e;
      if (worst) *worst = i;
    }
  }
  return err;
}

// Central differences of loss() with respect to x[0..n).
inline std::vector<double> numeric_grad(double* x, size_t n, const std::function<double()>& loss,
                                        double eps = kEps) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; i++) {
    const double v = x[i];
    x[i] = v + eps;
    const double lp = loss();
    x[i] = v - eps;
    const double lm = loss();
    x[i] = v;
    g[i] = (lp - lm) / (2 * eps);
  }
  return g;
}

inline std::vector<double> random_vec(size_t n, uint64_t seed, double scale = 1.0) {
  Rng r(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = scale * r.normal();
  return v;
}

// Checks one tensor: analytic gradient vs numeric, with a readable failure.
inline void expect_grad_close(const std::string& what, const std::vector<double>& analytic,
                              const std::vector<double>& numeric, double tol = kGradTol,
                              double elem_tol = kElemTol) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double mag = 0;
  for (double v : numeric) mag = std::max(mag, std::abs(v));
  const double err = grad_error(analytic, numeric);
  size_t w = 0;
  const double elem = grad_error_elementwise(analytic, numeric, kElemFloor, &w);
  if (std::getenv("ADA_VERBOSE"))
    std::printf("  %-40s rel err %.2e  elem err %.2e at %zu (a %.3e n %.3e)  (max |g| %.2e)\n", what.c_str(), err,
                elem, w, analytic.empty() ? 0.0 : analytic[w], numeric.empty() ? 0.0 : numeric[w], mag);
  EXPECT_LT(err, tol) << what << ": relative error " << err << " (max |numeric| " << mag << ")";
  EXPECT_LT(elem, elem_tol) << what << ": element-wise relative error " << elem << " at entry " << w << " (analytic "
                            << analytic[w] << ", numeric " << numeric[w] << ", max |numeric| " << mag << ")";
  // A gradient that is identically zero would pass trivially; the inputs of
  // every check are chosen so that each tensor matters.
  EXPECT_GT(mag, 1e-10) << what << ": gradient is zero, the check would be vacuous";
}

}  // namespace ada::test
