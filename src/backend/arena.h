// A bump allocator for the activations of one training step (or one decoding
// step). Everything a step allocates is released at once by reset(). The
// arena grows by adding blocks while a step runs; at reset() it merges them
// into one block big enough for the step's peak, so after the first step there
// are no more allocations (on the GPU: no cudaMalloc inside the training loop).
//
// Scratch scopes: a backward's temporaries (the gradient of a pass's logits,
// the recomputed softmax of a soft embedding, a layer's dact/dgu/...) are dead
// once the pass's backward is done. `auto s = arena.scope();` marks the arena,
// and when s goes out of scope everything allocated since is released (last
// in, first out), so the next pass reuses the same bytes and the step's peak
// is the saved activations plus one pass's temporaries, not their sum. On the
// GPU this is safe without a wait: there is one stream, so a kernel that
// reuses the bytes runs after every kernel that read them.
// With ADA_ARENA_POISON=1 in the environment (the test binary sets it) the
// released bytes are filled with 0xFF, a NaN in float and double, so a read
// after release shows up in every gradient check and agreement test. Under
// AddressSanitizer (make sanitize, make test-asan: host memory, the CPU
// backend or the CUDA host runner) released bytes are also ASan-poisoned, so
// a read after release is reported at the instruction that made it (not while
// a CUDA graph is being recorded: see release()).
#pragma once
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/device_array.h"

#if defined(__SANITIZE_ADDRESS__)
#define ADA_ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADA_ARENA_ASAN 1
#endif
#endif
#ifdef ADA_ARENA_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace ada {

template <class Backend>
class Arena {
 public:
  explicit Arena(Backend& be, size_t initial_bytes = 1 << 20) : be_(be), poison_(poison_from_env()) {
    add_block(initial_bytes);
  }
  ~Arena() {
    for (auto& b : blocks_) asan_unpoison(b.data(), b.size());
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Where the arena stands: the bytes used in each block.
  struct Mark {
    std::vector<size_t> used;
  };
  Mark mark() const { return Mark{used_}; }

  // Releases everything allocated since m (which must be the newest live mark).
  void release(const Mark& m) {
    for (size_t i = 0; i < used_.size(); i++) {
      const size_t keep = i < m.used.size() ? m.used[i] : 0;
      if (used_[i] <= keep) continue;
      if (poison_) be_.memset_bytes(blocks_[i].data() + keep, 0xFF, used_[i] - keep);
      // While the backend records a CUDA graph (train_gpu --cuda-graph 1) its
      // kernels run later, when the graph is launched, so the host must not
      // mark the bytes unreadable now: the recorded kernels still read them,
      // in stream order, before whatever reuses them. (The 0xFF fill above is
      // itself recorded, so it keeps its place in that order.)
      if (!be_.defers_execution()) asan_poison(blocks_[i].data() + keep, used_[i] - keep);
      total_used_ -= used_[i] - keep;
      used_[i] = keep;
    }
  }

  // RAII scratch scope: releases on destruction what was allocated inside.
  class Scope {
   public:
    explicit Scope(Arena& a) : a_(a), m_(a.mark()) {}
    ~Scope() { a_.release(m_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Arena& a_;
    Mark m_;
  };
  Scope scope() { return Scope(*this); }

  // First fit over the blocks' free tails: everything is released at once by
  // reset(), so the order of allocations does not matter, and a large request
  // that does not fit the newest block no longer strands the room left in the
  // others (the first step of a 70m run reserved 1.5x what it used before).
  template <class U>
  U* alloc(size_t n) {
    const size_t bytes = round_up(n * sizeof(U));
    size_t i = 0;
    while (i < blocks_.size() && used_[i] + bytes > blocks_[i].size()) i++;
    if (i == blocks_.size()) add_block(bytes > grow_ ? bytes : grow_);
    U* p = reinterpret_cast<U*>(blocks_[i].data() + used_[i]);
    asan_unpoison(p, bytes);
    used_[i] += bytes;
    total_used_ += bytes;
    step_peak_ = std::max(step_peak_, total_used_);
    peak_used_ = std::max(peak_used_, total_used_);
    return p;
  }

  // Allocates n elements set to zero.
  template <class U>
  U* zeros(size_t n) {
    U* p = alloc<U>(n);
    be_.memset_zero(p, n * sizeof(U));
    return p;
  }

  void reset() {
    for (auto& b : blocks_) asan_unpoison(b.data(), b.size());  // whole again (a block may be freed below)
    if (blocks_.size() > 1) {
      const size_t need = step_peak_;  // the most in use at once, scopes counted
      blocks_.clear();
      used_.clear();
      add_block(need + need / 8);
    }
    std::fill(used_.begin(), used_.end(), size_t(0));
    total_used_ = 0;
    step_peak_ = 0;
  }

  size_t capacity() const {
    size_t c = 0;
    for (auto& b : blocks_) c += b.size();
    return c;
  }
  // The most bytes ever reserved at once, and the most ever in use by one
  // step: what a run's activations need (train_gpu and bench_gpu report them).
  size_t peak_capacity() const { return peak_capacity_; }
  size_t peak_used() const { return peak_used_; }
  size_t used() const { return total_used_; }
  size_t step_peak() const { return step_peak_; }  // the most in use at once since the last reset()

 private:
#ifdef ADA_ARENA_ASAN
  static void asan_poison(void* p, size_t n) { ASAN_POISON_MEMORY_REGION(p, n); }
  static void asan_unpoison(void* p, size_t n) { ASAN_UNPOISON_MEMORY_REGION(p, n); }
#else
  static void asan_poison(void*, size_t) {}
  static void asan_unpoison(void*, size_t) {}
#endif
  static bool poison_from_env() {
    const char* e = std::getenv("ADA_ARENA_POISON");
    return e && std::strcmp(e, "0") != 0 && *e;
  }
  static size_t round_up(size_t b) { return (b + 255) & ~size_t(255); }  // 256-byte aligned
  void add_block(size_t bytes) {
    blocks_.emplace_back(be_, round_up(bytes));
    used_.push_back(0);
    grow_ = blocks_.back().size();
    const size_t c = capacity();
    if (c > peak_capacity_) peak_capacity_ = c;
  }
  Backend& be_;
  std::vector<DeviceArray<Backend, char>> blocks_;
  std::vector<size_t> used_;  // bytes taken from the front of each block
  size_t total_used_ = 0, grow_ = 0, peak_capacity_ = 0, peak_used_ = 0, step_peak_ = 0;
  bool poison_;
};

}  // namespace ada
