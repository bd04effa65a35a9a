#include "worker/snapshot_store.h"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "worker/machine.h"

namespace ringmaster {
namespace {

constexpr uint64_t kPage = 4096;

}  // namespace

v1::SnapshotHeader SnapshotHeaderOf(const std::string& job_id, int rank, const SnapshotInfo& info) {
  v1::SnapshotHeader header;
  header.set_job_id(job_id);
  header.set_rank(rank);
  header.set_attempt(info.attempt);
  header.set_world_size(info.world_size);
  header.set_step(info.step);
  header.set_bytes(static_cast<int64_t>(info.bytes));
  header.set_checksum(info.checksum);
  header.set_checksum_kind(static_cast<uint32_t>(info.checksum_kind));
  header.set_format(static_cast<uint32_t>(info.format));
  header.set_commit_unix_ms(info.commit_unix_ms);
  return header;
}

SnapshotInfo SnapshotInfoOf(const v1::SnapshotHeader& header) {
  SnapshotInfo info;
  info.step = header.step();
  info.bytes = static_cast<uint64_t>(std::max<int64_t>(0, header.bytes()));
  info.checksum = header.checksum();
  info.checksum_kind = static_cast<SnapshotChecksumKind>(header.checksum_kind());
  info.attempt = header.attempt();
  info.world_size = header.world_size();
  info.rank = header.rank();
  info.format = static_cast<SnapshotFormat>(header.format());
  info.commit_unix_ms = header.commit_unix_ms();
  return info;
}

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
  for (auto* table : {&segments_, &replicas_}) {
    for (auto it = table->begin(); it != table->end();) {
      it = it->first.first == job_id ? table->erase(it) : std::next(it);
    }
  }
}

absl::Status SnapshotStore::WriteReplica(const v1::SnapshotHeader& header, uint64_t offset,
                                         absl::string_view data) {
  const Key key{header.job_id(), header.rank()};
  if (offset == 0) RETURN_IF_ERROR(BeginReplica(key, header));
  std::shared_ptr<Segment> replica;
  {
    MutexLock lock(&mu_);
    auto it = replicas_.find(key);
    if (it == replicas_.end() || !it->second->writing ||
        it->second->writing_info.step != header.step() || it->second->next_offset != offset ||
        data.size() > it->second->writing->bytes - offset) {
      return absl::FailedPreconditionError(
          absl::StrCat("a piece at byte ", offset, " of job ", key.first, " rank ", key.second,
                       "'s snapshot of step ", header.step(), " that does not follow the last"));
    }
    replica = it->second;
    std::memcpy(replica->writing->data + offset, data.data(), data.size());
    replica->next_offset += data.size();
    if (replica->next_offset < replica->writing->bytes) return absl::OkStatus();
  }
  return EndReplica(key, std::move(replica));
}

absl::Status SnapshotStore::BeginReplica(const Key& key, const v1::SnapshotHeader& header) {
  const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(0, header.bytes()));
  const uint64_t capacity = SnapshotCapacityFor(bytes);
  std::shared_ptr<Segment> replica;
  {
    MutexLock lock(&mu_);
    auto it = replicas_.find(key);
    if (it != replicas_.end() && it->second->view->slot_bytes() >= bytes) {
      replica = it->second;
    } else {
      if (it != replicas_.end()) replicas_.erase(it);  // the state grew: its slots are too small
      if (!MakeReplicaRoom(key.first, capacity)) return NoRoomForReplica(bytes);
    }
  }
  if (replica == nullptr) {
    // Made outside the mutex, as the ranks' segments are.
    replica = std::make_shared<Segment>();
    ASSIGN_OR_RETURN(replica->fd, SnapshotSegment::Create(capacity));
    ASSIGN_OR_RETURN(
        replica->view,
        SnapshotSegment::Map(replica->fd.get(), capacity,
                             absl::StrCat("the replica of job ", key.first, " rank ", key.second)));
    MutexLock lock(&mu_);
    // Another push may have taken the room meanwhile.
    if (!MakeReplicaRoom(key.first, capacity)) return NoRoomForReplica(bytes);
    replicas_[key] = replica;
  }
  MutexLock lock(&mu_);
  auto it = replicas_.find(key);
  if (it == replicas_.end() || it->second != replica) {
    // Freed for another push's room while unlocked: this one is given up.
    return absl::AbortedError(absl::StrCat("the replica of job ", key.first, " rank ", key.second,
                                           " was freed for room while its push began"));
  }
  replica->last_used = ++uses_;
  ASSIGN_OR_RETURN(SnapshotSegment::Slot slot, replica->view->Begin(bytes));
  replica->writing = slot;
  replica->next_offset = 0;
  replica->writing_info = SnapshotInfoOf(header);
  replica->writing_info.bytes = bytes;
  return absl::OkStatus();
}

