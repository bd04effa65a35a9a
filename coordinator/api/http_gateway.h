// The coordinator's HTTP/JSON API (--http-port, 7072): each request of a
// route (http_routes.h) becomes a call of the same method on the
// coordinator's own gRPC server, in process, with the caller's bearer
// token: the same credentials, authorization and limits as the gRPC API.
// With TLS, it serves HTTPS with the coordinator's certificate (through a
// TlsTerminator).
#ifndef RINGMASTER_COORDINATOR_API_HTTP_GATEWAY_H_
#define RINGMASTER_COORDINATOR_API_HTTP_GATEWAY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "common/tls.h"
#include "coordinator/api/tls_terminator.h"

struct mg_connection;
struct mg_context;

namespace ringmaster {

struct HttpGatewayOptions {
  std::string address;  // "127.0.0.1:7072"; port 0 picks a free one
  Tls tls;              // the coordinator's certificate and key; nullopt: plain HTTP
  int64_t max_body_bytes = 4 << 20;
};

class HttpGateway {
 public:
  // Serves `options.address`, calling the methods on `channel` (the
  // coordinator's in-process channel).
  static absl::StatusOr<std::unique_ptr<HttpGateway>> Start(const HttpGatewayOptions& options,
                                                            std::shared_ptr<grpc::Channel> channel);
  ~HttpGateway();
  HttpGateway(const HttpGateway&) = delete;
  HttpGateway& operator=(const HttpGateway&) = delete;

  int port() const { return port_; }

 private:
  HttpGateway() = default;
  static int Handle(mg_connection* connection, void* self);
  void Serve(mg_connection* connection);
  // The request's headers as the API takes them: a well-formed bearer
  // token, no other origin's page, this machine's names on plain HTTP, a
  // body's type given.
  absl::Status CheckHeaders(mg_connection* connection) const;

  // Streams open at once at most: each holds one of civetweb's threads.
  static constexpr int kMaxStreams = 64;
  std::atomic<int> streams_{0};

  HttpGatewayOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  mg_context* context_ = nullptr;
  std::string host_;
  int plain_port_ = 0;  // civetweb's
  int port_ = 0;        // served: civetweb's, or the TlsTerminator's
  std::unique_ptr<TlsTerminator> tls_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_HTTP_GATEWAY_H_
