#include "common/metrics_server.h"

#include <civetweb.h>

#include "absl/strings/str_cat.h"

namespace ringmaster {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address, metrics::Registry* registry) {
  static const unsigned initialized = mg_init_library(0);
  (void)initialized;
  std::unique_ptr<MetricsServer> server(new MetricsServer);
  server->registry_ = registry;
  const char* options[] = {"listening_ports", address.c_str(), "num_threads", "2", nullptr};
  mg_callbacks callbacks{};
  server->context_ = mg_start(&callbacks, nullptr, options);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address,
                                               " (address in use?)"));
  }
  mg_set_request_handler(server->context_, "/metrics", &MetricsServer::Handle, server.get());
  return server;
}

MetricsServer::~MetricsServer() {
  if (context_ != nullptr) mg_stop(context_);
}

int MetricsServer::Handle(::mg_connection* connection, void* self) {
  const std::string body = static_cast<MetricsServer*>(self)->registry_->Serialize();
  const std::string head = absl::StrCat(
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
      "Content-Length: ",
      body.size(), "\r\nConnection: close\r\n\r\n");
  mg_write(connection, head.data(), head.size());
  mg_write(connection, body.data(), body.size());
  return 200;
}

}  // namespace ringmaster
