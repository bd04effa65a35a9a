// JobManager: cordons, drains and quarantines of workers, and the workers
// a job avoids.
#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "coordinator/jobs/job_manager.h"
#include "domain/job_state.h"

namespace ringmaster {
namespace {

constexpr size_t kMaxReasonBytes = 512;

absl::Status CheckReason(const std::string& reason) {
  if (reason.size() <= kMaxReasonBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the reason is ", reason.size(), " bytes long; at most ", kMaxReasonBytes));
}

}  // namespace

std::vector<SchedulableWorker> JobManager::SchedulableLocked() {
  std::vector<SchedulableWorker> workers = membership_->Schedulable();
  if (!health_.AnyCordoned()) return workers;
  std::vector<SchedulableWorker> open;
  open.reserve(workers.size());
  for (SchedulableWorker& w : workers) {
    if (!health_.Cordoned(w.worker_id)) open.push_back(std::move(w));
  }
  return open;
}

void JobManager::StoreHealthLocked(const std::vector<v1::WorkerHealth>& records) {
  for (const v1::WorkerHealth& record : records) {
    if (absl::Status s = store_->PutWorkerHealth(record); !s.ok()) {
      spdlog::error("could not store the health of worker {}: {}", record.worker_id(),
                    s.ToString());
    }
  }
}

std::vector<v1::Worker> JobManager::ListWorkersLocked() {
  std::vector<v1::Worker> workers = membership_->List();
  std::map<std::string, int> used;
  for (const auto& [number, record] : table_.resident()) {
    for (const v1::RankStatus& rank : record->job.ranks()) {
      if (RankHoldsSlot(rank)) used[rank.worker_id()] += std::max(1, rank.gpus_size());
    }
  }
  for (v1::Worker& w : workers) {
    w.set_slots_used(used[w.id()]);
    if (const v1::WorkerHealth* health = health_.Find(w.id())) *w.mutable_health() = *health;
  }
  return workers;
}

absl::StatusOr<v1::Worker> JobManager::WorkerLocked(const std::string& worker_id) {
  for (v1::Worker& w : ListWorkersLocked()) {
    if (w.id() == worker_id) return std::move(w);
  }
  if (const v1::WorkerHealth* health = health_.Find(worker_id)) {
    v1::Worker w;  // known from its stored record only, since a coordinator restart
    w.set_id(worker_id);
    *w.mutable_health() = *health;
    return w;
  }
  return absl::NotFoundError(
      absl::StrCat("no worker \"", worker_id, "\"; `ringmaster workers` lists them"));
}

absl::StatusOr<v1::Worker> JobManager::Cordon(const std::string& worker_id,
                                              const std::string& reason, const std::string& by) {
  RETURN_IF_ERROR(CheckReason(reason));
  absl::StatusOr<v1::Worker> worker;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(WorkerLocked(worker_id).status());
    StoreHealthLocked({health_.Cordon(worker_id, reason.empty() ? "cordoned" : reason, by,
                                      clock_->Now(), /*drained=*/false)});
    spdlog::info("worker {} cordoned by {}: {}", worker_id, by, reason);
    worker = WorkerLocked(worker_id);
  }
  outbox_.Flush();  // stored before the reply
  return worker;
}

absl::StatusOr<v1::Worker> JobManager::Uncordon(const std::string& worker_id) {
  absl::StatusOr<v1::Worker> worker;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(WorkerLocked(worker_id).status());
    StoreHealthLocked({health_.Uncordon(worker_id)});
    spdlog::info("worker {} uncordoned", worker_id);
    worker = WorkerLocked(worker_id);
  }
  outbox_.Flush();
  return worker;
}

