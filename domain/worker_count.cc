#include "domain/worker_count.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ringmaster {

int WorkerCount::Of(int workers) const {
  if (count >= 0) return count;
  return static_cast<int>(std::floor(percent / 100 * workers + 1e-9));
}

std::string WorkerCount::ToString() const {
  return count >= 0 ? absl::StrCat(count) : absl::StrCat(percent, "%");
}

absl::StatusOr<WorkerCount> ParseWorkerCount(std::string_view flag, const std::string& text) {
  WorkerCount limit;
  absl::string_view rest = text;
  if (absl::ConsumeSuffix(&rest, "%")) {
    if (absl::SimpleAtod(rest, &limit.percent) && limit.percent >= 0 && limit.percent <= 100) {
      return limit;
    }
  } else if (absl::SimpleAtoi(rest, &limit.count) && limit.count >= 0) {
    return limit;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(absl::string_view(flag.data(), flag.size()), " \"", text,
                   "\" is neither a share of the workers (\"20%\") nor a number of them (\"3\")"));
}

}  // namespace ringmaster
