#include "common/checkpoint_roots.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringmaster {
namespace {

// Whether `path` is `root` or lies below it (both without a trailing '/').
bool Within(const std::string& path, const std::string& root) {
  return path == root || root == "/" ||
         (absl::StartsWith(path, root) && path.size() > root.size() && path[root.size()] == '/');
}

bool HasDotDot(const std::string& path) {
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") return true;
  }
  return false;
}

std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseCheckpointRoots(const std::string& list,
                                                              const std::string& flag) {
  std::vector<std::string> roots;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    const std::string root = WithoutTrailingSlashes(std::string(absl::StripAsciiWhitespace(part)));
    if (root[0] != '/' || HasDotDot(root)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": \"", root, "\" is not an absolute path without \"..\""));
    }
    roots.push_back(root);
  }
  return roots;
}

absl::Status CheckCheckpointDir(const std::string& dir, const std::vector<std::string>& roots) {
  if (HasDotDot(dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint_dir: \"", dir, "\" may not contain \"..\""));
  }
  const std::string path = WithoutTrailingSlashes(dir);
  for (const std::string& root : roots) {
    if (Within(path, root)) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("checkpoint_dir: ", dir, " is not in a checkpoint root this cluster allows (",
                   roots.empty() ? "none" : absl::StrJoin(roots, ", "),
                   "); the coordinator's --checkpoint-roots says which"));
}

absl::StatusOr<CheckpointDir> OpenCheckpointDir(const std::string& dir,
                                                const std::vector<std::string>& roots) {
  // Through links: shared storage is often mounted through one.
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint_dir ", dir, ": ", std::strerror(errno)));
  }
  char resolved[PATH_MAX];
  const ssize_t n =
      readlink(absl::StrCat("/proc/self/fd/", fd.get()).c_str(), resolved, sizeof(resolved) - 1);
  if (n <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint_dir ", dir, ": cannot tell where it is: ", std::strerror(errno)));
  }
  const std::string where(resolved, static_cast<size_t>(n));
  for (const std::string& root : roots) {
    char real[PATH_MAX];
    if (realpath(root.c_str(), real) != nullptr && Within(where, real)) {
      return CheckpointDir{std::move(fd), where == real};
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat("checkpoint_dir ", dir, where == dir ? "" : absl::StrCat(" (", where, ")"),
                   " is not in a checkpoint root of this worker (",
                   roots.empty() ? "none" : absl::StrJoin(roots, ", "),
                   "); its --checkpoint-roots, or the coordinator's, says which"));
}

}  // namespace ringmaster
