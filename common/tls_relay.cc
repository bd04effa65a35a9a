#include "common/tls_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringmaster {
namespace {

// A TLS handshake that has not finished in this long is dropped.
constexpr int kHandshakeTimeoutMs = 10000;
// A connection that carries nothing either way for this long is closed (a
// stream of events sends a keepalive every 15 s).
constexpr int kIdleTimeoutMs = 5 * 60 * 1000;
// A client that takes nothing of what is sent to it for this long is dropped.
constexpr int kSendTimeoutMs = 30000;

absl::Status SslError(const std::string& what) {
  char text[256] = "";
  ERR_error_string_n(ERR_get_error(), text, sizeof(text));
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", text));
}

// Adds the certificates of `pem` to what `context` verifies peers against;
// how many it added.
int AddCas(SSL_CTX* context, const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509_STORE* store = SSL_CTX_get_cert_store(context);
  int added = 0;
  while (X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    added += X509_STORE_add_cert(store, ca);
    X509_free(ca);
  }
  BIO_free(bio);
  ERR_clear_error();  // the end of the PEM
  return added;
}

// A server's context with `tls`'s certificate and key; a client may show a
// certificate of `tls`'s CA, which is verified (and needs not).
absl::StatusOr<SSL_CTX*> ServerContext(const TlsFiles& tls) {
  SSL_CTX* context = SSL_CTX_new(TLS_server_method());
  if (context == nullptr) return SslError("cannot make a TLS context");
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  // TLS 1.2 with forward secrecy and AEAD only (1.3's suites are all so).
  SSL_CTX_set_cipher_list(context, "ECDHE+AESGCM:ECDHE+CHACHA20");
  SSL_CTX_set_options(context, SSL_OP_NO_RENEGOTIATION);
  BIO* cert_bio = BIO_new_mem_buf(tls.cert_pem.data(), static_cast<int>(tls.cert_pem.size()));
  BIO* key_bio = BIO_new_mem_buf(tls.key_pem.data(), static_cast<int>(tls.key_pem.size()));
  X509* cert = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  const bool ok =
      cert != nullptr && key != nullptr && SSL_CTX_use_certificate(context, cert) == 1 &&
      SSL_CTX_use_PrivateKey(context, key) == 1 && SSL_CTX_check_private_key(context) == 1;
  absl::Status status = ok ? absl::OkStatus() : SslError("the coordinator's certificate and key");
  if (ok && AddCas(context, tls.ca_pem) > 0) SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  X509_free(cert);
  EVP_PKEY_free(key);
  BIO_free(cert_bio);
  BIO_free(key_bio);
  if (!ok) {
    SSL_CTX_free(context);
    return status;
  }
  return context;
}

// A client's context: TLS 1.2 or later, the server checked against the
// CA of `tls`.
absl::StatusOr<SSL_CTX*> ClientContext(const TlsFiles& tls) {
  SSL_CTX* context = SSL_CTX_new(TLS_client_method());
  if (context == nullptr) return SslError("cannot make a TLS context");
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  if (AddCas(context, tls.ca_pem) == 0) {
    SSL_CTX_free(context);
    return absl::FailedPreconditionError("the cluster's CA certificate cannot be read");
  }
  return context;
}

absl::StatusOr<int> ListenOn(const std::string& address, int* port) {
  const size_t colon = address.rfind(':');
  std::string host = address.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), address.substr(colon + 1).c_str(), &hints, &found) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve ", address));
  }
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const bool bound =
      fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, 128) == 0;
  freeaddrinfo(found);
  if (!bound) {
    const int error = errno;
    if (fd >= 0) close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address, ": ", strerror(error)));
  }
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length);
  *port = ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  return fd;
}

