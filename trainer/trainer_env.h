// What a rank learns from its environment, read and checked once: the
// torchrun variables and Ringmaster's own (as a worker sets them).
#ifndef RINGMASTER_TRAINER_TRAINER_ENV_H_
#define RINGMASTER_TRAINER_TRAINER_ENV_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

struct TrainerEnv {
  int rank = 0;                    // RANK
  int world_size = 1;              // WORLD_SIZE
  int attempt = 0;                 // TORCHELASTIC_RESTART_COUNT
  std::string job_id;              // RINGMASTER_JOB_ID
  std::string spec_json;           // RINGMASTER_TRAINER_SPEC
  std::string host = "127.0.0.1";  // RINGMASTER_HOST: this rank's address for peers
  std::string worker_address;      // RINGMASTER_WORKER_ADDRESS: where progress goes
  std::string worker_id;           // RINGMASTER_WORKER_ID: the name in its TLS certificate
  std::string tls_ca;              // RINGMASTER_TLS_CA: the cluster's CA (PEM); empty: plaintext
  std::string token;               // RINGMASTER_JOB_TOKEN: this attempt's credential, if any
  std::string checkpoint_dir;      // RINGMASTER_CHECKPOINT_DIR
  std::string save_weights;        // RINGMASTER_TRAINER_SAVE_WEIGHTS: rank 0 writes them
  std::string visible_gpus;        // CUDA_VISIBLE_DEVICES; empty: train on the CPU
  bool preflight = false;          // RINGMASTER_PREFLIGHT=1: check the links before step 1
  int group_rank = 0;              // GROUP_RANK: its host's index among the job's
  int local_rank = 0;              // LOCAL_RANK: its index on its host
  // RINGMASTER_COLLECTIVE_TIMEOUT_S: how long a collective waits for a peer.
  absl::Duration collective_timeout = absl::Seconds(120);
  // RINGMASTER_STOP_GRACE_S: after SIGTERM, how long rank 0 has to reach a
  // step boundary and checkpoint (and any rank to end) before it exits
  // anyway.
  absl::Duration stop_grace = absl::Seconds(5);
  // RINGMASTER_SNAPSHOT_FD: the snapshot segment the worker handed it; -1:
  // none, and RINGMASTER_SNAPSHOT_REFUSED may say why.
  int snapshot_fd = -1;
  std::string snapshot_refused;
  // RINGMASTER_SNAPSHOT_FETCHED ("<step> <from where>"): the step of the
  // snapshot the worker put in the segment from a peer's replica; -1: none.
  int64_t snapshot_fetched_step = -1;
  // RINGMASTER_GROUP_GENERATION: the group of its attempt it joins at the
  // start; one more each time a failed rank was replaced.
  int group_generation = 0;
  // RINGMASTER_REGROUP_TIMEOUT_S: when a peer fails, how long this rank
  // keeps its process, waiting for the group to form again; zero: it exits.
  absl::Duration regroup_timeout = absl::ZeroDuration();
};

using GetEnv = std::function<const char*(const char*)>;

// INVALID_ARGUMENT naming the variable and its value when one is malformed
// or out of range (RANK outside [0, WORLD_SIZE), a timeout <= 0).
absl::StatusOr<TrainerEnv> ReadTrainerEnv(const GetEnv& getenv);

}  // namespace ringmaster

#endif  // RINGMASTER_TRAINER_TRAINER_ENV_H_
