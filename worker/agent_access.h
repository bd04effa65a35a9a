// Who may call this worker's agent service:
//
//   ReadLog          the coordinator, with the agent credential it handed
//                    this worker at registration
//   ReportProgress   a rank of a job attempt running here, with that
//                    attempt's job credential (RINGMASTER_JOB_TOKEN)
//   Health, reflection   anyone
//
// The worker cannot check signatures (it does not hold the coordinator's
// key): it compares what a caller shows with the credentials it was given,
// the agent credential and the job credential of each rank it runs. A
// rank's credential stops opening anything once the rank has exited.
// A worker that has no credential of its own (an open cluster) lets every
// caller through.
#ifndef RINGMASTER_WORKER_AGENT_ACCESS_H_
#define RINGMASTER_WORKER_AGENT_ACCESS_H_

#include <functional>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "common/mutex.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// Thread-safe: one mutex guards the agent credential.
class AgentAccess {
 public:
  // The running rank whose job credential is `token`, if any.
  using RankOfToken = std::function<std::optional<v1::RankRef>(const std::string& token)>;

  AgentAccess(bool secure, RankOfToken rank_of_token)
      : secure_(secure), rank_of_token_(std::move(rank_of_token)) {}

  // From each registration's Registered.
  void SetAgentCredential(std::string credential);

  // Each is OK, UNAUTHENTICATED (no credential, or one this worker does not
  // know) or PERMISSION_DENIED (a credential for something else), the
  // message naming the credential the call needs.
  absl::Status RequireCoordinator(const grpc::ServerContextBase& context) const;
  absl::Status RequireRank(const grpc::ServerContextBase& context, const v1::RankRef& rank) const;
  // The same, given the caller's bearer token (nullopt: none).
  absl::Status RequireCoordinatorToken(const std::optional<std::string>& token) const;
  absl::Status RequireRankToken(const std::optional<std::string>& token,
                                const v1::RankRef& rank) const;

 private:
  bool IsAgentCredential(const std::string& token) const;

  const bool secure_;
  const RankOfToken rank_of_token_;
  mutable Mutex mu_;
  std::string agent_credential_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_AGENT_ACCESS_H_
