// A job's progress over its run, for the console's charts: a point per
// report, thinned when full by dropping every other point and keeping one
// report in two from then on, so that at most kMaxPoints stay, spread
// evenly over the whole run whatever its length.
#ifndef RINGMASTER_COORDINATOR_CORE_PROGRESS_SERIES_H_
#define RINGMASTER_COORDINATOR_CORE_PROGRESS_SERIES_H_

#include <cstdint>
#include <vector>

#include "proto/job.pb.h"

namespace ringmaster {

class ProgressSeries {
 public:
  static constexpr size_t kMaxPoints = 512;

  // The job's progress after a report of `attempt` at `time_unix_ms`; one
  // of a step already recorded (or earlier, in the same attempt) is not.
  void Add(const v1::Progress& progress, int attempt, int64_t time_unix_ms);
  const std::vector<v1::ProgressPoint>& points() const { return points_; }

 private:
  std::vector<v1::ProgressPoint> points_;
  int64_t stride_ = 1;   // keep one report in `stride_`
  int64_t reports_ = 0;  // reports taken since the series began
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_PROGRESS_SERIES_H_
