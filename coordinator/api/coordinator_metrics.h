// The coordinator's Prometheus metrics: jobs and workers by state, restarts
// by reason, heartbeat age and cordon per worker, queue wait, RPC latency per method,
// each job's goodput and its lost time by cause, free slots per topology domain.
// A job's restart series leave /metrics the retention after it ended.
#ifndef RINGMASTER_COORDINATOR_API_COORDINATOR_METRICS_H_
#define RINGMASTER_COORDINATOR_API_COORDINATOR_METRICS_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "coordinator/health/health_keeper.h"
#include "coordinator/scheduling/domain_placement.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"

namespace ringmaster {

// A queue's gauges at a scrape.
struct QueueGauges {
  std::string queue;
  int64_t slots_in_use = 0;
  int64_t quota_slots = -1;  // -1: no quota (no series)
  int pending_jobs = 0;
};

// Thread-safe.
class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(metrics::Registry* registry, const Clock* clock = RealClock::Get(),
                              absl::Duration retention = absl::Minutes(10));

  // The sources of the gauges computed at each scrape: jobs counted by
  // state, and the workers.
  void SetSources(std::function<std::map<v1::JobState, int>()> jobs,
                  std::function<std::vector<v1::Worker>()> workers,
                  std::function<std::vector<QueueGauges>()> queues = nullptr);
  // The ranks' slowdown ratios, read at each scrape.
  void SetSlowdownSource(std::function<std::vector<RankSlowdown>()> source) {
    slowdown_source_ = std::move(source);
  }
  // Each started job's goodput, read at each scrape.
  void SetGoodputSource(std::function<std::vector<std::pair<std::string, v1::Goodput>>()> source) {
    goodput_source_ = std::move(source);
  }
  // The topology domains' slots, read at each scrape.
  void SetDomainSource(std::function<std::vector<DomainGauge>()> domains) {
    domain_source_ = std::move(domains);
  }
  // Whether the last reading of --queues (at start or SIGHUP) was taken.
  void SetQueuesReloaded(bool ok);

  // JobManagerOptions::on_transition.
  void OnTransition(const v1::Job& before, const v1::StateChange& change);

 private:
  void Collect();

  metrics::Registry* const registry_;
  const Clock* const clock_;
  const absl::Duration retention_;
  metrics::Family<metrics::Gauge>& jobs_;
  metrics::Family<metrics::Gauge>& workers_;
  metrics::Family<metrics::Gauge>& heartbeat_age_;
  metrics::Family<metrics::Gauge>& cordoned_;
  metrics::Gauge& spares_;
  metrics::Family<metrics::Gauge>& slowdown_;
  metrics::Family<metrics::Counter>& restarts_;
  metrics::Family<metrics::Counter>& hangs_;
  metrics::Histogram& queue_wait_;
  metrics::Family<metrics::Gauge>& queue_in_use_;
  metrics::Family<metrics::Gauge>& queue_quota_;
  metrics::Family<metrics::Gauge>& queue_pending_;
  metrics::Family<metrics::Counter>& preemptions_;
  metrics::Gauge& queues_reloaded_;
  metrics::Family<metrics::Gauge>& goodput_;
  metrics::Family<metrics::Counter>& lost_;
  metrics::Family<metrics::Gauge>& domain_free_;
  metrics::Family<metrics::Gauge>& fragmented_;
  std::function<std::vector<DomainGauge>()> domain_source_;
  void CollectDomains();
  std::function<std::map<v1::JobState, int>()> job_source_;
  std::function<std::vector<v1::Worker>()> worker_source_;
  std::function<std::vector<QueueGauges>()> queue_source_;
  std::function<std::vector<RankSlowdown>()> slowdown_source_;
  std::function<std::vector<std::pair<std::string, v1::Goodput>>()> goodput_source_;
  // The goodput series of jobs the source no longer lists (retired), and
  // when they left it: removed the retention after.
  void CollectGoodput(absl::Time now);

  Mutex mu_;
  std::map<std::string, absl::Time> ended_ ABSL_GUARDED_BY(mu_);  // job id -> when
  std::set<std::string> workers_seen_ ABSL_GUARDED_BY(mu_);       // with an age series
  std::set<metrics::Labels> slowdowns_seen_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<std::string>> goodput_seen_ ABSL_GUARDED_BY(mu_);  // causes
  std::map<std::string, absl::Time> goodput_gone_ ABSL_GUARDED_BY(mu_);
  std::set<metrics::Labels> domains_seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_COORDINATOR_METRICS_H_