absl::StatusOr<v1::DrainWorkerResponse> JobManager::Drain(const std::string& worker_id,
                                                          const std::string& reason,
                                                          const std::string& by,
                                                          absl::Duration grace) {
  RETURN_IF_ERROR(CheckReason(reason));
  v1::DrainWorkerResponse response;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(WorkerLocked(worker_id).status());
    const std::string why = reason.empty() ? "drained" : reason;
    const absl::Time now = clock_->Now();
    StoreHealthLocked({health_.Cordon(worker_id, why, by, now, /*drained=*/true)});
    std::vector<JobRecord*> running;  // transitions change placed()
    for (const auto& [number, record] : table_.placed()) {
      const v1::Job& job = record->job;
      if (job.state() != v1::STARTING && job.state() != v1::RUNNING) continue;
      for (const v1::RankStatus& rank : job.ranks()) {
        if (rank.worker_id() == worker_id && RankHoldsSlot(rank)) {
          running.push_back(record);
          break;
        }
      }
    }
    for (JobRecord* entry : running) {
      const std::string message =
          absl::StrCat("worker ", worker_id, " drained by ", by, " (", why,
                       "): resumes elsewhere from a checkpoint taken on stop");
      entry->ending.reset();
      if (!table_.Transition(*entry, v1::RESTARTING, v1::WORKER_DRAINED, message).ok()) continue;
      entry->restart_at = now;
      entry->regrow_since = absl::InfiniteFuture();
      StopRanksLocked(*entry, grace);
      response.add_stopped_jobs(entry->job.id());
    }
    spdlog::info("worker {} drained by {} ({}): stopping {} jobs with a {} grace", worker_id, by,
                 why, response.stopped_jobs_size(), absl::FormatDuration(grace));
    ASSIGN_OR_RETURN(*response.mutable_worker(), WorkerLocked(worker_id));
  }
  outbox_.Flush();
  return response;
}

bool JobManager::BlameLocked(JobRecord& entry, FailureCause& cause) {
  const absl::Time now = clock_->Now();
  const std::optional<Blame> blame = BlameOf(entry.job, cause, now);
  if (!blame) return false;
  HealthRecords::Verdict verdict = health_.Record(*blame, now, membership_->Size());
  StoreHealthLocked(verdict.changed);
  if (verdict.quarantined) {
    spdlog::warn("worker {} {}", blame->worker_id,
                 health_.Find(blame->worker_id)->cordon().reason());
  }
  if (!verdict.spared.empty()) spdlog::warn("{}", verdict.spared);
  if (!verdict.job_fault.empty()) {
    absl::StrAppend(&cause.message, "; ", verdict.job_fault);
    return false;
  }
  v1::Job& job = entry.job;
  int32_t& failures = (*job.mutable_worker_failures())[blame->worker_id];
  if (++failures != 2) return verdict.quarantined;
  v1::ExcludedWorker& excluded = *job.add_excluded_workers();
  excluded.set_worker_id(blame->worker_id);
  excluded.set_reason(absl::StrCat("2 failures of its ranks there; the last: ", cause.message));
  excluded.set_time_unix_ms(absl::ToUnixMillis(now));
  spdlog::warn("job {}: avoids worker {} from now on ({})", job.id(), blame->worker_id,
               excluded.reason());
  return true;
}

void JobManager::UpdateStragglersLocked(JobRecord& entry, absl::Time now) {
  v1::Job& job = entry.job;
  if (job.state() != v1::RUNNING) return;
  entry.slowdown.clear();
  std::vector<v1::Straggler> flagged;
  for (const StragglerWatch::Figure& f : entry.stragglers.Evaluate(now, options_.stragglers)) {
    if (f.ratio > 0) entry.slowdown[f.rank] = f.ratio;
    if (!f.straggler || f.rank >= job.ranks_size()) continue;
    v1::Straggler& s = flagged.emplace_back();
    s.set_rank(f.rank);
    s.set_worker_id(job.ranks(f.rank).worker_id());
    s.set_ratio(f.ratio);
    s.set_since_unix_ms(absl::ToUnixMillis(f.slow_since));
  }
  std::vector<const v1::Straggler*> added;
  for (const v1::Straggler& s : flagged) {
    const bool known = std::any_of(job.stragglers().begin(), job.stragglers().end(),
                                   [&](const v1::Straggler& k) { return k.rank() == s.rank(); });
    if (!known) added.push_back(&s);
  }
  const bool same_ranks =
      added.empty() && job.stragglers_size() == static_cast<int>(flagged.size());
  job.mutable_stragglers()->Assign(flagged.begin(), flagged.end());
  if (same_ranks) return;  // the ratios go out with the progress already
  for (const v1::Straggler* s : added) {
    const std::string line = StragglerLine(*s, now);
    spdlog::warn("job {}: straggler: {}", job.id(), line);
    if (job.spec().on_straggler() != "exclude") {
      table_.Note(entry, v1::RANK_STRAGGLING, absl::StrCat("straggler: ", line)).IgnoreError();
    } else if (ExcludeStragglerLocked(entry, *s, line)) {
      return;  // restarting
    }
  }
  table_.Persist(entry);
}

