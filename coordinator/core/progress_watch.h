// What the coordinator knows of one attempt's ranks between their start and
// their end: which reported started, and when each last made progress and
// last showed any sign of life. From it: the start timeout and hangs.
#ifndef RINGMASTER_COORDINATOR_CORE_PROGRESS_WATCH_H_
#define RINGMASTER_COORDINATOR_CORE_PROGRESS_WATCH_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"

namespace ringmaster {

// Thread-compatible; every call carries the time it happens at.
class ProgressWatch {
 public:
  // What counts as progress. A trainer's ranks progress when their step
  // advances; a command's, when it reports or writes output.
  enum class Kind { kTrainer, kCommand };

  // A new attempt of `ranks` ranks was placed at `now`.
  void Begin(Kind kind, int ranks, absl::Time now);

  void Started(int rank);
  // Ranks that have not reported started, ascending.
  std::vector<int> NotStarted() const;

  // A rank's step from its progress report.
  void Step(int rank, int64_t step, absl::Time now);
  // The attempt's group formed again at `now` (its steps start over from a
  // snapshot): progress for every rank, so the time the group took to form
  // is not counted towards a hang.
  void Regrouped(absl::Time now);
  // The rank left the attempt's group (an elastic job shrank): it is never
  // named as the rank that hung.
  void Left(int rank);
  // A rank's counters from its worker: bytes of output, reports sent.
  void Activity(int rank, int64_t output_bytes, int64_t reports, absl::Time now);

  // Whether any rank made progress in this attempt.
  bool progressed() const { return progressed_; }
  absl::Time began() const { return began_; }

  struct Hang {
    int rank = 0;
    int64_t last_step = -1;  // -1: it never reported one
    absl::Duration idle;     // since the attempt last made progress
  };
  // The attempt is hung when no rank made progress for `timeout`. The rank
  // named is the one whose signs of life stopped first (ranks blocked in a
  // collective on a stopped peer still report); ties go to the lowest step,
  // then the lowest rank.
  std::optional<Hang> Hung(absl::Duration timeout, absl::Time now) const;

 private:
  struct Rank {
    bool started = false;
    bool left = false;
    int64_t step = -1;
    int64_t output_bytes = 0;
    int64_t reports = 0;
    absl::Time last_progress;
    absl::Time last_seen;
  };
  void Saw(Rank& r, bool progress, absl::Time now);

  Kind kind_ = Kind::kTrainer;
  absl::Time began_;
  bool progressed_ = false;
  std::vector<Rank> ranks_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_PROGRESS_WATCH_H_
