#include "coordinator/api/http_gateway.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "common/grpc_status.h"
#include "common/metrics_server.h"
#include "common/net.h"
#include "common/status_macros.h"
#include "common/tls_relay.h"
#include "coordinator/api/http_routes.h"
#include "coordinator/api/http_streams.h"
#include "coordinator/api/openapi.h"
#include "coordinator/console/console_assets.h"
#include "proto/cluster.pb.h"

namespace ringmaster {
namespace {

namespace pb = google::protobuf;

// A unary call's longest wait: as the CLI's.
constexpr absl::Duration kCallTimeout = absl::Seconds(60);
// The longest bearer token forwarded.
constexpr size_t kMaxTokenBytes = 4096;
// What the console's pages may load and do: only this origin's scripts,
// styles, images and API, no inline script, in no other site's frame.
constexpr absl::string_view kPageHeaders =
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'\r\n"
    "X-Frame-Options: DENY\r\nReferrer-Policy: same-origin\r\n";

// The request's body, up to `limit` bytes: RESOURCE_EXHAUSTED beyond.
absl::StatusOr<std::string> ReadBody(mg_connection* connection, int64_t declared, int64_t limit) {
  if (declared > limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the body has ", declared, " bytes; at most ", limit, " are taken"));
  }
  std::string body;
  char buffer[16 << 10];
  for (;;) {
    const int n = mg_read(connection, buffer, sizeof(buffer));
    if (n <= 0) break;
    body.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(body.size()) > limit) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the body has more than ", limit, " bytes, the most taken"));
    }
  }
  return body;
}

