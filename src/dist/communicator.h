// The processes of a data-parallel run and the collective operations the
// trainer and the methods need from them (docs/scaling.md):
//   rank, size          this process's index and the number of processes
//   sum_buffer          in-place sum of the contiguous gradient buffer over
//                       every rank (backend memory: host on the CPU, device
//                       memory with NCCL)
//   broadcast_buffer    rank `root`'s buffer to every rank (backend memory)
//   sum_host            in-place sum of a few host doubles (step statistics)
//   gather_host         every rank's host doubles, concatenated in rank order
//                       (the per-step selections of the adaptive methods)
//   broadcast_host, barrier
//   abort               end every process of the run at once (a failed rank)
// Every rank must make the same sequence of collective calls. Three
// implementations: SingleProcess below (no library), MpiCommunicator
// (dist/mpi_communicator.h, the train_cpu_mpi program) and NcclCommunicator
// (cuda/nccl_communicator.h, train_gpu_nccl), built only when their library
// is installed.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ada {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The rank's index among the ranks of its machine (picks its GPU).
  virtual int local_rank() const = 0;
  // What the run is, for the start-up lines: "1 process", "MPI, 4 ranks".
  virtual std::string describe() const = 0;

  virtual void sum_buffer(float* data, size_t n) = 0;
  virtual void sum_buffer(double* data, size_t n) = 0;
  virtual void broadcast_buffer(float* data, size_t n, int root) = 0;
  virtual void broadcast_buffer(double* data, size_t n, int root) = 0;

  virtual void sum_host(double* data, size_t n) = 0;
  // counts (optional): how many values came from each rank.
  virtual std::vector<double> gather_host(const std::vector<double>& local, std::vector<int>* counts = nullptr) = 0;
  virtual void broadcast_host(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every process of the run with `code` (MPI_Abort); never returns.
  [[noreturn]] virtual void abort(int code) = 0;
};

// One process: every collective is the identity.
class SingleProcess : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  std::string describe() const override { return "1 process"; }
  void sum_buffer(float*, size_t) override {}
  void sum_buffer(double*, size_t) override {}
  void broadcast_buffer(float*, size_t, int) override {}
  void broadcast_buffer(double*, size_t, int) override {}
  void sum_host(double*, size_t) override {}
  std::vector<double> gather_host(const std::vector<double>& local, std::vector<int>* counts) override {
    if (counts) *counts = {(int)local.size()};
    return local;
  }
  void broadcast_host(void*, size_t, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(int code) override;
};

// The communicator of code that was given none (tests, eval): one process.
Communicator& single_process();

// A program built without MPI refuses to run as one of several processes that
// mpirun started (each would train alone and all would write the same files):
// throws naming `mpi_program`, the build that can. Reads the launcher's
// environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE...).
void check_not_under_mpirun(const std::string& program, const std::string& mpi_program);

}  // namespace ada
