#include "worker/agent_access.h"
#include "testing/status_matchers.h"

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

v1::RankRef Ref(const std::string& job, int attempt) {
  v1::RankRef ref;
  ref.set_job_id(job);
  ref.set_attempt(attempt);
  return ref;
}

class AgentAccessTest : public ::testing::Test {
 protected:
  AgentAccessTest()
      : access_(true, [](const std::string& token) -> std::optional<v1::RankRef> {
          if (token == "job-a-token") return Ref("a", 1);
          return std::nullopt;
        }) {
    access_.SetAgentCredential("agent-token");
  }

  absl::Status Coordinator(const std::string& token) {
    return access_.RequireCoordinatorToken(Token(token));
  }
  absl::Status Rank(const std::string& token, const v1::RankRef& ref) {
    return access_.RequireRankToken(Token(token), ref);
  }
  static std::optional<std::string> Token(const std::string& token) {
    return token.empty() ? std::nullopt : std::optional<std::string>(token);
  }

  AgentAccess access_;
};

TEST_F(AgentAccessTest, ReadLogTakesOnlyTheAgentCredential) {
  EXPECT_OK(Coordinator("agent-token"));
  absl::Status none = Coordinator("");
  EXPECT_THAT(none, StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_NE(none.message().find("agent credential"), absl::string_view::npos) << none;
  EXPECT_THAT(Coordinator("guess"), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(Coordinator("job-a-token"), StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST_F(AgentAccessTest, ProgressTakesOnlyTheRunningAttemptsCredential) {
  EXPECT_OK(Rank("job-a-token", Ref("a", 1)));
  EXPECT_THAT(Rank("job-a-token", Ref("b", 1)), StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Rank("job-a-token", Ref("a", 2)), StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Rank("agent-token", Ref("a", 1)), StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Rank("", Ref("a", 1)), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(Rank("job-b-token", Ref("a", 1)), StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST(AgentAccessPeerTest, PeersShowTheJobsReplicaCredentialAndAWorkersCertificate) {
  AgentAccess access(
      true, [](const std::string&) { return std::nullopt; }, /*tls=*/true);
  const std::optional<std::string> worker = "ringmaster:worker:w2";
  EXPECT_THAT(
      access.RequirePeerOf(std::string("replica-a"), worker, "a"),
      StatusIs(absl::StatusCode::kFailedPrecondition, "no rank of job a has run on this worker"));
  access.AllowPeers("a", 1, "replica-a");
  access.AllowPeers("b", 4, "replica-b");
  EXPECT_THAT(access.RequirePeerOf(std::string("replica-a"), worker, "a"), IsOkAndHolds(1));
  access.AllowPeers("a", 2, "replica-a");
  EXPECT_THAT(access.RequirePeerOf(std::string("replica-a"), worker, "a"), IsOkAndHolds(2));
  // Another job's credential, none, or a rank's or user's certificate.
  EXPECT_THAT(access.RequirePeerOf(std::string("replica-b"), worker, "a"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       testing::HasSubstr("is not job a's replica credential")));
  EXPECT_THAT(access.RequirePeerOf(std::nullopt, worker, "a"),
              StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(access.RequirePeerOf(std::string("replica-a"), std::nullopt, "a"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "only a worker's certificate may make this call (the caller's: none)"));
  EXPECT_THAT(
      access.RequirePeerOf(std::string("replica-a"), std::string("ringmaster:user:eve"), "a"),
      StatusIs(absl::StatusCode::kPermissionDenied));
  access.ForgetPeers("a");
  EXPECT_THAT(access.RequirePeerOf(std::string("replica-a"), worker, "a"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(AgentAccessPeerTest, WithTokensOnlyTheCredentialIsChecked) {
  AgentAccess access(true, [](const std::string&) { return std::nullopt; });
  access.AllowPeers("a", 1, "replica-a");
  EXPECT_THAT(access.RequirePeerOf(std::string("replica-a"), std::nullopt, "a"), IsOkAndHolds(1));
  EXPECT_THAT(access.RequirePeerOf(std::string("job-a-token"), std::nullopt, "a"),
              StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST(AgentAccessOpenTest, AWorkerWithoutCredentialsLetsEveryoneThrough) {
  AgentAccess open(false, [](const std::string&) { return std::nullopt; });
  EXPECT_OK(open.RequireCoordinatorToken(std::nullopt));
  EXPECT_OK(open.RequireRankToken(std::nullopt, Ref("a", 1)));
}

TEST(AgentAccessUnregisteredTest, NoAgentCredentialBeforeRegistration) {
  AgentAccess access(true, [](const std::string&) { return std::nullopt; });
  EXPECT_THAT(access.RequireCoordinatorToken(std::string("")),
              StatusIs(absl::StatusCode::kUnauthenticated));
}

}  // namespace
}  // namespace ringmaster
