// llm.c token shards: atomic writer, mmap reader, multi-shard concatenation.
#include "text/shards.h"

#include <algorithm>
#include <cstdio>
#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "text/class_file.h"

namespace ada {

void write_shard(const std::string& path, const int32_t* tokens, size_t n, uint32_t vocab_size) {
  check(vocab_size > 0, "write_shard: vocabulary size must be positive");
  check(n <= size_t(INT32_MAX), "write_shard: " + std::to_string(n) + " tokens do not fit one shard (max " +
                                    std::to_string(INT32_MAX) + ")");
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= vocab_size) {
      fail("write_shard " + path + ": token id " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
           " is outside the vocabulary (size " + std::to_string(vocab_size) + ")");
    }
  }
  const bool wide = vocab_size > 65536;
  int32_t header[kShardHeaderInts] = {};
  header[0] = wide ? kShardMagicU32 : kShardMagicU16;
  header[1] = wide ? kShardVersionU32 : kShardVersionU16;
  header[2] = int32_t(n);
  header[3] = int32_t(std::min<uint32_t>(vocab_size, INT32_MAX));

  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  check(f != nullptr, "cannot create token shard " + tmp);
  bool ok = std::fwrite(header, sizeof(header), 1, f) == 1;
  // Convert in blocks so that a big shard needs no second full-size buffer.
  const size_t block = 1 << 20;
  std::vector<uint16_t> narrow;
  std::vector<uint32_t> full;
  for (size_t start = 0; ok && start < n; start += block) {
    const size_t m = std::min(block, n - start);
    if (wide) {
      full.assign(tokens + start, tokens + start + m);
      ok = std::fwrite(full.data(), sizeof(uint32_t), m, f) == m;
    } else {
      narrow.assign(tokens + start, tokens + start + m);
      ok = std::fwrite(narrow.data(), sizeof(uint16_t), m, f) == m;
    }
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    fail("failed writing token shard " + tmp + " (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("cannot rename " + tmp + " to " + path);
  }
}

ShardTokens::ShardTokens(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    struct stat st;
    check(::stat(path.c_str(), &st) == 0, "token shard not found: " + path);
    fail("cannot open token shard: " + path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("token shard is not a regular file: " + path);
  }
  map_bytes_ = size_t(st.st_size);
  if (map_bytes_ == 0) {
    ::close(fd);
    fail("token shard is empty (0 bytes): " + path);
  }
  if (map_bytes_ < kShardHeaderBytes) {
    ::close(fd);
    fail("token shard " + path + " is too short for its header: " + std::to_string(map_bytes_) +
         " bytes, the header alone is " + std::to_string(kShardHeaderBytes) +
         "\nHINT: is this an llm.c token shard? Re-run ./tokenize to write it again.");
  }
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file open
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail("cannot memory-map token shard: " + path);
  }

  // From here on, errors must unmap: validate first, throw after cleanup.
  int32_t header[kShardHeaderInts];
  std::memcpy(header, map_, sizeof(header));
  std::string error;
  if (header[0] == kShardMagicU16 || header[0] == kShardMagicU32) {
    const bool wide = header[0] == kShardMagicU32;
    const int32_t want_version = wide ? kShardVersionU32 : kShardVersionU16;
    token_bytes_ = wide ? 4 : 2;
    const size_t expect_bytes = kShardHeaderBytes + size_t(std::max(header[2], 0)) * token_bytes_;
    if (header[1] != want_version) {
      error = "token shard " + path + ": unsupported version " + std::to_string(header[1]) + " for magic " +
              std::to_string(header[0]) + " (expected version " + std::to_string(want_version) + ")" +
              "\nHINT: the data encoding may have changed; re-run ./tokenize to write the shards again.";
    } else if (header[2] < 0) {
      error = "token shard " + path + ": negative token count " + std::to_string(header[2]) + " in the header";
    } else if (expect_bytes != map_bytes_) {
      const size_t found_tokens = (map_bytes_ - kShardHeaderBytes) / token_bytes_;
      error = "token shard " + path + ": header says " + std::to_string(header[2]) + " tokens (" +
              std::to_string(expect_bytes) + " bytes) but the file has " + std::to_string(map_bytes_) +
              " bytes (" + (map_bytes_ < expect_bytes ? "fewer" : "more") + " tokens: " +
              std::to_string(found_tokens) + ")" +
              "\nHINT: the file is truncated (an interrupted copy?) or not a shard; re-run ./tokenize.";
    }
  } else {
    error = "token shard " + path + ": wrong magic number " + std::to_string(header[0]) + " (expected " +
            std::to_string(kShardMagicU16) + " for uint16 tokens or " + std::to_string(kShardMagicU32) +
            " for uint32 tokens)" + "\nHINT: is this an llm.c token shard? Are you passing in the right file?";
  }
  if (!error.empty()) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    fail(error);
  }
  n_tokens_ = size_t(header[2]);
  tokens_ = static_cast<const unsigned char*>(map_) + kShardHeaderBytes;
  header_vocab_ = header[3] > 0 ? uint32_t(header[3]) : 0;
}

