// Serves a metrics Registry on GET /metrics (civetweb), and, when given a
// readiness test, GET /ready: 200 while it holds, else 503 (an HTTP
// readiness probe's).
#ifndef RINGMASTER_COMMON_METRICS_SERVER_H_
#define RINGMASTER_COMMON_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics.h"

struct mg_context;
struct mg_connection;

namespace ringmaster {

// Stops civetweb's server `context` (none: nullptr) listening on `host`
// and `port`, without waiting out its listener's 2 s poll.
void StopCivetweb(::mg_context* context, const std::string& host, int port);

// Thread-safe; civetweb's threads serve scrapes.
class MetricsServer {
 public:
  // Listens on `address` ("host:port"; port 0 is refused: metrics ports are
  // configured). The registry must outlive the server.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address, metrics::Registry* registry,
      std::function<bool()> ready = nullptr);
  ~MetricsServer();

 private:
  MetricsServer() = default;
  static int Handle(::mg_connection* connection, void* self);
  static int HandleReady(::mg_connection* connection, void* self);

  metrics::Registry* registry_ = nullptr;
  std::function<bool()> ready_;
  int port_ = 0;
  std::string host_;
  ::mg_context* context_ = nullptr;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_METRICS_SERVER_H_
