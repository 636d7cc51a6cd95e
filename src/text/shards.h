// llm.c token shards: writing them, and reading them memory-mapped as a
// TokenSource. Format (all little-endian; full description in docs/formats.md):
//
//   header   256 x int32 (1024 bytes)
//              [0] magic    20240520 (uint16 tokens) or 20240801 (uint32 tokens)
//              [1] version  1 with magic 20240520, 2 with magic 20240801
//              [2] number of tokens N (0 <= N < 2^31)
//              [3] vocabulary size, or 0 when unknown (our addition: llm.c
//                  writes 0 there and never reads it)
//              [4..255] 0
//   tokens   N x uint16 (version 1) or N x uint32 (version 2)
//
// The writer picks uint16 when vocab_size <= 65536, which keeps the files
// readable by llm.c (GPT-2's 50257 tokens fit), and uint32 above that.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/tokens.h"

namespace ada {

inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardVersionU16 = 1;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 2;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

// Writes tokens[0..n) as one shard. Atomic: the data goes to "<path>.tmp"
// which is then renamed to path, so a reader never sees a half-written shard.
// Throws ada::Error if a token is outside [0, vocab_size), n does not fit the
// header, or the file cannot be written.
void write_shard(const std::string& path, const int32_t* tokens, size_t n, uint32_t vocab_size);
inline void write_shard(const std::string& path, const std::vector<int32_t>& tokens, uint32_t vocab_size) {
  write_shard(path, tokens.data(), tokens.size(), vocab_size);
}

// One shard file, memory-mapped (pages are read on demand, not up front).
// The constructor validates the header and the file size and throws
// ada::Error naming the file and the problem.
class ShardTokens : public TokenSource {
 public:
  explicit ShardTokens(const std::string& path);
  ~ShardTokens() override;
  ShardTokens(const ShardTokens&) = delete;
  ShardTokens& operator=(const ShardTokens&) = delete;

  size_t size() const override { return n_tokens_; }
  // Throws naming the file and position for a uint32 id above INT32_MAX.
  void read(size_t start, size_t n, int32_t* out) const override;
  std::string locate(size_t pos) const override;
  // Header word [3]: the vocabulary the writer declared, 0 when unknown. Only
  // a record: the ids are checked by reading them (check_vocab), since one
  // flipped token makes the claim false.
  uint32_t header_vocab() const { return header_vocab_; }

  const std::string& path() const { return path_; }
  int bytes_per_token() const { return token_bytes_; }

 private:
  std::string path_;
  void* map_ = nullptr;  // the whole file
  size_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;  // just past the header
  size_t n_tokens_ = 0;
  int token_bytes_ = 2;
  uint32_t header_vocab_ = 0;
};

// Several shards read as one sequence, in the order given. When every shard
// has a class side file beside it ("x.bin" -> "x.cls", class_file.h), their
// classes are read (and validated against the shards) too; a side file beside
// only some of the shards is an error.
class MultiShardTokens : public TokenSource {
 public:
  explicit MultiShardTokens(const std::vector<std::string>& paths);

  size_t size() const override { return offsets_.back(); }
  void read(size_t start, size_t n, int32_t* out) const override;
  std::string locate(size_t pos) const override;  // the shard's file and the position in it
  // The shards' class side files (class_file.h), when every shard has one.
  const TokenClasses* classes() const override { return classes_.names.empty() ? nullptr : &classes_; }

  size_t num_shards() const { return shards_.size(); }
  const ShardTokens& shard(size_t i) const { return *shards_[i]; }

 private:
  std::vector<std::unique_ptr<ShardTokens>> shards_;
  std::vector<size_t> offsets_;  // offsets_[i] = tokens before shard i; back() = total
  TokenClasses classes_;         // empty names when the shards have no side files
  size_t shard_of(size_t pos) const;  // the shard holding token pos
};

// Shard files named by a glob pattern ("dir/*_train_*.bin"), a directory (all
// its *.bin files) or a single file, in sorted (byte-wise) order. Throws
// ada::Error when nothing matches.
std::vector<std::string> find_shards(const std::string& pattern_or_dir);

// find_shards() + MultiShardTokens.
std::unique_ptr<MultiShardTokens> open_shards(const std::string& pattern_or_dir);

}  // namespace ada
