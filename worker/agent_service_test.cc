#include "worker/agent_service.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(ReadLogFileTest, ReadsFromTheOffset) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/rank-0.log";
  std::ofstream(path) << "hello world";
  absl::StatusOr<v1::ReadLogResponse> read = ReadLogFile(path, "job j-1 rank 0", 6, 100);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->data(), "world");
  EXPECT_EQ(read->next_offset(), 11);
}

// A caller learns which log is missing, not where this worker keeps logs.
TEST(ReadLogFileTest, ErrorsNameTheLogNotItsPath) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  absl::StatusOr<v1::ReadLogResponse> missing =
      ReadLogFile(dir + "/nothing/rank-3.log", "job j-1 rank 3", 0, 100);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "no log of job j-1 rank 3");
  absl::StatusOr<v1::ReadLogResponse> directory = ReadLogFile(dir, "job j-1 rank 4", 0, 100);
  EXPECT_FALSE(directory.ok());
  EXPECT_EQ(std::string(directory.status().message()).find(dir), std::string::npos)
      << directory.status();
}

}  // namespace
}  // namespace ringmaster
