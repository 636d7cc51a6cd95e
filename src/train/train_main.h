// The main() of train_cpu and train_gpu (and of their data-parallel builds,
// train_cpu_mpi and train_gpu_nccl), written once: start the run's
// processes, parse the flags, take the checkpoint's options on --resume,
// build the backend, train. Every user-facing failure ends with one
// "error: ..." line and exit status 1; in a run of several ranks the failing
// rank names itself and ends the whole run (Communicator::abort), so no
// other rank waits for it in a collective.
#pragma once
#include <omp.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "train/trainer.h"

namespace ada {

// What differs between the trainer programs.
template <class Bk>
struct TrainProgram {
  std::string name, summary, default_config;
  // The sequence length when --seq is not given (capped at the model's
  // context); 0: TrainOptions' own default. train_gpu trains at 1024, where
  // a 16-sequence micro-batch gives the GPU work (docs/recipes.md).
  int default_seq = 0;
  // Starts the run's processes (MPI_Init) and returns their communicator;
  // null: a one-process build, which refuses to run under mpirun and names
  // `mpi_program`, the build that can.
  std::function<std::unique_ptr<Communicator>(int*, char***)> start;
  std::string mpi_program;
  // Picks and checks this rank's device (the GPU of its local rank).
  std::function<void(const Communicator&)> open_device;
  std::function<void(Bk&)> describe_backend;  // printed by rank 0
  std::function<void(Bk&)> report_backend;    // printed by rank 0 after training
  // Flags of this program only (declared after the shared ones), and what
  // they set on the backend once it exists (before describe_backend).
  std::function<void(Flags&)> add_flags;
  std::function<void(Bk&)> configure_backend;
  // The communicator the gradient buffer goes through, once the backend
  // exists (NCCL, on the backend's stream); null: the one `start` returned.
  std::function<std::unique_ptr<Communicator>(Bk&, std::unique_ptr<Communicator>)> attach;
};

template <class Bk>
int train_main(int argc, char** argv, const TrainProgram<Bk>& p) {
  std::unique_ptr<Communicator> comm;  // outlives everything the run builds
  try {
    if (p.start) {
      comm = p.start(&argc, &argv);
    } else {
      check_not_under_mpirun(p.name, p.mpi_program);
      comm = std::make_unique<SingleProcess>();
    }
    TrainOptions o;
    o.config = p.default_config;
    if (p.default_seq > 0) o.seq = p.default_seq;  // (so --help shows it)
    Flags flags(p.name, p.summary);
    add_train_flags(flags, o);
    if (p.add_flags) p.add_flags(flags);
    if (!flags.parse(argc, argv)) return 0;
    check(flags.positional().empty(),
          "unexpected argument '" + (flags.positional().empty() ? std::string() : flags.positional()[0]) + "'");
    if (p.open_device) p.open_device(*comm);
    if (p.default_seq > 0) cap_default_seq(o, flags);
    if (!o.resume.empty()) {  // flags not given take the checkpoint's values
      const std::string ckpt = resolve_checkpoint(o.resume);
      resume_options(o, flags, read_train_options(ckpt), ckpt);
    }
    if (o.threads > 0) omp_set_num_threads(o.threads);
    o.validate();
    Bk be;
    if (p.configure_backend) p.configure_backend(be);
    if (p.attach) comm = p.attach(be, std::move(comm));
    if (p.describe_backend && comm->rank() == 0) p.describe_backend(be);
    Trainer<Bk> trainer(be, o, *comm);
    auto tok = run_tokenizer(o.tokenizer, o.model_config());
    Dataset data = load_data(o, *tok);
    trainer.run(data);
    if (p.report_backend && comm->rank() == 0) p.report_backend(be);
    return 0;
  } catch (const std::exception& e) {
    if (comm && comm->size() > 1) {
      std::fprintf(stderr, "error: rank %d of %d: %s (ending every rank)\n", comm->rank(), comm->size(), e.what());
      std::fflush(stderr);
      comm->abort(1);
    }
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace ada