// A TCP connection to `target` ("host:port"), made within
// kHandshakeTimeoutMs; -1 when none can be.
int ConnectTo(const std::string& target) {
  const size_t colon = target.rfind(':');
  std::string host = target.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (colon == std::string::npos ||
      getaddrinfo(host.c_str(), target.substr(colon + 1).c_str(), &hints, &found) != 0) {
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    // On Linux the send timeout bounds connect() too.
    timeval timeout{kHandshakeTimeoutMs / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

// The common name of the verified certificate the peer of `ssl` showed;
// empty when it showed none.
std::string VerifiedPeerName(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  std::string name;
  if (cert != nullptr && SSL_get_verify_result(ssl) == X509_V_OK) {
    char common_name[256] = "";
    const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName,
                                            common_name, sizeof(common_name));
    if (n > 0 && n < static_cast<int>(sizeof(common_name))) name.assign(common_name, n);
  }
  X509_free(cert);
  return name;
}

// The local port of the connection `fd`; 0 when unknown.
int LocalPort(int fd) {
  sockaddr_in local{};
  socklen_t length = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0) return 0;
  return ntohs(local.sin_port);
}

int ConnectToBackend(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

bool WriteAll(int fd, const char* data, int size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, static_cast<size_t>(size), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<int>(n);
  }
  return true;
}

// Waits (`events` on `fd`) for what OpenSSL asked by `error`, up to
// `timeout_ms`; false when it is not one of those or time ran out.
bool WaitFor(int fd, int error, int timeout_ms) {
  if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) return false;
  pollfd p{fd, static_cast<short>(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
  return poll(&p, 1, timeout_ms) > 0;
}

// The handshake of a non-blocking `ssl`, within kHandshakeTimeoutMs in all.
bool Handshake(SSL* ssl, int fd) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(kHandshakeTimeoutMs);
  for (;;) {
    const int done = SSL_do_handshake(ssl);
    if (done == 1) return true;
    const int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0 || !WaitFor(fd, SSL_get_error(ssl, done), left)) return false;
  }
}

bool SslWriteAll(SSL* ssl, int fd, const char* data, int size) {
  while (size > 0) {
    const int n = SSL_write(ssl, data, size);
    if (n > 0) {
      data += n;
      size -= n;
    } else if (!WaitFor(fd, SSL_get_error(ssl, n), kSendTimeoutMs)) {
      return false;
    }
  }
  return true;
}

