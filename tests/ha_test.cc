// Coordinators that share one PostgreSQL (issue: a control plane that
// survives the loss of its machine), as real processes on loopback: a
// PostgreSQL started by the test, 2 coordinators (--lease-timeout 3s) and 3
// one-slot workers given both addresses. Each case disturbs the leader (or
// the database) while a 3-rank trainer job runs, then checks that the job
// ends with every step and no restart, that only one attempt ever started
// its ranks (the workers' start records), and that the CLI, given both
// addresses, answered throughout.
#include <signal.h>

#include <unistd.h>
#include <atomic>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "client/client.h"
#include "client/code_package.h"
#include "common/mutex.h"
#include "common/net.h"
#include "common/tls.h"
#include "domain/job_spec_yaml.h"
#include "testing/postgres_server.h"
#include "testing/prometheus_server.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "tests/health.grpc.pb.h"

namespace ringmaster {
namespace {

int CountOf(const std::string& text, const std::string& piece) {
  int count = 0;
  for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1)) {
    ++count;
  }
  return count;
}

using Health = grpc::health::v1::HealthCheckResponse;

constexpr absl::Duration kLease = absl::Seconds(3);

class HaTest : public testing::PostgresTest {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    dir_ = testing::MakeTempDir("ha");
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<int> port = PickFreePort("127.0.0.1");
      ASSERT_OK(port);
      addresses_.push_back(absl::StrCat("127.0.0.1:", *port));
      absl::StatusOr<int> metrics = PickFreePort("127.0.0.1");
      ASSERT_OK(metrics);
      metrics_.push_back(absl::StrCat("127.0.0.1:", *metrics));
    }
    both_ = absl::StrJoin(addresses_, ",");
    for (int i = 0; i < 2; ++i) StartCoordinator(i);
    for (int i = 0; i < 3; ++i) {
      std::vector<std::string> argv = {
          testing::Runfile("worker/ringmaster-worker"), "--coordinator", both_, "--port", "0",
          "--metrics-port", "0", "--slots", "1", "--state-dir", absl::StrCat(dir_, "/w", i),
          "--trainer-bin", testing::Runfile("trainer/ringmaster-trainer"),
          // Not a test of isolation: ranks run as the test's user.
          "--rank-user", "root"};
      if (!tls_dir_.empty()) {
        argv.insert(argv.end(), {"--tls-dir", tls_dir_, "--id", absl::StrCat("w", i)});
      }
      workers_.push_back(Spawn(std::move(argv), absl::StrCat("worker", i, ".log")));
    }
    Tls tls;
    if (!tls_dir_.empty()) {
      absl::StatusOr<Tls> admin = LoadClientTls(tls_dir_);
      ASSERT_OK(admin);
      tls = *admin;
    }
    client_ = std::make_unique<Client>(both_, "", tls);
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          auto workers = client_->ListWorkers();
          return workers.ok() && workers->size() == 3;
        },
        absl::Seconds(60)))
        << Logs();
  }
  void TearDown() override {
    StopWatchingCli();
    for (pid_t pid : coordinators_) testing::KillAndReap(pid);
    for (pid_t pid : workers_) testing::KillAndReap(pid);
  }
  pid_t Spawn(std::vector<std::string> argv, const std::string& log) {
    return testing::SpawnLogged(std::move(argv), dir_ + "/" + log);
  }
  void StartCoordinator(int i) {
    const std::string port = addresses_[i].substr(addresses_[i].rfind(':') + 1);
    std::vector<std::string> argv = {
        testing::Runfile("coordinator/ringmaster-coordinator"), "--port", port,
        "--advertise-address", addresses_[i], "--peers", both_, "--metrics-port",
        metrics_[i].substr(metrics_[i].rfind(':') + 1), "--metrics-bind", "127.0.0.1",
        "--state-dir", absl::StrCat(dir_, "/c", i),
        // Storage every host mounts, as checkpoints need.
        "--checkpoint-dir", dir_ + "/checkpoints", "--lease-timeout",
        absl::StrCat(absl::ToInt64Seconds(kLease), "s"), "--store",
        absl::StrCat("postgresql://ringmaster@127.0.0.1:", server_->port(), "/ringmaster")};
    if (!queues_.empty()) argv.insert(argv.end(), {"--queues", queues_});
    if (!tls_dir_.empty()) argv.insert(argv.end(), {"--tls-dir", tls_dir_});
    pid_t pid = Spawn(std::move(argv), absl::StrCat("coordinator", i, ".log"));
    if (static_cast<int>(coordinators_.size()) <= i) coordinators_.resize(i + 1);
    coordinators_[i] = pid;
  }
  Health::ServingStatus HealthOf(int i, const std::string& service) {
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (!tls_dir_.empty()) {
      std::ifstream ca(tls_dir_ + "/ca.crt");
      grpc::SslCredentialsOptions options;
      options.pem_root_certs.assign(std::istreambuf_iterator<char>(ca), {});
      credentials = grpc::SslCredentials(options);
    }
    auto health =
        grpc::health::v1::Health::NewStub(grpc::CreateChannel(addresses_[i], credentials));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    Health response;
    if (!health->Check(&context, request, &response).ok()) return Health::UNKNOWN;
    return response.status();
  }
  // The coordinator that leads now, or -1.
  int Leader() {
    for (int i = 0; i < 2; ++i) {
      if (HealthOf(i, "ringmaster.v1.Leader") == Health::SERVING) return i;
    }
    return -1;
  }
  // Waits for a leader other than `not_this`; its index, or -1.
  int WaitForLeader(int not_this = -1) {
    int leader = -1;
    testing::WaitFor(
        [&] {
          leader = Leader();
          return leader >= 0 && leader != not_this;
        },
        absl::Seconds(60));
    return leader != not_this ? leader : -1;
  }
  std::string SubmitTrainer(int epochs = 60) {
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml(
        absl::StrCat("name: ha-train\nranks: 3\ntrainer:\n"
                     "  model: {type: mlp, hidden: [512, 512]}\n"
                     "  data: {path: \"synthetic:rows=4000,features=64,classes=4\"}\n"
                     "  batch_size: 16\n  epochs: ",
                     epochs, "\n"));
    EXPECT_OK(spec);
    absl::StatusOr<std::string> id = client_->Submit(*spec);
    EXPECT_OK(id);
    return id.value_or("");
  }
  v1::Job WaitJob(const std::string& id, const std::function<bool(const v1::Job&)>& done,
                  absl::Duration timeout = absl::Seconds(120)) {
    v1::Job job;
    testing::WaitFor(
        [&] {
          auto j = client_->GetJob(id);
          if (j.ok()) job = *j;
          return j.ok() && done(job);
        },
        timeout);
    return job;
  }
  // Waits for the trainer job to be past its first steps.
  void WaitTraining(const std::string& id) {
    v1::Job j = WaitJob(
        id, [](const v1::Job& j) { return j.state() == v1::RUNNING && j.progress().step() > 10; });
    ASSERT_EQ(j.state(), v1::RUNNING) << j.ShortDebugString() << Logs();
  }
  // The disturbance came while the job trained: it is RUNNING, not done.
  void ExpectStillTraining(const std::string& id) {
    absl::StatusOr<v1::Job> job = client_->GetJob(id);
    ASSERT_OK(job);
    EXPECT_EQ(job->state(), v1::RUNNING)
        << "the job ended before the disturbance was over: make it longer";
  }
  // The job ended with every step, no restart, and one attempt that
  // started each rank once.
  void ExpectWhole(const std::string& id) {
    v1::Job done = WaitJob(
        id,
        [](const v1::Job& j) {
          return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED ||
                 j.state() == v1::CANCELLED;
        },
        absl::Minutes(10));
    ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.ShortDebugString() << Logs();
    EXPECT_EQ(done.progress().step(), done.progress().total_steps());
    EXPECT_EQ(done.restarts(), 0);
    EXPECT_EQ(done.attempt(), 0);
    std::string starts;
    for (int i = 0; i < 3; ++i) {
      std::ifstream in(absl::StrCat(dir_, "/worker", i, ".log"));
      std::string line;
      while (std::getline(in, line)) {
        if (line.find("job " + id + " rank") != std::string::npos &&
            line.find("started pid") != std::string::npos) {
          absl::StrAppend(&starts, line, "\n");
        }
      }
    }
    EXPECT_EQ(std::count(starts.begin(), starts.end(), '\n'), 3) << "each rank started once:\n"
                                                                 << starts;
  }
  // The CLI given both addresses.
  testing::CommandResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), testing::Runfile("client/ringmaster"));
    return testing::RunCommand(args, {{"RINGMASTER_COORDINATOR", both_}});
  }
  // Runs `ringmaster jobs` with both addresses, one after another, until
  // StopWatchingCli: the CLI must answer throughout a case.
  void WatchCli() {
    cli_watch_ = std::thread([this] {
      while (!stop_cli_) {
        testing::CommandResult listed = Cli({"jobs"});
        MutexLock lock(&cli_mu_);
        ++cli_calls_;
        if (listed.exit_code != 0) cli_failures_.push_back(listed.err);
      }
    });
  }
  void StopWatchingCli() {
    stop_cli_ = true;
    if (cli_watch_.joinable()) cli_watch_.join();
  }
  // Stops watching; every call answered.
  void ExpectCliAnsweredThroughout() {
    StopWatchingCli();
    MutexLock lock(&cli_mu_);
    EXPECT_GT(cli_calls_, 5);
    EXPECT_TRUE(cli_failures_.empty())
        << cli_failures_.size() << " of " << cli_calls_
        << " `ringmaster jobs` failed; the first: " << cli_failures_.front();
    std::cout << "`ringmaster jobs` with both addresses: " << cli_calls_ << " calls, "
              << cli_failures_.size() << " failed" << std::endl;
  }
  std::string Logs() {
    return testing::Shell(absl::StrCat("tail -n 25 ", dir_, "/coordinator*.log")).out;
  }

  std::string dir_;
  std::string queues_;   // --queues, when set before SetUp
  std::string tls_dir_;  // the cluster's certificates, when set before SetUp
  std::vector<std::string> addresses_;
  std::vector<std::string> metrics_;  // each coordinator's /metrics
  std::string both_;
  std::vector<pid_t> coordinators_;
  std::vector<pid_t> workers_;
  std::unique_ptr<Client> client_;
  std::thread cli_watch_;
  std::atomic<bool> stop_cli_{false};
  Mutex cli_mu_;
  int cli_calls_ ABSL_GUARDED_BY(cli_mu_) = 0;
  std::vector<std::string> cli_failures_ ABSL_GUARDED_BY(cli_mu_);
};

