#include "common/mutex.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(MutexTest, CountsFromManyThreadsUnderTheLock) {
  Mutex mu;
  int count = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        MutexLock lock(&mu);
        ++count;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  MutexLock lock(&mu);
  EXPECT_EQ(count, 40000);
}

TEST(MutexTest, AwaitReturnsOnceTheConditionHolds) {
  Mutex mu;
  int stage = 0;
  std::thread other([&] {
    for (int i = 1; i <= 3; ++i) {
      MutexLock lock(&mu);
      stage = i;
    }
  });
  {
    MutexLock lock(&mu);
    auto reached_three = [&] { return stage == 3; };
    mu.Await(absl::Condition(&reached_three));
    EXPECT_EQ(stage, 3);
  }
  other.join();
}

TEST(MutexTest, AwaitWithTimeoutSaysWhetherTheConditionHolds) {
  Mutex mu;
  bool never = false;
  MutexLock lock(&mu);
  EXPECT_FALSE(mu.AwaitWithTimeout(absl::Condition(&never), absl::Milliseconds(20)));
  bool already = true;
  EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&already), absl::Milliseconds(20)));
  EXPECT_FALSE(mu.AwaitWithDeadline(absl::Condition(&never), absl::Now() + absl::Milliseconds(20)));
}

TEST(NotificationTest, WhatIsWrittenBeforeNotifyIsSeenAfterTheWait) {
  Notification ready;
  std::vector<int> data;
  std::thread producer([&] {
    data = {1, 2, 3};
    ready.Notify();
  });
  ready.WaitForNotification();
  EXPECT_TRUE(ready.HasBeenNotified());
  EXPECT_EQ(data, (std::vector<int>{1, 2, 3}));
  producer.join();
}

TEST(NotificationTest, WaitWithTimeoutGivesUpUntilNotified) {
  Notification done;
  EXPECT_FALSE(done.HasBeenNotified());
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  done.Notify();
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
}

}  // namespace
}  // namespace ringmaster
