// JobManager: what the workers' health (HealthKeeper) means for jobs:
// cordons and drains, the workers a job avoids, its stragglers.
#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "coordinator/jobs/job_manager.h"
#include "domain/job_state.h"

namespace ringmaster {

absl::StatusOr<v1::Worker> JobManager::Cordon(const std::string& worker_id,
                                              const std::string& reason, const std::string& by) {
  RETURN_IF_ERROR(CheckCordonReason(reason));
  absl::StatusOr<v1::Worker> worker;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(health_.Worker(table_, worker_id).status());
    health_.Cordon(worker_id, reason.empty() ? "cordoned" : reason, by, /*drained=*/false);
    spdlog::info("worker {} cordoned by {}: {}", worker_id, by, reason);
    worker = health_.Worker(table_, worker_id);
  }
  outbox_.Flush();  // stored before the reply
  return worker;
}

absl::StatusOr<v1::Worker> JobManager::Uncordon(const std::string& worker_id) {
  absl::StatusOr<v1::Worker> worker;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(health_.Worker(table_, worker_id).status());
    health_.Uncordon(worker_id);
    spdlog::info("worker {} uncordoned", worker_id);
    worker = health_.Worker(table_, worker_id);
  }
  outbox_.Flush();
  return worker;
}

absl::StatusOr<v1::DrainWorkerResponse> JobManager::Drain(const std::string& worker_id,
                                                          const std::string& reason,
                                                          const std::string& by,
                                                          absl::Duration grace) {
  RETURN_IF_ERROR(CheckCordonReason(reason));
  v1::DrainWorkerResponse response;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(health_.Worker(table_, worker_id).status());
    const std::string why = reason.empty() ? "drained" : reason;
    const absl::Time now = clock_->Now();
    health_.Cordon(worker_id, why, by, /*drained=*/true);
    std::vector<JobRecord*> running;  // transitions change placed()
    for (const auto& [number, record] : table_.placed()) {
      const v1::Job& job = record->job;
      if (job.state() != v1::STARTING && job.state() != v1::RUNNING) continue;
      for (const v1::RankStatus& rank : job.ranks()) {
        if (rank.worker_id() == worker_id && RankHoldsSlot(rank)) {
          running.push_back(record);
          break;
        }
      }
    }
    for (JobRecord* entry : running) {
      const std::string message =
          absl::StrCat("worker ", worker_id, " drained by ", by, " (", why,
                       "): resumes elsewhere from a checkpoint taken on stop");
      entry->ending.reset();
      if (!table_.Transition(*entry, v1::RESTARTING, v1::WORKER_DRAINED, message).ok()) continue;
      entry->restart_at = now;
      entry->regrow_since = absl::InfiniteFuture();
      StopRanksLocked(*entry, grace);
      response.add_stopped_jobs(entry->job.id());
    }
    spdlog::info("worker {} drained by {} ({}): stopping {} jobs with a {} grace", worker_id, by,
                 why, response.stopped_jobs_size(), absl::FormatDuration(grace));
    ASSIGN_OR_RETURN(*response.mutable_worker(), health_.Worker(table_, worker_id));
  }
  outbox_.Flush();
  return response;
}

void JobManager::UpdateStragglersLocked(JobRecord& entry, absl::Time now) {
  v1::Job& job = entry.job;
  if (job.state() != v1::RUNNING) return;
  const std::vector<v1::Straggler> flagged = FlagStragglers(entry, now, options_.stragglers);
  std::vector<const v1::Straggler*> added;
  for (const v1::Straggler& s : flagged) {
    const bool known = std::any_of(job.stragglers().begin(), job.stragglers().end(),
                                   [&](const v1::Straggler& k) { return k.rank() == s.rank(); });
    if (!known) added.push_back(&s);
  }
  const bool same_ranks =
      added.empty() && job.stragglers_size() == static_cast<int>(flagged.size());
  job.mutable_stragglers()->Assign(flagged.begin(), flagged.end());
  if (same_ranks) return;  // the ratios go out with the progress already
  for (const v1::Straggler* s : added) {
    const std::string line = StragglerLine(*s, now);
    spdlog::warn("job {}: straggler: {}", job.id(), line);
    if (job.spec().on_straggler() != "exclude") {
      table_.Note(entry, v1::RANK_STRAGGLING, absl::StrCat("straggler: ", line)).IgnoreError();
    } else if (ExcludeStragglerLocked(entry, *s, line)) {
      return;  // restarting
    }
  }
  table_.Persist(entry);
}

bool JobManager::ExcludeStragglerLocked(JobRecord& entry, const v1::Straggler& straggler,
                                        const std::string& line) {
  v1::ExcludedWorker excluded;
  excluded.set_worker_id(straggler.worker_id());
  excluded.set_reason(absl::StrCat("straggler: ", line));
  std::string short_of;
  if (ExcludeWorkersLocked(entry, {excluded}, v1::RANK_STRAGGLING,
                           absl::StrCat("straggler: ", line,
                                        ": restarting from a checkpoint taken on stop without "
                                        "worker ",
                                        straggler.worker_id()),
                           &short_of)) {
    return true;
  }
  if (!short_of.empty()) {
    table_
        .Note(entry, v1::RANK_STRAGGLING,
              absl::StrCat("straggler: ", line, "; not excluded: without ", straggler.worker_id(),
                           " the job ", short_of))
        .IgnoreError();
  }
  return false;
}

bool JobManager::ExcludeWorkersLocked(JobRecord& entry,
                                      const std::vector<v1::ExcludedWorker>& workers,
                                      v1::Reason reason, const std::string& message,
                                      std::string* short_of) {
  v1::Job& job = entry.job;
  GangRequest request = GangOf(job.spec());
  for (const v1::ExcludedWorker& e : job.excluded_workers()) request.avoid.push_back(e.worker_id());
  for (const v1::ExcludedWorker& e : workers) request.avoid.push_back(e.worker_id());
  const std::vector<WorkerCapacity> idle =
      IdleCapacity(FreeCapacity(health_.Schedulable(), {}, ""));
  *short_of = NeverFits(idle, request);
  if (!short_of->empty()) return false;
  const int before = job.excluded_workers_size();
  for (v1::ExcludedWorker e : workers) {
    e.set_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
    *job.add_excluded_workers() = std::move(e);
  }
  if (!table_.Transition(entry, v1::RESTARTING, reason, message).ok()) {
    job.mutable_excluded_workers()->DeleteSubrange(before, job.excluded_workers_size() - before);
    return false;
  }
  entry.restart_at = clock_->Now();
  entry.regrow_since = absl::InfiniteFuture();
  StopRanksLocked(entry);
  return true;
}

std::vector<RankSlowdown> JobManager::Slowdowns() {
  MutexLock lock(&mu_);
  return ringmaster::Slowdowns(table_);
}

}  // namespace ringmaster
