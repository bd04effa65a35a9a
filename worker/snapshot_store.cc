#include "worker/snapshot_store.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "worker/machine.h"

namespace ringmaster {
namespace {

constexpr uint64_t kPage = 4096;

}  // namespace

absl::StatusOr<uint64_t> ParseSnapshotMemoryLimit(const std::string& text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--snapshot-memory-limit ", text,
                     ": not a share of memory (\"25%\") or a size (\"4GiB\", \"512MiB\", bytes)"));
  };
  double number = 0;
  if (absl::ConsumeSuffix(&rest, "%")) {
    if (!absl::SimpleAtod(rest, &number) || number < 0 || number > 90) return bad();
    return static_cast<uint64_t>(MachineMemoryBytes() * number / 100) / kPage * kPage;
  }
  uint64_t unit = 1;
  for (const auto& [suffix, size] : {std::pair<const char*, uint64_t>{"GiB", 1ull << 30},
                                     {"MiB", 1ull << 20},
                                     {"KiB", 1ull << 10}}) {
    if (absl::ConsumeSuffix(&rest, suffix)) {
      unit = size;
      break;
    }
  }
  if (!absl::SimpleAtod(rest, &number) || number < 0) return bad();
  return static_cast<uint64_t>(number * unit) / kPage * kPage;
}

SnapshotStore::SnapshotStore(uint64_t limit_bytes, int slots)
    : limit_bytes_(limit_bytes),
      segment_bytes_(limit_bytes / 2 / std::max(1, slots) / kPage * kPage),
      local_bytes_(segment_bytes_ * std::max(1, slots)) {}

absl::StatusOr<std::shared_ptr<SnapshotStore::Lease>> SnapshotStore::Acquire(
    const std::string& job_id, int rank) {
  const Key key{job_id, rank};
  {
    MutexLock lock(&mu_);
    auto it = segments_.find(key);
    if (it != segments_.end()) {
      it->second->leases++;
      it->second->last_used = ++uses_;
      return std::make_shared<Lease>(this, key, it->second);
    }
    if (!MakeRoom(job_id)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no room for another snapshot segment within --snapshot-memory-limit (",
                       limit_bytes_ >> 20, " MiB, half of it for ranks running here)"));
    }
  }
  // Made outside the mutex: ftruncate and mmap of a large segment.
  absl::StatusOr<UniqueFd> fd = SnapshotSegment::Create(segment_bytes_);
  if (!fd.ok()) return fd.status();
  auto segment = std::make_shared<Segment>();
  segment->fd = *std::move(fd);
  absl::StatusOr<std::unique_ptr<SnapshotSegment>> view =
      SnapshotSegment::Map(segment->fd.get(), segment_bytes_,
                           absl::StrCat("job ", job_id, " rank ", rank, "'s segment"));
  if (!view.ok()) return view.status();
  segment->view = *std::move(view);
  MutexLock lock(&mu_);
  auto [it, made] = segments_.emplace(key, segment);  // another rank thread may have made it
  it->second->leases++;
  it->second->last_used = ++uses_;
  return std::make_shared<Lease>(this, key, it->second);
}

bool SnapshotStore::MakeRoom(const std::string& job_id) {
  if (segment_bytes_ < SnapshotCapacityFor(1)) return false;
  while ((segments_.size() + 1) * segment_bytes_ > local_bytes_) {
    // Other jobs' first, then the job's own idle ones (of ranks that now
    // run elsewhere); least recently used first.
    auto worse = [&](const auto& a, const auto& b) {
      const bool a_other = a->first.first != job_id, b_other = b->first.first != job_id;
      if (a_other != b_other) return a_other;
      return a->second->last_used < b->second->last_used;
    };
    auto oldest = segments_.end();
    for (auto it = segments_.begin(); it != segments_.end(); ++it) {
      if (it->second->leases > 0) continue;
      if (oldest == segments_.end() || worse(it, oldest)) oldest = it;
    }
    if (oldest == segments_.end()) return false;
    spdlog::info("freeing job {} rank {}'s snapshot segment for room", oldest->first.first,
                 oldest->first.second);
    segments_.erase(oldest);
  }
  return true;
}

void SnapshotStore::Release(const Key& key, const Segment* segment) {
  MutexLock lock(&mu_);
  auto it = segments_.find(key);
  if (it != segments_.end() && it->second.get() == segment) it->second->leases--;
}

void SnapshotStore::Forget(const std::string& job_id) {
  MutexLock lock(&mu_);
  for (auto it = segments_.begin(); it != segments_.end();) {
    it = it->first.first == job_id ? segments_.erase(it) : std::next(it);
  }
}

std::vector<v1::HeldSnapshots> SnapshotStore::Held() const {
  std::vector<v1::HeldSnapshots> out;
  MutexLock lock(&mu_);
  for (const auto& [key, segment] : segments_) {
    const std::vector<SnapshotInfo> committed = segment->view->Committed();
    if (committed.empty()) continue;
    v1::HeldSnapshots held;
    held.set_job_id(key.first);
    held.set_rank(key.second);
    for (const SnapshotInfo& info : committed) held.add_steps(info.step);
    held.set_attempt(committed[0].attempt);
    held.set_world_size(committed[0].world_size);
    held.set_bytes(static_cast<int64_t>(committed[0].bytes));
    held.set_slot_bytes(static_cast<int64_t>(segment->view->slot_bytes()));
    out.push_back(std::move(held));
  }
  return out;
}

uint64_t SnapshotStore::reserved_bytes() const {
  MutexLock lock(&mu_);
  return segments_.size() * segment_bytes_;
}

}  // namespace ringmaster
