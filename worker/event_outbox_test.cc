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

TEST(EventOutboxTest, FindsAnExitAskedForAgainAcknowledgedOrNot) {
  EventOutbox outbox;
  v1::WorkerMessage started;
  started.mutable_rank_started()->mutable_rank()->set_rank(0);
  outbox.Add(started);
  v1::WorkerMessage first = Exit(0);
  first.mutable_rank_exited()->set_exit_code(3);
  outbox.Add(first);
  outbox.Add(Exit(1));
  v1::RankRef rank0;
  rank0.set_rank(0);
  std::optional<v1::WorkerMessage> found = outbox.FindExit(rank0);
  ASSERT_TRUE(found.has_value()) << "still pending";
  EXPECT_EQ(found->rank_exited().exit_code(), 3);
  EXPECT_EQ(found->seq(), 0) << "it is sent again under a new number";

  outbox.Acknowledge(3);
  found = outbox.FindExit(rank0);
  ASSERT_TRUE(found.has_value()) << "acknowledged, and kept";
  EXPECT_EQ(found->rank_exited().exit_code(), 3);
  v1::RankRef other = rank0;
  other.set_attempt(1);
  EXPECT_FALSE(outbox.FindExit(other).has_value()) << "another attempt's rank 0";

  for (size_t i = 0; i < EventOutbox::kRecentExits; ++i) outbox.Add(Exit(7));
  outbox.Acknowledge(1 << 30);
  EXPECT_FALSE(outbox.FindExit(rank0).has_value()) << "the oldest are forgotten";
}

}  // namespace
}  // namespace ringmaster
