// The host runner's scheduler (see scheduler.h for what it promises).
//
// Data layout: one ThreadRec per thread of the block (state, fiber, what it
// waits for) and one WarpRec per warp (bit masks of existing, exited and
// waiting lanes). Control flow: the launching OS thread ("main") switches into
// a fiber; from then on fibers hand the CPU directly to each other, and main
// regains control only when the block has finished, failed or deadlocked.
//
// Fibers are not tied to threads until they block: a thread that runs to its
// end without waiting leaves its fiber free, and the next thread starts on the
// same fiber without any context switch. A kernel without barriers therefore
// runs each of its threads as a plain function call, and a block needs at most
// as many stacks as it has threads waiting at the same time.
#include "hostrun/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/common.h"
#include "hostrun/fiber.h"
#include "hostrun/racecheck.h"
#include "hostrun/runtime.h"
#include "hostrun/statics.h"

// Static __shared__ variables are placed in this ELF section (device.h) so that
// the runner can poison all of them before each block. The linker defines the
// bounds; the anchor keeps the section (and so the symbols) present even in a
// program without any __shared__ variable.
extern "C" char __start_ada_hostrun_shared[] __attribute__((weak));
extern "C" char __stop_ada_hostrun_shared[] __attribute__((weak));
__attribute__((section("ada_hostrun_shared"), used)) static char g_shared_anchor[16];
// g++ ignores that section on the static locals of function templates: a
// template kernel's __shared__ variables are found by name instead (statics.h)
// and poisoned and restored with the section.

// The per-switch path is forced inline: every call frame it saves is one more
// cache line touched on each of the (many) fiber stacks.
#define ADA_HOSTRUN_HOT inline __attribute__((always_inline))

