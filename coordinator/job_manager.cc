// JobManager: the job API, transitions, scheduling and restarts. Worker
// stream events are in job_manager_workers.cc.
#include "coordinator/job_manager.h"

#include <algorithm>
#include <set>
#include <utility>

#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/net.h"
#include "common/status_macros.h"
#include "coordinator/job_state.h"
#include "coordinator/spec_validation.h"

namespace ringmaster {

bool RankHoldsSlot(const v1::RankStatus& rank) {
  return rank.state() == v1::RANK_ASSIGNED || rank.state() == v1::RANK_RUNNING;
}

JobManager::JobManager(JobStore* store, RendezvousStore* rendezvous,
                       const Clock* clock, JobManagerOptions options)
    : store_(store),
      rendezvous_(rendezvous),
      clock_(clock),
      options_(std::move(options)),
      registry_(clock, options_.heartbeat_timeout) {}

absl::Status JobManager::Recover() {
  ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, store_->LoadAll());
  absl::MutexLock lock(&mu_);
  for (v1::Job& job : jobs) {
    const std::string id = job.id();
    JobEntry& entry = jobs_[id];
    entry.job = std::move(job);
    entry.restart_at = clock_->Now();
    job_order_.push_back(id);
    if (IsTerminal(entry.job.state())) continue;
    if (entry.job.state() == v1::STARTING || entry.job.state() == v1::RUNNING) {
      rendezvous_->OpenScope({id, entry.job.attempt()});
    }
    for (const v1::RankStatus& rank : entry.job.ranks()) {
      if (RankHoldsSlot(rank)) registry_.Expect(rank.worker_id(), rank.worker_address());
    }
  }
  spdlog::info("recovered {} jobs from the job store", jobs_.size());
  return absl::OkStatus();
}

absl::Status JobManager::Transition(JobEntry& entry, v1::JobState to,
                                    v1::Reason reason, const std::string& message) {
  RETURN_IF_ERROR(CheckTransition(entry.job.state(), to));
  v1::Job next = entry.job;
  v1::StateChange change;
  change.set_state(to);
  change.set_reason(reason);
  change.set_message(message);
  change.set_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
  change.set_attempt(next.attempt());
  next.set_state(to);
  if (to != v1::PENDING) next.clear_pending_reason();
  *next.add_history() = change;
  if (absl::Status s = store_->RecordTransition(next, change); !s.ok()) {
    spdlog::error("job {}: cannot store {} -> {}: {}", entry.job.id(),
                  StateName(entry.job.state()), StateName(to), s.ToString());
    return s;
  }
  spdlog::info("job {}: {} -> {} ({}: {})", entry.job.id(),
               StateName(entry.job.state()), StateName(to), ReasonName(reason),
               message);
  if (options_.on_transition) options_.on_transition(entry.job, change);
  entry.job = std::move(next);
  Notify(entry);
  return absl::OkStatus();
}

void JobManager::Persist(JobEntry& entry) {
  if (absl::Status s = store_->Update(entry.job); !s.ok()) {
    spdlog::error("job {}: cannot store its snapshot: {}", entry.job.id(),
                  s.ToString());
  }
  Notify(entry);
}

void JobManager::Notify(const JobEntry& entry) {
  for (const auto& [id, watcher] : watchers_) {
    if (watcher.job_id == entry.job.id()) watcher.observer(entry.job);
  }
}

absl::StatusOr<std::string> JobManager::Submit(v1::JobSpec spec) {
  RETURN_IF_ERROR(ValidateJobSpec(spec));
  ApplyJobSpecDefaults(&spec);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(int64_t number, store_->NextJobNumber());
  v1::Job job;
  job.set_id(absl::StrCat(spec.name(), "-", number));
  *job.mutable_spec() = std::move(spec);
  job.set_state(v1::PENDING);
  job.set_world_size(job.spec().ranks());
  job.set_create_unix_ms(absl::ToUnixMillis(clock_->Now()));
  v1::StateChange* change = job.add_history();
  change->set_state(v1::PENDING);
  change->set_reason(v1::SUBMITTED);
  change->set_message("submitted");
  change->set_time_unix_ms(job.create_unix_ms());
  RETURN_IF_ERROR(store_->Create(job));
  const std::string id = job.id();
  jobs_[id].job = std::move(job);
  job_order_.push_back(id);
  spdlog::info("job {}: submitted ({} ranks)", id, jobs_[id].job.spec().ranks());
  ScheduleLocked();
  return id;
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  }
  return it->second.job;
}

