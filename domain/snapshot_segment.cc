#include "domain/snapshot_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#else
#include <xxhash.h>
#endif
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace ringmaster {
namespace {

constexpr uint64_t kPage = 4096;

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "other processes read the sequence numbers as plain integers");
static_assert(sizeof(SnapshotSegmentHeader) <= kSnapshotHeaderBytes);

std::string MiB(uint64_t bytes) { return absl::StrFormat("%.1f MiB", bytes / 1048576.0); }

bool KnownChecksum(SnapshotChecksumKind kind) {
  return kind == SnapshotChecksumKind::kXxh3 || kind == SnapshotChecksumKind::kCrc32;
}

// XXH3_64bits with the widest vector unit the CPU has: libxxhash picks
// it at run time (the plain entry point is SSE2's, at a third of AVX2's
// speed on data in the cache).
uint64_t Xxh3(const void* data, size_t bytes) {
#if defined(__x86_64__)
  return XXH3_64bits_dispatch(data, bytes);
#else
  return XXH3_64bits(data, bytes);
#endif
}

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", strerror(errno)));
}

}  // namespace

uint64_t SnapshotChecksum(SnapshotChecksumKind kind, const void* data, size_t bytes) {
  if (kind == SnapshotChecksumKind::kXxh3) return Xxh3(data, bytes);
  // zlib takes at most 4 GiB at a time.
  const auto* p = static_cast<const Bytef*>(data);
  uLong sum = 0;
  while (bytes > 0) {
    const size_t n = std::min<size_t>(bytes, std::numeric_limits<uInt>::max() & ~(kPage - 1));
    sum = crc32(sum, p, static_cast<uInt>(n));
    p += n;
    bytes -= n;
  }
  return sum;
}

uint64_t SnapshotSlotBytes(uint64_t capacity) {
  if (capacity < kSnapshotHeaderBytes) return 0;
  return (capacity - kSnapshotHeaderBytes) / 2 / kPage * kPage;
}

uint64_t SnapshotCapacityFor(uint64_t payload) {
  const uint64_t slot = (payload + kPage - 1) / kPage * kPage;
  return kSnapshotHeaderBytes + 2 * std::max(slot, kPage);
}

absl::StatusOr<UniqueFd> SnapshotSegment::Create(uint64_t capacity) {
  if (SnapshotSlotBytes(capacity) < kPage) {
    return absl::InvalidArgumentError(
        absl::StrCat("a snapshot segment of ", capacity, " bytes has no room for two slots"));
  }
  UniqueFd fd(memfd_create("ringmaster-snapshot", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Errno("memfd_create");
  if (ftruncate(fd.get(), static_cast<off_t>(capacity)) != 0) {
    return Errno(absl::StrCat("snapshot segment of ", MiB(capacity)));
  }
  // The rank can neither grow nor shrink it: what it writes past its end
  // faults in the rank, and the worker's mapping stays whole.
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Errno("sealing the snapshot segment");
  }
  void* mapped =
      mmap(nullptr, kSnapshotHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (mapped == MAP_FAILED) return Errno("mapping the snapshot segment");
  auto* header = static_cast<SnapshotSegmentHeader*>(mapped);
  header->magic = SnapshotSegmentHeader::kMagic;
  header->version = SnapshotSegmentHeader::kVersion;
  header->capacity = capacity;
  header->slot_bytes = SnapshotSlotBytes(capacity);
  munmap(mapped, kSnapshotHeaderBytes);
  return fd;
}

absl::StatusOr<std::unique_ptr<SnapshotSegment>> SnapshotSegment::Map(int fd, uint64_t capacity,
                                                                      const std::string& what) {
  if (capacity == 0) {
    struct stat st {};
    if (fstat(fd, &st) != 0) return Errno(what);
    capacity = static_cast<uint64_t>(st.st_size);
  }
  if (SnapshotSlotBytes(capacity) < kPage) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", capacity, " bytes is too small for a snapshot segment"));
  }
  void* mapped = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) return Errno(absl::StrCat("mapping ", what));
  std::unique_ptr<SnapshotSegment> segment(
      new SnapshotSegment(static_cast<char*>(mapped), capacity, what));
  const SnapshotSegmentHeader* h = segment->header();
  if (h->magic != SnapshotSegmentHeader::kMagic || h->version != SnapshotSegmentHeader::kVersion) {
    return absl::FailedPreconditionError(absl::StrCat(what, " is not a snapshot segment"));
  }
  return segment;
}

SnapshotSegment::SnapshotSegment(char* base, uint64_t capacity, std::string what)
    : base_(base),
      capacity_(capacity),
      slot_bytes_(SnapshotSlotBytes(capacity)),
      what_(std::move(what)) {}

SnapshotSegment::~SnapshotSegment() { munmap(base_, capacity_); }

