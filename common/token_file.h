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
// naming the file when it cannot be read, is not a regular file, is
// readable or writable by group or others, or holds no token.
absl::StatusOr<std::string> ReadToken(const std::string& path);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_TOKEN_FILE_H_
