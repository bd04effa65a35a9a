#include "coordinator/core/job_table.h"

#include "coordinator/core/goodput.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/core/history_fold.h"
#include "domain/job_state.h"

namespace ringmaster {

double JobSamplesPerSecond(const std::map<int, v1::Progress>& rank_progress, int world_size) {
  double sum = 0;
  int reporting = 0;
  for (const auto& [rank, p] : rank_progress) {
    if (p.samples_per_second() <= 0) continue;
    sum += p.samples_per_second();
    ++reporting;
  }
  if (reporting == 0) return 0;
  return sum / reporting * std::max(world_size, reporting);
}

void JobRecord::SetRankProgress(int rank, const v1::Progress& progress) {
  rank_progress[rank] = progress;
  // The durations of each step since the last report feed the worker's
  // histogram; kept with the job they would grow it by hundreds of numbers.
  rank_progress[rank].clear_step_seconds();
  // The lowest rank's figures: rank 0's, or the first member's after rank
  // 0 left a group that shrank (its entry erased then).
  v1::Progress total = rank_progress.begin()->second;
  total.set_samples_per_second(JobSamplesPerSecond(rank_progress, job.world_size()));
  *job.mutable_progress() = total;
  series.Add(total, job.attempt(), total.update_unix_ms());
}

bool HoldsSlots(const v1::Job& job) {
  return std::any_of(job.ranks().begin(), job.ranks().end(), RankHoldsSlot);
}

namespace {

int64_t EndedUnixMs(const v1::Job& job) {
  return job.history().empty() ? job.create_unix_ms() : job.history().rbegin()->time_unix_ms();
}

}  // namespace

std::vector<std::string> WorkersOf(const v1::Job& job) {
  std::set<std::string> workers(job.ran_on().begin(), job.ran_on().end());
  // Jobs stored before ran_on was kept: their attempts' workers.
  for (const v1::RankStatus& rank : job.ranks()) workers.insert(rank.worker_id());
  for (const v1::AttemptPlacement& past : job.past_attempts()) {
    workers.insert(past.worker_ids().begin(), past.worker_ids().end());
  }
  workers.erase("");
  return {workers.begin(), workers.end()};
}

JobRecord& JobTable::Add(v1::Job job) {
  const int64_t number = JobNumber(job.id());
  auto record = std::make_unique<JobRecord>();
  record->job = std::move(job);
  JobRecord& added = *record;
  resident_[number] = std::move(record);
  by_id_[added.job.id()] = &added;
  Classify(number, added);
  return added;
}

void JobTable::Classify(int64_t number, JobRecord& record) {
  if (record.job.state() == v1::PENDING) {
    placed_.erase(number);
    if (pending_.count(number) == 0) {
      pending_[number] = ++pending_stamp_;
      ++pending_changes_;
    }
  } else {
    pending_changes_ += pending_.erase(number);
    placed_[number] = &record;
  }
}

absl::Status JobTable::Load() {
  ASSIGN_OR_RETURN(std::vector<RetiredJob> retired, store_->LoadRetired());
  for (RetiredJob& job : retired) retired_[job.number] = std::move(job);
  ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, store_->LoadResident());
  // Each job keeps the revision it was stored with, and this run's changes
  // are numbered above every revision an earlier run gave (stored or only
  // sent to watchers): a watcher that saw a job before the restart can
  // tell whether a snapshot of it is new by its revision alone.
  ASSIGN_OR_RETURN(const int64_t run, store_->NextRunNumber());
  changes_.StartAfter(run << kRunRevisionBits);
  for (v1::Job& job : jobs) outbox_->Notify(Add(std::move(job)).job);
  RetireEnded();
  return absl::OkStatus();
}

