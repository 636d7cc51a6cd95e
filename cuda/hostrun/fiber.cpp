// Fiber stacks, context creation and the context switch (see fiber.h).
#include "hostrun/fiber.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "core/common.h"

#if ADA_HOSTRUN_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace ada::hostrun {

// ---------------------------------------------------------------------------
// Guard-page registry, read by the SIGSEGV reporter. A fixed table of atomics
// because a signal handler may not take locks or walk a std::vector that is
// being resized.
namespace {

constexpr int kMaxGuards = 8192;
std::atomic<uintptr_t> g_guard_lo[kMaxGuards];
std::atomic<uintptr_t> g_guard_hi[kMaxGuards];
std::mutex g_guard_mu;  // serialises writers only

void register_guard(uintptr_t lo, uintptr_t hi) {
  std::lock_guard<std::mutex> lock(g_guard_mu);
  for (int i = 0; i < kMaxGuards; ++i) {
    if (g_guard_hi[i].load(std::memory_order_relaxed) == 0) {
      g_guard_lo[i].store(lo, std::memory_order_relaxed);
      g_guard_hi[i].store(hi, std::memory_order_release);
      return;
    }
  }
  // Table full: the guard page still stops the overflow, only the hint is lost.
}

void unregister_guard(uintptr_t lo) {
  std::lock_guard<std::mutex> lock(g_guard_mu);
  for (int i = 0; i < kMaxGuards; ++i) {
    if (g_guard_hi[i].load(std::memory_order_relaxed) != 0 &&
        g_guard_lo[i].load(std::memory_order_relaxed) == lo) {
      g_guard_hi[i].store(0, std::memory_order_release);
      return;
    }
  }
}

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

}  // namespace

// The guard is 64 KiB rather than one page: a frame with a large local array
// moves the stack pointer by more than a page at once, and would jump over a
// single guard page into whatever lies below.
constexpr size_t kGuardBytes = 64 * 1024;
constexpr size_t kColourSpan = 64 * 1024;

FiberStack::FiberStack(size_t usable, size_t colour) {
  const size_t page = page_size();
  size_ = (usable + page - 1) / page * page;
  // Guard, then up to kColourSpan of slack (never touched, so it costs no
  // memory) to put the top where the colour says, then the stack.
  map_size_ = kGuardBytes + kColourSpan + size_;
  map_ = mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail("hostrun: cannot allocate a " + std::to_string(size_) + "-byte fiber stack");
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(map_);
  const uintptr_t lowest_top = base + kGuardBytes + size_;
  const uintptr_t top =
      lowest_top + ((colour % kColourSpan) + kColourSpan - lowest_top % kColourSpan) % kColourSpan;
  lo_ = reinterpret_cast<void*>(top - size_);
  // Everything below the stack's first whole page is inaccessible.
  const uintptr_t guard_end = (top - size_) / page * page;
  if (mprotect(map_, guard_end - base, PROT_NONE) != 0) {
    munmap(map_, map_size_);
    map_ = nullptr;
    fail("hostrun: cannot protect a fiber stack guard area");
  }
  register_guard(base, guard_end);
}

FiberStack::~FiberStack() {
  if (!map_) return;
  unregister_guard(reinterpret_cast<uintptr_t>(map_));
  munmap(map_, map_size_);
}

// ---------------------------------------------------------------------------
// Stack-overflow reporter.
namespace {

struct sigaction g_prev_segv;
std::atomic<bool> g_segv_installed{false};

void on_segv(int sig, siginfo_t* info, void* uctx) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (int i = 0; i < kMaxGuards; ++i) {
    const uintptr_t hi = g_guard_hi[i].load(std::memory_order_acquire);
    if (hi != 0 && addr >= g_guard_lo[i].load(std::memory_order_relaxed) && addr < hi) {
      static const char msg[] =
          "hostrun: fiber stack overflow in a kernel thread (large local arrays or deep "
          "recursion); raise the stack size with ADA_HOSTRUN_STACK_KB or "
          "ada::hostrun::Config::stack_bytes\n";
      ssize_t ignored = write(2, msg, sizeof msg - 1);
      (void)ignored;
      break;
    }
  }
  // Hand the fault back: restore the previous disposition and return, so the
  // faulting instruction re-executes and the process dies (or is handled) as
  // it would have without us.
  sigaction(SIGSEGV, &g_prev_segv, nullptr);
  (void)sig;
  (void)uctx;
}

}  // namespace

