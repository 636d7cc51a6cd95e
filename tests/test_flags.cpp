// Flags: integer flags take integers only, within the range each flag
// declares; number flags take finite numbers; the same parsing applies to
// values read back from a checkpoint (resume_options) and to every program's
// flags. Size flags are bounded, and a run that this machine cannot hold is
// refused from its sizes, before anything is allocated.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>

#include "methods/registry.h"
#include "train/flags.h"
#include "train/memory_budget.h"
#include "train/options.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;

namespace {

void parse(Flags& f, std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  f.parse((int)argv.size(), argv.data());
}

// Text that is not an integer, though strtoll, strtod or a cast would make one of it.
const std::vector<std::string> kNotIntegers = {"1.9",  "1.5", "1e-3", "1e30", "1e300", "1e3", "0x10", " 5", "5 ",
                                               "",     "abc", "4x",   "--",   "+",     "-",   "1_000", "nan", "inf",
                                               "٣"};

}  // namespace

TEST(Flags, IntegerFlagsTakeDigitsOnlyWithTheirNameInTheMessage) {
  int i = 7;
  long long l = 9;
  Flags f("prog", "");
  f.add("--count", &i, "", 1, 100);
  f.add("--total", &l, "");
  for (const std::string& bad : kNotIntegers) {
    SCOPED_TRACE("'" + bad + "'");
    expect_error([&] { parse(f, {"--count", bad}); }, {"--count expects an integer, got '" + bad + "'"});
    expect_error([&] { parse(f, {"--total=" + bad}); }, {"--total expects an integer, got '" + bad + "'"});
  }
  EXPECT_EQ(i, 7);  // nothing assigned by a refused value
  EXPECT_EQ(l, 9);
  parse(f, {"--count", "+42", "--total=-9223372036854775808"});
  EXPECT_EQ(i, 42);
  EXPECT_EQ(l, LLONG_MIN);
  parse(f, {"--total", "9223372036854775807"});
  EXPECT_EQ(l, LLONG_MAX);
}

TEST(Flags, IntegersOutsideTheRangeOrTheTypeAreRefused) {
  int i = 0;
  long long l = 0;
  Flags f("prog", "");
  f.add("--count", &i, "", 1, 100);
  f.add("--plain", &i, "");  // the range of int
  f.add("--total", &l, "");  // the range of long long
  expect_error([&] { parse(f, {"--count", "0"}); }, {"--count must be between 1 and 100 (got 0)"});
  expect_error([&] { parse(f, {"--count", "101"}); }, {"--count must be between 1 and 100 (got 101)"});
  expect_error([&] { parse(f, {"--plain", "2147483648"}); }, {"--plain must be between -2147483648 and 2147483647"});
  expect_error([&] { parse(f, {"--plain", "-2147483649"}); }, {"--plain must be between"});
  for (const char* huge : {"9223372036854775808", "-9223372036854775809", "99999999999999999999999999"})
    expect_error([&] { parse(f, {"--total", huge}); }, {"--total must be between", huge});
  parse(f, {"--count", "1", "--plain", "-2147483648"});
  EXPECT_EQ(i, INT_MIN);
}

TEST(Flags, NumberFlagsTakeFiniteDecimalNumbers) {
  double x = 0.5;
  Flags f("prog", "");
  f.add("--rate", &x, "");
  for (const char* bad : {"nan", "inf", "-inf", "1e999", "NaN"})
    expect_error([&] { parse(f, {"--rate", bad}); }, {"--rate must be a finite number", bad});
  for (const char* bad : {"", "abc", "1.5x", "0x1p3", " 1"})
    expect_error([&] { parse(f, {"--rate", bad}); }, {"--rate expects a number"});
  EXPECT_EQ(x, 0.5);
  parse(f, {"--rate", "-2.5e-3"});
  EXPECT_EQ(x, -2.5e-3);
}