TEST_F(HaTest, KillingTheLeaderLosesNoJobAndNoStep) {
  const int first = WaitForLeader();
  ASSERT_GE(first, 0) << Logs();
  const std::string trainer = SubmitTrainer();
  WaitTraining(trainer);
  WatchCli();

  // A burst of 100 submits; the leader is killed after the 30th answer.
  std::atomic<int> answered{0};
  std::vector<std::string> acknowledged;
  std::thread burst([&] {
    Client client(both_);
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml("name: burst\nranks: 1\ncommand: [true]\n");
    for (int i = 0; i < 100; ++i) {
      absl::StatusOr<std::string> id = client.Submit(*spec, absl::StrCat("burst-", i));
      if (id.ok()) acknowledged.push_back(*id);
      ++answered;
    }
  });
  ASSERT_TRUE(testing::WaitFor([&] { return answered >= 30; }, absl::Seconds(60)));
  const absl::Time killed = absl::Now();
  testing::KillAndReap(coordinators_[first]);
  const int second = WaitForLeader(first);
  const absl::Duration failover = absl::Now() - killed;
  ASSERT_GE(second, 0) << Logs();
  std::cout << "failover after kill -9: " << absl::FormatDuration(failover) << " (lease "
            << absl::FormatDuration(kLease) << ")" << std::endl;
  EXPECT_LE(failover, kLease + absl::Seconds(2)) << Logs();
  testing::CommandResult status = Cli({"status", trainer});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("RUNNING"), std::string::npos) << status.out;
  ExpectStillTraining(trainer);
  burst.join();
  EXPECT_EQ(acknowledged.size(), 100u) << "every submit answered, following the leader";
  for (const std::string& id : acknowledged) EXPECT_OK(client_->GetJob(id).status()) << id;
  ExpectWhole(trainer);
  ExpectCliAnsweredThroughout();
  // The pending ones are placed by the new leader.
  v1::Job last =
      WaitJob(acknowledged.back(), [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  EXPECT_EQ(last.state(), v1::SUCCEEDED) << last.ShortDebugString();
  // The killed coordinator, started again, is a standby that serves reads.
  StartCoordinator(first);
  EXPECT_TRUE(
      testing::WaitFor([&] { return HealthOf(first, "") == Health::SERVING; }, absl::Seconds(30)));
  EXPECT_EQ(Leader(), second);
  Client standby(addresses_[first]);
  EXPECT_OK(standby.GetJob(trainer).status());
}

// The leader's machine is lost, disk and all, after a job with uploaded
// code was submitted to it: the next leader runs the job from the shared
// store's copy, and its output is read from the leader and from a standby.
TEST_F(HaTest, AJobsCodeAndLogsOutliveTheLeadersMachine) {
  const int first = WaitForLeader();
  ASSERT_GE(first, 0) << Logs();
  const std::string trainer = SubmitTrainer();  // every slot: the next job waits
  WaitTraining(trainer);
  const std::string code = dir_ + "/code";
  ASSERT_TRUE(std::filesystem::create_directories(code));
  std::ofstream(code + "/message.txt") << "shipped with the job\n";
  absl::StatusOr<PackedDirectory> packed = PackDirectory(code, 1 << 20, dir_ + "/code.tar.gz");
  ASSERT_OK(packed);
  ASSERT_OK(client_->UploadCode(dir_ + "/code.tar.gz", packed->sha256, packed->archive_bytes));
  absl::StatusOr<v1::JobSpec> spec =
      ParseJobSpecYaml("name: shipped\nranks: 1\ncommand: [cat, message.txt]\n");
  ASSERT_OK(spec);
  spec->mutable_code()->set_sha256(packed->sha256);
  spec->mutable_code()->set_archive_bytes(packed->archive_bytes);
  absl::StatusOr<std::string> shipped = client_->Submit(*spec);
  ASSERT_OK(shipped);

  testing::KillAndReap(coordinators_[first]);
  std::filesystem::remove_all(absl::StrCat(dir_, "/c", first));
  const int second = WaitForLeader(first);
  ASSERT_GE(second, 0) << Logs();
  ExpectStillTraining(trainer);
  ExpectWhole(trainer);
  v1::Job ran = WaitJob(*shipped, [](const v1::Job& j) {
    return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED;
  });
  ASSERT_EQ(ran.state(), v1::SUCCEEDED) << ran.ShortDebugString() << Logs();

  // The lost machine comes back, empty, as a standby that relays logs.
  StartCoordinator(first);
  ASSERT_TRUE(
      testing::WaitFor([&] { return HealthOf(first, "") == Health::SERVING; }, absl::Seconds(30)));
  std::string output;
  ASSERT_OK(client_->StreamLogs(*shipped, 0, /*follow=*/false,
                                [&](const v1::LogChunk& chunk) { output += chunk.data(); }));
  EXPECT_EQ(output, "shipped with the job\n");
  // Asked of the standby itself (a client would follow a refusal).
  auto standby = v1::JobService::NewStub(
      grpc::CreateChannel(addresses_[first], grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::StreamLogsRequest request;
  request.set_job_id(*shipped);
  request.set_all_ranks(true);
  auto reader = standby->StreamLogs(&context, request);
  output.clear();
  for (v1::LogChunk chunk; reader->Read(&chunk);) output += chunk.data();
  grpc::Status relayed = reader->Finish();
  EXPECT_TRUE(relayed.ok()) << relayed.error_message();
  EXPECT_EQ(output, "shipped with the job\n") << "from the standby";
  EXPECT_EQ(Leader(), second);
}

// The leader is lost while an attempt's ranks are meeting: each has set
// its key there, and they find every key at the next leader.
TEST_F(HaTest, RanksMeetingWhenTheLeaderIsLostMeetAtTheNext) {
  const int first = WaitForLeader();
  ASSERT_GE(first, 0) << Logs();
  const std::string go = dir_ + "/go";
  absl::StatusOr<v1::JobSpec> spec =
      ParseJobSpecYaml(absl::StrCat("name: meet\nranks: 3\ncommand: [",
                                    testing::Runfile("tests/rendezvous_probe"), ", ", go, "]\n"));
  ASSERT_OK(spec);
  absl::StatusOr<std::string> id = client_->Submit(*spec);
  ASSERT_OK(id);
  auto output = [&] {
    std::string text;
    client_
        ->StreamLogs(*id, std::nullopt, /*follow=*/false,
                     [&](const v1::LogChunk& chunk) { text += chunk.data(); })
        .IgnoreError();
    return text;
  };
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const std::string text = output();
        return std::count(text.begin(), text.end(), '\n') >= 3;
      },
      absl::Seconds(60)))
      << output() << Logs();
  for (int r = 0; r < 3; ++r) ASSERT_EQ(CountOf(output(), absl::StrCat("set rank-", r, "\n")), 1);

  testing::KillAndReap(coordinators_[first]);
  ASSERT_GE(WaitForLeader(first), 0) << Logs();
  std::ofstream(go) << "go\n";
  v1::Job met = WaitJob(
      *id, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED || j.state() == v1::FAILED; });
  ASSERT_EQ(met.state(), v1::SUCCEEDED) << met.ShortDebugString() << output() << Logs();
  EXPECT_EQ(met.attempt(), 0);
  EXPECT_EQ(met.restarts(), 0);
  const std::string text = output();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(CountOf(text, absl::StrCat("got rank-", r, " = value of rank-", r, "\n")), 3)
        << "every rank read rank " << r << "'s key:\n"
        << text;
  }
}

