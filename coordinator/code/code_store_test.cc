#include "coordinator/code/code_store.h"

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/fake_clock.h"
#include "common/status_macros.h"
#include "coordinator/code/fake_shared_code_archives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string HashOf(const std::string& data) {
  Sha256 hash;
  hash.Update(data);
  return hash.HexDigest();
}

class CodeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "code_store_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern + "/code";
    options_.dir = dir_;
    options_.max_archive_bytes = 1000;
    options_.max_concurrent_uploads = 2;
  }
  void TearDown() override { fs::remove_all(fs::path(dir_).parent_path()); }

  std::unique_ptr<CodeStore> Open() {
    auto store = std::make_unique<CodeStore>(options_, &clock_);
    EXPECT_OK(store->Init());
    return store;
  }

  absl::StatusOr<bool> Put(CodeStore& store, const std::string& data) {
    auto upload = store.BeginUpload(HashOf(data), static_cast<int64_t>(data.size()));
    if (!upload.ok()) return upload.status();
    // In two pieces, as a stream brings it.
    RETURN_IF_ERROR((*upload)->Append(data.substr(0, data.size() / 2)));
    RETURN_IF_ERROR((*upload)->Append(data.substr(data.size() / 2)));
    return (*upload)->Commit();
  }

  // The archive's size, nullopt when it is not stored.
  static std::optional<int64_t> Stored(CodeStore& store, const std::string& sha256) {
    absl::StatusOr<std::optional<int64_t>> bytes = store.Use(sha256);
    EXPECT_OK(bytes);
    return bytes.value_or(std::nullopt);
  }

  std::string dir_;
  CodeStoreOptions options_;
  FakeClock clock_;
};

