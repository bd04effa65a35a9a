#include "worker/container_launch.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

google::protobuf::Struct ReadConfig(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  google::protobuf::Struct config;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &config).ok()) << path;
  return config;
}

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
  ContainerOptions Options() const {
    ContainerOptions options;
    options.bundles_dir = dir_ + "/bundles";
    options.state_dir = dir_ + "/containers";
    options.init = fs::absolute("worker/ringmaster-container-init").string();
    return options;
  }
  static bool HasRunc() { return testing::Shell("command -v runc").exit_code == 0; }
  // What the tests' containers leave: their overlays unmounted, their
  // bundles and runtime state removed.
  void TearDown() override {
    if (!dir_.empty()) SweepContainers(Options());
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

  // The job's code, bound in: a script by a relative path, a program on a
  // PATH entry there (a virtual environment), as exec finds them.
  const std::string code = dir_ + "/code";
  fs::create_directories(code + "/venv/bin");
  for (const char* file : {"/train.sh", "/venv/bin/python"}) {
    std::ofstream(code + file) << "#!/bin/sh\n";
    fs::permissions(code + file, fs::perms::owner_all);
  }
  const FoundThrough job{{{code, "/jobs/j1/code", false}}, "/jobs/j1/code", std::nullopt};
  EXPECT_THAT(FindInImage(rootfs_, "./train.sh", path, job),
              IsOkAndHolds(std::string("./train.sh")));
  EXPECT_THAT(FindInImage(rootfs_, "python", "/jobs/j1/code/venv/bin:" + path, job),
              IsOkAndHolds(std::string("/jobs/j1/code/venv/bin/python")));
  EXPECT_THAT(FindInImage(rootfs_, "./missing.sh", path, job),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(FindInImage(rootfs_, "./train.sh", path), StatusIs(absl::StatusCode::kNotFound))
      << "without the bind, the image has no train.sh";

  LaunchSpec spec;
  spec.argv = {"python3", "train.py"};
  spec.env = {{"PATH", path}};
  EXPECT_THAT(InImage(spec, rootfs_, "registry.example:5000/team/train:1.2", "c1", Options()),
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
  ContainerOptions options = Options();
  options.binds = {{work, work, false}};  // as the job's directory is
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
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the container's overlay)";
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
  absl::StatusOr<LaunchSpec> launch = InImage(spec, rootfs_, "the image", "c-env", Options());
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
  ContainerOptions options = Options();
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

TEST_F(ContainerLaunchTest, TheImagesEnvironmentAndDirectoryUnderTheJobsAndNoHostPathBound) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the container's overlay)";
  // umoci's runtime configuration beside the root file system.
  std::ofstream(dir_ + "/config.json")
      << R"({"process": {"env": ["PATH=/opt/bin:/bin", "LANG=C.UTF-8", "FROM_IMAGE=1",)"
      << R"( "SHARED=image"], "cwd": "/srv"}})";
  LaunchSpec spec;
  spec.argv = {"sh", "-c", "true"};
  spec.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
              {"LANG", "en_US.UTF-8"},
              {"SHARED", "job"},
              {"RANK", "0"}};
  ContainerOptions options = Options();
  options.host_env = {"PATH", "LANG"};  // the worker's own: the image's win
  ASSERT_OK(InImage(spec, rootfs_, "the image", "c-config", options).status());
  google::protobuf::Struct config = ReadConfig(dir_ + "/bundles/c-config/config.json");
  const auto& process = config.fields().at("process").struct_value().fields();
  std::vector<std::string> env;
  for (const auto& v : process.at("env").list_value().values()) env.push_back(v.string_value());
  EXPECT_THAT(env, ::testing::UnorderedElementsAre("PATH=/opt/bin:/bin", "LANG=C.UTF-8",
                                                   "FROM_IMAGE=1", "SHARED=job", "RANK=0"));
  EXPECT_EQ(process.at("cwd").string_value(), "/srv") << "the image's, the job giving none";
  std::vector<std::string> args;
  for (const auto& v : process.at("args").list_value().values()) args.push_back(v.string_value());
  EXPECT_EQ(args, (std::vector<std::string>{"/.ringmaster-init", "/bin/sh", "-c", "true"}));

  // A working directory is the image's path; nothing of the host is bound
  // for it (the runtime resolves binds as root).
  spec.working_dir = "/etc";
  ASSERT_OK(InImage(spec, rootfs_, "the image", "c-dir", options).status());
  config = ReadConfig(dir_ + "/bundles/c-dir/config.json");
  EXPECT_EQ(config.fields().at("process").struct_value().fields().at("cwd").string_value(), "/etc");
  for (const auto& m : config.fields().at("mounts").list_value().values()) {
    EXPECT_NE(m.struct_value().fields().at("source").string_value(), "/etc");
  }
}

// Every file and directory below `root`, with its size.
std::vector<std::string> Tree(const std::string& root) {
  std::vector<std::string> tree;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    std::error_code error;
    const auto size = entry.is_regular_file(error) ? entry.file_size(error) : 0;
    tree.push_back(absl::StrCat(entry.path().string(), " ", size));
  }
  std::sort(tree.begin(), tree.end());
  return tree;
}

