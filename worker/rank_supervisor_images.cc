// RankSupervisor's part for ranks of jobs with an image: the image pulled
// (tried again while its registry cannot be reached), the GPUs' CDI edits,
// and the launch moved into a container (worker/container_launch.h).
#include "worker/rank_supervisor.h"

#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "domain/image_reference.h"
#include "worker/cdi.h"
#include "worker/checkpoint_copy.h"
#include "worker/container_launch.h"

namespace ringmaster {
namespace {

// OK when the job's user may reach `dir` on the host: the runtime mounts it
// as root, past directories the job could not pass through itself.
absl::Status ReachableAs(const std::string& dir, const std::optional<RunAs>& job) {
  int fd;
  {
    FsIdentity as(job);
    fd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  }
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat("checkpoint_dir ", dir, ": the job's user ",
                                                    job ? job->name : "", " cannot reach it (",
                                                    strerror(errno), ")"));
  }
  close(fd);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RankSupervisor::Contained> RankSupervisor::EnterImage(Rank* self,
                                                                     const v1::StartRank& start,
                                                                     LaunchSpec* spec) {
  if (options_.images == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("this worker runs no images (", start.image(),
                                                      "): it was started without an OCI runtime"));
  }
  ASSIGN_OR_RETURN(ImageReference ref, ParseImageReference(start.image()));
  // The runtime resolves the binds' paths as root: the job's checkpoint
  // directory is one only if no job can change what its path leads to.
  std::string checkpoint_root;
  if (!start.checkpoint_dir().empty()) {
    RETURN_IF_ERROR(OnlyRootCanChange(start.checkpoint_dir(), "checkpoint_dir"));
    RETURN_IF_ERROR(ReachableAs(start.checkpoint_dir(), spec->run_as));
    checkpoint_root = RootHolding(start.checkpoint_dir(), CheckpointRoots());
  }
  // Before the image is held: nothing to give back when it fails.
  ASSIGN_OR_RETURN(ContainerEdits gpus, GpuEdits(start));
  const Key key{start.rank().job_id(), start.rank().attempt(), start.rank().rank()};
  auto progress = [&](const ImageStore::Progress& p) {
    v1::ImagePull pull;
    *pull.mutable_rank() = start.rank();
    pull.set_image(ref.Canonical());
    pull.set_done_bytes(p.done_bytes);
    pull.set_total_bytes(p.total_bytes);
    // Held up by other images' pulls: the job waits, as behind a
    // registry it cannot reach, rather than meet its start timeout.
    if (p.waiting_for_slot) {
      pull.set_waiting(
          absl::StrCat("waiting for one of this worker's ", options_.image_pulls, " pull slots"));
    }
    MutexLock lock(&mu_);
    pulls_[key] = std::move(pull);
    return !self->stop_requested;  // a cleared rank's pull is not waited for
  };
  progress({});  // waiting for the pull, or for a slot to pull in
  absl::StatusOr<ImageStore::Held> acquired = AcquireImage(self, start, ref, progress);
  {
    MutexLock lock(&mu_);
    pulls_.erase(key);
  }
  if (!acquired.ok()) return acquired.status();
  ImageStore::Held held = *std::move(acquired);
  ContainerOptions container = options_.container;
  // What the rank's environment names on the host, at the same paths: the
  // job's directory (its code, home and error files), its checkpoints,
  // the ringmaster package. Their mount points are made in tmpfs masks
  // over the worker's jobs directory and the checkpoint root.
  container.masks.push_back(options_.jobs_dir);
  container.binds.push_back({absl::StrCat(options_.jobs_dir, "/", start.rank().job_id()),
                             absl::StrCat(options_.jobs_dir, "/", start.rank().job_id()), false});
  if (!checkpoint_root.empty()) container.masks.push_back(checkpoint_root);
  if (!start.checkpoint_dir().empty()) {
    container.binds.push_back({start.checkpoint_dir(), start.checkpoint_dir(), false});
  }
  if (auto python = options_.base_env.find("PYTHONPATH"); python != options_.base_env.end()) {
    for (absl::string_view dir : absl::StrSplit(python->second, ':', absl::SkipEmpty())) {
      container.binds.push_back({std::string(dir), std::string(dir), true});
    }
  }
  // The image's own, unless the job set them.
  for (const char* name : {"PATH", "LANG"}) {
    if (start.env().count(name) == 0) container.host_env.emplace_back(name);
  }
  container.gpus = std::move(gpus);
  // A cgroup below the rank's, so that its limit and its kill hold.
  container.cgroups_path = spec->name;
  static std::atomic<int64_t> containers{0};
  const std::string id = absl::StrCat(spec->name, "-", containers++);
  absl::StatusOr<LaunchSpec> launch = InImage(*spec, held.rootfs, held.reference, id, container);
  if (!launch.ok()) {
    RemoveContainer(options_.container, id);
    options_.images->Release(held);
    return launch.status();
  }
  *spec = *std::move(launch);
  return Contained{std::move(held), id};
}

absl::StatusOr<ContainerEdits> RankSupervisor::GpuEdits(const v1::StartRank& start) const {
  if (start.gpus().empty()) return ContainerEdits{};
  std::vector<std::string> names;
  for (int index : start.gpus()) {
    for (const v1::Gpu& gpu : options_.gpus) {
      if (gpu.index() != index) continue;
      names.push_back(
          absl::StrCat("nvidia.com/gpu=", gpu.uuid().empty() ? absl::StrCat(index) : gpu.uuid()));
    }
  }
  absl::StatusOr<ContainerEdits> cdi = CdiEdits(options_.cdi_spec_dirs, names);
  if (cdi.ok()) return cdi;
  // This worker's setup, not the job's: another worker may run it.
  return absl::FailedPreconditionError(absl::StrCat(
      "this worker cannot give its GPUs to a rank in an image: ", cdi.status().message(),
      " (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml; docs/gpu.md)"));
}

absl::StatusOr<ImageStore::Held> RankSupervisor::AcquireImage(
    Rank* self, const v1::StartRank& start, const ImageReference& ref,
    const ImageStore::ProgressFn& progress) {
  const Key key{start.rank().job_id(), start.rank().attempt(), start.rank().rank()};
  absl::Duration backoff = options_.image_pull_backoff;
  for (;;) {
    absl::StatusOr<ImageStore::Held> acquired =
        options_.images->Acquire(ref, start.image_pull() == "always", progress);
    if (acquired.ok() || !absl::IsUnavailable(acquired.status())) return acquired;
    const std::string said(acquired.status().message());
    spdlog::warn("job {} rank {}: {}; trying again in {}", start.rank().job_id(),
                 start.rank().rank(), said, absl::FormatDuration(backoff));
    const absl::string_view why =
        absl::StripPrefix(said, absl::StrCat("pulling ", ref.Canonical(), ": "));
    MutexLock lock(&mu_);
    v1::ImagePull& pull = pulls_[key];
    pull.set_waiting(absl::StrCat(why, "; trying again in ", absl::FormatDuration(backoff)));
    if (mu_.AwaitWithTimeout(absl::Condition(&self->stop_requested), backoff)) {
      return absl::CancelledError(absl::StrCat("no longer pulling ", ref.Canonical()));
    }
    pull.clear_waiting();
    backoff = std::min(2 * backoff, options_.image_pull_backoff_limit);
  }
}

}  // namespace ringmaster
