// A bump allocator for the activations of one training step (or one decoding
// step). Everything a step allocates is released at once by reset(). The
// arena grows by adding blocks while a step runs; at reset() it merges them
// into one block big enough for the whole step, so after the first step there
// are no more allocations (on the GPU: no cudaMalloc inside the training loop).
#pragma once
#include <memory>
#include <vector>

#include "backend/device_array.h"

namespace ada {

template <class Backend>
class Arena {
 public:
  explicit Arena(Backend& be, size_t initial_bytes = 1 << 20) : be_(be) { add_block(initial_bytes); }

  template <class U>
  U* alloc(size_t n) {
    const size_t bytes = round_up(n * sizeof(U));
    if (used_ + bytes > blocks_.back().size()) add_block(bytes > grow_ ? bytes : grow_);
    U* p = reinterpret_cast<U*>(blocks_.back().data() + used_);
    used_ += bytes;
    total_used_ += bytes;
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
    if (blocks_.size() > 1) {
      const size_t need = total_used_;
      blocks_.clear();
      add_block(need + need / 8);
    }
    used_ = 0;
    total_used_ = 0;
  }

  size_t capacity() const {
    size_t c = 0;
    for (auto& b : blocks_) c += b.size();
    return c;
  }

 private:
  static size_t round_up(size_t b) { return (b + 255) & ~size_t(255); }  // 256-byte aligned
  void add_block(size_t bytes) {
    blocks_.emplace_back(be_, round_up(bytes));
    used_ = 0;
    grow_ = blocks_.back().size();
  }
  Backend& be_;
  std::vector<DeviceArray<Backend, char>> blocks_;
  size_t used_ = 0, total_used_ = 0, grow_ = 0;
};

}  // namespace ada
