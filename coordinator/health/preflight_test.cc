#include "coordinator/health/preflight.h"
#include "testing/status_matchers.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(PreflightTest, ReportsRoundTripAndNonsenseIsRefused) {
  absl::StatusOr<PreflightReport> ok =
      DecodePreflightReport(EncodePreflightReport({12.5, 11.25, ""}));
  ASSERT_TRUE(ok.ok());
  EXPECT_DOUBLE_EQ(ok->bus_gb_per_s, 12.5);
  EXPECT_DOUBLE_EQ(ok->world_gb_per_s, 11.25);
  absl::StatusOr<PreflightReport> failed =
      DecodePreflightReport(EncodePreflightReport({0, 0, "peer rank 2 closed its connection"}));
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->error, "peer rank 2 closed its connection");
  EXPECT_THAT(DecodePreflightReport("busbw fast"), IsError());
  EXPECT_THAT(DecodePreflightReport("busbw -1 world 2"), IsError());
  EXPECT_THAT(DecodePreflightReport("busbw 1"), IsError());
  EXPECT_THAT(DecodePreflightReport("busbw 1 world 2 extra"), IsError());
  EXPECT_THAT(DecodePreflightReport(""), IsError());
}

TEST(PreflightTest, ASlowOrFailedRankIsExcludedAndTheRestPass) {
  EXPECT_TRUE(JudgePreflight({{0, {8.0, 0, ""}}, {1, {7.5, 0, ""}}, {2, {8.4, 0, ""}}}).empty());
  std::vector<PreflightExclusion> slow =
      JudgePreflight({{0, {8.0, 0, ""}}, {1, {3.9, 0, ""}}, {2, {8.4, 0, ""}}, {3, {8.1, 0, ""}}});
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].rank, 1);
  EXPECT_EQ(slow[0].why,
            "pre-flight bus bandwidth 3.90 GB/s, under half the job's median 8.10 GB/s");
  // Exactly half passes.
  EXPECT_TRUE(JudgePreflight({{0, {8.0, 0, ""}}, {1, {4.0, 0, ""}}, {2, {8.0, 0, ""}}}).empty());
  std::vector<PreflightExclusion> failed =
      JudgePreflight({{0, {8.0, 0, ""}}, {1, {0, 0, "timed out"}}, {2, {8.0, 0, ""}}});
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].rank, 1);
  EXPECT_EQ(failed[0].why, "its pre-flight all-reduce failed: timed out");
}

}  // namespace
}  // namespace ringmaster
