#include "common/private_dir.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace ringmaster {

absl::Status MakePrivateDir(const std::string& dir, mode_t mode) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", dir, ": ", error.message()));
  }
  if (chmod(dir.c_str(), mode) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot set the mode of ", dir, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster
