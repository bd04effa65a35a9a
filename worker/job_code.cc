#include "worker/job_code.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/job_id.h"
#include "common/private_dir.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

JobCode::JobCode(std::string root, UnpackLimits limits, Fetch fetch)
    : root_(std::move(root)), limits_(limits), fetch_(std::move(fetch)) {}

absl::StatusOr<std::string> JobCode::Prepare(const std::string& job_id, const v1::CodePackage& code,
                                             const std::optional<RunAs>& owner) {
  RETURN_IF_ERROR(ValidateJobId(job_id));
  if (!IsSha256Hex(code.sha256())) {
    return absl::InvalidArgumentError(
        absl::StrCat("code.sha256 \"", code.sha256(), "\" is not 64 lowercase hex digits"));
  }
  const std::string dir = absl::StrCat(root_, "/", job_id, "/code");
  {
    MutexLock lock(&mu_);
    auto idle = [this, &job_id]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      auto it = jobs_.find(job_id);
      return it == jobs_.end() || !it->second.busy;
    };
    mu_.Await(absl::Condition(&idle));
    Job& job = jobs_[job_id];
    if (job.ready == code.sha256()) return dir;
    job.busy = true;
  }
  absl::StatusOr<std::string> unpacked = Unpack(job_id, code.sha256(), owner);
  MutexLock lock(&mu_);
  Job& job = jobs_[job_id];
  job.busy = false;
  if (!unpacked.ok()) {
    return absl::Status(
        unpacked.status().code(),
        absl::StrCat("code ", code.sha256().substr(0, 12),
                     code.source().empty() ? "" : absl::StrCat(" from ", code.source()), ": ",
                     unpacked.status().message()));
  }
  job.ready = code.sha256();
  return unpacked;
}

absl::StatusOr<std::string> JobCode::Unpack(const std::string& job_id, const std::string& sha256,
                                            const std::optional<RunAs>& owner) {
  // root and the job's directory: the ranks' user passes through, lists
  // nothing. Fetching and unpacking happen in <root>/.unpack, which only
  // this daemon may enter: no rank can touch a tree being written.
  const std::string job_dir = absl::StrCat(root_, "/", job_id);
  const std::string staging = root_ + "/.unpack";
  RETURN_IF_ERROR(MakePrivateDir(root_, 0711));
  RETURN_IF_ERROR(MakePrivateDir(job_dir, 0711));
  RETURN_IF_ERROR(MakePrivateDir(staging, 0700));
  const std::string dir = job_dir + "/code";
  const std::string marker = job_dir + "/code.sha256";
  // What an earlier worker process unpacked is used again.
  if (ReadSmallFile(marker) == sha256 && fs::is_directory(dir)) return dir;

  std::error_code ignored;
  fs::remove(marker, ignored);
  (void)RemoveTree(dir);
  const std::string archive = absl::StrCat(staging, "/", job_id, ".tar.gz");
  const std::string unpacking = absl::StrCat(staging, "/", job_id);
  fs::remove(archive, ignored);
  fs::remove_all(unpacking, ignored);
  absl::Status status = fetch_(sha256, archive);
  if (status.ok()) {
    absl::StatusOr<std::string> digest = Sha256OfFile(archive);
    if (!digest.ok()) {
      status = absl::InternalError("cannot read the fetched archive");
    } else if (*digest != sha256) {
      status = absl::DataLossError(absl::StrCat("the fetched archive has SHA-256 ", *digest));
    } else {
      status = UnpackArchive(archive, unpacking, limits_);
    }
  }
  fs::remove(archive, ignored);
  if (!status.ok()) return status;
  // In place first, then the job's user's: the walk opens every directory
  // without following links, so a rank changing the tree meanwhile cannot
  // turn it elsewhere.
  if (rename(unpacking.c_str(), dir.c_str()) != 0) {
    const absl::Status error = ErrnoError("cannot move the unpacked code into place");
    fs::remove_all(unpacking, ignored);
    return error;
  }
  // The job's alone: other jobs' ranks may not read it.
  absl::Status owned = chmod(dir.c_str(), 0700) == 0
                           ? absl::OkStatus()
                           : ErrnoError("cannot set the code directory's mode");
  if (owned.ok() && owner.has_value()) owned = ChownTree(dir, UnpackOwner{owner->uid, owner->gid});
  if (!owned.ok()) {
    (void)RemoveTree(dir);  // partly the job's user's already
    return absl::InternalError(
        absl::StrCat("cannot give the code to the job's user: ", owned.message()));
  }
  if (!(std::ofstream(marker) << sha256)) {
    return absl::InternalError("cannot record the code unpacked");
  }
  spdlog::info("job {}: code {} unpacked in {}", job_id, sha256.substr(0, 12), dir);
  return dir;
}

void JobCode::Delete(const std::string& job_id) {
  if (!ValidateJobId(job_id).ok()) return;
  {
    MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it != jobs_.end() && it->second.busy) return;  // a rank is starting after all
    if (it != jobs_.end()) jobs_.erase(it);
  }
  // Its code, home and error directories: the job's user's, whatever modes
  // it gave them.
  if (absl::Status removed = RemoveTree(absl::StrCat(root_, "/", job_id)); !removed.ok()) {
    spdlog::warn("job {}: cannot remove its files: {}", job_id, std::string(removed.message()));
  }
}

}  // namespace ringmaster