TEST_F(ContainerLaunchTest, TheImagesSharedRootFileSystemIsNeverWritten) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (an OCI runtime's namespaces)";
  if (!HasRunc()) GTEST_SKIP() << "no runc";
  const std::vector<std::string> before = Tree(rootfs_);
  // Mount points the runtime must make (a directory in a mask, a file),
  // and a working directory the image does not have.
  const std::string host = dir_ + "/host";
  fs::create_directories(host + "/jobs/job-1");
  std::ofstream(host + "/libfake.so.1") << "a library\n";
  LaunchSpec spec;
  spec.argv = {"sh", "-c", "cat /usr/lib/fake/libfake.so.1; pwd"};
  spec.env = {{"PATH", "/bin"}};
  spec.working_dir = "/srv/not/in/the/image";
  spec.log_path = dir_ + "/rank.log";
  spec.name = "rank-0";
  ContainerOptions options = Options();
  options.masks = {host + "/jobs"};
  options.binds = {{host + "/jobs/job-1", host + "/jobs/job-1", false},
                   {host + "/libfake.so.1", "/usr/lib/fake/libfake.so.1", true}};
  const std::string id = absl::StrCat("container-shared-", getpid());
  absl::StatusOr<LaunchSpec> launch = InImage(spec, rootfs_, "the image", id, options);
  ASSERT_OK(launch);
  PosixProcessLauncher launcher;
  absl::StatusOr<pid_t> pid = launcher.Spawn(*launch);
  ASSERT_OK(pid);
  ExitStatus status;
  ASSERT_TRUE(launcher.WaitExit(*pid, absl::Seconds(60), &status));
  launcher.ClearGroup(*pid, absl::Seconds(5));
  RemoveContainer(options, id);
  EXPECT_EQ(status.exit_code, 0);
  std::ifstream log(spec.log_path);
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr(" a library\n"));
  EXPECT_THAT(text.str(), HasSubstr(" /srv/not/in/the/image\n"));
  EXPECT_EQ(Tree(rootfs_), before) << "the runtime wrote into the image every job shares";
  EXPECT_FALSE(fs::exists(options.bundles_dir + "/" + id)) << "its overlay is gone";
}

TEST_F(ContainerLaunchTest, ABindIsOnlyAPathNoJobCanChange) {
  ASSERT_EQ(geteuid(), 0u) << "needs root: the directories must be root's";
  const std::string base = dir_ + "/binds";
  fs::create_directories(base + "/root/ckpt");
  EXPECT_OK(OnlyRootCanChange(base + "/root/ckpt", "checkpoint_dir"));
  // A link, anywhere on the path.
  fs::create_symlink(base + "/root", base + "/link");
  EXPECT_THAT(
      OnlyRootCanChange(base + "/link/ckpt", "checkpoint_dir"),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr(base + "/link is a symbolic link")));
  EXPECT_THAT(OnlyRootCanChange(base + "/root/../root/ckpt", "checkpoint_dir"),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr(". or ..")));
  // A directory someone else owns, or whose parent others may write.
  fs::create_directories(base + "/theirs/ckpt");
  ASSERT_EQ(chown((base + "/theirs").c_str(), 65534, 65534), 0);
  EXPECT_THAT(OnlyRootCanChange(base + "/theirs/ckpt", "checkpoint_dir"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr(base + "/theirs belongs to uid 65534")));
  fs::create_directories(base + "/open/ckpt");
  fs::permissions(base + "/open", fs::perms::all);
  EXPECT_THAT(OnlyRootCanChange(base + "/open/ckpt", "checkpoint_dir"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("may be written by others than root (mode 0777)")));
  // Sticky (as /tmp): no one else may move a root's entry in it.
  fs::permissions(base + "/open", fs::perms::all | fs::perms::sticky_bit);
  EXPECT_OK(OnlyRootCanChange(base + "/open/ckpt", "checkpoint_dir"));
  // The last may be anyone's to write in: the bind holds that directory.
  fs::permissions(base + "/root/ckpt", fs::perms::all);
  EXPECT_OK(OnlyRootCanChange(base + "/root/ckpt", "checkpoint_dir"));

  EXPECT_EQ(RootHolding(base + "/root/ckpt", {"/nonexistent", base + "/root"}), base + "/root");
  EXPECT_EQ(RootHolding(base + "/rootless", {base + "/root"}), "");
}

