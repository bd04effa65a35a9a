// Job ids as every service takes them: [a-z0-9][a-z0-9-]{0,62}, so that an
// id is safe in a path, a cgroup name, a metric label and a URL. Checked
// before any of those is built from request text.
#ifndef RINGMASTER_COMMON_JOB_ID_H_
#define RINGMASTER_COMMON_JOB_ID_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ringmaster {

// INVALID_ARGUMENT naming the id (escaped, at most 64 bytes of it) and the
// rule when `id` does not match.
absl::Status ValidateJobId(absl::string_view id);

// The number in a job id ("<name>-<number>", numbers increasing with
// submission); 0 for an id without one.
int64_t JobNumber(absl::string_view job_id);

// ValidateJobId, and a rank that is not negative.
absl::Status ValidateRankRef(absl::string_view job_id, int rank);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_JOB_ID_H_
