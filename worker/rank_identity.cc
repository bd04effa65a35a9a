#include "worker/rank_identity.h"

#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <filesystem>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/job_id.h"
#include "common/status_macros.h"

namespace ringmaster {

bool CanSwitchUsers() {
  if (geteuid() == 0) return true;
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  auto has = [&](int cap) { return (data[cap / 32].effective >> (cap % 32)) & 1; };
  return has(CAP_SETUID) && has(CAP_SETGID);
}

absl::StatusOr<std::optional<RunAs>> RankIdentity(const std::string& rank_user) {
  const bool can_switch = CanSwitchUsers();
  if (rank_user.empty() && !can_switch) return std::nullopt;
  absl::StatusOr<RunAs> as = ResolveRunAs(rank_user.empty() ? "nobody" : rank_user);
  if (!as.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank-user: ", as.status().message(),
        rank_user.empty() ? " (a worker that may switch users runs ranks as nobody by default)"
                          : ""));
  }
  if (as->uid == geteuid() && as->gid == getegid() && !can_switch) return std::nullopt;
  if (!can_switch) {
    return absl::FailedPreconditionError(
        absl::StrCat("--rank-user ", rank_user,
                     " needs a worker running as root or with CAP_SETUID and "
                     "CAP_SETGID (this one runs as uid ",
                     geteuid(), " without them)"));
  }
  if (as->uid == 0) spdlog::warn("--rank-user {}: ranks run as root", rank_user);
  return as;
}

absl::StatusOr<UidRange> ParseUidRange(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '-');
  uint64_t first = 0, last = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &first) ||
      !absl::SimpleAtoi(parts[1], &last) || first < 1000 || first > last || last >= 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank-uid-range \"", text, "\": expected FIRST-LAST with 1000 <= FIRST <= LAST < ",
        0x7fffffff, " (e.g. ", kDefaultRankUidRange, ")"));
  }
  return UidRange{static_cast<uid_t>(first), static_cast<uid_t>(last - first + 1)};
}

RankIdentities RankIdentities::Shared(std::optional<RunAs> shared) {
  RankIdentities out;
  out.shared_ = std::move(shared);
  return out;
}

RankIdentities RankIdentities::PerJob(UidRange range, std::string jobs_dir) {
  RankIdentities out;
  out.per_job_ = true;
  out.range_ = range;
  out.jobs_dir_ = std::move(jobs_dir);
  return out;
}

absl::StatusOr<std::optional<RunAs>> RankIdentities::ForJob(const std::string& job_id) const {
  if (!per_job_) return shared_;
  const auto slot = [this](absl::string_view id) {
    return static_cast<uid_t>(JobNumber(id) % range_.count);
  };
  const uid_t uid = range_.first + slot(job_id);
  // Another job of the same slot with files here still owns them as uid.
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(jobs_dir_, error)) {
    const std::string other = entry.path().filename().string();
    if (other == job_id || !ValidateJobId(other).ok() || slot(other) != slot(job_id)) continue;
    struct stat st {};
    if (lstat((entry.path() / "home").c_str(), &st) == 0 && st.st_uid == uid) {
      return absl::FailedPreconditionError(
          absl::StrCat("uid ", uid, " of job ", job_id, " is still held by the files of job ",
                       other, " on this worker; delete job ", other, " first"));
    }
  }
  RunAs as;
  as.name = absl::StrCat("job ", job_id, " (uid ", uid, ")");
  as.home = absl::StrCat(jobs_dir_, "/", job_id, "/home");
  as.uid = uid;
  as.gid = uid;
  return as;
}

std::string RankIdentities::Describe() const {
  if (per_job_) {
    return absl::StrCat("a uid of its own per job, from ", range_.first, "-",
                        range_.first + range_.count - 1);
  }
  if (!shared_) return "the worker's user (every job alike)";
  return absl::StrCat(shared_->name, " (uid ", shared_->uid, ", gid ", shared_->gid,
                      "; every job alike)");
}

absl::StatusOr<RankIdentities> ChooseRankIdentities(const std::string& rank_user,
                                                    const std::string& uid_range,
                                                    const std::string& jobs_dir) {
  if (!rank_user.empty()) {
    if (!uid_range.empty()) {
      return absl::InvalidArgumentError(
          "--rank-user and --rank-uid-range: give one (every job as one user, or a uid per "
          "job)");
    }
    ASSIGN_OR_RETURN(std::optional<RunAs> shared, RankIdentity(rank_user));
    return RankIdentities::Shared(std::move(shared));
  }
  ASSIGN_OR_RETURN(const UidRange range,
                   ParseUidRange(uid_range.empty() ? kDefaultRankUidRange : uid_range));
  if (!CanSwitchUsers()) {
    if (!uid_range.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--rank-uid-range needs a worker running as root or with CAP_SETUID and CAP_SETGID "
          "(this one runs as uid ",
          geteuid(), " without them)"));
    }
    return RankIdentities::Shared(std::nullopt);
  }
  return RankIdentities::PerJob(range, jobs_dir);
}

}  // namespace ringmaster
