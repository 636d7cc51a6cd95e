// A read-only sequence of token ids: the one interface the trainer, eval and
// the batch sampler read data through. Implementations: VectorTokens (in
// memory) here; memory-mapped llm.c shards and tokenized text in dataset.h.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/common.h"

namespace ada {

// The difficulty class of every token of a source (a synthetic task's class
// side file: docs/formats.md, docs/tasks.md): ids[i] is the class of token i,
// an index into names.
struct TokenClasses {
  std::vector<std::string> names;
  std::vector<uint8_t> ids;

  // Throws ada::Error unless there are n ids, each naming a class.
  void validate(size_t n, const std::string& what) const {
    check(ids.size() == n, what + ": " + std::to_string(ids.size()) + " class ids for " + std::to_string(n) + " tokens");
    for (size_t i = 0; i < ids.size(); i++)
      check(ids[i] < names.size(), what + ": token " + std::to_string(i) + " has class " + std::to_string(ids[i]) +
                                       " but there are " + std::to_string(names.size()) + " classes");
  }
};

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual size_t size() const = 0;  // number of tokens
  // Copies tokens [start, start + n) to out; start + n <= size().
  virtual void read(size_t start, size_t n, int32_t* out) const = 0;
  // Largest token id + 1 that this source may contain (for checking against the
  // model's vocabulary); 0 when unknown.
  virtual uint32_t vocab_bound() const { return 0; }
  // The difficulty class of every token, or null when the data has none.
  virtual const TokenClasses* classes() const { return nullptr; }
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
  const TokenClasses* classes() const override { return classes_.names.empty() ? nullptr : &classes_; }
  const std::vector<int32_t>& tokens() const { return toks_; }
  // Gives every token a class (one id per token).
  void set_classes(TokenClasses c) {
    c.validate(toks_.size(), "token classes");
    classes_ = std::move(c);
  }

 private:
  std::vector<int32_t> toks_;
  uint32_t vocab_ = 0;
  TokenClasses classes_;
};

}  // namespace ada
