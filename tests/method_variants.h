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
  MethodOptions apply(MethodOptions o) const {
    if (!overrides.empty()) apply_method_overrides(o, overrides);
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
  return v;
}

}  // namespace ada::test
