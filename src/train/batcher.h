// Cuts training batches out of a token stream: B windows of T+1 tokens at
// uniformly random offsets (inputs = window[0..T), targets = window[1..T]),
// drawn from a seeded RNG whose state is saved with checkpoints so that a
// resumed run sees the same batches. Evaluation uses fixed, evenly spaced
// windows so every evaluation measures the same text.
#pragma once
#include <vector>

#include "core/rng.h"
#include "methods/method.h"
#include "text/tokens.h"

namespace ada {

class Batcher {
 public:
  Batcher(const TokenSource& src, int B, int T, uint64_t seed) : src_(src), B_(B), T_(T), rng_(seed) {
    check(src.size() > (size_t)T + 1, "the training data has " + std::to_string(src.size()) +
                                          " tokens, fewer than one sequence of --seq " + std::to_string(T) + " + 1");
  }

  Batch next() {
    Batch b;
    b.B = B_, b.T = T_;
    std::vector<int32_t> w(T_ + 1);
    const size_t span = src_.size() - T_ - 1;
    for (int i = 0; i < B_; i++) {
      src_.read(rng_.below(span + 1), T_ + 1, w.data());
      b.inputs.insert(b.inputs.end(), w.begin(), w.end() - 1);
      b.targets.insert(b.targets.end(), w.begin() + 1, w.end());
    }
    return b;
  }

  Rng& rng() { return rng_; }

 private:
  const TokenSource& src_;
  int B_, T_;
  Rng rng_;
};

// Where window i of batch `index` of `count` fixed evaluation batches starts:
// B * count windows evenly spaced over the whole source (overlapping only
// when the source is short).
inline size_t eval_window_start(const TokenSource& src, int B, int T, int index, int count, int i) {
  const size_t span = src.size() - T - 1;
  const size_t windows = (size_t)B * count;
  const size_t k = (size_t)index * B + i;
  return windows > 1 ? (size_t)((double)span * k / (double)(windows - 1)) : 0;
}

// Batch `index` of `count` fixed evaluation batches (windows as above).
inline Batch eval_batch(const TokenSource& src, int B, int T, int index, int count) {
  check(src.size() > (size_t)T + 1, "the validation data has " + std::to_string(src.size()) +
                                        " tokens, fewer than one sequence of --seq " + std::to_string(T) + " + 1");
  Batch b;
  b.B = B, b.T = T;
  std::vector<int32_t> w(T + 1);
  for (int i = 0; i < B; i++) {
    src.read(eval_window_start(src, B, T, index, count, i), T + 1, w.data());
    b.inputs.insert(b.inputs.end(), w.begin(), w.end() - 1);
    b.targets.insert(b.targets.end(), w.begin() + 1, w.end());
  }
  return b;
}

}  // namespace ada
