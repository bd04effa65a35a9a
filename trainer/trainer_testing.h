// What the trainer's tests share: small data sets and specs, and a world
// of ranks as threads that trains and checks that every rank ends with the
// same weights.
#ifndef RINGMASTER_TRAINER_TRAINER_TESTING_H_
#define RINGMASTER_TRAINER_TRAINER_TESTING_H_

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "testing/status_matchers.h"
#include "trainer/test_world.h"
#include "trainer/trainer.h"

namespace ringmaster {

inline TrainTestSplit Data(int rows = 512) {
  auto all = MakeSynthetic(absl::StrCat("synthetic:rows=", rows, ",features=16,classes=4"));
  EXPECT_OK(all);
  return SplitAndStandardize(*all, 0.2, 1);
}

inline v1::TrainerSpec SgdSpec(int batch, int epochs) {
  v1::TrainerSpec spec;
  spec.mutable_model()->add_hidden(32);
  spec.mutable_model()->add_hidden(24);
  spec.set_batch_size(batch);
  spec.set_epochs(epochs);
  spec.mutable_optimizer()->set_type("sgd");
  spec.mutable_optimizer()->set_lr(0.05);
  spec.mutable_optimizer()->set_momentum(0.9);
  spec.set_lr_scaling("none");
  spec.set_grad_accum_steps(1);
  spec.set_bucket_mb(0.001);  // several buckets even for a small model
  spec.set_seed(7);
  return spec;
}

// Each rank's result of training `spec` on `world` ranks; `per_rank`, when
// given, adjusts each rank's copy of `base` (its own snapshot segment).
inline std::vector<TrainResult> TrainWorldResults(
    const v1::TrainerSpec& spec, const TrainTestSplit& data, int world, TrainerContext base = {},
    const std::function<void(int, TrainerContext*)>& per_rank = nullptr, int hosts = 1) {
  std::vector<TrainResult> results(world);
  RunWorld(
      world,
      [&](int rank, Collective* comm) {
        TrainerContext context = base;
        context.comm = comm;
        if (rank != 0) context.log = nullptr;
        if (per_rank) per_rank(rank, &context);
        auto result = Train(spec, data, context);
        ASSERT_OK(result) << result.status();
        results[rank] = *std::move(result);
      },
      hosts);
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(results[r].params, results[0].params) << "rank " << r;
  }
  return results;
}

// Rank 0's final weights (every rank's, checked).
inline std::vector<float> TrainWorld(const v1::TrainerSpec& spec, const TrainTestSplit& data,
                                     int world, TrainerContext base = {}, int hosts = 1) {
  return TrainWorldResults(spec, data, world, std::move(base), nullptr, hosts)[0].params;
}

inline double MaxRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double max = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = std::max(1e-3, static_cast<double>(std::fabs(b[i])));
    max = std::max(max, std::fabs(a[i] - b[i]) / scale);
  }
  return max;
}

inline v1::TrainerSpec AdamSpec() {
  v1::TrainerSpec spec = SgdSpec(16, 3);
  spec.mutable_optimizer()->set_type("adamw");
  spec.mutable_optimizer()->set_lr(0.01);
  spec.mutable_optimizer()->set_weight_decay(0.01);
  spec.set_warmup_steps(5);
  spec.set_checkpoint_every_steps(7);
  return spec;
}

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_TRAINER_TESTING_H_
