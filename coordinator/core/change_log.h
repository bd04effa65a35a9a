// Numbers the changes of jobs for WatchJobs: each change of any job takes
// the next revision, and the log remembers which job the latest
// `capacity` changes were to, so that a watcher whose stream broke can be
// sent what changed after the last revision it saw.
#ifndef RINGMASTER_COORDINATOR_CORE_CHANGE_LOG_H_
#define RINGMASTER_COORDINATOR_CORE_CHANGE_LOG_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster {

// Thread-compatible.
class ChangeLog {
 public:
  explicit ChangeLog(size_t capacity) : capacity_(capacity) {}

  // Numbers the next change `revision` + 1 (before any change is recorded).
  void StartAfter(int64_t revision) {
    if (recent_.empty()) last_ = revision;
  }
  int64_t last() const { return last_; }

  // The change's revision: 1, 2, ... (or on from StartAfter's).
  int64_t Record(const std::string& job_id);

  // The jobs changed after `revision`, each once with its latest revision,
  // oldest first. OUT_OF_RANGE when some change after `revision` is no
  // longer remembered (any before StartAfter's), or `revision` is one this
  // log never gave.
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> ChangedSince(int64_t revision) const;

 private:
  const size_t capacity_;
  int64_t last_ = 0;
  std::deque<std::string> recent_;  // the jobs of revisions last_ - size + 1 .. last_
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_CHANGE_LOG_H_
