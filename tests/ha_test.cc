// Coordinators that share one PostgreSQL (issue: a control plane that
// survives the loss of its machine), as real processes on loopback
// (tests/ha_fixture.h). Each case disturbs the leader (or the database)
// while a 3-rank trainer job runs, then checks that the job ends with every
// step and no restart, that only one attempt ever started its ranks (the
// workers' start records), and that the CLI, given both addresses,
// answered throughout.
#include <signal.h>

#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/ha_fixture.h"

namespace ringmaster {
namespace {

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

}  // namespace
}  // namespace ringmaster
