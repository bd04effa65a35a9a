// A rank's snapshots in memory its worker owns: one shared-memory segment
// per rank (a sealed memfd), made by the worker and handed to the rank
// process as an open descriptor, so that it outlives the rank's death and
// no other process can open it by name.
//
// The segment holds a header page and two slots. A writer puts each
// snapshot into the slot that does not hold the newest committed one:
// first it clears that slot's sequence number, then writes the payload,
// then the step and sizes, and last the checksum and a new sequence
// number. A reader counts a slot only when its sequence number is set,
// its checksum matches and the number has not changed while it read. A
// rank killed mid-write so leaves the other slot's snapshot valid.
//
// The layout is plain little-endian integers at fixed offsets, so that
// the Python package (ringmaster.checkpoint) writes the same segments. The
// checksum of a payload is XXH3-64 (the trainer's: several times faster
// than a CRC) or zlib's CRC-32 (Python's standard library has it), as its
// slot says. A reader trusts nothing it reads: sizes are checked against
// the slots' own.
#ifndef RINGMASTER_DOMAIN_SNAPSHOT_SEGMENT_H_
#define RINGMASTER_DOMAIN_SNAPSHOT_SEGMENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ringmaster {

// What a slot's payload is.
enum class SnapshotFormat : uint32_t {
  kTrainer = 1,  // the built-in trainer's checkpoint file (trainer/checkpoint.h)
  kPython = 2,   // ringmaster.checkpoint's
};

enum class SnapshotChecksumKind : uint32_t {
  kXxh3 = 1,   // XXH3_64bits
  kCrc32 = 2,  // zlib's crc32, in the low 32 bits
};

// A committed snapshot, as its slot's header says.
struct SnapshotInfo {
  int slot = 0;
  uint64_t sequence = 0;  // grows with every commit; the newest is the highest
  int64_t step = 0;
  uint64_t bytes = 0;  // of the payload
  uint64_t checksum = 0;
  SnapshotChecksumKind checksum_kind = SnapshotChecksumKind::kXxh3;
  int32_t attempt = 0;
  int32_t world_size = 0;
  int32_t rank = 0;
  SnapshotFormat format = SnapshotFormat::kTrainer;
  int64_t commit_unix_ms = 0;
};

// The layout, shared with python/ringmaster/checkpoint.py.
struct SnapshotSlotHeader {
  std::atomic<uint64_t> sequence;  // 0: empty, or being written
  int64_t step;
  uint64_t bytes;
  uint64_t checksum;
  int32_t attempt;
  int32_t world_size;
  int32_t rank;
  uint32_t format;
  uint32_t checksum_kind;
  uint32_t reserved;
  int64_t commit_unix_ms;
};
static_assert(sizeof(SnapshotSlotHeader) == 64, "the Python writer uses these offsets");

struct SnapshotSegmentHeader {
  static constexpr uint32_t kMagic = 0x53534d52;  // "RMSS"
  static constexpr uint32_t kVersion = 1;
  uint32_t magic;
  uint32_t version;
  uint64_t capacity;    // of the whole segment
  uint64_t slot_bytes;  // each slot's payload room
  uint64_t reserved;
  SnapshotSlotHeader slots[2];
};

// The header page; the slots follow it, each slot_bytes long.
inline constexpr uint64_t kSnapshotHeaderBytes = 4096;

// The checksum of `bytes` of that kind.
uint64_t SnapshotChecksum(SnapshotChecksumKind kind, const void* data, size_t bytes);

// Thread-compatible: one writer (the rank) and any number of readers, in
// any processes.
class SnapshotSegment {
 public:
  // The worker's: a new sealed memfd of `capacity` bytes (whole pages, at
  // least a header and two one-page slots) with its header written. Its
  // pages are taken only as snapshots touch them.
  static absl::StatusOr<UniqueFd> Create(uint64_t capacity);
  // Maps the segment open at `fd` (not taken over). `capacity` is what its
  // maker gave it; 0 takes the file's size (the rank's side). `what`
  // names it in errors.
  static absl::StatusOr<std::unique_ptr<SnapshotSegment>> Map(int fd, uint64_t capacity,
                                                              const std::string& what);
  ~SnapshotSegment();
  SnapshotSegment(const SnapshotSegment&) = delete;
  SnapshotSegment& operator=(const SnapshotSegment&) = delete;

  uint64_t capacity() const { return capacity_; }
  uint64_t slot_bytes() const { return slot_bytes_; }

  // Writing. A slot being written: `data` has room for `bytes`.
  struct Slot {
    int index = -1;
    char* data = nullptr;
    uint64_t bytes = 0;
  };
  // Clears the slot that does not hold the newest committed snapshot and
  // gives its room. RESOURCE_EXHAUSTED naming both sizes when `bytes` is
  // more than a slot holds.
  absl::StatusOr<Slot> Begin(uint64_t bytes);
  // The payload of `slot` is written and its checksum (of
  // info.checksum_kind) is `checksum`: records `info`'s step, attempt,
  // world size, rank and format, then the checksum, then the sequence
  // number after the other slot's.
  void Commit(const Slot& slot, const SnapshotInfo& info, uint64_t checksum);
  // Commits a payload written from elsewhere (a peer's replica, piece by
  // piece) once it matches info.checksum; DATA_LOSS otherwise, and the
  // slot stays empty.
  absl::Status CommitChecked(const Slot& slot, const SnapshotInfo& info);

  // Reading. The committed snapshots as their headers say, newest first;
  // a header whose size does not fit its slot is left out.
  std::vector<SnapshotInfo> Committed() const;
  // A copy of the snapshot's payload, checked: DATA_LOSS when its checksum
  // does not match, or it changed while being read (named by `what`).
  absl::StatusOr<std::string> Read(const SnapshotInfo& info) const;
  // Up to `max_bytes` of its payload from `offset`, unchecked (the reader
  // of the last piece checks the whole): ABORTED when the snapshot was
  // overwritten while it was read.
  absl::StatusOr<std::string> ReadPiece(const SnapshotInfo& info, uint64_t offset,
                                        uint64_t max_bytes) const;
  // Writes a payload read elsewhere (a peer's replica) as a committed
  // snapshot of this segment, checked against its checksum first.
  absl::Status Put(const SnapshotInfo& info, const std::string& payload);

 private:
  SnapshotSegment(char* base, uint64_t capacity, std::string what);
  SnapshotSegmentHeader* header() const { return reinterpret_cast<SnapshotSegmentHeader*>(base_); }
  char* SlotData(int index) const {
    return base_ + kSnapshotHeaderBytes + static_cast<uint64_t>(index) * slot_bytes_;
  }

  char* const base_;
  const uint64_t capacity_;
  const uint64_t slot_bytes_;
  const std::string what_;
};

// The room each slot of a segment of `capacity` bytes has.
uint64_t SnapshotSlotBytes(uint64_t capacity);
// The capacity a segment needs for slots of `payload` bytes.
uint64_t SnapshotCapacityFor(uint64_t payload);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_SNAPSHOT_SEGMENT_H_
