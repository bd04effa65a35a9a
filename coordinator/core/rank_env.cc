#include "coordinator/core/rank_env.h"

#include <algorithm>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/net.h"

namespace ringmaster {

std::map<std::string, std::string> BuildRankEnv(const v1::Job& job, int rank,
                                                const RankEnvContext& context) {
  const v1::RankStatus& self = job.ranks(rank);
  // Workers in order of their first rank are torchrun's "nodes" (groups).
  std::vector<std::string> groups;
  int local_rank = 0;
  int local_world_size = 0;
  for (const v1::RankStatus& r : job.ranks()) {
    if (std::find(groups.begin(), groups.end(), r.worker_id()) == groups.end()) {
      groups.push_back(r.worker_id());
    }
    if (r.worker_id() == self.worker_id()) {
      if (r.rank() < rank) ++local_rank;
      ++local_world_size;
    }
  }
  const int group_rank =
      static_cast<int>(std::find(groups.begin(), groups.end(), self.worker_id()) - groups.begin());

  std::map<std::string, std::string> env(job.spec().env().begin(), job.spec().env().end());
  env.emplace("OMP_NUM_THREADS", "1");  // keeps a value the spec set
  // The attempt's first group. A trainer rank started again after its group
  // shrank learns its place in the group from its announcement
  // (domain/group_generation.h).
  const std::string world = absl::StrCat(std::max(job.world_size(), job.ranks_size()));
  env["RANK"] = absl::StrCat(rank);
  env["LOCAL_RANK"] = absl::StrCat(local_rank);
  env["WORLD_SIZE"] = world;
  env["LOCAL_WORLD_SIZE"] = absl::StrCat(local_world_size);
  env["GROUP_RANK"] = absl::StrCat(group_rank);
  env["GROUP_WORLD_SIZE"] = absl::StrCat(groups.size());
  env["ROLE_RANK"] = absl::StrCat(rank);
  env["ROLE_NAME"] = "default";
  env["ROLE_WORLD_SIZE"] = world;
  env["MASTER_ADDR"] = job.master_addr();
  env["MASTER_PORT"] = absl::StrCat(job.master_port());
  env["TORCHELASTIC_RESTART_COUNT"] = absl::StrCat(job.attempt());
  env["TORCHELASTIC_MAX_RESTARTS"] = absl::StrCat(job.spec().max_restarts());
  env["TORCHELASTIC_RUN_ID"] = job.id();
  // By index; the worker, which knows its GPUs' UUIDs, names them by those.
  env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(self.gpus(), ",");
  env["RINGMASTER_JOB_ID"] = job.id();
  env["RINGMASTER_COORDINATOR"] = context.coordinator_address;
  env["RINGMASTER_CHECKPOINT_DIR"] = absl::StrCat(CheckpointRoot(job, context), "/", job.id());
  if (context.signer != nullptr) {
    env["RINGMASTER_JOB_TOKEN"] = context.signer->Job(job.id(), job.attempt());
  }
  return env;
}

std::string CheckpointRoot(const v1::Job& job, const RankEnvContext& context) {
  return job.spec().checkpoint_dir().empty() ? context.checkpoint_dir : job.spec().checkpoint_dir();
}

int64_t CollectiveTimeoutSeconds(const v1::JobSpec& spec) {
  return spec.hang_timeout_s() > 0 ? spec.hang_timeout_s() + 30 : 1800;
}

void SetReplicaPeer(const v1::Job& job, int rank, v1::StartRank* start) {
  // The job's workers in order of their first rank; each sends to the next
  // one on another host, else to the next one.
  std::vector<const v1::RankStatus*> workers;
  for (const v1::RankStatus& r : job.ranks()) {
    if (r.left_generation() > 0) continue;  // its worker may be gone
    if (std::none_of(workers.begin(), workers.end(),
                     [&](const v1::RankStatus* w) { return w->worker_id() == r.worker_id(); })) {
      workers.push_back(&r);
    }
  }
  if (workers.size() < 2) return;
  const v1::RankStatus& self = job.ranks(rank);
  const size_t at =
      std::find_if(workers.begin(), workers.end(),
                   [&](const v1::RankStatus* w) { return w->worker_id() == self.worker_id(); }) -
      workers.begin();
  const v1::RankStatus* peer = workers[(at + 1) % workers.size()];
  for (size_t i = 1; i < workers.size(); ++i) {
    const v1::RankStatus* next = workers[(at + i) % workers.size()];
    if (HostOfAddress(next->worker_address()) != HostOfAddress(self.worker_address())) {
      peer = next;
      break;
    }
  }
  start->mutable_replica_to()->set_worker_id(peer->worker_id());
  start->mutable_replica_to()->set_address(peer->worker_address());
}

bool TakesSnapshots(const v1::TrainerSpec& trainer) {
  return !trainer.has_snapshot_every_steps() || trainer.snapshot_every_steps() > 0;
}

v1::StartRank BuildStartRank(const v1::Job& job, int rank, const RankEnvContext& context) {
  v1::StartRank start;
  start.mutable_rank()->set_job_id(job.id());
  start.mutable_rank()->set_attempt(job.attempt());
  start.mutable_rank()->set_rank(rank);
  start.set_generation(job.group_generation());
  for (auto& [key, value] : BuildRankEnv(job, rank, context)) {
    (*start.mutable_env())[key] = value;
  }
  if (job.spec().has_trainer()) {
    start.add_argv("ringmaster-trainer");
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(job.spec().trainer(), &json);
    (*start.mutable_env())["RINGMASTER_TRAINER_SPEC"] = json;
    (*start.mutable_env())["RINGMASTER_COLLECTIVE_TIMEOUT_S"] =
        absl::StrCat(CollectiveTimeoutSeconds(job.spec()));
    if (job.spec().preflight()) (*start.mutable_env())["RINGMASTER_PREFLIGHT"] = "1";
    (*start.mutable_env())["RINGMASTER_GROUP_GENERATION"] = absl::StrCat(job.group_generation());
    (*start.mutable_env())["RINGMASTER_REGROUP_TIMEOUT_S"] =
        absl::StrCat(absl::ToInt64Seconds(absl::Ceil(context.regroup_timeout, absl::Seconds(1))));
    start.set_snapshot_segment(TakesSnapshots(job.spec().trainer()));
  } else {
    *start.mutable_argv() = job.spec().command();
    // The worker runs the check first, with the trainer binary.
    start.set_preflight_prelude(job.spec().preflight());
    // For ringmaster.checkpoint; untouched, it takes no memory.
    start.set_snapshot_segment(true);
  }
  if (start.snapshot_segment()) {
    if (context.signer != nullptr) start.set_replica_credential(context.signer->Replica(job.id()));
    SetReplicaPeer(job, rank, &start);
  }
  start.set_working_dir(job.spec().working_dir());
  if (job.spec().has_code()) *start.mutable_code() = job.spec().code();
  start.set_image(job.spec().image());
  start.set_image_pull(job.spec().image_pull());
  // The trainer checkpoints; a program checkpoints where the spec says.
  if (job.spec().has_trainer() || !job.spec().checkpoint_dir().empty()) {
    start.set_checkpoint_dir(CheckpointRoot(job, context));
    start.set_resume_from_dir(job.resume_from_dir());
  }
  start.set_slot(job.ranks(rank).slot());
  *start.mutable_gpus() = job.ranks(rank).gpus();
  start.set_memory_bytes(job.spec().resources().memory_mb() * (int64_t{1} << 20));
  start.set_cpus(job.spec().resources().cpus());
  return start;
}

}  // namespace ringmaster
