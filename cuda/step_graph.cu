// StepGraph (step_graph.h): recording a stream's work, building and updating
// executable CUDA graphs from it, and the pinned upload buffers they read.
#include "step_graph.h"

#include <algorithm>
#include <functional>
#include <string>

namespace ada {

namespace {
constexpr size_t kStageBlock = size_t(4) << 20;  // bytes of a new pinned upload block (or the upload, if larger)
constexpr size_t kAlign = 256;
}  // namespace

StepGraph::StepGraph(cudaStream_t stream) : stream_(stream) {
  for (auto& s : staging_) CUDA_CHECK(cudaEventCreate(&s.done));
}

StepGraph::~StepGraph() {
  // No throwing here (it may run while an error unwinds); the backend's own
  // destructor reports a failing stream.
  if (recording_) abandon();
  cudaStreamSynchronize(stream_);
  for (auto& e : cache_) release(e);
  for (void* p : deferred_frees_) cudaFree(p);
  for (auto& s : staging_) {
    for (auto& b : s.blocks) cudaFreeHost(b.p);
    cudaEventDestroy(s.done);
  }
}

void StepGraph::set_recording(bool on) {
  recording_ = on;
  if (on) {
    g_recording.stream = stream_, g_recording.recorder = this;
  } else if (g_recording.recorder == this) {
    g_recording = Recording{};
  }
#if !defined(__CUDACC__)
  hostrun::set_stream_recording(stream_, on);
#endif
}

void StepGraph::begin() {
  if (recording_) fail("StepGraph::begin: a step is already being recorded");
  if (g_recording.recorder) fail("StepGraph::begin: another stream is being recorded on this thread");
  // This step's uploads reuse the buffers of the step before last: wait for
  // the graph that read them (normally finished long ago).
  Staging& s = staging_[parity_];
  if (s.pending) CUDA_CHECK(cudaEventSynchronize(s.done));
  s.pending = false;
  for (auto& b : s.blocks) b.used = 0;
  ops_.clear();
  set_recording(true);
}

void StepGraph::abandon() {
  ops_.clear();
  set_recording(false);
  // Nothing recorded will run; what was queued before begin() may still use
  // the buffers freed since.
  if (!deferred_frees_.empty() && cudaStreamSynchronize(stream_) == cudaSuccess) {
    for (void* p : deferred_frees_) cudaFree(p);
    deferred_frees_.clear();
  }
}

void* StepGraph::stage(size_t bytes) {
  if (!recording_) fail("StepGraph::stage: no step is being recorded");
  const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
  Staging& s = staging_[parity_];
  for (auto& b : s.blocks)
    if (b.cap - b.used >= need) {
      void* p = b.p + b.used;
      b.used += need;
      return p;
    }
  Staging::Block b;
  b.cap = std::max(need, kStageBlock);
  CUDA_CHECK(cudaMallocHost(&b.p, b.cap));
  b.used = need;
  s.blocks.push_back(b);
  return b.p;
}

void StepGraph::defer_free(void* p) { deferred_frees_.push_back(p); }

void StepGraph::kernel(const void* func, dim3 grid, dim3 block, const LaunchSite& site,
                       std::unique_ptr<KernelArgs> args) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x * block.y * block.z == 0)
    fail("CUDA graph: an empty launch recorded by " + site.describe());
  Op o;
  o.kind = Op::Kernel;
  o.func = func, o.grid = grid, o.block = block, o.shmem = site.shmem;
  o.args = std::move(args);
  ops_.push_back(std::move(o));
}

void StepGraph::memset(void* dst, int value, size_t bytes) {
  Op o;
  o.kind = Op::Memset;
  o.dst = dst, o.value = value, o.bytes = bytes;
  ops_.push_back(std::move(o));
}

void StepGraph::memcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDefault)
    fail("CUDA graph: a copy to the host was queued while a step was recorded (--cuda-graph 1 cannot record a step "
         "that reads results back)");
  Op o;
  o.kind = Op::Memcpy;
  o.dst = dst, o.src = src, o.bytes = bytes, o.copy_kind = kind;
  ops_.push_back(std::move(o));
}

void StepGraph::host(std::function<void()> fn) {
  Op o;
  o.kind = Op::Host;
  o.fn = std::make_shared<std::function<void()>>(std::move(fn));
  ops_.push_back(std::move(o));
}

// Nodes an executable graph can be updated between: the kind, the kernel and
// its launch shape, the copy's size and direction. Pointers and argument
// values may differ (they are set before the launch).
bool StepGraph::same_shape(const Op& a, const Op& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Op::Kernel:
      return a.func == b.func && a.grid.x == b.grid.x && a.grid.y == b.grid.y && a.grid.z == b.grid.z &&
             a.block.x == b.block.x && a.block.y == b.block.y && a.block.z == b.block.z && a.shmem == b.shmem;
    case Op::Memset: return a.bytes == b.bytes;
    case Op::Memcpy: return a.bytes == b.bytes && a.copy_kind == b.copy_kind;
    case Op::Host: return true;
  }
  return false;
}

