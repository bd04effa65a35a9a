#include "worker/event_outbox.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

v1::WorkerMessage Exit(int rank) {
  v1::WorkerMessage m;
  m.mutable_rank_exited()->mutable_rank()->set_rank(rank);
  return m;
}

TEST(EventOutboxTest, KeepsEventsUntilAcknowledgedInOrder) {
  EventOutbox outbox;
  EXPECT_EQ(outbox.Add(Exit(0)).seq(), 1);
  EXPECT_EQ(outbox.Add(Exit(1)).seq(), 2);
  EXPECT_EQ(outbox.Add(Exit(2)).seq(), 3);
  outbox.Acknowledge(2);
  std::vector<v1::WorkerMessage> left = outbox.Unacknowledged();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].seq(), 3);
  EXPECT_EQ(left[0].rank_exited().rank().rank(), 2);
  outbox.Acknowledge(1);  // a late, older acknowledgement changes nothing
  EXPECT_EQ(outbox.Unacknowledged().size(), 1u);
  outbox.Acknowledge(3);
  EXPECT_TRUE(outbox.Unacknowledged().empty());
  EXPECT_EQ(outbox.Add(Exit(0)).seq(), 4) << "numbers are never reused";
}

}  // namespace
}  // namespace ringmaster
