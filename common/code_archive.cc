#include "common/code_archive.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"

namespace ringmaster {
namespace {

// The ustar header: field offsets and widths from POSIX.1-1988.
constexpr size_t kBlock = 512;
struct Field {
  size_t offset;
  size_t width;
};
constexpr Field kName{0, 100};
constexpr Field kMode{100, 8};
constexpr Field kUid{108, 8};
constexpr Field kGid{116, 8};
constexpr Field kSize{124, 12};
constexpr Field kMtime{136, 12};
constexpr Field kChecksum{148, 8};
constexpr size_t kTypeOffset = 156;
constexpr Field kLinkName{157, 100};
constexpr Field kMagic{257, 6};
constexpr Field kVersion{263, 2};
constexpr Field kPrefix{345, 155};

constexpr char kFile = '0';
constexpr char kOldFile = '\0';
constexpr char kSymlink = '2';
constexpr char kDirectory = '5';
constexpr char kPax = 'x';  // POSIX.1-2001: records for the next entry
constexpr uint64_t kMaxPaxBytes = 64 << 10;

using Block = std::array<char, kBlock>;

bool PutOctal(Block& block, Field field, uint64_t value) {
  // width - 1 digits and a NUL.
  char digits[32];
  const int n = snprintf(digits, sizeof digits, "%0*llo", static_cast<int>(field.width - 1),
                         static_cast<unsigned long long>(value));
  if (n < 0 || static_cast<size_t>(n) != field.width - 1) return false;
  memcpy(block.data() + field.offset, digits, field.width);  // with the NUL
  return true;
}

void PutString(Block& block, Field field, const std::string& s) {
  memcpy(block.data() + field.offset, s.data(), std::min(s.size(), field.width));
}

std::string GetString(const Block& block, Field field) {
  const char* begin = block.data() + field.offset;
  return std::string(begin, strnlen(begin, field.width));
}

// An octal number, optionally padded with spaces and ended by NUL or space.
std::optional<uint64_t> GetOctal(const Block& block, Field field) {
  const char* p = block.data() + field.offset;
  const char* end = p + field.width;
  while (p < end && *p == ' ') ++p;
  uint64_t value = 0;
  bool any = false;
  for (; p < end && *p >= '0' && *p <= '7'; ++p) {
    if (value > (UINT64_MAX >> 3)) return std::nullopt;
    value = value * 8 + static_cast<uint64_t>(*p - '0');
    any = true;
  }
  if (!any || (p < end && *p != '\0' && *p != ' ')) return std::nullopt;
  return value;
}

uint64_t Checksum(const Block& block) {
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const bool in_field = i >= kChecksum.offset && i < kChecksum.offset + kChecksum.width;
    sum += in_field ? ' ' : static_cast<unsigned char>(block[i]);
  }
  return sum;
}

// "<length> key=value\n", the length counting itself.
std::string PaxRecord(const std::string& key, const std::string& value) {
  const size_t body = key.size() + value.size() + 3;  // ' ', '=', '\n'
  size_t length = body + 1;
  while (std::to_string(length).size() + body != length) ++length;
  return absl::StrCat(length, " ", key, "=", value, "\n");
}

// Splits a name of up to 255 bytes into ustar's prefix and name fields.
bool SplitName(const std::string& full, std::string* prefix, std::string* name) {
  if (full.size() <= kName.width) {
    *name = full;
    return true;
  }
  for (size_t slash = full.find('/'); slash != std::string::npos;
       slash = full.find('/', slash + 1)) {
    if (slash > kPrefix.width) return false;
    if (full.size() - slash - 1 <= kName.width) {
      *prefix = full.substr(0, slash);
      *name = full.substr(slash + 1);
      return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArchiveWriter>> ArchiveWriter::Create(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "wb6");
  if (gz == nullptr) return ErrnoError(absl::StrCat("cannot create ", path));
  return std::unique_ptr<ArchiveWriter>(new ArchiveWriter(gz, path));
}

ArchiveWriter::~ArchiveWriter() {
  if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

absl::Status ArchiveWriter::Write(const void* data, size_t size) {
  if (size == 0) return absl::OkStatus();
  if (gzwrite(static_cast<gzFile>(gz_), data, static_cast<unsigned>(size)) !=
      static_cast<int>(size)) {
    int code = 0;
    const char* message = gzerror(static_cast<gzFile>(gz_), &code);
    return absl::InternalError(
        absl::StrCat("writing ", path_, ": ", code == Z_ERRNO ? strerror(errno) : message));
  }
  return absl::OkStatus();
}

absl::Status ArchiveWriter::WriteHeader(const std::string& name, char type, int64_t size, int mode,
                                        const std::string& link) {
  Block block{};
  std::string prefix, short_name;
  std::string pax;  // what ustar's fields cannot hold
  if (!SplitName(name, &prefix, &short_name)) {
    pax += PaxRecord("path", name);
    prefix.clear();
    short_name = name.substr(0, kName.width);
  }
  if (link.size() > kLinkName.width) pax += PaxRecord("linkpath", link);
  if (pax.size() > kMaxPaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(name.substr(0, 200), "...: the name is too long for the archive"));
  }
  if (!pax.empty()) {
    RETURN_IF_ERROR(WriteHeader("PaxHeader", kPax, static_cast<int64_t>(pax.size()), 0644, ""));
    RETURN_IF_ERROR(Write(pax.data(), pax.size()));
    const char zeros[kBlock] = {};
    RETURN_IF_ERROR(Write(zeros, (kBlock - pax.size() % kBlock) % kBlock));
  }
  PutString(block, kName, short_name);
  PutString(block, kPrefix, prefix);
  PutString(block, kLinkName, link);
  if (!PutOctal(block, kSize, static_cast<uint64_t>(size))) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": too large for the archive"));
  }
  PutOctal(block, kMode, static_cast<uint64_t>(mode));
  PutOctal(block, kUid, 0);
  PutOctal(block, kGid, 0);
  PutOctal(block, kMtime, 0);
  block[kTypeOffset] = type;
  memcpy(block.data() + kMagic.offset, "ustar", 6);  // with its NUL
  memcpy(block.data() + kVersion.offset, "00", 2);
  // Six digits, NUL, space.
  snprintf(block.data() + kChecksum.offset, kChecksum.width, "%06llo",
           static_cast<unsigned long long>(Checksum(block)));
  block[kChecksum.offset + 7] = ' ';
  return Write(block.data(), block.size());
}

