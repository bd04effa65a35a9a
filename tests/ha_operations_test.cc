// What operators do to a running pair of coordinators that share one
// PostgreSQL (tests/ha_fixture.h): alerts on a real Prometheus when none
// can lead, queues changed without a restart, one credential key and its
// rotation, and an upgrade of the pair, the standby first.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "testing/prometheus_server.h"
#include "tests/ha_fixture.h"

namespace ringmaster {
namespace {

TEST_F(HaTest, TheNoLeaderAlertFiresWhileNoneCanLead) {
  const int leader = WaitForLeader();
  ASSERT_GE(leader, 0) << Logs();
  auto prometheus =
      testing::PrometheusServer::Start(testing::MakeTempDir("prometheus"), metrics_,
                                       testing::Runfile("deploy/prometheus/alerts.yml"));
  ASSERT_OK(prometheus);
  std::string no_leader, down;
  for (const testing::AlertRule& rule :
       testing::AlertRules(testing::Runfile("deploy/prometheus/alerts.yml"))) {
    if (rule.name == "RingmasterNoLeader") no_leader = rule.expr;
    if (rule.name == "RingmasterCoordinatorDown") down = rule.expr;
  }
  ASSERT_FALSE(no_leader.empty() || down.empty());
  ASSERT_TRUE(testing::WaitFor(
      [&] { return (*prometheus)->Query("sum(ringmaster_coordinator_leader) == 1").size() == 1; },
      absl::Seconds(30)))
      << "both coordinators scraped, one leading";
  EXPECT_TRUE((*prometheus)->Query(no_leader).empty());

  ASSERT_OK(server_->Stop());
  testing::KillAndReap(coordinators_[leader]);
  EXPECT_TRUE(
      testing::WaitFor([&] { return !(*prometheus)->Query(no_leader).empty(); }, absl::Seconds(60)))
      << Logs();
  std::vector<google::protobuf::Struct> gone = (*prometheus)->Query(down);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(testing::Label(gone[0], "instance"), metrics_[leader]);

  ASSERT_OK(server_->Restart());
  EXPECT_GE(WaitForLeader(leader), 0) << Logs();
  EXPECT_TRUE(
      testing::WaitFor([&] { return (*prometheus)->Query(no_leader).empty(); }, absl::Seconds(60)))
      << "the standby leads now";
}

// The pair's queues follow their --queues file without a restart, where
// operators keep it: a Kubernetes ConfigMap, whose new version the kubelet
// swaps in under the same name, and a systemd unit, whose ExecReload
// (`systemctl reload`) makes the leader read the file again.
class HaQueuesTest : public HaTest {
 protected:
  void SetUp() override {
    configmap_ = testing::MakeTempDir("configmap");
    Publish(1);
    ASSERT_EQ(symlink("..data/queues.yaml", (configmap_ + "/queues.yaml").c_str()), 0);
    queues_ = configmap_ + "/queues.yaml";
    HaTest::SetUp();
  }
  // A version of the ConfigMap as the kubelet writes one: a directory of
  // its own, then `..data` moved to point at it.
  void Publish(int quota, const std::string& extra = "") {
    const std::string version = absl::StrCat("..v", ++versions_);
    std::filesystem::create_directory(configmap_ + "/" + version);
    std::ofstream(configmap_ + "/" + version + "/queues.yaml")
        << "queues:\n  - {name: default, quota: {slots: " << quota << "}" << extra << "}\n";
    const std::string next = configmap_ + "/..data_tmp";
    ASSERT_EQ(symlink(version.c_str(), next.c_str()), 0);
    ASSERT_EQ(rename(next.c_str(), (configmap_ + "/..data").c_str()), 0);
  }
  // The default queue's quota as the leader lists it; -1 when it cannot.
  int Quota() {
    absl::StatusOr<v1::ListQueuesResponse> queues = client_->ListQueues();
    if (!queues.ok() || queues->queues_size() != 1) return -1;
    return queues->queues(0).quota().slots();
  }
  bool WaitQuota(int quota) {
    return testing::WaitFor([&] { return Quota() == quota; }, absl::Seconds(30));
  }
  // `systemctl reload ringmaster-coordinator` as tests/unit_runner.py runs
  // it: the installed unit's ExecReload with $MAINPID the coordinator's.
  testing::CommandResult SystemctlReload(int coordinator) {
    const std::string units = dir_ + "/units";
    std::filesystem::create_directories(units);
    std::filesystem::copy_file(testing::Runfile("deploy/systemd/ringmaster-coordinator.service"),
                               units + "/ringmaster-coordinator.service",
                               std::filesystem::copy_options::overwrite_existing);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    std::ofstream(absl::StrCat(units, "/", host, "-ringmaster-coordinator.service.pid"))
        << coordinators_[coordinator] << "\n";
    return testing::RunCommand({"/usr/bin/python3", testing::Runfile("tests/unit_runner.py"),
                                "reload", "ringmaster-coordinator"},
                               {{"UNIT_DIR", units}, {"UNIT_LOG_DIR", units}});
  }
  int TimesRead(int coordinator) {
    std::ifstream in(absl::StrCat(dir_, "/coordinator", coordinator, ".log"));
    std::stringstream text;
    text << in.rdbuf();
    return CountOf(text.str(), "queues read again");
  }

