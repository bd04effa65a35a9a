// The latest training progress of each rank on this worker, reported by
// the ranks and relayed to the coordinator with heartbeats.
#ifndef RINGMASTER_WORKER_PROGRESS_BOARD_H_
#define RINGMASTER_WORKER_PROGRESS_BOARD_H_

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/mutex.h"
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
  // How many reports the rank has sent; a rank still reporting is alive
  // even when its step does not move.
  int64_t Reports(const v1::RankRef& rank) const;

 private:
  using Key = std::tuple<std::string, int, int>;
  struct Entry {
    v1::RankProgress progress;
    bool changed = false;
    int64_t reports = 0;
  };
  static Key KeyOf(const v1::RankRef& r) { return {r.job_id(), r.attempt(), r.rank()}; }

  mutable Mutex mu_;
  std::map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_PROGRESS_BOARD_H_
