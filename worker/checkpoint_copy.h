// What a job that resumes from an earlier one (JobSpec.resume_from) is
// given of that job's checkpoints: a copy, made by the worker, into its own
// checkpoint directory. The earlier job's directory stays its own uid's,
// mode 0700: nothing of it is made readable to another uid. A worker that
// is not root (the systemd unit's, with CAP_SETUID) reads the earlier
// job's files as that job's uid, and writes the copy as the new job's,
// through the calling thread's file-system identity (FsIdentity).
#ifndef RINGMASTER_WORKER_CHECKPOINT_COPY_H_
#define RINGMASTER_WORKER_CHECKPOINT_COPY_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/subprocess.h"

namespace ringmaster {

// This thread's file-system uid and gid (setfsuid, setfsgid: they decide
// what open, mkdir and the like may do, and no other thread's) are `as`'s
// while the object lives; nullopt changes nothing. Needs CAP_SETUID and
// CAP_SETGID; without them the identity stays, and access is checked as
// before.
class FsIdentity {
 public:
  explicit FsIdentity(const std::optional<RunAs>& as);
  ~FsIdentity();
  FsIdentity(const FsIdentity&) = delete;
  FsIdentity& operator=(const FsIdentity&) = delete;

 private:
  bool active_ = false;
  uid_t previous_uid_ = 0;
  gid_t previous_gid_ = 0;
};

struct CheckpointCopyLimits {
  int max_entries = 100000;  // files and directories
  int max_depth = 32;
};

struct CheckpointCopied {
  int files = 0;
  int64_t bytes = 0;
  int passed_over = 0;  // links, devices, files of another owner
};

// Copies the tree of directory `from_fd` into directory `to_fd`. Only
// directories and regular files that `from_fd`'s owner owns are copied: a
// link, a FIFO, a device, or a file of another owner (a hard link to
// someone else's) is passed over, so that what the earlier job's ranks left
// there can make the worker read nothing else. Each file is copied in the
// kernel (copy_file_range: a reflink where the file system can), with its
// permission bits (setuid, setgid and sticky cleared); with `owner`, every
// copy is given to its uid and gid, and made with its file-system identity;
// with `reader`, the earlier job's files are opened with that one's.
// FAILED_PRECONDITION beyond `limits`; the errno of a file that cannot be
// copied, naming it.
absl::StatusOr<CheckpointCopied> CopyCheckpointTree(int from_fd, int to_fd,
                                                    const std::optional<RunAs>& owner,
                                                    const std::optional<RunAs>& reader = {},
                                                    const CheckpointCopyLimits& limits = {});

// Removes `name` in directory `dir_fd` and all it holds, never following a
// link: each directory is opened relative to its parent, O_NOFOLLOW, so a
// link put in a directory's place is removed, not what it points to.
// Best effort; false when something stayed.
bool RemoveTreeAt(int dir_fd, const std::string& name, int depth = 0);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_CHECKPOINT_COPY_H_
