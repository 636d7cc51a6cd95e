// Helpers shared by the checkpoint and workflow tests: scratch folders, file
// bytes, error expectations, a tiny training setup on in-memory tokens, and
// running the programs as subprocesses.
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "core/common.h"
#include "core/rng.h"
#include "train/options.h"
#include "text/dataset.h"

namespace ada::test {

// Sets the OpenMP thread count for a scope. The tiny models of these tests
// are fastest on one thread (on a loaded 2-core machine a parallel region
// costs more than the work in it); determinism is per thread count.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ScopedThreads() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

// A fresh, empty folder per test.
inline std::string scratch_dir(const std::string& name) {
  const std::string dir = testing::TempDir() + "ada_wf_" + std::to_string(::getpid()) + "_" + name;
  EXPECT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  return dir;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

inline bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// fn() must throw an ada::Error whose message contains every needle.
template <class Fn>
void expect_error(Fn fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an ada::Error containing '" << needles.front() << "'";
  } catch (const Error& e) {
    for (auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << "message: " << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
  }
}

// Tokens of a noisy periodic sequence (learnable, so the loss moves), V = 23.
inline Dataset toy_data(int vocab = 23, size_t n = 3000) {
  Rng r(99);
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; i++) t[i] = r.uniform() < 0.8 ? int32_t((i * 7 + i / 5) % vocab) : int32_t(r.below(vocab));
  const size_t n_val = n / 10;
  Dataset d;
  d.train = std::make_shared<VectorTokens>(std::vector<int32_t>(t.begin(), t.end() - n_val));
  d.val = std::make_shared<VectorTokens>(std::vector<int32_t>(t.end() - n_val, t.end()));
  d.description = "toy";
  return d;
}

// The `test` model (V=23, D=16, L=2), tiny batches: a step takes well under a millisecond.
inline TrainOptions toy_options(const std::string& out, const std::string& method = "standard", long long steps = 30) {
  TrainOptions o;
  o.method = method;
  o.config = "test";
  o.tokenizer = "bytes";  // recorded in the checkpoint only: these runs train on in-memory tokens
  o.steps = steps;
  o.batch = 2, o.seq = 16;
  o.lr = 1e-2, o.warmup = 5;
  o.eval_every = 10, o.eval_batches = 2, o.log_every = 1000;
  o.method_opts.ponder_steps = 2;
  o.method_opts.iters = 1;
  o.out = out;
  return o;
}

// A program of the project, when the binaries' folder is given (ADA_BIN_DIR).
inline std::string program(const std::string& name) {
  const char* dir = std::getenv("ADA_BIN_DIR");
  if (!dir || !*dir) return "";
  const std::string p = std::string(dir) + "/" + name;
  return exists(p) ? p : "";
}

struct ProgramResult {
  int status = -1;
  std::string out, err;
};

// Runs a shell command line, capturing stdout and stderr.
inline ProgramResult run_program(const std::string& cmd, const std::string& scratch) {
  const std::string o = scratch + "/stdout.txt", e = scratch + "/stderr.txt";
  const int rc = std::system(("OMP_NUM_THREADS=1 " + cmd + " >" + o + " 2>" + e).c_str());
  ProgramResult r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = read_bytes(o);
  r.err = read_bytes(e);
  return r;
}

// Exit status 1 and exactly one line on stderr: "error: ..." containing needle.
inline void expect_program_error(const ProgramResult& r, const std::string& needle) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

}  // namespace ada::test