// Every integer flag of train_cpu (and so of compare's method specs, which
// parse through the same flags) refuses fractions and values just outside its
// declared range, and every one has a bounded range.
TEST(Flags, EveryTrainingFlagIsAnIntegerWithinADeclaredRange) {
  TrainOptions o;
  Flags f("train_cpu", "");
  add_train_flags(f, o);
  int integer_flags = 0;
  for (auto& [name, value] : f.values()) {
    const std::string flag = "--" + name;
    long long lo, hi;
    if (!f.integer_range(flag, &lo, &hi)) continue;
    SCOPED_TRACE(flag);
    integer_flags++;
    if (flag != "--seed") {
      EXPECT_LE(hi, kMaxSteps) << "a size or count flag needs a documented bound";
    }
    TrainOptions scratch;
    Flags g("train_cpu", "");
    add_train_flags(g, scratch);
    expect_error([&] { parse(g, {flag, "1.5"}); }, {flag + " expects an integer, got '1.5'"});
    expect_error([&] { parse(g, {flag, "1e3"}); }, {flag + " expects an integer"});
    if (lo > LLONG_MIN) expect_error([&] { parse(g, {flag, std::to_string(lo - 1)}); }, {flag + " must be between"});
    if (hi < LLONG_MAX) expect_error([&] { parse(g, {flag, std::to_string(hi + 1)}); }, {flag + " must be between"});
    parse(g, {flag, std::to_string(lo), flag, std::to_string(hi)});  // both ends accepted
  }
  EXPECT_GE(integer_flags, 25);
}

// The sizes of the issue: --max-seq 2147483647 ended in bad_alloc.
TEST(Flags, SizeFlagsAreBoundedAndTheMemoryIsEstimatedFirst) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-seq", "2147483647"}, "--max-seq must be between 0 and 1048576 (got 2147483647)"},
      {{"--seq", "2000000"}, "--seq must be between 1 and 1048576"},
      {{"--batch", "1000000"}, "--batch must be between 1 and 65536"},
      {{"--layers", "100000"}, "--layers must be between 0 and 4096"},
      {{"--vocab", "2147483647"}, "--vocab must be between 0 and 16777216"},
      {{"--pauses", "100000"}, "--pauses must be between 0 and 255"},
      {{"--steps", "1e30"}, "--steps expects an integer, got '1e30'"},
      {{"--steps", "1.9"}, "--steps expects an integer, got '1.9'"},
      {{"--seed", "1e300"}, "--seed expects an integer, got '1e300'"},
      {{"--threads", "1e-3"}, "--threads expects an integer, got '1e-3'"},
      // within every range, but far beyond any machine: refused from the estimate
      {{"--layers", "4096", "--dim", "65536", "--heads", "64"}, "training needs about"},
      {{"--max-seq", "1048576", "--seq", "1048576", "--batch", "65536"}, "this machine has"},
  };
  for (auto& [args, needle] : cases) {
    SCOPED_TRACE(needle);
    TrainOptions o;
    Flags f("train_cpu", "");
    add_train_flags(f, o);
    const auto t0 = std::chrono::steady_clock::now();
    expect_error([&] { parse(f, args), o.validate(); }, {needle});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  }
  // Options set in code, not parsed (tests, compare): validate() applies the flags' ranges.
  TrainOptions o;
  o.batch = 0;
  expect_error([&] { o.validate(); }, {"--batch must be between 1 and 65536 (got 0)"});
  o.batch = 16;
  o.lr = NAN;
  expect_error([&] { o.validate(); }, {"--lr must be a finite number"});
}

// train_gpu judges a run by its GPU's memory, not the host's
// (set_device_memory, called once the GPU is open).
TEST(Flags, TheMemoryEstimateIsJudgedAgainstTheDeviceWhenOneIsSet) {
  TrainOptions o;
  o.config = "70m";
  o.batch = 128;  // about 17 GB by the estimate (seq 128 x 4 passes): more than this 8 GB card
  o.method = "adaponder";
  set_device_memory(8e9, "the GPU (Test Card 8GB)");
  expect_error([&] { o.validate(); }, {"training needs about", "of the GPU (Test Card 8GB)"});
  o.batch = 1;  // a few GB: fits
  EXPECT_NO_THROW(o.validate());
  // A run larger than any host this runs on but within the device: accepted;
  // back on the host's memory the same run is refused.
  o.batch = 4096;  // about 0.5 TB by the estimate
  set_device_memory(1e14, "the GPU (Huge)");
  EXPECT_NO_THROW(o.validate());
  set_device_memory(0, "");  // back to the host's memory for the other tests
  expect_error([&] { o.validate(); }, {"this machine has"});
}

