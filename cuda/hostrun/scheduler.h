// The host runner's scheduler: how a kernel launch executes on the CPU, and the
// internal entry points that the device built-ins (device.h, wmma.h) call.
//
// A launch runs its blocks one after another on the calling OS thread. The
// threads of a block are cooperative fibers: each runs until it reaches a block
// barrier, a warp-collective operation or its end, and only then does another
// thread run. A barrier releases when every thread of the block has reached it;
// a warp collective completes when every lane named in its mask has reached it.
// Threads are resumed in a configurable order (seeded shuffle by default), so a
// kernel that forgets a barrier reads values that were not written yet instead
// of being lucky. Misuse that would hang or be undefined on a GPU (a thread that
// exits while others wait at __syncthreads, different __syncthreads call sites,
// a shuffle naming an exited lane, a launch inside a kernel) raises ada::Error
// from the launch, with the block and thread that hit it.
//
// Nothing here is needed to write kernels; kernel code uses compat.h/launch.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "hostrun/vector_types.h"

namespace ada::hostrun {

// ---------------------------------------------------------------------------
// Configuration (tests may change it; the defaults come from the environment:
// ADA_HOSTRUN_ORDER=shuffle|reverse|forward, ADA_HOSTRUN_SEED=<n>,
// ADA_HOSTRUN_STACK_KB=<n>, ADA_HOSTRUN_POISON=0|1, ADA_HOSTRUN_RACECHECK=0|1,
// ADA_HOSTRUN_RACECHECK_BLOCKS=<n>, ADA_HOSTRUN_RUNAHEAD=0|1).

// The order in which a block's runnable threads are resumed. Shuffle (seeded by
// seed, block index and barrier phase; reproducible run to run) exposes a
// missing barrier whichever way the data flows; forward order hides
// "read a lower thread's value" bugs and reverse order hides "read a higher
// thread's value" bugs (tree reductions), so each alone misses some.
enum class Order { Shuffle, Reverse, Forward };

struct Config {
  Order order = Order::Shuffle;
  uint64_t seed = 0x5eed;
  size_t stack_bytes = 64 * 1024;  // per fiber; a guard page sits below each stack
  // Fill shared memory (static __shared__ variables and the dynamic buffer) with
  // 0xff bytes before every block: reads of shared memory that the block did not
  // write then see NaN / -1 instead of a previous block's leftovers.
  bool poison_shared = true;
  // Run every block twice from the same device memory, the second time in
  // another resume order (forward <-> reverse, or a shuffle with another
  // seed), and fail the launch if device memory differs afterwards
  // (racecheck.h). Slow: for tests with small allocations.
  bool race_check = false;
  // With race_check: check at most this many blocks of each launch, spread
  // evenly from the first to the last (the others run once); 0 checks every
  // block. For tests whose device memory is too large to copy per block.
  unsigned race_check_blocks = 0;
  // Warp run-ahead: when a thread blocks, the next one to run is a runnable
  // lane of its own warp, so each warp runs on until all its lanes wait at a
  // __syncthreads() (or end) before another warp resumes -- as far ahead of
  // the others as a warp can get on a GPU. Without it the resume order cycles
  // over the whole block and the warps stay within one warp-level operation
  // of each other, which hides a missing __syncthreads() between warps that
  // only synchronise within themselves (ldmatrix, mma, __syncwarp). The race
  // check's second run toggles it.
  bool warp_runahead = false;
};

Config config();
void set_config(const Config& c);  // not from inside a kernel

// Sets a config for the lifetime of the object (tests).
class ScopedConfig {
 public:
  explicit ScopedConfig(const Config& c) : saved_(config()) { set_config(c); }
  ~ScopedConfig() { set_config(saved_); }
  ScopedConfig(const ScopedConfig&) = delete;
  ScopedConfig& operator=(const ScopedConfig&) = delete;

 private:
  Config saved_;
};

// Counters since the start of the process (or reset_stats), for overhead reports.
struct Stats {
  uint64_t launches = 0;
  uint64_t blocks = 0;
  uint64_t threads = 0;
  uint64_t switches = 0;          // fiber context switches
  uint64_t block_barriers = 0;    // releases of __syncthreads (per block)
  uint64_t warp_collectives = 0;  // completed warp-collective operations (per warp)
  uint64_t fibers = 0;            // fiber stacks currently allocated
};
Stats stats();
void reset_stats();

// ---------------------------------------------------------------------------
// Launch. The type-erased body runs one thread: `thunk(ctx)` calls the kernel
// with the launch arguments (see launch.h). `kernel_id` identifies the kernel
// for cudaFuncSetAttribute. `args` holds the value of every pointer argument
// of the kernel (null for the others), so that the race check can name the
// argument that points into memory it found changed.
using KernelThunk = void (*)(void* ctx);
void run_launch(const void* kernel_id, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                KernelThunk thunk, void* ctx, const void* const* args = nullptr, size_t nargs = 0);

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n).
// Without it a launch may ask for at most 48 KiB, as on the GPU.
void set_max_dynamic_shared(const void* kernel_id, size_t bytes);
constexpr size_t kDefaultDynamicShared = 48 * 1024;
constexpr size_t kMaxDynamicSharedOptin = 227 * 1024;  // sm_90

// ---------------------------------------------------------------------------
// Called by the device built-ins, from inside a running kernel thread.

namespace detail {
// The coordinates of the running thread. The scheduler rewrites them before it
// resumes each fiber; kernels read them as threadIdx, blockIdx, ... (device.h).
inline uint3 thread_idx{0, 0, 0};
inline uint3 block_idx{0, 0, 0};
inline dim3 block_dim{1, 1, 1};
inline dim3 grid_dim{1, 1, 1};
}  // namespace detail

// __syncthreads and its counting variants: waits until every thread of the
// block has reached the same call site (file:line); returns how many threads
// passed a non-zero predicate.
int block_barrier(const char* file, int line, int predicate);

// A warp-collective operation. Each participating lane passes its own record
// (usually on its own stack, which stays alive while the lane waits); the last
// lane to arrive calls `complete` once with every participant's record,
// indexed by lane (null for lanes outside the group); then all of them go on.
// Lanes that meet must use the same `complete` function and the same mask.
struct WarpCall {
  void (*complete)(WarpCall* const* lanes, unsigned group) = nullptr;
  const char* name = "warp collective";  // for error messages
};
void warp_sync_point(unsigned mask, WarpCall* call);

// Lane (0..31) of the running thread in its warp.
unsigned current_lane();

// The running thread's linear index in its block (x fastest), and a number
// that identifies the running block among all blocks of all launches so far
// (per-thread state kept across calls, such as cp.async groups, is valid only
// within one block: async_copy.cpp).
unsigned current_thread();
uint64_t current_block_serial();

// The dynamic shared memory of the running block (DYNAMIC_SHARED).
void* dynamic_shared();

// Aborts the launch: the launch throws ada::Error("hostrun: <where>: msg").
// Usable from kernel code (e.g. __trap) and from the built-ins.
[[noreturn]] void kernel_fail(const std::string& msg);

}  // namespace ada::hostrun
