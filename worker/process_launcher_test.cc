#include "worker/process_launcher.h"

#include "common/subprocess.h"
#include "worker/rank_log.h"

#include <fcntl.h>
#include <signal.h>

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

// `name` in a fresh directory of this test program's.
std::string TempPath(const std::string& name) {
  static const std::string dir = testing::MakeTempDir("launcher");
  return dir + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The output in a rank log, as the process wrote it.
std::string ReadOutput(const std::string& path) {
  std::string out;
  bool mid_line = false;
  RenderRecords(ReadFile(path), /*timestamps=*/false, &mid_line, &out);
  return out;
}

LaunchSpec Shell(const std::string& script, const std::string& log) {
  LaunchSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"ONLY_THIS", "yes"}};
  spec.log_path = TempPath(log);
  std::remove(spec.log_path.c_str());
  return spec;
}

ExitStatus WaitFor(ProcessLauncher& launcher, pid_t pid) {
  ExitStatus status;
  while (!launcher.WaitExit(pid, absl::Seconds(10), &status)) {
  }
  return status;
}

TEST(ProcessLauncherTest, RunsWithExactEnvironmentAndCapturesOutput) {
  PosixProcessLauncher launcher;
  LaunchSpec spec = Shell("env; echo to-stderr >&2; exit 3", "env.log");
  auto pid = launcher.Spawn(spec);
  ASSERT_OK(pid) << pid.status();
  ExitStatus status = WaitFor(launcher, *pid);
  EXPECT_EQ(status.exit_code, 3);
  EXPECT_EQ(status.signal, 0);
  ASSERT_TRUE(launcher.ClearGroup(*pid, absl::Seconds(10)));  // and the log is complete
  const std::string log = ReadOutput(spec.log_path);
  EXPECT_NE(log.find("ONLY_THIS=yes"), std::string::npos) << log;
  EXPECT_NE(log.find("to-stderr"), std::string::npos) << log;
  EXPECT_EQ(log.find("TEST_TMPDIR"), std::string::npos)
      << "the worker's own environment must not leak into ranks";
}

// Each line is a record with the time the worker read it, and the log is
// whole once the group is cleared, even for output written just before
// the exit.
TEST(ProcessLauncherTest, OutputReachesTheLogAsTimedRecords) {
  PosixProcessLauncher launcher;
  LaunchSpec spec = Shell("echo one; printf 'two'; echo ' three' >&2; printf last", "timed.log");
  const absl::Time before = absl::Now();
  auto pid = launcher.Spawn(spec);
  ASSERT_OK(pid) << pid.status();
  EXPECT_EQ(WaitFor(launcher, *pid).exit_code, 0);
  ASSERT_TRUE(launcher.ClearGroup(*pid, absl::Seconds(10)));
  const absl::Time after = absl::Now();
  EXPECT_EQ(ReadOutput(spec.log_path), "one\ntwo three\nlast");
  const std::string records = ReadFile(spec.log_path);
  absl::Time first;
  std::string error;
  ASSERT_TRUE(
      absl::ParseTime(absl::RFC3339_full, records.substr(0, kTimestampBytes), &first, &error))
      << records;
  EXPECT_GE(first, before);
  EXPECT_LE(first, after);
}

// The rank's snapshot segment reaches it at the worker's number, and no
// other descriptor of the worker's does.
TEST(ProcessLauncherTest, OnlyTheInheritedDescriptorReachesTheProcess) {
  PosixProcessLauncher launcher;
  const int kept = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // Not close-on-exec, and above any number the child opens itself: it must
  // not leak either.
  const int other = fcntl(kept, F_DUPFD, 100);
  ASSERT_GE(kept, 3);
  ASSERT_GE(other, 3);
  LaunchSpec spec = Shell(absl::StrCat("ls /proc/self/fd"), "fds.log");
  spec.inherit_fd = kept;
  auto pid = launcher.Spawn(spec);
  close(other);
  ASSERT_OK(pid) << pid.status();
  EXPECT_EQ(WaitFor(launcher, *pid).exit_code, 0);
  ASSERT_TRUE(launcher.ClearGroup(*pid, absl::Seconds(10)));
  close(kept);
  std::vector<std::string> fds = absl::StrSplit(ReadOutput(spec.log_path), '\n', absl::SkipEmpty());
  // 0-2, the inherited one, and the one ls opens to read the directory.
  EXPECT_EQ(fds.size(), 5u) << ReadOutput(spec.log_path);
  EXPECT_NE(std::find(fds.begin(), fds.end(), std::to_string(kept)), fds.end());
  EXPECT_EQ(std::find(fds.begin(), fds.end(), std::to_string(other)), fds.end());
}