void install_overflow_reporter() {
  // The handler must run on an alternate stack: the faulting stack is full.
  thread_local bool have_altstack = false;
  if (!have_altstack) {
    stack_t old{};
    if (sigaltstack(nullptr, &old) == 0 && (old.ss_flags & SS_DISABLE)) {
      constexpr size_t kAltSize = 64 * 1024;
      thread_local std::unique_ptr<char[]> alt(new char[kAltSize]);
      stack_t ss{};
      ss.ss_sp = alt.get();
      ss.ss_size = kAltSize;
      sigaltstack(&ss, nullptr);
    }
    have_altstack = true;
  }
  bool expected = false;
  if (g_segv_installed.compare_exchange_strong(expected, true)) {
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_prev_segv);
  }
}

// ---------------------------------------------------------------------------
// ASan's view of the switches (a no-op in normal builds). Before a switch:
// "the next stack is [bottom, bottom + size)". After arriving, on the new
// stack: "done", which also tells us the bounds of the stack we left; those
// are recorded in the context we left (the OS thread's stack is learned so).
namespace {
#if ADA_HOSTRUN_ASAN
thread_local Context* t_switching_from = nullptr;

// A fiber that is abandoned part way (a kernel whose misuse the runner
// reports, then unwinds past) leaves its frames' redzones poisoned in ASan's
// shadow of its stack. A stack reused for a new fiber starts clean.
void asan_fresh_stack(const FiberStack& stack) { __asan_unpoison_memory_region(stack.lo(), stack.size()); }

void asan_before_switch(Context& from, Context& to, void** fake_stack) {
  t_switching_from = &from;
  __sanitizer_start_switch_fiber(fake_stack, to.stack_bottom, to.stack_size);
}
void asan_after_switch(void* fake_stack) {
  Context* left = t_switching_from;
  __sanitizer_finish_switch_fiber(fake_stack, &left->stack_bottom, &left->stack_size);
}
#endif

// A fresh fiber's first frame: under ASan it completes the switch that
// started it before running the entry.
[[maybe_unused]] void fresh_fiber(void* ctx_ptr) {
  Context* ctx = static_cast<Context*>(ctx_ptr);
#if ADA_HOSTRUN_ASAN
  asan_after_switch(nullptr);
#endif
#if !ADA_HOSTRUN_ASM_SWITCH || ADA_HOSTRUN_ASAN
  ctx->entry(ctx->arg);
#endif
  (void)ctx;
  std::abort();  // entries never return
}
}  // namespace

// ---------------------------------------------------------------------------
// Context switch.
#if ADA_HOSTRUN_ASM_SWITCH

extern "C" void ada_hostrun_fiber_start();

// ada_hostrun_swap(save_sp = rdi, load_sp = rsi): push the general-purpose
// registers the System V ABI says a callee must preserve (rbp, rbx, r12-r15),
// park the stack pointer in *save_sp, adopt load_sp and pop the same set in
// reverse; `ret` then continues wherever that stack last called
// ada_hostrun_swap from. Everything else is caller-saved, so the compiler has
// already spilled whatever it needs across this call.
//
// The MXCSR and x87 control words (rounding modes, also callee-saved) are not
// switched: reloading them costs more than the rest of the switch, and all
// fibers share the launching thread's floating-point environment. A fresh
// fiber starts with the environment of the thread that created it. (Kernels
// must not change the rounding mode.)
//
// ada_hostrun_fiber_start is where a fresh stack "returns" to the first time:
// make_context leaves entry in r13 and its argument in r12. `.cfi_undefined rip`
// marks the bottom of the fiber's call stack for debuggers and unwinders.
asm(R"(
    .text
    .p2align 4
    .globl  ada_hostrun_swap
    .hidden ada_hostrun_swap
    .type   ada_hostrun_swap, @function
ada_hostrun_swap:
    pushq   %rbp
    pushq   %rbx
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    movq    %rsp, (%rdi)
    movq    %rsi, %rsp
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbx
    popq    %rbp
    ret
    .size   ada_hostrun_swap, .-ada_hostrun_swap

    .p2align 4
    .globl  ada_hostrun_fiber_start
    .hidden ada_hostrun_fiber_start
    .type   ada_hostrun_fiber_start, @function
ada_hostrun_fiber_start:
    .cfi_startproc
    .cfi_undefined rip
    movq    %r12, %rdi
    callq   *%r13
    ud2
    .cfi_endproc
    .size   ada_hostrun_fiber_start, .-ada_hostrun_fiber_start
)");