absl::Status ArchiveWriter::AddDirectory(const std::string& name) {
  return WriteHeader(name + "/", kDirectory, 0, 0755, "");
}

absl::Status ArchiveWriter::AddSymlink(const std::string& name, const std::string& target) {
  return WriteHeader(name, kSymlink, 0, 0777, target);
}

absl::Status ArchiveWriter::AddFile(const std::string& name, const std::string& source,
                                    int64_t size, bool executable) {
  const int fd = open(source.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoError(absl::StrCat("cannot read ", source));
  absl::Cleanup close_fd = [fd] { close(fd); };
  RETURN_IF_ERROR(WriteHeader(name, kFile, size, executable ? 0755 : 0644, ""));
  std::vector<char> buffer(1 << 16);
  int64_t left = size;
  while (left > 0) {
    const ssize_t n =
        read(fd, buffer.data(), static_cast<size_t>(std::min<int64_t>(left, buffer.size())));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(absl::StrCat("reading ", source));
    if (n == 0) {
      return absl::AbortedError(absl::StrCat(source, " shrank while it was being packed"));
    }
    RETURN_IF_ERROR(Write(buffer.data(), static_cast<size_t>(n)));
    left -= n;
  }
  const char zeros[kBlock] = {};
  return Write(zeros, (kBlock - static_cast<size_t>(size) % kBlock) % kBlock);
}

absl::Status ArchiveWriter::Finish() {
  const char zeros[2 * kBlock] = {};
  RETURN_IF_ERROR(Write(zeros, sizeof zeros));
  const int code = gzclose(static_cast<gzFile>(gz_));
  gz_ = nullptr;
  if (code != Z_OK) return absl::InternalError(absl::StrCat("closing ", path_, ": zlib ", code));
  return absl::OkStatus();
}

namespace {

// The directory `name` under `at`, never through a link.
int OpenDirAt(int at, const char* name) {
  return openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Reads an archive entry by entry into a fresh directory. Everything is
// made relative to directory descriptors opened without following links, so
// a directory swapped for a link meanwhile makes the entry fail: nothing is
// ever written outside the directory.
class Unpacker {
 public:
  Unpacker(gzFile gz, int root, const UnpackLimits& limits)
      : gz_(gz), root_(root), limits_(limits) {}

  absl::Status Run() {
    for (;;) {
      Block block;
      RETURN_IF_ERROR(Read(block.data(), block.size()));
      if (std::all_of(block.begin(), block.end(), [](char c) { return c == 0; })) {
        return absl::OkStatus();  // the end
      }
      if (++entries_ > limits_.max_entries) {
        return Bad(absl::StrCat("more than ", limits_.max_entries, " entries"));
      }
      RETURN_IF_ERROR(Entry(block));
    }
  }

 private:
  static absl::Status Bad(const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("the archive: ", why));
  }
  static absl::Status Failed(const std::string& name, const char* what) {
    return absl::InternalError(absl::StrCat("entry \"", name, "\": ", what, ": ", strerror(errno)));
  }

  // The directory that holds entry `name`, opened component by component
  // from the root; the last one is kept, as entries come by directory.
  absl::StatusOr<int> ParentOf(const std::string& name) {
    const size_t slash = name.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : name.substr(0, slash);
    if (parent.empty()) return root_;
    if (parent == parent_name_ && parent_.get() >= 0) return parent_.get();
    UniqueFd dir(OpenDirAt(root_, "."));
    for (absl::string_view part : absl::StrSplit(parent, '/')) {
      UniqueFd next(OpenDirAt(dir.get(), std::string(part).c_str()));
      if (next.get() < 0) return Failed(name, "its directory cannot be opened");
      dir = std::move(next);
    }
    parent_ = std::move(dir);
    parent_name_ = parent;
    return parent_.get();
  }
  static std::string Leaf(const std::string& name) { return name.substr(name.rfind('/') + 1); }

  absl::Status Read(char* data, size_t size) {
    while (size > 0) {
      const int n = gzread(gz_, data, static_cast<unsigned>(size));
      if (n < 0) {
        int code = 0;
        const char* message = gzerror(gz_, &code);
        return Bad(code == Z_ERRNO ? strerror(errno) : message);
      }
      if (n == 0) return Bad("it ends in the middle of an entry");
      data += n;
      size -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  // The entry's name checked: relative, no "." or "..", its parent one of
  // the directories unpacked before it.
  absl::StatusOr<std::string> CheckedName(const Block& block) {
    std::string name = GetString(block, kName);
    const std::string prefix = GetString(block, kPrefix);
    if (!prefix.empty()) name = absl::StrCat(prefix, "/", name);
    if (pax_path_.has_value()) name = *std::move(pax_path_);
    pax_path_.reset();
    if (name.find('\0') != std::string::npos) return Bad("a name with a NUL byte");
    if (!name.empty() && name.back() == '/') name.pop_back();
    if (name.empty()) return Bad("an entry without a name");
    for (absl::string_view part : absl::StrSplit(name, '/')) {
      if (part.empty() || part == "." || part == "..") {
        return Bad(absl::StrCat("entry \"", name, "\": not a plain relative name"));
      }
    }
    const size_t slash = name.rfind('/');
    if (slash != std::string::npos && directories_.count(name.substr(0, slash)) == 0) {
      return Bad(absl::StrCat("entry \"", name, "\": its directory is not in the archive"));
    }
    return name;
  }

  absl::Status Entry(const Block& block) {
    const std::optional<uint64_t> checksum = GetOctal(block, kChecksum);
    if (!checksum.has_value() || *checksum != Checksum(block)) {
      return Bad("a header's checksum does not match");
    }
    if (GetString(block, kMagic).rfind("ustar", 0) != 0) return Bad("not a ustar archive");
    const std::optional<uint64_t> size = GetOctal(block, kSize);
    const char type = block[kTypeOffset];
    if (type == kPax) return Pax(size);
    ASSIGN_OR_RETURN(const std::string name, CheckedName(block));
    std::string link = GetString(block, kLinkName);
    if (pax_link_.has_value()) link = *std::move(pax_link_);
    pax_link_.reset();
    if (type == kDirectory) {
      ASSIGN_OR_RETURN(const int parent, ParentOf(name));
      if (mkdirat(parent, Leaf(name).c_str(), 0755) != 0) {
        return Bad(absl::StrCat("entry \"", name, "\": ", strerror(errno)));
      }
      UniqueFd made(OpenDirAt(parent, Leaf(name).c_str()));
      if (made.get() < 0 || fchmod(made.get(), 0755) != 0) {
        return Failed(name, "cannot set its mode");
      }
      directories_.insert(name);
      return absl::OkStatus();
    }
    if (type == kSymlink) {
      if (link.empty() || link.find('\0') != std::string::npos) {
        return Bad(absl::StrCat("entry \"", name, "\": a link to nothing"));
      }
      ASSIGN_OR_RETURN(const int parent, ParentOf(name));
      if (symlinkat(link.c_str(), parent, Leaf(name).c_str()) != 0) {
        return Bad(absl::StrCat("entry \"", name, "\": ", strerror(errno)));
      }
      return absl::OkStatus();
    }
    if (type != kFile && type != kOldFile) {
      return Bad(absl::StrCat("entry \"", name, "\": type '", std::string(1, type),
                              "' is not a file, directory or link"));
    }
    if (!size.has_value()) return Bad(absl::StrCat("entry \"", name, "\": a bad size"));
    if (*size > static_cast<uint64_t>(limits_.max_file_bytes - file_bytes_)) {
      return Bad(absl::StrCat("its files hold more than ", limits_.max_file_bytes, " bytes"));
    }
    file_bytes_ += static_cast<int64_t>(*size);
    const std::optional<uint64_t> mode = GetOctal(block, kMode);
    return File(name, *size, mode.has_value() && (*mode & 0111) != 0);
  }

  // A pax header: its path and linkpath records name the next entry.
  absl::Status Pax(std::optional<uint64_t> size) {
    if (!size.has_value() || *size > kMaxPaxBytes) return Bad("a pax header of a bad size");
    std::string records(*size, '\0');
    RETURN_IF_ERROR(Read(records.data(), records.size()));
    char padding[kBlock];
    RETURN_IF_ERROR(Read(padding, (kBlock - *size % kBlock) % kBlock));
    absl::string_view rest = records;
    while (!rest.empty()) {
      const size_t space = rest.find(' ');
      size_t length = 0;
      if (space == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, space), &length) ||
          length <= space + 2 || length > rest.size() || rest[length - 1] != '\n') {
        return Bad("a malformed pax record");
      }
      const absl::string_view record = rest.substr(space + 1, length - space - 2);
      rest.remove_prefix(length);
      const size_t equals = record.find('=');
      if (equals == absl::string_view::npos) return Bad("a malformed pax record");
      const absl::string_view key = record.substr(0, equals);
      const std::string value(record.substr(equals + 1));
      if (key == "path") pax_path_ = value;
      if (key == "linkpath") pax_link_ = value;
      // Other keys (times, owners) mean nothing here.
    }
    return absl::OkStatus();
  }

  absl::Status File(const std::string& name, uint64_t size, bool executable) {
    const mode_t mode = executable ? 0755 : 0644;
    ASSIGN_OR_RETURN(const int parent, ParentOf(name));
    // O_EXCL: never through a link, never over an earlier entry.
    const int fd = openat(parent, Leaf(name).c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) return Bad(absl::StrCat("entry \"", name, "\": ", strerror(errno)));
    absl::Cleanup close_fd = [fd] { close(fd); };
    std::vector<char> buffer(1 << 16);
    for (uint64_t left = size; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buffer.size()));
      RETURN_IF_ERROR(Read(buffer.data(), n));
      for (size_t done = 0; done < n;) {
        const ssize_t w = write(fd, buffer.data() + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return Failed(name, "cannot write it");
        done += static_cast<size_t>(w);
      }
      left -= n;
    }
    char padding[kBlock];
    RETURN_IF_ERROR(Read(padding, (kBlock - size % kBlock) % kBlock));
    if (fchmod(fd, mode) != 0) return Failed(name, "cannot set its mode");
    return absl::OkStatus();
  }

  gzFile gz_;
  const int root_;
  const UnpackLimits limits_;
  UniqueFd parent_;  // of the last entry in a subdirectory
  std::string parent_name_;
  std::set<std::string> directories_;
  std::optional<std::string> pax_path_;  // for the next entry
  std::optional<std::string> pax_link_;
  int64_t entries_ = 0;
  int64_t file_bytes_ = 0;
};

}  // namespace

