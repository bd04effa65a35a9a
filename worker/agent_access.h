// Who may call this worker's agent service:
//
//   ReadLog          the coordinator, with the agent credential it handed
//                    this worker at registration
//   ReportProgress   a rank of a job attempt running here, with that
//                    attempt's job credential (RINGMASTER_JOB_TOKEN)
//   PushReplica,     another worker of a job that has run here, with the
//   FetchSnapshot    job's replica credential (StartRank) and, under TLS,
//                    a worker's certificate
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
#include <map>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "proto/worker.pb.h"

namespace ringmaster {

// Thread-safe: one mutex guards the agent credential.
class AgentAccess {
 public:
  // The running rank whose job credential is `token`, if any.
  using RankOfToken = std::function<std::optional<v1::RankRef>(const std::string& token)>;

  // `tls`: peers must also show a worker's certificate.
  AgentAccess(bool secure, RankOfToken rank_of_token, bool tls = false)
      : secure_(secure), tls_(tls), rank_of_token_(std::move(rank_of_token)) {}

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

  // The job's replica credential and its attempt running here, from each
  // StartRank; forgotten when the job ends or is deleted.
  void AllowPeers(const std::string& job_id, int attempt, std::string credential);
  void ForgetPeers(const std::string& job_id);
  // Another worker of the job, for its snapshots: the job's attempt known
  // here. FAILED_PRECONDITION when no rank of the job has run here,
  // UNAUTHENTICATED or PERMISSION_DENIED naming what the call needs.
  absl::StatusOr<int> RequirePeer(const grpc::ServerContextBase& context,
                                  const std::string& job_id) const;
  // The same, given the caller's bearer token and certificate name.
  absl::StatusOr<int> RequirePeerOf(const std::optional<std::string>& token,
                                    const std::optional<std::string>& certificate,
                                    const std::string& job_id) const;

 private:
  bool IsAgentCredential(const std::string& token) const;

  struct Peers {
    int attempt = 0;
    std::string credential;
  };
  const bool secure_;
  const bool tls_;
  const RankOfToken rank_of_token_;
  mutable Mutex mu_;
  std::string agent_credential_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Peers> peers_ ABSL_GUARDED_BY(mu_);  // by job
};

}  // namespace ringmaster

#endif  // RINGMASTER_WORKER_AGENT_ACCESS_H_
