#include "worker/rank_log.h"
#include "testing/status_matchers.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

const absl::Time kT0 = absl::FromUnixNanos(1795428000123456789);  // 2026-11-23T10:00:00.123456789Z

std::string Render(absl::string_view records, bool timestamps, bool* mid_line) {
  std::string out;
  const size_t used = RenderRecords(records, timestamps, mid_line, &out);
  EXPECT_EQ(used, records.rfind('\n') + 1);
  return out;
}

std::string Render(absl::string_view records, bool timestamps = false) {
  bool mid_line = false;
  return Render(records, timestamps, &mid_line);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string TempPath(const std::string& name) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::remove(path.c_str());
  return path;
}

TEST(RankLogTest, ARecordIsTheTimeATagAndTheText) {
  std::string records;
  AppendRecords(kT0, "loss 0.5", true, &records);
  AppendRecords(kT0 + absl::Seconds(1), "epoch 1", false, &records);
  EXPECT_EQ(records,
            "2026-11-23T10:00:00.123456789Z F loss 0.5\n"
            "2026-11-23T10:00:01.123456789Z P epoch 1\n");
  // Whole seconds keep their nine digits: the prefix has one width.
  std::string whole;
  AppendRecords(absl::FromUnixSeconds(1795428000), "", true, &whole);
  EXPECT_EQ(whole, "2026-11-23T10:00:00.000000000Z F \n");
  EXPECT_EQ(whole.size(), kRecordPrefixBytes + 1);
}

TEST(RankLogTest, ALongLineIsSplitIntoPiecesThatRenderAsOneLine) {
  const std::string line(2 * kMaxRecordText + 5, 'x');
  std::string records;
  AppendRecords(kT0, line, true, &records);
  EXPECT_EQ(std::count(records.begin(), records.end(), '\n'), 3);
  EXPECT_EQ(records.find(" F "), records.size() - 5 - 1 - kRecordPrefixBytes + kTimestampBytes)
      << "only the last piece ends the line";
  EXPECT_EQ(Render(records), line + "\n");
  EXPECT_EQ(Render(records, /*timestamps=*/true), "2026-11-23T10:00:00.123456789Z " + line + "\n");
}

TEST(RankLogTest, RendersTheOutputWithOrWithoutEachLinesFirstTime) {
  std::string records;
  AppendRecords(kT0, "step 1", true, &records);
  AppendRecords(kT0 + absl::Milliseconds(5), "progress 10%", false, &records);
  AppendRecords(kT0 + absl::Milliseconds(9), " 20%", true, &records);
  AppendRecords(kT0 + absl::Seconds(2), "", true, &records);
  EXPECT_EQ(Render(records), "step 1\nprogress 10% 20%\n\n");
  EXPECT_EQ(Render(records, true),
            "2026-11-23T10:00:00.123456789Z step 1\n"
            "2026-11-23T10:00:00.128456789Z progress 10% 20%\n"
            "2026-11-23T10:00:02.123456789Z \n");
}

// A read that ends inside a line says so, and the next read's first piece
// takes no timestamp of its own.
TEST(RankLogTest, AReadThatEndsInsideALineContinuesIt) {
  std::string first, second;
  AppendRecords(kT0, "epoch 1: ", false, &first);
  AppendRecords(kT0 + absl::Seconds(3), "done", true, &second);
  bool mid_line = false;
  EXPECT_EQ(Render(first, true, &mid_line), "2026-11-23T10:00:00.123456789Z epoch 1: ");
  EXPECT_TRUE(mid_line);
  EXPECT_EQ(Render(second, true, &mid_line), "done\n");
  EXPECT_FALSE(mid_line);
}

TEST(RankLogTest, OnlyWholeRecordsAreUsedAndOtherLinesPassAsTheyAre) {
  std::string records;
  AppendRecords(kT0, "whole", true, &records);
  const size_t whole = records.size();
  records += "2026-11-23T10:00:00.123456789Z F half wri";
  std::string out;
  bool mid_line = false;
  EXPECT_EQ(RenderRecords(records, false, &mid_line, &out), whole);
  EXPECT_EQ(out, "whole\n");
  // A log of an older worker holds the rank's output as it was.
  EXPECT_EQ(Render("plain output\nmore\n", true), "plain output\nmore\n");
}

