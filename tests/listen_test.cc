// Where daemons listen and which TLS files clients use: beyond loopback
// only with TLS or --insecure, /metrics apart from the API, a TLS client
// told when the server is plaintext, and `up`'s files used only for `up`'s
// own coordinator.

#include <filesystem>
#include <map>
#include <optional>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "testing/status_matchers.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

// Daemons listen on loopback unless told otherwise; beyond it, only with
// TLS (--tls-dir) or --insecure, which they then warn about.
TEST(BindTest, BeyondLoopbackNeedsTlsOrInsecure) {
  const std::string coordinator = testing::Runfile("coordinator/ringmaster-coordinator");
  const std::string state = testing::MakeTempDir("bind");
  testing::CommandResult refused =
      testing::RunCommand({coordinator, "--bind", "0.0.0.0", "--port", "0", "--metrics-port", "0",
                           "--state-dir", state});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE((refused.out + refused.err)
                .find("--bind 0.0.0.0 would serve this coordinator's API "
                      "beyond this machine without TLS; give --tls-dir"),
            std::string::npos)
      << refused.out << refused.err;
  testing::CommandResult refused_worker =
      testing::RunCommand({testing::Runfile("worker/ringmaster-worker"), "--bind", "0.0.0.0",
                           "--port", "0", "--metrics-port", "0", "--state-dir", state + "/w"});
  EXPECT_EQ(refused_worker.exit_code, 1) << refused_worker.err;

  // With --insecure it serves, and says it is exposed; with --tls-dir it
  // serves TLS without a warning. Each polled ten seconds at most, then stopped.
  auto serve = [&](const std::string& flags, const std::string& wanted) {
    return testing::Shell(
        absl::StrCat(coordinator, " --bind 0.0.0.0 ", flags,
                     " --port 0 --metrics-port 0 --http-port 0 --state-dir ", state, " > ", state,
                     "/log 2>&1 & pid=$!; for i in $(seq 100); do grep -q '", wanted, "' ", state,
                     "/log && break; sleep 0.1; done; kill $pid; wait $pid; cat ", state, "/log"));
  };
  testing::CommandResult insecure = serve("--insecure", "served without TLS");
  EXPECT_NE(insecure.out.find("--insecure: the coordinator API on 0.0.0.0 is served without TLS"),
            std::string::npos)
      << insecure.out;
  testing::CommandResult init = testing::RunCommand(
      {testing::Runfile("client/ringmaster"), "certs", "init", "--dir", state + "/tls"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  testing::CommandResult tls = serve("--tls-dir " + state + "/tls", "serving TLS");
  EXPECT_NE(tls.out.find("coordinator serving TLS"), std::string::npos) << tls.out;
  EXPECT_EQ(tls.out.find("--insecure"), std::string::npos) << tls.out;
}

// A relative --state-dir is taken from the directory the coordinator
// starts in: its database, key and checkpoints go there.
TEST(BindTest, ARelativeStateDirIsBelowTheWorkingDirectory) {
  const std::string coordinator = testing::Runfile("coordinator/ringmaster-coordinator");
  const std::string cwd = testing::MakeTempDir("relative");
  const testing::CommandResult run = testing::Shell(absl::StrCat(
      "cd ", cwd, " && ", coordinator,
      " --port 0 --metrics-port 0 --http-port 0 --state-dir state > log 2>&1 & pid=$!; "
      "for i in $(seq 100); do "
      "grep -q 'coordinator serving' ",
      cwd,
      "/log && break; sleep 0.1; done; kill $pid; wait $pid; "
      "cat ",
      cwd, "/log"));
  EXPECT_NE(run.out.find("coordinator serving"), std::string::npos) << run.out;
  EXPECT_TRUE(std::filesystem::exists(cwd + "/state/coordinator.db")) << run.out;
  EXPECT_TRUE(std::filesystem::is_directory(cwd + "/state/checkpoints")) << run.out;
}

// /metrics binds apart from the API: loopback by default even when the API
// serves every address, every address with --metrics-bind 0.0.0.0.
TEST(BindTest, MetricsListenOnLoopbackUnlessMetricsBindSaysOtherwise) {
  const std::string coordinator = testing::Runfile("coordinator/ringmaster-coordinator");
  const std::string state = testing::MakeTempDir("metrics-bind");
  testing::CommandResult init = testing::RunCommand(
      {testing::Runfile("client/ringmaster"), "certs", "init", "--dir", state + "/tls"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  // The local address the metrics port listens on, once it does (ss, polled
  // ten seconds at most), then the coordinator is stopped.
  auto listening_on = [&](const std::string& flags) {
    const int port = PickFreePort("127.0.0.1").value();
    return testing::Shell(absl::StrCat(coordinator, " --bind 0.0.0.0 --tls-dir ", state,
                                       "/tls --port 0 --http-port 0 --metrics-port ", port, " ",
                                       flags, " --state-dir ", state, " > ", state,
                                       "/log 2>&1 & pid=$!; for i in $(seq 100);"
                                       " do out=$(ss -ltnH \"sport = :",
                                       port,
                                       "\" | awk '{print $4}'); [ -n \"$out\" ] && break;"
                                       " sleep 0.1; done; kill $pid; wait $pid; echo \"$out\""))
        .out;
  };
  const std::string by_default = listening_on("");
  EXPECT_TRUE(absl::StartsWith(by_default, "127.0.0.1:")) << "listening on: " << by_default;
  const std::string everywhere = listening_on("--metrics-bind 0.0.0.0");
  EXPECT_TRUE(absl::StartsWith(everywhere, "0.0.0.0:")) << "listening on: " << everywhere;
}

// A plaintext coordinator on a free loopback port, killed with the object.
class PlaintextCoordinator {
 public:
  explicit PlaintextCoordinator(std::string state) : state_(std::move(state)) {}

  // Starts it and waits until it answers.
  absl::Status Start() {
    absl::StatusOr<int> port = PickFreePort("127.0.0.1");
    if (!port.ok()) return port.status();
    address_ = absl::StrCat("127.0.0.1:", *port);
    process_.emplace(
        std::vector<std::string>{testing::Runfile("coordinator/ringmaster-coordinator"), "--port",
                                 absl::StrCat(*port), "--metrics-port", "0", "--http-port", "0",
                                 "--state-dir", state_ + "/c"},
        std::map<std::string, std::string>{}, state_ + "/log");
    if (!process_->started()) return absl::InternalError("the coordinator did not start");
    if (!testing::WaitFor([this] { return Client(address_).ListJobs().ok(); }, absl::Seconds(20))) {
      return absl::DeadlineExceededError("the plaintext coordinator did not answer in 20s");
    }
    return absl::OkStatus();
  }
  const std::string& address() const { return address_; }

 private:
  const std::string state_;
  std::string address_;
  std::optional<testing::BackgroundProcess> process_;
};

// A TLS client against a plaintext coordinator is told so in one line.
TEST(TlsMismatchTest, ATlsClientIsToldTheServerIsPlaintext) {
  const std::string state = testing::MakeTempDir("plain");
  PlaintextCoordinator plain(state);
  const absl::Status started = plain.Start();
  ASSERT_OK(started) << started;
  const std::string& address = plain.address();
  testing::CommandResult init = testing::RunCommand(
      {testing::Runfile("client/ringmaster"), "certs", "init", "--dir", state + "/tls"});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  testing::CommandResult r = testing::RunCommand(
      {testing::Runfile("client/ringmaster"), "--tls-dir", state + "/tls", "jobs"},
      {{"RINGMASTER_COORDINATOR", address}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            absl::StrCat("ringmaster: cannot reach the coordinator at ", address, ": ", address,
                         " serves plaintext, not TLS: this side uses TLS (--tls-dir, "
                         "RINGMASTER_TLS_DIR or the files of `ringmaster up`); --tls-dir \"\" "
                         "speaks plaintext\n"));
}

using UpCredentialsTest = ClusterTest;

// The TLS files of `up` go with its own coordinator, as a kubeconfig's
// credentials go with their cluster: the same CLI, pointed at that cluster's
// state dir, reaches a plaintext coordinator elsewhere without --tls-dir "".
TEST_F(UpCredentialsTest, AreForItsOwnCoordinatorOnly) {
  const std::string cli = testing::Runfile("client/ringmaster");
  const std::map<std::string, std::string> env = {{"RINGMASTER_STATE_DIR", state_dir_},
                                                  {"RINGMASTER_COORDINATOR", address_}};
  testing::CommandResult ours = testing::RunCommand({cli, "workers"}, env);
  EXPECT_EQ(ours.exit_code, 0) << "its own coordinator, with its files: " << ours.err;

  PlaintextCoordinator plain(testing::MakeTempDir("elsewhere"));
  const absl::Status started = plain.Start();
  ASSERT_OK(started) << started;
  const std::string& elsewhere = plain.address();
  testing::CommandResult other =
      testing::RunCommand({cli, "--coordinator", elsewhere, "jobs"}, env);
  EXPECT_EQ(other.exit_code, 0) << "a plaintext coordinator elsewhere: " << other.err;
  testing::CommandResult forced = testing::RunCommand(
      {cli, "--coordinator", elsewhere, "--tls-dir", state_dir_ + "/tls", "jobs"}, env);
  EXPECT_EQ(forced.exit_code, 1) << "an explicit --tls-dir applies to any coordinator";
}

}  // namespace
}  // namespace ringmaster
