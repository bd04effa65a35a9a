// Users on a shared cluster: each job is owned by the user whose credential
// submitted it. Every user reads every job's status, without the env and
// command of others'; only the owner or the admin cancels, deletes or reads
// the logs. Credentials come from the CLI's --cert, a user token in
// RINGMASTER_TOKEN, or the admin certificate `up` made.
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "tests/cluster_fixture.h"

namespace ringmaster {
namespace {

class OwnershipTest : public ClusterTest {
 protected:
  void SetUp() override {
    // A shared cluster: the users' queue and the default one.
    const std::string queues = testing::MakeTempDir("queues") + "/queues.yaml";
    std::ofstream(queues)
        << "queues:\n  - {name: default}\n  - {name: team, users: [alice, bob]}\n";
    up_args_ = {"--queues", queues};
    ClusterTest::SetUp();
    if (HasFatalFailure()) return;
    testing::CommandResult certs =
        Cli({"certs", "init", "--dir", state_dir_ + "/tls", "--user", "alice", "--user", "bob"});
    ASSERT_EQ(certs.exit_code, 0) << certs.err;
    testing::CommandResult token =
        testing::RunCommand({testing::Runfile("coordinator/ringmaster-coordinator"), "--state-dir",
                             state_dir_ + "/coordinator", "--issue-user-token", "bob"});
    ASSERT_EQ(token.exit_code, 0) << token.err;
    bob_token_ = std::string(absl::StripAsciiWhitespace(token.out));
  }

  // The CLI as `user`: alice by her certificate, bob by his token.
  testing::CommandResult As(const std::string& user, std::vector<std::string> args) {
    if (user == "alice") {
      args.insert(args.begin(), {"--cert", "alice"});
      return Cli(args);
    }
    std::map<std::string, std::string> saved = extra_env_;
    extra_env_["RINGMASTER_TOKEN"] = bob_token_;
    testing::CommandResult result = Cli(args);
    extra_env_ = saved;
    return result;
  }

  std::string bob_token_;
};

TEST_F(OwnershipTest, OnlyTheOwnerOrTheAdminCancelsDeletesOrReadsLogs) {
  testing::CommandResult submitted =
      As("alice", {"submit", WriteSpec("secret",
                                       "name: secret\nranks: 1\n"
                                       "queue: team\nenv: {API_KEY: hunter2}\n"
                                       "command: [sh, -c, 'echo started; sleep 300']\n")});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id(absl::StripAsciiWhitespace(submitted.out));
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::RUNNING; });
  EXPECT_EQ(client_->GetJob(id)->owner(), "alice");
  EXPECT_EQ(client_->GetJob(id)->spec().queue(), "team");

  // Bob sees the job and its owner, not its env or command.
  testing::CommandResult listed = As("bob", {"jobs", "-o", "json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("\"owner\": \"alice\""), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find("hunter2"), std::string::npos) << listed.out;
  EXPECT_EQ(listed.out.find("echo started"), std::string::npos) << listed.out;
  testing::CommandResult status = As("bob", {"status", id, "-o", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(status.out.find("hunter2"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("\"spec_redacted\": true"), std::string::npos) << status.out;
  testing::CommandResult table = As("bob", {"jobs"});
  EXPECT_NE(table.out.find("OWNER"), std::string::npos) << table.out;

  // Bob may not cancel, delete or read it; each refusal names the owner.
  for (const std::vector<std::string>& verb :
       {std::vector<std::string>{"cancel", id}, {"delete", id}, {"logs", id}}) {
    testing::CommandResult refused = As("bob", verb);
    EXPECT_EQ(refused.exit_code, 1) << verb[0] << ": " << refused.out;
    EXPECT_NE(refused.err.find(absl::StrCat("user bob may not")), std::string::npos)
        << verb[0] << ": " << refused.err;
    EXPECT_NE(refused.err.find(absl::StrCat("job ", id, ": it is owned by alice")),
              std::string::npos)
        << verb[0] << ": " << refused.err;
  }
  EXPECT_EQ(client_->GetJob(id)->state(), v1::RUNNING) << "bob's refused cancel stopped it";

  // Alice reads her job whole, and its logs.
  testing::CommandResult own = As("alice", {"status", id, "-o", "json"});
  EXPECT_NE(own.out.find("hunter2"), std::string::npos) << own.out;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return As("alice", {"logs", id}).out.find("started") != std::string::npos;
      },
      absl::Seconds(30)));

