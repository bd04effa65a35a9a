#include "domain/snapshot_segment.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace ringmaster {
namespace {

constexpr uint64_t kCapacity = 64 << 10;

std::unique_ptr<SnapshotSegment> MapOrDie(int fd, uint64_t capacity = kCapacity) {
  absl::StatusOr<std::unique_ptr<SnapshotSegment>> segment =
      SnapshotSegment::Map(fd, capacity, "rank 1's segment");
  EXPECT_OK(segment);
  return segment.ok() ? *std::move(segment) : nullptr;
}

// Writes `payload` as the snapshot of `step`, as a rank does.
void Write(SnapshotSegment& segment, int64_t step, const std::string& payload) {
  absl::StatusOr<SnapshotSegment::Slot> slot = segment.Begin(payload.size());
  ASSERT_OK(slot);
  std::memcpy(slot->data, payload.data(), payload.size());
  SnapshotInfo info;
  info.step = step;
  info.attempt = 2;
  info.world_size = 4;
  info.rank = 1;
  segment.Commit(*slot, info,
                 SnapshotChecksum(SnapshotChecksumKind::kXxh3, payload.data(), payload.size()));
}

std::vector<int64_t> Steps(const SnapshotSegment& segment) {
  std::vector<int64_t> steps;
  for (const SnapshotInfo& info : segment.Committed()) steps.push_back(info.step);
  return steps;
}

TEST(SnapshotSegmentTest, KeepsTheTwoNewestSnapshotsAndReadsThemBackChecked) {
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(kCapacity);
  ASSERT_OK(fd);
  std::unique_ptr<SnapshotSegment> rank = MapOrDie(fd->get(), 0);  // the rank knows no size
  ASSERT_NE(rank, nullptr);
  EXPECT_EQ(rank->capacity(), kCapacity);
  EXPECT_TRUE(rank->Committed().empty());
  Write(*rank, 10, "state at 10");
  Write(*rank, 11, "state at 11");
  Write(*rank, 12, "state at twelve");

  // The worker's own mapping sees what the rank wrote.
  std::unique_ptr<SnapshotSegment> worker = MapOrDie(fd->get());
  EXPECT_EQ(Steps(*worker), (std::vector<int64_t>{12, 11}));
  const std::vector<SnapshotInfo> held = worker->Committed();
  EXPECT_EQ(held[0].attempt, 2);
  EXPECT_EQ(held[0].world_size, 4);
  EXPECT_EQ(held[0].rank, 1);
  EXPECT_GT(held[0].sequence, held[1].sequence);
  EXPECT_THAT(worker->Read(held[0]), IsOkAndHolds(std::string("state at twelve")));
  EXPECT_THAT(worker->Read(held[1]), IsOkAndHolds(std::string("state at 11")));
}

TEST(SnapshotSegmentTest, ARankKilledMidWriteLeavesThePreviousSnapshotValid) {
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(kCapacity);
  ASSERT_OK(fd);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<SnapshotSegment> rank = MapOrDie(fd->get(), 0);
    Write(*rank, 7, std::string(1000, 'a'));
    Write(*rank, 8, std::string(1000, 'b'));
    // Step 9 overwrites step 7's slot, and the rank dies half-way.
    absl::StatusOr<SnapshotSegment::Slot> slot = rank->Begin(1000);
    if (!slot.ok()) _exit(1);
    std::memset(slot->data, 'c', 500);
    raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  std::unique_ptr<SnapshotSegment> worker = MapOrDie(fd->get());
  const std::vector<SnapshotInfo> held = worker->Committed();
  ASSERT_EQ(Steps(*worker), std::vector<int64_t>{8});
  EXPECT_THAT(worker->Read(held[0]), IsOkAndHolds(std::string(1000, 'b')));

  // The next rank of the job writes over the torn slot, never over step 8.
  std::unique_ptr<SnapshotSegment> next = MapOrDie(fd->get(), 0);
  Write(*next, 9, std::string(1000, 'd'));
  EXPECT_EQ(Steps(*worker), (std::vector<int64_t>{9, 8}));
}

TEST(SnapshotSegmentTest, ACorruptSnapshotIsNeverReadBack) {
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(kCapacity);
  ASSERT_OK(fd);
  std::unique_ptr<SnapshotSegment> rank = MapOrDie(fd->get());
  Write(*rank, 5, "five");
  Write(*rank, 6, "six!");
  const std::vector<SnapshotInfo> held = rank->Committed();
  // One bit of step 6's payload flips after its commit.
  void* page = mmap(nullptr, kCapacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
  ASSERT_NE(page, MAP_FAILED);
  static_cast<char*>(page)[kSnapshotHeaderBytes + held[0].slot * rank->slot_bytes()] ^= 1;
  munmap(page, kCapacity);
  EXPECT_THAT(rank->Read(held[0]), StatusIs(absl::StatusCode::kDataLoss,
                                            "rank 1's segment: the snapshot of step 6 "
                                            "fails its checksum"));
  EXPECT_THAT(rank->Read(held[1]), IsOkAndHolds(std::string("five")));
}

TEST(SnapshotSegmentTest, ASnapshotLargerThanASlotIsRefusedNamingBothSizes) {
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(kCapacity);
  ASSERT_OK(fd);
  std::unique_ptr<SnapshotSegment> rank = MapOrDie(fd->get());
  EXPECT_EQ(rank->slot_bytes(), 28 << 10);
  EXPECT_THAT(rank->Begin(1 << 20),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "a snapshot of 1.0 MiB does not fit rank 1's segment, whose slots hold "
                       "0.0 MiB"));
  EXPECT_TRUE(rank->Committed().empty());
}

TEST(SnapshotSegmentTest, AHeaderClaimingMoreThanItsSlotIsLeftOut) {
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(kCapacity);
  ASSERT_OK(fd);
  std::unique_ptr<SnapshotSegment> rank = MapOrDie(fd->get());
  Write(*rank, 3, "three");
  Write(*rank, 4, "four");
  // A hostile rank claims its newest payload runs past the segment.
  auto* header = static_cast<SnapshotSegmentHeader*>(
      mmap(nullptr, kSnapshotHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0));
  ASSERT_NE(static_cast<void*>(header), MAP_FAILED);
  const int newest = rank->Committed()[0].slot;
  header->slots[newest].bytes = uint64_t{1} << 40;
  header->slot_bytes = uint64_t{1} << 41;  // the worker goes by the size it gave
  munmap(header, kSnapshotHeaderBytes);
  std::unique_ptr<SnapshotSegment> worker = MapOrDie(fd->get());
  EXPECT_EQ(Steps(*worker), std::vector<int64_t>{3});
  SnapshotInfo forged;
  forged.slot = newest;
  forged.bytes = uint64_t{1} << 40;
  EXPECT_THAT(worker->Read(forged), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SnapshotSegmentTest, TheRankCannotResizeItsSegmentAndWritingPastItFaultsOnlyTheRank) {
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(kCapacity);
  ASSERT_OK(fd);
  EXPECT_NE(ftruncate(fd->get(), 2 * kCapacity), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(fd->get(), kCapacity / 2), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    void* p = mmap(nullptr, 2 * kCapacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
    if (p == MAP_FAILED) _exit(2);
    signal(SIGBUS, SIG_DFL);                        // as a rank has it (a sanitizer would catch it)
    static_cast<volatile char*>(p)[kCapacity] = 1;  // past the end
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGBUS);
  std::unique_ptr<SnapshotSegment> worker = MapOrDie(fd->get());
  Write(*worker, 1, "still whole");
  EXPECT_EQ(Steps(*worker), std::vector<int64_t>{1});
}

TEST(SnapshotSegmentTest, APutPayloadMustMatchItsChecksum) {
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(kCapacity);
  ASSERT_OK(fd);
  std::unique_ptr<SnapshotSegment> holder = MapOrDie(fd->get());
  SnapshotInfo info;
  info.step = 40;
  info.checksum_kind = SnapshotChecksumKind::kCrc32;
  info.checksum = SnapshotChecksum(SnapshotChecksumKind::kCrc32, "replica", 7);
  EXPECT_THAT(holder->Put(info, "replicA"), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_TRUE(holder->Committed().empty());
  ASSERT_OK(holder->Put(info, "replica"));
  ASSERT_EQ(Steps(*holder), std::vector<int64_t>{40});
  EXPECT_THAT(holder->Read(holder->Committed()[0]), IsOkAndHolds(std::string("replica")));
}

TEST(SnapshotSegmentTest, ChecksumsAreXxh3OrZlibsCrc32) {
  // Known values: XXH3_64bits("abc") and zlib's crc32("abc").
  EXPECT_EQ(SnapshotChecksum(SnapshotChecksumKind::kXxh3, "abc", 3), 0x78af5f94892f3950ull);
  EXPECT_EQ(SnapshotChecksum(SnapshotChecksumKind::kCrc32, "abc", 3), 0x352441c2ull);
}

TEST(SnapshotSegmentTest, CapacityForAPayloadHoldsItInEachSlot) {
  for (uint64_t payload : {uint64_t{1}, uint64_t{4096}, uint64_t{4097}, uint64_t{75'000'000}}) {
    EXPECT_GE(SnapshotSlotBytes(SnapshotCapacityFor(payload)), payload) << payload;
  }
  EXPECT_THAT(SnapshotSegment::Create(4096), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace ringmaster
