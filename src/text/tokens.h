// A read-only sequence of token ids: the one interface the trainer, eval and
// the batch sampler read data through. Implementations: VectorTokens (in
// memory) here; memory-mapped llm.c shards and tokenized text in dataset.h.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/common.h"

namespace ada {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual size_t size() const = 0;  // number of tokens
  // Copies tokens [start, start + n) to out; start + n <= size().
  virtual void read(size_t start, size_t n, int32_t* out) const = 0;
  // Largest token id + 1 that this source may contain (for checking against the
  // model's vocabulary); 0 when unknown.
  virtual uint32_t vocab_bound() const { return 0; }
};

class VectorTokens : public TokenSource {
 public:
  VectorTokens() = default;
  explicit VectorTokens(std::vector<int32_t> t, uint32_t vocab = 0) : toks_(std::move(t)), vocab_(vocab) {}
  size_t size() const override { return toks_.size(); }
  void read(size_t start, size_t n, int32_t* out) const override {
    check(start + n <= toks_.size(), "token read past the end of the data");
    std::memcpy(out, toks_.data() + start, n * sizeof(int32_t));
  }
  uint32_t vocab_bound() const override { return vocab_; }
  const std::vector<int32_t>& tokens() const { return toks_; }

 private:
  std::vector<int32_t> toks_;
  uint32_t vocab_ = 0;
};

}  // namespace ada
