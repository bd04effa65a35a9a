#include "coordinator/scheduling/domain_placement.h"

#include <algorithm>
#include <numeric>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

using Members = std::vector<int>;  // indices into the workers, ascending

// The domain tree of one placement: what each set of workers can take,
// and which of them take the gang's ranks.
class DomainTree {
 public:
  DomainTree(const std::vector<WorkerCapacity>& workers, const std::vector<int>& rooms,
             const PlacementRequest& placement)
      : workers_(workers),
        rooms_(rooms),
        spread_(placement.spread_level),
        levels_(workers.empty() ? 0 : static_cast<int>(workers[0].domains.size())) {}

  int levels() const { return levels_; }

  // `members` split by their domain of `level`, in the order of their first
  // worker. A worker without a value there is a domain of its own.
  std::vector<Members> Split(const Members& members, int level) const {
    std::vector<Members> groups;
    absl::flat_hash_map<int, size_t> group_of;
    for (int w : members) {
      const int domain = workers_[w].domains[level];
      if (domain < 0) {
        groups.push_back({w});
        continue;
      }
      auto [it, added] = group_of.try_emplace(domain, groups.size());
      if (added) groups.emplace_back();
      groups[it->second].push_back(w);
    }
    return groups;
  }

  // How many ranks `members`, one domain of level - 1 (or all), take from
  // `level` down: a domain of the spread level takes one at most.
  int Room(const Members& members, int level) const {
    if (level > spread_ || level >= levels_) {
      int room = 0;
      for (int w : members) room += rooms_[w];
      return room;
    }
    int room = 0;
    for (const Members& group : Split(members, level)) {
      const int below = Room(group, level + 1);
      room += level == spread_ ? std::min(1, below) : below;
    }
    return room;
  }

  // Appends the shares of `n` ranks on `members` (one domain of level - 1),
  // which can take them, from `level` down.
  void Pick(const Members& members, int level, int n, std::vector<WorkerShare>* out) const {
    std::vector<Members> groups;
    std::vector<int> rooms;
    if (level >= levels_) {  // the workers themselves
      for (int w : members) {
        groups.push_back({w});
        rooms.push_back(rooms_[w]);
      }
    } else {
      groups = Split(members, level);
      for (const Members& group : groups) {
        const int below = Room(group, level + 1);
        rooms.push_back(level == spread_ ? std::min(1, below) : below);
      }
    }
    const std::vector<int> takes = Shares(rooms, n);
    for (size_t g = 0; g < groups.size(); ++g) {
      if (takes[g] == 0) continue;
      if (level >= levels_) {
        out->push_back({groups[g][0], takes[g]});
      } else {
        Pick(groups[g], level + 1, takes[g], out);
      }
    }
  }

 private:
  // How many of `n` each of the groups with `rooms` takes: all of it in
  // the one with least room that holds it; else the roomiest first, until
  // what is left fits in one, which is then the one with least room that
  // holds it.
  static std::vector<int> Shares(const std::vector<int>& rooms, int n) {
    std::vector<int> takes(rooms.size(), 0);
    std::vector<int> order(rooms.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return rooms[a] > rooms[b]; });
    int left = n;
    size_t next = 0;  // the roomiest not yet taken
    while (left > 0 && next < order.size()) {
      int fit = -1;  // the one with least room that holds what is left, the first of equals
      for (size_t i = next; i < order.size(); ++i) {
        const int g = order[i];
        if (rooms[g] >= left && (fit < 0 || rooms[g] < rooms[fit])) fit = g;
      }
      if (fit >= 0) {
        takes[fit] = left;
        break;
      }
      takes[order[next]] = rooms[order[next]];
      left -= rooms[order[next++]];
    }
    return takes;
  }

  const std::vector<WorkerCapacity>& workers_;
  const std::vector<int>& rooms_;
  const int spread_;  // -1: none
  const int levels_;
};

std::string SlotsOf(const GangRequest& request, int ranks) {
  const int per_rank = std::max(1, request.gpus_per_rank);
  return absl::StrCat(ranks * per_rank,
                      request.gpus_per_rank > 0 ? " free GPU slots" : " free slots");
}

}  // namespace

