#include "worker/process_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"

namespace ringmaster {
namespace {

// How long an exited rank's last output may take to reach its log.
constexpr absl::Duration kLogDrainTimeout = absl::Seconds(5);

}  // namespace

PosixProcessLauncher::PosixProcessLauncher(const std::string& cgroup_name) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  if (cgroup_name.empty()) return;
  absl::StatusOr<std::unique_ptr<RankCgroups>> cgroups = RankCgroups::Open(cgroup_name);
  if (!cgroups.ok()) {
    spdlog::warn("ranks run in sessions of their own, without cgroups: {}",
                 cgroups.status().ToString());
    return;
  }
  cgroups_ = *std::move(cgroups);
  spdlog::info("ranks run in cgroups under {}", cgroups_->Describe());
  // What a previous worker of this id left running: its ranks outlived it.
  for (const std::string& rank : cgroups_->Existing()) {
    const size_t left = cgroups_->Processes(rank).size();
    if (!cgroups_->Kill(rank, absl::Seconds(10))) {
      spdlog::error("cgroup {} of an earlier worker survived SIGKILL", rank);
      continue;
    }
    cgroups_->Remove(rank);
    if (left > 0) spdlog::warn("killed {} processes an earlier worker left in {}", left, rank);
  }
}

absl::StatusOr<pid_t> PosixProcessLauncher::Spawn(const LaunchSpec& spec) {
  const bool contain = cgroups_ != nullptr && !spec.name.empty();
  if (spec.memory_bytes > 0 && !contain) {
    return absl::FailedPreconditionError(
        "a memory limit needs cgroups, which this worker cannot use (see its log)");
  }
  int output[2];
  if (pipe2(output, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  absl::Cleanup close_write_end = [&output] { close(output[1]); };
  absl::StatusOr<std::unique_ptr<LogPump>> pump = LogPump::Start(output[0], spec.log_path);
  if (!pump.ok()) return pump.status();

  SubprocessSpec sub;
  sub.argv = spec.argv;
  sub.env = spec.env;
  sub.working_dir = spec.working_dir;
  sub.output_fd = output[1];
  sub.detach = SubprocessSpec::Detach::kOwnSession;
  sub.run_as = spec.run_as;
  sub.hide_other_users_processes = spec.hide_other_users_processes;
  sub.private_shm = spec.private_shm;
  sub.inherit_fd = spec.inherit_fd;
  sub.inherit_fd_as = spec.inherit_fd_as;
  sub.no_new_privs = true;
  sub.required_access = spec.required_access;
  UniqueFd oom_events;
  if (contain) {
    absl::StatusOr<UniqueFd> created = cgroups_->Create(spec.name, spec.memory_bytes);
    if (!created.ok()) {
      cgroups_->Remove(spec.name);
      return created.status();
    }
    oom_events = *std::move(created);
    sub.cgroup_procs = cgroups_->ProcsFiles(spec.name);
  }
  absl::StatusOr<pid_t> pid = SpawnProcess(sub);
  if (!pid.ok()) {
    if (contain) cgroups_->Remove(spec.name);
    return pid;
  }
  MutexLock lock(&mu_);
  pumps_[*pid] = *std::move(pump);
  if (contain) cgroup_of_[*pid] = {spec.name, std::move(oom_events)};
  return pid;
}

std::string PosixProcessLauncher::CgroupOf(pid_t pid) {
  MutexLock lock(&mu_);
  auto it = cgroup_of_.find(pid);
  return it == cgroup_of_.end() ? "" : it->second.cgroup;
}

bool PosixProcessLauncher::WaitExit(pid_t pid, absl::Duration timeout, ExitStatus* status) {
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
  *status = WIFSIGNALED(raw) ? ExitStatus{0, WTERMSIG(raw)} : ExitStatus{WEXITSTATUS(raw), 0};
  return true;
}

void PosixProcessLauncher::SignalGroup(pid_t pgid, int signal) {
  const std::string cgroup = CgroupOf(pgid);
  for (int sig : {signal, signal == SIGTERM ? SIGCONT : 0}) {
    if (sig == 0) continue;
    kill(-pgid, sig);
    if (!cgroup.empty()) cgroups_->Signal(cgroup, sig);
  }
}

bool PosixProcessLauncher::OomKilled(pid_t pgid) {
  std::string cgroup;
  {
    MutexLock lock(&mu_);
    auto it = cgroup_of_.find(pgid);
    if (it == cgroup_of_.end()) return false;
    if (RankCgroups::RanOutOfMemory(it->second.oom_events)) return true;
    cgroup = it->second.cgroup;
  }
  return cgroups_->OomKilled(cgroup);
}

bool PosixProcessLauncher::ClearGroup(pid_t pgid, absl::Duration timeout) {
  const bool cleared = KillGroup(pgid, timeout);
  std::unique_ptr<LogPump> pump;
  {
    MutexLock lock(&mu_);
    auto it = pumps_.find(pgid);
    if (it != pumps_.end()) {
      pump = std::move(it->second);
      pumps_.erase(it);
    }
  }
  // With every process gone the pipe is closed; a process that escaped
  // the group may hold it open, and its output is then no longer logged.
  if (pump != nullptr) pump->Finish(cleared ? kLogDrainTimeout : absl::ZeroDuration());
  return cleared;
}

bool PosixProcessLauncher::KillGroup(pid_t pgid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string cgroup = CgroupOf(pgid);
  if (!cgroup.empty()) {
    const bool empty = cgroups_->Kill(cgroup, timeout);
    while (waitpid(-pgid, nullptr, WNOHANG) > 0) {
    }
    if (empty) {
      {
        // The kernel signals the OOM eventfd when the cgroup goes too.
        MutexLock lock(&mu_);
        cgroup_of_.erase(pgid);
      }
      cgroups_->Remove(cgroup);
    }
    if (!empty) return false;
  }
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
