// JobManager: placing queued jobs, starting attempts, elastic regrowth.
#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/job_id.h"
#include "common/net.h"
#include "coordinator/jobs/job_manager.h"
#include "domain/job_state.h"

namespace ringmaster {

ProgressWatch::Kind WatchKind(const v1::JobSpec& spec) {
  return spec.has_trainer() ? ProgressWatch::Kind::kTrainer : ProgressWatch::Kind::kCommand;
}

GangRequest GangOf(const v1::JobSpec& spec) {
  GangRequest request;
  request.ranks = spec.ranks();
  request.gpus_per_rank = spec.gpus_per_rank();
  request.min_ranks = spec.min_ranks();
  request.cpus = spec.resources().cpus();
  request.memory_mb = spec.resources().memory_mb();
  request.ranks_per_worker = spec.ranks_per_worker();
  request.selector = {spec.worker_selector().begin(), spec.worker_selector().end()};
  return request;
}

namespace {

// When the job was preempted within the last hour, oldest first.
std::vector<absl::Time> PreemptedAt(const v1::Job& job) {
  std::vector<absl::Time> times;
  for (int64_t ms : job.preempted_unix_ms()) times.push_back(absl::FromUnixMillis(ms));
  return times;
}

// When the job last entered `state`, from its history.
absl::Time LastEntered(const v1::Job& job, v1::JobState state) {
  for (auto it = job.history().rbegin(); it != job.history().rend(); ++it) {
    if (it->state() == state) return absl::FromUnixMillis(it->time_unix_ms());
  }
  return absl::FromUnixMillis(job.create_unix_ms());
}

}  // namespace

namespace {

PendingJob* ViewOf(std::vector<PendingJob>& views, int64_t number) {
  auto view = std::lower_bound(views.begin(), views.end(), number,
                               [](const PendingJob& p, int64_t n) { return p.sequence < n; });
  return view != views.end() && view->sequence == number ? &*view : nullptr;
}

}  // namespace

void JobManager::UpdatePendingViewsLocked() {
  for (int64_t number : preemptor_views_) {
    if (PendingJob* view = ViewOf(pending_views_, number)) view->preemptor = false;
  }
  preemptor_views_.clear();
  if (pending_views_at_ != table_.pending_changes()) MergePendingViewsLocked();
  // A preemptor goes first until its victims have let go of their slots.
  for (auto it = preemptors_.begin(); it != preemptors_.end();) {
    const JobRecord* entry = table_.Find(it->first);
    std::set<std::string>& victims = it->second;
    for (auto v = victims.begin(); v != victims.end();) {
      const JobRecord* victim = table_.Find(*v);
      v = victim != nullptr && HoldsSlots(victim->job) ? std::next(v) : victims.erase(v);
    }
    if (entry == nullptr || entry->job.state() != v1::PENDING || victims.empty()) {
      it = preemptors_.erase(it);
      continue;
    }
    const int64_t number = JobNumber(it->first);
    if (PendingJob* view = ViewOf(pending_views_, number)) {
      view->preemptor = true;
      preemptor_views_.push_back(number);
    }
    ++it;
  }
}

void JobManager::ApplyExclusionsLocked(const std::vector<WorkerCapacity>& free) {
  for (int64_t number : excluding_views_) {
    PendingJob* view = ViewOf(pending_views_, number);
    if (view == nullptr) continue;
    GangRequest& request = view->request;
    request.avoid.clear();
    for (const v1::ExcludedWorker& e : table_.resident().at(number)->job.excluded_workers()) {
      request.avoid.push_back(e.worker_id());
    }
    // Only while other capacity exists: a job that the other workers can
    // never hold goes back to those it avoided.
    if (!NeverFits(free, request).empty()) request.avoid.clear();
  }
}

void JobManager::MergePendingViewsLocked() {
  // A merge of the table's pending jobs with the views kept: only a job new
  // to PENDING (or PENDING again: a new stamp) is read.
  std::vector<PendingJob> views;
  std::vector<PendingMeta> meta;
  views.reserve(table_.pending().size());
  meta.reserve(table_.pending().size());
  size_t kept = 0;
  for (const auto& [number, stamp] : table_.pending()) {
    while (kept < pending_views_.size() && pending_views_[kept].sequence < number) ++kept;
    if (kept < pending_views_.size() && pending_views_[kept].sequence == number &&
        pending_meta_[kept].stamp == stamp) {
      views.push_back(pending_views_[kept]);
      meta.push_back(std::move(pending_meta_[kept]));
      continue;
    }
    const v1::Job& job = table_.resident().at(number)->job;
    views.push_back({job.id(), QueueNameLocked(job.spec().queue()), job.owner(), job.priority(),
                     number, LastEntered(job, v1::PENDING), false, GangOf(job.spec())});
    meta.push_back({stamp, job.pending_reason(), job.spec().deadline_s() > 0,
                    job.excluded_workers_size() > 0});
  }
  excluding_views_.clear();
  for (size_t i = 0; i < meta.size(); ++i) {
    if (meta[i].excludes) excluding_views_.push_back(views[i].sequence);
  }
  pending_views_ = std::move(views);
  pending_meta_ = std::move(meta);
  pending_views_at_ = table_.pending_changes();
}

namespace {

// What the scheduler sees of a placed job now.
RunningJob ViewOfPlaced(
    const v1::Job& job, std::string_view queue,
    const absl::flat_hash_map<std::string_view, const SchedulableWorker*>& workers) {
  RunningJob view{job.id(),
                  queue,
                  job.owner(),
                  job.priority(),
                  LastEntered(job, v1::STARTING),
                  job.spec().preemptible(),
                  GangOf(job.spec()),
                  {},
                  PreemptedAt(job)};
  for (const v1::RankStatus& rank : job.ranks()) {
    if (!RankHoldsSlot(rank)) continue;
    RankPlacement& p = view.ranks.emplace_back(RankPlacement{rank.rank(), rank.worker_id(), {}});
    auto worker = rank.gpus().empty() ? workers.end() : workers.find(rank.worker_id());
    if (worker == workers.end()) {
      p.slots.push_back(rank.slot());
    } else {  // a GPU rank holds the slot of each of its GPUs
      AppendGpuSlots(rank.gpus(), worker->second->gpu_indices, &p.slots);
    }
  }
  return view;
}

}  // namespace

void JobManager::UpdatePlacedViewsLocked(const std::vector<SchedulableWorker>& workers) {
  absl::flat_hash_map<std::string_view, const SchedulableWorker*> by_id;
  for (const SchedulableWorker& w : workers) by_id.emplace(w.worker_id, &w);
  std::vector<PlacedView> views;
  views.reserve(table_.placed().size());
  size_t kept = 0;
  for (const auto& [number, record] : table_.placed()) {
    const v1::Job& job = record->job;
    while (kept < placed_views_.size() && placed_views_[kept].number < number) ++kept;
    if (kept < placed_views_.size() && placed_views_[kept].number == number &&
        placed_views_[kept].revision == job.revision()) {
      views.push_back(std::move(placed_views_[kept]));
      continue;
    }
    const bool running = job.state() == v1::STARTING || job.state() == v1::RUNNING;
    PlacedView& view =
        views.emplace_back(PlacedView{number,
                                      job.revision(),
                                      running,
                                      ViewOfPlaced(job, QueueNameLocked(job.spec().queue()), by_id),
                                      {}});
    for (const RankPlacement& p : view.job.ranks) {
      if (view.held.empty() || view.held.back().worker_id != p.worker_id) {
        view.held.push_back({p.worker_id});
      }
      PlacedView::OnWorker& on = view.held.back();
      on.slots.insert(on.slots.end(), p.slots.begin(), p.slots.end());
      on.cpus += view.job.request.cpus;
      on.memory_mb += view.job.request.memory_mb;
    }
  }
  placed_views_ = std::move(views);
}

std::vector<WorkerCapacity> JobManager::CapacityLocked(
    const std::vector<SchedulableWorker>& workers, const std::string& except) {
  UpdatePlacedViewsLocked(workers);
  std::vector<HeldSlots> held;
  for (const PlacedView& view : placed_views_) {
    if (view.job.job_id == except) continue;
    for (const PlacedView::OnWorker& on : view.held) {
      held.push_back({on.worker_id, on.slots, on.cpus, on.memory_mb});
    }
  }
  return FreeCapacity(workers, held, except);
}

void JobManager::ScheduleLocked() {
  const std::vector<SchedulableWorker> workers = SchedulableLocked();
  UpdatePendingViewsLocked();
  std::vector<WorkerCapacity> free = CapacityLocked(workers);
  ApplyExclusionsLocked(free);
  std::vector<const RunningJob*> running;
  for (const PlacedView& view : placed_views_) {
    if (view.running) running.push_back(&view.job);
  }
  SchedulingDecisions decisions = ScheduleQueues(queues_, pending_views_, running, std::move(free),
                                                 clock_->Now(), options_.scheduling);
  queue_loads_ = std::move(decisions.queues);
  // The decisions view the jobs' own strings: act on the jobs by number,
  // and on placements only after the views are done with.
  std::vector<std::pair<int64_t, std::vector<RankPlacement>>> starts;
  for (size_t i = 0; i < pending_views_.size(); ++i) {
    const PendingJob& job = pending_views_[i];
    JobDecision& decided = decisions.jobs[i];
    if (!decided.placement.empty()) {
      starts.emplace_back(job.sequence, std::move(decided.placement));
      pending_meta_[i].reason.clear();  // a start that fails says why on the job itself
      continue;
    }
    std::string& said = pending_meta_[i].reason;
    if (!decided.waiting.empty() && said != decided.waiting) {
      said = std::string(decided.waiting);
      JobRecord& entry = *table_.resident().at(job.sequence);
      entry.job.set_pending_reason(said);
      table_.Notify(entry);
    }
  }
  for (const Preemption& p : decisions.preemptions) {
    PreemptLocked(*table_.Find(p.victim), *table_.Find(p.preemptor), p.keep_ranks);
  }
  for (auto& [number, placement] : starts) {
    JobRecord& entry = *table_.resident().at(number);
    preemptors_.erase(entry.job.id());
    StartAttemptLocked(entry, placement, workers);
  }
}

void JobManager::PreemptLocked(JobRecord& victim, const JobRecord& by, int keep_ranks) {
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
  const int most = options_.scheduling.max_preemptions_per_hour;
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
  StopRanksLocked(victim, absl::Seconds(job.spec().preemption_grace_s()));
  preemptors_[by.job.id()].insert(job.id());
}

void JobManager::SetQueues(QueueConfig queues) {
  MutexLock lock(&mu_);
  queues_ = std::move(queues);
  queue_loads_.clear();
  // The views name their queues by the config's strings.
  pending_views_.clear();
  pending_meta_.clear();
  preemptor_views_.clear();
  excluding_views_.clear();
  pending_views_at_ = -1;
  placed_views_.clear();
}

std::string_view JobManager::QueueNameLocked(const std::string& queue) const {
  for (const QueueSpec& spec : queues_.queues) {
    if (spec.name == queue) return spec.name;
  }
  return queue;
}

namespace {

void SetAmount(const SlotAmount& amount, v1::SlotAmount* out) {
  out->set_slots(amount.slots >= SlotAmount::kUnlimited ? -1 : amount.slots);
  out->set_gpus(amount.gpus >= SlotAmount::kUnlimited ? -1 : amount.gpus);
}

}  // namespace

v1::ListQueuesResponse JobManager::ListQueues() {
  MutexLock lock(&mu_);
  v1::ListQueuesResponse response;
  for (const QueueSpec& spec : queues_.queues) {
    v1::Queue* queue = response.add_queues();
    queue->set_name(spec.name);
    queue->set_weight(spec.weight);
    SetAmount(spec.quota, queue->mutable_quota());
    SetAmount(spec.limit, queue->mutable_limit());
    for (const std::string& user : spec.users) queue->add_users(user);
    queue->set_max_running_jobs_per_user(spec.max_running_jobs_per_user);
    queue->set_is_default(spec.name == queues_.default_queue);
    auto load = queue_loads_.find(spec.name);
    if (load == queue_loads_.end()) continue;
    const SlotAmount& used = load->second.in_use;
    SetAmount(used, queue->mutable_in_use());
    queue->mutable_borrowed()->set_slots(std::max<int64_t>(0, used.slots - spec.quota.slots));
    queue->mutable_borrowed()->set_gpus(std::max<int64_t>(0, used.gpus - spec.quota.gpus));
    queue->set_running_jobs(load->second.running_jobs);
    queue->set_pending_jobs(load->second.pending_jobs);
  }
  for (const auto& [name, priority] : queues_.priority_classes) {
    (*response.mutable_priority_classes())[name] = priority;
  }
  return response;
}

void JobManager::StartAttemptLocked(JobRecord& entry, const std::vector<RankPlacement>& placement,
                                    const std::vector<SchedulableWorker>& workers) {
  v1::Job& job = entry.job;
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
  const int world = static_cast<int>(placement.size());
  job.set_world_size(world);
  job.set_master_addr(HostOfAddress(membership_->Address(master_worker)));
  job.set_master_port(*port);
  entry.rank_progress.clear();
  entry.unseen.clear();
  job.clear_progress();
  std::set<std::string> used_workers;
  for (const RankPlacement& p : placement) used_workers.insert(p.worker_id);
  std::string message =
      absl::StrCat(world, " ranks on ", used_workers.size(), " workers; rank 0 on ", master_worker);
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
  for (int r = 0; r < world; ++r) SendStartLocked(entry, r);
}

void JobManager::SendStartLocked(const JobRecord& entry, int rank) {
  v1::CoordinatorMessage message;
  *message.mutable_start_rank() = BuildStartRank(entry.job, rank, options_.rank_env);
  SendLocked(entry.job.ranks(rank).worker_id(), message);
}

void JobManager::CheckRegrowthLocked(JobRecord& entry, absl::Time now) {
  v1::Job& job = entry.job;
  if (job.world_size() >= job.spec().ranks()) {  // as most are: this runs for every RUNNING job
    entry.regrow_since = absl::InfiniteFuture();
    return;
  }
  // A job waiting at the same or a higher priority has the free slots
  // first: growing into them would only be preempted again.
  bool others_first = false;
  for (const auto& [number, stamp] : table_.pending()) {
    others_first |= table_.resident().at(number)->job.priority() >= job.priority();
  }
  GangRequest full = GangOf(job.spec());
  full.min_ranks = 0;
  if (others_first || !PlaceGang(CapacityLocked(SchedulableLocked(), job.id()), full).ok()) {
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
  StopRanksLocked(entry);
}

}  // namespace ringmaster
