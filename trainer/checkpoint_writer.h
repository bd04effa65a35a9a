// Checkpoints to disk off the training thread: the step's state is copied
// into a staging buffer in the checkpoint file's layout (a memory copy, the
// only part on the step's path), and a thread of its own computes the
// checksum and writes the file with the usual temporary directory, fsync
// and rename (trainer/checkpoint.h), so that a reader still sees a whole
// checkpoint or none, at any world size.
//
// One write at a time: the step that stages a checkpoint goes on while it
// is written; only a checkpoint due while the one before is still being
// written (a disk slower than the interval) waits for it (Flush), and the
// wait is counted.
#ifndef RINGMASTER_TRAINER_CHECKPOINT_WRITER_H_
#define RINGMASTER_TRAINER_CHECKPOINT_WRITER_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "trainer/checkpoint.h"
#include "trainer/model_runner.h"

namespace ringmaster {

struct CheckpointWriterStats {
  int64_t written = 0;
  double stage_seconds = 0;  // on the training thread
  double write_seconds = 0;  // on the writer's
  double wait_seconds = 0;   // the training thread waiting for a write (Flush)
  int64_t newest_step = -1;  // written whole
};

// The training thread calls Stage and Flush.
class CheckpointWriter {
 public:
  // Writes under `dir`, keeping the newest `keep`.
  CheckpointWriter(std::string dir, int keep);
  // Finishes the write under way.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Copies the runner's state with `position` into the staging buffer and
  // hands it to the writer. The error of the write before, if it failed.
  absl::Status Stage(ModelRunner& runner, const TrainingState& position);
  // Waits for the write under way; its error, if it failed.
  absl::Status Flush();

  CheckpointWriterStats stats() const;

 private:
  void Run();

  const std::string dir_;
  const int keep_;

  // The file's bytes, checksum last: the training thread's while no write
  // is pending, the writer's while one is (handed over under mu_).
  std::string staging_;
  CheckpointLayout layout_;
  int64_t step_ = 0;

  mutable Mutex mu_;
  bool pending_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  CheckpointWriterStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_CHECKPOINT_WRITER_H_
