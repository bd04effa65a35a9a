// A coordinator whose jobs live in PostgreSQL (--store postgresql://...),
// as real processes: a PostgreSQL started by the test, a coordinator and a
// one-slot worker on free ports. The coordinator is killed and started
// again with an empty --state-dir: its jobs come back from the database,
// and the running one keeps running. While PostgreSQL is down the
// coordinator's health is NOT_SERVING, and a submit made then is answered
// once it is back; one started while it is down says so on its port.

#include <future>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "common/net.h"
#include "coordinator/store/pg_db.h"
#include "testing/postgres_server.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"
#include "tests/cluster_fixture.h"
#include "tests/health.grpc.pb.h"

namespace ringmaster {
namespace {

class PostgresStoreTest : public testing::PostgresTest {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    dir_ = testing::MakeTempDir("postgres-store");
    absl::StatusOr<int> port = PickFreePort("127.0.0.1");
    ASSERT_OK(port);
    port_ = *port;
    address_ = absl::StrCat("127.0.0.1:", port_);
  }
  void TearDown() override {
    for (pid_t pid : {worker_, coordinator_}) testing::KillAndReap(pid);
  }
  pid_t Spawn(std::vector<std::string> argv, const std::string& log) {
    return testing::SpawnLogged(std::move(argv), dir_ + "/" + log);
  }
  // A coordinator on the test's port with its own --state-dir.
  void StartCoordinator(const std::string& state) {
    coordinator_ = Spawn(
        {testing::Runfile("coordinator/ringmaster-coordinator"), "--port", absl::StrCat(port_),
         "--metrics-port", "0", "--http-port", "0", "--state-dir", dir_ + "/" + state,
         // Longer than the outage below: the leader waits it out.
         "--lease-timeout", "10s", "--store",
         absl::StrCat("postgresql://ringmaster@127.0.0.1:", server_->port(), "/ringmaster")},
        state + ".log");
    ASSERT_GT(coordinator_, 0);
  }
  // The health of the server ("") or of one service.
  grpc::health::v1::HealthCheckResponse::ServingStatus Health(const std::string& service = "") {
    auto health = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    if (!health->Check(&context, request, &response).ok()) return response.UNKNOWN;
    return response.status();
  }
  // Waits until the coordinator leads: a new one waits out the lease of
  // the one killed, answering reads meanwhile.
  bool Leads() {
    return testing::WaitFor(
        [&] {
          return Health("ringmaster.v1.Leader") == grpc::health::v1::HealthCheckResponse::SERVING;
        },
        absl::Seconds(30));
  }
  std::string Logs() { return testing::Shell(absl::StrCat("tail -n 30 ", dir_, "/*.log")).out; }

