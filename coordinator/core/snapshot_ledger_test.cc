#include "coordinator/core/snapshot_ledger.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

v1::HeldSnapshots Held(int rank, std::vector<int64_t> steps, int attempt = 2, int world = 2) {
  v1::HeldSnapshots held;
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

}  // namespace
}  // namespace ringmaster
