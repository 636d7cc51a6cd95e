// train_gpu: train any method on an NVIDIA GPU (hand-written CUDA kernels,
// fp32 parameters and activations, bf16 tensor-core GEMMs by default).
//   make train_gpu && ./train_gpu --method adaponder
// The same flags, data, metrics and checkpoints as train_cpu (the same
// Trainer, instantiated with CudaBackend); only the default --config differs
// (70m). ADA_GEMM=fp32|bf16|tf32|bf16mma picks the matrix-product path.
// Built for every GPU from compute capability 8.0 (Ampere) on (open_gpu.h,
// gpu_arch.h); without a usable GPU it exits at once with one line:
//   error: no usable CUDA GPU: <reason>
// Compiled a second time with -DADA_NCCL into train_gpu_nccl, the
// data-parallel build (MPI start-up, NCCL gradients; docs/scaling.md):
//   mpirun -np 8 ./train_gpu_nccl --method adaponder      # one rank per GPU
#include <cstdio>
#include <string>

#include "cuda_backend.h"
#include "open_gpu.h"
#include "train/train_main.h"
#ifdef ADA_NCCL
#include "dist/mpi/mpi_communicator.h"
#include "nccl_communicator.h"
#endif

int main(int argc, char** argv) {
  using namespace ada;
  TrainProgram<CudaBackend> p;
  p.summary = "Train a language model with an adaptive-computation method on a CUDA GPU.\nBuilt for " +
              cuda::describe_archs(cuda::built_archs()) + ".";
  p.default_config = "70m";
  p.default_seq = 1024;  // 16 x 1024 tokens per micro-batch: every method fits an 80 GB GPU (docs/recipes.md)
  p.open_device = [](const Communicator& c) {
    cudaDeviceProp prop;
    const std::string gpu = cuda::open_gpu(c.local_rank(), &prop);
    // The model and its activations live on the GPU: judge a run's size by its memory.
    set_device_memory((double)prop.totalGlobalMem, std::string("the GPU (") + prop.name + ")");
    // Free memory at start (another process may hold some); the run's own
    // peak is the "memory" line at the end.
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (c.rank() == 0)
      std::printf("gpu     %s, %.1f GiB free%s\n", gpu.c_str(), free_b / 1073741824.0,
                  c.size() > 1 ? " (rank 0; one GPU per rank)" : "");
  };
  // GPU-only: the CPU trainer's gradients are deterministic already.
  bool deterministic = false, graphs = false;
  p.add_flags = [&deterministic, &graphs](Flags& f) {
    f.section("GPU");
    f.add("deterministic", &deterministic,
          "bit-reproducible gradients: no float atomics (sorted embedding backward); slower");
    f.add("cuda-graph", &graphs,
          "launch each micro-batch's forward and backward as one CUDA graph (standard, looped, ponder, pause, cyb, "
          "ponderlm2; cuda/step_graph.h)");
  };
  p.configure_backend = [&deterministic, &graphs](CudaBackend& be) {
    be.set_deterministic(deterministic);
    be.set_step_graphs(graphs);
  };
  p.describe_backend = [](CudaBackend& be) {
    std::printf("gemm    %s%s%s\n", cuda::gemm_precision_name(be.gemm()), be.deterministic() ? ", deterministic" : "",
                be.step_graphs() ? ", CUDA graphs" : "");
  };
  p.report_backend = [](CudaBackend& be) {
    if (const StepGraph::Stats* g = be.graph_stats())
      std::printf("graphs  %lld micro-batches launched as CUDA graphs of %zu nodes; %lld built, %lld kernel and %lld "
                  "copy parameter updates\n",
                  g->launches, g->nodes, g->builds, g->kernel_updates, g->copy_updates);
  };
#ifdef ADA_NCCL
  p.name = "train_gpu_nccl";
  p.start = [](int* argc, char*** argv) -> std::unique_ptr<Communicator> {
    return std::make_unique<MpiCommunicator>(argc, argv);
  };
  p.attach = [](CudaBackend& be, std::unique_ptr<Communicator> mpi) -> std::unique_ptr<Communicator> {
    return std::make_unique<NcclCommunicator>(std::move(mpi), be.stream);
  };
#else
  p.name = "train_gpu";
  p.mpi_program = "train_gpu_nccl (make train_gpu_nccl, needs NCCL and OpenMPI)";
#endif
  return train_main(argc, argv, p);
}
