#include "worker/error_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace ringmaster {

namespace {

// `dir` made (mode 0700, owned by `owner` when given) and opened; from here
// on through the descriptor: the rank's user owns it and may have put a
// link in its place.
absl::StatusOr<int> OpenRankDir(const std::string& dir, const std::optional<RunAs>& owner) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", std::strerror(errno)));
  }
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat(dir, " is not a directory"));
  if (fchmod(fd, 0700) != 0 || (owner && fchown(fd, owner->uid, owner->gid) != 0)) {
    const absl::Status error =
        absl::InternalError(absl::StrCat("chown ", dir, ": ", std::strerror(errno)));
    close(fd);
    return error;
  }
  return fd;
}

}  // namespace

absl::Status MakeRankDir(const std::string& dir, const std::optional<RunAs>& owner) {
  absl::StatusOr<int> fd = OpenRankDir(dir, owner);
  if (!fd.ok()) return fd.status();
  close(*fd);
  return absl::OkStatus();
}

absl::Status PrepareErrorDir(const std::string& dir, const std::optional<RunAs>& owner) {
  absl::StatusOr<int> fd = OpenRankDir(dir, owner);
  if (!fd.ok()) return fd.status();
  absl::Cleanup close_fd = [fd = *fd] { close(fd); };
  if (unlinkat(*fd, "error.json", 0) != 0 && errno != ENOENT) {
    return absl::InternalError(
        absl::StrCat("removing ", dir, "/error.json: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string ReadRankError(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  std::string text;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<size_t>(st.st_size) <= kMaxErrorFileBytes) {
    text.resize(st.st_size);
    const ssize_t n = pread(fd, text.data(), text.size(), 0);
    text.resize(n > 0 ? n : 0);
  }
  close(fd);
  google::protobuf::Struct root;
  if (text.empty() || !google::protobuf::util::JsonStringToMessage(text, &root).ok()) return "";
  auto field = root.fields().find("message");
  if (field == root.fields().end()) return "";
  const google::protobuf::Value* message = &field->second;
  if (message->has_struct_value()) {
    auto inner = message->struct_value().fields().find("message");
    if (inner == message->struct_value().fields().end()) return "";
    message = &inner->second;
  }
  if (!message->has_string_value()) return "";
  std::string line = absl::StrReplaceAll(absl::StripAsciiWhitespace(message->string_value()),
                                         {{"\n", " "}, {"\r", " "}});
  if (line.size() > kMaxErrorMessageBytes) {
    line.resize(kMaxErrorMessageBytes);
    // Not half a UTF-8 character.
    while (!line.empty() && (static_cast<unsigned char>(line.back()) & 0xC0) == 0x80) {
      line.pop_back();
    }
    if (!line.empty() && static_cast<unsigned char>(line.back()) >= 0xC0) line.pop_back();
    line += "...";
  }
  return line;
}

}  // namespace ringmaster
