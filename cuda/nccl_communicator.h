// The communicator of train_gpu_nccl: the gradient buffer (device memory)
// goes through NCCL on the backend's stream, so the all-reduce is ordered
// after the backward's kernels and before AdamW's without a host wait; rank,
// size and the host collectives (step statistics, the methods' selections)
// go through the MPI communicator that started the run. NCCL is bootstrapped
// through it, as llm.c does: rank 0 makes the ncclUniqueId and broadcasts it.
// Built only when NCCL and MPI are installed (make train_gpu_nccl).
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "dist/communicator.h"

struct ncclComm;  // nccl.h's ncclComm_t is `struct ncclComm*`

namespace ada {

class NcclCommunicator : public Communicator {
 public:
  // host: the run's MPI communicator (kept); stream: the backend's stream.
  // The current device must be this rank's GPU.
  NcclCommunicator(std::unique_ptr<Communicator> host, cudaStream_t stream);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int local_rank() const override { return host_->local_rank(); }
  std::string describe() const override;

  void sum_buffer(float* data, size_t n) override;
  void sum_buffer(double* data, size_t n) override;
  void broadcast_buffer(float* data, size_t n, int root) override;
  void broadcast_buffer(double* data, size_t n, int root) override;
  void sum_host(double* data, size_t n) override { host_->sum_host(data, n); }
  std::vector<double> gather_host(const std::vector<double>& local, std::vector<int>* counts) override {
    return host_->gather_host(local, counts);
  }
  void broadcast_host(void* data, size_t bytes, int root) override { host_->broadcast_host(data, bytes, root); }
  void barrier() override { host_->barrier(); }
  [[noreturn]] void abort(int code) override;

 private:
  std::unique_ptr<Communicator> host_;
  cudaStream_t stream_;
  ncclComm* comm_ = nullptr;
};

}  // namespace ada