std::vector<v1::Job> JobManager::List() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> out;
  for (const std::string& id : job_order_) out.push_back(jobs_[id].job);
  return out;
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  }
  JobEntry& entry = it->second;
  if (IsTerminal(entry.job.state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " already ended: ", StateName(entry.job.state())));
  }
  RETURN_IF_ERROR(
      Transition(entry, v1::CANCELLED, v1::CANCEL_REQUESTED, "cancelled by user"));
  StopRanks(entry);
  ScheduleLocked();  // its queue position may have blocked others
  return entry.job;
}

absl::StatusOr<int64_t> JobManager::Watch(const std::string& job_id,
                                          JobObserver observer) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  }
  observer(it->second.job);
  const int64_t id = next_watch_id_++;
  watchers_[id] = Watcher{job_id, std::move(observer)};
  return id;
}

void JobManager::Unwatch(int64_t watch_id) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watch_id);
}

absl::StatusOr<std::vector<RankLogSource>> JobManager::LogSources(
    const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  }
  std::vector<RankLogSource> sources;
  for (const v1::RankStatus& rank : it->second.job.ranks()) {
    const WorkerRecord* w = registry_.Find(rank.worker_id());
    sources.push_back({rank.rank(), w ? w->info.address() : rank.worker_address()});
  }
  return sources;
}

std::vector<v1::Worker> JobManager::ListWorkers() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Worker> workers = registry_.List();
  std::map<std::string, int> used;
  for (const auto& [id, entry] : jobs_) {
    for (const v1::RankStatus& rank : entry.job.ranks()) {
      if (RankHoldsSlot(rank)) used[rank.worker_id()] += std::max(1, rank.gpus_size());
    }
  }
  for (v1::Worker& w : workers) w.set_slots_used(used[w.id()]);
  return workers;
}

void JobManager::Tick() {
  absl::MutexLock lock(&mu_);
  for (const std::string& worker_id : registry_.ExpireLost()) {
    OnWorkerLost(worker_id,
                 absl::StrCat("worker ", worker_id, " missed heartbeats for ",
                              absl::FormatDuration(options_.heartbeat_timeout)));
  }
  AdvanceRestarts();
  ScheduleLocked();
}

std::vector<WorkerCapacity> JobManager::CapacityLocked() {
  std::map<std::string, std::set<int>> used;
  for (const auto& [id, entry] : jobs_) {
    for (const v1::RankStatus& rank : entry.job.ranks()) {
      if (!RankHoldsSlot(rank)) continue;
      if (rank.gpus_size() == 0) used[rank.worker_id()].insert(rank.slot());
      for (int gpu : rank.gpus()) used[rank.worker_id()].insert(gpu);
    }
  }
  std::vector<WorkerCapacity> capacity;
  for (const WorkerRecord* w : registry_.Schedulable()) {
    WorkerCapacity c;
    c.worker_id = w->info.id();
    c.total_slots = w->info.slots();
    c.gpu_slots = w->info.gpus_size() > 0;
    for (int s = 0; s < w->info.slots(); ++s) {
      if (used[c.worker_id].count(s) == 0) c.free_slots.push_back(s);
    }
    capacity.push_back(std::move(c));
  }
  return capacity;
}

void JobManager::ScheduleLocked() {
  std::vector<QueuedJob> queue;
  for (const std::string& id : job_order_) {
    const v1::Job& job = jobs_[id].job;
    if (job.state() == v1::PENDING) {
      queue.push_back({id, job.spec().ranks(), job.spec().gpus_per_rank()});
    }
  }
  if (queue.empty()) return;
  ScheduleResult result = Schedule(queue, CapacityLocked());
  for (const auto& [id, reason] : result.waiting) {
    JobEntry& entry = jobs_[id];
    if (entry.job.pending_reason() != reason) {
      entry.job.set_pending_reason(reason);
      Notify(entry);
    }
  }
  for (const auto& [id, placement] : result.placed) StartAttempt(jobs_[id], placement);
}