// Carries bytes both ways between `ssl` on the non-blocking `client` and
// the plain `backend` until either side closes, or nothing passes for
// kIdleTimeoutMs.
void Pump(SSL* ssl, int client, int backend) {
  char buffer[16 << 10];
  for (;;) {
    pollfd fds[2] = {{client, POLLIN, 0}, {backend, POLLIN, 0}};
    // Bytes OpenSSL holds already decrypted are read before polling.
    if (SSL_pending(ssl) == 0) {
      const int ready = poll(fds, 2, kIdleTimeoutMs);
      if (ready == 0 || (ready < 0 && errno != EINTR)) return;
    }
    if (SSL_pending(ssl) > 0 || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const int n = SSL_read(ssl, buffer, sizeof(buffer));
      if (n <= 0) {
        const int error = SSL_get_error(ssl, n);
        // Part of a record: the rest comes with the next poll.
        if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) return;
      } else if (!WriteAll(backend, buffer, n)) {
        return;
      }
    }
    if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      const ssize_t n = recv(backend, buffer, sizeof(buffer), 0);
      if (n <= 0 || !SslWriteAll(ssl, client, buffer, static_cast<int>(n))) return;
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsRelay>> TlsRelay::Terminate(const std::string& address,
                                                              const TlsFiles& tls, int backend) {
  std::unique_ptr<TlsRelay> relay(new TlsRelay);
  absl::StatusOr<SSL_CTX*> context = ServerContext(tls);
  if (!context.ok()) return context.status();
  relay->context_ = *context;
  relay->backend_ = backend;
  return Listen(std::move(relay), address);
}

absl::StatusOr<std::unique_ptr<TlsRelay>> TlsRelay::Originate(const std::string& address,
                                                              const TlsFiles& tls,
                                                              const std::string& target,
                                                              const std::string& server_name) {
  std::unique_ptr<TlsRelay> relay(new TlsRelay);
  absl::StatusOr<SSL_CTX*> context = ClientContext(tls);
  if (!context.ok()) return context.status();
  relay->context_ = *context;
  relay->originate_ = true;
  relay->target_ = target;
  relay->server_name_ = server_name;
  return Listen(std::move(relay), address);
}

absl::StatusOr<std::unique_ptr<TlsRelay>> TlsRelay::Listen(std::unique_ptr<TlsRelay> relay,
                                                           const std::string& address) {
  absl::StatusOr<int> listener = ListenOn(address, &relay->port_);
  if (!listener.ok()) return listener.status();
  relay->listener_ = *listener;
  if (pipe2(relay->wake_, O_CLOEXEC) != 0) return absl::InternalError("cannot make a pipe");
  relay->acceptor_ = std::thread([self = relay.get()] { self->AcceptLoop(); });
  return relay;
}

TlsRelay::~TlsRelay() {
  if (acceptor_.joinable()) {
    (void)!write(wake_[1], "x", 1);
    acceptor_.join();
  }
  std::vector<Connection*> left;
  {
    MutexLock lock(&mu_);
    // Wakes each relay: its reads end, and it closes its connection.
    for (Connection& c : connections_) {
      if (!c.done) shutdown(c.fd, SHUT_RDWR);
      left.push_back(&c);
    }
  }
  for (Connection* c : left) c->thread.join();
  for (int fd : {listener_, wake_[0], wake_[1]}) {
    if (fd >= 0) close(fd);
  }
  SSL_CTX_free(static_cast<SSL_CTX*>(context_));
}

std::string TlsRelay::PeerNameOf(int port) const {
  MutexLock lock(&mu_);
  auto it = peer_names_.find(port);
  return it == peer_names_.end() ? "" : it->second;
}

void TlsRelay::Reap() {
  std::list<Connection> done;
  {
    MutexLock lock(&mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if (it->done) done.splice(done.end(), connections_, it);
      it = next;
    }
  }
  for (Connection& c : done) c.thread.join();
}

void TlsRelay::AcceptLoop() {
  for (;;) {
    Reap();
    bool full;
    {
      MutexLock lock(&mu_);
      full = static_cast<int>(connections_.size()) >= kMaxConnections;
    }
    // Full: new connections wait in the listen queue until one ends.
    pollfd fds[2] = {{listener_, static_cast<short>(full ? 0 : POLLIN), 0}, {wake_[0], POLLIN, 0}};
    if (poll(fds, 2, full ? 100 : 1000) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    // The TLS side is non-blocking, the plain side blocking (Pump).
    const int client =
        accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | (originate_ ? 0 : SOCK_NONBLOCK));
    if (client < 0) continue;
    MutexLock lock(&mu_);
    Connection& c = connections_.emplace_back();
    c.fd = client;
    try {
      c.thread = std::thread([this, client] { Relay(client); });
    } catch (const std::system_error&) {  // no thread to be had now
      connections_.pop_back();
      close(client);
    }
  }
}

int TlsRelay::TlsSide(int accepted) const {
  if (!originate_) return accepted;
  const int fd = ConnectTo(target_);
  if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

void TlsRelay::Relay(int accepted) {
  const int secured = TlsSide(accepted);
  SSL* ssl = secured < 0 ? nullptr : SSL_new(static_cast<SSL_CTX*>(context_));
  if (ssl != nullptr && originate_) {
    SSL_set_connect_state(ssl);
    SSL_set1_host(ssl, server_name_.c_str());
    SSL_set_tlsext_host_name(ssl, server_name_.c_str());
  } else if (ssl != nullptr) {
    SSL_set_accept_state(ssl);
  }
  if (ssl != nullptr && SSL_set_fd(ssl, secured) == 1 && Handshake(ssl, secured)) {
    const int plain = originate_ ? accepted : ConnectToBackend(backend_);
    const int relayed_from = originate_ || plain < 0 ? 0 : LocalPort(plain);
    if (relayed_from != 0) {
      MutexLock lock(&mu_);
      peer_names_[relayed_from] = VerifiedPeerName(ssl);
    }
    if (plain >= 0) {
      // The plain side always reads: a write to it that blocks this long
      // is lost.
      timeval send_timeout{kSendTimeoutMs / 1000, 0};
      setsockopt(plain, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
      Pump(ssl, secured, plain);
      if (relayed_from != 0) {
        MutexLock lock(&mu_);
        peer_names_.erase(relayed_from);  // before the port can be another's
      }
      if (plain != accepted) close(plain);
    }
    SSL_shutdown(ssl);
  }
  SSL_free(ssl);
  if (secured >= 0 && secured != accepted) close(secured);
  MutexLock lock(&mu_);
  for (Connection& c : connections_) {
    if (c.fd != accepted || c.done) continue;
    c.done = true;
    close(accepted);  // under the lock: the destructor's shutdown never meets a reused fd
  }
}

}  // namespace ringmaster
