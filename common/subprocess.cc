#include "common/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace ringmaster {

bool EnterOwnMountNamespace() {
  return unshare(CLONE_NEWNS) == 0 && mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) == 0;
}
namespace {

enum Step {
  kDetach,
  kDeathSignal,
  kCgroup,
  kRedirect,
  kStdin,
  kHideProcesses,
  kPrivateShm,
  kNoNewPrivs,
  kRunAs,
  kChdir,
  kAccess,
  kInheritFd,
  kExec,
  kSteps
};
const char* const kStepNames[kSteps] = {"detach",
                                        "prctl",
                                        "join cgroup",
                                        "redirect output",
                                        "open /dev/null",
                                        "mount a /proc that hides other users' processes",
                                        "mount the job's own /dev/shm",
                                        "drop privileges",
                                        "switch to user",
                                        "chdir",
                                        "access",
                                        "keep descriptor",
                                        "execve"};

// In a mount namespace of the caller's own (its mounts no longer flow back
// to the host's), a /proc that lists only the caller's user's processes.
// Async-signal-safe: only system calls.
bool MountProcHidingOthers() {
  return EnterOwnMountNamespace() &&
         mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") == 0;
}

// What the child does between fork and exec, prepared before fork.
struct ChildPlan {
  SubprocessSpec::Detach detach;
  pid_t parent;
  int output_fd;
  int error_fd;
  const std::vector<int>* cgroup_fds;
  const RunAs* run_as;  // null: stay
  bool hide_other_users_processes;
  const char* private_shm;  // "": the host's /dev/shm
  int inherit_fd;           // < 0: none
  int inherit_fd_as;        // < 3: inherit_fd's own number
  bool no_new_privs;
  const char* dir;
  const std::vector<PathAccess>* required_access;
  const char* program;
  char* const* argv;
  char* const* envp;
};

// With SubprocessSpec::inherit_fd_as, the error pipe's ends are moved to
// at least this number.
constexpr int kLowestErrorFd = 64;

// Between fork and exec only async-signal-safe calls are allowed, so
// everything is prepared before fork. On failure the child writes errno,
// the step and which required path failed to `error_fd` and exits.
[[noreturn]] void ExecChild(const ChildPlan& plan) {
  Step step = kDetach;
  int path_index = 0;
  auto fail = [&]() {
    int report[3] = {errno, step, path_index};
    (void)!write(plan.error_fd, report, sizeof(report));
    _exit(127);
  };
  if (plan.detach == SubprocessSpec::Detach::kProcessGroup) {
    if (setpgid(0, 0) != 0) fail();
  } else {
    if (setsid() < 0) fail();
  }
  if (plan.detach != SubprocessSpec::Detach::kSession) {
    step = kDeathSignal;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail();
    if (getppid() != plan.parent) _exit(128 + SIGKILL);  // the parent is already gone
  }
  step = kCgroup;
  for (int fd : *plan.cgroup_fds) {
    if (write(fd, "0", 1) != 1) fail();
  }
  step = kRedirect;
  if (dup2(plan.output_fd, STDOUT_FILENO) < 0 || dup2(plan.output_fd, STDERR_FILENO) < 0) fail();
  step = kStdin;
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0) fail();
  step = kHideProcesses;
  if (plan.hide_other_users_processes && !MountProcHidingOthers()) fail();
  step = kPrivateShm;
  if (plan.private_shm[0] != '\0' &&
      mount(plan.private_shm, "/dev/shm", nullptr, MS_BIND, nullptr) != 0) {
    fail();
  }
  step = kNoNewPrivs;
  if (plan.no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail();
  // A worker that switches users by ambient capabilities does not hand them
  // on (EINVAL: a kernel without ambient capabilities has none to clear).
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) fail();
  step = kRunAs;
  if (plan.run_as != nullptr) {
    // Groups first: once the user id is dropped they can no longer change.
    const RunAs& as = *plan.run_as;
    if (setgroups(as.groups.size(), as.groups.data()) != 0 ||
        setresgid(as.gid, as.gid, as.gid) != 0 || setresuid(as.uid, as.uid, as.uid) != 0) {
      fail();
    }
  }
  step = kChdir;
  if (plan.dir[0] != '\0' && chdir(plan.dir) != 0) fail();
  step = kAccess;
  for (const PathAccess& required : *plan.required_access) {
    if (access(required.path.c_str(), required.mode) != 0) fail();
    ++path_index;
  }
  // Nothing else of the caller's open files reaches the child; the error
  // pipe is close-on-exec and so closes itself on success.
  if (plan.inherit_fd >= 3) {
    step = kInheritFd;
    int fd = plan.inherit_fd;
    // The error pipe is above kLowestErrorFd, out of the way.
    if (plan.inherit_fd_as >= 3 && plan.inherit_fd_as != fd) {
      if (dup2(fd, plan.inherit_fd_as) < 0) fail();
      fd = plan.inherit_fd_as;
    }
    if (fd > 3) syscall(SYS_close_range, 3, fd - 1, CLOSE_RANGE_CLOEXEC);
    syscall(SYS_close_range, fd + 1, ~0U, CLOSE_RANGE_CLOEXEC);
    if (fcntl(fd, F_SETFD, 0) != 0) fail();
  } else {
    syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  step = kExec;
  execve(plan.program, plan.argv, plan.envp);
  fail();
  _exit(127);
}

// The error a child reported before exec: {errno, step, index of the
// required access that failed}, naming what that step was about.
absl::Status ChildFailure(const int report[3], const SubprocessSpec& spec,
                          const std::string& program) {
  const int step = report[1] >= 0 && report[1] < kSteps ? report[1] : kExec;
  if (step == kAccess && report[2] >= 0 &&
      report[2] < static_cast<int>(spec.required_access.size())) {
    const PathAccess& required = spec.required_access[report[2]];
    return absl::FailedPreconditionError(
        absl::StrCat(required.what, " ", required.path, ": ", strerror(report[0]),
                     (required.mode & W_OK) != 0 ? " (needs to be writable)" : ""));
  }
  return absl::FailedPreconditionError(absl::StrCat(kStepNames[step], " ",
                                                    step == kChdir ? spec.working_dir
                                                    : step == kCgroup
                                                        ? absl::StrJoin(spec.cgroup_procs, " ")
                                                    : step == kRunAs ? spec.run_as->name
                                                                     : program,
                                                    ": ", strerror(report[0])));
}

}  // namespace

