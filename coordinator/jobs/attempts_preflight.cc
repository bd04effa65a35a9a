// Pre-flight: the coordinator's side. The ranks post their figures in the
// attempt's rendezvous scope (trainer/preflight_check.h); once all have,
// the verdict is "go", or the attempt is placed again without the workers
// of the ranks that failed or were slow.
#include <map>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/health/preflight.h"
#include "coordinator/jobs/attempts.h"
#include "domain/job_state.h"

namespace ringmaster {

void Attempts::CheckPreflight(JobRecord& entry) {
  if (entry.ending) return;
  v1::Job& job = entry.job;
  const ScopeId scope{job.id(), job.attempt()};
  std::map<int, PreflightReport> reports;
  for (int rank = 0; rank < job.world_size(); ++rank) {
    absl::StatusOr<std::string> text = rendezvous_->Get(scope, PreflightReportKey(rank));
    if (!text.ok()) return;  // not every rank has posted yet
    absl::StatusOr<PreflightReport> report = DecodePreflightReport(*text);
    reports[rank] = report.ok() ? *report : PreflightReport{0, 0, report.status().ToString()};
  }
  v1::PreflightResult& result = *job.mutable_preflight();
  result.Clear();
  result.set_attempt(job.attempt());
  for (const auto& [rank, report] : reports) {
    v1::PreflightRank& r = *result.add_ranks();
    r.set_rank(rank);
    r.set_worker_id(job.ranks(rank).worker_id());
    r.set_bus_gb_per_s(report.bus_gb_per_s);
    r.set_world_gb_per_s(report.world_gb_per_s);
    r.set_error(report.error);
  }
  // Each worker once, with what its ranks did.
  std::map<std::string, std::vector<std::string>> faults;
  for (const PreflightExclusion& e : JudgePreflight(reports)) {
    v1::PreflightRank& r = *result.mutable_ranks(e.rank);
    r.set_excluded(e.why);
    faults[r.worker_id()].push_back(absl::StrCat("rank ", e.rank, ": ", e.why));
  }
  if (!faults.empty()) {
    std::vector<v1::ExcludedWorker> excluded;
    std::vector<std::string> lines;
    for (const auto& [worker, why] : faults) {
      v1::ExcludedWorker& e = excluded.emplace_back();
      e.set_worker_id(worker);
      e.set_reason(absl::StrCat("pre-flight: ", absl::StrJoin(why, "; ")));
      lines.push_back(absl::StrCat(worker, " (", absl::StrJoin(why, "; "), ")"));
    }
    const std::string what = absl::StrCat("pre-flight: ", absl::StrJoin(lines, ", "));
    spdlog::warn("job {}: {}", job.id(), what);
    std::string short_of;
    if (ExcludeWorkers(entry, excluded, v1::PREFLIGHT_FAILED,
                       absl::StrCat(what, ": placed again without ",
                                    excluded.size() == 1 ? "that worker" : "those workers"),
                       &short_of)) {
      return;
    }
    table_
        .Note(entry, v1::PREFLIGHT_FAILED,
              absl::StrCat(what, "; kept: without ", excluded.size() == 1 ? "it" : "them",
                           " the job ", short_of.empty() ? "cannot restart" : short_of))
        .IgnoreError();
  }
  job.mutable_preflight()->set_passed(true);  // the note may have replaced `result`
  if (absl::Status s = rendezvous_->Set(scope, kPreflightVerdictKey, kPreflightGo); !s.ok()) {
    spdlog::warn("job {}: pre-flight verdict not stored: {}", job.id(), s.ToString());
  }
  table_.Persist(entry);
}

}  // namespace ringmaster