TEST_F(CodeStoreTest, UploadedOnceReadBackInPieces) {
  auto store = Open();
  const std::string data = "an archive's bytes";
  EXPECT_FALSE(Stored(*store, HashOf(data)).has_value());
  auto first = Put(*store, data);
  ASSERT_OK(first) << first.status();
  EXPECT_FALSE(*first);
  EXPECT_EQ(Stored(*store, HashOf(data)), static_cast<int64_t>(data.size()));
  auto again = Put(*store, data);
  ASSERT_OK(again);
  EXPECT_TRUE(*again);  // already stored

  int64_t size = 0;
  auto head = store->Read(HashOf(data), 0, 5, &size);
  auto tail = store->Read(HashOf(data), 5, 1000, &size);
  auto end = store->Read(HashOf(data), static_cast<int64_t>(data.size()), 1000, &size);
  ASSERT_OK(head);
  ASSERT_OK(tail);
  ASSERT_OK(end);
  EXPECT_EQ(*head + *tail, data);
  EXPECT_EQ(*end, "");
  EXPECT_EQ(size, static_cast<int64_t>(data.size()));
  EXPECT_THAT(store->Read(HashOf("other"), 0, 10, &size).status(),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(CodeStoreTest, WrongHashOrSizeStoresNothing) {
  auto store = Open();
  auto upload = store->BeginUpload(HashOf("expected"), 8);
  ASSERT_OK(upload);
  ASSERT_OK((*upload)->Append("tampered"));
  auto committed = (*upload)->Commit();
  EXPECT_THAT(committed.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(committed.status().message(),
              HasSubstr("have SHA-256 " + HashOf("tampered") + ", not " + HashOf("expected")));
  upload->reset();
  EXPECT_FALSE(Stored(*store, HashOf("expected")).has_value());

  upload = store->BeginUpload(HashOf("abc"), 3);
  ASSERT_OK(upload);
  EXPECT_THAT((*upload)->Append("abcd").message(), HasSubstr("longer than the 3 bytes"));
  ASSERT_OK((*upload)->Append("ab"));
  EXPECT_THAT((*upload)->Commit().status().message(), HasSubstr("after 2 of the 3 bytes"));
  upload->reset();
  EXPECT_TRUE(fs::is_empty(dir_));  // no partial file left
}

TEST_F(CodeStoreTest, LimitsNamedInTheError) {
  auto store = Open();
  auto big = store->BeginUpload(HashOf("x"), 1001);
  EXPECT_THAT(big.status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(big.status().message(), HasSubstr("takes 1 to 1000 (--max-upload-mb)"));
  EXPECT_THAT(store->BeginUpload("../../etc/passwd", 5).status().message(),
              HasSubstr("64 lowercase hex digits"));
  auto a = store->BeginUpload(HashOf("a"), 1);
  auto b = store->BeginUpload(HashOf("b"), 1);
  ASSERT_OK(a);
  ASSERT_OK(b);
  auto c = store->BeginUpload(HashOf("c"), 1);
  EXPECT_THAT(c.status(), StatusIs(absl::StatusCode::kResourceExhausted));
  a->reset();  // one ends: room again
  EXPECT_OK(store->BeginUpload(HashOf("c"), 1));
}

TEST_F(CodeStoreTest, UnusedArchivesGoAfterAnHourThoseInUseStay) {
  auto store = Open();
  ASSERT_OK(Put(*store, "old"));
  ASSERT_OK(Put(*store, "live"));
  clock_.Advance(absl::Minutes(50));
  ASSERT_OK(Put(*store, "recent"));
  EXPECT_EQ(store->Prune({}), 0);
  clock_.Advance(absl::Minutes(15));
  // "old" and "live" are 65 minutes unused; "live" belongs to an active job.
  EXPECT_EQ(store->Prune({HashOf("live")}), 1);
  EXPECT_FALSE(Stored(*store, HashOf("old")).has_value());
  EXPECT_FALSE(fs::exists(dir_ + "/" + HashOf("old") + ".tar.gz"));
  EXPECT_TRUE(Stored(*store, HashOf("live")).has_value());
  EXPECT_TRUE(Stored(*store, HashOf("recent")).has_value());
}

TEST_F(CodeStoreTest, ARestartFindsTheArchivesAndDropsCutUploads) {
  {
    auto store = Open();
    ASSERT_OK(Put(*store, "kept"));
    auto cut = store->BeginUpload(HashOf("cut"), 10);
    ASSERT_OK(cut);
    ASSERT_OK((*cut)->Append("12345"));
    // A crash: the partial file stays behind.
    fs::copy_file(fs::directory_iterator(dir_)->path(), dir_ + "/.upload-leftover");
  }
  auto store = Open();
  EXPECT_EQ(Stored(*store, HashOf("kept")), 4);
  EXPECT_FALSE(fs::exists(dir_ + "/.upload-leftover"));
}

// Two coordinators sharing one store: what one took, the other serves.
class SharedCodeStoreTest : public CodeStoreTest {
 protected:
  void SetUp() override {
    CodeStoreTest::SetUp();
    options_.shared = &shared_;
  }
  // The other coordinator's store, on a directory of its own.
  std::unique_ptr<CodeStore> OpenOther() {
    CodeStoreOptions other = options_;
    other.dir = dir_ + "-other";
    auto store = std::make_unique<CodeStore>(other, &clock_);
    EXPECT_OK(store->Init());
    return store;
  }

  FakeSharedCodeArchives shared_;
};

TEST_F(SharedCodeStoreTest, AnUploadIsSharedAndTheOtherCoordinatorServesItFromThere) {
  auto leader = Open();
  const std::string data = "the job's code, uploaded to the first leader";
  ASSERT_OK(Put(*leader, data));
  EXPECT_TRUE(shared_.Holds(HashOf(data)));

  auto next = OpenOther();
  EXPECT_EQ(Stored(*next, HashOf(data)), static_cast<int64_t>(data.size()));
  int64_t size = 0;
  auto head = next->Read(HashOf(data), 0, 10, &size);
  auto tail = next->Read(HashOf(data), 10, 1000, &size);
  ASSERT_OK(head);
  ASSERT_OK(tail);
  auto end = next->Read(HashOf(data), static_cast<int64_t>(data.size()), 1000, &size);
  ASSERT_OK(end);
  EXPECT_EQ(*head + *tail, data);
  EXPECT_EQ(*end, "");
  EXPECT_EQ(size, static_cast<int64_t>(data.size()));
  EXPECT_EQ(shared_.reads(), 2);
  // The first one reads its own file.
  ASSERT_OK(leader->Read(HashOf(data), 0, 1000, &size));
  EXPECT_EQ(shared_.reads(), 2);
}

TEST_F(SharedCodeStoreTest, AnArchiveSharedAfterTheOtherStartedIsFoundWhenAskedFor) {
  auto next = OpenOther();
  auto leader = Open();
  ASSERT_OK(Put(*leader, "late"));
  EXPECT_EQ(Stored(*next, HashOf("late")), 4);
  EXPECT_FALSE(Stored(*next, HashOf("never uploaded")).has_value());
}

TEST_F(SharedCodeStoreTest, NothingIsAcknowledgedOrKeptWhenTheSharedStoreIsDown) {
  auto store = Open();
  shared_.SetDown(absl::UnavailableError("connection refused"));
  auto put = Put(*store, "lost?");
  EXPECT_THAT(put.status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(put.status().message(),
              HasSubstr("cannot keep the archive in the shared store: connection refused"));
  // Not "not stored", which would send a client to upload again for nothing.
  absl::StatusOr<std::optional<int64_t>> asked = store->Use(HashOf("other"));
  EXPECT_THAT(asked.status(), StatusIs(absl::StatusCode::kUnavailable));
  shared_.SetDown(absl::OkStatus());
  EXPECT_FALSE(Stored(*store, HashOf("lost?")).has_value());
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(SharedCodeStoreTest, ArchivesKeptHereAloneAreSharedAtStart) {
  options_.shared = nullptr;
  ASSERT_OK(Put(*Open(), "before sharing"));
  options_.shared = &shared_;
  Open();
  EXPECT_TRUE(shared_.Holds(HashOf("before sharing")));
  EXPECT_EQ(Stored(*OpenOther(), HashOf("before sharing")), 14);
}

TEST_F(SharedCodeStoreTest, PruningRemovesTheSharedCopyToo) {
  auto leader = Open();
  ASSERT_OK(Put(*leader, "mine"));
  ASSERT_OK(Put(*OpenOther(), "another's"));
  ASSERT_TRUE(Stored(*leader, HashOf("another's")).has_value());
  clock_.Advance(absl::Minutes(61));
  EXPECT_EQ(leader->Prune({}), 2);
  EXPECT_FALSE(shared_.Holds(HashOf("mine")));
  EXPECT_FALSE(shared_.Holds(HashOf("another's")));
  EXPECT_FALSE(fs::exists(dir_ + "/" + HashOf("mine") + ".tar.gz"));
}

}  // namespace
}  // namespace ringmaster
