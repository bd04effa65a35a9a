// The fixture of the tests of coordinators that share one PostgreSQL, as
// real processes on loopback: a PostgreSQL started by the test, 2
// coordinators (--lease-timeout 3s) and 3 one-slot workers given both
// addresses, a client and the CLI given both (ha_test, ha_operations_test).
#ifndef RINGMASTER_TESTS_HA_FIXTURE_H_
#define RINGMASTER_TESTS_HA_FIXTURE_H_

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
#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "tests/health.grpc.pb.h"

namespace ringmaster {

inline int CountOf(const std::string& text, const std::string& piece) {
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
        "--http-port", "0", "--state-dir", absl::StrCat(dir_, "/c", i),
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

}  // namespace ringmaster

#endif  // RINGMASTER_TESTS_HA_FIXTURE_H_
