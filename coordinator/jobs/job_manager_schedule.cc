// JobManager: acting on what a scheduling pass decides; the queues.
#include "coordinator/jobs/job_manager.h"

namespace ringmaster {

void JobManager::ScheduleLocked() {
  const std::vector<SchedulableWorker> workers = health_.Schedulable();
  SchedulingViews::Decisions decisions = scheduling_.Pass(table_, workers, clock_->Now());
  for (const Preemption& p : decisions.preemptions) {
    attempts_.Preempt(*table_.Find(p.victim), *table_.Find(p.preemptor), p.keep_ranks);
  }
  for (auto& [number, placement] : decisions.starts) {
    JobRecord& entry = *table_.resident().at(number);
    scheduling_.Started(entry.job.id());
    attempts_.Start(entry, placement, workers);
  }
}

void JobManager::SetQueues(QueueConfig queues) {
  MutexLock lock(&mu_);
  scheduling_.SetQueues(std::move(queues));
}

v1::ListQueuesResponse JobManager::ListQueues() {
  MutexLock lock(&mu_);
  return scheduling_.ListQueues();
}

}  // namespace ringmaster