// A container whose command is `sleep <a number no other process has>`,
// started through `launcher`, once that command runs; the pgrep that finds
// it in `find`.
pid_t StartSleeper(PosixProcessLauncher* launcher, const std::string& rootfs,
                   const std::string& dir, const std::string& id, const ContainerOptions& options,
                   int number, std::string* find) {
  const std::string marker = absl::StrCat("sleep ", number);
  LaunchSpec spec;
  spec.argv = {"sh", "-c", "exec " + marker};
  spec.env = {{"PATH", "/bin"}};
  spec.log_path = dir + "/rank.log";
  spec.name = id;
  absl::StatusOr<LaunchSpec> launch = InImage(spec, rootfs, "the image", id, options);
  EXPECT_OK(launch);
  if (!launch.ok()) return 0;
  absl::StatusOr<pid_t> pid = launcher->Spawn(*launch);
  EXPECT_OK(pid);
  if (!pid.ok()) return 0;
  *find = absl::StrCat("pgrep -f '^", marker, "$'");
  EXPECT_TRUE(
      testing::WaitFor([&] { return testing::Shell(*find).exit_code == 0; }, absl::Seconds(30)));
  return *pid;
}

TEST_F(ContainerLaunchTest, AStopReachesTheCommandUnderTheContainersInit) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (an OCI runtime's namespaces)";
  if (!HasRunc()) GTEST_SKIP() << "no runc";
  // sleep handles no signal: as PID 1 it would ignore SIGTERM.
  const std::string id = absl::StrCat("container-term-", getpid());
  const ContainerOptions options = Options();
  PosixProcessLauncher launcher;
  std::string find;
  const pid_t pid = StartSleeper(&launcher, rootfs_, dir_, id, options, 2000000 + getpid(), &find);
  ASSERT_NE(pid, 0);
  kill(pid, SIGTERM);  // the runtime passes it to the container's PID 1
  ExitStatus status;
  const bool exited = launcher.WaitExit(pid, absl::Seconds(30), &status);
  launcher.ClearGroup(pid, absl::Seconds(5));
  RemoveContainer(options, id);
  ASSERT_TRUE(exited) << "SIGTERM never reached the command";
  EXPECT_EQ(status.exit_code, 128 + SIGTERM);
  EXPECT_TRUE(fs::is_empty(options.state_dir)) << "the runtime's state is removed";
  EXPECT_FALSE(fs::exists(options.bundles_dir + "/" + id));
}

TEST_F(ContainerLaunchTest, AContainerWhoseRuntimeWasKilledIsSweptAtStart) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (an OCI runtime's namespaces)";
  if (!HasRunc()) GTEST_SKIP() << "no runc";
  const ContainerOptions options = Options();
  PosixProcessLauncher launcher;
  std::string find;
  const pid_t pid =
      StartSleeper(&launcher, rootfs_, dir_, absl::StrCat("container-left-", getpid()), options,
                   3000000 + getpid(), &find);
  ASSERT_NE(pid, 0);
  // The runtime dies (a worker killed with it): its container stays.
  kill(pid, SIGKILL);
  ExitStatus status;
  ASSERT_TRUE(launcher.WaitExit(pid, absl::Seconds(30), &status));
  EXPECT_EQ(testing::Shell(find).exit_code, 0) << "the container outlives its runtime";
  EXPECT_FALSE(fs::is_empty(options.state_dir));
  // The next worker's start.
  SweepContainers(options);
  EXPECT_TRUE(fs::is_empty(options.state_dir));
  EXPECT_TRUE(fs::is_empty(options.bundles_dir));
  EXPECT_TRUE(
      testing::WaitFor([&] { return testing::Shell(find).exit_code != 0; }, absl::Seconds(30)))
      << "the container's processes are killed";
}

}  // namespace
}  // namespace ringmaster
