#include "worker/state_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/private_dir.h"

namespace ringmaster {

absl::StatusOr<int> LockStateDir(const std::string& dir) {
  if (absl::Status s = MakePrivateDir(dir); !s.ok()) return s;
  const std::string path = absl::StrCat(dir, "/worker.lock");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return absl::FailedPreconditionError(absl::StrCat("open ", path, ": ", strerror(errno)));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char holder[32] = {};
    (void)!pread(fd, holder, sizeof(holder) - 1, 0);
    close(fd);
    if (err != EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat("lock ", path, ": ", strerror(err)));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "state dir ", dir, " is in use by another worker (pid ", absl::StripAsciiWhitespace(holder),
        "); give each worker its own --state-dir"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the pid; only the message of a refused
    // second worker is poorer.
  }
  return fd;
}

}  // namespace ringmaster
