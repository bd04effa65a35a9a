// PgDb against a real PostgreSQL started by the test (testing/
// postgres_server.h): statements and results, transactions, error codes,
// passwords, and a server that goes away.
#include "coordinator/store/pg_db.h"

#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/mutex.h"
#include "common/status_macros.h"
#include "testing/postgres_server.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;
using testing::PostgresServer;

class PgDbTest : public testing::PostgresTest {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    absl::StatusOr<std::unique_ptr<PgDb>> db = PgDb::Connect(server_->conninfo());
    ASSERT_OK(db);
    db_ = *std::move(db);
  }

  std::unique_ptr<PgDb> db_;
};

TEST_F(PgDbTest, ValuesRoundTripInBinary) {
  ASSERT_OK(db_->Exec("CREATE TABLE t (n BIGINT PRIMARY KEY, s TEXT, b BYTEA, i INTEGER)"));
  const std::string bytes(
      "\x00\x01\xff\x7f"
      "after a zero",
      16);
  ASSERT_OK(db_->Query("INSERT INTO t VALUES ($1, $2, $3, $4)",
                       {PgParam::Int(-5000000000), PgParam::Text("héllo"), PgParam::Bytes(bytes),
                        PgParam::Int(-7)}));
  absl::StatusOr<PgResult> rows = db_->Query("SELECT n, s, b, i, n > 0, NULL::bigint FROM t");
  ASSERT_OK(rows);
  ASSERT_EQ(rows->rows(), 1);
  EXPECT_EQ(rows->Int(0, 0), -5000000000);
  EXPECT_EQ(rows->Text(0, 1), "héllo");
  EXPECT_EQ(rows->Bytes(0, 2), bytes);
  EXPECT_EQ(rows->Int(0, 3), -7);
  EXPECT_FALSE(rows->Bool(0, 4));
  EXPECT_TRUE(rows->null(0, 5));
}

TEST_F(PgDbTest, AFailedTransactionLeavesNothingAndNestedOnesRollBackAlone) {
  ASSERT_OK(db_->Exec("CREATE TABLE t (n BIGINT PRIMARY KEY)"));
  absl::Status failed = db_->Transaction([&]() -> absl::Status {
    RETURN_IF_ERROR(db_->Query("INSERT INTO t VALUES (1)").status());
    return db_->Query("INSERT INTO t VALUES (1)").status();
  });
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kAlreadyExists)) << failed;
  EXPECT_THAT(failed.message(), HasSubstr("INSERT INTO t VALUES (1): ERROR:  duplicate key"));
  ASSERT_OK(db_->Transaction([&]() -> absl::Status {
    RETURN_IF_ERROR(db_->Query("INSERT INTO t VALUES (2)").status());
    EXPECT_THAT(
        db_->Transaction([&] { return db_->Query("INSERT INTO t VALUES (3), (3)").status(); }),
        IsError());
    return absl::OkStatus();
  }));
  absl::StatusOr<PgResult> rows = db_->Query("SELECT n FROM t ORDER BY n");
  ASSERT_OK(rows);
  ASSERT_EQ(rows->rows(), 1);
  EXPECT_EQ(rows->Int(0, 0), 2);
}

