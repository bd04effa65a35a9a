#include "worker/gpu_watch.h"

#include <deque>

#include <gtest/gtest.h>

#include "common/fake_clock.h"

namespace ringmaster {
namespace {

class GpuWatchTest : public ::testing::Test {
 protected:
  GpuWatchTest()
      : watch_({[this](absl::Duration) {
                  std::optional<GpuEvent> next;
                  if (!events_.empty()) {
                    next = events_.front();
                    events_.pop_front();
                  }
                  return next;
                },
                [this] { return samples_; }},
               {[this](int gpu, int xid) {
                  counted_.push_back({gpu, xid});
                },
                [this](const v1::GpuError& e) { reported_.push_back(e); }},
               &clock_) {}

  static GpuSample Sample(int index, double ecc, double retired) {
    GpuSample s;
    s.index = index;
    s.uuid = "GPU-" + std::to_string(index);
    s.uncorrected_ecc_errors = ecc;
    s.retired_pages = retired;
    return s;
  }

  FakeClock clock_;
  std::deque<GpuEvent> events_;
  std::vector<GpuSample> samples_;
  std::vector<std::pair<int, int>> counted_;
  std::vector<v1::GpuError> reported_;
  GpuWatch watch_;
};

TEST_F(GpuWatchTest, EveryXidIsCountedAndAStormIsReportedOncePerInterval) {
  for (int i = 0; i < 5; ++i) events_.push_back({1, "GPU-1", 79, false});
  events_.push_back({0, "GPU-0", 13, false});
  for (int i = 0; i < 6; ++i) watch_.Poll(absl::ZeroDuration());
  EXPECT_EQ(counted_.size(), 6u);
  ASSERT_EQ(reported_.size(), 2u);
  EXPECT_EQ(reported_[0].kind(), v1::GPU_ERROR_XID);
  EXPECT_EQ(reported_[0].gpu(), 1);
  EXPECT_EQ(reported_[0].uuid(), "GPU-1");
  EXPECT_EQ(reported_[0].xid(), 79);
  EXPECT_EQ(reported_[0].time_unix_ms(), absl::ToUnixMillis(clock_.Now()));
  EXPECT_EQ(reported_[1].xid(), 13);

  clock_.Advance(absl::Seconds(10));
  events_.push_back({1, "GPU-1", 79, false});
  watch_.Poll(absl::ZeroDuration());
  EXPECT_EQ(reported_.size(), 3u) << "reported again after repeat_after";
}

TEST_F(GpuWatchTest, CountersAreReportedWhenTheyRise) {
  samples_ = {Sample(0, 0, 4), Sample(1, 2, 0)};
  watch_.Poll(absl::ZeroDuration());
  EXPECT_TRUE(reported_.empty()) << "the first reading is where the counters stand";

  samples_ = {Sample(0, 0, 4), Sample(1, 3, 0)};
  clock_.Advance(absl::Seconds(5));
  watch_.Poll(absl::ZeroDuration());
  ASSERT_EQ(reported_.size(), 1u);
  EXPECT_EQ(reported_[0].gpu(), 1);
  EXPECT_EQ(reported_[0].kind(), v1::GPU_ERROR_ECC_UNCORRECTABLE);
  EXPECT_EQ(reported_[0].count(), 3);

  samples_ = {Sample(0, 0, 6), Sample(1, 3, 0)};
  clock_.Advance(absl::Seconds(4));
  watch_.Poll(absl::ZeroDuration());
  EXPECT_EQ(reported_.size(), 1u) << "the counters are read every 5s";
  clock_.Advance(absl::Seconds(1));
  watch_.Poll(absl::ZeroDuration());
  ASSERT_EQ(reported_.size(), 2u);
  EXPECT_EQ(reported_[1].gpu(), 0);
  EXPECT_EQ(reported_[1].kind(), v1::GPU_ERROR_RETIRED_PAGES);
  EXPECT_EQ(reported_[1].count(), 6);

  samples_ = {Sample(0, -1, -1)};  // NVML cannot tell: nothing
  clock_.Advance(absl::Seconds(5));
  watch_.Poll(absl::ZeroDuration());
  EXPECT_EQ(reported_.size(), 2u);
  EXPECT_TRUE(counted_.empty());
}

}  // namespace
}  // namespace ringmaster
