// The credentials of a Ringmaster cluster and who a caller is.
//
//   admin   the cluster's admin token (--token-file / RINGMASTER_TOKEN), or a
//           client certificate named "ringmaster:admin": every verb.
//   worker  a token signed for one worker id, or a client certificate named
//           "ringmaster:worker:<id>": registers and streams as that id only.
//   job     signed by the coordinator for one attempt of one job and given
//           to its ranks (RINGMASTER_JOB_TOKEN): that attempt's rendezvous
//           scope and its ranks' progress reports, nothing else.
//   agent   signed for one worker id and handed to that worker when it
//           registers: the coordinator's calls to the worker's agent.
//   replica signed for one job and given to the workers of its ranks (never
//           to the ranks): their snapshots' replicas on each other's
//           agents. The coordinator takes it for nothing.
//   user    a token signed for one user name, or a client certificate named
//           "ringmaster:user:<name>": submits jobs it then owns, reads
//           every job's status; the logs, env and command of its own jobs
//           only, and cancels and deletes only those.
//   session signed for the admin or one user until a time: the web
//           console's cookie, that caller's credential while it lasts.
//   login   a one-time sign-in code of the admin or one user, good for
//           two minutes: not a credential, only what a session is made from.
//
// Signed tokens are "<kind>.<fields>.<HMAC-SHA256 in hex>" under the
// coordinator's key (<state-dir>/credential.key), so the coordinator checks
// them without storing them. A job token names its attempt; the attempt's
// rendezvous scope and running ranks end with it, and so does what the
// token opens.
#ifndef RINGMASTER_COMMON_CREDENTIALS_H_
#define RINGMASTER_COMMON_CREDENTIALS_H_

#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringmaster {

struct Caller {
  enum class Role { kNone, kAdmin, kWorker, kJob, kAgent, kUser };
  Role role = Role::kNone;
  // The worker id (kWorker, kAgent), the job id (kJob) or the user name
  // (kUser).
  std::string id;
  int attempt = 0;  // kJob
  // When the credential ends: a session's expiry; never for the others.
  absl::Time expires = absl::InfiniteFuture();
};

// The owner of the jobs the admin submits.
inline constexpr absl::string_view kAdminUser = "admin";

// Whom an admin or user caller's jobs and sessions are of: kAdminUser for
// the admin, else its id.
inline std::string OwnerName(const Caller& caller) {
  return caller.role == Caller::Role::kAdmin ? std::string(kAdminUser) : caller.id;
}

// A user name: 1-32 of [a-z0-9_.-], starting with a letter or '_' (as a
// Unix login), and not "admin". INVALID_ARGUMENT naming it otherwise.
absl::Status ValidateUserName(absl::string_view name);

// Thread-safe (immutable).
class CredentialSigner {
 public:
  explicit CredentialSigner(std::string key) : key_(std::move(key)) {}

  std::string Worker(absl::string_view worker_id) const;
  std::string Job(absl::string_view job_id, int attempt) const;
  std::string Replica(absl::string_view job_id) const;
  std::string Agent(absl::string_view worker_id) const;
  std::string User(absl::string_view name) const;
  // A session of `who` (kAdminUser or a user name) until `expires`.
  std::string Session(absl::string_view who, absl::Time expires) const;
  // The token a change made with `session` must carry besides it (CSRF).
  std::string Csrf(absl::string_view session) const;
  // A sign-in code of `who` until `expires`, named by `nonce` (so that it
  // is taken once).
  std::string Login(absl::string_view who, absl::string_view nonce, absl::Time expires) const;
  struct LoginCode {
    std::string who;
    std::string nonce;
    absl::Time expires;
  };
  // What a code Login signed says, while it lasts; nullopt otherwise.
  std::optional<LoginCode> VerifyLogin(absl::string_view code, absl::Time now) const;
  // The caller `token` names when this key signed it (and, for a session,
  // it lasts at `now`); nullopt otherwise.
  std::optional<Caller> Verify(absl::string_view token, absl::Time now) const;

 private:
  std::string Sign(absl::string_view payload) const;
  const std::string key_;
};

// The signing key in `path`, made (32 random bytes, mode 0600) when there
// is none. FAILED_PRECONDITION naming the file when it cannot be read or
// written, or when others may read it.
absl::StatusOr<std::string> LoadOrCreateKey(const std::string& path);

// Equal, compared in time that depends only on the lengths' sum, not on
// where they first differ.
bool SameSecret(absl::string_view a, absl::string_view b);

// Whether `token` has a console session's form (whoever signed it).
bool IsSessionToken(absl::string_view token);

// The token of the "authorization: Bearer <token>" header, if any.
std::optional<std::string> BearerToken(const grpc::ServerContextBase& context);
// The caller a client certificate's common name names ("ringmaster:admin",
// "ringmaster:worker:<id>", "ringmaster:user:<name>"); nullopt for any
// other name.
std::optional<Caller> CertificateCaller(absl::string_view common_name);

// The common name of the caller's verified TLS client certificate, if any.
std::optional<std::string> PeerCertificateName(const grpc::ServerContextBase& context);

// What a client puts on a call: "authorization: Bearer <token>" (nothing
// when `token` is empty).
void AddBearerToken(grpc::ClientContext* context, const std::string& token);

// Certificate common names: "ringmaster:admin", "ringmaster:worker:<id>",
// "ringmaster:user:<name>".
inline constexpr absl::string_view kAdminCertificateName = "ringmaster:admin";
inline constexpr absl::string_view kWorkerCertificatePrefix = "ringmaster:worker:";
inline constexpr absl::string_view kUserCertificatePrefix = "ringmaster:user:";

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_CREDENTIALS_H_
