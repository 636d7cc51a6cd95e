#include "nccl_communicator.h"

#include <nccl.h>

#include <cstdlib>

#include "core/common.h"

namespace ada {

namespace {

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail(std::string("NCCL ") + what + ": " + ncclGetErrorString(r));
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<Communicator> host, cudaStream_t stream)
    : host_(std::move(host)), stream_(stream) {
  ncclUniqueId id;
  if (host_->rank() == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  host_->broadcast_host(&id, sizeof id, 0);  // the bootstrap: rank 0's id to every rank
  nccl_check(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) ncclCommDestroy(comm_);
}

std::string NcclCommunicator::describe() const {
  int version = 0;
  ncclGetVersion(&version);
  return "NCCL " + std::to_string(version) + " over " + host_->describe();
}

void NcclCommunicator::sum_buffer(float* data, size_t n) {
  nccl_check(ncclAllReduce(data, data, n, ncclFloat, ncclSum, comm_, stream_), "all-reduce");
}
void NcclCommunicator::sum_buffer(double* data, size_t n) {
  nccl_check(ncclAllReduce(data, data, n, ncclDouble, ncclSum, comm_, stream_), "all-reduce");
}
void NcclCommunicator::broadcast_buffer(float* data, size_t n, int root) {
  nccl_check(ncclBroadcast(data, data, n, ncclFloat, root, comm_, stream_), "broadcast");
}
void NcclCommunicator::broadcast_buffer(double* data, size_t n, int root) {
  nccl_check(ncclBroadcast(data, data, n, ncclDouble, root, comm_, stream_), "broadcast");
}

void NcclCommunicator::abort(int code) {
  if (comm_) ncclCommAbort(comm_), comm_ = nullptr;  // frees kernels that wait for a peer
  host_->abort(code);
  std::_Exit(code);  // host_->abort does not return; this is for the compiler
}

}  // namespace ada
