// The latest training progress of each rank on this worker, reported by
// the ranks and relayed to the coordinator with heartbeats.
#ifndef RINGMASTER_WORKER_PROGRESS_BOARD_H_
#define RINGMASTER_WORKER_PROGRESS_BOARD_H_

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// Thread-safe.
class ProgressBoard {
 public:
  void Report(const v1::RankProgress& progress);
  // Reports that changed since the last call.
  std::vector<v1::RankProgress> TakeChanged();
  // Forgets a rank (it exited) and returns its latest report, if any.
  std::optional<v1::Progress> Forget(const v1::RankRef& rank);
  // Every rank's latest report.
  std::vector<v1::RankProgress> All() const;

 private:
  using Key = std::tuple<std::string, int, int>;
  struct Entry {
    v1::RankProgress progress;
    bool changed = false;
  };
  static Key KeyOf(const v1::RankRef& r) { return {r.job_id(), r.attempt(), r.rank()}; }

  mutable absl::Mutex mu_;
  std::map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_PROGRESS_BOARD_H_
