#include "domain/job_state.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster {

using v1::JobState;

bool IsTerminal(JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

bool IsActive(JobState state) { return state == v1::STARTING || state == v1::RUNNING; }

bool RankHoldsSlot(const v1::RankStatus& rank) {
  return rank.state() == v1::RANK_ASSIGNED || rank.state() == v1::RANK_RUNNING;
}

std::vector<int> GroupMembers(const v1::Job& job) {
  std::vector<int> members;
  for (const v1::RankStatus& r : job.ranks()) {
    if (r.left_generation() == 0) members.push_back(r.rank());
  }
  return members;
}

bool IsLegalTransition(JobState from, JobState to) {
  switch (from) {
    case v1::PENDING:
      return to == v1::STARTING || to == v1::FAILED || to == v1::CANCELLED;
    case v1::STARTING:
      return to == v1::RUNNING || to == v1::RESTARTING || to == v1::FAILED || to == v1::CANCELLED;
    case v1::RUNNING:
      return to == v1::SUCCEEDED || to == v1::RESTARTING || to == v1::FAILED || to == v1::CANCELLED;
    case v1::RESTARTING:
      return to == v1::PENDING || to == v1::FAILED || to == v1::CANCELLED;
    default:
      return false;
  }
}

absl::Status CheckTransition(JobState from, JobState to) {
  if (IsLegalTransition(from, to)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("job cannot go from ", StateName(from), " to ", StateName(to)));
}

std::string StateName(JobState state) { return v1::JobState_Name(state); }

std::string WorkerStateName(v1::WorkerState state) {
  switch (state) {
    case v1::WORKER_STATE_ALIVE:
      return "ALIVE";
    case v1::WORKER_STATE_LOST:
      return "LOST";
    case v1::WORKER_STATE_SUSPECT:
      return "SUSPECT";
    default:
      return "UNKNOWN";
  }
}

std::optional<absl::Time> FirstStart(const v1::Job& job) {
  for (const v1::StateChange& change : job.history()) {
    if (change.state() == v1::STARTING) return absl::FromUnixMillis(change.time_unix_ms());
  }
  return std::nullopt;
}

std::string ReasonName(v1::Reason reason) { return v1::Reason_Name(reason); }

std::string StragglerLine(const v1::Straggler& s, absl::Time now) {
  return absl::StrFormat("rank %d on %s: compute %.1f× the job's median for %s", s.rank(),
                         s.worker_id(), s.ratio(),
                         absl::FormatDuration(absl::Trunc(
                             now - absl::FromUnixMillis(s.since_unix_ms()), absl::Seconds(1))));
}

bool AwaitsPreflight(const v1::Job& job) {
  if (!job.spec().preflight() || !IsActive(job.state())) return false;
  return job.preflight().ranks_size() == 0 || job.preflight().attempt() != job.attempt();
}

}  // namespace ringmaster
