#include "worker/worker_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

// A cumulative figure reported by a rank turned into a counter increment:
// a value below the last one means the rank started over (a new attempt).
template <typename T>
T Delta(T now, T* last) {
  const T delta = now >= *last ? now - *last : now;
  *last = now;
  return delta;
}

metrics::Histogram::BucketBoundaries StepBuckets() {
  return metrics::Histogram::ExponentialBuckets(0.001, 2, 16);  // 1 ms .. 33 s
}

}  // namespace

uint64_t ProcessCpuTicks(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return 0;
  // Fields after the command (which may hold spaces) start after ") ".
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(line.substr(close + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;  // state .. cmajflt
  uint64_t user = 0, system = 0;
  fields >> user >> system;
  return user + system;
}

MachineCpuTicks ReadMachineCpuTicks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return {user + nice, system + steal, irq + softirq, idle + iowait};
}

void WorkerMetrics::FillUsage(v1::Heartbeat* beat) {
  if (nvml_) {
    for (const GpuSample& s : nvml_->Sample()) {
      v1::GpuUsage* g = beat->add_gpu_usage();
      g->set_index(s.index);
      g->set_uuid(s.uuid);
      g->set_utilization_ratio(s.utilization_ratio);
      g->set_memory_used_bytes(s.memory_used_bytes);
      g->set_memory_total_bytes(s.memory_total_bytes);
    }
  }
  const MachineCpuTicks ticks = ReadMachineCpuTicks();
  const uint64_t busy = ticks.busy(), total = ticks.total();
  MutexLock lock(&mu_);
  if (total > machine_total_) {
    beat->set_cpu_utilization_ratio(static_cast<double>(busy - machine_busy_) /
                                    static_cast<double>(total - machine_total_));
  }
  machine_busy_ = busy;
  machine_total_ = total;
}

WorkerMetrics::WorkerMetrics(metrics::Registry* registry, std::string worker_id,
                             std::shared_ptr<Nvml> nvml,
                             std::function<std::vector<RankProcess>()> ranks, const Clock* clock,
                             absl::Duration retention)
    : worker_(std::move(worker_id)),
      clock_(clock),
      retention_(retention),
      nvml_(std::move(nvml)),
      ranks_(std::move(ranks)),
      gpu_utilization_(registry->AddGauge("ringmaster_gpu_utilization_ratio",
                                          "Share of time a kernel ran on the GPU (NVML).")),
      gpu_memory_used_(
          registry->AddGauge("ringmaster_gpu_memory_used_bytes", "GPU memory in use (NVML).")),
      gpu_memory_total_(
          registry->AddGauge("ringmaster_gpu_memory_total_bytes", "GPU memory in all (NVML).")),
      gpu_power_(registry->AddGauge("ringmaster_gpu_power_watts", "GPU power draw (NVML).")),
      gpu_temperature_(
          registry->AddGauge("ringmaster_gpu_temperature_celsius", "GPU core temperature (NVML).")),
      gpu_sm_clock_(registry->AddGauge("ringmaster_gpu_sm_clock_hertz",
                                       "GPU streaming-multiprocessor clock (NVML).")),
      gpu_ecc_errors_(registry->AddGauge(
          "ringmaster_gpu_uncorrected_ecc_errors",
          "Uncorrectable ECC memory errors since the driver loaded (NVML); only GPUs with ECC "
          "on.")),
      gpu_retired_pages_(registry->AddGauge(
          "ringmaster_gpu_retired_pages",
          "Pages of GPU memory retired for ECC errors (NVML); only GPUs that tell.")),
      gpu_xid_errors_(registry->AddCounter("ringmaster_gpu_xid_errors_total",
                                           "XID errors NVML reported, by GPU and XID.")),
      rank_cpu_(registry->AddGauge("ringmaster_rank_cpu_utilization_ratio",
                                   "CPU time of a rank's process per second of wall time.")),
      steps_(registry->AddCounter("ringmaster_train_steps_total", "Optimizer steps taken.",
                                  {{"worker", worker_}})),
      samples_(registry->AddCounter("ringmaster_train_samples_total", "Training samples seen.",
                                    {{"worker", worker_}})),
      loss_(registry->AddGauge("ringmaster_train_loss", "Mean training loss, latest report.",
                               {{"worker", worker_}})),
      step_duration_(registry->AddHistogram("ringmaster_step_duration_seconds",
                                            "Wall time of one optimizer step.",
                                            {{"worker", worker_}})),
      allreduce_bytes_(registry->AddCounter("ringmaster_allreduce_bytes_total",
                                            "Gradient bytes all-reduced.", {{"worker", worker_}})),
      allreduce_seconds_(registry->AddCounter("ringmaster_allreduce_seconds_total",
                                              "Seconds spent in gradient all-reduces.",
                                              {{"worker", worker_}})),
      busbw_(registry->AddGauge(
          "ringmaster_allreduce_bus_bandwidth_bytes_per_second",
          "All-reduce bus bandwidth over the last report (nccl-tests busbw: algbw*2(n-1)/n).",
          {{"worker", worker_}})) {
  registry->AddCollectCallback([this] { Collect(); });
}

void WorkerMetrics::OnProgress(const v1::RankProgress& report) {
  const v1::Progress& p = report.progress();
  const std::string& job = report.rank().job_id();
  const metrics::Labels labels = {{"job_id", job}, {"rank", absl::StrCat(report.rank().rank())}};
  metrics::Labels comm = labels;
  comm["backend"] = p.backend().empty() ? "gloo" : p.backend();
  // Under the mutex: Expire removes series, and with them these references.
  MutexLock lock(&mu_);
  jobs_[job] = absl::InfiniteFuture();
  for (double seconds : p.step_seconds()) {
    step_duration_.Add(labels, StepBuckets()).Observe(seconds);
  }
  loss_.Add(labels).Set(p.loss());
  RankTotals& t = totals_[{job, report.rank().rank()}];
  steps_.Add(labels).Increment(static_cast<double>(Delta<int64_t>(p.step(), &t.steps)));
  samples_.Add(labels).Increment(static_cast<double>(Delta<int64_t>(p.samples(), &t.samples)));
  const double bytes = Delta(p.allreduce_bytes(), &t.allreduce_bytes);
  const double seconds = Delta(p.allreduce_seconds(), &t.allreduce_seconds);
  allreduce_bytes_.Add(comm).Increment(bytes);
  allreduce_seconds_.Add(comm).Increment(seconds);
  const int n = std::max(1, p.world_size());
  if (seconds > 0) busbw_.Add(comm).Set(bytes / seconds * 2.0 * (n - 1) / n);
}

void WorkerMetrics::CountXid(int gpu, int xid) {
  gpu_xid_errors_.Add({{"worker", worker_}, {"gpu", absl::StrCat(gpu)}, {"xid", absl::StrCat(xid)}})
      .Increment();
}

void WorkerMetrics::Expire(const std::vector<RankProcess>& running) {
  const absl::Time now = clock_->Now();
  std::set<std::string> runs;
  for (const RankProcess& r : running) runs.insert(r.rank.job_id());
  for (auto& [job, idle_since] : jobs_) {
    if (runs.count(job) > 0) {
      idle_since = absl::InfiniteFuture();
    } else if (idle_since == absl::InfiniteFuture()) {
      idle_since = now;
    }
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (now - it->second < retention_) {
      ++it;
      continue;
    }
    const metrics::Labels of_job = {{"job_id", it->first}};
    steps_.RemoveMatching(of_job);
    samples_.RemoveMatching(of_job);
    loss_.RemoveMatching(of_job);
    step_duration_.RemoveMatching(of_job);
    allreduce_bytes_.RemoveMatching(of_job);
    allreduce_seconds_.RemoveMatching(of_job);
    busbw_.RemoveMatching(of_job);
    for (auto t = totals_.begin(); t != totals_.end();) {
      t = t->first.first == it->first ? totals_.erase(t) : std::next(t);
    }
    it = jobs_.erase(it);
  }
}

void WorkerMetrics::Collect() {
  if (nvml_) {
    for (const GpuSample& s : nvml_->Sample()) {
      const metrics::Labels labels = {
          {"worker", worker_}, {"gpu", absl::StrCat(s.index)}, {"uuid", s.uuid}};
      gpu_utilization_.Add(labels).Set(s.utilization_ratio);
      gpu_memory_used_.Add(labels).Set(s.memory_used_bytes);
      gpu_memory_total_.Add(labels).Set(s.memory_total_bytes);
      gpu_power_.Add(labels).Set(s.power_watts);
      gpu_temperature_.Add(labels).Set(s.temperature_celsius);
      gpu_sm_clock_.Add(labels).Set(s.sm_clock_hertz);
      if (s.uncorrected_ecc_errors >= 0) gpu_ecc_errors_.Add(labels).Set(s.uncorrected_ecc_errors);
      if (s.retired_pages >= 0) gpu_retired_pages_.Add(labels).Set(s.retired_pages);
    }
  }
  static const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  const auto now = std::chrono::steady_clock::now();
  const std::vector<RankProcess> running = ranks_();
  MutexLock lock(&mu_);
  std::map<pid_t, CpuTicks> seen;
  for (const RankProcess& r : running) {
    jobs_.emplace(r.rank.job_id(), absl::InfiniteFuture());
    CpuTicks current{ProcessCpuTicks(r.pid),
                     now,
                     {{"worker", worker_},
                      {"job_id", r.rank.job_id()},
                      {"rank", absl::StrCat(r.rank.rank())},
                      {"slot", absl::StrCat(r.slot)}}};
    auto last = cpu_.find(r.pid);
    if (last != cpu_.end() && current.at > last->second.at && current.ticks >= last->second.ticks) {
      const double wall = std::chrono::duration<double>(current.at - last->second.at).count();
      rank_cpu_.Add(current.labels)
          .Set((current.ticks - last->second.ticks) / ticks_per_second / wall);
    }
    seen[r.pid] = std::move(current);
  }
  // A process that is gone uses no CPU: its series goes at once.
  for (const auto& [pid, last] : cpu_) {
    if (seen.count(pid) == 0) rank_cpu_.Remove(last.labels);
  }
  cpu_ = std::move(seen);
  Expire(running);
}

}  // namespace ringmaster
