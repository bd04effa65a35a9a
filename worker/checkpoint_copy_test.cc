#include "worker/checkpoint_copy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/unique_fd.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class CheckpointCopyTest : public ::testing::Test {
 protected:
  CheckpointCopyTest() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = fs::path(tmp ? tmp : "/tmp") /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(from_ = root_ / "old-1");
    fs::create_directories(to_ = root_ / "new-2");
  }
  ~CheckpointCopyTest() override { fs::remove_all(root_); }

  static void Write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }
  static std::string Read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  absl::StatusOr<CheckpointCopied> Copy(const std::optional<RunAs>& owner = std::nullopt,
                                        const CheckpointCopyLimits& limits = {},
                                        const std::optional<RunAs>& reader = std::nullopt) {
    UniqueFd from(open(from_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    UniqueFd to(open(to_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    return CopyCheckpointTree(from.get(), to.get(), owner, reader, limits);
  }

  fs::path root_, from_, to_;
};

TEST_F(CheckpointCopyTest, TheTreeIsCopiedWithItsModes) {
  fs::create_directories(from_ / "step-100");
  Write(from_ / "step-100" / "state.bin", std::string(300000, 'x'));
  Write(from_ / "latest", "step-100\n");
  chmod((from_ / "latest").c_str(), 04640);  // setuid is not copied
  ASSERT_OK_AND_ASSIGN(CheckpointCopied copied, Copy());
  EXPECT_EQ(copied.files, 2);
  EXPECT_EQ(copied.bytes, 300000 + 9);
  EXPECT_EQ(copied.passed_over, 0);
  EXPECT_EQ(Read(to_ / "step-100" / "state.bin"), std::string(300000, 'x'));
  EXPECT_EQ(Read(to_ / "latest"), "step-100\n");
  struct stat st {};
  ASSERT_EQ(stat((to_ / "latest").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640);
}

// What the earlier job's ranks could leave to make the worker read other
// files: a link, a FIFO (which would block an open), and, as root, a hard
// link to a file of another user. None is followed or copied.
TEST_F(CheckpointCopyTest, LinksFifosAndOthersFilesArePassedOver) {
  Write(root_ / "secret", "the worker's\n");
  fs::create_symlink(root_ / "secret", from_ / "link");
  fs::create_directory_symlink(root_, from_ / "dir-link");
  ASSERT_EQ(mkfifo((from_ / "fifo").c_str(), 0600), 0);
  Write(from_ / "mine", "ok");
  int expected_passed = 3;
  if (geteuid() == 0) {
    ASSERT_EQ(chown((root_ / "secret").c_str(), 12345, 12345), 0);
    ASSERT_EQ(link((root_ / "secret").c_str(), (from_ / "hard").c_str()), 0);
    ++expected_passed;
  }
  ASSERT_OK_AND_ASSIGN(CheckpointCopied copied, Copy());
  EXPECT_EQ(copied.files, 1);
  EXPECT_EQ(copied.passed_over, expected_passed);
  EXPECT_TRUE(fs::exists(to_ / "mine"));
  for (const char* name : {"link", "dir-link", "fifo", "hard"}) {
    EXPECT_FALSE(fs::exists(fs::symlink_status(to_ / name))) << name;
  }
}

TEST_F(CheckpointCopyTest, CopiesAreGivenToTheNewJobsUser) {
  if (geteuid() != 0) GTEST_SKIP() << "giving files to another uid needs root";
  Write(from_ / "state.bin", "weights");
  fs::create_directories(from_ / "step-1");
  RunAs job{"job", "/", 200123, 200124, {}};
  // As the worker gives it the directory it copies into.
  ASSERT_EQ(chown(to_.c_str(), job.uid, job.gid), 0);
  ASSERT_OK(Copy(job).status());
  for (const char* name : {"state.bin", "step-1"}) {
    struct stat st {};
    ASSERT_EQ(stat((to_ / name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_uid, 200123u) << name;
    EXPECT_EQ(st.st_gid, 200124u) << name;
  }
}

// Root reads anything; with a reader, only what that uid may. So a worker
// that is not root reads the earlier job's files as that job, and as
// anyone else is refused.
TEST_F(CheckpointCopyTest, TheEarlierJobsFilesAreReadAsItsUidAlone) {
  if (geteuid() != 0) GTEST_SKIP() << "files of other uids need root";
  fs::create_directories(from_ / "step-1");
  Write(from_ / "step-1" / "state.bin", "weights");
  RunAs earlier{"earlier", "/", 200201, 200201, {}};
  RunAs stranger{"stranger", "/", 200202, 200202, {}};
  RunAs job{"job", "/", 200203, 200203, {}};
  for (const fs::path& p : {from_, from_ / "step-1", from_ / "step-1" / "state.bin"}) {
    ASSERT_EQ(chown(p.c_str(), earlier.uid, earlier.gid), 0);
    ASSERT_EQ(chmod(p.c_str(), fs::is_directory(p) ? 0700 : 0600), 0);
  }
  ASSERT_EQ(chown(to_.c_str(), job.uid, job.gid), 0);
  // Refused, and said: not a copy quietly missing what it could not read.
  EXPECT_THAT(Copy(job, {}, stranger).status(),
              StatusIs(absl::StatusCode::kInternal, ::testing::HasSubstr("Permission denied")));
  fs::remove_all(to_);
  fs::create_directories(to_);
  ASSERT_EQ(chown(to_.c_str(), job.uid, job.gid), 0);
  ASSERT_OK_AND_ASSIGN(CheckpointCopied copied, Copy(job, {}, earlier));
  EXPECT_EQ(copied.files, 1);
  EXPECT_EQ(Read(to_ / "step-1" / "state.bin"), "weights");
  struct stat st {};
  ASSERT_EQ(stat((to_ / "step-1" / "state.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, job.uid);
}

// A directory the earlier job made read-only is copied with its mode, after
// what it holds.
TEST_F(CheckpointCopyTest, AReadOnlyDirectoryIsCopiedWhole) {
  if (geteuid() != 0) GTEST_SKIP() << "files of other uids need root";
  RunAs earlier{"earlier", "/", 200211, 200211, {}};
  RunAs job{"job", "/", 200212, 200212, {}};
  fs::create_directories(from_ / "step-1");
  Write(from_ / "step-1" / "state.bin", "weights");
  for (const fs::path& p : {from_, from_ / "step-1", from_ / "step-1" / "state.bin"}) {
    ASSERT_EQ(chown(p.c_str(), earlier.uid, earlier.gid), 0);
  }
  ASSERT_EQ(chmod((from_ / "step-1").c_str(), 0500), 0);
  ASSERT_EQ(chown(to_.c_str(), job.uid, job.gid), 0);
  ASSERT_OK_AND_ASSIGN(CheckpointCopied copied, Copy(job, {}, earlier));
  EXPECT_EQ(copied.files, 1);
  EXPECT_EQ(Read(to_ / "step-1" / "state.bin"), "weights");
  EXPECT_EQ(fs::status(to_ / "step-1").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_exec);
}

TEST_F(CheckpointCopyTest, ATreeBeyondTheLimitsIsRefused) {
  for (int i = 0; i < 5; ++i) Write(from_ / ("f" + std::to_string(i)), "x");
  EXPECT_THAT(Copy(std::nullopt, {3, 32}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::HasSubstr("holds more than 3 entries")));
  fs::remove_all(to_);
  fs::create_directories(to_);
  fs::create_directories(from_ / "a" / "b" / "c");
  EXPECT_THAT(Copy(std::nullopt, {100, 1}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::HasSubstr("more than 1 directories deep")));
}

// A tree removed by RemoveTreeAt takes none of what its links point to.
TEST_F(CheckpointCopyTest, ATreeIsRemovedWithoutFollowingItsLinks) {
  Write(root_ / "kept", "not the tree's");
  fs::create_directories(from_ / "a" / "b");
  Write(from_ / "a" / "b" / "f", "x");
  fs::create_symlink(root_, from_ / "a" / "link-to-root");
  fs::create_symlink(root_ / "kept", from_ / "file-link");
  UniqueFd root(open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  EXPECT_TRUE(RemoveTreeAt(root.get(), "old-1"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(from_)));
  EXPECT_EQ(Read(root_ / "kept"), "not the tree's");
  EXPECT_TRUE(fs::exists(to_));
}

}  // namespace
}  // namespace ringmaster