namespace ada::hostrun {
namespace {

// Thrown by fail_in_kernel through a failing kernel thread's frames; caught
// only by run_threads. Not a std::exception, so kernel code cannot swallow it
// by catching those.
struct KernelAbort {};

enum class State : uint8_t { NotStarted, Ready, Running, AtBarrier, AtWarp, Done };

struct Fiber {
  Context ctx;
  std::unique_ptr<FiberStack> stack;
  bool free = true;
};

struct ThreadRec {
  State state = State::NotStarted;
  Fiber* fiber = nullptr;  // set once the thread has started
  uint3 idx{0, 0, 0};
  unsigned warp_mask = 0;  // while AtWarp: the mask passed
  WarpCall* warp_call = nullptr;
};

struct WarpRec {
  unsigned existing = 0;  // lanes that exist (the last warp of a block may be partial)
  unsigned exited = 0;
  unsigned waiting = 0;  // lanes waiting at a warp collective
};

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Fiber i's stack colour (FiberStack): steps of 17 cache lines, so that the
// first 1024 fibers all differ modulo 64 KiB and consecutive ones also differ
// in the L1 set (the address bits below 4 KiB).
size_t colour(size_t i) { return (i * 17 * 64) % (64 * 1024); }

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::string coords(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

Config config_from_env() {
  Config c;
  if (const char* s = std::getenv("ADA_HOSTRUN_ORDER")) {
    const std::string v = s;
    if (v == "shuffle") c.order = Order::Shuffle;
    else if (v == "reverse") c.order = Order::Reverse;
    else if (v == "forward") c.order = Order::Forward;
    else fail("ADA_HOSTRUN_ORDER must be shuffle, reverse or forward, not '" + v + "'");
  }
  if (const char* s = std::getenv("ADA_HOSTRUN_SEED")) c.seed = std::strtoull(s, nullptr, 0);
  if (const char* s = std::getenv("ADA_HOSTRUN_STACK_KB")) {
    const unsigned long kb = std::strtoul(s, nullptr, 10);
    check(kb >= 16, "ADA_HOSTRUN_STACK_KB must be at least 16");
    c.stack_bytes = kb * 1024;
  }
  if (const char* s = std::getenv("ADA_HOSTRUN_POISON")) c.poison_shared = std::atoi(s) != 0;
  if (const char* s = std::getenv("ADA_HOSTRUN_RACECHECK")) c.race_check = std::atoi(s) != 0;
  if (const char* s = std::getenv("ADA_HOSTRUN_RUNAHEAD")) c.warp_runahead = std::atoi(s) != 0;
  if (const char* s = std::getenv("ADA_HOSTRUN_RACECHECK_BLOCKS"))
    c.race_check_blocks = static_cast<unsigned>(std::strtoul(s, nullptr, 10));
  return c;
}

// True on the OS thread that is inside run_launch (nested launches are refused).
thread_local bool t_in_launch = false;

void fiber_entry(void* arg);

class Runner;
// The runner, for the per-barrier paths (no function-static guard to check);
// set once by the constructor, which runs before any launch.
Runner* g_runner = nullptr;

class Runner {
 public:
  Runner() : cfg_(config_from_env()) { g_runner = this; }

  // -- configuration (any thread, outside kernels) ---------------------------
  Config config() {
    std::lock_guard<std::mutex> lock(cfg_mu_);
    return cfg_;
  }
  void set_config(const Config& c) {
    if (t_in_launch) fail("hostrun: set_config() called from inside a kernel");
    check(c.stack_bytes >= 16 * 1024, "hostrun: stack_bytes must be at least 16 KiB");
    std::lock_guard<std::mutex> launch_lock(launch_mu_);  // no launch is running now
    std::lock_guard<std::mutex> lock(cfg_mu_);
    if (c.stack_bytes != cfg_.stack_bytes) {  // all fibers are free between launches
      free_.clear();
      fibers_.clear();
      stats_.fibers = 0;
    }
    cfg_ = c;
  }
  void set_max_dynamic_shared(const void* kernel, size_t bytes) {
    std::lock_guard<std::mutex> lock(cfg_mu_);
    max_dynamic_[kernel] = bytes;
  }
  Stats stats() {
    std::lock_guard<std::mutex> lock(cfg_mu_);
    return stats_;
  }
  void reset_stats() {
    std::lock_guard<std::mutex> lock(cfg_mu_);
    const uint64_t fibers = stats_.fibers;
    stats_ = Stats{};
    stats_.fibers = fibers;
  }

  // -- a launch (launching OS thread, under launch_mu_) -----------------------
  void launch(const void* kernel, dim3 grid, dim3 block, size_t dyn, KernelThunk thunk, void* ctx,
              std::vector<const void*> args);

  // -- called from kernel threads ---------------------------------------------
  int block_barrier(const char* file, int line, int predicate);
  void warp_sync_point(unsigned mask, WarpCall* call);
  unsigned current_lane() const { return current_ & 31u; }
  unsigned current_thread() const { return current_; }
  uint64_t block_serial() const { return block_serial_; }
  void* dynamic_shared() { return dyn_; }
  [[noreturn]] void fail_in_kernel(const std::string& msg);  // throws KernelAbort
  [[noreturn]] void abandon_fiber();
  bool in_kernel() const { return running_fiber_; }
  void run_threads(Fiber* self);  // fiber_entry's body

 private:
  void setup_block(uint3 bidx, uint64_t block_linear);
  void run_block();
  void run_block_twice(uint3 bidx, uint64_t block_linear);
  void shuffle_order();
  ADA_HOSTRUN_HOT int pick_next();
  ADA_HOSTRUN_HOT void activate(unsigned t, Fiber* f);
  Fiber* take_fiber();
  ADA_HOSTRUN_HOT void release(Fiber* f);
  ADA_HOSTRUN_HOT void reschedule(Fiber* self, bool self_finished);
  void on_thread_exit(Fiber* self);
  void complete_warp(unsigned w, unsigned group, unsigned mask, WarpCall* call);
  ADA_HOSTRUN_HOT void switch_to(Context& from, Context& to) {
    ++switches_;
    switch_context(from, to);
  }
  void recover();
  std::string where() const;
  std::string describe_deadlock() const;

  std::mutex launch_mu_;  // one launch at a time: threadIdx & co. are globals
  std::mutex cfg_mu_;     // config, stats, attributes
  Config cfg_;
  Stats stats_;
  std::map<const void*, size_t> max_dynamic_;

  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::vector<Fiber*> free_;
  Context main_ctx_;

  // The running launch and block. Only the launching OS thread touches these.
  Config run_cfg_;
  KernelThunk thunk_ = nullptr;
  void* ctx_ = nullptr;
  unsigned n_ = 0;  // threads per block
  std::vector<ThreadRec> threads_;
  std::vector<WarpRec> warps_;
  std::vector<unsigned> order_;
  std::vector<const void*> args_;  // the pointer arguments (race check messages)
  std::vector<std::pair<void*, size_t>> statics_;  // the kernel's __shared__ outside the section
  RaceCheck race_;
  std::vector<unsigned char> dyn_storage_;
  unsigned char* dyn_ = nullptr;
  size_t dyn_bytes_ = 0;
  uint64_t block_linear_ = 0;
  uint64_t block_serial_ = 0;  // blocks started since the process began (current_block_serial)
  uint64_t phase_ = 0;  // barrier releases so far in this block
  unsigned cursor_ = 0;  // next position in order_ to look at
  unsigned current_ = 0;
  unsigned n_done_ = 0;
  unsigned n_at_barrier_ = 0;
  const char* barrier_file_ = "";
  int barrier_line_ = 0;
  int barrier_count_ = 0;   // predicates so far at the barrier being filled
  int released_count_ = 0;  // result of the barrier last released
  bool running_fiber_ = false;
  std::string error_;
  uint64_t switches_ = 0, barriers_ = 0, collectives_ = 0;
};

Runner& runner() {
  static Runner r;
  return r;
}

void fiber_entry(void* arg) {
  g_runner->run_threads(static_cast<Fiber*>(arg));
  std::abort();  // run_threads never returns
}

// ---------------------------------------------------------------------------

void Runner::launch(const void* kernel, dim3 grid, dim3 block, size_t dyn, KernelThunk thunk,
                    void* ctx, std::vector<const void*> args) {
  const uint64_t nthreads = uint64_t(block.x) * block.y * block.z;
  if (block.x == 0 || block.y == 0 || block.z == 0 || nthreads > 1024 || block.x > 1024 ||
      block.y > 1024 || block.z > 64)
    fail("hostrun: invalid block shape " + coords(block) +
         " (each dimension >= 1, x,y <= 1024, z <= 64, at most 1024 threads)");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535)
    fail("hostrun: invalid grid shape " + coords(grid) +
         " (each dimension >= 1, x < 2^31, y,z <= 65535)");
  {
    std::lock_guard<std::mutex> lock(cfg_mu_);
    auto it = max_dynamic_.find(kernel);
    const size_t limit = it == max_dynamic_.end() ? kDefaultDynamicShared : it->second;
    if (dyn > limit)
      fail("hostrun: launch asks for " + std::to_string(dyn) + " bytes of dynamic shared memory, " +
           "the kernel's limit is " + std::to_string(limit) +
           (it == max_dynamic_.end()
                ? " (above 48 KiB call cudaFuncSetAttribute(kernel, "
                  "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) first, as on the GPU)"
                : ""));
    run_cfg_ = cfg_;
  }

  std::lock_guard<std::mutex> lock(launch_mu_);
  t_in_launch = true;
  struct Reset {
    ~Reset() { t_in_launch = false; }
  } reset;
  install_overflow_reporter();

  thunk_ = thunk;
  ctx_ = ctx;
  args_ = std::move(args);
  statics_.clear();
  for (const auto& v : function_statics(kernel)) {
    const char* p = static_cast<const char*>(v.first);
    if (!(__start_ada_hostrun_shared && p >= __start_ada_hostrun_shared && p < __stop_ada_hostrun_shared))
      statics_.push_back(v);
  }
  n_ = static_cast<unsigned>(nthreads);
  threads_.assign(n_, ThreadRec{});
  for (unsigned t = 0; t < n_; ++t)
    threads_[t].idx = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
  warps_.assign((n_ + 31) / 32, WarpRec{});
  for (size_t w = 0; w < warps_.size(); ++w) {
    const unsigned lanes = std::min(32u, n_ - unsigned(w) * 32u);
    warps_[w].existing = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
  }
  order_.resize(n_);
  // Dynamic shared memory: 128-byte aligned, never empty (a kernel may form the
  // pointer even when it asked for 0 bytes).
  if (dyn_storage_.size() < dyn + 256) dyn_storage_.resize(dyn + 256);
  dyn_ = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(dyn_storage_.data()) + 127) & ~uintptr_t(127));
  dyn_bytes_ = dyn;
  detail::block_dim = block;
  detail::grid_dim = grid;
  switches_ = barriers_ = collectives_ = 0;

