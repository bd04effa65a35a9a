// A number of workers given as a count or as a share of those known
// ("3" or "20%"): --max-quarantined, which `ringmaster up` checks before it
// starts a coordinator, and --spare-workers.
#ifndef RINGMASTER_DOMAIN_WORKER_COUNT_H_
#define RINGMASTER_DOMAIN_WORKER_COUNT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ringmaster {

// `count` workers, or `percent` of those known, rounded down.
struct WorkerCount {
  double percent = 0;
  int count = -1;  // >= 0: a number of workers, not a share
  // How many of `workers` it is.
  int Of(int workers) const;
  std::string ToString() const;
};
// `flag` names the flag in the error.
absl::StatusOr<WorkerCount> ParseWorkerCount(std::string_view flag, const std::string& text);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_WORKER_COUNT_H_
