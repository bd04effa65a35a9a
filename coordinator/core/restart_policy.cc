#include "coordinator/core/restart_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

int ReasonRank(v1::Reason reason) {
  switch (reason) {
    case v1::WORKER_LOST:
      return 6;
    case v1::RANK_LOST:
      return 6;
    case v1::RANK_OOM:
      return 5;
    case v1::RANK_HUNG:
      return 4;
    case v1::RANK_SIGNALED:
      return 3;
    case v1::RANK_START_FAILED:
      return 2;
    case v1::RANK_START_TIMEOUT:
      return 2;
    case v1::RANK_EXITED:
      return 1;
    default:
      return 0;
  }
}

int Priority(const FailureCause& cause) {
  return 2 * ReasonRank(cause.reason) + (cause.error.empty() ? 0 : 1);
}

}  // namespace

absl::Duration RestartBackoff(const BackoffOptions& options, int restarts, double unit) {
  absl::Duration d = options.base;
  for (int i = 0; i < restarts && d < options.max; ++i) d *= 2;
  d = std::min(d, options.max);
  unit = std::clamp(unit, 0.0, 1.0);
  return d / 2 + (d / 2) * unit;
}

FailureCause CauseOfExit(const v1::RankExited& exited, int rank) {
  FailureCause cause;
  cause.rank = rank;
  cause.exit_code = exited.exit_code();
  cause.signal = exited.signal();
  cause.error = exited.error();
  if (exited.start_failed()) {
    cause.reason = v1::RANK_START_FAILED;
    cause.message = absl::StrCat("rank ", rank, " could not start: ", exited.message());
  } else if (exited.oom_killed()) {
    cause.reason = v1::RANK_OOM;
    cause.message = absl::StrCat("rank ", rank, " was killed for exceeding its memory limit",
                                 exited.message().empty() ? "" : ": ", exited.message());
  } else if (exited.signal() != 0) {
    cause.reason = v1::RANK_SIGNALED;
    cause.message = absl::StrCat("rank ", rank, " was killed by signal ", exited.signal(),
                                 exited.message().empty() ? "" : ": ", exited.message());
  } else {
    cause.reason = exited.exit_code() == 0 ? v1::RANKS_SUCCEEDED : v1::RANK_EXITED;
    cause.message = absl::StrCat("rank ", rank, " exited with code ", exited.exit_code());
  }
  if (!cause.error.empty()) absl::StrAppend(&cause.message, ": ", cause.error);
  return cause;
}

std::string RestartRefusal(const v1::Job& job) {
  const v1::JobSpec& spec = job.spec();
  if (spec.restart_policy() == "never") return "restart_policy: never";
  const auto& codes = spec.never_retry_exit_codes();
  for (const v1::RankStatus& rank : job.ranks()) {
    if (rank.state() == v1::RANK_FAILED && rank.never_retry()) {
      return absl::StrCat("rank ", rank.rank(), " would not start at a restart either");
    }
    if (rank.state() == v1::RANK_FAILED && rank.signal() == 0 &&
        std::find(codes.begin(), codes.end(), rank.exit_code()) != codes.end()) {
      return absl::StrCat("rank ", rank.rank(), " exited with code ", rank.exit_code(),
                          ", one of never_retry_exit_codes");
    }
  }
  return "";
}

bool MoreTelling(const FailureCause& candidate, const FailureCause& current) {
  return Priority(candidate) > Priority(current);
}

bool Decisive(const FailureCause& cause) { return ReasonRank(cause.reason) > 1; }

bool RepeatsWithoutProgress(const FailureCause& previous, const FailureCause& current) {
  if (current.progressed || current.reason == v1::WORKER_LOST || current.reason == v1::RANK_LOST) {
    return false;
  }
  return previous.reason == current.reason && previous.rank == current.rank &&
         previous.exit_code == current.exit_code && previous.signal == current.signal;
}

}  // namespace ringmaster