  uint64_t blocks_run = 0;
  struct Count {  // stats are updated even when a block fails
    Runner& r;
    uint64_t& blocks;
    ~Count() {
      std::lock_guard<std::mutex> lock(r.cfg_mu_);
      r.stats_.launches += 1;
      r.stats_.blocks += blocks;
      r.stats_.threads += blocks * r.n_;
      r.stats_.switches += r.switches_;
      r.stats_.block_barriers += r.barriers_;
      r.stats_.warp_collectives += r.collectives_;
      r.stats_.fibers = r.fibers_.size();
    }
  } count{*this, blocks_run};

  struct RaceReset {  // atomics stop noting addresses, the copies are dropped
    RaceCheck& race;
    ~RaceReset() {
      detail::race_check_atomics = false;
      race.clear();
    }
  } race_reset{race_};

  // Which blocks the race check runs twice: all, or race_check_blocks of
  // them at linear indices round(i (G - 1) / (L - 1)), first and last included.
  const uint64_t n_blocks = uint64_t(grid.x) * grid.y * grid.z, limit = run_cfg_.race_check_blocks;
  uint64_t next_sample = 0, sample_i = 0;
  auto checked = [&](uint64_t b) {
    if (!run_cfg_.race_check) return false;
    if (limit == 0 || n_blocks <= limit) return true;
    if (limit == 1) return b == 0;
    if (b != next_sample) return false;
    ++sample_i;
    next_sample = (sample_i * (n_blocks - 1) + (limit - 1) / 2) / (limit - 1);
    return true;
  };

