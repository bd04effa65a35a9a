// JobManager: events from the workers' streams and lost workers.
#include <algorithm>
#include <set>
#include <tuple>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_state.h"

namespace ringmaster {
namespace {

FailureCause ExitCause(const v1::RankExited& exited, int rank) {
  FailureCause cause;
  cause.rank = rank;
  cause.exit_code = exited.exit_code();
  cause.signal = exited.signal();
  if (exited.start_failed()) {
    cause.reason = v1::RANK_START_FAILED;
    cause.message = absl::StrCat("rank ", rank, " could not start: ", exited.message());
  } else if (exited.oom_killed()) {
    cause.reason = v1::RANK_OOM;
    cause.message = absl::StrCat("rank ", rank, " was killed for exceeding its memory limit",
                                 exited.message().empty() ? "" : ": ", exited.message());
  } else if (exited.signal() != 0) {
    cause.reason = v1::RANK_SIGNALED;
    cause.message = absl::StrCat("rank ", rank, " was killed by signal ", exited.signal(),
                                 exited.message().empty() ? "" : ": ", exited.message());
  } else {
    cause.reason = exited.exit_code() == 0 ? v1::RANKS_SUCCEEDED : v1::RANK_EXITED;
    cause.message = absl::StrCat("rank ", rank, " exited with code ", exited.exit_code());
  }
  return cause;
}

}  // namespace

absl::StatusOr<WorkerSession> JobManager::RegisterWorker(WorkerLink* link,
                                                         const v1::RegisterWorker& request,
                                                         int64_t* ack) {
  absl::StatusOr<WorkerSession> session = membership_->Register(link, request);
  if (!session.ok()) return session;
  const std::string& worker_id = session->worker_id;
  spdlog::info("worker {} registered at {} with {} slots, {} GPUs (session {})", worker_id,
               request.address(), request.slots(), request.gpus_size(), session->epoch);
  v1::CoordinatorMessage hello;
  hello.mutable_registered()->set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(membership_->options().heartbeat_interval));
  hello.mutable_registered()->set_session(session->epoch);
  link->Send(hello);

  absl::MutexLock lock(&mu_);
  // First what happened while the worker was away, then what it runs now.
  *ack = 0;
  for (const v1::WorkerMessage& m : request.unacked()) {
    if (membership_->AcceptEvent(*session, m) == EventVerdict::kApply) {
      ApplyRankEvent(worker_id, m);
    }
    *ack = std::max(*ack, m.seq());
  }
  std::set<std::tuple<std::string, int, int>> running;
  for (const v1::RunningRank& r : request.running()) {
    running.insert({r.rank().job_id(), r.rank().attempt(), r.rank().rank()});
  }
  // Decide about every rank placed here before acting on any, so that no
  // job is placed on this worker while it is being reconciled.
  std::vector<std::pair<JobEntry*, int>> gone, resend;
  for (const std::string& id : job_order_) {
    JobEntry& entry = jobs_[id];
    for (const v1::RankStatus& rank : entry.job.ranks()) {
      if (rank.worker_id() != worker_id || !RankHoldsSlot(rank) ||
          running.count({id, entry.job.attempt(), rank.rank()})) {
        continue;
      }
      // Placed on this same worker process but unknown to it: the start
      // command was lost with a stream or a coordinator.
      const bool unsent = rank.state() == v1::RANK_ASSIGNED &&
                          rank.worker_incarnation() == session->incarnation &&
                          IsActive(entry.job.state());
      (unsent ? resend : gone).push_back({&entry, rank.rank()});
    }
  }
  for (auto [entry, rank] : resend) SendStart(*entry, rank);
  for (auto [entry, rank] : gone) {
    entry->job.mutable_ranks(rank)->set_state(v1::RANK_FAILED);
    OnRankEnded(*entry, rank,
                {v1::WORKER_LOST,
                 absl::StrCat("rank ", rank, " was gone when worker ", worker_id,
                              " registered again"),
                 rank});
  }
  StopStrays(worker_id, request.running());
  membership_->Admit(*session);
  ScheduleLocked();
  return session;
}

int64_t JobManager::OnRankEvent(const WorkerSession& session, const v1::WorkerMessage& message) {
  absl::MutexLock lock(&mu_);
  switch (membership_->AcceptEvent(session, message)) {
    case EventVerdict::kStale:
      return 0;
    case EventVerdict::kDuplicate:
      return message.seq();
    case EventVerdict::kApply:
      break;
  }
  ApplyRankEvent(session.worker_id, message);
  ScheduleLocked();  // an exit may have freed slots
  return message.seq();
}

bool JobManager::OnHeartbeat(const WorkerSession& session, const v1::Heartbeat& beat) {
  bool revived = false;
  if (!membership_->Heartbeat(session, beat, &revived)) return false;
  if (beat.progress_size() == 0 && beat.running_size() == 0 && !revived) return true;
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  for (const v1::RankProgress& p : beat.progress()) {
    JobEntry* entry = nullptr;
    if (FindRank(session.worker_id, p.rank(), &entry) == nullptr) continue;
    ApplyProgress(*entry, p.rank().rank(), p.progress());
    entry->watch.Step(p.rank().rank(), p.progress().step(), now);
    Notify(*entry);
  }
  for (const v1::RunningRank& r : beat.running()) {
    JobEntry* entry = nullptr;
    if (FindRank(session.worker_id, r.rank(), &entry) == nullptr) continue;
    entry->watch.Activity(r.rank().rank(), r.output_bytes(), r.progress_reports(), now);
  }
  StopStrays(session.worker_id, beat.running());
  if (revived) ScheduleLocked();  // its slots are back
  return true;
}

