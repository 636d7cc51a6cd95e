// Method options (every method's flags in one place) and the factory that
// builds a method by name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "methods/method.h"
#include "methods/looped.h"
#include "methods/pause.h"
#include "methods/ponder.h"
#include "methods/standard.h"
#include "train/flags.h"

namespace ada {

struct MethodOptions {
  int iters = 3;         // looped: extra loops K (the stack runs K+1 times)
  int ponder_steps = 3;  // ponder / adaponder: pondering passes P (P+1 passes in all)
  int pauses = 3;        // pause: pause tokens after every real token
};

inline void add_method_flags(Flags& f, MethodOptions& o) {
  f.section("method options");
  f.add("--iters", &o.iters, "looped: extra loops K; the block stack runs K+1 times");
  f.add("--ponder-steps", &o.ponder_steps, "ponder/adaponder: pondering passes P (P+1 passes per token)");
  f.add("--pauses", &o.pauses, "pause: <PAUSE> tokens inserted after every real token");
}

inline std::vector<std::string> method_names() { return {"standard", "looped", "ponder", "pause"}; }

template <class Bk>
std::unique_ptr<Method<Bk>> make_method(const std::string& name, const MethodOptions& o) {
  if (name == "standard") return std::make_unique<StandardMethod<Bk>>();
  if (name == "looped") return std::make_unique<LoopedMethod<Bk>>(o.iters);
  if (name == "ponder") return std::make_unique<PonderMethod<Bk>>(o.ponder_steps);
  if (name == "pause") return std::make_unique<PauseMethod<Bk>>(o.pauses);
  std::string all;
  for (auto& n : method_names()) all += (all.empty() ? "" : ", ") + n;
  fail("unknown --method '" + name + "' (available: " + all + ")");
}

}  // namespace ada
