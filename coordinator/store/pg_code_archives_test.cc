// PgCodeArchives against a real PostgreSQL started by the test: archives
// of several chunks stored and read at any offset, a second put of the
// same bytes, the listing, and a removal fenced by the lease term.
#include "coordinator/store/pg_code_archives.h"

#include <cstdio>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "common/sha256.h"
#include "coordinator/store/leader_lease.h"
#include "coordinator/store/pg_job_store.h"
#include "testing/postgres_server.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

class PgCodeArchivesTest : public testing::PostgresTest {
 protected:
  void SetUp() override {
    PostgresTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_OK(PgJobStore::Open({server_->conninfo()}));  // makes the tables
  }

  // A file of `bytes` random bytes; its hash in `*sha256`.
  std::string File(int64_t bytes, std::string* sha256) {
    std::string data(static_cast<size_t>(bytes), '\0');
    std::mt19937 random(static_cast<unsigned>(bytes));
    for (char& c : data) c = static_cast<char>(random());
    const std::string path = absl::StrCat(server_->dir(), "/archive-", bytes);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    std::fwrite(data.data(), 1, data.size(), f);
    std::fclose(f);
    Sha256 hash;
    hash.Update(data);
    *sha256 = hash.HexDigest();
    contents_[*sha256] = data;
    return path;
  }

  std::map<std::string, std::string> contents_;
};

TEST_F(PgCodeArchivesTest, AnArchiveOfSeveralChunksReadsBackAtAnyOffset) {
  PgCodeArchives archives({server_->conninfo()}, 0);
  const int64_t bytes = 2 * PgCodeArchives::kChunkBytes + 12345;
  std::string sha256;
  const std::string path = File(bytes, &sha256);
  ASSERT_OK(archives.Put(sha256, path, bytes));
  EXPECT_EQ(*archives.Size(sha256), bytes);
  const std::string& data = contents_[sha256];
  // A worker's reads: a MiB at a time from 0, and reads across chunks.
  std::string whole;
  for (int64_t offset = 0; offset < bytes; offset += PgCodeArchives::kChunkBytes) {
    absl::StatusOr<std::string> piece = archives.Read(sha256, offset, PgCodeArchives::kChunkBytes);
    ASSERT_OK(piece);
    whole += *piece;
  }
  EXPECT_EQ(whole, data);
  const int64_t across = PgCodeArchives::kChunkBytes - 100;
  EXPECT_EQ(*archives.Read(sha256, across, 300), data.substr(across, 300));
  EXPECT_EQ(*archives.Read(sha256, bytes - 5, 100), data.substr(bytes - 5));
  EXPECT_EQ(*archives.Read(sha256, bytes, 100), "");
}

TEST_F(PgCodeArchivesTest, ASecondPutOfTheSameBytesAndTheListing) {
  PgCodeArchives one({server_->conninfo()}, 0);
  PgCodeArchives other({server_->conninfo()}, 0);
  std::string a;
  std::string b;
  const std::string a_path = File(10, &a);
  const std::string b_path = File(PgCodeArchives::kChunkBytes, &b);
  ASSERT_OK(one.Put(a, a_path, 10));
  ASSERT_OK(other.Put(a, a_path, 10));
  ASSERT_OK(other.Put(b, b_path, PgCodeArchives::kChunkBytes));
  EXPECT_THAT(*one.List(),
              ::testing::UnorderedElementsAre(Pair(a, 10), Pair(b, PgCodeArchives::kChunkBytes)));
  EXPECT_THAT(one.Size(std::string(64, '0')).status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(PgCodeArchivesTest, AFileShorterThanItsSizeStoresNothing) {
  PgCodeArchives archives({server_->conninfo()}, 0);
  std::string sha256;
  const std::string path = File(100, &sha256);
  absl::Status s = archives.Put(sha256, path, PgCodeArchives::kChunkBytes + 1);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss)) << s;
  EXPECT_THAT(s.message(), HasSubstr("ended early"));
  EXPECT_TRUE(archives.List()->empty());
  EXPECT_EQ(*archives.Read(sha256, 0, 100), "") << "no chunk left behind";
}

TEST_F(PgCodeArchivesTest, ADeposedLeaderCannotRemoveAnArchive) {
  FakeClock clock;
  auto db = PgDb::Connect(server_->conninfo());
  ASSERT_OK(db);
  ASSERT_OK(LeaderLease::CreateTable(db->get()));
  LeaderLease lease(db->get(), &clock, {"a", "a:7070", absl::Seconds(5)});
  ASSERT_OK(lease.Step());
  for (int i = 0; i < 6 && !lease.state().leader; ++i) {
    clock.Advance(absl::Seconds(1));
    ASSERT_OK(lease.Step());
  }
  ASSERT_TRUE(lease.state().leader);
  const int64_t term = lease.state().term;
  std::string kept;
  std::string gone;
  const std::string kept_path = File(7, &kept);
  const std::string gone_path = File(8, &gone);
  PgCodeArchives leader({server_->conninfo()}, LeaderLease::FenceOf(term));
  ASSERT_OK(leader.Put(kept, kept_path, 7));
  ASSERT_OK(leader.Put(gone, gone_path, 8));
  ASSERT_OK(leader.Remove(gone));
  EXPECT_THAT(leader.Size(gone).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(*leader.Read(gone, 0, 8), "");

  // Another coordinator takes over: the first one's term no longer fences.
  ASSERT_OK(lease.Release());
  auto other_db = PgDb::Connect(server_->conninfo());
  ASSERT_OK(other_db);
  LeaderLease other(other_db->get(), &clock, {"b", "b:7070", absl::Seconds(5)});
  ASSERT_OK(other.Step());
  ASSERT_TRUE(other.state().leader);
  absl::Status refused = leader.Remove(kept);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("not the leader"));
  EXPECT_EQ(*leader.Size(kept), 7);
}

}  // namespace
}  // namespace ringmaster
