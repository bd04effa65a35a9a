// The environment each rank process gets: torchrun's contract, so an
// unmodified PyTorch DDP script runs, plus Ringmaster's own variables.
#ifndef RINGMASTER_COORDINATOR_CORE_RANK_ENV_H_
#define RINGMASTER_COORDINATOR_CORE_RANK_ENV_H_

#include <map>
#include <string>

#include "absl/time/time.h"
#include "common/credentials.h"
#include "proto/job.pb.h"
#include "proto/worker.pb.h"

namespace ringmaster {

struct RankEnvContext {
  std::string coordinator_address;  // RINGMASTER_COORDINATOR
  std::string checkpoint_dir;       // root; the job's directory is below it
  // Signs RINGMASTER_JOB_TOKEN, the attempt's credential; null: none.
  const CredentialSigner* signer = nullptr;
  // Built-in trainer: how long ranks whose peer failed keep their process,
  // waiting for a replacement to join them (RINGMASTER_REGROUP_TIMEOUT_S);
  // zero: they exit, and every rank is restarted.
  absl::Duration regroup_timeout = absl::ZeroDuration();
};

// The variables for `rank` of `job`'s current attempt. `job.ranks()` holds
// the placement of every rank (worker and slots); the spec's env comes
// first and the contract's variables override nothing it may not set
// (ValidateJobSpec refuses reserved names). OMP_NUM_THREADS is 1 unless the
// spec sets it.
std::map<std::string, std::string> BuildRankEnv(const v1::Job& job, int rank,
                                                const RankEnvContext& context);

// The command that starts `rank` of the job's current attempt: its program
// (the built-in trainer, whose spec goes in RINGMASTER_TRAINER_SPEC, or the
// spec's command), environment, slot, GPUs and memory limit; for the
// trainer, its snapshot segment, the peer it replicates to and the job's
// replica credential.
v1::StartRank BuildStartRank(const v1::Job& job, int rank, const RankEnvContext& context);

// Whether the trainer takes snapshots in memory: snapshot_every_steps > 0,
// or unset (the default, every step).
bool TakesSnapshots(const v1::TrainerSpec& trainer);

// The peer `rank`'s worker sends the rank's snapshots to: the next of the
// job's workers (in order of their first rank) on another host, else the
// next one; none when the job has one worker.
void SetReplicaPeer(const v1::Job& job, int rank, v1::StartRank* start);

// Where the job's checkpoint directory lies: the spec's checkpoint_dir, else
// the coordinator's.
std::string CheckpointRoot(const v1::Job& job, const RankEnvContext& context);

// How long the trainer's collectives wait for a peer: past the job's hang
// timeout, so that the coordinator names a hung rank before its peers time
// out; 30 minutes when hang detection is off.
int64_t CollectiveTimeoutSeconds(const v1::JobSpec& spec);

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_CORE_RANK_ENV_H_
