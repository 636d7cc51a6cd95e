// The main() of train_cpu and train_gpu, written once: parse the flags,
// take the checkpoint's options on --resume, build the backend, train. Every
// user-facing failure ends with one "error: ..." line and exit status 1.
#pragma once
#include <omp.h>

#include <cstdio>
#include <functional>
#include <string>

#include "train/trainer.h"

namespace ada {

template <class Bk>
int train_main(int argc, char** argv, const std::string& program, const std::string& summary,
               const std::string& default_config, const std::function<void()>& open_device = nullptr,
               const std::function<void(Bk&)>& describe_backend = nullptr) {
  try {
    TrainOptions o;
    o.config = default_config;
    Flags flags(program, summary);
    add_train_flags(flags, o);
    if (!flags.parse(argc, argv)) return 0;
    check(flags.positional().empty(),
          "unexpected argument '" + (flags.positional().empty() ? std::string() : flags.positional()[0]) + "'");
    if (open_device) open_device();
    if (!o.resume.empty()) {  // flags not given take the checkpoint's values
      const std::string ckpt = resolve_checkpoint(o.resume);
      resume_options(o, flags, read_train_options(ckpt), ckpt);
    }
    if (o.threads > 0) omp_set_num_threads(o.threads);
    o.validate();
    Bk be;
    if (describe_backend) describe_backend(be);
    Trainer<Bk> trainer(be, o);
    auto tok = run_tokenizer(o.tokenizer, o.model_config());
    Dataset data = load_data(o, *tok);
    trainer.run(data);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace ada
