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
  std::optional<Caller> worker = signer.Verify(signer.Worker("gpu-7.example.com"), absl::Now());
  ASSERT_TRUE(worker.has_value());
  EXPECT_EQ(worker->role, Caller::Role::kWorker);
  EXPECT_EQ(worker->id, "gpu-7.example.com");

  std::optional<Caller> job = signer.Verify(signer.Job("mnist-3", 2), absl::Now());
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->role, Caller::Role::kJob);
  EXPECT_EQ(job->id, "mnist-3");
  EXPECT_EQ(job->attempt, 2);

  std::optional<Caller> agent = signer.Verify(signer.Agent("w1"), absl::Now());
  ASSERT_TRUE(agent.has_value());
  EXPECT_EQ(agent->role, Caller::Role::kAgent);
  EXPECT_EQ(agent->id, "w1");

  std::optional<Caller> user = signer.Verify(signer.User("alice"), absl::Now());
  ASSERT_TRUE(user.has_value());
  EXPECT_EQ(user->role, Caller::Role::kUser);
  EXPECT_EQ(user->id, "alice");
}

TEST(CredentialSignerTest, AUserTokenCannotBeTurnedIntoAnotherUsersOrAWorkers) {
  CredentialSigner signer("k1");
  std::string renamed = signer.User("alice");
  renamed.replace(renamed.find("alice"), 5, "bobby");
  EXPECT_FALSE(signer.Verify(renamed, absl::Now()).has_value());
  std::string as_worker = signer.User("alice");
  as_worker[2] = 'w';  // rmu -> rmw
  EXPECT_FALSE(signer.Verify(as_worker, absl::Now()).has_value());
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
  EXPECT_FALSE(CredentialSigner("k2").Verify(job, absl::Now()).has_value());
  // Another attempt, job or kind under the same MAC.
  std::string other = job;
  other.replace(other.find(".2."), 3, ".3.");
  EXPECT_FALSE(signer.Verify(other, absl::Now()).has_value());
  std::string renamed = job;
  renamed.replace(renamed.find("mnist-3"), 7, "mnist-4");
  EXPECT_FALSE(signer.Verify(renamed, absl::Now()).has_value());
  std::string as_worker = signer.Worker("w1");
  as_worker[2] = 'a';  // rmw -> rma
  EXPECT_FALSE(signer.Verify(as_worker, absl::Now()).has_value());
  EXPECT_FALSE(signer.Verify("", absl::Now()).has_value());
  EXPECT_FALSE(signer.Verify("no-dot", absl::Now()).has_value());
  // A job's replica credential, which its workers show each other, opens
  // nothing at the coordinator; it differs per job.
  EXPECT_FALSE(signer.Verify(signer.Replica("mnist-3"), absl::Now()).has_value());
  EXPECT_NE(signer.Replica("mnist-3"), signer.Replica("mnist-4"));
  EXPECT_FALSE(signer.Verify(job.substr(0, job.size() - 1), absl::Now()).has_value());
  // An empty key signs nothing a caller could use.
  EXPECT_FALSE(
      CredentialSigner("").Verify(CredentialSigner("").Worker("w1"), absl::Now()).has_value());
}

// A console session is its caller's credential until it expires, and its
// expiry and caller are under the MAC; its CSRF token is its own.
TEST(CredentialSignerTest, ASessionIsItsCallersCredentialUntilItExpires) {
  CredentialSigner signer("k1");
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  const std::string alice = signer.Session("alice", now + absl::Hours(12));
  std::optional<Caller> caller = signer.Verify(alice, now);
  ASSERT_TRUE(caller.has_value());
  EXPECT_EQ(caller->role, Caller::Role::kUser);
  EXPECT_EQ(caller->id, "alice");
  EXPECT_TRUE(signer.Verify(alice, now + absl::Hours(12) - absl::Seconds(1)).has_value());
  EXPECT_FALSE(signer.Verify(alice, now + absl::Hours(12)).has_value()) << "expired";
  std::optional<Caller> admin = signer.Verify(signer.Session("admin", now + absl::Hours(1)), now);
  ASSERT_TRUE(admin.has_value());
  EXPECT_EQ(admin->role, Caller::Role::kAdmin);

  std::string later = alice;
  later.replace(4, 1, "9");  // the expiry's first digit
  EXPECT_FALSE(signer.Verify(later, now).has_value());
  std::string admin_now = alice;
  admin_now.replace(admin_now.find("alice"), 5, "admin");
  EXPECT_FALSE(signer.Verify(admin_now, now).has_value());

  EXPECT_EQ(signer.Csrf(alice), signer.Csrf(alice));
  EXPECT_NE(signer.Csrf(alice), signer.Csrf(signer.Session("alice", now + absl::Hours(11))));
  EXPECT_NE(signer.Csrf(alice), CredentialSigner("k2").Csrf(alice));
  EXPECT_EQ(alice.find(signer.Csrf(alice)), std::string::npos) << "not derivable from the cookie";
}

// A sign-in code says whose and which it is while it lasts, and is not a
// credential itself.
TEST(CredentialSignerTest, ALoginCodeIsNotACredential) {
  CredentialSigner signer("k1");
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  const std::string code = signer.Login("bob.smith", "00ff", now + absl::Minutes(2));
  std::optional<CredentialSigner::LoginCode> login = signer.VerifyLogin(code, now);
  ASSERT_TRUE(login.has_value());
  EXPECT_EQ(login->who, "bob.smith");
  EXPECT_EQ(login->nonce, "00ff");
  EXPECT_EQ(login->expires, now + absl::Minutes(2));
  EXPECT_FALSE(signer.VerifyLogin(code, now + absl::Minutes(2)).has_value()) << "expired";
  EXPECT_FALSE(CredentialSigner("k2").VerifyLogin(code, now).has_value());
  EXPECT_FALSE(signer.Verify(code, now).has_value());
  EXPECT_FALSE(signer.VerifyLogin(signer.Session("bob", now + absl::Hours(1)), now).has_value());
  EXPECT_FALSE(signer.VerifyLogin(signer.User("bob"), now).has_value());
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
