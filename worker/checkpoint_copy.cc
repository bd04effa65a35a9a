#include "worker/checkpoint_copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"

namespace ringmaster {
namespace {

// Refused by permissions, as opposed to gone or not a directory.
bool Denied(int error) { return error == EACCES || error == EPERM; }

struct Walk {
  uid_t source_owner;
  const std::optional<RunAs>& owner;
  const std::optional<RunAs>& reader;
  const CheckpointCopyLimits& limits;
  int entries = 0;
  CheckpointCopied copied;
};

absl::Status GiveTo(int fd, const struct stat& st, const std::optional<RunAs>& owner,
                    const std::string& path) {
  if (owner && fchown(fd, owner->uid, owner->gid) != 0) return ErrnoError(path + ": chown");
  if (fchmod(fd, st.st_mode & 0777) != 0) return ErrnoError(path + ": chmod");
  return absl::OkStatus();
}

absl::Status CopyFile(int from_dir, int to_dir, const char* name, const struct stat& seen,
                      const std::string& path, Walk& walk) {
  UniqueFd in;
  int open_errno = 0;
  {
    FsIdentity as(walk.reader);
    in = UniqueFd(openat(from_dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    open_errno = errno;
  }
  // The earlier job's own file that it may not read: an error, not a file
  // quietly left out.
  if (in.get() < 0 && Denied(open_errno)) {
    errno = open_errno;
    return ErrnoError(path);
  }
  struct stat st {};
  // Still the file looked at: not swapped for another since.
  if (in.get() < 0 || fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_ino != seen.st_ino || st.st_dev != seen.st_dev || st.st_uid != walk.source_owner) {
    ++walk.copied.passed_over;
    return absl::OkStatus();
  }
  UniqueFd out;
  {
    FsIdentity as(walk.owner);
    out =
        UniqueFd(openat(to_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (out.get() < 0) return ErrnoError(path);
    RETURN_IF_ERROR(GiveTo(out.get(), st, walk.owner, path));
  }
  off_t left = st.st_size;
  while (left > 0) {
    ssize_t n = copy_file_range(in.get(), nullptr, out.get(), nullptr, left, 0);
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
      char buffer[1 << 16];  // a file system without it: by hand
      n = read(in.get(), buffer, std::min<off_t>(left, sizeof(buffer)));
      for (ssize_t done = 0; n > 0 && done < n;) {
        const ssize_t w = write(out.get(), buffer + done, n - done);
        if (w < 0 && errno != EINTR) return ErrnoError(path);
        if (w > 0) done += w;
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(path);
    if (n == 0) break;  // shorter than it was
    left -= n;
    walk.copied.bytes += n;
  }
  ++walk.copied.files;
  return absl::OkStatus();
}

absl::Status CopyDir(int from_dir, int to_dir, const std::string& path, int depth, Walk& walk);

// One entry of directory `from_dir`, `name` (`child` in errors): a regular
// file or a directory of the earlier job's is copied, anything else passed
// over; one it may not look at is an error.
absl::Status CopyEntry(int from_dir, int to_dir, const std::string& name, const std::string& child,
                       int depth, Walk& walk) {
  struct stat st {};
  UniqueFd sub;
  int looked = 0;  // errno of the look, or of opening a directory
  {
    FsIdentity as(walk.reader);
    if (fstatat(from_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      looked = errno;
    } else if (S_ISDIR(st.st_mode) && st.st_uid == walk.source_owner) {
      sub =
          UniqueFd(openat(from_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub.valid()) looked = errno;
    }
  }
  if (Denied(looked)) {
    errno = looked;
    return ErrnoError(child);
  }
  if (looked != 0 || st.st_uid != walk.source_owner ||
      !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
    ++walk.copied.passed_over;
    return absl::OkStatus();
  }
  if (S_ISREG(st.st_mode)) return CopyFile(from_dir, to_dir, name.c_str(), st, child, walk);
  UniqueFd made;
  {
    FsIdentity as(walk.owner);
    if (mkdirat(to_dir, name.c_str(), 0700) == 0) {
      made =
          UniqueFd(openat(to_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (!made.valid()) return ErrnoError(child);
  }
  // Its contents first, then its mode: a directory copied read-only would
  // refuse them.
  RETURN_IF_ERROR(CopyDir(sub.get(), made.get(), child, depth + 1, walk));
  FsIdentity as(walk.owner);
  return GiveTo(made.get(), st, walk.owner, child);
}

absl::Status CopyDir(int from_dir, int to_dir, const std::string& path, int depth, Walk& walk) {
  if (depth > walk.limits.max_depth) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is more than ", walk.limits.max_depth, " directories deep"));
  }
  const int listed = dup(from_dir);
  DIR* dir = listed < 0 ? nullptr : fdopendir(listed);
  if (dir == nullptr) {
    if (listed >= 0) close(listed);
    return ErrnoError(path);
  }
  absl::Status status;
  while (status.ok()) {
    errno = 0;
    const dirent* entry = readdir(dir);
    if (entry == nullptr) {
      if (errno != 0) status = ErrnoError(path);
      break;
    }
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (++walk.entries > walk.limits.max_entries) {
      status = absl::FailedPreconditionError(
          absl::StrCat(path, " holds more than ", walk.limits.max_entries, " entries"));
      break;
    }
    status = CopyEntry(from_dir, to_dir, name, absl::StrCat(path, "/", name), depth, walk);
  }
  closedir(dir);
  return status;
}

}  // namespace

bool RemoveTreeAt(int dir_fd, const std::string& name, int depth) {
  if (unlinkat(dir_fd, name.c_str(), 0) == 0) return true;  // not a directory
  UniqueFd dir(openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0 || depth > 64) return false;
  const int listed = dup(dir.get());
  DIR* entries = listed < 0 ? nullptr : fdopendir(listed);
  if (entries == nullptr) {
    if (listed >= 0) close(listed);
    return false;
  }
  bool removed = true;
  while (const dirent* entry = readdir(entries)) {
    const std::string child = entry->d_name;
    if (child != "." && child != "..") removed &= RemoveTreeAt(dir.get(), child, depth + 1);
  }
  closedir(entries);
  return removed && unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0;
}

FsIdentity::FsIdentity(const std::optional<RunAs>& as) {
  if (!as) return;
  active_ = true;
  previous_gid_ = setfsgid(as->gid);
  previous_uid_ = setfsuid(as->uid);
}

FsIdentity::~FsIdentity() {
  if (!active_) return;
  setfsuid(previous_uid_);
  setfsgid(previous_gid_);
}

absl::StatusOr<CheckpointCopied> CopyCheckpointTree(int from_fd, int to_fd,
                                                    const std::optional<RunAs>& owner,
                                                    const std::optional<RunAs>& reader,
                                                    const CheckpointCopyLimits& limits) {
  struct stat st {};
  if (fstat(from_fd, &st) != 0) return ErrnoError("the earlier job's checkpoint directory");
  Walk walk{st.st_uid, owner, reader, limits};
  RETURN_IF_ERROR(CopyDir(from_fd, to_fd, "the earlier job's checkpoint directory", 0, walk));
  return walk.copied;
}

}  // namespace ringmaster
