// ada::launch: the only way kernels are started in this project.
//
//   ada::launch(kernel, grid, block, shmem_bytes, stream, args...);
//
// Under nvcc it is kernel<<<grid, block, shmem_bytes, stream>>>(args...)
// followed by a launch error check (throws ada::Error). With ADA_CUDA_SYNC=1
// in the environment it also waits for the kernel and checks how it ended, so
// a fault (illegal address, device assert) is reported at the launch that
// caused it instead of at a later synchronisation; slow, for debugging.
// Under the host compiler the host runner executes the whole grid on the CPU
// before returning (and throws ada::Error for an invalid launch or a kernel
// fault such as a barrier deadlock). `kernel` is a __global__ function (a
// template kernel is passed with its arguments spelled out: my_kernel<float,
// 4>); the arguments are converted to the kernel's parameter types at the
// call, as CUDA does, and each kernel thread receives its own copy of them.
//
// While a StepGraph (cuda/step_graph.h, train_gpu --cuda-graph 1) records
// the stream, the launch is recorded instead (its arguments copied) and runs
// later as a node of a CUDA graph; memset_async and memcpy_async below do the
// same for memsets and copies.
//
// Every error names the launch: the function that called ada::launch, and
// its file and line. The compiler fills these in at each call site: the
// shared-memory argument converts to a LaunchSite, whose constructor's
// default arguments (__builtin_FUNCTION/FILE/LINE) are evaluated where the
// conversion happens, i.e. at the call (g++ and nvcc both do this).
#pragma once

#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "compat.h"

namespace ada {

// The dynamic shared-memory bytes of a launch, and where the launch is written.
struct LaunchSite {
  size_t shmem;
  const char* function;
  const char* file;
  int line;
  LaunchSite(size_t shmem_bytes, const char* fn = __builtin_FUNCTION(), const char* f = __builtin_FILE(),
             int l = __builtin_LINE())
      : shmem(shmem_bytes), function(fn), file(f), line(l) {}
  // "the kernel launched by rmsnorm_forward (cuda/rmsnorm.cu:42)"
  std::string describe() const {
    return std::string("the kernel launched by ") + function + " (" + file + ":" + std::to_string(line) + ")";
  }
};

// ADA_CUDA_SYNC=1: wait for every kernel and check it (read once).
inline bool sync_every_launch() {
  static const bool on = [] {
    const char* e = std::getenv("ADA_CUDA_SYNC");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

#if !defined(__CUDACC__)
// A kernel argument as an address when it is a pointer to data, else null.
template <typename T>
const void* hostrun_pointer_of(const T& v) {
  if constexpr (std::is_pointer_v<T> && std::is_object_v<std::remove_pointer_t<T>>)
    return const_cast<const void*>(static_cast<const volatile void*>(v));
  else
    return nullptr;
}

#endif

// ---- recording a stream for a CUDA graph (cuda/step_graph.h) -------------
//
// While a StepGraph records a stream, the work queued on it is not started:
// ada::launch, ada::memset_async and ada::memcpy_async hand it to the
// recorder, which later builds (or updates) an executable graph from it. Code
// that queues work must use these three, never <<<...>>>, cudaMemsetAsync or
// cudaMemcpyAsync directly: the host runner refuses direct calls on a
// recording stream (as CUDA refuses them on a capturing one).

// One launch's argument values, copied, behind a type-erased handle: the
// kernel node's parameters. Under the host runner it is also what runs the
// node (hostrun::NodeKernel), since the runner cannot call a kernel through
// untyped argument pointers.
#if defined(__CUDACC__)
struct KernelArgsBase {
  virtual ~KernelArgsBase() = default;
};
#else
using KernelArgsBase = hostrun::NodeKernel;
#endif
struct KernelArgs : KernelArgsBase {
  // kernelParams: one pointer per kernel parameter, into this object
  virtual void** pointers() = 0;
  // the same kernel with byte-identical argument values
  virtual bool same_values(const KernelArgs& other) const = 0;
};

class StreamRecorder {
 public:
  virtual void kernel(const void* func, dim3 grid, dim3 block, const LaunchSite& site,
                      std::unique_ptr<KernelArgs> args) = 0;
  virtual void memset(void* dst, int value, size_t bytes) = 0;
  virtual void memcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) = 0;
  // A host function run when the graph reaches this point (a host node). The
  // host runner's debug checks of device memory use it; a host node must not
  // call the CUDA API.
  virtual void host(std::function<void()> fn) = 0;

 protected:
  ~StreamRecorder() = default;
};

// The stream being recorded on this thread and its recorder (at most one).
struct Recording {
  cudaStream_t stream = nullptr;
  StreamRecorder* recorder = nullptr;
};
inline thread_local Recording g_recording;
inline StreamRecorder* recorder_of(cudaStream_t s) {
  return g_recording.recorder && g_recording.stream == s ? g_recording.recorder : nullptr;
}

#if defined(__CUDACC__)

inline void check_launch(cudaError_t e, const LaunchSite& site, const char* stage) {
  if (e != cudaSuccess)
    fail(std::string("CUDA error: ") + cudaGetErrorString(e) + " " + stage + " " + site.describe());
}

#else

// Runs a whole grid under the host runner with the stored argument values.
template <typename... P>
void hostrun_execute(void (*kernel)(P...), dim3 grid, dim3 block, const LaunchSite& site,
                     std::tuple<std::decay_t<P>...>& params) {
  using Params = std::tuple<std::decay_t<P>...>;
  struct Closure {
    void (*kernel)(P...);
    Params* params;
  } closure{kernel, &params};
  // Called once per kernel thread; std::apply copies the stored arguments into
  // the kernel's by-value parameters.
  const hostrun::KernelThunk thunk = [](void* c) {
    auto* cl = static_cast<Closure*>(c);
    std::apply(cl->kernel, *cl->params);
  };
  // The pointer arguments, for the race check's messages (which argument
  // points into memory that two resume orders left different).
  const auto pointers = std::apply(
      [](const auto&... v) {
        return std::array<const void*, sizeof...(P) + 1>{hostrun_pointer_of(v)..., nullptr};
      },
      params);
  try {
    hostrun::run_launch(reinterpret_cast<const void*>(kernel), grid, block, site.shmem, thunk, &closure,
                        pointers.data(), sizeof...(P));
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " [" + site.describe() + "]");
  }
}

#endif

// The copied arguments of one launch of `kernel`.
template <typename... P>
struct KernelArgsOf final : KernelArgs {
  using Params = std::tuple<std::decay_t<P>...>;
  void (*kernel)(P...);
  LaunchSite site;
  Params values;
  std::array<void*, sizeof...(P) + 1> ptrs{};

