#include "common/task_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/mutex.h"

namespace ringmaster {
namespace {

TEST(TaskPoolTest, OneThreadRunsWorkInOrderOneAtATimeOffTheCallersThread) {
  std::vector<int> order;
  std::thread::id ran_on;
  std::atomic<int> running{0};
  int most_at_once = 0;
  {
    TaskPool pool(1);
    Notification blocked;
    pool.Post([&] { blocked.WaitForNotification(); });
    for (int i = 0; i < 4; ++i) {
      pool.Post([&, i] {
        most_at_once = std::max(most_at_once, ++running);
        order.push_back(i);
        ran_on = std::this_thread::get_id();
        --running;
      });
    }
    EXPECT_TRUE(order.empty()) << "the first item still blocks the rest";
    blocked.Notify();
  }  // the destructor runs what is queued
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(most_at_once, 1);
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

// A delayed item does not hold back one posted later but due sooner, and
// runs once it is due.
TEST(TaskPoolTest, DelayedWorkRunsWhenDueAndLetsEarlierWorkPass) {
  TaskPool pool(1);
  Mutex mu;
  std::vector<std::string> ran;
  Notification late_ran;
  const absl::Time start = absl::Now();
  absl::Time late_at;
  pool.PostAfter(absl::Milliseconds(300), [&] {
    MutexLock lock(&mu);
    ran.push_back("late");
    late_at = absl::Now();
    late_ran.Notify();
  });
  pool.Post([&] {
    MutexLock lock(&mu);
    ran.push_back("now");
  });
  ASSERT_TRUE(late_ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  MutexLock lock(&mu);
  EXPECT_EQ(ran, (std::vector<std::string>{"now", "late"}));
  EXPECT_GE(late_at - start, absl::Milliseconds(300));
}

TEST(TaskPoolTest, StoppingRunsWhatIsLeftAtOnce) {
  std::atomic<int> ran{0};
  const absl::Time start = absl::Now();
  {
    TaskPool pool(2);
    for (int i = 0; i < 10; ++i) pool.PostAfter(absl::Hours(1), [&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 10);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace ringmaster
