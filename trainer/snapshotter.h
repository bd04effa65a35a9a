// A rank's snapshots into the segment its worker holds for it
// (domain/snapshot_segment.h): after every `every_steps` steps the whole
// training state, in the checkpoint file's format (trainer/checkpoint.h),
// so that a restart reads it back as it would a checkpoint.
//
// How the state gets into the slot:
//   kStaged   the training thread copies the whole state after the step;
//   kBucketed the reducer's thread takes each bucket as it applies the
//             optimizer to it (the fused update path; without it,
//             staged). A CPU runner's update writes the bucket's new
//             parameters and optimizer state straight into the slot, and
//             the rank then trains on the slot: the snapshot costs no
//             copy. A GPU runner updates in place and the bucket is
//             copied.
// Either way a thread of its own then computes the checksum and commits
// the slot. The next snapshot waits for
// that commit before it clears the other slot, which until then holds the
// one valid snapshot: each step is snapshotted, and a commit slower than
// a step slows the step (SnapshotStats::wait_seconds; snapshot_every_steps
// spaces them out). A committed slot the rank trains on is only read: the
// next step's update writes elsewhere.
#ifndef RINGMASTER_TRAINER_SNAPSHOTTER_H_
#define RINGMASTER_TRAINER_SNAPSHOTTER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "domain/snapshot_segment.h"
#include "trainer/checkpoint.h"
#include "trainer/model_runner.h"

namespace ringmaster {

enum class SnapshotCopy { kStaged, kBucketed };

struct SnapshotterOptions {
  int every_steps = 1;
  SnapshotCopy copy = SnapshotCopy::kBucketed;
  int32_t attempt = 0;
  int32_t rank = 0;
  int32_t world_size = 1;
};

// What snapshots cost a rank so far.
struct SnapshotStats {
  int64_t committed = 0;
  double wait_seconds = 0;  // the training thread waiting for the commit before
  // What the step waited for: the commits before, and whole copies on the
  // training thread (staged, or buckets not all copied).
  double stall_seconds = 0;
  double copy_seconds = 0;    // on the training thread (staged) or the reducer's
  double commit_seconds = 0;  // checksums and commits, on the snapshot thread
  int64_t bytes = 0;          // of one snapshot
  int64_t newest_step = -1;   // committed
};

// The training thread calls Begin and End; the reducer's thread Update
// between them. One mutex over the hand-off to the snapshot thread.
class Snapshotter {
 public:
  // Writes into `segment` (not owned). RESOURCE_EXHAUSTED naming both
  // sizes when a snapshot of `params` and `state` floats does not fit its
  // slots.
  static absl::StatusOr<std::unique_ptr<Snapshotter>> Make(SnapshotSegment* segment, size_t params,
                                                           size_t state,
                                                           SnapshotterOptions options);
  // Commits what is being committed and stops the thread.
  ~Snapshotter();
  Snapshotter(const Snapshotter&) = delete;
  Snapshotter& operator=(const Snapshotter&) = delete;

  // Training thread, before the step that will make `step` steps done:
  // whether its state is taken (each every_steps-th). Its slot is taken by
  // the first copy into it, after the commit before is done (which a
  // step's forward pass leaves time for).
  bool Begin(int64_t step);
  // Whether the step being taken is taken bucket by bucket (Update).
  bool copying_buckets() const { return taking_ && options_.copy == SnapshotCopy::kBucketed; }
  // Reducer's thread, in place of runner.UpdateRange while
  // copying_buckets(): applies the step's optimizer update to [offset,
  // offset + n) and takes the range into the snapshot. Every range of the
  // step comes this way, or none.
  absl::Status Update(ModelRunner& runner, size_t offset, size_t n);
  // Training thread, after the step (and the runner's AfterStep): the
  // whole copy when the ranges did not come through Update, the frame
  // from `position`, and the hand-off.
  absl::Status End(ModelRunner& runner, const TrainingState& position);
  // Waits until nothing is being committed.
  void Drain();

  SnapshotStats stats() const;

 private:
  Snapshotter(SnapshotSegment* segment, size_t params, size_t state, SnapshotterOptions options);
  void Run();  // the snapshot thread
  // Waits for the commit before, then clears the slot this step fills.
  void Reserve();
  float* params_out() const { return reinterpret_cast<float*>(slot_.data + layout_.params_offset); }
  float* state_out() const { return reinterpret_cast<float*>(slot_.data + layout_.state_offset); }

  SnapshotSegment* const segment_;
  const size_t params_, state_;
  const CheckpointLayout layout_;
  const SnapshotterOptions options_;

  // The training thread's (and, between Begin and End, the reducer's).
  bool taking_ = false;    // this step's state is taken
  bool reserved_ = false;  // and its slot cleared for it
  SnapshotSegment::Slot slot_;
  int64_t step_ = 0;
  std::atomic<size_t> copied_{0};  // parameters copied for the step so far
  std::atomic<int64_t> copy_nanos_{0};
  int64_t whole_copy_nanos_ = 0;  // the training thread's copies in End

  mutable Mutex mu_;
  bool pending_ ABSL_GUARDED_BY(mu_) = false;  // a slot handed to the thread
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  SnapshotSegment::Slot pending_slot_ ABSL_GUARDED_BY(mu_);
  int64_t pending_step_ ABSL_GUARDED_BY(mu_) = 0;
  SnapshotStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// The newest snapshot of the segment that reads back whole and decodes as
// the trainer's; NOT_FOUND when there is none. A corrupt newer one is
// passed over and listed in `skipped`.
absl::StatusOr<LoadedCheckpoint> LoadNewestSnapshot(const SnapshotSegment& segment);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_SNAPSHOTTER_H_