void make_context(Context& ctx, const FiberStack& stack, FiberEntry entry, void* arg) {
  // The initial frame mirrors what ada_hostrun_swap pops, lowest address first:
  // r15, r14, r13 (entry), r12 (arg), rbx, rbp, return address. After the six
  // pops and the `ret`, rsp = top - 16: 16-byte aligned, as the ABI wants at the
  // `call` in ada_hostrun_fiber_start.
  const uintptr_t top =
      (reinterpret_cast<uintptr_t>(stack.lo()) + stack.size()) & ~uintptr_t(15);
  void** sp = reinterpret_cast<void**>(top - 16) - 7;
#if ADA_HOSTRUN_ASAN
  // Start in fresh_fiber(&ctx), which announces the arrival to ASan first.
  asan_fresh_stack(stack);
  ctx.entry = entry;
  ctx.arg = arg;
  ctx.stack_bottom = stack.lo();
  ctx.stack_size = stack.size();
  arg = &ctx;
  entry = &fresh_fiber;
#endif
  sp[0] = nullptr;                                            // r15
  sp[1] = nullptr;                                            // r14
  sp[2] = reinterpret_cast<void*>(entry);                     // r13
  sp[3] = arg;                                                // r12
  sp[4] = nullptr;                                            // rbx
  sp[5] = nullptr;                                            // rbp
  sp[6] = reinterpret_cast<void*>(&ada_hostrun_fiber_start);  // return address
  ctx.sp = sp;
}

#if ADA_HOSTRUN_ASAN
void switch_context(Context& from, Context& to) {
  void* fake_stack = nullptr;
  asan_before_switch(from, to, &fake_stack);
  ada_hostrun_swap(&from.sp, to.sp);
  asan_after_switch(fake_stack);  // back on `from`'s stack
}
#endif

#else  // ucontext fallback

namespace {
// makecontext passes only int arguments, so the Context pointer travels in two.
void ucontext_trampoline(unsigned hi, unsigned lo) {
  fresh_fiber(reinterpret_cast<Context*>((uintptr_t(hi) << 32) | uintptr_t(lo)));
}
}  // namespace

void make_context(Context& ctx, const FiberStack& stack, FiberEntry entry, void* arg) {
  if (getcontext(&ctx.uc) != 0) fail("hostrun: getcontext failed");
  ctx.uc.uc_stack.ss_sp = stack.lo();
  ctx.uc.uc_stack.ss_size = stack.size();
  ctx.uc.uc_link = nullptr;
  ctx.entry = entry;
  ctx.arg = arg;
#if ADA_HOSTRUN_ASAN
  asan_fresh_stack(stack);
  ctx.stack_bottom = stack.lo();
  ctx.stack_size = stack.size();
#endif
  const uintptr_t p = reinterpret_cast<uintptr_t>(&ctx);
  makecontext(&ctx.uc, reinterpret_cast<void (*)()>(&ucontext_trampoline), 2,
              unsigned(p >> 32), unsigned(p & 0xffffffffu));
}

void switch_context(Context& from, Context& to) {
#if ADA_HOSTRUN_ASAN
  void* fake_stack = nullptr;
  asan_before_switch(from, to, &fake_stack);
#endif
  if (swapcontext(&from.uc, &to.uc) != 0) std::abort();
#if ADA_HOSTRUN_ASAN
  asan_after_switch(fake_stack);
#endif
}

#endif

}  // namespace ada::hostrun
