// The worker's Prometheus metrics: per-GPU telemetry and XID errors from NVML, CPU use of
// its ranks from /proc, and the training figures its ranks report
// (all-reduce bytes, seconds and bus bandwidth; steps, samples, loss, step
// durations). Series of a job leave /metrics once no rank of it has run
// here for the retention.
#ifndef RINGMASTER_WORKER_WORKER_METRICS_H_
#define RINGMASTER_WORKER_WORKER_METRICS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "proto/worker.pb.h"
#include "worker/nvml.h"

namespace ringmaster {

struct RankProcess {
  v1::RankRef rank;
  pid_t pid = 0;
  int slot = 0;
};

// Thread-safe: OnProgress runs on gRPC threads, Collect on scrapes.
class WorkerMetrics {
 public:
  // `nvml` may be null (no driver): then there are no GPU series. `ranks`
  // lists the rank processes running now.
  WorkerMetrics(metrics::Registry* registry, std::string worker_id, std::shared_ptr<Nvml> nvml,
                std::function<std::vector<RankProcess>()> ranks,
                const Clock* clock = RealClock::Get(),
                absl::Duration retention = absl::Minutes(10));

  void OnProgress(const v1::RankProgress& report);
  // An XID error of GPU `gpu` (GpuWatch).
  void CountXid(int gpu, int xid);

  // GPU and machine CPU use for a heartbeat (samples NVML and /proc/stat).
  void FillUsage(v1::Heartbeat* beat);

 private:
  struct RankTotals {
    int64_t steps = 0;
    int64_t samples = 0;
    double allreduce_bytes = 0;
    double allreduce_seconds = 0;
  };
  struct CpuTicks {
    uint64_t ticks = 0;
    std::chrono::steady_clock::time_point at;
    metrics::Labels labels;  // of the process's rank_cpu_ series
  };
  void Collect();
  // Forgets the series of jobs with no rank here for the retention.
  void Expire(const std::vector<RankProcess>& running) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string worker_;
  const Clock* const clock_;
  const absl::Duration retention_;
  std::shared_ptr<Nvml> nvml_;
  std::function<std::vector<RankProcess>()> ranks_;

  metrics::Family<metrics::Gauge>& gpu_utilization_;
  metrics::Family<metrics::Gauge>& gpu_memory_used_;
  metrics::Family<metrics::Gauge>& gpu_memory_total_;
  metrics::Family<metrics::Gauge>& gpu_power_;
  metrics::Family<metrics::Gauge>& gpu_temperature_;
  metrics::Family<metrics::Gauge>& gpu_sm_clock_;
  metrics::Family<metrics::Gauge>& gpu_ecc_errors_;
  metrics::Family<metrics::Gauge>& gpu_retired_pages_;
  metrics::Family<metrics::Counter>& gpu_xid_errors_;
  metrics::Family<metrics::Gauge>& rank_cpu_;
  metrics::Family<metrics::Counter>& steps_;
  metrics::Family<metrics::Counter>& samples_;
  metrics::Family<metrics::Gauge>& loss_;
  metrics::Family<metrics::Histogram>& step_duration_;
  metrics::Family<metrics::Counter>& allreduce_bytes_;
  metrics::Family<metrics::Counter>& allreduce_seconds_;
  metrics::Family<metrics::Gauge>& busbw_;

  Mutex mu_;
  std::map<std::pair<std::string, int>, RankTotals> totals_ ABSL_GUARDED_BY(mu_);
  // Jobs with series here, and since when none of their ranks has run
  // (absl::InfiniteFuture() while one does).
  std::map<std::string, absl::Time> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<pid_t, CpuTicks> cpu_ ABSL_GUARDED_BY(mu_);
  uint64_t machine_busy_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t machine_total_ ABSL_GUARDED_BY(mu_) = 0;
};

// user + system CPU ticks of a process (all its threads), from
// /proc/<pid>/stat; 0 when it is gone.
uint64_t ProcessCpuTicks(pid_t pid);

// The machine's CPU ticks, all CPUs, by kind, from the first line of
// /proc/stat: user (and nice), system (and steal: busy elsewhere), softirq
// (and irq), idle (and iowait).
struct MachineCpuTicks {
  uint64_t user = 0, system = 0, softirq = 0, idle = 0;
  uint64_t busy() const { return user + system + softirq; }
  uint64_t total() const { return busy() + idle; }
};
MachineCpuTicks ReadMachineCpuTicks();

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_WORKER_METRICS_H_
