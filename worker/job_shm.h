// A /dev/shm of each job's own on this worker. The host's /dev/shm is one
// directory for every process: other jobs' file names show there, and
// files outlive their job. A job whose ranks get a mount namespace of
// their own (a uid per job, on a worker that may mount) gets instead a
// tmpfs at <root>/<job>, mode 0700 and owned by the job's user, sized by
// --shm-size-mb, which each of its ranks here sees at /dev/shm: its ranks
// on this worker share it (the trainer's shared-memory all-reduce meets
// there), no other job sees it, and it is unmounted, with what it holds,
// when the job's last rank here exits.
#ifndef RINGMASTER_WORKER_JOB_SHM_H_
#define RINGMASTER_WORKER_JOB_SHM_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "common/subprocess.h"

namespace ringmaster {

// Thread-safe: rank threads acquire and release. One mutex over the
// counts; mounting and unmounting happen outside it, one at a time per job.
class JobShm {
 public:
  // Unmounts and removes what an earlier worker left below `root`.
  JobShm(std::string root, int64_t size_bytes);
  // Unmounts every job's.
  ~JobShm();

  // The job's tmpfs, mounted by its first rank here; each Acquire is
  // matched by a Release. INTERNAL naming the mount that failed.
  absl::StatusOr<std::string> Acquire(const std::string& job_id, const RunAs& owner);
  // Its last rank here has exited: unmounted, with what it holds.
  void Release(const std::string& job_id);

 private:
  struct Job {
    int ranks = 0;      // acquired, not yet released
    bool busy = false;  // being mounted or unmounted
  };
  void Unmount(const std::string& dir);

  const std::string root_;
  const int64_t size_bytes_;
  Mutex mu_;
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
};

// Half of this machine's memory, as the host's /dev/shm is by default.
int64_t DefaultShmBytes();

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_JOB_SHM_H_
