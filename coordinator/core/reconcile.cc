#include "coordinator/core/reconcile.h"

#include <tuple>

#include "domain/job_state.h"

namespace ringmaster {

std::set<std::pair<std::string, int>> StrayAttempts(const JobLookup& find,
                                                    const std::string& worker_id,
                                                    const RunningRanks& running) {
  std::set<std::pair<std::string, int>> stray;
  for (const v1::RunningRank& r : running) {
    const v1::Job* job = find(r.rank().job_id());
    const bool placed = job != nullptr && IsActive(job->state()) &&
                        r.rank().attempt() == job->attempt() && r.rank().rank() >= 0 &&
                        r.rank().rank() < job->ranks_size() &&
                        job->ranks(r.rank().rank()).worker_id() == worker_id &&
                        RankHoldsSlot(job->ranks(r.rank().rank()));
    if (!placed) stray.insert({r.rank().job_id(), r.rank().attempt()});
  }
  return stray;
}

Reconciliation ReconcileWorker(const std::vector<const v1::Job*>& jobs, const JobLookup& find,
                               const std::string& worker_id, const std::string& incarnation,
                               const RunningRanks& running) {
  std::set<std::tuple<std::string, int, int>> alive;
  for (const v1::RunningRank& r : running) {
    alive.insert({r.rank().job_id(), r.rank().attempt(), r.rank().rank()});
  }
  Reconciliation out;
  for (const v1::Job* job : jobs) {
    for (const v1::RankStatus& rank : job->ranks()) {
      if (rank.worker_id() != worker_id || !RankHoldsSlot(rank) ||
          alive.count({job->id(), job->attempt(), rank.rank()})) {
        continue;
      }
      const bool lost_start = rank.state() == v1::RANK_ASSIGNED &&
                              rank.worker_incarnation() == incarnation && IsActive(job->state());
      (lost_start ? out.resend : out.gone).push_back({job->id(), rank.rank()});
    }
  }
  out.stop = StrayAttempts(find, worker_id, running);
  return out;
}

}  // namespace ringmaster
