// The code a job was submitted with (proto CodePackage), on this worker:
// fetched from the coordinator, checked against its SHA-256 and unpacked
// once per job into <root>/<job id>/code (mode 0700), owned by the job's
// ranks' user; its ranks start there. A worker restarted finds what it unpacked before.
#ifndef RINGMASTER_WORKER_JOB_CODE_H_
#define RINGMASTER_WORKER_JOB_CODE_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/code_archive.h"
#include "common/mutex.h"
#include "common/subprocess.h"
#include "proto/job.pb.h"

namespace ringmaster {

// Thread-safe: rank threads call Prepare (blocking) and the coordinator
// link calls Delete. One mutex over which job is being prepared; fetching
// and unpacking happen outside it, one at a time per job.
class JobCode {
 public:
  // Copies the archive named `sha256` into a new file at `path`.
  using Fetch = std::function<absl::Status(const std::string& sha256, const std::string& path)>;

  JobCode(std::string root, UnpackLimits limits, Fetch fetch);

  // The directory of the job's code, ready the first time it is asked for
  // (the ranks of one job on this worker wait for one fetch). Errors name
  // the archive and what failed; a later call tries again.
  // `owner` is the job's ranks' user (nullopt: the worker's).
  absl::StatusOr<std::string> Prepare(const std::string& job_id, const v1::CodePackage& code,
                                      const std::optional<RunAs>& owner);
  // Removes the job's directory (no rank of the job runs).
  void Delete(const std::string& job_id);

 private:
  struct Job {
    bool busy = false;  // a Prepare is fetching or unpacking
    std::string ready;  // the sha256 unpacked, once it is
  };
  absl::StatusOr<std::string> Unpack(const std::string& job_id, const std::string& sha256,
                                     const std::optional<RunAs>& owner);

  const std::string root_;
  const UnpackLimits limits_;
  const Fetch fetch_;
  Mutex mu_;
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_JOB_CODE_H_
