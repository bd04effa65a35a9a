// The daemons' systemd units filter system calls (SystemCallFilter=), and
// a call outside the filter kills the process that makes it: the
// coordinator itself, and what the worker starts, which inherits the
// worker's filter: eu-stack taking a hung rank's native stacks, and, on a
// worker that runs images, the OCI runtime and the container. So every
// call these make, traced here by strace, must be one their unit (and the
// images drop-in) allows, as systemd-analyze expands the unit's groups.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/net.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "worker/container_launch.h"
#include "worker/process_launcher.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// systemd's groups (@system-service...) and their members, some of them
// groups, as `systemd-analyze syscall-filter` lists them.
std::map<std::string, std::vector<std::string>> SyscallGroups() {
  const testing::CommandResult listed = testing::Shell("systemd-analyze syscall-filter");
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  std::map<std::string, std::vector<std::string>> groups;
  std::string group;
  for (absl::string_view line : absl::StrSplit(listed.out, '\n')) {
    if (absl::StartsWith(line, "@")) {
      group = std::string(line);
      continue;
    }
    line = absl::StripAsciiWhitespace(line);
    if (group.empty() || line.empty() || absl::StartsWith(line, "#")) continue;
    groups[group].emplace_back(line);
  }
  return groups;
}

void Expand(const std::map<std::string, std::vector<std::string>>& groups, const std::string& name,
            std::set<std::string>* out) {
  if (name[0] != '@') {
    out->insert(name);
    return;
  }
  auto found = groups.find(name);
  ASSERT_NE(found, groups.end()) << "systemd has no group " << name;
  for (const std::string& member : found->second) Expand(groups, member, out);
}

// The calls a process under these unit files may make: their
// SystemCallFilter= lines in order, as systemd reads them. An empty one
// starts again; after an allow list, another adds and a "~" list takes
// away.
std::set<std::string> Allowed(const std::vector<std::string>& unit_files) {
  const auto groups = SyscallGroups();
  std::set<std::string> allowed;
  bool any = false;
  for (const std::string& file : unit_files) {
    for (absl::string_view line : absl::StrSplit(ReadAll(file), '\n')) {
      if (!absl::ConsumePrefix(&line, "SystemCallFilter=")) continue;
      if (line.empty()) {
        allowed.clear();
        any = false;
        continue;
      }
      const bool deny = absl::ConsumePrefix(&line, "~");
      EXPECT_TRUE(any || !deny) << file << ": a deny list first is not what this test reads";
      std::set<std::string> named;
      for (absl::string_view name : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
        Expand(groups, std::string(name), &named);
      }
      for (const std::string& call : named) {
        if (deny) {
          allowed.erase(call);
        } else {
          allowed.insert(call);
        }
      }
      any = true;
    }
  }
  EXPECT_TRUE(any) << absl::StrJoin(unit_files, ", ") << " filter nothing";
  return allowed;
}

// The calls strace -f wrote to `trace`, a line each ("PID name(..."),
// but those whose line matches `left_out`.
std::set<std::string> Traced(const std::string& trace, const std::string& left_out = "") {
  std::set<std::string> calls;
  const std::regex call(R"(^[0-9]+ +([a-z_][a-z0-9_]*)\()");
  const std::optional<std::regex> out =
      left_out.empty() ? std::nullopt : std::optional<std::regex>(left_out);
  std::ifstream in(trace);
  std::smatch match;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, match, call) && !(out && std::regex_search(line, *out))) {
      calls.insert(match[1]);
    }
  }
  return calls;
}

std::vector<std::string> NotIn(const std::set<std::string>& calls,
                               const std::set<std::string>& allowed) {
  std::vector<std::string> out;
  for (const std::string& c : calls) {
    if (allowed.count(c) == 0) out.push_back(c);
  }
  return out;
}

class SystemdSyscallsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"strace", "systemd-analyze", "eu-stack"}) {
      if (testing::Shell(absl::StrCat("command -v ", tool)).exit_code != 0) {
        Skip(absl::StrCat(tool, " is not installed (./dev installs it)"));
        return;
      }
    }
    dir_ = testing::MakeTempDir("systemd-syscalls");
    worker_ = Allowed({"deploy/systemd/ringmaster-worker.service"});
    images_ = Allowed({"deploy/systemd/ringmaster-worker.service",
                       "deploy/systemd/ringmaster-worker-images.conf"});
    ASSERT_GT(worker_.count("read"), 0u) << "the unit's filter read as allowing nothing";
  }
  void Skip(const std::string& why) {
    // ./dev test installs every tool and runs as root: there a skip would
    // hide a missing piece.
    if (std::getenv("RINGMASTER_REQUIRE_IMAGE_TESTS") != nullptr) FAIL() << why;
    GTEST_SKIP() << why;
  }
  std::string dir_;
  std::set<std::string> worker_, images_;
};

TEST_F(SystemdSyscallsTest, EuStackTakingAStackMakesOnlyCallsTheWorkersUnitAllows) {
  PosixProcessLauncher launcher;
  LaunchSpec sleeper;
  sleeper.argv = {"sleep", "60"};
  sleeper.env = {{"PATH", "/usr/bin:/bin"}};
  sleeper.log_path = dir_ + "/sleeper.log";
  sleeper.name = "sleeper";
  absl::StatusOr<pid_t> pid = launcher.Spawn(sleeper);
  ASSERT_OK(pid);
  const std::string trace = dir_ + "/eu-stack.trace";
  const testing::CommandResult stacks =
      testing::Shell(absl::StrCat("strace -f -qq -o ", trace, " eu-stack -p ", *pid));
  launcher.ClearGroup(*pid, absl::Seconds(5));
  ASSERT_EQ(stacks.exit_code, 0) << stacks.err;
  ASSERT_NE(stacks.out.find("#0"), std::string::npos) << "no stack: " << stacks.out;
  const std::set<std::string> calls = Traced(trace);
  ASSERT_GT(calls.count("ptrace") + calls.count("process_vm_readv"), 0u)
      << "traced nothing of eu-stack's reading: " << absl::StrJoin(calls, " ");
  EXPECT_EQ(absl::StrJoin(NotIn(calls, worker_), " "), "")
      << "eu-stack under ringmaster-worker.service would be killed for these";
  EXPECT_EQ(absl::StrJoin(NotIn(calls, images_), " "), "")
      << "eu-stack under the images drop-in would be killed for these";
}

// The coordinator as ringmaster-coordinator.service runs it: started,
// serving a submit and a list, stopped; every call of every thread traced.
TEST_F(SystemdSyscallsTest, TheCoordinatorMakesOnlyCallsItsUnitAllows) {
  const std::set<std::string> allowed = Allowed({"deploy/systemd/ringmaster-coordinator.service"});
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  ASSERT_OK(port);
  const std::string trace = dir_ + "/coordinator.trace";
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  std::ofstream(dir_ + "/job.yaml") << "name: traced\nranks: 1\ncommand: [sleep, '1']\n";
  // strace's child is the coordinator: stopped by SIGTERM, as systemd does.
  const testing::CommandResult run = testing::Shell(absl::StrCat(
      "strace -f -qq -o ", trace, " ", testing::Runfile("coordinator/ringmaster-coordinator"),
      " --port ", *port, " --metrics-port 0 --http-port 0 --state-dir ", dir_, "/state > ", dir_,
      "/log 2>&1 & pid=$!; for i in $(seq 300); do grep -q 'coordinator serving' ", dir_,
      "/log && break; sleep 0.1; done; export RINGMASTER_COORDINATOR=", address, "; ",
      testing::Runfile("client/ringmaster"), " submit --no-upload ", dir_, "/job.yaml; ",
      testing::Runfile("client/ringmaster"), " jobs; pkill -TERM -P $pid; wait $pid; cat ", dir_,
      "/log"));
  ASSERT_NE(run.out.find("coordinator serving"), std::string::npos) << run.out << run.err;
  // As root (this test), SQLite gives the files it makes beside the
  // database the database's owner: fchown(fd, 0, 0). The unit runs the
  // coordinator as User=ringmaster, where SQLite makes no such call; any
  // other fchown still counts.
  const std::set<std::string> calls =
      Traced(trace, geteuid() == 0 ? R"(^[0-9]+ +fchown\([0-9]+, 0, 0\))" : "");
  ASSERT_GT(calls.count("fdatasync") + calls.count("fsync"), 0u)
      << "traced nothing of the store: " << absl::StrJoin(calls, " ");
  EXPECT_EQ(absl::StrJoin(NotIn(calls, allowed), " "), "")
      << "the coordinator under ringmaster-coordinator.service would be killed for these; its "
         "log:\n"
      << run.out;
}