bool JobManager::ExcludeStragglerLocked(JobRecord& entry, const v1::Straggler& straggler,
                                        const std::string& line) {
  v1::ExcludedWorker excluded;
  excluded.set_worker_id(straggler.worker_id());
  excluded.set_reason(absl::StrCat("straggler: ", line));
  std::string short_of;
  if (ExcludeWorkersLocked(entry, {excluded}, v1::RANK_STRAGGLING,
                           absl::StrCat("straggler: ", line,
                                        ": restarting from a checkpoint taken on stop without "
                                        "worker ",
                                        straggler.worker_id()),
                           &short_of)) {
    return true;
  }
  if (!short_of.empty()) {
    table_
        .Note(entry, v1::RANK_STRAGGLING,
              absl::StrCat("straggler: ", line, "; not excluded: without ", straggler.worker_id(),
                           " the job ", short_of))
        .IgnoreError();
  }
  return false;
}

bool JobManager::ExcludeWorkersLocked(JobRecord& entry,
                                      const std::vector<v1::ExcludedWorker>& workers,
                                      v1::Reason reason, const std::string& message,
                                      std::string* short_of) {
  v1::Job& job = entry.job;
  GangRequest request = GangOf(job.spec());
  for (const v1::ExcludedWorker& e : job.excluded_workers()) request.avoid.push_back(e.worker_id());
  for (const v1::ExcludedWorker& e : workers) request.avoid.push_back(e.worker_id());
  const std::vector<WorkerCapacity> idle = IdleCapacity(FreeCapacity(SchedulableLocked(), {}, ""));
  *short_of = NeverFits(idle, request);
  if (!short_of->empty()) return false;
  const int before = job.excluded_workers_size();
  for (v1::ExcludedWorker e : workers) {
    e.set_time_unix_ms(absl::ToUnixMillis(clock_->Now()));
    *job.add_excluded_workers() = std::move(e);
  }
  if (!table_.Transition(entry, v1::RESTARTING, reason, message).ok()) {
    job.mutable_excluded_workers()->DeleteSubrange(before, job.excluded_workers_size() - before);
    return false;
  }
  entry.restart_at = clock_->Now();
  entry.regrow_since = absl::InfiniteFuture();
  StopRanksLocked(entry);
  return true;
}

std::vector<JobManager::Slowdown> JobManager::Slowdowns() {
  std::vector<Slowdown> out;
  MutexLock lock(&mu_);
  for (const auto& [number, record] : table_.placed()) {
    const v1::Job& job = record->job;
    if (job.state() != v1::RUNNING) continue;
    for (const auto& [rank, ratio] : record->slowdown) {
      if (rank < job.ranks_size())
        out.push_back({job.id(), rank, job.ranks(rank).worker_id(), ratio});
    }
  }
  return out;
}

void JobManager::OnGpuErrorLocked(const std::string& worker_id, const v1::GpuError& error) {
  bool cordoned = false;
  const v1::WorkerHealth record =
      health_.RecordGpuError(worker_id, error, clock_->Now(), &cordoned);
  StoreHealthLocked({record});
  if (cordoned) {
    spdlog::error("worker {} cordoned: {}", worker_id, record.cordon().reason());
  } else {
    spdlog::warn("worker {}: GPU {} reported {} {} {}", worker_id, error.gpu(),
                 v1::GpuErrorKind_Name(error.kind()), error.xid(), error.count());
  }
}

}  // namespace ringmaster
