// Who a worker's ranks run as. By default each job has an identity of its
// own: a uid (and a gid of the same number) from a range the worker owns
// (--rank-uid-range), with no supplementary groups, so that a rank of one
// job can neither signal, trace nor read the files of another job's ranks,
// as systemd's DynamicUser= does for services. The number is the job's
// number modulo the range's size, so every worker with the same range gives
// a job the same uid (files on shared storage, such as checkpoints, stay
// the job's). --rank-user puts every job under one user instead.
#ifndef RINGMASTER_WORKER_RANK_IDENTITY_H_
#define RINGMASTER_WORKER_RANK_IDENTITY_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/subprocess.h"

namespace ringmaster {

// Whether this process may run children as another user: it is root, or it
// has CAP_SETUID and CAP_SETGID in effect (a non-root worker given them as
// ambient capabilities, as the systemd unit does).
bool CanSwitchUsers();

// The ranks' user for `rank_user` ("user[:group]"; empty: "nobody" when
// this process may switch users, else its own): nullopt when ranks run as
// the worker does. FAILED_PRECONDITION when a worker that may not switch
// is asked for another user, INVALID_ARGUMENT for one that does not exist.
absl::StatusOr<std::optional<RunAs>> RankIdentity(const std::string& rank_user);

struct UidRange {
  uid_t first = 200000;
  uid_t count = 65536;  // 200000-265535
};
inline constexpr char kDefaultRankUidRange[] = "200000-265535";

// "FIRST-LAST" (inclusive): INVALID_ARGUMENT naming the flag unless
// 1000 <= FIRST <= LAST < 2^31 - 1.
absl::StatusOr<UidRange> ParseUidRange(const std::string& text);

// Thread-safe (immutable).
class RankIdentities {
 public:
  // Every job's ranks as `shared` (nullopt: as the worker).
  static RankIdentities Shared(std::optional<RunAs> shared);
  // Each job's ranks as its own uid from `range`; its home (and TMPDIR) is
  // <jobs_dir>/<job>/home.
  static RankIdentities PerJob(UidRange range, std::string jobs_dir);

  bool per_job() const { return per_job_; }
  // Every job's user when not per job (nullopt: the worker's own, or per job).
  const std::optional<RunAs>& shared() const { return shared_; }
  // The job's identity (nullopt: as the worker). FAILED_PRECONDITION when
  // the job's uid is still held by another job's files on this worker (job
  // numbers a multiple of the range's size apart).
  absl::StatusOr<std::optional<RunAs>> ForJob(const std::string& job_id) const;
  // For the start-up log line: "nobody (uid 65534, gid 65534)", "a uid of
  // its own per job, from 200000-265535", "the worker's user".
  std::string Describe() const;

 private:
  RankIdentities() = default;
  bool per_job_ = false;
  std::optional<RunAs> shared_;
  UidRange range_;
  std::string jobs_dir_;
};

// From the worker's flags: --rank-user wins (both given: INVALID_ARGUMENT);
// else a uid per job when this process may switch users; else the worker's
// own user.
absl::StatusOr<RankIdentities> ChooseRankIdentities(const std::string& rank_user,
                                                    const std::string& uid_range,
                                                    const std::string& jobs_dir);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_RANK_IDENTITY_H_
