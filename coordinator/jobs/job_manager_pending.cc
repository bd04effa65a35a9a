// JobManager: what an owner changes of a job between its runs: a pending
// job held, released or given another priority, and an ended job requeued.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/core/attempt_placement.h"
#include "coordinator/jobs/job_manager.h"
#include "domain/job_state.h"
#include "domain/queue_config.h"

namespace ringmaster {

absl::StatusOr<v1::Job> JobManager::ChangePending(
    const std::string& job_id, absl::string_view act,
    const std::function<absl::StatusOr<PendingChange>(v1::Job&, const QueueConfig&)>& change) {
  v1::Job changed;
  {
    MutexLock lock(&mu_);
    JobRecord* entry = table_.Find(job_id);
    const RetiredJob* retired = entry == nullptr ? table_.FindRetired(job_id) : nullptr;
    if (entry == nullptr && retired == nullptr) {
      return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
    }
    const v1::JobState state = entry != nullptr ? entry->job.state() : retired->state;
    if (state != v1::PENDING) {  // a retired job has ended
      return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is ", StateName(state),
                                                        "; only a PENDING job can be ", act));
    }
    const v1::Job before = entry->job;
    absl::StatusOr<PendingChange> note = change(entry->job, scheduling_.queues());
    if (!note.ok()) {
      entry->job = before;
      return note.status();
    }
    if (note->reason == v1::REASON_UNSPECIFIED) return entry->job;  // nothing to change
    if (absl::Status s = table_.Note(*entry, note->reason, note->message); !s.ok()) {
      entry->job = before;
      return s;
    }
    table_.Refile(*entry);
    changed = entry->job;
  }
  outbox_.Flush();
  return changed;
}

absl::StatusOr<v1::Job> JobManager::Hold(const std::string& job_id, const std::string& by) {
  return ChangePending(
      job_id, "held", [&](v1::Job& job, const QueueConfig&) -> absl::StatusOr<PendingChange> {
        if (!job.held_by().empty()) return PendingChange{};
        job.set_held_by(by);
        job.set_pending_reason(
            absl::StrCat("held by ", by, "; `ringmaster release ", job.id(), "` lets it run"));
        return PendingChange{v1::HELD, absl::StrCat("held by ", by)};
      });
}

absl::StatusOr<v1::Job> JobManager::Release(const std::string& job_id, const std::string& by) {
  return ChangePending(
      job_id, "released", [&](v1::Job& job, const QueueConfig&) -> absl::StatusOr<PendingChange> {
        if (job.held_by().empty()) return PendingChange{};
        const std::string held_by = job.held_by();
        job.clear_held_by();
        job.clear_pending_reason();
        return PendingChange{v1::RELEASED,
                             absl::StrCat("released by ", by, " (held by ", held_by, ")")};
      });
}

absl::StatusOr<v1::Job> JobManager::SetPriority(const std::string& job_id,
                                                const std::string& priority,
                                                const std::string& by) {
  return ChangePending(
      job_id, "given another priority",
      [&](v1::Job& job, const QueueConfig& queues) -> absl::StatusOr<PendingChange> {
        v1::JobSpec spec = job.spec();
        const std::string was = spec.priority().empty() ? "normal" : spec.priority();
        spec.set_priority(priority);
        // As at submit, for who asks: a class the queue lets a user name,
        // or any priority for the admin.
        ASSIGN_OR_RETURN(QueueAdmission admission, AdmitToQueue(queues, spec, by));
        const int before = job.priority();
        *job.mutable_spec() = std::move(spec);
        job.set_priority(admission.priority);
        return PendingChange{v1::PRIORITY_CHANGED,
                             absl::StrCat("priority ", was, " (", before, ") -> ",
                                          priority.empty() ? "normal" : priority, " (",
                                          admission.priority, ") by ", by)};
      });
}

absl::StatusOr<v1::Job> JobManager::Requeue(const std::string& job_id, const std::string& by) {
  v1::Job requeued;
  {
    MutexLock lock(&mu_);
    JobRecord* entry = table_.Find(job_id);
    if (entry == nullptr) {
      if (table_.FindRetired(job_id) == nullptr) {
        return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
      }
      ASSIGN_OR_RETURN(v1::Job stored, store_->Load(job_id));
      ASSIGN_OR_RETURN(entry, table_.Revive(std::move(stored)));
    }
    v1::Job& job = entry->job;
    if (!IsTerminal(job.state())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job_id, " is ", StateName(job.state()), "; only an ended job is requeued"));
    }
    if (HoldsSlots(job)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job_id, "'s ranks are still being stopped; requeue it once they are"));
    }
    // Its queue and class as at submit: either may be gone since.
    ASSIGN_OR_RETURN(QueueAdmission admission,
                     AdmitToQueue(scheduling_.queues(), job.spec(), job.owner()));
    RETURN_IF_ERROR(CheckPendingLimitsLocked(job.owner(), admission.queue));
    const v1::Job before = job;
    const v1::JobState ended = job.state();
    KeepPastAttempt(&job);
    job.set_attempt(job.attempt() + 1);
    job.clear_ranks();
    job.set_world_size(0);
    job.set_priority(admission.priority);
    job.set_restarts(0);
    job.set_restart_backoff_level(0);
    job.set_group_generation(0);
    job.clear_regroup_since_unix_ms();
    job.clear_root_cause();
    job.clear_held_by();
    if (absl::Status s = table_.Transition(
            *entry, v1::PENDING, v1::REQUEUED,
            absl::StrCat("requeued by ", by, " after it ended ", StateName(ended), ": attempt ",
                         job.attempt(), ", resuming from its checkpoints"));
        !s.ok()) {
      entry->job = before;
      return s;
    }
    requeued = entry->job;
  }
  outbox_.Flush();
  return requeued;
}

}  // namespace ringmaster
