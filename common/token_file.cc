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

absl::Status CheckSecretFileMode(const std::string& path, const std::string& what) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat("%s %s: %s", what, path, strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s %s is not a regular file", what, path));
  }
  const bool others = (st.st_mode & 007) != 0;
  const bool group = (st.st_mode & 070) != 0;
  const bool root_group_read_only = st.st_uid == 0 && (st.st_mode & 030) == 0;
  if (others || (group && !root_group_read_only)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s %s is open to group or others (mode %04o); chmod 600 %s", what, path,
                        st.st_mode & 07777, path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what) {
  if (absl::Status s = CheckSecretFileMode(path, what); !s.ok()) return s;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    return absl::FailedPreconditionError(absl::StrFormat("%s %s cannot be read", what, path));
  }
  return text.str();
}

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  if (path.empty()) {
    const char* env = std::getenv("RINGMASTER_TOKEN");
    return std::string(env ? env : "");
  }
  absl::StatusOr<std::string> text = ReadSecretFile(path, "token file");
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat("token file %s is empty", path));
  }
  return token;
}

}  // namespace ringmaster
