// JobManager: the job API, transitions, failing attempts, restarts and the
// periodic checks. Scheduling is in job_manager_schedule.cc, worker stream
// events in job_manager_workers.cc.
#include "coordinator/job_manager.h"

#include <algorithm>
#include <random>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "coordinator/job_state.h"
#include "coordinator/spec_validation.h"

namespace ringmaster {

bool RankHoldsSlot(const v1::RankStatus& rank) {
  return rank.state() == v1::RANK_ASSIGNED || rank.state() == v1::RANK_RUNNING;
}

bool IsActive(v1::JobState state) { return state == v1::STARTING || state == v1::RUNNING; }

JobManager::JobManager(JobStore* store, RendezvousStore* rendezvous,
                       WorkerMembership* membership, const Clock* clock,
                       JobManagerOptions options)
    : store_(store),
      rendezvous_(rendezvous),
      membership_(membership),
      clock_(clock),
      options_(std::move(options)),
      rng_(std::random_device{}()) {}

absl::Status JobManager::Recover() {
  ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, store_->LoadAll());
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  for (v1::Job& job : jobs) {
    const std::string id = job.id();
    JobEntry& entry = jobs_[id];
    entry.job = std::move(job);
    entry.restart_at = now;
    job_order_.push_back(id);
    if (IsTerminal(entry.job.state())) continue;
    if (IsActive(entry.job.state())) {
      rendezvous_->OpenScope({id, entry.job.attempt()});
      entry.watch.Begin(WatchKind(entry.job.spec()), entry.job.ranks_size(), now);
    }
    for (const v1::RankStatus& rank : entry.job.ranks()) {
      if (rank.state() != v1::RANK_ASSIGNED) entry.watch.Started(rank.rank());
      if (RankHoldsSlot(rank)) membership_->Expect(rank.worker_id(), rank.worker_address());
    }
  }
  spdlog::info("recovered {} jobs from the job store", jobs_.size());
  return absl::OkStatus();
}

absl::Status JobManager::Transition(JobEntry& entry, v1::JobState to, v1::Reason reason,
                                    const std::string& message) {
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
  spdlog::info("job {}: {} -> {} ({}: {})", entry.job.id(), StateName(entry.job.state()),
               StateName(to), ReasonName(reason), message);
  if (options_.on_transition) options_.on_transition(entry.job, change);
  entry.job = std::move(next);
  Notify(entry);
  return absl::OkStatus();
}

void JobManager::Persist(JobEntry& entry) {
  if (absl::Status s = store_->Update(entry.job); !s.ok()) {
    spdlog::error("job {}: cannot store its snapshot: {}", entry.job.id(), s.ToString());
  }
  Notify(entry);
}

void JobManager::Notify(const JobEntry& entry) {
  for (const auto& [id, watcher] : watchers_) {
    if (watcher.job_id == entry.job.id()) watcher.observer(entry.job);
  }
}

JobManager::JobEntry* JobManager::FindJob(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
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
  const JobEntry* entry = FindJob(job_id);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  return entry->job;
}

std::vector<v1::Job> JobManager::List() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> out;
  for (const std::string& id : job_order_) out.push_back(jobs_[id].job);
  return out;
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  JobEntry* entry = FindJob(job_id);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  if (IsTerminal(entry->job.state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " already ended: ", StateName(entry->job.state())));
  }
  RETURN_IF_ERROR(Transition(*entry, v1::CANCELLED, v1::CANCEL_REQUESTED, "cancelled by user"));
  StopRanks(*entry);
  ScheduleLocked();  // its queue position may have blocked others
  return entry->job;
}

absl::StatusOr<int64_t> JobManager::Watch(const std::string& job_id, JobObserver observer) {
  absl::MutexLock lock(&mu_);
  const JobEntry* entry = FindJob(job_id);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  observer(entry->job);
  const int64_t id = next_watch_id_++;
  watchers_[id] = Watcher{job_id, std::move(observer)};
  return id;
}

void JobManager::Unwatch(int64_t watch_id) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watch_id);
}

absl::StatusOr<std::vector<RankLogSource>> JobManager::LogSources(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  const JobEntry* entry = FindJob(job_id);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  std::vector<RankLogSource> sources;
  for (const v1::RankStatus& rank : entry->job.ranks()) {
    const std::string address = membership_->Address(rank.worker_id());
    sources.push_back({rank.rank(), address.empty() ? rank.worker_address() : address});
  }
  return sources;
}

std::vector<v1::Worker> JobManager::ListWorkers() {
  std::vector<v1::Worker> workers = membership_->List();
  absl::MutexLock lock(&mu_);
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
  for (const LostWorker& lost : membership_->Expire()) OnWorkerLost(lost);
  const absl::Time now = clock_->Now();
  for (const std::string& id : job_order_) {
    JobEntry& entry = jobs_[id];
    if (!IsActive(entry.job.state())) continue;
    if (entry.ending && now >= entry.decide_at) {
      EndAttempt(entry);
      continue;
    }
    CheckTimeouts(entry, now);
    if (entry.job.state() == v1::RUNNING) CheckRegrowth(entry, now);
  }
  AdvanceRestarts(now);
  ScheduleLocked();
}

