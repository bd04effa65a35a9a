#include "worker/error_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "worker/rank_dir.h"

namespace ringmaster {

namespace {

// `dir`, made if missing, opened without following a link, and this
// process's with mode `mode`: a directory an earlier attempt gave a rank's
// user is taken back first (CAP_CHOWN), since a worker that is not root
// may not open, or remove files in, another user's directory.
absl::StatusOr<int> OpenOwnDir(const std::string& dir, mode_t mode) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", std::strerror(errno)));
  }
  const int path_fd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (path_fd < 0) {
    return absl::InternalError(absl::StrCat(dir, " is not a directory: ", std::strerror(errno)));
  }
  absl::Cleanup close_path = [path_fd] { close(path_fd); };
  // Through the descriptor: the rank's user may have put a link in its place.
  const std::string self = absl::StrCat("/proc/self/fd/", path_fd);
  if (fchownat(path_fd, "", geteuid(), getegid(), AT_EMPTY_PATH) != 0 ||
      chmod(self.c_str(), mode) != 0) {
    return absl::InternalError(absl::StrCat("taking back ", dir, ": ", std::strerror(errno)));
  }
  const int fd = openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", dir, ": ", std::strerror(errno)));
  return fd;
}

}  // namespace

absl::Status MakeRankDir(const std::string& dir, const std::optional<RunAs>& owner) {
  absl::StatusOr<int> fd = OpenOwnDir(dir, 0700);
  if (!fd.ok()) return fd.status();
  absl::Cleanup close_fd = [fd = *fd] { close(fd); };
  if (owner && fchown(*fd, owner->uid, owner->gid) != 0) {
    return absl::InternalError(absl::StrCat("chown ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status PrepareErrorDir(const std::string& dir, const std::optional<RunAs>& owner) {
  absl::StatusOr<int> fd = OpenOwnDir(dir, owner ? 0770 : 0700);
  if (!fd.ok()) return fd.status();
  absl::Cleanup close_fd = [fd = *fd] { close(fd); };
  if (owner && fchown(*fd, -1, owner->gid) != 0) {
    return absl::InternalError(absl::StrCat("chgrp ", dir, ": ", std::strerror(errno)));
  }
  if (unlinkat(*fd, kErrorFile, 0) != 0 && errno != ENOENT) {
    return absl::InternalError(
        absl::StrCat("removing ", dir, "/error.json: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string ReadRankError(const std::string& dir, uid_t rank_uid) {
  absl::StatusOr<RankDir> own = RankDir::Open(dir, rank_uid);
  if (!own.ok()) return "";
  absl::StatusOr<UniqueFd> fd = own->OpenFile(kErrorFile);
  if (!fd.ok()) {
    if (!absl::IsNotFound(fd.status())) {
      spdlog::warn("not reading a rank's error file: {}", fd.status().ToString());
    }
    return "";
  }
  struct stat st;
  if (fstat(fd->get(), &st) != 0 || static_cast<size_t>(st.st_size) > kMaxErrorFileBytes) {
    return "";
  }
  absl::StatusOr<std::string> read = ReadAt(fd->get(), 0, kMaxErrorFileBytes);
  const std::string text = read.ok() ? *std::move(read) : "";
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
