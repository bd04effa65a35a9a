#include "worker/process_launcher.h"

#include "common/subprocess.h"

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
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
  ASSERT_TRUE(pid.ok()) << pid.status();
  ExitStatus status = WaitFor(launcher, *pid);
  EXPECT_EQ(status.exit_code, 3);
  EXPECT_EQ(status.signal, 0);
  const std::string log = ReadFile(spec.log_path);
  EXPECT_NE(log.find("ONLY_THIS=yes"), std::string::npos) << log;
  EXPECT_NE(log.find("to-stderr"), std::string::npos) << log;
  EXPECT_EQ(log.find("TEST_TMPDIR"), std::string::npos)
      << "the worker's own environment must not leak into ranks";
}

TEST(ProcessLauncherTest, MissingProgramIsAnErrorNamingIt) {
  PosixProcessLauncher launcher;
  LaunchSpec spec = Shell("", "missing.log");
  spec.argv = {"no-such-program-xyz"};
  auto pid = launcher.Spawn(spec);
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(pid.status().message().find("no-such-program-xyz"), std::string::npos);

  spec.argv = {"/nonexistent/prog"};
  pid = launcher.Spawn(spec);
  EXPECT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("execve /nonexistent/prog"), std::string::npos)
      << pid.status();
}

TEST(ProcessLauncherTest, BadWorkingDirIsAnError) {
  PosixProcessLauncher launcher;
  LaunchSpec spec = Shell("true", "dir.log");
  spec.working_dir = "/nonexistent-dir";
  auto pid = launcher.Spawn(spec);
  EXPECT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find("chdir /nonexistent-dir"), std::string::npos)
      << pid.status();
}

TEST(ProcessLauncherTest, SignallingTheGroupReachesChildrenAndClearLeavesNothing) {
  PosixProcessLauncher launcher;
  // The leader waits on a background child; both are in the rank's group.
  LaunchSpec spec = Shell("sleep 300 & sleep 300; wait", "group.log");
  auto pid = launcher.Spawn(spec);
  ASSERT_TRUE(pid.ok()) << pid.status();
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
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(WaitFor(launcher, *pid).exit_code, 0);
  EXPECT_EQ(kill(-*pid, 0), 0) << "the grandchild is still there";
  EXPECT_TRUE(launcher.ClearGroup(*pid, absl::Seconds(5)));
  EXPECT_EQ(kill(-*pid, 0), -1);
}

TEST(ResolveProgramTest, LooksUpPath) {
  auto sh = ResolveProgram("sh", "/nonexistent:/bin");
  ASSERT_TRUE(sh.ok());
  EXPECT_EQ(*sh, "/bin/sh");
  EXPECT_EQ(*ResolveProgram("./x", ""), "./x");
  EXPECT_FALSE(ResolveProgram("sh", "/nonexistent").ok());
}

}  // namespace
}  // namespace ringmaster