void JobManager::StartAttempt(JobEntry& entry,
                              const std::vector<RankPlacement>& placement) {
  v1::Job& job = entry.job;
  std::set<int> ports_in_use;
  const std::string& master_worker = placement[0].worker_id;
  for (const auto& [id, other] : jobs_) {
    if (!IsTerminal(other.job.state()) && other.job.ranks_size() > 0 &&
        other.job.ranks(0).worker_id() == master_worker) {
      ports_in_use.insert(other.job.master_port());
    }
  }
  absl::StatusOr<int> port = registry_.PickFreePort(master_worker, ports_in_use);
  if (!port.ok()) {
    job.set_pending_reason(std::string(port.status().message()));
    return;
  }
  job.clear_ranks();
  for (const RankPlacement& p : placement) {
    const WorkerRecord* w = registry_.Find(p.worker_id);
    v1::RankStatus* rank = job.add_ranks();
    rank->set_rank(p.rank);
    rank->set_worker_id(p.worker_id);
    rank->set_worker_address(w->info.address());
    rank->set_slot(p.slots[0]);
    if (w->info.gpus_size() > 0) {
      for (int slot : p.slots) rank->add_gpus(w->info.gpus(slot).index());
    }
    rank->set_state(v1::RANK_ASSIGNED);
  }
  job.set_world_size(static_cast<int>(placement.size()));
  job.set_master_addr(HostOfAddress(registry_.Find(master_worker)->info.address()));
  job.set_master_port(*port);
  entry.rank_progress.clear();
  job.clear_progress();
  std::set<std::string> workers;
  for (const RankPlacement& p : placement) workers.insert(p.worker_id);
  if (!Transition(entry, v1::STARTING, v1::SCHEDULED,
                  absl::StrCat(placement.size(), " ranks on ", workers.size(),
                               " workers; rank 0 on ", master_worker))
           .ok()) {
    job.clear_ranks();  // not stored, so not acted on
    return;
  }
  rendezvous_->OpenScope({job.id(), job.attempt()});
  for (const v1::RankStatus& rank : job.ranks()) {
    v1::CoordinatorMessage message;
    *message.mutable_start_rank() = MakeStartRank(entry, rank.rank());
    registry_.Find(rank.worker_id())->link->Send(message);
  }
}

v1::StartRank JobManager::MakeStartRank(const JobEntry& entry, int rank) {
  const v1::Job& job = entry.job;
  v1::StartRank start;
  start.mutable_rank()->set_job_id(job.id());
  start.mutable_rank()->set_attempt(job.attempt());
  start.mutable_rank()->set_rank(rank);
  for (auto& [key, value] : BuildRankEnv(job, rank, options_.rank_env)) {
    (*start.mutable_env())[key] = value;
  }
  if (job.spec().has_trainer()) {
    start.add_argv(options_.trainer_program);
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(job.spec().trainer(), &json);
    (*start.mutable_env())["RINGMASTER_TRAINER_SPEC"] = json;
  } else {
    *start.mutable_argv() = job.spec().command();
  }
  start.set_working_dir(job.spec().working_dir());
  start.set_slot(job.ranks(rank).slot());
  *start.mutable_gpus() = job.ranks(rank).gpus();
  return start;
}

void JobManager::StopRanks(JobEntry& entry) {
  rendezvous_->DropScope({entry.job.id(), entry.job.attempt()});
  std::set<std::string> workers;
  for (const v1::RankStatus& rank : entry.job.ranks()) {
    if (RankHoldsSlot(rank)) workers.insert(rank.worker_id());
  }
  for (const std::string& worker_id : workers) {
    WorkerRecord* w = registry_.Find(worker_id);
    if (w == nullptr || w->link == nullptr) continue;
    v1::CoordinatorMessage message;
    message.mutable_stop_job()->set_job_id(entry.job.id());
    message.mutable_stop_job()->set_attempt(entry.job.attempt());
    message.mutable_stop_job()->set_grace_ms(absl::ToInt64Milliseconds(options_.stop_grace));
    w->link->Send(message);
  }
}

void JobManager::FailAttempt(JobEntry& entry, v1::Reason reason,
                             const std::string& message) {
  const v1::Job& job = entry.job;
  if (job.attempt() < job.spec().max_restarts()) {
    if (!Transition(entry, v1::RESTARTING, reason, message).ok()) return;
    const absl::Duration backoff =
        std::min(options_.restart_backoff_max,
                 options_.restart_backoff_initial * (int64_t{1} << std::min(job.attempt(), 20)));
    entry.restart_at = clock_->Now() + backoff;
  } else {
    std::string why = message;
    if (job.spec().max_restarts() > 0) {
      absl::StrAppend(&why, " (after ", job.spec().max_restarts(), " restarts)");
    }
    if (!Transition(entry, v1::FAILED, reason, why).ok()) return;
  }
  StopRanks(entry);
}

void JobManager::AdvanceRestarts() {
  const absl::Time now = clock_->Now();
  for (const std::string& id : job_order_) {
    JobEntry& entry = jobs_[id];
    if (entry.job.state() != v1::RESTARTING || now < entry.restart_at) continue;
    const auto& ranks = entry.job.ranks();
    if (std::any_of(ranks.begin(), ranks.end(), RankHoldsSlot)) continue;
    const int next_attempt = entry.job.attempt() + 1;
    v1::Job before = entry.job;
    entry.job.set_attempt(next_attempt);
    entry.job.clear_ranks();
    if (!Transition(entry, v1::PENDING, v1::RESTART_BACKOFF_DONE,
                    absl::StrCat("attempt ", next_attempt, " of ",
                                 entry.job.spec().max_restarts(), " restarts"))
             .ok()) {
      entry.job = std::move(before);
    }
  }
}

}  // namespace ringmaster
