#include "trainer/dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster {
namespace {

// Reads the whole file, gunzipping when it is gzip (zlib reads plain
// files through the same call).
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::string out;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(file, buffer, sizeof(buffer))) > 0) out.append(buffer, n);
  int error = 0;
  const char* message = gzerror(file, &error);
  gzclose(file);
  if (n < 0 || error < 0) {
    return absl::DataLossError(absl::StrCat("cannot read ", path, ": ", message));
  }
  return out;
}

}  // namespace

absl::StatusOr<Dataset> LoadCsv(const std::string& path, int label_column) {
  absl::StatusOr<std::string> text = ReadMaybeGzip(path);
  if (!text.ok()) return text.status();
  Dataset data;
  int columns = -1;
  int label = 0;
  int64_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (columns < 0) {
      columns = static_cast<int>(cells.size());
      if (columns < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_number, ": needs at least 2 columns"));
      }
      label = label_column < 0 ? columns + label_column : label_column;
      if (label < 0 || label >= columns) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": label_column ", label_column,
                                                       " is outside the ", columns, " columns"));
      }
      data.features = columns - 1;
      double first;
      // A header row: the label cell is not a number.
      if (!absl::SimpleAtod(cells[label], &first)) continue;
    }
    if (static_cast<int>(cells.size()) != columns) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": ", cells.size(), " columns, expected ", columns));
    }
    for (int c = 0; c < columns; ++c) {
      double value;
      if (!absl::SimpleAtod(cells[c], &value)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": column ", c + 1,
                                                       " is not a number: \"", cells[c], "\""));
      }
      if (c == label) {
        if (value < 0 || value != std::floor(value)) {
          return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": label \"",
                                                         cells[c], "\" is not a class index"));
        }
        data.y.push_back(static_cast<int32_t>(value));
        data.classes = std::max(data.classes, static_cast<int>(value) + 1);
      } else {
        data.x.push_back(static_cast<float>(value));
      }
    }
    ++data.rows;
  }
  if (data.rows == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": no rows"));
  return data;
}

absl::StatusOr<Dataset> MakeSynthetic(const std::string& spec) {
  int64_t rows = 0, features = 0, classes = 0, seed = 1;
  absl::string_view args = spec;
  if (!absl::ConsumePrefix(&args, "synthetic:")) {
    return absl::InvalidArgumentError(absl::StrCat("not a synthetic spec: ", spec));
  }
  for (absl::string_view kv : absl::StrSplit(args, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    int64_t* target = p.first == "rows"       ? &rows
                      : p.first == "features" ? &features
                      : p.first == "classes"  ? &classes
                      : p.first == "seed"     ? &seed
                                              : nullptr;
    if (target == nullptr || !absl::SimpleAtoi(p.second, target)) {
      return absl::InvalidArgumentError(absl::StrCat("synthetic data: bad \"", kv, "\" in ", spec));
    }
  }
  if (rows < 1 || features < 1 || classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic data needs rows >= 1, features >= 1, classes >= 2: ", spec));
  }
  Dataset data;
  data.rows = rows;
  data.features = static_cast<int>(features);
  data.classes = static_cast<int>(classes);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centers(classes * features);
  for (float& c : centers) c = normal(rng);
  data.x.resize(rows * features);
  data.y.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t label = static_cast<int32_t>(rng() % classes);
    data.y[r] = label;
    for (int64_t f = 0; f < features; ++f) {
      data.x[r * features + f] = centers[label * features + f] + 0.8f * normal(rng);
    }
  }
  return data;
}

std::string DigitsPath() {
  if (const char* path = std::getenv("RINGMASTER_DIGITS_CSV"); path && *path) return path;
  return "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";
}

absl::StatusOr<Dataset> LoadDataset(const v1::TrainerSpec::Data& data) {
  if (data.path() == "digits") {
    absl::StatusOr<Dataset> digits = LoadCsv(DigitsPath(), -1);
    if (!digits.ok()) {
      return absl::NotFoundError(
          absl::StrCat("the digits data set (python3-sklearn): ", digits.status().message()));
    }
    return digits;
  }
  if (absl::StartsWith(data.path(), "synthetic:")) return MakeSynthetic(data.path());
  return LoadCsv(data.path(), data.label_column());
}

TrainTestSplit SplitAndStandardize(const Dataset& all, double test_fraction, uint64_t seed) {
  std::vector<int64_t> order(all.rows);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed ^ 0x5eed5a1177ull);
  std::shuffle(order.begin(), order.end(), rng);
  const int64_t test_rows = static_cast<int64_t>(std::llround(all.rows * test_fraction));
  TrainTestSplit split;
  for (Dataset* d : {&split.train, &split.test}) {
    d->features = all.features;
    d->classes = all.classes;
  }
  for (int64_t i = 0; i < all.rows; ++i) {
    Dataset& d = i < test_rows ? split.test : split.train;
    const int64_t r = order[i];
    d.x.insert(d.x.end(), all.row(r), all.row(r) + all.features);
    d.y.push_back(all.y[r]);
    ++d.rows;
  }
  // Standardize with statistics of the training split only.
  for (int f = 0; f < all.features; ++f) {
    double sum = 0, sum_sq = 0;
    for (int64_t r = 0; r < split.train.rows; ++r) {
      const double v = split.train.x[r * all.features + f];
      sum += v;
      sum_sq += v * v;
    }
    const double n = std::max<int64_t>(1, split.train.rows);
    const double mean = sum / n;
    const double var = std::max(0.0, sum_sq / n - mean * mean);
    const double inv_std = var > 1e-12 ? 1 / std::sqrt(var) : 1.0;
    for (Dataset* d : {&split.train, &split.test}) {
      for (int64_t r = 0; r < d->rows; ++r) {
        float& v = d->x[r * all.features + f];
        v = static_cast<float>((v - mean) * inv_std);
      }
    }
  }
  return split;
}

}  // namespace ringmaster
