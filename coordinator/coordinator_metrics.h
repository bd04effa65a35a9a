// The coordinator's Prometheus metrics: jobs and workers by state, restarts
// by reason, heartbeat age per worker, queue wait, RPC latency per method.
#ifndef RINGMASTER_COORDINATOR_COORDINATOR_METRICS_H_
#define RINGMASTER_COORDINATOR_COORDINATOR_METRICS_H_

#include <functional>
#include <map>
#include <vector>

#include "common/metrics.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"

namespace ringmaster {

// Thread-safe.
class CoordinatorMetrics {
 public:
  explicit CoordinatorMetrics(metrics::Registry* registry);

  // The sources of the gauges computed at each scrape: jobs counted by
  // state, and the workers.
  void SetSources(std::function<std::map<v1::JobState, int>()> jobs,
                  std::function<std::vector<v1::Worker>()> workers);

  // JobManagerOptions::on_transition.
  void OnTransition(const v1::Job& before, const v1::StateChange& change);

 private:
  void Collect();

  metrics::Registry* const registry_;
  metrics::Family<metrics::Gauge>& jobs_;
  metrics::Family<metrics::Gauge>& workers_;
  metrics::Family<metrics::Gauge>& heartbeat_age_;
  metrics::Family<metrics::Counter>& restarts_;
  metrics::Histogram& queue_wait_;
  std::function<std::map<v1::JobState, int>()> job_source_;
  std::function<std::vector<v1::Worker>()> worker_source_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_COORDINATOR_METRICS_H_
