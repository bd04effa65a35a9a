#include "trainer/optimizer.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(OptimizerTest, SgdWithMomentumFollowsPyTorch) {
  v1::TrainerSpec::Optimizer spec;
  spec.set_type("sgd");
  spec.set_momentum(0.9);
  auto opt = MakeOptimizer(spec, 1);
  float p = 1.0f;
  const float g = 0.5f;
  opt->Step(&p, &g, 1, 0.1f);  // buf = g
  EXPECT_FLOAT_EQ(p, 1.0f - 0.1f * 0.5f);
  opt->Step(&p, &g, 1, 0.1f);  // buf = 0.9 * 0.5 + 0.5
  EXPECT_FLOAT_EQ(p, 0.95f - 0.1f * 0.95f);
}

TEST(OptimizerTest, AdamWFirstStepMovesByLrAndDecaysWeights) {
  v1::TrainerSpec::Optimizer spec;
  spec.set_type("adamw");
  spec.set_weight_decay(0.1);
  auto opt = MakeOptimizer(spec, 2);
  float p[2] = {1.0f, -2.0f};
  const float g[2] = {0.3f, -7.0f};
  opt->Step(p, g, 2, 0.01f);
  // First step: m_hat / sqrt(v_hat) = sign(g); decay p *= 1 - lr * wd.
  EXPECT_NEAR(p[0], 1.0 * (1 - 0.001) - 0.01, 1e-6);
  EXPECT_NEAR(p[1], -2.0 * (1 - 0.001) + 0.01, 1e-6);
  EXPECT_EQ(opt->steps(), 1);
  EXPECT_EQ(opt->mutable_state()->size(), 4u);
}

TEST(LrScheduleTest, ScalingWarmupAndCosine) {
  LrSchedule s{0.1, "linear", 4, 10, 110};
  EXPECT_NEAR(s.At(0), 0.4 * 1 / 11, 1e-12);
  EXPECT_NEAR(s.At(9), 0.4 * 10 / 11, 1e-12);
  EXPECT_NEAR(s.At(10), 0.4, 1e-12);
  EXPECT_NEAR(s.At(60), 0.2, 1e-12);
  EXPECT_NEAR(s.At(110), 0.0, 1e-12);
  EXPECT_NEAR((LrSchedule{0.1, "sqrt", 4, 0, 1}.At(0)), 0.2, 1e-12);
  EXPECT_NEAR((LrSchedule{0.1, "none", 4, 0, 1}.At(0)), 0.1, 1e-12);
}

TEST(ClipTest, FactorBringsTheNormToMax) {
  const float g[2] = {3, 4};
  EXPECT_NEAR(GradNorm(g, 2), 5.0, 1e-9);
  EXPECT_NEAR(5.0 * ClipFactor(5.0, 1.0), 1.0, 1e-6);
  EXPECT_EQ(ClipFactor(5.0, 10.0), 1.0);
  EXPECT_EQ(ClipFactor(5.0, 0.0), 1.0) << "0 disables clipping";
}

TEST(OptimizerTest, GradScaleIsAppliedToTheGradientOnly) {
  v1::TrainerSpec::Optimizer spec;
  spec.set_type("sgd");
  spec.set_weight_decay(0.5);
  auto opt = MakeOptimizer(spec, 1);
  float p = 2.0f;
  const float g = 4.0f;
  opt->Step(&p, &g, 1, 0.1f, 0.25f);  // g' = 0.25 * 4 + 0.5 * 2 = 2
  EXPECT_FLOAT_EQ(p, 2.0f - 0.1f * 2.0f);
}

}  // namespace
}  // namespace ringmaster
