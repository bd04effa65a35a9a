// Ends a worker's ranks when the worker dies, even by SIGKILL: a small
// process forked at start-up waits on a pipe whose only writer is the
// worker; when the worker is gone the pipe closes and the watcher kills
// everything left in the worker's rank cgroups (grandchildren included,
// which PR_SET_PDEATHSIG does not reach), then exits.
#ifndef RINGMASTER_WORKER_DEATH_WATCH_H_
#define RINGMASTER_WORKER_DEATH_WATCH_H_

#include <string>

#include "absl/status/status.h"

namespace ringmaster {

// Forks the watcher of the worker whose rank cgroups are below
// `cgroup_name` (RankCgroups::NameFor). Call before any thread starts (the
// watcher is a fork without exec).
absl::Status StartDeathWatch(const std::string& cgroup_name);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_DEATH_WATCH_H_
