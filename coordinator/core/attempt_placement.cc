#include "coordinator/core/attempt_placement.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringmaster {

void KeepPastAttempt(v1::Job* job) {
  if (job->ranks_size() == 0) return;
  v1::AttemptPlacement placement;
  placement.set_attempt(job->attempt());
  for (const v1::RankStatus& rank : job->ranks()) {
    const auto& ids = placement.worker_ids();
    const auto known = std::find(ids.begin(), ids.end(), rank.worker_id());
    placement.add_rank_workers(static_cast<int>(known - ids.begin()));
    if (known == ids.end()) {
      placement.add_worker_ids(rank.worker_id());
      placement.add_worker_addresses(rank.worker_address());
    }
  }
  auto* past = job->mutable_past_attempts();
  *past->Add() = std::move(placement);
  if (past->size() > kKeptPastAttempts) {
    past->DeleteSubrange(0, past->size() - kKeptPastAttempts);
  }
}

std::vector<int> PlacedAttempts(const v1::Job& job) {
  std::vector<int> attempts;
  for (const v1::AttemptPlacement& past : job.past_attempts()) attempts.push_back(past.attempt());
  if (job.ranks_size() > 0) attempts.push_back(job.attempt());
  return attempts;
}

absl::StatusOr<std::vector<RankLogSource>> AttemptRanks(const v1::Job& job, int attempt) {
  std::vector<RankLogSource> sources;
  if (attempt == job.attempt() && job.ranks_size() > 0) {
    for (const v1::RankStatus& rank : job.ranks()) {
      sources.push_back({rank.rank(), rank.worker_id(), rank.worker_address()});
    }
    return sources;
  }
  for (const v1::AttemptPlacement& past : job.past_attempts()) {
    if (past.attempt() != attempt) continue;
    for (int rank = 0; rank < past.rank_workers_size(); ++rank) {
      const int worker = past.rank_workers(rank);
      if (worker < 0 || worker >= past.worker_ids_size() ||
          worker >= past.worker_addresses_size()) {
        continue;
      }
      sources.push_back({rank, past.worker_ids(worker), past.worker_addresses(worker)});
    }
    return sources;
  }
  if (attempt < 0 || attempt > job.attempt()) {
    return absl::NotFoundError(absl::StrCat("job ", job.id(), " has no attempt ", attempt,
                                            ": its attempts are 0..", job.attempt()));
  }
  if (attempt == job.attempt()) {
    return absl::NotFoundError(
        absl::StrCat("attempt ", attempt, " of job ", job.id(), " has placed no ranks"));
  }
  return absl::NotFoundError(absl::StrCat("where attempt ", attempt, " of job ", job.id(),
                                          " ran is no longer kept (the last ", kKeptPastAttempts,
                                          " attempts' placements are)"));
}

}  // namespace ringmaster
