#include "coordinator/api/tls_terminator.h"

#include <arpa/inet.h>
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
    const int done = SSL_accept(ssl);
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

// Carries bytes both ways until either side closes, or nothing passes for
// kIdleTimeoutMs. `client` is non-blocking.
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

absl::StatusOr<std::unique_ptr<TlsTerminator>> TlsTerminator::Start(const std::string& address,
                                                                    const TlsFiles& tls,
                                                                    int backend) {
  std::unique_ptr<TlsTerminator> t(new TlsTerminator);
  absl::StatusOr<SSL_CTX*> context = ServerContext(tls);
  if (!context.ok()) return context.status();
  t->context_ = *context;
  t->backend_ = backend;
  absl::StatusOr<int> listener = ListenOn(address, &t->port_);
  if (!listener.ok()) return listener.status();
  t->listener_ = *listener;
  if (pipe2(t->wake_, O_CLOEXEC) != 0) return absl::InternalError("cannot make a pipe");
  t->acceptor_ = std::thread([self = t.get()] { self->AcceptLoop(); });
  return t;
}

TlsTerminator::~TlsTerminator() {
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

void TlsTerminator::Reap() {
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

void TlsTerminator::AcceptLoop() {
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
    const int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
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

void TlsTerminator::Relay(int client) {
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(context_));
  if (ssl != nullptr && SSL_set_fd(ssl, client) == 1 && Handshake(ssl, client)) {
    const int backend = ConnectToBackend(backend_);
    if (backend >= 0) {
      // civetweb always reads: a write to it that blocks this long is lost.
      timeval send_timeout{kSendTimeoutMs / 1000, 0};
      setsockopt(backend, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
      Pump(ssl, client, backend);
      close(backend);
    }
    SSL_shutdown(ssl);
  }
  SSL_free(ssl);
  MutexLock lock(&mu_);
  for (Connection& c : connections_) {
    if (c.fd != client || c.done) continue;
    c.done = true;
    close(client);  // under the lock: the destructor's shutdown never meets a reused fd
  }
}

}  // namespace ringmaster
