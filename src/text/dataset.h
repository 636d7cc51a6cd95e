// Opening training data: a dataset "spec" becomes a train and a validation
// TokenSource. Accepted specs:
//
//   a raw text file     read whole (must be valid UTF-8), tokenized in memory
//                       as one document ([eot] + tokens when the tokenizer has
//                       an end-of-text token, like llm.c's data scripts); the
//                       last val_fraction of the tokens is validation
//   a directory         llm.c layout: train = DIR/*train*.bin, val = DIR/*val*.bin
//   a glob pattern      e.g. "dir/*_train_*.bin": train = the matches; val =
//                       the same pattern with its last "train" replaced by "val"
//   a single .bin file  like a pattern matching one file
//
// For shards, when no validation shard is found, the last val_fraction of the
// training tokens is used for validation instead (Dataset::description says
// which). Shards are memory-mapped, never read whole.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "text/tokenizer.h"
#include "text/tokens.h"

namespace ada {

struct Dataset {
  std::shared_ptr<TokenSource> train;
  std::shared_ptr<TokenSource> val;
  std::string description;  // one line for logs: what was opened, token counts
};

// tokenizer may be null for shard specs (it is needed for text). When it is
// given, both sources are checked with check_vocab(source, tokenizer->vocab_size()).
// val_fraction must be in [0, 1). Throws ada::Error naming the problem.
Dataset open_dataset(const std::string& spec, const Tokenizer* tokenizer, double val_fraction = 0.1);

// Throws ada::Error naming the first token id outside [0, vocab_size), its
// file and position (source.locate), e.g. "training data d: token id 16628 at
// position 5 of shard d/x_train_000000.bin is outside the vocabulary (size
// 256)". One pass over the data, read as the model will read it; nothing a
// file says about itself (a shard header's vocabulary) is trusted. A second
// call on the same object with a vocabulary at least as large as the ids
// found costs nothing (TokenSource::scanned_below). `what` names the source.
void check_vocab(const TokenSource& source, uint32_t vocab_size, const std::string& what = "dataset");

// Reads a whole text file; throws ada::Error if it is missing, empty or not
// valid UTF-8 (naming the byte offset and line of the first bad byte).
std::string read_text_file(const std::string& path);

// One document's tokens: [eot] + encode(text) when the tokenizer has an
// end-of-text token, else just encode(text).
std::vector<int32_t> tokenize_document(const std::string& text, const Tokenizer& tokenizer);

// How many of n tokens go to validation: floor(n * val_fraction), but at least
// one when val_fraction > 0 and n >= 2. The validation tokens are the last ones.
size_t num_val_tokens(size_t n, double val_fraction);

// Tokens [begin, begin + n) of another source, which it keeps alive, with
// the same slice of the source's classes when it has some.
class SliceTokens : public TokenSource {
 public:
  SliceTokens(std::shared_ptr<const TokenSource> base, size_t begin, size_t n);
  size_t size() const override { return n_; }
  void read(size_t start, size_t n, int32_t* out) const override;
  std::string locate(size_t pos) const override;  // the base's position
  const TokenClasses* classes() const override { return classes_.names.empty() ? nullptr : &classes_; }

 private:
  std::shared_ptr<const TokenSource> base_;
  size_t begin_, n_;
  TokenClasses classes_;
};

}  // namespace ada
