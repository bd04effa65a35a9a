#include "worker/death_watch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "worker/rank_cgroups.h"

namespace ringmaster {
namespace {

[[noreturn]] void Watch(int pipe_read, const std::string& cgroup_name) {
  // Not part of the worker's session: a signal to the worker's process
  // group or a terminal hang-up must not take the watcher too.
  setsid();
  prctl(PR_SET_NAME, "ringmaster-watch");
  sigset_t all;
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigprocmask(SIG_BLOCK, &all, nullptr);
  // Nothing of the worker's but the pipe (and its log on stdout/stderr).
  if (pipe_read > 3) syscall(SYS_close_range, 3, pipe_read - 1, 0);
  syscall(SYS_close_range, pipe_read + 1, ~0U, 0);
  char byte;
  for (;;) {
    const ssize_t n = read(pipe_read, &byte, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;  // the worker is gone
  }
  {
    absl::StatusOr<std::unique_ptr<RankCgroups>> cgroups = RankCgroups::Open(cgroup_name);
    if (cgroups.ok()) {
      for (const std::string& rank : (*cgroups)->Existing()) {
        (*cgroups)->Kill(rank, absl::Seconds(10));
        (*cgroups)->Remove(rank);
      }
    }
  }  // and the worker's directories go with RankCgroups
  _exit(0);
}

}  // namespace

absl::Status StartDeathWatch(const std::string& cgroup_name) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    close(fds[1]);
    Watch(fds[0], cgroup_name);
  }
  // The worker keeps the write end open for life (close-on-exec, so ranks
  // do not inherit it); the watcher's read returns 0 once it is gone.
  close(fds[0]);
  return absl::OkStatus();
}

}  // namespace ringmaster
