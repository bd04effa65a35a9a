// Attempts: failing and restarting: deadlines, start timeouts
// and hangs, the most telling cause of a failure, restart or give up, and
// the back-off back to PENDING.
#include "coordinator/jobs/attempts.h"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/core/attempt_placement.h"
#include "domain/job_state.h"

namespace ringmaster {

Attempts::Attempts(Shared shared, WorkerMembership* membership, RendezvousStore* rendezvous,
                   const Clock* clock, const JobManagerOptions& options)
    : table_(shared.table),
      outbox_(shared.outbox),
      scheduling_(shared.scheduling),
      health_(shared.health),
      replies_(shared.replies),
      membership_(membership),
      rendezvous_(rendezvous),
      clock_(clock),
      options_(options),
      rng_(std::random_device{}()) {}

bool Attempts::CheckDeadline(JobRecord& entry, absl::Time now) {
  const v1::Job& job = entry.job;
  if (job.spec().deadline_s() <= 0 || IsTerminal(job.state())) return false;
  const std::optional<absl::Time> began = FirstStart(job);
  const absl::Duration deadline = absl::Seconds(job.spec().deadline_s());
  if (!began || now - *began < deadline) return false;
  const std::string why =
      absl::StrCat(StateName(job.state()), " at its deadline: ", job.spec().deadline_s(),
                   "s since its ranks first started (deadline_s)");
  if (!table_.Transition(entry, v1::FAILED, v1::DEADLINE_EXCEEDED, why).ok()) return false;
  entry.ending.reset();
  StopRanks(entry);
  return true;
}

void Attempts::CheckTimeouts(JobRecord& entry, absl::Time now) {
  const v1::JobSpec& spec = entry.job.spec();
  // Pulling an image is starting, not failing to: the timeout counts from
  // the last pull reported.
  if (entry.job.state() == v1::STARTING && spec.start_timeout_s() > 0 &&
      now - std::max(entry.watch.began(), entry.pulled_at) >=
          absl::Seconds(spec.start_timeout_s())) {
    std::vector<int> missing = entry.watch.NotStarted();
    NoteFailure(
        entry, {v1::RANK_START_TIMEOUT,
                absl::StrCat(missing.size() == 1 ? "rank " : "ranks ", absl::StrJoin(missing, ", "),
                             " did not report started within ", spec.start_timeout_s(), "s"),
                missing.empty() ? -1 : missing[0]});
    return;
  }
  // While the group forms again its ranks make no progress: the regroup's
  // own deadline stands in for the hang timeout.
  if (entry.job.regroup_since_unix_ms() != 0) {
    CheckRegroup(entry, now);
    return;
  }
  if (entry.job.state() != v1::RUNNING || spec.hang_timeout_s() <= 0) return;
  std::optional<ProgressWatch::Hang> hang =
      entry.watch.Hung(absl::Seconds(spec.hang_timeout_s()), now);
  if (!hang || hang->rank >= entry.job.ranks_size()) return;
  if (entry.stacks_request && entry.stacks_request->hang) return;  // its stacks are coming
  const std::string step =
      hang->last_step < 0 ? "no step reported" : absl::StrCat("last step ", hang->last_step);
  FailureCause cause{v1::RANK_HUNG,
                     absl::StrCat("rank ", hang->rank, " on worker ",
                                  entry.job.ranks(hang->rank).worker_id(), " made no progress for ",
                                  absl::FormatDuration(absl::Trunc(hang->idle, absl::Seconds(1))),
                                  " (", step, ")"),
                     hang->rank};
  // Every rank's stacks first, before anything is stopped.
  const std::string why = absl::StrCat("declared hung: ", cause.message);
  RequestStacks(entry, why, std::move(cause));
}

void Attempts::NoteFailure(JobRecord& entry, FailureCause cause) {
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
  if (!entry.ending) {
    entry.decide_at = clock_->Now() + options_.failure_settle;
    NoteInterrupted(entry);
  }
  if (!entry.ending || MoreTelling(cause, *entry.ending)) entry.ending = cause;
  const auto& ranks = entry.job.ranks();
  const bool others_run = std::any_of(ranks.begin(), ranks.end(), [&](const auto& r) {
    return RankHoldsSlot(r) && membership_->Connected(r.worker_id());
  });
  if (Decisive(*entry.ending) || !others_run) {
    End(entry);
  } else {
    table_.Persist(entry);
  }
}

void Attempts::End(JobRecord& entry) {
  FailureCause cause = *entry.ending;
  entry.ending.reset();
  // A failure that moves the job off its worker is worth another attempt,
  // even the same failure again.
  const bool moves = health_.Blame(entry, cause);
  v1::Job& job = entry.job;
  const bool repeat =
      !moves && entry.last_failure && RepeatsWithoutProgress(*entry.last_failure, cause);
  entry.last_failure = cause;
  SetRootCause(&job, cause);
  if (job.regroup_since_unix_ms() != 0) {
    // The regroup that failed already counted this failure's restart.
    job.set_restarts(std::max(0, job.restarts() - 1));
    job.clear_regroup_since_unix_ms();
  }
  const std::string refused = RestartRefusal(job);
  if (refused.empty() && !repeat && job.restarts() < job.spec().max_restarts()) {
    job.set_restarts(job.restarts() + 1);
    if (!table_.Transition(entry, v1::RESTARTING, cause.reason, cause.message).ok()) {
      job.set_restarts(job.restarts() - 1);
      return;
    }
    const double unit =
        options_.random ? options_.random() : std::uniform_real_distribution<double>(0, 1)(rng_);
    // An attempt that ran well (as a pod that ran 10 minutes, for the
    // kubelet) ends the crash loop: its restart waits the base again.
    const bool ran_well =
        cause.progressed && clock_->Now() - entry.watch.began() >= 10 * options_.backoff.base;
    const int level = ran_well ? 0 : job.restart_backoff_level();
    job.set_restart_backoff_level(level + 1);
    entry.restart_at = clock_->Now() + RestartBackoff(options_.backoff, level, unit);
  } else {
    std::string why = cause.message;
    if (!refused.empty()) {
      absl::StrAppend(&why, ": not restarting (", refused, ")");
    } else if (repeat) {
      absl::StrAppend(&why,
                      ", the same failure as the attempt before, with no progress in "
                      "between: not restarting");
    } else if (job.spec().max_restarts() > 0) {
      absl::StrAppend(&why, " (after ", job.spec().max_restarts(), " restarts)");
    }
    if (!table_.Transition(entry, v1::FAILED, cause.reason, why).ok()) return;
  }
  StopRanks(entry);
}

void SetRootCause(v1::Job* job, const FailureCause& cause) {
  v1::Failure* root = job->mutable_root_cause();
  root->set_attempt(job->attempt());
  root->set_reason(cause.reason);
  root->set_rank(cause.rank);
  root->set_worker_id(
      cause.rank >= 0 && cause.rank < job->ranks_size() ? job->ranks(cause.rank).worker_id() : "");
  root->set_exit_code(cause.exit_code);
  root->set_signal(cause.signal);
  root->set_error(cause.error);
  root->set_message(cause.message);
}

void Attempts::NoteInterrupted(JobRecord& entry) {
  const v1::Job& job = entry.job;
  // The first failure of the attempt's group counts.
  if (entry.interrupted.attempt == job.attempt() &&
      entry.interrupted.generation == job.group_generation()) {
    return;
  }
  entry.interrupted.attempt = job.attempt();
  entry.interrupted.generation = job.group_generation();
  entry.interrupted.at = clock_->Now();
  entry.interrupted.reached = std::max(job.progress().step(), job.snapshots().newest_step());
}

void Attempts::StopRanks(JobRecord& entry, std::optional<absl::Duration> grace) {
  NoteInterrupted(entry);
  // Stacks still coming are of an attempt that is over: those waiting get
  // what came.
  if (entry.stacks_request) FinishStacks(entry);
  rendezvous_->DropScope({entry.job.id(), entry.job.attempt()});
  std::set<std::string> workers;
  for (const v1::RankStatus& rank : entry.job.ranks()) {
    if (RankHoldsSlot(rank)) workers.insert(rank.worker_id());
  }
  const v1::CoordinatorMessage message =
      StopMessage(entry.job.id(), entry.job.attempt(), grace.value_or(options_.stop_grace));
  for (const std::string& worker_id : workers) Send(worker_id, message);
}

v1::CoordinatorMessage StopMessage(const std::string& job_id, int attempt, absl::Duration grace) {
  v1::CoordinatorMessage message;
  message.mutable_stop_job()->set_job_id(job_id);
  message.mutable_stop_job()->set_attempt(attempt);
  message.mutable_stop_job()->set_grace_ms(absl::ToInt64Milliseconds(grace));
  return message;
}

void Attempts::AdvanceRestarts(absl::Time now) {
  // Each job due goes back to PENDING, out of placed(): they are found first.
  std::vector<JobRecord*> due;
  for (const auto& [number, record] : table_.placed()) {
    if (record->job.state() == v1::RESTARTING && now >= record->restart_at) due.push_back(record);
  }
  for (JobRecord* record : due) {
    JobRecord& entry = *record;
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
    KeepPastAttempt(&entry.job);
    entry.job.set_attempt(next_attempt);
    entry.job.clear_ranks();
    if (!table_
             .Transition(entry, v1::PENDING, v1::RESTART_BACKOFF_DONE,
                         absl::StrCat("attempt ", next_attempt, "; ", entry.job.restarts(), " of ",
                                      entry.job.spec().max_restarts(), " restarts used"))
             .ok()) {
      entry.job = std::move(before);
    }
  }
}

}  // namespace ringmaster
