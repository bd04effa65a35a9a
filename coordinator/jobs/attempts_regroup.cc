// Attempts: a failed rank replaced alone, or an elastic job going on
// without it, the others keeping their processes (docs/checkpoints.md).
#include <algorithm>
#include <set>
#include <string>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
                          GroupValue(GroupMembers(job)));
}

bool Attempts::MayRegroup(const JobRecord& entry) {
  const v1::Job& job = entry.job;
  return options_.rank_env.regroup_timeout > absl::ZeroDuration() && job.state() == v1::RUNNING &&
         job.spec().has_trainer() && TakesSnapshots(job.spec().trainer()) &&
         job.snapshots().off().empty() && !entry.ending && job.regroup_since_unix_ms() == 0 &&
         RestartRefusal(job).empty() && job.restarts() < job.spec().max_restarts();
}

void Attempts::BeginRegroup(JobRecord& entry, int generation, const FailureCause& cause) {
  v1::Job& job = entry.job;
  NoteInterrupted(entry);  // in the group before
  job.set_group_generation(generation);
  const absl::Time now = clock_->Now();
  job.set_regroup_since_unix_ms(absl::ToUnixMillis(now));
  job.set_restarts(job.restarts() + 1);
  SetRootCause(&job, cause);
  GoodputOnTransition(&job, v1::RESTARTING, cause.reason, now);
}

bool Attempts::ReplaceRank(JobRecord& entry, int rank, const FailureCause& cause) {
  v1::Job& job = entry.job;
  v1::RankStatus& status = *job.mutable_ranks(rank);
  // Only a rank whose process its worker saw end: a rank of a lost worker
  // may still run (a partition), and only a restart of every rank fences
  // it out.
  const bool exited = cause.reason == v1::RANK_EXITED || cause.reason == v1::RANK_SIGNALED ||
                      cause.reason == v1::RANK_OOM;
  if (!MayRegroup(entry) || !exited || cause.stopped ||
      !membership_->Connected(status.worker_id()) || !MayKeepSlot(job, status.worker_id())) {
    return false;
  }
  const int generation = job.group_generation() + 1;
  // Announced before the replacement starts: the others wait for it.
  if (absl::Status s = AnnounceGroup(job, generation); !s.ok()) {
    spdlog::warn("job {}: cannot announce group {}: {}", job.id(), generation, s.ToString());
    return false;
  }
  // Its slot was never given up: the same slot and GPUs.
  status.set_state(v1::RANK_ASSIGNED);
  status.set_generation(generation);
  status.set_pid(0);
  status.set_exit_code(0);
  status.set_signal(0);
  BeginRegroup(entry, generation, cause);
  entry.rank_progress.erase(rank);
  entry.unseen.erase(rank);
  const int kept = static_cast<int>(GroupMembers(job).size()) - 1;
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

bool Attempts::ShrinkGroup(JobRecord& entry, const std::vector<int>& named,
                           const FailureCause& cause) {
  v1::Job& job = entry.job;
  if (!MayRegroup(entry) || cause.stopped || AwaitsPreflight(job) ||
      job.spec().min_ranks() >= job.spec().ranks()) {
    return false;
  }
  // Only for ranks whose worker is lost or takes no rank again; all of
  // that worker's ranks leave together.
  std::set<std::string> workers;
  for (int rank : named) {
    const std::string& worker_id = job.ranks(rank).worker_id();
    if (membership_->Connected(worker_id) && MayKeepSlot(job, worker_id)) return false;
    workers.insert(worker_id);
  }
  const std::vector<int> members = GroupMembers(job);
  std::vector<int> leaving;
  for (int rank : members) {
    if (workers.count(job.ranks(rank).worker_id()) > 0) leaving.push_back(rank);
  }
  const int world = static_cast<int>(members.size());
  const int stay = world - static_cast<int>(leaving.size());
  const int per_worker = job.spec().ranks_per_worker();
  if (leaving.empty() || stay < 1 || stay < job.spec().min_ranks() ||
      (per_worker > 0 && stay % per_worker != 0)) {
    return false;
  }
  const int generation = job.group_generation() + 1;
  std::vector<v1::RankStatus> before;
  for (int rank : leaving) {
    v1::RankStatus& status = *job.mutable_ranks(rank);
    before.push_back(status);
    status.set_left_generation(generation);
    if (RankHoldsSlot(status)) status.set_state(v1::RANK_FAILED);
  }
  // Announced with the members that stay, who wait for it.
  if (absl::Status s = AnnounceGroup(job, generation); !s.ok()) {
    spdlog::warn("job {}: cannot announce group {}: {}", job.id(), generation, s.ToString());
    for (size_t i = 0; i < leaving.size(); ++i) *job.mutable_ranks(leaving[i]) = before[i];
    return false;
  }
  job.set_world_size(stay);
  BeginRegroup(entry, generation, cause);
  for (int rank : leaving) {
    entry.rank_progress.erase(rank);
    entry.unseen.erase(rank);
    entry.watch.Left(rank);
    entry.stragglers.Forget(rank);
  }
  table_
      .Note(entry, v1::GROUP_SHRUNK,
            absl::StrCat(cause.message, ": ", stay, stay == 1 ? " rank goes" : " ranks go",
                         " on without rank", leaving.size() == 1 ? " " : "s ",
                         absl::StrJoin(leaving, ", "), ", each in its own process (group ",
                         generation, " of attempt ", job.attempt(), ", ", world, " -> ", stay,
                         " ranks, min_ranks ", job.spec().min_ranks(), "; ", job.restarts(), " of ",
                         job.spec().max_restarts(), " restarts used)"))
      .IgnoreError();  // logged; the regroup goes on
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
  const bool shrunk = std::any_of(job.ranks().begin(), job.ranks().end(), [&](const auto& r) {
    return r.left_generation() == job.group_generation();
  });
  FailureCause cause{
      shrunk ? v1::GROUP_SHRUNK : v1::RANK_REPLACED,
      absl::StrCat("group ", job.group_generation(), " did not form within ",
                   absl::FormatDuration(timeout),
                   shrunk ? " of going on without a rank" : " of a rank's replacement",
                   " (--regroup-timeout): restarting every rank"),
      job.root_cause().rank()};
  NoteFailure(entry, cause);
}

}  // namespace ringmaster