void JobManager::StopStrays(const std::string& worker_id,
                            const google::protobuf::RepeatedPtrField<v1::RunningRank>& running) {
  std::set<std::pair<std::string, int>> stop;  // job, attempt
  for (const v1::RunningRank& r : running) {
    JobEntry* entry = nullptr;
    const v1::RankStatus* rank = FindRank(worker_id, r.rank(), &entry);
    if (rank == nullptr || !RankHoldsSlot(*rank) || !IsActive(entry->job.state())) {
      stop.insert({r.rank().job_id(), r.rank().attempt()});
    }
  }
  for (const auto& [job_id, attempt] : stop) {
    v1::CoordinatorMessage message;
    message.mutable_stop_job()->set_job_id(job_id);
    message.mutable_stop_job()->set_attempt(attempt);
    message.mutable_stop_job()->set_grace_ms(absl::ToInt64Milliseconds(options_.stop_grace));
    membership_->Send(worker_id, message);
  }
}

void JobManager::ApplyRankEvent(const std::string& worker_id, const v1::WorkerMessage& message) {
  if (message.has_rank_started()) OnRankStarted(worker_id, message.rank_started());
  if (message.has_rank_exited()) OnRankExited(worker_id, message.rank_exited());
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

v1::RankStatus* JobManager::FindRank(const std::string& worker_id, const v1::RankRef& ref,
                                     JobEntry** entry) {
  JobEntry* found = FindJob(ref.job_id());
  if (found == nullptr || ref.attempt() != found->job.attempt() || ref.rank() < 0 ||
      ref.rank() >= found->job.ranks_size() ||
      found->job.ranks(ref.rank()).worker_id() != worker_id) {
    return nullptr;
  }
  *entry = found;
  return found->job.mutable_ranks(ref.rank());
}

void JobManager::OnRankStarted(const std::string& worker_id, const v1::RankStarted& started) {
  JobEntry* entry = nullptr;
  v1::RankStatus* rank = FindRank(worker_id, started.rank(), &entry);
  if (rank == nullptr || rank->state() != v1::RANK_ASSIGNED) return;
  rank->set_state(v1::RANK_RUNNING);
  rank->set_pid(started.pid());
  entry->watch.Started(rank->rank());
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

void JobManager::OnRankExited(const std::string& worker_id, const v1::RankExited& exited) {
  JobEntry* entry = nullptr;
  v1::RankStatus* rank = FindRank(worker_id, exited.rank(), &entry);
  if (rank == nullptr || !RankHoldsSlot(*rank)) return;
  rank->set_exit_code(exited.exit_code());
  rank->set_signal(exited.signal());
  if (exited.has_last_progress()) {
    ApplyProgress(*entry, exited.rank().rank(), exited.last_progress());
  }
  FailureCause cause = ExitCause(exited, exited.rank().rank());
  if (exited.stopped()) {
    rank->set_state(v1::RANK_STOPPED);
    cause = {v1::RANK_SIGNALED, absl::StrCat("rank ", cause.rank, " was stopped by its worker"),
             cause.rank, 0, exited.signal()};
  } else {
    rank->set_state(cause.reason == v1::RANKS_SUCCEEDED ? v1::RANK_SUCCEEDED : v1::RANK_FAILED);
  }
  OnRankEnded(*entry, exited.rank().rank(), cause);
}

void JobManager::OnRankEnded(JobEntry& entry, int rank, const FailureCause& cause) {
  const v1::Job& job = entry.job;
  if (!IsActive(job.state())) {
    Persist(entry);
    return;
  }
  const v1::RankState state = job.ranks(rank).state();
  if (state == v1::RANK_FAILED || state == v1::RANK_STOPPED) {
    NoteFailure(entry, cause);
    return;
  }
  const bool all_succeeded =
      std::all_of(job.ranks().begin(), job.ranks().end(),
                  [](const v1::RankStatus& r) { return r.state() == v1::RANK_SUCCEEDED; });
  if (!all_succeeded || entry.ending) {
    // A rank that succeeded while its attempt is failing changes nothing.
    if (entry.ending && std::none_of(job.ranks().begin(), job.ranks().end(), RankHoldsSlot)) {
      EndAttempt(entry);
    } else {
      Persist(entry);
    }
    return;
  }
  if (job.state() == v1::STARTING) {
    // Every rank started and exited before the last start was seen.
    Transition(entry, v1::RUNNING, v1::RANKS_RUNNING, "all ranks ran").IgnoreError();
  }
  if (Transition(entry, v1::SUCCEEDED, v1::RANKS_SUCCEEDED,
                 absl::StrCat("all ", job.ranks_size(), " ranks exited with code 0"))
          .ok()) {
    rendezvous_->DropScope({job.id(), job.attempt()});
  }
}

void JobManager::OnWorkerLost(const LostWorker& lost) {
  for (const std::string& id : job_order_) {
    JobEntry& entry = jobs_[id];
    for (int r = 0; r < entry.job.ranks_size(); ++r) {
      if (entry.job.ranks(r).worker_id() != lost.worker_id ||
          !RankHoldsSlot(entry.job.ranks(r))) {
        continue;
      }
      entry.job.mutable_ranks(r)->set_state(v1::RANK_FAILED);
      OnRankEnded(entry, r,
                  {v1::WORKER_LOST,
                   absl::StrCat("rank ", r, " lost with worker ", lost.worker_id, ": ", lost.why),
                   r});
    }
  }
}

}  // namespace ringmaster
