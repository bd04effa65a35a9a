// The load of the coordinator's scale benchmark: a job store filled with
// ended jobs, and a client that submits and lists at a steady rate.
#ifndef RINGMASTER_BENCH_BENCH_LOAD_H_
#define RINGMASTER_BENCH_BENCH_LOAD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

struct HistoryStats {
  double mean_job_bytes = 0;  // serialized, history included
  double seconds = 0;
};

// Creates the job store at `db_path` holding `jobs` ended trainer jobs of
// four ranks each, as a week of use would leave them.
absl::StatusOr<HistoryStats> WriteHistory(const std::string& db_path, int jobs);

struct LoadResult {
  std::vector<double> submit_ms;
  int submit_errors = 0;
  std::vector<double> list_ms;
  // "result <name> <value>" lines: counts and percentiles.
  std::vector<std::string> Lines() const;
};

// Submits two-rank jobs at `rate` per second for `duration` (each call
// started on time, whatever the ones before it took) and lists the first
// page of 50 jobs once a second meanwhile.
LoadResult RunSubmitsAndLists(const std::string& target, double rate, absl::Duration duration);

}  // namespace ringmaster

#endif  // RINGMASTER_BENCH_BENCH_LOAD_H_
