// `ringmaster certs init`: a certificate authority and the certificates of
// a cluster, in the layout common/tls.h reads.
#ifndef RINGMASTER_CLIENT_CERTS_H_
#define RINGMASTER_CLIENT_CERTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster {

struct CertsOptions {
  // Names and addresses the coordinator's and the workers' certificates
  // hold besides localhost, 127.0.0.1 and ::1 (and, for a worker, its id):
  // every name or IP peers dial.
  std::vector<std::string> hosts;
  std::vector<std::string> worker_ids;  // a worker-<id> certificate each
  int valid_days = 825;
};

// Makes in `dir` (created 0700) what is missing of ca.crt/ca.key,
// coordinator, admin and each worker's certificate and key, signed by the
// CA in `dir`; keys are mode 0600. Files already there are kept, so it adds
// workers to an existing cluster. Returns the files it wrote.
absl::StatusOr<std::vector<std::string>> InitCertificates(const std::string& dir,
                                                          const CertsOptions& options);

}  // namespace ringmaster

#endif  // RINGMASTER_CLIENT_CERTS_H_
