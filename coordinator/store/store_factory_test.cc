// The store factory: each --store scheme to its engine, and what each
// engine gives, against a real SQLite file and a real PostgreSQL.
#include "coordinator/store/store_factory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "testing/postgres_server.h"
#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

using ::ringmaster::testing::MakeTempDir;
using ::ringmaster::testing::PostgresServer;
using ::testing::HasSubstr;

v1::Job AJob(const std::string& id) {
  v1::Job job;
  job.set_id(id);
  job.set_state(v1::PENDING);
  job.set_revision(1);
  return job;
}

TEST(StoreFactoryTest, AnEngineItDoesNotHaveIsRefusedNamingThoseItHas) {
  absl::StatusOr<StoreConfig> config = ParseStoreConfig("mysql://db/jobs", "", "/x");
  ASSERT_OK(config);
  absl::StatusOr<std::unique_ptr<StoreEngine>> engine = OpenStoreEngine(*config, "/x");
  EXPECT_THAT(engine.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(engine.status().message(),
              HasSubstr("no store engine \"mysql\"; this coordinator has sqlite, postgresql"));
}

TEST(StoreFactoryTest, SqliteIsOneCoordinatorsFileInItsStateDir) {
  const std::string dir = MakeTempDir("store_factory");
  absl::StatusOr<StoreConfig> config = ParseStoreConfig("", "", dir);
  ASSERT_OK(config);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StoreEngine> engine, OpenStoreEngine(*config, dir));
  EXPECT_FALSE(engine->shared());
  EXPECT_EQ(engine->label(), "sqlite://" + dir + "/coordinator.db");
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<JobStore> store, engine->OpenJobStore(0));
    ASSERT_OK(store->Create(AJob("job-1")));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<JobStore> again, engine->OpenJobStore(0));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Job> jobs, again->LoadResident());
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].id(), "job-1");

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RendezvousJournal> journal,
                       engine->OpenRendezvousJournal(0));
  EXPECT_EQ(journal, nullptr) << "the keys stay in memory";
  EXPECT_EQ(engine->OpenCodeArchives(0), nullptr);
  EXPECT_THAT(engine->OpenJobReader().status(), StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(engine->OpenLease({"a", "a:1"}).status(), StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(engine->SharedCredentialKey("local-key").status(),
              StatusIs(absl::StatusCode::kUnimplemented))
      << "the state directory's files are the keys";
}

TEST(StoreFactoryTest, PostgresqlIsSharedElectedAndFenced) {
  if (std::string why = PostgresServer::Unavailable(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PostgresServer> pg, PostgresServer::Start());
  const std::string uri =
      absl::StrCat("postgresql://ringmaster@127.0.0.1:", pg->port(), "/ringmaster");
  ASSERT_OK_AND_ASSIGN(StoreConfig config, ParseStoreConfig(uri, "", "/x"));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<StoreEngine> engine, OpenStoreEngine(config, "/x"));
  EXPECT_TRUE(engine->shared());

  // The first coordinator's key becomes everyone's; a rotation replaces
  // it for everyone.
  const std::string key_one(32, '1'), key_two(32, '2'), key_three(32, '3');
  ASSERT_OK_AND_ASSIGN(std::string first, engine->SharedCredentialKey(key_one));
  ASSERT_OK_AND_ASSIGN(std::string second, engine->SharedCredentialKey(key_two));
  EXPECT_EQ(first, key_one);
  EXPECT_EQ(second, key_one);
  ASSERT_OK(engine->RotateSharedCredentialKey(key_three));
  ASSERT_OK_AND_ASSIGN(std::string rotated, engine->SharedCredentialKey(key_two));
  EXPECT_EQ(rotated, key_three);

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Lease> lease,
                       engine->OpenLease({"c1", "c1:7070", absl::Seconds(5)}));
  ASSERT_OK_AND_ASSIGN(LeaseState state, lease->Step());
  ASSERT_TRUE(state.leader) << "the first to ask an empty lease takes it";
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<JobStore> store, engine->OpenJobStore(state.term));
    ASSERT_OK(store->Create(AJob("job-1")));
    ASSERT_OK(store->Sync());
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<JobStore> reader, engine->OpenJobReader());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Job> jobs, reader->LoadResident());
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_THAT(reader->Create(AJob("job-2")), StatusIs(absl::StatusCode::kFailedPrecondition));

  // A store of a term the lease does not have writes nothing.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<JobStore> deposed, engine->OpenJobStore(state.term + 1));
  absl::Status put = deposed->Create(AJob("job-3"));
  if (put.ok()) put = deposed->Sync();
  EXPECT_THAT(put, IsError()) << "fenced by the lease's term";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<RendezvousJournal> journal,
                       engine->OpenRendezvousJournal(state.term));
  EXPECT_NE(journal, nullptr);
  EXPECT_NE(engine->OpenCodeArchives(state.term), nullptr);
  ASSERT_OK(lease->Release());
}

}  // namespace
}  // namespace ringmaster
