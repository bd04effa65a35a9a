// Starting and signalling rank processes: the seam between the rank
// supervisor and the operating system.
#ifndef RINGMASTER_WORKER_PROCESS_LAUNCHER_H_
#define RINGMASTER_WORKER_PROCESS_LAUNCHER_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "common/subprocess.h"
#include "worker/rank_cgroups.h"
#include "worker/rank_log.h"

namespace ringmaster {

struct LaunchSpec {
  std::vector<std::string> argv;            // argv[0] without '/' is looked up on PATH
  std::map<std::string, std::string> env;   // the whole environment
  std::string working_dir;                  // empty: the worker's own
  std::string log_path;                     // stdout and stderr, appended as records (rank_log.h)
  std::string name;                         // of its cgroup: unique among running processes
  int64_t memory_bytes = 0;                 // limit for it and its descendants; 0: none
  std::optional<RunAs> run_as;              // its user; nullopt: the worker's
  std::vector<PathAccess> required_access;  // checked as its user before exec
  bool hide_other_users_processes = false;  // SubprocessSpec's
  std::string private_shm;                  // SubprocessSpec's
  int inherit_fd = -1;                      // SubprocessSpec's: the rank's snapshot segment
  int inherit_fd_as = -1;                   // SubprocessSpec's
};

struct ExitStatus {
  int exit_code = 0;  // when it exited
  int signal = 0;     // when a signal killed it
};

// Thread-safe. Wait must be called on the thread that called Spawn: the
// child's PR_SET_PDEATHSIG fires when that thread ends.
class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Starts the process as the leader of a new process group (and, where it
  // can, in a cgroup of its own), killed if the worker dies. An exec
  // failure is an error naming the program, not a process that exits 127.
  virtual absl::StatusOr<pid_t> Spawn(const LaunchSpec& spec) = 0;
  // Waits up to `timeout` for the leader to exit; false when it has not.
  virtual bool WaitExit(pid_t pid, absl::Duration timeout, ExitStatus* status) = 0;
  // Signals every process the leader started; a SIGTERM is followed by
  // SIGCONT, so that a stopped process can act on it.
  virtual void SignalGroup(pid_t pgid, int signal) = 0;
  // Whether the memory limit made the kernel kill one of its processes.
  virtual bool OomKilled(pid_t pgid) = 0;
  // Kills and reaps everything it started, and ends its log; true when
  // nothing is left.
  virtual bool ClearGroup(pid_t pgid, absl::Duration timeout) = 0;
};

// fork/exec on Linux. Each process leads a session of its own and, where
// the host allows, a cgroup of its own (RankCgroups), which finds every
// descendant even when it left the session. The worker process is made a
// child subreaper so that orphaned descendants stay reapable. The output
// reaches the log through a pipe and a LogPump, which times each line.
class PosixProcessLauncher final : public ProcessLauncher {
 public:
  // With a `cgroup_name` (RankCgroups::NameFor), processes go into cgroups
  // below it, and what a previous worker left in them is killed now.
  explicit PosixProcessLauncher(const std::string& cgroup_name = "");
  absl::StatusOr<pid_t> Spawn(const LaunchSpec& spec) override;
  bool WaitExit(pid_t pid, absl::Duration timeout, ExitStatus* status) override;
  void SignalGroup(pid_t pgid, int signal) override;
  bool OomKilled(pid_t pgid) override;
  bool ClearGroup(pid_t pgid, absl::Duration timeout) override;

  bool contained() const { return cgroups_ != nullptr; }

 private:
  std::string CgroupOf(pid_t pid);
  bool KillGroup(pid_t pgid, absl::Duration timeout);

  std::unique_ptr<RankCgroups> cgroups_;  // null: sessions only
  Mutex mu_;
  struct Contained {
    std::string cgroup;   // the rank's, below the worker's
    UniqueFd oom_events;  // RankCgroups::Create's
  };
  std::map<pid_t, Contained> cgroup_of_ ABSL_GUARDED_BY(mu_);
  std::map<pid_t, std::unique_ptr<LogPump>> pumps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_PROCESS_LAUNCHER_H_
