// Leader election against a real PostgreSQL, on fake clocks: who leads, a
// takeover once the leader stops renewing, a deposed leader fenced, and a
// leader that cannot reach the database stepping down in time.
#include "coordinator/store/leader_lease.h"

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "common/status_macros.h"
#include "testing/postgres_server.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

// A coordinator's part: its connection, its clock and its lease.
struct Candidate {
  Candidate(const std::string& conninfo, const std::string& id)
      : db(PgDb::Connect(conninfo).value()),
        lease(db.get(), &clock, {id, id + ":7070", absl::Seconds(5)}) {}
  FakeClock clock;
  std::unique_ptr<PgDb> db;
  LeaderLease lease;
};

class LeaderLeaseTest : public testing::PostgresTest {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    a_ = std::make_unique<Candidate>(server_->conninfo(), "a");
    b_ = std::make_unique<Candidate>(server_->conninfo(), "b");
    ASSERT_OK(LeaderLease::CreateTable(a_->db.get()));
    ASSERT_OK(LeaderLease::CreateTable(b_->db.get())) << "twice is harmless";
  }
  // Both clocks move on, and each candidate that is `stepping` steps.
  void Pass(absl::Duration d, bool a_steps = true, bool b_steps = true) {
    for (absl::Duration t; t < d; t += absl::Seconds(1)) {
      a_->clock.Advance(absl::Seconds(1));
      b_->clock.Advance(absl::Seconds(1));
      if (a_steps) a_->lease.Step().IgnoreError();
      if (b_steps) b_->lease.Step().IgnoreError();
    }
  }

  std::unique_ptr<Candidate> a_, b_;
};

TEST_F(LeaderLeaseTest, TheFirstTakesAFreeLeaseAndTheOtherFollowsIt) {
  absl::StatusOr<LeaseState> a = a_->lease.Step();
  ASSERT_OK(a);
  EXPECT_TRUE(a->leader);
  EXPECT_EQ(a->term, 1);
  absl::StatusOr<LeaseState> b = b_->lease.Step();
  ASSERT_OK(b);
  EXPECT_FALSE(b->leader);
  EXPECT_EQ(b->leader_id, "a");
  EXPECT_EQ(b->leader_address, "a:7070");
  // A renewing leader keeps it, however long.
  Pass(absl::Seconds(30));
  EXPECT_TRUE(a_->lease.state().leader);
  EXPECT_FALSE(b_->lease.state().leader);
  EXPECT_EQ(b_->lease.state().term, 1);
}

TEST_F(LeaderLeaseTest, AStandbyTakesOverOnlyOnceTheLeaderStoppedRenewingForTheTimeout) {
  ASSERT_OK(a_->lease.Step());
  ASSERT_OK(b_->lease.Step());
  Pass(absl::Seconds(4), /*a_steps=*/false);
  EXPECT_FALSE(b_->lease.state().leader) << "4s without a renewal";
  Pass(absl::Seconds(1), /*a_steps=*/false);
  EXPECT_TRUE(b_->lease.state().leader) << "5s";
  EXPECT_EQ(b_->lease.state().term, 2);

  // The paused leader comes back: its renewal fails and it follows b.
  absl::StatusOr<LeaseState> a = a_->lease.Step();
  ASSERT_OK(a);
  EXPECT_FALSE(a->leader);
  EXPECT_EQ(a->leader_address, "b:7070");
  EXPECT_EQ(a->term, 2);
}

TEST_F(LeaderLeaseTest, ADeposedLeaderCommitsNothingAfterTheNewLeadersFirstWrite) {
  ASSERT_OK(a_->db->Exec("CREATE TABLE writes (who TEXT)"));
  ASSERT_OK(a_->lease.Step());
  const int64_t a_term = a_->lease.state().term;
  auto write = [](PgDb* db, int64_t term, const std::string& who) {
    return db->Transaction([&]() -> absl::Status {
      RETURN_IF_ERROR(LeaderLease::Fence(db, term));
      return db->Query("INSERT INTO writes VALUES ($1)", {PgParam::Text(who)}).status();
    });
  };
  ASSERT_OK(write(a_->db.get(), a_term, "a"));

  // a is in the middle of a write when b takes over: the takeover waits
  // for it, and a's write lands before any of b's.
  std::unique_ptr<PgDb> a_writer = PgDb::Connect(server_->conninfo()).value();
  ASSERT_OK(a_writer->Exec("BEGIN"));
  ASSERT_OK(LeaderLease::Fence(a_writer.get(), a_term));
  std::thread takeover([&] { Pass(absl::Seconds(6), /*a_steps=*/false); });
  ASSERT_OK(a_writer->Query("INSERT INTO writes VALUES ('a, in flight')").status());
  ASSERT_OK(a_writer->Exec("COMMIT"));
  takeover.join();
  ASSERT_TRUE(b_->lease.state().leader);
  ASSERT_OK(write(b_->db.get(), b_->lease.state().term, "b"));

  absl::Status fenced = write(a_->db.get(), a_term, "a, deposed");
  EXPECT_THAT(fenced, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(fenced.message(),
              HasSubstr("not the leader: the lease is at term 2 (held by b:7070)"));
  absl::StatusOr<PgResult> rows = a_->db->Query("SELECT who FROM writes");
  ASSERT_OK(rows);
  std::vector<std::string> who;
  for (int r = 0; r < rows->rows(); ++r) who.push_back(rows->Text(r, 0));
  EXPECT_EQ(who, (std::vector<std::string>{"a", "a, in flight", "b"}));
}

TEST_F(LeaderLeaseTest, ALeaderThatCannotReachTheDatabaseStepsDownByItsOwnClock) {
  ASSERT_OK(a_->lease.Step());
  ASSERT_OK(server_->Stop());
  a_->clock.Advance(absl::Seconds(4));
  EXPECT_THAT(a_->lease.Step(), IsError());
  EXPECT_TRUE(a_->lease.state().leader) << "its lease has 1s left";
  a_->clock.Advance(absl::Seconds(1));
  EXPECT_THAT(a_->lease.Step(), IsError());
  EXPECT_FALSE(a_->lease.state().leader) << "5s since its last renewal";
}

TEST_F(LeaderLeaseTest, AReleasedLeaseIsTakenAtTheNextStep) {
  ASSERT_OK(a_->lease.Step());
  ASSERT_OK(b_->lease.Step());
  ASSERT_OK(a_->lease.Release());
  EXPECT_FALSE(a_->lease.state().leader);
  absl::StatusOr<LeaseState> b = b_->lease.Step();
  ASSERT_OK(b);
  EXPECT_TRUE(b->leader);
  EXPECT_EQ(b->term, 2);
}

}  // namespace
}  // namespace ringmaster
