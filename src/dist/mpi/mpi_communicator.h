// The communicator of a run started by mpirun (Open MPI, or any MPI): every
// collective is one MPI call on MPI_COMM_WORLD. Compiled only into the
// programs built with MPI (train_cpu_mpi, train_gpu_nccl): this folder is
// outside the library's src/<area>/*.cpp, so `make` needs no MPI.
//
// Failures: MPI errors abort the whole run (MPI_ERRORS_ARE_FATAL, MPI's
// default on MPI_COMM_WORLD), and a rank that fails in the program's own code
// calls abort(), which is MPI_Abort: mpirun then ends every other rank within
// a moment, so no rank waits forever in a collective for one that is gone.
#pragma once
#include <memory>

#include "dist/communicator.h"

namespace ada {

class MpiCommunicator : public Communicator {
 public:
  // MPI_Init; MPI_Finalize in the destructor.
  MpiCommunicator(int* argc, char*** argv);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string describe() const override;

  void sum_buffer(float* data, size_t n) override;
  void sum_buffer(double* data, size_t n) override;
  void broadcast_buffer(float* data, size_t n, int root) override;
  void broadcast_buffer(double* data, size_t n, int root) override;
  void sum_host(double* data, size_t n) override;
  std::vector<double> gather_host(const std::vector<double>& local, std::vector<int>* counts) override;
  void broadcast_host(void* data, size_t bytes, int root) override;
  void barrier() override;
  [[noreturn]] void abort(int code) override;

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0;
};

}  // namespace ada
