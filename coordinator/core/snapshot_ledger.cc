#include "coordinator/core/snapshot_ledger.h"

#include <algorithm>
#include <iterator>

namespace ringmaster {

void SnapshotLedger::Report(const std::string& worker_id,
                            const std::vector<v1::HeldSnapshots>& held) {
  held_.erase(std::remove_if(held_.begin(), held_.end(),
                             [&](const Held& h) { return h.worker_id == worker_id; }),
              held_.end());
  for (const v1::HeldSnapshots& h : held) held_.push_back({worker_id, h});
}

int64_t SnapshotLedger::CommonStep(bool replicas, int attempt,
                                   const std::vector<int>& ranks) const {
  std::map<int, std::set<int64_t>> by_rank;
  for (int rank : ranks) by_rank[rank];
  for (const Held& h : held_) {
    const v1::HeldSnapshots& s = h.snapshots;
    auto it = by_rank.find(s.rank());
    if (s.replica() != replicas || s.attempt() != attempt || it == by_rank.end()) continue;
    it->second.insert(s.steps().begin(), s.steps().end());
  }
  if (by_rank.empty()) return 0;
  std::set<int64_t> common = by_rank.begin()->second;
  for (const auto& [rank, steps] : by_rank) {
    std::set<int64_t> both;
    std::set_intersection(common.begin(), common.end(), steps.begin(), steps.end(),
                          std::inserter(both, both.begin()));
    common = std::move(both);
  }
  return common.empty() ? 0 : *common.rbegin();
}

v1::SnapshotState SnapshotLedger::State(int members_attempt,
                                        const std::vector<int>& members) const {
  v1::SnapshotState state;
  // A rank's segment lives on the worker that ran it last; older copies
  // elsewhere yield to the newest attempt's.
  int attempt = -1;
  for (const Held& h : held_) {
    if (!h.snapshots.replica()) attempt = std::max(attempt, h.snapshots.attempt());
  }
  if (attempt < 0) return state;
  int world = 0;
  for (const Held& h : held_) {
    const v1::HeldSnapshots& s = h.snapshots;
    if (s.replica() || s.attempt() != attempt) continue;
    world = std::max(world, s.world_size());
    state.set_bytes_per_rank(std::max(state.bytes_per_rank(), s.bytes()));
    for (int64_t step : s.steps()) state.set_newest_step(std::max(state.newest_step(), step));
  }
  std::vector<int> ranks = members;
  if (attempt != members_attempt) {
    ranks.clear();
    for (int r = 0; r < world; ++r) ranks.push_back(r);
  }
  state.set_consistent_step(CommonStep(false, attempt, ranks));
  state.set_replica_step(CommonStep(true, attempt, ranks));
  return state;
}

std::optional<SnapshotLedger::Source> SnapshotLedger::SourceFor(
    int rank, const std::string& worker_id,
    const std::function<bool(const std::string&)>& reachable) const {
  int64_t own = 0;
  std::optional<Source> best;
  for (const Held& h : held_) {
    const v1::HeldSnapshots& s = h.snapshots;
    if (s.rank() != rank || s.steps().empty()) continue;
    const int64_t newest = *std::max_element(s.steps().begin(), s.steps().end());
    if (h.worker_id == worker_id) {
      own = std::max(own, newest);
    } else if ((!best || newest > best->step) && reachable(h.worker_id)) {
      best = Source{h.worker_id, newest};
    }
  }
  if (!best || best->step <= own) return std::nullopt;
  return best;
}

std::string SnapshotLedger::SegmentHolder(int rank) const {
  std::string holder;
  int64_t best = 0;
  for (const Held& h : held_) {
    const v1::HeldSnapshots& s = h.snapshots;
    if (s.rank() != rank || s.replica() || s.steps().empty()) continue;
    const int64_t newest = *std::max_element(s.steps().begin(), s.steps().end());
    if (newest > best) {
      best = newest;
      holder = h.worker_id;
    }
  }
  return holder;
}

}  // namespace ringmaster
