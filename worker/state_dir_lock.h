// One worker per state directory: the directory holds the worker's rank
// logs and names its rank cgroups, so a second worker on it would end the
// first one's ranks as leftovers of a previous life.
#ifndef RINGMASTER_WORKER_STATE_DIR_LOCK_H_
#define RINGMASTER_WORKER_STATE_DIR_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

// Creates `dir` if needed and takes an exclusive lock on dir/worker.lock,
// held while the returned descriptor stays open (close-on-exec: ranks do
// not inherit it). FAILED_PRECONDITION naming the holder's pid when another
// process holds it.
absl::StatusOr<int> LockStateDir(const std::string& dir);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_STATE_DIR_LOCK_H_
