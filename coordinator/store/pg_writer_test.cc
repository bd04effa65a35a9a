// PgWriter against a real PostgreSQL: order and group commit, a server
// restart in the middle with nothing lost or applied twice, the bound on
// waiting writes, and fencing by the leader lease.
#include "coordinator/store/pg_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "coordinator/store/leader_lease.h"
#include "testing/postgres_server.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;

class PgWriterTest : public testing::PostgresTest {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    absl::StatusOr<std::unique_ptr<PgDb>> db = PgDb::Connect(server_->conninfo());
    ASSERT_OK(db);
    reader_ = *std::move(db);
    ASSERT_OK(reader_->Exec("CREATE TABLE t (n BIGINT PRIMARY KEY)"));
  }
  std::unique_ptr<PgWriter> Start(int64_t term = 0, size_t max_pending = 100000) {
    PgWriterOptions options;
    options.conninfo = server_->conninfo();
    options.fence = LeaderLease::FenceOf(term);
    options.max_pending = max_pending;
    options.max_backoff = absl::Milliseconds(200);
    absl::StatusOr<std::unique_ptr<PgWriter>> writer = PgWriter::Start(options, absl::Seconds(10));
    EXPECT_OK(writer);
    return writer.ok() ? *std::move(writer) : nullptr;
  }
  static std::vector<PgStatement> Insert(int64_t n) {
    return {{"INSERT INTO t VALUES ($1)", {PgParam::Int(n)}}};
  }
  std::vector<int64_t> Rows() {
    absl::StatusOr<PgResult> rows = reader_->Query("SELECT n FROM t ORDER BY n");
    std::vector<int64_t> out;
    for (int r = 0; rows.ok() && r < rows->rows(); ++r) out.push_back(rows->Int(r, 0));
    return out;
  }

  std::unique_ptr<PgDb> reader_;
};

TEST_F(PgWriterTest, SubmissionsCommitInOrderSeveralToATransaction) {
  std::unique_ptr<PgWriter> writer = Start();
  ASSERT_NE(writer, nullptr);
  int64_t last = 0;
  for (int n = 1; n <= 500; ++n) {
    absl::StatusOr<int64_t> seq = writer->Submit(Insert(n));
    ASSERT_OK(seq);
    EXPECT_EQ(*seq, n);
    last = *seq;
  }
  ASSERT_OK(writer->WaitDurable(last, absl::Seconds(30)));
  EXPECT_EQ(writer->durable(), 500);
  EXPECT_EQ(Rows().size(), 500u);
  EXPECT_LT(writer->commits(), 500) << "group commit";
  std::printf("500 submissions in %lld PostgreSQL transactions\n",
              static_cast<long long>(writer->commits()));
}

TEST_F(PgWriterTest, AServerRestartLosesNothingAndAppliesNothingTwice) {
  std::unique_ptr<PgWriter> writer = Start();
  ASSERT_NE(writer, nullptr);
  ASSERT_OK(writer->WaitDurable(*writer->Submit(Insert(1)), absl::Seconds(10)));
  ASSERT_OK(server_->Stop());
  absl::StatusOr<int64_t> seq = writer->Submit(Insert(2));
  ASSERT_OK(seq) << "accepted while the server is away";
  ASSERT_OK(writer->Submit(Insert(3)));
  absl::Status waiting = writer->WaitDurable(*seq, absl::Milliseconds(500));
  EXPECT_THAT(waiting, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(waiting.message(), HasSubstr("(reconnecting)"));
  EXPECT_FALSE(writer->connected());
  ASSERT_OK(server_->Restart());
  ASSERT_OK(writer->WaitDurable(3, absl::Seconds(30)));
  EXPECT_TRUE(writer->connected());
  absl::StatusOr<std::unique_ptr<PgDb>> db = PgDb::Connect(server_->conninfo());
  ASSERT_OK(db);
  reader_ = *std::move(db);
  EXPECT_EQ(Rows(), (std::vector<int64_t>{1, 2, 3})) << "each once: a repeat would violate the key";
}

TEST_F(PgWriterTest, WritesWaitingAreBoundedWhileTheServerIsAway) {
  std::unique_ptr<PgWriter> writer = Start(/*term=*/0, /*max_pending=*/3);
  ASSERT_NE(writer, nullptr);
  ASSERT_OK(server_->Stop());
  // The thread holds what it took when the connection went; count only
  // what is refused.
  int refused = 0;
  for (int n = 1; n <= 10; ++n) {
    absl::StatusOr<int64_t> seq = writer->Submit(Insert(n));
    if (!seq.ok()) {
      EXPECT_THAT(seq.status(), StatusIs(absl::StatusCode::kResourceExhausted));
      ++refused;
    }
  }
  EXPECT_EQ(refused, 7);
}

TEST_F(PgWriterTest, ADeposedLeadersWriterStopsAndSaysWhy) {
  ASSERT_OK(LeaderLease::CreateTable(reader_.get()));
  FakeClock clock;
  LeaderLease lease(reader_.get(), &clock, {"a", "a:7070", absl::Seconds(5)});
  ASSERT_OK(lease.Step());
  std::unique_ptr<PgWriter> writer = Start(lease.state().term);
  ASSERT_NE(writer, nullptr);
  ASSERT_OK(writer->WaitDurable(*writer->Submit(Insert(1)), absl::Seconds(10)));

  // b takes the lease over.
  ASSERT_OK(reader_
                ->Query("UPDATE leader_lease SET term = term + 1, holder = 'b', "
                        "address = 'b:7070' WHERE id = 1")
                .status());
  absl::StatusOr<int64_t> seq = writer->Submit(Insert(2));
  ASSERT_OK(seq);
  absl::Status fenced = writer->WaitDurable(*seq, absl::Seconds(10));
  EXPECT_THAT(fenced, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(fenced.message(),
              HasSubstr("not the leader: the lease is at term 2 (held by b:7070)"));
  EXPECT_THAT(writer->Submit(Insert(3)).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Rows(), (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace ringmaster
