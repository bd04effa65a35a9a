// Who a worker's ranks run as (--rank-user).
#ifndef RINGMASTER_WORKER_RANK_IDENTITY_H_
#define RINGMASTER_WORKER_RANK_IDENTITY_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/subprocess.h"

namespace ringmaster {

// Whether this process may run children as another user: it is root, or it
// has CAP_SETUID and CAP_SETGID in effect (a non-root worker given them as
// ambient capabilities, as the systemd unit does).
bool CanSwitchUsers();

// The ranks' user for `rank_user` ("user[:group]"; empty: "nobody" when
// this process may switch users, else its own): nullopt when ranks run as
// the worker does. FAILED_PRECONDITION when a worker that may not switch
// is asked for another user, INVALID_ARGUMENT for one that does not exist.
absl::StatusOr<std::optional<RunAs>> RankIdentity(const std::string& rank_user);

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_RANK_IDENTITY_H_
