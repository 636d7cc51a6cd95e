// Per-token evaluation: accuracy (the argmax of every method's output
// distribution), the position and difficulty class of each evaluated token,
// the per-class summaries, and eval's --per-token file.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "method_test_util.h"
#include "method_variants.h"
#include "methods/registry.h"
#include "train/cpu_instances.h"
#include "train/evaluation.h"
#include "workflow_util.h"

using namespace ada;
using namespace ada::test;
using Bd = CpuBackend<double>;

namespace {

// A hand-made method: "the next token is the input + 1 (mod V)" with
// probability 0.7, the other V - 1 tokens 0.3 / (V - 1) each; a token uses
// 1 + (input mod 2) passes. Its accuracy, NLL and passes are known exactly.
class SuccessorMethod : public Method<Bd> {
 public:
  std::string name() const override { return "successor"; }
  void forward(Model<Bd>&, const Batch& b, bool) override { b_ = b; }
  void backward(Model<Bd>&, double) override {}
  StepStats stats(Model<Bd>&) override {
    StepStats s;
    for (int t : b_.targets) s.tokens += t >= 0;
    return s;
  }
  static double p(int V, int input, int y) { return y == (input + 1) % V ? 0.7 : 0.3 / (V - 1); }
  void per_token(Model<Bd>& m, std::vector<double>& nll, std::vector<double>& passes) override {
    nll.assign(b_.inputs.size(), NAN);
    passes.assign(b_.inputs.size(), 0);
    for (size_t i = 0; i < b_.inputs.size(); i++) {
      if (b_.targets[i] >= 0) nll[i] = -std::log(p(m.cfg.vocab, b_.inputs[i], b_.targets[i]));
      passes[i] = 1 + b_.inputs[i] % 2;
    }
  }
  void probabilities(Model<Bd>& m, std::vector<double>& probs) override {
    const int V = m.cfg.vocab;
    probs.resize(b_.inputs.size() * V);
    for (size_t i = 0; i < b_.inputs.size(); i++)
      for (int v = 0; v < V; v++) probs[i * V + v] = p(V, b_.inputs[i], v);
  }
  std::unique_ptr<Decoder<Bd>> decoder(Model<Bd>&, int) override { return nullptr; }

 private:
  Batch b_;
};

}  // namespace

// Every method's per_token_argmax is the argmax of the distribution it emits
// (probabilities), and that distribution is the one whose -log q(y) per_token
// reports.
TEST(EvalAccuracy, EveryMethodsArgmaxIsThatOfItsOutputDistribution) {
  ScopedThreads one(1);
  MethodOptions mo;
  mo.iters = 1, mo.ponder_steps = 2, mo.pauses = 2;
  const ModelConfig cfg = preset_config("test");
  for (const MethodVariant& mv : method_variants()) {
    SCOPED_TRACE(mv.label);
    Bd be;
    auto method = make_method<Bd>(mv.method, mv.apply(mo));
    auto m = make_model(be, cfg, *method);
    random_params(*m, 31);
    Batch b = random_batch(2, 9, cfg.vocab, 32);
    b.targets[4] = -1;
    m->arena.reset();
    method->forward(*m, b, false);
    std::vector<double> nll, passes, probs;
    std::vector<int> argmax;
    method->per_token(*m, nll, passes);
    method->per_token_argmax(*m, argmax);
    method->probabilities(*m, probs);
    ASSERT_EQ(argmax.size(), b.targets.size());
    const int V = cfg.vocab;
    for (size_t t = 0; t < argmax.size(); t++) {
      const double* q = probs.data() + t * V;
      int best = 0;
      for (int v = 1; v < V; v++)
        if (q[v] > q[best]) best = v;
      EXPECT_EQ(argmax[t], best) << "position " << t;
      if (b.targets[t] >= 0) {
        EXPECT_NEAR(nll[t], -std::log(q[b.targets[t]]), 1e-9) << "position " << t;
      }
    }
  }
}

