// ada::launch: the only way kernels are started in this project.
//
//   ada::launch(kernel, grid, block, shmem_bytes, stream, args...);
//
// Under nvcc it is kernel<<<grid, block, shmem_bytes, stream>>>(args...)
// followed by a launch error check (throws ada::Error). Under the host compiler
// the host runner executes the whole grid on the CPU before returning (and
// throws ada::Error for an invalid launch or a kernel fault such as a
// barrier deadlock). `kernel` is a __global__ function (a template kernel is
// passed with its arguments spelled out: my_kernel<float, 4>); the arguments
// are converted to the kernel's parameter types at the call, as CUDA does, and
// each kernel thread receives its own copy of them.
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>

#include "compat.h"

namespace ada {

#if defined(__CUDACC__)

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
            A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "ada::launch: wrong number of kernel arguments");
  kernel<<<grid, block, shmem, stream>>>(std::forward<A>(args)...);
  cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__);
}

#else

template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
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
  hostrun::run_launch(reinterpret_cast<const void*>(kernel), grid, block, shmem, thunk, &closure);
}

#endif

}  // namespace ada
