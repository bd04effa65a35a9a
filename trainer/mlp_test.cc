#include "trainer/mlp.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "trainer/loss.h"

namespace ringmaster {
namespace {

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batch RandomBatch(int rows, int features, int classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  Batch b;
  for (int i = 0; i < rows * features; ++i) b.x.push_back(normal(rng));
  for (int i = 0; i < rows; ++i) b.y.push_back(static_cast<int32_t>(rng() % classes));
  return b;
}

double Loss(Mlp& model, const Batch& b, int rows, int classes) {
  const float* logits = model.Forward(b.x.data(), rows);
  return SoftmaxCrossEntropy(logits, b.y.data(), rows, classes, nullptr).loss;
}

// Every analytic gradient against a central difference of the loss.
TEST(MlpTest, BackwardMatchesFiniteDifferences) {
  const int rows = 6, classes = 4;
  Mlp model({5, 7, 6, classes}, 3);
  // Biases away from zero so that ReLU kinks are not hit by the probes.
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  for (float& p : model.params()) p += 0.3f * uniform(rng);
  const Batch b = RandomBatch(rows, 5, classes, 11);

  std::vector<float> dlogits(rows * classes);
  SoftmaxCrossEntropy(model.Forward(b.x.data(), rows), b.y.data(), rows, classes, dlogits.data());
  std::vector<int> order;
  model.Backward(dlogits.data(), false, [&](int p) { order.push_back(p); });
  const std::vector<float> analytic(model.grads(), model.grads() + model.params().size());

  const float eps = 1e-3f;
  int checked = 0;
  for (size_t i = 0; i < model.params().size(); ++i) {
    const float saved = model.params()[i];
    model.params()[i] = saved + eps;
    const double up = Loss(model, b, rows, classes);
    model.params()[i] = saved - eps;
    const double down = Loss(model, b, rows, classes);
    model.params()[i] = saved;
    const double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "param " << i;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(model.params().size()));
  // Readiness comes last layer first: b2, W2, b1, W1, b0, W0.
  EXPECT_EQ(order, (std::vector<int>{5, 4, 3, 2, 1, 0}));
}

TEST(MlpTest, AccumulateAddsGradients) {
  Mlp model({3, 4, 2}, 1);
  const Batch b = RandomBatch(4, 3, 2, 5);
  std::vector<float> d(8);
  SoftmaxCrossEntropy(model.Forward(b.x.data(), 4), b.y.data(), 4, 2, d.data());
  model.Backward(d.data(), false, nullptr);
  const std::vector<float> once(model.grads(), model.grads() + model.params().size());
  model.Forward(b.x.data(), 4);
  model.Backward(d.data(), true, nullptr);
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(model.grads()[i], 2 * once[i]);
}

TEST(LossTest, KnownValues) {
  // Equal logits: loss ln(C), gradient (1/C - onehot)/rows.
  const float logits[] = {0, 0, 0, 0};
  const int32_t labels[] = {1};
  float d[4];
  LossResult r = SoftmaxCrossEntropy(logits, labels, 1, 4, d);
  EXPECT_NEAR(r.loss, std::log(4.0), 1e-9);
  EXPECT_FLOAT_EQ(d[0], 0.25f);
  EXPECT_FLOAT_EQ(d[1], -0.75f);
  const float confident[] = {0, 10, 0, 0};
  EXPECT_EQ(SoftmaxCrossEntropy(confident, labels, 1, 4, nullptr).correct, 1);
}

}  // namespace
}  // namespace ringmaster