absl::StatusOr<std::vector<WorkerShare>> PlaceInDomains(const std::vector<WorkerCapacity>& workers,
                                                        const std::vector<int>& rooms,
                                                        const GangRequest& request,
                                                        const std::vector<int>* idle_rooms) {
  const PlacementRequest& placement = request.placement;
  DomainTree tree(workers, rooms, placement);
  const int fewest = request.min_ranks > 0 && request.min_ranks < request.ranks ? request.min_ranks
                                                                                : request.ranks;
  std::vector<WorkerShare> shares;
  const int pack = placement.pack_level;
  if (pack >= 0 && pack < tree.levels()) {
    // The domain of the pack level with least room that holds the gang.
    Members eligible;
    for (int w = 0; w < static_cast<int>(workers.size()); ++w) {
      if (workers[w].domains[pack] >= 0 && rooms[w] > 0) eligible.push_back(w);
    }
    const std::vector<Members> domains = tree.Split(eligible, pack);
    std::vector<int> domain_rooms;
    int best = -1, best_room = 0, largest = 0;
    for (size_t d = 0; d < domains.size(); ++d) {
      const int room = domain_rooms.emplace_back(tree.Room(domains[d], pack + 1));
      largest = std::max(largest, room);
      if (room >= request.ranks && (best < 0 || room < best_room)) {
        best = static_cast<int>(d);
        best_room = room;
      }
    }
    if (best < 0 && largest >= fewest && placement.pack_required) {
      // Elastic, or a reservation: as many as fit now in the roomiest
      // domain of those that could hold all of it with nothing running
      // (else of all), so that a reservation waits where the job can fit.
      absl::flat_hash_map<int, int> idle;  // by domain of the pack level
      if (idle_rooms != nullptr) {
        for (int w = 0; w < static_cast<int>(workers.size()); ++w) {
          if (workers[w].domains[pack] >= 0) idle[workers[w].domains[pack]] += (*idle_rooms)[w];
        }
      }
      bool best_holds = false;
      for (size_t d = 0; d < domains.size(); ++d) {
        const int room = domain_rooms[d];
        auto it = idle.find(workers[domains[d][0]].domains[pack]);
        const bool holds = it != idle.end() && it->second >= request.ranks;
        if (room < fewest) continue;
        if (best < 0 || (holds && !best_holds) || (holds == best_holds && room > best_room)) {
          best = static_cast<int>(d);
          best_room = room;
          best_holds = holds;
        }
      }
    }
    if (best >= 0) {
      tree.Pick(domains[best], pack + 1, std::min(request.ranks, best_room), &shares);
      return shares;
    }
    if (placement.pack_required) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no ", placement.pack_name, " with ", SlotsOf(request, fewest),
                       "; the largest has ", largest * std::max(1, request.gpus_per_rank)));
    }
  }
  Members all;  // those that can take a rank
  for (int w = 0; w < static_cast<int>(workers.size()); ++w) {
    if (rooms[w] > 0) all.push_back(w);
  }
  const int room = tree.Room(all, 0);
  if (room < fewest) {
    std::string why = absl::StrCat("needs ", SlotsOf(request, fewest), "; room for ", room,
                                   room == 1 ? " rank" : " ranks");
    if (placement.spread_level >= 0) {
      absl::StrAppend(&why, " at one per ", placement.spread_name);
    }
    return absl::ResourceExhaustedError(why);
  }
  tree.Pick(all, 0, std::min(request.ranks, room), &shares);
  return shares;
}

std::vector<DomainSlots> SlotsByDomain(const std::vector<WorkerCapacity>& capacity) {
  std::vector<DomainSlots> out;
  absl::flat_hash_map<std::pair<int, int>, size_t> index;
  for (const WorkerCapacity& w : capacity) {
    for (int level = 0; level < static_cast<int>(w.domains.size()); ++level) {
      if (w.domains[level] < 0) continue;
      auto [it, added] = index.try_emplace({level, w.domains[level]}, out.size());
      if (added) out.push_back({level, w.domains[level]});
      out[it->second].total += w.total_slots;
      out[it->second].free += static_cast<int64_t>(w.free_slots.size());
    }
  }
  return out;
}

}  // namespace ringmaster