  template <typename... A>
  KernelArgsOf(void (*k)(P...), const LaunchSite& s, A&&... args)
      : kernel(k), site(s), values(std::forward<A>(args)...) {
    point();
  }
  KernelArgsOf(const KernelArgsOf& o) : kernel(o.kernel), site(o.site), values(o.values) { point(); }
  void point() {
    std::apply([this](auto&... v) { ptrs = {static_cast<void*>(&v)..., nullptr}; }, values);
  }
  void** pointers() override { return ptrs.data(); }
  bool same_values(const KernelArgs& other) const override {
    const auto* o = dynamic_cast<const KernelArgsOf*>(&other);
    if (!o || o->kernel != kernel) return false;
    return same_bytes(*o, std::index_sequence_for<P...>{});
  }
  template <size_t... I>
  bool same_bytes(const KernelArgsOf& o, std::index_sequence<I...>) const {
    return (true && ... &&
            (std::memcmp(&std::get<I>(values), &std::get<I>(o.values), sizeof(std::get<I>(values))) == 0));
  }
#if !defined(__CUDACC__)
  std::unique_ptr<hostrun::NodeKernel> clone() const override { return std::make_unique<KernelArgsOf>(*this); }
  void run(dim3 grid, dim3 block, size_t shmem) const override {
    LaunchSite s = site;
    s.shmem = shmem;
    Params copy = values;
    hostrun_execute(kernel, grid, block, s, copy);
  }
#endif
};

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, LaunchSite site, cudaStream_t stream,
            A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "ada::launch: wrong number of kernel arguments");
  if (StreamRecorder* r = recorder_of(stream)) {
    r->kernel(reinterpret_cast<const void*>(kernel), grid, block, site,
              std::make_unique<KernelArgsOf<P...>>(kernel, site, std::forward<A>(args)...));
    return;
  }
#if defined(__CUDACC__)
  kernel<<<grid, block, site.shmem, stream>>>(std::forward<A>(args)...);
  check_launch(cudaGetLastError(), site, "launching");
  if (sync_every_launch()) check_launch(cudaStreamSynchronize(stream), site, "running");
#else
  // Streams run in order: the launch is complete when this returns.
  std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  hostrun_execute(kernel, grid, block, site, params);
#endif
}

// cudaMemsetAsync / cudaMemcpyAsync on `stream`, or recorded with it.
inline void memset_async(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  if (StreamRecorder* r = recorder_of(stream)) return r->memset(dst, value, bytes);
  CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, stream));
}
inline void memcpy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0) return;
  if (StreamRecorder* r = recorder_of(stream)) return r->memcpy(dst, src, bytes, kind);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
}

}  // namespace ada
