#include "worker/process_launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "common/subprocess.h"

namespace ringmaster {

PosixProcessLauncher::PosixProcessLauncher() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

absl::StatusOr<pid_t> PosixProcessLauncher::Spawn(const LaunchSpec& spec) {
  SubprocessSpec sub;
  sub.argv = spec.argv;
  sub.env = spec.env;
  sub.working_dir = spec.working_dir;
  sub.output_path = spec.log_path;
  sub.detach = SubprocessSpec::Detach::kProcessGroup;
  return SpawnProcess(sub);
}

bool PosixProcessLauncher::WaitExit(pid_t pid, absl::Duration timeout,
                                    ExitStatus* status) {
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
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
  if (r < 0) {  // reaped elsewhere: an unknown failure
    *status = ExitStatus{-1, 0};
    return true;
  }
  *status = WIFSIGNALED(raw) ? ExitStatus{0, WTERMSIG(raw)}
                             : ExitStatus{WEXITSTATUS(raw), 0};
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
