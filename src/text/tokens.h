// A read-only sequence of token ids: the one interface the trainer, eval and
// the batch sampler read data through. Implementations: VectorTokens (in
// memory) here; memory-mapped llm.c shards in shards.h, slices in dataset.h.
// Ids are checked against the model's vocabulary where data enters
// (check_vocab in dataset.h), with the file and position of a bad one.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/common.h"

namespace ada {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual size_t size() const = 0;  // number of tokens
  // Copies tokens [start, start + n) to out; start + n <= size(). A reader
  // never turns a stored id into another one: an id that does not fit int32
  // (a uint32 shard's 0xFFFFFFFF) is an error, never -1, which a Batch
  // reads as "no target".
  virtual void read(size_t start, size_t n, int32_t* out) const = 0;
  // Where token `pos` is, for messages: "position 12", or "position 12 of
  // shard data/x_train_000000.bin" when the source knows its file.
  virtual std::string locate(size_t pos) const { return "position " + std::to_string(pos); }

  // check_vocab's record of its own full scan of this object: every id was
  // found in [0, scanned_below) (0: not scanned yet). It lets a second check
  // against a vocabulary at least as large skip the data, so that opening
  // data stays one pass. Never set from a file's claim.
  mutable uint32_t scanned_below = 0;
};

// The index of the first id outside [0, vocab) in ids[0..n), or n when all
// are inside: the one test every entry point (check_vocab, prompts, the
// model's embedding lookup) applies.
inline size_t first_outside_vocab(const int32_t* ids, size_t n, uint32_t vocab) {
  for (size_t i = 0; i < n; ++i)
    if (uint32_t(ids[i]) >= vocab) return i;  // a negative id wraps to >= 2^31
  return n;
}

class VectorTokens : public TokenSource {
 public:
  VectorTokens() = default;
  // name: what the tokens are, for locate() ("the tokens of data/kjv.txt").
  explicit VectorTokens(std::vector<int32_t> t, std::string name = "") : toks_(std::move(t)), name_(std::move(name)) {}
  size_t size() const override { return toks_.size(); }
  void read(size_t start, size_t n, int32_t* out) const override {
    check(start + n <= toks_.size(), "token read past the end of the data");
    std::memcpy(out, toks_.data() + start, n * sizeof(int32_t));
  }
  std::string locate(size_t pos) const override {
    return "position " + std::to_string(pos) + (name_.empty() ? "" : " of " + name_);
  }
  const std::vector<int32_t>& tokens() const { return toks_; }

 private:
  std::vector<int32_t> toks_;
  std::string name_;
};

}  // namespace ada
