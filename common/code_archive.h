// A job's code travels as a gzip-compressed POSIX tar (ustar) archive of
// directories, regular files and symbolic links: `tar tzf` lists one. The
// writer packs the same tree to the same bytes every time (no times, owners
// or host names; modes reduced to 0644/0755), so equal trees have equal
// SHA-256 names and are uploaded once.
#ifndef RINGMASTER_COMMON_CODE_ARCHIVE_H_
#define RINGMASTER_COMMON_CODE_ARCHIVE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster {

// Not thread-safe. Entry names are relative, '/'-separated and at most 255
// bytes; a directory comes before what it holds. Errors name the entry.
class ArchiveWriter {
 public:
  static absl::StatusOr<std::unique_ptr<ArchiveWriter>> Create(const std::string& path);
  ~ArchiveWriter();

  absl::Status AddDirectory(const std::string& name);
  // Copies the file at `source` (which must keep `size` bytes meanwhile).
  absl::Status AddFile(const std::string& name, const std::string& source, int64_t size,
                       bool executable);
  absl::Status AddSymlink(const std::string& name, const std::string& target);
  // Writes the end of the archive and closes it.
  absl::Status Finish();

 private:
  explicit ArchiveWriter(void* gz, std::string path) : gz_(gz), path_(std::move(path)) {}
  absl::Status WriteHeader(const std::string& name, char type, int64_t size, int mode,
                           const std::string& link);
  absl::Status Write(const void* data, size_t size);

  void* gz_;  // gzFile
  std::string path_;
};

struct UnpackLimits {
  int64_t max_file_bytes = 1LL << 30;  // sum of the files' sizes
  int64_t max_entries = 1'000'000;
};

struct UnpackOwner {
  uid_t uid;
  gid_t gid;
};

// Unpacks `archive` into `dir`, which must not exist (it is created, mode
// 0755). Refuses, naming the entry: absolute names and ".." (nothing lands
// outside `dir`), a name whose parent is not a directory of the archive
// (nothing is written through a link), anything but directories, files and
// links, a corrupt header or stream, and more than `limits`. Every entry is
// made relative to directory descriptors opened without following links:
// a directory swapped for a link during the unpack fails it, and nothing is
// created outside `dir`. On error `dir` is removed. Errors name entries,
// never the archive's or the directory's path.
absl::Status UnpackArchive(const std::string& archive, const std::string& dir,
                           const UnpackLimits& limits);

// Gives the tree at `dir` to `owner`, walking it from directory descriptors
// (opened without following links) with fchownat(AT_SYMLINK_NOFOLLOW): a
// link is given, never what it names.
absl::Status ChownTree(const std::string& dir, const UnpackOwner& owner);

// Removes the tree at `dir` (nothing when it is missing), walking it from
// directory descriptors opened without following links: each directory is
// taken back first (CAP_CHOWN, mode 0700), so that a process that is not
// root removes what a job's user made there, whatever its modes.
absl::Status RemoveTree(const std::string& dir);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_CODE_ARCHIVE_H_
