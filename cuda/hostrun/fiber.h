// Fibers for the host runner: a stack plus a saved execution context, and the
// one operation on them, "save where I am and continue over there".
//
// A launch runs the threads of a CUDA block as fibers on one OS thread; a fiber
// gives up the CPU only at a barrier or warp-collective (cooperative
// scheduling), so none of the runner's bookkeeping needs locks.
//
// On x86-64 the switch is fourteen hand-written instructions (the callee-saved
// registers and the stack pointer). Elsewhere
// it falls back to ucontext, which is correct but slower: glibc's swapcontext
// makes a sigprocmask system call on every switch. Builds with x86 shadow stacks
// (-fcf-protection=return) also take the ucontext path, because the hand-written
// switch returns into a different stack than the one it was called from.
#pragma once
#include <cstddef>

// AddressSanitizer must be told when the stack changes under it, or it takes
// a fiber stack for a corrupt thread stack (false reports, "ignoring requested
// __asan_handle_no_return"). Under ASan every switch is announced with
// __sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber.
#if defined(__SANITIZE_ADDRESS__)
#define ADA_HOSTRUN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADA_HOSTRUN_ASAN 1
#endif
#endif
#ifndef ADA_HOSTRUN_ASAN
#define ADA_HOSTRUN_ASAN 0
#endif

#if defined(__x86_64__) && !defined(ADA_HOSTRUN_UCONTEXT) && !(defined(__CET__) && (__CET__ & 2))
#define ADA_HOSTRUN_ASM_SWITCH 1
#else
#define ADA_HOSTRUN_ASM_SWITCH 0
#include <ucontext.h>
#endif

namespace ada::hostrun {

using FiberEntry = void (*)(void* arg);

// Where a suspended fiber (or the scheduler's own OS-thread stack) resumes.
struct Context {
#if ADA_HOSTRUN_ASM_SWITCH
  void* sp = nullptr;  // the saved registers live on the suspended stack itself
#else
  ucontext_t uc;
#endif
#if !ADA_HOSTRUN_ASM_SWITCH || ADA_HOSTRUN_ASAN
  FiberEntry entry = nullptr;  // what a fresh context starts (read by the trampoline)
  void* arg = nullptr;
#endif
#if ADA_HOSTRUN_ASAN
  // The stack this context runs on, for ASan: a fiber's from make_context; the
  // OS thread's own, learned on the first switch away from it.
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
#endif
};

// A fiber stack: `usable` bytes of read-write memory with an inaccessible 64 KiB
// guard area below it, so that running off the end faults at once instead of
// silently overwriting a neighbour. Allocated with mmap; pages are only touched
// on use, so many 64 KiB stacks cost little real memory. (A single frame larger
// than the guard can still jump past it; such kernels need a bigger stack.)
//
// `colour` (a multiple of 64 below 64 KiB) fixes where the top of the stack
// falls modulo 64 KiB. The tops are the hot part of a stack; giving each fiber a
// different colour spreads hundreds of them over the L1 and L2 cache sets
// instead of letting them all compete for the same few.
class FiberStack {
 public:
  FiberStack(size_t usable, size_t colour);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  void* lo() const { return lo_; }
  size_t size() const { return size_; }

 private:
  void* map_ = nullptr;  // the whole mapping, guard page first
  size_t map_size_ = 0;
  void* lo_ = nullptr;  // first usable byte, just above the guard page
  size_t size_ = 0;
};

// Prepares `ctx` so that the next switch into it starts entry(arg) at the top of
// `stack`. `entry` must never return (it switches away for good instead).
void make_context(Context& ctx, const FiberStack& stack, FiberEntry entry, void* arg);

// Saves the running context into `from` and resumes `to`. Returns when some
// later switch resumes `from`. (Inline on the assembly path: one call frame
// less on every stack, which matters when hundreds of stacks take turns.)
#if ADA_HOSTRUN_ASM_SWITCH
extern "C" void ada_hostrun_swap(void** save_sp, void* load_sp);
#endif
#if ADA_HOSTRUN_ASM_SWITCH && !ADA_HOSTRUN_ASAN
inline void switch_context(Context& from, Context& to) { ada_hostrun_swap(&from.sp, to.sp); }
#else
void switch_context(Context& from, Context& to);
#endif

// Makes a fault in any guard page print a one-line "fiber stack overflow" hint
// before the process dies (the default would be a bare segmentation fault).
// Idempotent per OS thread; other faults keep their previous handling.
void install_overflow_reporter();

}  // namespace ada::hostrun
