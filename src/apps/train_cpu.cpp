// train_cpu: train any method on the CPU (Eigen + OpenMP, float32).
//   make train_cpu && ./train_cpu --method standard
//   ./train_cpu --resume runs/standard-tiny          # continue from its latest checkpoint
#include <omp.h>

#include <cstdio>

#include "backend/cpu_backend.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  using namespace ada;
  try {
    TrainOptions o;
    Flags flags("train_cpu", "Train a language model with an adaptive-computation method on the CPU.");
    add_train_flags(flags, o);
    if (!flags.parse(argc, argv)) return 0;
    check(flags.positional().empty(), "unexpected argument '" + (flags.positional().empty() ? std::string() : flags.positional()[0]) + "'");
    if (!o.resume.empty()) {  // flags not given take the checkpoint's values
      const std::string ckpt = resolve_checkpoint(o.resume);
      resume_options(o, flags, read_train_options(ckpt), ckpt);
    }
    if (o.threads > 0) omp_set_num_threads(o.threads);
    o.validate();
    CpuBackend<float> be;
    Trainer<CpuBackend<float>> trainer(be, o);
    auto tok = run_tokenizer(o.tokenizer, o.model_config());
    Dataset data = load_data(o, *tok);
    trainer.run(data);
    return 0;
  } catch (const ada::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
