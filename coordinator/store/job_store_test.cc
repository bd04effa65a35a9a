// The job store, on both engines where the contract is the same (SQLite
// in a temporary file, PostgreSQL started by the test), and each engine's
// own behaviour apart.
#include "coordinator/core/job_store.h"

#include <cstdlib>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/store/pg_job_store.h"
#include "coordinator/store/sqlite_job_store.h"
#include "testing/postgres_server.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

// A database path in a fresh directory.
std::string TempDbPath(const std::string& name) {
  return testing::MakeTempDir("job-store") + "/" + name;
}

v1::StateChange Change(v1::JobState state, v1::Reason reason, const std::string& message) {
  v1::StateChange change;
  change.set_state(state);
  change.set_reason(reason);
  change.set_message(message);
  return change;
}

// A database of the test's own on the engine of the parameter; Open
// opens a store on it, as a coordinator (re)starting does.
class JobStoreEngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      path_ = TempDbPath("jobs.db");
      return;
    }
    if (std::string why = testing::PostgresServer::Unavailable(); !why.empty()) GTEST_SKIP() << why;
    absl::StatusOr<std::unique_ptr<testing::PostgresServer>> server =
        testing::PostgresServer::Start();
    ASSERT_OK(server);
    server_ = *std::move(server);
  }
  absl::StatusOr<std::unique_ptr<JobStore>> Open() {
    if (GetParam() == "sqlite") return SqliteJobStore::Open(path_);
    return PgJobStore::Open({server_->conninfo()});
  }

  std::string path_;
  std::unique_ptr<testing::PostgresServer> server_;
};