  uint64_t linear = 0;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        const bool twice = checked(linear);
        detail::race_check_atomics = twice;  // atomics note their words only while checked
        if (twice) {
          run_block_twice(uint3{x, y, z}, linear++);
        } else {
          setup_block(uint3{x, y, z}, linear++);
          run_block();
        }
        ++blocks_run;
      }
}

// The race check (racecheck.h): the block runs in the configured order, then
// again from the same memory in another order; the results must agree.
void Runner::run_block_twice(uint3 bidx, uint64_t block_linear) {
  std::vector<std::pair<void*, size_t>> shared{{dyn_, dyn_bytes_}};
  if (__start_ada_hostrun_shared && __stop_ada_hostrun_shared)
    shared.emplace_back(__start_ada_hostrun_shared,
                        size_t(__stop_ada_hostrun_shared - __start_ada_hostrun_shared));
  shared.insert(shared.end(), statics_.begin(), statics_.end());
  race_.snapshot(shared);
  setup_block(bidx, block_linear);
  run_block();
  race_.keep_first_and_restore();

  const Config saved = run_cfg_;
  auto name = [](const Config& c) {
    return (c.order == Order::Forward   ? std::string("forward")
            : c.order == Order::Reverse ? std::string("reverse")
                                        : "shuffled (seed " + std::to_string(c.seed) + ")") +
           (c.warp_runahead ? ", warps running ahead" : ", warps interleaved");
  };
  Config second = saved;
  if (saved.order == Order::Forward) second.order = Order::Reverse;
  else if (saved.order == Order::Reverse) second.order = Order::Forward;
  else second.seed = saved.seed ^ 0x9e3779b97f4a7c15ull;
  second.warp_runahead = !saved.warp_runahead;  // one run interleaves the warps, the other lets each run ahead
  run_cfg_ = second;
  struct Restore {
    Runner& r;
    const Config& c;
    ~Restore() { r.run_cfg_ = c; }
  } restore{*this, saved};
  setup_block(bidx, block_linear);
  run_block();
  const std::string diff = race_.compare(args_, name(saved), name(second));
  if (!diff.empty()) fail("hostrun: race check: block " + coords(bidx) + ": " + diff);
}