absl::Status UnpackArchive(const std::string& archive, const std::string& dir,
                           const UnpackLimits& limits) {
  gzFile gz = gzopen(archive.c_str(), "rb");
  if (gz == nullptr) return ErrnoError("cannot open the archive");
  absl::Cleanup close_gz = [gz] { gzclose(gz); };
  if (gzdirect(gz)) {
    // gzread would pass plain bytes through; only our gzip archives are taken.
    return absl::InvalidArgumentError("the archive is not gzip-compressed");
  }
  if (mkdir(dir.c_str(), 0755) != 0) return ErrnoError("cannot create the code directory");
  UniqueFd root(OpenDirAt(AT_FDCWD, dir.c_str()));
  absl::Status status = root.get() >= 0 && fchmod(root.get(), 0755) == 0
                            ? Unpacker(gz, root.get(), limits).Run()
                            : ErrnoError("cannot open the code directory");
  if (!status.ok()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  return status;
}

namespace {

// Gives `dir` (an open directory) and everything under it to `owner`.
absl::Status ChownBelow(int dir, const UnpackOwner& owner, const std::string& where) {
  if (fchown(dir, owner.uid, owner.gid) != 0) return ErrnoError(absl::StrCat("chown ", where));
  DIR* list = fdopendir(dup(dir));
  if (list == nullptr) return ErrnoError(absl::StrCat("cannot list ", where));
  absl::Cleanup close_list = [list] { closedir(list); };
  while (const dirent* entry = readdir(list)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = where.empty() ? name : absl::StrCat(where, "/", name);
    UniqueFd sub(OpenDirAt(dir, name.c_str()));
    if (sub.get() >= 0) {
      RETURN_IF_ERROR(ChownBelow(sub.get(), owner, path));
      continue;
    }
    // A file or a link: the entry itself, never what a link names.
    if (fchownat(dir, name.c_str(), owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoError(absl::StrCat("chown ", path));
    }
  }
  return absl::OkStatus();
}

// The directory `name` under `at` (never through a link), made this
// process's with mode 0700 first: CAP_CHOWN takes back another user's, and
// its owner may then open it whatever mode it had. -1 for anything else.
int TakeDirAt(int at, const char* name) {
  const int path_fd = openat(at, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (path_fd < 0) return -1;
  absl::Cleanup close_path = [path_fd] { close(path_fd); };
  const std::string self = absl::StrCat("/proc/self/fd/", path_fd);
  if (fchownat(path_fd, "", geteuid(), getegid(), AT_EMPTY_PATH) != 0 ||
      chmod(self.c_str(), 0700) != 0) {
    return -1;
  }
  return openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

absl::Status RemoveBelow(int dir, const std::string& where) {
  std::vector<std::string> names;
  {
    DIR* list = fdopendir(dup(dir));
    if (list == nullptr) return ErrnoError(absl::StrCat("cannot list ", where));
    absl::Cleanup close_list = [list] { closedir(list); };
    while (const dirent* entry = readdir(list)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
  }
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(where, "/", name);
    UniqueFd sub(TakeDirAt(dir, name.c_str()));
    if (sub.get() >= 0) {
      RETURN_IF_ERROR(RemoveBelow(sub.get(), path));
      if (unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0)
        return ErrnoError("cannot remove " + path);
    } else if (unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) {
      return ErrnoError("cannot remove " + path);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RemoveTree(const std::string& dir) {
  UniqueFd root(TakeDirAt(AT_FDCWD, dir.c_str()));
  if (root.get() < 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoError("cannot open " + dir);
  }
  RETURN_IF_ERROR(RemoveBelow(root.get(), dir));
  if (rmdir(dir.c_str()) != 0) return ErrnoError("cannot remove " + dir);
  return absl::OkStatus();
}

absl::Status ChownTree(const std::string& dir, const UnpackOwner& owner) {
  UniqueFd root(OpenDirAt(AT_FDCWD, dir.c_str()));
  if (root.get() < 0) return ErrnoError("cannot open the code directory");
  return ChownBelow(root.get(), owner, "");
}

}  // namespace ringmaster
