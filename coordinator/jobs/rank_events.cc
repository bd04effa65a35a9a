// RankEvents: events from the workers' streams, their reports of what
// runs, and lost workers.
#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/core/reconcile.h"
#include "coordinator/jobs/rank_events.h"
#include "domain/job_state.h"

namespace ringmaster {

void RankEvents::Reconcile(const WorkerSession& session, const v1::RegisterWorker& request,
                           int64_t* ack) {
  const std::string& worker_id = session.worker_id;
  // First what happened while the worker was away, then what it runs now.
  *ack = 0;
  for (const v1::WorkerMessage& m : request.unacked()) {
    if (membership_->AcceptEvent(session, m) == EventVerdict::kApply) {
      Apply(worker_id, m);
    }
    *ack = std::max(*ack, m.seq());
  }
  // Decide about every rank placed here before acting on any, so that no
  // job is placed on this worker while it is being reconciled.
  std::vector<const v1::Job*> jobs;
  for (const auto& [number, record] : table_.resident()) jobs.push_back(&record->job);
  const Reconciliation plan =
      ReconcileWorker(jobs, FindJob(), worker_id, session.incarnation, request.running());
  for (const auto& [job_id, rank] : plan.resend) attempts_.SendStart(*table_.Find(job_id), rank);
  for (const auto& [job_id, rank] : plan.gone) {
    JobRecord& entry = *table_.Find(job_id);
    entry.job.mutable_ranks(rank)->set_state(v1::RANK_FAILED);
    OnRankEnded(
        entry, rank,
        {v1::WORKER_LOST,
         absl::StrCat("rank ", rank, " was gone when worker ", worker_id, " registered again"),
         rank});
  }
  for (const auto& [job_id, attempt] : plan.stop) {
    outbox_.Send(worker_id, StopMessage(job_id, attempt, options_.stop_grace));
  }
  for (const std::string& job_id : request.logs_of()) {
    if (table_.Find(job_id) != nullptr || table_.FindRetired(job_id) != nullptr) continue;
    v1::CoordinatorMessage forget;
    forget.mutable_delete_job_logs()->set_job_id(job_id);
    outbox_.Send(worker_id, std::move(forget));  // deleted while the worker was away
  }
  membership_->Admit(session);
}

void RankEvents::Heartbeat(const WorkerSession& session, const v1::Heartbeat& beat) {
  const absl::Time now = clock_->Now();
  std::set<JobRecord*> computed;  // jobs with ranks' compute times in this report
  for (const v1::RankProgress& p : beat.progress()) {
    JobRecord* entry = nullptr;
    const v1::RankStatus* rank = table_.FindRank(session.worker_id, p.rank(), &entry);
    // A rank that left its group (reported late by a worker back from a
    // broken stream) no longer speaks for the job.
    if (rank == nullptr || rank->left_generation() > 0) continue;
    entry->SetRankProgress(p.rank().rank(), p.progress());
    NoteResume(*entry, p.rank().rank(), p.progress());
    entry->watch.Step(p.rank().rank(), p.progress().step(), now);
    if (p.progress().compute_steps() > 0) {
      entry->stragglers.Report(p.rank().rank(), now, p.progress().compute_steps(),
                               p.progress().compute_seconds(), options_.stragglers);
      computed.insert(entry);
    }
    table_.Notify(*entry);
  }
  for (JobRecord* entry : computed) attempts_.UpdateStragglers(*entry, now);
  NoteSnapshots(session, beat);
  NotePulls(session, beat, now);
  for (const v1::RunningRank& r : beat.running()) {
    JobRecord* entry = nullptr;
    if (table_.FindRank(session.worker_id, r.rank(), &entry) == nullptr) continue;
    entry->watch.Activity(r.rank().rank(), r.output_bytes(), r.progress_reports(), now);
  }
  for (const auto& [job_id, attempt] :
       StrayAttempts(FindJob(), session.worker_id, beat.running())) {
    outbox_.Send(session.worker_id, StopMessage(job_id, attempt, options_.stop_grace));
  }
}

void RankEvents::CheckRanksReported(JobRecord& entry) {
  const v1::Job& job = entry.job;
  entry.sightings_checked = job.revision();  // a change made here is looked at again
  const std::vector<std::optional<WorkerMembership::Sighting>> sightings =
      membership_->Sightings(job);
  for (int r = 0; r < job.ranks_size(); ++r) {
    const v1::RankStatus& rank = job.ranks(r);
    const std::optional<WorkerMembership::Sighting>& seen = sightings[r];
    if (!seen || seen->running) {
      if (!entry.unseen.empty()) entry.unseen.erase(r);
      continue;
    }
    JobRecord::Unseen& unseen =
        entry.unseen.try_emplace(r, JobRecord::Unseen{seen->reports}).first->second;
    const int64_t missed = seen->reports - unseen.since + 1;
    if (missed >= kReportsBeforeLost) {
      const std::string worker = rank.worker_id();
      entry.unseen.erase(r);
      entry.job.mutable_ranks(r)->set_state(v1::RANK_FAILED);
      spdlog::warn("job {}: rank {} is lost: worker {} no longer runs it", job.id(), r, worker);
      OnRankEnded(entry, r,
                  {v1::RANK_LOST,
                   absl::StrCat("rank ", r, " no longer runs on worker ", worker,
                                " and its exit never arrived (", missed, " heartbeats without it)"),
                   r});
      return;  // the attempt may have ended; the next tick sees the rest
    }
    if (missed >= kReportsBeforeQuery && !unseen.queried) {
      unseen.queried = true;
      spdlog::warn("job {}: worker {} no longer lists rank {}: asking for its exit", job.id(),
                   rank.worker_id(), r);
      v1::CoordinatorMessage query;
      v1::RankRef& ref = *query.mutable_query_rank()->mutable_rank();
      ref.set_job_id(job.id());
      ref.set_attempt(job.attempt());
      ref.set_rank(r);
      outbox_.Send(rank.worker_id(), query);
    }
  }
}

JobLookup RankEvents::FindJob() {
  return [this](const std::string& id) ABSL_NO_THREAD_SAFETY_ANALYSIS -> const v1::Job* {
    const JobRecord* record = table_.Find(id);
    return record == nullptr ? nullptr : &record->job;
  };
}

void RankEvents::Apply(const std::string& worker_id, const v1::WorkerMessage& message) {
  if (message.has_rank_started()) OnRankStarted(worker_id, message.rank_started());
  if (message.has_rank_exited()) OnRankExited(worker_id, message.rank_exited());
  if (message.has_gpu_error()) health_.OnGpuError(worker_id, message.gpu_error());
  if (message.has_stacks_dumped()) attempts_.OnStacksDumped(worker_id, message.stacks_dumped());
}

void RankEvents::OnRankStarted(const std::string& worker_id, const v1::RankStarted& started) {
  JobRecord* entry = nullptr;
  v1::RankStatus* rank = table_.FindRank(worker_id, started.rank(), &entry);
  if (rank == nullptr || rank->state() != v1::RANK_ASSIGNED) return;
  if (started.generation() < rank->generation()) return;  // a replaced process's
  rank->set_state(v1::RANK_RUNNING);
  rank->set_pid(started.pid());
  entry->watch.Started(rank->rank());
  const auto& ranks = entry->job.ranks();
  const bool all_started = std::all_of(
      ranks.begin(), ranks.end(), [](const auto& r) { return r.state() != v1::RANK_ASSIGNED; });
  if (entry->job.state() == v1::STARTING && all_started) {
    table_
        .Transition(*entry, v1::RUNNING, v1::RANKS_RUNNING,
                    absl::StrCat("all ", ranks.size(), " ranks running"))
        .IgnoreError();  // logged; the job stays STARTING in memory
  } else {
    table_.Persist(*entry);
  }
}

void RankEvents::OnRankExited(const std::string& worker_id, const v1::RankExited& exited) {
  JobRecord* entry = nullptr;
  v1::RankStatus* rank = table_.FindRank(worker_id, exited.rank(), &entry);
  if (rank == nullptr || !RankHoldsSlot(*rank)) return;
  // A replaced process's exit, sent again (a coordinator restarted while
  // it was unacknowledged): not the replacement's.
  if (exited.generation() < rank->generation()) return;
  rank->set_exit_code(exited.exit_code());
  rank->set_signal(exited.signal());
  rank->set_never_retry(exited.start_failed() && exited.never_retry());
  if (exited.has_last_progress()) {
    entry->SetRankProgress(exited.rank().rank(), exited.last_progress());
  }
  FailureCause cause = CauseOfExit(exited, exited.rank().rank());
  if (exited.stopped()) {
    rank->set_state(v1::RANK_STOPPED);
    cause = {v1::RANK_SIGNALED, absl::StrCat("rank ", cause.rank, " was stopped by its worker"),
             cause.rank, 0, exited.signal()};
    cause.stopped = true;
  } else {
    rank->set_state(cause.reason == v1::RANKS_SUCCEEDED ? v1::RANK_SUCCEEDED : v1::RANK_FAILED);
  }
  OnRankEnded(*entry, exited.rank().rank(), cause);
}

void RankEvents::OnRankEnded(JobRecord& entry, int rank, const FailureCause& cause) {
  const v1::Job& job = entry.job;
  if (!IsActive(job.state())) {
    table_.Persist(entry);
    return;
  }
  const v1::RankState state = job.ranks(rank).state();
  if (state == v1::RANK_FAILED || state == v1::RANK_STOPPED) {
    if (state == v1::RANK_FAILED && (attempts_.ReplaceRank(entry, rank, cause) ||
                                     attempts_.ShrinkGroup(entry, {rank}, cause))) {
      return;
    }
    attempts_.NoteFailure(entry, cause);
    return;
  }
  // Those that left the group (an elastic job shrank) end without it.
  const bool all_succeeded =
      std::all_of(job.ranks().begin(), job.ranks().end(), [](const v1::RankStatus& r) {
        return r.state() == v1::RANK_SUCCEEDED || r.left_generation() > 0;
      });
  if (!all_succeeded || entry.ending) {
    // A rank that succeeded while its attempt is failing changes nothing.
    if (entry.ending && std::none_of(job.ranks().begin(), job.ranks().end(), RankHoldsSlot)) {
      attempts_.End(entry);
    } else {
      table_.Persist(entry);
    }
    return;
  }
  if (job.state() == v1::STARTING) {
    // Every rank started and exited before the last start was seen.
    table_.Transition(entry, v1::RUNNING, v1::RANKS_RUNNING, "all ranks ran").IgnoreError();
  }
  if (table_
          .Transition(entry, v1::SUCCEEDED, v1::RANKS_SUCCEEDED,
                      absl::StrCat("all ", GroupMembers(job).size(), " ranks exited with code 0"))
          .ok()) {
    rendezvous_->DropScope({job.id(), job.attempt()});
  }
}

void RankEvents::OnWorkerLost(const LostWorker& lost) {
  for (const auto& [number, record] : table_.resident()) {
    JobRecord& entry = *record;
    std::vector<int> there;
    for (int r = 0; r < entry.job.ranks_size(); ++r) {
      const v1::RankStatus& rank = entry.job.ranks(r);
      if (rank.worker_id() == lost.worker_id && RankHoldsSlot(rank)) there.push_back(r);
    }
    if (there.empty()) continue;
    // An elastic job goes on without all of them at once.
    if (attempts_.ShrinkGroup(
            entry, there,
            {v1::WORKER_LOST, absl::StrCat("worker ", lost.worker_id, " lost: ", lost.why),
             there.front()})) {
      continue;
    }
    for (int r : there) {
      if (!RankHoldsSlot(entry.job.ranks(r))) continue;
      entry.job.mutable_ranks(r)->set_state(v1::RANK_FAILED);
      OnRankEnded(
          entry, r,
          {v1::WORKER_LOST,
           absl::StrCat("rank ", r, " lost with worker ", lost.worker_id, ": ", lost.why), r});
    }
  }
  // What it held in memory is out of reach, maybe gone; a worker that comes
  // back says again what it holds.
  ReportSnapshots(lost.worker_id, {});
}

namespace {

// "340.0 MiB", "1.2 GiB".
std::string Size(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return absl::StrFormat("%.1f GiB", bytes / 1073741824.0);
  return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
}

}  // namespace

void RankEvents::NotePulls(const WorkerSession& session, const v1::Heartbeat& beat,
                           absl::Time now) {
  for (const v1::ImagePull& pull : beat.pulls()) {
    JobRecord* entry = nullptr;
    if (table_.FindRank(session.worker_id, pull.rank(), &entry) == nullptr) continue;
    if (entry->job.state() != v1::STARTING) continue;
    // A pull that moves is start-up, and so is a wait for a registry the
    // worker cannot reach and tries again (as Kubernetes' ImagePullBackOff
    // holds a pod); a pull that stands still (a registry that stopped
    // answering mid-pull, a wait for a pull slot) is not, and meets the
    // start timeout.
    auto [bytes, first] = entry->pulled_bytes.emplace(session.worker_id, pull.done_bytes());
    if (first || pull.done_bytes() != bytes->second || !pull.waiting().empty()) {
      entry->pulled_at = now;  // moved (a pull begun again starts from 0)
    }
    bytes->second = pull.done_bytes();
    std::string said = absl::StrCat("pulling ", pull.image(), ": ", Size(pull.done_bytes()));
    if (pull.total_bytes() > 0) absl::StrAppend(&said, " of ", Size(pull.total_bytes()));
    if (!pull.waiting().empty())
      said = absl::StrCat("pulling ", pull.image(), ": ", pull.waiting());
    if (said == entry->job.pulling()) continue;
    entry->job.set_pulling(said);
    table_.Notify(*entry);
  }
}

}  // namespace ringmaster
