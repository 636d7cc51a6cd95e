// CUDA graphs for the host runner (declared in runtime.h): explicitly built
// chains of kernel, memset, 1-D memcpy and host nodes, instantiated and launched.
//
// What is checked, as CUDA would: a node depends on exactly the node added
// before it (the only shape ada::StepGraph builds; anything else is
// cudaErrorNotSupported here, not silently reordered), node parameters are
// copied when a node is added or set (a caller changing its arguments later
// changes nothing), an executable graph is a snapshot of its graph, setting
// a node's parameters in an executable graph cannot change the node's kind,
// kernel or launch shape, and a memcpy node reads its source when the graph
// runs. A launch runs every node in order before it returns (the runner is
// synchronous).
#include <cstring>
#include <memory>
#include <vector>

#include "hostrun/runtime.h"

struct CUgraphNode_st {
  enum Kind { Kernel, Memset, Memcpy, Host } kind = Kernel;
  size_t index = 0;  // position in its graph's chain
  // Kernel
  const void* func = nullptr;
  dim3 grid, block;
  size_t shmem = 0;
  std::shared_ptr<const ada::hostrun::NodeKernel> kernel;
  // Memset
  cudaMemsetParams set{};
  // Memcpy
  void* dst = nullptr;
  const void* src = nullptr;
  size_t count = 0;
  cudaMemcpyKind copy_kind = cudaMemcpyDefault;
  // Host
  cudaHostNodeParams host{};
};

struct CUgraph_st {
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};

struct CUgraphExec_st {
  const CUgraph_st* from = nullptr;   // the graph it was instantiated from (nodes are named by its handles)
  std::vector<CUgraphNode_st> nodes;  // copies, in chain order
};

namespace {

cudaError_t bad(cudaError_t e) { return e; }

// A new node of `graph` that must depend on exactly the last node added.
cudaError_t append(cudaGraphNode_t* out, cudaGraph_t graph, const cudaGraphNode_t* deps, size_t ndeps,
                   std::unique_ptr<CUgraphNode_st> n) {
  if (!out || !graph) return bad(cudaErrorInvalidValue);
  if (graph->nodes.empty() ? ndeps != 0 : (ndeps != 1 || !deps || deps[0] != graph->nodes.back().get()))
    return bad(cudaErrorNotSupported);
  n->index = graph->nodes.size();
  *out = n.get();
  graph->nodes.push_back(std::move(n));
  return cudaSuccess;
}

bool valid_memset(const cudaMemsetParams* p) {
  return p && p->dst && (p->elementSize == 1 || p->elementSize == 2 || p->elementSize == 4) && p->height == 1;
}

// The executable copy of `node` (a node of the graph `exec` was made from).
CUgraphNode_st* exec_node(cudaGraphExec_t exec, cudaGraphNode_t node) {
  if (!exec || !node || node->index >= exec->nodes.size() || exec->from->nodes[node->index].get() != node)
    return nullptr;
  return &exec->nodes[node->index];
}

}  // namespace

cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  if (!graph || flags != 0) return bad(cudaErrorInvalidValue);
  *graph = new CUgraph_st;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                   size_t ndeps, const cudaKernelNodeParams* p) {
  if (!p || !p->func || !p->hostrun_kernel || p->extra) return bad(cudaErrorInvalidValue);
  auto n = std::make_unique<CUgraphNode_st>();
  n->kind = CUgraphNode_st::Kernel;
  n->func = p->func, n->grid = p->gridDim, n->block = p->blockDim, n->shmem = p->sharedMemBytes;
  n->kernel = p->hostrun_kernel->clone();  // the argument values, copied now
  return append(node, graph, deps, ndeps, std::move(n));
}

cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                   size_t ndeps, const cudaMemsetParams* p) {
  if (!valid_memset(p)) return bad(cudaErrorInvalidValue);
  auto n = std::make_unique<CUgraphNode_st>();
  n->kind = CUgraphNode_st::Memset;
  n->set = *p;
  return append(node, graph, deps, ndeps, std::move(n));
}

cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                     size_t ndeps, void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (!dst || !src) return bad(cudaErrorInvalidValue);
  auto n = std::make_unique<CUgraphNode_st>();
  n->kind = CUgraphNode_st::Memcpy;
  n->dst = dst, n->src = src, n->count = count, n->copy_kind = kind;
  return append(node, graph, deps, ndeps, std::move(n));
}

cudaError_t cudaGraphAddHostNode(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* deps,
                                 size_t ndeps, const cudaHostNodeParams* p) {
  if (!p || !p->fn) return bad(cudaErrorInvalidValue);
  auto n = std::make_unique<CUgraphNode_st>();
  n->kind = CUgraphNode_st::Host;
  n->host = *p;
  return append(node, graph, deps, ndeps, std::move(n));
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  if (!exec || !graph || flags != 0) return bad(cudaErrorInvalidValue);
  auto* e = new CUgraphExec_st;
  e->from = graph;
  for (const auto& n : graph->nodes) e->nodes.push_back(*n);
  *exec = e;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                             const cudaKernelNodeParams* p) {
  CUgraphNode_st* n = exec_node(exec, node);
  if (!n || !p || !p->hostrun_kernel || p->extra) return bad(cudaErrorInvalidValue);
  // The kernel and its launch shape are fixed in an instantiated graph.
  if (n->kind != CUgraphNode_st::Kernel || p->func != n->func) return bad(cudaErrorInvalidValue);
  n->grid = p->gridDim, n->block = p->blockDim, n->shmem = p->sharedMemBytes;
  n->kernel = p->hostrun_kernel->clone();
  return cudaSuccess;
}

cudaError_t cudaGraphExecMemsetNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node, const cudaMemsetParams* p) {
  CUgraphNode_st* n = exec_node(exec, node);
  if (!n || n->kind != CUgraphNode_st::Memset || !valid_memset(p)) return bad(cudaErrorInvalidValue);
  n->set = *p;
  return cudaSuccess;
}

cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t exec, cudaGraphNode_t node, void* dst,
                                               const void* src, size_t count, cudaMemcpyKind kind) {
  CUgraphNode_st* n = exec_node(exec, node);
  if (!n || n->kind != CUgraphNode_st::Memcpy || kind != n->copy_kind || !dst || !src)
    return bad(cudaErrorInvalidValue);
  n->dst = dst, n->src = src, n->count = count;
  return cudaSuccess;
}

cudaError_t cudaGraphExecHostNodeSetParams(cudaGraphExec_t exec, cudaGraphNode_t node,
                                           const cudaHostNodeParams* p) {
  CUgraphNode_st* n = exec_node(exec, node);
  if (!n || n->kind != CUgraphNode_st::Host || !p || !p->fn) return bad(cudaErrorInvalidValue);
  n->host = *p;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return bad(cudaErrorInvalidValue);
  if (ada::hostrun::stream_recording(stream)) return bad(cudaErrorStreamCaptureUnsupported);
  for (const CUgraphNode_st& n : exec->nodes) {
    cudaError_t e = cudaSuccess;
    switch (n.kind) {
      case CUgraphNode_st::Kernel: n.kernel->run(n.grid, n.block, n.shmem); break;  // throws on a fault
      case CUgraphNode_st::Memset: {
        const size_t bytes = n.set.width * n.set.elementSize;
        if (n.set.elementSize == 1) {
          e = ada::hostrun::set_for_graph(n.set.dst, static_cast<int>(n.set.value & 0xff), bytes);
        } else {  // 2- or 4-byte elements: the low bytes of value, repeated
          if (!ada::hostrun::in_device_memory(n.set.dst, bytes)) return bad(cudaErrorInvalidValue);
          auto* d = static_cast<unsigned char*>(n.set.dst);
          for (size_t i = 0; i < n.set.width; i++) std::memcpy(d + i * n.set.elementSize, &n.set.value, n.set.elementSize);
        }
        break;
      }
      case CUgraphNode_st::Memcpy: e = ada::hostrun::copy_for_graph(n.dst, n.src, n.count, n.copy_kind); break;
      case CUgraphNode_st::Host: n.host.fn(n.host.userData); break;  // may throw (a failed check)
    }
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}
