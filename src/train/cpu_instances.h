// The model, every method and the trainer are templates over the backend.
// The CPU instantiations (float to train, double for gradient checks) are
// compiled once, in cpu_instances.cpp; every other CPU file includes this
// header instead of instantiating them again (an "extern template"
// declaration), which cuts the build of each program and test file from
// tens of seconds to a few.
#pragma once
#include "backend/cpu_backend.h"
#include "methods/registry.h"
#include "train/trainer.h"

#define ADA_CPU_INSTANCES(X, B)   \
  X class Model<B>;               \
  X class StandardMethod<B>;      \
  X class LoopedMethod<B>;        \
  X class PonderMethod<B>;        \
  X class PauseMethod<B>;         \
  X class AdaPonderMethod<B>;     \
  X class CybMethod<B>;           \
  X class LatentCotMethod<B>;     \
  X class TahMethod<B>;           \
  X class PonderLM2Method<B>;     \
  X class Trainer<B>;

namespace ada {
ADA_CPU_INSTANCES(extern template, CpuBackend<float>)
ADA_CPU_INSTANCES(extern template, CpuBackend<double>)
}  // namespace ada
