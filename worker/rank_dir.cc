#include "worker/rank_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringmaster {
namespace {

std::string KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

}  // namespace

absl::StatusOr<RankDir> RankDir::Open(const std::string& path, uid_t rank_uid) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    const int error = errno;
    if (error == ENOENT) return absl::NotFoundError(absl::StrCat("no directory ", path));
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open the directory ", path, ": ", std::strerror(error)));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return absl::InternalError(absl::StrCat("stat ", path, ": ", std::strerror(errno)));
  }
  if (st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, " belongs to uid ", st.st_uid, ", not to this worker"));
  }
  return RankDir(std::move(fd), path, rank_uid);
}

absl::StatusOr<UniqueFd> RankDir::OpenFile(const std::string& name) const {
  const std::string path = absl::StrCat(path_, "/", name);
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" is not a file name"));
  }
  // O_NONBLOCK: a FIFO opens at once, and is refused below.
  UniqueFd fd(openat(fd_.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    const int error = errno;
    if (error == ENOENT) return absl::NotFoundError(absl::StrCat("no file ", path));
    if (error == ELOOP) return absl::PermissionDeniedError(absl::StrCat(path, " is a link"));
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(error)));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return absl::InternalError(absl::StrCat("stat ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(absl::StrCat(path, " is ", KindOf(st.st_mode)));
  }
  if (st.st_uid != rank_uid_) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, " belongs to uid ", st.st_uid, ", not to the rank's uid ", rank_uid_));
  }
  // A second name: a hard link to a file the rank did not write.
  if (st.st_nlink != 1) {
    return absl::PermissionDeniedError(absl::StrCat(path, " has ", st.st_nlink, " links"));
  }
  return fd;
}

absl::StatusOr<std::string> RankDir::Read(const std::string& name, int64_t offset,
                                          size_t max_bytes) const {
  absl::StatusOr<UniqueFd> fd = OpenFile(name);
  if (!fd.ok()) return fd.status();
  return ReadAt(fd->get(), offset, max_bytes);
}

absl::StatusOr<int64_t> RankDir::Size(const std::string& name) const {
  absl::StatusOr<UniqueFd> fd = OpenFile(name);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (fstat(fd->get(), &st) != 0) {
    return absl::InternalError(absl::StrCat("stat ", path_, "/", name, ": ", std::strerror(errno)));
  }
  return static_cast<int64_t>(st.st_size);
}

absl::StatusOr<std::string> ReadAt(int fd, int64_t offset, size_t max_bytes) {
  std::string text(max_bytes, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = pread(fd, text.data() + got, text.size() - got, offset + got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("read: ", std::strerror(errno)));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace ringmaster
