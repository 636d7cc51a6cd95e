// The commands of docs/recipes.md run as written. Shards are laid out as
// llm.c's FineWeb and TinyStories scripts leave them (made here by the
// project's tokenize with the GPT-2 tokenizer, renamed to llm.c's names, header
// word 3 zeroed as llm.c writes it), $LLMC points at them, and every
// `./train_gpu` command of the page runs with train_cpu (the same flags),
// with only the sizes overridden by flags appended at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "workflow_util.h"

using namespace ada;
using namespace ada::test;

namespace {

// The `./train_gpu ...` commands of a markdown page's code blocks, each with
// its continuation lines ("\" at the end) joined.
std::vector<std::string> train_gpu_commands(const std::string& markdown) {
  std::vector<std::string> out;
  std::stringstream ss(markdown);
  bool in_code = false;
  std::string line, cmd;
  while (std::getline(ss, line)) {
    if (line.rfind("```", 0) == 0) {
      in_code = !in_code;
      continue;
    }
    if (!in_code) continue;
    if (cmd.empty() && line.rfind("./train_gpu ", 0) != 0) continue;
    const bool more = !line.empty() && line.back() == '\\';
    cmd += more ? line.substr(0, line.size() - 1) : line;
    if (!more) out.push_back(cmd), cmd.clear();
  }
  return out;
}

// Renames a shard and zeroes header word 3 (the vocabulary, which llm.c's
// write_datafile leaves 0).
void as_llmc_shard(const std::string& from, const std::string& to) {
  ASSERT_EQ(std::rename(from.c_str(), to.c_str()), 0) << from;
  std::fstream f(to, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(3 * 4);
  const char zero[4] = {0, 0, 0, 0};
  f.write(zero, 4);
  ASSERT_TRUE(f.good()) << to;
}

size_t count_lines(const std::string& path) {
  const std::string s = read_bytes(path);
  return (size_t)std::count(s.begin(), s.end(), '\n');
}

}  // namespace

TEST(Recipes, EveryTrainGpuCommandRunsOnLlmcShards) {
  const std::string train_cpu = program("train_cpu"), tokenize = program("tokenize");
  if (train_cpu.empty() || tokenize.empty())
    GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string page = read_bytes("docs/recipes.md");
  ASSERT_FALSE(page.empty()) << "docs/recipes.md not found: run the tests from the repository root";
  const std::vector<std::string> cmds = train_gpu_commands(page);
  ASSERT_GE(cmds.size(), 3u) << "expected the FineWeb, adaponder and TinyStories commands";

  const std::string dir = scratch_dir("recipes"), llmc = dir + "/llm.c";
  const std::string fineweb = llmc + "/dev/data/fineweb10B", tiny = llmc + "/dev/data/tinystories";
  // 100 kB of the corpus: about 25k GPT-2 tokens, 10% of them validation.
  write_bytes(dir + "/text.txt", read_bytes("data/kjv.txt").substr(0, 100000));
  ProgramResult r = run_program(tokenize + " --tokenizer gpt2 --name fineweb --out-dir " + fineweb + " " + dir + "/text.txt", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_program(tokenize + " --tokenizer gpt2 --name TinyStories --out-dir " + tiny + " " + dir + "/text.txt", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  // llm.c's names: FineWeb's shard 0 is validation and training starts at 1;
  // TinyStories is one file per split.
  as_llmc_shard(fineweb + "/fineweb_val_000000.bin", fineweb + "/fineweb_val_000000.bin");
  as_llmc_shard(fineweb + "/fineweb_train_000000.bin", fineweb + "/fineweb_train_000001.bin");
  as_llmc_shard(tiny + "/TinyStories_val_000000.bin", tiny + "/TinyStories_val.bin");
  as_llmc_shard(tiny + "/TinyStories_train_000000.bin", tiny + "/TinyStories_train.bin");

  ASSERT_EQ(::setenv("LLMC", llmc.c_str(), 1), 0);
  const std::string sizes = " --steps 3 --warmup 1 --batch 2 --seq 32 --accum 2 --dim 32 --layers 1 --heads 2 "
                            "--hidden 64 --eval-every 0 --eval-batches 1 --save-every 0 --log-every 1 --threads 1";
  for (size_t i = 0; i < cmds.size(); i++) {
    SCOPED_TRACE(cmds[i]);
    const std::string run = dir + "/run" + std::to_string(i);
    r = run_program(train_cpu + cmds[i].substr(std::string("./train_gpu").size()) + sizes + " --out " + run, dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const bool is_tiny = cmds[i].find("TinyStories") != std::string::npos;
    const std::string train = is_tiny ? tiny + "/TinyStories_train.bin" : fineweb + "/fineweb_train_000001.bin";
    const std::string val = is_tiny ? tiny + "/TinyStories_val.bin" : fineweb + "/fineweb_val_000000.bin";
    EXPECT_NE(r.out.find("1 train shard(s) from " + train + ", 1 val shard(s) from " + val), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("tokens  128 per step (--accum 2 x --batch 2 x --seq 32), 384 in 3 steps"), std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("warning: this run sees its data"), std::string::npos) << r.out;
    EXPECT_EQ(count_lines(run + "/metrics.jsonl"), 3u);
    EXPECT_TRUE(exists(run + "/latest"));
  }
  ::unsetenv("LLMC");
  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}
