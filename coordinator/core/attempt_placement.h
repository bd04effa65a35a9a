// Where each attempt of a job placed its ranks: the workers that hold the
// attempt's logs after the job has moved on.
#ifndef RINGMASTER_COORDINATOR_CORE_ATTEMPT_PLACEMENT_H_
#define RINGMASTER_COORDINATOR_CORE_ATTEMPT_PLACEMENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"

namespace ringmaster {

// Job.past_attempts holds this many, the latest.
inline constexpr int kKeptPastAttempts = 10;

// Adds the current attempt's placement, if it placed ranks, to
// past_attempts, dropping the oldest beyond kKeptPastAttempts.
void KeepPastAttempt(v1::Job* job);

// The attempts whose placement is known (kept ones, and the current one
// once placed), in order.
std::vector<int> PlacedAttempts(const v1::Job& job);

struct RankLogSource {
  int rank = 0;
  std::string worker_id;
  std::string worker_address;  // as it was when the rank was placed
};

// The ranks of `attempt` and their workers. NOT_FOUND saying why when the
// job has no such attempt, or its placement is not kept.
absl::StatusOr<std::vector<RankLogSource>> AttemptRanks(const v1::Job& job, int attempt);

// Where a coordinator finds a job and the workers that hold its ranks'
// logs: the leader's jobs in memory, or a standby's store.
class JobLogIndex {
 public:
  virtual ~JobLogIndex() = default;
  virtual absl::StatusOr<v1::Job> Get(const std::string& job_id) = 0;
  // NOT_FOUND as AttemptRanks.
  virtual absl::StatusOr<std::vector<RankLogSource>> LogSources(const v1::Job& job,
                                                                int attempt) = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_ATTEMPT_PLACEMENT_H_
