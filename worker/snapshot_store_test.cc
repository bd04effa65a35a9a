#include "worker/snapshot_store.h"

#include <cstring>

#include <gtest/gtest.h>

#include "common/status_macros.h"
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

// A snapshot as a peer pushes it, and its header.
struct Pushed {
  v1::SnapshotHeader header;
  std::string payload;
};
Pushed Snapshot(const std::string& job_id, int rank, int64_t step, size_t bytes, int attempt = 1) {
  Pushed p;
  p.payload.resize(bytes);
  for (size_t i = 0; i < bytes; ++i) p.payload[i] = static_cast<char>(step * 31 + i);
  p.header.set_job_id(job_id);
  p.header.set_rank(rank);
  p.header.set_attempt(attempt);
  p.header.set_world_size(2);
  p.header.set_step(step);
  p.header.set_bytes(static_cast<int64_t>(bytes));
  p.header.set_checksum_kind(static_cast<uint32_t>(SnapshotChecksumKind::kXxh3));
  p.header.set_checksum(SnapshotChecksum(SnapshotChecksumKind::kXxh3, p.payload.data(), bytes));
  p.header.set_format(static_cast<uint32_t>(SnapshotFormat::kTrainer));
  return p;
}

// Pushes it in pieces of `piece` bytes.
absl::Status Push(SnapshotStore& store, const Pushed& p, size_t piece = 1000) {
  for (size_t offset = 0; offset == 0 || offset < p.payload.size(); offset += piece) {
    RETURN_IF_ERROR(
        store.WriteReplica(p.header, offset, absl::string_view(p.payload).substr(offset, piece)));
  }
  return absl::OkStatus();
}

// The newest snapshot the store holds of the rank, read back piece by
// piece as a new worker fetches it.
absl::StatusOr<std::string> Fetch(const SnapshotStore& store, const std::string& job_id, int rank,
                                  int64_t* step) {
  std::string payload;
  int64_t bytes = 1;
  *step = 0;
  while (static_cast<int64_t>(payload.size()) < bytes) {
    ASSIGN_OR_RETURN(v1::FetchSnapshotResponse piece,
                     store.ReadNewest(job_id, rank, *step, payload.size(), 700));
    *step = piece.header().step();
    bytes = piece.header().bytes();
    payload += piece.data();
  }
  return payload;
}

TEST(SnapshotStoreTest, APushedReplicaIsHeldAndReadBackWhole) {
  SnapshotStore store = Store(1);
  const Pushed first = Snapshot("job-1", 1, 10, 5000);
  const Pushed second = Snapshot("job-1", 1, 11, 5000);
  ASSERT_OK(Push(store, first));
  ASSERT_OK(Push(store, second));
  int64_t step = 0;
  EXPECT_THAT(Fetch(store, "job-1", 1, &step), IsOkAndHolds(second.payload));
  EXPECT_EQ(step, 11);
  const std::vector<v1::HeldSnapshots> held = store.Held();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(held[0].replica());
  EXPECT_EQ(std::vector<int64_t>(held[0].steps().begin(), held[0].steps().end()),
            (std::vector<int64_t>{11, 10}));
  EXPECT_GT(store.replica_bytes(), 0u);
  EXPECT_EQ(store.reserved_bytes(), 0u);  // the ranks' half is untouched
  EXPECT_THAT(store.ReadNewest("job-1", 0, 0, 0, 100), StatusIs(absl::StatusCode::kNotFound));
}

TEST(SnapshotStoreTest, AReplicaWithABadChecksumOrPiecesOutOfOrderIsNeverHeld) {
  SnapshotStore store = Store(1);
  ASSERT_OK(Push(store, Snapshot("job-1", 0, 10, 3000)));
  Pushed corrupt = Snapshot("job-1", 0, 11, 3000);
  corrupt.payload[1234] ^= 1;
  EXPECT_THAT(Push(store, corrupt), StatusIs(absl::StatusCode::kDataLoss));
  const Pushed next = Snapshot("job-1", 0, 12, 3000);
  ASSERT_OK(store.WriteReplica(next.header, 0, absl::string_view(next.payload).substr(0, 1000)));
  EXPECT_THAT(
      store.WriteReplica(next.header, 2000, absl::string_view(next.payload).substr(2000, 1000)),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               testing::HasSubstr("does not follow the last")));
  // Step 10 is still the newest whole one.
  int64_t step = 0;
  EXPECT_THAT(Fetch(store, "job-1", 0, &step),
              IsOkAndHolds(Snapshot("job-1", 0, 10, 3000).payload));
  EXPECT_EQ(step, 10);
}

TEST(SnapshotStoreTest, AFetchThatSpansANewReplicaIsAborted) {
  SnapshotStore store = Store(1);
  ASSERT_OK(Push(store, Snapshot("job-1", 0, 10, 3000)));
  absl::StatusOr<v1::FetchSnapshotResponse> first = store.ReadNewest("job-1", 0, 0, 0, 1000);
  ASSERT_OK(first);
  ASSERT_OK(Push(store, Snapshot("job-1", 0, 11, 3000)));
  EXPECT_THAT(store.ReadNewest("job-1", 0, first->header().step(), 1000, 1000),
              StatusIs(absl::StatusCode::kAborted));
}

TEST(SnapshotStoreTest, ReplicasTakeTheOtherHalfOfTheLimitOtherJobsFreedFirst) {
  // Room for replicas: kSegment; each of these takes less than half of it,
  // but more than a third.
  SnapshotStore store = Store(1);
  const size_t bytes = 10240;
  ASSERT_GT(SnapshotCapacityFor(bytes) * 3, kSegment);
  ASSERT_LE(SnapshotCapacityFor(bytes) * 2, kSegment);
  ASSERT_OK(Push(store, Snapshot("job-old", 0, 1, bytes)));
  ASSERT_OK(Push(store, Snapshot("job-1", 0, 1, bytes)));
  ASSERT_OK(Push(store, Snapshot("job-1", 1, 1, bytes)));  // job-old's is freed
  std::vector<std::string> jobs;
  for (const v1::HeldSnapshots& held : store.Held()) jobs.push_back(held.job_id());
  EXPECT_EQ(jobs, (std::vector<std::string>{"job-1", "job-1"}));
  EXPECT_THAT(Push(store, Snapshot("job-2", 0, 1, 4 * kSegment)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       testing::HasSubstr("MiB for replicas (--snapshot-memory-limit)")));
  store.Forget("job-1");
  EXPECT_TRUE(store.Held().empty());
  EXPECT_EQ(store.replica_bytes(), 0u);
}

TEST(SnapshotStoreTest, ARankStartedWhereItsReplicaIsGetsItWhenNewer) {
  SnapshotStore store = Store(2);
  const Pushed replica = Snapshot("job-1", 1, 20, 100);
  ASSERT_OK(Push(store, replica));
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease = store.Acquire("job-1", 1);
  ASSERT_OK(lease);
  absl::StatusOr<std::unique_ptr<SnapshotSegment>> segment =
      SnapshotSegment::Map((*lease)->fd(), 0, "rank");
  ASSERT_OK(segment);
  auto newer = store.NewerReplica("job-1", 1, **segment);
  ASSERT_TRUE(newer.has_value());
  EXPECT_EQ(newer->first.step, 20);
  EXPECT_EQ(newer->second, replica.payload);
  WriteStep((*lease)->fd(), 21);  // the segment now holds a newer one
  EXPECT_FALSE(store.NewerReplica("job-1", 1, **segment).has_value());
  EXPECT_FALSE(store.NewerReplica("job-1", 0, **segment).has_value());
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
