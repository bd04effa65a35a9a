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
  std::string metrics;    // metrics_bind:metrics_port, empty when metrics are off
  int port = 0;
};

// Whether `host` (a --bind value) is reachable from this machine only.
bool IsLoopbackHost(const std::string& host);

// A flag holding a duration: "3s", "500ms", "1m30s", or a plain number of
// seconds. A malformed value is a parse error naming the flag.
CLI::Option* AddDurationOption(CLI::App& app, const std::string& name, absl::Duration* value,
                               const std::string& help);

class DaemonFlags {
 public:
  DaemonFlags(int port, int metrics_port) : port_(port), metrics_port_(metrics_port) {}

  void AddTo(CLI::App& app, const std::string& advertise_help);
  // After parsing: sets up logging as `name`, blocks SIGTERM/SIGINT for
  // WaitForTerminationSignal, and resolves the addresses. A --bind beyond
  // loopback is refused (FAILED_PRECONDITION saying why) without --tls-dir,
  // unless --insecure was given.
  absl::StatusOr<DaemonAddresses> Start(const std::string& name);
  // With such a --bind, logs a warning now and every hour on a thread of
  // its own: call it once the daemon may have threads.
  void WarnWhileInsecure(const std::string& name) const;

  // The --tls-dir given; empty: plaintext.
  const std::string& tls_dir() const { return tls_dir_; }
  // Whether --insecure was given.
  bool insecure() const { return insecure_; }
  // How long the series of an ended job stay on /metrics.
  absl::Duration metrics_retention() const { return metrics_retention_; }

 private:
  int port_;
  int metrics_port_;
  std::string bind_ = "127.0.0.1";
  std::string metrics_bind_ = "127.0.0.1";
  bool insecure_ = false;
  std::string tls_dir_;
  std::string advertise_;
  std::string log_level_ = "info";
  absl::Duration metrics_retention_ = absl::Minutes(10);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_DAEMON_FLAGS_H_