  // Bob's own job is his; the admin may cancel anyone's.
  testing::CommandResult his =
      As("bob", {"submit", WriteSpec("his", "name: his\nranks: 1\ncommand: [sleep, '300']\n")});
  ASSERT_EQ(his.exit_code, 0) << his.err;
  const std::string his_id(absl::StripAsciiWhitespace(his.out));
  EXPECT_EQ(client_->GetJob(his_id)->owner(), "bob");
  EXPECT_EQ(As("alice", {"cancel", his_id}).exit_code, 1);
  testing::CommandResult cancelled = As("bob", {"cancel", his_id});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  testing::CommandResult by_admin = Cli({"cancel", id});
  EXPECT_EQ(by_admin.exit_code, 0) << by_admin.err;
  WaitJob(id, [](const v1::Job& j) { return j.state() == v1::CANCELLED; });
  testing::CommandResult deleted = As("alice", {"delete", id});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
}

// Workers are the admin's: a user lists them but cannot cordon, uncordon or
// drain one.
TEST_F(OwnershipTest, OnlyTheAdminCordonsUncordonsOrDrains) {
  for (const char* user : {"alice", "bob"}) {
    for (std::vector<std::string> verb : {std::vector<std::string>{"cordon", "local-0"},
                                          {"uncordon", "local-0"},
                                          {"drain", "local-0"}}) {
      testing::CommandResult refused = As(user, verb);
      EXPECT_EQ(refused.exit_code, 1) << verb[0];
      EXPECT_NE(refused.err.find("a user credential cannot make this call; it needs the admin "
                                 "credential"),
                std::string::npos)
          << user << " " << verb[0] << ": " << refused.err;
    }
    EXPECT_EQ(As(user, {"workers"}).exit_code, 0);
  }
  auto workers = client_->ListWorkers();
  ASSERT_OK(workers);
  for (const v1::Worker& w : *workers) EXPECT_FALSE(w.health().has_cordon()) << w.id();
}

// A request id is its submitter's: another user's retry with the same id
// makes a job of its own instead of being handed the first one.
TEST_F(OwnershipTest, RequestIdsAreEachUsersOwn) {
  v1::JobSpec spec;
  spec.set_name("same");
  spec.set_ranks(1);
  spec.add_command("true");
  absl::StatusOr<std::string> key = LoadOrCreateKey(state_dir_ + "/coordinator/credential.key");
  ASSERT_OK(key);
  Client alice(address_, CredentialSigner(*key).User("alice"), CaOnly());
  Client bob(address_, bob_token_, CaOnly());
  absl::StatusOr<std::string> first = alice.Submit(spec, "retry-1");
  ASSERT_OK(first);
  absl::StatusOr<std::string> again = alice.Submit(spec, "retry-1");
  ASSERT_OK(again);
  EXPECT_EQ(*again, *first);
  absl::StatusOr<std::string> other = bob.Submit(spec, "retry-1");
  ASSERT_OK(other);
  EXPECT_NE(*other, *first);
  EXPECT_EQ(client_->GetJob(*other)->owner(), "bob");
}

// With a user's token or certificate the CLI never also shows the admin
// certificate `up` left in the TLS dir, which would make it the admin.
TEST_F(OwnershipTest, AnExplicitCredentialWinsOverTheAdminCertificate) {
  const std::string spec = WriteSpec("who", "name: who\nranks: 1\ncommand: [true]\n");
  testing::CommandResult by_cert = As("alice", {"submit", spec});
  ASSERT_EQ(by_cert.exit_code, 0) << by_cert.err;
  EXPECT_EQ(client_->GetJob(std::string(absl::StripAsciiWhitespace(by_cert.out)))->owner(),
            "alice");
  testing::CommandResult by_token = As("bob", {"submit", spec});
  ASSERT_EQ(by_token.exit_code, 0) << by_token.err;
  EXPECT_EQ(client_->GetJob(std::string(absl::StripAsciiWhitespace(by_token.out)))->owner(), "bob");
  testing::CommandResult by_admin = Cli({"submit", spec});
  ASSERT_EQ(by_admin.exit_code, 0) << by_admin.err;
  EXPECT_EQ(client_->GetJob(std::string(absl::StripAsciiWhitespace(by_admin.out)))->owner(),
            "admin");
  testing::CommandResult missing = Cli({"--cert", "carol", "jobs"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--cert carol: neither carol.crt nor user-carol.crt"),
            std::string::npos)
      << missing.err;
  testing::CommandResult bad_user =
      testing::RunCommand({testing::Runfile("coordinator/ringmaster-coordinator"), "--state-dir",
                           state_dir_ + "/coordinator", "--issue-user-token", "Not A Name"});
  EXPECT_EQ(bad_user.exit_code, 2);
  EXPECT_NE(bad_user.err.find("user name"), std::string::npos) << bad_user.err;
}

}  // namespace
}  // namespace ringmaster
