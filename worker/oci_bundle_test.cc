#include "worker/oci_bundle.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

// A root filesystem of Debian's static busybox and an os-release of its own.
std::string BusyboxRootfs(const std::string& dir) {
  const std::string rootfs = dir + "/rootfs";
  fs::create_directories(rootfs + "/bin");
  fs::create_directories(rootfs + "/etc");
  fs::create_directories(rootfs + "/work");
  fs::copy_file("/bin/busybox", rootfs + "/bin/busybox");
  for (const char* applet :
       {"sh", "cat", "id", "ps", "ls", "echo", "touch", "sleep", "unshare", "mount"}) {
    fs::create_symlink("busybox", rootfs + "/bin/" + applet);
  }
  std::ofstream(rootfs + "/etc/os-release") << "PRETTY_NAME=\"a busybox image\"\n";
  return rootfs;
}

std::string Runtime() {
  for (const char* runtime : {"runc", "crun"}) {
    if (testing::Shell(absl::StrCat("command -v ", runtime)).exit_code == 0) return runtime;
  }
  return "";
}

TEST(OciBundleTest, TheConfigIsJsonWithTheJobsUserCommandAndMounts) {
  ContainerSpec spec;
  spec.rootfs = "/var/lib/ringmaster/images/rootfs/abc/rootfs";
  spec.argv = {"python3", "train.py"};
  spec.env = {{"RANK", "1"}, {"PATH", "/usr/bin"}};
  spec.working_dir = "/code";
  spec.uid = 1234;
  spec.gid = 1234;
  spec.binds = {{"/srv/code", "/code", true}, {"/srv/ckpt", "/srv/ckpt", false}};
  spec.shm = "/dev/shm/ringmaster-job";
  google::protobuf::Struct config;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(OciConfigJson(spec), &config).ok());
  const auto& f = config.fields();
  EXPECT_EQ(f.at("root").struct_value().fields().at("path").string_value(), spec.rootfs);
  EXPECT_TRUE(f.at("root").struct_value().fields().at("readonly").bool_value());
  const auto& process = f.at("process").struct_value().fields();
  EXPECT_EQ(process.at("args").list_value().values(1).string_value(), "train.py");
  EXPECT_EQ(process.at("user").struct_value().fields().at("uid").number_value(), 1234);
  EXPECT_TRUE(process.at("noNewPrivileges").bool_value());
  std::vector<std::string> namespaces;
  for (const auto& ns :
       f.at("linux").struct_value().fields().at("namespaces").list_value().values()) {
    namespaces.push_back(ns.struct_value().fields().at("type").string_value());
  }
  EXPECT_EQ(namespaces, (std::vector<std::string>{"pid", "mount", "ipc"})) << "the host's network";
  std::map<std::string, std::string> mounts;
  for (const auto& m : f.at("mounts").list_value().values()) {
    mounts[m.struct_value().fields().at("destination").string_value()] =
        m.struct_value().fields().at("source").string_value();
  }
  EXPECT_EQ(mounts["/dev/shm"], "/dev/shm/ringmaster-job");
  // What the seccomp filter refuses, among others.
  std::set<std::string> refused;
  for (const auto& rule : f.at("linux")
                              .struct_value()
                              .fields()
                              .at("seccomp")
                              .struct_value()
                              .fields()
                              .at("syscalls")
                              .list_value()
                              .values()) {
    for (const auto& name : rule.struct_value().fields().at("names").list_value().values()) {
      refused.insert(name.string_value());
    }
  }
  for (const char* call : {"unshare", "mount", "bpf", "keyctl", "io_uring_setup", "perf_event_open",
                           "clone3", "clone"}) {
    EXPECT_EQ(refused.count(call), 1u) << call;
  }
  EXPECT_EQ(mounts["/code"], "/srv/code");
  EXPECT_EQ(mounts["/srv/ckpt"], "/srv/ckpt");
}

