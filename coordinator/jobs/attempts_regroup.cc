// Attempts: a failed rank replaced alone, the others keeping their
// processes (docs/checkpoints.md).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "coordinator/core/goodput.h"
#include "coordinator/core/rank_env.h"
#include "coordinator/jobs/attempts.h"
#include "domain/group_generation.h"
#include "domain/job_state.h"

namespace ringmaster {

bool Attempts::MayKeepSlot(const v1::Job& job, const std::string& worker_id) {
  for (const v1::ExcludedWorker& e : job.excluded_workers()) {
    if (e.worker_id() == worker_id) return false;
  }
  // Cordoned (an XID, a quarantine, an admin), it takes no rank again.
  const std::vector<SchedulableWorker> open = health_.Schedulable();
  return std::any_of(open.begin(), open.end(),
                     [&](const SchedulableWorker& w) { return w.worker_id == worker_id; });
}

absl::Status Attempts::AnnounceGroup(const v1::Job& job, int generation) {
  return rendezvous_->Set({job.id(), job.attempt()}, GroupKey(generation),
                          absl::StrCat(job.world_size()));
}

bool Attempts::ReplaceRank(JobRecord& entry, int rank, const FailureCause& cause) {
  v1::Job& job = entry.job;
  v1::RankStatus& status = *job.mutable_ranks(rank);
  // Only a rank whose process its worker saw end: a rank of a lost worker
  // may still run (a partition), and only a restart of every rank fences
  // it out.
  const bool exited = cause.reason == v1::RANK_EXITED || cause.reason == v1::RANK_SIGNALED ||
                      cause.reason == v1::RANK_OOM;
  if (options_.rank_env.regroup_timeout <= absl::ZeroDuration() || job.state() != v1::RUNNING ||
      !job.spec().has_trainer() || !TakesSnapshots(job.spec().trainer()) ||
      !job.snapshots().off().empty() || entry.ending || job.regroup_since_unix_ms() != 0 ||
      !exited || cause.stopped || !membership_->Connected(status.worker_id()) ||
      !RestartRefusal(job).empty() || job.restarts() >= job.spec().max_restarts() ||
      !MayKeepSlot(job, status.worker_id())) {
    return false;
  }
  const int generation = job.group_generation() + 1;
  // Announced before the replacement starts: the others wait for it.
  if (absl::Status s = AnnounceGroup(job, generation); !s.ok()) {
    spdlog::warn("job {}: cannot announce group {}: {}", job.id(), generation, s.ToString());
    return false;
  }
  NoteInterrupted(entry);
  // Its slot was never given up: the same slot and GPUs.
  status.set_state(v1::RANK_ASSIGNED);
  status.set_generation(generation);
  status.set_pid(0);
  status.set_exit_code(0);
  status.set_signal(0);
  job.set_group_generation(generation);
  const absl::Time now = clock_->Now();
  job.set_regroup_since_unix_ms(absl::ToUnixMillis(now));
  job.set_restarts(job.restarts() + 1);
  SetRootCause(&job, cause);
  entry.rank_progress.erase(rank);
  entry.unseen.erase(rank);
  GoodputOnTransition(&job, v1::RESTARTING, cause.reason, now);
  const int kept = job.world_size() - 1;
  table_
      .Note(entry, v1::RANK_REPLACED,
            absl::StrCat(cause.message, ": rank ", rank, " started again alone on its worker ",
                         status.worker_id(), "; ", kept,
                         kept == 1 ? " rank keeps its process" : " ranks keep theirs", " (group ",
                         generation, " of attempt ", job.attempt(), "; ", job.restarts(), " of ",
                         job.spec().max_restarts(), " restarts used)"))
      .IgnoreError();  // logged; the regroup goes on
  SendStart(entry, rank);
  return true;
}

void Attempts::OnGroupReport(JobRecord& entry, const v1::Progress& progress) {
  v1::Job& job = entry.job;
  if (job.regroup_since_unix_ms() == 0 || progress.group_generation() != job.group_generation()) {
    return;
  }
  job.clear_regroup_since_unix_ms();
  entry.watch.Regrouped(clock_->Now());
  table_.Persist(entry);
}

void Attempts::CheckRegroup(JobRecord& entry, absl::Time now) {
  const v1::Job& job = entry.job;
  if (job.regroup_since_unix_ms() == 0 || entry.ending) return;
  const absl::Duration timeout = options_.rank_env.regroup_timeout;
  if (now - absl::FromUnixMillis(job.regroup_since_unix_ms()) < timeout) return;
  FailureCause cause{v1::RANK_REPLACED,
                     absl::StrCat("group ", job.group_generation(), " did not form within ",
                                  absl::FormatDuration(timeout),
                                  " of a rank's replacement (--regroup-timeout): restarting "
                                  "every rank"),
                     job.root_cause().rank()};
  NoteFailure(entry, cause);
}

}  // namespace ringmaster
