#include "coordinator/core/snapshot_ledger.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

v1::HeldSnapshots Held(int rank, std::vector<int64_t> steps, int attempt = 2, int world = 2,
                       bool replica = false) {
  v1::HeldSnapshots held;
  held.set_replica(replica);
  held.set_job_id("job-1");
  held.set_rank(rank);
  held.set_attempt(attempt);
  held.set_world_size(world);
  held.set_bytes(1000);
  for (int64_t s : steps) held.add_steps(s);
  return held;
}

TEST(SnapshotLedgerTest, TheConsistentStepIsTheHighestEveryRankHolds) {
  SnapshotLedger ledger;
  ledger.Report("w1", {Held(0, {11, 10})});
  // Rank 1 not heard of yet: no step is consistent.
  EXPECT_EQ(ledger.State().consistent_step(), 0);
  EXPECT_EQ(ledger.State().newest_step(), 11);
  ledger.Report("w2", {Held(1, {10, 9})});
  v1::SnapshotState state = ledger.State();
  EXPECT_EQ(state.consistent_step(), 10);
  EXPECT_EQ(state.newest_step(), 11);
  EXPECT_EQ(state.bytes_per_rank(), 1000);
}

// Rank 1 left attempt 2's group (an elastic job shrank): its last snapshot
// stays behind, and the members' steps go on without it.
TEST(SnapshotLedgerTest, AGroupThatShrankCountsItsMembersOnly) {
  SnapshotLedger ledger;
  ledger.Report("w1", {Held(0, {41, 40}, 2, 2), Held(2, {41, 40}, 2, 2)});
  ledger.Report("w2", {Held(1, {17, 16}, 2, 3)});
  EXPECT_EQ(ledger.State().consistent_step(), 0) << "ranks below the world of 2: 0 and 1";
  EXPECT_EQ(ledger.State(2, {0, 2}).consistent_step(), 41);
  EXPECT_EQ(ledger.State(1, {0, 2}).consistent_step(), 0) << "the members of another attempt";
}

TEST(SnapshotLedgerTest, NoCommonStepIsNoConsistentStep) {
  SnapshotLedger ledger;
  ledger.Report("w1", {Held(0, {13, 12})});
  ledger.Report("w2", {Held(1, {11, 10})});
  EXPECT_EQ(ledger.State().consistent_step(), 0);
}

TEST(SnapshotLedgerTest, AWorkersNewReportReplacesItsOld) {
  SnapshotLedger ledger;
  ledger.Report("w1", {Held(0, {5, 4}), Held(1, {5, 4})});
  EXPECT_EQ(ledger.State().consistent_step(), 5);
  ledger.Report("w1", {Held(0, {6, 5})});  // rank 1's segment was freed
  EXPECT_EQ(ledger.State().consistent_step(), 0);
  ledger.Report("w1", {});
  EXPECT_TRUE(ledger.empty());
}

TEST(SnapshotLedgerTest, TheNewestAttemptsSnapshotsCount) {
  SnapshotLedger ledger;
  // Attempt 1 ran 3 ranks; attempt 2 runs 2, whose ranks wrote since.
  ledger.Report("w1", {Held(0, {30, 29}, 2, 2), Held(2, {20, 19}, 1, 3)});
  ledger.Report("w2", {Held(1, {30, 29}, 2, 2)});
  EXPECT_EQ(ledger.State().consistent_step(), 30);
  // A stale copy of rank 1 on another worker yields to the newer attempt's.
  ledger.Report("w3", {Held(1, {20}, 1, 3)});
  EXPECT_EQ(ledger.State().consistent_step(), 30);
}

TEST(SnapshotLedgerTest, ReplicasHaveAConsistentStepOfTheirOwn) {
  SnapshotLedger ledger;
  ledger.Report("w1", {Held(0, {30, 29}), Held(1, {20}, 2, 2, true)});
  ledger.Report("w2", {Held(1, {30, 29}), Held(0, {25, 20}, 2, 2, true)});
  v1::SnapshotState state = ledger.State();
  EXPECT_EQ(state.consistent_step(), 30);
  EXPECT_EQ(state.replica_step(), 20);
  // Replicas alone make no consistent step of the segments'.
  ledger.Report("w1", {Held(1, {20}, 2, 2, true)});
  EXPECT_EQ(ledger.State().consistent_step(), 0);
  EXPECT_EQ(ledger.State().replica_step(), 20);
}

TEST(SnapshotLedgerTest, ARanksNewWorkerIsToldWhereItsNewestSnapshotIs) {
  SnapshotLedger ledger;
  // w1 ran rank 0 and is gone; w2 keeps its replica of step 25.
  ledger.Report("w2", {Held(1, {30, 29}), Held(0, {25, 20}, 2, 2, true)});
  // w1's last report, from before it was lost, holds rank 0's segment.
  ledger.Report("w1", {Held(0, {25, 24}), Held(1, {24}, 2, 2, true)});
  ledger.Report("w3", {Held(0, {10}, 1, 2)});  // an old attempt's segment
  auto reachable = [](const std::string& id) { return id != "w1"; };
  std::optional<SnapshotLedger::Source> source = ledger.SourceFor(0, "w3", reachable);
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ(source->worker_id, "w2");
  EXPECT_EQ(source->step, 25);
  // The worker that holds it needs nothing; nor does one as new.
  EXPECT_FALSE(ledger.SourceFor(0, "w2", reachable).has_value());
  ledger.Report("w3", {Held(0, {25}, 2, 2)});
  EXPECT_FALSE(ledger.SourceFor(0, "w3", reachable).has_value());
  EXPECT_FALSE(ledger.SourceFor(5, "w3", reachable).has_value());
  // Nowhere reachable: nothing to fetch.
  EXPECT_FALSE(ledger.SourceFor(1, "w3", [](const std::string&) { return false; }).has_value());
}

// Where a restart should put a rank: with its own segment, not a replica.
TEST(SnapshotLedgerTest, ARanksSegmentHolderIsTheWorkerThatRanIt) {
  SnapshotLedger ledger;
  ledger.Report("w1", {Held(0, {41, 40}), Held(1, {41, 40}, 2, 2, /*replica=*/true)});
  ledger.Report("w2", {Held(1, {40, 39}), Held(0, {41}, 2, 2, /*replica=*/true)});
  EXPECT_EQ(ledger.SegmentHolder(0), "w1");
  EXPECT_EQ(ledger.SegmentHolder(1), "w2");
  EXPECT_EQ(ledger.SegmentHolder(2), "");
}

}  // namespace
}  // namespace ringmaster
