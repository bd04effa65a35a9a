// JobManager: events from the workers' Connect streams and lost workers.
#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_state.h"

namespace ringmaster {
namespace {

bool IsCurrentAttempt(const v1::Job& job, const v1::RankRef& ref) {
  return ref.attempt() == job.attempt() && ref.rank() >= 0 &&
         ref.rank() < job.ranks_size();
}

std::string ExitMessage(const v1::RankExited& exited, int rank,
                        v1::Reason* reason) {
  if (exited.start_failed()) {
    *reason = v1::RANK_START_FAILED;
    return absl::StrCat("rank ", rank, " could not start: ", exited.message());
  }
  if (exited.signal() != 0) {
    *reason = v1::RANK_SIGNALED;
    return absl::StrCat("rank ", rank, " was killed by signal ", exited.signal(),
                        exited.message().empty() ? "" : ": ", exited.message());
  }
  *reason = exited.exit_code() == 0 ? v1::RANKS_SUCCEEDED : v1::RANK_EXITED;
  return absl::StrCat("rank ", rank, " exited with code ", exited.exit_code());
}

}  // namespace

absl::Status JobManager::OnWorkerMessage(WorkerLink* link,
                                         const v1::WorkerMessage& message) {
  absl::MutexLock lock(&mu_);
  if (message.has_register_()) {
    OnRegister(link, message.register_());
    return absl::OkStatus();
  }
  auto it = link_workers_.find(link);
  if (it == link_workers_.end()) {
    return absl::FailedPreconditionError(
        "the first message on a worker stream must be register");
  }
  switch (message.kind_case()) {
    case v1::WorkerMessage::kHeartbeat:
      OnHeartbeat(it->second, message.heartbeat());
      break;
    case v1::WorkerMessage::kRankStarted:
      OnRankStarted(message.rank_started());
      break;
    case v1::WorkerMessage::kRankExited:
      OnRankExited(message.rank_exited());
      break;
    default:
      return absl::InvalidArgumentError("empty worker message");
  }
  return absl::OkStatus();
}

void JobManager::OnWorkerDisconnected(WorkerLink* link) {
  absl::MutexLock lock(&mu_);
  auto it = link_workers_.find(link);
  if (it == link_workers_.end()) return;
  spdlog::warn("worker {} disconnected", it->second);
  registry_.Disconnect(it->second, link);
  link_workers_.erase(it);
}

void JobManager::OnRegister(WorkerLink* link, const v1::RegisterWorker& request) {
  const std::string& worker_id = request.worker_id();
  registry_.Register(request, link);
  link_workers_[link] = worker_id;
  spdlog::info("worker {} registered at {} with {} slots, {} GPUs", worker_id,
               request.address(), request.slots(), request.gpus_size());

  v1::CoordinatorMessage hello;
  hello.mutable_registered()->set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(options_.heartbeat_interval));
  link->Send(hello);

  // Reconcile: ranks the worker still runs against ranks placed on it.
  std::set<std::pair<std::string, int>> reported;
  std::set<std::pair<std::string, int>> stop;  // job, attempt
  for (const v1::RankRef& ref : request.running()) {
    auto it = jobs_.find(ref.job_id());
    const v1::RankStatus* rank = nullptr;
    if (it != jobs_.end() && IsCurrentAttempt(it->second.job, ref)) {
      rank = &it->second.job.ranks(ref.rank());
    }
    if (rank != nullptr && RankHoldsSlot(*rank) && rank->worker_id() == worker_id) {
      reported.insert({ref.job_id(), ref.rank()});
      const v1::JobState state = it->second.job.state();
      // A stop sent while the worker was away may never have arrived.
      if (state != v1::STARTING && state != v1::RUNNING) {
        stop.insert({ref.job_id(), ref.attempt()});
      }
    } else {
      stop.insert({ref.job_id(), ref.attempt()});
    }
  }
  for (const auto& [job_id, attempt] : stop) {
    v1::CoordinatorMessage message;
    message.mutable_stop_job()->set_job_id(job_id);
    message.mutable_stop_job()->set_attempt(attempt);
    message.mutable_stop_job()->set_grace_ms(
        absl::ToInt64Milliseconds(options_.stop_grace));
    link->Send(message);
  }
  for (const std::string& id : job_order_) {
    JobEntry& entry = jobs_[id];
    for (int r = 0; r < entry.job.ranks_size(); ++r) {
      const v1::RankStatus& rank = entry.job.ranks(r);
      if (rank.worker_id() != worker_id || !RankHoldsSlot(rank) ||
          reported.count({id, r})) {
        continue;
      }
      entry.job.mutable_ranks(r)->set_state(v1::RANK_FAILED);
      OnRankEnded(entry, r, v1::WORKER_LOST,
                  absl::StrCat("rank ", r, " was gone when worker ", worker_id,
                               " registered again"));
    }
  }
  ScheduleLocked();
}

