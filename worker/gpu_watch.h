// Watches a worker's GPUs for errors: NVML's XID and double-bit ECC events
// as they come, and every few seconds the uncorrectable ECC and retired-page
// counters, which only rise: a rise after the first reading is an error. Each XID is counted (for
// ringmaster_gpu_xid_errors_total); each error goes to the coordinator, the
// same (GPU, kind, XID) at most once per `repeat_after`, so that a GPU that
// throws a storm of XIDs sends a bounded number of messages.
#ifndef RINGMASTER_WORKER_GPU_WATCH_H_
#define RINGMASTER_WORKER_GPU_WATCH_H_

#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "proto/cluster.pb.h"
#include "worker/nvml.h"

namespace ringmaster {

struct GpuWatchOptions {
  absl::Duration counters_every = absl::Seconds(5);
  absl::Duration repeat_after = absl::Seconds(10);
};

// Thread-compatible: Poll runs on one thread (Start's, or a test's).
class GpuWatch {
 public:
  struct Source {
    std::function<std::optional<GpuEvent>(absl::Duration)> wait_event;  // Nvml::WaitEvent
    std::function<std::vector<GpuSample>()> sample;                     // Nvml::Sample
  };
  struct Sinks {
    std::function<void(int gpu, int xid)> count_xid;
    std::function<void(const v1::GpuError&)> report;
  };
  GpuWatch(Source source, Sinks sinks, const Clock* clock, GpuWatchOptions options = {});
  ~GpuWatch();

  // One round: waits up to `wait` for an event, and reads the counters
  // when they are due.
  void Poll(absl::Duration wait);
  // Polls on a thread of its own until destroyed.
  void Start();

 private:
  void Report(v1::GpuError error);
  void ReadCounters();

  const Source source_;
  const Sinks sinks_;
  const Clock* const clock_;
  const GpuWatchOptions options_;
  absl::Time next_counters_ = absl::InfinitePast();
  // Per GPU index: the counters as last read (-1: not known).
  std::map<int, std::pair<double, double>> counters_;
  // When each (GPU, kind, XID) was last reported.
  std::map<std::tuple<int, int, int>, absl::Time> reported_;

  Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_GPU_WATCH_H_
