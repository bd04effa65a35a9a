// TLS in front of a plain HTTP server on loopback: accepts TLS connections
// on a public address with the coordinator's certificate, and carries each
// one's bytes to and from the backend port. The HTTP API's HTTPS: Debian's
// civetweb loads OpenSSL at run time by names OpenSSL 3 no longer exports
// (SSL_get_peer_certificate), and crashes on its first TLS connection.
#ifndef RINGMASTER_COORDINATOR_API_TLS_TERMINATOR_H_
#define RINGMASTER_COORDINATOR_API_TLS_TERMINATOR_H_

#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "common/tls.h"

namespace ringmaster {

class TlsTerminator {
 public:
  // At most this many connections at once; more wait in the listen queue.
  static constexpr int kMaxConnections = 256;

  // Listens on `address` ("host:port"; port 0 picks one), serving `tls`'s
  // certificate and key, and relays each connection to 127.0.0.1:`backend`.
  static absl::StatusOr<std::unique_ptr<TlsTerminator>> Start(const std::string& address,
                                                              const TlsFiles& tls, int backend);
  // Closes the listener and every connection, and waits for their threads.
  ~TlsTerminator();
  TlsTerminator(const TlsTerminator&) = delete;
  TlsTerminator& operator=(const TlsTerminator&) = delete;

  int port() const { return port_; }

 private:
  TlsTerminator() = default;
  void AcceptLoop();
  void Relay(int client);
  // Joins the threads of connections that ended.
  void Reap() ABSL_LOCKS_EXCLUDED(mu_);

  void* context_ = nullptr;  // SSL_CTX
  int listener_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: written to stop the accept loop
  int backend_ = 0;
  int port_ = 0;
  std::thread acceptor_;
  struct Connection {
    int fd = -1;
    bool done = false;
    std::thread thread;
  };
  Mutex mu_;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_TLS_TERMINATOR_H_
