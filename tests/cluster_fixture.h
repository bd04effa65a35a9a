// A local cluster (coordinator and two one-slot workers started by
// `ringmaster up` on free ports, with TLS as `up` makes it) for each test,
// stopped by `ringmaster down` even when the test fails. The CLI and
// client_ use the admin certificate.
#ifndef RINGMASTER_TESTS_CLUSTER_FIXTURE_H_
#define RINGMASTER_TESTS_CLUSTER_FIXTURE_H_

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/client.h"
#include "common/credentials.h"
#include "common/net.h"
#include "common/tls.h"
#include "proto/worker.grpc.pb.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (state_parent_.empty()) {
      state_dir_ = testing::MakeTempDir("cluster");
    } else {
      state_dir_ = absl::StrCat(state_parent_, "/ringmaster-cluster-", getpid());
      std::filesystem::remove_all(state_dir_);
      std::filesystem::create_directories(state_dir_);
    }
    BeforeUp();
    if (HasFatalFailure() || IsSkipped()) return;
    auto port = PickFreePort("127.0.0.1");
    ASSERT_OK(port);
    address_ = absl::StrCat("127.0.0.1:", *port);
    std::vector<std::string> args = {
        "up",          "--workers", absl::StrCat(up_workers_), "--slots", absl::StrCat(up_slots_),
        "--state-dir", state_dir_};
    args.insert(args.end(), up_args_.begin(), up_args_.end());
    const std::vector<std::string> ranks = RankUserArgs();
    args.insert(args.end(), ranks.begin(), ranks.end());
    testing::CommandResult up = Cli(args);
    ASSERT_EQ(up.exit_code, 0) << up.err;
    EXPECT_NE(up.out.find(address_), std::string::npos) << up.out;
    absl::StatusOr<Tls> tls = LoadClientTls(state_dir_ + "/tls");
    ASSERT_OK(tls) << tls.status();
    tls_ = *std::move(tls);
    extra_env_["RINGMASTER_TLS_DIR"] = state_dir_ + "/tls";
    client_ = std::make_unique<Client>(address_, "", tls_);
  }

  // What a test prepares in state_dir_ before `up` starts the cluster.
  virtual void BeforeUp() {}

  // Ranks of a root `up` run as a uid per job, which cannot reach the
  // test's runfiles (below root's home): as root, unless the test chose,
  // they run as root. Isolation is what isolation_test is for.
  std::vector<std::string> RankUserArgs() const {
    if (up_default_ranks_) return {};
    for (const std::string& arg : up_args_) {
      if (arg == "--rank-user" || arg == "--rank-uid-range") return {};
    }
    if (geteuid() != 0) return {};
    return {"--rank-user", "root"};
  }

  void TearDown() override {
    Cli({"down", "--state-dir", state_dir_});
    for (int pid : extra_pids_) kill(pid, SIGKILL);
    if (!state_parent_.empty()) std::filesystem::remove_all(state_dir_);
  }

  testing::CommandResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), testing::Runfile("client/ringmaster"));
    std::map<std::string, std::string> env = extra_env_;
    env["RINGMASTER_COORDINATOR"] = address_;
    return testing::RunCommand(args, env);
  }

  std::string WriteSpec(const std::string& name, const std::string& yaml) {
    const std::string path = absl::StrCat(state_dir_, "/", name, ".yaml");
    std::ofstream(path) << yaml;
    return path;
  }

  std::string Submit(const std::string& yaml) {
    testing::CommandResult r = Cli({"submit", WriteSpec("job", yaml)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::string(absl::StripAsciiWhitespace(r.out));
  }

  // Polls the job until `done`, for `deadline` at most.
  v1::Job WaitJob(const std::string& id, const std::function<bool(const v1::Job&)>& done,
                  absl::Duration deadline = absl::Seconds(60)) {
    v1::Job job;
    bool ok = testing::WaitFor(
        [&] {
          auto j = client_->GetJob(id);
          if (!j.ok()) return false;
          job = *j;
          return done(job);
        },
        deadline);
    EXPECT_TRUE(ok) << "job " << id << " stuck in " << v1::JobState_Name(job.state());
    return job;
  }

  static bool AllRanksEnded(const v1::Job& job) {
    for (const auto& r : job.ranks()) {
      if (r.state() == v1::RANK_ASSIGNED || r.state() == v1::RANK_RUNNING) return false;
    }
    return true;
  }

  // pid of each daemon of the cluster file, by role.
  std::vector<std::pair<std::string, int>> Daemons() {
    std::vector<std::pair<std::string, int>> out;
    for (const auto& d : DaemonRecords()) out.push_back({d.role, d.pid});
    return out;
  }

  struct DaemonRecord {
    std::string role;
    int pid = 0;
    std::string address;
    std::string metrics_address;
  };
  std::vector<DaemonRecord> DaemonRecords() {
    std::ifstream in(state_dir_ + "/cluster");
    std::vector<DaemonRecord> out;
    DaemonRecord d;
    while (in >> d.role >> d.pid >> d.address >> d.metrics_address) out.push_back(d);
    return out;
  }

  // The agent service of worker `index` ("local-<index>"), checked
  // against the cluster's CA, and the credential the coordinator shows it.
  std::unique_ptr<v1::WorkerAgentService::Stub> WorkerAgent(int index) {
    const std::vector<DaemonRecord> workers = WorkerRecords();
    if (index >= static_cast<int>(workers.size())) {
      ADD_FAILURE() << "no worker " << index << " in the cluster file";
      return nullptr;
    }
    return v1::WorkerAgentService::NewStub(
        MakeChannel(workers[index].address, CaOnly(), absl::StrCat("local-", index)));
  }
  std::string AgentCredential(int index) {
    absl::StatusOr<std::string> key = LoadOrCreateKey(state_dir_ + "/coordinator/credential.key");
    EXPECT_OK(key) << key.status();
    return CredentialSigner(key.ok() ? *key : "").Agent(absl::StrCat("local-", index));
  }
  Tls CaOnly() const { return ringmaster::CaOnly(tls_->ca_pem); }
  std::vector<DaemonRecord> WorkerRecords() {
    std::vector<DaemonRecord> workers;
    for (const DaemonRecord& d : DaemonRecords()) {
      if (d.role == "worker") workers.push_back(d);
    }
    return workers;
  }

  std::string SleeperSpec(const std::string& name) {
    return absl::StrCat("name: ", name,
                        "\nranks: 2\ncommand: [sh, -c, 'sleep 300 & sleep 300 & wait']\n");
  }

  std::string state_dir_;
  std::string address_;
  Tls tls_;  // the admin's certificate
  std::unique_ptr<Client> client_;
  std::vector<int> extra_pids_;
  // Set before ClusterTest::SetUp to give the daemons more environment, or
  // `up` more arguments.
  std::map<std::string, std::string> extra_env_;
  std::vector<std::string> up_args_;
  int up_workers_ = 2;
  int up_slots_ = 1;
  // Where the cluster's state dir goes (default: the test's temporary
  // directory); "/tmp" for ranks of another user, who cannot pass through
  // the test's.
  std::string state_parent_;
  bool up_default_ranks_ = false;  // `up` picks who ranks run as
};

}  // namespace ringmaster

#endif  // RINGMASTER_TESTS_CLUSTER_FIXTURE_H_
