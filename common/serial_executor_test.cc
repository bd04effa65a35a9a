#include "common/serial_executor.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

namespace ringmaster {
namespace {

TEST(SerialExecutorTest, RunsWorkInOrderOneAtATimeOffTheCallersThread) {
  std::vector<int> order;
  std::thread::id ran_on;
  int running = 0;
  int most_at_once = 0;
  {
    SerialExecutor executor;
    absl::Notification blocked;
    executor.Post([&] { blocked.WaitForNotification(); });
    for (int i = 0; i < 4; ++i) {
      executor.Post([&, i] {
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

}  // namespace
}  // namespace ringmaster
