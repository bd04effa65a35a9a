#include "trainer/preflight_check.h"

#include <vector>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"
#include "trainer/test_world.h"

namespace ringmaster {
namespace {

TEST(PreflightCheckTest, EveryRankMeasuresTheSameAllReduce) {
  constexpr size_t kFloats = (size_t{8} << 20) / sizeof(float);  // 8 MB: quick on a test machine
  std::vector<double> busbw(3, -1);
  std::vector<float> first(3, 0);
  RunWorld(3, [&](int rank, Collective* comm) {
    std::vector<float> buffer(kFloats, static_cast<float>(rank + 1));
    absl::StatusOr<double> measured = PreflightBusBandwidth(comm, buffer.data(), buffer.size());
    ASSERT_OK(measured);
    busbw[rank] = *measured;
    first[rank] = buffer[0];
  });
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_GT(busbw[rank], 0) << rank;
    // The warm-up sums 1+2+3 = 6 on every rank, the timed one 6+6+6.
    EXPECT_FLOAT_EQ(first[rank], 18) << "a real all-reduce";
  }
}

}  // namespace
}  // namespace ringmaster
