#include "worker/snapshot_peers.h"

#include <cstring>

#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

constexpr uint64_t kLimit = 16 << 20;

// A peer in this process: its agent's calls go straight to its store, and
// each push takes a second of the fake clock.
class StorePeer final : public PeerAgents {
 public:
  StorePeer(SnapshotStore* store, FakeClock* clock) : store_(store), clock_(clock) {}
  absl::Status Push(const v1::SnapshotPeer& peer, const std::string& credential,
                    const v1::PushReplicaRequest& request) override {
    pushes.push_back(request.header().step());
    if (!fail.ok()) return fail;
    if (request.offset() == 0) clock_->Advance(absl::Seconds(1));
    return store_->WriteReplica(request.header(), request.offset(), request.data());
  }
  absl::StatusOr<v1::FetchSnapshotResponse> Fetch(
      const v1::SnapshotPeer& peer, const std::string& credential,
      const v1::FetchSnapshotRequest& request) override {
    return store_->ReadNewest(request.job_id(), request.rank(), request.step(), request.offset(),
                              request.max_bytes());
  }
  std::vector<int64_t> pushes;  // the step of each piece
  absl::Status fail;

 private:
  SnapshotStore* const store_;
  FakeClock* const clock_;
};

v1::StartRank Start(const std::string& job, int attempt, int rank) {
  v1::StartRank start;
  start.mutable_rank()->set_job_id(job);
  start.mutable_rank()->set_attempt(attempt);
  start.mutable_rank()->set_rank(rank);
  start.mutable_replica_to()->set_worker_id("w2");
  start.mutable_replica_to()->set_address("127.0.0.1:1");
  start.set_replica_credential("replica-credential");
  return start;
}

// A start of `rank` on a new worker, which fetches from w2.
v1::StartRank StartFetching(const std::string& job, int attempt, int rank, int64_t step) {
  v1::StartRank start = Start(job, attempt, rank);
  start.mutable_fetch_from()->set_worker_id("w2");
  start.mutable_fetch_from()->set_address("127.0.0.1:1");
  start.mutable_fetch_from()->set_step(step);
  return start;
}

// What the rank does: commits a snapshot of `bytes` bytes at `step`.
std::string Commit(SnapshotStore::Lease& lease, int64_t step, int attempt, size_t bytes) {
  std::string payload(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) payload[i] = static_cast<char>(step + i * 7);
  SnapshotInfo info;
  info.step = step;
  info.attempt = attempt;
  info.world_size = 2;
  info.checksum = SnapshotChecksum(SnapshotChecksumKind::kXxh3, payload.data(), bytes);
  EXPECT_OK(lease.segment().Put(info, payload));
  return payload;
}

class SnapshotPeersTest : public ::testing::Test {
 protected:
  SnapshotStore local_{kLimit, 2};
  SnapshotStore remote_{kLimit, 2};
  FakeClock clock_;
  StorePeer peer_{&remote_, &clock_};
  SnapshotPeers peers_{&local_, &peer_, SnapshotPeers::Options{}, &clock_};
};

TEST(NextPushAtTest, PushingTakesTheShareOfTheTime) {
  const absl::Time start = absl::FromUnixSeconds(100);
  EXPECT_EQ(NextPushAt(start, start + absl::Seconds(1), 0.25), start + absl::Seconds(4));
  EXPECT_EQ(NextPushAt(start, start + absl::Seconds(3), 0.03), start + absl::Seconds(100));
  EXPECT_EQ(NextPushAt(start, start + absl::Seconds(1), 1), start + absl::Seconds(1));
  EXPECT_EQ(NextPushAt(start, start + absl::Seconds(1), 0), absl::InfiniteFuture());
}

TEST_F(SnapshotPeersTest, ARanksSnapshotsArePushedWholeAsOftenAsTheShareAllows) {
  const v1::StartRank start = Start("job-1", 2, 1);
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease = local_.Acquire("job-1", 1);
  ASSERT_OK(lease);
  auto registration = peers_.Replicate(start, *lease);
  ASSERT_NE(registration, nullptr);
  EXPECT_FALSE(peers_.PushOnce());  // nothing committed yet

  // Two pieces: 1 MiB and half of one.
  const std::string payload = Commit(**lease, 10, 2, kReplicaPieceBytes * 3 / 2);
  ASSERT_TRUE(peers_.PushOnce());
  EXPECT_EQ(peer_.pushes, (std::vector<int64_t>{10, 10}));
  absl::StatusOr<v1::FetchSnapshotResponse> held =
      remote_.ReadNewest("job-1", 1, 0, 0, 3 * kReplicaPieceBytes);
  ASSERT_OK(held);
  EXPECT_EQ(held->header().step(), 10);
  EXPECT_EQ(held->header().attempt(), 2);
  EXPECT_EQ(held->data(), payload);

  // The push took a second: at 3%, the next waits 32.3 s more.
  Commit(**lease, 11, 2, 100);
  EXPECT_FALSE(peers_.PushOnce());
  clock_.Advance(absl::Seconds(32));
  EXPECT_FALSE(peers_.PushOnce());
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(peers_.PushOnce());
  EXPECT_EQ(peer_.pushes.back(), 11);
  EXPECT_EQ(peers_.stats().pushed, 2);
  EXPECT_EQ(peers_.stats().pushing, absl::Seconds(2));

  // Once the rank exits, nothing more is pushed.
  registration.reset();
  Commit(**lease, 12, 2, 100);
  clock_.Advance(absl::Hours(1));
  EXPECT_FALSE(peers_.PushOnce());
}

