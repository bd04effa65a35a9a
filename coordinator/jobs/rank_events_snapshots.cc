// RankEvents: what the workers hold of jobs in memory, and where each
// attempt resumed from.
#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/core/goodput.h"
#include "coordinator/jobs/rank_events.h"
#include "domain/job_state.h"

namespace ringmaster {

void RankEvents::NoteSnapshots(const WorkerSession& session, const v1::Heartbeat& beat) {
  ReportSnapshots(session.worker_id, {beat.snapshots().begin(), beat.snapshots().end()});
}

void RankEvents::ReportSnapshots(const std::string& worker_id,
                                 const std::vector<v1::HeldSnapshots>& snapshots) {
  std::map<std::string, std::vector<v1::HeldSnapshots>> by_job;
  for (const v1::HeldSnapshots& held : snapshots) by_job[held.job_id()].push_back(held);
  std::set<std::string>& before = snapshot_jobs_[worker_id];
  for (const std::string& job_id : before) by_job.try_emplace(job_id);  // freed since: none now
  before.clear();
  for (const auto& [job_id, held] : by_job) {
    if (!held.empty()) before.insert(job_id);
    JobRecord* entry = table_.Find(job_id);
    if (entry == nullptr) continue;
    entry->snapshots.Report(worker_id, held);
    v1::SnapshotState state =
        entry->snapshots.State(entry->job.attempt(), GroupMembers(entry->job));
    state.set_off(entry->job.snapshots().off());
    if (state.SerializeAsString() == entry->job.snapshots().SerializeAsString()) continue;
    *entry->job.mutable_snapshots() = std::move(state);
    table_.Notify(*entry);
  }
}

void RankEvents::NoteResume(JobRecord& entry, int rank, const v1::Progress& progress) {
  v1::Job& job = entry.job;
  if (!progress.snapshots_off().empty() && job.snapshots().off() != progress.snapshots_off()) {
    job.mutable_snapshots()->set_off(absl::StrCat("rank ", rank, ": ", progress.snapshots_off()));
  }
  // The group's first member speaks for it (rank 0 unless it left). A
  // survivor's reports from the group before a regroup are not the new
  // group's first step.
  const std::vector<int> members = GroupMembers(job);
  if (members.empty() || rank != members.front() ||
      progress.group_generation() != job.group_generation()) {
    return;
  }
  attempts_.OnGroupReport(entry, progress);
  const absl::Time now = clock_->Now();
  const v1::Goodput::Phase phase = job.goodput().phase();
  if (phase == v1::Goodput::STARTUP || phase == v1::Goodput::RESTART) {
    // The attempt's first step, when rank 0 made it (as its clock says,
    // within what the coordinator saw): what it resumed from, then its
    // running.
    absl::Time first_step = now;
    if (progress.first_step_unix_ms() > 0) {
      first_step = std::clamp(absl::FromUnixMillis(progress.first_step_unix_ms()),
                              absl::FromUnixMillis(job.goodput().phase_since_unix_ms()), now);
    }
    if (!progress.resumed_from().empty()) NoteResumed(entry, progress, first_step);
    GoodputOnFirstStep(&job, progress.step(), first_step);
    table_.Persist(entry);
  } else if (!progress.resumed_from().empty() && !job.spec().has_trainer()) {
    // A program counts as running once its ranks are (it may never report
    // a step): where it resumed from is noted when it first says (its
    // later reports say it again).
    if (NoteResumed(entry, progress, now)) table_.Persist(entry);
  }
  GoodputOnStall(&job, progress.checkpoint_stall_seconds(), now);
}

bool RankEvents::NoteResumed(JobRecord& entry, const v1::Progress& progress,
                             absl::Time first_step) {
  v1::Job& job = entry.job;
  const int generation = job.group_generation();
  if (job.has_resumed() && job.resumed().attempt() == job.attempt() &&
      job.resumed().generation() == generation) {
    return false;
  }
  v1::ResumeRecord* resumed = job.mutable_resumed();
  resumed->set_attempt(job.attempt());
  resumed->set_generation(generation);
  resumed->set_from(progress.resumed_from());
  resumed->set_step(progress.resumed_step());
  std::string cost;
  const JobRecord::Interruption& interrupted = entry.interrupted;
  const bool regrouped =
      interrupted.attempt == job.attempt() && interrupted.generation < generation;
  if (regrouped || (interrupted.attempt >= 0 && interrupted.attempt < job.attempt())) {
    resumed->set_steps_redone(std::max<int64_t>(0, interrupted.reached - resumed->step()));
    resumed->set_seconds(absl::ToDoubleSeconds(first_step - interrupted.at));
    cost = absl::StrFormat(
        ", %d steps redone; first step %.1f s after %s", resumed->steps_redone(),
        resumed->seconds(),
        regrouped ? "the rank failed" : absl::StrCat("attempt ", interrupted.attempt, " ended"));
    GoodputOnResume(&job, resumed->steps_redone(), interrupted.reached);
  } else {
    resumed->clear_steps_redone();
    resumed->clear_seconds();
  }
  const std::string where =
      generation > 0 && progress.resumed_from() != "disk"
          ? absl::StrCat("from memory, the ranks that did not fail keeping their processes",
                         progress.resumed_from() == "replica"
                             ? " (the replaced rank's snapshot fetched from a peer's replica)"
                             : "")
      : progress.resumed_from() == "memory" ? "from memory on its workers"
      : progress.resumed_from() == "replica"
          ? "from memory, with snapshots fetched from peers' replicas"
      : job.snapshots().newest_step() > 0
          ? "from disk: no snapshot in its workers' memory was as new"
          : "from disk";
  (void)table_.Note(entry, v1::RESUMED,
                    absl::StrCat("resumed at step ", resumed->step(), " ", where, cost));
  return true;
}

}  // namespace ringmaster
