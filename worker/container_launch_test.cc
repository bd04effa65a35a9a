#include "worker/container_launch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// An image's root file system: Debian's static busybox, a link to it by an
// absolute path (as images have), and a file that is not executable.
std::string Rootfs(const std::string& dir) {
  const std::string rootfs = dir + "/rootfs";
  for (const char* sub : {"/bin", "/usr/bin", "/etc", "/opt"}) fs::create_directories(rootfs + sub);
  fs::copy_file("/bin/busybox", rootfs + "/bin/busybox");
  for (const char* applet : {"sh", "cat", "id", "touch"}) {
    fs::create_symlink("busybox", rootfs + "/bin/" + applet);
  }
  fs::create_symlink("/bin/busybox", rootfs + "/usr/bin/tool");
  // Out of the image by "..": resolved inside it, where there is nothing.
  fs::create_symlink("../../../../../../usr/bin/env", rootfs + "/usr/bin/escape");
  std::ofstream(rootfs + "/opt/notes") << "not a program\n";
  std::ofstream(rootfs + "/etc/os-release") << "PRETTY_NAME=\"the image\"\n";
  return rootfs;
}

class ContainerLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/bin/busybox")) GTEST_SKIP() << "no /bin/busybox (Debian's busybox-static)";
    dir_ = testing::MakeTempDir("container-launch");
    rootfs_ = Rootfs(dir_);
  }
  std::string dir_, rootfs_;
};

