#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace ringmaster {

void InitLogging(const std::string& name, const std::string& level) {
  auto logger = spdlog::stderr_logger_mt(name);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %L [%n] %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace ringmaster
