#include "coordinator/scheduling/scheduling_views.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "common/job_id.h"
#include "common/string_view_hash.h"
#include "domain/image_reference.h"
#include "domain/job_state.h"

namespace ringmaster {

GangRequest GangOf(const v1::JobSpec& spec, const std::vector<std::string>& levels) {
  GangRequest request;
  request.ranks = spec.ranks();
  request.gpus_per_rank = spec.gpus_per_rank();
  request.min_ranks = spec.min_ranks();
  request.cpus = spec.resources().cpus();
  request.memory_mb = spec.resources().memory_mb();
  request.ranks_per_worker = spec.ranks_per_worker();
  request.selector = {spec.worker_selector().begin(), spec.worker_selector().end()};
  // Only workers that run images can run a job in one.
  if (!spec.image().empty()) request.selector[kImagesLabel] = kImagesLabelValue;
  auto level = [&levels](const std::string& name) {
    auto at = std::find(levels.begin(), levels.end(), name);
    return name.empty() || at == levels.end() ? -1 : static_cast<int>(at - levels.begin());
  };
  PlacementRequest& placement = request.placement;
  placement.pack_level = level(spec.placement().pack());
  placement.pack_required = spec.placement().mode() != "preferred";
  placement.pack_name = spec.placement().pack();
  placement.spread_level = level(spec.placement().spread());
  placement.spread_name = spec.placement().spread();
  request.spare_ok = spec.spare_ok();
  return request;
}

std::vector<absl::Time> PreemptedAt(const v1::Job& job) {
  std::vector<absl::Time> times;
  for (int64_t ms : job.preempted_unix_ms()) times.push_back(absl::FromUnixMillis(ms));
  return times;
}

namespace {

// When the job last entered `state`, from its history.
absl::Time LastEntered(const v1::Job& job, v1::JobState state) {
  for (auto it = job.history().rbegin(); it != job.history().rend(); ++it) {
    if (it->state() == state) return absl::FromUnixMillis(it->time_unix_ms());
  }
  return absl::FromUnixMillis(job.create_unix_ms());
}

// Whether the job's attempt `attempt` ended in a failure that lost it a
// worker: its root cause is of that attempt, the job last went RESTARTING
// for a failure (not a preemption, a drain or a scale-up), and the cause
// is a lost worker, or one of `workers` is cordoned now (an XID, a
// quarantine, the admin).
template <typename Workers>
bool LostAWorker(const v1::Job& job, int attempt, const Workers& workers,
                 const std::function<bool(const std::string&)>& cordoned) {
  if (!job.has_root_cause() || job.root_cause().attempt() != attempt) return false;
  for (auto it = job.history().rbegin(); it != job.history().rend(); ++it) {
    if (it->state() != v1::RESTARTING) continue;
    const v1::Reason why = it->reason();
    if (why == v1::PREEMPTED || why == v1::WORKER_DRAINED || why == v1::SCALING_UP) return false;
    break;
  }
  if (job.root_cause().reason() == v1::WORKER_LOST) return true;
  return cordoned != nullptr && std::any_of(workers.begin(), workers.end(), cordoned);
}

// Whether the PENDING job restarts because its last attempt lost a
// worker: it goes first, and may use spares.
bool Recovering(const v1::Job& job, const std::function<bool(const std::string&)>& cordoned) {
  const auto& past = job.past_attempts();
  if (job.attempt() == 0 || past.empty() || past.rbegin()->attempt() != job.attempt() - 1) {
    return false;
  }
  return LostAWorker(job, job.attempt() - 1, past.rbegin()->worker_ids(), cordoned);
}

PendingJob* ViewOf(std::vector<PendingJob>& views, int64_t number) {
  auto view = std::lower_bound(views.begin(), views.end(), number,
                               [](const PendingJob& p, int64_t n) { return p.sequence < n; });
  return view != views.end() && view->sequence == number ? &*view : nullptr;
}

}  // namespace

void SchedulingViews::SetQueues(QueueConfig queues) {
  queues_ = std::move(queues);
  queue_loads_.clear();
  // The views name their queues by the config's strings.
  pending_.clear();
  pending_meta_.clear();
  preemptor_views_.clear();
  excluding_views_.clear();
  pending_at_ = -1;
  placed_.clear();
}

void SchedulingViews::Preempted(const std::string& victim, const std::string& preemptor) {
  preemptors_[preemptor].insert(victim);
}

void SchedulingViews::UpdatePending(JobTable& table) {
  for (int64_t number : preemptor_views_) {
    if (PendingJob* view = ViewOf(pending_, number)) view->preemptor = false;
  }
  preemptor_views_.clear();
  if (pending_at_ != table.pending_changes()) MergePending(table);
  // A preemptor goes first until its victims have let go of their slots.
  for (auto it = preemptors_.begin(); it != preemptors_.end();) {
    const JobRecord* entry = table.Find(it->first);
    std::set<std::string>& victims = it->second;
    for (auto v = victims.begin(); v != victims.end();) {
      const JobRecord* victim = table.Find(*v);
      v = victim != nullptr && HoldsSlots(victim->job) ? std::next(v) : victims.erase(v);
    }
    if (entry == nullptr || entry->job.state() != v1::PENDING || victims.empty()) {
      it = preemptors_.erase(it);
      continue;
    }
    const int64_t number = JobNumber(it->first);
    if (PendingJob* view = ViewOf(pending_, number)) {
      view->preemptor = true;
      preemptor_views_.push_back(number);
    }
    ++it;
  }
}

void SchedulingViews::ApplyExclusions(const JobTable& table,
                                      const std::vector<WorkerCapacity>& free) {
  for (int64_t number : excluding_views_) {
    PendingJob* view = ViewOf(pending_, number);
    if (view == nullptr) continue;
    GangRequest& request = view->request;
    request.avoid.clear();
    for (const v1::ExcludedWorker& e : table.resident().at(number)->job.excluded_workers()) {
      request.avoid.push_back(e.worker_id());
    }
    // Only while other capacity exists: a job that the other workers can
    // never hold goes back to those it avoided.
    if (!NeverFits(free, request).empty()) request.avoid.clear();
  }
}

void SchedulingViews::MergePending(const JobTable& table) {
  // A merge of the table's pending jobs with the views kept: only a job new
  // to PENDING (or PENDING again: a new stamp) is read.
  std::vector<PendingJob> views;
  std::vector<PendingMeta> meta;
  views.reserve(table.pending().size());
  meta.reserve(table.pending().size());
  size_t kept = 0;
  for (const auto& [number, stamp] : table.pending()) {
    while (kept < pending_.size() && pending_[kept].sequence < number) ++kept;
    if (kept < pending_.size() && pending_[kept].sequence == number &&
        pending_meta_[kept].stamp == stamp) {
      views.push_back(pending_[kept]);
      meta.push_back(std::move(pending_meta_[kept]));
      continue;
    }
    const v1::Job& job = table.resident().at(number)->job;
    if (!job.held_by().empty()) continue;  // not scheduled until released
    PendingJob& view = views.emplace_back(PendingJob{
        job.id(), QueueName(job.spec().queue()), job.owner(), job.priority(), number,
        LastEntered(job, v1::PENDING), false, GangOf(job.spec(), policy_.topology_levels)});
    view.request.recovering = Recovering(job, cordoned_);
    meta.push_back({stamp, job.pending_reason().empty() ? -1 : Intern(job.pending_reason()),
                    job.spec().deadline_s() > 0, job.excluded_workers_size() > 0});
  }
  excluding_views_.clear();
  for (size_t i = 0; i < meta.size(); ++i) {
    if (meta[i].excludes) excluding_views_.push_back(views[i].sequence);
  }
  pending_ = std::move(views);
  pending_meta_ = std::move(meta);
  pending_at_ = table.pending_changes();
}

namespace {

// What the scheduler sees of a placed job now.
RunningJob ViewOfPlaced(const v1::Job& job, std::string_view queue,
                        const StringViewMap<const SchedulableWorker*>& workers,
                        const std::vector<std::string>& levels,
                        const std::function<bool(const std::string&)>& cordoned) {
  RunningJob view{job.id(),
                  queue,
                  job.owner(),
                  job.priority(),
                  LastEntered(job, v1::STARTING),
                  job.spec().preemptible(),
                  GangOf(job.spec(), levels),
                  {},
                  PreemptedAt(job)};
  // A job restarting because it lost a worker keeps the slots of its ranks
  // on the others through its back-off: it starts again there, with a
  // spare, rather than wait for them.
  bool keeps = false;
  if (job.state() == v1::RESTARTING) {
    std::vector<std::string> used;
    for (const v1::RankStatus& rank : job.ranks()) used.push_back(rank.worker_id());
    keeps = LostAWorker(job, job.attempt(), used, cordoned);
  }
  for (const v1::RankStatus& rank : job.ranks()) {
    if (!RankHoldsSlot(rank) && !(keeps && workers.count(rank.worker_id()) > 0)) continue;
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

void SchedulingViews::UpdatePlaced(const JobTable& table,
                                   const std::vector<SchedulableWorker>& workers) {
  StringViewMap<const SchedulableWorker*> by_id;
  for (const SchedulableWorker& w : workers) by_id.emplace(w.worker_id, &w);
  std::vector<PlacedView> views;
  views.reserve(table.placed().size());
  size_t kept = 0;
  for (const auto& [number, record] : table.placed()) {
    const v1::Job& job = record->job;
    while (kept < placed_.size() && placed_[kept].number < number) ++kept;
    if (kept < placed_.size() && placed_[kept].number == number &&
        placed_[kept].revision == job.revision()) {
      views.push_back(std::move(placed_[kept]));
      continue;
    }
    const bool running = job.state() == v1::STARTING || job.state() == v1::RUNNING;
    PlacedView& view = views.emplace_back(PlacedView{
        number,
        job.revision(),
        running,
        ViewOfPlaced(job, QueueName(job.spec().queue()), by_id, policy_.topology_levels, cordoned_),
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
  placed_ = std::move(views);
}

std::vector<WorkerCapacity> SchedulingViews::Capacity(const JobTable& table,
                                                      const std::vector<SchedulableWorker>& workers,
                                                      const std::string& except) {
  UpdatePlaced(table, workers);
  std::vector<HeldSlots> held;
  for (const PlacedView& view : placed_) {
    if (view.job.job_id == except) continue;
    for (const PlacedView::OnWorker& on : view.held) {
      held.push_back({on.worker_id, on.slots, on.cpus, on.memory_mb});
    }
  }
  std::vector<WorkerCapacity> free = FreeCapacity(workers, held, except);
  // The spares of the last pass (a pass chooses them again).
  if (!spares_.empty()) {
    for (WorkerCapacity& w : free) w.spare = spares_.count(w.worker_id) > 0;
  }
  return free;
}

void SchedulingViews::ChooseSpares(std::vector<WorkerCapacity>& free) {
  const int wanted = policy_.spare_workers.Of(static_cast<int>(free.size()));
  for (WorkerCapacity& w : free) w.spare = false;
  if (wanted <= 0) {
    spares_.clear();
    return;
  }
  // A worker where a job that may not run on spares holds slots is none.
  StringViewSet busy;
  for (const PlacedView& view : placed_) {
    if (view.job.request.spare_ok) continue;
    for (const PlacedView::OnWorker& on : view.held) busy.insert(on.worker_id);
  }
  // Spread over the domains of the narrowest level above the host, so that
  // a packed job that loses a worker finds a spare in its own domain.
  const std::vector<std::string>& levels = policy_.topology_levels;
  int level = static_cast<int>(levels.size()) - 1;
  while (level >= 0 && levels[level] == "host") --level;
  struct Candidate {
    int domain;
    bool spare;  // it was one: spares stay where they are when they can
    size_t index;
  };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < free.size(); ++i) {
    const WorkerCapacity& w = free[i];
    if (busy.count(w.worker_id) > 0) continue;
    const int domain =
        level >= 0 && level < static_cast<int>(w.domains.size()) ? w.domains[level] : -1;
    candidates.push_back({domain, spares_.count(w.worker_id) > 0, i});
  }
  std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
    if (a.domain != b.domain) return a.domain < b.domain;
    if (a.spare != b.spare) return a.spare;
    return free[a.index].worker_id < free[b.index].worker_id;
  });
  struct Domain {
    size_t next, end;  // its candidates not yet taken
    int taken = 0;
    bool had_spare = false;
  };
  std::vector<Domain> domains;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i == 0 || candidates[i].domain != candidates[i - 1].domain) domains.push_back({i, i});
    domains.back().end = i + 1;
    domains.back().had_spare |= candidates[i].spare;
  }
  // One at a time, from the domain with the fewest taken; among equals the
  // one that had a spare, then the one with the most left.
  absl::flat_hash_set<std::string> chosen;
  for (int n = 0; n < wanted; ++n) {
    Domain* best = nullptr;
    for (Domain& d : domains) {
      if (d.next == d.end) continue;
      if (best == nullptr || d.taken < best->taken ||
          (d.taken == best->taken &&
           (d.had_spare != best->had_spare ? d.had_spare
                                           : d.end - d.next > best->end - best->next))) {
        best = &d;
      }
    }
    if (best == nullptr) break;  // short until workers come back or free up
    WorkerCapacity& w = free[candidates[best->next++].index];
    ++best->taken;
    w.spare = true;
    chosen.insert(w.worker_id);
  }
  spares_ = std::move(chosen);
}

SchedulingViews::Decisions SchedulingViews::Pass(JobTable& table,
                                                 const std::vector<SchedulableWorker>& workers,
                                                 absl::Time now) {
  CompactReasons();
  UpdatePending(table);
  std::vector<WorkerCapacity> free = Capacity(table, workers);
  ChooseSpares(free);
  ApplyExclusions(table, free);
  std::vector<const RunningJob*> running;
  for (const PlacedView& view : placed_) {
    if (view.running) running.push_back(&view.job);
  }
  SchedulingDecisions decided =
      ScheduleQueues(queues_, pending_, running, std::move(free), now, policy_, &never_fits_);
  queue_loads_ = std::move(decided.queues);
  // The decisions view the jobs' own strings: the JobManager acts on the
  // jobs by number, once the views are done with.
  Decisions decisions;
  // Jobs waiting for one reason share its text: each text is looked up
  // once.
  absl::flat_hash_map<std::pair<const char*, size_t>, int> ids;
  for (size_t i = 0; i < pending_.size(); ++i) {
    const PendingJob& job = pending_[i];
    JobDecision& decision = decided.jobs[i];
    if (!decision.placement.empty()) {
      decisions.starts.emplace_back(job.sequence, std::move(decision.placement));
      pending_meta_[i].reason = -1;  // a start that fails says why on the job itself
      continue;
    }
    if (decision.waiting.empty()) continue;
    auto [id, added] = ids.try_emplace({decision.waiting.data(), decision.waiting.size()}, -1);
    if (added) id->second = Intern(decision.waiting);
    if (pending_meta_[i].reason != id->second) {
      pending_meta_[i].reason = id->second;
      JobRecord& entry = *table.resident().at(job.sequence);
      entry.job.set_pending_reason(reason_texts_[id->second]);
      table.Notify(entry);
    }
  }
  decisions.preemptions = std::move(decided.preemptions);
  return decisions;
}

void SchedulingViews::CompactReasons() {
  if (reason_texts_.size() < kMaxReasons) return;
  std::vector<std::string> texts = std::move(reason_texts_);
  reason_texts_.clear();
  reason_ids_.clear();
  for (PendingMeta& meta : pending_meta_) {
    if (meta.reason >= 0) meta.reason = Intern(texts[meta.reason]);
  }
}

int SchedulingViews::Intern(std::string_view reason) {
  auto [it, added] =
      reason_ids_.try_emplace(std::string(reason), static_cast<int>(reason_texts_.size()));
  if (added) reason_texts_.emplace_back(reason);
  return it->second;
}

std::vector<int64_t> SchedulingViews::PendingWithDeadline() const {
  std::vector<int64_t> numbers;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_meta_[i].deadline) numbers.push_back(pending_[i].sequence);
  }
  return numbers;
}

bool SchedulingViews::MaySeeNewSightings(const JobRecord& entry,
                                         const absl::flat_hash_set<std::string>& relisted) const {
  const int64_t revision = entry.job.revision();
  if (entry.sightings_checked != revision) return true;
  const int64_t number = JobNumber(entry.job.id());
  auto view = std::lower_bound(placed_.begin(), placed_.end(), number,
                               [](const PlacedView& p, int64_t n) { return p.number < n; });
  if (view == placed_.end() || view->number != number || view->revision != revision) return true;
  for (const PlacedView::OnWorker& on : view->held) {
    if (relisted.count(on.worker_id) > 0) return true;
  }
  return false;
}

std::string_view SchedulingViews::QueueName(const std::string& queue) const {
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

v1::ListQueuesResponse SchedulingViews::ListQueues() const {
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

}  // namespace ringmaster
