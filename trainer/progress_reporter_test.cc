#include "trainer/progress_reporter.h"

#include <vector>

#include <gtest/gtest.h>

#include "common/mutex.h"

namespace ringmaster {
namespace {

// What the reporter sent, waited for with a deadline.
class Sent {
 public:
  ProgressReporter::Send Sender() {
    return [this](const v1::RankProgress& p) {
      MutexLock lock(&mu_);
      sent_.push_back(p);
    };
  }
  // The first `n` reports, once they are sent (empty after 10 s).
  std::vector<v1::RankProgress> First(size_t n) {
    MutexLock lock(&mu_);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return sent_.size() >= n; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10))) return {};
    return std::vector<v1::RankProgress>(sent_.begin(), sent_.begin() + n);
  }
  std::vector<v1::RankProgress> All() {
    MutexLock lock(&mu_);
    return sent_;
  }

 private:
  Mutex mu_;
  std::vector<v1::RankProgress> sent_ ABSL_GUARDED_BY(mu_);
};

v1::RankRef Ref() {
  v1::RankRef ref;
  ref.set_job_id("j1");
  ref.set_rank(2);
  return ref;
}

TEST(ProgressReporterTest, RepeatsTheLastProgressWithoutItsStepsWhileNothingNewComes) {
  Sent sent;
  ProgressReporter reporter(sent.Sender(), Ref(), absl::Milliseconds(20));
  v1::Progress p;
  p.set_step(41);
  p.add_step_seconds(0.5);
  reporter.Report(p);
  std::vector<v1::RankProgress> first = sent.First(3);
  ASSERT_EQ(first.size(), 3u) << "no keepalive reports";
  EXPECT_EQ(first[0].rank().rank(), 2);
  EXPECT_EQ(first[0].progress().step_seconds_size(), 1);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(first[i].progress().step(), 41);
    EXPECT_EQ(first[i].progress().step_seconds_size(), 0) << "a repeat counted steps again";
  }
}

TEST(ProgressReporterTest, NothingIsSentBeforeTheFirstReport) {
  Sent sent;
  {
    ProgressReporter reporter(sent.Sender(), Ref(), absl::Milliseconds(1));
    absl::SleepFor(absl::Milliseconds(20));  // keepalive passes, 20 times over
  }
  EXPECT_TRUE(sent.All().empty());
}

// A report waiting behind a slow send is replaced by the newer one, its
// step durations kept, and the last one is sent before the reporter ends.
TEST(ProgressReporterTest, NewerReportsReplaceOlderOnesAndTheLastIsFlushed) {
  Mutex gate_mu;
  bool open = false;
  Sent sent;
  ProgressReporter::Send record = sent.Sender();
  auto reporter = std::make_unique<ProgressReporter>(
      [&](const v1::RankProgress& p) {
        {
          MutexLock lock(&gate_mu);
          gate_mu.Await(absl::Condition(&open));
        }
        record(p);
      },
      Ref(), absl::Hours(1));
  v1::Progress p;
  for (int step = 1; step <= 4; ++step) {
    p.set_step(step);
    p.clear_step_seconds();
    p.add_step_seconds(step);
    reporter->Report(p);
  }
  {
    MutexLock lock(&gate_mu);
    open = true;
  }
  reporter.reset();  // sends what is pending before it returns
  std::vector<v1::RankProgress> all = sent.All();
  ASSERT_FALSE(all.empty());
  EXPECT_LE(all.size(), 4u);
  // However the sender interleaved, the last report sent is step 4, and the
  // durations of all four steps were sent exactly once.
  double total = 0;
  for (const v1::RankProgress& r : all) {
    for (double s : r.progress().step_seconds()) total += s;
  }
  const int64_t last_step = all.back().progress().step();
  EXPECT_EQ(last_step, 4);
  EXPECT_EQ(total, 1 + 2 + 3 + 4);
}

}  // namespace
}  // namespace ringmaster