class TailTest : public ::testing::Test {
 protected:
  int64_t Tail(const std::string& records, int lines) {
    const std::string path = TempPath("tail.log");
    std::ofstream(path) << records;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    absl::StatusOr<int64_t> offset = TailOffset(fd, records.size(), lines);
    close(fd);
    EXPECT_OK(offset) << offset.status();
    return offset.value_or(-1);
  }
  std::string TailText(const std::string& records, int lines) {
    const int64_t offset = Tail(records, lines);
    return offset < 0 ? "" : Render(absl::string_view(records).substr(offset));
  }
};

TEST_F(TailTest, BeginsAtTheLastLines) {
  std::string records;
  for (int i = 0; i < 5; ++i) AppendRecords(kT0, "line " + std::to_string(i), true, &records);
  EXPECT_EQ(TailText(records, 2), "line 3\nline 4\n");
  EXPECT_EQ(TailText(records, 1), "line 4\n");
  EXPECT_EQ(Tail(records, 5), 0);
  EXPECT_EQ(Tail(records, 50), 0);
  EXPECT_EQ(Tail("", 3), 0);
}

// A line in pieces is one line, and a last line still being written is
// one of the tail's.
TEST_F(TailTest, CountsLinesNotPieces) {
  std::string records;
  AppendRecords(kT0, "first", true, &records);
  AppendRecords(kT0, std::string(kMaxRecordText * 3, 'a'), true, &records);
  AppendRecords(kT0, "third", true, &records);
  AppendRecords(kT0, "fourth, so far", false, &records);
  EXPECT_EQ(TailText(records, 1), "fourth, so far");
  EXPECT_EQ(TailText(records, 2), "third\nfourth, so far");
  EXPECT_EQ(TailText(records, 3), std::string(kMaxRecordText * 3, 'a') + "\nthird\nfourth, so far");
  EXPECT_EQ(Tail(records, 4), 0);
}

// Blocks are read from the end: a tail far back in a big log, and a record
// that straddles two blocks.
TEST_F(TailTest, FindsLinesAcrossBlocks) {
  std::string records;
  for (int i = 0; i < 20000; ++i) AppendRecords(kT0, "line " + std::to_string(i), true, &records);
  records += "2026-11-23T10:00:00.123456789Z F being writ";  // no newline yet
  std::string expected;
  for (int i = 20000 - 3000; i < 20000; ++i) expected += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(TailText(records, 3000), expected);
}

TEST(LogPumpTest, TimesEachLineItReadsAndEndsWhenThePipeCloses) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  const std::string path = TempPath("pump.log");
  absl::Time now = kT0;
  absl::StatusOr<std::unique_ptr<LogPump>> pump =
      LogPump::Start(fds[0], path, [&now] { return now; });
  ASSERT_OK(pump) << pump.status();
  const std::string text = "one\ntwo\nno newline";
  ASSERT_EQ(write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fds[1]);
  (*pump)->Finish(absl::Seconds(30));
  EXPECT_EQ(ReadFile(path),
            "2026-11-23T10:00:00.123456789Z F one\n"
            "2026-11-23T10:00:00.123456789Z F two\n"
            "2026-11-23T10:00:00.123456789Z P no newline\n");
}

// A process that escaped its group and holds the pipe does not hold up the
// rank's end: Finish gives up after its timeout.
TEST(LogPumpTest, FinishGivesUpOnAPipeStillHeldOpen) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  const std::string path = TempPath("held.log");
  absl::StatusOr<std::unique_ptr<LogPump>> pump = LogPump::Start(fds[0], path);
  ASSERT_OK(pump) << pump.status();
  ASSERT_EQ(write(fds[1], "kept\n", 5), 5);
  (*pump)->Finish(absl::Milliseconds(50));
  close(fds[1]);
  EXPECT_NE(ReadFile(path).find(" F kept\n"), std::string::npos) << ReadFile(path);
}

TEST(LogPumpTest, AnUnwritableLogIsAnErrorNamingIt) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  absl::StatusOr<std::unique_ptr<LogPump>> pump =
      LogPump::Start(fds[0], "/nonexistent-dir/rank-0.log");
  close(fds[1]);
  ASSERT_THAT(pump, IsError());
  EXPECT_EQ(pump.status().message(),
            "cannot open /nonexistent-dir/rank-0.log: No such file or directory");
}

}  // namespace
}  // namespace ringmaster
