// A job's goodput (v1::Goodput, kept with the job): from the first start
// of its ranks, each stretch of wall time counts as productive (its ranks
// are stepping) or lost, by cause: pending (preempted or drained, waiting
// to be placed again), startup (placed, until the first step), restart
// (from a failure to the next attempt's first step), steps redone after a
// restart, and checkpoint stalls. The job's changes advance it, each at its
// time: pure functions, tested with a fake clock.
#ifndef RINGMASTER_COORDINATOR_CORE_GOODPUT_H_
#define RINGMASTER_COORDINATOR_CORE_GOODPUT_H_

#include <cstdint>

#include "absl/time/time.h"
#include "proto/job.pb.h"

namespace ringmaster {

// The causes, as lost_seconds names them.
inline constexpr char kLostPending[] = "pending";
inline constexpr char kLostStartup[] = "startup";
inline constexpr char kLostRestart[] = "restart";
inline constexpr char kLostRedone[] = "redone";
inline constexpr char kLostCheckpointStall[] = "checkpoint_stall";

// The job goes to `to` for `reason` at `now`.
void GoodputOnTransition(v1::Job* job, v1::JobState to, v1::Reason reason, absl::Time now);
// Rank 0's first report of an attempt, at step `step`.
void GoodputOnFirstStep(v1::Job* job, int64_t step, absl::Time now);
// The attempt resumed `steps_redone` steps before the attempt before had
// reached (which got to `reached`): their time moves from productive to
// redone, at that attempt's mean step time. Before GoodputOnFirstStep.
void GoodputOnResume(v1::Job* job, int64_t steps_redone, int64_t reached);
// Rank 0's report at `now` of its stall since its process started: what
// is new moves from productive to checkpoint_stall.
void GoodputOnStall(v1::Job* job, double stall_seconds, absl::Time now);
// As of `now`: the open stretch counted, and the ratio.
v1::Goodput GoodputAt(const v1::Job& job, absl::Time now);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_GOODPUT_H_