absl::StatusOr<RunAs> ResolveRunAs(const std::string& user_and_group) {
  const size_t colon = user_and_group.find(':');
  const std::string user = user_and_group.substr(0, colon);
  RunAs as;
  as.name = user_and_group;
  std::vector<char> buffer(16384);
  passwd pw;
  passwd* found = nullptr;
  uid_t numeric_uid = 0;
  if (getpwnam_r(user.c_str(), &pw, buffer.data(), buffer.size(), &found) == 0 &&
      found != nullptr) {
    as.uid = pw.pw_uid;
    as.gid = pw.pw_gid;
    as.home = pw.pw_dir;
    int count = 64;
    as.groups.resize(count);
    if (getgrouplist(pw.pw_name, pw.pw_gid, as.groups.data(), &count) < 0) count = 0;
    as.groups.resize(count);
  } else if (absl::SimpleAtoi(user, &numeric_uid)) {
    as.uid = numeric_uid;
    as.gid = numeric_uid;
    as.home = "/";
  } else {
    return absl::InvalidArgumentError(absl::StrCat("no user \"", user, "\" on this host"));
  }
  if (colon == std::string::npos) return as;
  const std::string group_name = user_and_group.substr(colon + 1);
  struct group gr;
  struct group* found_group = nullptr;
  gid_t numeric_gid = 0;
  if (getgrnam_r(group_name.c_str(), &gr, buffer.data(), buffer.size(), &found_group) == 0 &&
      found_group != nullptr) {
    as.gid = gr.gr_gid;
  } else if (absl::SimpleAtoi(group_name, &numeric_gid)) {
    as.gid = numeric_gid;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("no group \"", group_name, "\" on this host"));
  }
  as.groups = {as.gid};
  return as;
}

absl::StatusOr<std::string> ResolveProgram(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos) return program;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", program);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("program \"", program, "\" not found on PATH ", path));
}

std::map<std::string, std::string> CurrentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, eq - *e)] = eq + 1;
  }
  return env;
}

