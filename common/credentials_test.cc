#include "common/credentials.h"
#include "testing/status_matchers.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace ringmaster {
namespace {

TEST(CredentialSignerTest, EachKindNamesItsHolder) {
  CredentialSigner signer("k1");
  std::optional<Caller> worker = signer.Verify(signer.Worker("gpu-7.example.com"));
  ASSERT_TRUE(worker.has_value());
  EXPECT_EQ(worker->role, Caller::Role::kWorker);
  EXPECT_EQ(worker->id, "gpu-7.example.com");

  std::optional<Caller> job = signer.Verify(signer.Job("mnist-3", 2));
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->role, Caller::Role::kJob);
  EXPECT_EQ(job->id, "mnist-3");
  EXPECT_EQ(job->attempt, 2);

  std::optional<Caller> agent = signer.Verify(signer.Agent("w1"));
  ASSERT_TRUE(agent.has_value());
  EXPECT_EQ(agent->role, Caller::Role::kAgent);
  EXPECT_EQ(agent->id, "w1");

  std::optional<Caller> user = signer.Verify(signer.User("alice"));
  ASSERT_TRUE(user.has_value());
  EXPECT_EQ(user->role, Caller::Role::kUser);
  EXPECT_EQ(user->id, "alice");
}

TEST(CredentialSignerTest, AUserTokenCannotBeTurnedIntoAnotherUsersOrAWorkers) {
  CredentialSigner signer("k1");
  std::string renamed = signer.User("alice");
  renamed.replace(renamed.find("alice"), 5, "bobby");
  EXPECT_FALSE(signer.Verify(renamed).has_value());
  std::string as_worker = signer.User("alice");
  as_worker[2] = 'w';  // rmu -> rmw
  EXPECT_FALSE(signer.Verify(as_worker).has_value());
}

TEST(ValidateUserNameTest, TakesLoginNamesAndRefusesTheRest) {
  EXPECT_OK(ValidateUserName("alice"));
  EXPECT_OK(ValidateUserName("_svc-ci.2"));
  EXPECT_OK(ValidateUserName(std::string(32, 'a')));
  for (const char* bad : {"", "Alice", "1bob", "a b", "a/b", "a:b", "ali\n"}) {
    absl::Status s = ValidateUserName(bad);
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    EXPECT_NE(s.message().find("user name"), absl::string_view::npos) << s;
  }
  EXPECT_THAT(ValidateUserName(std::string(33, 'a')), IsError());
  absl::Status admin = ValidateUserName("admin");
  EXPECT_NE(admin.message().find("admin credential"), absl::string_view::npos) << admin;
}

TEST(CredentialSignerTest, RefusesWhatItDidNotSign) {
  CredentialSigner signer("k1");
  const std::string job = signer.Job("mnist-3", 2);
  EXPECT_FALSE(CredentialSigner("k2").Verify(job).has_value());
  // Another attempt, job or kind under the same MAC.
  std::string other = job;
  other.replace(other.find(".2."), 3, ".3.");
  EXPECT_FALSE(signer.Verify(other).has_value());
  std::string renamed = job;
  renamed.replace(renamed.find("mnist-3"), 7, "mnist-4");
  EXPECT_FALSE(signer.Verify(renamed).has_value());
  std::string as_worker = signer.Worker("w1");
  as_worker[2] = 'a';  // rmw -> rma
  EXPECT_FALSE(signer.Verify(as_worker).has_value());
  EXPECT_FALSE(signer.Verify("").has_value());
  EXPECT_FALSE(signer.Verify("no-dot").has_value());
  // A job's replica credential, which its workers show each other, opens
  // nothing at the coordinator; it differs per job.
  EXPECT_FALSE(signer.Verify(signer.Replica("mnist-3")).has_value());
  EXPECT_NE(signer.Replica("mnist-3"), signer.Replica("mnist-4"));
  EXPECT_FALSE(signer.Verify(job.substr(0, job.size() - 1)).has_value());
  // An empty key signs nothing a caller could use.
  EXPECT_FALSE(CredentialSigner("").Verify(CredentialSigner("").Worker("w1")).has_value());
}

TEST(SameSecretTest, ComparesWholeStringsIncludingLength) {
  EXPECT_TRUE(SameSecret("abc", "abc"));
  EXPECT_FALSE(SameSecret("abc", "abd"));
  EXPECT_FALSE(SameSecret("abc", "abcd"));
  EXPECT_FALSE(SameSecret("abcd", "abc"));
  EXPECT_FALSE(SameSecret("", "a"));
  EXPECT_TRUE(SameSecret("", ""));
  EXPECT_FALSE(SameSecret(std::string("a\0b", 3), "a"));
}

TEST(LoadOrCreateKeyTest, MakesAPrivateKeyOnceAndReadsItBack) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/made.key";
  absl::StatusOr<std::string> made = LoadOrCreateKey(path);
  ASSERT_OK(made) << made.status();
  EXPECT_EQ(made->size(), 32u);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  absl::StatusOr<std::string> again = LoadOrCreateKey(path);
  ASSERT_OK(again) << again.status();
  EXPECT_EQ(*again, *made);
}

TEST(LoadOrCreateKeyTest, RefusesAKeyOthersCanRead) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/open.key";
  ASSERT_OK(LoadOrCreateKey(path));
  chmod(path.c_str(), 0644);
  absl::StatusOr<std::string> key = LoadOrCreateKey(path);
  EXPECT_THAT(key.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_NE(key.status().message().find("chmod 600"), absl::string_view::npos) << key.status();
}

}  // namespace
}  // namespace ringmaster
