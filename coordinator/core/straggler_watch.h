// Stragglers: ranks whose compute time per step (the time not spent
// waiting in collectives, as the ranks report it) stays well above their
// job's. Pure bookkeeping on given times, so that the window and the
// threshold are tested on a fake clock:
//
//   - A rank's figure is its compute seconds per step over the reports of
//     the last `window`: the rise of its cumulative compute time over the
//     rise of its step count.
//   - Its ratio is its figure over the job's median (for an even number of
//     ranks, the lower middle one, so that of two ranks the slow one stands
//     out).
//   - A rank whose ratio stays >= `ratio` for `after` is a straggler, until
//     its ratio falls below again.
#ifndef RINGMASTER_COORDINATOR_CORE_STRAGGLER_WATCH_H_
#define RINGMASTER_COORDINATOR_CORE_STRAGGLER_WATCH_H_

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "absl/time/time.h"

namespace ringmaster {

struct StragglerOptions {
  double ratio = 1.3;
  absl::Duration window = absl::Seconds(30);
  absl::Duration after = absl::Seconds(60);
};

// Thread-compatible: one per job attempt, under the JobManager's mutex.
class StragglerWatch {
 public:
  struct Figure {
    int rank = 0;
    double seconds_per_step = 0;
    double ratio = 0;                                // to the job's median
    absl::Time slow_since = absl::InfiniteFuture();  // ratio >= the threshold since
    bool straggler = false;
  };

  // A new attempt: forgets every report.
  void Reset() { ranks_.clear(); }
  // A rank that left the attempt's group: its figures leave the median.
  void Forget(int rank) { ranks_.erase(rank); }
  bool empty() const { return ranks_.empty(); }
  // A rank's totals at `at`: compute seconds over `steps` steps.
  void Report(int rank, absl::Time at, int64_t steps, double seconds,
              const StragglerOptions& options);
  // Every rank with a figure at `now`, by rank; ratios only when two or
  // more ranks have one.
  std::vector<Figure> Evaluate(absl::Time now, const StragglerOptions& options);

 private:
  struct Sample {
    absl::Time at;
    int64_t steps = 0;
    double seconds = 0;
  };
  struct Rank {
    std::deque<Sample> samples;  // within the window, and the one before it
    absl::Time slow_since = absl::InfiniteFuture();
  };
  std::map<int, Rank> ranks_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_STRAGGLER_WATCH_H_