// The hand-made method on a stream of successors with a few breaks: every
// evaluated token's accuracy, position, class, NLL and passes, and the
// per-class summaries, against a direct computation; both window layouts.
TEST(EvalAccuracy, HandMadeCasePerTokenAndPerClass) {
  Bd be;
  SuccessorMethod method;
  auto model = make_model(be, preset_config("test"), method);
  const int V = model->cfg.vocab;
  std::vector<int32_t> toks(61);
  Rng r(5);
  toks[0] = 3;
  for (size_t i = 1; i < toks.size(); i++) toks[i] = r.uniform() < 0.6 ? (toks[i - 1] + 1) % V : (int32_t)r.below(V);
  VectorTokens src(toks);
  TokenClasses classes;
  classes.names = {"even", "odd", "tens"};
  for (size_t i = 0; i < toks.size(); i++) classes.ids.push_back(i % 10 == 0 ? 2 : i % 2);
  src.set_classes(classes);

  for (int batches : {0, 3}) {
    SCOPED_TRACE("batches " + std::to_string(batches));
    const EvalReport e = evaluate_model(*model, method, src, nullptr, 2, 8, batches);
    ASSERT_EQ(e.class_names, classes.names);
    ASSERT_EQ(e.correct.size(), e.nll.size());
    ASSERT_EQ(e.position.size(), e.nll.size());
    ASSERT_EQ(e.cls.size(), e.nll.size());
    if (batches == 0) {
      ASSERT_EQ(e.nll.size(), 56u);  // 7 windows of 8 targets: tokens 1..56
      for (size_t i = 0; i < e.position.size(); i++) EXPECT_EQ(e.position[i], i + 1);
    } else {
      ASSERT_EQ(e.nll.size(), 48u);  // 3 batches x 2 windows x 8 targets
    }
    std::vector<EvalReport::ClassSummary> want(3);
    double correct = 0;
    for (size_t i = 0; i < e.nll.size(); i++) {
      const size_t p = e.position[i];
      ASSERT_GE(p, 1u);
      ASSERT_LT(p, toks.size());
      const bool ok = toks[p] == (toks[p - 1] + 1) % V;
      EXPECT_EQ(e.correct[i], ok ? 1 : 0) << "token " << i;
      EXPECT_NEAR(e.nll[i], -std::log(ok ? 0.7 : 0.3 / (V - 1)), 1e-12);
      EXPECT_EQ(e.passes[i], 1 + toks[p - 1] % 2);
      EXPECT_EQ(e.cls[i], classes.ids[p]);
      EvalReport::ClassSummary& w = want[classes.ids[p]];
      w.tokens += 1, w.correct += ok, w.nll_sum += e.nll[i], w.passes_sum += e.passes[i];
      correct += ok;
    }
    EXPECT_DOUBLE_EQ(e.accuracy(), correct / e.nll.size());
    EXPECT_GT(e.accuracy(), 0.3);
    EXPECT_LT(e.accuracy(), 0.9);
    const std::vector<EvalReport::ClassSummary> got = e.per_class();
    ASSERT_EQ(got.size(), 3u);
    for (int c = 0; c < 3; c++) {
      EXPECT_EQ(got[c].name, classes.names[c]);
      EXPECT_EQ(got[c].tokens, want[c].tokens);
      EXPECT_GT(got[c].tokens, 0);
      EXPECT_DOUBLE_EQ(got[c].accuracy(), want[c].correct / want[c].tokens);
      EXPECT_NEAR(got[c].nll(), want[c].nll_sum / want[c].tokens, 1e-12);
      EXPECT_DOUBLE_EQ(got[c].passes(), want[c].passes_sum / want[c].tokens);
    }
  }
  // without classes: no class columns
  VectorTokens plain(toks);
  const EvalReport e = evaluate_model(*model, method, plain, nullptr, 2, 8, 0);
  EXPECT_TRUE(e.cls.empty());
  EXPECT_TRUE(e.class_names.empty());
  EXPECT_TRUE(e.per_class().empty());
  EXPECT_EQ(e.correct.size(), e.nll.size());
}

TEST(EvalAccuracy, ClassesMustMatchTheTokens) {
  VectorTokens src(std::vector<int32_t>{1, 2, 3});
  TokenClasses c;
  c.names = {"a"};
  c.ids = {0, 0};
  expect_error([&] { src.set_classes(c); }, {"2 class ids for 3 tokens"});
  c.ids = {0, 1, 0};
  expect_error([&] { src.set_classes(c); }, {"token 1 has class 1", "1 classes"});
}

// eval --per-token writes nll,passes,correct,position,cls (cls -1 without a
// class side file), and --paired reads that file and the older two-column one.
TEST(EvalPerTokenFile, ColumnsAndBothFormatsForPaired) {
  const std::string train_cpu = program("train_cpu"), eval = program("eval");
  if (train_cpu.empty() || eval.empty()) GTEST_SKIP() << "set ADA_BIN_DIR to the folder of the built programs to run them";
  const std::string dir = scratch_dir("per_token_cols"), text = dir + "/text.txt";
  std::string t;
  for (int i = 0; i < 60; i++) t += "abcdefgh " + std::to_string(i % 5) + "\n";
  write_bytes(text, t);
  ASSERT_EQ(run_program(train_cpu + " --config test --vocab 256 --tokenizer bytes --data " + text +
                            " --steps 20 --batch 2 --seq 16 --lr 1e-2 --eval-every 20 --eval-batches 2 --out " + dir + "/a",
                        dir)
                .status,
            0);
  ProgramResult r = run_program(eval + " --ckpt " + dir + "/a --batches 0 --per-token " + dir + "/a.csv", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("accuracy    "), std::string::npos) << r.out;
  std::stringstream ss(read_bytes(dir + "/a.csv"));
  std::string line, old = "nll,passes\n";
  std::getline(ss, line);
  EXPECT_EQ(line, "nll,passes,correct,position,cls");
  size_t n = 0, correct = 0;
  while (std::getline(ss, line)) {
    double nll, passes;
    int ok, cls;
    size_t pos;
    ASSERT_EQ(std::sscanf(line.c_str(), "%lf,%lf,%d,%zu,%d", &nll, &passes, &ok, &pos, &cls), 5) << line;
    EXPECT_TRUE(ok == 0 || ok == 1);
    EXPECT_EQ(pos, n + 1);  // every token once, in order
    EXPECT_EQ(cls, -1);
    EXPECT_EQ(passes, 1.0);
    correct += ok;
    old += line.substr(0, line.find(',', line.find(',') + 1)) + "\n";
    n++;
  }
  ASSERT_GT(n, 50u);
  EXPECT_GT(correct, 0u);  // the repeated text is partly learned in 20 steps
  write_bytes(dir + "/old.csv", old);
  for (const char* f : {"/a.csv", "/old.csv"}) {
    r = run_program(eval + " --ckpt " + dir + "/a --batches 0 --paired " + dir + f, dir);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("0.0000 +- 0.0000 (s.e.)"), std::string::npos) << r.out;  // +0 or -0 (9-digit file)
  }
}
