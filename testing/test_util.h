// Helpers for integration tests that run Ringmaster's real programs.
#ifndef RINGMASTER_TESTING_TEST_UTIL_H_
#define RINGMASTER_TESTING_TEST_UTIL_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringmaster::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs a program to completion (bounded by `timeout`, then SIGKILL) with the
// test's environment plus `env`, capturing its output.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         absl::Duration timeout = absl::Seconds(120));

// A path of a program built by Bazel, from the test's runfiles
// ("client/ringmaster").
std::string Runfile(const std::string& path);

// A fresh directory under the test's temporary directory.
std::string MakeTempDir(const std::string& name);

// Polls `condition` every 20 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout);

// True while any process is in process group `pgid`.
bool ProcessGroupAlive(int pgid);

// The body of GET http://<address><path>, or empty when it fails.
std::string HttpGet(const std::string& address, const std::string& path);

// A program started in a process group of its own, with the test's
// environment plus `env` and its output in `log`; killed (the whole group)
// and reaped with the object.
class BackgroundProcess {
 public:
  BackgroundProcess(std::vector<std::string> argv, const std::map<std::string, std::string>& env,
                    std::string log);
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  bool started() const { return pid_ > 0; }
  std::string output() const;

 private:
  std::string log_;
  int pid_ = -1;
};

// Runs a shell command line, returning its exit code and output.
CommandResult Shell(const std::string& command_line);
bool ProcessAlive(int pid);

// Starts `argv` as a daemon of the test (killed with the spawning thread),
// with this process's environment and its output appended to `log_path`;
// 0 when it cannot be started.
int SpawnLogged(std::vector<std::string> argv, const std::string& log_path);
// SIGKILLs `pid` (when it is above 0) and reaps it.
void KillAndReap(int pid);

// A socket listening on 127.0.0.1 at a port the kernel chose (in `*port`),
// with a queue of `backlog`; -1 when it cannot be made. The caller closes it.
int ListenOnLoopback(int* port, int backlog = 16);

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTING_TEST_UTIL_H_
