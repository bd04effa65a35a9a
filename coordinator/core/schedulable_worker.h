// A worker as the scheduler sees it, and what the ranks it reports hold:
// the model the scheduler and the health checks read, apart from
// WorkerMembership, which keeps it.
#ifndef RINGMASTER_COORDINATOR_CORE_SCHEDULABLE_WORKER_H_
#define RINGMASTER_COORDINATOR_CORE_SCHEDULABLE_WORKER_H_

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// What the rank processes a worker reports hold, by job.
struct ReportedRanks {
  struct Job {
    std::string job_id;
    std::vector<int> slots;  // a GPU rank holds the slot of each of its GPUs
    int cpus = 0;
    int64_t memory_mb = 0;
  };
  std::vector<Job> jobs;
};

// Appends to `slots` the slot of each of `gpus` on a worker whose slot i
// is GPU gpu_indices[i]; a GPU it does not have is left out.
template <typename Gpus>
void AppendGpuSlots(const Gpus& gpus, const std::vector<int>& gpu_indices,
                    std::vector<int>* slots) {
  for (int gpu : gpus) {
    auto at = std::find(gpu_indices.begin(), gpu_indices.end(), gpu);
    if (at != gpu_indices.end()) slots->push_back(static_cast<int>(at - gpu_indices.begin()));
  }
}

// What `ranks` hold on a worker whose slot i is GPU gpu_indices[i].
ReportedRanks Report(const std::vector<const v1::RunningRank*>& ranks,
                     const std::vector<int>& gpu_indices);

// A worker's labels (its topology's levels among them), made when it
// registers and shared by every snapshot of it after: a copy costs a
// reference count, where every scheduling pass copies every worker's.
class SharedLabels {
 public:
  using Map = std::map<std::string, std::string>;
  SharedLabels() = default;
  SharedLabels(Map labels)  // NOLINT: implicit, as the map it stands for
      : map_(std::make_shared<const Map>(std::move(labels))) {}
  SharedLabels(std::initializer_list<Map::value_type> labels)  // NOLINT
      : SharedLabels(Map(labels)) {}

  const Map& map() const { return map_ != nullptr ? *map_ : Empty(); }
  Map::const_iterator find(const std::string& key) const { return map().find(key); }
  Map::const_iterator begin() const { return map().begin(); }
  Map::const_iterator end() const { return map().end(); }
  const std::string& at(const std::string& key) const { return map().at(key); }
  size_t count(const std::string& key) const { return map().count(key); }
  bool empty() const { return map().empty(); }
  // Whether both are the same labels made once: equal, and cheaper to ask
  // than whether equal.
  bool SameAs(const SharedLabels& other) const { return map_ == other.map_; }

 private:
  static const Map& Empty() {
    static const Map* const empty = new Map();
    return *empty;
  }
  std::shared_ptr<const Map> map_;  // null: none
};

// A worker's domain at each topology level, widest first: few levels, kept
// inline, since every scheduling pass copies every worker's.
using TopologyDomains = absl::InlinedVector<int, 4>;

// A worker as the scheduler sees it: ALIVE, connected and admitted.
struct SchedulableWorker {
  std::string worker_id;
  std::string incarnation;
  int slots = 0;
  std::vector<int> gpu_indices;  // per slot; empty for a CPU worker
  // Its latest report, which every snapshot until the next shares. Never
  // null.
  std::shared_ptr<const ReportedRanks> running = std::make_shared<const ReportedRanks>();
  SharedLabels labels;
  int cpus = 0;           // 0: not counted
  int64_t memory_mb = 0;  // 0: not counted
  // Its domain at each topology level, widest first (WorkerMembership's
  // ids); -1 where it has no value. Empty without --topology-levels.
  TopologyDomains domains;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_SCHEDULABLE_WORKER_H_
