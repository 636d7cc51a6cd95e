// StepGraph: one training micro-batch (forward and backward) replayed as a
// CUDA graph instead of a few hundred separate launches (train_gpu
// --cuda-graph 1).
//
//   graph.begin();   // the stream's work is recorded from here, not started
//   ... the method's forward and backward, unchanged host code ...
//   graph.end();     // an executable graph is built, or updated, and launched
//
// Every step runs the same host code as without graphs: the method plans its
// passes, uploads its batch and queues its kernels through ada::launch,
// ada::memset_async and ada::memcpy_async (cuda/launch.h), which hand them to
// the recorder while it records. What graphs save is the per-kernel launch
// cost on the CPU and the gaps between kernels on the GPU: end() compares
// the recording with the executable graphs it already has (same nodes in the
// same order: kernels, grids, blocks, shared memory, copy sizes) and, when one
// matches, only sets the parameters that changed (a pointer that moved, an
// upload's source) and launches it; a step whose shape is new builds and
// keeps a new one (up to kCache of them: a method whose pass count varies
// between a few values reuses one per value).
//
// Uploads (the batch, pass plans, KV-slot metadata) go through the
// recorder's own pinned buffers, two sets used by alternate steps: a graph's
// memcpy nodes read their host sources when the graph runs, so the host
// writes step k + 1's uploads while step k's graph may still be reading
// step k's, and waits, before writing a set again, for the graph that last
// read it.
//
// A step may not read the GPU's results while it is recorded (nothing has
// run yet): CudaBackend refuses downloads and synchronisation then, with an
// error naming --cuda-graph, and methods that decide on the host during
// their forward (adaponder, latent_cot, tah) say so (Method::fixed_launches).
// A buffer freed while recording (the workspace or the arena growing) is
// freed after the graph that may use it has run.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "launch.h"

namespace ada {

class StepGraph final : public StreamRecorder {
 public:
  static constexpr size_t kCache = 4;  // executable graphs kept (least recently used replaced)

  explicit StepGraph(cudaStream_t stream);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  void begin();
  void end();
  // Drops a recording that will not be launched (an error unwound through it).
  void abandon();
  bool recording() const { return recording_; }
  size_t recorded() const { return ops_.size(); }  // nodes recorded since begin()

  // Pinned host memory for one upload of the step being recorded; valid until
  // the graph that reads it has run.
  void* stage(size_t bytes);
  // cudaFree after the graph of this recording has run.
  void defer_free(void* p);

  struct Stats {
    long long launches = 0;        // graphs launched (one per end())
    long long builds = 0;          // executable graphs built (a shape not seen before, or evicted)
    long long kernel_updates = 0;  // kernel nodes whose arguments were set before a launch
    long long copy_updates = 0;    // memcpy / memset nodes set before a launch
    size_t nodes = 0;              // nodes in the last graph launched
  };
  const Stats& stats() const { return stats_; }

  // StreamRecorder: what ada::launch / memset_async / memcpy_async hand over.
  void kernel(const void* func, dim3 grid, dim3 block, const LaunchSite& site,
              std::unique_ptr<KernelArgs> args) override;
  void memset(void* dst, int value, size_t bytes) override;
  void memcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) override;
  void host(std::function<void()> fn) override;

 private:
  struct Op {
    enum Kind { Kernel, Memset, Memcpy, Host } kind = Kernel;
    // Kernel
    const void* func = nullptr;
    dim3 grid, block;
    size_t shmem = 0;
    std::unique_ptr<KernelArgs> args;
    // Memset (value) and Memcpy (src, copy_kind): dst and bytes for both
    void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
    int value = 0;
    cudaMemcpyKind copy_kind = cudaMemcpyDefault;
    // Host: the function a host node calls (shared: its address is the node's argument)
    std::shared_ptr<std::function<void()>> fn;
  };
  struct Exec {
    std::vector<Op> ops;  // what its nodes were last set to
    std::vector<cudaGraphNode_t> nodes;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    long long last_used = 0;
  };
  // One set of upload buffers (pinned blocks, reused in order each step).
  struct Staging {
    struct Block {
      unsigned char* p = nullptr;
      size_t cap = 0, used = 0;
    };
    std::vector<Block> blocks;
    cudaEvent_t done = nullptr;  // recorded after the graph that read this set
    bool pending = false;
  };

  static bool same_shape(const Op& a, const Op& b);
  void build(Exec& e);
  void update(Exec& e);
  void release(Exec& e);
  void set_recording(bool on);

  cudaStream_t stream_;
  bool recording_ = false;
  std::vector<Op> ops_;
  std::vector<Exec> cache_;
  Staging staging_[2];
  int parity_ = 0;
  std::vector<void*> deferred_frees_;
  Stats stats_;
};

}  // namespace ada
