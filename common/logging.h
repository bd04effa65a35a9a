// Process-wide logging setup on spdlog. Daemons call InitLogging once from
// main(); the rest of the code uses spdlog's free functions.
#ifndef RINGMASTER_COMMON_LOGGING_H_
#define RINGMASTER_COMMON_LOGGING_H_

#include <string>

namespace ringmaster {

// `name` prefixes each line; `level` is one of spdlog's level names
// (trace, debug, info, warn, error). Logs go to stderr.
void InitLogging(const std::string& name, const std::string& level);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_LOGGING_H_
