// A directory of the worker's in which a rank may write, and the files the
// worker reads there: a rank's own directory (jobs/<job>/rank-R.error/)
// holds its error file, the trainer's flight record and Python's stacks.
//
// A rank may put anything in place of such a file: a link to a file only
// the worker may read (the CA's key, the coordinator's credential key,
// /etc/shadow), a link into another job's files, a FIFO that blocks its
// reader, a hard link, a directory, a huge file. The worker, root on a root
// worker, must learn nothing through it that the rank could not read
// itself, and must never wait on it. So each file is opened relative to
// the directory's descriptor, without following a link or blocking, and is
// used only when its descriptor shows a regular file of the rank's own
// user with one link; every read is bounded.
#ifndef RINGMASTER_WORKER_RANK_DIR_H_
#define RINGMASTER_WORKER_RANK_DIR_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ringmaster {

// The files a rank leaves for the worker in its own directory.
inline constexpr char kErrorFile[] = "error.json";     // TORCHELASTIC_ERROR_FILE
inline constexpr char kFlightRecordFile[] = "flight";  // the trainer's flight record
inline constexpr char kPythonStacksFile[] = "stacks";  // where faulthandler writes

// Immutable once opened; its methods may be called from any thread.
class RankDir {
 public:
  // Opens `path`, which must be a directory of this process's user (the
  // worker made it; a link in its place is refused). `rank_uid` is the
  // user the rank runs as: the owner its files must have.
  static absl::StatusOr<RankDir> Open(const std::string& path, uid_t rank_uid);

  // `name` in the directory, opened for reading: NOT_FOUND when there is
  // none; PERMISSION_DENIED, saying what it is, for anything but a regular
  // file of the rank's user with one link.
  absl::StatusOr<UniqueFd> OpenFile(const std::string& name) const;
  // At most `max_bytes` of `name` from `offset` on (fewer at its end).
  absl::StatusOr<std::string> Read(const std::string& name, int64_t offset, size_t max_bytes) const;
  // Its size in bytes.
  absl::StatusOr<int64_t> Size(const std::string& name) const;

  const std::string& path() const { return path_; }

 private:
  RankDir(UniqueFd fd, std::string path, uid_t rank_uid)
      : fd_(std::move(fd)), path_(std::move(path)), rank_uid_(rank_uid) {}

  UniqueFd fd_;
  std::string path_;
  uid_t rank_uid_;
};

// At most `max_bytes` of the open file `fd` from `offset` on.
absl::StatusOr<std::string> ReadAt(int fd, int64_t offset, size_t max_bytes);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_RANK_DIR_H_
