// The coordinator's HTTP/JSON API (--http-port, 7072): each request of a
// route (http_routes.h) becomes a call of the same method on the
// coordinator's own gRPC server, in process, with the caller's bearer
// token: the same credentials, authorization and limits as the gRPC API.
// With TLS, it serves HTTPS with the coordinator's certificate (through a
// TlsRelay). The web console (coordinator/console) is served at / on
// the same port, signed in by a session cookie (console_session.h).
#ifndef RINGMASTER_COORDINATOR_API_HTTP_GATEWAY_H_
#define RINGMASTER_COORDINATOR_API_HTTP_GATEWAY_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "common/credentials.h"
#include "common/mutex.h"
#include "common/tls.h"
#include "common/tls_relay.h"
#include "coordinator/api/console_session.h"
#include "coordinator/api/http_streams.h"

struct mg_connection;
struct mg_context;

namespace ringmaster {

struct HttpGatewayOptions {
  std::string address;  // "127.0.0.1:7072"; port 0 picks a free one
  Tls tls;              // the coordinator's certificate and key; nullopt: plain HTTP
  int64_t max_body_bytes = 4 << 20;
  // Signs the console's sessions: the cluster's key. nullptr: no console
  // sign-in (an open cluster's console needs none).
  const CredentialSigner* signer = nullptr;
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
  // The credential a request is made with: its Authorization header, or
  // its console session's, when a change also carries the session's CSRF
  // token. Empty when it has neither.
  absl::StatusOr<std::string> Authorization(mg_connection* connection) const;
  // The API's routes, as gRPC calls.
  void ServeApi(mg_connection* connection, const std::string& authorization);
  // The console's files.
  void ServeConsole(mg_connection* connection);
  // /login: `ringmaster ui`'s code, asked about (GET ?code=) and taken
  // for a session cookie (POST code=).
  void ServeLogin(mg_connection* connection);
  // /api/v1/session: who the request is (GET), a session for a token
  // pasted (POST), or the session forgotten (DELETE). `bad_cookie`: the
  // request's session cookie is not good, and is forgotten.
  void ServeSession(mg_connection* connection, const std::string& authorization, bool bad_cookie);
  // The reply that sets `session`'s cookies and says whose it is.
  void RespondSignedIn(mg_connection* connection, const ConsoleSession& session);
  // Whether cookies may say Secure: served with TLS to a name other than
  // this machine's loopback (where `ringmaster ui`'s local proxy is).
  bool SecureCookies(mg_connection* connection) const;
  // The headers of a console page's reply, and the Set-Cookie headers that
  // hold `session` (or forget it: nullopt).
  std::string PageHeaders(mg_connection* connection,
                          const std::optional<ConsoleSession>& session) const;

  // Streams open at once at most: each holds one of civetweb's 256
  // threads, and the rest serve the unary routes. One caller (a user, the
  // admin, or an address without a credential) holds at most a sixth.
  static constexpr int kMaxStreams = 192;
  static constexpr int kMaxStreamsPerCaller = 32;
  // Takes a stream's place for the holder of `authorization` calling from
  // `address`; RESOURCE_EXHAUSTED when none is left. CloseStream gives it
  // back.
  absl::StatusOr<std::string> OpenStream(const std::string& authorization,
                                         const std::string& address);
  void CloseStream(const std::string& caller);
  Mutex streams_mu_;
  int streams_ ABSL_GUARDED_BY(streams_mu_) = 0;
  std::map<std::string, int> streams_by_ ABSL_GUARDED_BY(streams_mu_);

  HttpGatewayOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  JobEventCache job_events_;  // the streams' shared JSON of job events
  mg_context* context_ = nullptr;
  std::string host_;
  int plain_port_ = 0;  // civetweb's
  int port_ = 0;        // served: civetweb's, or the TlsRelay's
  std::unique_ptr<TlsRelay> tls_;
  std::unique_ptr<ConsoleSessions> sessions_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_HTTP_GATEWAY_H_
