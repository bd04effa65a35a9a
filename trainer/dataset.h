// Training data in memory: features as float rows, integer labels.
#ifndef RINGMASTER_TRAINER_DATASET_H_
#define RINGMASTER_TRAINER_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"

namespace ringmaster {

struct Dataset {
  int64_t rows = 0;
  int features = 0;
  int classes = 0;
  std::vector<float> x;    // [rows x features]
  std::vector<int32_t> y;  // [rows]

  const float* row(int64_t r) const { return x.data() + r * features; }
};

struct TrainTestSplit {
  Dataset train;
  Dataset test;
};

// Reads a CSV file (optionally .gz) of numbers; `label_column` is an index,
// negative from the end. Labels must be integers >= 0; classes = max + 1.
// Errors name the file, line and column.
absl::StatusOr<Dataset> LoadCsv(const std::string& path, int label_column);

// "synthetic:rows=N,features=F,classes=C[,seed=S]": Gaussian clusters, one
// center per class, generated the same way on every rank.
absl::StatusOr<Dataset> MakeSynthetic(const std::string& spec);

// The path of the bundled real data set "digits" (8x8 images of digits,
// 1797 rows, 64 features, 10 classes), shipped by python3-sklearn.
std::string DigitsPath();

// Loads data.path: "digits", "synthetic:...", or a CSV file.
absl::StatusOr<Dataset> LoadDataset(const v1::TrainerSpec::Data& data);

// Shuffles rows with `seed` and holds out `test_fraction` of them; then
// standardizes every feature with the training split's mean and standard
// deviation (features constant in training are centred only).
TrainTestSplit SplitAndStandardize(const Dataset& all, double test_fraction, uint64_t seed);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_DATASET_H_
