// Each rank in a cgroup of its own, so that everything it starts (a
// shell's children, DataLoader workers) is found, limited and killed with
// it. Uses cgroup v2 where the host has it with the memory controller;
// otherwise the v1 memory, pids and freezer hierarchies, and the v2 tree
// beside them for cgroup.kill when the kernel has it. A worker's rank
// cgroups live below its own cgroup in a directory named after the worker
// and its state directory, so a restarted worker finds what its previous
// life left, and two workers of one id on a host (two local clusters) do
// not meet.
#ifndef RINGMASTER_WORKER_RANK_CGROUPS_H_
#define RINGMASTER_WORKER_RANK_CGROUPS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace ringmaster {

// Thread-safe: it holds no state that changes after Open.
class RankCgroups {
 public:
  // "ringmaster-<worker_id>-<hash of the state directory's path>".
  static std::string NameFor(const std::string& worker_id, const std::string& state_dir);
  // Prepares <own cgroup>/<name> in every usable hierarchy. UNAVAILABLE
  // when the host offers none this process may write.
  static absl::StatusOr<std::unique_ptr<RankCgroups>> Open(const std::string& name);
  // Removes the worker's directories when no rank cgroup is left in them.
  ~RankCgroups();

  // Creates the rank's cgroup, with a memory limit when memory_bytes > 0.
  // With a limit on cgroup v1, returns an eventfd the kernel signals when
  // the cgroup runs out of memory, for OomKilled: v1 counts a kill only in
  // the killed process's own cgroup, which for a rank in an image is its
  // runtime's, below the rank's and removed with the container. Else an
  // empty fd.
  absl::StatusOr<UniqueFd> Create(const std::string& rank, int64_t memory_bytes) const;
  // The cgroup.procs files a new process writes "0" to, to join the rank.
  std::vector<std::string> ProcsFiles(const std::string& rank) const;
  // Every process in the rank's cgroup and the cgroups below it (an OCI
  // runtime puts its container in one).
  std::vector<pid_t> Processes(const std::string& rank) const;
  // Sends `signal` to every process in the rank's cgroup.
  void Signal(const std::string& rank, int signal) const;
  // SIGKILLs every process in the cgroup (frozen first, so that none forks
  // away) until it is empty or `timeout` passes; true when empty.
  bool Kill(const std::string& rank, absl::Duration timeout) const;
  // Whether the kernel's OOM killer killed a process of the rank, by the
  // counters of its cgroups that are left.
  bool OomKilled(const std::string& rank) const;
  // Whether the kernel signalled `oom_events` (Create's): without waiting.
  static bool RanOutOfMemory(const UniqueFd& oom_events);
  // Removes the rank's (empty) cgroup.
  void Remove(const std::string& rank) const;
  // Rank cgroups that exist now, such as those a previous worker left.
  std::vector<std::string> Existing() const;

  std::string Describe() const;  // for the log: which hierarchies

 private:
  struct Hierarchy {
    std::string dir;       // the worker's directory in it
    bool memory = false;   // the memory controller is here
    bool v2 = false;       // memory.max / memory.events rather than v1 files
    bool freezer = false;  // v1 freezer.state
    bool kill = false;     // cgroup.kill
  };
  explicit RankCgroups(std::vector<Hierarchy> hierarchies) : hierarchies_(std::move(hierarchies)) {}
  std::string Dir(const Hierarchy& h, const std::string& rank) const { return h.dir + "/" + rank; }
  // The rank's directory and every cgroup below it, parents first.
  std::vector<std::string> Subtree(const Hierarchy& h, const std::string& rank) const;

  std::vector<Hierarchy> hierarchies_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_RANK_CGROUPS_H_