void JobManager::OnHeartbeat(const std::string& worker_id,
                             const v1::Heartbeat& beat) {
  if (!registry_.Heartbeat(worker_id, beat).ok()) return;
  for (const v1::RankProgress& p : beat.progress()) {
    auto it = jobs_.find(p.rank().job_id());
    if (it == jobs_.end() || !IsCurrentAttempt(it->second.job, p.rank())) continue;
    ApplyProgress(it->second, p.rank().rank(), p.progress());
    Notify(it->second);
  }
}

void JobManager::ApplyProgress(JobEntry& entry, int rank, const v1::Progress& progress) {
  entry.rank_progress[rank] = progress;
  // The job's progress is rank 0's, with throughput summed over ranks.
  v1::Progress total = entry.rank_progress.count(0) ? entry.rank_progress[0] : progress;
  double samples_per_second = 0;
  for (const auto& [r, p] : entry.rank_progress) samples_per_second += p.samples_per_second();
  total.set_samples_per_second(samples_per_second);
  *entry.job.mutable_progress() = total;
}

v1::RankStatus* JobManager::FindRank(const v1::RankRef& ref, JobEntry** entry) {
  auto it = jobs_.find(ref.job_id());
  if (it == jobs_.end() || !IsCurrentAttempt(it->second.job, ref)) return nullptr;
  *entry = &it->second;
  return it->second.job.mutable_ranks(ref.rank());
}

void JobManager::OnRankStarted(const v1::RankStarted& started) {
  JobEntry* entry = nullptr;
  v1::RankStatus* rank = FindRank(started.rank(), &entry);
  if (rank == nullptr || rank->state() != v1::RANK_ASSIGNED) return;
  rank->set_state(v1::RANK_RUNNING);
  rank->set_pid(started.pid());
  const auto& ranks = entry->job.ranks();
  const bool all_started = std::all_of(ranks.begin(), ranks.end(), [](const auto& r) {
    return r.state() != v1::RANK_ASSIGNED;
  });
  if (entry->job.state() == v1::STARTING && all_started) {
    Transition(*entry, v1::RUNNING, v1::RANKS_RUNNING,
               absl::StrCat("all ", ranks.size(), " ranks running"))
        .IgnoreError();  // logged; the job stays STARTING in memory
  } else {
    Persist(*entry);
  }
}

void JobManager::OnRankExited(const v1::RankExited& exited) {
  JobEntry* entry = nullptr;
  v1::RankStatus* rank = FindRank(exited.rank(), &entry);
  if (rank == nullptr || !RankHoldsSlot(*rank)) return;
  rank->set_exit_code(exited.exit_code());
  rank->set_signal(exited.signal());
  if (exited.has_last_progress()) {
    ApplyProgress(*entry, exited.rank().rank(), exited.last_progress());
  }
  v1::Reason reason;
  const std::string message = ExitMessage(exited, exited.rank().rank(), &reason);
  if (exited.stopped()) {
    rank->set_state(v1::RANK_STOPPED);
  } else if (reason == v1::RANKS_SUCCEEDED) {
    rank->set_state(v1::RANK_SUCCEEDED);
  } else {
    rank->set_state(v1::RANK_FAILED);
  }
  OnRankEnded(*entry, exited.rank().rank(), reason, message);
}

void JobManager::OnRankEnded(JobEntry& entry, int rank, v1::Reason reason,
                             const std::string& message) {
  const v1::Job& job = entry.job;
  const v1::RankState state = job.ranks(rank).state();
  const bool active = job.state() == v1::STARTING || job.state() == v1::RUNNING;
  if (active && state == v1::RANK_FAILED) {
    FailAttempt(entry, reason, message);
  } else if (active && state == v1::RANK_STOPPED) {
    FailAttempt(entry, v1::RANK_SIGNALED,
                absl::StrCat("rank ", rank, " was stopped by its worker"));
  } else if (active && std::all_of(job.ranks().begin(), job.ranks().end(),
                                   [](const v1::RankStatus& r) {
                                     return r.state() == v1::RANK_SUCCEEDED;
                                   })) {
    if (job.state() == v1::STARTING) {
      // Every rank started and exited before the last start was seen.
      Transition(entry, v1::RUNNING, v1::RANKS_RUNNING, "all ranks ran").IgnoreError();
    }
    if (Transition(entry, v1::SUCCEEDED, v1::RANKS_SUCCEEDED,
                   absl::StrCat("all ", job.ranks_size(), " ranks exited with code 0"))
            .ok()) {
      rendezvous_->DropScope({job.id(), job.attempt()});
    }
  } else {
    Persist(entry);
  }
  ScheduleLocked();  // a slot came free
}

void JobManager::OnWorkerLost(const std::string& worker_id, const std::string& why) {
  spdlog::warn("{}", why);
  for (const std::string& id : job_order_) {
    JobEntry& entry = jobs_[id];
    for (int r = 0; r < entry.job.ranks_size(); ++r) {
      if (entry.job.ranks(r).worker_id() != worker_id ||
          !RankHoldsSlot(entry.job.ranks(r))) {
        continue;
      }
      entry.job.mutable_ranks(r)->set_state(v1::RANK_FAILED);
      OnRankEnded(entry, r, v1::WORKER_LOST, absl::StrCat("rank ", r, " lost: ", why));
    }
  }
}

}  // namespace ringmaster
