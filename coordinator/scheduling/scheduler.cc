#include "coordinator/scheduling/scheduler.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/labels.h"
#include "common/string_view_hash.h"
#include "coordinator/scheduling/domain_placement.h"

namespace ringmaster {
namespace {

int SlotsPerRank(const GangRequest& r) { return std::max(1, r.gpus_per_rank); }

bool Matches(const WorkerCapacity& w, const GangRequest& r) {
  return (r.gpus_per_rank == 0 || w.gpu_slots) && (!w.spare || UsesSpares(r)) &&
         HasLabels(w.labels, r.selector) &&
         (r.avoid.empty() ||
          std::find(r.avoid.begin(), r.avoid.end(), w.worker_id) == r.avoid.end());
}

// How many of the request's ranks `w` can take now, or, `idle`, with
// nothing running.
int RankRoom(const WorkerCapacity& w, const GangRequest& r, bool idle = false) {
  if (!Matches(w, r)) return 0;
  const int slots = idle ? w.total_slots : static_cast<int>(w.free_slots.size());
  int room = slots / SlotsPerRank(r);
  if (w.total_cpus > 0 && r.cpus > 0) {
    room = std::min(room, (idle ? w.total_cpus : w.free_cpus) / r.cpus);
  }
  if (w.total_memory_mb > 0 && r.memory_mb > 0) {
    const int64_t memory = idle ? w.total_memory_mb : w.free_memory_mb;
    room = static_cast<int>(std::min<int64_t>(room, memory / r.memory_mb));
  }
  if (r.ranks_per_worker > 0) room = room >= r.ranks_per_worker ? r.ranks_per_worker : 0;
  return std::max(0, room);
}

// What each of `workers` could take of the request with nothing running.
std::vector<int> IdleRooms(const std::vector<WorkerCapacity>& workers, const GangRequest& r) {
  std::vector<int> rooms(workers.size());
  for (size_t i = 0; i < workers.size(); ++i) rooms[i] = RankRoom(workers[i], r, /*idle=*/true);
  return rooms;
}

std::string SlotWord(const GangRequest& r) { return r.gpus_per_rank > 0 ? "GPU slots" : "slots"; }

// Whether only slots decide where the request fits.
bool SlotsOnly(const GangRequest& r) {
  return r.cpus == 0 && r.memory_mb == 0 && r.ranks_per_worker == 0 && r.selector.empty() &&
         r.avoid.empty() && r.placement.pack_level < 0 && r.placement.spread_level < 0;
}

// "2 ranks of 1 slot, 2 CPUs and 512 MB each, 1 per worker, on workers with zone=a"
std::string DescribeRanks(const GangRequest& r, int ranks) {
  std::vector<std::string> each = {absl::StrCat(SlotsPerRank(r),
                                                r.gpus_per_rank > 0 ? " GPU slot" : " slot",
                                                SlotsPerRank(r) > 1 ? "s" : "")};
  if (r.cpus > 0) each.push_back(absl::StrCat(r.cpus, " CPUs"));
  if (r.memory_mb > 0) each.push_back(absl::StrCat(r.memory_mb, " MB"));
  std::string text = absl::StrCat(ranks, " ranks of ", each[0]);
  for (size_t i = 1; i < each.size(); ++i) {
    absl::StrAppend(&text, i + 1 == each.size() ? " and " : ", ", each[i]);
  }
  absl::StrAppend(&text, " each");
  if (r.ranks_per_worker > 0) absl::StrAppend(&text, ", ", r.ranks_per_worker, " per worker");
  if (!r.selector.empty()) {
    absl::StrAppend(&text, ", on workers with ",
                    absl::StrJoin(r.selector, ",", absl::PairFormatter("=")));
  }
  if (!r.avoid.empty()) {
    absl::StrAppend(&text, ", not on ", absl::StrJoin(r.avoid, ", "), " (excluded for the job)");
  }
  if (r.placement.pack_level >= 0) {
    absl::StrAppend(&text, ", in one ", r.placement.pack_name,
                    r.placement.pack_required ? "" : " where it can be");
  }
  if (r.placement.spread_level >= 0) absl::StrAppend(&text, ", one per ", r.placement.spread_name);
  return text;
}

// Why `min_ranks` ranks do not fit on `workers`, where `room` do.
std::string Shortfall(const std::vector<WorkerCapacity>& workers, const GangRequest& r,
                      int min_ranks, int room) {
  if (SlotsOnly(r)) {
    int free = 0;
    for (const auto& w : workers) {
      if (Matches(w, r)) free += static_cast<int>(w.free_slots.size());
    }
    return SlotShortfall(r, min_ranks, free, workers.size());
  }
  int matching = 0;
  for (const auto& w : workers) matching += Matches(w, r) ? 1 : 0;
  return absl::StrCat("needs ", DescribeRanks(r, min_ranks), "; room for ", room, " on the ",
                      matching, " matching of ", workers.size(), " alive workers");
}

// The ranks of `shares`, numbered in their order, each on the first
// `per_rank` of its worker's free slots not yet taken.
std::vector<RankPlacement> RanksOn(const std::vector<WorkerCapacity>& workers,
                                   const std::vector<WorkerShare>& shares, int per_rank) {
  std::vector<RankPlacement> placement;
  for (const WorkerShare& share : shares) {
    const WorkerCapacity& w = workers[share.worker];
    for (int k = 0; k < share.ranks; ++k) {
      RankPlacement p;
      p.rank = static_cast<int>(placement.size());
      p.worker_id = w.worker_id;
      p.worker_index = share.worker;
      p.slots.assign(w.free_slots.begin() + k * per_rank,
                     w.free_slots.begin() + (k + 1) * per_rank);
      placement.push_back(std::move(p));
    }
  }
  return placement;
}

}  // namespace

std::vector<WorkerCapacity> FreeCapacity(const std::vector<SchedulableWorker>& workers,
                                         const std::vector<HeldSlots>& held,
                                         const std::string& except_job) {
  StringViewMap<size_t> index;
  index.reserve(workers.size());
  // Worker i's slots are used[first[i] + slot].
  std::vector<size_t> first(workers.size() + 1, 0);
  for (size_t i = 0; i < workers.size(); ++i) {
    index.emplace(workers[i].worker_id, i);
    first[i + 1] = first[i] + std::max(0, workers[i].slots);
  }
  std::vector<bool> used(first.back(), false);
  std::vector<WorkerCapacity> capacity(workers.size());
  for (size_t i = 0; i < workers.size(); ++i) {
    WorkerCapacity& c = capacity[i];
    c.worker_id = workers[i].worker_id;
    c.total_slots = workers[i].slots;
    c.gpu_slots = !workers[i].gpu_indices.empty();
    c.labels = workers[i].labels;
    c.total_cpus = c.free_cpus = workers[i].cpus;
    c.total_memory_mb = c.free_memory_mb = workers[i].memory_mb;
    c.domains = workers[i].domains;
  }
  auto use = [&](size_t i, int slot) {
    if (slot >= 0 && slot < workers[i].slots) used[first[i] + slot] = true;
  };
  auto reserve = [&](size_t i, int cpus, int64_t memory_mb) {
    capacity[i].free_cpus -= cpus;
    capacity[i].free_memory_mb -= memory_mb;
  };
  for (size_t i = 0; i < workers.size(); ++i) {
    for (const ReportedRanks::Job& job : workers[i].running->jobs) {
      if (job.job_id == except_job) continue;
      for (int slot : job.slots) use(i, slot);
      reserve(i, job.cpus, job.memory_mb);
    }
  }
  auto it = index.end();  // a job's ranks on one worker come one after another
  for (const HeldSlots& h : held) {
    if (it == index.end() || it->first != h.worker_id) it = index.find(h.worker_id);
    if (it == index.end()) continue;
    for (int slot : h.slots) use(it->second, slot);
    reserve(it->second, h.cpus, h.memory_mb);
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    for (int s = 0; s < workers[i].slots; ++s) {
      if (!used[first[i] + s]) capacity[i].free_slots.push_back(s);
    }
  }
  return capacity;
}

absl::StatusOr<std::vector<RankPlacement>> PlaceGang(const std::vector<WorkerCapacity>& workers,
                                                     const GangRequest& request) {
  int ranks = request.ranks;
  int min_ranks = request.min_ranks;
  if (min_ranks <= 0 || min_ranks > ranks) min_ranks = ranks;
  std::vector<int> candidates;  // indices into workers
  std::vector<int> rooms(workers.size());
  int total_room = 0;
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    rooms[i] = RankRoom(workers[i], request);
    if (rooms[i] > 0) candidates.push_back(i);
    total_room += rooms[i];
  }
  if (total_room < ranks && total_room >= min_ranks) ranks = total_room;
  if (total_room < ranks) {
    return absl::ResourceExhaustedError(Shortfall(workers, request, min_ranks, total_room));
  }
  if (!workers.empty() && !workers[0].domains.empty()) {
    // An elastic packed gang (a reservation is one) waits where it can fit.
    std::vector<int> idle;
    const PlacementRequest& placement = request.placement;
    if (placement.pack_level >= 0 && placement.pack_required && min_ranks < request.ranks) {
      idle = IdleRooms(workers, request);
    }
    absl::StatusOr<std::vector<WorkerShare>> shares =
        PlaceInDomains(workers, rooms, request, idle.empty() ? nullptr : &idle);
    if (!shares.ok()) return shares.status();
    return RanksOn(workers, *shares, SlotsPerRank(request));
  }
  auto room = [&](int i) { return rooms[i]; };
  // Best fit on one worker when possible; otherwise roomiest first, which
  // reaches `ranks` with the fewest workers.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](int a, int b) { return room(a) > room(b); });
  std::vector<int> chosen;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (room(*it) >= ranks) {
      chosen = {*it};
      break;
    }
  }
  if (chosen.empty()) {
    int enough = 0;
    for (int i : candidates) {
      if (enough >= ranks) break;
      chosen.push_back(i);
      enough += room(i);
    }
  }
  std::sort(chosen.begin(), chosen.end());  // rank order follows worker order
  std::vector<WorkerShare> shares;
  int placed = 0;
  for (int i : chosen) {
    shares.push_back({i, std::min(room(i), ranks - placed)});
    placed += shares.back().ranks;
  }
  return RanksOn(workers, shares, SlotsPerRank(request));
}

