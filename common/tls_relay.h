// TLS on one side of a relay of TCP connections, plain on the other:
//
//   Terminate  accepts TLS connections on a public address with the
//              coordinator's certificate, and carries each one's bytes to
//              and from a plain port on loopback. A client may show a
//              certificate of the cluster's CA: the backend asks whose
//              (PeerNameOf). The HTTP API's HTTPS:
//              Debian's civetweb loads OpenSSL at run time by names
//              OpenSSL 3 no longer exports (SSL_get_peer_certificate), and
//              crashes on its first TLS connection.
//   Originate  accepts plain connections on loopback, and carries each one
//              over TLS to a server it checks against the cluster's CA and
//              name: `ringmaster ui --proxy`, so that a browser reaches the
//              console without the cluster's CA. It shows no certificate
//              of its own, so that it lends no credential to what connects.
#ifndef RINGMASTER_COMMON_TLS_RELAY_H_
#define RINGMASTER_COMMON_TLS_RELAY_H_

#include <list>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "common/tls.h"

namespace ringmaster {

class TlsRelay {
 public:
  // At most this many connections at once; more wait in the listen queue.
  static constexpr int kMaxConnections = 256;

  // Listens on `address` ("host:port"; port 0 picks one), serving `tls`'s
  // certificate and key, and relays each connection to 127.0.0.1:`backend`.
  static absl::StatusOr<std::unique_ptr<TlsRelay>> Terminate(const std::string& address,
                                                             const TlsFiles& tls, int backend);
  // Listens on `address`, and relays each connection over TLS to `target`
  // ("host:port"), whose certificate `tls.ca_pem` signed for `server_name`.
  static absl::StatusOr<std::unique_ptr<TlsRelay>> Originate(const std::string& address,
                                                             const TlsFiles& tls,
                                                             const std::string& target,
                                                             const std::string& server_name);
  // Closes the listener and every connection, and waits for their threads.
  ~TlsRelay();
  TlsRelay(const TlsRelay&) = delete;
  TlsRelay& operator=(const TlsRelay&) = delete;

  int port() const { return port_; }
  // Terminate: the common name of the verified client certificate shown on
  // the connection relayed to the backend from local port `port` (the
  // backend's view of its peer), while it lasts; empty when none was shown.
  std::string PeerNameOf(int port) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  TlsRelay() = default;
  static absl::StatusOr<std::unique_ptr<TlsRelay>> Listen(std::unique_ptr<TlsRelay> relay,
                                                          const std::string& address);
  void AcceptLoop();
  void Relay(int accepted);
  // The TLS side of a connection accepted as `accepted`: it (Terminate) or
  // a connection to the target (Originate); -1 when there is none.
  int TlsSide(int accepted) const;
  // Joins the threads of connections that ended.
  void Reap() ABSL_LOCKS_EXCLUDED(mu_);

  bool originate_ = false;
  void* context_ = nullptr;  // SSL_CTX
  int listener_ = -1;
  int wake_[2] = {-1, -1};  // a pipe: written to stop the accept loop
  int backend_ = 0;         // Terminate
  std::string target_;      // Originate
  std::string server_name_;
  int port_ = 0;
  std::thread acceptor_;
  struct Connection {
    int fd = -1;
    bool done = false;
    std::thread thread;
  };
  mutable Mutex mu_;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::string> peer_names_ ABSL_GUARDED_BY(mu_);  // by relayed-from port
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_TLS_RELAY_H_