void Runner::setup_block(uint3 bidx, uint64_t block_linear) {
  for (ThreadRec& t : threads_) {
    t.state = State::NotStarted;
    t.fiber = nullptr;
    t.warp_mask = 0;
    t.warp_call = nullptr;
  }
  for (WarpRec& w : warps_) w.exited = w.waiting = 0;
  n_done_ = n_at_barrier_ = 0;
  phase_ = 0;
  cursor_ = 0;
  current_ = 0;
  block_linear_ = block_linear;
  ++block_serial_;
  error_.clear();
  for (unsigned t = 0; t < n_; ++t)
    order_[t] = run_cfg_.order == Order::Reverse ? n_ - 1 - t : t;
  if (run_cfg_.order == Order::Shuffle) shuffle_order();
  detail::block_idx = bidx;
  if (run_cfg_.poison_shared) {
    // Shared memory starts undefined on a GPU; make reads of unwritten shared
    // memory obviously wrong (NaN, -1) instead of quietly seeing old data.
    std::memset(dyn_, 0xff, dyn_bytes_);
    if (__start_ada_hostrun_shared && __stop_ada_hostrun_shared)
      std::memset(__start_ada_hostrun_shared, 0xff,
                  size_t(__stop_ada_hostrun_shared - __start_ada_hostrun_shared));
    for (const auto& v : statics_) std::memset(v.first, 0xff, v.second);
  }
}

void Runner::shuffle_order() {
  // Fisher-Yates over the current order, seeded by (seed, block, phase): a new
  // permutation after every barrier, and the same ones on every run.
  // (Multiply-shift maps 32 random bits to [0, i]; no division in the loop.)
  uint64_t s = run_cfg_.seed ^ (block_linear_ * 0x632be59bd9b4e019ull) ^ (phase_ * 0x8cb92ba72f3d8dd7ull);
  uint64_t r = 0;
  bool spare = false;  // each 64-bit draw serves two steps
  for (unsigned i = n_ - 1; i > 0; --i) {
    if (!spare) r = splitmix64(s);
    const uint32_t bits32 = static_cast<uint32_t>(spare ? r >> 32 : r);
    spare = !spare;
    const unsigned j = static_cast<unsigned>((uint64_t(bits32) * (i + 1)) >> 32);
    std::swap(order_[i], order_[j]);
  }
}

void Runner::run_block() {
  const int first = pick_next();  // NotStarted: every block has a first thread
  Fiber* f = take_fiber();
  activate(static_cast<unsigned>(first), f);
  running_fiber_ = true;
  switch_to(main_ctx_, f->ctx);
  running_fiber_ = false;
  // Back on the launching thread's own stack: the block is done, failed or stuck.
  if (!error_.empty()) {
    std::string msg = std::move(error_);
    recover();
    fail(msg);
  }
  if (n_done_ != n_) {
    std::string msg = describe_deadlock();
    recover();
    fail(msg);
  }
}

// Returns the next thread to resume (NotStarted or Ready) in the current
// order, continuing from the cursor and wrapping around; -1 when none can run.
ADA_HOSTRUN_HOT int Runner::pick_next() {
  // A runnable lane of the same warp first (not for a block's first pick,
  // when current_ names a thread that has not run).
  if (run_cfg_.warp_runahead && current_ < n_ && threads_[current_].state != State::NotStarted) {
    const unsigned base = current_ & ~31u, lanes = std::min(32u, n_ - base);
    for (unsigned k = 1; k <= lanes; ++k) {
      const unsigned t = base + (current_ - base + k) % lanes;
      const State s = threads_[t].state;
      if (s == State::NotStarted || s == State::Ready) return static_cast<int>(t);
    }
  }
  for (unsigned k = 0; k < n_; ++k) {
    if (cursor_ >= n_) cursor_ = 0;
    const unsigned t = order_[cursor_++];
    const State s = threads_[t].state;
    if (s == State::NotStarted || s == State::Ready) return static_cast<int>(t);
  }
  return -1;
}

