#include "worker/agent_access.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/credentials.h"

namespace ringmaster {
namespace {

constexpr absl::string_view kCoordinatorNeeded =
    "the coordinator's agent credential for this worker";
constexpr absl::string_view kPeerNeeded =
    "the job's replica credential, which the coordinator gives the job's workers";
constexpr absl::string_view kRankNeeded =
    "the job credential (RINGMASTER_JOB_TOKEN) of a rank running on this worker";

}  // namespace

void AgentAccess::SetAgentCredential(std::string credential) {
  MutexLock lock(&mu_);
  agent_credential_ = std::move(credential);
}

bool AgentAccess::IsAgentCredential(const std::string& token) const {
  MutexLock lock(&mu_);
  return !agent_credential_.empty() && SameSecret(token, agent_credential_);
}

absl::Status AgentAccess::RequireCoordinator(const grpc::ServerContextBase& context) const {
  return RequireCoordinatorToken(BearerToken(context));
}

absl::Status AgentAccess::RequireRank(const grpc::ServerContextBase& context,
                                      const v1::RankRef& rank) const {
  return RequireRankToken(BearerToken(context), rank);
}

absl::Status AgentAccess::RequireCoordinatorToken(const std::optional<std::string>& token) const {
  if (!secure_) return absl::OkStatus();
  if (!token) {
    return absl::UnauthenticatedError(
        absl::StrCat("no credential given; this call needs ", kCoordinatorNeeded));
  }
  if (IsAgentCredential(*token)) return absl::OkStatus();
  if (rank_of_token_(*token)) {
    return absl::PermissionDeniedError(
        absl::StrCat("a job credential cannot make this call; it needs ", kCoordinatorNeeded));
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "the token given is not a credential of this worker; this call needs ", kCoordinatorNeeded));
}

absl::Status AgentAccess::RequireRankToken(const std::optional<std::string>& token,
                                           const v1::RankRef& rank) const {
  if (!secure_) return absl::OkStatus();
  if (!token) {
    return absl::UnauthenticatedError(
        absl::StrCat("no credential given; this call needs ", kRankNeeded));
  }
  if (std::optional<v1::RankRef> holder = rank_of_token_(*token)) {
    if (holder->job_id() == rank.job_id() && holder->attempt() == rank.attempt()) {
      return absl::OkStatus();
    }
    return absl::PermissionDeniedError(
        absl::StrCat("the job credential of ", holder->job_id(), " attempt ", holder->attempt(),
                     " cannot report for ", rank.job_id(), " attempt ", rank.attempt()));
  }
  if (IsAgentCredential(*token)) {
    return absl::PermissionDeniedError(
        absl::StrCat("the agent credential cannot make this call; it needs ", kRankNeeded));
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "the token given is not a credential of a rank running here; this call needs ", kRankNeeded));
}

void AgentAccess::AllowPeers(const std::string& job_id, int attempt, std::string credential) {
  MutexLock lock(&mu_);
  Peers& peers = peers_[job_id];
  peers.attempt = std::max(peers.attempt, attempt);
  peers.credential = std::move(credential);
}

void AgentAccess::ForgetPeers(const std::string& job_id) {
  MutexLock lock(&mu_);
  peers_.erase(job_id);
}

absl::StatusOr<int> AgentAccess::RequirePeer(const grpc::ServerContextBase& context,
                                             const std::string& job_id) const {
  return RequirePeerOf(BearerToken(context), PeerCertificateName(context), job_id);
}

absl::StatusOr<int> AgentAccess::RequirePeerOf(const std::optional<std::string>& token,
                                               const std::optional<std::string>& certificate,
                                               const std::string& job_id) const {
  Peers peers;
  {
    MutexLock lock(&mu_);
    auto it = peers_.find(job_id);
    if (it == peers_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no rank of job ", job_id, " has run on this worker"));
    }
    peers = it->second;
  }
  if (!secure_) return peers.attempt;
  if (tls_ && (!certificate || !absl::StartsWith(*certificate, kWorkerCertificatePrefix))) {
    return absl::PermissionDeniedError(
        absl::StrCat("only a worker's certificate may make this call (the caller's: ",
                     certificate.value_or("none"), ")"));
  }
  if (!token) {
    return absl::UnauthenticatedError(
        absl::StrCat("no credential given; this call needs ", kPeerNeeded));
  }
  if (peers.credential.empty() || !SameSecret(*token, peers.credential)) {
    return absl::PermissionDeniedError(absl::StrCat("the token given is not job ", job_id,
                                                    "'s replica credential; this call needs ",
                                                    kPeerNeeded));
  }
  return peers.attempt;
}

}  // namespace ringmaster
