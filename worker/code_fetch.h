// JobCode's fetch from the coordinator: ReadCode a MiB at a time, from the
// leader when there are several (any leader has every archive).
#ifndef RINGMASTER_WORKER_CODE_FETCH_H_
#define RINGMASTER_WORKER_CODE_FETCH_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "common/coordinator_targets.h"
#include "worker/job_code.h"

namespace ringmaster {

// Each ReadCode call carries `token` (this worker's credential) and has
// `call_timeout`, and is made again at the leader a standby names or at the
// next coordinator within it; the archive is written to the path JobCode
// gives.
JobCode::Fetch CoordinatorCodeFetch(std::shared_ptr<CoordinatorTargets> coordinators,
                                    std::string token,
                                    absl::Duration call_timeout = absl::Seconds(30));

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_CODE_FETCH_H_
