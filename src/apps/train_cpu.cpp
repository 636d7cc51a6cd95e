// train_cpu: train any method on the CPU (Eigen + OpenMP, float32).
//   make train_cpu && ./train_cpu --method standard
//   ./train_cpu --resume runs/standard-tiny          # continue from its latest checkpoint
// Compiled a second time with -DADA_MPI (and mpicxx's flags) into
// train_cpu_mpi, the data-parallel build (docs/scaling.md):
//   mpirun -np 2 ./train_cpu_mpi --method adaponder --threads 1
#include "train/cpu_instances.h"
#include "train/train_main.h"
#ifdef ADA_MPI
#include "dist/mpi/mpi_communicator.h"
#endif

int main(int argc, char** argv) {
  ada::TrainProgram<ada::CpuBackend<float>> p;
  p.summary = "Train a language model with an adaptive-computation method on the CPU.";
  p.default_config = "tiny";
#ifdef ADA_MPI
  p.name = "train_cpu_mpi";
  p.start = [](int* argc, char*** argv) -> std::unique_ptr<ada::Communicator> {
    return std::make_unique<ada::MpiCommunicator>(argc, argv);
  };
#else
  p.name = "train_cpu";
  p.mpi_program = "train_cpu_mpi (make train_cpu_mpi, needs OpenMPI)";
#endif
  return ada::train_main(argc, argv, p);
}
