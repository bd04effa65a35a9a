#include "common/token_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

namespace ringmaster {

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  if (path.empty()) {
    const char* env = std::getenv("RINGMASTER_TOKEN");
    return std::string(env ? env : "");
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("token file %s: %s", path, strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("token file %s is not a regular file", path));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "token file %s is open to group or others (mode %04o); chmod 600 %s", path,
        st.st_mode & 07777, path));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    return absl::FailedPreconditionError(absl::StrFormat("token file %s cannot be read", path));
  }
  std::string token(absl::StripAsciiWhitespace(text.str()));
  if (token.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat("token file %s is empty", path));
  }
  return token;
}

}  // namespace ringmaster
