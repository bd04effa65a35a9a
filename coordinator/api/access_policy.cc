#include "coordinator/api/access_policy.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ringmaster {
namespace {

constexpr absl::string_view kAdminNeeded =
    "the admin credential (--token-file or RINGMASTER_TOKEN, or the admin client "
    "certificate of `ringmaster certs init`)";
constexpr absl::string_view kWorkerNeeded =
    "a worker credential (a token from `ringmaster-coordinator --issue-worker-token ID` in "
    "--token-file, or the worker's client certificate)";
constexpr absl::string_view kUserNeeded =
    "a user credential (a token from `ringmaster-coordinator --issue-user-token NAME`, or "
    "a user's client certificate of `ringmaster certs init --user NAME`) or the admin's";
constexpr absl::string_view kJobNeeded =
    "the job credential of this attempt (RINGMASTER_JOB_TOKEN, which the coordinator gives "
    "to the attempt's ranks)";

absl::string_view RoleName(Caller::Role role) {
  switch (role) {
    case Caller::Role::kAdmin:
      return "the admin credential";
    case Caller::Role::kWorker:
      return "a worker credential";
    case Caller::Role::kJob:
      return "a job credential";
    case Caller::Role::kAgent:
      return "an agent credential";
    case Caller::Role::kUser:
      return "a user credential";
    case Caller::Role::kNone:
      break;
  }
  return "no credential";
}

absl::Status Denied(const Caller& caller, absl::string_view needed) {
  if (caller.role == Caller::Role::kNone) {
    return absl::UnauthenticatedError(
        absl::StrCat("no credential given; this call needs ", needed));
  }
  return absl::PermissionDeniedError(
      absl::StrCat(RoleName(caller.role), " cannot make this call; it needs ", needed));
}

}  // namespace

absl::StatusOr<Caller> AccessPolicy::Identify(const grpc::ServerContextBase& context,
                                              absl::string_view needed) const {
  Caller caller;
  if (open()) {
    caller.role = Caller::Role::kAdmin;
    return caller;
  }
  if (std::optional<std::string> name = PeerCertificateName(context)) {
    if (std::optional<Caller> named = CertificateCaller(*name)) return *named;
  }
  std::optional<std::string> token = BearerToken(context);
  if (!token) return caller;
  if (!options_.admin_token.empty() && SameSecret(*token, options_.admin_token)) {
    caller.role = Caller::Role::kAdmin;
    return caller;
  }
  if (std::optional<Caller> signed_caller = signer_.Verify(*token, absl::Now()))
    return *signed_caller;
  return absl::UnauthenticatedError(absl::StrCat(
      "the token given is not a credential of this cluster; this call needs ", needed));
}

absl::Status AccessPolicy::RequireAdmin(const grpc::ServerContextBase& context) const {
  absl::StatusOr<Caller> caller = Identify(context, kAdminNeeded);
  if (!caller.ok()) return caller.status();
  if (caller->role == Caller::Role::kAdmin) return absl::OkStatus();
  return Denied(*caller, kAdminNeeded);
}

absl::StatusOr<std::string> AccessPolicy::RequireUser(
    const grpc::ServerContextBase& context) const {
  ASSIGN_OR_RETURN(Caller caller, Identify(context, kUserNeeded));
  if (caller.role == Caller::Role::kAdmin) return std::string(kAdminUser);
  if (caller.role == Caller::Role::kUser) return caller.id;
  return Denied(caller, kUserNeeded);
}

absl::Status AccessPolicy::RequireOwner(const std::string& user, const v1::Job& job,
                                        absl::string_view act) {
  if (user == kAdminUser || user == job.owner()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("user ", user, " may not ", act, " job ",
                                                  job.id(), ": it is owned by ", job.owner(),
                                                  ", and only its owner or the admin may"));
}

void AccessPolicy::RedactFor(const std::string& user, v1::Job* job) {
  if (user == kAdminUser || user == job->owner()) return;
  job->mutable_spec()->clear_env();
  job->mutable_spec()->clear_command();
  job->set_spec_redacted(true);
}

absl::Status AccessPolicy::RequireWorker(const grpc::ServerContextBase& context,
                                         Caller* caller) const {
  absl::StatusOr<Caller> found = Identify(context, kWorkerNeeded);
  if (!found.ok()) return found.status();
  *caller = *std::move(found);
  if (caller->role == Caller::Role::kAdmin || caller->role == Caller::Role::kWorker) {
    return absl::OkStatus();
  }
  return Denied(*caller, kWorkerNeeded);
}

absl::Status AccessPolicy::RequireWorkerId(const Caller& caller,
                                           const std::string& worker_id) const {
  if (caller.role == Caller::Role::kAdmin) return absl::OkStatus();
  if (caller.role == Caller::Role::kWorker && caller.id == worker_id) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      RoleName(caller.role), caller.id.empty() ? "" : absl::StrCat(" for \"", caller.id, "\""),
      " cannot register worker \"", worker_id, "\"; it needs that worker's credential"));
}

absl::Status AccessPolicy::RequireJob(const grpc::ServerContextBase& context,
                                      const std::string& job_id, int attempt) const {
  absl::StatusOr<Caller> caller = Identify(context, kJobNeeded);
  if (!caller.ok()) return caller.status();
  if (caller->role == Caller::Role::kAdmin) return absl::OkStatus();
  if (caller->role == Caller::Role::kJob) {
    if (caller->id == job_id && caller->attempt == attempt) return absl::OkStatus();
    return absl::PermissionDeniedError(
        absl::StrCat("the job credential of ", caller->id, " attempt ", caller->attempt,
                     " cannot use the rendezvous scope of ", job_id, " attempt ", attempt));
  }
  return Denied(*caller, kJobNeeded);
}

std::string AccessPolicy::CallerKey(const grpc::ServerContextBase& context) const {
  absl::StatusOr<Caller> caller = Identify(context, "");
  std::string who = "nobody";
  if (caller.ok() && caller->role != Caller::Role::kNone) {
    who = absl::StrCat(RoleName(caller->role), caller->id.empty() ? "" : " ", caller->id);
  }
  // "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000": the host, without the port.
  std::string peer = context.peer();
  peer = peer.substr(0, peer.rfind(':'));
  return absl::StrCat(who, "@", peer.substr(peer.find(':') + 1));
}

}  // namespace ringmaster