TEST_F(HaTest, APausedLeaderComesBackAsAStandby) {
  const int first = WaitForLeader();
  ASSERT_GE(first, 0) << Logs();
  const std::string trainer = SubmitTrainer();
  WaitTraining(trainer);
  WatchCli();
  kill(coordinators_[first], SIGSTOP);
  const int second = WaitForLeader(first);
  ASSERT_GE(second, 0) << Logs();
  // Well past the lease, and past the workers' move to the new leader.
  absl::SleepFor(kLease);
  testing::CommandResult status = Cli({"status", trainer});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  kill(coordinators_[first], SIGCONT);
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return HealthOf(first, "") == Health::SERVING &&
               HealthOf(first, "ringmaster.v1.Leader") == Health::NOT_SERVING;
      },
      absl::Seconds(30)))
      << "the paused leader is a standby now\n"
      << Logs();
  EXPECT_EQ(Leader(), second);
  ExpectStillTraining(trainer);
  ExpectWhole(trainer);
  ExpectCliAnsweredThroughout();
}

TEST_F(HaTest, APostgresRestartIsWaitedOut) {
  ASSERT_GE(WaitForLeader(), 0) << Logs();
  const std::string trainer = SubmitTrainer();
  WaitTraining(trainer);
  WatchCli();
  ASSERT_OK(server_->Stop());
  ASSERT_OK(server_->Restart());
  ASSERT_GE(WaitForLeader(), 0) << Logs();
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpecYaml("name: after\nranks: 1\ncommand: [true]\n");
  absl::StatusOr<std::string> after = client_->Submit(*spec);
  ASSERT_OK(after);
  testing::CommandResult listed = Cli({"jobs"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  ExpectStillTraining(trainer);
  ExpectWhole(trainer);
  ExpectCliAnsweredThroughout();
  EXPECT_EQ(WaitJob(*after, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; }).state(),
            v1::SUCCEEDED);
}

// deploy/prometheus/alerts.yml's RingmasterNoLeader on a real Prometheus:
// silent while one leads; firing once the leader's machine is gone while
// the database cannot be reached, so the standby cannot take the lease
// (RingmasterCoordinatorDown names the one gone); silent again once the
// database is back and the standby leads.
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
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        for (int i = 0; i < 2; ++i) {
          if (!ListAs(i, carol).ok() || ListAs(i, alice).ok()) return false;
        }
        return true;
      },
      absl::Seconds(60)))
      << "both coordinators take the new key\n"
      << Logs();
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(ListAs(i, alice),
                StatusIs(absl::StatusCode::kUnauthenticated,
                         ::testing::HasSubstr("not a credential of this cluster")))
        << "coordinator " << i;
  }
  ExpectStillTraining(trainer);
  ExpectWhole(trainer);
}

}  // namespace
}  // namespace ringmaster