absl::StatusOr<JobRecord*> JobTable::Create(v1::Job job, const std::string& request_id) {
  job.set_state(v1::PENDING);
  job.set_create_unix_ms(absl::ToUnixMillis(clock_->Now()));
  v1::StateChange* change = job.add_history();
  change->set_state(v1::PENDING);
  change->set_reason(v1::SUBMITTED);
  change->set_message("submitted");
  change->set_time_unix_ms(job.create_unix_ms());
  RETURN_IF_ERROR(store_->Batch([&]() -> absl::Status {
    ASSIGN_OR_RETURN(int64_t number, store_->NextJobNumber());
    job.set_id(absl::StrCat(job.spec().name(), "-", number));
    job.set_world_size(job.spec().ranks());
    Stamp(job);
    return store_->Create(job, request_id);
  }));
  JobRecord& added = Add(std::move(job));
  outbox_->Notify(added.job);
  return &added;
}

void JobTable::RetireEnded() {
  std::vector<JobRecord*> ended;
  for (const auto& [number, record] : placed_) {  // a PENDING job has not ended
    if (IsTerminal(record->job.state()) && !HoldsSlots(record->job)) ended.push_back(record);
  }
  for (JobRecord* record : ended) {
    const v1::Job& job = record->job;
    const RetiredJob summary{JobNumber(job.id()), job.id(),       job.state(),
                             EndedUnixMs(job),    WorkersOf(job), job.revision()};
    if (absl::Status s = store_->Retire(summary); !s.ok()) {
      spdlog::warn("job {}: cannot retire it from memory: {}", job.id(), s.ToString());
      return;
    }
    // Nothing of it runs: its workers free what they held for restarts.
    v1::CoordinatorMessage ended_message;
    ended_message.mutable_job_ended()->set_job_id(job.id());
    for (const std::string& worker_id : summary.workers) outbox_->Send(worker_id, ended_message);
    by_id_.erase(job.id());
    placed_.erase(summary.number);
    resident_.erase(summary.number);  // destroys *record
    retired_[summary.number] = summary;
  }
}

absl::StatusOr<JobRecord*> JobTable::Revive(v1::Job job) {
  const int64_t number = JobNumber(job.id());
  if (retired_.count(number) == 0) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job.id(), " is not retired"));
  }
  RETURN_IF_ERROR(store_->Revive(job.id()));
  retired_.erase(number);
  return &Add(std::move(job));
}

void JobTable::Refile(JobRecord& record) {
  const int64_t number = JobNumber(record.job.id());
  pending_changes_ += pending_.erase(number);
  Classify(number, record);
}

absl::Status JobTable::Delete(const std::string& job_id) {
  const int64_t number = JobNumber(job_id);
  const bool retired = FindRetired(job_id) != nullptr;
  if (!retired && Find(job_id) == nullptr) {
    return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  }
  RETURN_IF_ERROR(store_->Delete(job_id));
  if (retired) {
    retired_.erase(number);
  } else {
    by_id_.erase(job_id);
    pending_changes_ += pending_.erase(number);
    placed_.erase(number);
    resident_.erase(number);
  }
  return absl::OkStatus();
}

JobRecord* JobTable::Find(const std::string& job_id) {
  auto it = by_id_.find(job_id);
  return it == by_id_.end() ? nullptr : it->second;
}

absl::StatusOr<JobRecord*> JobTable::Get(const std::string& job_id) {
  JobRecord* record = Find(job_id);
  if (record == nullptr) return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  return record;
}

const RetiredJob* JobTable::FindRetired(const std::string& job_id) const {
  auto it = retired_.find(JobNumber(job_id));
  return it == retired_.end() || it->second.id != job_id ? nullptr : &it->second;
}

v1::RankStatus* JobTable::FindRank(const std::string& worker_id, const v1::RankRef& ref,
                                   JobRecord** record) {
  JobRecord* found = Find(ref.job_id());
  if (found == nullptr || ref.attempt() != found->job.attempt() || ref.rank() < 0 ||
      ref.rank() >= found->job.ranks_size() ||
      found->job.ranks(ref.rank()).worker_id() != worker_id) {
    return nullptr;
  }
  *record = found;
  return found->job.mutable_ranks(ref.rank());
}

