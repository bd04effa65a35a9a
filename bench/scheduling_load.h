// The scheduler under a deep queue, in this process: a JobManager over a
// real job store, with simulated workers registered on in-memory links
// that start their ranks, list them in heartbeats and heartbeat every
// second; a full cluster and thousands of jobs pending over many queues.
// Measures each submit and each scheduling tick as the coordinator runs
// them.
#ifndef RINGMASTER_BENCH_SCHEDULING_LOAD_H_
#define RINGMASTER_BENCH_SCHEDULING_LOAD_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

struct SchedulingLoadOptions {
  std::string state_dir;  // the job store goes here
  int workers = 2000;
  int slots_per_worker = 8;
  int queues = 50;      // 1: the default queue alone, as without --queues
  int pending = 10000;  // jobs left waiting
  int ticks = 1000;     // scheduling ticks measured with them
  // With --topology-levels rack,host: workers in racks of this many
  // (labelled rack=r<n>, each its own host), and half of the pending jobs
  // packed by rack. 0: no topology.
  int rack_size = 0;
};

struct SchedulingLoadResult {
  int running_jobs = 0;
  int pending_jobs = 0;
  double submit_p50_ms = 0;
  double submit_p99_ms = 0;
  double tick_p50_ms = 0;
  double tick_p99_ms = 0;
  double tick_max_ms = 0;
};

absl::StatusOr<SchedulingLoadResult> RunSchedulingLoad(const SchedulingLoadOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_BENCH_SCHEDULING_LOAD_H_
