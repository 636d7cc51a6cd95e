// The methods the all-method tests run: every method with its default
// options, plus the variants whose options change the computation (other
// position ids, other masks) and so need checking on their own. A variant is
// a method name and an override spec in the form eval and compare take
// ("flag=value,..."), applied on top of the test's base options.
#pragma once
#include <string>
#include <vector>

#include "methods/registry.h"

namespace ada::test {

struct MethodVariant {
  std::string label;      // for SCOPED_TRACE, e.g. "pause:pause-positions=own"
  std::string method;     // as make_method takes it
  std::string overrides;  // "" = the base options
  // adaponder's matched policies: a per-pass exit histogram of the base
  // options' K + 1 passes (0.3 after pass 1, the rest spread evenly)
  bool exit_hist = false;
  MethodOptions apply(MethodOptions o) const {
    if (!overrides.empty()) apply_method_overrides(o, overrides);
    if (exit_hist) {
      const int K = o.ponder_steps;
      o.ada.policy_hist = "0.3";
      for (int i = 1; i <= K; i++) o.ada.policy_hist += "/" + std::to_string(0.7 / K);
    }
    return o;
  }
};

inline std::vector<MethodVariant> method_variants() {
  std::vector<MethodVariant> v;
  for (const std::string& n : method_names()) v.push_back({n, n, ""});
  // think-before-you-speak with own position ids (Goyal et al.; CYB's baseline)
  v.push_back({"pause:pause-positions=own", "pause", "pause-positions=own"});
  // TaH2's fixed-depth baseline (no decider: every token runs all M depths, even mixture)
  v.push_back({"tah:tah-policy=fixed", "tah", "tah-policy=fixed"});
  // AdaPonderLM's control for which tokens stop: random exits, gated updates, ponder loss
  v.push_back({"adaponder:policy=matched-gated", "adaponder", "policy=matched-gated", true});
  return v;
}

}  // namespace ada::test