TEST(ProcessLauncherTest, MissingProgramIsAnErrorNamingIt) {
  PosixProcessLauncher launcher;
  LaunchSpec spec = Shell("", "missing.log");
  spec.argv = {"no-such-program-xyz"};
  auto pid = launcher.Spawn(spec);
  EXPECT_THAT(pid.status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_NE(pid.status().message().find("no-such-program-xyz"), std::string::npos);

  spec.argv = {"/nonexistent/prog"};
  pid = launcher.Spawn(spec);
  EXPECT_THAT(pid, IsError());
  EXPECT_NE(pid.status().message().find("execve /nonexistent/prog"), std::string::npos)
      << pid.status();
}

TEST(ProcessLauncherTest, BadWorkingDirIsAnError) {
  PosixProcessLauncher launcher;
  LaunchSpec spec = Shell("true", "dir.log");
  spec.working_dir = "/nonexistent-dir";
  auto pid = launcher.Spawn(spec);
  EXPECT_THAT(pid, IsError());
  EXPECT_NE(pid.status().message().find("chdir /nonexistent-dir"), std::string::npos)
      << pid.status();
}

TEST(ProcessLauncherTest, APathTheProgramNeedsIsCheckedAsItsUser) {
  PosixProcessLauncher launcher;
  LaunchSpec spec = Shell("true", "access.log");
  spec.required_access = {{"checkpoint_dir", "/nonexistent-ckpt", R_OK | X_OK}};
  auto pid = launcher.Spawn(spec);
  EXPECT_EQ(pid.status().message(), "checkpoint_dir /nonexistent-ckpt: No such file or directory");

  const std::string dir = TempPath("root-only");
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms(0755));
  spec.required_access = {{"checkpoint_dir", dir, R_OK | X_OK}};
  pid = launcher.Spawn(spec);
  ASSERT_OK(pid) << pid.status();
  EXPECT_EQ(WaitFor(launcher, *pid).exit_code, 0);

  if (geteuid() != 0) GTEST_SKIP() << "switching to another user needs root";
  auto nobody = ResolveRunAs("nobody");
  ASSERT_OK(nobody);
  spec.run_as = *nobody;
  spec.required_access = {{"checkpoint_dir", dir, W_OK | X_OK}};
  pid = launcher.Spawn(spec);
  EXPECT_EQ(pid.status().message(),
            absl::StrCat("checkpoint_dir ", dir, ": Permission denied (needs to be writable)"));
}

TEST(ProcessLauncherTest, SignallingTheGroupReachesChildrenAndClearLeavesNothing) {
  PosixProcessLauncher launcher;
  // The leader waits on a background child; both are in the rank's group.
  LaunchSpec spec = Shell("sleep 300 & sleep 300; wait", "group.log");
  auto pid = launcher.Spawn(spec);
  ASSERT_OK(pid) << pid.status();
  EXPECT_EQ(getpgid(*pid), *pid) << "the rank leads its own process group";
  ExitStatus status;
  EXPECT_FALSE(launcher.WaitExit(*pid, absl::Milliseconds(100), &status));
  launcher.SignalGroup(*pid, SIGTERM);
  status = WaitFor(launcher, *pid);
  EXPECT_EQ(status.signal, SIGTERM);
  EXPECT_TRUE(launcher.ClearGroup(*pid, absl::Seconds(5)));
  errno = 0;
  EXPECT_EQ(kill(-*pid, 0), -1);
  EXPECT_EQ(errno, ESRCH) << "no process of the group may be left";
}

TEST(ProcessLauncherTest, OrphanedGrandchildrenAreClearedToo) {
  PosixProcessLauncher launcher;
  // The leader exits at once, leaving a grandchild in its group.
  LaunchSpec spec = Shell("(sleep 300 &) ; exit 0", "orphan.log");
  auto pid = launcher.Spawn(spec);
  ASSERT_OK(pid);
  EXPECT_EQ(WaitFor(launcher, *pid).exit_code, 0);
  EXPECT_EQ(kill(-*pid, 0), 0) << "the grandchild is still there";
  EXPECT_TRUE(launcher.ClearGroup(*pid, absl::Seconds(5)));
  EXPECT_EQ(kill(-*pid, 0), -1);
}

TEST(ResolveProgramTest, LooksUpPath) {
  auto sh = ResolveProgram("sh", "/nonexistent:/bin");
  ASSERT_OK(sh);
  EXPECT_EQ(*sh, "/bin/sh");
  EXPECT_EQ(*ResolveProgram("./x", ""), "./x");
  EXPECT_THAT(ResolveProgram("sh", "/nonexistent"), IsError());
}

// The pids a log holds, one per line.
std::vector<pid_t> PidsIn(const std::string& path) {
  std::vector<pid_t> pids;
  std::istringstream in(ReadOutput(path));
  pid_t pid;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] != 'Z';
}

// Waits (with a deadline) for the script to have written `n` pids.
std::vector<pid_t> WaitForPids(const std::string& path, size_t n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  std::vector<pid_t> pids;
  while ((pids = PidsIn(path)).size() < n && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  return pids;
}

class ContainedLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    launcher_ = std::make_unique<PosixProcessLauncher>(
        "test-" + std::to_string(getpid()) + "-" +
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    if (!launcher_->contained()) GTEST_SKIP() << "no writable cgroup hierarchy on this host";
  }
  std::unique_ptr<PosixProcessLauncher> launcher_;
};

