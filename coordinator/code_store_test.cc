#include "coordinator/code_store.h"

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/fake_clock.h"
#include "common/status_macros.h"
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

  std::string dir_;
  CodeStoreOptions options_;
  FakeClock clock_;
};

TEST_F(CodeStoreTest, UploadedOnceReadBackInPieces) {
  auto store = Open();
  const std::string data = "an archive's bytes";
  EXPECT_FALSE(store->Use(HashOf(data)).has_value());
  auto first = Put(*store, data);
  ASSERT_OK(first) << first.status();
  EXPECT_FALSE(*first);
  EXPECT_EQ(store->Use(HashOf(data)), static_cast<int64_t>(data.size()));
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
  EXPECT_EQ(store->Read(HashOf("other"), 0, 10, &size).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CodeStoreTest, WrongHashOrSizeStoresNothing) {
  auto store = Open();
  auto upload = store->BeginUpload(HashOf("expected"), 8);
  ASSERT_OK(upload);
  ASSERT_OK((*upload)->Append("tampered"));
  auto committed = (*upload)->Commit();
  EXPECT_EQ(committed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(committed.status().message(),
              HasSubstr("have SHA-256 " + HashOf("tampered") + ", not " + HashOf("expected")));
  upload->reset();
  EXPECT_FALSE(store->Use(HashOf("expected")).has_value());

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
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.status().message(), HasSubstr("takes 1 to 1000 (--max-upload-mb)"));
  EXPECT_THAT(store->BeginUpload("../../etc/passwd", 5).status().message(),
              HasSubstr("64 lowercase hex digits"));
  auto a = store->BeginUpload(HashOf("a"), 1);
  auto b = store->BeginUpload(HashOf("b"), 1);
  ASSERT_OK(a);
  ASSERT_OK(b);
  auto c = store->BeginUpload(HashOf("c"), 1);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
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
  EXPECT_FALSE(store->Use(HashOf("old")).has_value());
  EXPECT_FALSE(fs::exists(dir_ + "/" + HashOf("old") + ".tar.gz"));
  EXPECT_TRUE(store->Use(HashOf("live")).has_value());
  EXPECT_TRUE(store->Use(HashOf("recent")).has_value());
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
  EXPECT_EQ(store->Use(HashOf("kept")), 4);
  EXPECT_FALSE(fs::exists(dir_ + "/.upload-leftover"));
}

}  // namespace
}  // namespace ringmaster