std::string SlotShortfall(const GangRequest& request, int ranks, int64_t free, size_t workers) {
  return absl::StrCat("needs ", ranks * SlotsPerRank(request), " free ", SlotWord(request), ", ",
                      free, " free on ", workers, " alive workers");
}

std::vector<WorkerCapacity> IdleCapacity(std::vector<WorkerCapacity> workers) {
  for (WorkerCapacity& w : workers) {
    w.free_slots.resize(w.total_slots);
    for (int s = 0; s < w.total_slots; ++s) w.free_slots[s] = s;
    w.free_cpus = w.total_cpus;
    w.free_memory_mb = w.total_memory_mb;
  }
  return workers;
}

// "; 8 more on its 1 spare worker (--spare-workers)" when spares are
// closed to `request`.
std::string SparesNote(const std::vector<WorkerCapacity>& workers, const GangRequest& request) {
  if (UsesSpares(request)) return "";
  int spares = 0;
  int slots = 0;
  for (const auto& w : workers) {
    spares += w.spare ? 1 : 0;
    slots += w.spare ? w.total_slots : 0;
  }
  if (spares == 0) return "";
  return absl::StrCat("; ", slots, " more on its ", spares,
                      spares == 1 ? " spare worker" : " spare workers",
                      " (--spare-workers), kept for jobs that lose one");
}

