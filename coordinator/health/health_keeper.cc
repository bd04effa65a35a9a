#include "coordinator/health/health_keeper.h"

#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "domain/job_state.h"

namespace ringmaster {

constexpr size_t kMaxReasonBytes = 512;

absl::Status CheckCordonReason(const std::string& reason) {
  if (reason.size() <= kMaxReasonBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the reason is ", reason.size(), " bytes long; at most ", kMaxReasonBytes));
}

std::vector<SchedulableWorker> HealthKeeper::Schedulable() {
  std::vector<SchedulableWorker> workers = membership_->Schedulable();
  if (!records_.AnyCordoned()) return workers;
  std::vector<SchedulableWorker> open;
  open.reserve(workers.size());
  for (SchedulableWorker& w : workers) {
    if (!records_.Cordoned(w.worker_id)) open.push_back(std::move(w));
  }
  return open;
}

void HealthKeeper::Store(const std::vector<v1::WorkerHealth>& records) {
  for (const v1::WorkerHealth& record : records) {
    if (absl::Status s = store_->PutWorkerHealth(record); !s.ok()) {
      spdlog::error("could not store the health of worker {}: {}", record.worker_id(),
                    s.ToString());
    }
  }
}

std::vector<v1::Worker> HealthKeeper::List(const JobTable& table) {
  std::vector<v1::Worker> workers = membership_->List();
  std::map<std::string, int> used;
  for (const auto& [number, record] : table.resident()) {
    for (const v1::RankStatus& rank : record->job.ranks()) {
      if (RankHoldsSlot(rank)) used[rank.worker_id()] += std::max(1, rank.gpus_size());
    }
  }
  for (v1::Worker& w : workers) {
    w.set_slots_used(used[w.id()]);
    if (const v1::WorkerHealth* health = records_.Find(w.id())) *w.mutable_health() = *health;
  }
  return workers;
}

absl::StatusOr<v1::Worker> HealthKeeper::Worker(const JobTable& table,
                                                const std::string& worker_id) {
  for (v1::Worker& w : List(table)) {
    if (w.id() == worker_id) return std::move(w);
  }
  if (const v1::WorkerHealth* health = records_.Find(worker_id)) {
    v1::Worker w;  // known from its stored record only, since a coordinator restart
    w.set_id(worker_id);
    *w.mutable_health() = *health;
    return w;
  }
  return absl::NotFoundError(
      absl::StrCat("no worker \"", worker_id, "\"; `ringmaster workers` lists them"));
}

void HealthKeeper::Cordon(const std::string& worker_id, const std::string& reason,
                          const std::string& by, bool drained) {
  Store({records_.Cordon(worker_id, reason, by, clock_->Now(), drained)});
}

void HealthKeeper::Uncordon(const std::string& worker_id) { Store({records_.Uncordon(worker_id)}); }

bool HealthKeeper::Blame(JobRecord& entry, FailureCause& cause) {
  const absl::Time now = clock_->Now();
  const std::optional<ringmaster::Blame> blame = BlameOf(entry.job, cause, now);
  if (!blame) return false;
  HealthRecords::Verdict verdict = records_.Record(*blame, now, membership_->Size());
  Store(verdict.changed);
  if (verdict.quarantined) {
    spdlog::warn("worker {} {}", blame->worker_id,
                 records_.Find(blame->worker_id)->cordon().reason());
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

void HealthKeeper::OnGpuError(const std::string& worker_id, const v1::GpuError& error) {
  bool cordoned = false;
  const v1::WorkerHealth record =
      records_.RecordGpuError(worker_id, error, clock_->Now(), &cordoned);
  Store({record});
  if (cordoned) {
    spdlog::error("worker {} cordoned: {}", worker_id, record.cordon().reason());
  } else {
    spdlog::warn("worker {}: GPU {} reported {} {} {}", worker_id, error.gpu(),
                 v1::GpuErrorKind_Name(error.kind()), error.xid(), error.count());
  }
}

void HealthKeeper::Expire() {
  const absl::Time now = clock_->Now();
  for (const v1::WorkerHealth& record : records_.Expire(now)) {
    Store({record});
    if (!record.has_cordon() && record.probation_until_unix_ms() > absl::ToUnixMillis(now)) {
      spdlog::info("worker {}: quarantine over; on probation until {}", record.worker_id(),
                   absl::FormatTime(absl::FromUnixMillis(record.probation_until_unix_ms())));
    }
  }
}

std::vector<v1::Straggler> FlagStragglers(JobRecord& entry, absl::Time now,
                                          const StragglerOptions& options) {
  const v1::Job& job = entry.job;
  entry.slowdown.clear();
  std::vector<v1::Straggler> flagged;
  for (const StragglerWatch::Figure& f : entry.stragglers.Evaluate(now, options)) {
    if (f.ratio > 0) entry.slowdown[f.rank] = f.ratio;
    if (!f.straggler || f.rank >= job.ranks_size()) continue;
    v1::Straggler& s = flagged.emplace_back();
    s.set_rank(f.rank);
    s.set_worker_id(job.ranks(f.rank).worker_id());
    s.set_ratio(f.ratio);
    s.set_since_unix_ms(absl::ToUnixMillis(f.slow_since));
  }
  return flagged;
}

std::vector<RankSlowdown> Slowdowns(const JobTable& table) {
  std::vector<RankSlowdown> out;
  for (const auto& [number, record] : table.placed()) {
    const v1::Job& job = record->job;
    if (job.state() != v1::RUNNING) continue;
    for (const auto& [rank, ratio] : record->slowdown) {
      if (rank < job.ranks_size())
        out.push_back({job.id(), rank, job.ranks(rank).worker_id(), ratio});
    }
  }
  return out;
}

}  // namespace ringmaster