// A header value as it may be forwarded: "Bearer " and a token of visible
// ASCII (gRPC takes nothing else in metadata, and aborts the process on it).
bool WellFormedAuthorization(absl::string_view value) {
  if (!absl::ConsumePrefix(&value, "Bearer ") || value.empty() || value.size() > kMaxTokenBytes) {
    return false;
  }
  return std::all_of(value.begin(), value.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// "host:port" of an Origin ("https://host:port"); empty when it has none.
absl::string_view OriginAuthority(absl::string_view origin) {
  const size_t scheme = origin.find("://");
  return scheme == absl::string_view::npos ? "" : origin.substr(scheme + 3);
}

bool IsAddressOrLocalName(absl::string_view name) {
  in6_addr any;
  const std::string text(name);
  return name == "localhost" || text == Hostname() || inet_pton(AF_INET, text.c_str(), &any) == 1 ||
         inet_pton(AF_INET6, text.c_str(), &any) == 1;
}

// Makes the unary call `method` with `request` on `channel`, as the holder
// of `authorization` (the HTTP header, "Bearer ..."; empty: none).
absl::StatusOr<std::unique_ptr<pb::Message>> Call(grpc::Channel* channel,
                                                  const pb::MethodDescriptor& method,
                                                  const pb::Message& request,
                                                  const std::string& authorization) {
  grpc::GenericStub stub(std::shared_ptr<grpc::Channel>(channel, [](grpc::Channel*) {}));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
  if (!authorization.empty()) context.AddMetadata("authorization", authorization);
  const std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer sent(&slice, 1);
  grpc::ByteBuffer received;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, absl::StrCat("/", method.service()->full_name(), "/", method.name()),
                 grpc::StubOptions(), &sent, &received, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<grpc::Slice> slices;
  if (!received.Dump(&slices).ok()) return absl::InternalError("cannot read the reply");
  std::string reply;
  for (const grpc::Slice& s : slices)
    reply.append(reinterpret_cast<const char*>(s.begin()), s.size());
  std::unique_ptr<pb::Message> response = NewMessage(method.output_type());
  if (!response->ParseFromString(reply)) return absl::InternalError("cannot parse the reply");
  return response;
}

// The page that asks before a code signs the browser in. `who` and `code`
// are of [a-z0-9_.-] (user names, hex and the code's dots), nothing HTML
// would read as markup.
std::string SignInPage(absl::string_view who, absl::string_view code) {
  return absl::StrCat(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>Sign in: Ringmaster</title><link rel=\"stylesheet\" href=\"/console/app.css\">"
      "</head><body><main><div class=\"signin\"><h1>Sign in</h1>"
      "<p>Sign in to this cluster's console as <b id=\"login-user\">",
      who,
      "</b>? Only go on if you ran <code>ringmaster ui</code> yourself: whoever made this link "
      "may be someone else, and you would act as them.</p>"
      "<form method=\"post\" action=\"/login\"><input type=\"hidden\" name=\"code\" value=\"",
      code, "\"><button type=\"submit\" id=\"sign-in\">Sign in as ", who,
      "</button></form></div></main></body></html>\n");
}

// What /api/v1/session says of whom: {"user", "admin"}, and "open" and
// "expiresUnixMs" when given.
std::string WhoJson(absl::string_view who, std::optional<bool> open,
                    std::optional<absl::Time> expires) {
  std::string json =
      absl::StrCat("{\"user\":\"", who, "\",\"admin\":", who == kAdminUser ? "true" : "false");
  if (open) absl::StrAppend(&json, ",\"open\":", *open ? "true" : "false");
  if (expires) absl::StrAppend(&json, ",\"expiresUnixMs\":\"", absl::ToUnixMillis(*expires), "\"");
  return json + "}";
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpGateway>> HttpGateway::Start(
    const HttpGatewayOptions& options, std::shared_ptr<grpc::Channel> channel) {
  static const unsigned initialized = mg_init_library(0);
  (void)initialized;
  std::unique_ptr<HttpGateway> gateway(new HttpGateway);
  gateway->options_ = options;
  gateway->channel_ = std::move(channel);
  // With TLS, civetweb serves plain HTTP on loopback behind a TlsRelay.
  const std::string plain = options.tls ? "127.0.0.1:0" : options.address;
  const char* civet_options[] = {"listening_ports",    plain.c_str(), "num_threads", "256",
                                 "request_timeout_ms", "30000",       nullptr};
  mg_callbacks callbacks{};
  gateway->context_ = mg_start(&callbacks, gateway.get(), civet_options);
  if (gateway->context_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve the HTTP API on ", options.address, " (address in use?)"));
  }
  mg_set_request_handler(gateway->context_, "/", &HttpGateway::Handle, gateway.get());
  if (options.signer != nullptr) {
    gateway->sessions_ = std::make_unique<ConsoleSessions>(options.signer, RealClock::Get());
  }
  mg_server_port port{};
  if (mg_get_server_ports(gateway->context_, 1, &port) == 1) gateway->port_ = port.port;
  gateway->host_ = plain.substr(0, plain.rfind(':'));
  gateway->plain_port_ = gateway->port_;
  if (options.tls) {
    ASSIGN_OR_RETURN(gateway->tls_,
                     TlsRelay::Terminate(options.address, *options.tls, gateway->port_));
    gateway->port_ = gateway->tls_->port();
  }
  return gateway;
}

HttpGateway::~HttpGateway() {
  tls_.reset();
  StopCivetweb(context_, host_, plain_port_);
}

int HttpGateway::Handle(mg_connection* connection, void* self) {
  static_cast<HttpGateway*>(self)->Serve(connection);
  return 1;
}

absl::Status HttpGateway::CheckHeaders(mg_connection* connection) const {
  const char* authorization = mg_get_header(connection, "Authorization");
  if (authorization != nullptr && !WellFormedAuthorization(authorization)) {
    return absl::UnauthenticatedError(
        "the Authorization header must be \"Bearer <token>\", a token of visible ASCII");
  }
  // A browser names the page a request comes from: another site's page
  // may not act with what the browser holds, nor read the answers.
  const char* origin = mg_get_header(connection, "Origin");
  const char* host = mg_get_header(connection, "Host");
  if (origin != nullptr && (host == nullptr || OriginAuthority(origin) != host)) {
    return absl::PermissionDeniedError(
        absl::StrCat("a request from the page of another origin (", origin, ") is refused"));
  }
  // Without TLS, a name that resolves to this machine only for the
  // request's sake (DNS rebinding) makes another site's page same-origin.
  if (!options_.tls && host != nullptr && !IsAddressOrLocalName(HostOfAddress(host))) {
    return absl::PermissionDeniedError(
        absl::StrCat("plain HTTP is served for this machine's addresses and names only, not for \"",
                     host, "\""));
  }
  const char* content_type = mg_get_header(connection, "Content-Type");
  const mg_request_info* info = mg_get_request_info(connection);
  const bool body = info->content_length > 0 || mg_get_header(connection, "Transfer-Encoding");
  const absl::string_view type = content_type ? content_type : "";
  const bool form = std::string(info->local_uri) == "/login" &&
                    absl::StartsWith(type, "application/x-www-form-urlencoded");
  if (body && !form && !absl::StrContains(type, "json") && !absl::StrContains(type, "yaml")) {
    return absl::InvalidArgumentError(
        "a body must say its type: Content-Type: application/json or application/yaml");
  }
  return absl::OkStatus();
}

void HttpGateway::Serve(mg_connection* connection) {
  const mg_request_info* info = mg_get_request_info(connection);
  if (absl::Status s = CheckHeaders(connection); !s.ok()) {
    RespondError(connection, s);
    return;
  }
  const absl::string_view uri = info->local_uri;
  if (uri == "/login") {
    ServeLogin(connection);
    return;
  }
  if (!absl::StartsWith(uri, "/api/")) {
    ServeConsole(connection);
    return;
  }
  absl::StatusOr<std::string> authorization = Authorization(connection);
  if (uri == "/api/v1/session") {
    // A session cookie no longer good is forgotten here, rather than keep
    // the browser from signing in again.
    ServeSession(connection, authorization.value_or(""), !authorization.ok());
  } else if (!authorization.ok()) {
    RespondError(connection, authorization.status());
  } else {
    ServeApi(connection, *authorization);
  }
}

void HttpGateway::ServeApi(mg_connection* connection, const std::string& authorization) {
  const mg_request_info* info = mg_get_request_info(connection);
  if (std::string(info->local_uri) == "/api/v1/openapi.json" &&
      std::string(info->request_method) == "GET") {
    static const std::string* document = new std::string(OpenApiDocument());
    Respond(connection, 200, *document);
    return;
  }
  absl::StatusOr<MatchedRoute> matched = MatchHttpRoute(info->request_method, info->local_uri);
  if (!matched.ok()) {
    // A path of the API, not with this verb: 405, as HTTP has it.
    const bool verb = matched.status().code() == absl::StatusCode::kUnimplemented;
    Respond(connection, verb ? 405 : 404, ErrorJson(matched.status()));
    return;
  }
  absl::StatusOr<std::string> body =
      ReadBody(connection, info->content_length, options_.max_body_bytes);
  if (!body.ok()) {
    Respond(connection, 413, ErrorJson(body.status()));
    return;
  }
  std::unique_ptr<pb::Message> request = NewMessage(matched->method->input_type());
  const char* content_type = mg_get_header(connection, "Content-Type");
  if (absl::Status s = FillHttpRequest(*matched, info->query_string ? info->query_string : "",
                                       *body, content_type ? content_type : "", request.get());
      !s.ok()) {
    RespondError(connection, s);
    return;
  }
  if (matched->method->server_streaming()) {
    LogPositions positions;
    const char* last = mg_get_header(connection, "Last-Event-ID");
    if (absl::Status s = ResumeFrom(last ? last : "", request.get(), &positions); !s.ok()) {
      RespondError(connection, s);
      return;
    }
    absl::StatusOr<std::string> caller = OpenStream(authorization, info->remote_addr);
    if (!caller.ok()) {
      RespondError(connection, caller.status());
      return;
    }
    ServeEventStream(connection, channel_.get(), *matched->method, *request,
                     authorization.empty() ? nullptr : authorization.c_str(), std::move(positions),
                     &job_events_);
    CloseStream(*caller);
    return;
  }
  absl::StatusOr<std::unique_ptr<pb::Message>> response =
      Call(channel_.get(), *matched->method, *request, authorization);
  if (!response.ok()) {
    RespondError(connection, response.status());
    return;
  }
  Respond(connection, 200, ToJson(**response));
}

absl::StatusOr<std::string> HttpGateway::OpenStream(const std::string& authorization,
                                                    const std::string& address) {
  // The caller a signed credential names (each request of a certificate
  // has a session of its own), else the credential, else the address.
  std::string caller = authorization.empty() ? address : authorization;
  absl::string_view token = authorization;
  if (options_.signer != nullptr && absl::ConsumePrefix(&token, "Bearer ")) {
    if (std::optional<Caller> signed_caller = options_.signer->Verify(token, absl::Now())) {
      caller = absl::StrCat(static_cast<int>(signed_caller->role), ":", signed_caller->id);
    }
  }
  MutexLock lock(&streams_mu_);
  if (streams_ >= kMaxStreams) {
    return absl::ResourceExhaustedError(
        absl::StrCat(kMaxStreams, " streams are open, the most the API serves"));
  }
  int& mine = streams_by_[caller];
  if (mine >= kMaxStreamsPerCaller) {
    return absl::ResourceExhaustedError(absl::StrCat("this caller has ", kMaxStreamsPerCaller,
                                                     " streams open, the most one may hold"));
  }
  ++mine;
  ++streams_;
  return caller;
}

void HttpGateway::CloseStream(const std::string& caller) {
  MutexLock lock(&streams_mu_);
  --streams_;
  if (--streams_by_[caller] == 0) streams_by_.erase(caller);
}

absl::StatusOr<std::string> HttpGateway::Authorization(mg_connection* connection) const {
  if (const char* header = mg_get_header(connection, "Authorization")) return std::string(header);
  const char* cookies = mg_get_header(connection, "Cookie");
  if (cookies != nullptr && sessions_ != nullptr) {
    ASSIGN_OR_RETURN(std::optional<ConsoleSession> session, sessions_->FromCookies(cookies));
    if (session) {
      const absl::string_view method = mg_get_request_info(connection)->request_method;
      const char* csrf = mg_get_header(connection, std::string(kCsrfHeader).c_str());
      if (method != "GET" && method != "HEAD" &&
          (csrf == nullptr || !SameSecret(csrf, session->csrf))) {
        return absl::PermissionDeniedError(
            absl::StrCat("a change made with the console's session must carry the session's ",
                         kCsrfHeader, " header"));
      }
      return absl::StrCat("Bearer ", session->token);
    }
  }
  // A client certificate of the cluster's, shown to the TLS relay: the
  // call is made with a session of its caller that outlasts the call.
  if (tls_ != nullptr && options_.signer != nullptr) {
    std::optional<Caller> caller =
        CertificateCaller(tls_->PeerNameOf(mg_get_request_info(connection)->remote_port));
    // The API's callers only: not a worker's certificate.
    if (caller && (caller->role == Caller::Role::kAdmin || caller->role == Caller::Role::kUser)) {
      return absl::StrCat("Bearer ",
                          options_.signer->Session(OwnerName(*caller),
                                                   absl::Now() + kCallTimeout + absl::Minutes(1)));
    }
  }
  return std::string();
}

void HttpGateway::ServeConsole(mg_connection* connection) {
  const absl::string_view method = mg_get_request_info(connection)->request_method;
  const ConsoleAsset* asset = FindConsoleAsset(mg_get_request_info(connection)->local_uri);
  if (asset == nullptr) {
    RespondWith(connection, 404, "text/plain; charset=utf-8", "no such page\n", kPageHeaders);
  } else if (method != "GET" && method != "HEAD") {
    RespondWith(connection, 405, "text/plain; charset=utf-8", "GET only\n", kPageHeaders);
  } else {
    RespondWith(connection, 200, asset->content_type, method == "HEAD" ? "" : asset->body,
                kPageHeaders);
  }
}

bool HttpGateway::SecureCookies(mg_connection* connection) const {
  const char* host = mg_get_header(connection, "Host");
  const std::string name = HostOfAddress(host ? host : "");
  in_addr v4;
  const bool loopback =
      name == "localhost" || name == "::1" ||
      (inet_pton(AF_INET, name.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127);
  return options_.tls.has_value() && !loopback;
}

std::string HttpGateway::PageHeaders(mg_connection* connection,
                                     const std::optional<ConsoleSession>& session) const {
  std::string headers(kPageHeaders);
  for (const std::string& cookie :
       ConsoleSessions::SetCookies(session, SecureCookies(connection), absl::Now())) {
    absl::StrAppend(&headers, "Set-Cookie: ", cookie, "\r\n");
  }
  return headers;
}

void HttpGateway::RespondSignedIn(mg_connection* connection, const ConsoleSession& session) {
  RespondWith(connection, 200, "application/json",
              WhoJson(session.who, std::nullopt, session.expires),
              PageHeaders(connection, session));
}

void HttpGateway::ServeLogin(mg_connection* connection) {
  const mg_request_info* info = mg_get_request_info(connection);
  const std::string method = info->request_method;
  if (sessions_ == nullptr) {  // an open cluster's console needs no sign-in
    RespondWith(connection, 303, "text/plain; charset=utf-8", "", "Location: /\r\n");
    return;
  }
  // GET shows whom the code signs in, and asks; the form POSTs it back. A
  // link alone signs no one in: another user's code, sent to you, would
  // make you act as them.
  std::string form = method == "POST"
                         ? ReadBody(connection, info->content_length, 4096).value_or("")
                         : (info->query_string ? info->query_string : "");
  char code[1024];
  absl::Status refused =
      absl::UnauthenticatedError("no sign-in code: open the URL `ringmaster ui` prints");
  if (method != "GET" && method != "POST") {
    refused = absl::InvalidArgumentError("GET or POST only");
  } else if (mg_get_var(form.data(), form.size(), "code", code, sizeof(code)) > 0) {
    if (method == "GET") {
      absl::StatusOr<std::string> who = sessions_->Peek(code);
      if (who.ok()) {
        RespondWith(connection, 200, "text/html; charset=utf-8", SignInPage(*who, code),
                    kPageHeaders);
        return;
      }
      refused = who.status();
    } else {
      absl::StatusOr<ConsoleSession> session = sessions_->Redeem(code);
      if (session.ok()) {
        RespondWith(connection, 303, "text/plain; charset=utf-8", "signed in\n",
                    absl::StrCat(PageHeaders(connection, *session), "Location: /\r\n"));
        return;
      }
      refused = session.status();
    }
  }
  RespondWith(connection, HttpStatusOf(refused.code()), "text/plain; charset=utf-8",
              absl::StrCat("Cannot sign in: ", refused.message(), "\n"), kPageHeaders);
}

void HttpGateway::ServeSession(mg_connection* connection, const std::string& authorization,
                               bool bad_cookie) {
  const mg_request_info* info = mg_get_request_info(connection);
  const std::string method = info->request_method;
  const pb::MethodDescriptor* login = pb::DescriptorPool::generated_pool()->FindMethodByName(
      "ringmaster.v1.ClusterService.CreateConsoleLogin");
  const std::string forget = bad_cookie ? PageHeaders(connection, std::nullopt) : "";
  if (method == "DELETE") {
    RespondWith(connection, 200, "application/json", "{}", PageHeaders(connection, std::nullopt));
    return;
  }
  absl::string_view token = authorization;
  if (method == "GET" && options_.signer != nullptr && absl::ConsumePrefix(&token, "Bearer ") &&
      IsSessionToken(token)) {
    // A session's own word (its cookie's, or a client certificate's): a
    // session may not ask for a sign-in code.
    if (std::optional<Caller> caller = options_.signer->Verify(token, absl::Now())) {
      Respond(connection, 200, WhoJson(OwnerName(*caller), false, caller->expires));
      return;
    }
  }
  if (method == "GET") {
    // Who the request's token is, or on an open cluster no one (then
    // anyone may do everything).
    absl::StatusOr<std::unique_ptr<pb::Message>> who =
        Call(channel_.get(), *login, v1::CreateConsoleLoginRequest(), authorization);
    if (!who.ok()) {
      RespondWith(connection, HttpStatusOf(who.status().code()), "application/json",
                  ErrorJson(who.status()), forget);
      return;
    }
    const auto& user = static_cast<const v1::ConsoleLogin&>(**who).user();
    Respond(connection, 200, WhoJson(user, authorization.empty(), std::nullopt));
    return;
  }
  if (method != "POST") {
    Respond(connection, 405, ErrorJson(absl::UnimplementedError("GET, POST or DELETE")));
    return;
  }
  // A token pasted: a session of whom it names, as `ringmaster ui`'s code.
  absl::StatusOr<std::string> body = ReadBody(connection, info->content_length, 16 << 10);
  pb::Struct fields;
  if (!body.ok() || !pb::util::JsonStringToMessage(*body, &fields).ok() ||
      !fields.fields().contains("token") ||
      !WellFormedAuthorization(
          absl::StrCat("Bearer ", fields.fields().at("token").string_value()))) {
    RespondError(connection, absl::InvalidArgumentError(
                                 "the body must be {\"token\": \"<a token of visible ASCII>\"}"));
    return;
  }
  absl::StatusOr<std::unique_ptr<pb::Message>> code =
      Call(channel_.get(), *login, v1::CreateConsoleLoginRequest(),
           absl::StrCat("Bearer ", fields.fields().at("token").string_value()));
  absl::StatusOr<ConsoleSession> session =
      !code.ok() ? code.status()
      : sessions_ == nullptr
          ? absl::FailedPreconditionError("this cluster's console needs no sign-in")
          : sessions_->Redeem(static_cast<const v1::ConsoleLogin&>(**code).code());
  if (!session.ok()) {
    RespondWith(connection, HttpStatusOf(session.status().code()), "application/json",
                ErrorJson(session.status()), forget);
    return;
  }
  RespondSignedIn(connection, *session);
}

}  // namespace ringmaster