// Makes t the running thread (on fiber f, or on its own fiber when f is null).
ADA_HOSTRUN_HOT void Runner::activate(unsigned t, Fiber* f) {
  ThreadRec& rec = threads_[t];
  if (f) {
    rec.fiber = f;
    f->free = false;
  }
  rec.state = State::Running;
  current_ = t;
  detail::thread_idx = rec.idx;
}

Fiber* Runner::take_fiber() {
  if (!free_.empty()) {
    Fiber* f = free_.back();
    free_.pop_back();
    return f;
  }
  auto f = std::make_unique<Fiber>();
  f->stack = std::make_unique<FiberStack>(run_cfg_.stack_bytes, colour(fibers_.size()));
  make_context(f->ctx, *f->stack, fiber_entry, f.get());
  fibers_.push_back(std::move(f));
  return fibers_.back().get();
}

ADA_HOSTRUN_HOT void Runner::release(Fiber* f) {
  f->free = true;
  free_.push_back(f);
}

// Called by a fiber that cannot (or need not) continue its thread: it blocked
// (self_finished false) or its thread ended (true). Hands the CPU to the next
// runnable thread; returns when this fiber has a running thread again.
ADA_HOSTRUN_HOT void Runner::reschedule(Fiber* self, bool self_finished) {
  const int next = pick_next();
  if (next < 0) {  // nothing can run: block finished or deadlocked
    if (self_finished) release(self);
    switch_to(self->ctx, main_ctx_);
    return;  // a later block took this (free) fiber for a new thread
  }
  const unsigned t = static_cast<unsigned>(next);
  ThreadRec& rec = threads_[t];
  if (rec.state == State::NotStarted) {
    if (self_finished) {  // the fast path: start it right here, no switch
      activate(t, self);
      return;
    }
    Fiber* f = take_fiber();
    activate(t, f);
    switch_to(self->ctx, f->ctx);
    return;
  }
  Fiber* target = rec.fiber;  // Ready: resume it where it waited
  activate(t, nullptr);
  if (target == self) return;
  if (self_finished) release(self);
  switch_to(self->ctx, target->ctx);
}

void Runner::run_threads(Fiber* self) {
  for (;;) {
    bool failed = false;
    try {
      try {
        thunk_(ctx_);
      } catch (const KernelAbort&) {
        throw;  // error_ is set: the runner itself found the misuse
      } catch (const std::exception& e) {
        error_ = "hostrun: " + where() + ": kernel threw: " + e.what();
        failed = true;
      } catch (...) {
        error_ = "hostrun: " + where() + ": kernel threw a non-standard exception";
        failed = true;
      }
      if (!failed) on_thread_exit(self);
    } catch (const KernelAbort&) {
      failed = true;
    }
    // Leave the catch blocks before switching away: the exception object and
    // the C++ runtime's "caught exceptions" stack belong to this OS thread.
    if (failed) abandon_fiber();
  }
}

void Runner::on_thread_exit(Fiber* self) {
  ThreadRec& me = threads_[current_];
  me.state = State::Done;
  ++n_done_;
  const unsigned w = current_ >> 5, bit = 1u << (current_ & 31u);
  warps_[w].exited |= bit;
  if (n_at_barrier_ > 0)
    fail_in_kernel("thread exited while " + std::to_string(n_at_barrier_) +
                   " other threads wait at __syncthreads() (" + barrier_file_ + ":" +
                   std::to_string(barrier_line_) +
                   "); every thread of a block must reach every barrier, so do not return early");
  for (unsigned waiting = warps_[w].waiting; waiting; waiting &= waiting - 1) {
    const unsigned lane = static_cast<unsigned>(__builtin_ctz(waiting));
    const ThreadRec& other = threads_[w * 32 + lane];
    if (other.warp_mask & bit)
      fail_in_kernel("thread exited while lane " + std::to_string(lane) + " waits for it in " +
                     other.warp_call->name + " (mask " + hex(other.warp_mask) + ")");
  }
  reschedule(self, true);
}

