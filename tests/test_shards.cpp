// llm.c token shards: write/read round trips (uint16 and uint32), the header
// layout, multi-shard concatenation, and one clear error per bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "text/shards.h"

namespace ada {
namespace {

template <class Fn>
void expect_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an ada::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

// A fresh, empty folder per test.
std::string temp_dir(const std::string& name) {
  const std::string dir = testing::TempDir() + "ada_shards_" + std::to_string(::getpid()) + "_" + name;
  EXPECT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  return dir;
}

std::vector<int32_t> iota_tokens(size_t n, int32_t first, int32_t modulo) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = int32_t((first + int64_t(i) * 7919) % modulo);
  return t;
}

std::vector<int32_t> read_all(const TokenSource& src) {
  std::vector<int32_t> out(src.size());
  src.read(0, out.size(), out.data());
  return out;
}

std::vector<int32_t> read_header(const std::string& path) {
  std::vector<int32_t> h(kShardHeaderInts);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(h.data()), kShardHeaderBytes);
  return h;
}

size_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? size_t(st.st_size) : 0;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

TEST(Shards, Uint16RoundTripAndHeader) {
  const std::string dir = temp_dir("u16");
  const std::string path = dir + "/x_train_000000.bin";
  const auto tokens = iota_tokens(1000, 3, 50257);
  write_shard(path, tokens, 50257);
  EXPECT_EQ(file_size(path), 1024u + 2 * 1000);
  EXPECT_NE(::access((path + ".tmp").c_str(), F_OK), 0);  // the temp file was renamed away
  const auto h = read_header(path);
  EXPECT_EQ(h[0], 20240520);
  EXPECT_EQ(h[1], 1);
  EXPECT_EQ(h[2], 1000);
  EXPECT_EQ(h[3], 50257);
  EXPECT_TRUE(std::all_of(h.begin() + 4, h.end(), [](int32_t v) { return v == 0; }));

  ShardTokens shard(path);
  EXPECT_EQ(shard.size(), 1000u);
  EXPECT_EQ(shard.bytes_per_token(), 2);
  EXPECT_EQ(shard.header_vocab(), 50257u);
  EXPECT_EQ(read_all(shard), tokens);
  int32_t part[5];
  shard.read(997, 3, part);
  EXPECT_EQ(part[0], tokens[997]);
  EXPECT_EQ(part[2], tokens[999]);
  expect_error([&] { shard.read(998, 3, part); }, "past the end");
  // The largest uint16 vocabulary still uses 2-byte tokens.
  write_shard(path, {0, 65535}, 65536);
  EXPECT_EQ(read_all(ShardTokens(path)), (std::vector<int32_t>{0, 65535}));
}

TEST(Shards, Uint32RoundTripForLargeVocabularies) {
  const std::string dir = temp_dir("u32");
  const std::string path = dir + "/big.bin";
  auto tokens = iota_tokens(777, 11, 200000);
  tokens.push_back(199999);
  write_shard(path, tokens, 200000);
  EXPECT_EQ(file_size(path), 1024u + 4 * 778);
  const auto h = read_header(path);
  EXPECT_EQ(h[0], 20240801);
  EXPECT_EQ(h[1], 2);
  EXPECT_EQ(h[2], 778);
  ShardTokens shard(path);
  EXPECT_EQ(shard.bytes_per_token(), 4);
  EXPECT_EQ(shard.header_vocab(), 200000u);
  EXPECT_EQ(read_all(shard), tokens);
}

TEST(Shards, EmptyShardIsValid) {
  const std::string path = temp_dir("zero") + "/zero.bin";
  write_shard(path, std::vector<int32_t>{}, 256);
  EXPECT_EQ(ShardTokens(path).size(), 0u);
}

