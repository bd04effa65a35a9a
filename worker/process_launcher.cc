#include "worker/process_launcher.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringmaster {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// In the child between fork and exec only async-signal-safe calls are
// allowed: everything is prepared before fork. On failure the child writes
// its errno and a step number to `error_fd` and exits.
[[noreturn]] void ExecChild(pid_t parent, int log_fd, int error_fd, const char* dir,
                            const char* program, char* const* argv,
                            char* const* envp) {
  int step = 0;
  auto fail = [&](int s) {
    int report[2] = {errno, s};
    (void)!write(error_fd, report, sizeof(report));
    _exit(127);
  };
  if (setpgid(0, 0) != 0) fail(step);
  ++step;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(step);
  if (getppid() != parent) _exit(128 + SIGKILL);  // the worker is already gone
  ++step;
  if (dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0) fail(step);
  ++step;
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0) fail(step);
  ++step;
  if (dir[0] != '\0' && chdir(dir) != 0) fail(step);
  // Leave nothing of the worker's open files to the rank; the error pipe
  // is close-on-exec and so closes itself on success.
  syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  ++step;
  execve(program, argv, envp);
  fail(step);
  _exit(127);
}

const char* kSteps[] = {"setpgid", "prctl", "redirect output", "open /dev/null",
                        "chdir", "execve"};

}  // namespace

absl::StatusOr<std::string> ResolveProgram(const std::string& program,
                                           const std::string& path) {
  if (program.find('/') != std::string::npos) return program;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", program);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(
      absl::StrCat("program \"", program, "\" not found on PATH ", path));
}

PosixProcessLauncher::PosixProcessLauncher() {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
}

absl::StatusOr<pid_t> PosixProcessLauncher::Spawn(const LaunchSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("empty argv");
  auto path_it = spec.env.find("PATH");
  auto program = ResolveProgram(spec.argv[0],
                                path_it == spec.env.end() ? "/usr/bin:/bin"
                                                          : path_it->second);
  if (!program.ok()) return program.status();

  int log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open log ", spec.log_path, ": ", strerror(errno)));
  }
  absl::Cleanup close_log = [log_fd] { close(log_fd); };
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }

  std::vector<std::string> env_strings;
  for (const auto& [key, value] : spec.env) env_strings.push_back(key + "=" + value);
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    ExecChild(parent, log_fd, pipe_fds[1], spec.working_dir.c_str(), program->c_str(),
              argv.data(), envp.data());
  }
  // Also set the group from the parent, so signalling -pid works even
  // before the child has run (a race setpgid in both closes).
  setpgid(pid, pid);
  close(pipe_fds[1]);
  int report[2];
  ssize_t n;
  do {
    n = read(pipe_fds[0], report, sizeof(report));
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  if (n == sizeof(report)) {
    waitpid(pid, nullptr, 0);
    const int step = report[1];
    return absl::FailedPreconditionError(absl::StrCat(
        kSteps[step < 6 ? step : 5], " ", step == 4 ? spec.working_dir : *program,
        ": ", strerror(report[0])));
  }
  return pid;
}

bool PosixProcessLauncher::WaitExit(pid_t pid, absl::Duration timeout,
                                    ExitStatus* status) {
  int pidfd = PidfdOpen(pid);
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
    close(pidfd);
    if (ready == 0) return false;
  }
  int raw = 0;
  pid_t r;
  do {
    r = waitpid(pid, &raw, pidfd >= 0 ? WNOHANG : 0);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  if (r < 0) {  // already reaped elsewhere: report an unknown failure
    *status = ExitStatus{-1, 0};
    return true;
  }
  if (WIFSIGNALED(raw)) {
    *status = ExitStatus{0, WTERMSIG(raw)};
  } else {
    *status = ExitStatus{WEXITSTATUS(raw), 0};
  }
  return true;
}

void PosixProcessLauncher::SignalGroup(pid_t pgid, int signal) { kill(-pgid, signal); }

bool PosixProcessLauncher::ClearGroup(pid_t pgid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    kill(-pgid, SIGKILL);
    while (waitpid(-pgid, nullptr, WNOHANG) > 0) {
    }
    if (kill(-pgid, 0) != 0 && errno == ESRCH) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace ringmaster
