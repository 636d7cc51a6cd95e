#include "dist/mpi/mpi_communicator.h"

// Only MPI's C interface (its deprecated C++ bindings do not compile cleanly with -Wextra).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "core/common.h"

namespace ada {

namespace {

// MPI counts are int: a buffer larger than INT_MAX elements goes in pieces.
constexpr size_t kChunk = (size_t)1 << 30;

template <class T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <>
MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <>
MPI_Datatype mpi_type<char>() { return MPI_BYTE; }

template <class T>
void allreduce_sum(T* data, size_t n) {
  for (size_t i = 0; i < n; i += kChunk)
    MPI_Allreduce(MPI_IN_PLACE, data + i, (int)std::min(kChunk, n - i), mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD);
}

template <class T>
void bcast(T* data, size_t n, int root) {
  for (size_t i = 0; i < n; i += kChunk)
    MPI_Bcast(data + i, (int)std::min(kChunk, n - i), mpi_type<T>(), root, MPI_COMM_WORLD);
}

}  // namespace

MpiCommunicator::MpiCommunicator(int* argc, char*** argv) {
  int ready = 0;
  MPI_Initialized(&ready);
  if (!ready) MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // The ranks that share this machine's memory: the local rank picks the GPU.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_free(&node);
}

MpiCommunicator::~MpiCommunicator() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

std::string MpiCommunicator::describe() const {
  return "MPI, " + std::to_string(size_) + (size_ == 1 ? " rank" : " ranks");
}

void MpiCommunicator::sum_buffer(float* data, size_t n) { allreduce_sum(data, n); }
void MpiCommunicator::sum_buffer(double* data, size_t n) { allreduce_sum(data, n); }
void MpiCommunicator::broadcast_buffer(float* data, size_t n, int root) { bcast(data, n, root); }
void MpiCommunicator::broadcast_buffer(double* data, size_t n, int root) { bcast(data, n, root); }
void MpiCommunicator::sum_host(double* data, size_t n) { allreduce_sum(data, n); }

std::vector<double> MpiCommunicator::gather_host(const std::vector<double>& local, std::vector<int>* counts) {
  check(local.size() <= (size_t)INT_MAX, "gather_host: too many values on one rank");
  std::vector<int> cnt(size_), off(size_);
  const int mine = (int)local.size();
  MPI_Allgather(&mine, 1, MPI_INT, cnt.data(), 1, MPI_INT, MPI_COMM_WORLD);
  size_t total = 0;
  for (int r = 0; r < size_; r++) {
    check(total <= (size_t)INT_MAX, "gather_host: too many values over the ranks");
    off[r] = (int)total;
    total += (size_t)cnt[r];
  }
  std::vector<double> all(total);
  MPI_Allgatherv(local.data(), mine, MPI_DOUBLE, all.data(), cnt.data(), off.data(), MPI_DOUBLE, MPI_COMM_WORLD);
  if (counts) *counts = cnt;
  return all;
}

void MpiCommunicator::broadcast_host(void* data, size_t bytes, int root) {
  bcast(static_cast<char*>(data), bytes, root);
}

void MpiCommunicator::barrier() { MPI_Barrier(MPI_COMM_WORLD); }

void MpiCommunicator::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
}

}  // namespace ada
