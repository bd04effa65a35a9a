// A rank's client of its attempt's rendezvous store on the coordinator,
// which the built-in trainer bootstraps Gloo and NCCL through.
#ifndef RINGMASTER_DOMAIN_RENDEZVOUS_CLIENT_H_
#define RINGMASTER_DOMAIN_RENDEZVOUS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/coordinator_targets.h"
#include "common/tls.h"
#include "proto/rendezvous.grpc.pb.h"

namespace ringmaster {

// The rendezvous key-value store of one job attempt. `address` may list
// several coordinators, as for Client.
class RendezvousClient {
 public:
  RendezvousClient(const std::string& address, std::string job_id, int attempt,
                   const std::string& token = "", const Tls& tls = {});

  // Reads RINGMASTER_COORDINATOR, RINGMASTER_JOB_ID,
  // TORCHELASTIC_RESTART_COUNT, RINGMASTER_JOB_TOKEN and RINGMASTER_TLS_CA,
  // as a rank process has them.
  static absl::StatusOr<std::unique_ptr<RendezvousClient>> FromEnvironment();

  absl::Status Set(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> Get(const std::string& key);
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);

 private:
  void Prepare(grpc::ClientContext* context, absl::Duration timeout) const;
  // Makes `rpc` (each try bounded by `timeout`), following the leader as
  // Client does, for up to `timeout`.
  absl::Status Call(
      absl::Duration timeout,
      const std::function<grpc::Status(v1::RendezvousService::Stub&, grpc::ClientContext*)>& rpc);

  v1::RendezvousScope scope_;
  const std::string token_;
  CoordinatorTargets targets_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_DOMAIN_RENDEZVOUS_CLIENT_H_