TEST_F(PgDbTest, ErrorsNameTheStatementAndSayWhatToDo) {
  absl::Status missing = db_->Query("SELECT * FROM nowhere").status();
  EXPECT_THAT(missing, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(missing.message(), HasSubstr("SELECT * FROM nowhere: ERROR:  relation \"nowhere\""));
  absl::StatusOr<std::unique_ptr<PgDb>> refused =
      PgDb::Connect("host=127.0.0.1 port=1 dbname=ringmaster", absl::Seconds(2));
  EXPECT_THAT(refused.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(refused.status().message(), HasSubstr("cannot connect to PostgreSQL"));
}

TEST_F(PgDbTest, AServerThatStopsIsUnavailableUntilItIsBack) {
  ASSERT_OK(server_->Stop());
  absl::Status lost = db_->Query("SELECT 1").status();
  EXPECT_THAT(lost, StatusIs(absl::StatusCode::kUnavailable)) << lost;
  EXPECT_FALSE(db_->connected());
  ASSERT_OK(server_->Restart());
  absl::StatusOr<std::unique_ptr<PgDb>> again = PgDb::Connect(server_->conninfo());
  ASSERT_OK(again);
  EXPECT_OK((*again)->Query("SELECT 1").status());
}

TEST_F(PgDbTest, APoolOpensNoMoreThanItsLimitAndCallersWaitForAConnection) {
  PgPool pool({server_->conninfo(), "", /*max_connections=*/2});
  Mutex mu;
  std::set<int64_t> backends;
  std::vector<std::thread> callers;
  std::atomic<int> done{0};
  for (int i = 0; i < 6; ++i) {
    callers.emplace_back([&] {
      absl::Status s = pool.Run([&](PgDb* db) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult row, db->Query("SELECT pg_backend_pid(), pg_sleep(0.1)"));
        MutexLock lock(&mu);
        backends.insert(row.Int(0, 0));
        return absl::OkStatus();
      });
      if (s.ok()) ++done;
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(done.load(), 6);
  MutexLock lock(&mu);
  EXPECT_EQ(backends.size(), 2u);  // each connection served several callers
}

TEST_F(PgDbTest, APoolRunsACallAgainOnANewConnectionAfterTheServerRestarted) {
  PgPool pool({server_->conninfo()});
  int64_t first = 0;
  ASSERT_OK(pool.Run([&](PgDb* db) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult row, db->Query("SELECT pg_backend_pid()"));
    first = row.Int(0, 0);
    return absl::OkStatus();
  }));
  ASSERT_OK(server_->Stop());
  ASSERT_OK(server_->Restart());
  int runs = 0;
  int64_t second = 0;
  ASSERT_OK(pool.Run([&](PgDb* db) -> absl::Status {
    ++runs;
    ASSIGN_OR_RETURN(PgResult row, db->Query("SELECT pg_backend_pid()"));
    second = row.Int(0, 0);
    return absl::OkStatus();
  }));
  EXPECT_EQ(runs, 2);  // once on the connection the restart broke
  EXPECT_NE(second, first);
}

TEST_F(PgDbTest, APoolSaysWhenItCannotConnect) {
  ASSERT_OK(server_->Stop());
  PgPool pool({server_->conninfo()});
  int runs = 0;
  absl::Status s = pool.Run([&](PgDb*) {
    ++runs;
    return absl::OkStatus();
  });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable)) << s;
  EXPECT_EQ(runs, 0);
}

TEST(PgDbPasswordTest, APasswordFromAPassfileSignsIn) {
  if (std::string why = PostgresServer::Unavailable(); !why.empty()) GTEST_SKIP() << why;
  absl::StatusOr<std::unique_ptr<PostgresServer>> server =
      PostgresServer::Start({.password = "s3cret pass"});
  ASSERT_OK(server);
  absl::StatusOr<std::unique_ptr<PgDb>> without = PgDb::Connect((*server)->conninfo());
  EXPECT_THAT(without.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(without.status().message(), HasSubstr("password"));
  const std::string passfile = (*server)->dir() + "/pgpass";
  {
    std::FILE* f = std::fopen(passfile.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "127.0.0.1:%d:ringmaster:ringmaster:s3cret pass\n", (*server)->port());
    std::fclose(f);
  }
  chmod(passfile.c_str(), 0600);
  absl::StatusOr<std::unique_ptr<PgDb>> with =
      PgDb::Connect(absl::StrCat((*server)->conninfo(), " passfile=", passfile));
  ASSERT_OK(with);
  EXPECT_OK((*with)->Query("SELECT 1").status());
}

}  // namespace
}  // namespace ringmaster
