// What train_cpu and train_gpu print at the start of a run and in their
// progress lines (src/train/run_plan.h): tokens per step, epochs over the
// training data, the smoke-run warning, the time estimate.
#include <gtest/gtest.h>

#include "train/run_plan.h"

using namespace ada;

TEST(RunPlan, TokensPerStepAndEpochs) {
  // The default train_gpu run: 600 steps of 16 x 128 on 1.08M training tokens.
  const RunPlan p = plan_run(600, 1, 16, 128, 1080000);
  EXPECT_EQ(p.tokens_per_step, 2048);
  EXPECT_EQ(p.total_tokens, 600.0 * 2048);
  EXPECT_EQ(p.train_tokens, 1080000);
  EXPECT_DOUBLE_EQ(p.epochs, 600.0 * 2048 / 1080000);
  EXPECT_EQ(describe_plan(p, 600, 1, 16, 128),
            "tokens  2.05k per step (--accum 1 x --batch 16 x --seq 128), 1.23M in 600 steps: 1.14 epochs of the "
            "1.08M training tokens");
  // --accum multiplies the tokens of a step: 32 x 16 x 1024 = 524288.
  const RunPlan r = plan_run(19073, 32, 16, 1024, 9900000000ull);
  EXPECT_EQ(r.tokens_per_step, 524288);
  EXPECT_DOUBLE_EQ(r.epochs, 19073.0 * 524288 / 9.9e9);
}

TEST(RunPlan, WarnsOnlyWhenTheDataIsSeenMoreThanOnce) {
  EXPECT_EQ(epoch_warning(plan_run(600, 1, 16, 128, 1080000)),
            "warning: this run sees its data 1.14 times: a smoke run; see docs/recipes.md");
  EXPECT_EQ(epoch_warning(plan_run(1000, 2, 8, 128, 2048000)), "");  // exactly one epoch
  EXPECT_EQ(epoch_warning(plan_run(10, 1, 1, 16, 1000000)), "");
  EXPECT_EQ(epoch_warning(plan_run(100, 1, 1, 1000, 10000)),
            "warning: this run sees its data 10 times: a smoke run; see docs/recipes.md");
  // The recipe's 1.42G tokens on the shipped corpus' 982k.
  EXPECT_EQ(epoch_warning(plan_run(2700, 32, 16, 1024, 982361)),
            "warning: this run sees its data 1441 times: a smoke run; see docs/recipes.md");
}

TEST(RunPlan, EtaLeavesOutTheSlowFirstStepOnceLaterStepsExist) {
  // After the first step only: its time per step.
  EXPECT_DOUBLE_EQ(eta_seconds(5.0, 0.0, 1, 99), 5.0 * 99);
  // After 11 steps, the first took 5 s and the ten after it 2 s: 0.2 s per step.
  EXPECT_DOUBLE_EQ(eta_seconds(5.0, 2.0, 11, 89), 0.2 * 89);
  EXPECT_DOUBLE_EQ(eta_seconds(5.0, 2.0, 11, 0), 0.0);
}
