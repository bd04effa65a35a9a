// TLS for every Ringmaster channel, from the files `ringmaster certs init`
// writes into one directory:
//
//   ca.crt                   the cluster's certificate authority: every peer is checked against it
//   ca.key                   its key: needed only to make certificates; keep it off the workers
//   coordinator.crt/.key     the coordinator's server certificate: it alone names
//                            kCoordinatorName
//   worker-<id>.crt/.key     a worker's: the server certificate of its agent and its
//                            client certificate to the coordinator (mutual TLS); it
//                            names only <id>
//   admin.crt/.key           the admin's client certificate, for the CLI
//
// A client checks more than the CA: the certificate must name the identity
// it dials (kCoordinatorName, or the worker's id), so the key of one worker
// cannot pose as the coordinator or as another worker.
//
// Servers ask for a client certificate and verify one when it is shown (a
// worker's names its id, the admin's grants every verb; see
// common/credentials.h); a caller without one identifies by token.
#ifndef RINGMASTER_COMMON_TLS_H_
#define RINGMASTER_COMMON_TLS_H_

#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace ringmaster {

struct TlsFiles {
  std::string ca_pem;    // what the peer must be signed by
  std::string cert_pem;  // this side's certificate; empty: none (a client with a token)
  std::string key_pem;
};

// An optional TLS set-up; nullopt means plaintext.
using Tls = std::optional<TlsFiles>;

// ca.crt and, when `name` is not empty, <name>.crt and <name>.key from
// `dir`. FAILED_PRECONDITION naming the file that is missing or unreadable,
// or the key when others may read it.
absl::StatusOr<TlsFiles> LoadTls(const std::string& dir, const std::string& name);

// Only a CA: a client that checks the server and shows no certificate (it
// identifies by token). Plaintext (nullopt) when `ca_pem` is empty.
Tls CaOnly(std::string ca_pem);

// Which client certificate LoadClientTls presents.
struct ClientCertificate {
  // A certificate of `dir`: "<name>.crt", else "user-<name>.crt" (so a
  // user's is named by the user alone). Empty: the admin's, if any.
  std::string name;
  // No certificate at all, only the CA: the caller identifies by token.
  bool none = false;
};

// A client's: ca.crt and the certificate `which` picks, with its key;
// nullopt (plaintext) when `dir` is empty. NOT_FOUND naming both files
// tried when a named certificate is not there.
absl::StatusOr<Tls> LoadClientTls(const std::string& dir, const ClientCertificate& which = {});

// The listening credentials: plaintext without `tls`.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const Tls& tls);

// What a client channel dials with: plaintext without `tls`; else the
// server must be signed by its CA, and this side shows its certificate when
// it has one.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const Tls& tls);

// The name only the coordinator's certificate holds (a DNS name, since
// host name checks read those; its common name is "ringmaster:coordinator").
inline constexpr char kCoordinatorName[] = "ringmaster-coordinator";

// A channel to `address`. With `tls`, the server's certificate must be
// signed by its CA and name `server_name`: kCoordinatorName for the
// coordinator, a worker's id for its agent. Reconnects within a second, not
// after gRPC's default back-off of up to two minutes.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const Tls& tls,
                                           const std::string& server_name);

// MakeChannel to the coordinator.
std::shared_ptr<grpc::Channel> CoordinatorChannel(const std::string& address, const Tls& tls);

// Sets in `args` the name `tls` checks the server's certificate for (a
// channel made by hand, with arguments of its own).
void ExpectServerName(const Tls& tls, const std::string& server_name, grpc::ChannelArguments* args);

// When a call to `address` failed UNAVAILABLE: a line saying the cause
// when it is TLS on one side only, a certificate the other side refused, or
// a server whose certificate does not name `server_name`; empty when it is
// none of these.
std::string ExplainTlsFailure(const std::string& address, bool tls, const std::string& grpc_message,
                              const std::string& server_name = kCoordinatorName);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_TLS_H_
