// fork/exec without a shell, with the exec's failure reported as an error
// rather than as a child that exits 127. Shared by the worker (rank
// processes) and the CLI (daemons of a local cluster).
#ifndef RINGMASTER_COMMON_SUBPROCESS_H_
#define RINGMASTER_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster {

struct SubprocessSpec {
  std::vector<std::string> argv;           // argv[0] without '/' is looked up on PATH
  std::map<std::string, std::string> env;  // the whole environment
  std::string working_dir;                 // empty: the caller's
  std::string output_path;                 // stdout and stderr, appended
  enum class Detach {
    kProcessGroup,  // leads a new process group; killed when the spawning thread ends
    kSession,       // leads a new session and outlives the caller (a daemon)
    kOwnSession,    // leads a new session; killed when the spawning thread ends
  };
  Detach detach = Detach::kProcessGroup;
  // cgroup.procs files the child joins before it executes the program, so
  // that it and everything it starts are in those cgroups.
  std::vector<std::string> cgroup_procs;
};

// Starts the process; stdin is /dev/null and no descriptor of the caller
// but stdout/stderr reaches it. The error names the failing step and path.
absl::StatusOr<pid_t> SpawnProcess(const SubprocessSpec& spec);

// The path execve gets for argv[0]: itself when it holds a '/', otherwise
// the first executable match on `path` (a PATH value). NOT_FOUND otherwise.
absl::StatusOr<std::string> ResolveProgram(const std::string& program,
                                           const std::string& path);

// The current process's environment as a map.
std::map<std::string, std::string> CurrentEnvironment();

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SUBPROCESS_H_