  std::string dir_;
  int port_ = 0;
  std::string address_;
  pid_t coordinator_ = 0;
  pid_t worker_ = 0;
};

v1::JobSpec Sleeper(const std::string& name) {
  v1::JobSpec spec;
  spec.set_name(name);
  spec.set_ranks(1);
  spec.add_command("sleep");
  spec.add_command("600");
  return spec;
}

TEST_F(PostgresStoreTest, JobsComeBackFromTheDatabaseAndAnOutageIsWaitedOut) {
  StartCoordinator("first");
  worker_ =
      Spawn({testing::Runfile("worker/ringmaster-worker"), "--coordinator", address_, "--port", "0",
             "--metrics-port", "0", "--slots", "1", "--state-dir", dir_ + "/worker"},
            "worker.log");
  Client client(address_);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto workers = client.ListWorkers();
        return workers.ok() && workers->size() == 1;
      },
      absl::Seconds(30)))
      << Logs();
  absl::StatusOr<std::string> running = client.Submit(Sleeper("running"));
  ASSERT_OK(running);
  absl::StatusOr<std::string> waiting = client.Submit(Sleeper("waiting"));
  ASSERT_OK(waiting);
  auto state_is = [&](const std::string& job, v1::JobState state) {
    return testing::WaitFor(
        [&] {
          auto j = client.GetJob(job);
          return j.ok() && j->state() == state;
        },
        absl::Seconds(30));
  };
  ASSERT_TRUE(state_is(*running, v1::RUNNING)) << Logs();

  // Its machine lost: the new coordinator has nothing but the database.
  testing::KillAndReap(coordinator_);
  StartCoordinator("second");
  ASSERT_TRUE(Leads()) << Logs();
  ASSERT_TRUE(state_is(*waiting, v1::PENDING)) << Logs();
  ASSERT_TRUE(state_is(*running, v1::RUNNING)) << Logs();
  absl::StatusOr<v1::Job> kept = client.GetJob(*running);
  ASSERT_OK(kept);
  EXPECT_EQ(kept->attempt(), 0) << "the rank kept running: " << kept->ShortDebugString();
  EXPECT_EQ(kept->restarts(), 0);
  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::SERVING);

  // PostgreSQL away: NOT_SERVING, and a submit waits for it.
  ASSERT_OK(server_->Stop());
  EXPECT_TRUE(testing::WaitFor(
      [&] { return Health() == grpc::health::v1::HealthCheckResponse::NOT_SERVING; },
      absl::Seconds(20)))
      << Logs();
  Client patient(address_, "", {}, absl::Seconds(60));
  std::future<absl::StatusOr<std::string>> submitted =
      std::async(std::launch::async, [&] { return patient.Submit(Sleeper("late")); });
  EXPECT_EQ(submitted.wait_for(std::chrono::seconds(2)), std::future_status::timeout)
      << "not acknowledged before it is stored";
  ASSERT_OK(server_->Restart());
  absl::StatusOr<std::string> late = submitted.get();
  ASSERT_OK(late) << Logs();
  EXPECT_TRUE(
      testing::WaitFor([&] { return Health() == grpc::health::v1::HealthCheckResponse::SERVING; },
                       absl::Seconds(20)));
  ASSERT_TRUE(state_is(*late, v1::PENDING));

  // And it was stored: a third coordinator sees all three.
  testing::KillAndReap(coordinator_);
  StartCoordinator("third");
  ASSERT_TRUE(state_is(*late, v1::PENDING)) << Logs();
  ASSERT_TRUE(state_is(*waiting, v1::PENDING));
  ASSERT_TRUE(state_is(*running, v1::RUNNING));
}

TEST_F(PostgresStoreTest, ACoordinatorStartedWithoutItsDatabaseSaysSoUntilItIsThere) {
  ASSERT_OK(server_->Stop());
  StartCoordinator("early");
  // Its port answers: NOT_SERVING, and calls refused saying why.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return Health() == grpc::health::v1::HealthCheckResponse::NOT_SERVING; },
      absl::Seconds(30)))
      << Logs();
  Client client(address_, "", {}, absl::Seconds(2));
  absl::StatusOr<std::vector<v1::Worker>> refused = client.ListWorkers();
  EXPECT_THAT(refused.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("cannot reach its job store yet"));
  ASSERT_OK(server_->Restart());
  ASSERT_TRUE(Leads()) << Logs();
  EXPECT_EQ(Health(), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_OK(client.ListWorkers().status());
}

// `ringmaster up --store postgresql://...`: a local cluster whose jobs are
// in the database.
class UpOnPostgresTest : public ClusterTest {
 protected:
  void SetUp() override {
    if (std::string why = testing::PostgresServer::Unavailable(); !why.empty()) GTEST_SKIP() << why;
    absl::StatusOr<std::unique_ptr<testing::PostgresServer>> server =
        testing::PostgresServer::Start();
    ASSERT_OK(server);
    server_ = *std::move(server);
    up_args_ = {"--store",
                absl::StrCat("postgresql://ringmaster@127.0.0.1:", server_->port(), "/ringmaster")};
    ClusterTest::SetUp();
  }
  std::unique_ptr<testing::PostgresServer> server_;
};

TEST_F(UpOnPostgresTest, ATrainerJobRunsAndItsHistoryIsInTheDatabase) {
  const std::string job = Submit(
      "name: pg\nranks: 2\ntrainer:\n  data: {path: \"synthetic:rows=512,features=8,classes=2\"}\n"
      "  epochs: 1\n");
  const v1::Job done = WaitJob(job, [](const v1::Job& j) { return j.state() == v1::SUCCEEDED; });
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.ShortDebugString();
  absl::StatusOr<std::unique_ptr<PgDb>> db = PgDb::Connect(server_->conninfo());
  ASSERT_OK(db);
  absl::StatusOr<PgResult> rows =
      (*db)->Query("SELECT count(*) FROM transitions WHERE job_id = $1", {PgParam::Text(job)});
  ASSERT_OK(rows);
  EXPECT_EQ(rows->Int(0, 0), done.history_size()) << "every transition, stored there";
  EXPECT_GE(done.history_size(), 4);
}

}  // namespace
}  // namespace ringmaster
