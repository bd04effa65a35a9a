#include "coordinator/job_store.h"

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

std::string TempDbPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  return path;
}

v1::StateChange Change(v1::JobState state, v1::Reason reason,
                       const std::string& message) {
  v1::StateChange change;
  change.set_state(state);
  change.set_reason(reason);
  change.set_message(message);
  return change;
}

TEST(JobStoreTest, JobsAndHistorySurviveReopen) {
  const std::string path = TempDbPath("jobs.db");
  {
    auto store = JobStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto n1 = (*store)->NextJobNumber();
    auto n2 = (*store)->NextJobNumber();
    ASSERT_TRUE(n1.ok() && n2.ok());
    EXPECT_EQ(*n1, 1);
    EXPECT_EQ(*n2, 2);

    v1::Job job;
    job.set_id("a-1");
    job.set_state(v1::PENDING);
    job.mutable_spec()->set_name("a");
    *job.add_history() = Change(v1::PENDING, v1::SUBMITTED, "submitted");
    ASSERT_TRUE((*store)->Create(job).ok());
    EXPECT_FALSE((*store)->Create(job).ok()) << "duplicate id must be refused";

    v1::StateChange running = Change(v1::STARTING, v1::SCHEDULED, "placed");
    job.set_state(v1::STARTING);
    *job.add_history() = running;
    ASSERT_TRUE((*store)->RecordTransition(job, running).ok());
  }
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok());
  auto jobs = (*store)->LoadAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  const v1::Job& job = (*jobs)[0];
  EXPECT_EQ(job.id(), "a-1");
  EXPECT_EQ(job.state(), v1::STARTING);
  ASSERT_EQ(job.history_size(), 2);
  EXPECT_EQ(job.history(0).reason(), v1::SUBMITTED);
  EXPECT_EQ(job.history(1).message(), "placed");
  auto n3 = (*store)->NextJobNumber();
  ASSERT_TRUE(n3.ok());
  EXPECT_EQ(*n3, 3) << "job numbers are never reused across restarts";
}

TEST(JobStoreTest, RefusesUnknownSchemaVersion) {
  const std::string path = TempDbPath("future.db");
  {
    auto db = SqliteDb::Open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("CREATE TABLE schema_version (version INTEGER);"
                            "INSERT INTO schema_version VALUES (99);")
                    .ok());
  }
  auto store = JobStore::Open(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringmaster
