// The flags every Ringmaster daemon has (where it serves gRPC and /metrics,
// how peers reach it, its log level) and their start-up: logging, blocked
// termination signals, resolved addresses.
#ifndef RINGMASTER_COMMON_DAEMON_FLAGS_H_
#define RINGMASTER_COMMON_DAEMON_FLAGS_H_

#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster {

struct DaemonAddresses {
  std::string listen;     // bind:port for gRPC
  std::string advertise;  // what peers dial
  std::string metrics;    // bind:metrics_port, empty when metrics are off
  int port = 0;
};

// A flag holding a duration: "3s", "500ms", "1m30s", or a plain number of
// seconds. A malformed value is a parse error naming the flag.
CLI::Option* AddDurationOption(CLI::App& app, const std::string& name, absl::Duration* value,
                               const std::string& help);

class DaemonFlags {
 public:
  DaemonFlags(int port, int metrics_port) : port_(port), metrics_port_(metrics_port) {}

  void AddTo(CLI::App& app, const std::string& advertise_help);
  // After parsing: sets up logging as `name`, blocks SIGTERM/SIGINT for
  // WaitForTerminationSignal, and resolves the addresses.
  absl::StatusOr<DaemonAddresses> Start(const std::string& name);

 private:
  int port_;
  int metrics_port_;
  std::string bind_ = "0.0.0.0";
  std::string advertise_;
  std::string log_level_ = "info";
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_DAEMON_FLAGS_H_
