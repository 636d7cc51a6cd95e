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
// Every error names the launch: the function that called ada::launch, and
// its file and line. The compiler fills these in at each call site: the
// shared-memory argument converts to a LaunchSite, whose constructor's
// default arguments (__builtin_FUNCTION/FILE/LINE) are evaluated where the
// conversion happens, i.e. at the call (g++ and nvcc both do this).
#pragma once

#include <array>
#include <cstdlib>
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

#if defined(__CUDACC__)

inline void check_launch(cudaError_t e, const LaunchSite& site, const char* stage) {
  if (e != cudaSuccess)
    fail(std::string("CUDA error: ") + cudaGetErrorString(e) + " " + stage + " " + site.describe());
}

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, LaunchSite site, cudaStream_t stream,
            A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "ada::launch: wrong number of kernel arguments");
  kernel<<<grid, block, site.shmem, stream>>>(std::forward<A>(args)...);
  check_launch(cudaGetLastError(), site, "launching");
  if (sync_every_launch()) check_launch(cudaStreamSynchronize(stream), site, "running");
}

#else

// A kernel argument as an address when it is a pointer to data, else null.
template <typename T>
const void* hostrun_pointer_of(const T& v) {
  if constexpr (std::is_pointer_v<T> && std::is_object_v<std::remove_pointer_t<T>>)
    return const_cast<const void*>(static_cast<const volatile void*>(v));
  else
    return nullptr;
}

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, LaunchSite site, cudaStream_t stream,
            A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "ada::launch: wrong number of kernel arguments");
  (void)stream;  // streams run in order: the launch is complete when this returns
  using Params = std::tuple<std::decay_t<P>...>;
  Params params(std::forward<A>(args)...);
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

}  // namespace ada