absl::Status JobTable::Transition(JobRecord& record, v1::JobState to, v1::Reason reason,
                                  const std::string& message) {
  const v1::Job& job = record.job;
  // An ended job goes back to PENDING only when requeued.
  const bool requeue = reason == v1::REQUEUED && IsTerminal(job.state()) && to == v1::PENDING;
  if (!requeue) RETURN_IF_ERROR(CheckTransition(job.state(), to));
  v1::Job next = job;
  if (to != v1::STARTING) {
    // What was pulled for the start is over.
    next.clear_pulling();
    record.pulled_at = absl::InfinitePast();
    record.pulled_bytes.clear();
  }
  v1::StateChange change;
  change.set_state(to);
  change.set_reason(reason);
  change.set_message(message);
  change.set_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
  change.set_attempt(next.attempt());
  next.set_state(to);
  if (to != v1::PENDING) next.clear_pending_reason();
  GoodputOnTransition(&next, to, reason, clock_->Now());
  const int stored = next.history_size();
  const int kept = AppendToHistory(change, next.mutable_history());
  Stamp(next);
  if (absl::Status s = store_->RecordTransition(next, stored - kept, kept); !s.ok()) {
    spdlog::error("job {}: cannot store {} -> {}: {}", job.id(), StateName(job.state()),
                  StateName(to), s.ToString());
    return s;
  }
  spdlog::info("job {}: {} -> {} ({}: {})", job.id(), StateName(job.state()), StateName(to),
               ReasonName(reason), message);
  if (on_transition_) on_transition_(job, change);
  record.job = std::move(next);
  Classify(JobNumber(record.job.id()), record);
  outbox_->Notify(record.job);
  return absl::OkStatus();
}

absl::Status JobTable::Note(JobRecord& record, v1::Reason reason, const std::string& message) {
  v1::Job next = record.job;
  v1::StateChange change;
  change.set_state(next.state());
  change.set_reason(reason);
  change.set_message(message);
  change.set_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
  change.set_attempt(next.attempt());
  const int stored = next.history_size();
  const int kept = AppendToHistory(change, next.mutable_history());
  Stamp(next);
  if (absl::Status s = store_->RecordTransition(next, stored - kept, kept); !s.ok()) {
    spdlog::error("job {}: cannot store {}: {}", next.id(), message, s.ToString());
    return s;
  }
  spdlog::info("job {}: {} ({}: {})", next.id(), StateName(next.state()), ReasonName(reason),
               message);
  if (on_transition_) on_transition_(record.job, change);
  record.job = std::move(next);
  outbox_->Notify(record.job);
  return absl::OkStatus();
}

void JobTable::Persist(JobRecord& record) {
  Stamp(record.job);
  if (absl::Status s = store_->Update(record.job); !s.ok()) {
    spdlog::error("job {}: cannot store its snapshot: {}", record.job.id(), s.ToString());
  }
  outbox_->Notify(record.job);
}

void JobTable::Notify(JobRecord& record) {
  Stamp(record.job);
  outbox_->Notify(record.job);
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> JobTable::ChangedSince(
    int64_t revision) const {
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> logged =
      changes_.ChangedSince(revision);
  if (logged.ok() || revision < 0 || revision > changes_.last()) return logged;
  // A revision the log no longer holds (of an earlier run, given with a
  // job loaded at the start, or too many changes ago): every job whose
  // revision is higher, from the records (each keeps the revision of its
  // latest change, a retired one that of its last snapshot).
  std::vector<std::pair<std::string, int64_t>> changed;
  for (const auto& [number, record] : resident_) {
    if (record->job.revision() > revision)
      changed.emplace_back(record->job.id(), record->job.revision());
  }
  for (const auto& [number, retired] : retired_) {
    if (retired.revision > revision) changed.emplace_back(retired.id, retired.revision);
  }
  std::sort(changed.begin(), changed.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  return changed;
}

void JobTable::Stamp(v1::Job& job) { job.set_revision(changes_.Record(job.id())); }

int64_t JobTable::Watch(const JobRecord& record, Outbox::Observer observer) {
  return outbox_->Watch(record.job, std::move(observer));
}

}  // namespace ringmaster