  std::string configmap_;
  int versions_ = 0;
};

TEST_F(HaQueuesTest, AQuotaChangeReachesTheLeaderAndTheNextWithoutARestart) {
  const int leader = WaitForLeader();
  ASSERT_GE(leader, 0) << Logs();
  ASSERT_TRUE(WaitQuota(1)) << Quota();
  Publish(3);
  EXPECT_TRUE(WaitQuota(3)) << "the ConfigMap's new version was not taken: " << Quota() << Logs();

  const int read = TimesRead(leader);
  testing::CommandResult reload = SystemctlReload(leader);
  ASSERT_EQ(reload.exit_code, 0) << reload.out << reload.err;
  EXPECT_TRUE(testing::WaitFor([&] { return TimesRead(leader) == read + 1; }, absl::Seconds(10)))
      << "the unit's ExecReload did not make the leader read the file again\n"
      << Logs();
  EXPECT_EQ(kill(coordinators_[leader], 0), 0) << "the reload ended the leader";

  // A file the coordinator refuses leaves the queues as they were.
  Publish(5, ", colour: red");
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return testing::Shell("grep -c 'keeping the queues as they were' " + dir_ + "/coordinator" +
                              std::to_string(leader) + ".log")
                   .out != "0\n";
      },
      absl::Seconds(10)))
      << Logs();
  EXPECT_EQ(Quota(), 3);

  // The standby leads with the newest file, which it was never signalled
  // about.
  Publish(4);
  testing::KillAndReap(coordinators_[leader]);
  const int next = WaitForLeader(leader);
  ASSERT_GE(next, 0) << Logs();
  int first = -1;
  testing::WaitFor(
      [&] {
        first = Quota();
        return first >= 0;
      },
      absl::Seconds(30));
  EXPECT_EQ(first, 4) << "the new leader's first answer\n" << Logs();
}

// One credential key for the pair, and its rotation (TLS, so that tokens
// are checked). A user token issued against either state dir, with
// --store, works on both coordinators; without --store it is refused, as
// it would be signed with a key neither uses. --rotate-credential-key
// makes a new key in the store: both coordinators restart to take it, the
// old token is refused by both and a new one works, and a job training
// meanwhile ends whole.
class HaKeyTest : public HaTest {
 protected:
  void SetUp() override {
    tls_dir_ = testing::MakeTempDir("tls");
    testing::CommandResult certs = testing::RunCommand(
        {testing::Runfile("client/ringmaster"), "certs", "init", "--dir", tls_dir_, "--host",
         "127.0.0.1", "--worker", "w0", "--worker", "w1", "--worker", "w2"});
    ASSERT_EQ(certs.exit_code, 0) << certs.err;
    absl::StatusOr<Tls> ca_only = LoadClientTls(tls_dir_, {.none = true});
    ASSERT_OK(ca_only);
    ca_only_ = *ca_only;
    HaTest::SetUp();
  }
  std::string Store() {
    return absl::StrCat("postgresql://ringmaster@127.0.0.1:", server_->port(), "/ringmaster");
  }
  // ringmaster-coordinator's command mode, on coordinator `i`'s state dir.
  testing::CommandResult Coordinator(int i, std::vector<std::string> args, bool store = true) {
    args.insert(args.begin(), {testing::Runfile("coordinator/ringmaster-coordinator"),
                               "--state-dir", absl::StrCat(dir_, "/c", i)});
    if (store) args.insert(args.end(), {"--store", Store()});
    return testing::RunCommand(args);
  }
  std::string UserToken(int i, const std::string& user) {
    testing::CommandResult issued = Coordinator(i, {"--issue-user-token", user});
    EXPECT_EQ(issued.exit_code, 0) << issued.err;
    return std::string(absl::StripAsciiWhitespace(issued.out));
  }
  // ListJobs on coordinator `i` with `token`.
  absl::Status ListAs(int i, const std::string& token) {
    return Client(addresses_[i], token, ca_only_).ListJobs().status();
  }

