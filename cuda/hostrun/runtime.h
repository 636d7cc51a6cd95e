// The CUDA runtime API subset for the host runner: errors, device memory,
// copies, streams, events, device queries and kernel attributes.
//
// Device memory is host memory. cudaMalloc returns 256-byte aligned memory
// filled with 0xff bytes (uninitialised device memory reads as NaN / -1, not as
// a convenient zero), each allocation its own heap block. Without
// AddressSanitizer the block has 256 guard bytes of 0xff before and after the
// memory asked for: a kernel that reads past either end reads NaN / -1, and
// one that writes there is reported when its launch returns (check_guards:
// an ada::Error naming the block and the launch's pointer argument into it;
// the guard is restored). Under ASan the block is exactly the size asked for,
// so that ASan's redzone starts right at the end and reports reads too. It
// remembers every allocation, so that a copy that runs
// past the end of an allocation, or names a host pointer where a device pointer
// belongs (swapped directions), fails with cudaErrorInvalidValue instead of
// corrupting memory. Everything is synchronous: a stream is only a handle, and
// work "on" any stream has finished when the call returns (no overlap, no
// concurrency between streams).
//
// The runner presents itself as one device (cudaGetDeviceCount gives 1) named
// "ada host runner (CPU)" with compute capability 9.0, so host code that picks a
// device or checks the architecture takes the same path as on an H100/H200.
#pragma once
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "hostrun/vector_types.h"

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  // What a faulting kernel leaves behind (the runner reports its faults as
  // exceptions at the launch instead; these exist so that code written for
  // the GPU compiles and its error paths can be tested).
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchTimeout = 702,
  cudaErrorAssert = 710,
  cudaErrorHardwareStackError = 714,
  cudaErrorIllegalInstruction = 715,
  cudaErrorMisalignedAddress = 716,
  cudaErrorInvalidAddressSpace = 717,
  cudaErrorInvalidPc = 718,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorUnknown = 999,
};
using cudaError = cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

struct CUstream_st;
struct CUevent_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
constexpr unsigned cudaStreamDefault = 0;
constexpr unsigned cudaStreamNonBlocking = 1;

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

// The fields of cudaDeviceProp that host code commonly reads.
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  size_t sharedMemPerMultiprocessor;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int multiProcessorCount;
  int maxThreadsPerMultiProcessor;
  int major;
  int minor;
};

const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();   // returns and clears the last error
cudaError_t cudaPeekAtLastError();  // returns it without clearing

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);

cudaError_t cudaMalloc(void** ptr, size_t bytes);
template <typename T>
cudaError_t cudaMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
template <typename T>
cudaError_t cudaMallocHost(T** ptr, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value);
template <typename R, typename... P>
cudaError_t cudaFuncSetAttribute(R (*func)(P...), cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value);
}

// ---- CUDA graphs (cuda/hostrun/graph.cpp) -------------------------------------
// Explicitly built graphs whose nodes form one chain (each node depends on the
// one added before it), as ada::StepGraph builds them: kernel, memset, 1-D
// memcpy and host nodes. As in CUDA, a node copies its parameters when it is added (or
// set), an executable graph copies the graph when it is instantiated, and a
// memcpy node reads its source when the graph runs, not before. Launching an
// executable graph runs its nodes in order before returning.
namespace ada::hostrun {
// What runs a kernel node: the real API gets the kernel's arguments as untyped
// pointers, which the runner cannot call a C++ function with, so the node
// parameters also carry this typed copy (cudaKernelNodeParams::hostrun_kernel,
// filled in by ada::KernelArgsOf, cuda/launch.h).
struct NodeKernel {
  virtual ~NodeKernel() = default;
  virtual std::unique_ptr<NodeKernel> clone() const = 0;
  virtual void run(dim3 grid, dim3 block, size_t shmem) const = 0;
};
// A stream being recorded for a graph: the runtime refuses work queued on it
// directly (memset, memcpy, event record, synchronize) and any synchronous
// copy or memset, as CUDA does for a capturing stream.
void set_stream_recording(cudaStream_t stream, bool on);
bool stream_recording(cudaStream_t stream);
// The checked copy and memset of cudaMemcpy/cudaMemset, without the refusal
// while a stream records: what a graph's memcpy and memset nodes run.
cudaError_t copy_for_graph(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t set_for_graph(void* ptr, int value, size_t bytes);
// After a kernel launch: throws ada::Error if a guard byte of any live device
// allocation was written (restoring it first), naming the block and which of
// the launch's pointer arguments (`args`, nargs of them, null for the
// non-pointers) points into it. A no-op under ASan, which has no guards.
void check_guards(const void* const* args, size_t nargs);
}  // namespace ada::hostrun

struct cudaKernelNodeParams {
  void* func;
  dim3 gridDim;
  dim3 blockDim;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
  const ada::hostrun::NodeKernel* hostrun_kernel;  // the runner's own field (see NodeKernel)
};
struct cudaMemsetParams {
  void* dst;
  size_t pitch;
  unsigned int value;
  unsigned int elementSize;
  size_t width;
  size_t height;
};
using cudaHostFn_t = void (*)(void* user_data);
struct cudaHostNodeParams {
  cudaHostFn_t fn;
  void* userData;
};
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;
using cudaGraphNode_t = CUgraphNode_st*;

cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                   size_t ndeps, const cudaKernelNodeParams* params);
cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                   size_t ndeps, const cudaMemsetParams* params);
cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                     size_t ndeps, void* dst, const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                 size_t ndeps, const cudaHostNodeParams* params);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const cudaKernelNodeParams* params);
cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const cudaMemsetParams* params);
cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst,
                                               const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                           const cudaHostNodeParams* params);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);

namespace ada::hostrun {
// Every live cudaMalloc allocation as (base, bytes), in address order: the
// memory the race check snapshots and compares (racecheck.h).
std::vector<std::pair<void*, size_t>> device_allocations();
// True when [p, p + bytes) lies inside one live cudaMalloc allocation ("global
// memory"). The warp-level primitives (mma.h, async_copy.h) use it to refuse
// global addresses where PTX wants shared memory, and source ranges of
// cp.async that run outside every allocation.
bool in_device_memory(const void* p, size_t bytes);
}  // namespace ada::hostrun
