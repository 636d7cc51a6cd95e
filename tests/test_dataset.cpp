// Datasets: text files and shard specs -> train/val sources, the split, the
// UTF-8 and vocabulary checks, and the tokenize program as a subprocess.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "core/common.h"
#include "text/dataset.h"
#include "text/shards.h"
#include "text/tokenizer.h"

namespace ada {
namespace {

std::string data_dir() {
  const char* d = std::getenv("ADA_DATA_DIR");
  return d ? d : "data";
}

template <class Fn>
void expect_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an ada::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

std::string temp_dir(const std::string& name) {
  const std::string dir = testing::TempDir() + "ada_dataset_" + std::to_string(::getpid()) + "_" + name;
  EXPECT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  return dir;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<int32_t> read_all(const TokenSource& src) {
  std::vector<int32_t> out(src.size());
  src.read(0, out.size(), out.data());
  return out;
}

std::vector<int32_t> range_tokens(int32_t begin, int32_t end) {
  std::vector<int32_t> t;
  for (int32_t i = begin; i < end; ++i) t.push_back(i % 256);
  return t;
}

TEST(Dataset, TextFileSplitsTheLastFraction) {
  const std::string path = temp_dir("text") + "/t.txt";
  std::string text;
  for (int i = 0; i < 100; ++i) text += char('a' + i % 26);
  write_text(path, text);
  ByteTokenizer bytes;
  const Dataset ds = open_dataset(path, &bytes, 0.1);
  ASSERT_EQ(ds.train->size(), 90u);
  ASSERT_EQ(ds.val->size(), 10u);
  const auto train = read_all(*ds.train), val = read_all(*ds.val);
  EXPECT_EQ(std::string(train.begin(), train.end()), text.substr(0, 90));
  EXPECT_EQ(std::string(val.begin(), val.end()), text.substr(90));
  EXPECT_EQ(ds.val->locate(3), "position 93 of the tokens of " + path);
  EXPECT_NE(ds.description.find("train 90 tokens, val 10 tokens"), std::string::npos) << ds.description;

  EXPECT_EQ(open_dataset(path, &bytes, 0.0).val->size(), 0u);
  EXPECT_EQ(open_dataset(path, &bytes, 0.25).val->size(), 25u);
  expect_error([&] { open_dataset(path, &bytes, 1.0); }, "validation fraction must be in [0, 1)");
  expect_error([&] { open_dataset(path, nullptr); }, "a text dataset needs a tokenizer");
}

TEST(Dataset, TextDocumentStartsWithEndOfText) {
  const std::string path = temp_dir("eot") + "/t.txt";
  write_text(path, "Hello world");
  auto gpt2 = load_tokenizer(data_dir() + "/gpt2");
  const Dataset ds = open_dataset(path, gpt2.get(), 0.4);
  std::vector<int32_t> all = read_all(*ds.train);
  const auto val = read_all(*ds.val);
  all.insert(all.end(), val.begin(), val.end());
  EXPECT_EQ(all, (std::vector<int32_t>{50256, 15496, 995}));
  EXPECT_EQ(ds.val->size(), 1u);  // floor(3 * 0.4) = 1
}

TEST(Dataset, TextFileErrors) {
  const std::string dir = temp_dir("texterr");
  ByteTokenizer bytes;
  expect_error([&] { open_dataset(dir + "/missing.txt", &bytes); }, "dataset not found: " + dir + "/missing.txt");
  write_text(dir + "/empty.txt", "");
  expect_error([&] { open_dataset(dir + "/empty.txt", &bytes); }, "text file is empty");
  // Invalid UTF-8: a lone continuation byte on line 2 at byte offset 9.
  write_text(dir + "/bin.txt", "line one\n\x80oops\n");
  expect_error([&] { open_dataset(dir + "/bin.txt", &bytes); },
               "is not valid UTF-8: byte 0x80 at byte offset 9 (line 2)");
  write_text(dir + "/trunc.txt", "ok \xe4\xb8");  // a cut 3-byte character at the end
  expect_error([&] { read_text_file(dir + "/trunc.txt"); }, "byte 0xE4 at byte offset 3");
  write_text(dir + "/ok.txt", "caf\xc3\xa9 \xf0\x9f\x98\x80\n");
  EXPECT_EQ(read_text_file(dir + "/ok.txt"), "caf\xc3\xa9 \xf0\x9f\x98\x80\n");
}

TEST(Dataset, ShardDirectoryGlobAndSingleFile) {
  const std::string dir = temp_dir("shards");
  const auto t0 = range_tokens(0, 50), t1 = range_tokens(50, 80), v0 = range_tokens(200, 220);
  write_shard(dir + "/kjv_train_000000.bin", t0, 256);
  write_shard(dir + "/kjv_train_000001.bin", t1, 256);
  write_shard(dir + "/kjv_val_000000.bin", v0, 256);
  std::vector<int32_t> train = t0;
  train.insert(train.end(), t1.begin(), t1.end());

  for (const std::string& spec : {dir, dir + "/", dir + "/*_train_*.bin", dir + "/kjv_train_??????.bin"}) {
    const Dataset ds = open_dataset(spec, nullptr);
    EXPECT_EQ(read_all(*ds.train), train) << spec;
    EXPECT_EQ(read_all(*ds.val), v0) << spec;
  }
  // A single train file: its val twin (same name, "train" -> "val") is used...
  const Dataset first = open_dataset(dir + "/kjv_train_000000.bin", nullptr);
  EXPECT_EQ(read_all(*first.train), t0);
  EXPECT_EQ(read_all(*first.val), v0);
  // ...and without one (there is no kjv_val_000001.bin) the file is split.
  const Dataset second = open_dataset(dir + "/kjv_train_000001.bin", nullptr, 0.1);
  EXPECT_EQ(read_all(*second.train), std::vector<int32_t>(t1.begin(), t1.begin() + 27));
  EXPECT_EQ(read_all(*second.val), std::vector<int32_t>(t1.begin() + 27, t1.end()));

  // Without val shards the last fraction of the train tokens is validation.
  std::remove((dir + "/kjv_val_000000.bin").c_str());
  const Dataset split = open_dataset(dir, nullptr, 0.2);
  EXPECT_EQ(split.train->size(), 64u);
  EXPECT_EQ(read_all(*split.val), std::vector<int32_t>(train.begin() + 64, train.end()));
  EXPECT_NE(split.description.find("no val shards"), std::string::npos) << split.description;

  expect_error([&] { open_dataset(dir + "/*_test_*.bin", nullptr); }, "no token shards match");
  const std::string empty_dir = temp_dir("noshards");
  expect_error([&] { open_dataset(empty_dir, nullptr); }, "no training shards (*train*.bin) in directory");
}

TEST(Dataset, CheckVocabNamesTheFirstBadToken) {
  VectorTokens ok({1, 2, 3});
  check_vocab(ok, 4);
  VectorTokens bad({1, 2, 3, 300, 5, 999});
  expect_error([&] { check_vocab(bad, 256, "my data"); },
               "my data: token id 300 at position 3 is outside the vocabulary (size 256)");
  VectorTokens negative({0, -2});
  expect_error([&] { check_vocab(negative, 256); }, "token id -2 at position 1");
  // A passed scan is remembered as the largest id + 1, never more.
  check_vocab(ok, 100);
  EXPECT_EQ(ok.scanned_below, 4u);
  expect_error([&] { check_vocab(ok, 3); }, "token id 3 at position 2 is outside the vocabulary (size 3)");

  // Through open_dataset: shards written for a bigger vocabulary, opened with
  // the bytes tokenizer.
  const std::string dir = temp_dir("vocab");
  write_shard(dir + "/x_train_000000.bin", {1, 2, 3, 4096, 7}, 5000);
  ByteTokenizer bytes;
  expect_error([&] { open_dataset(dir, &bytes, 0.2); }, "token id 4096 at position 3 of shard " + dir +
                                                            "/x_train_000000.bin is outside the vocabulary (size 256)");
  EXPECT_EQ(open_dataset(dir, nullptr, 0.2).train->size(), 4u);
}

// --- the tokenize program -------------------------------------------------
// Its path comes from ADA_TOKENIZE_BIN, else ./tokenize (where `make` puts
// it); the tests skip when neither exists.

std::string tokenize_bin() {
  const char* env = std::getenv("ADA_TOKENIZE_BIN");
  const std::string path = env ? env : "./tokenize";
  return ::access(path.c_str(), X_OK) == 0 ? path : "";
}

// Runs a shell command; returns its exit status, stderr in *err.
int run(const std::string& cmd, std::string* err) {
  const std::string err_file = testing::TempDir() + "ada_tokenize_stderr_" + std::to_string(::getpid());
  const int status = std::system((cmd + " >/dev/null 2>" + err_file).c_str());
  *err = slurp(err_file);
  std::remove(err_file.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TokenizeProgram, BadFlagsGiveOneErrorLine) {
  const std::string bin = tokenize_bin();
  if (bin.empty()) GTEST_SKIP() << "tokenize binary not found (set ADA_TOKENIZE_BIN)";
  const std::string dir = temp_dir("prog_bad");
  write_text(dir + "/in.txt", "hello");
  for (const std::string& args :
       {std::string("--bogus 1 ") + dir + "/in.txt", std::string("--tokenizer bytes"),
        "--tokenizer bytes --out-dir " + dir + " --shard-tokens abc " + dir + "/in.txt",
        "--tokenizer bytes --out-dir " + dir + " --val-fraction 1.5 " + dir + "/in.txt",
        "--tokenizer bytes " + dir + "/in.txt", "--train-bpe 100 --bpe-out x.txt " + dir + "/in.txt",
        "--tokenizer nope.txt --out-dir " + dir + " " + dir + "/in.txt",
        "--tokenizer bytes --out-dir " + dir + " " + dir + "/missing.txt", std::string("--tokenizer")}) {
    std::string err;
    EXPECT_EQ(run(bin + " " + args, &err), 1) << args;
    EXPECT_EQ(err.rfind("error: ", 0), 0u) << args << " -> " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << args << " -> " << err;
  }
}

TEST(TokenizeProgram, ShardsMatchTheInMemoryDataset) {
  const std::string bin = tokenize_bin();
  if (bin.empty()) GTEST_SKIP() << "tokenize binary not found (set ADA_TOKENIZE_BIN)";
  const std::string dir = temp_dir("prog");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "In the beginning " + std::to_string(i) + " was the word.\n";
  write_text(dir + "/doc.txt", text);
  std::string err;
  ASSERT_EQ(run(bin + " --train-bpe 300 --bpe-out " + dir + "/bpe.txt --out-dir " + dir +
                    "/out --shard-tokens 100 --val-fraction 0.1 " + dir + "/doc.txt",
                &err),
            0)
      << err;
  // The shards, re-read through open_dataset, equal the text tokenized in memory.
  const auto bpe = load_tokenizer(dir + "/bpe.txt");
  const Dataset from_text = open_dataset(dir + "/doc.txt", bpe.get(), 0.1);
  const Dataset from_shards = open_dataset(dir + "/out", bpe.get());
  EXPECT_EQ(read_all(*from_shards.train), read_all(*from_text.train));
  EXPECT_EQ(read_all(*from_shards.val), read_all(*from_text.val));
  EXPECT_EQ(::access((dir + "/out/doc_train_000001.bin").c_str(), F_OK), 0);  // > 100 tokens: several shards
}

}  // namespace
}  // namespace ada