void JobManager::CheckTimeouts(JobEntry& entry, absl::Time now) {
  const v1::JobSpec& spec = entry.job.spec();
  if (entry.job.state() == v1::STARTING && spec.start_timeout_s() > 0 &&
      now - entry.watch.began() >= absl::Seconds(spec.start_timeout_s())) {
    std::vector<int> missing = entry.watch.NotStarted();
    NoteFailure(entry, {v1::RANK_START_TIMEOUT,
                        absl::StrCat(missing.size() == 1 ? "rank " : "ranks ",
                                     absl::StrJoin(missing, ", "), " did not report started within ",
                                     spec.start_timeout_s(), "s"),
                        missing.empty() ? -1 : missing[0]});
    return;
  }
  if (entry.job.state() != v1::RUNNING || spec.hang_timeout_s() <= 0) return;
  std::optional<ProgressWatch::Hang> hang =
      entry.watch.Hung(absl::Seconds(spec.hang_timeout_s()), now);
  if (!hang || hang->rank >= entry.job.ranks_size()) return;
  const std::string step =
      hang->last_step < 0 ? "no step reported" : absl::StrCat("last step ", hang->last_step);
  NoteFailure(entry,
              {v1::RANK_HUNG,
               absl::StrCat("rank ", hang->rank, " on worker ",
                            entry.job.ranks(hang->rank).worker_id(), " made no progress for ",
                            absl::FormatDuration(absl::Trunc(hang->idle, absl::Seconds(1))),
                            " (", step, ")"),
               hang->rank});
}

void JobManager::NoteFailure(JobEntry& entry, FailureCause cause) {
  cause.progressed = entry.watch.progressed();
  // A rank of this attempt on a worker that has gone explains its peers'
  // failures: they lost the peer.
  for (const v1::RankStatus& rank : entry.job.ranks()) {
    if (!RankHoldsSlot(rank) || membership_->Connected(rank.worker_id())) continue;
    FailureCause lost{v1::WORKER_LOST,
                      absl::StrCat("rank ", rank.rank(), " lost with worker ", rank.worker_id(),
                                   " (its stream broke); then ", cause.message),
                      rank.rank()};
    if (MoreTelling(lost, cause)) cause = lost;
    break;
  }
  if (!entry.ending) entry.decide_at = clock_->Now() + options_.failure_settle;
  if (!entry.ending || MoreTelling(cause, *entry.ending)) entry.ending = cause;
  const auto& ranks = entry.job.ranks();
  const bool others_run = std::any_of(ranks.begin(), ranks.end(), [&](const auto& r) {
    return RankHoldsSlot(r) && membership_->Connected(r.worker_id());
  });
  if (Decisive(*entry.ending) || !others_run) {
    EndAttempt(entry);
  } else {
    Persist(entry);
  }
}

void JobManager::EndAttempt(JobEntry& entry) {
  const FailureCause cause = *entry.ending;
  entry.ending.reset();
  v1::Job& job = entry.job;
  const bool repeat = entry.last_failure && RepeatsWithoutProgress(*entry.last_failure, cause);
  entry.last_failure = cause;
  if (!repeat && job.restarts() < job.spec().max_restarts()) {
    job.set_restarts(job.restarts() + 1);
    if (!Transition(entry, v1::RESTARTING, cause.reason, cause.message).ok()) {
      job.set_restarts(job.restarts() - 1);
      return;
    }
    const double unit = options_.random ? options_.random()
                                        : std::uniform_real_distribution<double>(0, 1)(rng_);
    entry.restart_at = clock_->Now() + RestartBackoff(options_.backoff, job.restarts() - 1, unit);
  } else {
    std::string why = cause.message;
    if (repeat) {
      absl::StrAppend(&why, ", the same failure as the attempt before, with no progress in "
                            "between: not restarting");
    } else if (job.spec().max_restarts() > 0) {
      absl::StrAppend(&why, " (after ", job.spec().max_restarts(), " restarts)");
    }
    if (!Transition(entry, v1::FAILED, cause.reason, why).ok()) return;
  }
  StopRanks(entry);
}

void JobManager::StopRanks(JobEntry& entry) {
  rendezvous_->DropScope({entry.job.id(), entry.job.attempt()});
  std::set<std::string> workers;
  for (const v1::RankStatus& rank : entry.job.ranks()) {
    if (RankHoldsSlot(rank)) workers.insert(rank.worker_id());
  }
  v1::CoordinatorMessage message;
  message.mutable_stop_job()->set_job_id(entry.job.id());
  message.mutable_stop_job()->set_attempt(entry.job.attempt());
  message.mutable_stop_job()->set_grace_ms(absl::ToInt64Milliseconds(options_.stop_grace));
  for (const std::string& worker_id : workers) membership_->Send(worker_id, message);
}

void JobManager::AdvanceRestarts(absl::Time now) {
  for (const std::string& id : job_order_) {
    JobEntry& entry = jobs_[id];
    if (entry.job.state() != v1::RESTARTING || now < entry.restart_at) continue;
    // Wait for the ranks being stopped, except those on a worker that has
    // gone: they are stopped when it comes back, and until then their
    // worker takes no ranks.
    const auto& ranks = entry.job.ranks();
    if (std::any_of(ranks.begin(), ranks.end(), [&](const v1::RankStatus& r) {
          return RankHoldsSlot(r) && membership_->Connected(r.worker_id());
        })) {
      continue;
    }
    const int next_attempt = entry.job.attempt() + 1;
    v1::Job before = entry.job;
    entry.job.set_attempt(next_attempt);
    entry.job.clear_ranks();
    if (!Transition(entry, v1::PENDING, v1::RESTART_BACKOFF_DONE,
                    absl::StrCat("attempt ", next_attempt, "; ", entry.job.restarts(), " of ",
                                 entry.job.spec().max_restarts(), " restarts used"))
             .ok()) {
      entry.job = std::move(before);
    }
  }
}

}  // namespace ringmaster
