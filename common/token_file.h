// Where a daemon or the CLI gets its bearer token: a file only its owner
// can read (--token-file), else the RINGMASTER_TOKEN environment variable;
// never the command line, which every user of the machine can read in ps.
#ifndef RINGMASTER_COMMON_TOKEN_FILE_H_
#define RINGMASTER_COMMON_TOKEN_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

// The token in `path` (surrounding whitespace dropped) when `path` is not
// empty, else $RINGMASTER_TOKEN, else "" (no token). FAILED_PRECONDITION
// naming the file when it cannot be read, is not a regular file, breaks
// CheckSecretFileMode, or holds no token.
absl::StatusOr<std::string> ReadToken(const std::string& path);

// The rule for a file holding a secret (a token, a TLS key): nothing for
// others, and nothing for its group unless root owns it and the group may
// only read it (root:fsGroup 0440, as Kubernetes mounts a Secret).
// FAILED_PRECONDITION naming `what`, its mode and the fix otherwise.
absl::Status CheckSecretFileMode(const std::string& path, const std::string& what);

// The contents of the secret file `path` (a token, a password), as they
// are, once it passes CheckSecretFileMode. FAILED_PRECONDITION naming
// `what` when it does not or cannot be read.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_TOKEN_FILE_H_