int Runner::block_barrier(const char* file, int line, int predicate) {
  if (n_done_ > 0)
    fail_in_kernel("__syncthreads() at " + std::string(file) + ":" + std::to_string(line) +
                   " reached after " + std::to_string(n_done_) +
                   " threads of the block exited; every thread of a block must reach every "
                   "barrier, so do not return early");
  if (n_at_barrier_ == 0) {
    barrier_file_ = file;
    barrier_line_ = line;
    barrier_count_ = 0;
  } else if (line != barrier_line_ || (file != barrier_file_ && std::strcmp(file, barrier_file_))) {
    fail_in_kernel("threads of one block wait at different __syncthreads(): " +
                   std::string(barrier_file_) + ":" + std::to_string(barrier_line_) + " and " +
                   file + ":" + std::to_string(line) +
                   " (a barrier in divergent code is undefined behaviour)");
  }
  ThreadRec& me = threads_[current_];
  me.state = State::AtBarrier;
  barrier_count_ += predicate != 0;
  Fiber* self = me.fiber;
  if (++n_at_barrier_ == n_) {  // the last one: release everybody, start a new phase
    for (ThreadRec& t : threads_) t.state = State::Ready;
    n_at_barrier_ = 0;
    released_count_ = barrier_count_;
    ++phase_;
    ++barriers_;
    cursor_ = 0;
    if (run_cfg_.order == Order::Shuffle) shuffle_order();
  }
  reschedule(self, false);
  // Safe to read: the next release needs this thread at the next barrier.
  return released_count_;
}

void Runner::warp_sync_point(unsigned mask, WarpCall* call) {
  const unsigned t = current_, w = t >> 5, lane = t & 31u, bit = 1u << lane;
  WarpRec& warp = warps_[w];
  if (!(mask & bit))
    fail_in_kernel(std::string(call->name) + " called with mask " + hex(mask) +
                   ", which does not include the calling lane " + std::to_string(lane));
  const unsigned group = mask & warp.existing;
  if (group & warp.exited)
    fail_in_kernel(std::string(call->name) + " with mask " + hex(mask) +
                   " names lanes that have exited (" + hex(group & warp.exited) + ")");
  ThreadRec& me = threads_[t];
  me.state = State::AtWarp;
  me.warp_mask = mask;
  me.warp_call = call;
  warp.waiting |= bit;
  if ((warp.waiting & group) == group) complete_warp(w, group, mask, call);
  reschedule(me.fiber, false);
}

void Runner::complete_warp(unsigned w, unsigned group, unsigned mask, WarpCall* call) {
  WarpCall* lanes[32] = {};
  for (unsigned g = group; g; g &= g - 1) {
    const unsigned lane = static_cast<unsigned>(__builtin_ctz(g));
    const ThreadRec& other = threads_[w * 32 + lane];
    if (other.warp_mask != mask)
      fail_in_kernel("lanes of a warp met at warp collectives with different masks (" +
                     hex(other.warp_mask) + " in lane " + std::to_string(lane) + ", " + hex(mask) +
                     " here)");
    if (other.warp_call->complete != call->complete)
      fail_in_kernel(std::string("lanes of a warp met at different warp collectives (") +
                     other.warp_call->name + " in lane " + std::to_string(lane) + ", " +
                     call->name + " here)");
    lanes[lane] = other.warp_call;
  }
  call->complete(lanes, group);
  warps_[w].waiting &= ~group;
  for (unsigned g = group; g; g &= g - 1)
    threads_[w * 32 + unsigned(__builtin_ctz(g))].state = State::Ready;
  ++collectives_;
}

// The message is kept, then the failing thread's frames are unwound up to
// run_threads (KernelAbort), so that nothing they own (the message's own
// temporaries included) is left behind on a stack that is never resumed.
void Runner::fail_in_kernel(const std::string& msg) {
  error_ = "hostrun: " + where() + ": " + msg;
  throw KernelAbort{};
}

