#include "trainer/checkpoint_writer.h"

#include <utility>

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

CheckpointWriter::CheckpointWriter(std::string dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  thread_ = std::thread([this] { Run(); });
}

CheckpointWriter::~CheckpointWriter() {
  (void)Flush();
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

absl::Status CheckpointWriter::Stage(ModelRunner& runner, const TrainingState& position) {
  {
    MutexLock lock(&mu_);
    if (pending_) return absl::FailedPreconditionError("a checkpoint is still being written");
    if (!error_.ok()) return std::exchange(error_, absl::OkStatus());
  }
  const Clock::time_point start = Clock::now();
  const size_t params = runner.size(), state = runner.optimizer_state_size();
  layout_ = LayoutOf(params, state);
  staging_.resize(layout_.bytes);
  WriteCheckpointFrame(position, params, state, staging_.data());
  if (absl::Status s = runner.CopyStateRange(
          0, params, reinterpret_cast<float*>(staging_.data() + layout_.params_offset),
          reinterpret_cast<float*>(staging_.data() + layout_.state_offset));
      !s.ok()) {
    return s;
  }
  step_ = position.step;
  MutexLock lock(&mu_);
  stats_.stage_seconds += SecondsSince(start);
  pending_ = true;
  return absl::OkStatus();
}

absl::Status CheckpointWriter::Flush() {
  MutexLock lock(&mu_);
  if (pending_) {
    const Clock::time_point start = Clock::now();
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !pending_; };
    mu_.Await(absl::Condition(&idle));
    stats_.wait_seconds += SecondsSince(start);
  }
  return std::exchange(error_, absl::OkStatus());
}

void CheckpointWriter::Run() {
  MutexLock lock(&mu_);
  auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ || stopping_; };
  while (true) {
    mu_.Await(absl::Condition(&work));
    if (!pending_) return;
    mu_.Unlock();
    // The staging buffer is this thread's until pending_ is cleared.
    const Clock::time_point start = Clock::now();
    SealCheckpoint(staging_.data(), layout_);
    const absl::Status written = WriteCheckpointFile(dir_, step_, staging_, keep_);
    const double seconds = SecondsSince(start);
    mu_.Lock();
    pending_ = false;
    stats_.write_seconds += seconds;
    if (written.ok()) {
      ++stats_.written;
      stats_.newest_step = step_;
    } else {
      error_ = written;
    }
  }
}

CheckpointWriterStats CheckpointWriter::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace ringmaster
