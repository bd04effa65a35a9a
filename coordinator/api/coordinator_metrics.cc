#include "coordinator/api/coordinator_metrics.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "domain/job_state.h"

namespace ringmaster {
CoordinatorMetrics::CoordinatorMetrics(metrics::Registry* registry, const Clock* clock,
                                       absl::Duration retention)
    : registry_(registry),
      clock_(clock),
      retention_(retention),
      jobs_(registry->AddGauge("ringmaster_jobs", "Jobs by state.")),
      workers_(registry->AddGauge("ringmaster_workers", "Workers by state.")),
      heartbeat_age_(registry->AddGauge("ringmaster_worker_heartbeat_age_seconds",
                                        "Seconds since the worker's last heartbeat.")),
      cordoned_(registry->AddGauge(
          "ringmaster_worker_cordoned",
          "1 while the worker takes no new ranks (cordoned, drained or quarantined).")),
      spares_(registry
                  ->AddGauge("ringmaster_spare_workers",
                             "Workers kept as spares (--spare-workers): for jobs that lost a "
                             "worker, and spare_ok jobs.")
                  .Add({})),
      slowdown_(registry->AddGauge(
          "ringmaster_rank_slowdown_ratio",
          "A running rank's compute time per step over its job's median (1.3 for 60s: a "
          "straggler).")),
      restarts_(registry->AddCounter("ringmaster_job_restarts_total",
                                     "Job restarts, by job and the reason of the failure.")),
      hangs_(registry->AddCounter("ringmaster_rank_hangs_total",
                                  "Attempts ended because a rank made no progress for the job's "
                                  "hang_timeout_s, whether the job restarted or failed.")),
      queue_wait_(registry
                      ->AddHistogram("ringmaster_job_queue_wait_seconds",
                                     "Time from PENDING until the job's ranks are placed.")
                      .Add({}, metrics::Histogram::ExponentialBuckets(0.01, 4, 10))),
      queue_in_use_(registry->AddGauge("ringmaster_queue_slots_in_use",
                                       "Slots the queue's running jobs hold.")),
      queue_quota_(registry->AddGauge("ringmaster_queue_quota_slots",
                                      "Slots guaranteed to the queue (no series: no quota).")),
      queue_pending_(
          registry->AddGauge("ringmaster_queue_pending_jobs", "Jobs waiting in the queue.")),
      preemptions_(registry->AddCounter("ringmaster_preemptions_total",
                                        "Jobs of the queue preempted, by the victim's queue.")),
      queues_reloaded_(registry
                           ->AddGauge("ringmaster_queues_config_last_reload_successful",
                                      "1 when the last reading of --queues was taken, 0 when it "
                                      "was refused and the one before stays.")
                           .Add({})),
      goodput_(registry->AddGauge(
          "ringmaster_job_goodput_ratio",
          "The job's productive time (steps that count) over its wall time since it first "
          "started.")),
      lost_(registry->AddCounter(
          "ringmaster_job_lost_seconds_total",
          "The job's wall time lost, by cause: pending, startup, restart, redone, "
          "checkpoint_stall.")),
      domain_free_(registry->AddGauge(
          "ringmaster_domain_free_slots",
          "Free slots of the schedulable workers in each domain of each --topology-levels level.")),
      fragmented_(registry->AddGauge(
          "ringmaster_domain_fragmented_free_slots",
          "Free slots of the level's domains that are partly in use: free, but not in a whole "
          "domain a job packed in one can take.")) {
  queues_reloaded_.Set(1);
  registry_->AddCollectCallback([this] { Collect(); });
}

void CoordinatorMetrics::CollectDomains() {
  if (!domain_source_) return;
  std::set<metrics::Labels> listed;
  std::map<std::string, int64_t> fragmented;
  for (const DomainGauge& d : domain_source_()) {
    metrics::Labels labels = {{"level", d.level}, {"domain", d.domain}};
    domain_free_.Add(labels).Set(static_cast<double>(d.free_slots));
    listed.insert(std::move(labels));
    int64_t& partly = fragmented[d.level];
    if (d.free_slots > 0 && d.free_slots < d.total_slots) partly += d.free_slots;
  }
  for (const auto& [level, slots] : fragmented) {
    fragmented_.Add({{"level", level}}).Set(static_cast<double>(slots));
  }
  MutexLock lock(&mu_);
  for (const metrics::Labels& labels : domains_seen_) {
    if (listed.count(labels) == 0) domain_free_.Remove(labels);
    // A level none of whose domains is left.
    const std::string& level = labels.at("level");
    if (fragmented.count(level) == 0) fragmented_.Remove({{"level", level}});
  }
  domains_seen_ = std::move(listed);
}

void CoordinatorMetrics::SetQueuesReloaded(bool ok) { queues_reloaded_.Set(ok ? 1 : 0); }

void CoordinatorMetrics::CollectGoodput(absl::Time now) {
  if (!goodput_source_) return;
  std::map<std::string, std::set<std::string>> listed;
  for (const auto& [job_id, g] : goodput_source_()) {
    goodput_.Add({{"job_id", job_id}}).Set(g.ratio());
    std::set<std::string>& causes = listed[job_id];
    for (const auto& [cause, seconds] : g.lost_seconds()) {
      metrics::Counter& lost = lost_.Add({{"job_id", job_id}, {"cause", cause}});
      lost.Increment(seconds - lost.Value());
      causes.insert(cause);
    }
  }
  MutexLock lock(&mu_);
  for (const auto& [job_id, causes] : goodput_seen_) {
    if (listed.count(job_id) == 0) goodput_gone_.try_emplace(job_id, now);
  }
  for (auto it = goodput_gone_.begin(); it != goodput_gone_.end();) {
    auto seen = goodput_seen_.find(it->first);
    if (listed.count(it->first) > 0) {
      it = goodput_gone_.erase(it);  // listed again
    } else if (now - it->second >= retention_) {
      goodput_.Remove({{"job_id", it->first}});
      for (const std::string& cause : seen->second) {
        lost_.Remove({{"job_id", it->first}, {"cause", cause}});
      }
      goodput_seen_.erase(seen);
      it = goodput_gone_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [job_id, causes] : listed) goodput_seen_[job_id] = std::move(causes);
}

void CoordinatorMetrics::SetSources(std::function<std::map<v1::JobState, int>()> jobs,
                                    std::function<std::vector<v1::Worker>()> workers,
                                    std::function<std::vector<QueueGauges>()> queues) {
  job_source_ = std::move(jobs);
  worker_source_ = std::move(workers);
  queue_source_ = std::move(queues);
}

void CoordinatorMetrics::OnTransition(const v1::Job& before, const v1::StateChange& change) {
  // A rank started again alone, or a group shrunk without it, is a restart
  // too (its note keeps the state).
  if ((change.state() == v1::RESTARTING && before.state() != v1::RESTARTING) ||
      change.reason() == v1::RANK_REPLACED || change.reason() == v1::GROUP_SHRUNK) {
    restarts_.Add({{"job_id", before.id()}, {"reason", ReasonName(change.reason())}}).Increment();
  }
  // A hang ends the attempt once: the job restarts, or fails.
  if (change.reason() == v1::RANK_HUNG && change.state() != before.state() &&
      (change.state() == v1::RESTARTING || IsTerminal(change.state()))) {
    hangs_.Add({{"job_id", before.id()}}).Increment();
  }
  if (change.reason() == v1::PREEMPTED) {
    preemptions_.Add({{"queue", before.spec().queue()}}).Increment();
  }
  if (IsTerminal(change.state()) && !IsTerminal(before.state())) {
    MutexLock lock(&mu_);
    ended_[before.id()] = clock_->Now();
  }
  if (before.state() == v1::PENDING && change.state() == v1::STARTING) {
    // From the transition that made the job PENDING (submission or restart).
    for (auto it = before.history().rbegin(); it != before.history().rend(); ++it) {
      if (it->state() == v1::PENDING) {
        queue_wait_.Observe((change.time_unix_ms() - it->time_unix_ms()) / 1000.0);
        break;
      }
    }
  }
}

void CoordinatorMetrics::Collect() {
  if (!job_source_ || !worker_source_) return;
  std::map<std::string, int> jobs;
  for (int s = v1::PENDING; s <= v1::RESTARTING; ++s) {
    jobs[StateName(static_cast<v1::JobState>(s))] = 0;
  }
  for (const auto& [state, count] : job_source_()) jobs[StateName(state)] += count;
  for (const auto& [state, count] : jobs) jobs_.Add({{"state", state}}).Set(count);

  std::map<std::string, int> workers = {{"ALIVE", 0}, {"SUSPECT", 0}, {"LOST", 0}};
  std::set<std::string> listed;
  int spares = 0;
  for (const v1::Worker& w : worker_source_()) {
    ++workers[WorkerStateName(w.state())];
    spares += w.spare() ? 1 : 0;
    heartbeat_age_.Add({{"worker", w.id()}}).Set(w.heartbeat_age_seconds());
    cordoned_.Add({{"worker", w.id()}}).Set(w.health().has_cordon() ? 1 : 0);
    listed.insert(w.id());
  }
  for (const auto& [state, count] : workers) workers_.Add({{"state", state}}).Set(count);
  spares_.Set(spares);
  if (queue_source_) {
    for (const QueueGauges& q : queue_source_()) {
      preemptions_.Add({{"queue", q.queue}});  // 0 from the start, so that increase() has data
      queue_in_use_.Add({{"queue", q.queue}}).Set(static_cast<double>(q.slots_in_use));
      queue_pending_.Add({{"queue", q.queue}}).Set(q.pending_jobs);
      if (q.quota_slots >= 0) {
        queue_quota_.Add({{"queue", q.queue}}).Set(static_cast<double>(q.quota_slots));
      } else {
        queue_quota_.Remove({{"queue", q.queue}});
      }
    }
  }

  std::set<metrics::Labels> slowdowns;
  if (slowdown_source_) {
    for (const RankSlowdown& s : slowdown_source_()) {
      metrics::Labels labels = {
          {"job_id", s.job_id}, {"rank", absl::StrCat(s.rank)}, {"worker", s.worker_id}};
      slowdown_.Add(labels).Set(s.ratio);
      slowdowns.insert(std::move(labels));
    }
  }

  const absl::Time now = clock_->Now();
  CollectGoodput(now);
  CollectDomains();
  MutexLock lock(&mu_);
  for (const metrics::Labels& labels : slowdowns_seen_) {
    if (slowdowns.count(labels) == 0) slowdown_.Remove(labels);
  }
  slowdowns_seen_ = std::move(slowdowns);
  for (const std::string& id : workers_seen_) {
    if (listed.count(id) > 0) continue;
    heartbeat_age_.Remove({{"worker", id}});
    cordoned_.Remove({{"worker", id}});
  }
  workers_seen_ = std::move(listed);
  for (auto it = ended_.begin(); it != ended_.end();) {
    if (now - it->second < retention_) {
      ++it;
      continue;
    }
    restarts_.RemoveMatching({{"job_id", it->first}});
    hangs_.RemoveMatching({{"job_id", it->first}});
    it = ended_.erase(it);
  }
}

}  // namespace ringmaster
