// Where a rank's training state comes from at its start: the freshest of
// the snapshots the job's workers hold in memory (trainer/snapshotter.h)
// and the newest checkpoint on disk, or, with neither, rank 0's initial
// weights. Every rank of a data-parallel job holds the same state after a
// step, so any rank's snapshot serves them all.
#ifndef RINGMASTER_TRAINER_RESUME_H_
#define RINGMASTER_TRAINER_RESUME_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "domain/snapshot_segment.h"
#include "trainer/checkpoint.h"
#include "trainer/collective.h"
#include "trainer/model_runner.h"

namespace ringmaster {

struct ResumeSources {
  Collective* comm = nullptr;
  std::string checkpoint_dir;                  // empty: none
  const SnapshotSegment* snapshots = nullptr;  // this rank's; null: none
  // The step of the snapshot this rank's worker put into its segment from
  // a peer's replica before it started (RINGMASTER_SNAPSHOT_FETCHED); -1:
  // none.
  int64_t fetched_step = -1;
  std::function<void(const std::string&)> log;  // rank 0's lines; may be empty
};

struct Resumed {
  // "memory" (the workers' snapshots), "replica" (memory, some rank's
  // from a peer's replica), "disk", or empty for a fresh start.
  std::string from;
  int64_t step = -1;       // -1: a fresh start
  int source_rank = -1;    // memory: the lowest rank that held the step
  TrainingState position;  // step, epoch, epoch_rows (its vectors empty)
  // This rank's snapshots that were passed over, and why (a checksum that
  // fails, a model that does not fit).
  std::vector<std::string> skipped;
};

// Every rank calls it at the same point, and gets the same state: the
// runner's parameters and optimizer state are set, and the position where
// the data goes on is returned. Each rank offers the newest snapshot its
// segment holds that reads back whole; the highest step wins, and the
// lowest rank holding it sends its state to the ranks that do not (the
// others load their own). A checkpoint on disk, read by rank 0, wins only
// when it is newer. FAILED_PRECONDITION when the chosen state does not fit
// the model.
absl::StatusOr<Resumed> ResumeState(const ResumeSources& sources, uint64_t seed,
                                    ModelRunner& runner);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_RESUME_H_
