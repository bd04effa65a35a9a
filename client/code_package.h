// `submit` ships the directory it runs in with the job: packed here into a
// code archive (common/code_archive.h), uploaded once per content hash, and
// unpacked by each worker into the job's directory before its ranks start.
#ifndef RINGMASTER_CLIENT_CODE_PACKAGE_H_
#define RINGMASTER_CLIENT_CODE_PACKAGE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

struct PackedDirectory {
  std::string sha256;  // of the archive's bytes
  int64_t archive_bytes = 0;
  int64_t file_bytes = 0;  // the packed files' sizes, summed
  int files = 0;
};

// Packs `dir` into a new archive at `archive_path`, leaving out what
// `dir`/.ringmasterignore names (client/ignore_rules.h) and anything that is
// not a directory, file or link. FAILED_PRECONDITION when the files hold
// more than `limit_bytes`, naming the largest entries and what to do.
absl::StatusOr<PackedDirectory> PackDirectory(const std::string& dir, int64_t limit_bytes,
                                              const std::string& archive_path);

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_CODE_PACKAGE_H_
