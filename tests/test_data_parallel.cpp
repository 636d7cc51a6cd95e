// Data-parallel training (docs/scaling.md): train_cpu_mpi under mpirun.
//   * 2 ranks with --batch B take the same steps as 1 rank with --batch 2B:
//     standard, adaponder with its bottom-k ponder loss over the global
//     batch and data-dependent pruning acting, and tah with its depth labels
//     cut over the global batch;
//   * a resume with the same number of ranks is exact, one with another
//     number says so;
//   * a rank that dies, or that fails with an error while the other waits in
//     a collective, ends the whole run within seconds;
//   * train_cpu (no MPI) refuses to run as one of several mpirun processes.
// Skipped where MPI or the programs are missing (`make test` builds
// train_cpu_mpi when mpicxx is installed; .ci/run installs OpenMPI).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <dirent.h>
#include <thread>

#include "core/json.h"
#include "core/rng.h"
#include "train/safetensors.h"
#include "workflow_util.h"

namespace ada::test {
namespace {

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

// mpirun for n ranks (as root Open MPI asks for --allow-run-as-root; a CI
// machine may have fewer cores than ranks).
std::string mpirun(int n) {
  return std::string("mpirun ") + (::geteuid() == 0 ? "--allow-run-as-root " : "") + "--oversubscribe -np " +
         std::to_string(n) + " ";
}

#define REQUIRE_MPI()                                                                                    \
  if (program("train_cpu_mpi").empty() || program("train_cpu").empty() || !have_mpirun())               \
  GTEST_SKIP() << "needs mpirun and train_cpu_mpi, train_cpu in ADA_BIN_DIR (make test with OpenMPI installed)"

// 40 KB of text (words from a small list, seeded): the bytes tokenizer
// trains on it.
std::string write_text(const std::string& dir) {
  const char* words[] = {"the", "light", "was", "upon", "water", "and", "a", "voice", "said", "let", "there", "be"};
  Rng r(7);
  std::string text;
  while (text.size() < 40000) text += std::string(words[r.below(12)]) + (r.below(9) == 0 ? ".\n" : " ");
  const std::string path = dir + "/text.txt";
  write_bytes(path, text);
  return path;
}

// The flags of every run below: the `test` model on bytes, 8 steps.
std::string common_flags(const std::string& data) {
  return "--config test --vocab 256 --tokenizer bytes --data " + data +
         " --seq 32 --steps 8 --lr 1e-2 --warmup 2 --eval-every 4 --eval-batches 2 --threads 1";
}

// The flags that make adaponder's data-dependent work act within 8 steps: the
// bottom-k ponder loss from step 2 (k ramps to 0.3 over 2 steps), gates that
// start at 0.9 just above tau, so that tokens stop at different passes
// (steps 5 and 6 here have both 1-pass and 3-pass tokens).
const char* kAdaPonderFlags =
    " --method adaponder --ponder-steps 2 --warmup-ce-steps 0 --ponder-k-warmup 2 --ponder-k 0.3"
    " --ponder-lambda 0.3 --gate-bias 2.2 --tau 0.897";

std::vector<Json> metrics(const std::string& run) {
  std::vector<Json> out;
  std::istringstream in(read_bytes(run + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(parse_json(line, run));
  return out;
}

double field(const Json& j, const char* key) {
  const Json* f = j.find(key);
  return f ? f->number : NAN;
}

// 2 ranks x --batch 2 against 1 rank x --batch 4, then the parameters and
// every step's loss.
//
// Tolerance: the two runs see the same 4 windows per step (batcher.h) and the
// same selections, and differ only in the order of float sums: the 1-rank
// gradient sums 128 tokens at once, the 2-rank one sums 64 per rank and then
// the two ranks. Those gradients agree to a few float ulps (relative ~1e-6);
// AdamW divides by sqrt(v), so an element's update differs by about that
// relative amount times lr, more only where its gradient is at the rounding
// level, where the update itself is at most lr. We allow each parameter
// 1e-3 of the largest distance AdamW can move it in these 8 steps, the sum of
// the learning rates (0.0525): 5.25e-5. Measured: 1.5e-7 (standard) and
// 1.2e-7 (adaponder), 1e-6 (tah). A wrong split (a rank reading another's windows, a
// missing average) moves parameters far more; a per-rank bottom-k instead of
// the global one (tried by hand) differs by 6e-4.
// Returns the scratch folder (runs one/ and two/).
std::string expect_same_training(const std::string& name, const std::string& method_flags) {
  const std::string dir = scratch_dir("dp_" + name);
  const std::string data = write_text(dir);
  const std::string flags = common_flags(data) + method_flags;
  const ProgramResult one =
      run_program(program("train_cpu") + " " + flags + " --batch 4 --out " + dir + "/one", dir);
  EXPECT_EQ(one.status, 0) << one.err;
  const ProgramResult two =
      run_program(mpirun(2) + program("train_cpu_mpi") + " " + flags + " --batch 2 --out " + dir + "/two", dir);
  EXPECT_EQ(two.status, 0) << two.err;
  EXPECT_NE(two.out.find("MPI, 2 ranks"), std::string::npos) << two.out;

  if (one.status != 0 || two.status != 0) return dir;
  const auto la = metrics(dir + "/one"), lb = metrics(dir + "/two");
  EXPECT_EQ(la.size(), 8u);
  EXPECT_EQ(lb.size(), 8u);
  if (la.size() != 8 || lb.size() != 8) return dir;
  double lr_sum = 0;
  for (auto& j : la) lr_sum += field(j, "lr");
  const double tol = 1e-3 * lr_sum;
  SafetensorsFile a(dir + "/one/ckpt_8/model.safetensors"), b(dir + "/two/ckpt_8/model.safetensors");
  EXPECT_EQ(a.tensors().size(), b.tensors().size());
  double worst = 0;
  std::vector<float> pa, pb;
  for (auto& t : a.tensors()) {
    a.read_floats(t.name, pa);
    b.read_floats(t.name, pb);
    EXPECT_EQ(pa.size(), pb.size()) << t.name;
    for (size_t i = 0; i < pa.size() && i < pb.size(); i++) {
      worst = std::max(worst, (double)std::abs(pa[i] - pb[i]));
      if (std::abs(pa[i] - pb[i]) > tol) {
        ADD_FAILURE() << t.name << "[" << i << "]: " << pa[i] << " (1 rank) vs " << pb[i] << " (2 ranks)";
        return dir;
      }
    }
  }
  for (size_t i = 0; i < la.size(); i++) {
    EXPECT_NEAR(field(lb[i], "loss"), field(la[i], "loss"), 1e-5 * std::abs(field(la[i], "loss"))) << "step " << i + 1;
    EXPECT_EQ(field(lb[i], "tokens"), field(la[i], "tokens")) << "step " << i + 1;
    EXPECT_EQ(field(lb[i], "flops"), field(la[i], "flops")) << "step " << i + 1;
  }
  EXPECT_NEAR(field(lb.back(), "val_loss"), field(la.back(), "val_loss"), 1e-5 * field(la.back(), "val_loss"));
  EXPECT_GT(field(la.front(), "ce") - field(la.back(), "ce"), 0.3) << "the runs must actually train";
  std::printf("[ %s ] largest parameter difference 1 rank vs 2 ranks: %.3g (tolerance %.3g)\n", name.c_str(), worst, tol);
  return dir;
}

TEST(DataParallel, TwoRanksMatchOneRankWithTheirBatchStandard) {
  REQUIRE_MPI();
  expect_same_training("standard", " --method standard");
}

TEST(DataParallel, TwoRanksMatchOneRankWithTheirBatchAdaPonderGlobalBottomK) {
  REQUIRE_MPI();
  const std::string dir = expect_same_training("adaponder", kAdaPonderFlags);
  // The mechanisms acted: the bottom-k loss, and tokens stopping at different passes.
  const auto lb = metrics(dir + "/two");
  bool bottom_k = false, mixed = false;
  for (auto& j : lb) {
    bottom_k |= field(j, "ponder_loss") > 0;
    mixed |= field(j, "exit_1") > 0 && field(j, "exit_3") > 0;
  }
  EXPECT_TRUE(bottom_k) << "no step had a ponder loss";
  EXPECT_TRUE(mixed) << "no step had tokens stopping at different passes";
}

// TaH2's depth labels: the coverage cut and pw^m over the candidates of both ranks.
TEST(DataParallel, TwoRanksMatchOneRankWithTheirBatchTahGlobalLabels) {
  REQUIRE_MPI();
  const std::string dir = expect_same_training("tah", " --method tah");
  bool labels = false;
  for (auto& j : metrics(dir + "/two")) labels |= field(j, "label_pos") > 0 && field(j, "l_dec") > 0;
  EXPECT_TRUE(labels) << "no step had \"continue\" labels";
}

// A resume with the same number of ranks continues exactly; with another
// number the run goes on and says what changes.
TEST(DataParallel, ResumeWithTheSameAndAnotherNumberOfRanks) {
  REQUIRE_MPI();
  const std::string dir = scratch_dir("dp_resume");
  const std::string flags = common_flags(write_text(dir)) + " --batch 2";
  const std::string run2 = mpirun(2) + program("train_cpu_mpi") + " " + flags;
  ProgramResult r = run_program(run2 + " --save-every 4 --out " + dir + "/full", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_program(run2 + " --resume " + dir + "/full/ckpt_4 --out " + dir + "/resumed", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("resumed from"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("note:"), std::string::npos) << r.out;
  EXPECT_TRUE(read_bytes(dir + "/resumed/ckpt_8/model.safetensors") == read_bytes(dir + "/full/ckpt_8/model.safetensors"))
      << "a resume on the same number of ranks is exact";

  r = run_program(program("train_cpu") + " --resume " + dir + "/full/ckpt_4 --out " + dir + "/one", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("was trained on 2 rank(s), this run has 1: the global batch changes from 4 to 2"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--batch 4 keeps it"), std::string::npos) << r.out;

  // One rank with the global batch draws the same windows: the same steps up to float rounding.
  r = run_program(program("train_cpu") + " --resume " + dir + "/full/ckpt_4 --batch 4 --out " + dir + "/one4", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("this run has 1 with the same global batch of 4 sequences"), std::string::npos) << r.out;
  const auto full = metrics(dir + "/full"), one4 = metrics(dir + "/one4");
  ASSERT_EQ(one4.size(), 8u);
  for (size_t i = 4; i < 8; i++)
    EXPECT_NEAR(field(one4[i], "loss"), field(full[i], "loss"), 1e-5 * field(full[i], "loss")) << "step " << i + 1;
}

// Pids of the processes whose environment holds `marker` (this test's runs).
std::vector<int> marked_processes(const std::string& marker, const std::string& extra = "") {
  std::vector<int> pids;
  DIR* d = ::opendir("/proc");
  if (!d) return pids;
  while (dirent* e = ::readdir(d)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    const std::string env = read_bytes("/proc/" + std::to_string(pid) + "/environ");
    if (env.find(marker) != std::string::npos && (extra.empty() || env.find(extra) != std::string::npos))
      pids.push_back(pid);
  }
  ::closedir(d);
  return pids;
}

// Starts `cmd` in the background with ADA_DP_MARK=<marker> in its
// environment; its exit status goes to <dir>/rc when it ends.
void start_background(const std::string& cmd, const std::string& dir, const std::string& marker) {
  const std::string line = "(ADA_DP_MARK=" + marker + " OMP_NUM_THREADS=1 " + cmd + " >" + dir + "/out.txt 2>" + dir +
                           "/err.txt; echo $? >" + dir + "/rc.tmp && mv " + dir + "/rc.tmp " + dir + "/rc) &";
  ASSERT_EQ(std::system(line.c_str()), 0);
}

// Waits up to `seconds` for <dir>/rc; returns the seconds it took (or -1).
double wait_for_exit(const std::string& dir, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (exists(dir + "/rc")) return dt;
    if (dt > seconds) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Rank 1 is killed (SIGKILL: no chance to say anything) while rank 0 trains:
// rank 0 would wait for it in the next all-reduce forever; mpirun must end
// the run within seconds, with a non-zero status and a line naming rank 1.
TEST(DataParallel, ARankDyingEndsTheRunWithinSeconds) {
  REQUIRE_MPI();
  const std::string dir = scratch_dir("dp_die");
  const std::string marker = "dp_die_" + std::to_string(::getpid());
  start_background(mpirun(2) + program("train_cpu_mpi") + " " + common_flags(write_text(dir)) +
                       " --batch 2 --steps 1000000 --eval-every 0 --out " + dir + "/run",
                   dir, marker);
  // Wait until both ranks train (rank 0 has logged a step).
  const auto t0 = std::chrono::steady_clock::now();
  while (read_bytes(dir + "/run/metrics.jsonl").empty() && !exists(dir + "/rc") &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_FALSE(exists(dir + "/rc")) << read_bytes(dir + "/err.txt");
  const std::vector<int> rank1 = marked_processes("ADA_DP_MARK=" + marker, "OMPI_COMM_WORLD_RANK=1");
  ASSERT_EQ(rank1.size(), 1u) << "expected one process of rank 1";
  ASSERT_EQ(::kill(rank1[0], SIGKILL), 0);
  const double took = wait_for_exit(dir, 20);
  if (took < 0) {  // do not leave the run behind
    for (int pid : marked_processes("ADA_DP_MARK=" + marker)) ::kill(pid, SIGKILL);
    FAIL() << "the run did not end within 20 s of rank 1's death";
  }
  EXPECT_LT(took, 10) << "seconds from rank 1's death to the end of the run";
  std::printf("[ rank death ] the run ended %.2f s after rank 1 was killed\n", took);
  EXPECT_NE(read_bytes(dir + "/rc"), "0\n");
  const std::string err = read_bytes(dir + "/err.txt");
  EXPECT_NE(err.find("rank 1"), std::string::npos) << err;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(marked_processes("ADA_DP_MARK=" + marker).empty()) << "a process of the run is still alive";
}

// Rank 0 fails (its output directory cannot be made: a file is in the way)
// while rank 1, which writes nothing, goes on into the first all-reduce: the
// failing rank names itself and ends every rank.
TEST(DataParallel, AFailingRankEndsEveryRank) {
  REQUIRE_MPI();
  const std::string dir = scratch_dir("dp_fail");
  write_bytes(dir + "/file", "x");
  const std::string marker = "dp_fail_" + std::to_string(::getpid());
  start_background(mpirun(2) + program("train_cpu_mpi") + " " + common_flags(write_text(dir)) +
                       " --batch 2 --out " + dir + "/file/run",
                   dir, marker);
  const double took = wait_for_exit(dir, 30);
  if (took < 0) {
    for (int pid : marked_processes("ADA_DP_MARK=" + marker)) ::kill(pid, SIGKILL);
    FAIL() << "the run did not end within 30 s";
  }
  EXPECT_NE(read_bytes(dir + "/rc"), "0\n");
  const std::string err = read_bytes(dir + "/err.txt");
  EXPECT_NE(err.find("error: rank 0 of 2: cannot create the output directory"), std::string::npos) << err;
  EXPECT_TRUE(marked_processes("ADA_DP_MARK=" + marker).empty()) << "a process of the run is still alive";
}

// train_cpu has no MPI: under mpirun each process would train alone and all
// would write the same files, so it refuses, naming the build that can.
TEST(DataParallel, TrainCpuWithoutMpiRefusesSeveralProcesses) {
  REQUIRE_MPI();
  const std::string dir = scratch_dir("dp_nompi");
  const ProgramResult r = run_program(mpirun(2) + program("train_cpu") + " --steps 1 --out " + dir + "/run", dir);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("error: train_cpu was built without MPI but runs as one of 2 processes"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("train_cpu_mpi"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(dir + "/run"));
}

}  // namespace
}  // namespace ada::test
