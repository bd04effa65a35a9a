#include "coordinator/code/code_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/private_dir.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
constexpr char kSuffix[] = ".tar.gz";
constexpr char kUploadPrefix[] = ".upload-";

}  // namespace

CodeStore::CodeStore(CodeStoreOptions options, const Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

std::string CodeStore::PathOf(const std::string& sha256) const {
  return absl::StrCat(options_.dir, "/", sha256, kSuffix);
}

absl::Status CodeStore::Init() {
  RETURN_IF_ERROR(MakePrivateDir(options_.dir, 0700));
  std::error_code error;
  std::map<std::string, Archive> found;
  for (fs::directory_iterator it(options_.dir, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (absl::StartsWith(name, kUploadPrefix)) {
      fs::remove(it->path(), error);  // a crash cut this upload short
      continue;
    }
    if (!absl::EndsWith(name, kSuffix)) continue;
    const std::string sha256 = name.substr(0, name.size() - strlen(kSuffix));
    struct stat st;
    if (!IsSha256Hex(sha256) || stat(it->path().c_str(), &st) != 0) continue;
    found[sha256] = {st.st_size, absl::FromUnixSeconds(st.st_mtime)};
  }
  if (error) return absl::InternalError(absl::StrCat(options_.dir, ": ", error.message()));
  if (options_.shared != nullptr) RETURN_IF_ERROR(IndexShared(&found));
  MutexLock lock(&mu_);
  archives_ = std::move(found);
  return absl::OkStatus();
}

absl::Status CodeStore::IndexShared(std::map<std::string, Archive>* found) {
  using Sizes = std::map<std::string, int64_t>;
  ASSIGN_OR_RETURN(const Sizes shared, options_.shared->List());
  for (const auto& [sha256, archive] : *found) {
    if (shared.count(sha256) > 0) continue;
    // Uploaded before this coordinator shared its store.
    RETURN_IF_ERROR(options_.shared->Put(sha256, PathOf(sha256), archive.bytes));
    spdlog::info("code archive {} is now in the shared store", sha256);
  }
  for (const auto& [sha256, bytes] : shared) {
    found->try_emplace(sha256, Archive{bytes, clock_->Now(), /*here=*/false});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<CodeStore::Archive>> CodeStore::Touch(const std::string& sha256) {
  {
    MutexLock lock(&mu_);
    if (auto it = archives_.find(sha256); it != archives_.end()) {
      it->second.last_used = clock_->Now();
      return it->second;
    }
  }
  if (options_.shared == nullptr || !IsSha256Hex(sha256)) return std::nullopt;
  // Another coordinator took it.
  absl::StatusOr<int64_t> bytes = options_.shared->Size(sha256);
  if (absl::IsNotFound(bytes.status())) return std::nullopt;
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat("cannot ask the shared store for code archive ", sha256, ": ",
                                     bytes.status().message()));
  }
  MutexLock lock(&mu_);
  Archive& archive =
      archives_.try_emplace(sha256, Archive{*bytes, absl::Time(), /*here=*/false}).first->second;
  archive.last_used = clock_->Now();
  return archive;
}

absl::StatusOr<std::optional<int64_t>> CodeStore::Use(const std::string& sha256) {
  ASSIGN_OR_RETURN(const std::optional<Archive> archive, Touch(sha256));
  if (!archive.has_value()) return std::nullopt;
  return archive->bytes;
}

absl::StatusOr<std::unique_ptr<CodeStore::Upload>> CodeStore::BeginUpload(
    const std::string& sha256, int64_t bytes, const std::string& caller) {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sha256 must be 64 lowercase hex digits, got \"", sha256, "\""));
  }
  if (bytes <= 0 || bytes > options_.max_archive_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the code archive is ", bytes, " bytes; the coordinator takes 1 to ",
                     options_.max_archive_bytes, " (--max-upload-mb)"));
  }
  int64_t number;
  {
    MutexLock lock(&mu_);
    if (uploads_ >= options_.max_concurrent_uploads) {
      return absl::ResourceExhaustedError(absl::StrCat(options_.max_concurrent_uploads,
                                                       " code uploads are in progress; try again"));
    }
    int& mine = uploads_by_caller_[caller];
    if (mine >= options_.max_uploads_per_caller) {
      return absl::ResourceExhaustedError(
          absl::StrCat("you have ", options_.max_uploads_per_caller,
                       " code uploads in progress; try again when one has ended"));
    }
    ++mine;
    ++uploads_;
    number = next_upload_++;
  }
  const std::string temp = absl::StrCat(options_.dir, "/", kUploadPrefix, sha256, "-", number);
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    UploadEnded(caller);
    return ErrnoError(absl::StrCat("cannot create ", temp));
  }
  return std::unique_ptr<Upload>(new Upload(this, sha256, bytes, temp, fd, caller));
}