TEST_F(SnapshotPeersTest, OnlyWhatThisAttemptWroteIsPushed) {
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease = local_.Acquire("job-1", 0);
  ASSERT_OK(lease);
  Commit(**lease, 50, 1, 100);  // the attempt before, left in the segment
  auto registration = peers_.Replicate(Start("job-1", 2, 0), *lease);
  EXPECT_FALSE(peers_.PushOnce());
  EXPECT_TRUE(peer_.pushes.empty());
}

TEST_F(SnapshotPeersTest, AFailedPushIsCountedAndTheNextSnapshotTriedAfterASecond) {
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease = local_.Acquire("job-1", 0);
  ASSERT_OK(lease);
  auto registration = peers_.Replicate(Start("job-1", 1, 0), *lease);
  peer_.fail = absl::UnavailableError("connection refused");
  Commit(**lease, 5, 1, 100);
  EXPECT_FALSE(peers_.PushOnce());
  EXPECT_EQ(peers_.stats().failed, 1);
  peer_.fail = absl::OkStatus();
  EXPECT_FALSE(peers_.PushOnce());  // step 5 is not tried again
  Commit(**lease, 6, 1, 100);
  EXPECT_FALSE(peers_.PushOnce());  // within the second
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(peers_.PushOnce());
  EXPECT_EQ(peer_.pushes, (std::vector<int64_t>{5, 6}));
}

TEST_F(SnapshotPeersTest, NoPeerNamedNoReplicas) {
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease = local_.Acquire("job-1", 0);
  ASSERT_OK(lease);
  v1::StartRank start = Start("job-1", 1, 0);
  start.clear_replica_to();
  EXPECT_EQ(peers_.Replicate(start, *lease), nullptr);
}

TEST_F(SnapshotPeersTest, ARankStartedOnANewWorkerGetsItsSnapshotFromThePeer) {
  // The peer holds rank 1's replica of step 30.
  {
    SnapshotPeers pusher(&remote_, &peer_, SnapshotPeers::Options{}, &clock_);
    absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> theirs = local_.Acquire("job-1", 1);
    ASSERT_OK(theirs);
    auto registration = peers_.Replicate(Start("job-1", 1, 1), *theirs);
    Commit(**theirs, 30, 1, kReplicaPieceBytes + 10);
    ASSERT_TRUE(peers_.PushOnce());
  }
  const std::string expected = *remote_.ReadNewest("job-1", 1, 0, 0, 4 << 20)->mutable_data();
  SnapshotStore fresh(kLimit, 2);  // the rank's new worker
  SnapshotPeers restorer(&fresh, &peer_, SnapshotPeers::Options{}, &clock_);
  const v1::StartRank start = StartFetching("job-1", 2, 1, 30);
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease = fresh.Acquire("job-1", 1);
  ASSERT_OK(lease);
  EXPECT_EQ(restorer.Restore(start, **lease), "30 worker w2");
  const std::vector<SnapshotInfo> committed = (*lease)->segment().Committed();
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_EQ(committed[0].step, 30);
  EXPECT_THAT((*lease)->segment().Read(committed[0]), IsOkAndHolds(expected));
  // Its segment now holds step 30: a second start fetches nothing.
  EXPECT_EQ(restorer.Restore(start, **lease), "");
}

TEST_F(SnapshotPeersTest, ARankStartedWhereItsReplicaIsTakesItWithoutAFetch) {
  SnapshotStore other(kLimit, 2);
  StorePeer to_here(&local_, &clock_);
  SnapshotPeers pusher(&other, &to_here, SnapshotPeers::Options{}, &clock_);
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> theirs = other.Acquire("job-1", 0);
  ASSERT_OK(theirs);
  auto registration = pusher.Replicate(Start("job-1", 1, 0), *theirs);
  const std::string payload = Commit(**theirs, 7, 1, 100);
  ASSERT_TRUE(pusher.PushOnce());

  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease = local_.Acquire("job-1", 0);
  ASSERT_OK(lease);
  EXPECT_EQ(peers_.Restore(Start("job-1", 2, 0), **lease), "7 this worker's replica");
  EXPECT_THAT((*lease)->segment().Read((*lease)->segment().Committed()[0]), IsOkAndHolds(payload));
}

TEST_F(SnapshotPeersTest, AFetchThatFailsLeavesTheSegmentAsItWas) {
  SnapshotStore fresh(kLimit, 2);
  SnapshotPeers restorer(&fresh, &peer_, SnapshotPeers::Options{}, &clock_);
  const v1::StartRank start = StartFetching("job-1", 2, 1, 30);
  absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> lease = fresh.Acquire("job-1", 1);
  ASSERT_OK(lease);
  EXPECT_EQ(restorer.Restore(start, **lease), "");  // the peer holds nothing: NOT_FOUND
  EXPECT_TRUE((*lease)->segment().Committed().empty());
}

}  // namespace
}  // namespace ringmaster