std::string NeverFits(const std::vector<WorkerCapacity>& workers, const GangRequest& request) {
  const int fewest =
      request.min_ranks > 0 ? std::min(request.min_ranks, request.ranks) : request.ranks;
  if (SlotsOnly(request)) {  // the ranks the idle workers hold, counted
    int cluster_slots = 0;
    int room = 0;
    for (const auto& w : workers) {
      if (!Matches(w, request)) continue;
      cluster_slots += w.total_slots;
      room += w.total_slots / SlotsPerRank(request);
    }
    if (room >= fewest) return "";
    return absl::StrCat("needs ", fewest * SlotsPerRank(request), " ", SlotWord(request),
                        "; the cluster has ", cluster_slots, SparesNote(workers, request),
                        " (waiting for workers to join)");
  }
  const PlacementRequest& placement = request.placement;
  if (!workers.empty() && !workers[0].domains.empty() &&
      (placement.pack_level >= 0 || placement.spread_level >= 0)) {
    // The idle workers' rooms, without a copy of the workers.
    absl::StatusOr<std::vector<WorkerShare>> idle =
        PlaceInDomains(workers, IdleRooms(workers, request), request);
    if (idle.ok()) return "";
    return absl::StrCat("never fits as asked: ", idle.status().message(),
                        ", with nothing running (waiting for workers to join)");
  }
  absl::StatusOr<std::vector<RankPlacement>> idle = PlaceGang(IdleCapacity(workers), request);
  if (idle.ok()) return "";
  return absl::StrCat("needs ", DescribeRanks(request, fewest),
                      ", more than all alive workers can hold", SparesNote(workers, request),
                      " (waiting for workers to join)");
}

