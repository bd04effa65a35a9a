// fork/exec without a shell, with the exec's failure reported as an error
// rather than as a child that exits 127. Shared by the worker (rank
// processes) and the CLI (daemons of a local cluster).
#ifndef RINGMASTER_COMMON_SUBPROCESS_H_
#define RINGMASTER_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

// Who a child process runs as.
struct RunAs {
  std::string name;  // for messages
  std::string home;  // HOME; "/" when the user has none
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary
};

// "user" or "user:group" (names or numbers) as RunAs: the user's primary
// group and its supplementary groups unless a group is given.
// INVALID_ARGUMENT naming what does not exist.
absl::StatusOr<RunAs> ResolveRunAs(const std::string& user_and_group);

// A path the program needs: access(2) with `mode` (R_OK, W_OK, X_OK) as
// the program's user. `what` names it in the error ("checkpoint_dir").
struct PathAccess {
  std::string what;
  std::string path;
  int mode = 0;
};

struct SubprocessSpec {
  std::vector<std::string> argv;           // argv[0] without '/' is looked up on PATH
  std::map<std::string, std::string> env;  // the whole environment
  std::string working_dir;                 // empty: the caller's
  std::string output_path;                 // stdout and stderr, appended
  int output_fd = -1;                      // used instead of output_path when >= 0
  enum class Detach {
    kProcessGroup,  // leads a new process group; killed when the spawning thread ends
    kSession,       // leads a new session and outlives the caller (a daemon)
    kOwnSession,    // leads a new session; killed when the spawning thread ends
  };
  Detach detach = Detach::kProcessGroup;
  // cgroup.procs files the child joins before it executes the program, so
  // that it and everything it starts are in those cgroups.
  std::vector<std::string> cgroup_procs;
  // Set once the child is in its cgroups and its output is open, before
  // chdir and exec (so it can open only what that user may); nullopt: the
  // caller's.
  std::optional<RunAs> run_as;
  // PR_SET_NO_NEW_PRIVS: nothing the child executes (set-user-ID programs
  // and file capabilities included) gains privileges. Ambient capabilities
  // are always cleared.
  bool no_new_privs = false;
  // Checked in order after chdir, as the child's user: the first it may
  // not access fails the spawn, naming it.
  std::vector<PathAccess> required_access;
  // The child gets a mount namespace of its own with /proc mounted
  // hidepid=2: it sees only its own user's processes (needs root, or
  // CAP_SYS_ADMIN; see CanHideOtherUsersProcesses).
  bool hide_other_users_processes = false;
  // With hide_other_users_processes: a directory (a job's tmpfs) mounted
  // on /dev/shm in the child's mount namespace; empty: the host's.
  std::string private_shm;
  // An open descriptor of the caller's (>= 3) that the child keeps, at the
  // same number; it learns the number some other way (its environment).
  // -1: none.
  int inherit_fd = -1;
  // When >= 3: inherit_fd reaches the child at this number instead (a
  // runtime that passes descriptors 3 to 3 + n - 1 on takes it as 3).
  int inherit_fd_as = -1;
};

// Whether SubprocessSpec::hide_other_users_processes works here: a child
// is made to try it (a container without CAP_SYS_ADMIN cannot).
bool CanHideOtherUsersProcesses();

// Moves the calling process into a mount namespace of its own that still
// receives the host's mounts but sends none back. Only before the process
// starts a thread; async-signal-safe (only system calls). False, with
// errno, where it may not (not root).
bool EnterOwnMountNamespace();

// Starts the process; stdin is /dev/null and no descriptor of the caller
// but stdout/stderr (and inherit_fd) reaches it. The error names the
// failing step and path.
absl::StatusOr<pid_t> SpawnProcess(const SubprocessSpec& spec);

// A tool's run to its end: how it exited and what it printed (stdout and
// stderr together, at most `max_output` bytes, the rest read and dropped).
struct ToolRun {
  int exit_code = -1;  // -1: killed by a signal, or out of time
  bool timed_out = false;
  bool cancelled = false;  // `tick` said to stop
  std::string output;
};
// Runs `argv` with the caller's environment plus `env`, killing it (its
// process group) after `timeout`; `tick`, when given, is called every
// `tick_interval` while it runs, and kills it the same way when it returns
// false. Blocks: never on a thread that must stay responsive. An error
// only when it cannot be started.
absl::StatusOr<ToolRun> RunToCompletion(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env,
                                        absl::Duration timeout, size_t max_output = 1 << 16,
                                        const std::function<bool()>& tick = nullptr,
                                        absl::Duration tick_interval = absl::Seconds(1));

// The path execve gets for argv[0]: itself when it holds a '/', otherwise
// the first executable match on `path` (a PATH value). NOT_FOUND otherwise.
absl::StatusOr<std::string> ResolveProgram(const std::string& program, const std::string& path);

// The current process's environment as a map.
std::map<std::string, std::string> CurrentEnvironment();

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SUBPROCESS_H_