absl::Status SnapshotStore::NoRoomForReplica(uint64_t bytes) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "no room for a replica of ", bytes >> 20, " MiB within this worker's ",
      (limit_bytes_ - local_bytes_) >> 20, " MiB for replicas (--snapshot-memory-limit)"));
}

absl::Status SnapshotStore::EndReplica(const Key& key, std::shared_ptr<Segment> replica) {
  // Checked outside the mutex (the checksum of the whole); the replica
  // stays alive while held, and only this push writes its slot.
  const SnapshotSegment::Slot slot = *replica->writing;
  const SnapshotInfo info = replica->writing_info;
  absl::Status committed = replica->view->CommitChecked(slot, info);
  MutexLock lock(&mu_);
  replica->writing.reset();
  return committed;
}

absl::StatusOr<v1::FetchSnapshotResponse> SnapshotStore::ReadNewest(const std::string& job_id,
                                                                    int rank, int64_t step,
                                                                    uint64_t offset,
                                                                    uint64_t max_bytes) const {
  const Key key{job_id, rank};
  std::shared_ptr<Segment> best;
  SnapshotInfo newest;
  {
    MutexLock lock(&mu_);
    for (const auto* table : {&segments_, &replicas_}) {
      auto it = table->find(key);
      if (it == table->end()) continue;
      std::vector<SnapshotInfo> committed = it->second->view->Committed();
      if (committed.empty() || (best && committed[0].step <= newest.step)) continue;
      best = it->second;
      newest = committed[0];
    }
  }
  if (best == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("this worker holds no snapshot of job ", job_id, " rank ", rank));
  }
  if (step != 0 && newest.step != step) {
    return absl::AbortedError(absl::StrCat("job ", job_id, " rank ", rank, "'s snapshot of step ",
                                           step, " is no longer the newest held here"));
  }
  v1::FetchSnapshotResponse response;
  *response.mutable_header() = SnapshotHeaderOf(job_id, rank, newest);
  ASSIGN_OR_RETURN(*response.mutable_data(), best->view->ReadPiece(newest, offset, max_bytes));
  return response;
}

std::optional<std::pair<SnapshotInfo, std::string>> SnapshotStore::NewerReplica(
    const std::string& job_id, int rank, const SnapshotSegment& into) const {
  std::shared_ptr<Segment> replica;
  {
    MutexLock lock(&mu_);
    auto it = replicas_.find({job_id, rank});
    if (it == replicas_.end()) return std::nullopt;
    replica = it->second;
  }
  const std::vector<SnapshotInfo> held = replica->view->Committed();
  const std::vector<SnapshotInfo> own = into.Committed();
  if (held.empty() || (!own.empty() && own[0].step >= held[0].step)) return std::nullopt;
  absl::StatusOr<std::string> payload = replica->view->Read(held[0]);
  if (!payload.ok()) {
    spdlog::warn("{}", std::string(payload.status().message()));
    return std::nullopt;
  }
  return std::make_pair(held[0], *std::move(payload));
}

bool SnapshotStore::MakeReplicaRoom(const std::string& job_id, uint64_t bytes) {
  const uint64_t room = limit_bytes_ - local_bytes_;
  while (ReplicaBytesLocked() + bytes > room) {
    auto oldest = replicas_.end();
    for (auto it = replicas_.begin(); it != replicas_.end(); ++it) {
      if (it->second->writing) continue;
      const bool other = it->first.first != job_id;
      const bool oldest_other = oldest != replicas_.end() && oldest->first.first != job_id;
      if (oldest == replicas_.end() || (other && !oldest_other) ||
          (other == oldest_other && it->second->last_used < oldest->second->last_used)) {
        oldest = it;
      }
    }
    if (oldest == replicas_.end()) return false;
    spdlog::info("freeing the replica of job {} rank {} for room", oldest->first.first,
                 oldest->first.second);
    replicas_.erase(oldest);
  }
  return true;
}

std::vector<v1::HeldSnapshots> SnapshotStore::Held() const {
  std::vector<v1::HeldSnapshots> out;
  MutexLock lock(&mu_);
  for (const auto* table : {&segments_, &replicas_}) {
    for (const auto& [key, segment] : *table) {
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
      held.set_replica(table == &replicas_);
      out.push_back(std::move(held));
    }
  }
  return out;
}

uint64_t SnapshotStore::reserved_bytes() const {
  MutexLock lock(&mu_);
  return segments_.size() * segment_bytes_;
}

uint64_t SnapshotStore::replica_bytes() const {
  MutexLock lock(&mu_);
  return ReplicaBytesLocked();
}

uint64_t SnapshotStore::ReplicaBytesLocked() const {
  uint64_t sum = 0;
  for (const auto& [key, replica] : replicas_) sum += replica->view->capacity();
  return sum;
}

}  // namespace ringmaster
