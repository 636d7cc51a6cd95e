// bench_cpu: training throughput of the CPU backend (forward + backward +
// AdamW on random tokens) for the reference shapes, with achieved
// GFLOP/s and the ratio to a PyTorch 1.13 CPU run of the same architecture.
//   ./bench_cpu [--method standard] [--steps 10] [--configs tiny,small]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <sstream>

#include "train/cpu_instances.h"
#include "methods/registry.h"
#include "train/flags.h"

using namespace ada;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape {
  std::string name;
  ModelConfig cfg;
  int B, T;
  double pytorch_tok_s;  // PyTorch 1.13, 2 threads, same architecture + AdamW (issue 2)
};

std::vector<Shape> shapes() {
  ModelConfig tiny = preset_config("tiny");  // V=4096 D=128 L=4 H=4 F=384
  ModelConfig small = preset_config("small");  // V=8192 D=256 L=6 H=8 F=688
  return {{"tiny", tiny, 16, 128, 4200}, {"small", small, 8, 256, 1230}};
}

// Achieved GFLOP/s of a plain Eigen float GEMM (the ceiling the ops build on).
double gemm_gflops(int n) {
  RowMat<float> a = RowMat<float>::Random(n, n), b = RowMat<float>::Random(n, n), c(n, n);
  c.noalias() = a * b;
  const auto t0 = Clock::now();
  int reps = 0;
  double dt = 0;
  while (dt < 0.5) {
    c.noalias() = a * b;
    reps++;
    dt = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return 2.0 * n * n * (double)n * reps / dt / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string method = "standard", configs = "tiny,small";
    int steps = 10;
    MethodOptions mo;
    Flags f("bench_cpu", "CPU training throughput on the reference shapes.");
    f.add("--method", &method, "method to benchmark");
    f.add("--steps", &steps, "timed steps per shape (after 2 warm-up steps)", 1, 1000000);
    f.add("--configs", &configs, "comma-separated shapes: tiny, small");
    add_method_flags(f, mo);
    if (!f.parse(argc, argv)) return 0;
    check(steps > 0, "--steps must be positive");
    std::printf("threads %d, Eigen float GEMM 1024^3: %.0f GFLOP/s\n", omp_get_max_threads(), gemm_gflops(1024));
    std::printf("%-6s %-10s %6s %5s %10s %10s %9s %12s\n", "shape", "method", "B", "T", "tok/s", "GFLOP/s", "ms/step",
                "vs PyTorch");
    for (auto& s : shapes()) {
      if (configs.find(s.name) == std::string::npos) continue;
      CpuBackend<float> be;
      auto meth = make_method<CpuBackend<float>>(method, mo);
      auto model = make_model(be, s.cfg, *meth);
      model->init_params(1);
      DeviceArray<CpuBackend<float>, float> m(be, model->num_params()), v(be, model->num_params());
      be.memset_zero(m.data(), m.size() * 4);
      be.memset_zero(v.data(), v.size() * 4);
      Rng rng(2);
      Batch b;
      b.B = s.B, b.T = s.T;
      for (int i = 0; i < s.B * s.T; i++) b.inputs.push_back((int)rng.below(s.cfg.vocab));
      for (int i = 0; i < s.B * s.T; i++) b.targets.push_back((int)rng.below(s.cfg.vocab));
      double flops = 0, secs = 0;
      for (int it = 0; it < steps + 2; it++) {
        const auto t0 = Clock::now();
        model->arena.reset();
        model->zero_grads();
        meth->forward(*model, b, true);
        meth->backward(*model, 1.0);
        AdamWHyper h;
        h.step = it + 1;
        be.adamw_step(model->params.data(), model->grads.data(), m.data(), v.data(), model->num_params(),
                      model->layout.decay_count(), h, 1.0);
        const StepStats st = meth->stats(*model);
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        if (it >= 2) secs += dt, flops += st.train_flops;
      }
      const double tok_s = (double)s.B * s.T * steps / secs;
      std::printf("%-6s %-10s %6d %5d %10.0f %10.1f %9.1f %11.2fx\n", s.name.c_str(), method.c_str(), s.B, s.T, tok_s,
                  flops / secs / 1e9, secs / steps * 1e3, tok_s / s.pytorch_tok_s);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