absl::StatusOr<SnapshotSegment::Slot> SnapshotSegment::Begin(uint64_t bytes) {
  if (bytes > slot_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("a snapshot of ", MiB(bytes), " does not fit ",
                                                     what_, ", whose slots hold ",
                                                     MiB(slot_bytes_)));
  }
  SnapshotSlotHeader* slots = header()->slots;
  const uint64_t s0 = slots[0].sequence.load(std::memory_order_acquire);
  const uint64_t s1 = slots[1].sequence.load(std::memory_order_acquire);
  const int index = s0 <= s1 ? 0 : 1;  // the empty or older one
  slots[index].sequence.store(0, std::memory_order_relaxed);
  // The cleared number is seen before any byte of the new payload.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return Slot{index, SlotData(index), bytes};
}

void SnapshotSegment::Commit(const Slot& slot, const SnapshotInfo& info, uint64_t checksum) {
  SnapshotSlotHeader* slots = header()->slots;
  SnapshotSlotHeader& h = slots[slot.index];
  h.step = info.step;
  h.bytes = slot.bytes;
  h.attempt = info.attempt;
  h.world_size = info.world_size;
  h.rank = info.rank;
  h.format = static_cast<uint32_t>(info.format);
  h.commit_unix_ms = absl::ToUnixMillis(absl::Now());
  h.checksum_kind = static_cast<uint32_t>(info.checksum_kind);
  h.checksum = checksum;
  const uint64_t other = slots[1 - slot.index].sequence.load(std::memory_order_acquire);
  h.sequence.store(other + 1, std::memory_order_release);
}

std::vector<SnapshotInfo> SnapshotSegment::Committed() const {
  std::vector<SnapshotInfo> out;
  const SnapshotSlotHeader* slots = header()->slots;
  for (int i = 0; i < 2; ++i) {
    const SnapshotSlotHeader& h = slots[i];
    SnapshotInfo info;
    info.slot = i;
    info.sequence = h.sequence.load(std::memory_order_acquire);
    info.step = h.step;
    info.bytes = h.bytes;
    info.checksum = h.checksum;
    info.checksum_kind = static_cast<SnapshotChecksumKind>(h.checksum_kind);
    info.attempt = h.attempt;
    info.world_size = h.world_size;
    info.rank = h.rank;
    info.format = static_cast<SnapshotFormat>(h.format);
    info.commit_unix_ms = h.commit_unix_ms;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (info.sequence == 0 || info.bytes > slot_bytes_ ||
        h.sequence.load(std::memory_order_relaxed) != info.sequence) {
      continue;
    }
    out.push_back(info);
  }
  std::sort(out.begin(), out.end(),
            [](const SnapshotInfo& a, const SnapshotInfo& b) { return a.sequence > b.sequence; });
  return out;
}

absl::StatusOr<std::string> SnapshotSegment::Read(const SnapshotInfo& info) const {
  if (info.slot < 0 || info.slot > 1 || info.bytes > slot_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(what_, ": no such snapshot"));
  }
  std::string payload(SlotData(info.slot), info.bytes);
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint64_t after = header()->slots[info.slot].sequence.load(std::memory_order_relaxed);
  if (after != info.sequence) {
    return absl::DataLossError(absl::StrCat(what_, ": the snapshot of step ", info.step,
                                            " was overwritten while it was read"));
  }
  if (!KnownChecksum(info.checksum_kind) ||
      SnapshotChecksum(info.checksum_kind, payload.data(), payload.size()) != info.checksum) {
    return absl::DataLossError(
        absl::StrCat(what_, ": the snapshot of step ", info.step, " fails its checksum"));
  }
  return payload;
}

absl::Status SnapshotSegment::CommitChecked(const Slot& slot, const SnapshotInfo& info) {
  if (!KnownChecksum(info.checksum_kind) ||
      SnapshotChecksum(info.checksum_kind, slot.data, slot.bytes) != info.checksum) {
    return absl::DataLossError(
        absl::StrCat("the snapshot of step ", info.step, " for ", what_, " fails its checksum"));
  }
  Commit(slot, info, info.checksum);
  return absl::OkStatus();
}

absl::StatusOr<std::string> SnapshotSegment::ReadPiece(const SnapshotInfo& info, uint64_t offset,
                                                       uint64_t max_bytes) const {
  if (info.slot < 0 || info.slot > 1 || info.bytes > slot_bytes_ || offset > info.bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what_, ": no such snapshot piece"));
  }
  std::string piece(SlotData(info.slot) + offset, std::min(max_bytes, info.bytes - offset));
  std::atomic_thread_fence(std::memory_order_acquire);
  if (header()->slots[info.slot].sequence.load(std::memory_order_relaxed) != info.sequence) {
    return absl::AbortedError(absl::StrCat(what_, ": the snapshot of step ", info.step,
                                           " was overwritten while it was read"));
  }
  return piece;
}

absl::Status SnapshotSegment::Put(const SnapshotInfo& info, const std::string& payload) {
  if (!KnownChecksum(info.checksum_kind) ||
      SnapshotChecksum(info.checksum_kind, payload.data(), payload.size()) != info.checksum) {
    return absl::DataLossError(
        absl::StrCat("the snapshot of step ", info.step, " for ", what_, " fails its checksum"));
  }
  absl::StatusOr<Slot> slot = Begin(payload.size());
  if (!slot.ok()) return slot.status();
  std::memcpy(slot->data, payload.data(), payload.size());
  Commit(*slot, info, info.checksum);
  return absl::OkStatus();
}

}  // namespace ringmaster