TEST_F(ContainerLaunchTest, ACommandIsLookedUpInTheImageNotOnTheHost) {
  const std::string path = "/usr/local/bin:/usr/bin:/bin";
  EXPECT_THAT(FindInImage(rootfs_, "sh", path), IsOkAndHolds(std::string("/bin/sh")));
  EXPECT_THAT(FindInImage(rootfs_, "tool", path), IsOkAndHolds(std::string("/usr/bin/tool")));
  EXPECT_THAT(FindInImage(rootfs_, "/bin/cat", path), IsOkAndHolds(std::string("/bin/cat")));
  ASSERT_TRUE(fs::exists("/usr/bin/env")) << "the host has it";
  EXPECT_THAT(FindInImage(rootfs_, "env", path), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(FindInImage(rootfs_, "escape", path), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(FindInImage(rootfs_, "/opt/notes", path), StatusIs(absl::StatusCode::kNotFound));

  LaunchSpec spec;
  spec.argv = {"python3", "train.py"};
  spec.env = {{"PATH", path}};
  EXPECT_THAT(InImage(spec, rootfs_, "registry.example:5000/team/train:1.2", "c1", {}),
              StatusIs(absl::StatusCode::kNotFound,
                       "the command python3 is not in the image "
                       "registry.example:5000/team/train:1.2: no program python3 on "
                       "PATH=/usr/local/bin:/usr/bin:/bin"));
}

TEST_F(ContainerLaunchTest, TheRanksLaunchRunsInTheImageAsItsUserWithItsDirectory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (an OCI runtime's namespaces)";
  if (testing::Shell("command -v runc").exit_code != 0) {
    GTEST_SKIP() << "no runc (Debian's package runc; ./dev installs it)";
  }
  const std::string work = dir_ + "/work";
  fs::create_directories(work);
  fs::permissions(work, fs::perms::all);
  LaunchSpec spec;
  spec.argv = {"sh", "-c", "cat /etc/os-release > out; id -u >> out; exit 3"};
  spec.env = {{"PATH", "/bin"}};
  spec.working_dir = work;
  spec.log_path = dir_ + "/rank.log";
  spec.name = "container-launch-test";
  RunAs nobody;
  nobody.name = "nobody";
  nobody.uid = 65534;
  nobody.gid = 65534;
  spec.run_as = nobody;
  ContainerOptions options;
  options.bundles_dir = dir_ + "/bundles";
  absl::StatusOr<LaunchSpec> launch =
      InImage(spec, rootfs_, "the image", absl::StrCat("container-launch-", getpid()), options);
  ASSERT_OK(launch);
  EXPECT_EQ(launch->argv[0].front(), '/') << "resolved by the worker, not on the job's PATH";
  EXPECT_FALSE(launch->run_as.has_value()) << "the runtime runs as the worker";

  PosixProcessLauncher launcher;
  absl::StatusOr<pid_t> pid = launcher.Spawn(*launch);
  ASSERT_OK(pid);
  ExitStatus status;
  ASSERT_TRUE(launcher.WaitExit(*pid, absl::Seconds(60), &status));
  launcher.ClearGroup(*pid, absl::Seconds(5));
  EXPECT_EQ(status.exit_code, 3);
  std::ifstream in(work + "/out");
  std::string os_release, uid;
  std::getline(in, os_release);
  std::getline(in, uid);
  EXPECT_EQ(os_release, "PRETTY_NAME=\"the image\"");
  EXPECT_EQ(uid, "65534");
  struct stat st {};
  ASSERT_EQ(stat((work + "/out").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u) << "what it writes on the host is the job's uid's";
}

TEST_F(ContainerLaunchTest, NothingOfTheJobsEnvironmentReachesTheRuntime) {
  // A job's PATH naming a directory of its own, with a "runc" there, and
  // an LD_PRELOAD: the runtime runs as the worker, so either would be the
  // job's code as root.
  const std::string planted = dir_ + "/planted";
  fs::create_directories(planted);
  std::ofstream(planted + "/runc") << "#!/bin/sh\ntouch " << dir_ << "/pwned\n";
  fs::permissions(planted + "/runc", fs::perms::owner_all);
  LaunchSpec spec;
  spec.argv = {"sh", "-c", "true"};
  spec.env = {{"PATH", planted + ":/bin"}, {"LD_PRELOAD", planted + "/evil.so"}};
  ContainerOptions options;
  options.bundles_dir = dir_ + "/bundles";
  absl::StatusOr<LaunchSpec> launch = InImage(spec, rootfs_, "the image", "c-env", options);
  if (!launch.ok()) {
    // No runc on this machine: it is still not the planted one.
    EXPECT_THAT(launch.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                          HasSubstr("--container-runtime runc")));
    return;
  }
  EXPECT_NE(launch->argv[0], planted + "/runc");
  EXPECT_EQ(launch->env,
            (std::map<std::string, std::string>{
                {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}));
  // The job's own environment is the container's.
  std::ifstream config(dir_ + "/bundles/c-env/config.json");
  std::stringstream text;
  text << config.rdbuf();
  EXPECT_NE(text.str().find("LD_PRELOAD=" + planted + "/evil.so"), std::string::npos);
}

TEST_F(ContainerLaunchTest, ClearingTheRankKillsItsContainerInTheRuntimesCgroupBelowIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (an OCI runtime's namespaces)";
  if (testing::Shell("command -v runc").exit_code != 0) GTEST_SKIP() << "no runc";
  const std::string cgroup = absl::StrCat("container-launch-test-", getpid());
  PosixProcessLauncher launcher(cgroup);
  if (!launcher.contained()) GTEST_SKIP() << "no cgroups this process may write";
  // A marker no other process has: the container's sleep.
  const std::string marker = absl::StrCat("sleep ", 1000000 + getpid());
  LaunchSpec spec;
  spec.argv = {"sh", "-c", marker};
  spec.env = {{"PATH", "/bin"}};
  spec.log_path = dir_ + "/rank.log";
  spec.name = "rank-0";
  ContainerOptions options;
  options.bundles_dir = dir_ + "/bundles";
  options.cgroups_path = spec.name;  // below the rank's, as the supervisor puts it
  absl::StatusOr<LaunchSpec> launch =
      InImage(spec, rootfs_, "the image", absl::StrCat("container-clear-", getpid()), options);
  ASSERT_OK(launch);
  absl::StatusOr<pid_t> pid = launcher.Spawn(*launch);
  ASSERT_OK(pid);
  const std::string find = absl::StrCat("pgrep -f '^", marker, "$'");
  ASSERT_TRUE(
      testing::WaitFor([&] { return testing::Shell(find).exit_code == 0; }, absl::Seconds(30)));
  EXPECT_TRUE(launcher.ClearGroup(*pid, absl::Seconds(10)));
  EXPECT_NE(testing::Shell(find).exit_code, 0) << "the container's process outlived its rank";
}

}  // namespace
}  // namespace ringmaster
