// Finite-difference gradient checking in double precision (the project's
// standard, DESIGN "Numbers everyone uses"):
//   numeric  g_i = (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)     central differences
//   error    max_i |analytic_i - numeric_i| / max(max_i |analytic_i|, max_i |numeric_i|, 1e-8)
// The error is reported per tensor and must be below 1e-6. Non-scalar outputs
// are turned into a loss by a fixed random projection L = sum(R * out).
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

inline double grad_error(const std::vector<double>& a, const std::vector<double>& n) {
  double diff = 0, mag = 1e-8;
  for (size_t i = 0; i < a.size(); i++) {
    diff = std::max(diff, std::abs(a[i] - n[i]));
    mag = std::max({mag, std::abs(a[i]), std::abs(n[i])});
  }
  return diff / mag;
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
                              const std::vector<double>& numeric, double tol = kGradTol) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double mag = 0;
  for (double v : numeric) mag = std::max(mag, std::abs(v));
  const double err = grad_error(analytic, numeric);
  if (std::getenv("ADA_VERBOSE")) std::printf("  %-40s rel err %.2e  (max |g| %.2e)\n", what.c_str(), err, mag);
  EXPECT_LT(err, tol) << what << ": relative error " << err << " (max |numeric| " << mag << ")";
  // A gradient that is identically zero would pass trivially; the inputs of
  // every check are chosen so that each tensor matters.
  EXPECT_GT(mag, 1e-10) << what << ": gradient is zero, the check would be vacuous";
}

}  // namespace ada::test