namespace {
cudaKernelNodeParams kernel_params(const void* func, dim3 grid, dim3 block, size_t shmem, KernelArgs& args) {
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(func);
  p.gridDim = grid, p.blockDim = block;
  p.sharedMemBytes = static_cast<unsigned>(shmem);
  p.kernelParams = args.pointers();
  p.extra = nullptr;
#if !defined(__CUDACC__)
  p.hostrun_kernel = &args;
#endif
  return p;
}
void call_host_fn(void* fn) { (*static_cast<std::function<void()>*>(fn))(); }
cudaHostNodeParams host_params(std::function<void()>& fn) {
  cudaHostNodeParams p{};
  p.fn = call_host_fn, p.userData = &fn;
  return p;
}
cudaMemsetParams memset_params(void* dst, int value, size_t bytes) {
  cudaMemsetParams p{};
  p.dst = dst, p.value = static_cast<unsigned>(value & 0xff), p.elementSize = 1, p.width = bytes, p.height = 1;
  p.pitch = 0;
  return p;
}
}  // namespace

void StepGraph::build(Exec& e) {
  CUDA_CHECK(cudaGraphCreate(&e.graph, 0));
  e.nodes.assign(e.ops.size(), nullptr);
  for (size_t i = 0; i < e.ops.size(); i++) {
    Op& o = e.ops[i];
    const cudaGraphNode_t* dep = i ? &e.nodes[i - 1] : nullptr;
    const size_t ndep = i ? 1 : 0;
    switch (o.kind) {
      case Op::Kernel: {
        const cudaKernelNodeParams p = kernel_params(o.func, o.grid, o.block, o.shmem, *o.args);
        CUDA_CHECK(cudaGraphAddKernelNode(&e.nodes[i], e.graph, dep, ndep, &p));
        break;
      }
      case Op::Memset: {
        const cudaMemsetParams p = memset_params(o.dst, o.value, o.bytes);
        CUDA_CHECK(cudaGraphAddMemsetNode(&e.nodes[i], e.graph, dep, ndep, &p));
        break;
      }
      case Op::Memcpy:
        CUDA_CHECK(cudaGraphAddMemcpyNode1D(&e.nodes[i], e.graph, dep, ndep, o.dst, o.src, o.bytes, o.copy_kind));
        break;
      case Op::Host: {
        const cudaHostNodeParams p = host_params(*o.fn);
        CUDA_CHECK(cudaGraphAddHostNode(&e.nodes[i], e.graph, dep, ndep, &p));
        break;
      }
    }
  }
  CUDA_CHECK(cudaGraphInstantiate(&e.exec, e.graph, 0));
  stats_.builds++;
}

// Sets every node whose recorded values differ from what the executable graph
// holds, then keeps the recording as what it holds.
void StepGraph::update(Exec& e) {
  for (size_t i = 0; i < ops_.size(); i++) {
    Op& now = ops_[i];
    Op& was = e.ops[i];
    switch (now.kind) {
      case Op::Kernel:
        if (!now.args->same_values(*was.args)) {
          const cudaKernelNodeParams p = kernel_params(now.func, now.grid, now.block, now.shmem, *now.args);
          CUDA_CHECK(cudaGraphExecKernelNodeSetParams(e.exec, e.nodes[i], &p));
          stats_.kernel_updates++;
        }
        break;
      case Op::Memset:
        if (now.dst != was.dst || now.value != was.value) {
          const cudaMemsetParams p = memset_params(now.dst, now.value, now.bytes);
          CUDA_CHECK(cudaGraphExecMemsetNodeSetParams(e.exec, e.nodes[i], &p));
          stats_.copy_updates++;
        }
        break;
      case Op::Memcpy:
        if (now.dst != was.dst || now.src != was.src) {
          CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams1D(e.exec, e.nodes[i], now.dst, now.src, now.bytes,
                                                        now.copy_kind));
          stats_.copy_updates++;
        }
        break;
      case Op::Host: {  // a new function object every step
        const cudaHostNodeParams p = host_params(*now.fn);
        CUDA_CHECK(cudaGraphExecHostNodeSetParams(e.exec, e.nodes[i], &p));
        break;
      }
    }
    was = std::move(now);
  }
}

void StepGraph::release(Exec& e) {
  if (e.exec) cudaGraphExecDestroy(e.exec);
  if (e.graph) cudaGraphDestroy(e.graph);
  e.exec = nullptr, e.graph = nullptr;
}

void StepGraph::end() {
  if (!recording_) fail("StepGraph::end: no step is being recorded");
  set_recording(false);
  stats_.launches++;
  if (ops_.empty()) return;  // nothing was queued
  Exec* hit = nullptr;
  for (auto& e : cache_) {
    if (e.ops.size() != ops_.size()) continue;
    bool same = true;
    for (size_t i = 0; i < ops_.size() && same; i++) same = same_shape(e.ops[i], ops_[i]);
    if (same) {
      hit = &e;
      break;
    }
  }
  if (hit) {
    update(*hit);
  } else {
    if (cache_.size() < kCache) {
      cache_.emplace_back();
      hit = &cache_.back();
    } else {
      hit = &*std::min_element(cache_.begin(), cache_.end(),
                               [](const Exec& a, const Exec& b) { return a.last_used < b.last_used; });
      CUDA_CHECK(cudaStreamSynchronize(stream_));  // a graph being replaced may still run
      release(*hit);
    }
    hit->ops = std::move(ops_);
    build(*hit);
  }
  ops_.clear();
  hit->last_used = stats_.launches;
  stats_.nodes = hit->ops.size();
  CUDA_CHECK(cudaGraphLaunch(hit->exec, stream_));
  Staging& s = staging_[parity_];
  CUDA_CHECK(cudaEventRecord(s.done, stream_));
  s.pending = true;
  parity_ ^= 1;
  if (!deferred_frees_.empty()) {  // rare: memory released while the step grew
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (void* p : deferred_frees_) CUDA_CHECK(cudaFree(p));
    deferred_frees_.clear();
  }
}

}  // namespace ada
