// Attempts: starting one on a placement, preemption, elastic regrowth.
#include "coordinator/jobs/attempts.h"

#include <algorithm>
#include <functional>
#include <set>
#include <string_view>

#include <spdlog/spdlog.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net.h"
#include "common/string_view_hash.h"
#include "coordinator/core/attempt_placement.h"
#include "coordinator/core/rank_env.h"
#include "domain/job_state.h"

namespace ringmaster {

ProgressWatch::Kind WatchKind(const v1::JobSpec& spec) {
  return spec.has_trainer() ? ProgressWatch::Kind::kTrainer : ProgressWatch::Kind::kCommand;
}

std::function<bool(const std::string&, const std::string&)> Attempts::SameDomainAboveTheHost(
    const std::vector<SchedulableWorker>& workers) const {
  const std::vector<std::string>& levels = scheduling_.policy().topology_levels;
  if (levels.empty()) return nullptr;
  // Within one domain of every level but `host`, so that ranks stay
  // numbered domain by domain; two workers of one host may trade.
  return [&workers, &levels](const std::string& a, const std::string& b) {
    const SchedulableWorker* x = nullptr;
    const SchedulableWorker* y = nullptr;
    for (const SchedulableWorker& w : workers) {
      if (w.worker_id == a) x = &w;
      if (w.worker_id == b) y = &w;
    }
    if (x == nullptr || y == nullptr) return false;
    for (size_t level = 0; level < levels.size(); ++level) {
      if (levels[level] == "host") continue;
      const int dx = level < x->domains.size() ? x->domains[level] : -1;
      const int dy = level < y->domains.size() ? y->domains[level] : -1;
      if (dx != dy || dx < 0) return false;
    }
    return true;
  };
}

void Attempts::Start(JobRecord& entry, const std::vector<RankPlacement>& chosen,
                     const std::vector<SchedulableWorker>& workers) {
  v1::Job& job = entry.job;
  // A restart keeps ranks on the workers that hold their snapshots.
  const std::vector<RankPlacement> placement = NearTheirSnapshots(
      chosen, [&](int rank) { return entry.snapshots.SegmentHolder(rank); },
      SameDomainAboveTheHost(workers));
  std::set<int> ports_in_use;
  const std::string& master_worker = placement[0].worker_id;
  for (const auto& [number, other] : table_.resident()) {
    if (!IsTerminal(other->job.state()) && other->job.ranks_size() > 0 &&
        other->job.ranks(0).worker_id() == master_worker) {
      ports_in_use.insert(other->job.master_port());
    }
  }
  absl::StatusOr<int> port = membership_->PickFreePort(master_worker, ports_in_use);
  if (!port.ok()) {
    job.set_pending_reason(std::string(port.status().message()));
    return;
  }
  auto worker = [&](const std::string& id) -> const SchedulableWorker& {
    return *std::find_if(workers.begin(), workers.end(),
                         [&](const SchedulableWorker& w) { return w.worker_id == id; });
  };
  job.clear_ranks();
  for (const RankPlacement& p : placement) {
    const SchedulableWorker& w = worker(p.worker_id);
    v1::RankStatus* rank = job.add_ranks();
    rank->set_rank(p.rank);
    rank->set_worker_id(p.worker_id);
    if (std::find(job.ran_on().begin(), job.ran_on().end(), p.worker_id) == job.ran_on().end()) {
      job.add_ran_on(p.worker_id);
    }
    rank->set_worker_address(membership_->Address(p.worker_id));
    rank->set_worker_incarnation(w.incarnation);
    rank->set_slot(p.slots[0]);
    // A CPU rank on a GPU worker holds a slot but sees no GPU.
    if (job.spec().gpus_per_rank() > 0 && !w.gpu_indices.empty()) {
      for (int slot : p.slots) rank->add_gpus(w.gpu_indices[slot]);
    }
    rank->set_state(v1::RANK_ASSIGNED);
  }
  RecordPlacedIn(placement, workers, job);
  const int world = static_cast<int>(placement.size());
  job.set_world_size(world);
  job.set_master_addr(HostOfAddress(membership_->Address(master_worker)));
  job.set_master_port(*port);
  entry.rank_progress.clear();
  entry.unseen.clear();
  job.clear_progress();
  job.clear_group_generation();
  job.clear_regroup_since_unix_ms();
  std::set<std::string> used_workers;
  for (const RankPlacement& p : placement) used_workers.insert(p.worker_id);
  std::string message =
      absl::StrCat(world, " ranks on ", used_workers.size(), " workers; rank 0 on ", master_worker);
  const int pack = GangOf(job.spec(), scheduling_.policy().topology_levels).placement.pack_level;
  if (pack >= 0 && pack < job.placed_in_size()) {
    const v1::PlacedDomains& packed = job.placed_in(pack);
    absl::StrAppend(&message, "; in ", packed.level(), " ", absl::StrJoin(packed.domains(), ", "));
  }
  v1::Reason reason = v1::SCHEDULED;
  if (world < job.spec().ranks()) {
    reason = v1::SCALED_DOWN;
    message = absl::StrCat("elastic: ", world, " of ", job.spec().ranks(), " ranks fit (min_ranks ",
                           job.spec().min_ranks(), "); ", message);
  }
  if (!table_.Transition(entry, v1::STARTING, reason, message).ok()) {
    job.clear_ranks();  // not stored, so not acted on
    return;
  }
  entry.watch.Begin(WatchKind(job.spec()), world, clock_->Now());
  entry.stragglers.Reset();
  entry.slowdown.clear();
  job.clear_stragglers();
  entry.regrow_since = absl::InfiniteFuture();
  rendezvous_->OpenScope({job.id(), job.attempt()});
  for (int r = 0; r < world; ++r) SendStart(entry, r);
}

void Attempts::RecordPlacedIn(const std::vector<RankPlacement>& placement,
                              const std::vector<SchedulableWorker>& workers, v1::Job& job) {
  job.clear_placed_in();
  const std::vector<std::string>& levels = scheduling_.policy().topology_levels;
  if (levels.empty()) return;
  StringViewMap<const SchedulableWorker*> by_id;
  for (const SchedulableWorker& w : workers) by_id.emplace(w.worker_id, &w);
  for (size_t level = 0; level < levels.size(); ++level) {
    v1::PlacedDomains& placed = *job.add_placed_in();
    placed.set_level(levels[level]);
    for (const RankPlacement& p : placement) {
      auto it = by_id.find(p.worker_id);
      const int domain = it == by_id.end() || it->second->domains.size() <= level
                             ? -1
                             : it->second->domains[level];
      const std::string name = domain < 0 ? "" : membership_->Domain(domain).second;
      const int last = placed.domains_size() - 1;
      if (last >= 0 && placed.domains(last) == name) {
        placed.set_ranks(last, placed.ranks(last) + 1);
      } else {
        placed.add_domains(name);
        placed.add_ranks(1);
      }
    }
  }
}

void Attempts::SendStart(const JobRecord& entry, int rank) {
  v1::CoordinatorMessage message;
  v1::StartRank& start = *message.mutable_start_rank();
  start = BuildStartRank(entry.job, rank, options_.rank_env);
  const std::string& worker_id = entry.job.ranks(rank).worker_id();
  // A rank that moved: its new worker first fetches the newest snapshot of
  // it from where one is held (docs/checkpoints.md).
  if (start.snapshot_segment()) {
    std::optional<SnapshotLedger::Source> source = entry.snapshots.SourceFor(
        rank, worker_id, [&](const std::string& id) { return membership_->Answering(id); });
    if (source) {
      start.mutable_fetch_from()->set_worker_id(source->worker_id);
      start.mutable_fetch_from()->set_address(membership_->Address(source->worker_id));
      start.mutable_fetch_from()->set_step(source->step);
    }
  }
  Send(worker_id, message);
}

void Attempts::Preempt(JobRecord& victim, const JobRecord& by, int keep_ranks) {
  v1::Job& job = victim.job;
  std::string message = absl::StrCat("PREEMPTED by ", by.job.id(), " (priority ", by.job.priority(),
                                     ", queue ", by.job.spec().queue(), ")");
  if (keep_ranks > 0) {
    absl::StrAppend(&message, ": restarting with at most ", keep_ranks, " of its ",
                    job.world_size(), " ranks from a checkpoint taken on stop");
  } else {
    absl::StrAppend(&message, ": resumes from a checkpoint taken on stop when it is placed again");
  }
  // The bound, said when this preemption reaches it.
  const int most = scheduling_.policy().max_preemptions_per_hour;
  const absl::Time now = clock_->Now();
  std::vector<absl::Time> times = PreemptedAt(job);
  times.push_back(now);
  // Only the last hour's are kept: a job in a loop keeps at most `most`.
  times.erase(times.begin(), std::find_if(times.begin(), times.end(),
                                          [&](absl::Time t) { return t > now - absl::Hours(1); }));
  if (most > 0 && static_cast<int>(times.size()) >= most) {
    const absl::Time free_at = times[times.size() - most] + absl::Hours(1);
    absl::StrAppend(&message, "; preempted ", most,
                    " times within the hour, it is not preempted again before ",
                    absl::FormatTime("%H:%M:%S UTC", free_at, absl::UTCTimeZone()),
                    " (--max-preemptions-per-hour)");
  }
  // Set before the transition, which stores them; put back if it fails.
  const google::protobuf::RepeatedField<int64_t> preempted_before = job.preempted_unix_ms();
  job.set_preemptions(job.preemptions() + 1);
  job.clear_preempted_unix_ms();
  for (absl::Time t : times) job.add_preempted_unix_ms(absl::ToUnixMillis(t));
  if (!table_.Transition(victim, v1::RESTARTING, v1::PREEMPTED, message).ok()) {
    job.set_preemptions(job.preemptions() - 1);
    *job.mutable_preempted_unix_ms() = preempted_before;
    return;
  }
  victim.restart_at = clock_->Now();
  victim.regrow_since = absl::InfiniteFuture();
  StopRanks(victim, absl::Seconds(job.spec().preemption_grace_s()));
  scheduling_.Preempted(job.id(), by.job.id());
}

void Attempts::CheckRegrowth(JobRecord& entry, absl::Time now) {
  v1::Job& job = entry.job;
  if (job.world_size() >= job.spec().ranks()) {  // as most are: this runs for every RUNNING job
    entry.regrow_since = absl::InfiniteFuture();
    return;
  }
  if (job.regroup_since_unix_ms() != 0) return;  // once the group has formed again
  // A job waiting at the same or a higher priority has the free slots
  // first: growing into them would only be preempted again.
  bool others_first = false;
  for (const auto& [number, stamp] : table_.pending()) {
    others_first |= table_.resident().at(number)->job.priority() >= job.priority();
  }
  GangRequest full = GangOf(job.spec(), scheduling_.policy().topology_levels);
  full.min_ranks = 0;
  if (others_first ||
      !PlaceGang(scheduling_.Capacity(table_, health_.Schedulable(), job.id()), full).ok()) {
    entry.regrow_since = absl::InfiniteFuture();
    return;
  }
  if (entry.regrow_since == absl::InfiniteFuture()) entry.regrow_since = now;
  const absl::Duration wait = absl::Seconds(job.spec().scale_up_after_s());
  if (now - entry.regrow_since < wait) return;
  if (!table_
           .Transition(entry, v1::RESTARTING, v1::SCALING_UP,
                       absl::StrCat("room for all ", job.spec().ranks(), " ranks for ",
                                    absl::FormatDuration(wait),
                                    ": restarting at full size from a "
                                    "checkpoint taken on stop (now ",
                                    job.world_size(), ")"))
           .ok()) {
    return;
  }
  entry.restart_at = now;
  StopRanks(entry);
}

}  // namespace ringmaster