// Back to the launching thread for good, from run_threads' own frame (nothing
// of the kernel's is left on this stack): run_block reports error_.
void Runner::abandon_fiber() {
  Fiber* self = threads_[current_].fiber;
  switch_to(self->ctx, main_ctx_);
  std::abort();  // never resumed: recover() gives the fiber a fresh context
}

// After a failed or deadlocked block: the suspended stacks are abandoned (their
// frames are not unwound) and every fiber starts afresh.
void Runner::recover() {
  for (auto& owned : fibers_) {
    Fiber* f = owned.get();
    if (f->free) continue;
    make_context(f->ctx, *f->stack, fiber_entry, f);
    release(f);
  }
  error_.clear();
}

std::string Runner::where() const {
  return "block " + coords(detail::block_idx) + " thread " + coords(threads_[current_].idx);
}

std::string Runner::describe_deadlock() const {
  std::string msg = "hostrun: deadlock in block " + coords(detail::block_idx) + ": ";
  if (n_at_barrier_ > 0)
    msg += std::to_string(n_at_barrier_) + " threads wait at __syncthreads() (" + barrier_file_ +
           ":" + std::to_string(barrier_line_) + "); ";
  for (size_t w = 0; w < warps_.size(); ++w) {
    if (!warps_[w].waiting) continue;
    const unsigned lane = static_cast<unsigned>(__builtin_ctz(warps_[w].waiting));
    const ThreadRec& t = threads_[w * 32 + lane];
    const unsigned missing = (t.warp_mask & warps_[w].existing) & ~warps_[w].waiting;
    msg += "warp " + std::to_string(w) + " lanes " + hex(warps_[w].waiting) + " wait in " +
           t.warp_call->name + " (mask " + hex(t.warp_mask) + ") for lanes " + hex(missing) + "; ";
  }
  msg += std::to_string(n_done_) + " of " + std::to_string(n_) + " threads finished";
  return msg;
}

}  // namespace

// ---------------------------------------------------------------------------
// Public entry points.

Config config() { return runner().config(); }
void set_config(const Config& c) { runner().set_config(c); }
Stats stats() { return runner().stats(); }
void reset_stats() { runner().reset_stats(); }

void set_max_dynamic_shared(const void* kernel_id, size_t bytes) {
  runner().set_max_dynamic_shared(kernel_id, bytes);
}

void run_launch(const void* kernel_id, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                KernelThunk thunk, void* ctx, const void* const* args, size_t nargs) {
  if (t_in_launch)
    kernel_fail("kernel launch from inside a kernel (dynamic parallelism) is not supported "
                "by the host runner");
  runner().launch(kernel_id, grid, block, dynamic_shared_bytes, thunk, ctx,
                  std::vector<const void*>(args, args + (args ? nargs : 0)));
  check_guards(args, nargs);  // a write past either end of a device block (runtime.h)
}

namespace {
Runner& kernel_runner(const char* what) {
  if (!t_in_launch || !g_runner->in_kernel())
    fail(std::string("hostrun: ") + what + " called outside a kernel launched with ada::launch");
  return *g_runner;
}
}  // namespace

int block_barrier(const char* file, int line, int predicate) {
  return kernel_runner("__syncthreads()").block_barrier(file, line, predicate);
}

void warp_sync_point(unsigned mask, WarpCall* call) {
  kernel_runner(call->name).warp_sync_point(mask, call);
}

unsigned current_lane() { return kernel_runner("a lane query").current_lane(); }
unsigned current_thread() { return kernel_runner("a thread query").current_thread(); }
uint64_t current_block_serial() { return kernel_runner("a block query").block_serial(); }
void* dynamic_shared() { return kernel_runner("DYNAMIC_SHARED").dynamic_shared(); }

void kernel_fail(const std::string& msg) {
  if (!t_in_launch || !g_runner->in_kernel()) fail("hostrun: " + msg);
  g_runner->fail_in_kernel(msg);
}

}  // namespace ada::hostrun