INSTANTIATE_TEST_SUITE_P(Engines, JobStoreEngineTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

TEST_P(JobStoreEngineTest, JobsAndHistorySurviveReopen) {
  {
    auto store = Open();
    ASSERT_OK(store) << store.status();
    auto n1 = (*store)->NextJobNumber();
    auto n2 = (*store)->NextJobNumber();
    ASSERT_OK(n1);
    ASSERT_OK(n2);
    EXPECT_EQ(*n1, 1);
    EXPECT_EQ(*n2, 2);

    v1::Job job;
    job.set_id("a-1");
    job.set_state(v1::PENDING);
    job.mutable_spec()->set_name("a");
    *job.add_history() = Change(v1::PENDING, v1::SUBMITTED, "submitted");
    ASSERT_OK((*store)->Create(job));

    v1::StateChange running = Change(v1::STARTING, v1::SCHEDULED, "placed");
    job.set_state(v1::STARTING);
    *job.add_history() = running;
    ASSERT_OK((*store)->RecordTransition(job, /*drop=*/0, /*from=*/1));
  }
  auto store = Open();
  ASSERT_OK(store);
  auto jobs = (*store)->LoadResident();
  ASSERT_OK(jobs) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  const v1::Job& job = (*jobs)[0];
  EXPECT_EQ(job.id(), "a-1");
  EXPECT_EQ(job.state(), v1::STARTING);
  ASSERT_EQ(job.history_size(), 2);
  EXPECT_EQ(job.history(0).reason(), v1::SUBMITTED);
  EXPECT_EQ(job.history(1).message(), "placed");
  auto n3 = (*store)->NextJobNumber();
  ASSERT_OK(n3);
  EXPECT_EQ(*n3, 3) << "job numbers are never reused across restarts";
}

// A fold rewrites the end of a history: the entries dropped go, the
// entries appended follow what was kept, across a reopen.
TEST_P(JobStoreEngineTest, ATransitionRewritesTheEndOfTheHistory) {
  {
    auto store = Open();
    ASSERT_OK(store) << store.status();
    v1::Job job;
    job.set_id("a-1");
    job.mutable_spec()->set_name("a");
    for (const char* message : {"one", "two", "three", "four"}) {
      *job.add_history() = Change(v1::RUNNING, v1::RANK_STRAGGLING, message);
    }
    ASSERT_OK((*store)->Create(job));
    *job.add_history() = Change(v1::RUNNING, v1::RANK_STRAGGLING, "five");
    ASSERT_OK((*store)->RecordTransition(job, 0, 4));
    // Keep "one" and "two"; "three" to "five" become "folded", "five".
    job.mutable_history()->DeleteSubrange(2, 3);
    *job.add_history() = Change(v1::RUNNING, v1::HISTORY_FOLDED, "folded");
    *job.add_history() = Change(v1::RUNNING, v1::RANK_STRAGGLING, "five");
    ASSERT_OK((*store)->RecordTransition(job, 3, 2));
  }
  auto store = Open();
  ASSERT_OK(store);
  auto jobs = (*store)->LoadResident();
  ASSERT_OK(jobs);
  ASSERT_EQ(jobs->size(), 1u);
  std::vector<std::string> messages;
  for (const v1::StateChange& c : (*jobs)[0].history()) messages.push_back(c.message());
  EXPECT_EQ(messages, (std::vector<std::string>{"one", "two", "folded", "five"}));
}

TEST_P(JobStoreEngineTest, RunNumbersGrowAcrossReopensApartFromJobNumbers) {
  {
    auto store = Open();
    ASSERT_OK(store) << store.status();
    EXPECT_EQ((*store)->NextRunNumber().value_or(-1), 1);
    EXPECT_EQ((*store)->NextJobNumber().value_or(-1), 1);
  }
  auto store = Open();
  ASSERT_OK(store) << store.status();
  EXPECT_EQ((*store)->NextRunNumber().value_or(-1), 2) << "across a reopen";
  EXPECT_EQ((*store)->NextJobNumber().value_or(-1), 2);
}

TEST(JobStoreTest, RefusesUnknownSchemaVersion) {
  const std::string path = TempDbPath("future.db");
  {
    auto db = SqliteDb::Open(path);
    ASSERT_OK(db);
    ASSERT_OK(
        (*db)->Exec("CREATE TABLE schema_version (version INTEGER);"
                    "INSERT INTO schema_version VALUES (99);"));
  }
  auto store = SqliteJobStore::Open(path);
  EXPECT_THAT(store.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

v1::Job EndedJob(const std::string& name, int64_t number, v1::JobState state) {
  v1::Job job;
  job.set_id(name + "-" + std::to_string(number));
  job.mutable_spec()->set_name(name);
  job.set_state(state);
  *job.add_history() = Change(v1::PENDING, v1::SUBMITTED, "submitted");
  *job.add_history() = Change(state, v1::CANCEL_REQUESTED, "ended");
  return job;
}

std::vector<std::string> Ids(const std::vector<v1::Job>& jobs) {
  std::vector<std::string> ids;
  for (const v1::Job& job : jobs) ids.push_back(job.id());
  return ids;
}

// Retired jobs load as summaries; they are read back whole, one or a page
// at a time, newest first, filtered by state and by name prefix (a name,
// not an id: "a-1" is no prefix of the name of job "a-12").
TEST_P(JobStoreEngineTest, RetiredJobsAreSummariesInMemoryAndWholeOnDisk) {
  {
    auto store = Open();
    ASSERT_OK(store) << store.status();
    const std::vector<v1::Job> jobs = {
        EndedJob("a", 1, v1::SUCCEEDED), EndedJob("a-1", 2, v1::FAILED),
        EndedJob("b", 3, v1::CANCELLED), EndedJob("a", 12, v1::FAILED)};
    int64_t revision = 40;
    for (v1::Job job : jobs) {
      job.set_revision(++revision);
      ASSERT_OK((*store)->Create(job));
      ASSERT_OK((*store)->Retire({0, job.id(), job.state(), 500, {"w1", "w2"}}));
    }
    v1::Job live = EndedJob("a", 13, v1::RUNNING);
    ASSERT_OK((*store)->Create(live));
    ASSERT_OK((*store)->Sync());
  }
  auto store = Open();
  ASSERT_OK(store);
  auto resident = (*store)->LoadResident();
  ASSERT_OK(resident);
  EXPECT_EQ(Ids(*resident), (std::vector<std::string>{"a-13"}));
  auto retired = (*store)->LoadRetired();
  ASSERT_OK(retired);
  ASSERT_EQ(retired->size(), 4u);
  EXPECT_EQ((*retired)[3].id, "a-12");
  EXPECT_EQ((*retired)[3].state, v1::FAILED);
  EXPECT_EQ((*retired)[3].ended_unix_ms, 500);
  EXPECT_EQ((*retired)[3].workers, (std::vector<std::string>{"w1", "w2"}));
  EXPECT_EQ((*retired)[3].revision, 44) << "its snapshot's, for WatchJobs";

  auto whole = (*store)->Load("a-12");
  ASSERT_OK(whole);
  EXPECT_EQ(whole->history_size(), 2);
  EXPECT_THAT((*store)->Load("a-99").status(), StatusIs(absl::StatusCode::kNotFound));

  auto list = [&](RetiredQuery query) {
    auto jobs = (*store)->ListRetired(query);
    EXPECT_OK(jobs) << jobs.status();
    return jobs.ok() ? Ids(*jobs) : std::vector<std::string>{};
  };
  EXPECT_EQ(list({}), (std::vector<std::string>{"a-12", "b-3", "a-1-2", "a-1"}));
  EXPECT_EQ(list({false, INT64_MAX, {}, "", 2}), (std::vector<std::string>{"a-12", "b-3"}));
  EXPECT_EQ(list({false, 12, {}, "", 2}), (std::vector<std::string>{"b-3", "a-1-2"}));
  EXPECT_EQ(list({false, INT64_MAX, {v1::FAILED}, "", 10}),
            (std::vector<std::string>{"a-12", "a-1-2"}));
  EXPECT_EQ(list({false, INT64_MAX, {}, "a-1", 10}), (std::vector<std::string>{"a-1-2"}));
  EXPECT_EQ(list({false, INT64_MAX, {}, "a", 10}),
            (std::vector<std::string>{"a-12", "a-1-2", "a-1"}));
  EXPECT_EQ(list({false, INT64_MAX, {}, "b-3", 10}), (std::vector<std::string>{}));
  // A standby's listing: the resident job too, in the same order.
  EXPECT_EQ(list({true, INT64_MAX, {}, "a", 10}),
            (std::vector<std::string>{"a-13", "a-12", "a-1-2", "a-1"}));
  EXPECT_EQ(list({true, 13, {}, "a", 10}), (std::vector<std::string>{"a-12", "a-1-2", "a-1"}));
}

// A retired job revived (requeued) loads whole with the resident ones.
TEST_P(JobStoreEngineTest, ARevivedJobIsResidentAgain) {
  {
    auto store = Open();
    ASSERT_OK(store) << store.status();
    v1::Job job = EndedJob("a", 1, v1::FAILED);
    ASSERT_OK((*store)->Create(job));
    ASSERT_OK((*store)->Retire({0, job.id(), job.state(), 500, {"w1"}}));
    ASSERT_OK((*store)->Revive(job.id()));
    ASSERT_OK((*store)->Sync());
  }
  auto store = Open();
  ASSERT_OK(store);
  auto resident = (*store)->LoadResident();
  ASSERT_OK(resident);
  EXPECT_EQ(Ids(*resident), (std::vector<std::string>{"a-1"}));
  auto retired = (*store)->LoadRetired();
  ASSERT_OK(retired);
  EXPECT_TRUE(retired->empty());
}

// One fdatasync covers every commit before it; a Sync with nothing new
// does not touch the disk.
TEST(JobStoreTest, OneSyncCoversEveryEarlierCommit) {
  auto store = SqliteJobStore::Open(TempDbPath("sync.db"));
  ASSERT_OK(store);
  const int64_t before = (*store)->syncs();
  for (int i = 1; i <= 20; ++i) ASSERT_OK((*store)->Create(EndedJob("j", i, v1::PENDING)));
  ASSERT_OK((*store)->Sync());
  ASSERT_OK((*store)->Sync());
  EXPECT_EQ((*store)->syncs(), before + 1);
  ASSERT_TRUE((*store)
                  ->Batch([&]() -> absl::Status {
                    for (int i = 21; i <= 30; ++i) {
                      if (absl::Status s = (*store)->Create(EndedJob("j", i, v1::PENDING)); !s.ok())
                        return s;
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_OK((*store)->Sync());
  EXPECT_EQ((*store)->syncs(), before + 2);
}

// SQLite refuses a duplicate at once; a failed write inside a batch is
// undone alone, and the batch's other writes commit.
TEST(JobStoreTest, AFailedWriteInABatchIsUndoneAlone) {
  auto store = SqliteJobStore::Open(TempDbPath("batch.db"));
  ASSERT_OK(store);
  ASSERT_TRUE((*store)
                  ->Batch([&]() -> absl::Status {
                    EXPECT_OK((*store)->Create(EndedJob("j", 1, v1::PENDING)));
                    EXPECT_THAT((*store)->Create(EndedJob("j", 1, v1::PENDING)), IsError())
                        << "duplicate id";
                    EXPECT_OK((*store)->Create(EndedJob("j", 2, v1::PENDING)));
                    return absl::OkStatus();
                  })
                  .ok());
  auto jobs = (*store)->LoadResident();
  ASSERT_OK(jobs);
  EXPECT_EQ(Ids(*jobs), (std::vector<std::string>{"j-1", "j-2"}));
  EXPECT_EQ((*jobs)[0].history_size(), 2) << "the duplicate's transitions were undone";
}

// A store written by the version before (no retired jobs) opens, with
// every job resident.
TEST(JobStoreTest, UpgradesAVersionOneStore) {
  const std::string path = TempDbPath("v1.db");
  {
    auto db = SqliteDb::Open(path);
    ASSERT_OK(db);
    v1::Job job = EndedJob("old", 1, v1::SUCCEEDED);
    job.clear_history();
    ASSERT_OK(
        (*db)->Exec("CREATE TABLE schema_version (version INTEGER NOT NULL);"
                    "INSERT INTO schema_version VALUES (1);"
                    "CREATE TABLE jobs (number INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,"
                    "  state INTEGER NOT NULL, snapshot BLOB NOT NULL);"
                    "CREATE TABLE transitions (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                    "  job_id TEXT NOT NULL REFERENCES jobs(id), change BLOB NOT NULL);"
                    "CREATE INDEX transitions_by_job ON transitions(job_id, seq);"
                    "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
                    "INSERT INTO counters VALUES ('job', 1);"));
    // Row numbers that differ from the ids' numbers, as a delete could
    // leave them in version 1.
    for (const auto& [row, id] : {std::pair<int, std::string>{1, "old-2"}, {2, "old-1"}}) {
      auto insert = (*db)->Prepare("INSERT INTO jobs VALUES (?, ?, 4, ?)");
      ASSERT_OK(insert);
      job.set_id(id);
      ASSERT_OK(
          insert->Bind(1, int64_t{row}).Bind(2, id).BindBlob(3, job.SerializeAsString()).Run());
    }
  }
  auto store = SqliteJobStore::Open(path);
  ASSERT_OK(store) << store.status();
  auto jobs = (*store)->LoadResident();
  ASSERT_OK(jobs) << jobs.status();
  EXPECT_EQ(Ids(*jobs), (std::vector<std::string>{"old-1", "old-2"})) << "in their ids' order";
  auto next = (*store)->NextJobNumber();
  ASSERT_OK(next);
  EXPECT_EQ(*next, 3);
  RetiredQuery query;
  query.before_number = 2;
  ASSERT_OK((*store)->Retire({0, "old-1", v1::SUCCEEDED, 0, {}}));
  ASSERT_OK((*store)->Retire({0, "old-2", v1::SUCCEEDED, 0, {}}));
  auto below_two = (*store)->ListRetired(query);
  ASSERT_OK(below_two);
  ASSERT_EQ(below_two->size(), 1u);
  EXPECT_EQ((*below_two)[0].id(), "old-1");
  v1::WorkerHealth health;
  health.set_worker_id("w1");
  ASSERT_OK((*store)->PutWorkerHealth(health)) << "the upgrade made its table";
}

TEST_P(JobStoreEngineTest, WorkerHealthSurvivesReopen) {
  {
    auto store = Open();
    ASSERT_OK(store);
    v1::WorkerHealth health;
    health.set_worker_id("w2");
    health.mutable_cordon()->set_reason("first");
    ASSERT_OK((*store)->PutWorkerHealth(health));
    health.mutable_cordon()->set_reason("replaced");
    ASSERT_OK((*store)->PutWorkerHealth(health));
    health.set_worker_id("w1");
    health.clear_cordon();
    health.add_failures()->set_job_id("job-1");
    ASSERT_OK((*store)->PutWorkerHealth(health));
    ASSERT_OK((*store)->Sync());
  }
  auto store = Open();
  ASSERT_OK(store);
  auto records = (*store)->LoadWorkerHealth();
  ASSERT_OK(records);
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[0].worker_id(), "w1");
  EXPECT_EQ((*records)[0].failures(0).job_id(), "job-1");
  EXPECT_EQ((*records)[1].worker_id(), "w2");
  EXPECT_EQ((*records)[1].cordon().reason(), "replaced");
}

TEST_P(JobStoreEngineTest, IdempotentSubmitsFindTheirJobBeforeAndAfterAReopen) {
  {
    auto store = Open();
    ASSERT_OK(store);
    ASSERT_OK((*store)->Create(EndedJob("r", 1, v1::PENDING), "req-1"));
    auto found = (*store)->FindRequest("req-1");
    ASSERT_OK(found);
    EXPECT_EQ(*found, "r-1");
    auto none = (*store)->FindRequest("req-2");
    ASSERT_OK(none);
    EXPECT_EQ(*none, "");
  }
  auto store = Open();
  ASSERT_OK(store);
  auto found = (*store)->FindRequest("req-1");
  ASSERT_OK(found);
  EXPECT_EQ(*found, "r-1");
  ASSERT_OK((*store)->Delete("r-1"));
  found = (*store)->FindRequest("req-1");
  ASSERT_OK(found);
  EXPECT_EQ(*found, "") << "gone with its job";
}

// PostgreSQL: writes queue while the server restarts, and Sync returns
// once they are committed; nothing is lost.
class PgJobStoreTest : public testing::PostgresTest {};

TEST_F(PgJobStoreTest, WritesOutliveAServerRestart) {
  auto store = PgJobStore::Open({server_->conninfo()});
  ASSERT_OK(store);
  ASSERT_OK((*store)->Create(EndedJob("p", 1, v1::PENDING)));
  ASSERT_OK((*store)->Sync());
  ASSERT_OK(server_->Stop());
  ASSERT_OK((*store)->Create(EndedJob("p", 2, v1::PENDING)));
  EXPECT_FALSE((*store)->Synced());
  ASSERT_OK(server_->Restart());
  ASSERT_OK((*store)->Sync());
  EXPECT_TRUE((*store)->Synced());
  auto jobs = (*store)->LoadResident();
  ASSERT_OK(jobs);
  EXPECT_EQ(Ids(*jobs), (std::vector<std::string>{"p-1", "p-2"}));
}

TEST_F(PgJobStoreTest, AWriteTheServerRefusesStopsTheStoreAndSyncSaysWhy) {
  auto store = PgJobStore::Open({server_->conninfo()});
  ASSERT_OK(store);
  ASSERT_OK((*store)->Create(EndedJob("d", 1, v1::PENDING)));
  ASSERT_OK((*store)->Create(EndedJob("d", 1, v1::PENDING))) << "found at commit";
  absl::Status synced = (*store)->Sync();
  EXPECT_THAT(synced, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(synced.message(), ::testing::HasSubstr("duplicate key"));
  EXPECT_THAT((*store)->Create(EndedJob("d", 2, v1::PENDING)), IsError());
}

TEST_F(PgJobStoreTest, AReadOnlyStoreReadsWhatTheLeaderWroteAndWritesNothing) {
  auto leader = PgJobStore::Open({server_->conninfo()});
  ASSERT_OK(leader);
  ASSERT_OK((*leader)->Create(EndedJob("seen", 1, v1::SUCCEEDED)));
  ASSERT_OK((*leader)->Sync());
  PgJobStoreOptions options{server_->conninfo()};
  options.read_only = true;
  auto standby = PgJobStore::Open(options);
  ASSERT_OK(standby);
  EXPECT_EQ((*standby)->Load("seen-1")->state(), v1::SUCCEEDED);
  absl::Status refused = (*standby)->Create(EndedJob("other", 2, v1::PENDING));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition)) << refused;
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("writes nothing"));
  EXPECT_OK((*standby)->Sync());
  EXPECT_THAT((*standby)->Load("other-2"), IsError());
}

TEST_F(PgJobStoreTest, AVersion4StoreIsUpgradedInPlace) {
  {
    auto store = PgJobStore::Open({server_->conninfo()});
    ASSERT_OK(store);
    ASSERT_OK((*store)->Create(EndedJob("kept", 1, v1::SUCCEEDED)));
    ASSERT_OK((*store)->Sync());
  }
  auto db = PgDb::Connect(server_->conninfo());
  ASSERT_OK(db);
  // As a version 4 store was: no code archives, no rendezvous keys.
  ASSERT_OK(
      (*db)->Exec("DROP TABLE code_archives, code_chunks, rendezvous_keys; "
                  "DELETE FROM schema_version WHERE version > 4"));
  auto store = PgJobStore::Open({server_->conninfo()});
  ASSERT_OK(store);
  EXPECT_OK((*store)->Load("kept-1").status());
  auto version = (*db)->Query("SELECT max(version) FROM schema_version");
  ASSERT_OK(version);
  EXPECT_EQ(version->Int(0, 0), PgJobStore::kSchemaVersion);
  EXPECT_OK(
      (*db)->Query("SELECT count(*) FROM code_archives, code_chunks, rendezvous_keys").status());
}

TEST_F(PgJobStoreTest, RefusesAnUnknownSchemaVersionAndNumbersNeverRepeat) {
  {
    auto store = PgJobStore::Open({server_->conninfo()});
    ASSERT_OK(store);
    EXPECT_EQ(*(*store)->NextJobNumber(), 1);
    EXPECT_EQ(*(*store)->NextJobNumber(), 2);
  }
  auto store = PgJobStore::Open({server_->conninfo()});
  ASSERT_OK(store);
  EXPECT_EQ(*(*store)->NextJobNumber(), 3) << "across a reopen";
  auto db = PgDb::Connect(server_->conninfo());
  ASSERT_OK(db);
  ASSERT_OK((*db)->Exec("INSERT INTO schema_version VALUES (99)"));
  EXPECT_THAT(PgJobStore::Open({server_->conninfo()}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace ringmaster
