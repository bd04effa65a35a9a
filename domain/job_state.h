// The job lifecycle: which JobState transitions are legal.
//
//   PENDING -> STARTING -> RUNNING -> SUCCEEDED | FAILED | CANCELLED
//                 |           |
//                 +-----------+--> RESTARTING -> PENDING (next attempt)
//
// Every non-terminal state may go to CANCELLED and to FAILED (a PENDING
// job fails only when its deadline passes between attempts).
#ifndef RINGMASTER_DOMAIN_JOB_STATE_H_
#define RINGMASTER_DOMAIN_JOB_STATE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"

namespace ringmaster {

bool IsTerminal(v1::JobState state);
// STARTING or RUNNING: the attempt's ranks are meant to run.
bool IsActive(v1::JobState state);
// True while a rank holds its slot: placed and not yet reported ended.
bool RankHoldsSlot(const v1::RankStatus& rank);
// The ranks of the attempt's current group, ascending: all but those that
// left it when an elastic job shrank. A member's place in the group (its
// rank in the group's collectives) is its index here.
std::vector<int> GroupMembers(const v1::Job& job);

bool IsLegalTransition(v1::JobState from, v1::JobState to);

// FAILED_PRECONDITION naming both states when the transition is illegal.
absl::Status CheckTransition(v1::JobState from, v1::JobState to);

// "RUNNING", "RANK_EXITED", ...
std::string StateName(v1::JobState state);

// "ALIVE", "SUSPECT", "LOST"; "UNKNOWN" for anything else.
std::string WorkerStateName(v1::WorkerState state);

// When the job's ranks were first placed (its first STARTING), if ever.
std::optional<absl::Time> FirstStart(const v1::Job& job);
std::string ReasonName(v1::Reason reason);

// The job runs the pre-flight check and its current attempt, STARTING or
// RUNNING, has no verdict yet.
bool AwaitsPreflight(const v1::Job& job);

// "rank 3 on gpu-7: compute 1.8× the job's median for 2m5s"
std::string StragglerLine(const v1::Straggler& straggler, absl::Time now);

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_JOB_STATE_H_
