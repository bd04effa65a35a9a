// What a worker runs against what the coordinator placed on it, decided
// before anything is acted on: ranks placed there that are gone, ranks whose
// start was lost and is to be sent again, and rank processes that belong to
// no active attempt and are to be stopped.
#ifndef RINGMASTER_COORDINATOR_CORE_RECONCILE_H_
#define RINGMASTER_COORDINATOR_CORE_RECONCILE_H_

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

using RunningRanks = google::protobuf::RepeatedPtrField<v1::RunningRank>;
// The job of an id, or null.
using JobLookup = std::function<const v1::Job*(const std::string& job_id)>;

// Attempts (job, attempt) of which `running` holds ranks that no active
// attempt placed on `worker_id`: ended attempts, or jobs this coordinator
// does not know.
std::set<std::pair<std::string, int>> StrayAttempts(const JobLookup& find,
                                                    const std::string& worker_id,
                                                    const RunningRanks& running);

struct Reconciliation {
  std::vector<std::pair<std::string, int>> gone;    // (job, rank): lost
  std::vector<std::pair<std::string, int>> resend;  // (job, rank): start again
  std::set<std::pair<std::string, int>> stop;       // (job, attempt): strays
};

// For a worker process (`incarnation`) registering with `running`: a rank
// placed on it that it does not run is gone, unless it never started on
// this same process (its start was lost with a stream or a coordinator).
Reconciliation ReconcileWorker(const std::vector<const v1::Job*>& jobs, const JobLookup& find,
                               const std::string& worker_id, const std::string& incarnation,
                               const RunningRanks& running);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_RECONCILE_H_
