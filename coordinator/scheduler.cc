#include "coordinator/scheduler.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

int SlotsPerRank(int gpus_per_rank) { return std::max(1, gpus_per_rank); }

bool Eligible(const WorkerCapacity& w, int gpus_per_rank) {
  return gpus_per_rank == 0 || w.gpu_slots;
}

// How many ranks of the job `w` can take now.
int RankRoom(const WorkerCapacity& w, int gpus_per_rank) {
  if (!Eligible(w, gpus_per_rank)) return 0;
  return static_cast<int>(w.free_slots.size()) / SlotsPerRank(gpus_per_rank);
}

std::string SlotWord(int gpus_per_rank) {
  return gpus_per_rank > 0 ? "GPU slots" : "slots";
}

}  // namespace

std::vector<WorkerCapacity> FreeCapacity(const std::vector<SchedulableWorker>& workers,
                                         const std::vector<HeldSlots>& held,
                                         const std::string& except_job) {
  std::unordered_map<std::string_view, size_t> index;
  index.reserve(workers.size());
  std::vector<std::vector<bool>> used(workers.size());
  for (size_t i = 0; i < workers.size(); ++i) {
    index.emplace(workers[i].worker_id, i);
    used[i].assign(std::max(0, workers[i].slots), false);
  }
  auto hold = [&](size_t i, int slot, const auto& gpus) {
    const std::vector<int>& indices = workers[i].gpu_indices;
    std::vector<bool>& slots = used[i];
    if (gpus.empty() && slot >= 0 && slot < static_cast<int>(slots.size())) slots[slot] = true;
    for (int gpu : gpus) {
      auto it = std::find(indices.begin(), indices.end(), gpu);
      if (it != indices.end()) slots[it - indices.begin()] = true;
    }
  };
  for (size_t i = 0; i < workers.size(); ++i) {
    for (const v1::RunningRank& r : workers[i].running) {
      if (r.rank().job_id() != except_job) hold(i, r.slot(), r.gpus());
    }
  }
  for (const HeldSlots& h : held) {
    auto it = index.find(h.worker_id);
    if (it != index.end()) hold(it->second, h.slot, h.gpus);
  }
  std::vector<WorkerCapacity> capacity(workers.size());
  for (size_t i = 0; i < workers.size(); ++i) {
    WorkerCapacity& c = capacity[i];
    c.worker_id = workers[i].worker_id;
    c.total_slots = workers[i].slots;
    c.gpu_slots = !workers[i].gpu_indices.empty();
    for (int s = 0; s < static_cast<int>(used[i].size()); ++s) {
      if (!used[i][s]) c.free_slots.push_back(s);
    }
  }
  return capacity;
}

absl::StatusOr<std::vector<RankPlacement>> PlaceGang(
    const std::vector<WorkerCapacity>& workers, int ranks, int gpus_per_rank,
    int min_ranks) {
  if (min_ranks <= 0 || min_ranks > ranks) min_ranks = ranks;
  std::vector<int> candidates;  // indices into workers
  int total_room = 0;
  for (int i = 0; i < static_cast<int>(workers.size()); ++i) {
    int room = RankRoom(workers[i], gpus_per_rank);
    if (room > 0) candidates.push_back(i);
    total_room += room;
  }
  if (total_room < ranks && total_room >= min_ranks) ranks = total_room;
  if (total_room < ranks) {
    const int per_rank = SlotsPerRank(gpus_per_rank);
    int free = 0;
    for (const auto& w : workers) {
      if (Eligible(w, gpus_per_rank)) free += static_cast<int>(w.free_slots.size());
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "needs ", min_ranks * per_rank, " free ", SlotWord(gpus_per_rank), ", ",
        free, " free on ", workers.size(), " alive workers"));
  }
  // Best fit on one worker when possible; otherwise roomiest first, which
  // reaches `ranks` with the fewest workers.
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    return RankRoom(workers[a], gpus_per_rank) > RankRoom(workers[b], gpus_per_rank);
  });
  std::vector<int> chosen;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (RankRoom(workers[*it], gpus_per_rank) >= ranks) {
      chosen = {*it};
      break;
    }
  }
  if (chosen.empty()) {
    int room = 0;
    for (int i : candidates) {
      if (room >= ranks) break;
      chosen.push_back(i);
      room += RankRoom(workers[i], gpus_per_rank);
    }
  }
  std::sort(chosen.begin(), chosen.end());  // rank order follows worker order

  std::vector<RankPlacement> placement;
  const int per_rank = SlotsPerRank(gpus_per_rank);
  for (int i : chosen) {
    const WorkerCapacity& w = workers[i];
    for (size_t s = 0; s + per_rank <= w.free_slots.size(); s += per_rank) {
      if (static_cast<int>(placement.size()) == ranks) break;
      RankPlacement p;
      p.rank = static_cast<int>(placement.size());
      p.worker_id = w.worker_id;
      p.slots.assign(w.free_slots.begin() + s, w.free_slots.begin() + s + per_rank);
      placement.push_back(std::move(p));
    }
  }
  return placement;
}

ScheduleResult Schedule(const std::vector<QueuedJob>& queue,
                        std::vector<WorkerCapacity> workers) {
  ScheduleResult result;
  std::string blocked_by;
  for (const QueuedJob& job : queue) {
    if (!blocked_by.empty()) {
      result.waiting[job.job_id] = absl::StrCat("queued behind ", blocked_by);
      continue;
    }
    auto placement = PlaceGang(workers, job.ranks, job.gpus_per_rank, job.min_ranks);
    if (!placement.ok()) {
      int cluster_slots = 0;
      for (const auto& w : workers) {
        if (Eligible(w, job.gpus_per_rank)) cluster_slots += w.total_slots;
      }
      const int fewest = job.min_ranks > 0 ? std::min(job.min_ranks, job.ranks) : job.ranks;
      const int needed = fewest * SlotsPerRank(job.gpus_per_rank);
      if (needed > cluster_slots) {
        result.waiting[job.job_id] = absl::StrCat(
            "needs ", needed, " ", SlotWord(job.gpus_per_rank),
            ", more than the ", cluster_slots,
            " of all alive workers; waiting for workers to join");
      } else {
        result.waiting[job.job_id] = std::string(placement.status().message());
        blocked_by = job.job_id;
      }
      continue;
    }
    // Take the placed slots out of the capacity seen by later jobs.
    for (const RankPlacement& p : *placement) {
      for (WorkerCapacity& w : workers) {
        if (w.worker_id != p.worker_id) continue;
        for (int slot : p.slots) {
          w.free_slots.erase(
              std::find(w.free_slots.begin(), w.free_slots.end(), slot));
        }
      }
    }
    result.placed[job.job_id] = *std::move(placement);
  }
  return result;
}

}  // namespace ringmaster
