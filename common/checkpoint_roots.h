// Where jobs may keep checkpoints. A job's spec may name a checkpoint_dir,
// and a root worker makes <checkpoint_dir>/<job> there for the job's uid,
// so the operator names the roots it may lie in (--checkpoint-roots): the
// coordinator refuses any other at submit, by its words, and the worker
// again at start, by where the directory really is (a link inside a root
// may point anywhere).
#ifndef RINGMASTER_COMMON_CHECKPOINT_ROOTS_H_
#define RINGMASTER_COMMON_CHECKPOINT_ROOTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ringmaster {

// The roots of a comma-separated list, each an absolute path without "..",
// trailing slashes dropped. INVALID_ARGUMENT naming `flag` and the root.
absl::StatusOr<std::vector<std::string>> ParseCheckpointRoots(const std::string& list,
                                                              const std::string& flag);

// OK when `dir` (absolute) is one of `roots` or lies below one, by its
// words alone; INVALID_ARGUMENT "checkpoint_dir: ..." naming the roots
// otherwise, or for a path with "..".
absl::Status CheckCheckpointDir(const std::string& dir, const std::vector<std::string>& roots);

struct CheckpointDir {
  UniqueFd fd;
  bool is_root = false;  // it is one of the roots itself, not below one
};

// `dir`, opened as a directory, when the directory it resolves to lies in
// one of `roots` as they resolve on this machine (a root missing here
// holds nothing). FAILED_PRECONDITION naming the roots when it lies
// elsewhere; "checkpoint_dir <dir>: <strerror>" when it cannot be opened.
absl::StatusOr<CheckpointDir> OpenCheckpointDir(const std::string& dir,
                                                const std::vector<std::string>& roots);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_CHECKPOINT_ROOTS_H_
