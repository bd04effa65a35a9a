#include "worker/rank_identity.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

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
    return absl::FailedPreconditionError(absl::StrCat(
        "--rank-user ", rank_user, " needs a worker running as root or with CAP_SETUID and "
        "CAP_SETGID (this one runs as uid ", geteuid(), " without them)"));
  }
  if (as->uid == 0) spdlog::warn("--rank-user {}: ranks run as root", rank_user);
  return as;
}

}  // namespace ringmaster
