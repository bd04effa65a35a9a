// Attempts: restarts without workers that fail or straggle.
#include "coordinator/jobs/attempts.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "domain/job_state.h"

namespace ringmaster {

void Attempts::UpdateStragglers(JobRecord& entry, absl::Time now) {
  v1::Job& job = entry.job;
  if (job.state() != v1::RUNNING) return;
  const std::vector<v1::Straggler> flagged = FlagStragglers(entry, now, options_.stragglers);
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
    } else if (ExcludeStraggler(entry, *s, line)) {
      return;  // restarting
    }
  }
  table_.Persist(entry);
}

bool Attempts::ExcludeStraggler(JobRecord& entry, const v1::Straggler& straggler,
                                const std::string& line) {
  v1::ExcludedWorker excluded;
  excluded.set_worker_id(straggler.worker_id());
  excluded.set_reason(absl::StrCat("straggler: ", line));
  std::string short_of;
  if (ExcludeWorkers(entry, {excluded}, v1::RANK_STRAGGLING,
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

bool Attempts::ExcludeWorkers(JobRecord& entry, const std::vector<v1::ExcludedWorker>& workers,
                              v1::Reason reason, const std::string& message,
                              std::string* short_of) {
  v1::Job& job = entry.job;
  GangRequest request = GangOf(job.spec(), scheduling_.policy().topology_levels);
  for (const v1::ExcludedWorker& e : job.excluded_workers()) request.avoid.push_back(e.worker_id());
  for (const v1::ExcludedWorker& e : workers) request.avoid.push_back(e.worker_id());
  const std::vector<WorkerCapacity> idle =
      IdleCapacity(FreeCapacity(health_.Schedulable(), {}, ""));
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
  StopRanks(entry);
  return true;
}

}  // namespace ringmaster
