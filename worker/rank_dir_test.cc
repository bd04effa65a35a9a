#include "worker/rank_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "testing/test_util.h"

namespace ringmaster {
namespace {

class RankDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("rank-dir");
    secret_ = testing::MakeTempDir("worker") + "/secret";
    std::ofstream(secret_) << "the worker's secret";
  }
  RankDir Open() {
    absl::StatusOr<RankDir> dir = RankDir::Open(dir_, geteuid());
    EXPECT_OK(dir);
    return *std::move(dir);
  }
  std::string dir_;
  std::string secret_;
};

TEST_F(RankDirTest, ReadsARegularFileOfTheRanksOwnWithinBounds) {
  std::ofstream(dir_ + "/stacks") << "0123456789";
  RankDir dir = Open();
  EXPECT_THAT(dir.Read("stacks", 0, 100), IsOkAndHolds(std::string("0123456789")));
  EXPECT_THAT(dir.Read("stacks", 3, 4), IsOkAndHolds(std::string("3456")));
  EXPECT_THAT(dir.Read("stacks", 20, 4), IsOkAndHolds(std::string()));
  EXPECT_THAT(dir.Size("stacks"), IsOkAndHolds(10));
  EXPECT_THAT(dir.Read("none", 0, 10), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(dir.Read("../stacks", 0, 10), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(RankDirTest, RefusesALinkAHardLinkADirectoryAndAFifoWithoutWaiting) {
  ASSERT_EQ(symlink(secret_.c_str(), (dir_ + "/link").c_str()), 0);
  ASSERT_EQ(link(secret_.c_str(), (dir_ + "/hard").c_str()), 0);
  ASSERT_EQ(mkdir((dir_ + "/dir").c_str(), 0700), 0);
  ASSERT_EQ(mkfifo((dir_ + "/fifo").c_str(), 0600), 0);
  RankDir dir = Open();
  EXPECT_THAT(dir.Read("link", 0, 100), StatusIs(absl::StatusCode::kPermissionDenied,
                                                 ::testing::HasSubstr("/link is a link")));
  EXPECT_THAT(dir.Read("hard", 0, 100), StatusIs(absl::StatusCode::kPermissionDenied,
                                                 ::testing::HasSubstr("/hard has 2 links")));
  EXPECT_THAT(dir.Read("dir", 0, 100), StatusIs(absl::StatusCode::kPermissionDenied,
                                                ::testing::HasSubstr("/dir is a directory")));
  // No writer holds the FIFO: a blocking open would never return.
  EXPECT_THAT(dir.Read("fifo", 0, 100), StatusIs(absl::StatusCode::kPermissionDenied,
                                                 ::testing::HasSubstr("/fifo is a FIFO")));
  EXPECT_THAT(dir.Size("fifo"), StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST_F(RankDirTest, RefusesAFileOfAnotherUser) {
  std::ofstream(dir_ + "/error.json") << "{}";
  absl::StatusOr<RankDir> dir = RankDir::Open(dir_, geteuid() + 1);
  ASSERT_OK(dir);
  EXPECT_THAT(dir->Read("error.json", 0, 100),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       ::testing::HasSubstr(absl::StrCat("belongs to uid ", geteuid()))));
}

TEST_F(RankDirTest, TheDirectoryMustBeTheWorkersAndNoLink) {
  const std::string link = testing::MakeTempDir("links") + "/dir";
  ASSERT_EQ(symlink(dir_.c_str(), link.c_str()), 0);
  EXPECT_THAT(RankDir::Open(link, geteuid()), StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(RankDir::Open(dir_ + "/none", geteuid()), StatusIs(absl::StatusCode::kNotFound));
  if (geteuid() != 0) GTEST_SKIP() << "giving the directory to another user needs root";
  ASSERT_EQ(chown(dir_.c_str(), 65534, 65534), 0);
  EXPECT_THAT(RankDir::Open(dir_, geteuid()),
              StatusIs(absl::StatusCode::kPermissionDenied, ::testing::HasSubstr("uid 65534")));
}

}  // namespace
}  // namespace ringmaster