TEST_F(ContainedLauncherTest, ClearKillsDescendantsThatLeftTheSession) {
  // A grandchild in a session of its own escapes kill(-pgid); its cgroup
  // still holds it.
  LaunchSpec spec =
      Shell("setsid sh -c 'echo $$; exec sleep 300' & echo $$; exec sleep 300", "escape.log");
  spec.name = "escape";
  auto pid = launcher_->Spawn(spec);
  ASSERT_OK(pid) << pid.status();
  std::vector<pid_t> pids = WaitForPids(spec.log_path, 2);
  ASSERT_EQ(pids.size(), 2u) << ReadOutput(spec.log_path);
  for (pid_t p : pids) ASSERT_TRUE(Alive(p));
  launcher_->SignalGroup(*pid, SIGKILL);
  WaitFor(*launcher_, *pid);
  ASSERT_TRUE(launcher_->ClearGroup(*pid, absl::Seconds(10)));
  for (pid_t p : pids) EXPECT_FALSE(Alive(p)) << "pid " << p << " survived";
}

TEST_F(ContainedLauncherTest, MemoryLimitKillsAndIsReportedAsOom) {
  LaunchSpec spec = Shell("head -c 400M /dev/zero | tail", "oom.log");
  spec.name = "hungry";
  spec.memory_bytes = 64 << 20;
  auto pid = launcher_->Spawn(spec);
  ASSERT_OK(pid) << pid.status();
  ExitStatus status = WaitFor(*launcher_, *pid);
  EXPECT_NE(status.exit_code + status.signal, 0) << "it cannot have finished";
  EXPECT_TRUE(launcher_->OomKilled(*pid));
  EXPECT_TRUE(launcher_->ClearGroup(*pid, absl::Seconds(10)));
}

// As a rank in an image: the process killed is in a cgroup below the
// rank's (its runtime's), which is removed before the rank exits.
TEST_F(ContainedLauncherTest, AnOomBelowTheRanksCgroupIsReportedOnceThatCgroupIsGone) {
  LaunchSpec spec = Shell(
      "if grep -q ':memory:' /proc/self/cgroup; then "
      "dir=/sys/fs/cgroup/memory$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup); "
      "else dir=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); fi; "
      "mkdir $dir/inner || exit 1; "
      "sh -c 'echo $$ > $1/cgroup.procs && exec dd if=/dev/zero of=/dev/null bs=256M count=1' "
      "sh $dir/inner; echo dd exited $?; rmdir $dir/inner && echo removed",
      "inner.log");
  spec.name = "inner";
  spec.memory_bytes = 64 << 20;
  auto pid = launcher_->Spawn(spec);
  ASSERT_OK(pid) << pid.status();
  EXPECT_EQ(WaitFor(*launcher_, *pid).exit_code, 0) << ReadOutput(spec.log_path);
  const std::string output = ReadOutput(spec.log_path);
  ASSERT_NE(output.find("dd exited 137"), std::string::npos) << output;
  ASSERT_NE(output.find("removed"), std::string::npos) << output;
  EXPECT_TRUE(launcher_->OomKilled(*pid));
  EXPECT_TRUE(launcher_->OomKilled(*pid)) << "asked again";
  EXPECT_TRUE(launcher_->ClearGroup(*pid, absl::Seconds(10)));
}

TEST_F(ContainedLauncherTest, WithinItsLimitNoOom) {
  LaunchSpec spec = Shell("head -c 1M /dev/zero | tail > /dev/null", "fits.log");
  spec.name = "modest";
  spec.memory_bytes = 64 << 20;
  auto pid = launcher_->Spawn(spec);
  ASSERT_OK(pid) << pid.status();
  EXPECT_EQ(WaitFor(*launcher_, *pid).exit_code, 0);
  EXPECT_FALSE(launcher_->OomKilled(*pid));
  EXPECT_TRUE(launcher_->ClearGroup(*pid, absl::Seconds(10)));
}

TEST_F(ContainedLauncherTest, RestartedWorkerEndsWhatItsPreviousLifeLeft) {
  LaunchSpec spec = Shell("sleep 300 & echo $!; sleep 300 & echo $!; wait", "left.log");
  spec.name = "left-behind";
  auto pid = launcher_->Spawn(spec);
  ASSERT_OK(pid) << pid.status();
  std::vector<pid_t> pids = WaitForPids(spec.log_path, 2);
  ASSERT_EQ(pids.size(), 2u);
  // A worker with the same id starts (the first one died without cleaning).
  const std::string id = "test-" + std::to_string(getpid()) + "-" +
                         ::testing::UnitTest::GetInstance()->current_test_info()->name();
  PosixProcessLauncher restarted(id);
  for (pid_t p : pids) EXPECT_FALSE(Alive(p)) << "pid " << p << " survived the restart";
  ExitStatus status = WaitFor(*launcher_, *pid);
  EXPECT_EQ(status.signal, SIGKILL);
}

TEST(ProcessLauncherTest, MemoryLimitWithoutCgroupsIsRefused) {
  PosixProcessLauncher launcher;  // no worker id: no cgroups
  LaunchSpec spec = Shell("true", "refused.log");
  spec.memory_bytes = 1 << 20;
  auto pid = launcher.Spawn(spec);
  EXPECT_THAT(pid.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace ringmaster
