#include "worker/error_file.h"
#include "testing/status_matchers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

class ErrorFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    ASSERT_OK(PrepareErrorDir(dir_, std::nullopt));
  }
  // The message read after the rank wrote `text`.
  std::string Write(const std::string& text) {
    std::ofstream(dir_ + "/error.json") << text;
    return Read();
  }
  std::string Read() { return ReadRankError(dir_, geteuid()); }
  std::string dir_;
};

TEST_F(ErrorFileTest, ReadsTorchrunsRecordFormatAndThePlainOne) {
  // As torch.distributed.elastic.multiprocessing.errors.record writes it.
  EXPECT_EQ(Write(R"({"message": {"message": "ValueError: bad input",
      "extraInfo": {"py_callstack": "Traceback ...\nValueError: bad input\n",
                    "timestamp": "1763870000"}}})"),
            "ValueError: bad input");
  EXPECT_EQ(Write(R"({"message": "RuntimeError: two\nlines"})"), "RuntimeError: two lines");
}

TEST_F(ErrorFileTest, NothingFromAMissingMalformedHugeOrLinkedFile) {
  EXPECT_EQ(Read(), "");
  EXPECT_EQ(Write("not json"), "");
  EXPECT_EQ(Write(R"({"error": "x"})"), "");
  EXPECT_EQ(Write(R"({"message": 3})"), "");
  EXPECT_EQ(Write(std::string(kMaxErrorFileBytes + 1, ' ')), "");
  // A rank may not make the worker read another file for it.
  const std::string secret = dir_ + "/../secret.json";
  std::ofstream(secret) << R"({"message": "the worker's secret"})";
  std::filesystem::remove(dir_ + "/error.json");
  std::filesystem::create_symlink(secret, dir_ + "/error.json");
  EXPECT_EQ(Read(), "");
}

TEST_F(ErrorFileTest, LongMessagesAreCutAndAnEarlierAttemptsFileIsRemoved) {
  const std::string line =
      Write("{\"message\": \"" + std::string(2 * kMaxErrorMessageBytes, 'x') + "\"}");
  EXPECT_EQ(line.size(), kMaxErrorMessageBytes + 3);
  EXPECT_EQ(line.substr(line.size() - 3), "...");
  ASSERT_OK(PrepareErrorDir(dir_, std::nullopt));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/error.json")) << "a new attempt starts clean";
  struct stat st;
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// The rank's group may write the error directory; the worker keeps it. A
// directory an earlier attempt's rank locked (mode 0, its own) is taken back.
TEST_F(ErrorFileTest, TheDirectoryIsTheWorkersInTheRanksGroup) {
  if (geteuid() != 0) GTEST_SKIP() << "giving a directory to another user needs root";
  RunAs nobody;
  nobody.uid = 65534;
  nobody.gid = 65534;
  ASSERT_OK(MakeRankDir(dir_, nobody));
  ASSERT_EQ(chmod(dir_.c_str(), 0), 0);
  ASSERT_OK(PrepareErrorDir(dir_, nobody));
  struct stat st;
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_gid, 65534u);
  EXPECT_EQ(st.st_mode & 0777, 0770u);

  ASSERT_OK(MakeRankDir(dir_, nobody));
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// Only a file of the rank's own user is read: a file of another, such as
// one a hard link names, says nothing of the rank.
TEST_F(ErrorFileTest, AFileOfAnotherUserIsNotRead) {
  Write(R"({"message": "the worker's own"})");
  EXPECT_EQ(ReadRankError(dir_, geteuid() + 1), "");
  EXPECT_EQ(ReadRankError(dir_, geteuid()), "the worker's own");
}

}  // namespace
}  // namespace ringmaster
