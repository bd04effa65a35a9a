// Serves a metrics Registry on GET /metrics (civetweb).
#ifndef RINGMASTER_COMMON_METRICS_SERVER_H_
#define RINGMASTER_COMMON_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics.h"

struct mg_context;
struct mg_connection;

namespace ringmaster {

// Thread-safe; civetweb's threads serve scrapes.
class MetricsServer {
 public:
  // Listens on `address` ("host:port"; port 0 is refused: metrics ports are
  // configured). The registry must outlive the server.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address,
                                                              metrics::Registry* registry);
  ~MetricsServer();

 private:
  MetricsServer() = default;
  static int Handle(::mg_connection* connection, void* self);

  metrics::Registry* registry_ = nullptr;
  int port_ = 0;
  std::string host_;
  ::mg_context* context_ = nullptr;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_METRICS_SERVER_H_