namespace {

// The pipe on which a child says why its exec failed; with `high`, both
// ends at kLowestErrorFd or above, where the child's dup2 of inherit_fd to
// inherit_fd_as cannot land on them.
absl::Status MakeErrorPipe(bool high, int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  if (!high) return absl::OkStatus();
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= kLowestErrorFd) continue;
    const int moved = fcntl(fds[i], F_DUPFD_CLOEXEC, kLowestErrorFd);
    if (moved < 0) {
      const int error = errno;
      close(fds[0]);
      close(fds[1]);
      return absl::ResourceExhaustedError(absl::StrCat("F_DUPFD: ", strerror(error)));
    }
    close(fds[i]);
    fds[i] = moved;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<pid_t> SpawnProcess(const SubprocessSpec& spec) {
  if (!spec.private_shm.empty() && !spec.hide_other_users_processes) {
    return absl::InvalidArgumentError(
        "a private /dev/shm needs the mount namespace of hide_other_users_processes");
  }
  if (spec.argv.empty()) return absl::InvalidArgumentError("empty argv");
  if (spec.inherit_fd >= 0 && spec.inherit_fd < 3) {
    return absl::InvalidArgumentError("inherit_fd must not be stdin, stdout or stderr");
  }
  auto path_it = spec.env.find("PATH");
  absl::StatusOr<std::string> program =
      ResolveProgram(spec.argv[0], path_it == spec.env.end() ? "/usr/bin:/bin" : path_it->second);
  if (!program.ok()) return program.status();

  const int output_fd = spec.output_fd >= 0 ? spec.output_fd
                                            : open(spec.output_path.c_str(),
                                                   O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (output_fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", spec.output_path, ": ", strerror(errno)));
  }
  absl::Cleanup close_output = [output_fd, own = spec.output_fd < 0] {
    if (own) close(output_fd);
  };
  std::vector<int> cgroup_fds;
  absl::Cleanup close_cgroups = [&cgroup_fds] {
    for (int fd : cgroup_fds) close(fd);
  };
  for (const std::string& procs : spec.cgroup_procs) {
    int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open ", procs, ": ", strerror(errno)));
    }
    cgroup_fds.push_back(fd);
  }
  int pipe_fds[2];
  if (absl::Status made = MakeErrorPipe(spec.inherit_fd_as >= 3, pipe_fds); !made.ok()) {
    return made;
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
    ExecChild({spec.detach, parent, output_fd, pipe_fds[1], &cgroup_fds,
               spec.run_as ? &*spec.run_as : nullptr, spec.hide_other_users_processes,
               spec.private_shm.c_str(), spec.inherit_fd, spec.inherit_fd_as, spec.no_new_privs,
               spec.working_dir.c_str(), &spec.required_access, program->c_str(), argv.data(),
               envp.data()});
  }
  if (spec.detach == SubprocessSpec::Detach::kProcessGroup) {
    // Also from the parent, so that signalling -pid works at once.
    setpgid(pid, pid);
  }
  close(pipe_fds[1]);
  int report[3];
  ssize_t n;
  do {
    n = read(pipe_fds[0], report, sizeof(report));
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  if (n != sizeof(report)) return pid;  // the pipe closed on exec
  waitpid(pid, nullptr, 0);
  return ChildFailure(report, spec, *program);
}

bool CanHideOtherUsersProcesses() {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(MountProcHidingOthers() ? 0 : 1);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

absl::StatusOr<ToolRun> RunToCompletion(const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env,
                                        absl::Duration timeout, size_t max_output,
                                        const std::function<bool()>& tick,
                                        absl::Duration tick_interval) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("pipe: ", strerror(errno)));
  }
  SubprocessSpec spec;
  spec.argv = argv;
  spec.env = CurrentEnvironment();
  for (const auto& [name, value] : env) spec.env[name] = value;
  spec.output_fd = fds[1];
  absl::StatusOr<pid_t> pid = SpawnProcess(spec);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    return pid.status();
  }
  ToolRun run;
  const absl::Time deadline = absl::Now() + timeout;
  absl::Time next_tick = absl::Now() + tick_interval;
  char buffer[8192];
  for (;;) {
    const absl::Time now = absl::Now();
    if (tick && now >= next_tick) {
      if (!tick()) {
        run.cancelled = true;
        break;
      }
      next_tick = now + tick_interval;
    }
    const absl::Time wake = tick ? std::min(deadline, next_tick) : deadline;
    const int64_t wait = std::max<int64_t>(0, absl::ToInt64Milliseconds(wake - now));
    if (now >= deadline) {
      run.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(wait, 1 << 30)));
    if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every writer closed it: the tool (and its children) ended
    const size_t room = max_output - std::min(max_output, run.output.size());
    run.output.append(buffer, std::min(room, static_cast<size_t>(n)));
  }
  close(fds[0]);
  if (run.timed_out || run.cancelled) kill(-*pid, SIGKILL);
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!run.timed_out && !run.cancelled && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

}  // namespace ringmaster
