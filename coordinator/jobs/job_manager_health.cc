// JobManager: what the workers' health (HealthKeeper) means for jobs:
// cordons and drains, the workers a job avoids, its stragglers.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
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
      attempts_.StopRanks(*entry, grace);
      response.add_stopped_jobs(entry->job.id());
    }
    spdlog::info("worker {} drained by {} ({}): stopping {} jobs with a {} grace", worker_id, by,
                 why, response.stopped_jobs_size(), absl::FormatDuration(grace));
    ASSIGN_OR_RETURN(*response.mutable_worker(), health_.Worker(table_, worker_id));
  }
  outbox_.Flush();
  return response;
}

std::vector<RankSlowdown> JobManager::Slowdowns() {
  MutexLock lock(&mu_);
  return ringmaster::Slowdowns(table_);
}

}  // namespace ringmaster
