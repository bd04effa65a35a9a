#include "trainer/snapshotter.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NanosSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Snapshotter>> Snapshotter::Make(SnapshotSegment* segment,
                                                               size_t params, size_t state,
                                                               SnapshotterOptions options) {
  const uint64_t bytes = LayoutOf(params, state).bytes;
  if (bytes > segment->slot_bytes()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "a snapshot of this model and its optimizer is %.1f MiB; the worker's segment holds "
        "two of %.1f MiB (its --snapshot-memory-limit)",
        bytes / 1048576.0, segment->slot_bytes() / 1048576.0));
  }
  return std::unique_ptr<Snapshotter>(new Snapshotter(segment, params, state, options));
}

Snapshotter::Snapshotter(SnapshotSegment* segment, size_t params, size_t state,
                         SnapshotterOptions options)
    : segment_(segment),
      params_(params),
      state_(state),
      layout_(LayoutOf(params, state)),
      options_(options) {
  thread_ = std::thread([this] { Run(); });
}

Snapshotter::~Snapshotter() {
  Drain();
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool Snapshotter::Begin(int64_t step) {
  taking_ = options_.every_steps > 0 && step % options_.every_steps == 0;
  reserved_ = false;
  step_ = step;
  copied_.store(0, std::memory_order_relaxed);
  return taking_;
}

void Snapshotter::Reserve() {
  {
    // The slot to write is the older one only once the newer one is
    // committed: until then it holds the one valid snapshot.
    MutexLock lock(&mu_);
    if (pending_) {
      const Clock::time_point start = Clock::now();
      auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !pending_; };
      mu_.Await(absl::Condition(&idle));
      stats_.wait_seconds += NanosSince(start) * 1e-9;
    }
  }
  // Make checked that it fits.
  slot_ = *segment_->Begin(layout_.bytes);
  reserved_ = true;
}

absl::Status Snapshotter::Update(ModelRunner& runner, size_t offset, size_t n) {
  if (!taking_) return runner.UpdateRange(offset, n);
  if (!reserved_) Reserve();
  int64_t nanos = 0;
  if (runner.UpdatesInto()) {
    RETURN_IF_ERROR(runner.UpdateRangeInto(offset, n, params_out(), state_out()));
  } else {
    RETURN_IF_ERROR(runner.UpdateRange(offset, n));
    const Clock::time_point start = Clock::now();
    RETURN_IF_ERROR(runner.CopyStateRange(offset, n, params_out(), state_out()));
    nanos = NanosSince(start);
  }
  copied_.fetch_add(n, std::memory_order_relaxed);
  copy_nanos_.fetch_add(nanos, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status Snapshotter::End(ModelRunner& runner, const TrainingState& position) {
  if (!taking_) return absl::OkStatus();
  taking_ = false;
  if (!reserved_) Reserve();
  reserved_ = false;
  // Staged, or a step whose ranges did not come through Update (the
  // update path that clips waits for every bucket): the whole state now.
  if (copied_.load(std::memory_order_relaxed) != params_) {
    const Clock::time_point start = Clock::now();
    if (absl::Status s = runner.CopyStateRange(0, params_, params_out(), state_out()); !s.ok()) {
      return s;
    }
    const int64_t nanos = NanosSince(start);
    copy_nanos_.fetch_add(nanos, std::memory_order_relaxed);
    whole_copy_nanos_ += nanos;
  }
  TrainingState frame = position;
  frame.step = step_;
  WriteCheckpointFrame(frame, params_, state_, slot_.data);
  std::memset(slot_.data + layout_.checksum_offset, 0, sizeof(uint32_t));
  MutexLock lock(&mu_);
  pending_slot_ = slot_;
  pending_step_ = step_;
  pending_ = true;
  return absl::OkStatus();
}

void Snapshotter::Run() {
  MutexLock lock(&mu_);
  auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ || stopping_; };
  while (true) {
    mu_.Await(absl::Condition(&work));
    if (!pending_) return;  // stopping, nothing left
    const SnapshotSegment::Slot slot = pending_slot_;
    SnapshotInfo info;
    info.step = pending_step_;
    info.attempt = options_.attempt;
    info.world_size = options_.world_size;
    info.rank = options_.rank;
    info.format = SnapshotFormat::kTrainer;
    info.checksum_kind = SnapshotChecksumKind::kXxh3;
    mu_.Unlock();
    const Clock::time_point start = Clock::now();
    // The slot's checksum stands for the file's own (left 0 here): a
    // restore checks the one, a write to disk computes the other.
    segment_->Commit(slot, info, SnapshotChecksum(info.checksum_kind, slot.data, layout_.bytes));
    const int64_t nanos = NanosSince(start);
    mu_.Lock();
    pending_ = false;
    ++stats_.committed;
    stats_.commit_seconds += nanos * 1e-9;
    stats_.newest_step = info.step;
  }
}

void Snapshotter::Drain() {
  MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !pending_; };
  mu_.Await(absl::Condition(&idle));
}

SnapshotStats Snapshotter::stats() const {
  MutexLock lock(&mu_);
  SnapshotStats stats = stats_;
  stats.bytes = stats.committed > 0 ? static_cast<int64_t>(layout_.bytes) : 0;
  stats.copy_seconds = copy_nanos_.load(std::memory_order_relaxed) * 1e-9;
  stats.stall_seconds = stats.wait_seconds + whole_copy_nanos_ * 1e-9;
  return stats;
}

absl::StatusOr<LoadedCheckpoint> LoadNewestSnapshot(const SnapshotSegment& segment) {
  LoadedCheckpoint loaded;
  for (const SnapshotInfo& info : segment.Committed()) {
    if (info.format != SnapshotFormat::kTrainer) {
      loaded.skipped.push_back(
          absl::StrCat("the snapshot of step ", info.step, " is not the built-in trainer's"));
      continue;
    }
    absl::StatusOr<std::string> payload = segment.Read(info);
    if (!payload.ok()) {
      loaded.skipped.push_back(std::string(payload.status().message()));
      continue;
    }
    const std::string what = absl::StrCat("the snapshot of step ", info.step);
    // The slot's checksum matched: the file's own is not computed.
    absl::StatusOr<TrainingState> state =
        DecodeCheckpoint(*std::move(payload), what, /*verify_checksum=*/false);
    if (!state.ok()) {
      loaded.skipped.push_back(std::string(state.status().message()));
      continue;
    }
    loaded.state = *std::move(state);
    loaded.path = "memory";
    return loaded;
  }
  std::string why = "no readable snapshot in the worker's memory";
  for (const std::string& skipped : loaded.skipped) absl::StrAppend(&why, "; skipped ", skipped);
  return absl::NotFoundError(why);
}

}  // namespace ringmaster
