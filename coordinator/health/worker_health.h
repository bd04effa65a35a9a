// Which workers take no new ranks, and why: cordons set by people
// (`ringmaster cordon`, `drain`) and automatic quarantines of workers that
// fail the ranks of several jobs. Pure bookkeeping on a given clock, so that
// the policy of docs/health.md is tested without daemons:
//
//   - A failure is blamed on a worker (BlameOf decides which failures are).
//   - A worker blamed for failures of >= 2 different jobs within the window
//     is quarantined: cordoned automatically, the failures in its reason,
//     for quarantine_for. It is then released on probation for as long
//     again: one more failure cordons it at once.
//   - Never more than max_quarantined of the workers at a time.
//   - A job whose ranks failed on several different workers within the
//     window fails by its own fault: its failures are blamed on no worker,
//     and quarantines that stood only on them are lifted.
//   - A GPU error that means the GPU or its link is broken (CriticalXid, or
//     a rise in uncorrectable ECC errors) cordons the worker at once, until
//     a person uncordons it; the safety valve does not hold it back.
#ifndef RINGMASTER_COORDINATOR_HEALTH_WORKER_HEALTH_H_
#define RINGMASTER_COORDINATOR_HEALTH_WORKER_HEALTH_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/core/restart_policy.h"
#include "domain/worker_count.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"

namespace ringmaster {

// NVIDIA's meaning of an XID ("GPU has fallen off the bus"); empty for one
// this table does not know.
std::string XidMeaning(int xid);
// Whether the XID means the GPU or its link is broken: 48, 62, 63, 64, 74,
// 79, 92, 94, 95, 119, 120.
bool CriticalXid(int xid);

struct HealthOptions {
  absl::Duration quarantine_window = absl::Minutes(10);
  absl::Duration quarantine_for = absl::Hours(1);
  WorkerCount max_quarantined{20};
};

// The worker a failure of `job`'s attempt is blamed on, with the failure
// as recorded: a rank that could not start or died by a signal is blamed
// on its own worker; one whose collective lost a peer ("peer rank 2") on
// the peer's. Nullopt for failures that say nothing of a machine (exit
// codes, hangs, OOM kills, timeouts, ranks stopped on purpose).
struct Blame {
  std::string worker_id;
  v1::WorkerFailure failure;
};
std::optional<Blame> BlameOf(const v1::Job& job, const FailureCause& cause, absl::Time now);

// Not thread-safe: its owner (the JobManager) holds its own mutex.
class HealthRecords {
 public:
  explicit HealthRecords(HealthOptions options) : options_(std::move(options)) {}

  const HealthOptions& options() const { return options_; }

  // The records stored before (JobStore::LoadWorkerHealth).
  void Load(const std::vector<v1::WorkerHealth>& records);

  // Null when the worker has no record.
  const v1::WorkerHealth* Find(const std::string& worker_id) const;
  bool Cordoned(const std::string& worker_id) const;
  bool AnyCordoned() const { return cordoned_ > 0; }

  // Each change returns the records it changed, to be stored.
  v1::WorkerHealth Cordon(const std::string& worker_id, const std::string& reason,
                          const std::string& by, absl::Time now, bool drained);
  // Schedulable again; the failures blamed on it are forgotten.
  v1::WorkerHealth Uncordon(const std::string& worker_id);

  // What Record made of a failure.
  struct Verdict {
    std::vector<v1::WorkerHealth> changed;
    bool quarantined = false;  // the blamed worker was cordoned now
    // Set when the failure's job failed on several workers: for people,
    // "it failed on 3 different workers (w1, w2, w3) within 10m: ...".
    std::string job_fault;
    // Set when the safety valve kept the worker schedulable.
    std::string spared;
  };
  // Records `blame`; `workers` is how many workers the cluster has.
  Verdict Record(const Blame& blame, absl::Time now, int workers);

  // Records a GPU error the worker reported, with its meaning; cordons the
  // worker for one that means the GPU is broken, unless a person has
  // cordoned it already. `cordoned` is set when it did.
  v1::WorkerHealth RecordGpuError(const std::string& worker_id, v1::GpuError error, absl::Time now,
                                  bool* cordoned);
  static constexpr int kGpuErrorsKept = 16;

  // Quarantines whose time is up end, on probation; failures older than
  // the window are forgotten.
  std::vector<v1::WorkerHealth> Expire(absl::Time now);

 private:
  v1::WorkerHealth& At(const std::string& worker_id);
  void SetCordon(v1::WorkerHealth& record, std::optional<v1::Cordon> cordon);
  int Quarantined() const;
  // The workers the job's failures in the window are blamed on.
  std::vector<std::string> WorkersFailing(const std::string& job_id) const;
  // Forgets the job's failures; lifts quarantines that no longer stand.
  void Withdraw(const std::string& job_id, std::vector<v1::WorkerHealth>* changed);

  const HealthOptions options_;
  std::map<std::string, v1::WorkerHealth> records_;
  int cordoned_ = 0;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_HEALTH_WORKER_HEALTH_H_
