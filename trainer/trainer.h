// The data-parallel training loop of one rank: sharded batches, forward and
// backward, gradients reduced in buckets during backward, the optimizer
// step, evaluation on rank 0, checkpoints and progress.
#ifndef RINGMASTER_TRAINER_TRAINER_H_
#define RINGMASTER_TRAINER_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "domain/flight_recorder.h"
#include "domain/snapshot_segment.h"
#include "proto/job.pb.h"
#include "trainer/checkpoint_writer.h"
#include "trainer/collective.h"
#include "trainer/dataset.h"
#include "trainer/event_log.h"
#include "trainer/model_runner.h"
#include "trainer/snapshotter.h"

namespace ringmaster {

struct TrainerContext {
  Collective* comm = nullptr;  // the job's world
  std::string checkpoint_dir;  // empty: no checkpoints
  // Called with progress at most every `progress_interval` and at every
  // epoch end; may be empty.
  std::function<void(const v1::Progress&)> on_progress;
  double progress_interval_seconds = 0.5;
  std::function<void(const std::string&)> log;  // human-readable lines; may be empty
  EventLog* events = nullptr;                   // tests: order of backward and all-reduce
  int64_t stop_after_step = -1;                 // tests: end as if interrupted after this step
  // Asked at every step boundary on rank 0: once true, rank 0 checkpoints
  // and Train returns with `stopped` set. The other ranks go on until their
  // next collective fails for want of rank 0, so every rank stops after the
  // same step without a collective of its own to agree on it. May be empty.
  std::function<bool()> stop_requested;
  // When set, holds the steps done so far: how far a run got when it fails.
  std::atomic<int64_t>* steps_done = nullptr;
  // Where the model runs; empty: the CPU (MakeCpuRunner).
  RunnerFactory make_runner;
  // The clock of checkpoint_every_s; empty: std::chrono::steady_clock.
  std::function<std::chrono::steady_clock::time_point()> now;
  // Where the rank is (step, phase, bucket in flight), for its worker to
  // read when the job hangs; may be null.
  FlightRecorder* flight = nullptr;
  // The segment the rank's worker holds for its snapshots (the spec's
  // snapshot_every_steps), read first at the start; null: none, and
  // `snapshots_refused` may say why.
  SnapshotSegment* snapshots = nullptr;
  std::string snapshots_refused;
  // The step of the snapshot its worker fetched into `snapshots` from a
  // peer; -1: none.
  int64_t snapshot_fetched_step = -1;
  SnapshotCopy snapshot_copy = SnapshotCopy::kBucketed;
  int32_t attempt = 0;  // recorded with each snapshot
  // The rank recorded with each snapshot: the one its worker knows the
  // process by, which stays when a group that shrank numbers its members
  // anew in `comm`; -1: its rank in `comm`.
  int32_t snapshot_rank = -1;
  // The attempt's group `comm` belongs to (trainer/regroup.h), reported
  // with the progress.
  int32_t group_generation = 0;
  // This rank's own warnings (every rank's, unlike `log`); may be empty.
  std::function<void(const std::string&)> warn;
};

struct TrainResult {
  std::vector<float> params;  // final weights
  int64_t steps = 0;
  double train_loss = 0;      // last step's, this rank
  double eval_accuracy = -1;  // rank 0, last epoch; -1 elsewhere
  double eval_loss = -1;
  double samples_per_second = 0;  // this rank's training throughput
  double allreduce_bytes = 0;
  double allreduce_seconds = 0;
  int64_t resumed_from_step = -1;
  std::string resumed_from;  // "memory", "disk", or empty (a fresh start)
  SnapshotStats snapshots;
  CheckpointWriterStats checkpoints;  // rank 0's
  int64_t total_steps = 0;            // the run's last step, at this world size
  bool stopped = false;               // rank 0 ended early on stop_requested
};

// The input width and classes of the model come from `data`.
absl::StatusOr<TrainResult> Train(const v1::TrainerSpec& spec, const TrainTestSplit& data,
                                  const TrainerContext& context);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_TRAINER_H_
