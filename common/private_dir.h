// Directories that hold job specs, environments and logs are not for every
// user of the machine.
#ifndef RINGMASTER_COMMON_PRIVATE_DIR_H_
#define RINGMASTER_COMMON_PRIVATE_DIR_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"

namespace ringmaster {

// Creates `dir` (and missing parents) and sets its mode to `mode`, also
// when it already existed with a looser one. FAILED_PRECONDITION naming
// the directory when either fails.
absl::Status MakePrivateDir(const std::string& dir, mode_t mode = 0700);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_PRIVATE_DIR_H_
