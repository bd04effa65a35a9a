#include "coordinator/core/snapshot_ledger.h"

#include <algorithm>
#include <set>

namespace ringmaster {

void SnapshotLedger::Report(const std::string& worker_id,
                            const std::vector<v1::HeldSnapshots>& held) {
  for (auto it = held_.begin(); it != held_.end();) {
    it = it->second.worker_id == worker_id ? held_.erase(it) : std::next(it);
  }
  for (const v1::HeldSnapshots& h : held) {
    // A rank's segment lives on the worker that ran it last; an older copy
    // elsewhere yields to the newer attempt's.
    auto [it, added] = held_.try_emplace(h.rank(), Held{worker_id, h});
    if (!added && h.attempt() >= it->second.snapshots.attempt()) it->second = {worker_id, h};
  }
}

v1::SnapshotState SnapshotLedger::State() const {
  v1::SnapshotState state;
  if (held_.empty()) return state;
  int attempt = -1;
  for (const auto& [rank, h] : held_) attempt = std::max(attempt, h.snapshots.attempt());
  int world = 0;
  std::set<int64_t> common;
  bool first = true;
  for (const auto& [rank, h] : held_) {
    if (h.snapshots.attempt() != attempt) continue;
    world = std::max(world, h.snapshots.world_size());
    state.set_bytes_per_rank(std::max(state.bytes_per_rank(), h.snapshots.bytes()));
    std::set<int64_t> steps(h.snapshots.steps().begin(), h.snapshots.steps().end());
    if (!steps.empty()) state.set_newest_step(std::max(state.newest_step(), *steps.rbegin()));
    if (first) {
      common = std::move(steps);
      first = false;
      continue;
    }
    std::set<int64_t> both;
    std::set_intersection(common.begin(), common.end(), steps.begin(), steps.end(),
                          std::inserter(both, both.begin()));
    common = std::move(both);
  }
  int ranks = 0;
  for (const auto& [rank, h] : held_) ranks += h.snapshots.attempt() == attempt && rank < world;
  if (ranks == world && !common.empty()) state.set_consistent_step(*common.rbegin());
  return state;
}

}  // namespace ringmaster
