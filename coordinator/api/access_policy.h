// Who may call what on the coordinator (see common/credentials.h for the
// credentials themselves):
//
//   SubmitJob, GetJob, ListJobs, Watch*,  admin, or any user; a job is owned by
//   StatCode, UploadCode, ListWorkers,    who submitted it, and a user sees the
//   ListQueues, GetJobProgress,           env and command of its own jobs only
//   CreateConsoleLogin (not with a
//   console session)
//   CancelJob, DeleteJob, StreamLogs,     admin, or the job's owner
//   DumpStacks, HoldJob, ReleaseJob,
//   SetJobPriority, RequeueJob
//   CordonWorker, UncordonWorker,         admin
//   DrainWorker
//   WorkerService.Connect                 admin, or the worker whose id it registers
//   WorkerService.ReadCode                admin, or any worker
//   RendezvousService                     admin, or a job token of the scope's attempt
//   grpc.health.v1.Health, reflection     anyone
//
// An open cluster (no admin token and no TLS) lets every caller do
// everything: the daemons refuse to serve it beyond loopback without
// --insecure.
#ifndef RINGMASTER_COORDINATOR_API_ACCESS_POLICY_H_
#define RINGMASTER_COORDINATOR_API_ACCESS_POLICY_H_

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "common/credentials.h"
#include "proto/job.pb.h"

namespace ringmaster {

struct AccessOptions {
  std::string admin_token;  // empty: none
  std::string key;          // signs worker, job and agent tokens
  bool tls = false;         // callers may present client certificates
};

// Thread-safe (immutable).
class AccessPolicy {
 public:
  explicit AccessPolicy(AccessOptions options)
      : options_(std::move(options)), signer_(options_.key) {}

  bool open() const { return options_.admin_token.empty() && !options_.tls; }
  const CredentialSigner& signer() const { return signer_; }

  // Each is OK, UNAUTHENTICATED (no credential, or one this cluster did not
  // issue) or PERMISSION_DENIED (a credential of another scope), the
  // message naming the credential the call needs.
  absl::Status RequireAdmin(const grpc::ServerContextBase& context) const;
  // The admin or a user: who calls, as its jobs' owner ("admin" for the
  // admin).
  absl::StatusOr<std::string> RequireUser(const grpc::ServerContextBase& context) const;
  // Whether `user` (from RequireUser) may `act` ("cancel", "read the logs
  // of") `job`: the admin and the job's owner may. PERMISSION_DENIED
  // naming the owner otherwise.
  static absl::Status RequireOwner(const std::string& user, const v1::Job& job,
                                   absl::string_view act);
  // `job` as `user` may see it: without spec.env and spec.command unless
  // it is the admin or the owner.
  static void RedactFor(const std::string& user, v1::Job* job);
  // Before the worker says its id: admin or some worker. The caller is
  // stored in `*caller` for RequireWorkerId.
  absl::Status RequireWorker(const grpc::ServerContextBase& context, Caller* caller) const;
  absl::Status RequireWorkerId(const Caller& caller, const std::string& worker_id) const;
  absl::Status RequireJob(const grpc::ServerContextBase& context, const std::string& job_id,
                          int attempt) const;
  // Who calls, for counting what each caller holds: its credential's role
  // and id, and the host it calls from ("admin@127.0.0.1").
  std::string CallerKey(const grpc::ServerContextBase& context) const;

 private:
  // The caller its certificate or token names; kNone when it shows none,
  // UNAUTHENTICATED when what it shows is not this cluster's.
  absl::StatusOr<Caller> Identify(const grpc::ServerContextBase& context,
                                  absl::string_view needed) const;

  const AccessOptions options_;
  const CredentialSigner signer_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COORDINATOR_API_ACCESS_POLICY_H_
