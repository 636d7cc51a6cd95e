// Cuts training batches out of a token stream: B windows of T+1 tokens at
// uniformly random offsets (inputs = window[0..T), targets = window[1..T]),
// drawn from a seeded RNG whose state is saved with checkpoints so that a
// resumed run sees the same batches. Evaluation uses fixed, evenly spaced
// windows so every evaluation measures the same text.
//
// Data parallelism (docs/scaling.md): with W ranks, a step's global batch is
// W*B windows, drawn by every rank from the same RNG in the same order; rank
// r reads windows r*B .. r*B+B-1 only. So the ranks' parts are disjoint and
// deterministic, every rank's RNG stays in the same state (the one a
// checkpoint saves), and W ranks of batch B see exactly the windows of one
// rank with batch W*B.
#pragma once
#include <vector>

#include "core/rng.h"
#include "methods/method.h"
#include "text/tokens.h"

namespace ada {

class Batcher {
 public:
  // B: the rank's windows per batch; rank of world: this rank's part.
  Batcher(const TokenSource& src, int B, int T, uint64_t seed, int rank = 0, int world = 1)
      : src_(src), B_(B), T_(T), rank_(rank), world_(world), rng_(seed) {
    check(src.size() > (size_t)T + 1, "the training data has " + std::to_string(src.size()) +
                                          " tokens, fewer than one sequence of --seq " + std::to_string(T) + " + 1");
  }

  Batch next() {
    Batch b;
    b.B = B_, b.T = T_;
    std::vector<int32_t> w(T_ + 1);
    const size_t span = src_.size() - T_ - 1;
    for (int i = 0; i < B_ * world_; i++) {
      const size_t start = rng_.below(span + 1);  // drawn by every rank: the RNGs stay in step
      if (i / B_ != rank_) continue;
      src_.read(start, T_ + 1, w.data());
      b.inputs.insert(b.inputs.end(), w.begin(), w.end() - 1);
      b.targets.insert(b.targets.end(), w.begin() + 1, w.end());
    }
    return b;
  }

  Rng& rng() { return rng_; }

 private:
  const TokenSource& src_;
  int B_, T_, rank_, world_;
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

// Batch `index` of `count` fixed evaluation batches (windows as above). With
// W ranks an evaluation batch is W*B windows, like a training batch, and
// rank r reads windows r*B .. r*B+B-1 of it.
inline Batch eval_batch(const TokenSource& src, int B, int T, int index, int count, int rank = 0, int world = 1) {
  check(src.size() > (size_t)T + 1, "the validation data has " + std::to_string(src.size()) +
                                        " tokens, fewer than one sequence of --seq " + std::to_string(T) + " + 1");
  Batch b;
  b.B = B, b.T = T;
  std::vector<int32_t> w(T + 1);
  for (int i = 0; i < B; i++) {
    src.read(eval_window_start(src, B * world, T, index, count, rank * B + i), T + 1, w.data());
    b.inputs.insert(b.inputs.end(), w.begin(), w.end() - 1);
    b.targets.insert(b.targets.end(), w.begin() + 1, w.end());
  }
  return b;
}

}  // namespace ada
