#include "worker/agent_service.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "worker/rank_log.h"

namespace ringmaster {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1795428000);  // 2026-11-23T10:00:00Z

v1::ReadLogRequest At(int64_t offset) {
  v1::ReadLogRequest request;
  request.set_offset(offset);
  request.set_max_bytes(100);
  return request;
}

std::string WriteLog(const std::string& name) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::string records;
  AppendRecords(kT0, "hello", true, &records);
  AppendRecords(kT0 + absl::Seconds(1), "world", true, &records);
  AppendRecords(kT0 + absl::Seconds(2), "epoch 2 ", false, &records);
  std::ofstream(path) << records;
  return path;
}

TEST(ReadLogFileTest, ReadsWholeLinesFromTheOffset) {
  const std::string path = WriteLog("read.log");
  absl::StatusOr<v1::ReadLogResponse> read = ReadLogFile(path, "job j-1 rank 0", At(0));
  ASSERT_OK(read) << read.status();
  EXPECT_EQ(read->data(), "hello\nworld\nepoch 2 ");
  EXPECT_TRUE(read->mid_line());
  const int64_t second = kRecordPrefixBytes + 6;
  read = ReadLogFile(path, "job j-1 rank 0", At(second));
  ASSERT_OK(read) << read.status();
  EXPECT_EQ(read->data(), "world\nepoch 2 ");
  EXPECT_EQ(read->next_offset(), 3 * kRecordPrefixBytes + 6 + 6 + 9);
}

TEST(ReadLogFileTest, TailsAndTimestampsAsAsked) {
  const std::string path = WriteLog("tail.log");
  v1::ReadLogRequest request = At(0);
  request.set_tail_lines(2);
  request.set_timestamps(true);
  absl::StatusOr<v1::ReadLogResponse> read = ReadLogFile(path, "job j-1 rank 0", request);
  ASSERT_OK(read) << read.status();
  EXPECT_EQ(read->data(),
            "2026-11-23T10:00:01.000000000Z world\n"
            "2026-11-23T10:00:02.000000000Z epoch 2 ");
  // Continuing a line begun in the read before: no timestamp of its own.
  request = At(0);
  request.set_timestamps(true);
  request.set_mid_line(true);
  read = ReadLogFile(path, "job j-1 rank 0", request);
  ASSERT_OK(read) << read.status();
  EXPECT_EQ(read->data().substr(0, 6), "hello\n");
}

// A caller learns which log is missing, not where this worker keeps logs.
TEST(ReadLogFileTest, ErrorsNameTheLogNotItsPath) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  absl::StatusOr<v1::ReadLogResponse> missing =
      ReadLogFile(dir + "/nothing/rank-3.log", "job j-1 rank 3", At(0));
  EXPECT_THAT(missing.status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(missing.status().message(), "no log of job j-1 rank 3");
  absl::StatusOr<v1::ReadLogResponse> directory = ReadLogFile(dir, "job j-1 rank 4", At(0));
  EXPECT_THAT(directory, IsError());
  EXPECT_EQ(std::string(directory.status().message()).find(dir), std::string::npos)
      << directory.status();
}

}  // namespace
}  // namespace ringmaster