ShardTokens::~ShardTokens() {
  if (map_) ::munmap(map_, map_bytes_);
}

void ShardTokens::read(size_t start, size_t n, int32_t* out) const {
  check(start + n <= n_tokens_, "token read past the end of shard " + path_);
  // The token data starts 1024 bytes into a page-aligned mapping, so it is
  // aligned for both widths.
  if (token_bytes_ == 2) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(tokens_) + start;
    for (size_t i = 0; i < n; ++i) out[i] = p[i];
  } else {
    const uint32_t* p = reinterpret_cast<const uint32_t*>(tokens_) + start;
    for (size_t i = 0; i < n; ++i) {
      // int32_t(0xFFFFFFFF) would be -1, which a Batch reads as "no target".
      if (p[i] > uint32_t(INT32_MAX)) {
        fail("token shard " + path_ + ": token id " + std::to_string(p[i]) + " at " + locate(start + i) +
             " is larger than any vocabulary (the file is damaged)");
      }
      out[i] = int32_t(p[i]);
    }
  }
}

std::string ShardTokens::locate(size_t pos) const {
  return "position " + std::to_string(pos) + " of shard " + path_;
}

MultiShardTokens::MultiShardTokens(const std::vector<std::string>& paths) {
  check(!paths.empty(), "no token shards given");
  offsets_.push_back(0);
  for (const std::string& p : paths) {
    shards_.push_back(std::make_unique<ShardTokens>(p));
    offsets_.push_back(offsets_.back() + shards_.back()->size());
  }
  std::vector<size_t> sizes;
  for (auto& s : shards_) sizes.push_back(s->size());
  classes_ = read_shard_classes(paths, sizes);
}

size_t MultiShardTokens::shard_of(size_t pos) const {
  // The last shard whose offset is <= pos (empty shards are skipped over).
  return size_t(std::upper_bound(offsets_.begin(), offsets_.end(), pos) - offsets_.begin()) - 1;
}

std::string MultiShardTokens::locate(size_t pos) const {
  if (pos >= size()) return TokenSource::locate(pos);
  const size_t s = shard_of(pos);
  return shards_[s]->locate(pos - offsets_[s]);
}

void MultiShardTokens::read(size_t start, size_t n, int32_t* out) const {
  check(start + n <= size(), "token read past the end of the shards");
  size_t s = shard_of(start);
  while (n > 0) {
    const size_t local = start - offsets_[s];
    const size_t m = std::min(n, shards_[s]->size() - local);
    shards_[s]->read(local, m, out);
    out += m;
    start += m;
    n -= m;
    ++s;
  }
}

std::vector<std::string> find_shards(const std::string& pattern_or_dir) {
  struct stat st;
  const bool is_dir = ::stat(pattern_or_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  const std::string pattern = is_dir ? pattern_or_dir + "/*.bin" : pattern_or_dir;
  glob_t g;
  std::vector<std::string> paths;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  if (paths.empty()) {
    const bool has_wildcard = pattern_or_dir.find_first_of("*?[") != std::string::npos;
    if (is_dir) fail("no token shards (*.bin) in directory " + pattern_or_dir);
    if (has_wildcard) fail("no token shards match " + pattern_or_dir);
    fail("token shard not found: " + pattern_or_dir);
  }
  std::sort(paths.begin(), paths.end());  // byte-wise, whatever the locale
  return paths;
}

std::unique_ptr<MultiShardTokens> open_shards(const std::string& pattern_or_dir) {
  return std::make_unique<MultiShardTokens>(find_shards(pattern_or_dir));
}

}  // namespace ada