  Tls ca_only_;
};

TEST_F(HaKeyTest, TokensAreTheStoresAndARotationReachesBothCoordinators) {
  ASSERT_GE(WaitForLeader(), 0) << Logs();
  const std::string trainer = SubmitTrainer(/*epochs=*/150);  // outlasts both restarts
  WaitTraining(trainer);

  const std::string alice = UserToken(1, "alice");
  for (int i = 0; i < 2; ++i) EXPECT_OK(ListAs(i, alice)) << "coordinator " << i;
  testing::CommandResult unshared = Coordinator(0, {"--issue-user-token", "bob"}, false);
  EXPECT_EQ(unshared.exit_code, 2) << unshared.out;
  EXPECT_NE(unshared.err.find("keeps its credential key in the shared store " + Store() +
                              ": give --store " + Store()),
            std::string::npos)
      << unshared.err;

  testing::CommandResult rotated = Coordinator(0, {"--rotate-credential-key"});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.err;
  const std::string carol = UserToken(1, "carol");
  // Refused as a stranger, not unreachable: a coordinator restarts in
  // place to take the key. Its leadership may move afterwards, and a
  // coordinator becoming the leader stops serving for a moment: the
  // answers checked are those of the pass that saw both take the key.
  absl::Status refused[2];
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        for (int i = 0; i < 2; ++i) {
          refused[i] = ListAs(i, alice);
          if (!ListAs(i, carol).ok() || refused[i].code() != absl::StatusCode::kUnauthenticated) {
            return false;
          }
        }
        return true;
      },
      absl::Seconds(60)))
      << "both coordinators take the new key\n"
      << Logs();
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(refused[i], StatusIs(absl::StatusCode::kUnauthenticated,
                                     ::testing::HasSubstr("not a credential of this cluster")))
        << "coordinator " << i;
  }
  ExpectStillTraining(trainer);
  ExpectWhole(trainer);
}

// docs/how-to.md's upgrade of a pair, each coordinator stopped as systemd
// stops it (SIGTERM) and started again (the new release installed in
// between: here the same one): the standby first, which comes back a
// standby, then the leader, whose lease the upgraded standby takes. The
// job trains throughout, without a restart.
TEST_F(HaTest, AnUpgradeOfThePairStandbyFirstRestartsNoJob) {
  const int leader = WaitForLeader();
  ASSERT_GE(leader, 0) << Logs();
  const int standby = 1 - leader;
  const std::string trainer = SubmitTrainer(/*epochs=*/150);  // outlasts both restarts
  WaitTraining(trainer);
  WatchCli();
  auto stop = [&](int i) {
    ASSERT_EQ(kill(coordinators_[i], SIGTERM), 0);
    ASSERT_EQ(waitpid(coordinators_[i], nullptr, 0), coordinators_[i]);
  };
  auto start = [&](int i) {
    StartCoordinator(i);
    ASSERT_TRUE(
        testing::WaitFor([&] { return HealthOf(i, "") == Health::SERVING; }, absl::Seconds(60)))
        << "coordinator " << i << " serves again\n"
        << Logs();
  };

  stop(standby);
  start(standby);
  EXPECT_EQ(Leader(), leader) << "the leader led throughout";
  EXPECT_EQ(testing::HttpGet(metrics_[standby], "/ready"), "not ready\n");
  ExpectStillTraining(trainer);

  // The leader's release is installed while it is stopped: the upgraded
  // standby leads meanwhile.
  const absl::Time stopped = absl::Now();
  stop(leader);
  EXPECT_EQ(WaitForLeader(leader), standby) << Logs();
  std::cout << "the upgraded standby led " << absl::FormatDuration(absl::Now() - stopped)
            << " after the leader was stopped" << std::endl;
  start(leader);
  EXPECT_EQ(Leader(), standby);
  EXPECT_EQ(testing::HttpGet(metrics_[standby], "/ready"), "ready\n");
  EXPECT_EQ(testing::HttpGet(metrics_[leader], "/ready"), "not ready\n");
  ExpectStillTraining(trainer);
  ExpectWhole(trainer);
  ExpectCliAnsweredThroughout();
}

}  // namespace
}  // namespace ringmaster
