#include "worker/job_shm.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/private_dir.h"
#include "worker/machine.h"

namespace ringmaster {

int64_t DefaultShmBytes() {
  const int64_t memory = MachineMemoryBytes();
  return memory > 0 ? memory / 2 : int64_t{64} << 20;
}

JobShm::JobShm(std::string root, int64_t size_bytes)
    : root_(std::move(root)), size_bytes_(size_bytes) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(root_, error)) {
    Unmount(entry.path().string());
  }
}

JobShm::~JobShm() {
  std::vector<std::string> mounted;
  {
    MutexLock lock(&mu_);
    for (const auto& [job_id, job] : jobs_) mounted.push_back(absl::StrCat(root_, "/", job_id));
  }
  for (const std::string& dir : mounted) Unmount(dir);
}

absl::StatusOr<std::string> JobShm::Acquire(const std::string& job_id, const RunAs& owner) {
  const std::string dir = absl::StrCat(root_, "/", job_id);
  {
    MutexLock lock(&mu_);
    auto idle = [this, &job_id]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      auto it = jobs_.find(job_id);
      return it == jobs_.end() || !it->second.busy;
    };
    mu_.Await(absl::Condition(&idle));
    Job& job = jobs_[job_id];
    if (job.ranks > 0) {
      ++job.ranks;
      return dir;
    }
    job.busy = true;
  }
  absl::Status mounted = MakePrivateDir(root_, 0700);
  if (mounted.ok() && mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    mounted = absl::InternalError(absl::StrCat("mkdir ", dir, ": ", std::strerror(errno)));
  }
  if (mounted.ok()) {
    const std::string options =
        absl::StrCat("size=", size_bytes_, ",mode=0700,uid=", owner.uid, ",gid=", owner.gid);
    if (mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      mounted = absl::InternalError(absl::StrCat("mounting the job's /dev/shm (a tmpfs at ", dir,
                                                 "): ", std::strerror(errno)));
      rmdir(dir.c_str());
    }
  }
  MutexLock lock(&mu_);
  Job& job = jobs_[job_id];
  job.busy = false;
  if (!mounted.ok()) {
    jobs_.erase(job_id);
    return mounted;
  }
  job.ranks = 1;
  return dir;
}

void JobShm::Release(const std::string& job_id) {
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end() || it->second.ranks == 0) return;
    if (--it->second.ranks > 0) return;
    it->second.busy = true;
  }
  Unmount(absl::StrCat(root_, "/", job_id));
  MutexLock lock(&mu_);
  jobs_.erase(job_id);
}

void JobShm::Unmount(const std::string& dir) {
  // Detached: a process that escaped its rank's group may still hold it;
  // it goes once that one does.
  if (umount2(dir.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    spdlog::warn("cannot unmount {}: {}", dir, std::strerror(errno));
  }
  if (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("cannot remove {}: {}", dir, std::strerror(errno));
  }
}

}  // namespace ringmaster