namespace {

// Takes `placement`'s slots, CPUs and memory out of `workers` (take), or
// gives them back.
void Adjust(std::vector<WorkerCapacity>& workers, const std::vector<RankPlacement>& placement,
            const GangRequest& request, bool take) {
  StringViewMap<WorkerCapacity*> by_id;  // made when first needed
  auto find = [&](const RankPlacement& p) -> WorkerCapacity* {
    const int i = p.worker_index;
    if (i >= 0 && i < static_cast<int>(workers.size()) && workers[i].worker_id == p.worker_id) {
      return &workers[i];
    }
    if (by_id.empty()) {
      for (WorkerCapacity& w : workers) by_id.emplace(w.worker_id, &w);
    }
    auto it = by_id.find(p.worker_id);
    return it == by_id.end() ? nullptr : it->second;
  };
  const int sign = take ? -1 : 1;
  for (const RankPlacement& p : placement) {
    WorkerCapacity* found = find(p);
    if (found == nullptr) continue;
    WorkerCapacity& w = *found;
    for (int slot : p.slots) {
      auto at = std::lower_bound(w.free_slots.begin(), w.free_slots.end(), slot);
      const bool free = at != w.free_slots.end() && *at == slot;
      if (take && free) w.free_slots.erase(at);
      if (!take && !free) w.free_slots.insert(at, slot);
    }
    w.free_cpus += sign * request.cpus;
    w.free_memory_mb += sign * request.memory_mb;
  }
}

}  // namespace

void TakeCapacity(std::vector<WorkerCapacity>& workers, const std::vector<RankPlacement>& placement,
                  const GangRequest& request) {
  Adjust(workers, placement, request, /*take=*/true);
}

void ReturnCapacity(std::vector<WorkerCapacity>& workers,
                    const std::vector<RankPlacement>& placement, const GangRequest& request) {
  Adjust(workers, placement, request, /*take=*/false);
}

std::vector<RankPlacement> NearTheirSnapshots(
    std::vector<RankPlacement> placement, const std::function<std::string(int rank)>& holder,
    const std::function<bool(const std::string&, const std::string&)>& may_trade) {
  struct Block {
    size_t first = 0;
    size_t size = 0;
  };
  std::vector<Block> blocks;
  for (size_t i = 0; i < placement.size(); ++i) {
    if (blocks.empty() || placement[i].worker_id != placement[i - 1].worker_id) {
      blocks.push_back({i, 0});
    }
    ++blocks.back().size;
  }
  // The worker's part of a block: what moves when two blocks trade.
  auto trade = [&](const Block& a, const Block& b) {
    for (size_t k = 0; k < a.size; ++k) {
      RankPlacement& x = placement[a.first + k];
      RankPlacement& y = placement[b.first + k];
      std::swap(x.worker_id, y.worker_id);
      std::swap(x.slots, y.slots);
      std::swap(x.worker_index, y.worker_index);
    }
  };
  std::vector<std::string> holders;  // by position in the placement
  for (const RankPlacement& p : placement) holders.push_back(holder(p.rank));
  // How many of the block's ranks `worker` holds the snapshots of.
  auto near = [&](const Block& b, const std::string& worker) {
    int n = 0;
    for (size_t k = 0; k < b.size; ++k) n += holders[b.first + k] == worker ? 1 : 0;
    return n;
  };
  std::vector<bool> settled(blocks.size(), false);
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::string want;
    for (size_t k = 0; k < blocks[i].size; ++k) {
      const std::string& h = holders[blocks[i].first + k];
      if (!h.empty() && (want.empty() || near(blocks[i], h) > near(blocks[i], want))) want = h;
    }
    // From a block that has not taken the worker it wanted, when more ranks
    // end near their snapshots than before.
    for (size_t j = 0; j < blocks.size() && !want.empty(); ++j) {
      if (settled[j] || blocks[j].size != blocks[i].size ||
          placement[blocks[j].first].worker_id != want) {
        continue;
      }
      const std::string& mine = placement[blocks[i].first].worker_id;
      if (j == i) {
        settled[i] = true;
      } else if ((may_trade == nullptr || may_trade(mine, want)) &&
                 near(blocks[i], want) + near(blocks[j], mine) >
                     near(blocks[i], mine) + near(blocks[j], want)) {
        trade(blocks[i], blocks[j]);
        settled[i] = true;
      }
      break;
    }
  }
  return placement;
}

}  // namespace ringmaster