// Options read back from a checkpoint's state file go through the same flags:
// a fraction there is refused, not truncated.
TEST(Flags, OptionsReadBackFromACheckpointAreParsedTheSameWay) {
  for (auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"steps", "1.9"}, {"batch", "1.5"}, {"pauses", "1.5"}, {"seed", "1e300"}, {"max-seq", "2147483647"}}) {
    SCOPED_TRACE(name);
    TrainOptions o;
    Flags f("train_cpu", "");
    add_train_flags(f, o);
    parse(f, {"--resume", "run"});
    expect_error([&] { resume_options(o, f, {{name, value}}, "run/ckpt_1"); }, {"--" + name});
  }
}

// The method options of eval's and generate's --method-overrides.
TEST(Flags, MethodOverridesTakeIntegersOnly) {
  MethodOptions mo;
  expect_error([&] { apply_method_overrides(mo, "pauses=1.5"); }, {"--pauses expects an integer, got '1.5'"});
  expect_error([&] { apply_method_overrides(mo, "ponder-steps=1e9"); }, {"--ponder-steps expects an integer"});
  expect_error([&] { apply_method_overrides(mo, "iters=100000"); }, {"--iters must be between 0 and 255"});
  apply_method_overrides(mo, "pauses=2,tau=1e-3");
  EXPECT_EQ(mo.pauses, 2);
}

// The programs: one line naming the flag, exit status 1.
TEST(Flags, ProgramsRefuseFractionsAndHugeValues) {
  const std::string train_cpu = program("train_cpu"), eval = program("eval"), gen = program("generate"),
                    tokenize = program("tokenize");
  if (train_cpu.empty() || eval.empty() || gen.empty() || tokenize.empty())
    GTEST_SKIP() << "set ADA_BIN_DIR to the programs' folder (make test does)";
  const std::string dir = scratch_dir("flags_programs");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {train_cpu + " --steps 1.9", "--steps expects an integer, got '1.9'"},
      {train_cpu + " --batch 1.5", "--batch expects an integer, got '1.5'"},
      {train_cpu + " --pauses 1.5", "--pauses expects an integer, got '1.5'"},
      {train_cpu + " --max-seq 2147483647", "--max-seq must be between 0 and 1048576"},
      {train_cpu + " --seed 1e300", "--seed expects an integer"},
      {eval + " --ckpt x --batches 2.5", "--batches expects an integer, got '2.5'"},
      {eval + " --ckpt x --threads 1e-3", "--threads expects an integer"},
      {gen + " --ckpt x --max-tokens 1e9", "--max-tokens expects an integer"},
      {gen + " --ckpt x --top-k -1", "--top-k must be between 0 and"},
      {tokenize + " --tokenizer bytes --out-dir " + dir + " --shard-tokens 1.5 x.txt", "--shard-tokens expects an integer"},
      {tokenize + " --train-bpe 1e4 --bpe-out " + dir + "/b.txt x.txt", "--train-bpe expects an integer"},
      {tokenize + " --tokenizer bytes --out-dir " + dir + " --val-fraction nan x.txt", "--val-fraction must be a finite number"},
  };
  for (auto& [cmd, needle] : cases) {
    SCOPED_TRACE(cmd);
    expect_program_error(run_program(cmd, dir), needle);
  }
}

// train_gpu's own default --seq (1024) is capped at the model's context when
// --seq is not given, and a given --seq is kept (validate refuses it if too long).
TEST(Flags, AProgramsDefaultSeqIsCappedAtTheContextUnlessGiven) {
  auto parsed = [](std::vector<std::string> args, TrainOptions& o) {
    o.seq = 1024;  // what train_main sets before parsing for train_gpu
    Flags f("train_gpu", "test");
    add_train_flags(f, o);
    std::vector<char*> argv{const_cast<char*>("train_gpu")};
    for (auto& a : args) argv.push_back(a.data());
    EXPECT_TRUE(f.parse((int)argv.size(), argv.data()));
    cap_default_seq(o, f);
  };
  TrainOptions a;
  parsed({"--config", "70m"}, a);
  EXPECT_EQ(a.seq, 1024);
  TrainOptions b;
  parsed({"--config", "test"}, b);  // context 64
  EXPECT_EQ(b.seq, 64);
  TrainOptions c;
  parsed({"--config", "70m", "--seq", "256"}, c);
  EXPECT_EQ(c.seq, 256);
  TrainOptions d;
  parsed({"--config", "test", "--seq", "128"}, d);  // given: kept, and refused by validate
  EXPECT_EQ(d.seq, 128);
  expect_error([&] { d.validate(); }, {"--seq 128 is longer than the model context"});
}
