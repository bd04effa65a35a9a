// `ringmaster certs init`: a certificate authority and the certificates of
// a cluster, in the layout common/tls.h reads.
#ifndef RINGMASTER_CLIENT_CERTS_H_
#define RINGMASTER_CLIENT_CERTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster {

struct CertsOptions {
  // Names and addresses the coordinator's certificate holds besides
  // ringmaster-coordinator, localhost, 127.0.0.1 and ::1: what other tools
  // dial it at (Ringmaster's own clients check ringmaster-coordinator).
  std::vector<std::string> hosts;
  std::vector<std::string> worker_ids;  // a worker-<id> certificate each, naming only <id>
  std::vector<std::string> users;       // a user-<name> client certificate each
  int valid_days = 825;                 // the CA's: four times this
};

struct IssuedCertificate {
  std::string path;     // <dir>/<name>.crt, its key beside it
  std::string reason;   // "new", "renewed", or why an old one was made again
  std::string expires;  // its last day, YYYY-MM-DD
};

// Makes in `dir` (created 0700) what is missing of ca.crt/ca.key,
// coordinator, admin, each worker's and each user's certificate and key, signed by the
// CA in `dir`; keys are mode 0600. A certificate already there is kept,
// so this adds workers to a cluster, unless it lacks a name asked for (a
// new --host is added to the coordinator's, keeping its others) or a
// worker's names more than that worker: those are made again, with new
// keys. Returns what it wrote.
absl::StatusOr<std::vector<IssuedCertificate>> InitCertificates(const std::string& dir,
                                                                const CertsOptions& options);

// Makes every certificate of `dir` but the CA's again, with the same names,
// new keys and `valid_days` from now. Each file is replaced whole.
absl::StatusOr<std::vector<IssuedCertificate>> RenewCertificates(const std::string& dir,
                                                                 int valid_days);

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_CERTS_H_
