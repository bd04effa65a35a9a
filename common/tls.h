// TLS for every Ringmaster channel, from the files `ringmaster certs init`
// writes into one directory:
//
//   ca.crt                   the cluster's certificate authority: every peer is checked against it
//   ca.key                   its key: needed only to make certificates; keep it off the workers
//   coordinator.crt/.key     the coordinator's server certificate
//   worker-<id>.crt/.key     a worker's: the server certificate of its agent and its
//                            client certificate to the coordinator (mutual TLS)
//   admin.crt/.key           the admin's client certificate, for the CLI
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

// A client's: ca.crt and, when `dir` has them, admin.crt and admin.key;
// nullopt (plaintext) when `dir` is empty.
absl::StatusOr<Tls> LoadClientTls(const std::string& dir);

// The listening credentials: plaintext without `tls`.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const Tls& tls);

// What a client channel dials with: plaintext without `tls`; else the
// server must be signed by its CA, and this side shows its certificate when
// it has one.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const Tls& tls);

// A channel to `address`. With `tls`, the server's certificate must be
// signed by its CA and name `server_name` (default: the address's host).
// Reconnects within a second, not after gRPC's default back-off of up to
// two minutes.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const Tls& tls,
                                           const std::string& server_name = "");

// When a call to `address` failed UNAVAILABLE: a line saying the cause
// when it is TLS on one side only, or a certificate the other side
// refused; empty when it is neither.
std::string ExplainTlsFailure(const std::string& address, bool tls,
                              const std::string& grpc_message);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_TLS_H_
