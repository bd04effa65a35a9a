// The training run the throughput benchmarks time: an MLP of `hidden`
// widths, SGD with momentum, no LR scaling, on synthetic data.
#ifndef RINGMASTER_BENCH_BENCH_SPEC_H_
#define RINGMASTER_BENCH_BENCH_SPEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "proto/job.pb.h"
#include "trainer/dataset.h"

namespace ringmaster {

// `hidden` is comma-separated widths ("2048,2048").
inline v1::TrainerSpec BenchTrainerSpec(const std::string& hidden, int batch) {
  v1::TrainerSpec spec;
  for (absl::string_view w : absl::StrSplit(hidden, ',')) {
    spec.mutable_model()->add_hidden(std::stoi(std::string(w)));
  }
  spec.set_epochs(1);
  spec.set_batch_size(batch);
  spec.mutable_optimizer()->set_type("sgd");
  spec.mutable_optimizer()->set_lr(0.01);
  spec.mutable_optimizer()->set_momentum(0.9);
  spec.set_lr_scaling("none");
  spec.set_seed(1);
  return spec;
}

// `rows` synthetic rows, all for training.
inline absl::StatusOr<TrainTestSplit> BenchData(int64_t rows, int features, int classes) {
  absl::StatusOr<Dataset> all = MakeSynthetic(
      absl::StrCat("synthetic:rows=", rows, ",features=", features, ",classes=", classes));
  if (!all.ok()) return all.status();
  return SplitAndStandardize(*all, 0.0, 1);
}

}  // namespace ringmaster

#endif  // RINGMASTER_BENCH_BENCH_SPEC_H_
