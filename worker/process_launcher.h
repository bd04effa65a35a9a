// Starting and signalling rank processes: the seam between the rank
// supervisor and the operating system.
#ifndef RINGMASTER_WORKER_PROCESS_LAUNCHER_H_
#define RINGMASTER_WORKER_PROCESS_LAUNCHER_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] without '/' is looked up on PATH
  std::map<std::string, std::string> env;  // the whole environment
  std::string working_dir;        // empty: the worker's own
  std::string log_path;           // stdout and stderr, appended
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
  // Starts the process as the leader of a new process group, killed if the
  // worker dies. An exec failure is an error naming the program, not a
  // process that exits 127.
  virtual absl::StatusOr<pid_t> Spawn(const LaunchSpec& spec) = 0;
  // Waits up to `timeout` for the leader to exit; false when it has not.
  virtual bool WaitExit(pid_t pid, absl::Duration timeout, ExitStatus* status) = 0;
  virtual void SignalGroup(pid_t pgid, int signal) = 0;
  // Kills and reaps what is left of the group; true when it is empty.
  virtual bool ClearGroup(pid_t pgid, absl::Duration timeout) = 0;
};

// fork/exec on Linux. The worker process is made a child subreaper so that
// orphaned descendants of a rank stay reapable by their process group.
class PosixProcessLauncher final : public ProcessLauncher {
 public:
  PosixProcessLauncher();
  absl::StatusOr<pid_t> Spawn(const LaunchSpec& spec) override;
  bool WaitExit(pid_t pid, absl::Duration timeout, ExitStatus* status) override;
  void SignalGroup(pid_t pgid, int signal) override;
  bool ClearGroup(pid_t pgid, absl::Duration timeout) override;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_PROCESS_LAUNCHER_H_
