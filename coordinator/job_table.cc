#include "coordinator/job_table.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/job_state.h"

namespace ringmaster {

void JobRecord::SetRankProgress(int rank, const v1::Progress& progress) {
  rank_progress[rank] = progress;
  v1::Progress total = rank_progress.count(0) ? rank_progress[0] : progress;
  double samples_per_second = 0;
  for (const auto& [r, p] : rank_progress) samples_per_second += p.samples_per_second();
  total.set_samples_per_second(samples_per_second);
  *job.mutable_progress() = total;
}

JobRecord& JobTable::Add(v1::Job job) {
  records_.push_back(std::make_unique<JobRecord>());
  JobRecord& record = *records_.back();
  record.job = std::move(job);
  by_id_[record.job.id()] = &record;
  return record;
}

absl::Status JobTable::Load() {
  ASSIGN_OR_RETURN(std::vector<v1::Job> jobs, store_->LoadAll());
  for (v1::Job& job : jobs) Add(std::move(job));
  return absl::OkStatus();
}

int64_t JobNumber(const std::string& job_id) {
  int64_t number = 0;
  const size_t dash = job_id.rfind('-');
  if (dash == std::string::npos || !absl::SimpleAtoi(job_id.substr(dash + 1), &number)) return 0;
  return number;
}

absl::StatusOr<JobRecord*> JobTable::Create(v1::JobSpec spec) {
  ASSIGN_OR_RETURN(int64_t number, store_->NextJobNumber());
  v1::Job job;
  job.set_id(absl::StrCat(spec.name(), "-", number));
  *job.mutable_spec() = std::move(spec);
  job.set_state(v1::PENDING);
  job.set_world_size(job.spec().ranks());
  job.set_create_unix_ms(absl::ToUnixMillis(clock_->Now()));
  v1::StateChange* change = job.add_history();
  change->set_state(v1::PENDING);
  change->set_reason(v1::SUBMITTED);
  change->set_message("submitted");
  change->set_time_unix_ms(job.create_unix_ms());
  RETURN_IF_ERROR(store_->Create(job));
  return &Add(std::move(job));
}

absl::Status JobTable::Delete(const std::string& job_id) {
  auto it = by_id_.find(job_id);
  if (it == by_id_.end()) return absl::NotFoundError(absl::StrCat("no job \"", job_id, "\""));
  RETURN_IF_ERROR(store_->Delete(job_id));
  const JobRecord* record = it->second;
  by_id_.erase(it);
  records_.erase(std::find_if(records_.begin(), records_.end(),
                              [record](const auto& r) { return r.get() == record; }));
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
  RETURN_IF_ERROR(CheckTransition(job.state(), to));
  v1::Job next = job;
  v1::StateChange change;
  change.set_state(to);
  change.set_reason(reason);
  change.set_message(message);
  change.set_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
  change.set_attempt(next.attempt());
  next.set_state(to);
  if (to != v1::PENDING) next.clear_pending_reason();
  *next.add_history() = change;
  if (absl::Status s = store_->RecordTransition(next, change); !s.ok()) {
    spdlog::error("job {}: cannot store {} -> {}: {}", job.id(), StateName(job.state()),
                  StateName(to), s.ToString());
    return s;
  }
  spdlog::info("job {}: {} -> {} ({}: {})", job.id(), StateName(job.state()), StateName(to),
               ReasonName(reason), message);
  if (on_transition_) on_transition_(job, change);
  record.job = std::move(next);
  Notify(record);
  return absl::OkStatus();
}

void JobTable::Persist(JobRecord& record) {
  if (absl::Status s = store_->Update(record.job); !s.ok()) {
    spdlog::error("job {}: cannot store its snapshot: {}", record.job.id(), s.ToString());
  }
  Notify(record);
}

void JobTable::Notify(const JobRecord& record) {
  for (const auto& [id, watcher] : watchers_) {
    if (watcher.job_id == record.job.id()) watcher.observer(record.job);
  }
}

absl::StatusOr<int64_t> JobTable::Watch(const std::string& job_id, Observer observer) {
  ASSIGN_OR_RETURN(JobRecord * record, Get(job_id));
  observer(record->job);
  const int64_t id = next_watch_id_++;
  watchers_[id] = Watcher{job_id, std::move(observer)};
  return id;
}

void JobTable::Unwatch(int64_t watch_id) { watchers_.erase(watch_id); }

}  // namespace ringmaster
