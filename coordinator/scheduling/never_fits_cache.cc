#include "coordinator/scheduling/never_fits_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringmaster {

bool NeverFitsCache::Seen::Is(const WorkerCapacity& w) const {
  return worker_id == w.worker_id && total_slots == w.total_slots && gpu_slots == w.gpu_slots &&
         labels.SameAs(w.labels) && total_cpus == w.total_cpus &&
         total_memory_mb == w.total_memory_mb && domains == w.domains && spare == w.spare;
}

void NeverFitsCache::Refresh(const std::vector<WorkerCapacity>& workers) {
  if (workers.size() == workers_.size() &&
      std::equal(workers.begin(), workers.end(), workers_.begin(),
                 [](const WorkerCapacity& w, const Seen& seen) { return seen.Is(w); })) {
    return;
  }
  answers_.clear();
  workers_.clear();
  workers_.reserve(workers.size());
  for (const WorkerCapacity& w : workers) {
    workers_.push_back({w.worker_id, w.total_slots, w.gpu_slots, w.labels, w.total_cpus,
                        w.total_memory_mb, w.domains, w.spare});
  }
}

std::string_view NeverFitsCache::Get(const std::vector<WorkerCapacity>& workers,
                                     const GangRequest& r) {
  std::string selector;  // and workers to avoid: empty, and not allocated, for most jobs
  for (const auto& [label, value] : r.selector) absl::StrAppend(&selector, label, "=", value, ",");
  for (const std::string& worker : r.avoid) absl::StrAppend(&selector, "!", worker, ",");
  if (UsesSpares(r)) selector += "+spares";
  const PlacementRequest& p = r.placement;
  if (p.pack_level >= 0 || p.spread_level >= 0) {
    absl::StrAppend(&selector, "@", p.pack_level, p.pack_required ? "!" : "?", p.spread_level);
  }
  // Shapes of jobs long gone are not kept for ever: past the bound, all go.
  if (answers_.size() >= kMaxShapes) answers_.clear();
  auto [it, added] = answers_.try_emplace({r.ranks, r.min_ranks, r.gpus_per_rank, r.cpus,
                                           r.memory_mb, r.ranks_per_worker, std::move(selector)});
  if (added) it->second = NeverFits(workers, r);
  return it->second;
}

}  // namespace ringmaster