// An image's root file system of Debian's static busybox.
std::string Rootfs(const std::string& dir) {
  const std::string rootfs = dir + "/rootfs";
  for (const char* sub : {"/bin", "/etc"}) fs::create_directories(rootfs + sub);
  fs::copy_file("/bin/busybox", rootfs + "/bin/busybox");
  for (const char* applet : {"sh", "cat", "id"}) {
    fs::create_symlink("busybox", rootfs + "/bin/" + applet);
  }
  std::ofstream(rootfs + "/etc/os-release") << "PRETTY_NAME=\"the image\"\n";
  return rootfs;
}

TEST_F(SystemdSyscallsTest, ARankInAnImageMakesOnlyCallsTheImagesDropInAllows) {
  if (geteuid() != 0) return Skip("needs root (an OCI runtime's namespaces)");
  if (testing::Shell("command -v runc").exit_code != 0) return Skip("no runc");
  if (!fs::exists("/bin/busybox")) return Skip("no /bin/busybox (Debian's busybox-static)");
  ContainerOptions options;
  options.bundles_dir = dir_ + "/bundles";
  options.state_dir = dir_ + "/containers";
  options.init = fs::absolute("worker/ringmaster-container-init").string();
  absl::StatusOr<std::string> runtime = ResolveRuntime("runc");
  ASSERT_OK(runtime);
  options.runtime = *runtime;
  LaunchSpec spec;
  spec.argv = {"sh", "-c", "cat /etc/os-release; id -u"};
  spec.env = {{"PATH", "/bin"}};
  spec.log_path = dir_ + "/rank.log";
  spec.name = "rank-0";
  spec.run_as = RunAs{"nobody", "/", 65534, 65534, {}};
  const std::string id = absl::StrCat("syscalls-", getpid());
  absl::StatusOr<LaunchSpec> launch = InImage(spec, Rootfs(dir_), "the image", id, options);
  ASSERT_OK(launch);
  // The runtime's own program, its init in the container, the job's
  // command: all traced.
  const std::string trace = dir_ + "/runc.trace";
  launch->argv.insert(launch->argv.begin(), {"/usr/bin/strace", "-f", "-qq", "-o", trace});
  PosixProcessLauncher launcher;
  absl::StatusOr<pid_t> pid = launcher.Spawn(*launch);
  ASSERT_OK(pid);
  ExitStatus status;
  ASSERT_TRUE(launcher.WaitExit(*pid, absl::Seconds(60), &status));
  launcher.ClearGroup(*pid, absl::Seconds(5));
  RemoveContainer(options, id);
  const std::string log = ReadAll(spec.log_path);
  ASSERT_EQ(status.exit_code, 0) << log;
  ASSERT_NE(log.find("the image"), std::string::npos) << log;
  const std::set<std::string> calls = Traced(trace);
  ASSERT_GT(calls.count("pivot_root"), 0u)
      << "traced nothing of the runtime's set-up: " << absl::StrJoin(calls, " ");
  EXPECT_EQ(absl::StrJoin(NotIn(calls, images_), " "), "")
      << "runc under the images drop-in would be killed for these";
}

}  // namespace
}  // namespace ringmaster