TEST(OciBundleTest, ARuntimeRunsTheCommandInTheImageAsTheJobsUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (an OCI runtime's namespaces)";
  const std::string runtime = Runtime();
  if (runtime.empty())
    GTEST_SKIP() << "no OCI runtime (Debian's runc or crun; ./dev installs runc)";
  if (!fs::exists("/bin/busybox")) GTEST_SKIP() << "no /bin/busybox (Debian's busybox-static)";
  const std::string dir = testing::MakeTempDir("oci-bundle");
  ContainerSpec spec;
  spec.rootfs = BusyboxRootfs(dir);
  fs::create_directories(dir + "/host-work");
  fs::permissions(dir + "/host-work", fs::perms::all);
  spec.binds = {{dir + "/host-work", "/work", false}};
  spec.argv = {"/bin/sh", "-c",
               "cat /etc/os-release; id -u; echo pid $$; ps -o pid= | wc -l; touch /work/made; "
               "touch /bin/nope 2>/dev/null || echo read-only; exit 7"};
  spec.env = {{"PATH", "/bin"}};
  spec.uid = 65534;
  spec.gid = 65534;
  spec.working_dir = "/work";
  ASSERT_OK(WriteBundle(dir + "/bundle", spec));
  absl::StatusOr<ToolRun> run = RunToCompletion(
      {runtime, "run", "--bundle", dir + "/bundle", "oci-bundle-test-" + std::to_string(getpid())},
      {}, absl::Seconds(60));
  ASSERT_OK(run);
  EXPECT_EQ(run->exit_code, 7) << run->output;
  EXPECT_NE(run->output.find("PRETTY_NAME=\"a busybox image\""), std::string::npos) << run->output;
  EXPECT_NE(run->output.find("65534\n"), std::string::npos) << run->output;
  EXPECT_NE(run->output.find("pid 1\n"), std::string::npos) << "a pid namespace: " << run->output;
  EXPECT_NE(run->output.find("read-only"), std::string::npos) << run->output;
  struct stat st {};
  ASSERT_EQ(stat((dir + "/host-work/made").c_str(), &st), 0) << run->output;
  EXPECT_EQ(st.st_uid, 65534u) << "a file it made is the job's uid's on the host";
}

TEST(OciBundleTest, AJobCannotMakeNamespacesOrMountsNorSeeTheHostsCgroups) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (an OCI runtime's namespaces)";
  const std::string runtime = Runtime();
  if (runtime.empty()) GTEST_SKIP() << "no OCI runtime";
  if (!fs::exists("/bin/busybox")) GTEST_SKIP() << "no /bin/busybox (Debian's busybox-static)";
  const std::string dir = testing::MakeTempDir("oci-bundle");
  ContainerSpec spec;
  spec.rootfs = BusyboxRootfs(dir);
  fs::create_directories(dir + "/host/jobs/job-1");
  spec.masks = {dir + "/host/jobs"};
  spec.binds = {{dir + "/host/jobs/job-1", dir + "/host/jobs/job-1", false}};
  // Each attempt prints its name when it works.
  spec.argv = {"/bin/sh", "-c",
               "unshare -U true 2>/dev/null && echo userns; "
               "unshare -m true 2>/dev/null && echo mountns; "
               "mount -t tmpfs none /work 2>/dev/null && echo mounted; "
               "ls /sys/fs/cgroup | wc -l; ls " +
                   dir + "/host/jobs; echo done"};
  spec.env = {{"PATH", "/bin"}};
  spec.uid = 65534;
  spec.gid = 65534;
  ASSERT_OK(WriteBundle(dir + "/bundle", spec));
  absl::StatusOr<ToolRun> run = RunToCompletion(
      {runtime, "run", "--bundle", dir + "/bundle", "oci-harden-test-" + std::to_string(getpid())},
      {}, absl::Seconds(60));
  ASSERT_OK(run);
  EXPECT_EQ(run->exit_code, 0) << run->output;
  EXPECT_EQ(run->output, "0\njob-1\ndone\n")
      << "no namespace, no mount, no cgroup file system, only its own job's directory";
  // The bind's mount point was made in the mask, not in the shared image.
  EXPECT_TRUE(fs::exists(spec.rootfs + dir + "/host/jobs"));
  EXPECT_FALSE(fs::exists(spec.rootfs + dir + "/host/jobs/job-1"));
}

}  // namespace
}  // namespace ringmaster
