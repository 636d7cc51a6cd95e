// Shared by the method tests: random batches and random (larger than
// initialisation) parameters, so that every path of a model carries signal.
#pragma once
#include <functional>

#include <memory>

#include "backend/cpu_backend.h"
#include "core/config.h"
#include "core/rng.h"
#include "methods/method.h"
#include "model/model.h"

namespace ada::test {

inline Batch random_batch(int B, int T, int V, uint64_t seed) {
  Rng r(seed);
  Batch b;
  b.B = B, b.T = T;
  for (int i = 0; i < B * T; i++) b.inputs.push_back((int)r.below(V));
  for (int i = 0; i < B * T; i++) b.targets.push_back((int)r.below(V));
  return b;
}

// Every parameter ~ 0.3 N(0, 1) (norm weights around 1); `adjust(p, v)` may
// change the value drawn for a tensor (e.g. make a gate's weights larger).
template <class Bk>
void random_params(Model<Bk>& m, uint64_t seed,
                   const std::function<double(const ParamInfo&, double)>& adjust = nullptr) {
  Rng r(seed);
  std::vector<double> host(m.num_params());
  for (auto& p : m.layout.tensors())
    for (size_t i = 0; i < p.numel; i++) {
      double v = 0.3 * r.normal();
      if (p.init == Init::Ones) v += 1.0;
      host[p.offset + i] = adjust ? adjust(p, v) : v;
    }
  m.be.to_device(m.params.data(), host.data(), host.size());
}

// The fixture the method test files build on: one method on the "test"
// config in double precision, a batch (set by the test) and its loss.
template <class Method>
struct MethodCase {
  using Bd = CpuBackend<double>;
  Bd be;
  std::unique_ptr<Method> method;
  std::unique_ptr<Model<Bd>> m;
  Batch b;
  template <class Options>
  explicit MethodCase(const Options& o)
      : method(std::make_unique<Method>(o)), m(make_model(be, preset_config("test"), *method)) {}
  double loss() {
    m->arena.reset();
    method->forward(*m, b, false);
    return method->stats(*m).loss;
  }
};

}  // namespace ada::test
