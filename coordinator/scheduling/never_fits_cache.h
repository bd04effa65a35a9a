// NeverFitsCache: the scheduler's answers to whether a request could ever
// fit, kept from one pass to the next.
#ifndef RINGMASTER_COORDINATOR_SCHEDULING_NEVER_FITS_CACHE_H_
#define RINGMASTER_COORDINATOR_SCHEDULING_NEVER_FITS_CACHE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "coordinator/scheduling/scheduler.h"

namespace ringmaster {

// Whether a request could ever fit (NeverFits), by the shape of the
// request, kept from one pass to the next while the workers stay as they
// were: their ids, slots, labels, resources, domains and spares. Passes ask
// the same few shapes of the same workers, and the answer with domains is
// a placement of its own.
class NeverFitsCache {
 public:
  // Forgets every answer when `workers` are not those it was found on.
  void Refresh(const std::vector<WorkerCapacity>& workers);
  // NeverFits(workers, request): "" when it fits with nothing running.
  std::string_view Get(const std::vector<WorkerCapacity>& workers, const GangRequest& request);
  // Answers kept at most: every one is forgotten when a new one would
  // exceed it (answers a pass holds are copied by then).
  static constexpr size_t kMaxShapes = 4096;

 private:
  struct Seen {
    std::string worker_id;
    int total_slots = 0;
    bool gpu_slots = false;
    SharedLabels labels;
    int total_cpus = 0;
    int64_t total_memory_mb = 0;
    TopologyDomains domains;
    bool spare = false;
    bool Is(const WorkerCapacity& w) const;
  };
  std::vector<Seen> workers_;
  // Node-based: the answers stay where they are while others are added.
  absl::node_hash_map<std::tuple<int, int, int, int, int64_t, int, std::string>, std::string>
      answers_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_SCHEDULING_NEVER_FITS_CACHE_H_