void CodeStore::UploadEnded(const std::string& caller) {
  MutexLock lock(&mu_);
  --uploads_;
  if (--uploads_by_caller_[caller] <= 0) uploads_by_caller_.erase(caller);
}

CodeStore::Upload::Upload(CodeStore* store, std::string sha256, int64_t bytes,
                          std::string temp_path, int fd, std::string caller)
    : store_(store),
      caller_(std::move(caller)),
      sha256_(std::move(sha256)),
      bytes_(bytes),
      temp_path_(std::move(temp_path)),
      fd_(fd) {}

CodeStore::Upload::~Upload() {
  if (fd_ >= 0) close(fd_);
  store_->UploadEnded(caller_);  // before its file goes: no file, no slot held
  std::error_code ignored;
  fs::remove(temp_path_, ignored);  // gone already when committed
}

absl::Status CodeStore::Upload::Append(absl::string_view data) {
  if (written_ + static_cast<int64_t>(data.size()) > bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the upload is longer than the ", bytes_, " bytes it declared"));
  }
  hash_.Update(data);
  while (!data.empty()) {
    const ssize_t n = write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(absl::StrCat("writing ", temp_path_));
    data.remove_prefix(static_cast<size_t>(n));
    written_ += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CodeStore::Upload::Commit() {
  if (written_ != bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("the upload ended after ", written_, " of the ",
                                                   bytes_, " bytes it declared"));
  }
  if (const std::string digest = hash_.HexDigest(); digest != sha256_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the uploaded bytes have SHA-256 ", digest, ", not ", sha256_));
  }
  // On disk, and shared, before any job can refer to it.
  if (fsync(fd_) != 0) return ErrnoError(absl::StrCat("fsync ", temp_path_));
  close(fd_);
  fd_ = -1;
  const std::string path = store_->PathOf(sha256_);
  {
    MutexLock lock(&store_->mu_);
    if (store_->archives_.count(sha256_) > 0) {  // indexed: shared already
      store_->archives_[sha256_].last_used = store_->clock_->Now();
      return true;
    }
  }
  if (SharedCodeArchives* shared = store_->options_.shared; shared != nullptr) {
    if (absl::Status s = shared->Put(sha256_, temp_path_, bytes_); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("cannot keep the archive in the shared store: ", s.message()));
    }
  }
  if (rename(temp_path_.c_str(), path.c_str()) != 0) {
    return ErrnoError(absl::StrCat("rename ", path));
  }
  MutexLock lock(&store_->mu_);
  store_->archives_[sha256_] = {bytes_, store_->clock_->Now()};
  return false;
}

absl::StatusOr<std::string> CodeStore::Read(const std::string& sha256, int64_t offset,
                                            int max_bytes, int64_t* archive_bytes) {
  ASSIGN_OR_RETURN(const std::optional<Archive> archive, Touch(sha256));
  if (!archive.has_value()) {
    return absl::NotFoundError(absl::StrCat("no code archive ", sha256, " is stored"));
  }
  const int64_t bytes = archive->bytes;
  *archive_bytes = bytes;
  if (offset < 0 || offset > bytes || max_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("offset ", offset, " and max_bytes ", max_bytes,
                                                   " do not fit an archive of ", bytes, " bytes"));
  }
  const int length =
      static_cast<int>(std::min<int64_t>(std::min(max_bytes, kMaxCodeChunkBytes), bytes - offset));
  if (length == 0) return std::string();  // its end
  if (!archive->here) {
    ASSIGN_OR_RETURN(std::string data, options_.shared->Read(sha256, offset, length));
    if (data.size() != static_cast<size_t>(length)) {
      return absl::DataLossError(
          absl::StrCat("the shared store's code archive ", sha256, " is shorter than listed"));
    }
    return data;
  }
  const std::string path = PathOf(sha256);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(absl::StrCat("cannot open ", path));
  std::string data(static_cast<size_t>(length), '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = pread(fd, data.data() + done, data.size() - done,
                            static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (done != data.size()) {
    return absl::DataLossError(absl::StrCat(path, " is shorter than indexed"));
  }
  return data;
}

int CodeStore::Prune(const std::set<std::string>& in_use) {
  std::vector<std::pair<std::string, bool>> unused;  // and whether it is here
  {
    MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    for (auto it = archives_.begin(); it != archives_.end();) {
      if (in_use.count(it->first) == 0 && now - it->second.last_used >= options_.keep_unused) {
        unused.emplace_back(it->first, it->second.here);
        it = archives_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [sha256, here] : unused) {
    std::error_code error;
    if (here) fs::remove(PathOf(sha256), error);
    if (error) spdlog::warn("cannot remove code archive {}: {}", sha256, error.message());
    if (options_.shared == nullptr) continue;
    if (absl::Status s = options_.shared->Remove(sha256); !s.ok()) {
      spdlog::warn("cannot remove code archive {} from the shared store: {}", sha256, s.ToString());
    }
  }
  return static_cast<int>(unused.size());
}

}  // namespace ringmaster
