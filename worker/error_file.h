// A rank's own account of why it failed: the file torchrun's error handler
// (torch.distributed.elastic's @record) writes to TORCHELASTIC_ERROR_FILE,
//   {"message": {"message": "ValueError: bad input",
//                "extraInfo": {"py_callstack": "...", "timestamp": "..."}}}
// or {"message": "..."}. The worker gives each rank a directory of its own
// for it and reads it when the rank fails.
#ifndef RINGMASTER_WORKER_ERROR_FILE_H_
#define RINGMASTER_WORKER_ERROR_FILE_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/subprocess.h"

namespace ringmaster {

inline constexpr size_t kMaxErrorFileBytes = 64 << 10;
inline constexpr size_t kMaxErrorMessageBytes = 1000;

// Makes `dir`, or takes it back from an earlier attempt: mode 0700, owned
// by `owner` when given (the rank's own), never through a link put in its
// place.
absl::Status MakeRankDir(const std::string& dir, const std::optional<RunAs>& owner);

// Makes `dir` for a rank's error file, or takes it back, and removes a
// file an earlier attempt left there. With `owner`: the worker's, in the
// owner's group, mode 0770, so that the rank writes in it while the worker,
// root or not, can always read and remove what it wrote, and the rank
// cannot take that away.
absl::Status PrepareErrorDir(const std::string& dir, const std::optional<RunAs>& owner);

// The error's message ("ValueError: bad input"), on one line and at most
// kMaxErrorMessageBytes, from the error file in `dir`, the rank's own
// directory; empty when there is no file or it is not one torchrun writes.
// The rank writes in `dir`, so the file is read only as rank_dir.h says: a
// regular file of `rank_uid`'s, never through a link, of at most
// kMaxErrorFileBytes.
std::string ReadRankError(const std::string& dir, uid_t rank_uid);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_ERROR_FILE_H_
