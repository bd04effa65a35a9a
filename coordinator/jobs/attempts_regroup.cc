// Attempts: a failed rank replaced alone, the others keeping their
// processes (docs/checkpoints.md).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "coordinator/core/goodput.h"
#include "coordinator/jobs/attempts.h"
#include "domain/group_generation.h"
#include "domain/job_state.h"

namespace ringmaster {

bool Attempts::ReplaceRank(JobRecord& entry, int rank, const FailureCause& cause) {
  v1::Job& job = entry.job;
  const v1::TrainerSpec& trainer = job.spec().trainer();
  const bool snapshots = !trainer.has_snapshot_every_steps() || trainer.snapshot_every_steps() > 0;
  if (options_.rank_env.regroup_timeout <= absl::ZeroDuration() || job.state() != v1::RUNNING ||
      !job.spec().has_trainer() || !snapshots || !job.snapshots().off().empty() || entry.ending ||
      job.regroup_since_unix_ms() != 0 || cause.stopped || !RestartRefusal(job).empty() ||
      job.restarts() >= job.spec().max_restarts()) {
    return false;
  }
  const v1::RankStatus before = job.ranks(rank);
  if (!PlaceReplacement(entry, rank, cause)) return false;
  const int generation = job.group_generation() + 1;
  // Announced before the replacement starts: the survivors wait for it.
  if (absl::Status s = rendezvous_->Set({job.id(), job.attempt()}, GroupKey(generation),
                                        absl::StrCat(job.world_size()));
      !s.ok()) {
    spdlog::warn("job {}: cannot announce group {}: {}", job.id(), generation, s.ToString());
    *job.mutable_ranks(rank) = before;
    return false;
  }
  NoteInterrupted(entry);
  job.set_group_generation(generation);
  const absl::Time now = clock_->Now();
  job.set_regroup_since_unix_ms(absl::ToUnixMillis(now));
  job.set_restarts(job.restarts() + 1);
  SetRootCause(&job, cause);
  entry.rank_progress.erase(rank);
  entry.unseen.erase(rank);
  GoodputOnTransition(&job, v1::RESTARTING, cause.reason, now);
  const std::string& worker = job.ranks(rank).worker_id();
  const std::string where =
      worker == before.worker_id()
          ? absl::StrCat("on its worker ", worker)
          : absl::StrCat("on worker ", worker, " (", before.worker_id(), " is gone)");
  const int kept = job.world_size() - 1;
  table_
      .Note(entry, v1::RANK_REPLACED,
            absl::StrCat(cause.message, ": rank ", rank, " started again alone ", where, "; ", kept,
                         kept == 1 ? " rank keeps its process" : " ranks keep theirs", " (group ",
                         generation, " of attempt ", job.attempt(), "; ", job.restarts(), " of ",
                         job.spec().max_restarts(), " restarts used)"))
      .IgnoreError();  // logged; the regroup goes on
  SendStart(entry, rank);
  return true;
}

bool Attempts::PlaceReplacement(JobRecord& entry, int rank, const FailureCause& cause) {
  v1::Job& job = entry.job;
  v1::RankStatus& status = *job.mutable_ranks(rank);
  const bool lost = cause.reason == v1::WORKER_LOST || cause.reason == v1::RANK_LOST ||
                    !membership_->Connected(status.worker_id());
  if (!lost) {
    // Its slot was never given up: the same slot and GPUs.
    status.set_state(v1::RANK_ASSIGNED);
  } else {
    GangRequest request = GangOf(job.spec());
    request.ranks = 1;
    request.min_ranks = 0;
    request.ranks_per_worker = 0;
    request.avoid.push_back(status.worker_id());
    for (const v1::ExcludedWorker& e : job.excluded_workers()) {
      request.avoid.push_back(e.worker_id());
    }
    const std::vector<SchedulableWorker> workers = health_.Schedulable();
    absl::StatusOr<std::vector<RankPlacement>> placed =
        PlaceGang(scheduling_.Capacity(table_, workers), request);
    if (!placed.ok()) return false;
    const RankPlacement& p = placed->front();
    const auto w = std::find_if(workers.begin(), workers.end(), [&](const SchedulableWorker& s) {
      return s.worker_id == p.worker_id;
    });
    if (w == workers.end()) return false;
    status.set_worker_id(p.worker_id);
    status.set_worker_address(membership_->Address(p.worker_id));
    status.set_worker_incarnation(w->incarnation);
    status.set_slot(p.slots[0]);
    status.clear_gpus();
    if (job.spec().gpus_per_rank() > 0 && !w->gpu_indices.empty()) {
      for (int slot : p.slots) status.add_gpus(w->gpu_indices[slot]);
    }
    status.set_state(v1::RANK_ASSIGNED);
    if (std::find(job.ran_on().begin(), job.ran_on().end(), p.worker_id) == job.ran_on().end()) {
      job.add_ran_on(p.worker_id);
    }
  }
  status.set_pid(0);
  status.set_exit_code(0);
  status.set_signal(0);
  return true;
}

void Attempts::OnGroupReport(JobRecord& entry, const v1::Progress& progress) {
  v1::Job& job = entry.job;
  if (job.regroup_since_unix_ms() == 0 || progress.group_generation() != job.group_generation()) {
    return;
  }
  job.clear_regroup_since_unix_ms();
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
