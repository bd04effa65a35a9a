#include "worker/snapshot_store.h"

#include <cstring>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

constexpr uint64_t kSegment = 64 << 10;

// A limit whose local half holds `segments` segments of kSegment over
// that many slots.
SnapshotStore Store(int segments) { return SnapshotStore(2 * kSegment * segments, segments); }

// What a rank does with its descriptor: maps it and commits a snapshot.
void WriteStep(int fd, int64_t step) {
  absl::StatusOr<std::unique_ptr<SnapshotSegment>> segment = SnapshotSegment::Map(fd, 0, "rank");
  ASSERT_OK(segment);
  absl::StatusOr<SnapshotSegment::Slot> slot = (*segment)->Begin(100);
  ASSERT_OK(slot);
  std::memset(slot->data, 's', 100);
  SnapshotInfo info;
  info.step = step;
  info.attempt = 3;
  info.world_size = 2;
  (*segment)->Commit(*slot, info, SnapshotChecksum(SnapshotChecksumKind::kXxh3, slot->data, 100));
}

TEST(SnapshotStoreTest, ARankStartedAgainGetsTheSegmentItsPredecessorWrote) {
  SnapshotStore store = Store(2);
  EXPECT_EQ(store.segment_bytes(), kSegment);
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> first = store.Acquire("job-1", 0);
  ASSERT_OK(first);
  WriteStep((*first)->fd(), 41);
  WriteStep((*first)->fd(), 42);
  first->reset();  // the rank exited
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> again = store.Acquire("job-1", 0);
  ASSERT_OK(again);
  absl::StatusOr<std::unique_ptr<SnapshotSegment>> seen =
      SnapshotSegment::Map((*again)->fd(), 0, "rank");
  ASSERT_OK(seen);
  ASSERT_EQ((*seen)->Committed().size(), 2u);
  EXPECT_EQ((*seen)->Committed()[0].step, 42);

  const std::vector<v1::HeldSnapshots> held = store.Held();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].job_id(), "job-1");
  EXPECT_EQ(held[0].rank(), 0);
  EXPECT_EQ(std::vector<int64_t>(held[0].steps().begin(), held[0].steps().end()),
            (std::vector<int64_t>{42, 41}));
  EXPECT_EQ(held[0].attempt(), 3);
  EXPECT_EQ(held[0].world_size(), 2);
  EXPECT_EQ(held[0].bytes(), 100);
}

TEST(SnapshotStoreTest, SegmentsWithoutASnapshotAreNotReported) {
  SnapshotStore store = Store(1);
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease = store.Acquire("job-1", 0);
  ASSERT_OK(lease);
  EXPECT_TRUE(store.Held().empty());
}

TEST(SnapshotStoreTest, TheLimitFreesAnIdleJobsSegmentButNeverARunningRanks) {
  SnapshotStore store = Store(2);
  auto a0 = store.Acquire("job-a", 0);
  auto a1 = store.Acquire("job-a", 1);
  ASSERT_OK(a0);
  ASSERT_OK(a1);
  WriteStep((*a0)->fd(), 5);
  // Both of job-a's ranks run: job-b's rank has no room.
  EXPECT_THAT(store.Acquire("job-b", 0), StatusIs(absl::StatusCode::kResourceExhausted));
  a0->reset();
  a1->reset();
  // job-a's ranks have exited: its segments go, oldest first, to make room.
  auto b0 = store.Acquire("job-b", 0);
  ASSERT_OK(b0);
  EXPECT_EQ(store.reserved_bytes(), 2 * kSegment);
  auto b1 = store.Acquire("job-b", 1);
  ASSERT_OK(b1);
  EXPECT_TRUE(store.Held().empty());  // job-a's snapshot went with its segment
}

TEST(SnapshotStoreTest, AnotherJobsIdleSegmentGoesBeforeTheJobsOwn) {
  SnapshotStore store = Store(2);
  auto a0 = store.Acquire("job-a", 0);
  auto b0 = store.Acquire("job-b", 0);
  ASSERT_OK(a0);
  ASSERT_OK(b0);
  WriteStep((*a0)->fd(), 1);
  WriteStep((*b0)->fd(), 2);
  b0->reset();
  a0->reset();  // used last, but job-a's own
  auto a1 = store.Acquire("job-a", 1);
  ASSERT_OK(a1);
  std::vector<v1::HeldSnapshots> held = store.Held();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].job_id(), "job-a");
  // With no other job's left, the job's own idle one goes.
  a1->reset();
  auto a2 = store.Acquire("job-a", 2);
  ASSERT_OK(a2);
  EXPECT_EQ(store.reserved_bytes(), 2 * kSegment);
}

TEST(SnapshotStoreTest, ForgetFreesTheJobsSegmentsEvenWhileALeaseIsHeld) {
  SnapshotStore store = Store(2);
  auto lease = store.Acquire("job-a", 0);
  ASSERT_OK(lease);
  WriteStep((*lease)->fd(), 9);
  store.Forget("job-a");
  EXPECT_TRUE(store.Held().empty());
  EXPECT_EQ(store.reserved_bytes(), 0u);
  // The rank that still runs keeps its mapping; its exit frees it.
  WriteStep((*lease)->fd(), 10);
  lease->reset();
  auto fresh = store.Acquire("job-a", 0);
  ASSERT_OK(fresh);
  absl::StatusOr<std::unique_ptr<SnapshotSegment>> seen =
      SnapshotSegment::Map((*fresh)->fd(), 0, "rank");
  ASSERT_OK(seen);
  EXPECT_TRUE((*seen)->Committed().empty());
}

TEST(SnapshotStoreTest, AZeroLimitGivesNoSegment) {
  SnapshotStore store(0, 4);
  EXPECT_THAT(store.Acquire("job-a", 0), StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(SnapshotStoreTest, TheLimitIsAShareOfMemoryOrASize) {
  EXPECT_THAT(ParseSnapshotMemoryLimit("512MiB"), IsOkAndHolds(uint64_t{512} << 20));
  EXPECT_THAT(ParseSnapshotMemoryLimit("2GiB"), IsOkAndHolds(uint64_t{2} << 30));
  EXPECT_THAT(ParseSnapshotMemoryLimit("8192"), IsOkAndHolds(uint64_t{8192}));
  EXPECT_THAT(ParseSnapshotMemoryLimit("0"), IsOkAndHolds(uint64_t{0}));
  absl::StatusOr<uint64_t> quarter = ParseSnapshotMemoryLimit("25%");
  ASSERT_OK(quarter);
  absl::StatusOr<uint64_t> half = ParseSnapshotMemoryLimit("50%");
  ASSERT_OK(half);
  EXPECT_GT(*quarter, 0u);
  EXPECT_NEAR(static_cast<double>(*half) / *quarter, 2.0, 0.01);
  EXPECT_THAT(ParseSnapshotMemoryLimit("lots"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--snapshot-memory-limit lots: not a share of memory (\"25%\") or a size "
                       "(\"4GiB\", \"512MiB\", bytes)"));
  EXPECT_THAT(ParseSnapshotMemoryLimit("95%"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace ringmaster
