// PgRendezvousJournal against a real PostgreSQL started by the test: keys
// kept and replaced, read back by the next leader, forgotten with their
// scope, and refused once another coordinator holds the lease.
#include "coordinator/store/pg_rendezvous_journal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/store/leader_lease.h"
#include "coordinator/store/pg_job_store.h"
#include "testing/postgres_server.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

class PgRendezvousJournalTest : public testing::PostgresTest {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_OK(PgJobStore::Open({server_->conninfo()}));  // makes the table
    auto db = PgDb::Connect(server_->conninfo());
    ASSERT_OK(db);
    db_ = *std::move(db);
    ASSERT_OK(LeaderLease::CreateTable(db_.get()));
    ASSERT_OK(db_->Exec("UPDATE leader_lease SET term = 5"));
  }
  std::unique_ptr<PgRendezvousJournal> Journal(int64_t term) {
    auto journal = PgRendezvousJournal::Start(server_->conninfo(), "", LeaderLease::FenceOf(term));
    EXPECT_OK(journal);
    return journal.ok() ? *std::move(journal) : nullptr;
  }
  absl::Status Keep(PgRendezvousJournal& journal, const ScopeId& scope, const std::string& key,
                    const std::string& value) {
    absl::StatusOr<int64_t> ticket = journal.Put(scope, key, value);
    if (!ticket.ok()) return ticket.status();
    return journal.WaitDurable(*ticket);
  }

  std::unique_ptr<PgDb> db_;
};

TEST_F(PgRendezvousJournalTest, KeysAreKeptReplacedAndForgottenWithTheirScope) {
  auto leader = Journal(5);
  const ScopeId starting{"train-4", 1};
  const ScopeId other{"train-5", 0};
  const std::string binary("\x00\xff gloo", 7);
  ASSERT_OK(Keep(*leader, starting, "rank0", "10.0.0.1:4000"));
  ASSERT_OK(Keep(*leader, starting, binary, binary));
  ASSERT_OK(Keep(*leader, starting, "rank0", "10.0.0.1:4001"));
  ASSERT_OK(Keep(*leader, other, "n", "3"));

  auto next = Journal(5);
  absl::StatusOr<ScopesValues> loaded = next->Load();
  ASSERT_OK(loaded);
  EXPECT_EQ((*loaded)[starting], (ScopeValues{{"rank0", "10.0.0.1:4001"}, {binary, binary}}));
  EXPECT_EQ((*loaded)[other], (ScopeValues{{"n", "3"}}));

  leader->Drop(other);
  ASSERT_OK(Keep(*leader, starting, "after", "drop"));  // durable after the drop
  loaded = next->Load();
  ASSERT_OK(loaded);
  EXPECT_EQ(loaded->count(other), 0u);
  EXPECT_EQ(loaded->at(starting).size(), 3u);
}

TEST_F(PgRendezvousJournalTest, ADeposedLeaderKeepsNothing) {
  auto deposed = Journal(5);
  ASSERT_OK(Keep(*deposed, {"j-1", 0}, "a", "1"));
  ASSERT_OK(db_->Exec("UPDATE leader_lease SET term = 6"));  // another took over
  absl::Status refused = Keep(*deposed, {"j-1", 0}, "b", "2");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("not the leader"));
  absl::StatusOr<ScopesValues> loaded = Journal(6)->Load();
  ASSERT_OK(loaded);
  const ScopeId scope{"j-1", 0};
  EXPECT_EQ((*loaded)[scope], (ScopeValues{{"a", "1"}}));
}

}  // namespace
}  // namespace ringmaster
