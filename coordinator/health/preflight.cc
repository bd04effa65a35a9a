#include "coordinator/health/preflight.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster {

std::vector<PreflightExclusion> JudgePreflight(const std::map<int, PreflightReport>& reports) {
  std::vector<double> measured;
  for (const auto& [rank, report] : reports) {
    if (report.error.empty()) measured.push_back(report.bus_gb_per_s);
  }
  double median = 0;
  if (!measured.empty()) {
    const size_t middle = measured.size() / 2;
    std::nth_element(measured.begin(), measured.begin() + static_cast<ptrdiff_t>(middle),
                     measured.end());
    median = measured[middle];
  }
  std::vector<PreflightExclusion> excluded;
  for (const auto& [rank, report] : reports) {
    if (!report.error.empty()) {
      excluded.push_back({rank, absl::StrCat("its pre-flight all-reduce failed: ", report.error)});
    } else if (report.bus_gb_per_s < median / 2) {
      excluded.push_back(
          {rank, absl::StrFormat("pre-flight bus bandwidth %.2f GB/s, under half the job's "
                                 "median %.2f GB/s",
                                 report.bus_gb_per_s, median)});
    }
  }
  return excluded;
}

}  // namespace ringmaster