TEST(Shards, MultiShardConcatenatesInSortedOrder) {
  const std::string dir = temp_dir("multi");
  const auto a = iota_tokens(10, 1, 300), b = iota_tokens(1, 2, 300), c = iota_tokens(25, 3, 300);
  // Written out of order; read back sorted by name.
  write_shard(dir + "/d_train_000002.bin", c, 300);
  write_shard(dir + "/d_train_000000.bin", a, 300);
  write_shard(dir + "/d_train_000001.bin", b, 300);
  write_shard(dir + "/d_val_000000.bin", b, 300);
  std::vector<int32_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c.begin(), c.end());

  const auto train = open_shards(dir + "/*_train_*.bin");
  EXPECT_EQ(train->num_shards(), 3u);
  EXPECT_EQ(train->shard(0).path(), dir + "/d_train_000000.bin");
  EXPECT_EQ(train->size(), 36u);
  EXPECT_EQ(train->shard(2).header_vocab(), 300u);
  EXPECT_EQ(train->locate(10), "position 0 of shard " + dir + "/d_train_000001.bin");  // shards of 10, 1, 25
  EXPECT_EQ(train->locate(12), "position 1 of shard " + dir + "/d_train_000002.bin");
  EXPECT_EQ(read_all(*train), all);
  // Reads that cross one and two shard boundaries.
  for (size_t start : {0u, 8u, 9u, 10u, 11u}) {
    std::vector<int32_t> got(36 - start - 1);
    train->read(start, got.size(), got.data());
    EXPECT_EQ(got, std::vector<int32_t>(all.begin() + start, all.end() - 1)) << "start " << start;
  }
  // A directory means all its .bin files.
  EXPECT_EQ(find_shards(dir).size(), 4u);
  EXPECT_EQ(find_shards(dir + "/d_val_000000.bin").size(), 1u);
}

TEST(Shards, ValidationErrors) {
  const std::string dir = temp_dir("bad");
  const std::string path = dir + "/bad.bin";
  expect_error([&] { ShardTokens s(dir + "/missing.bin"); }, "token shard not found: " + dir + "/missing.bin");
  expect_error([&] { open_shards(dir + "/*_train_*.bin"); }, "no token shards match");
  expect_error([&] { open_shards(dir); }, "no token shards (*.bin) in directory");

  write_bytes(path, "");
  expect_error([&] { ShardTokens s(path); }, "token shard is empty");
  write_bytes(path, "hello");
  expect_error([&] { ShardTokens s(path); }, "too short for its header: 5 bytes");

  write_shard(path, iota_tokens(100, 0, 1000), 1000);
  const std::string good(std::istreambuf_iterator<char>(std::ifstream(path, std::ios::binary).rdbuf()), {});
  const auto patched = [&](int word, int32_t value) {
    std::string b = good;
    std::memcpy(&b[4 * word], &value, 4);
    return b;
  };
  write_bytes(path, patched(0, 12345));
  expect_error([&] { ShardTokens s(path); }, "wrong magic number 12345");
  write_bytes(path, patched(1, 7));
  expect_error([&] { ShardTokens s(path); }, "unsupported version 7 for magic 20240520 (expected version 1)");
  // Fewer tokens in the file than the header says (a truncated copy)...
  write_bytes(path, good.substr(0, good.size() - 20));
  try {
    ShardTokens s(path);
    ADD_FAILURE() << "truncated shard accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("header says 100 tokens (1224 bytes) but the file has 1204 bytes (fewer tokens: 90)"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("\nHINT: "), std::string::npos) << msg;
  }
  // ...or more.
  write_bytes(path, good + "xx");
  expect_error([&] { ShardTokens s(path); }, "but the file has 1226 bytes (more tokens: 101)");
  write_bytes(path, patched(2, -5));
  expect_error([&] { ShardTokens s(path); }, "negative token count");

  // The writer refuses ids outside the vocabulary and leaves nothing behind.
  expect_error([&] { write_shard(dir + "/w.bin", {1, 2, 300}, 300); },
               "token id 300 at position 2 is outside the vocabulary (size 300)");
  expect_error([&] { write_shard(dir + "/w.bin", {-1}, 300); }, "token id -1 at position 0");
  EXPECT_NE(::access((dir + "/w.bin").c_str(), F_OK), 0);
  expect_error([&] { write_shard(dir + "/no/such/dir/w.bin", {1}, 300); }, "cannot create token shard");
}

}  // namespace
}  // namespace ada
